"""OpenCL C helper functions of the OpenCL target, emitted once per module when a template
names them (``OpenCLTarget._require`` and the vector renderers pick them; each is formatted
with the template fields of its dtype): NumPy's floor division and remainder of signed ints,
integer power, gcd, Philox, float and float16 rounding helpers, and the vector sin/cos/tan.
"""

from __future__ import annotations

import numpy as np

from fusejit.targets.opencl import vmath as opencl_vmath

# sin, cos and tan of float vectors, after musl's sinf/cosf/tanf: the argument is reduced in
# double (Cody-Waite: x - k*pio2_1 - k*pio2_1t, where pio2_1 has 25 significant bits, so k*pio2_1
# is exact and the reduction error stays below 2^-50 |x| ulp for |x| < 2^20), then double
# polynomials on [-pi/4, pi/4] and one rounding to float: within 1 ulp (OPS[op].ulp allows 8).
# Lanes of |x| >= 2^20, infinities and NaN take the builtin lane by lane, whose Payne-Hanek
# reduction handles them; lanes below 2^-12 return x (sin, tan: that keeps -0.0). The core works
# on at most 4 lanes (double4 is one AVX2 register; wider double vectors are passed through
# memory on CPUs without AVX-512) and uses no builtin on doubles: k = rint(x*2/pi) by adding and
# subtracting 1.5*2^52 (FP_CONTRACT is off), whose low bits are then k's low bits.
_TRIG_CORE = """
inline double{m} fj_rem_pio2_{m}(float{m} x, long{m} *quadrant) {{
    double{m} xd = convert_double{m}(x);
    double{m} shifted = xd * 0x1.45f306dc9c883p-1 + 0x1.8p52;
    double{m} k = shifted - 0x1.8p52;
    *quadrant = as_long{m}(shifted);
    return (xd - k * 0x1.921fb5p+0) - k * 0x1.110b4611a6263p-26;
}}
inline double{m} fj_pick_{m}(double{m} a, double{m} b, long{m} take_b) {{
    return as_double{m}((as_long{m}(a) & ~take_b) | (as_long{m}(b) & take_b));
}}
inline double{m} fj_negate_if_{m}(double{m} a, long{m} bit) {{
    return as_double{m}(as_long{m}(a) ^ (bit << 63));
}}
inline double{m} fj_sin_poly{m}(double{m} y) {{
    double{m} z = y * y, w = z * z, s = z * y;
    return (y + s * (-0x15555554cbac77.0p-55 + z * 0x111110896efbb2.0p-59))
        + s * w * (-0x1a00f9e2cae774.0p-65 + z * 0x16cd878c3b46a7.0p-71);
}}
inline double{m} fj_cos_poly{m}(double{m} y) {{
    double{m} z = y * y, w = z * z;
    return ((1.0 + z * -0x1ffffffd0c5e81.0p-54) + w * 0x155553e1053a42.0p-57)
        + (w * z) * (-0x16c087e80f1e27.0p-62 + z * 0x199342e0ee5069.0p-68);
}}
inline float{m} fj_trig_fix{m}(float{m} r, float{m} x, int fn) {{
    int{m} ax = as_int{m}(x) & (int{m})(0x7fffffff);
    if (fn != 1) r = as_float{m}((as_int{m}(r) & ~(ax < (int{m})(0x39800000)))
                                 | (as_int{m}(x) & (ax < (int{m})(0x39800000))));
    if (fj_any{m}(ax >= (int{m})(0x49800000))) {{
        float lanes[{m}], xs[{m}];
        vstore{m}(r, 0, lanes);
        vstore{m}(x, 0, xs);
        for (int i = 0; i < {m}; i++) {{
            if ((as_uint(xs[i]) & 0x7fffffffu) >= 0x49800000u)
                lanes[i] = fn == 0 ? sin(xs[i]) : (fn == 1 ? cos(xs[i]) : tan(xs[i]));
        }}
        r = vload{m}(0, lanes);
    }}
    return r;
}}
inline float{m} fj_sind{m}(float{m} x) {{
    long{m} q;
    double{m} y = fj_rem_pio2_{m}(x, &q);
    double{m} r = fj_pick_{m}(fj_sin_poly{m}(y), fj_cos_poly{m}(y), -(q & (long{m})(1)));
    r = fj_negate_if_{m}(r, (q >> 1) & (long{m})(1));
    return fj_trig_fix{m}(convert_float{m}(r), x, 0);
}}
inline float{m} fj_cosd{m}(float{m} x) {{
    long{m} q;
    double{m} y = fj_rem_pio2_{m}(x, &q);
    double{m} r = fj_pick_{m}(fj_cos_poly{m}(y), fj_sin_poly{m}(y), -(q & (long{m})(1)));
    r = fj_negate_if_{m}(r, ((q + (long{m})(1)) >> 1) & (long{m})(1));
    return fj_trig_fix{m}(convert_float{m}(r), x, 1);
}}
inline float{m} fj_tan{m}(float{m} x) {{
    long{m} q;
    double{m} y = fj_rem_pio2_{m}(x, &q);
    double{m} z = y * y, w = z * z, s = z * y;
    double{m} u = 0x15554d3418c99f.0p-54 + z * 0x1112fd38999f72.0p-55;
    double{m} t = 0x1b54c91d865afe.0p-57 + z * 0x191df3908c33ce.0p-58;
    double{m} v = 0x185dadfcecf44e.0p-61 + z * 0x1362b9bf971bcd.0p-59;
    double{m} r = (y + s * u) + (s * w) * (t + w * v);
    r = fj_pick_{m}(r, -1.0 / r, -(q & (long{m})(1)));
    return fj_trig_fix{m}(convert_float{m}(r), x, 2);
}}
"""
# wider vectors: their halves
_TRIG_SPLIT = """
inline float{n} fj_sind{n}(float{n} x) {{ return (float{n})(fj_sind{h}(x.lo), fj_sind{h}(x.hi)); }}
inline float{n} fj_cosd{n}(float{n} x) {{ return (float{n})(fj_cosd{h}(x.lo), fj_cosd{h}(x.hi)); }}
inline float{n} fj_tan{n}(float{n} x) {{ return (float{n})(fj_tan{h}(x.lo), fj_tan{h}(x.hi)); }}
"""


def _trig_helpers(n: int) -> dict[str, str]:
    """The helper functions behind fj_sin{n}/fj_cos{n}/fj_tan{n}, by name."""
    return {**opencl_vmath.any_helpers(n), **_trig_double_helpers(n),
            **opencl_vmath.sincos_helpers(n)}


def _trig_double_helpers(n: int) -> dict[str, str]:
    """The double core behind fj_sind{n}/fj_cosd{n}/fj_tan{n}, by name."""
    if n <= 4:
        return {f"trig_vector{n:02d}": _TRIG_CORE.format(m=n)}  # (sorted: narrow first)
    return {**_trig_double_helpers(n // 2),
            f"trig_vector{n:02d}": _TRIG_SPLIT.format(n=n, h=n // 2)}


_SIGNED_HELPERS = """
inline {S} fj_floordiv_{t}({S} a, {S} b) {{
    if (b == 0) return 0;
    if (b == -1) return as_{S}(({U})(({W})0 - ({W})a));
    {S} q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}}
inline {S} fj_remainder_{t}({S} a, {S} b) {{
    if (b == 0 || b == -1) return 0;
    {S} r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}}
"""
_POW_HELPER = """
inline {S} fj_pow_{t}({S} a, {S} b) {{
    if (b < 0) return (a == 1) ? 1 : ((a == -1) ? ((b & 1) ? -1 : 1) : 0);
    {W} r = 1, x = ({W})({U})a;
    {U} e = ({U})b;
    while (e) {{
        if (e & 1) r = ({U})(r * x);
        x = ({U})(x * x);
        e >>= 1;
    }}
    return as_{S}(({U})r);
}}
"""
# Philox4x64-10 as NumPy's numpy/random/src/philox/philox.h computes it (reference:
# fusejit/ir/philox.py): ten rounds, the key bumped by the Weyl constants between rounds. The
# block is returned whole and the word picked outside, so the lanes (and the ops) that read
# other words of one block make the same call, which the compiler computes once when told it is
# a pure function (PoCL does not infer it: 3.4x slower float32 uniform without the attribute).
_PHILOX_HELPER = """
__attribute__((const)) ulong4 fj_philox4x64(ulong k0, ulong k1, ulong c0, ulong c1, ulong c2,
                                            ulong c3) {
    for (int r = 0; r < 10; r++) {
        if (r > 0) { k0 += 0x9E3779B97F4A7C15UL; k1 += 0xBB67AE8584CAA73BUL; }
        ulong hi0 = mul_hi(0xD2E7470EE14C6C93UL, c0), lo0 = 0xD2E7470EE14C6C93UL * c0;
        ulong hi1 = mul_hi(0xCA5A826395121157UL, c2), lo1 = 0xCA5A826395121157UL * c2;
        c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
    }
    return (ulong4)(c0, c1, c2, c3);
}
inline ulong fj_philox_word(ulong4 b, ulong w) {
    w &= 3;
    return w == 0 ? b.s0 : (w == 1 ? b.s1 : (w == 2 ? b.s2 : b.s3));
}
"""
# PoCL computes a kernel's work-items as vector lanes and has no vector 64-bit multiply-high:
# mul_hi on ulong is emulated there (Philox4x64-10 blocks 4x slower than through this). Its
# clang has __uint128_t, whose product is one multiply per lane.
_MULHI64_HELPER = """
inline ulong fj_mulhi64(ulong a, ulong b) { return (ulong)(((__uint128_t)a * b) >> 64); }
"""
# The same rounds where __uint128_t serves (PoCL): both halves of each product from one 128-bit
# multiply and the rounds unrolled, so a round's critical path is a multiply and two xors and
# the blocks of a work-item overlap. With a separate low product clang paired the two low
# halves into a vector multiply (vpmullq, 15 cycles of latency) and moved them between
# register files every round: float32 normals of 2^22 elements, one PoCL thread, 74 -> 40 ms.
_PHILOX_WIDE_HELPER = """
__attribute__((const)) ulong4 fj_philox4x64(ulong k0, ulong k1, ulong c0, ulong c1, ulong c2,
                                            ulong c3) {
    #pragma unroll
    for (int r = 0; r < 10; r++) {
        if (r > 0) { k0 += 0x9E3779B97F4A7C15UL; k1 += 0xBB67AE8584CAA73BUL; }
        __uint128_t p0 = (__uint128_t)0xD2E7470EE14C6C93UL * c0;
        __uint128_t p1 = (__uint128_t)0xCA5A826395121157UL * c2;
        c0 = (ulong)(p1 >> 64) ^ c1 ^ k0; c1 = (ulong)p1;
        c2 = (ulong)(p0 >> 64) ^ c3 ^ k1; c3 = (ulong)p0;
    }
    return (ulong4)(c0, c1, c2, c3);
}
"""


def philox_helper(wide_mul: bool) -> str:
    """_PHILOX_HELPER, or where ``wide_mul`` its rounds through 128-bit products
    (_PHILOX_WIDE_HELPER) with the same word picker."""
    if not wide_mul:
        return _PHILOX_HELPER
    picker = _PHILOX_HELPER[_PHILOX_HELPER.index("inline ulong fj_philox_word"):]
    return _PHILOX_WIDE_HELPER + picker


_GCD_HELPER = """
inline {U} fj_uabs_{t}({S} a) {{ return a < 0 ? ({U})(({W})0 - ({W})a) : ({U})a; }}
inline {S} fj_gcd_{t}({S} a, {S} b) {{
    {U} x = fj_uabs_{t}(a), y = fj_uabs_{t}(b);
    while (y != 0) {{ {U} r = x % y; x = y; y = r; }}
    return as_{S}(x);
}}
inline {S} fj_lcm_{t}({S} a, {S} b) {{
    {U} g = ({U})fj_gcd_{t}(a, b);
    if (g == 0) return 0;
    return as_{S}(({U})(({W})(fj_uabs_{t}(a) / g) * ({W})fj_uabs_{t}(b)));
}}
"""
_FLOAT_HELPERS = """
inline {S} fj_divmod_{t}({S} a, {S} b, {S} *modulus) {{
    {S} mod = fmod(a, b);
    if (b == 0) {{ *modulus = mod; return a / b; }}
    {S} div = (a - mod) / b;
    if (mod != 0) {{
        if ((b < 0) != (mod < 0)) {{ mod += b; div -= 1; }}
    }} else {{
        mod = copysign(({S})0, b);
    }}
    {S} floordiv;
    if (div != 0) {{
        floordiv = isnan(div) ? div : floor(div);  /* see _NAN_GUARDED */
        if (div - floordiv > ({S})0.5) floordiv += 1;
    }} else {{
        floordiv = copysign(({S})0, a / b);
    }}
    *modulus = mod;
    return floordiv;
}}
inline {S} fj_floordiv_{t}({S} a, {S} b) {{
    {S} mod;
    if (b == 0) return a / b;
    return fj_divmod_{t}(a, b, &mod);
}}
inline {S} fj_remainder_{t}({S} a, {S} b) {{
    {S} mod;
    if (b == 0) return fmod(a, b);
    fj_divmod_{t}(a, b, &mod);
    return mod;
}}
inline {S} fj_logaddexp_{t}({S} x, {S} y) {{
    if (x == y) return x + {LOGE2};
    {S} tmp = x - y;
    if (tmp > 0) return x + log1p(exp(-tmp));
    if (tmp <= 0) return y + log1p(exp(tmp));
    return tmp;
}}
inline {S} fj_logaddexp2_{t}({S} x, {S} y) {{
    if (x == y) return x + 1;
    {S} tmp = x - y;
    if (tmp > 0) return x + {LOG2E} * log1p(exp2(-tmp));
    if (tmp <= 0) return y + {LOG2E} * log1p(exp2(tmp));
    return tmp;
}}
"""
# float16 nextafter of equal operands: NumPy's loop returned x before NumPy 2.5, y (as C does)
# since; the NumPy installed is the oracle
_NEXTAFTER_H_EQUAL = "b" if np.signbit(np.nextafter(np.float16(0.0), np.float16(-0.0))) else "a"
_HALF_HELPERS = """
inline float fj_rh(float x) {
    ushort h;
    vstore_half_rte(x, 0, (half *)&h);
    return vload_half(0, (const half *)&h);
}
inline float fj_nextafter_h(float a, float b) {
    if (isnan(a) || isnan(b)) return a + b;
    if (a == b) return EQUAL;  /* see _NEXTAFTER_H_EQUAL */
    ushort h;
    vstore_half_rte(a, 0, (half *)&h);
    if (a == 0) h = (b > 0) ? 1 : 0x8001;
    else if ((a < b) == (a > 0)) h += 1;
    else h -= 1;
    return vload_half(0, (const half *)&h);
}
""".replace("EQUAL", _NEXTAFTER_H_EQUAL)
_HALF_VECTOR = """
inline float{n} fj_rh{n}(float{n} x) {{
    ushort{n} h;
    vstore_half{n}_rte(x, 0, (half *)&h);
    return vload_half{n}(0, (const half *)&h);
}}
"""
# float16 vectors move as ushort vectors: one 8- or 16-byte access. NVIDIA's vload_half4 is four
# 2-byte loads (ld.global.nc.u16 each in the PTX; H200 float16 gelu at 2^26 1.9 TB/s); the
# conversions then run on the private copy, which compilers keep in registers.
_HALF_VECTOR_IO = """
inline float{n} fj_ldh{n}(size_t i, const __global half *p) {{
    ushort{n} u = ((const __global ushort{n} *)p)[i];
    return vload_half{n}(0, (const half *)&u);
}}
inline void fj_sth{n}(float{n} v, size_t i, __global half *p) {{
    ushort{n} u;
    vstore_half{n}_rte(v, 0, (half *)&u);
    ((__global ushort{n} *)p)[i] = u;
}}
"""
# The same at any element offset (``vector_load_at``): PoCL's vload_half8 assumes a 16-byte
# aligned pointer, which OpenCL does not ask of it (the AVX-512 build of its kernel library
# made that a vmovdqa, and a row 300 halves wide a segfault on its second row), so the memory
# access is through a ushort vector aligned as its elements ({u}: the target's unaligned
# ushort{n}), converted on the private copy.
_HALF_VECTOR_IO_AT = """
inline float{n} fj_ldhu{n}(const __global half *p) {{
    ushort{n} u = *(const __global {u} *)p;
    return vload_half{n}(0, (const half *)&u);
}}
inline void fj_sthu{n}(float{n} v, __global half *p) {{
    ushort{n} u;
    vstore_half{n}_rte(v, 0, (half *)&u);
    *(__global {u} *)p = u;
}}
"""
_HALF_FROM_DOUBLE = """
inline float fj_rh_d(double x) {
    ushort h;
    vstore_half_rte(x, 0, (half *)&h);
    return vload_half(0, (const half *)&h);
}
"""
