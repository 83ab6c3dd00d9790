"""``fusejit.vulkan.Array``: an n-d array in a Vulkan storage buffer, with strided views.

Layout is NumPy's: ``strides`` and ``offset`` count bytes of the array's dtype. bool is stored
as one 32-bit word per element on the device (naga's GLSL has no 8-bit storage), so device
buffers are ``storage_itemsize`` wide per element; element offsets and strides are the same.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.errors import UnsupportedDTypeError
from fusejit.runtime.backend import DeviceArray
from fusejit.runtime.vulkan.device import VulkanDevice, default_device

_STORAGE = {np.dtype(np.bool_): np.dtype(np.uint32)}
SUPPORTED = frozenset(np.dtype(c) for c in ("?", "i1", "u1", "i2", "u2", "i4", "u4", "f4"))
# dtypes an adapter supports with one of its optional features (see targets/glsl.FEATURE_OF)
OPTIONAL = {np.dtype(np.float16): "shader-f16", np.dtype(np.float64): "shader-f64",
            np.dtype(np.int64): "fj-wgsl-int64", np.dtype(np.uint64): "fj-wgsl-int64"}


def storage_dtype(dtype: np.dtype) -> np.dtype:
    """The element type of the device buffer holding ``dtype``."""
    return _STORAGE.get(dtype, dtype)


def supported_dtypes(device: VulkanDevice) -> frozenset[np.dtype]:
    """The dtypes arrays on ``device`` may have (float16 with shader-f16)."""
    return SUPPORTED | {d for d, f in OPTIONAL.items() if f in device.features}


def check_dtype(dtype: np.dtype, device: VulkanDevice) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED and OPTIONAL.get(dtype) not in device.features:
        from fusejit.targets.glsl.target import GLSLTarget

        GLSLTarget(device.features).compute_type(dt.check_supported(dtype, "array"))  # raises
        raise UnsupportedDTypeError(f"{dtype} arrays are not supported on Vulkan")
    return dtype


def _row_major(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    out, acc = [], itemsize
    for d in reversed(shape):
        out.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(out))


class Array(DeviceArray):
    """An array on a Vulkan device. Make one with ``fusejit.vulkan.to_device(x)``; ``.get()``
    copies it back to NumPy. Basic indexing (ints, slices, ``...``, ``None``) and ``.T`` /
    ``transpose`` return views sharing the buffer."""

    __array_priority__ = 100
    _owns = False  # the array its buffer came with (views and wrapped buffers: False)

    def __init__(self, device: VulkanDevice, buffer: Any, shape: tuple[int, ...],
                 dtype: np.dtype, strides: tuple[int, ...] | None = None, offset: int = 0,
                 base: Array | None = None) -> None:
        self.device = device
        self.base_data = buffer
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.strides = tuple(strides) if strides is not None else \
            _row_major(self.shape, self.dtype.itemsize)
        self.offset = int(offset)
        self.base = base

    def __del__(self) -> None:
        # the owner's buffer returns to the pool once it and all views (which keep it alive
        # through .base) are gone; cheaper per call than weakref.finalize
        if self._owns:
            try:
                self.device.release(self.base_data)
            except Exception:  # noqa: BLE001, S110 - interpreter shutdown
                pass

    # the device doubles as queue and context (one call's arrays must share it)
    @property
    def queue(self) -> VulkanDevice:
        return self.device

    @property
    def context(self) -> VulkanDevice:
        return self.device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"fusejit.vulkan.Array({self.get()!r})"

    # -- views ------------------------------------------------------------------------------------
    def _host_twin(self) -> np.ndarray:
        """A NumPy array of the same layout over a one-element buffer, never read: NumPy's
        own indexing computes each view's shape, strides and offset."""
        return np.lib.stride_tricks.as_strided(np.zeros(1, self.dtype), self.shape,
                                               self.strides, writeable=False)

    def _view_of(self, twin: np.ndarray, view: np.ndarray) -> Array:
        moved = view.__array_interface__["data"][0] - twin.__array_interface__["data"][0]
        return Array(self.device, self.base_data, view.shape, self.dtype, view.strides,
                     self.offset + moved, self.base or self)

    def __getitem__(self, key: Any) -> Array:
        parts = key if isinstance(key, tuple) else (key,)
        if any(not isinstance(k, (int, np.integer, slice, type(Ellipsis), type(None)))
               or isinstance(k, bool) for k in parts):
            raise TypeError("fusejit.vulkan.Array supports basic indexing only (ints, slices, "
                            "..., None); index the NumPy array from .get() or use a fused "
                            "function for fancy indexing")
        twin = self._host_twin()
        return self._view_of(twin, twin[key])

    def transpose(self, *axes: Any) -> Array:
        twin = self._host_twin()
        return self._view_of(twin, twin.transpose(*axes))

    @property
    def T(self) -> Array:  # noqa: N802 - NumPy's name
        return self.transpose()

    def reshape(self, *shape: Any) -> Array:
        """A view with a new shape (C-contiguous arrays only)."""
        twin = self._host_twin()
        if not twin.flags.c_contiguous:
            raise ValueError("reshape of a non-contiguous Vulkan array; use a fused function")
        return self._view_of(twin, twin.reshape(*shape))

    # -- copies -----------------------------------------------------------------------------------
    def _extent(self) -> tuple[int, int]:
        """First and one-past-last element index this view addresses in its buffer."""
        item = self.dtype.itemsize
        start = self.offset // item
        if self.size == 0:
            return start, start
        lo = start + sum((d - 1) * (s // item) for d, s in zip(self.shape, self.strides) if s < 0)
        hi = start + sum((d - 1) * (s // item) for d, s in zip(self.shape, self.strides) if s > 0)
        return lo, hi + 1

    def get(self) -> np.ndarray:
        """A NumPy copy of the array (waits for the kernels that write it)."""
        lo, hi = self._extent()
        sd = storage_dtype(self.dtype)
        raw = self.device.download(self.base_data, lo * sd.itemsize, (hi - lo) * sd.itemsize)
        flat = raw.view(sd).astype(self.dtype, copy=False) if sd != self.dtype else raw.view(sd)
        if self.size == 0:
            return np.zeros(self.shape, self.dtype)
        item = self.dtype.itemsize
        start = self.offset // item - lo
        view = np.lib.stride_tricks.as_strided(flat[start:], self.shape, self.strides)
        return np.array(view, copy=True)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        host = self.get()
        return host if dtype is None else host.astype(dtype)


def to_device(x: Any, device: VulkanDevice | None = None) -> Array:
    """Copy ``x`` (anything ``np.asarray`` takes) into a new C-contiguous Vulkan array."""
    host = np.asarray(x)
    device = device or default_device()
    dtype = check_dtype(host.dtype, device)
    arr = empty(host.shape, dtype, device)
    device.upload(arr.base_data, np.ascontiguousarray(host, dtype=storage_dtype(dtype)))
    return arr


def empty(shape: tuple[int, ...], dtype: Any, device: VulkanDevice | None = None) -> Array:
    """An uninitialised C-contiguous Vulkan array (its buffer returns to the pool when the
    array and all its views are gone)."""
    device = device or default_device()
    dtype = check_dtype(np.dtype(dtype), device)
    shape = tuple(int(d) for d in np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
    n = math.prod(shape)
    return new_owned(device, shape, dtype, _row_major(shape, dtype.itemsize),
                     device.buffer_size(n * storage_dtype(dtype).itemsize))


def new_owned(device: VulkanDevice, shape: tuple[int, ...], dtype: np.dtype,
              strides: tuple[int, ...], size: int) -> Array:
    """A new C-contiguous array owning a pooled buffer of ``size`` bytes (a
    ``device.buffer_size``): ``empty`` with everything known, as a call's results, whose
    layout is fixed per signature, are."""
    arr = Array.__new__(Array)
    arr.device, arr.base_data = device, device.take(size)
    arr.shape, arr.dtype, arr.strides, arr.offset, arr.base = shape, dtype, strides, 0, None
    arr._owns = True
    return arr
