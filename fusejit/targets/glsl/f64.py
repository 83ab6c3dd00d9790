"""float32 ops the Vulkan target computes through double where the adapter has ``shader-f64``:
correctly rounded ``/`` and ``sqrt``, and sin, cos and tan (the same algorithm as the OpenCL
target's CPU trig, after musl's sinf/cosf/tanf).

Vulkan lets float32 ``/`` and ``sqrt`` be 2.5 ULP off, and NVIDIA's are (an H200 gave sqrt an
ulp off in 17 % of elements). The driver's result (or the double one, rounded to float) is
within an ulp or two of NumPy's; it is then moved to the float whose rounding interval holds
the exact value, decided exactly in double: the midpoint m of two adjacent floats has 25
significant bits, so m*m (sqrt) and m*|b| (division) have at most 50 and 49 and are exact, and
their comparison with x or |a| is exact too. No result is ever on a midpoint (m*m = x or
m*|b| = |a| would need a 25-bit product of 24-bit values), so the test has no ties. Quotients
below the normal range (which a driver may flush) keep the driver's rounding.

sin/cos/tan: Vulkan's builtins promise an absolute error of 2^-11 for |x| <= pi only, and
NVIDIA's reduce larger arguments so loosely that cos of an int16 argument below 128 was 1.2e-3 off on an H200
(41139 ULP). So the argument is reduced in double (Cody-Waite: x - k*pio2_1 - k*pio2_1t, where
pio2_1 has 25 significant bits, so k*pio2_1 is exact for |k| < 2^28 and the reduction error
stays below 2^-50 |x| for |x| < 2^20), double polynomials on [-pi/4, pi/4] follow, and the
result is rounded to float once: within 1 ULP of the true value (the catalog's OpenCL bound
applies). Arguments of |x| >= 2^20 take the builtin (``TRIG_DOMAIN``: the documented domain);
|x| < 2^-12 returns x for sin and tan (their value rounds to x), as musl does.

Each step of the reduction is a product with the uniform 1.0 (``one``): SPIR-V lets a driver
reassociate (x - k*a) - k*b into x - k*(a + b), which would lose the reduction's precision.
naga's GLSL doubles have no 64-bit literals, so the constants are spelled by
``glsl_double.literal`` (exact sums of float32 parts).
"""

from __future__ import annotations

import functools

from fusejit.ir.ops import Op
from fusejit.targets.glsl.double import literal as _d

TRIG_DOMAIN = 2.0 ** 20  # |x| below this: fusejit's reduction; at or above: the builtin

# the float32 (and float16, computed in float32) templates that replace the builtins' there
T: dict[Op, str] = {
    Op.SIN: "fj_trig({a}, 0, fj_one)", Op.COS: "fj_trig({a}, 1, fj_one)",
    Op.TAN: "fj_trig({a}, 2, fj_one)",
    Op.TRUEDIV: "fj_div_rn({a}, {b})", Op.RECIPROCAL: "fj_div_rn(1.0, {a})",
    Op.SQRT: "fj_sqrt_rn({a})",
}

_SIN = (-0.16666666641626524, 0.008333329385889463, -0.00019839334836096632,
        2.718311493989822e-06)
_COS = (-0.499999997251031, 0.04166662332373906, -0.001388676377460993, 2.439044879627741e-05)
_TAN = (0.3333313950307914, 0.13339200271297674, 0.05338123784456704, 0.024528318116654728,
        0.002974357433599673, 0.009465647849436732)

FUSED_FMA = "fj-fused-fma"  # a pseudo-feature: the device's probe found fma() rounded once


@functools.cache
def helpers(fused_fma: bool = False) -> str:
    """The GLSL of the correctly rounded ops, ``fj_trig`` and its polynomials (built on first
    use, once per ``fused_fma``)."""
    return _ROUNDED + (_FMA if fused_fma else _DOUBLE_ONLY) + _DIV + (
        _DIV_BY if fused_fma else "") + f"""
double fj_sin_poly_d(double y) {{
    double z = y * y, w = z * z, s = z * y;
    return (y + s * ({_d(_SIN[0])} + z * {_d(_SIN[1])}))
        + s * w * ({_d(_SIN[2])} + z * {_d(_SIN[3])});
}}
double fj_cos_poly_d(double y) {{
    double z = y * y, w = z * z;
    return ((double(1.0) + z * {_d(_COS[0])}) + w * {_d(_COS[1])})
        + (w * z) * ({_d(_COS[2])} + z * {_d(_COS[3])});
}}
double fj_tan_poly_d(double y) {{
    double z = y * y, w = z * z, s = z * y;
    double u = {_d(_TAN[0])} + z * {_d(_TAN[1])};
    double t = {_d(_TAN[2])} + z * {_d(_TAN[3])};
    double v = {_d(_TAN[4])} + z * {_d(_TAN[5])};
    return (y + s * u) + (s * w) * (t + w * v);
}}
float fj_trig(float x, int fn, float one_f) {{
    /* fn: 0 sin, 1 cos, 2 tan (see targets/glsl/f64.py) */
    uint ax = floatBitsToUint(x) & 0x7fffffffu;
    if (ax > 0x7f800000u) return x;
    if (ax == 0x7f800000u) return uintBitsToFloat(0x7fc00000u);
    if (ax < 0x39800000u && fn != 1) return x;
    if (ax >= 0x49800000u) return fn == 0 ? sin(x) : (fn == 1 ? cos(x) : tan(x));
    double one = double(one_f), xd = double(x);
    double k = floor((xd * {_d(0.6366197723675814)}) * one + double(0.5));
    int q = int(k);
    double y = ((xd - (k * {_d(1.5707963109016418)}) * one) * one
                - (k * {_d(1.5893254773528196e-08)}) * one) * one;
    double r;
    if (fn == 2) {{
        r = fj_tan_poly_d(y);
        if ((q & 1) != 0) r = double(-1.0) / r;
    }} else {{
        bool odd = ((q + fn) & 1) != 0;  /* cos(y + k pi/2) = sin(y + (k + 1) pi/2) */
        r = odd ? fj_cos_poly_d(y) : fj_sin_poly_d(y);
        if ((((q + fn) >> 1) & 1) != 0) r = -r;
    }}
    return float(r);
}}
"""


_ROUNDED = """
float fj_next_up(float r) { return uintBitsToFloat(floatBitsToUint(r) + 1u); }
float fj_next_down(float r) { return uintBitsToFloat(floatBitsToUint(r) - 1u); }
double fj_mid(float r, float s) { return (double(r) + double(s)) * double(0.5); }
float fj_sqrt_rn_d(float x) {
    /* sqrt(x) rounded to nearest; NaN, zeros, +inf and negatives by bit pattern */
    uint ux = floatBitsToUint(x);
    if ((ux & 0x7fffffffu) == 0u || ux >= 0x7f800000u)
        return ux > 0x80000000u ? uintBitsToFloat(0x7fc00000u) : x;
    double xd = double(x);
    float r = float(sqrt(xd));
    for (int i = 0; i < 4; i++) {
        double up = fj_mid(r, fj_next_up(r)), down = fj_mid(r, fj_next_down(r));
        if (up * up < xd) r = fj_next_up(r);
        else if (down * down > xd) r = fj_next_down(r);
    }
    return r;
}
float fj_quot_rn_d(float a, float b, float q) {
    /* a / b for b != 0, rounded to nearest: the driver's quotient q (2.5 ULP at most, and
       NVIDIA's is that far off), moved to the float whose rounding interval holds |a| / |b|
       (see targets/glsl/f64.py), up to 4 steps */
    uint aq = floatBitsToUint(q) & 0x7fffffffu;
    if (aq < 0x00800000u || aq >= 0x7f800000u) return q;
    float m = uintBitsToFloat(aq);
    double A = abs(double(a)), B = abs(double(b));
    for (int i = 0; i < 4; i++) {
        if (fj_mid(m, fj_next_up(m)) * B < A) m = fj_next_up(m);
        else if (fj_mid(m, fj_next_down(m)) * B > A) m = fj_next_down(m);
    }
    return uintBitsToFloat(floatBitsToUint(m) | (floatBitsToUint(q) & 0x80000000u));
}
"""

_DIV = """
float fj_div_rn(float a, float b) { return b == 0.0 ? fj_divzero(a, b) : fj_quot_rn(a, b); }
"""
# With a fused fma: division by a divisor prepared once (targets/glsl/target.py's divisor_prep)
_DIV_BY = """
float fj_div_by(float a, float b, float y) {
    /* a / b rounded to nearest, from y = RN(1/b) computed once for many a (GLSLTarget.
       divisor_prep): Markstein's correction q + (a - q b) y of q = a y, exact for |a| and |b|
       in [2^-62, 2^63) (y, q and the residual stay normal there); elsewhere fj_div_rn */
    uint ea = floatBitsToUint(a) & 0x7f800000u, eb = floatBitsToUint(b) & 0x7f800000u;
    if (ea - 0x20800000u <= 0x3e000000u && eb - 0x20800000u <= 0x3e000000u) {
        float q = a * y;
        return fma(fma(-q, b, a), y, q);
    }
    return fj_div_rn(a, b);
}
"""

# Without a fused fma: the double tests above decide every lane.
_DOUBLE_ONLY = """
float fj_sqrt_rn(float x) { return fj_sqrt_rn_d(x); }
float fj_quot_rn(float a, float b) { float q = fj_quot(a, b); return fj_quot_rn_d(a, b, q); }
"""

# With a fused fma (FUSED_FMA: the device's probe found fma(a, b, c) rounded once), the same
# decisions in float: the residual e = fma(-m, |b|, |a|) (or fma(-r, r, x)) is exact wherever it
# is near the threshold it is compared with, and the thresholds are exact products with powers
# of two. Division: m is right while -hd <= e <= hu, hu and hd half an ulp above and below m
# times |b|, no ties (as above); near hu, e has at most 24 significant bits, and farther out its
# rounding cannot cross it. Square root: with ulp u above r (d below), x - r*r is a multiple of
# u*u (d*d), so x > (r + u/2)^2 = r*r + r*u + u*u/4 exactly when e > r*u, and
# x < (r - d/2)^2 exactly when e <= -r*d. Lanes where a threshold or residual could leave the
# normal range (a driver may flush subnormals) take the double test; NVIDIA's double
# arithmetic made softmax's division cost 66 us of a 116 us kernel on an H200.
_FMA = """
float fj_sqrt_rn(float x) {
    uint ux = floatBitsToUint(x);  /* 2^-100 <= x < 2^127, else (signs, specials) in double */
    if (ux < 0x0d800000u || ux >= 0x7f000000u) return fj_sqrt_rn_d(x);
    float r = sqrt(x);
    for (int i = 0; i < 4; i++) {
        float e = fma(-r, r, x);
        if (e > r * (fj_next_up(r) - r)) r = fj_next_up(r);
        else if (e <= -(r * (r - fj_next_down(r)))) r = fj_next_down(r);
        else break;
    }
    return r;
}
float fj_quot_rn(float a, float b) {
    float q = fj_quot(a, b);
    uint aq = floatBitsToUint(q) & 0x7fffffffu;
    if (aq < 0x00800000u || aq >= 0x7f000000u) return fj_quot_rn_d(a, b, q);
    float m = uintBitsToFloat(aq), A = abs(a), B = abs(b);
    for (int i = 0; i < 4; i++) {
        float hu = ((fj_next_up(m) - m) * 0.5) * B, hd = ((m - fj_next_down(m)) * 0.5) * B;
        if (!(hd >= uintBitsToFloat(0x02800000u) && hu < uintBitsToFloat(0x7e000000u)))
            return fj_quot_rn_d(a, b, q);  /* (h outside [2^-122, 2^125)) */
        float e = fma(-m, B, A);
        if (e > hu) m = fj_next_up(m);
        else if (e < -hd) m = fj_next_down(m);
        else break;
    }
    return uintBitsToFloat(floatBitsToUint(m) | (floatBitsToUint(q) & 0x80000000u));
}
"""
