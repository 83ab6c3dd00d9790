"""Arrays on a CUDA device: fusejit's own (a call's results, in the device's memory pool) and
views of other libraries' arrays (torch, CuPy, JAX, Numba), adopted without a copy.

``adopt`` turns any object that exports ``__cuda_array_interface__`` or ``__dlpack__`` on a CUDA
device into an ``Array`` over the same memory (cuda-core's ``StridedMemoryView`` reads either
protocol), so a kernel reads and writes the caller's memory: strided views stay views, and
in-place writes land where the caller looks. A result goes back as the first adopted
argument's library type (``as_library``) through the CUDA Array Interface, which torch and CuPy
import without a copy, keeping the result's buffer alive.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusejit.errors import (
    ContextMismatchError,
    DeviceUnavailableError,
    UnsupportedDTypeError,
    UnsupportedOperationError,
)
from fusejit.ir import dtypes as dt
from fusejit.runtime.backend import DeviceArray
from fusejit.runtime.cuda.build import INSTALL_HINT
from fusejit.runtime.cuda.device import CUDADevice, check, device, driver

_DLPACK_CUDA = (2, 13)  # kDLCUDA, kDLCUDAManaged
ALIGN = 256  # bytes: what cudaMalloc (and torch's, CuPy's allocators) align allocations to


class Array(DeviceArray):
    """An array in CUDA device memory. ``strides`` and ``offset`` count bytes (NumPy's way);
    ``base_data`` is the allocation (a cuda-core Buffer, or the adopted object)."""

    __array_priority__ = 100

    def __init__(self, dev: CUDADevice, ptr: int, shape: tuple[int, ...], dtype: np.dtype,
                 strides: tuple[int, ...] | None, owner: Any, library: str | None = None,
                 stream: int | None = None) -> None:
        self.device = self.queue = self.context = dev  # (the device is both, as on Vulkan)
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        item = self.dtype.itemsize
        self.strides = tuple(strides) if strides is not None else \
            tuple(s * item for s in _row_major(self.shape))
        # the kernel's pointer is the lowest address the view reaches, rounded down to
        # ALIGN bytes as device buffers are aligned (codegen's vector loads and the GEMMs'
        # 16-byte copies count on it), and the element offset counts up from there, so
        # negative strides and views starting mid-buffer are addressed as in pyopencl
        low = ptr + sum((d - 1) * s for d, s in zip(self.shape, self.strides) if s < 0 and d > 0)
        self.ptr = low - low % ALIGN
        self.offset = ptr - self.ptr
        self.base_data = owner
        self.library = library  # "torch" | "cupy" | "jax" | "numba" | None (fusejit's own)
        self.stream_handle = stream  # the owner's current stream, for adopted arrays
        self.writeable = True  # False: exported read-only (the call may not write it)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str,
                "data": (self.ptr + self.offset, False), "version": 3,
                "strides": None if self.strides == tuple(
                    s * self.dtype.itemsize for s in _row_major(self.shape)) else self.strides,
                "stream": None}

    def __repr__(self) -> str:
        return f"fusejit CUDA Array(shape={self.shape}, dtype={self.dtype}, {self.device})"

    def get(self) -> np.ndarray:
        """A NumPy copy (waits for the work queued before it)."""
        out = np.empty(self.shape, self.dtype)
        if self.size == 0:
            return out
        below = sum((d - 1) * -st for d, st in zip(self.shape, self.strides) if st < 0)
        span = self.offset - below + _span(self.shape, self.strides, self.dtype.itemsize)
        raw = np.empty(span, np.uint8)  # (from self.ptr: the view's lowest address, aligned)
        dev = self.device
        dev.device.set_current()
        dev.default_stream.sync()  # (the legacy default stream: orders after other streams)
        check(driver().cuMemcpyDtoH(raw.ctypes.data, self.ptr, span), "cuMemcpyDtoH")
        out[...] = np.ndarray(self.shape, self.dtype, buffer=raw, offset=self.offset,
                              strides=self.strides)
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        host = self.get()
        return host if dtype is None else host.astype(dtype)


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(out))


def _span(shape: tuple[int, ...], strides: tuple[int, ...], item: int) -> int:
    """Bytes from the lowest to one past the highest address a view reaches."""
    if math.prod(shape) == 0:
        return 0
    return sum((d - 1) * abs(s) for d, s in zip(shape, strides)) + item


def owned(dev: CUDADevice, shape: tuple[int, ...], dtype: np.dtype, stream: Any) -> Array:
    """A new C-contiguous array in the device's pool (freed, stream-ordered, with its last
    reference)."""
    nbytes = math.prod(shape) * dtype.itemsize
    buf = dev.allocate(nbytes, stream)
    return Array(dev, int(buf.handle), shape, dtype, None, buf)


def upload(dev: CUDADevice, host: np.ndarray, stream: Any) -> Array:
    host = np.ascontiguousarray(host)
    arr = owned(dev, host.shape, host.dtype, stream)
    if host.nbytes:
        stream.sync()
        check(driver().cuMemcpyHtoD(arr.ptr, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")
    return arr


# -- other libraries' arrays ------------------------------------------------------------------------


def _library(value: Any) -> str:
    mod = type(value).__module__.split(".")[0]
    return {"jaxlib": "jax"}.get(mod, mod)


def _current_stream(library: str, ordinal: int) -> int | None:
    """The handle of ``library``'s current stream on GPU ``ordinal`` (None: the default)."""
    if library == "torch":
        import torch

        return int(torch.cuda.current_stream(ordinal).cuda_stream) or None
    if library == "cupy":
        import cupy

        with cupy.cuda.Device(ordinal):
            return int(cupy.cuda.get_current_stream().ptr) or None
    return None


def is_foreign_cuda(value: Any) -> bool:
    """Does ``value`` export its memory as a CUDA array (a torch/CuPy/JAX/Numba array)?"""
    t = type(value)
    if t is np.ndarray or isinstance(value, DeviceArray):
        return False
    if hasattr(t, "__cuda_array_interface__"):
        return True
    if hasattr(t, "__dlpack_device__"):
        try:
            return int(value.__dlpack_device__()[0]) in _DLPACK_CUDA
        except Exception:  # noqa: BLE001 - an exporter that cannot say: not ours
            return False
    return False


def foreign_cpu_torch(value: Any) -> bool:
    return _library(value) == "torch" and hasattr(value, "is_cuda") and not value.is_cuda


def adopt(value: Any, what: str) -> Array:
    """An Array over ``value``'s memory, without a copy (named errors for what cannot be)."""
    library = _library(value)
    if library == "torch" and getattr(value, "requires_grad", False):
        raise UnsupportedOperationError(
            f"{what} is a torch tensor that requires grad; fusejit does not record autograd "
            "graphs. Pass x.detach() (or call inside torch.no_grad())")
    try:
        from cuda.core.utils import StridedMemoryView as view
    except ImportError:  # (cuda-core before 0.4: under experimental)
        try:
            from cuda.core.experimental.utils import StridedMemoryView as view
        except ImportError as exc:
            raise DeviceUnavailableError(
                f"{what} is a CUDA array; reading it needs NVIDIA's cuda-core ({exc}): "
                f"{INSTALL_HINT}") from None
    # torch and CuPy: the call runs on their current stream, which orders it (-1: no wait);
    # others (JAX...): the exporter makes the legacy default stream (1), ours, wait for it
    stream_ptr = -1 if library in ("torch", "cupy") else 1
    make = getattr(view, "from_any_interface", None)  # (cuda-core 1.x; the constructor before)
    try:
        smv = make(value, stream_ptr=stream_ptr) if make is not None else \
            view(value, stream_ptr)
    except (BufferError, RuntimeError, TypeError, ValueError) as exc:
        if "libcuda" in str(exc):  # (cuda-core without a driver)
            raise DeviceUnavailableError(f"{what} is a CUDA array, but {exc}") from None
        raise UnsupportedOperationError(
            f"{what}: {library} does not export this array's memory ({type(exc).__name__}: "
            f"{exc}); pass a plain copy (torch: x.contiguous().resolve_conj().resolve_neg(); "
            "CuPy: cupy.ascontiguousarray(x))") from None
    if not smv.is_device_accessible:
        raise ContextMismatchError(f"{what} is not in CUDA device memory")
    dtype = dt.check_supported(np.dtype(smv.dtype), what)
    if not dtype.isnative:
        raise UnsupportedDTypeError(f"{what} has non-native byte order {dtype!r}")
    item = dtype.itemsize
    strides = smv.strides
    shape = tuple(smv.shape)
    strides = tuple(s * item for s in strides) if strides is not None else None
    ordinal = int(smv.device_id)
    dev = device(ordinal)
    arr = Array(dev, int(smv.ptr), shape, dtype, strides, value, library,
                _current_stream(library, ordinal))
    arr.writeable = not smv.readonly
    return arr


_TORCH_DTYPES: dict[np.dtype, Any] = {}


def torch_dtype(dtype: np.dtype) -> Any:
    """The torch dtype of a NumPy dtype (looked up once)."""
    tdt = _TORCH_DTYPES.get(dtype)
    if tdt is None:
        import torch

        tdt = _TORCH_DTYPES[dtype] = torch.from_numpy(np.empty(0, dtype)).dtype
    return tdt


def library_empty(library: str | None, dev: CUDADevice) -> Any:
    """``empty(shape, dtype) -> (array, device pointer)`` allocating results as ``library``'s
    own arrays on ``dev`` (torch's caching allocator, CuPy's pool: ordered on their current
    stream, returned as they are), or None where results go through ``as_library``."""
    if library == "torch":
        import torch

        where = torch.device("cuda", dev.ordinal)

        def empty(shape: tuple[int, ...], dtype: np.dtype) -> tuple[Any, int]:
            t = torch.empty(shape, dtype=torch_dtype(dtype), device=where)
            return t, t.data_ptr()
        return empty
    if library == "cupy":
        import cupy

        def empty(shape: tuple[int, ...], dtype: np.dtype) -> tuple[Any, int]:
            with cupy.cuda.Device(dev.ordinal):
                a = cupy.empty(shape, dtype)
            return a, a.data.ptr
        return empty
    return None


def as_library(arr: Array, library: str | None) -> Any:
    """``arr`` as ``library``'s array type, sharing its memory (fusejit's Array for None or a
    library without a zero-copy import)."""
    if library == "torch":
        import torch

        return torch.as_tensor(arr, device=f"cuda:{arr.device.ordinal}")
    if library == "cupy":
        import cupy

        with cupy.cuda.Device(arr.device.ordinal):
            return cupy.asarray(arr)
    if library == "jax":
        try:
            import cupy
            import jax

            with cupy.cuda.Device(arr.device.ordinal):
                return jax.dlpack.from_dlpack(cupy.asarray(arr))
        except ImportError:
            return arr
    return arr


__all__ = ["Array", "adopt", "as_library", "is_foreign_cuda", "owned", "upload"]
_ = device  # (re-exported for the backend)
