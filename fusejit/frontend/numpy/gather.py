"""Gathers with static output shapes: ``x[idx]``, ``np.take``, ``np.take_along_axis``.

Indices known while tracing (NumPy arrays, lists, ints) are checked on the host: an index out of
bounds raises NumPy's ``IndexError`` before anything is launched, and the read becomes affine
pieces (``numpy_build.take_static``), so no index buffer exists when the indices form runs.

Indices computed by the traced function (or passed in) become a GATHER node, read in the same
kernel as the work around it. NumPy's index modes are traced before the gather: negative indices
count from the end (``mode='raise'``, the default, and ``x[idx]``), ``mode='wrap'`` takes them
modulo the axis length, ``mode='clip'`` clamps them. Under ``mode='raise'`` (and ``x[idx]``,
``take_along_axis``) the gather is checked: an index still out of bounds sets the kernel's
status flag, and the call raises ``fusejit.errors.DeviceIndexError`` (an IndexError) instead of
returning (the read itself is clamped: memory is never read out of bounds). Boolean masks give
data-dependent shapes and stay refused.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir import shapes
from fusejit.ir.graph import Node, const
from fusejit.frontend.dispatch import HOOKS, implements
from fusejit.frontend.numpy.build import _write_out, along, gather, take_static
from fusejit.frontend.trace import (
    TensorProxy,
    _is_array_index,
    _list_index,
    broadcast_to,
    cast,
    lift,
    reshape,
    where,
)
from fusejit.frontend.ufuncs import apply_ufunc


class _Index:
    """One index of a gather: host-known (``static``, an int64 array) or traced (``node``)."""

    def __init__(self, value: Any) -> None:
        if isinstance(value, (list, tuple)):
            value = _list_index(value)
        self.static = None if isinstance(value, TensorProxy) else np.asarray(value)
        self.node = value.node if isinstance(value, TensorProxy) else None
        if self.static is not None:
            if self.static.dtype.kind not in "iu":
                raise IndexError("arrays used as indices must be of integer (or boolean) type")
            self.static = self.static.astype(np.int64)
        elif self.node.dtype.kind not in "iu":
            raise IndexError("arrays used as indices must be of integer (or boolean) type")
        else:  # NumPy indexes with intp: an int8 index of an axis of 300 must not overflow
            self.node = cast(self.node, dt.INT64)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.static.shape if self.static is not None else self.node.shape

    def normalized(self, n: int, axis: int, mode: str) -> _Index:
        """NumPy's index ``mode`` applied: in bounds (static), or traced to be (before the
        clamp every gather does)."""
        out = object.__new__(_Index)
        if self.static is not None:
            i = self.static
            if mode == "wrap":
                i = i % n if n else i
            elif mode == "clip":
                i = np.clip(i, 0, max(n - 1, 0))
            else:
                bad = (i < -n) | (i >= n)
                if bad.any():
                    raise IndexError(f"index {int(i[bad].reshape(-1)[0])} is out of bounds "
                                     f"for axis {axis} with size {n}")
                i = i % n if n else i
            out.static, out.node = i, None
            return out
        i = TensorProxy(self.node)
        if mode == "wrap":
            i = apply_ufunc(np.remainder, (i, n), {})
        elif mode != "clip":
            i = where(apply_ufunc(np.less, (i, 0), {}), apply_ufunc(np.add, (i, n), {}), i)
        out.static, out.node = None, i.node
        return out


def _take_merged(x: Node, axis: int, index: _Index, checked: bool = True) -> Node:
    """``x`` read along ``axis`` at ``index`` (in bounds, or out of bounds only where
    ``checked`` raises): the axis replaced by index's dims."""
    pre, post = x.shape[:axis], x.shape[axis + 1:]
    ishape = index.shape
    if index.static is not None:
        flat = take_static(x, axis, index.static.reshape(-1))
        return reshape(flat, pre + ishape + post)
    if x.shape[axis] == 0 and math.prod(ishape):  # every index is out of bounds there
        raise IndexError(f"index 0 is out of bounds for axis {axis} with size 0")
    lead = len(ishape) - 1 if ishape else 0
    xb = reshape(x, pre + (1,) * lead + (x.shape[axis],) + post)
    line = reshape(index.node, (1,) * len(pre) + (ishape or (1,)) + (1,) * len(post))
    out = gather(xb, len(pre) + lead, line, checked)
    return reshape(out, pre + ishape + post)


def advanced_getitem(x: TensorProxy, key: Any) -> TensorProxy:
    """``x[key]`` with integer arrays in ``key`` (NumPy's advanced indexing)."""
    parts = list(key) if isinstance(key, tuple) else [key]
    if sum(k is Ellipsis for k in parts) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(k is not None and k is not Ellipsis for k in parts)
    if n_real > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, but "
                         f"{n_real} were indexed")
    fill = [slice(None)] * (x.ndim - n_real)
    if any(k is Ellipsis for k in parts):  # (``in`` would compare traced arrays with ==)
        i = next(j for j, k in enumerate(parts) if k is Ellipsis)
        parts = parts[:i] + fill + parts[i + 1:]
    else:
        parts = parts + fill
    # basic indexing first, the advanced entries (arrays, and ints among them) kept whole
    basic, adv_pos, adv_idx, dim, ydim = [], [], [], 0, 0
    for k in parts:
        if k is None:
            basic.append(None)
            ydim += 1
            continue
        if _is_array_index(k) or isinstance(k, (int, np.integer)):
            basic.append(slice(None))
            adv_pos.append(ydim)
            adv_idx.append((_Index(k), dim))
        else:
            basic.append(k)
        ydim += 1
        dim += 1
    y = x[tuple(basic)].node
    sizes = [y.shape[p] for p in adv_pos]
    bshape = shapes.broadcast_shapes(*(i.shape for i, _ in adv_idx))
    normal = [i.normalized(n, d, "raise") for (i, d), n in zip(adv_idx, sizes)]
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    at = adv_pos[0] if adjacent else 0
    # the indexed dims moved together (at ``at``), merged into one: one index into them
    rest = [d for d in range(y.ndim) if d not in adv_pos]
    order = rest[:at] + adv_pos + rest[at:]
    moved = TensorProxy(y).transpose(order).node if order != list(range(y.ndim)) else y
    merged_shape = moved.shape[:at] + (math.prod(sizes),) + moved.shape[at + len(sizes):]
    merged = reshape(moved, merged_shape)
    strides = shapes.row_major_strides(tuple(sizes))
    if all(i.static is not None for i in normal):
        linear = sum(np.broadcast_to(i.static, bshape) * s for i, s in zip(normal, strides))
        flat = _Index(np.asarray(linear, np.int64))
    else:
        total: Any = 0
        for i, s in zip(normal, strides):
            term = TensorProxy(cast(i.node, dt.INT64)) if i.node is not None else i.static
            total = apply_ufunc(np.add, (total, apply_ufunc(np.multiply, (term, s), {})), {})
        flat = _Index(TensorProxy(broadcast_to(total.node, bshape)))
    return TensorProxy(_take_merged(merged, at, flat))


@implements(np.take, method="take")
def take(a: Any, indices: Any, axis: int | None = None, out: Any = None,
         mode: str = "raise") -> TensorProxy:
    x = lift(a)
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    node, axis = along(x, axis)
    index = _Index(indices)
    n = node.shape[axis]
    if n == 0 and math.prod(index.shape):
        raise IndexError("cannot do a non-empty take from an empty axes.")
    # (wrap: in range by construction; clip: clamped by the gather, as NumPy clips)
    result = TensorProxy(_take_merged(node, axis, index.normalized(n, axis, mode),
                                      checked=mode == "raise"))
    return _write_out(result, out)


@implements(np.take_along_axis)
def take_along_axis(arr: Any, indices: Any, axis: int | None = -1) -> TensorProxy:
    x = lift(arr)
    index = _Index(indices)
    node = x.node
    if axis is None:
        if len(index.shape) != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        node, axis = reshape(node, (x.size,)), 0
    if len(index.shape) != node.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    axis = shapes.normalize_axis(axis, node.ndim)
    n = node.shape[axis]
    if n == 0 and math.prod(index.shape):
        raise IndexError("cannot do a non-empty take from an empty axes.")
    index = index.normalized(n, axis, "raise")
    inode = index.node if index.node is not None else lift(index.static).node
    shape = shapes.broadcast_shapes(node.shape[:axis] + (1,) + node.shape[axis + 1:],
                                    inode.shape[:axis] + (1,) + inode.shape[axis + 1:])
    shape = shape[:axis] + (inode.shape[axis],) + shape[axis + 1:]
    if 0 in shape:
        return TensorProxy(const(0, x.dtype, shape))
    return TensorProxy(gather(node, axis, broadcast_to(inode, shape), checked=True))


HOOKS["gather"] = advanced_getitem  # x[key] with an integer array in key (TensorProxy.__getitem__)
