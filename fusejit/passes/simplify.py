"""Algebraic simplification: identities that hold exactly in IEEE arithmetic and NumPy's
integer semantics (``x + 0.0`` is *not* ``x``: -0.0 + 0.0 is 0.0; ``x * 0`` is not 0 for NaN)."""

from __future__ import annotations

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir.graph import Graph, Node, broadcast_view, const
from fusejit.ir.ops import Op
from fusejit.ir.shapes import compose, is_identity
from fusejit.passes.fold import uniform_value
from fusejit.passes.rewrite import rewrite

_EXACT_WIDENING = {  # casts that preserve every value (so a cast after them composes)
    ("b", "i"), ("b", "u"), ("b", "f"), ("i", "i"), ("u", "u"), ("u", "i"), ("f", "f"),
}
# ops that are correctly rounded in IEEE arithmetic (with -cl-fp32-correctly-rounded-divide-sqrt)
_CORRECTLY_ROUNDED = {Op.ADD, Op.SUB, Op.MUL, Op.TRUEDIV, Op.SQRT}


def _is(node: Node, value: float) -> bool:
    v = uniform_value(node)
    return v is not None and v == value and not (v == 0 and np.signbit(v) != np.signbit(value))


def _same(node: Node, like: Node) -> Node | None:
    """``node`` standing in for ``like``: same dtype, broadcast to its shape (None if it can't)."""
    if node.dtype != like.dtype:
        return None
    if node.shape == like.shape:
        return node
    if len(node.shape) <= len(like.shape):
        return broadcast_view(node, like.shape)
    return None


def _widens_exactly(src: np.dtype, dst: np.dtype) -> bool:
    if (src.kind, dst.kind) not in _EXACT_WIDENING and not (
            src.kind in "iu" and dst.kind == "f"):
        return False
    if src.kind in "iu" and dst.kind == "f":
        return np.finfo(dst).nmant + 1 >= dt.bits(src) - (src.kind == "i")
    if src.kind == "u" and dst.kind == "i":
        return dst.itemsize > src.itemsize
    return dst.itemsize >= src.itemsize


def _narrowed(node: Node) -> Node | None:
    """cast<T>(op_f64(cast<f64>(a_T), cast<f64>(b_T))) -> op_T(a, b) for correctly rounded ops.

    Exact: rounding to 53 bits and then to T's p bits equals rounding once when 53 >= 2p + 2
    (double rounding is innocuous), true for float32 (p=24) and float16 (p=11). NumPy's mean
    divides a float32 sum by an intp count in float64; this keeps it in float32.
    """
    inner = node.srcs[0]
    if inner.op not in _CORRECTLY_ROUNDED or inner.dtype != dt.FLOAT64:
        return None
    target = node.dtype
    if target not in (dt.FLOAT32, dt.FLOAT16):
        return None
    srcs = []
    for s in inner.srcs:
        if s.op is Op.CAST and s.srcs[0].dtype == target:
            srcs.append(s.srcs[0])
            continue
        value = uniform_value(s)
        if value is None or target.type(value) != value:
            return None
        srcs.append(const(target.type(value), target, s.shape))
    return inner.replace(dtype=target, srcs=tuple(srcs))


def _power(node: Node) -> Node | None:
    """Small integer powers as products (pow is the slowest built-in and a fused kernel should
    stay memory-bound):

    * ``x ** 1 -> x``; ``x ** 2 -> x*x`` (both correctly rounded; NumPy's ``**`` does this);
    * ``x ** -1 -> 1/x`` for floats (correctly rounded, so bit-identical to a correct pow);
    * ``x ** 3``, ``x ** 4``, ``x ** -2`` for floats: two roundings, within the documented
      ULP bound of pow (OpenCL's own pow may be 16 ULP off); exact for integers (wrapping).

    Every intermediate lies between 1 and the result (``x ** -2`` is ``(1/x) * (1/x)``, not
    ``1 / (x*x)``), so none overflows or underflows where the power itself does not: float16
    ``np.power(-358.5, -2)`` is the subnormal 7.8e-06, and ``1 / (x*x)`` gave 0 (``x*x``
    overflowed; found by fuzz seed 2222).
    """
    base, exponent = node.srcs
    value = uniform_value(exponent)
    if value is None or not np.isfinite(value) or value != int(value) or base.shape != node.shape:
        return None
    k = int(value)
    if k == 1:
        return base
    if k == 2:
        return node.replace(op=Op.MUL, srcs=(base, base))
    is_float = node.dtype.kind == "f"
    if node.dtype == dt.FLOAT16 and k in (3, 4, -2):
        return _half_power(node, k)
    if k == 3:
        square = node.replace(op=Op.MUL, srcs=(base, base))
        return node.replace(op=Op.MUL, srcs=(square, base))
    if k == 4:
        square = node.replace(op=Op.MUL, srcs=(base, base))
        return node.replace(op=Op.MUL, srcs=(square, square))
    if is_float and k in (-1, -2):
        inverse = node.replace(op=Op.TRUEDIV, srcs=(const(1, node.dtype, ()), base))
        return inverse if k == -1 else node.replace(op=Op.MUL, srcs=(inverse, inverse))
    return None


def _half_power(node: Node, k: int) -> Node:
    """float16 ``x ** 3``, ``x ** 4``, ``x ** -2`` as float32 products rounded once to float16.
    NumPy's float16 power is powf in float32, rounded to float16. ``x*x`` of a float16 is exact
    in float32, so these products are each one rounding of the exact power (correctly rounded),
    and rounding them to float16 gives NumPy's result for all 63488 finite float16 inputs
    (tests/targets/test_half2.py checks every one). float16 products round twice: 5176, 7734 and 17024
    inputs differed (float16 GELU's ``x ** 3``: 0.24 % of its elements)."""
    wide = Node.make(Op.CAST, dt.FLOAT32, node.shape, (node.srcs[0],))
    square = wide.replace(op=Op.MUL, srcs=(wide, wide))
    if k == 3:
        power = square.replace(srcs=(square, wide))
    elif k == 4:
        power = square.replace(srcs=(square, square))
    else:  # (x*x cannot overflow or underflow in float32)
        power = square.replace(op=Op.TRUEDIV, srcs=(const(1, dt.FLOAT32, node.shape), square))
    return Node.make(Op.CAST, dt.FLOAT16, node.shape, (power,))


# maximum & co. with a constant operand that is not NaN, as one comparison and a select: exact
# (NaN and signed zeros included), and cheaper than NaN propagation's two tests (an H200 ran a
# 32-op chain with 8 ``maximum(x, 0.1)`` at 0.163 ms, at copy speed, 0.132 ms, after). Also
# keeps a constant out of the NaN test: PoCL miscompiles ``(-0.0f > v || isnan(-0.0f)) ? ...``.
# Per (op, position of the constant): the comparison of ``x`` with ``c`` for dtypes whose NumPy
# loop returns the second of two equal operands and for those returning the first
# (dt.extremum_keeps_second), and whether it selects ``c`` (else it selects ``x``).
_EXTREMUM_SELECT = {
    (Op.MAXIMUM, 1): (Op.LE, Op.LT, True), (Op.MAXIMUM, 0): (Op.LT, Op.LE, True),
    (Op.MINIMUM, 1): (Op.GE, Op.GT, True), (Op.MINIMUM, 0): (Op.GT, Op.GE, True),
    (Op.FMAX, 1): (Op.GT, Op.GE, False), (Op.FMIN, 1): (Op.LT, Op.LE, False),
}


def _select_extremum(node: Node) -> Node | None:
    """``maximum(x, c) -> where(x <= c, c, x)`` and the like (see _EXTREMUM_SELECT)."""
    if node.dtype.kind != "f" or any(s.dtype != node.dtype for s in node.srcs):
        return None
    for pos in (1, 0):
        rule = _EXTREMUM_SELECT.get((node.op, pos))
        c, x = node.srcs[pos], node.srcs[1 - pos]
        value = uniform_value(c)
        if rule is None or value is None or np.isnan(value) or x.shape != node.shape:
            continue
        second_wins, first_wins, picks_c = rule
        test = second_wins if dt.extremum_keeps_second(node.dtype) else first_wins
        cond = Node.make(test, dt.BOOL, node.shape, (x, c))
        return node.replace(op=Op.WHERE, srcs=(cond, c, x) if picks_c else (cond, x, c))
    return None


def _simplify(node: Node) -> Node | None:
    op, srcs = node.op, node.srcs
    if op is Op.CAST:
        src = srcs[0]
        if src.dtype == node.dtype:
            return src  # cast to the same dtype
        if src.op is Op.CAST and _widens_exactly(src.srcs[0].dtype, src.dtype):
            return node.replace(srcs=src.srcs) if src.srcs[0].dtype != node.dtype else \
                src.srcs[0]  # cast(cast(x)) through an exact widening
        return _narrowed(node)
    if op is Op.VIEW and srcs[0].op is Op.VIEW:  # view of a view is one view
        inner = srcs[0]
        m = compose(inner.arg, node.arg)
        base = inner.srcs[0]
        return base if is_identity(m, base.shape, node.shape) else node.replace(
            srcs=(base,), arg=m)
    if op is Op.RESHAPE and srcs[0].op is Op.RESHAPE:
        return node.replace(srcs=srcs[0].srcs)  # reshape of a reshape
    if op is Op.RESHAPE and srcs[0].shape == node.shape:
        return srcs[0]
    if op is Op.MUL and node.dtype.kind != "c":  # (complex: inf * (1+0j) has a NaN part)
        for a, b in (srcs, srcs[::-1]):
            if _is(b, 1):
                return _same(a, node)  # x * 1 -> x
    if op is Op.ADD:
        for a, b in (srcs, srcs[::-1]):
            # x + (-0.0) -> x for floats; x + 0 -> x for integers
            if node.dtype.kind in "iu" and _is(b, 0) or node.dtype.kind == "f" and _is(b, -0.0):
                return _same(a, node)
    if op is Op.SUB and (_is(srcs[1], 0) and node.dtype.kind in "iuf"):
        return _same(srcs[0], node)  # x - 0 -> x (also -0.0 - 0.0 = -0.0)
    if op is Op.TRUEDIV and _is(srcs[1], 1) and node.dtype.kind != "c":
        return _same(srcs[0], node)  # x / 1 -> x
    if op is Op.POW and node.dtype.kind in "iuf" and srcs[0].dtype == node.dtype:
        return _power(node)
    if op is Op.NEG and srcs[0].op is Op.NEG:
        return _same(srcs[0].srcs[0], node)  # -(-x) -> x
    if op is Op.LOGICAL_NOT and srcs[0].op is Op.LOGICAL_NOT and srcs[0].srcs[0].dtype == dt.BOOL:
        return _same(srcs[0].srcs[0], node)
    if op in (Op.MAXIMUM, Op.MINIMUM, Op.FMAX, Op.FMIN):
        return _select_extremum(node)
    if op is Op.WHERE:
        cond = uniform_value(srcs[0])
        if cond is not None:
            return _same(srcs[1] if cond else srcs[2], node)  # where(const, a, b)
        if srcs[1] is srcs[2]:
            return _same(srcs[1], node)  # where(c, a, a) -> a
    return None


def simplify(graph: Graph) -> tuple[Graph, int]:
    return rewrite(graph, _simplify)


__all__ = ["simplify"]
