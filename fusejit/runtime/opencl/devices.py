"""Device and queue selection, and what the compiler needs to know about a device."""

from __future__ import annotations

import logging
import os
import threading
import warnings
from dataclasses import dataclass
from functools import cache

import pyopencl as cl

from fusejit.errors import DeviceUnavailableError
from fusejit.passes.partition import DeviceLimits
from fusejit.runtime.backend import DeviceInfo, device_opened
from fusejit.runtime import pocl_cache
from fusejit.runtime.opencl.build import setup_hint
from fusejit.runtime.opencl.identity import device_identity
from fusejit.runtime.opencl.fastdiv_probe import unavailable as fastdiv_unavailable
from fusejit.runtime.opencl.half2_probe import unavailable as half2_unavailable

pocl_cache.place()  # before PoCL initialises: a kernel cache of this process's own

_lock = threading.Lock()
_log = logging.getLogger("fusejit")
_default_queue: cl.CommandQueue | None = None


def _forget_after_fork() -> None:
    """A forked child cannot use its parent's queue (runtime/backend.py, FORKED): it is
    dropped, and the lock, which a parent's thread may have held, made anew."""
    global _default_queue, _lock
    _default_queue, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


_PROBE = "__kernel void fj_probe(__global float *a) { a[get_global_id(0)] += 1.0f; }"


@cache
def build_failure(device: cl.Device) -> str | None:
    """Why ``device`` cannot build a one-line kernel (the log's first line), or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cl.Program(cl.Context(devices=[device]), _PROBE).build()
    except cl.Error as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if "error" in ln.lower()]
        return (lines[-1] if lines else str(exc).splitlines()[0])[:200]
    return None


def usable(devices: list[cl.Device]) -> list[cl.Device]:
    """``devices`` less the CPU devices whose compiler fails on a one-line kernel (logged at
    INFO on the "fusejit" logger), when there is a choice: two PoCL platforms, say, the
    wheel's and the system's, of which only one knows this processor. A single device is not
    probed (a process's first call should not pay for a build); GPUs are never probed here (a
    context made and released beside a working one crashed a GPU driver, rarely)."""
    if len(devices) < 2:
        return devices
    why = {d: build_failure(d) if d.type & cl.device_type.CPU else None for d in devices}
    for d, reason in why.items():
        if reason is not None:
            _log.info("skipping OpenCL device %r (%s): it cannot build a kernel: %s",
                      d.name.strip(), d.platform.version.strip(), reason)
    keep = [d for d in devices if why[d] is None]
    if not keep:
        reasons = "; ".join(f"{d.name.strip()}: {r}" for d, r in why.items())
        hint = setup_hint(reasons)
        raise DeviceUnavailableError(f"no OpenCL device can build a kernel here: {reasons}" +
                                     (f". {hint}" if hint else ""))
    return keep


def _pick_device() -> cl.Device:
    platforms = cl.get_platforms()
    devices = [d for p in platforms for d in p.get_devices()]
    if not devices:
        raise DeviceUnavailableError("no OpenCL device found; `pip install "
                                     "pocl-binary-distribution` provides a CPU device")
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    if gpus:
        return gpus[0]
    pocl = [d for d in devices if "Portable Computing Language" in d.platform.name]
    return usable(pocl or devices)[0]


def default_queue() -> cl.CommandQueue:
    """The queue fused functions use for NumPy inputs.

    Honours ``PYOPENCL_CTX`` (as ``pyopencl.create_some_context`` does); otherwise the first GPU
    of any platform; otherwise the CPU device of the ``pocl-binary-distribution`` wheel.
    """
    global _default_queue
    if _default_queue is None:
        device_opened()  # (in a forked child: raises, see _forget_after_fork)
    with _lock:
        if _default_queue is None:
            if os.environ.get("PYOPENCL_CTX"):
                ctx = cl.create_some_context(interactive=False)
            else:
                ctx = cl.Context(devices=[_pick_device()])
            _default_queue = cl.CommandQueue(ctx)
        return _default_queue


def use_device(device: cl.Device) -> cl.CommandQueue:
    """Make ``device`` this process's default (``fusejit.dask.DevicePlugin`` pins one per dask
    worker); later calls with NumPy inputs compile for it and run on it."""
    global _default_queue
    device_opened()
    with _lock:
        _default_queue = cl.CommandQueue(cl.Context(devices=[device]))
        return _default_queue


@dataclass(frozen=True)
class OpenCLDeviceInfo(DeviceInfo):
    """An OpenCL device's facts, with the features only a probe kernel can tell (both probed
    on first use, on the queue a call used there)."""

    @property
    def half2(self) -> bool:
        """Native packed float16 arithmetic (runtime/opencl/half2_probe.py). Probed on first
        use, when a module is lowered, not when the DeviceInfo is made: the probe builds a
        kernel, and a process's first call (often a cached program) should not pay for it."""
        if not self.limits.is_gpu:
            return False
        queue = self._probe_queue()
        return queue is not None and half2_unavailable(queue) is None

    @property
    def fast_div(self) -> bool:
        """float32 division and sqrt speculated (runtime/opencl/fastdiv_probe.py), probed on
        first use like ``half2``."""
        if not self.limits.is_gpu or not self.correctly_rounded_div_sqrt:
            return False
        queue = self._probe_queue()
        return queue is not None and fastdiv_unavailable(queue) is None

    def _probe_queue(self) -> cl.CommandQueue | None:
        queue = _queues.get(self.key)
        if queue is None:  # no call yet: the default queue, where it is this device
            default = default_queue()
            queue = default if device_info(default.device).key == self.key else None
        return queue


# DeviceInfo.key -> the first queue a call used there: where the lazy probes run (on the
# caller's own context: an H200 crashed, rarely, when the probe made and released a context of
# its own while other threads worked on theirs)
_queues: dict[str, cl.CommandQueue] = {}


def keep_probe_queue(key: str, queue: cl.CommandQueue) -> None:
    """Keep the first queue a call used on the device ``key`` for the device's lazy probes."""
    _queues.setdefault(key, queue)


def _host_memory(device: cl.Device) -> bool:
    """A CPU device whose buffers are host memory (CL_DEVICE_HOST_UNIFIED_MEMORY, deprecated
    in OpenCL 2.0 but still answered by PoCL): maps are in place, the host may compute there."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return bool(device.type & cl.device_type.CPU) and bool(device.host_unified_memory)
    except cl.Error:
        return False


@cache
def device_info(device: cl.Device) -> OpenCLDeviceInfo:
    device_opened()  # (a caller's own context: its driver is running in this process too)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fp64 = bool(device.double_fp_config) if "cl_khr_fp64" in device.extensions or \
            device.double_fp_config else False
        single = device.single_fp_config
    is_gpu = bool(device.type & cl.device_type.GPU)
    limits = DeviceLimits(
        max_work_group=int(device.max_work_group_size),
        local_mem=int(device.local_mem_size),
        compute_units=int(device.max_compute_units),
        is_gpu=is_gpu,
        max_arg_bytes=int(device.max_parameter_size),
        host_blas=not is_gpu and _host_memory(device),
    )
    key, ident = device_identity(device)
    return OpenCLDeviceInfo(key, limits, fp64,
                            bool(single & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT),
                            bool(device.type & cl.device_type.CPU),
                            int(device.max_mem_alloc_size), int(device.global_mem_size), ident,
                            int(device.native_vector_width_float))
