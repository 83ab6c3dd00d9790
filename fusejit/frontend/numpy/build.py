"""Building arrays: joins, pads, tiles, repeats, rolls, differences and triangles, as index maps.

None of these copies its operands. Each result is a node that an elementwise kernel reads
through, built from two mechanisms:

* ``assemble``: a result made of *pieces*, each a rectangular region filled from one value
  (a SETITEM chain over a literal base). The kernel tests which region an element is in and
  loads only that piece's operand: ``concatenate``, ``stack``, ``pad(mode='constant')``, ``diag``.
* ``take_static``: a result whose index along one axis is a host-known integer array. The array
  is cut into runs of constant step, each run one affine view of the operand placed by
  ``assemble`` (``pad`` edge/reflect/symmetric/wrap, ``roll``, ``repeat`` with counts), so no
  index buffer exists; more runs than ``MAX_RUNS`` read through a GATHER of a captured index.

Broadcast-then-reshape covers ``tile`` and ``repeat`` with one count (the index math folds to
``i % n`` and ``i // r``), an affine view ``diagonal``, and index grids (IOTA) ``tril``/``triu``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir import shapes
from fusejit.errors import UnsupportedOperationError
from fusejit.ir.graph import Node, const
from fusejit.frontend.dispatch import FUNCTIONS, implements
from fusejit.frontend.numpy.reductions import _NOVALUE, _sum
from fusejit.frontend.numpy.shape import _as_view_source
from fusejit.frontend.trace import (
    TensorProxy,
    broadcast_to,
    cast,
    checked_cast,
    current_tracer,
    lift,
    reshape,
    view,
    where,
)
from fusejit.frontend.ufuncs import apply_ufunc
from fusejit.ir.ops import Op

MAX_RUNS = 16  # affine pieces per take_static before a captured index buffer is cheaper

Key = tuple[slice, ...]


# -- the two mechanisms ---------------------------------------------------------------------------


def assemble(shape: tuple[int, ...], dtype: np.dtype, pieces: Sequence[tuple[Key, Node]],
             base: Node | None = None) -> Node:
    """An array of ``shape`` whose region ``key`` holds ``value`` for each piece (later pieces
    win where regions overlap), ``base`` (default 0) elsewhere. Values are cast unsafely and
    broadcast to their region, as NumPy's ``result[key] = value`` does."""
    node = broadcast_to(cast(base, dtype), shape) if base is not None else const(0, dtype, shape)
    fill = _literal_bytes(node)
    for key, value in pieces:
        region_shape, _, region = shapes.index_map(shape, key)
        value = broadcast_to(cast(value, dtype), region_shape)
        if 0 in region_shape or (fill is not None and _literal_bytes(value) == fill):
            continue  # (an empty region, or the base's own literal: np.pad's zeros on zeros)
        node = Node.make(Op.SETITEM, dtype, shape, (node, value), region)
    return node


def _literal_bytes(node: Node) -> bytes | None:
    """The bits of a literal seen through views (None for anything else)."""
    while node.op is Op.VIEW:
        node = node.srcs[0]
    return node.arg if node.op is Op.CONST else None


def _runs(src: np.ndarray) -> list[tuple[int, int, int, int]]:
    """``src`` cut into maximal runs of constant step: (first position, length, start, step)."""
    runs, j, n = [], 0, len(src)
    while j < n:
        step = int(src[j + 1] - src[j]) if j + 1 < n else 1
        k = j + 1
        while k < n and src[k] - src[k - 1] == step:
            k += 1
        runs.append((j, k - j, int(src[j]), step))
        j = k
    return runs


def take_static(x: Node, axis: int, src: np.ndarray) -> Node:
    """``np.take(x, src, axis)`` for a host-known 1-D ``src`` already inside the axis."""
    src = np.asarray(src, dtype=np.int64).reshape(-1)
    out_shape = x.shape[:axis] + (len(src),) + x.shape[axis + 1:]
    if len(src) == 0 or 0 in out_shape:
        return const(0, x.dtype, out_shape)
    runs = _runs(src)
    if len(runs) > MAX_RUNS:
        return gather(x, axis, _captured_index(src, axis, out_shape))
    pieces = []
    for first, length, start, step in runs:
        shape = x.shape[:axis] + (length,) + x.shape[axis + 1:]
        m = tuple((start, tuple(step if j == axis else 0 for j in range(x.ndim))) if k == axis
                  else (0, tuple(int(j == k) for j in range(x.ndim)))
                  for k in range(x.ndim))
        key = (slice(None),) * axis + (slice(first, first + length),)
        pieces.append((key, view(x, m, shape)))
    if len(pieces) == 1:
        return pieces[0][1]
    return assemble(out_shape, x.dtype, pieces)


def _captured_index(src: np.ndarray, axis: int, out_shape: tuple[int, ...]) -> Node:
    tracer = current_tracer()
    assert tracer is not None
    small = src.astype(np.int32 if len(src) and src.max() < 2**31 else np.int64)
    node = tracer.constant_array(small)
    line = tuple(len(src) if j == axis else 1 for j in range(len(out_shape)))
    return broadcast_to(reshape(node, line), out_shape)


def gather(x: Node, axis: int, index: Node, checked: bool = False) -> Node:
    """GATHER: ``x`` read along ``axis`` at ``index`` (clamped into the axis on the device);
    ``x`` is broadcast over the other axes of ``index``. ``checked``: an index outside the
    axis also raises the call's IndexError (the kernel's status flag, codegen/lowering.py);
    unchecked gathers are those whose indices are in range by construction or by NumPy's
    ``mode='clip'``."""
    assert x.shape[axis] > 0 or 0 in index.shape, "a gather from an empty axis"  # callers raise
    shape = shapes.broadcast_shapes(index.shape, x.shape[:axis] + (1,) + x.shape[axis + 1:])
    xb = broadcast_to(x, shape[:axis] + (x.shape[axis],) + shape[axis + 1:])
    return Node.make(Op.GATHER, x.dtype, shape, (xb, broadcast_to(index, shape)),
                     (axis, checked))


# -- joins ----------------------------------------------------------------------------------------


def _join_dtype(xs: Sequence[TensorProxy], dtype: Any, casting: str) -> np.dtype:
    target = dt.result_type(*(x.dtype for x in xs)) if dtype is None else np.dtype(dtype)
    target = dt.check_supported(target, "concatenate result")
    for x in xs:
        if not np.can_cast(x.dtype, target, casting=casting):
            raise TypeError(f"Cannot cast array data from {x.dtype!r} to {target!r} according "
                            f"to the rule '{casting}'")
    return target


def _write_out(result: TensorProxy, out: Any) -> TensorProxy:
    if out is None:
        return result
    if not isinstance(out, TensorProxy):
        raise TypeError("out= inside @fuse must be an argument of the fused function (or a "
                        "view of one)")
    out.write(Ellipsis, result, as_output=True)
    return out


def _sequence(arrays: Any, what: str) -> list[TensorProxy]:
    if isinstance(arrays, TensorProxy):
        return list(arrays)  # NumPy iterates an array along its first axis
    if not isinstance(arrays, (list, tuple)):
        raise TypeError(f"{what}: expected a sequence of arrays, got {type(arrays).__name__}")
    return [lift(a) for a in arrays]


@implements(np.concatenate)
def concatenate(arrays: Any, axis: int | None = 0, out: Any = None, *, dtype: Any = None,
                casting: str = "same_kind") -> TensorProxy:
    xs = _sequence(arrays, "concatenate")
    if not xs:
        raise ValueError("need at least one array to concatenate")
    if axis is None:
        xs = [TensorProxy(reshape(x.node, (x.size,))) for x in xs]
        axis = 0
    if xs[0].ndim == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    first = xs[0]
    axis = shapes.normalize_axis(axis, first.ndim)
    for i, x in enumerate(xs[1:], 1):
        if x.ndim != first.ndim:
            raise ValueError(
                "all the input arrays must have same number of dimensions, but the array at "
                f"index 0 has {first.ndim} dimension(s) and the array at index {i} has "
                f"{x.ndim} dimension(s)")
        for d in range(first.ndim):
            if d != axis and x.shape[d] != first.shape[d]:
                raise ValueError(
                    "all the input array dimensions except for the concatenation axis must "
                    f"match exactly, but along dimension {d}, the array at index 0 has size "
                    f"{first.shape[d]} and the array at index {i} has size {x.shape[d]}")
    target = _join_dtype(xs, dtype, casting)
    total = sum(x.shape[axis] for x in xs)
    shape = first.shape[:axis] + (total,) + first.shape[axis + 1:]
    pieces, offset = [], 0
    for x in xs:
        n = x.shape[axis]
        pieces.append(((slice(None),) * axis + (slice(offset, offset + n),), x.node))
        offset += n
    live = [p for p in pieces if p[1].size]
    if len(live) == 1 and live[0][1].shape == shape:  # one non-empty part: it is the result
        return _write_out(TensorProxy(cast(live[0][1], target)), out)
    return _write_out(TensorProxy(assemble(shape, target, live)), out)


@implements(np.stack)
def stack(arrays: Any, axis: int = 0, out: Any = None, *, dtype: Any = None,
          casting: str = "same_kind") -> TensorProxy:
    xs = _sequence(arrays, "stack")
    if not xs:
        raise ValueError("need at least one array to stack")
    if any(x.shape != xs[0].shape for x in xs):
        raise ValueError("all input arrays must have the same shape")
    axis = shapes.normalize_axis(axis, xs[0].ndim + 1)
    key = (slice(None),) * axis + (None,)
    return concatenate([x[key] for x in xs], axis, out, dtype=dtype, casting=casting)


def _atleast(x: TensorProxy, n: int) -> TensorProxy:
    return FUNCTIONS[{1: np.atleast_1d, 2: np.atleast_2d, 3: np.atleast_3d}[n]](x)


@implements(np.hstack)
def hstack(tup: Any, *, dtype: Any = None, casting: str = "same_kind") -> TensorProxy:
    xs = [_atleast(x, 1) for x in _sequence(tup, "hstack")]
    axis = 0 if xs and xs[0].ndim == 1 else 1
    return concatenate(xs, axis, dtype=dtype, casting=casting)


@implements(np.vstack)
def vstack(tup: Any, *, dtype: Any = None, casting: str = "same_kind") -> TensorProxy:
    return concatenate([_atleast(x, 2) for x in _sequence(tup, "vstack")], 0, dtype=dtype,
                       casting=casting)


@implements(np.dstack)
def dstack(tup: Any) -> TensorProxy:
    return concatenate([_atleast(x, 3) for x in _sequence(tup, "dstack")], 2)


@implements(np.column_stack)
def column_stack(tup: Any) -> TensorProxy:
    cols = []
    for x in _sequence(tup, "column_stack"):
        cols.append(TensorProxy(reshape(x.node, (x.size, 1))) if x.ndim < 2 else x)
    return concatenate(cols, 1)


# -- pad, tile, repeat, roll ----------------------------------------------------------------------


def _pairs(value: Any, ndim: int, what: str) -> list[tuple[Any, Any]]:
    """NumPy's ``_as_pairs``: a scalar, a pair or one pair per axis, as (before, after)."""
    arr = np.asarray(value)
    try:
        pairs = np.broadcast_to(arr, (ndim, 2))
    except ValueError:
        raise ValueError(f"operands could not be broadcast together with remapped shapes "
                         f"[original->remapped]: {shapes.format_shape(arr.shape)}  and "
                         f"requested shape ({ndim},2)") from None
    return [(pairs[k, 0], pairs[k, 1]) for k in range(ndim)]


def _pad_index(mode: str, n: int, before: int, after: int) -> np.ndarray:
    """Which element of an axis of length ``n`` each padded position reads (NumPy's result
    for any width: edge repeats, wrap and both reflections are periodic)."""
    p = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(p, 0, n - 1)
    if mode == "wrap":
        return p % n
    if mode == "reflect":
        if n == 1:
            return np.zeros_like(p)
        period = 2 * (n - 1)
        m = p % period
        return np.where(m >= n, period - m, m)
    m = p % (2 * n)  # symmetric
    return np.where(m >= n, 2 * n - 1 - m, m)


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


@implements(np.pad)
def pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> TensorProxy:
    x = lift(array)
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        known = ("empty", "linear_ramp", "maximum", "mean", "median", "minimum")
        if mode in known:
            raise UnsupportedOperationError(
                f"np.pad(..., mode={mode!r}) is not supported inside @fuse; supported modes: "
                f"{', '.join(_PAD_MODES)}")
        raise ValueError(f"mode '{mode}' is not supported")
    allowed = {"constant": {"constant_values"}, "reflect": {"reflect_type"},
               "symmetric": {"reflect_type"}}.get(mode, set())
    extra = set(kwargs) - allowed
    if extra:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {extra}")
    if kwargs.get("reflect_type", "even") != "even":
        raise UnsupportedOperationError("np.pad(..., reflect_type='odd') is not supported "
                                        "inside @fuse; use the default 'even'")
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu":
        raise TypeError("`pad_width` must be of integral type.")
    pairs = [(int(b), int(a)) for b, a in _pairs(widths, x.ndim, "pad_width")]
    if any(b < 0 or a < 0 for b, a in pairs):
        raise ValueError("index can't contain negative values")
    node = x.node
    if mode == "constant":
        values = kwargs.get("constant_values", 0)
        fills = ([(values, values)] * x.ndim if isinstance(values, TensorProxy)
                 else _pairs(values, x.ndim, "constant_values"))
        for axis, ((before, after), (v0, v1)) in enumerate(zip(pairs, fills)):
            if before == after == 0:
                continue
            n = node.shape[axis]
            shape = node.shape[:axis] + (before + n + after,) + node.shape[axis + 1:]
            lead = (slice(None),) * axis
            middle = (lead + (slice(before, before + n),), node)
            node = assemble(shape, x.dtype, [(lead + (slice(before + n, None),), _fill(v1, x)),
                                             middle], base=_fill(v0, x))
        return TensorProxy(node)
    for axis, (before, after) in enumerate(pairs):
        if before == after == 0:
            continue
        n = node.shape[axis]
        if n == 0:
            raise ValueError(f"can't extend empty axis {axis} using modes other than "
                             "'constant' or 'empty'")
        node = take_static(node, axis, _pad_index(mode, n, before, after))
    return TensorProxy(node)


def _fill(value: Any, x: TensorProxy) -> Node:
    """A pad value as NumPy stores it into the padded array: np.pad makes it an array first (a
    Python int becomes an int64), and item assignment of a NumPy integer checks its range for a
    signed integer array (OverflowError, on the call that passes a dynamic one) and casts
    unsafely for any other (``pad(uint8_array, 1, constant_values=-1000)`` stores 24)."""
    signed = x.dtype.kind == "i"
    if isinstance(value, TensorProxy):
        node = lift(value).node
        if signed and value._weak is not None:  # computed on the host: checked there
            return checked_cast(node, x.dtype)
        return cast(node, x.dtype)
    item = np.asarray(value)
    if signed and item.dtype.kind in "iu":
        return const(dt.convert_checked(item.item(), x.dtype, dt.RAISE), x.dtype)
    return const(item.item(), x.dtype)


def along(x: TensorProxy, axis: int | None) -> tuple[Node, int]:
    """``x`` and a normalised axis, as NumPy's functions with ``axis=None`` take them: None
    means the flattened array along axis 0."""
    node = x.node
    if axis is None:
        node, axis = reshape(node, (x.size,)), 0
    return node, shapes.normalize_axis(axis, node.ndim)


def _static_int(value: Any, what: str) -> int:
    if isinstance(value, TensorProxy):
        raise UnsupportedOperationError(
            f"{what} must be known while tracing (it decides the result's shape or layout); "
            "pass it as a Python int, or mark the argument static")
    return int(value)


@implements(np.tile)
def tile(A: Any, reps: Any) -> TensorProxy:
    x = lift(A)
    reps = tuple(_static_int(r, "np.tile's reps") for r in np.atleast_1d(reps).tolist()) \
        if not isinstance(reps, TensorProxy) else (_static_int(reps, "np.tile's reps"),)
    if any(r < 0 for r in reps):
        raise ValueError("negative dimensions are not allowed")
    d = max(len(reps), x.ndim)
    reps = (1,) * (d - len(reps)) + reps
    node = reshape(x.node, (1,) * (d - x.ndim) + x.shape)
    for axis, r in enumerate(reps):
        if r == 1:
            continue
        n = node.shape[axis]
        pre, post = node.shape[:axis], node.shape[axis + 1:]
        # (pre, r, n, post) broadcast, then merged: the kernel reads element i % n
        spread = broadcast_to(reshape(node, pre + (1, n) + post), pre + (r, n) + post)
        node = reshape(spread, pre + (r * n,) + post)
    return TensorProxy(node)


@implements(np.repeat, method="repeat")
def repeat(a: Any, repeats: Any, axis: int | None = None) -> TensorProxy:
    node, axis = along(lift(a), axis)
    n = node.shape[axis]
    if isinstance(repeats, TensorProxy):
        raise UnsupportedOperationError(
            "np.repeat with traced repeat counts gives a data-dependent shape; pass the counts "
            "as a NumPy array or list (or mark the argument static)")
    counts = np.asarray(repeats)
    if counts.dtype.kind not in "iub":
        raise TypeError(f"Cannot cast array data from {counts.dtype!r} to dtype('int64') "
                        "according to the rule 'safe'")
    if counts.ndim == 0 or counts.size == 1:
        r = int(counts.reshape(-1)[0])
        if r < 0:
            raise ValueError("negative dimensions are not allowed")
        pre, post = node.shape[:axis], node.shape[axis + 1:]
        # (pre, n, r, post) broadcast, then merged: the kernel reads element i // r
        spread = broadcast_to(reshape(node, pre + (n, 1) + post), pre + (n, r) + post)
        return TensorProxy(reshape(spread, pre + (n * r,) + post))
    if counts.shape != (n,):
        raise ValueError(f"operands could not be broadcast together with shape ({n},) "
                         f"{shapes.format_shape(counts.shape)}")
    if np.any(counts < 0):
        raise ValueError("repeats may not contain negative values.")
    return TensorProxy(take_static(node, axis, np.repeat(np.arange(n), counts)))


@implements(np.roll)
def roll(a: Any, shift: Any, axis: Any = None) -> TensorProxy:
    x = lift(a)
    if isinstance(shift, TensorProxy):
        raise UnsupportedOperationError(
            "np.roll with a traced shift is not supported inside @fuse; pass the shift as a "
            "Python int (or mark the argument static)")
    if axis is None:
        flat = roll(TensorProxy(reshape(x.node, (x.size,))), shift, 0)
        return TensorProxy(reshape(flat.node, x.shape))
    by_axis: dict[int, int] = {}
    for s, ax in np.broadcast(shift, axis):
        ax = shapes.normalize_axis(int(ax), x.ndim)
        by_axis[ax] = by_axis.get(ax, 0) + int(s)
    node = x.node
    for ax, s in by_axis.items():
        n = node.shape[ax]
        if n and s % n:
            node = take_static(node, ax, (np.arange(n) - s) % n)
    return TensorProxy(node)


@implements(np.diff)
def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = _NOVALUE,
         append: Any = _NOVALUE) -> TensorProxy:
    n = _static_int(n, "np.diff's n")
    if n == 0:
        return lift(a)
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n!r}")
    x = lift(a)
    if x.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = shapes.normalize_axis(axis, x.ndim)
    parts = []
    for extra in (prepend, x, append):
        if extra is _NOVALUE:
            continue
        e = lift(extra)
        if e.ndim == 0:
            e = TensorProxy(broadcast_to(e.node, x.shape[:axis] + (1,) + x.shape[axis + 1:]))
        parts.append(e)
    if len(parts) > 1:
        x = concatenate(parts, axis)
    lead = (slice(None),) * axis
    op = np.not_equal if x.dtype == dt.BOOL else np.subtract
    for _ in range(n):
        x = apply_ufunc(op, (x[lead + (slice(1, None),)], x[lead + (slice(None, -1),)]), {})
    return x


# -- triangles and diagonals ----------------------------------------------------------------------


def _tri(m: Any, k: Any, lower: bool) -> TensorProxy:
    x = lift(m)
    rows, cols = x.shape[-2:] if x.ndim >= 2 else (x.shape[-1], x.shape[-1])
    grid = (rows, cols)
    i = TensorProxy(Node.make(Op.IOTA, dt.INT64, grid, (), (0, 0, 1)))
    j = TensorProxy(Node.make(Op.IOTA, dt.INT64, grid, (), (1, 0, 1)))
    offset = apply_ufunc(np.subtract, (j, i), {})
    keep = apply_ufunc(np.less_equal if lower else np.greater_equal, (offset, k), {})
    return where(keep, x, TensorProxy(const(0, x.dtype)))


@implements(np.tril)
def tril(m: Any, k: Any = 0) -> TensorProxy:
    return _tri(m, k, lower=True)


@implements(np.triu)
def triu(m: Any, k: Any = 0) -> TensorProxy:
    return _tri(m, k, lower=False)


@implements(np.diagonal, method="diagonal")
def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> TensorProxy:
    x = _as_view_source(a)
    if x.ndim < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    a1 = shapes.normalize_axis(axis1, x.ndim, "axis1")
    a2 = shapes.normalize_axis(axis2, x.ndim, "axis2")
    if a1 == a2:
        raise ValueError("axis1 and axis2 cannot be the same")
    offset = _static_int(offset, "the diagonal's offset")
    n1, n2 = x.shape[a1], x.shape[a2]
    length = max(0, min(n1 + min(offset, 0), n2 - max(offset, 0)))
    others = [d for d in range(x.ndim) if d not in (a1, a2)]
    shape = tuple(x.shape[d] for d in others) + (length,)
    last = len(shape) - 1
    rows = []
    for d in range(x.ndim):
        if d in (a1, a2):
            start = max(0, -offset) if d == a1 else max(0, offset)
            rows.append((start if length else 0,
                         tuple(int(j == last and length > 1) for j in range(len(shape)))))
        else:
            pos = others.index(d)
            rows.append((0, tuple(int(j == pos) for j in range(len(shape)))))
    return x._view(tuple(rows), shape, readonly=True)


@implements(np.diag)
def diag(v: Any, k: int = 0) -> TensorProxy:
    x = lift(v)
    k = _static_int(k, "np.diag's k")
    if x.ndim == 2:
        return TensorProxy(diagonal(x, k).node)
    if x.ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = x.shape[0]
    size = n + abs(k)
    flat = (size * size,)
    start = k if k >= 0 else -k * size
    # the diagonal of a size x size matrix is the flat region start::size+1
    node = const(0, x.dtype, flat)
    if n:
        node = Node.make(Op.SETITEM, x.dtype, flat, (node, x.node), ((start, size + 1, n, 0),))
    return TensorProxy(reshape(node, (size, size)))


@implements(np.trace, method="trace")
def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: Any = None) -> TensorProxy:
    return _sum(diagonal(a, offset, axis1, axis2), -1, dtype, out)

