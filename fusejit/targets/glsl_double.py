"""float64 on the Vulkan target (GLSL ``double``, where the adapter has ``shader-f64``).

naga's GLSL frontend has ``double`` arithmetic, comparisons and the exact builtins (``sqrt``,
``floor``, ``abs``, ...) but no 64-bit literals, no bit access (``unpackDouble2x32``) and no
64-bit transcendental builtins (Vulkan's GLSL.std.450 defines them for 16/32-bit floats only).
So:

* literals are sums of float32 parts scaled by powers of two, exact for every double;
* NaN and the sign bit are read through a conversion to float32, which keeps both (a double
  NaN stays NaN, a tiny double keeps its sign as a signed zero), and then by bit pattern;
* the ops with no exact spelling (transcendentals, floor division and remainders, ``fmod``,
  ``pow``, ``nextafter``, ``ldexp``, ...) raise UnsupportedDTypeError naming the op.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..ops import Op
from .glsl_helpers import truth

HELPERS = """
bool fj_isnan_d(double x) { return fj_isnan(float(x)); }
bool fj_signbit_d(double x) { return (floatBitsToUint(float(x)) >> 31) != 0u; }
double fj_div_d(double a, double b) {
    /* a / b for b == +-0 by sign bits: lavapipe folds x / 0.0 with a constant zero */
    if (!(b == double(0.0))) return a / b;
    if (fj_isnan_d(a) || a == double(0.0)) return double(uintBitsToFloat(0x7fc00000u));
    return double(uintBitsToFloat(fj_signbit_d(a) != fj_signbit_d(b) ? 0xff800000u
                                                                       : 0x7f800000u));
}
double fj_rint_d(double x) {
    /* round half to even by hand: lavapipe's double roundEven(1.5) is 1 */
    if (fj_isnan_d(x)) return x;
    double t = floor(x), d = x - t;  /* (exact) */
    double r = (d > double(0.5) || (d == double(0.5) &&
                t - double(2.0) * floor(t * double(0.5)) != double(0.0))) ? t + double(1.0) : t;
    return (r == double(0.0) && fj_signbit_d(x)) ? -double(0.0) : r;
}
float fj_rh_d(double x) {
    /* double -> half rounded once: float32 rounded to odd (24 >= 2 * 11 + 2 bits), then RNE */
    float f = float(x);
    if (!fj_isnan(f) && (floatBitsToUint(f) & 0x7fffffffu) < 0x7f800000u && double(f) != x
            && (floatBitsToUint(f) & 1u) == 0u)
        f = uintBitsToFloat((abs(double(f)) < abs(x)) ? floatBitsToUint(f) + 1u
                                                      : floatBitsToUint(f) - 1u);
    return fj_rh(f);
}
"""
_INF = "double(uintBitsToFloat(0x7f800000u))"
_NAN = "double(uintBitsToFloat(0x7fc00000u))"

T: dict[Op, str] = {
    Op.ADD: "({a} + {b})", Op.SUB: "({a} - {b})", Op.MUL: "({a} * {b})",
    Op.TRUEDIV: "fj_div_d({a}, {b})", Op.RECIPROCAL: "fj_div_d(double(1.0), {a})",
    Op.NEG: "(-{a})", Op.POS: "{a}", Op.ABS: "abs({a})", Op.SQUARE: "({a} * {a})",
    Op.SIGN: "(fj_isnan_d({a}) ? {a} : ({a} > double(0.0) ? double(1.0) : "
             "({a} < double(0.0) ? double(-1.0) : double(0.0))))",
    Op.SQRT: "(fj_isnan_d({a}) ? {a} : ({a} < double(0.0) ? " + _NAN + " : sqrt({a})))",
    Op.FLOOR: "(fj_isnan_d({a}) ? {a} : floor({a}))",
    Op.CEIL: "(fj_isnan_d({a}) ? {a} : ceil({a}))",
    Op.TRUNC: "(fj_isnan_d({a}) ? {a} : trunc({a}))",
    Op.RINT: "fj_rint_d({a})",
    Op.ISNAN: "fj_isnan_d({a})",
    Op.ISINF: "(!fj_isnan_d({a}) && abs({a}) == " + _INF + ")",
    Op.ISFINITE: "(!fj_isnan_d({a}) && abs({a}) != " + _INF + ")",
    Op.SIGNBIT: "fj_signbit_d({a})",
    Op.COPYSIGN: "(fj_signbit_d({b}) != fj_signbit_d({a}) ? -{a} : {a})",
    Op.HEAVISIDE: "(fj_isnan_d({a}) ? {a} : ({a} == double(0.0) ? {b} : "
                  "({a} < double(0.0) ? double(0.0) : double(1.0))))",
    Op.DEG2RAD: "({a} * {DEG2RAD})", Op.RAD2DEG: "({a} * {RAD2DEG})",
    Op.WHERE: "({a} ? {b} : {c})",
}
# maximum & co. as for float32 (targets/glsl.py): keep {a} when beyond {b} or NaN-winning
for _op, _beyond, _nan in ((Op.MAXIMUM, ">", "a"), (Op.MINIMUM, "<", "a"),
                           (Op.FMAX, ">", "b"), (Op.FMIN, "<", "b")):
    _cmp = _beyond if dt.extremum_keeps_second(dt.FLOAT64) else _beyond + "="
    T[_op] = f"(({{a}} {_cmp} {{b}} || fj_isnan_d({{{_nan}}})) ? {{a}} : {{b}})"
for _op, _sym in ((Op.EQ, "=="), (Op.LT, "<"), (Op.LE, "<="), (Op.GT, ">"), (Op.GE, ">=")):
    T[_op] = "(!(fj_isnan_d({a}) || fj_isnan_d({b})) && ({a} " + _sym + " {b}))"
T[Op.NE] = "(fj_isnan_d({a}) || fj_isnan_d({b}) || !({a} == {b}))"


def literal(value: float) -> str:
    """An exact double expression: float32 parts of the significand, scaled by powers of two
    (each part and factor a float32 literal, so naga needs no 64-bit literal)."""
    from .glsl import _float_literal

    v = float(value)
    with np.errstate(over="ignore"):
        single = float(np.float32(v)) == v
    if not math.isfinite(v) or single:
        return f"double({_float_literal(v)})"
    m, e = math.frexp(v)  # v = m * 2**e, 0.5 <= |m| < 1
    parts, rest = [], m
    while rest != 0.0:  # 53 bits: three float32 parts at most
        part = float(np.float32(rest))
        parts.append(part)
        rest -= part
    text = " + ".join(f"double({_float_literal(p)})" for p in parts)
    factors = []
    while e != 0:
        step = max(-120, min(120, e))
        factors.append(f"double({_float_literal(2.0 ** step)})")
        e -= step
    return "((" + text + ")" + "".join(f" * {f}" for f in factors) + ")"


def cast(src: np.dtype, dst: np.dtype, x: str) -> str | None:
    """Conversions from or to float64 (None: not a float64 conversion)."""
    if dst == dt.FLOAT64:
        return f"double({x})"  # (exact from every other supported dtype)
    if src != dt.FLOAT64:
        return None
    if dst == dt.BOOL:
        return truth(src, x)
    if dst == dt.FLOAT32:
        return f"float({x})"
    if dst == dt.FLOAT16:
        return f"fj_rh_d({x})"
    big = literal(2.0 ** 31)
    if dst == dt.INT32:  # saturating, NaN -> 0 (OpenCL's convert_int_sat_rtz)
        return (f"(fj_isnan_d({x}) ? 0 : ({x} >= {big} ? 2147483647 : "
                f"({x} <= -{big} ? (-2147483647 - 1) : int({x}))))")
    # uint32: the low 32 bits of the saturated int64, as OpenCL's (uint)convert_long_sat_rtz
    word, top = literal(2.0 ** 32), literal(2.0 ** 63)
    return (f"(fj_isnan_d({x}) ? 0u : ({x} >= {top} ? 4294967295u : ({x} < -{top} ? 0u : "
            f"uint(trunc({x}) - {word} * floor(trunc({x}) / {word})))))")
