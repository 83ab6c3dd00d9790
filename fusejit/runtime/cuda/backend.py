"""The CUDA backend: CUDA C++ kernels (targets/cuda/target.py) compiled by NVRTC and launched
through NVIDIA's cuda-core on the caller's stream.

Registered when this package is imported, whether or not the ``fusejit[cuda]`` extra or a
driver is there: the packages are imported only when a device is opened or a module built, and
their absence is a DeviceUnavailableError that names the extra (OpenCL and Vulkan never notice).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from fusejit.errors import ContextMismatchError, UnsupportedOperationError
from fusejit.passes.partition import DeviceLimits
from fusejit.runtime.backend import Backend, DeviceInfo, register, register_adopter
from fusejit.targets.base import Target
from fusejit.targets.cuda.target import CUDATarget


class CUDABackend(Backend):
    name = "cuda"

    def default_queue(self) -> Any:
        from fusejit.runtime.cuda.device import default_device

        return default_device()

    def device_info(self, queue: Any) -> DeviceInfo:
        return queue.info

    def target(self, info: DeviceInfo) -> Target:
        return CUDATarget(info.arch)  # type: ignore[attr-defined]  # (a CUDAInfo)

    def products(self, queue: Any, info: DeviceInfo, precision: str, plan: Any,
                 autotune: bool | None) -> tuple[str | None, DeviceLimits, Any]:
        """Tensor cores from sm_80 (mma.sync), wgmma on sm_90a, by the architecture alone (the
        kernels compile for it or the build fails: nothing to probe); the heuristic tiles (the
        GEMM tuner times on OpenCL only, so far)."""
        if precision == "highest" or not any(g.kind == "gemm" for g in plan.groups):
            return "matmul_precision='highest'", info.limits, None
        if os.environ.get("FUSEJIT_CUDA_MMA", "0") != "1":
            # the first GPU run (an H100) gave wrong tensor-core products: the wgmma
            # statements were left behind OpenCL's sm_90a comment mark (fixed in
            # CUDATarget.finish since, not yet run on a GPU); until tests/runtime/
            # test_cuda_calls.py's products pass there, products run the float32 kernels
            return ("the tensor-core kernels await validation on the CUDA target "
                    "(FUSEJIT_CUDA_MMA=1 opts in)"), info.limits, None
        major = int(queue.arch[3:].rstrip("af")) // 10
        if major < 8:
            return f"{queue.arch} has no tf32/f16 mma.sync (sm_80 or newer)", info.limits, None
        wgmma = queue.arch in ("sm_90a",) and os.environ.get("FUSEJIT_WGMMA", "1") != "0"
        return None, replace(info.limits, wgmma=wgmma), None

    def executable(self, lowered: Any, outputs: Sequence[Any], treedef: Any,
                   constants: dict[int, Any], queue: Any, host_mode: bool, autotune: bool,
                   name: str) -> Any:
        from fusejit.runtime.cuda.executable import CUDAExecutable

        if any(g.kind == "svd" for g in lowered.plan.groups):
            raise UnsupportedOperationError(
                "singular values (np.linalg.svd, matrix norms of ord 2, -2, 'nuc') run on "
                "OpenCL only for now; call this function with pyopencl arrays or "
                "fusejit.set_default_device('opencl')")
        return CUDAExecutable(lowered, outputs, treedef, constants, queue, host_mode, name)


def _adopt(value: Any, what: str) -> Any:
    """A torch/CuPy/JAX/Numba array on a CUDA device as a fusejit CUDA Array (no copy), or
    None for anything else."""
    from fusejit.runtime.cuda.array import adopt, foreign_cpu_torch, is_foreign_cuda
    from fusejit.runtime.cuda.launch import register_type

    if foreign_cpu_torch(value):
        raise ContextMismatchError(
            f"{what} is a torch tensor on the CPU; fused functions take torch tensors on a "
            "CUDA device (x.cuda()), or NumPy arrays (x.numpy()), which run on the default "
            "device")
    if not is_foreign_cuda(value):
        return None
    arr = adopt(value, what)
    if arr.library in ("torch", "cupy"):  # (their calls get a fast path: launch.py)
        register_type(value, arr.library)
    return arr


CUDA = CUDABackend()
register(CUDA)  # (its devices name it: CUDADevice.fusejit_backend)
register_adopter(_adopt)
