"""GLSL helper functions of the Vulkan target (targets/glsl/target.py), emitted once per shader when a
template names them. NaN and Inf are recognised by bit pattern throughout: Vulkan lets a driver
assume there are none, and leaves its builtins undefined for them. A NaN operand is returned
itself, never as ``a + b``: a driver folds that to 0 where ``b`` is ``-a``."""

from __future__ import annotations

import math

import numpy as np

# helper functions, emitted once per shader when a template names them; NaN tests by bits
ISNAN = """bool fj_isnan(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }
float fj_divzero(float a, float b) {
    /* a / b for b == +-0 by bit pattern: lavapipe folds x / 0.0 with a constant zero to 0 */
    if (fj_isnan(a) || a == 0.0) return uintBitsToFloat(0x7fc00000u);
    return uintBitsToFloat(0x7f800000u | ((floatBitsToUint(a) ^ floatBitsToUint(b)) & 0x80000000u));
}
float fj_quot(float a, float b) {
    /* a / b for b != 0. NVIDIA's Vulkan driver divides as PTX div.approx.f32, which returns 0
       for |b| in [2^126, 2^128] (its reciprocal would be subnormal): an H200 gave -0.0 for
       -2.06e-38. Scaling both by 1/4 is exact there and keeps the quotient normal. */
    if (abs(b) >= uintBitsToFloat(0x7e800000u)) { a *= 0.25; b *= 0.25; }
    return a / b;
}
float fj_div(float a, float b) { return b == 0.0 ? fj_divzero(a, b) : fj_quot(a, b); }
"""
HELPERS: dict[str, str] = {
    "fj_fmod": """
float fj_fmod(float a, float b) {
    /* exact C fmod on the bits (after musl's fmodf): no float op, so a driver that flushes
       subnormals cannot stall it (a float loop halving toward a subnormal |b| never ended on
       NVIDIA's Vulkan, where t >= |b| held for t == 0) and it ends after 277 steps at most */
    uint sx = floatBitsToUint(a) & 0x80000000u;
    uint ux = floatBitsToUint(a) & 0x7fffffffu, uy = floatBitsToUint(b) & 0x7fffffffu;
    if (ux >= 0x7f800000u || uy > 0x7f800000u || uy == 0u) return uintBitsToFloat(0x7fc00000u);
    if (uy == 0x7f800000u || ux < uy) return a;
    if (ux == uy) return uintBitsToFloat(sx);
    int ex = int(ux >> 23), ey = int(uy >> 23);
    /* significands with the implicit bit, subnormals normalised */
    if (ex == 0) { ex = 1; while ((ux & 0x00800000u) == 0u) { ux <<= 1; ex--; } }
    else ux = (ux & 0x007fffffu) | 0x00800000u;
    if (ey == 0) { ey = 1; while ((uy & 0x00800000u) == 0u) { uy <<= 1; ey--; } }
    else uy = (uy & 0x007fffffu) | 0x00800000u;
    for (; ex > ey; ex--) {
        if (ux >= uy) { ux -= uy; if (ux == 0u) return uintBitsToFloat(sx); }
        ux <<= 1;
    }
    if (ux >= uy) { ux -= uy; if (ux == 0u) return uintBitsToFloat(sx); }
    while ((ux & 0x00800000u) == 0u) { ux <<= 1; ex--; }
    /* back to a float: normal, or shifted into a subnormal (exact: the remainder is below |b|) */
    ux = ex > 0 ? ((ux - 0x00800000u) | (uint(ex) << 23)) : (ux >> uint(1 - ex));
    return uintBitsToFloat(ux | sx);
}
""",
    "fj_floordiv_f": """
float fj_divmod(float a, float b, out float modulus) {
    float mod = fj_fmod(a, b);
    if (b == 0.0) { modulus = mod; return fj_divzero(a, b); }
    if (fj_isnan(b) || fj_isnan(a)) { modulus = mod; return a / b; }
    float div = fj_quot(a - mod, b);
    if (!(mod == 0.0)) {  /* NaN too: SPIR-V's != is ordered */
        if ((b < 0.0) != (mod < 0.0)) { mod += b; div -= 1.0; }
    } else {
        mod = b < 0.0 || (floatBitsToUint(b) >> 31) != 0u ? -0.0 : 0.0;
    }
    float floordiv;
    if (!(div == 0.0)) {
        floordiv = fj_isnan(div) ? div : floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = (floatBitsToUint(a / b) >> 31) != 0u ? -0.0 : 0.0;
    }
    modulus = mod;
    return floordiv;
}
float fj_floordiv_f(float a, float b) {
    float mod;
    if (b == 0.0) return fj_divzero(a, b);
    return fj_divmod(a, b, mod);
}
float fj_remainder_f(float a, float b) {
    float mod;
    if (b == 0.0) return fj_fmod(a, b);
    fj_divmod(a, b, mod);
    return mod;
}
""",
    "fj_floordiv_i": """
int fj_floordiv_i(int a, int b) {
    if (b == 0) return 0;
    if (b == -1) return -a;
    int q = a / b;  // (GLSL's % of negative operands is undefined: NVIDIA's differs from C's)
    int r = a - q * b;
    if (r != 0 && ((r < 0) != (b < 0))) q -= 1;
    return q;
}
int fj_remainder_i(int a, int b) {
    if (b == 0 || b == -1) return 0;
    int r = a - (a / b) * b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
""",
    "fj_pow_i": """
uint fj_upow(uint x, uint e) {
    uint r = 1u;
    while (e != 0u) { if ((e & 1u) != 0u) r *= x; x *= x; e >>= 1; }
    return r;
}
int fj_pow_i(int a, int b) {
    if (b < 0) return (a == 1) ? 1 : ((a == -1) ? (((b & 1) != 0) ? -1 : 1) : 0);
    return int(fj_upow(uint(a), uint(b)));
}
uint fj_pow_u(uint a, uint b) { return fj_upow(a, b); }
""",
    "fj_gcd_i": """
uint fj_ugcd(uint x, uint y) {
    while (y != 0u) { uint r = x % y; x = y; y = r; }
    return x;
}
uint fj_uabs(int a) { return a < 0 ? 0u - uint(a) : uint(a); }
int fj_gcd_i(int a, int b) { return int(fj_ugcd(fj_uabs(a), fj_uabs(b))); }
uint fj_gcd_u(uint a, uint b) { return fj_ugcd(a, b); }
int fj_lcm_i(int a, int b) {
    uint g = fj_ugcd(fj_uabs(a), fj_uabs(b));
    return g == 0u ? 0 : int((fj_uabs(a) / g) * fj_uabs(b));
}
uint fj_lcm_u(uint a, uint b) {
    uint g = fj_ugcd(a, b);
    return g == 0u ? 0u : (a / g) * b;
}
""",
    "fj_pow_f": """
float fj_pow_f(float a, float b) {
    /* C pow's special cases; GLSL pow is undefined for a < 0 and for a == 0, b <= 0 */
    if (b == 0.0 || a == 1.0) return 1.0;
    if (fj_isnan(a) || fj_isnan(b)) return fj_isnan(a) ? a : b;
    if (b == 1.0) return a;  /* (exp2(log2(a)) of 3.4e38 overflowed) */
    float ab = abs(a);
    bool b_int = floor(b) == b && (floatBitsToUint(b) & 0x7fffffffu) < 0x7f800000u;
    bool odd = b_int && abs(b) < 16777216.0 && mod(abs(b), 2.0) == 1.0;
    if ((floatBitsToUint(b) & 0x7fffffffu) == 0x7f800000u) {
        if (ab == 1.0) return 1.0;
        return (ab > 1.0) == (b > 0.0) ? uintBitsToFloat(0x7f800000u) : 0.0;
    }
    if (floatBitsToUint(ab) == 0x7f800000u) {
        float r = b > 0.0 ? ab : 0.0;
        return (a < 0.0 && odd) ? -r : r;
    }
    if (a == 0.0) {
        float r = b < 0.0 ? uintBitsToFloat(0x7f800000u) : 0.0;
        return odd ? uintBitsToFloat(floatBitsToUint(r) | (floatBitsToUint(a) & 0x80000000u)) : r;
    }
    if (a < 0.0 && !b_int) return uintBitsToFloat(0x7fc00000u);
    float r = exp2(b * fj_log2_pos(ab));
    return (a < 0.0 && odd) ? -r : r;
}
""",
    "fj_atan2": """
float fj_atan2(float y, float x) {
    if (fj_isnan(x) || fj_isnan(y)) return fj_isnan(x) ? x : y;
    float s = (floatBitsToUint(y) >> 31) != 0u ? -1.0 : 1.0;
    bool xneg = (floatBitsToUint(x) >> 31) != 0u;
    bool xinf = (floatBitsToUint(x) & 0x7fffffffu) == 0x7f800000u;
    bool yinf = (floatBitsToUint(y) & 0x7fffffffu) == 0x7f800000u;
    if (y == 0.0) return xneg ? s * 3.14159265358979 : s * 0.0;
    if (yinf) return s * (xinf ? (xneg ? 2.35619449019234 : 0.785398163397448) : 1.5707963267949);
    if (xinf) return xneg ? s * 3.14159265358979 : s * 0.0;
    if (x == 0.0) return s * 1.5707963267949;
    return atan(y, x);
}
""",
    "fj_hypot": """
float fj_hypot(float a, float b) {
    float x = abs(a), y = abs(b);
    if (floatBitsToUint(x) == 0x7f800000u || floatBitsToUint(y) == 0x7f800000u)
        return uintBitsToFloat(0x7f800000u);
    if (fj_isnan(x) || fj_isnan(y)) return fj_isnan(x) ? x : y;
    float m = max(x, y), n = min(x, y);
    if (m == 0.0) return 0.0;
    float r = n / m;
    return m * sqrt(1.0 + r * r);
}
""",
    "fj_nextafter": """
float fj_nextafter(float a, float b) {
    if (fj_isnan(a) || fj_isnan(b)) return fj_isnan(a) ? a : b;
    if (a == b) return b;
    if (a == 0.0) return uintBitsToFloat(b > 0.0 ? 1u : 0x80000001u);
    uint h = floatBitsToUint(a);
    if ((a < b) == (a > 0.0)) h += 1u; else h -= 1u;
    return uintBitsToFloat(h);
}
""",
    "fj_ldexp": """
float fj_ldexp(float a, int e) {
    /* in steps, so neither the scale factor nor an intermediate overflows too early */
    if (a == 0.0 || fj_isnan(a) || (floatBitsToUint(a) & 0x7fffffffu) == 0x7f800000u) return a;
    e = clamp(e, -400, 400);
    while (e > 100) { a *= uintBitsToFloat(0x71800000u); e -= 100; }
    while (e < -100) { a *= uintBitsToFloat(0x0d800000u); e += 100; }
    return e > 0 ? a * uintBitsToFloat(uint(e + 127) << 23) :
        (e >= -126 ? a * uintBitsToFloat(uint(e + 127) << 23)
                   : a * uintBitsToFloat(uint(e + 126 + 127) << 23) * uintBitsToFloat(0x00800000u));
}
""",
    "fj_logaddexp": """
float fj_logaddexp(float x, float y) {
    if (fj_isnan(x) || fj_isnan(y)) return fj_isnan(x) ? x : y;
    if (x == y) return x + 0.693147180559945;
    float tmp = x - y;
    if (tmp > 0.0) return x + fj_special_fj_log1p(exp(-tmp));
    if (tmp <= 0.0) return y + fj_special_fj_log1p(exp(tmp));
    return tmp;
}
float fj_logaddexp2(float x, float y) {
    if (fj_isnan(x) || fj_isnan(y)) return fj_isnan(x) ? x : y;
    if (x == y) return x + 1.0;
    float tmp = x - y;
    if (tmp > 0.0) return x + 1.44269504088896 * fj_special_fj_log1p(exp2(-tmp));
    if (tmp <= 0.0) return y + 1.44269504088896 * fj_special_fj_log1p(exp2(tmp));
    return tmp;
}
""",
}
# The unary math ops: NaN propagates and infinities/zeros/domain edges give C's values before
# the builtin (undefined there in GLSL) is reached. (name, argument conditions -> result)
_INF, _NINF, _NAN = "uintBitsToFloat(0x7f800000u)", "uintBitsToFloat(0xff800000u)", \
    "uintBitsToFloat(0x7fc00000u)"
# The logs by the bits: a negative x (-0.0 aside) is NaN, a zero -inf, and a subnormal x is
# bits * 2^-149, whose log is the log of the (exact, normal) float of its bits less 149 log(2):
# lavapipe's builtins read subnormals as if normal (log2(1.4e-45) gave -127, not -149), and a
# driver that flushes them would give -inf
_LOG = [("floatBitsToUint(x) > 0x80000000u", _NAN), ("(floatBitsToUint(x) & 0x7fffffffu) == 0u",
                                                      _NINF), ("x == " + _INF, "x")]
_SUBNORMAL = "floatBitsToUint(x) < 0x00800000u"  # (after _LOG's cases: a positive subnormal)
_BITS = "float(floatBitsToUint(x))"
# (where Vulkan bounds the log builtins' error absolutely: 2^-21, which near x = 1 is most of
# the result: lavapipe's log(0.9999999) was 13 % off)
_NEAR1 = "x >= 0.5 && x <= 2.0"
_LN2_149, _LG2_149 = (repr(float(np.float32(149 * c))) for c in (math.log(2), math.log10(2)))
SPECIAL: dict[str, list[tuple[str, str]]] = {
    "exp": [("x == " + _INF, "x"), ("x == " + _NINF, "0.0"), ("x > 88.8", _INF)],
    "exp2": [("x == " + _INF, "x"), ("x == " + _NINF, "0.0"), ("x >= 128.0", _INF)],
    "fj_expm1": [("x == " + _INF, "x"), ("x == " + _NINF, "-1.0"), ("x > 88.8", _INF),
                 ("x == 0.0", "x")],
    "log": [*_LOG, (_SUBNORMAL, f"log({_BITS}) - {_LN2_149}"), (_NEAR1, "fj_log_near1(x)")],
    "log2": [*_LOG, (_SUBNORMAL, f"log2({_BITS}) - 149.0"),
             (_NEAR1, "fj_log_near1(x) * 1.4426950408889634")],
    "fj_log10": [*_LOG, (_SUBNORMAL, f"fj_log10({_BITS}) - {_LG2_149}"),
                 (_NEAR1, "fj_log_near1(x) * 0.4342944819032518")],
    "fj_log1p": [("x < -1.0", _NAN), ("x == -1.0", _NINF), ("x == " + _INF, "x"),
                 ("x == 0.0", "x")],
    "sqrt": [("x < 0.0", _NAN), ("x == 0.0", "x"), ("x == " + _INF, "x")],
    # (a subnormal x = +-(bits / 4) * 2^-147 by its bits, and 2^-147 = (2^-49)^3)
    "fj_cbrt": [("(floatBitsToUint(x) & 0x7fffffffu) == 0u", "x"), ("abs(x) == " + _INF, "x"),
                ("(floatBitsToUint(x) & 0x7fffffffu) < 0x00800000u",
                 ("fj_cbrt(((floatBitsToUint(x) >> 31) != 0u ? -0.25 : 0.25) * "
                  "float(floatBitsToUint(x) & 0x7fffffffu)) * 1.7763568394002505e-15"))],
    # small arguments by series: the builtins' error bound is absolute (2^-11 in Vulkan's table)
    "sin": [("abs(x) == " + _INF, _NAN), ("x == 0.0", "x"),
            ("abs(x) < 0.01", "fj_series(x, 0.0, -0.166666667, 0.0, 0.00833333333)")],
    "cos": [("abs(x) == " + _INF, _NAN)],
    "tan": [("abs(x) == " + _INF, _NAN), ("x == 0.0", "x"),
            ("abs(x) < 0.01", "fj_series(x, 0.0, 0.333333333, 0.0, 0.133333333)")],
    "asin": [("abs(x) > 1.0", _NAN), ("x == 0.0", "x"),
             ("abs(x) < 0.01", "fj_series(x, 0.0, 0.166666667, 0.0, 0.075)")],
    # (near 1, where the result is small, by the half angle: 1 - x is exact there)
    "acos": [("abs(x) > 1.0", _NAN), ("x > 0.5", "2.0 * asin(sqrt((1.0 - x) * 0.5))")],
    "atan": [("x == " + _INF, "1.5707963267949"), ("x == " + _NINF, "-1.5707963267949"),
             ("x == 0.0", "x"), ("abs(x) < 0.01", "fj_series(x, 0.0, -0.333333333, 0.0, 0.2)")],
    # beyond 9, e^-|x| is below half an ulp of e^|x|: e^|x| / 2 as (e^(|x|/2) / 2) * e^(|x|/2),
    # which stays finite up to sinh's own overflow (the builtins' e^x overflows from 88.7 on)
    # (inf by its bits: NVIDIA's compiler turned x * inf into a finite value)
    "sinh": [("abs(x) > 89.5", "uintBitsToFloat((floatBitsToUint(x) & 0x80000000u) | 0x7f800000u)"),
             ("x == 0.0", "x"),
             ("abs(x) > 9.0", "(x < 0.0 ? -fj_half_exp(abs(x)) : fj_half_exp(x))"),
             ("abs(x) < 0.01", "fj_series(x, 0.0, 0.166666667, 0.0, 0.00833333333)")],
    "cosh": [("abs(x) > 89.5", _INF), ("abs(x) > 9.0", "fj_half_exp(abs(x))")],
    "tanh": [("x > 9.0", "1.0"), ("x < -9.0", "-1.0"), ("x == 0.0", "x"),
             ("abs(x) < 0.01", "fj_series(x, 0.0, -0.333333333, 0.0, 0.133333333)")],
    # the builtins square x (log(x + sqrt(x*x +- 1))): beyond 2^60 that overflows, while
    # asinh/acosh are log(2x) to float32 precision there
    "asinh": [("abs(x) == " + _INF, "x"), ("x == 0.0", "x"),
              ("abs(x) < 0.01", "fj_series(x, 0.0, -0.166666667, 0.0, 0.075)"),
              ("x > 1.1529215e18", "log(x) + 0.693147180559945"),
              ("x < -1.1529215e18", "-(log(-x) + 0.693147180559945)")],
    "acosh": [("x < 1.0", _NAN), ("x == " + _INF, "x"),
              ("x > 1.1529215e18", "log(x) + 0.693147180559945")],
    "atanh": [("abs(x) > 1.0", _NAN), ("x == 1.0", _INF), ("x == -1.0", _NINF),
              ("x == 0.0", "x"), ("abs(x) < 0.01", "fj_series(x, 0.0, 0.333333333, 0.0, 0.2)")],
}
DERIVED = """
float fj_log_near1(float x) {
    /* log(x) for x in [0.5, 2] as 2 atanh(s), s = (x - 1) / (x + 1) (x - 1 is exact there),
       by its series to s^15: within 4 ULP */
    float s = (x - 1.0) / (x + 1.0), z = s * s;
    return s * (2.0 + z * (0.6666666666666666 + z * (0.4 + z * (0.2857142857142857 +
        z * (0.2222222222222222 + z * (0.18181818181818182 + z * (0.15384615384615385 +
        z * 0.13333333333333333)))))));
}
float fj_log_u(float u) { return u >= 0.5 && u <= 2.0 ? fj_log_near1(u) : log(u); }
float fj_log2_pos(float x) {
    /* log2 of x > 0 as SPECIAL's log2: a subnormal x through its bits (x = bits * 2^-149),
       x in [0.5, 2] by the series */
    uint u = floatBitsToUint(x);
    if (x >= 0.5 && x <= 2.0) return fj_log_near1(x) * 1.4426950408889634;
    return u < 0x00800000u ? log2(float(u)) - 149.0 : log2(x);
}
float fj_series(float x, float c2, float c3, float c4, float c5) {
    /* x + c2 x^2 + ... + c5 x^5: the small-argument branch of the functions below, where the
       builtins (exp(x) - 1, log(1 + x), (e^x - e^-x) / 2, ...) cancel */
    return x + x * x * (c2 + x * (c3 + x * (c4 + x * c5)));
}
float fj_expm1(float x) {
    if (abs(x) < 0.01) return fj_series(x, 0.5, 0.166666667, 0.0416666667, 0.00833333333);
    float u = exp(x);
    if (u == 1.0) return x;
    float um1 = u - 1.0;
    if (um1 == -1.0) return -1.0;
    return um1 * (x / fj_log_u(u));
}
float fj_log1p(float x) {
    if (abs(x) < 0.01) return fj_series(x, -0.5, 0.333333333, -0.25, 0.2);
    float u = 1.0 + x;
    if (u == 1.0) return x;
    return fj_log_u(u) * (x / (u - 1.0));
}
float fj_half_exp(float ax) {
    float e = exp(ax * 0.5);
    return (e * 0.5) * e;
}
float fj_log10(float x) { return log2(x) * 0.301029995663981; }
float fj_cbrt(float x) {
    float r = exp2(log2(abs(x)) / 3.0);
    r = r + (abs(x) / (r * r) - r) / 3.0;  /* one Newton step, without overflowing r^3 */
    return (floatBitsToUint(x) >> 31) != 0u ? -r : r;
}
"""


def float_literal(value: float) -> str:
    """A float32 GLSL literal of exactly ``value`` rounded to float32; infinities, NaN and
    subnormals by their bits (Vulkan lets a driver assume the first two away and flush the
    last). Here, not in target.py: the float64 spellings (double.py) build on it too."""
    v = np.float32(value)
    bits = int(v.view(np.uint32))
    if not math.isfinite(float(v)) or (v != 0 and abs(float(v)) < float(np.finfo(np.float32).tiny)):
        return f"uintBitsToFloat({bits:#x}u)"
    if v == 0:
        return "(-0.0)" if np.signbit(v) else "0.0"
    text = repr(float(v))
    if "e" not in text and "." not in text:
        text += ".0"
    return f"({text})" if text.startswith("-") else text


def truth(dtype: np.dtype, x: str) -> str:
    """``x != 0`` as a bool; floats by bit pattern, so NaN is true and -0.0 false."""
    if dtype.kind == "b":
        return x
    if dtype == np.float64:  # (no bit access to doubles: see glsl_double)
        return f"(fj_isnan_d({x}) || {x} != double(0.0))"
    if dtype.kind == "f":
        return f"((floatBitsToUint({x}) & 0x7fffffffu) != 0u)"
    return f"({x} != {'0u' if dtype.kind == 'u' else '0'})"


def special(fn: str) -> str:
    cases = "".join(f"    if ({c}) return {r};\n" for c, r in SPECIAL.get(fn, []))
    return (f"float fj_special_{fn}(float x) {{\n    if (fj_isnan(x)) return x;\n{cases}"
            f"    return {fn}(x);\n}}\n")


# float16 computes in float32 (as NumPy's float16 loops do) and is rounded back to half after
# every op by bit manipulation, so the rounding is round-to-nearest-even on every driver
# (SPIR-V leaves the rounding of a float -> float16_t conversion to the implementation)
HALF = """
float fj_rh(float x) {
    uint u = floatBitsToUint(x), a = u & 0x7fffffffu, s = u & 0x80000000u;
    if (a >= 0x7f800000u) return x;  /* inf, NaN */
    if (a >= 0x477ff000u) return uintBitsToFloat(s | 0x7f800000u);  /* >= 65520: inf */
    if (a < 0x38800000u) {  /* half subnormals: multiples of 2^-24, exact in float32 */
        float r = roundEven(uintBitsToFloat(a) * 16777216.0) * 5.9604644775390625e-8;
        return uintBitsToFloat(floatBitsToUint(r) | s);
    }
    a += 0x0fffu + ((a >> 13) & 1u);
    return uintBitsToFloat(s | (a & 0xffffe000u));
}
uint fj_hbits(float x) {
    /* the half bit pattern of a float32 that holds a half value */
    uint u = floatBitsToUint(x), a = u & 0x7fffffffu, s = (u >> 16) & 0x8000u;
    if (a > 0x7f800000u) return s | 0x7e00u | ((a >> 13) & 0x3ffu);
    if (a == 0x7f800000u) return s | 0x7c00u;
    if (a < 0x38800000u) return s | uint(uintBitsToFloat(a) * 16777216.0);
    return s | ((a >> 13) - 0x1c000u);
}
float fj_hfloat(uint h) {
    uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0u) return uintBitsToFloat(floatBitsToUint(float(m) * 5.9604644775390625e-8) | s);
    if (e == 31u) return uintBitsToFloat(s | 0x7f800000u | (m << 13));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}
float fj_nextafter_h(float a, float b) {
    if (fj_isnan(a) || fj_isnan(b)) return fj_isnan(a) ? a : b;
    if (a == b) return EQUAL;
    if (a == 0.0) return fj_hfloat(b > 0.0 ? 1u : 0x8001u);
    uint h = fj_hbits(a);
    if ((a < b) == (a > 0.0)) h += 1u; else h -= 1u;
    return fj_hfloat(h);
}
""".replace("EQUAL", "b" if np.signbit(np.nextafter(np.float16(0.0), np.float16(-0.0))) else "a")
