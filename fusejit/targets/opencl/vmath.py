"""fusejit's own vectorised math for CPU devices (PoCL): OpenCL C helpers behind the vector
templates of ``opencl.py`` (``_VEC``), used only where a work-item computes a vector of lanes
(``lowering.vector_ops``, not on GPUs). PoCL computes its vector builtins lane by lane or calls
them out of line; these are straight-line vector code within the ULP bounds documented beside
each, with the builtin kept for the lanes they do not cover.

Every helper is keyed so that the target's sorted emission puts it after what it calls.
"""

from __future__ import annotations

import math

from fusejit.ir.ops import Op

# sin and cos of float vectors below 2^20: the double core's reduction (opencl_helpers.py's
# _TRIG_CORE: Cody-Waite),
# then float polynomials, twice the lanes per instruction (PoCL, one thread, 2^22 floats: sin
# 15.3 -> 10.1 ms). The reduced argument comes back as rh + rl, two floats; musl's __sindf and
# __cosdf polynomials (2^-37.5 and 2^-34.1 on [-pi/4, pi/4]) are summed with rl's first-order
# terms and cos's 1 - rh^2/2 split exactly (Veltkamp: PoCL's vector fma is a call), leaving
# one rounding at the end: below 0.8 ulp of the exact value in the tests (without rl, 1.47).
# Vectors with a lane of |x| >= 2^20 (or NaN, an infinity) take the double core.
_TRIG_REDUCE_HALF = """
inline float{m} fj_rem_pio2h_{m}(float{m} x, float{m} *rl, int{m} *quadrant) {{
    long{m} q;
    double{m} r = fj_rem_pio2_{m}(x, &q);
    float{m} rh = convert_float{m}(r);
    *rl = convert_float{m}(r - convert_double{m}(rh));
    *quadrant = convert_int{m}(q & (long{m})(3));
    return rh;
}}
"""
_TRIG_REDUCE_SPLIT = """
inline float{n} fj_rem_pio2h_{n}(float{n} x, float{n} *rl, int{n} *quadrant) {{
    float{h} l0, l1;
    int{h} q0, q1;
    float{n} r = (float{n})(fj_rem_pio2h_{h}(x.lo, &l0, &q0), fj_rem_pio2h_{h}(x.hi, &l1, &q1));
    *rl = (float{n})(l0, l1);
    *quadrant = (int{n})(q0, q1);
    return r;
}}
"""
_TRIG_FLOAT = """
inline float{m} fj_veltkamp_sq_{m}(float{m} y, float{m} z) {{
    float{m} c = y * 4097.0f, hi = c - (c - y), lo = y - hi;
    return ((hi * hi - z) + 2.0f * (hi * lo)) + lo * lo;
}}
inline float{m} fj_sin_polyf{m}(float{m} y, float{m} yl, float{m} z) {{
    float{m} p = -0x1.555556p-3f + z * (0x1.111108p-7f + z * (-0x1.a00f9ep-13f
                                                            + z * 0x1.6cd878p-19f));
    return y + ((y * z) * p + (yl - (0.5f * z) * yl));
}}
inline float{m} fj_cos_polyf{m}(float{m} y, float{m} yl, float{m} z) {{
    float{m} zl = fj_veltkamp_sq_{m}(y, z), hz = 0.5f * z, t = 1.0f - hz;
    float{m} q = 0x1.55553ep-5f + z * (-0x1.6c087ep-10f + z * 0x1.99342ep-16f);
    float{m} small = (((1.0f - t) - hz) + (z * 0x1.79d0c0p-29f - 0.5f * zl))
        + ((z * z) * q - y * yl);
    return t + small;
}}
inline float{m} fj_sincosf{m}(float{m} x, int cosine) {{
    float{m} yl;
    int{m} q;
    float{m} y = fj_rem_pio2h_{m}(x, &yl, &q), z = y * y;
    q += (int{m})(cosine);  // cos(x) = sin(x + pi/2): one quadrant on
    int{m} odd = -(q & (int{m})(1));
    float{m} r = as_float{m}((as_int{m}(fj_sin_polyf{m}(y, yl, z)) & ~odd)
                             | (as_int{m}(fj_cos_polyf{m}(y, yl, z)) & odd));
    r = as_float{m}(as_int{m}(r) ^ ((q & (int{m})(2)) << 30));
    if (cosine) return r;
    // below 2^-12, sin(x) rounds to x, and x keeps -0.0 (the reduction's sums lose it); bit
    // operations, not select(), which PoCL calls out of line
    int{m} tiny = (as_int{m}(x) & (int{m})(0x7fffffff)) < (int{m})(0x39800000);
    return as_float{m}((as_int{m}(r) & ~tiny) | (as_int{m}(x) & tiny));
}}
inline float{m} fj_sin{m}(float{m} x) {{
    int{m} ax = as_int{m}(x) & (int{m})(0x7fffffff);
    return fj_any{m}(ax >= (int{m})(0x49800000)) ? fj_sind{m}(x) : fj_sincosf{m}(x, 0);
}}
inline float{m} fj_cos{m}(float{m} x) {{
    int{m} ax = as_int{m}(x) & (int{m})(0x7fffffff);
    return fj_any{m}(ax >= (int{m})(0x49800000)) ? fj_cosd{m}(x) : fj_sincosf{m}(x, 1);
}}
"""


def _any_helper(n: int) -> str:
    """fj_any{n}: whether a lane of a comparison's mask is set, by ORs of the halves (PoCL calls
    its any() out of line, which cost the trig functions ~15 %)."""
    halves, m = [], n
    while m > 1:
        halves.append(f"    int{m // 2 if m > 2 else ''} v{m // 2} = v{m}.lo | v{m}.hi;")
        m //= 2
    body = "\n".join(halves)
    return f"inline int fj_any{n}(int{n} v{n}) {{\n{body}\n    return v1 < 0;\n}}\n"


def any_helpers(n: int) -> dict[str, str]:
    """fj_any{m} for the widths up to ``n`` (keys sort before every trig and pow helper)."""
    return {f"trig_any{m:02d}": _any_helper(m) for m in (2, 4, 8, 16) if m <= n}


def _halves(n: int, core: str, split: str, key: str) -> dict[str, str]:
    """``core`` at n <= 4 lanes (double4 is one AVX register), else ``split`` over halves."""
    if n <= 4:
        return {f"{key}{n:02d}": core.format(m=n)}
    return {**_halves(n // 2, core, split, key), f"{key}{n:02d}": split.format(n=n, h=n // 2)}


def sincos_helpers(n: int) -> dict[str, str]:
    """fj_sin{n} and fj_cos{n} (after opencl.py's double core, trig_vector{n})."""
    return {**_halves(n, _TRIG_REDUCE_HALF, _TRIG_REDUCE_SPLIT, "trig_vector_r"),
            f"trig_vector_s{n:02d}": _TRIG_FLOAT.format(m=n)}


# float32 x ** y of vectors as 2^(y log2 x) in double: log2 by the atanh series of
# s = (m - 1)/(m + 1) for the mantissa m in [sqrt(2)/2, sqrt(2)] (|s| <= 0.1716, truncated after
# s^13: 2^-39.5 relative), exp2 by rint and a degree-9 Taylor polynomial of e^(f ln 2) on
# |f| <= 1/2 (2^-37 relative), the power of two put in the exponent bits. |y log2 x| decides
# the result's accuracy; it stays below ~150 wherever the float result is finite and nonzero, so
# the double errors add under 2^-32 relative: within 0.51 ulp of the exact power (PoCL's pow,
# which the lanes of x <= 0, infinities and NaN still take, was 3x slower than NumPy's powf).
# Vectors of more than 4 lanes (double4 is one AVX register) take their halves.
_POW_CORE = """
inline double{m} fj_dpick_{m}(double{m} a, double{m} b, long{m} take_b) {{
    return as_double{m}((as_long{m}(a) & ~take_b) | (as_long{m}(b) & take_b));
}}
inline float{m} fj_powd{m}(float{m} a, float{m} b) {{
    double{m} x = convert_double{m}(a);  // (float subnormals are normal doubles)
    long{m} bits = as_long{m}(x);
    double{m} m = as_double{m}((bits & (long{m})(0x000fffffffffffffL))
                               | (long{m})(0x3ff0000000000000L));
    long{m} big = m > 0x1.6a09e667f3bcdp+0;
    m = fj_dpick_{m}(m, m * 0.5, big);
    double{m} e = convert_double{m}(((bits >> 52) & (long{m})(0x7ff)) - (long{m})(1023) - big);
    double{m} s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double{m} series = 1.0 + s2 * (0x1.5555555555555p-2 + s2 * (0x1.999999999999ap-3
        + s2 * (0x1.2492492492492p-3 + s2 * (0x1.c71c71c71c71cp-4 + s2 * (0x1.745d1745d1746p-4
        + s2 * 0x1.3b13b13b13b14p-4)))));
    double{m} yd = convert_double{m}(b);
    double{m} t = yd * e + yd * ((s * 0x1.71547652b82fep+1) * series);
    t = fj_dpick_{m}(t, (double{m})(1000.0), t > 1000.0);
    t = fj_dpick_{m}(t, (double{m})(-1000.0), t < -1000.0);
    double{m} shifted = t + 0x1.8p52, k = shifted - 0x1.8p52;
    double{m} u = (t - k) * 0x1.62e42fefa39efp-1;
    double{m} p = 1.0 + u * (1.0 + u * (0.5 + u * (0x1.5555555555555p-3 + u * (0x1.5555555555555p-5
        + u * (0x1.1111111111111p-7 + u * (0x1.6c16c16c16c17p-10 + u * (0x1.a01a01a01a01ap-13
        + u * (0x1.a01a01a01a01ap-16 + u * 0x1.71de3a556c734p-19))))))));
    long{m} scale = (as_long{m}(shifted) - as_long{m}((double{m})(0x1.8p52)) + (long{m})(1023))
        << 52;
    return convert_float{m}(p * as_double{m}(scale));
}}
"""
_POW_SPLIT = """
inline float{n} fj_powd{n}(float{n} a, float{n} b) {{
    return (float{n})(fj_powd{h}(a.lo, b.lo), fj_powd{h}(a.hi, b.hi));
}}
"""
# x ** y for |y| <= 4 (x ** 2.2, x ** -0.5: every constant exponent of that size folds the
# choice away) in the type of x, float32 or float64 (fj_pow{T}_small_y): log2 by the atanh
# series of s = (m - 1)/(m + 1), y log2 x as bh e + (bl e + y K s (1 + q)) with y split so that
# both parts' products with the exponent e are exact, exp2 of the reduced r by a polynomial, 2^k
# put in as two factors (subnormal results round once). Polynomials may be contracted to fma.
# The error is mostly that of y K s, |y K s| <= 1.1 |y|: at most 3.96 ULP (float32) and 3.99
# (float64) measured over the whole range, 5 and 8 tested (tests/targets/test_pow_vector.py;
# the op table allows 20). float32 in float has twice the lanes per instruction of the double
# path above (0.51 ULP), which |y| > 4 keeps. PoCL, x ** 2.2 of 2^22 elements, CPU time on one
# thread: float32 11.0 -> 5.9 ms (NumPy's AVX-512 powf 4.6), float64 170 -> 21 ms (PoCL's
# double pow is a call per lane; NumPy 16).
_POW_SMALL_Y = """
inline {T}{m} fj_pick{T}_{m}({T}{m} a, {T}{m} b, {I}{m} take_b) {{
    return as_{T}{m}((as_{I}{m}(a) & ~take_b) | (as_{I}{m}(b) & take_b));
}}
inline {T}{m} fj_pow{T}_small_y{m}({T}{m} a, {T}{m} b) {{
    #pragma OPENCL FP_CONTRACT ON
    {I}{m} sub = as_{I}{m}(a) < ({I}{m})({MIN_NORMAL});  // (subnormal: scaled by 2^{MANT})
    {I}{m} ix = as_{I}{m}(fj_pick{T}_{m}(a, a * 0x1p{MANT}{c}, sub));
    {I}{m} e = (ix - ({I}{m})({SQRT_HALF})) >> {MANT};  // m in [sqrt(2)/2, sqrt(2))
    {T}{m} m = as_{T}{m}(ix - (e << {MANT}));
    {T}{m} f = m - 1.0{c}, d = m + 1.0{c}, s = f / d;
    {T}{m} s2 = s * s;
    {T}{m} q = s2 * {Q};
    {T}{m} ef = convert_{T}{m}(e - (sub & ({I}{m})({MANT})));
    {T}{m} bh = as_{T}{m}(as_{I}{m}(b) & ({I}{m})({SPLIT})), bl = b - bh;
    {T}{m} ks = (b * {K}) * s;  // y log2(m) = y (2 / ln 2) atanh(s)
    {T}{m} hi = bh * ef, mid = bl * ef, lo = ks + ks * q;  // (both products exact)
    {T}{m} t = hi + (mid + lo);
    t = fj_pick{T}_{m}(t, ({T}{m})({TMAX}), t > {TMAX});
    t = fj_pick{T}_{m}(t, ({T}{m})({TMIN}), t < {TMIN});
    {T}{m} shifted = t + 0x1.8p{MANT}{c}, k = shifted - 0x1.8p{MANT}{c};
    {T}{m} r = ((hi - k) + mid) + lo;  // (rounded once: the inner terms' bits fit)
    r = fj_pick{T}_{m}(r, ({T}{m})(1.0{c}), r > 1.0{c});  // (where t was clamped: 0 or inf)
    r = fj_pick{T}_{m}(r, ({T}{m})(-1.0{c}), r < -1.0{c});
    {T}{m} p = 1.0{c} + r * {P};
    {I}{m} ki = as_{I}{m}(shifted) - as_{I}{m}(({T}{m})(0x1.8p{MANT}{c})), k1 = ki >> 1;
    return (p * as_{T}{m}((k1 + ({I}{m})({BIAS})) << {MANT}))
        * as_{T}{m}((ki - k1 + ({I}{m})({BIAS})) << {MANT});
}}
"""


def _horner(var: str, coefficients: list[str]) -> str:
    """c0 + var * (c1 + var * (...)), as nested parentheses (contracted to fma or not)."""
    text = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        text = f"({c} + {var} * {text})"
    return text


# the two instances: float (a minimax cubic in s^2 for log2, 2^-29.7; a degree-6 minimax
# polynomial for exp2, 2^-25.9) and double (the atanh series to s^21, 2^-55; exp2's Taylor
# polynomial of degree 13, 2^-57); bh keeps 8 and 42 of y's bits
_SMALL_Y = {
    "float": {"T": "float", "I": "int", "c": "f", "MANT": 23, "BIAS": 127,
              "MIN_NORMAL": "0x00800000", "SQRT_HALF": "0x3f3504f3", "SPLIT": "0xffff0000",
              "K": "0x1.715476p+1f", "TMAX": "129.0f", "TMIN": "-152.0f",
              "Q": _horner("s2", ["0x1.55557ap-2f", "0x1.995e36p-3f", "0x1.31ee64p-3f"]),
              "P": _horner("r", ["0x1.62e43p-1f", "0x1.ebfbdcp-3f", "0x1.c6aed6p-5f",
                                 "0x1.3b2cc4p-7f", "0x1.5f44dcp-10f", "0x1.4258d8p-13f"])},
    "double": {"T": "double", "I": "long", "c": "", "MANT": 52, "BIAS": 1023,
               "MIN_NORMAL": "0x0010000000000000L", "SQRT_HALF": "0x3fe6a09e667f3bcdL",
               "SPLIT": "0xfffffffffffff800L", "K": "0x1.71547652b82fep+1", "TMAX": "1025.0",
               "TMIN": "-1080.0",
               "Q": _horner("s2", [f"{1 / (2 * k + 1)!r}" for k in range(1, 11)]),
               "P": _horner("r", [f"{math.log(2) ** k / math.factorial(k)!r}"
                                  for k in range(1, 14)])},
}
_POW_ENTRY = """
inline float{m} fj_powf{m}(float{m} a, float{m} b) {{
    int{m} big = (as_int{m}(b) & (int{m})(0x7fffffff)) > (int{m})(0x40800000);  // |b| > 4
    float{m} r = fj_any{m}(big) ? fj_powd{m}(a, b) : fj_powfloat_small_y{m}(a, b);
    int{m} ia = as_int{m}(a), bad = (ia <= (int{m})(0)) | (ia >= (int{m})(0x7f800000))
        | ((as_int{m}(b) & (int{m})(0x7fffffff)) >= (int{m})(0x7f800000));
    if (fj_any{m}(bad))  // x <= 0, infinities, NaN: the builtin's special cases
        r = as_float{m}((as_int{m}(r) & ~bad) | (as_int{m}({builtin}) & bad));
    return r;
}}
"""
# float64 vectors: the double instance, lanes of x <= 0, infinities, NaN and |y| > 4 by the
# builtin
_POW64 = """
inline double{m} fj_pow64_{m}(double{m} a, double{m} b) {{
    long{m} ia = as_long{m}(a), bad = (ia <= (long{m})(0))
        | (ia >= (long{m})(0x7ff0000000000000L))
        | ((as_long{m}(b) & (long{m})(0x7fffffffffffffffL)) > (long{m})(0x4010000000000000L));
    if (fj_any{m}(convert_int{m}(bad)))  // x <= 0, infinities, NaN, |y| > 4: the builtin
        return as_double{m}((as_long{m}(fj_powdouble_small_y{m}(a, b)) & ~bad)
                            | (as_long{m}({builtin}) & bad));
    return fj_powdouble_small_y{m}(a, b);
}}
"""
# float32 hypot of vectors: the squares summed and rooted in double. A float's square is exact
# in double and neither overflows nor underflows there, so the only errors are the sum's and the
# root's roundings and the final one to float: within 0.5 ULP + 2^-28 of the exact value, for
# every finite pair, without scaling or branches (PoCL's hypot is a call per lane: a Sobel
# filter ran at 0.77x NumPy). An infinite operand gives +inf even beside a NaN (C99, NumPy).
_HYPOT_CORE = """
inline float{m} fj_hypotd{m}(float{m} a, float{m} b) {{
    double{m} x = convert_double{m}(a), y = convert_double{m}(b);
    return convert_float{m}(sqrt(x * x + y * y));
}}
"""
_HYPOT_SPLIT = """
inline float{n} fj_hypotd{n}(float{n} a, float{n} b) {{
    return (float{n})(fj_hypotd{h}(a.lo, b.lo), fj_hypotd{h}(a.hi, b.hi));
}}
"""
_HYPOT_ENTRY = """
inline float{m} fj_hypotf{m}(float{m} a, float{m} b) {{
    int{m} inf = ((as_int{m}(a) & (int{m})(0x7fffffff)) == (int{m})(0x7f800000))
        | ((as_int{m}(b) & (int{m})(0x7fffffff)) == (int{m})(0x7f800000));
    return select(fj_hypotd{m}(a, b), (float{m})(INFINITY), inf);
}}
"""
_HYPOT_SCALAR = """
inline float fj_hypotf(float a, float b) {
    double x = a, y = b;
    float h = (float)sqrt(x * x + y * y);
    return (isinf(a) || isinf(b)) ? INFINITY : h;
}
"""
# float32 hypot and complex64 abs of one lane in double (scalar_hypot_helpers)
_DOUBLE_HYPOT = {(Op.HYPOT, "float32"): "fj_hypotf({a}, {b})",
                 (Op.HYPOT, "float16"): "fj_hypotf({a}, {b})",
                 (Op.ABS, "complex64"): "fj_hypotf({a}.x, {a}.y)"}
# the helper keys that need cl_khr_fp64
FP64_KEYS = ("trig_vector", "vpow", "vhypot")


def scalar_form(op: Op, dtype: str) -> tuple[str, dict[str, str]] | None:
    """One lane of fusejit's own math where PoCL's scalar builtin is a call per element, for
    kernels that compute lane by lane on a CPU: (template, helpers), or None. Powers take lane
    0 of the 2-lane vector power: x ** 2.2 of a (2^20 + 1, 3) float32 array (no vector
    divides the rows) on one PoCL thread 272 -> 28 ms, NumPy 2.5."""
    if op is Op.POW and dtype in ("float32", "float64"):
        double = dtype == "float64"
        t, name = ("double", "fj_pow64_2") if double else ("float", "fj_powf2")
        return f"{name}(({t}2)({{a}}), ({t}2)({{b}})).s0", pow_helpers(2, double=double)
    if (op, dtype) in _DOUBLE_HYPOT:
        return _DOUBLE_HYPOT[(op, dtype)], scalar_hypot_helpers()
    return None


def scalar_hypot_helpers() -> dict[str, str]:
    """fj_hypotf(a, b): the same in one lane, for kernels that compute lane by lane on a CPU
    (complex64 kernels: ``np.abs`` of a complex64 array ran at 0.05x NumPy with PoCL's hypot)."""
    return {"vhypot_scalar": _HYPOT_SCALAR}


def scalar_trig_helpers() -> dict[str, str]:
    """fj_sin1 and fj_cos1: one float through the two-lane vector sine and cosine, for
    complex64 functions on a CPU (PoCL's scalar sin and cos are calls, ~30x slower). Declared
    before the complex helpers that call them, defined after the vector trig (helpers are
    emitted in the order of their keys)."""
    return {"complex_0trig": "float fj_sin1(float x);\nfloat fj_cos1(float x);\n",
            "trig_~scalar": "float fj_sin1(float x) { return fj_sin2((float2)(x)).x; }\n"
                            "float fj_cos1(float x) { return fj_cos2((float2)(x)).x; }\n"}


def hypot_helpers(n: int) -> dict[str, str]:
    """fj_hypotf{n}(a, b): float32 hypot of ``n``-lane vectors."""
    return {**_halves(n, _HYPOT_CORE, _HYPOT_SPLIT, "vhypot"),
            f"vhypot_entry{n:02d}": _HYPOT_ENTRY.format(m=n)}


def _builtin_pow(t: str, m: int) -> str:
    """PoCL's pow of ``m``-lane operands, by halves of 32 bytes: its double8 pow gave 0 for inf
    (x ** 17.3 of large doubles)."""
    if m * (8 if t == "double" else 4) <= 32:
        return "pow(a, b)"
    return f"({t}{m})(pow(a.lo, b.lo), pow(a.hi, b.hi))"


def pow_helpers(n: int, double: bool = False) -> dict[str, str]:
    """fj_powf{n}(a, b): float32 power of ``n``-lane vectors; ``double``: fj_pow64_{n}(a, b),
    float64's."""
    if double:
        return {**any_helpers(n), f"vpow64_{n:02d}": _POW_SMALL_Y.format(m=n, **_SMALL_Y["double"])
                + _POW64.format(m=n, builtin=_builtin_pow("double", n))}
    return {**any_helpers(n), **_halves(n, _POW_CORE, _POW_SPLIT, "vpow"),
            f"vpow_core_f{n:02d}": _POW_SMALL_Y.format(m=n, **_SMALL_Y["float"]),
            f"vpow_entry{n:02d}": _POW_ENTRY.format(m=n, builtin=_builtin_pow("float", n))}
