"""Call signatures: what a fused function is specialised on, as cache keys.

The full key (``CallKey``) holds one explicit spec per argument (dtype, shape, layout class,
static value), the keyword names, the device context, which arguments share memory and the
values of the closure/global data the function reads. ``fast_key`` is the hot path's cheaper
stand-in for the common positional call, and a cache of generated guard functions sits above
that (see ``runtime.opencl.executable.Executable.guarded``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from fusejit.ir import dtypes as dt
from fusejit.errors import UnsupportedDTypeError
from fusejit.frontend.keys import Identity, StaticKey, static_key  # noqa: F401 - Identity for api.py
from fusejit.runtime.backend import FAST_PARTS, DeviceArray
from fusejit.runtime.memory import BIG_OFFSET, HostArraySpec, zero_axes
from fusejit.frontend.trace import MASKED

# -- argument specs ---------------------------------------------------------------------------------


class DeviceArraySpec(NamedTuple):
    """A pyopencl array argument: everything its kernel is specialised on."""

    dtype: np.dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    has_offset: bool
    wide: bool
    context: cl.Context
    # False for a read-only export (a JAX array): the function may not write it (its own trace)
    writeable: bool = True


class ScalarSpec(NamedTuple):
    """A dynamic scalar: a Python type (weak, NEP 50) or a NumPy scalar's dtype (strong)."""

    ptype: Any


class StaticSpec(NamedTuple):
    """A value baked into the kernel; a new value compiles a new kernel."""

    value: Any


Spec = DeviceArraySpec | HostArraySpec | ScalarSpec | StaticSpec

class StaticSelf(NamedTuple):
    """A bound method's ``self``: static, keyed by identity."""

    value: Any


_AUTO_STATIC = (type(None), str, bytes, tuple, list, slice, type(Ellipsis), np.dtype, type)
_WIDE = 2**31 - 1


def _holds_array(value: object, depth: int = 0) -> bool:
    """Does a list or tuple argument hold an array (NumPy or device) at any depth (dicts
    too, inside one)?"""
    if isinstance(value, (np.ndarray, cla.Array, DeviceArray)):
        return True
    if depth > 32:
        return False
    items = value.values() if isinstance(value, dict) else value
    return isinstance(value, (list, tuple, dict)) and any(
        _holds_array(v, depth + 1) for v in items)


def _overrides_numpy(cls: type) -> bool:
    """An ndarray subclass that replaces NumPy's dispatch (astropy's Quantity): computing its
    plain values would drop what its override does (units), so it is refused by name."""
    return cls is not np.ndarray and (
        getattr(cls, "__array_ufunc__", None) is not np.ndarray.__array_ufunc__
        or getattr(cls, "__array_function__", None) is not np.ndarray.__array_function__)


def _static_key(value: Any) -> StaticKey:
    return static_key(value)  # floats by their bits, at any depth (see fusejit.frontend.keys)


def arg_spec(value: Any, static: bool, what: str = "argument") -> Spec:
    if static:
        return StaticSpec(_static_key(value))
    if isinstance(value, (cla.Array, DeviceArray)):
        dtype = dt.check_supported(value.dtype, what)
        if not value.dtype.isnative:
            # kernels read device memory in the device's byte order (NumPy arrays are
            # converted on upload; a device array would be computed on its raw bytes)
            raise UnsupportedDTypeError(
                f"{what} is a pyopencl array of non-native byte order {value.dtype!r}; fusejit "
                "computes in the device's byte order. Convert it first, e.g. "
                "cla.to_device(queue, x.get().astype(x.dtype.newbyteorder('='))) (pyopencl's "
                "own astype cannot map that dtype)")
        item = value.dtype.itemsize
        if any(s % item for s in value.strides):
            raise ValueError("array strides must be multiples of the item size")
        strides = tuple(s // item for s in value.strides)
        # 64-bit index math when the furthest element addressed does not fit in 32 bits
        extent = sum((d - 1) * abs(s) for d, s in zip(value.shape, strides)) + 1
        wide = value.offset // item + extent > _WIDE or (value.offset != 0 and
                                                          value.offset >= BIG_OFFSET)
        return DeviceArraySpec(dtype, value.shape, strides, value.offset != 0, wide,
                               value.context, getattr(value, "writeable", True))
    if isinstance(value, np.ndarray):
        if dt.is_masked(value) or isinstance(value, np.matrix):
            raise TypeError(f"{what}: " + (MASKED if dt.is_masked(value) else
                                           "np.matrix is not supported by fusejit (its * is a "
                                           "matrix product); pass np.asarray(x)"))
        if _overrides_numpy(type(value)):
            cls = type(value)
            raise TypeError(
                f"{what} is a {cls.__module__}.{cls.__qualname__}, an ndarray subclass with its "
                "own __array_ufunc__/__array_function__ (units, masks, ...): NumPy lets it "
                "override every operation, which a fused kernel cannot honour; pass the plain "
                "values (np.asarray(x), or x.value for astropy's Quantity) and rebuild the "
                "subclass from the result")
        dtype = dt.check_supported(value.dtype, "argument")
        return HostArraySpec(dtype, value.shape, bool(value.flags.writeable), zero_axes(value))
    if isinstance(value, (bool, int, float, complex, np.generic)):
        if isinstance(value, np.generic):
            dt.check_supported(value.dtype, "scalar argument")
            return ScalarSpec(value.dtype)
        if type(value) is int and (cls := dt.int_range(value)) is not None:
            return ScalarSpec((int, cls))  # compared exactly with integer arrays: see trace
        return ScalarSpec(type(value))
    if isinstance(value, _AUTO_STATIC):
        if isinstance(value, (list, tuple)) and _holds_array(value):
            raise TypeError(
                f"{what} is a {type(value).__name__} holding arrays: lists and tuples are "
                "static Python values to a fused function (baked into the kernel, like shapes "
                "and axes), which arrays cannot be. Pass each array as an argument of its own, "
                "or convert the whole with np.asarray(...) / np.stack(...) first")
        return StaticSpec(_static_key(value))
    raise TypeError(f"cannot pass {type(value).__name__} to a fused function; pass "
                    "pyopencl or NumPy arrays, scalars, or mark the argument static")


@dataclass(frozen=True)
class CallKey:
    """The cache key of one call: argument specs, keyword names, device context."""

    specs: tuple[Spec, ...]
    kwnames: tuple[str, ...]
    context: cl.Context
    aliases: tuple[tuple[int, int, bool], ...] = ()
    guards: tuple[Any, ...] = ()  # values read from outside the arguments (fusejit.frontend.captured)
    implicit: int = 0  # captured arrays read fresh, appended to the arguments
    # what each guard value reads (``cfg.alpha``): for the recompile log, not part of the key
    guard_names: tuple[str, ...] = field(default=(), compare=False)
    # overlapping arrays traced as views of one array (compile/overlap.py's as_views): per
    # member (position, where its group's array is, affine map, shape, writeable)
    views: tuple[Any, ...] = ()


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int | None
    currsize: int
    traces: int = 0  # runs of the Python function
    compiles: int = 0  # programs the OpenCL compiler built from source
    disk_hits: int = 0  # programs loaded from the disk cache instead


_I64 = 2**63


def fast_key(args: tuple, static_nums: frozenset[int]) -> tuple | None:
    """The hot-path cache key: raw attributes of positional arguments, or None when the call
    needs the full path (aliasing arrays, unusual argument types, huge buffers)."""
    if len(args) == 1 and not static_nums and type(args[0]) is cla.Array:
        a = args[0]  # the most common call: one device array
        if a.offset < BIG_OFFSET and a.base_data is not None:
            return ((a.dtype, a.shape, a.strides, a.offset != 0, a.context),)
        return None
    parts = []
    ptrs = []
    foreign: list[Any] = []
    host = 0
    for i, a in enumerate(args):
        t = type(a)
        if i in static_nums:
            try:
                parts.append(("static", _static_key(a)))
            except TypeError:
                return None
        elif t is cla.Array:
            offset = a.offset
            if offset >= BIG_OFFSET or a.base_data is None:
                return None  # the full path decides between 32- and 64-bit index math
            ptrs.append(a)
            parts.append((a.dtype, a.shape, a.strides, offset != 0, a.context))
        elif isinstance(a, DeviceArray):  # fusejit's own device arrays (Vulkan), as pyopencl's
            part_of = FAST_PARTS.get(type(a.base_data)) if FAST_PARTS else None
            if part_of is not None:  # another library's array, adopted: keyed as the raw one
                part = part_of(a.base_data)
                if part is None:
                    return None
                foreign.append(a.base_data)
                parts.append(part)
                continue
            if a.offset >= BIG_OFFSET:
                return None
            ptrs.append(a)
            parts.append((a.dtype, a.shape, a.strides, a.offset != 0, a.context))
        elif t is np.ndarray:
            host += 1
            parts.append(("host", a.dtype, a.shape, a.flags.writeable or zero_axes(a)))
        elif t is float or t is int or t is bool:
            if t is int and not -_I64 <= a < _I64:
                return None  # the full path keys a Python int beyond int64 by its range
            parts.append(t)
        elif isinstance(a, np.generic):
            parts.append(a.dtype)
        else:  # a torch tensor, a CuPy array... (runtime/cuda/launch.py), else the full path
            part_of = FAST_PARTS.get(t)
            part = part_of(a) if part_of is not None else None
            if part is None:
                return None
            foreign.append(a)
            parts.append(part)
    if len(foreign) > 1 and len({id(a) for a in foreign}) < len(foreign):
        return None  # the same array twice: the full path's aliasing analysis
    if len(ptrs) > 1:
        bases = {a.base_data.int_ptr if type(a) is cla.Array else id(a.base_data) for a in ptrs}
        if len(bases) < len(ptrs):
            return None
    if host > 1:
        arrays = [a for a in args if type(a) is np.ndarray]
        if any(np.may_share_memory(x, y) for k, x in enumerate(arrays) for y in arrays[k + 1:]):
            return None
    return tuple(parts)


def aliases_of(flat: list[Any], specs: Sequence[Spec]) -> tuple[tuple[int, int, bool], ...]:
    """(i, j, identical) for array arguments that share memory: ``identical`` when they are the
    same array (same buffer, offset, shape and strides), else they merely overlap."""
    out = []
    arrays = [(i, v) for i, (v, s) in enumerate(zip(flat, specs))
              if isinstance(s, (DeviceArraySpec, HostArraySpec))]
    for a, (i, x) in enumerate(arrays):
        for j, y in arrays[a + 1:]:
            if isinstance(x, cla.Array) and isinstance(y, cla.Array):
                if x.base_data is None or y.base_data is None or \
                        x.base_data.int_ptr != y.base_data.int_ptr:
                    continue
                same = (x.offset, x.shape, x.strides, x.dtype) == \
                    (y.offset, y.shape, y.strides, y.dtype)
            elif isinstance(x, DeviceArray) and isinstance(y, DeviceArray):
                if x.base_data is not y.base_data:
                    continue
                same = (x.offset, x.shape, x.strides, x.dtype) == \
                    (y.offset, y.shape, y.strides, y.dtype)
            elif isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
                if not np.may_share_memory(x, y):
                    continue
                same = x is y or (x.__array_interface__["data"] == y.__array_interface__["data"]
                                  and (x.shape, x.strides, x.dtype) == (y.shape, y.strides,
                                                                        y.dtype))
            else:
                continue
            out.append((i, j, same))
    return tuple(out)
