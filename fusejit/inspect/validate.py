"""``validate=True``: check each call's results against a float64 NumPy evaluation of its graph.

The bound rule
--------------
Every node of the traced graph gets, per element, a *reference* value (the node evaluated by
NumPy with every float widened to float64, on the call's actual inputs) and an absolute bound
``E`` on how far fusejit's value of the node may be from it:

* arguments, scalars and literals: ``E = 0`` (they are exactly the values the device sees);
* an elementwise op or cast: NumPy evaluates the op *in the node's own dtypes* at points of its
  operands' intervals ``ref ± E`` (both ends and two interior points, rounded outwards to the
  operand's dtype, the reference rounded to that dtype, and ±0 when the interval holds zero).
  ``E`` is the largest distance of those results from the node's reference, plus the op's
  documented ULP bound (``ops.OPS[op].ulp``, transcendental ops) in ULPs of the node's dtype.
  So rounding to the node's precision, cancellation, conditioning and discontinuities (floor,
  comparisons, casts to int) are measured on the call's values, not assumed. Periodic ops whose
  operand interval may span a period (``sin``/``cos`` with ``E >= 1/4``, ``tan``) or a jump
  (``remainder``/``fmod`` whose dividend interval holds a multiple of the divisor) may take any
  value of their range;
* reductions: ``sum`` adds the bound of summing ``n`` terms in any order in the accumulator
  dtype, ``(n-1)·u·Σ|x|`` (``prod``: the same, relative); ``max``/``min`` keep the largest
  operand bound; ``argmax``/``argmin``/``any``/``all`` must be decided by exact operands;
* an integer or bool value is exact or *unverifiable*, and so is a float → integer conversion of
  NaN, ±inf or an out-of-range value (implementation-defined in C), the sign bit of a NaN
  (``signbit``, ``copysign``) and an integer ``reciprocal`` of 0 (NumPy computes
  ``(int)(1.0 / 0)``); everything computed from an unverifiable value is unverifiable and not
  compared.

An output element passes when ``|result - ref| <= E + 1 ULP`` of the output's dtype (the
constant covers rounding the reference itself); NaN must match NaN, an infinity the same
infinity. ``ValidationError`` names the output, its largest error in ULPs (at the reference
value) and the bound at that element, in the same units.

Validation costs nothing when it is off: the call path checks one attribute.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl

from fusejit.errors import UnsupportedDTypeError, ValidationError
from fusejit.ir.graph import Graph, Node, toposort
from fusejit.ir.ops import LEAVES, OPS, REDUCE, Op
from fusejit.ir.reference import eval_node, with_derived
from fusejit.inspect.readback import to_host

SLACK_ULP = 1.0  # the constant of the bound rule, in ULPs of the output's dtype
_F64 = np.dtype(np.float64)
_MAX_POINTS = 256  # operand point combinations evaluated per node before giving up (unverifiable)


@dataclass
class Bound:
    """A node's reference value (float64 for floats) and its error bound (inf: unverifiable)."""

    ref: np.ndarray
    err: np.ndarray


# -- entry point from the call path --------------------------------------------------------------


def run_checked(exe: Any, flat: Sequence[Any], queue: cl.CommandQueue, name: str) -> Any:
    """Run ``exe`` on ``flat`` and validate what it returned and wrote; returns its leaves."""
    graph: Graph = exe.graph
    _refuse_complex(graph, name)
    values = _arguments(graph, flat, exe.constants)
    leaves = exe.run(flat, queue)
    results: list[tuple[str, Node, np.ndarray]] = []
    for spec, leaf in zip(exe.outputs, leaves):
        if spec.kind == "node":
            results.append((f"output {spec.index}", graph.outputs[spec.index], to_host(leaf)))
    for p, node in graph.writes:
        param = graph.params[p]
        results.append((f"argument {param.source} (written in place)", node,
                        to_host(flat[param.source])))
    check(graph, values, results, name)
    return leaves


def _refuse_complex(graph: Graph, name: str) -> None:
    """The bound rules below are for real values: a graph with complex ones is refused before
    it runs (a bound that ignored them would verify nothing)."""
    for node in toposort([*graph.outputs, *(n for _, n in graph.writes)]):
        if node.dtype.kind == "c":
            raise UnsupportedDTypeError(
                f"validate ({name}): {node.describe()} is complex, and fusejit.inspect.validate has no "
                "error bounds for complex values yet; call without validate=True and compare "
                "with fusejit.testing.assert_matches (normwise ULP bounds)")


def check(graph: Graph, values: Sequence[Any], results: Sequence[tuple[str, Node, Any]],
          name: str = "function") -> None:
    """Raise ValidationError if a result is further from its reference than its bound."""
    env = bounds(graph, values)
    for what, node, got in results:
        with np.errstate(all="ignore"):
            problem = _compare(np.asarray(got), node, env[node])
        if problem is not None:
            raise ValidationError(f"validate ({name}): {what} {node.describe()}: {problem} "
                                  "(bound rule: fusejit.inspect.validate)")


def _arguments(graph: Graph, flat: Sequence[Any], constants: dict[int, np.ndarray]) -> list[Any]:
    """Parameter values (indexed like ``graph.params``) before the call writes any of them."""
    out: list[Any] = []
    for p, param in enumerate(graph.params):
        if param.kind == "const":
            out.append(constants[p])
        elif param.kind == "derived":
            out.append(None)  # filled in below, from the scalars it derives from
        elif param.kind == "array":
            out.append(np.asarray(to_host(flat[param.source])).astype(param.dtype))
        else:
            out.append(flat[param.source])
    return with_derived(graph, out)


# -- bounds ----------------------------------------------------------------------------------------


def bounds(graph: Graph, values: Sequence[Any]) -> dict[Node, Bound]:
    """Reference and bound of every node (the rule in the module docstring)."""
    env: dict[Node, Bound] = {}
    with np.errstate(all="ignore"):
        for node in graph.toposort():
            env[node] = _bound(node, [env[s] for s in node.srcs], values)
    return env


def _wide(node: Node) -> Node:
    return node.replace(dtype=_F64) if node.dtype.kind == "f" else node


def _bound(node: Node, srcs: list[Bound], values: Sequence[Any]) -> Bound:
    op = node.op
    if op in LEAVES:
        v = np.asarray(eval_node(node, [], values))
        return Bound(v.astype(_F64) if v.dtype.kind == "f" else v, np.zeros(node.shape))
    if op in (Op.VIEW, Op.RESHAPE, Op.SETITEM):  # move the bounds with the values
        ref = eval_node(_wide(node), [s.ref for s in srcs])
        err = eval_node(node.replace(dtype=_F64), [np.broadcast_to(s.err, s.ref.shape)
                                                   for s in srcs])
        return Bound(ref, err)
    if op is Op.GATHER:  # the values move, the index is exact
        ref = eval_node(_wide(node), [srcs[0].ref, srcs[1].ref])
        moved = np.broadcast_to(srcs[0].err, srcs[0].ref.shape)
        err = eval_node(node.replace(dtype=_F64), [moved, srcs[1].ref])
        return Bound(ref, err)
    if op in _REDUCTIONS:
        return _reduce(node, srcs[0])
    if op is Op.MATMUL:
        return _matmul(node, *srcs)
    if op is Op.SCAN:
        return _scan(node, srcs[0])
    if op is Op.SVDVALS:
        return _svdvals(node, srcs[0])
    return _pointwise(node, srcs)


def _ulp(ref: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """ULP of ``dtype`` at each reference value (the largest finite one beyond the range)."""
    s = np.spacing(np.abs(ref).astype(dtype)).astype(_F64)
    return np.where(np.isfinite(s), s, float(np.spacing(np.finfo(dtype).max)))


def _outward(x: np.ndarray, dtype: np.dtype, up: bool) -> np.ndarray:
    r = x.astype(dtype)
    behind = (r < x) if up else (r > x)
    return np.where(behind, np.nextafter(r, dtype.type(np.inf if up else -np.inf)), r)


def _points(src: Node, b: Bound) -> tuple[list[np.ndarray], np.ndarray]:
    """Values of ``src`` (in its dtype) to evaluate a consumer at, and where it is unknown."""
    err = np.broadcast_to(b.err, b.ref.shape)
    if src.dtype.kind != "f":
        unknown = np.isinf(err)
        if src.dtype.kind == "b" and unknown.any():
            return [b.ref, np.where(unknown, ~b.ref, b.ref)], np.zeros(err.shape, bool)
        return [b.ref], unknown
    d = src.dtype
    finite = np.isfinite(err)
    e = np.where(finite, err, 0.0)
    mid = b.ref.astype(d)
    if not e.any():
        return [mid], ~finite
    pts = [mid, _outward(b.ref - e, d, up=False), _outward(b.ref + e, d, up=True)]
    pts += [np.where(e > 0, (b.ref + k * e).astype(d), mid) for k in (-0.5, 0.5)]
    zero = (pts[1] <= 0) & (pts[2] >= 0) & (e > 0)
    if zero.any():
        pts += [np.where(zero, d.type(0.0), mid), np.where(zero, d.type(-0.0), mid)]
    return pts, ~finite


def _distance(ref: np.ndarray, got: np.ndarray) -> np.ndarray:
    """|got - ref| with NaN == NaN, equal infinities 0 apart, NaN vs number infinitely far."""
    a, b = ref.astype(_F64), np.broadcast_to(got, ref.shape).astype(_F64)
    d = np.where(np.isinf(a) & (a == b), 0.0, np.abs(a - b))
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    d = np.where(nan_a & nan_b, 0.0, np.where(nan_a | nan_b, np.inf, d))
    return np.where(np.isnan(d), np.inf, d)


def _pointwise(node: Node, srcs: list[Bound]) -> Bound:
    ref = np.asarray(eval_node(_wide(node), [s.ref for s in srcs]))
    point_sets, unknown = [], np.zeros(node.shape, bool)
    for s, b in zip(node.srcs, srcs):
        pts, unk = _points(s, b)
        point_sets.append(pts)
        unknown |= np.broadcast_to(unk, node.shape)
    combos = list(itertools.islice(itertools.product(*point_sets), _MAX_POINTS + 1))
    if len(combos) > _MAX_POINTS:
        inexact = np.zeros(node.shape, bool)
        for b in srcs:
            inexact |= np.broadcast_to(b.err != 0, node.shape)
        unknown |= inexact
        combos = combos[:1]
    err = np.zeros(node.shape)
    for combo in combos:
        got = np.asarray(eval_node(node, list(combo)))
        err = np.maximum(err, _distance(ref, got) if node.dtype.kind == "f"
                         else np.where(got != ref, np.inf, 0.0))
        if node.op is Op.CAST and node.dtype.kind in "iu" and node.srcs[0].dtype.kind == "f":
            unknown |= _undefined_conversion(combo[0], node.dtype)
        unknown |= _implementation_defined(node, combo)
    if node.dtype.kind == "f":
        err = np.maximum(err, _wraparound(node, srcs))
        bound = OPS[node.op].ulp
        if bound is not None:
            err = err + bound.get(8 * node.dtype.itemsize, 0.0) * _ulp(ref, node.dtype)
    return Bound(ref, np.where(unknown, np.inf, err))


def _wraparound(node: Node, srcs: list[Bound]) -> np.ndarray | float:
    """Periodic ops over an interval that may span a period can take any value of their range,
    which the sampled points need not show: sin/cos (|E| >= 1/4), tan, remainder and fmod."""
    if node.op in (Op.SIN, Op.COS, Op.TAN):
        wide = np.broadcast_to(srcs[0].err, node.shape) >= 0.25
        return np.where(wide, np.inf if node.op is Op.TAN else 2.0, 0.0)
    if node.op in (Op.MOD, Op.FMOD):
        ea, eb = (np.broadcast_to(s.err, node.shape) for s in srcs)
        a = np.broadcast_to(srcs[0].ref, node.shape).astype(_F64)
        b = np.broadcast_to(srcs[1].ref, node.shape).astype(_F64)
        cut = np.floor if node.op is Op.MOD else np.trunc  # where the result jumps by |b|
        jumps = cut((a - ea) / b) != cut((a + ea) / b)
        return np.where(((ea > 0) & jumps) | (eb > 0), 2 * (np.abs(b) + eb), 0.0)
    return 0.0


def _implementation_defined(node: Node, combo: Sequence[np.ndarray]) -> np.ndarray | bool:
    """Elements whose value IEEE 754 or C leave open: the sign bit of a NaN (``signbit``,
    ``copysign``), and NumPy's integer ``reciprocal`` of 0, which is ``(int)(1.0 / 0)``."""
    if node.op in (Op.SIGNBIT, Op.COPYSIGN):
        x = np.asarray(combo[-1])
        return np.broadcast_to(np.isnan(x), node.shape) if x.dtype.kind == "f" else False
    if node.op is Op.RECIPROCAL and node.dtype.kind in "iu":
        return np.broadcast_to(np.asarray(combo[0]) == 0, node.shape)
    return False


def _undefined_conversion(x: np.ndarray, target: np.dtype) -> np.ndarray:
    bits = 8 * target.itemsize
    lo, hi = (0.0, 2.0 ** bits) if target.kind == "u" else (-(2.0 ** (bits - 1)),
                                                            2.0 ** (bits - 1))
    t = np.trunc(x.astype(_F64))
    return ~np.isfinite(t) | (t < lo) | (t >= hi)


# -- reductions ------------------------------------------------------------------------------------

_REDUCTIONS = REDUCE


def _reduce(node: Node, src: Bound) -> Bound:
    axes = tuple(node.arg)
    ref = np.asarray(eval_node(_wide(node), [src.ref]))
    err = np.broadcast_to(src.err, src.ref.shape)
    unknown = np.isinf(err).any(axis=axes, keepdims=True)
    inexact = (err != 0).any(axis=axes, keepdims=True)
    e = np.where(np.isinf(err), 0.0, err)
    n = math.prod(src.ref.shape[a] for a in axes)
    kind = node.dtype.kind
    if node.op in (Op.SUM, Op.PROD) and kind == "f":
        acc = np.dtype(np.float32) if node.dtype.itemsize < 4 else node.dtype
        u = np.finfo(acc).eps / 2
        x = src.ref
        finite = np.isfinite(x)
        mag = np.where(finite, np.abs(x) + e, 0.0)
        if node.op is Op.SUM:
            total = e.sum(axis=axes, keepdims=True) + max(n - 1, 0) * u * mag.sum(
                axis=axes, keepdims=True)
            over = mag.sum(axis=axes, keepdims=True) > np.finfo(acc).max
        else:
            logs = np.log2(np.where(finite & (mag > 0), mag, 1.0))
            over = (np.where(logs > 0, logs, 0).sum(axis=axes, keepdims=True)
                    > np.log2(np.finfo(acc).max) - 1) | (np.where(logs < 0, logs, 0).sum(
                        axis=axes, keepdims=True) < np.log2(np.finfo(acc).tiny) + 1)
            rel = np.where(e > 0, np.where(np.abs(x) > 0, e / np.abs(x), np.inf), 0.0)
            total = np.abs(ref) * (max(n - 1, 0) * u + rel.sum(axis=axes, keepdims=True))
        total = total + 0.5 * _ulp(ref, node.dtype)  # the final rounding to the result dtype
        out = np.where(unknown | over | np.isnan(total), np.inf, total)
    elif node.op in (Op.MAX, Op.MIN) and kind == "f":
        out = np.where(unknown, np.inf, e.max(axis=axes, keepdims=True, initial=0.0))
    elif node.op in (Op.ANY, Op.ALL):
        x = src.ref
        certain = ~np.isinf(err) & (err == 0)
        true, false = certain & (x != 0), certain & (x == 0)
        if node.op is Op.ANY:
            decided = true.any(axis=axes, keepdims=True) | false.all(axis=axes, keepdims=True)
        else:
            decided = false.any(axis=axes, keepdims=True) | true.all(axis=axes, keepdims=True)
        out = np.where(decided, 0.0, np.inf)
    else:  # integer sums and products wrap the same way; arg-reductions and bitwise
        # reductions need exact operands
        out = np.where(unknown | inexact, np.inf, 0.0)
    return Bound(ref, np.broadcast_to(out, node.shape))


def _scan(node: Node, src: Bound) -> Bound:
    """A scan: element i is bounded as the reduction of the prefix ``[0, i]`` (summed in any
    grouping: ``(L - 1)·u·cumsum(|x|)`` for floats, the relative errors added for products,
    the largest operand bound for max/min); other scans are exact from exact operands."""
    combine, axis = node.arg
    ref = np.asarray(eval_node(_wide(node), [src.ref]))
    err = np.broadcast_to(src.err, src.ref.shape)
    unknown = np.logical_or.accumulate(np.isinf(err), axis=axis)
    e = np.where(np.isinf(err), 0.0, err)
    n = node.shape[axis]
    if node.dtype.kind == "f" and combine in (Op.ADD, Op.MUL):
        u = np.finfo(np.float32 if node.dtype.itemsize < 4 else node.dtype).eps / 2
        x = src.ref
        finite = np.isfinite(x)
        mag = np.where(finite, np.abs(x) + e, 0.0)
        if combine is Op.ADD:
            total = np.cumsum(e, axis=axis) + max(n - 1, 0) * u * np.cumsum(mag, axis=axis)
        else:
            rel = np.where(e > 0, np.where(np.abs(x) > 0, e / np.abs(x), np.inf), 0.0)
            total = np.abs(ref) * (max(n - 1, 0) * u + np.cumsum(rel, axis=axis))
        total = total + 0.5 * _ulp(ref, node.dtype)
        out = np.where(unknown | ~np.isfinite(total), np.inf, total)
    elif node.dtype.kind == "f":  # max/min and their NaN-skipping forms pick an operand
        out = np.where(unknown, np.inf, np.maximum.accumulate(e, axis=axis))
    else:
        inexact = np.logical_or.accumulate(e != 0, axis=axis)
        out = np.where(unknown | inexact, np.inf, 0.0)
    return Bound(ref, out)


def _svdvals(node: Node, src: Bound) -> Bound:
    """Singular values move by at most the operand error's spectral norm (Weyl), bounded by
    its Frobenius norm; Jacobi's rotations add ``~M·eps·σ_max`` (a few sweeps of M-term dot
    products), plus the final rounding."""
    ref = np.asarray(eval_node(_wide(node), [src.ref]))
    err = np.broadcast_to(src.err, src.ref.shape)
    moved = np.sqrt(np.sum(np.where(np.isinf(err), np.inf, err) ** 2, axis=(-2, -1)))
    m = max(src.ref.shape[-2:])
    top = ref.max(axis=-1, initial=0.0)
    total = moved + 8 * m * np.finfo(node.dtype).eps * top
    out = total[..., None] + 0.5 * _ulp(ref, node.dtype)
    return Bound(ref, np.where(np.isfinite(out), out, np.inf))


def _matmul(node: Node, a: Bound, b: Bound) -> Bound:
    """A matrix product: the operands' bounds carried through the sums of products, plus
    summing K products in any order in the accumulator dtype, ``K·u·Σ|a||b|``, and the final
    rounding; integer and bool products are exact from exact operands."""
    ea = np.broadcast_to(a.err, a.ref.shape)
    eb = np.broadcast_to(b.err, b.ref.shape)
    unknown = (np.matmul(np.isinf(ea).astype(_F64), np.ones(b.ref.shape)) +
               np.matmul(np.ones(a.ref.shape), np.isinf(eb).astype(_F64))) > 0
    if node.dtype.kind != "f":
        ref = np.asarray(eval_node(node, [a.ref.astype(node.dtype), b.ref.astype(node.dtype)]))
        inexact = (np.matmul((ea != 0).astype(_F64), np.ones(b.ref.shape)) +
                   np.matmul(np.ones(a.ref.shape), (eb != 0).astype(_F64))) > 0
        return Bound(ref, np.where(unknown | inexact, np.inf, 0.0))
    ref = np.asarray(eval_node(_wide(node), [a.ref, b.ref]))
    acc = np.dtype(np.float32) if node.dtype.itemsize < 4 else node.dtype
    u = np.finfo(acc).eps / 2
    fa = np.where(np.isinf(ea), 0.0, ea)
    fb = np.where(np.isinf(eb), 0.0, eb)
    ma = np.where(np.isfinite(a.ref), np.abs(a.ref), 0.0)
    mb = np.where(np.isfinite(b.ref), np.abs(b.ref), 0.0)
    k = a.ref.shape[-1]
    carried = fa @ mb + ma @ fb + fa @ fb
    total = carried + k * u * ((ma + fa) @ (mb + fb)) + 0.5 * _ulp(ref, node.dtype)
    over = (ma + fa) @ (mb + fb) > np.finfo(acc).max
    return Bound(ref, np.where(unknown | over | np.isnan(total), np.inf, total))


# -- comparison ------------------------------------------------------------------------------------


def _compare(got: np.ndarray, node: Node, b: Bound) -> str | None:
    ref, err = b.ref, np.broadcast_to(b.err, node.shape)
    if got.shape != node.shape or got.size == 0:
        return None if got.shape == node.shape else f"shape {got.shape} != {node.shape}"
    check = np.isfinite(err)
    if node.dtype.kind != "f":
        bad = check & (got != ref)
        if not bad.any():
            return None
        i = tuple(int(k) for k in np.argwhere(bad)[0])
        return f"{int(bad.sum())} element(s) differ from the reference; first at {i}: " \
               f"{got[i]!r} != {ref[i]!r}"
    ulp = _ulp(ref, node.dtype)
    dist = _distance(ref, got)
    bound = err + SLACK_ULP * ulp
    bad = check & (dist > bound)
    if not bad.any():
        return None
    ratio = np.where(bad, dist / bound, 0.0)
    i = tuple(int(k) for k in np.unravel_index(np.argmax(ratio), ratio.shape))
    return (f"max error {dist[i] / ulp[i]:.4g} ULP at {i} (result {got[i]!r}, float64 "
            f"reference {ref[i]!r}) exceeds the bound {bound[i] / ulp[i]:.4g} ULP; "
            f"{int(bad.sum())} of {got.size} element(s) beyond their bound")
