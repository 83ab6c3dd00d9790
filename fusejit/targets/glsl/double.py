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

import functools
import math

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir.ops import Op
from fusejit.targets.glsl.helpers import float_literal, truth

# Vulkan lets a driver's double / and sqrt be 2.5 ULP off (NVIDIA's are an ulp off on the
# H200), and its fma need not be fused (lavapipe's is not), so they are corrected by hand:
# the operands are scaled by powers of two to within 2^+-474 (exact), the remainder
# r = a - q*b (or a - s*s) of the driver's result is computed exactly with Dekker's product
# (Veltkamp's split; a - q*b is exact by Sterbenz), q + r/b rounds once, and the result is
# scaled back. That is correctly rounded except within ~2^-51 ulp of a midpoint (r/b is the
# driver's quotient) and for subnormal quotients (scaled back, rounded twice: an ulp at most).
# Each step is a product with the uniform 1.0 (``one``), so no driver folds the split away.
_HELPERS = """
bool fj_isnan_d(double x) { return fj_isnan(float(x)); }
bool fj_signbit_d(double x) { return (floatBitsToUint(float(x)) >> 31) != 0u; }
bool fj_finite_nz_d(double x) { return !fj_isnan_d(x) && x != double(0.0) && abs(x) <= {MAX}; }
double fj_scale_d(double x) {
    /* a power of two taking |x| to within 2^-474 .. 2^424 */
    return abs(x) > {T} ? {DOWN} : (abs(x) < {1/T} ? {UP} : double(1.0));
}
double fj_rem_d(double a, double x, double y, double one) {
    /* a - x*y exactly, for x*y within a factor of 2 of a */
    double cx = (x * {SPLIT}) * one, cy = (y * {SPLIT}) * one;
    double xh = (cx - (cx - x) * one) * one, yh = (cy - (cy - y) * one) * one;
    double xl = (x - xh) * one, yl = (y - yh) * one, p = (x * y) * one;
    double e = ((((xh * yh) * one - p) * one + (xh * yl) * one) * one + (xl * yh) * one) * one;
    e = (e + (xl * yl) * one) * one;
    return (((a - p) * one) - e) * one;
}
double fj_qdiv_d(double a, double b, double one) {
    if (!fj_finite_nz_d(a) || !fj_finite_nz_d(b)) return (a / b) * one;
    double sa = fj_scale_d(a), sb = fj_scale_d(b);
    a = (a * sa) * one;
    b = (b * sb) * one;
    double q = (a / b) * one;
    q = (q + (fj_rem_d(a, q, b, one) / b) * one) * one;
    if (sa != sb)  /* q * sb / sa, in two exact steps (1/sa is a power of two too) */
        q = (((q * (sa == {DOWN} ? {UP} : (sa == {UP} ? {DOWN} : double(1.0)))) * one) * sb) * one;
    return q;
}
double fj_sqrt_d(double a, double one) {
    if (!fj_finite_nz_d(a)) return sqrt(a) * one;
    double sa = fj_scale_d(a);
    a = (a * sa) * one;
    double s = sqrt(a) * one;
    s = (s + (fj_rem_d(a, s, s, one) / (double(2.0) * s)) * one) * one;
    return (s * (sa == {DOWN} ? {HALF_UP} : (sa == {UP} ? {HALF_DOWN} : double(1.0)))) * one;
}
double fj_div_d(double a, double b, double one) {
    /* a / b for b == +-0 by sign bits: lavapipe folds x / 0.0 with a constant zero */
    if (!(b == double(0.0))) return fj_qdiv_d(a, b, one);
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
    Op.TRUEDIV: "fj_div_d({a}, {b}, double(fj_one))",
    Op.RECIPROCAL: "fj_div_d(double(1.0), {a}, double(fj_one))",
    Op.NEG: "(-{a})", Op.POS: "{a}", Op.ABS: "abs({a})", Op.SQUARE: "({a} * {a})",
    Op.SIGN: "(fj_isnan_d({a}) ? {a} : ({a} > double(0.0) ? double(1.0) : "
             "({a} < double(0.0) ? double(-1.0) : double(fj_zero))))",
    Op.SQRT: "(fj_isnan_d({a}) ? {a} : ({a} < double(0.0) ? " + _NAN +
             " : fj_sqrt_d({a}, double(fj_one))))",
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
# maximum & co. as for float32 (targets/glsl/target.py): keep {a} when beyond {b} or NaN-winning
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
    v = float(value)
    with np.errstate(over="ignore"):
        single = float(np.float32(v)) == v
    if not math.isfinite(v) or single:
        return f"double({float_literal(v)})"
    m, e = math.frexp(v)  # v = m * 2**e, 0.5 <= |m| < 1
    parts, rest = [], m
    while rest != 0.0:  # 53 bits: three float32 parts at most
        part = float(np.float32(rest))
        parts.append(part)
        rest -= part
    text = " + ".join(f"double({float_literal(p)})" for p in parts)
    factors = []
    while e != 0:
        step = max(-120, min(120, e))
        factors.append(f"double({float_literal(2.0 ** step)})")
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



@functools.cache
def helpers() -> str:
    """The GLSL helper functions float64 kernels call."""
    fields = {"{MAX}": float(np.finfo(np.float64).max), "{1/T}": 2.0 ** -400, "{T}": 2.0 ** 400,
              "{DOWN}": 2.0 ** -600, "{UP}": 2.0 ** 600, "{HALF_UP}": 2.0 ** 300,
              "{HALF_DOWN}": 2.0 ** -300, "{SPLIT}": 2.0 ** 27 + 1}
    text = _HELPERS
    for name, value in fields.items():
        text = text.replace(name, literal(value))
    return text
