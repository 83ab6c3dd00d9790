"""The OpenCL backend: pyopencl programs, pooled pyopencl arrays, ``Executable`` launches.

The ``Backend`` (runtime/backend.py) the runtime dispatches to; registered when this package
is imported, as the backend of every queue that names none (pyopencl's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyopencl as cl

from fusejit.errors import UnsupportedDTypeError
from fusejit.targets.opencl import fastdiv as fastdiv
from fusejit.targets.opencl import half2 as half2
from fusejit.targets.base import Target
from fusejit.targets.opencl.target import OpenCLTarget
from fusejit.passes.partition import DeviceLimits
from fusejit.runtime.backend import Backend, DeviceInfo, register
from fusejit.runtime.opencl import gemm_bench
from fusejit.runtime.opencl.mma_probe import mma_unavailable, with_wgmma
from fusejit.runtime.opencl.build import build_cached, build_options
from fusejit.runtime.opencl.devices import (
    OpenCLDeviceInfo,
    default_queue,
    device_info,
    keep_probe_queue,
)
from fusejit.runtime.opencl.executable import Executable


class OpenCLBackend(Backend):
    name = "opencl"

    def default_queue(self) -> cl.CommandQueue:
        return default_queue()

    def device_info(self, queue: cl.CommandQueue) -> OpenCLDeviceInfo:
        info = device_info(queue.device)  # (this module's name: tests fake a GPU's limits there)
        keep_probe_queue(info.key, queue)
        return info

    def target(self, info: OpenCLDeviceInfo) -> Target:
        spelling = half2.spelling(info.half2)  # float16 lanes packed (targets/opencl/half2.py)
        target = half2.Half2OpenCLTarget(native=spelling == "native") if spelling is not None \
            else OpenCLTarget()
        # (asked, and probed, only by a kernel with a float32 / or sqrt)
        target.fast_div = lambda: fastdiv.spelling(
            lambda: info.fast_div, info.correctly_rounded_div_sqrt and info.has_fp64)
        target.cpu_math = info.is_cpu and info.has_fp64
        target.wide_mul = info.is_cpu and info.key.startswith("Portable Computing Language")
        if info.is_cpu and info.simd_floats >= 16:  # (AVX-512: 64-byte vectors are native)
            target.wide_lane_bytes = 64
        return target

    def products(self, queue: cl.CommandQueue, info: DeviceInfo, precision: str, plan: Any,
                 autotune: bool | None) -> tuple[str | None, DeviceLimits, Any]:
        mma = mma_unavailable(queue, precision, plan)
        limits = info.limits if mma is not None else with_wgmma(queue, info.limits)
        return mma, limits, gemm_bench.tuning(queue, info, autotune)

    def executable(self, lowered: Any, outputs: Sequence[Any], treedef: Any,
                   constants: dict[int, Any], queue: cl.CommandQueue, host_mode: bool,
                   autotune: bool, name: str) -> Executable:
        info = lowered.device
        if lowered.module.uses_fp64 and not info.has_fp64:
            raise UnsupportedDTypeError(
                f"this function computes in float64 (or complex128), which the device "
                f"({info.key}) does not support (no cl_khr_fp64); use float32 (complex64) "
                "inputs or another device")
        # through the in-process memo and the disk cache (runtime/cache.py)
        program, how = build_cached(queue.context, lowered.module.source, build_options(info),
                                    name)
        temps = [(n.shape, n.dtype) for n in lowered.plan.temps]
        index_dtype = np.dtype(np.int64 if lowered.module.wide else np.int32)
        exe = Executable(lowered.graph, lowered.module, program, info, outputs, temps,
                         host_mode, index_dtype, treedef, constants, autotune=autotune)
        exe.built_how = how  # "memory" | "disk" | "compiled": cache_info's counters
        return exe


OPENCL = OpenCLBackend()
register(OPENCL, unnamed_queues=True)
