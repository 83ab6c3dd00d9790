"""More array building from views and index maps: ``np.split`` and friends, ``np.unstack``,
``np.append``, ``np.delete``, ``np.rot90``, ``np.meshgrid``, ``np.outer``, ``np.ediff1d``,
``np.cross``.

Splits and rotations are views (no data moves); ``delete`` is a host-known take
(``numpy_build.take_static``); the rest compose ops the kernel already fuses.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir import shapes
from fusejit.errors import UnsupportedOperationError
from fusejit.frontend.dispatch import FUNCTIONS, implements
from fusejit.frontend.numpy.build import (
    _static_int,
    _write_out,
    along,
    concatenate,
    stack,
    take_static,
)
from fusejit.frontend.numpy.shape import _as_view_source, transpose
from fusejit.frontend.trace import TensorProxy, lift, reshape
from fusejit.frontend.ufuncs import apply_ufunc


def _flip(x: TensorProxy, axis: int) -> TensorProxy:
    return x[(slice(None),) * axis + (slice(None, None, -1),)]


# -- split -----------------------------------------------------------------------------------------


def _split(x: TensorProxy, sections: Any, axis: int, equal: bool) -> list[TensorProxy]:
    if isinstance(sections, TensorProxy):
        raise UnsupportedOperationError(
            "np.split with traced split points gives data-dependent shapes; pass them as "
            "Python ints (or mark the argument static)")
    axis = shapes.normalize_axis(axis, x.ndim)
    n = x.shape[axis]
    if np.ndim(sections) == 0:
        count = _static_int(sections, "the number of sections")
        if equal and n % count:  # (NumPy's order: split(a, 0) is a ZeroDivisionError)
            raise ValueError("array split does not result in an equal division")
        if count <= 0:
            raise ValueError("number sections must be larger than 0.")
        each, extra = divmod(n, count)
        sizes = [each + 1] * extra + [each] * (count - extra)
        bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    else:
        bounds = [0, *(operator.index(i) for i in sections), n]
    lead = (slice(None),) * axis
    return [x[lead + (slice(a, b),)] for a, b in zip(bounds[:-1], bounds[1:])]


@implements(np.split)
def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[TensorProxy]:
    return _split(_as_view_source(ary), indices_or_sections, axis, equal=True)


@implements(np.array_split)
def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[TensorProxy]:
    return _split(_as_view_source(ary), indices_or_sections, axis, equal=False)


def _split_along(name: str, axis: int, least: int) -> Any:
    def impl(ary: Any, indices_or_sections: Any) -> list[TensorProxy]:
        x = _as_view_source(ary)
        if x.ndim < least:
            raise ValueError(f"{name} only works on arrays of {least} or more dimensions")
        along = 0 if name == "hsplit" and x.ndim == 1 else axis
        return _split(x, indices_or_sections, along, equal=True)
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = f"np.{name}: np.split along axis {axis}."
    return impl


FUNCTIONS[np.hsplit] = _split_along("hsplit", 1, 1)
FUNCTIONS[np.vsplit] = _split_along("vsplit", 0, 2)
FUNCTIONS[np.dsplit] = _split_along("dsplit", 2, 3)


if hasattr(np, "unstack"):  # NumPy >= 2.1
    @implements(np.unstack)
    def unstack(x: Any, /, *, axis: int = 0) -> tuple[TensorProxy, ...]:
        v = _as_view_source(x)
        if v.ndim == 0:
            raise ValueError("Input array must be at least 1-d.")
        axis = shapes.normalize_axis(axis, v.ndim)
        return tuple(v[(slice(None),) * axis + (i,)] for i in range(v.shape[axis]))


# -- append, delete -------------------------------------------------------------------------------


@implements(np.append)
def append(arr: Any, values: Any, axis: int | None = None) -> TensorProxy:
    x, v = lift(arr), lift(values)
    if axis is None:
        x = TensorProxy(reshape(x.node, (x.size,)))
        v = TensorProxy(reshape(v.node, (v.size,)))
        axis = x.ndim - 1
    return concatenate((x, v), axis)


@implements(np.delete)
def delete(arr: Any, obj: Any, axis: int | None = None) -> TensorProxy:
    node, axis = along(lift(arr), axis)
    n = node.shape[axis]
    if isinstance(obj, TensorProxy):
        raise UnsupportedOperationError(
            "np.delete with traced positions gives a data-dependent shape; pass them as a "
            "NumPy array, list, int or slice (or mark the argument static)")
    keep = np.ones(n, bool)
    if isinstance(obj, slice):
        keep[obj] = False
    else:
        where = np.asarray(obj)
        if where.dtype == np.bool_:
            if where.shape != (n,):
                raise ValueError(f"boolean array argument obj to delete must be one "
                                 f"dimensional and match the axis length of {n}")
            keep = ~where
        else:
            if where.size and where.dtype.kind not in "iu":
                raise IndexError("arrays used as indices must be of integer (or boolean) type")
            flat = where.astype(np.int64).reshape(-1)
            bad = (flat < -n) | (flat >= n)
            if bad.any():
                raise IndexError(f"index {int(flat[bad][0])} is out of bounds for axis "
                                 f"{axis} with size {n}")
            keep[flat % n if n else flat] = False
    return TensorProxy(take_static(node, axis, np.flatnonzero(keep)))


# -- rot90, meshgrid, outer, ediff1d, cross -------------------------------------------------------


@implements(np.rot90)
def rot90(m: Any, k: int = 1, axes: Any = (0, 1)) -> TensorProxy:
    """NumPy's rot90: flips and a transpose, all views."""
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    x = _as_view_source(m)
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == x.ndim:
        raise ValueError("Axes must be different.")
    if not all(-x.ndim <= a < x.ndim for a in axes):
        raise ValueError(f"Axes={axes} out of range for array of ndim={x.ndim}.")
    a0, a1 = (a % x.ndim for a in axes)
    k = _static_int(k, "np.rot90's k") % 4
    if k == 0:
        return x[...]
    if k == 2:
        return _flip(_flip(x, a0), a1)
    order = list(range(x.ndim))
    order[a0], order[a1] = order[a1], order[a0]
    if k == 1:
        return transpose(_flip(x, a1), tuple(order))
    return _flip(transpose(x, tuple(order)), a1)


@implements(np.meshgrid)
def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy"
             ) -> tuple[TensorProxy, ...]:
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    ndim = len(xi)
    ones = (1,) * ndim
    xs = [lift(x) for x in xi]
    out = [TensorProxy(reshape(x.node, ones[:i] + (x.size,) + ones[i + 1:]))
           for i, x in enumerate(xs)]
    if indexing == "xy" and ndim > 1:  # the first two axes swapped
        out[0] = TensorProxy(reshape(out[0].node, (1, xs[0].size) + ones[2:]))
        out[1] = TensorProxy(reshape(out[1].node, (xs[1].size, 1) + ones[2:]))
    if not sparse:
        out = list(FUNCTIONS[np.broadcast_arrays](*out))
    return tuple(out)


@implements(np.outer)
def outer(a: Any, b: Any, out: Any = None) -> TensorProxy:
    x, y = lift(a), lift(b)
    col = TensorProxy(reshape(x.node, (x.size, 1)))
    row = TensorProxy(reshape(y.node, (1, y.size)))
    return _write_out(apply_ufunc(np.multiply, (col, row), {}), out)


@implements(np.ediff1d)
def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> TensorProxy:
    x = lift(ary)
    x = TensorProxy(reshape(x.node, (x.size,)))
    parts = []
    for extra, name in ((to_begin, "to_begin"), (None, ""), (to_end, "to_end")):
        if name == "":
            parts.append(apply_ufunc(np.subtract, (x[1:], x[:-1]), {}))
            continue
        if extra is None:
            continue
        e = lift(extra)
        if not np.can_cast(e.dtype, x.dtype, casting="same_kind"):
            raise TypeError(f"dtype of `{name}` must be compatible with input `ary` under the "
                            "`same_kind` rule.")
        parts.append(TensorProxy(reshape(e.node, (e.size,))))
    return concatenate(parts, 0, dtype=x.dtype, casting="unsafe") if len(parts) > 1 \
        else parts[0]


@implements(np.cross)
def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> TensorProxy:
    """NumPy's cross product of 3-vectors (the same products and differences, so the same
    rounding); the deprecated 2-vector forms are refused."""
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = lift(a), lift(b)
    x = FUNCTIONS[np.moveaxis](x, shapes.normalize_axis(axisa, x.ndim, "axisa"), -1)
    y = FUNCTIONS[np.moveaxis](y, shapes.normalize_axis(axisb, y.ndim, "axisb"), -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n"
                         "(dimension must be 2 or 3)")
    if x.shape[-1] != 3 or y.shape[-1] != 3:
        raise UnsupportedOperationError("np.cross of 2-vectors (deprecated by NumPy) is not "
                                        "supported inside @fuse; pad them to 3-vectors")
    dt.result_type(x.dtype, y.dtype)  # (refuses a pair NumPy cannot promote)

    def term(i: int, j: int) -> TensorProxy:
        return apply_ufunc(np.multiply, (x[..., i], y[..., j]), {})

    parts = [apply_ufunc(np.subtract, (term(1, 2), term(2, 1)), {}),
             apply_ufunc(np.subtract, (term(2, 0), term(0, 2)), {}),
             apply_ufunc(np.subtract, (term(0, 1), term(1, 0)), {})]
    result = stack(parts, -1)
    return FUNCTIONS[np.moveaxis](result, -1, shapes.normalize_axis(axisc, result.ndim,
                                                                   "axisc"))
