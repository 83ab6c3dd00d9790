"""Constant folding: ops whose operands are all literals become literals.

Values come from the op table's NumPy references (``reference.eval_node``), so folding rounds
exactly as NumPy would at run time, float16 included.
"""

from __future__ import annotations

import numpy as np

from fusejit.ir.graph import Graph, Node, const, const_value
from fusejit.ir.ops import LEAVES, REDUCE, Op
from fusejit.ir.reference import eval_node
from fusejit.passes.rewrite import rewrite

_FOLD_REDUCE_LIMIT = 1 << 16  # elements; larger constant reductions stay on the device


def uniform_value(node: Node) -> np.generic | None:
    """The value of a literal, or of a literal viewed/broadcast to any shape."""
    while node.op in (Op.VIEW, Op.RESHAPE):
        node = node.srcs[0]
    return const_value(node) if node.op is Op.CONST else None


# Float ops whose result is NaN, whatever their other operands, when the operand at one of these
# positions is NaN (IEEE propagation). Folding them keeps compile-time NaNs away from the OpenCL
# compiler: PoCL's constant folding of trunc/floor/ceil/round/exp/expm1 (and float tanh) on a
# NaN it derived itself (``np.floor(x + np.nan)``, ``np.trunc(x % 0.0)``) yields garbage.
_NAN_OPERANDS: dict[Op, tuple[int, ...]] = {
    **{op: (0, 1) for op in (Op.ADD, Op.SUB, Op.MUL, Op.TRUEDIV, Op.FLOORDIV, Op.MOD, Op.FMOD,
                             Op.ARCTAN2, Op.NEXTAFTER, Op.LOGADDEXP, Op.LOGADDEXP2,
                             Op.MAXIMUM, Op.MINIMUM)},
    Op.LDEXP: (0,), Op.HEAVISIDE: (0,),  # (copysign(nan, y) takes y's sign: not folded)
}


def _always_nan(node: Node, values: list[np.generic | None]) -> bool:
    positions = _NAN_OPERANDS.get(node.op)
    if positions is None or node.dtype.kind != "f":
        return False
    if any(values[i] is not None and node.srcs[i].dtype.kind == "f" and np.isnan(values[i])
           for i in positions):
        return True
    # x % 0.0 and fmod(x, 0.0) are NaN for every x (C99 fmod; NumPy's remainder uses it)
    return node.op in (Op.MOD, Op.FMOD) and values[1] is not None and values[1] == 0


def _nan_result(node: Node, values: list[np.generic | None]) -> np.generic:
    """The NaN NumPy computes there, with its sign: the NaN operand's (x + -nan is -nan), or
    the invalid operation's (x % 0.0), evaluated with 1 standing in for the unknown operands."""
    known = [np.asarray(v if v is not None else 1, dtype=s.dtype)
             for s, v in zip(node.srcs, values)]
    scalar = node.replace(shape=(), srcs=tuple(const(k, s.dtype) for s, k in zip(node.srcs,
                                                                                  known)))
    with np.errstate(all="ignore"):
        return eval_node(scalar, known).reshape(-1)[0]


def _fold(node: Node) -> Node | None:
    if node.op in LEAVES or node.op in (Op.SETITEM, Op.GATHER, Op.SCAN, Op.SVDVALS):
        return None
    if node.op in (Op.VIEW, Op.RESHAPE):
        # a literal seen through views is one broadcast literal (VIEW of CONST is canonical)
        value = uniform_value(node.srcs[0])
        return None if value is None else const(value, node.dtype, node.shape)
    values = [uniform_value(s) for s in node.srcs]
    if _always_nan(node, values):
        return const(_nan_result(node, values), node.dtype, node.shape)
    if any(v is None for v in values):
        return None
    if node.op in REDUCE:
        if node.srcs[0].size > _FOLD_REDUCE_LIMIT:
            return None
        srcs = [np.full(s.shape, v, dtype=s.dtype) for s, v in zip(node.srcs, values)]
        out = eval_node(node, srcs)
        if not np.all(out == out.reshape(-1)[0]) and not np.all(np.isnan(out)):
            return None
        return const(out.reshape(-1)[0], node.dtype, node.shape)
    scalar = node.replace(shape=(), srcs=tuple(const(v, s.dtype) for s, v in zip(node.srcs,
                                                                                    values)))
    out = eval_node(scalar, [np.asarray(v) for v in values])
    return const(out.reshape(-1)[0], node.dtype, node.shape)


def fold(graph: Graph) -> tuple[Graph, int]:
    return rewrite(graph, _fold)
