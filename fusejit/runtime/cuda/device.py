"""CUDA devices: the cuda-core ``Device`` of one GPU (its streams, its stream-ordered memory
pool, its architecture and limits), or, on a machine without one, an abstract device that only
lowers (``ShapeDtype(..., device="cuda")``).

A ``CUDADevice`` is both the queue and the context of a call, as Vulkan's device is: calls
whose arrays live on GPU 1 run on GPU 1's device, and one call's arrays must share it.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from fusejit.errors import DeviceUnavailableError
from fusejit.passes.partition import DeviceLimits
from fusejit.runtime.backend import DeviceInfo, backend_named
from fusejit.runtime.cuda.build import (
    DEFAULT_ARCH,
    INSTALL_HINT,
    arch_from_env,
    check_supported,
    loads_on,
    nvrtc_version,
)


def core() -> Any:
    """The cuda.core module with Device, launch... (cuda-core moved them out of
    ``cuda.core.experimental`` in later versions); DeviceUnavailableError without it."""
    try:
        import cuda.core as mod

        if hasattr(mod, "Device"):
            return mod
        import cuda.core.experimental as mod

        return mod
    except ImportError as exc:
        raise DeviceUnavailableError(
            f"the CUDA device needs NVIDIA's Python packages ({exc}); {INSTALL_HINT}") from None


def driver() -> Any:
    try:
        from cuda.bindings import driver as mod
    except ImportError as exc:
        raise DeviceUnavailableError(
            f"the CUDA device needs NVIDIA's Python packages ({exc}); {INSTALL_HINT}") from None
    return mod


def check(result: Any, what: str) -> Any:
    """The value of a cuda.bindings call ``(err, value...)``; raises on an error code."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err):
        raise RuntimeError(f"{what} failed: {err!r}")
    return rest[0] if len(rest) == 1 else tuple(rest)


@dataclasses.dataclass(frozen=True)
class CUDAInfo(DeviceInfo):
    """A CUDA device's facts, with the architecture its modules are compiled for (the target
    refuses instructions it lacks at lowering: targets/cuda/target.py)."""

    arch: str = DEFAULT_ARCH


def _limits(sms: int, max_threads: int, shared: int) -> DeviceLimits:
    return DeviceLimits(max_work_group=min(max_threads, 1024), local_mem=shared,
                        compute_units=sms, is_gpu=True,
                        # (4 KiB of kernel parameters on every CUDA GPU; fit_arguments counts
                        # 8 bytes an argument, and the NDRange takes 24)
                        max_arg_bytes=4096 - 64)


class CUDADevice:
    """One GPU (``ordinal``), or an abstract device of ``arch`` when ``ordinal`` is None."""

    fusejit_backend: Any = None  # the CUDA backend (set at registration)

    def __init__(self, ordinal: int | None, arch: str | None = None) -> None:
        self.ordinal = ordinal
        self.lock = threading.Lock()
        self._streams: dict[int, Any] = {}
        if ordinal is None:
            self.device = None
            self.arch = check_supported(arch or arch_from_env() or DEFAULT_ARCH,
                                        "the architecture to lower for (FUSEJIT_CUDA_ARCH)")
            cc = int(self.arch[3:].rstrip("af"))
            sms = 132 if cc >= 90 else 108  # (an H100/H200, an A100: only sizes split work)
            self.name = f"abstract {self.arch}"
            self.info = CUDAInfo(
                key=f"cuda / {self.name} / NVRTC {nvrtc_version()}",
                limits=_limits(sms, 1024, 48 * 1024), has_fp64=True,
                correctly_rounded_div_sqrt=True, is_cpu=False, arch=self.arch)
            self.context = self
            return
        mod = core()
        try:
            dev = mod.Device(ordinal)
            dev.set_current()
        except Exception as exc:  # noqa: BLE001 - the driver's error, whatever it is
            raise DeviceUnavailableError(
                f"no usable CUDA GPU {ordinal} ({type(exc).__name__}: {exc}); install NVIDIA's "
                f"driver and {INSTALL_HINT}, or run on OpenCL "
                "(fusejit.set_default_device('opencl'))") from None
        self.device = dev
        major, minor = dev.compute_capability
        # the exact architecture: arch-specific features (wgmma) from compute capability 9.0
        self.arch = arch or arch_from_env() or f"sm_{major}{minor}{'a' if major >= 9 else ''}"
        check_supported(self.arch, f"CUDA GPU {ordinal} ({dev.name})")
        if not loads_on(self.arch, major, minor):
            raise DeviceUnavailableError(
                f"FUSEJIT_CUDA_ARCH={self.arch} builds cubins that CUDA GPU {ordinal} "
                f"({dev.name}, compute capability {major}.{minor}) cannot load: unset it, or "
                f"set it to sm_{major}{minor}{'a' if major >= 9 else ''}")
        props = dev.properties
        self.name = dev.name
        drv = check(driver().cuDriverGetVersion(), "cuDriverGetVersion")
        self.info = CUDAInfo(
            key=f"cuda / {self.name} / {self.arch} / driver {drv} / NVRTC {nvrtc_version()}",
            limits=_limits(props.multiprocessor_count, props.max_threads_per_block,
                           props.max_shared_memory_per_block),
            has_fp64=True, correctly_rounded_div_sqrt=True, is_cpu=False,
            global_mem=int(check(driver().cuDeviceTotalMem(ordinal), "cuDeviceTotalMem")),
            arch=self.arch)
        self.context = self
        self.default_stream = dev.default_stream

    def __repr__(self) -> str:
        return f"<fusejit CUDA device {self.ordinal}: {self.name}>"

    @property
    def queue(self) -> CUDADevice:
        return self

    def require_gpu(self) -> None:
        if self.device is None:
            raise DeviceUnavailableError(
                f"this signature was lowered for an abstract CUDA device ({self.arch}) and "
                "cannot run here: no CUDA GPU. Its .source and .kernels are what would run; "
                "call it on a machine with an NVIDIA GPU and the fusejit[cuda] extra")

    def stream(self, handle: int | None) -> Any:
        """The cuda-core Stream of a CUDA stream handle (torch's or CuPy's current stream;
        None: the device's default stream), wrapped once per handle."""
        if handle is None:
            return self.default_stream
        s = self._streams.get(handle)
        if s is None:
            s = self._streams[handle] = self.device.create_stream(_Foreign(handle))
        return s

    def allocate(self, nbytes: int, stream: Any) -> Any:
        """A buffer from the device's stream-ordered memory pool."""
        self.device.set_current()
        return self.device.allocate(max(nbytes, 1), stream=stream)


class _Foreign:
    """A stream another library owns, as cuda-core's ``__cuda_stream__`` protocol names it."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


_devices: dict[int | str, CUDADevice] = {}
_lock = threading.Lock()


def device(ordinal: int) -> CUDADevice:
    """The CUDADevice of GPU ``ordinal`` (opened once)."""
    dev = _devices.get(ordinal)
    if dev is None:
        with _lock:
            dev = _devices.get(ordinal)
            if dev is None:
                dev = _devices[ordinal] = CUDADevice(ordinal)
                dev.fusejit_backend = backend_named("cuda")
    return dev


def gpu_count() -> int:
    """GPUs the CUDA driver sees (0 without a driver or without the extra)."""
    try:
        drv = driver()
        if int(drv.cuInit(0)[0]):
            return 0
        return int(check(drv.cuDeviceGetCount(), "cuDeviceGetCount"))
    except (DeviceUnavailableError, RuntimeError, OSError):
        return 0


_pinned: list[int] = []  # the GPU NumPy-only calls run on (use_gpu), else GPU 0


def use_gpu(ordinal: int) -> CUDADevice:
    """Make GPU ``ordinal`` the one NumPy-only CUDA calls run on (a dask worker's own GPU:
    fusejit.dask.DevicePlugin(kind="cuda")); DeviceUnavailableError without it."""
    count = gpu_count()
    if not 0 <= ordinal < count:
        raise DeviceUnavailableError(
            f"no CUDA GPU {ordinal}: this machine's CUDA driver shows {count} (install NVIDIA's "
            f"driver and {INSTALL_HINT}, or use OpenCL devices)")
    dev = device(ordinal)
    _pinned[:] = [ordinal]
    return dev


def default_device() -> CUDADevice:
    """The pinned GPU (use_gpu) or GPU 0, or an abstract device (lowering only) on a machine
    without one."""
    if _pinned:
        return device(_pinned[0])
    if gpu_count() == 0:
        key = arch_from_env() or DEFAULT_ARCH
        dev = _devices.get(key)
        if dev is None:
            dev = _devices[key] = CUDADevice(None, key)
            dev.fusejit_backend = backend_named("cuda")
        return dev
    return device(0)
