"""How a node's index maps to its operands' indices: the one place movement ops are interpreted.

Both the partitioner (which asks "at which index does this output read that reduction?") and
SourceModule (which emits loads) walk the graph with these functions, so their answers agree.
"""

from __future__ import annotations

from fusejit.ir.graph import Node
from fusejit.ir.ops import MOVEMENT, Op
from fusejit.ir.shapes import row_major_strides
from fusejit.ir.symbolic import Expr, Var

Index = tuple[Expr, ...]
_ZERO = Expr(0)


def unravel(linear: Expr, shape: tuple[int, ...]) -> Index:
    """Row-major multi-index of ``linear`` in ``shape`` (simplified)."""
    if 0 in shape:  # nothing is ever evaluated there (and the strides of (3, 0) contain 0)
        return tuple(Expr(0) for _ in shape)
    strides = row_major_strides(shape)
    return tuple((linear // st) % n if n > 1 else Expr(0) for st, n in zip(strides, shape))


def ravel(idx: Index, shape: tuple[int, ...]) -> Expr:
    out = Expr(0)
    for i, st in zip(idx, row_major_strides(shape)):
        out = out + i * st
    return out


def reshaped_index(idx: Index, shape: tuple[int, ...], new_shape: tuple[int, ...]) -> Index:
    """The index in ``new_shape`` of the element at ``idx`` in ``shape`` (a row-major reshape of
    the same size). Where ``new_shape`` splits each axis of ``shape`` into consecutive axes (a
    GEMM's rows N*H*W stored as an NHWC image), each axis is split on its own, so the other
    axes' expressions stay as they are (vector stores along the columns keep their lanes)."""
    old = [(i, n) for i, n in zip(idx, shape) if n != 1]
    dims = [k for k, n in enumerate(new_shape) if n != 1]
    out: list[Expr] = [_ZERO] * len(new_shape)
    pos = 0
    for i, n in old:
        group, size = [], 1
        while pos < len(dims) and size < n:
            group.append(dims[pos])
            size *= new_shape[dims[pos]]
            pos += 1
        if size != n:
            return unravel(ravel(idx, shape), new_shape)
        if len(group) == 1:
            out[group[0]] = i  # (as it is: no modulo for the simplifier to see through)
            continue
        for k, e in zip(group, unravel(i, tuple(new_shape[k] for k in group))):
            out[k] = e
    return tuple(out) if pos == len(dims) else unravel(ravel(idx, shape), new_shape)


def broadcast_index(idx: Index, out_shape: tuple[int, ...], src_shape: tuple[int, ...]) -> Index:
    """Index into an operand that is implicitly broadcast to ``out_shape`` (right-aligned)."""
    if src_shape == out_shape and 1 not in src_shape:  # the common case: the same index
        return tuple(idx)
    lead = len(out_shape) - len(src_shape)
    return tuple(_ZERO if n == 1 else idx[lead + k] for k, n in enumerate(src_shape))


def src_index(node: Node, k: int, idx: Index) -> Index:
    """Index of operand ``k`` of ``node`` read when ``node`` is evaluated at ``idx``."""
    src = node.srcs[k]
    if node.op is Op.VIEW:
        out = []
        for (off, coefs), n in zip(node.arg, src.shape):
            e = Expr(off)
            for j, c in enumerate(coefs):
                if c:
                    e = e + idx[j] * c
            out.append(e if n > 1 else Expr(0))
        return tuple(out)
    if node.op is Op.RESHAPE:
        return unravel(ravel(idx, node.shape), src.shape)
    if node.op is Op.SETITEM and k == 1:
        return setitem_value_index(node, idx)
    if node.op is Op.GATHER and k == 0:
        return gathered_index(node, idx, GATHERED)
    return broadcast_index(idx, node.shape, src.shape)


def setitem_value_index(node: Node, idx: Index) -> Index:
    """For SETITEM: the values' index at a base index, clamped into range when outside."""
    values = node.srcs[1]
    out = [Expr(0)] * values.ndim
    for (start, step, count, rdim), i in zip(node.arg, idx):
        if rdim >= 0 and values.shape[rdim] > 1:
            # position in the region along this dim; callers guard it with setitem_condition
            out[rdim] = (i - start) // step if step > 0 else (Expr(start) - i) // -step
    return tuple(out)


# The name of the gathered position in analyses (the partitioner, the in-place check): a value
# only known on the device, so it never equals another index (a reduction read through a gather
# is stored first; an in-place write read through one is staged). Lowering uses its own names.
GATHERED = "?gathered"


def gathered_index(node: Node, idx: Index, name: str) -> Index:
    """For GATHER: the operand's index, its gathered axis the device value ``name``."""
    axis = node.arg[0]
    n = node.srcs[0].shape[axis]
    out = list(broadcast_index(idx, node.shape, node.srcs[0].shape))
    out[axis] = Expr.of(Var(name, 0, n - 1)) if n > 1 else Expr(0)
    return tuple(out)


def is_movement(node: Node) -> bool:
    return node.op in MOVEMENT
