"""The fuzz oracle: NumPy's values for a program, and how far fusejit may be from each element.

Tolerance rule (documented here, used by every fuzz comparison)
--------------------------------------------------------------
Every value carries, per element, its NumPy result ``center``, an absolute bound ``err`` on how
far a correct fusejit result may be from it, and a flag ``zsign`` (the sign of a zero is not
specified). A value is *exact* where ``err == 0``: fusejit must then match NumPy bit for bit
(NaN matches any NaN; ``-0.0`` must match ``-0.0`` unless ``zsign``).

* Arguments and literals are exact.
* An elementwise step whose operands are exact at an element is exact there, unless it is
  transcendental (``exp``, ``sin``, ``pow`` on floats, ...): then it may be ``op_ulp(op, dtype)``
  ULP off (``fusejit.testing.op_ulp``, the op table's documented bound, which includes NumPy's
  own libm error). Integer ops, comparisons, select, abs, min/max, casts and the correctly
  rounded float ops (+ - * / sqrt, floor, rint, fmod, ...) are therefore checked exactly.
* When an operand is inexact, the step is evaluated by NumPy at the *corners* of its operands'
  intervals (``center ± err``, rounded outwards in the operand's dtype; ``±0`` too when the
  interval contains zero; ``~b`` for an uncertain bool): ``err`` of the result is the largest
  distance of a corner result from the center result, plus 1 ULP of the result (both sides
  round) or the op's ULP bound if it is transcendental. A result that differs in NaN-ness, or an
  integer/bool that differs at some corner, is *unverifiable* (``err = inf``) at that element.
  Two interior points of each interval are evaluated too, so a wrap of ``remainder`` or a
  period of ``sin`` inside an interval shows as a large distance.
  This is first-order interval propagation: loose, never tight, but it follows cancellation,
  conditioning (``exp`` of an inexact value) and discontinuities (``floor``, comparisons,
  ``where`` on an uncertain condition) through any composition.
* Reductions: integer reductions are exact. A float ``sum``/``mean`` over ``n >= 3`` elements
  may be summed in any order: ``err = Σ err_i + (n-1)·u·Σ|x_i|`` (``u`` = unit roundoff of the
  accumulator), unverifiable if ``Σ|x_i|`` can overflow. ``prod`` likewise in relative terms,
  unverifiable if a partial product can overflow or underflow. ``max``/``min``: the largest
  operand ``err``; the sign of a zero result is unspecified when the row holds zeros of both
  signs (NumPy itself differs between its scalar and SIMD loops). ``argmax``/``argmin``/
  ``any``/``all`` are exact unless an operand of the row is inexact (then unverifiable, except
  when ``any``/``all`` are decided by certain elements).
* Float → integer casts: an element whose value (or any corner) is NaN, ±inf, or truncates to
  outside the target range is *masked* (``err = inf``): C leaves the conversion undefined and
  NumPy's result depends on the machine. NumPy computes an integer ``reciprocal`` as
  ``(int)(1.0 / x)``, so its value at ``x == 0`` is masked too, as is ``np.round`` of an
  integer with negative decimals beyond the dtype's range. The mask propagates to
  everything computed from it.
* ``maximum``/``minimum``/``fmax``/``fmin``/``clip`` of zeros of both signs: the sign of the
  zero result is unspecified (NumPy's own loops disagree between sizes and strides).
* The sign of a NaN is unspecified (IEEE 754): ``signbit(NaN)`` and ``copysign(x, NaN)`` are
  masked.
* On the Vulkan device, an op's bound is the Vulkan target's where that is looser
  (``glsl.tolerance``), outside its domain (trig arguments beyond it) a result is masked, and
  a float32 transcendental result below the normal range may be flushed to zero (the
  README's Vulkan table).
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import fusejit
from fusejit.targets.glsl import target as glsl
from fusejit.testing import op_ulp

from .generator import Program, Step

_MAX_CORNERS = 350


@dataclass
class Approx:
    """A value as NumPy computed it, with its tolerance (see the module docstring)."""

    center: Any  # ndarray, NumPy scalar, or Python scalar (an argument)
    err: np.ndarray  # float64, broadcast to the value's shape; inf = unverifiable
    zsign: np.ndarray  # bool: the sign of a zero result is unspecified

    @staticmethod
    def exact(value: Any) -> Approx:
        shape = np.shape(value)
        return Approx(value, np.zeros(shape), np.zeros(shape, bool))

    @property
    def dtype(self) -> np.dtype | None:
        return self.center.dtype if isinstance(self.center, (np.ndarray, np.generic)) else None


@dataclass
class Evaluation:
    outputs: list[Approx] | None
    exc: BaseException | None  # what NumPy raised, if it did
    values: dict[str, Approx]
    dead: bool = False  # it raised in a step no output depends on (see ``evaluate``)


def step_function(step: Step) -> Callable[..., Any]:
    src = f"lambda {', '.join(step.operands)}: {step.code}"
    return eval(compile(src, f"<step {step.name}>", "eval"), {"np": np})


def evaluate(program: Program, inputs: list[Any]) -> Evaluation:
    """Run ``program`` in NumPy step by step, propagating tolerances."""
    env: dict[str, Approx] = {a.name: Approx.exact(np.array(v, copy=True) if isinstance(
        v, np.ndarray) else v) for a, v in zip(program.args, inputs)}  # (writes change them)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in program.steps:
            if step.kind == "inplace":
                try:
                    env[step.name] = inplace(step, env)
                except Exception as exc:  # noqa: BLE001  (NumPy raised: fusejit must too)
                    return Evaluation(None, exc, env)
                continue
            fn = step_function(step)
            ops = [env[n] for n in step.operands]
            try:
                center = fn(*(o.center for o in ops))
            except Exception as exc:  # noqa: BLE001  (NumPy raised: fusejit must too...)
                # ...unless it raised on these values only (a Python int out of range for the
                # dtype it met) in a step whose result is never used: fusejit removes dead
                # code, so it never converts that value (a documented difference)
                dead = program.raises is None and step.name not in live(program)
                return Evaluation(None, exc, env, dead)
            env[step.name] = _propagate(step, fn, ops, center)
    return Evaluation([env[n] for n in program.outputs], None, env)


def live(program: Program) -> set[str]:
    """Steps some output depends on."""
    needed = set(program.outputs) | program.written
    for step in reversed(program.steps):
        if step.name in needed:
            needed |= set(step.operands)
    return needed


# -- in-place writes -------------------------------------------------------------------------------


class _Key:
    def __getitem__(self, key: Any) -> Any:
        return key


def inplace(step: Step, env: dict[str, Approx]) -> Approx:
    """The written value's new ``Approx``: NumPy's statement on a copy gives the center; the
    written region's tolerance is that of the value stored there (the ufunc on the old
    region's tolerance, or the assigned value's), cast to the target's dtype; the rest keeps
    its own. (NumPy gives overlapping reads and writes copy semantics, so the write is
    functional.)"""
    name, region, form = step.get("target"), step.get("region"), step.get("form")
    ufunc, rhs = step.get("ufunc"), step.get("rhs")
    old = env[name]
    scope = {n: env[n].center for n in step.operands}
    if isinstance(old.center, np.ndarray):
        scope[name] = old.center.copy()
    undefined = False
    try:
        exec(step.code, {"np": np}, scope)  # noqa: S102  (our own generated statement)
    except (OverflowError, ValueError) as exc:
        # a NumPy *scalar* assigned into an array goes through Python's int(): a NaN or
        # infinite float, or a value out of the target's range, raises; an array of them
        # is cast (implementation-defined or wrapped values). fusejit cannot raise on data:
        # the element is masked (see "casts" above)
        rhs_value = eval(rhs[0], {"np": np}, scope) if form == "set" else None
        if not isinstance(rhs_value, np.generic):  # (a NumPy scalar broadcasts anywhere)
            raise  # (a Python int out of range raises in fusejit too)
        key = eval(f"_k{region}", {"_k": _Key()})
        with np.errstate(all="ignore"):
            scope[name][key] = np.asarray(eval(rhs[0], {"np": np}, scope)).astype(
                old.center.dtype)
        undefined = True
    new = scope[name]
    # operands of the stored value; the target's own name (its whole old value) only where
    # an operand is the target itself (``x[1:] += x``), not where it is the region written
    names = [n for n in step.operands if n != name or name in rhs]
    if not isinstance(old.center, np.ndarray):  # a NumPy scalar: rebinding, a plain map step
        s = Step(name, ufunc, step.operands, f"np.{ufunc}({name}, {rhs[0]})", "map")
        return _propagate(s, step_function(s), [env[n] for n in step.operands], new)
    shape = old.center.shape
    key = eval(f"_k{region}" if region else "_k[...]", {"_k": _Key()})
    err = np.array(np.broadcast_to(old.err, shape), np.float64)
    zsign = np.array(np.broadcast_to(old.zsign, shape), bool)
    part = Approx(old.center[key], err[key], zsign[key])
    if form == "set":
        value = _value(rhs[0], names, env)
    else:
        own = form in ("aug", "out")  # the region is an operand (else only the destination)
        texts = ("_t",) * own + rhs
        s = Step("_v", ufunc, ("_t",) * own + tuple(names),
                 f"np.{ufunc}({', '.join(texts)})", "map")
        fn = step_function(s)
        ops = [part] * own + [env[n] for n in names]
        value = _propagate(s, fn, ops, fn(*(o.center for o in ops)))
    cast = Step("_c", "cast", ("_r",), f"np.asarray(_r).astype(np.{old.center.dtype.name})",
                "cast")
    fn = step_function(cast)
    stored = _propagate(cast, fn, [value], fn(value.center))
    target = np.shape(part.center)
    err[key] = _fit(stored.err, target)
    zsign[key] = _fit(stored.zsign, target)
    got = np.asarray(new[key])
    want = _fit(stored.center, target)
    same = (got == want) | ((got != got) & (want != want))
    if undefined:
        same = np.zeros(target, bool)
    if not np.all(same):  # not the value this model expects: unverifiable there
        sub = err[key]
        err[key] = np.where(same, sub, np.inf)
    return Approx(new, err, zsign)


def _fit(a: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` broadcast to ``shape`` as an assignment does: extra leading length-1 axes of the
    value are dropped (``x[-1] = x`` with x of shape (1, 1, 1))."""
    a = np.asarray(a)
    while a.ndim > len(shape) and a.shape[0] == 1:
        a = a[0]
    return np.broadcast_to(a, shape)


def _value(text: str, names: list[str], env: dict[str, Approx]) -> Approx:
    """An operand of a write: a value of the program, or an exact literal."""
    if text in names:
        return env[text]
    return Approx.exact(eval(text, {"np": np}))


# -- propagation ------------------------------------------------------------------------------------


def _outward(x: np.ndarray, dtype: np.dtype, up: bool) -> np.ndarray:
    """``x`` (float64) rounded to ``dtype`` away from the center (towards ±inf)."""
    with np.errstate(all="ignore"):
        r = x.astype(dtype)
        target = np.inf if up else -np.inf
        behind = (r < x) if up else (r > x)
        return np.where(behind, np.nextafter(r, dtype.type(target)), r)


def _corners(a: Approx, shape: tuple[int, ...]) -> tuple[list[Any], np.ndarray]:
    """Corner values of one operand, and where it is unverifiable (an unknown integer)."""
    c = a.center
    unknown = np.zeros(shape, bool)
    if not isinstance(c, (np.ndarray, np.generic)):
        return [c], unknown
    err = np.broadcast_to(a.err, np.shape(c))
    if not err.any() and not a.zsign.any():
        return [c], unknown
    dt = c.dtype
    carr = np.asarray(c)
    if dt.kind == "f":
        finite = np.isfinite(err)
        e = np.where(finite, err, 0.0)
        wide = carr.astype(np.float64)
        lo = _outward(wide - e, dt, up=False)
        hi = _outward(wide + e, dt, up=True)
        zero = ((lo <= 0) & (hi >= 0) & (e > 0)) | (a.zsign & (carr == 0))
        out = [carr, lo, hi]
        with np.errstate(all="ignore"):  # interior points: remainder, sin... are not monotone
            out += [np.where(e > 0, (wide + k * e).astype(dt), carr) for k in (-0.5, 0.5)]
        if zero.any():
            out += [np.where(zero, dt.type(0.0), carr), np.where(zero, dt.type(-0.0), carr)]
        unknown = np.broadcast_to(~finite, shape) if shape else np.asarray(~finite)
        return out, np.array(unknown)
    uncertain = err > 0
    if dt.kind == "b":
        return [carr, np.where(uncertain, ~carr, carr)], unknown
    return [carr], np.array(np.broadcast_to(uncertain, shape))


def _deviation(r: np.ndarray, rk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distance of a corner result from the center result, and zero-sign disagreement."""
    rk = np.broadcast_to(np.asarray(rk), r.shape)
    if r.dtype.kind != "f":
        if rk.dtype.kind == "f":
            return np.full(r.shape, np.inf), np.zeros(r.shape, bool)
        return np.where(rk != r, np.inf, 0.0), np.zeros(r.shape, bool)
    a, b = r.astype(np.float64), rk.astype(np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    same_inf = np.isinf(a) & (a == b)
    d = np.where(same_inf, 0.0, np.abs(a - b))
    d = np.where(nan_a & nan_b, 0.0, np.where(nan_a | nan_b, np.inf, d))
    d = np.where(np.isnan(d), np.inf, d)
    zsign = (a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))
    return d, zsign


def _ulp(r: np.ndarray) -> np.ndarray:
    s = np.spacing(np.abs(r)).astype(np.float64)
    return np.where(np.isfinite(s), s, 0.0)


def _propagate(step: Step, fn: Callable[..., Any], ops: list[Approx], center: Any) -> Approx:
    shape = np.shape(center)
    if step.kind == "move":
        err = np.asarray(fn(*(np.broadcast_to(o.err, np.shape(o.center)) for o in ops)),
                         np.float64)
        zs = np.asarray(fn(*(np.broadcast_to(o.zsign, np.shape(o.center)) for o in ops)), bool)
        return Approx(center, err, zs)
    if step.kind == "reduce":
        return _reduce(step, ops[0], center)
    r = np.asarray(center)
    corner_sets, unknown = [], np.zeros(shape, bool)
    inexact = np.zeros(shape, bool)
    for o in ops:
        cs, unk = _corners(o, shape)
        corner_sets.append(cs)
        unknown |= np.broadcast_to(unk, shape) if np.shape(unk) != shape else unk
        e = np.broadcast_to(o.err, np.shape(o.center))
        inexact |= np.broadcast_to((e > 0) | np.broadcast_to(o.zsign, e.shape), shape)
    err = np.zeros(shape)
    zsign = np.zeros(shape, bool)
    combos = list(itertools.islice(itertools.product(*corner_sets), _MAX_CORNERS + 1))
    if len(combos) > _MAX_CORNERS:
        unknown |= inexact
        combos = combos[:1]
    for combo in combos[1:]:
        d, z = _deviation(r, np.asarray(fn(*combo)))
        err = np.maximum(err, d)
        zsign |= z
        if step.kind == "cast" and r.dtype.kind in "iu":
            unknown |= _undefined_cast(combo, ops, r.dtype, shape)
    if step.kind == "cast" and r.dtype.kind in "iu":
        unknown |= _undefined_cast(combos[0], ops, r.dtype, shape)
    if step.op == "rint" and r.dtype.kind in "iu" and ", -1)" in step.code:
        # np.round(ints, -1) is (int)(rint(x / 10) * 10) in float64: undefined out of range
        x = np.asarray(combos[0][0]).astype(np.float64)
        with np.errstate(all="ignore"):
            unknown |= np.broadcast_to(_out_of_range(np.rint(x / 10) * 10, r.dtype), shape)
    if step.op == "reciprocal" and r.dtype.kind in "iu":
        unknown |= np.broadcast_to(np.asarray(combos[0][0]) == 0, shape)  # (int)(1.0 / 0)
    if step.op in _NAN_SIGN_OPS:  # the sign of a NaN is not specified by IEEE 754
        for x in map(np.asarray, combos[0]):
            if x.dtype.kind == "f":
                unknown |= np.broadcast_to(np.isnan(x), shape)
    vulkan = step.fj_op is not None and r.dtype.kind == "f" and \
        fusejit.get_default_device() == "vulkan"
    vulkan_bound: tuple[float, float] = (0, math.inf)  # (ULP, domain)
    if vulkan:
        # the Vulkan target's own bound and its domain (the trig builtins beyond |x| = 2^20,
        # or pi without shader-f64: glsl.tolerance); beyond it any value is possible
        vulkan_bound = glsl.tolerance(step.fj_op, _vulkan_features(), r.dtype)
        if vulkan_bound[1] < math.inf and ops:
            with np.errstate(invalid="ignore"):
                far = np.abs(np.asarray(ops[0].center, np.float64)) + ops[0].err >= \
                    vulkan_bound[1]
            unknown |= np.broadcast_to(far, shape)
    if step.op in _PERIODIC and r.dtype.kind == "f" and inexact.any():
        err = np.maximum(err, _periodic_bound(step, ops, shape))
    if step.op in _ZERO_SIGN_OPS and r.dtype.kind == "f":
        zsign |= r == 0  # (literal operands are not in ``ops``: any zero result)
    if r.dtype.kind == "f":
        ulps = 0.0
        if step.fj_op is not None:
            if step.kind == "transcendental":
                ulps = op_ulp(step.fj_op, r.dtype)
            ulps = max(ulps, vulkan_bound[0])
        err = err + _ulp(r) * np.where(inexact, max(ulps, 1.0), ulps)
        if vulkan and step.kind == "transcendental" and r.dtype == np.float32:
            # (the builtins may flush a subnormal result to zero)
            tiny = float(np.finfo(np.float32).tiny)
            err = np.maximum(err, np.where(np.abs(r) < tiny, tiny, 0.0))
    err = np.where(unknown, np.inf, err)
    if r.dtype.kind != "f":
        err = np.where(err > 0, np.inf, 0.0)
    return Approx(center, err, zsign)


# ops whose result's zero sign NumPy leaves to the loop (SIMD and scalar loops differ) when
# the operands hold zeros of both signs: maximum(-0.0, +0.0) may be either
_ZERO_SIGN_OPS = frozenset({"maximum", "minimum", "fmax", "fmin", "clip"})
# ops that read the sign bit of a NaN operand (masked where any operand is NaN)
_NAN_SIGN_OPS = frozenset({"signbit", "copysign"})




# ops that wrap around: once an operand's interval spans a period, any value in the range is
# possible (corner and interior samples can all land close together)
_PERIODIC = frozenset({"mod", "fmod", "sin", "cos", "tan"})


@functools.cache
def _vulkan_features() -> frozenset[str]:
    from fusejit.vulkan import default_device

    return default_device().features


def _periodic_bound(step: Step, ops: list[Approx], shape: tuple[int, ...]) -> np.ndarray:
    env = {n: o.center for n, o in zip(step.operands, ops)}
    args = [np.asarray(eval(text, {"np": np}, env), np.float64) for text in step.get("args")]
    errs = {n: np.broadcast_to(o.err, np.shape(o.center)) for n, o in zip(step.operands, ops)}
    ex = np.broadcast_to(np.asarray(errs.get(step.get("args")[0], 0.0)), shape)
    if step.op in ("mod", "fmod"):
        x = np.broadcast_to(args[0], shape)
        b = np.broadcast_to(args[1], shape)
        eb = np.broadcast_to(np.asarray(errs.get(step.get("args")[1], 0.0)), shape)
        cut = np.floor if step.op == "mod" else np.trunc  # where the result jumps by |b|
        with np.errstate(all="ignore"):
            jumps = cut((x - ex) / b) != cut((x + ex) / b)
        return np.where(((ex > 0) & jumps) | (eb > 0), 2 * (np.abs(b) + eb), 0.0)
    return np.where(ex >= 0.25, np.inf if step.op == "tan" else 2.0, 0.0)


def _undefined_cast(combo: tuple[Any, ...], ops: list[Approx], target: np.dtype,
                    shape: tuple[int, ...]) -> np.ndarray:
    """Where a float → int cast is implementation-defined (NaN, inf, out of range)."""
    x = np.asarray(combo[0])
    if ops[0].dtype is None or ops[0].dtype.kind != "f":
        return np.zeros(shape, bool)
    return np.broadcast_to(_out_of_range(x.astype(np.float64), target), shape)


def _out_of_range(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """Float values whose conversion to the integer ``target`` is undefined in C."""
    bits = 8 * target.itemsize
    lo, hi = (0.0, 2.0 ** bits) if target.kind == "u" else (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1))
    t = np.trunc(x)
    return ~np.isfinite(t) | (t < lo) | (t >= hi)  # (exact: the bounds are powers of two)


# -- reductions -------------------------------------------------------------------------------------


def _axes(step: Step, ndim: int) -> tuple[int, ...]:
    axis = step.get("axis")
    if axis is None:
        return tuple(range(ndim))
    axis = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim for a in axis))


def _reduce(step: Step, x: Approx, center: Any) -> Approx:
    fn = step.get("reduce")
    xc = np.asarray(x.center)
    err = np.broadcast_to(x.err, xc.shape)
    zs = np.broadcast_to(x.zsign, xc.shape)
    axes = _axes(step, xc.ndim)
    kept = np.asarray(np.ones(xc.shape, bool).all(axis=axes, keepdims=True)).shape
    r = np.asarray(center)
    if fn in ("argmax", "argmin") and step.get("axis") is None:
        kept = (1,) * xc.ndim
    n = int(np.prod([xc.shape[a] for a in axes])) if axes else 1
    unknown = np.isinf(err).any(axis=axes, keepdims=True)
    inexact = (err > 0).any(axis=axes, keepdims=True) | (zs & (xc == 0)).any(axis=axes,
                                                                            keepdims=True)
    e = np.where(np.isinf(err), 0.0, err)
    rk = r.reshape(kept) if r.size == int(np.prod(kept)) else r
    out_z = np.zeros(kept, bool)
    if fn in ("sum", "mean", "prod") and rk.dtype.kind == "f":
        acc = rk.dtype
        if fn == "mean":  # NumPy's mean sums ints in float64, floats in their own dtype
            acc = xc.dtype if xc.dtype.kind == "f" else np.dtype(np.float64)
        xs = xc.astype(acc).astype(np.float64)
        u = np.finfo(acc).eps / 2
        finite = np.isfinite(xs)
        mag = np.where(finite, np.abs(xs) + e, 0.0)
        if fn == "prod":
            total = _prod_err(xs, e, axes, n, u, rk.dtype)
        else:
            s_abs = mag.sum(axis=axes, keepdims=True)
            total = e.sum(axis=axes, keepdims=True) + (max(n - 1, 0) * u * s_abs if n > 2
                                                       else 0.0)
            total = np.where(s_abs > np.finfo(acc).max, np.inf, total)
            if fn == "mean":
                total = total / max(n, 1)
        total = total + _ulp(rk) * inexact
        out = np.where(unknown, np.inf, total)
    elif fn in ("max", "min"):
        out = np.where(unknown, np.inf, e.max(axis=axes, keepdims=True, initial=0.0))
        if rk.dtype.kind == "f":
            neg = ((xc == 0) & np.signbit(xc)).any(axis=axes, keepdims=True)
            pos = ((xc == 0) & ~np.signbit(xc)).any(axis=axes, keepdims=True)
            zflag = (zs & (xc == 0)).any(axis=axes, keepdims=True)
            out_z = (rk == 0) & ((neg & pos) | zflag)
        else:
            out = np.where(out > 0, np.inf, 0.0)
    elif fn in ("any", "all"):
        nonzero = (np.abs(xc.astype(np.float64)) > e) | np.isnan(xc.astype(np.float64))
        if xc.dtype.kind != "f":
            nonzero = (xc != 0) & (err == 0)
        zero = (xc == 0) & (err == 0)
        if fn == "any":
            decided = nonzero.any(axis=axes, keepdims=True) | zero.all(axis=axes, keepdims=True)
        else:
            decided = zero.any(axis=axes, keepdims=True) | nonzero.all(axis=axes, keepdims=True)
        out = np.where(decided, 0.0, np.inf)
    else:  # integer sum/prod/mean-free paths, argmax/argmin
        out = np.where(unknown | inexact, np.inf, 0.0)
    out = np.broadcast_to(out, kept)
    out_z = np.broadcast_to(out_z, kept)
    return Approx(center, np.array(out.reshape(r.shape)), np.array(out_z.reshape(r.shape)))


def _prod_err(xs: np.ndarray, e: np.ndarray, axes: tuple[int, ...], n: int, u: float,
              dtype: np.dtype) -> np.ndarray:
    info = np.finfo(dtype)
    with np.errstate(all="ignore"):
        a = np.abs(xs)
        big = np.where(np.isfinite(a) & (a > 1), np.log2(np.maximum(a, 1)), 0.0).sum(
            axis=axes, keepdims=True)
        small = np.where(np.isfinite(a) & (a < 1) & (a > 0), np.log2(np.where(a > 0, a, 1)),
                         0.0).sum(axis=axes, keepdims=True)
        rel = np.where(e > 0, np.where(a > 0, e / a, np.inf), 0.0).sum(axis=axes, keepdims=True)
        p = np.abs(np.prod(np.where(np.isfinite(xs), xs, 1.0), axis=axes, keepdims=True))
        total = p * (max(n - 1, 0) * u + rel)
    risky = (big > np.log2(info.max) - 1) | (small < np.log2(info.tiny) + 1)
    return np.where(risky | np.isnan(total), np.inf, total)


# -- comparison -------------------------------------------------------------------------------------


def compare(got: Any, want: Approx, what: str) -> str | None:
    """None if ``got`` is within tolerance of ``want``; else a description of the mismatch."""
    g = np.asarray(got)
    w = np.asarray(want.center)
    if g.dtype != w.dtype:
        return f"{what}: dtype {g.dtype} != NumPy's {w.dtype}"
    if g.shape != w.shape:
        return f"{what}: shape {g.shape} != NumPy's {w.shape}"
    if g.size == 0:
        return None
    err = np.broadcast_to(want.err, w.shape)
    zs = np.broadcast_to(want.zsign, w.shape)
    check = np.isfinite(err)
    if w.dtype.kind != "f":
        bad = check & (g != w)
    else:
        gw, ww = g.astype(np.float64), w.astype(np.float64)
        nan_g, nan_w = np.isnan(gw), np.isnan(ww)
        exact = err == 0
        same = (gw == ww) & ((np.signbit(gw) == np.signbit(ww)) | zs)
        with np.errstate(all="ignore"):  # (inf tolerances of unchecked elements)
            lo = _outward(ww - err, w.dtype, up=False)
            hi = _outward(ww + err, w.dtype, up=True)
        inside = (g >= lo) & (g <= hi)
        ok = np.where(nan_w | nan_g, nan_w & nan_g, np.where(exact, same, inside))
        bad = check & ~ok
    if not bad.any():
        return None
    i = tuple(int(k) for k in np.argwhere(bad)[0])
    return (f"{what}: {int(bad.sum())} of {g.size} elements differ ({int((~check).sum())} "
            f"masked); first at {i}: fusejit {g[i]!r}, NumPy {w[i]!r}, tolerance {err[i]:.3g}")


def builtin_class(exc: BaseException) -> type[BaseException]:
    """The first builtin exception class in ``exc``'s MRO (what parity is checked on)."""
    for cls in type(exc).__mro__:
        if cls.__module__ == "builtins":
            return cls
    return Exception
