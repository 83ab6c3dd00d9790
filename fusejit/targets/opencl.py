"""OpenCL C spellings, with op templates that reproduce NumPy's results bit for bit.

Conventions the templates rely on:
* operands are always variable names or literals, so a template may repeat them;
* bool is stored and computed as ``uchar`` 0/1; float16 is stored as ``half`` (``vload_half`` /
  ``vstore_half_rte``, core OpenCL, no ``cl_khr_fp16``) and computed in float, rounded back to
  half after every op, which is what NumPy's float16 loops do;
* signed integer arithmetic is done in the unsigned type of the same width (or ``uint`` for 8
  and 16 bits) and reinterpreted with ``as_T``, so overflow wraps as in NumPy without C
  undefined behaviour;
* no FMA contraction (``FP_CONTRACT OFF``); float32 division and sqrt are built correctly
  rounded (``-cl-fp32-correctly-rounded-divide-sqrt``) when the device supports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from .. import dtypes as dt
from ..ops import OPS, Op
from . import opencl_complex, opencl_vmath
from .base import Target

_C = {
    "bool": "uchar", "int8": "char", "uint8": "uchar", "int16": "short", "uint16": "ushort",
    "int32": "int", "uint32": "uint", "int64": "long", "uint64": "ulong", "float16": "half",
    "float32": "float", "float64": "double", "complex64": "float2", "complex128": "double2",
}

Template = str | Callable[..., str]

# Templates are keyed by (op, kind) with kind in b/i/u/f, or (op, dtype name) for the few ops
# whose float16 spelling differs. Placeholders: {a} {b} {c} operands, {T} compute type of the
# result, {S} operand compute type, {U} unsigned type of the operand width, {W} unsigned type
# wide enough for C arithmetic without promotion surprises, {N} operand bit width, {t} type
# suffix used to name per-type helpers.
_F = "f"
_TEMPLATES: dict[tuple[Op, str], Template] = {
    # arithmetic
    (Op.ADD, "f"): "({a} + {b})", (Op.ADD, "i"): "as_{S}(({U})(({W}){a} + ({W}){b}))",
    (Op.ADD, "u"): "(({S})(({W}){a} + ({W}){b}))", (Op.ADD, "b"): "({a} | {b})",
    (Op.SUB, "f"): "({a} - {b})", (Op.SUB, "i"): "as_{S}(({U})(({W}){a} - ({W}){b}))",
    (Op.SUB, "u"): "(({S})(({W}){a} - ({W}){b}))",
    (Op.MUL, "f"): "({a} * {b})", (Op.MUL, "i"): "as_{S}(({U})(({W}){a} * ({W}){b}))",
    (Op.MUL, "u"): "(({S})(({W}){a} * ({W}){b}))", (Op.MUL, "b"): "({a} & {b})",
    (Op.TRUEDIV, "f"): "({a} / {b})",
    (Op.FLOORDIV, "f"): "fj_floordiv_{t}({a}, {b})", (Op.FLOORDIV, "i"): "fj_floordiv_{t}({a}, {b})",
    (Op.FLOORDIV, "u"): "(({b}) == 0 ? ({S})0 : ({S})({a} / {b}))",
    (Op.MOD, "f"): "fj_remainder_{t}({a}, {b})", (Op.MOD, "i"): "fj_remainder_{t}({a}, {b})",
    (Op.MOD, "u"): "(({b}) == 0 ? ({S})0 : ({S})({a} % {b}))",
    (Op.FMOD, "f"): "fmod({a}, {b})",
    (Op.FMOD, "i"): "(({b}) == 0 || ({b}) == -1 ? ({S})0 : ({S})({a} % {b}))",
    (Op.FMOD, "u"): "(({b}) == 0 ? ({S})0 : ({S})({a} % {b}))",
    (Op.POW, "f"): "pow({a}, {b})", (Op.POW, "i"): "fj_pow_{t}({a}, {b})",
    (Op.POW, "u"): "fj_pow_{t}({a}, {b})",
    (Op.NEG, "f"): "(-{a})", (Op.NEG, "i"): "as_{S}(({U})(({W})0 - ({W}){a}))",
    (Op.NEG, "u"): "(({S})(({W})0 - ({W}){a}))",
    (Op.POS, "f"): "{a}", (Op.POS, "i"): "{a}", (Op.POS, "u"): "{a}", (Op.POS, "b"): "{a}",
    (Op.ABS, "f"): "fabs({a})", (Op.ABS, "i"): "as_{S}(({U})({a} < 0 ? ({W})0 - ({W}){a} : ({W}){a}))",
    (Op.ABS, "u"): "{a}", (Op.ABS, "b"): "{a}",
    (Op.SIGN, "f"): "({a} > 0 ? ({S})1 : ({a} < 0 ? ({S})-1 : ({a} == 0 ? ({S})0 : {a})))",
    (Op.SIGN, "i"): "(({S})(({a} > 0) - ({a} < 0)))", (Op.SIGN, "u"): "(({S})({a} > 0))",
    (Op.SQUARE, "f"): "({a} * {a})", (Op.SQUARE, "i"): "as_{S}(({U})(({W}){a} * ({W}){a}))",
    (Op.SQUARE, "u"): "(({S})(({W}){a} * ({W}){a}))", (Op.SQUARE, "b"): "{a}",
    (Op.RECIPROCAL, "f"): "(({S})1 / {a})",
    (Op.RECIPROCAL, "i"): "(({a} == 1 || {a} == -1) ? {a} : ({S})0)",
    (Op.RECIPROCAL, "u"): "(({a} == 1) ? {a} : ({S})0)",
    (Op.DEG2RAD, "f"): "({a} * {DEG2RAD})", (Op.RAD2DEG, "f"): "({a} * {RAD2DEG})",
    # rounding
    (Op.FLOOR, "f"): "floor({a})", (Op.CEIL, "f"): "ceil({a})", (Op.TRUNC, "f"): "trunc({a})",
    (Op.RINT, "f"): "rint({a})",
    # classification
    (Op.ISNAN, "f"): "((uchar)isnan({a}))", (Op.ISINF, "f"): "((uchar)isinf({a}))",
    (Op.ISFINITE, "f"): "((uchar)isfinite({a}))", (Op.SIGNBIT, "f"): "((uchar)signbit({a}))",
    (Op.SIGNBIT, "i"): "((uchar)({a} < 0))",
    # two-operand math
    (Op.ARCTAN2, "f"): "atan2({a}, {b})", (Op.HYPOT, "f"): "hypot({a}, {b})",
    (Op.COPYSIGN, "f"): "copysign({a}, {b})", (Op.NEXTAFTER, "f"): "nextafter({a}, {b})",
    (Op.NEXTAFTER, "float16"): "fj_nextafter_h({a}, {b})",
    (Op.LDEXP, "f"): "ldexp({a}, (int)clamp((long){b}, (long)INT_MIN, (long)INT_MAX))",
    (Op.LOGADDEXP, "f"): "fj_logaddexp_{t}({a}, {b})",
    (Op.LOGADDEXP2, "f"): "fj_logaddexp2_{t}({a}, {b})",
    (Op.HEAVISIDE, "f"): "(isnan({a}) ? {a} : ({a} == 0 ? {b} : ({a} < 0 ? ({S})0 : ({S})1)))",
    (Op.GCD, "i"): "fj_gcd_{t}({a}, {b})", (Op.GCD, "u"): "fj_gcd_{t}({a}, {b})",
    (Op.LCM, "i"): "fj_lcm_{t}({a}, {b})", (Op.LCM, "u"): "fj_lcm_{t}({a}, {b})",
    # logic and bits
    (Op.LOGICAL_AND, "*"): "((uchar)(({a} != 0) && ({b} != 0)))",
    (Op.LOGICAL_OR, "*"): "((uchar)(({a} != 0) || ({b} != 0)))",
    (Op.LOGICAL_XOR, "*"): "((uchar)(({a} != 0) != ({b} != 0)))",
    (Op.LOGICAL_NOT, "*"): "((uchar)({a} == 0))",
    (Op.BITWISE_AND, "*"): "(({S})({a} & {b}))", (Op.BITWISE_OR, "*"): "(({S})({a} | {b}))",
    (Op.BITWISE_XOR, "*"): "(({S})({a} ^ {b}))",
    (Op.INVERT, "i"): "(({S})~{a})", (Op.INVERT, "u"): "(({S})~{a})",
    (Op.INVERT, "b"): "((uchar)({a} ^ 1))",
    (Op.LSHIFT, "i"): "((({U}){b}) < {N} ? as_{S}(({U})((({W})({U}){a}) << (({U}){b}))) : ({S})0)",
    (Op.LSHIFT, "u"): "((({U}){b}) < {N} ? as_{S}(({U})((({W})({U}){a}) << (({U}){b}))) : ({S})0)",
    (Op.RSHIFT, "i"): "((({U}){b}) < {N} ? ({S})({a} < 0 ? ~(~{a} >> {b}) : ({a} >> {b}))"
                      " : ({S})({a} < 0 ? -1 : 0))",
    (Op.RSHIFT, "u"): "((({U}){b}) < {N} ? ({S})({a} >> {b}) : ({S})0)",
    (Op.WHERE, "*"): "({a} ? {b} : {c})",
    # random numbers (fusejit.random)
    (Op.MULHI, "u"): "mul_hi({a}, {b})",
    (Op.PHILOX, "uint64"): "fj_philox_word(fj_philox4x64({a}, {b}, {c}, {d}, {e}, {f}), {g})",
}
_UNARY_BUILTINS = {
    Op.EXP: "exp", Op.EXP2: "exp2", Op.EXPM1: "expm1", Op.LOG: "log", Op.LOG2: "log2",
    Op.LOG10: "log10", Op.LOG1P: "log1p", Op.SQRT: "sqrt", Op.CBRT: "cbrt", Op.SIN: "sin",
    Op.COS: "cos", Op.TAN: "tan", Op.ARCSIN: "asin", Op.ARCCOS: "acos", Op.ARCTAN: "atan",
    Op.SINH: "sinh", Op.COSH: "cosh", Op.TANH: "tanh", Op.ARCSINH: "asinh",
    Op.ARCCOSH: "acosh", Op.ARCTANH: "atanh",
}
for _op, _fn in _UNARY_BUILTINS.items():
    _TEMPLATES[(_op, "f")] = _fn + "({a})"
# PoCL 3 returns garbage from these builtins when its compiler proves the argument is a NaN and
# the kernel has no other call to the same builtin (floor(x % 0.0) gave 6.9e-310): a NaN takes
# the guard instead, which the compiler then folds away.
_NAN_GUARDED = {Op.FLOOR: "floor", Op.CEIL: "ceil", Op.TRUNC: "trunc", Op.EXP: "exp",
                Op.EXP2: "exp2", Op.EXPM1: "expm1", Op.TANH: "tanh", Op.SINH: "sinh"}
for _op, _fn in _NAN_GUARDED.items():
    _TEMPLATES[(_op, "f")] = "(isnan({a}) ? {a} : " + _fn + "({a}))"
    # float32 (float16): the builtin, then a select, not a branch around it (same results; H200
    # Black-Scholes 0.129 -> 0.119 ms: benchmarks/speed_variants.py)
    _TEMPLATES[(_op, "float32")] = _TEMPLATES[(_op, "float16")] = \
        "select(" + _fn + "({a}), {a}, isnan({a}))"
# integer inputs of rounding ops keep their dtype in NumPy 2: identity
for _op in (Op.FLOOR, Op.CEIL, Op.TRUNC, Op.RINT):
    _TEMPLATES[(_op, "i")] = _TEMPLATES[(_op, "u")] = _TEMPLATES[(_op, "b")] = "{a}"
for _op, _val in ((Op.ISNAN, 0), (Op.ISINF, 0), (Op.ISFINITE, 1), (Op.SIGNBIT, 0)):
    for _k in "iub":
        _TEMPLATES.setdefault((_op, _k), f"((uchar){_val})")
for _op, _fn in ((Op.MAXIMUM, "max"), (Op.MINIMUM, "min"), (Op.FMAX, "max"), (Op.FMIN, "min")):
    _TEMPLATES[(_op, "i")] = _TEMPLATES[(_op, "u")] = _fn + "({a}, {b})"
_TEMPLATES[(Op.MAXIMUM, "b")] = _TEMPLATES[(Op.FMAX, "b")] = "({a} | {b})"
_TEMPLATES[(Op.MINIMUM, "b")] = _TEMPLATES[(Op.FMIN, "b")] = "({a} & {b})"
_COMPARE = {Op.EQ: "==", Op.NE: "!=", Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">="}
for _op, _sym in _COMPARE.items():
    _TEMPLATES[(_op, "*")] = "((uchar)({a} " + _sym + " {b}))"
    # NumPy 2 compares int64 with uint64 exactly (no float64 round trip)
    _TEMPLATES[(_op, "iu")] = ("((uchar)({a} < 0 ? (0 " + _sym + " 1) : ((ulong){a} " + _sym
                               + " {b})))")
    _TEMPLATES[(_op, "ui")] = ("((uchar)({b} < 0 ? (1 " + _sym + " 0) : ({a} " + _sym
                               + " (ulong){b})))")

_TEMPLATES.update(opencl_complex.TEMPLATES)

# Vector forms (OpenCL vector types, one op for all lanes), used when a work-item handles a
# vector of elements. Vector comparisons yield -1/0 in a signed vector of the operand's element
# width, hence the negations; vector arithmetic does not promote, so unsigned vectors wrap.
# {I} is the signed vector type of the operand's element width, {n} the lane count.
_VEC: dict[tuple[Op, str], str] = {
    (Op.ADD, "f"): "({a} + {b})", (Op.SUB, "f"): "({a} - {b})", (Op.MUL, "f"): "({a} * {b})",
    (Op.TRUEDIV, "f"): "({a} / {b})", (Op.NEG, "f"): "(-{a})", (Op.POS, "f"): "{a}",
    # PoCL lowers fabs, isnan and fmax/fmin on vectors to slow calls; these spellings are the
    # same operations (clear the sign bit; NaN is the value unequal to itself) at the cost of
    # a multiply (measured on PoCL: 4 maximums over 2^22 floats 22 ms -> 11 ms, fabs 10 -> 1.4)
    (Op.ABS, "f"): "as_{S}(as_{U}({a}) & (({U})({SIGNMASK})))", (Op.SQUARE, "f"): "({a} * {a})",
    (Op.RECIPROCAL, "f"): "(({S})(1) / {a})",
    (Op.COPYSIGN, "f"): "copysign({a}, {b})", (Op.ARCTAN2, "f"): "atan2({a}, {b})",
    (Op.HYPOT, "f"): "hypot({a}, {b})", (Op.POW, "f"): "pow({a}, {b})",
    (Op.SIGN, "f"): "select(select(select({a}, ({S})(0), {a} == ({S})(0)), ({S})(-1), "
                    "{a} < ({S})(0)), ({S})(1), {a} > ({S})(0))",
    (Op.DEG2RAD, "f"): "({a} * {DEG2RAD})", (Op.RAD2DEG, "f"): "({a} * {RAD2DEG})",
    (Op.ISNAN, "f"): "convert_uchar{n}(-({a} != {a}))",
    (Op.ISINF, "f"): "convert_uchar{n}(-isinf({a}))",
    (Op.ISFINITE, "f"): "convert_uchar{n}(-isfinite({a}))",
    (Op.SIGNBIT, "f"): "convert_uchar{n}(-signbit({a}))",
    (Op.ADD, "i"): "as_{S}(as_{U}({a}) + as_{U}({b}))", (Op.ADD, "u"): "({a} + {b})",
    (Op.SUB, "i"): "as_{S}(as_{U}({a}) - as_{U}({b}))", (Op.SUB, "u"): "({a} - {b})",
    (Op.MUL, "i"): "as_{S}(as_{U}({a}) * as_{U}({b}))", (Op.MUL, "u"): "({a} * {b})",
    (Op.SQUARE, "i"): "as_{S}(as_{U}({a}) * as_{U}({a}))", (Op.SQUARE, "u"): "({a} * {a})",
    (Op.NEG, "i"): "as_{S}(({U})(0) - as_{U}({a}))", (Op.NEG, "u"): "(({S})(0) - {a})",
    (Op.ABS, "i"): "as_{S}(abs({a}))", (Op.ABS, "u"): "{a}",
    (Op.SIGN, "i"): "(({a} < ({S})(0)) - ({a} > ({S})(0)))",
    (Op.SIGN, "u"): "as_{S}(-({a} > ({S})(0)))",
    (Op.ADD, "b"): "({a} | {b})", (Op.MUL, "b"): "({a} & {b})",
    (Op.INVERT, "b"): "({a} ^ ({S})(1))", (Op.INVERT, "i"): "(~{a})", (Op.INVERT, "u"): "(~{a})",
    (Op.WHERE, "*"): "select({c}, {b}, convert_{M}({a}) != ({M})(0))",
}
# Not sin, cos and tan: PoCL reduces the arguments of all lanes of a float vector together, and
# one lane with a huge argument (2**22 + 0.5, FLT_MAX) spoils the others (cos(1e-5) gave
# 0.99994755 next to cos(FLT_MAX)); they are computed lane by lane.
_LANE_BY_LANE = {Op.SIN, Op.COS, Op.TAN}
for _op, _fn in _UNARY_BUILTINS.items():
    if _op not in _LANE_BY_LANE:
        _VEC[(_op, "f")] = _fn + "({a})"
# float32 (and float16, computed in float32) sin, cos and tan of whole vectors: fusejit's own
# (_TRIG_VECTOR below), 30-50x faster on PoCL than its scalar builtins lane by lane
for _op, _fn in ((Op.SIN, "sin"), (Op.COS, "cos"), (Op.TAN, "tan")):
    for _key in ("float32", "float16"):
        _VEC[(_op, _key)] = "fj_" + _fn + "{n}({a})"
# float32 power of whole vectors: fusejit's own (opencl_vmath.py), 3x PoCL's pow
_VEC[(Op.POW, "float32")] = "fj_powf{n}({a}, {b})"
for _op in (Op.FLOOR, Op.CEIL, Op.TRUNC, Op.RINT):
    _VEC[(_op, "f")] = _TEMPLATES[(_op, "f")]
for _op, _fn in _NAN_GUARDED.items():  # (x != x: PoCL's vector isnan is a slow call)
    _VEC[(_op, "f")] = "select(" + _fn + "({a}), {a}, {a} != {a})"
for _op in (Op.FLOOR, Op.CEIL, Op.TRUNC, Op.RINT):
    _VEC[(_op, "i")] = _VEC[(_op, "u")] = _VEC[(_op, "b")] = "{a}"
# Float maximum & co.: keep {a} when it is beyond {b} (or equal, where NumPy's loop returns the
# first of equal operands: dt.extremum_keeps_second) or when the NaN-winning operand is NaN.
for _op, _beyond, _nan in ((Op.MAXIMUM, ">", "a"), (Op.MINIMUM, "<", "a"),
                           (Op.FMAX, ">", "b"), (Op.FMIN, "<", "b")):
    for _dtype in (dt.FLOAT32, dt.FLOAT16):
        _cmp = _beyond if dt.extremum_keeps_second(_dtype) else _beyond + "="
        _key = "f" if _dtype == dt.FLOAT32 else "float16"
        _TEMPLATES[(_op, _key)] = f"(({{a}} {_cmp} {{b}} || isnan({{{_nan}}})) ? {{a}} : {{b}})"
        _VEC[(_op, _key)] = f"select({{b}}, {{a}}, ({{a}} {_cmp} {{b}}) | ({{{_nan}}} != {{{_nan}}}))"
for _op, _cmp in ((Op.MAXIMUM, ">"), (Op.MINIMUM, "<"), (Op.FMAX, ">"), (Op.FMIN, "<")):
    _VEC[(_op, "i")] = _VEC[(_op, "u")] = "select({b}, {a}, {a} " + _cmp + " {b})"
_VEC[(Op.MAXIMUM, "b")] = _VEC[(Op.FMAX, "b")] = "({a} | {b})"
_VEC[(Op.MINIMUM, "b")] = _VEC[(Op.FMIN, "b")] = "({a} & {b})"
for _op, _sym in (*_COMPARE.items(), (Op.BITWISE_AND, "&"), (Op.BITWISE_OR, "|"),
                  (Op.BITWISE_XOR, "^")):
    if _op in _COMPARE:
        _VEC[(_op, "*")] = "convert_uchar{n}(-({a} " + _sym + " {b}))"
    else:
        _VEC[(_op, "*")] = "({a} " + _sym + " {b})"
_VEC[(Op.LOGICAL_AND, "*")] = "convert_uchar{n}(-(({a} != ({S})(0)) & ({b} != ({S})(0))))"
_VEC[(Op.LOGICAL_OR, "*")] = "convert_uchar{n}(-(({a} != ({S})(0)) | ({b} != ({S})(0))))"
_VEC[(Op.LOGICAL_XOR, "*")] = "convert_uchar{n}(-(({a} != ({S})(0)) ^ ({b} != ({S})(0))))"
_VEC[(Op.LOGICAL_NOT, "*")] = "convert_uchar{n}(-({a} == ({S})(0)))"

# -- helper functions, emitted once per module when a template names them --------------------------

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
# fusejit/philox.py): ten rounds, the key bumped by the Weyl constants between rounds. The
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
_HALF_FROM_DOUBLE = """
inline float fj_rh_d(double x) {
    ushort h;
    vstore_half_rte(x, 0, (half *)&h);
    return vload_half(0, (const half *)&h);
}
"""


def _float_literal(value: float, dtype: np.dtype) -> str:
    suffix = "" if dtype == dt.FLOAT64 else "f"
    if math.isnan(value):  # (-NAN: a NaN's sign is observable, np.signbit(x + -np.nan))
        nan = "(double)NAN" if dtype == dt.FLOAT64 else "NAN"
        return f"(-{nan})" if math.copysign(1.0, value) < 0 else nan
    if math.isinf(value):
        inf = "(double)INFINITY" if dtype == dt.FLOAT64 else "INFINITY"
        return inf if value > 0 else f"(-{inf})"
    mant, _, exp = float(value).hex().partition("p")
    text = (mant.rstrip("0").rstrip(".") if "." in mant else mant) + "p" + exp
    return f"({text}{suffix})" if text.startswith("-") else text + suffix


class OpenCLTarget(Target):
    """OpenCL C 1.2."""

    name = "opencl"
    global_id = "get_global_id(0)"
    local_id = "get_local_id(0)"
    group_id = "get_group_id(0)"
    barrier_local = "barrier(CLK_LOCAL_MEM_FENCE);"
    local_qualifier = "__local"

    def storage_type(self, dtype: np.dtype) -> str:
        return _C[dt.type_name(dtype)]

    def compute_type(self, dtype: np.dtype) -> str:
        return "float" if dtype == dt.FLOAT16 else _C[dt.type_name(dtype)]

    def index_type(self, wide: bool) -> str:
        return "long" if wide else "int"

    # -- values -----------------------------------------------------------------------------------
    def literal(self, value: np.generic, dtype: np.dtype) -> str:
        if dtype.kind == "c":
            return opencl_complex.literal(complex(value), dtype.name, _float_literal)
        if dtype.kind == "f":
            return _float_literal(float(value), dt.FLOAT32 if dtype == dt.FLOAT16 else dtype)
        if dtype.kind == "b":
            return f"((uchar){int(bool(value))})"
        v = int(value)
        c = _C[dt.type_name(dtype)]
        if dtype.kind == "i" and v == np.iinfo(dtype).min:
            # the minimum has no literal spelling: reinterpret its unsigned bit pattern
            return f"as_{c}(({_C['u' + dtype.name]}){(1 << (dt.bits(dtype) - 1))}{self._sfx(dtype)})"
        return f"(({c}){v}{self._sfx(dtype)})"

    @staticmethod
    def _sfx(dtype: np.dtype) -> str:
        if dtype.itemsize == 8:
            return "UL" if dtype.kind == "u" else "L"
        return "u" if dtype.kind == "u" else ""

    def _fields(self, out: np.dtype, ins: Sequence[np.dtype]) -> dict[str, str]:
        """Template fields for these dtypes (cached: a 10,000-op kernel asks 10,000 times)."""
        key = (out, tuple(ins))
        cache = self.__dict__.setdefault("_field_cache", {})
        if key not in cache:
            cache[key] = self._make_fields(out, ins)
        return cache[key]

    def _make_fields(self, out: np.dtype, ins: Sequence[np.dtype]) -> dict[str, str]:
        src = ins[0] if ins else out
        if src.kind == "b" and len(ins) > 1 and ins[1].kind != "b":
            src = ins[1]
        width = dt.real_of(src).itemsize  # (a complex value's parts)
        unsigned = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}[width]
        f = {
            "T": self.compute_type(out), "S": self.compute_type(src), "U": unsigned,
            "W": "uint" if width < 4 else unsigned, "N": str(8 * width),
            "t": dt.type_name(src),
        }
        if src.kind == "f":
            ftype = dt.FLOAT32 if src == dt.FLOAT16 else src
            with np.errstate(all="ignore"):
                f["DEG2RAD"] = self.literal(np.deg2rad(ftype.type(1)), ftype)
                f["RAD2DEG"] = self.literal(np.rad2deg(ftype.type(1)), ftype)
                f["LOGE2"] = self.literal(ftype.type(math.log(2)), ftype)
                f["LOG2E"] = self.literal(ftype.type(1 / math.log(2)), ftype)
            f["t"] = dt.type_name(ftype)
        elif src.kind == "c":
            f.update(opencl_complex.fields(dt.type_name(src), _float_literal))
        return f

    def render_op(self, op: Op, out: np.dtype, ins: Sequence[np.dtype],
                  operands: Sequence[str]) -> str:
        src = ins[0] if ins else out
        if op is Op.WHERE:
            src = ins[1]
        kinds = [dt.type_name(src), src.kind, "*"]
        if len(ins) == 2 and ins[0] != ins[1] and {ins[0].kind, ins[1].kind} == {"i", "u"}:
            kinds.insert(0, ins[0].kind + ins[1].kind)
        template = next((_TEMPLATES[(op, k)] for k in kinds if (op, k) in _TEMPLATES), None)
        if template is None:
            raise TypeError(f"no OpenCL template for {OPS[op].name} on {src.name}")
        fields = self._fields(out, [d for d in ins if op is not Op.WHERE] or ins[1:])
        self._require(template, fields, src)
        names = dict(zip("abcdefg", operands))
        return template.format(**names, **fields)

    def _require(self, template: str, fields: dict[str, str], src: np.dtype) -> None:
        t = fields["t"]
        if "fj_rh" in template or "fj_nextafter_h" in template:
            self.helpers["half"] = _HALF_HELPERS
        if src.kind == "f" and "fj_" in template and "_h(" not in template:
            self.helpers[f"float_{t}"] = _FLOAT_HELPERS.format(**fields)
        elif src.kind == "i" and ("fj_floordiv" in template or "fj_remainder" in template):
            self.helpers[f"signed_{t}"] = _SIGNED_HELPERS.format(**fields)
        if "fj_pow_" in template:
            self.helpers[f"pow_{t}"] = _POW_HELPER.format(**fields)
        if "fj_philox" in template:
            self.helpers["philox"] = _PHILOX_HELPER
        if src.kind == "c" and opencl_complex.needs_helpers(template):
            self.helpers.update(opencl_complex.helpers(template, fields))
        if "fj_gcd_" in template or "fj_lcm_" in template:
            self.helpers[f"gcd_{t}"] = _GCD_HELPER.format(**fields)

    def render_cast(self, src: np.dtype, dst: np.dtype, x: str) -> str:
        c = self.compute_type(dst)
        if dst.kind == "c":  # complex from complex: both parts; from a real: (x, 0)
            if src.kind == "c":
                return f"convert_{c}({x})"
            part = dt.real_of(dst)
            return f"(({c})({self.render_cast(src, part, x)}, {self.literal(part.type(0), part)}))"
        if src.kind == "c":  # NumPy: nonzero for bool; else the real part (ComplexWarning)
            if dst.kind == "b":
                return f"((uchar)({x}.x != 0 || {x}.y != 0))"
            return self.render_cast(dt.real_of(src), dst, f"{x}.x")
        if dst.kind == "b":
            return f"((uchar)({x} != 0))"
        if src.kind in "biu" and dst.kind in "iu":
            unsigned = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}[dst.itemsize]
            return f"as_{c}(({unsigned}){x})" if dst.kind == "i" else f"(({c}){x})"
        if src.kind == "f" and dst.kind in "iu":
            # Out-of-range and NaN conversions are implementation-defined in NumPy (C casts);
            # these saturating conversions never invoke C undefined behaviour and match x86
            # for values that fit the 32/64-bit intermediate NumPy's compiled loops use.
            if dst.itemsize < 4 or dst == dt.UINT32:
                wide = "int" if dst.itemsize < 4 else "long"
                return f"(({c})convert_{wide}_sat_rtz({x}))"
            if dst == dt.UINT64:
                return f"({x} < 0 ? as_ulong(convert_long_sat_rtz({x})) : convert_ulong_sat_rtz({x}))"
            return f"convert_{c}_sat_rtz({x})"
        if dst == dt.FLOAT16:
            return self.round_to_storage(dst, f"(float){x}" if src != dt.FLOAT64 else x, src)
        return f"(({c}){x})"

    def round_to_storage(self, dtype: np.dtype, x: str, src: np.dtype | None = None) -> str:
        if dtype != dt.FLOAT16:
            return x
        if src is not None and src == dt.FLOAT64:  # (a dtype compares equal to None!)
            self.helpers["half_from_double"] = _HALF_FROM_DOUBLE
            return f"fj_rh_d({x})"
        self.helpers["half"] = _HALF_HELPERS
        return f"fj_rh({x})"

    # -- memory -----------------------------------------------------------------------------------
    def load(self, ptr: str, index: str, dtype: np.dtype) -> str:
        if dtype == dt.FLOAT16:
            return f"vload_half({index}, {ptr})"
        if dtype.kind == "b":
            return f"((uchar)({ptr}[{index}] != 0))"
        return f"{ptr}[{index}]"

    def store(self, ptr: str, index: str, value: str, dtype: np.dtype) -> str:
        if dtype == dt.FLOAT16:
            return f"vstore_half_rte({value}, {index}, {ptr});"
        return f"{ptr}[{index}] = {value};"

    def vector_type(self, dtype: np.dtype, n: int) -> str:
        return f"{self.compute_type(dtype)}{n}"

    def render_op_vector(self, op: Op, out: np.dtype, ins: Sequence[np.dtype],
                         operands: Sequence[str], n: int) -> str | None:
        """The op over ``n``-lane vector operands, or None where OpenCL has no vector form
        that reproduces the scalar template exactly (then lanes are computed one by one)."""
        if len(set(ins if op is not Op.WHERE else ins[1:])) > 1:
            return None  # mixed-type loops (int64 vs uint64 comparisons, ldexp)
        if any(d.kind == "c" for d in (out, *ins)):
            return None  # a complex value is a vector already (kernels with complex: 1 lane)
        src = ins[1] if op is Op.WHERE else (ins[0] if ins else out)
        template = next((_VEC[(op, k)] for k in (src.name, src.kind, "*") if (op, k) in _VEC),
                        None)
        if template is None:
            return None
        fields = self._fields(out, [d for d in ins if op is not Op.WHERE] or ins[1:])
        width = (dt.FLOAT32 if src == dt.FLOAT16 else src).itemsize
        signed = {1: "char", 2: "short", 4: "int", 8: "long"}
        unsigned = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}
        res_width = (dt.FLOAT32 if out == dt.FLOAT16 else out).itemsize
        vec = {"T": self.vector_type(out, n), "S": self.vector_type(src, n),
               "U": f"{unsigned[width]}{n}", "I": f"{signed[width]}{n}",
               "M": f"{signed[res_width]}{n}", "n": str(n),
               "SIGNMASK": "0x7fffffffffffffffUL" if width == 8 else "0x7fffffffu"}
        if template.startswith(("fj_sin", "fj_cos", "fj_tan")):
            self.helpers.update(_trig_helpers(n))
        elif template.startswith("fj_powf"):
            self.helpers.update(opencl_vmath.pow_helpers(n))
        return template.format(**dict(zip("abc", operands)), **{**fields, **vec})

    def render_cast_vector(self, src: np.dtype, dst: np.dtype, x: str, n: int) -> str | None:
        """Vector form of ``render_cast`` where it matches the scalar conversion exactly."""
        c = self.vector_type(dst, n)
        if "c" in (src.kind, dst.kind):
            return None  # (see render_op_vector)
        if dst.kind == "b":
            zero = f"({self.vector_type(src, n)})(0)"
            return f"convert_uchar{n}(-({x} != {zero}))"
        if src.kind in "biu" and dst.kind in "iu":
            width = dst.itemsize
            unsigned = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}[width]
            return f"as_{c}(convert_{unsigned}{n}({x}))"
        if src.kind == "f" and dst.kind in "iu":
            if dst in (dt.INT32, dt.INT64):
                return f"convert_{c}_sat_rtz({x})"
            return None
        if dst == dt.FLOAT16:
            if src == dt.FLOAT64:
                return None
            self.helpers[f"half_vector{n}"] = _HALF_VECTOR.format(n=n)
            return f"fj_rh{n}(convert_float{n}({x}))"
        return f"convert_{c}({x})"

    def round_to_storage_vector(self, dtype: np.dtype, x: str, n: int) -> str:
        if dtype != dt.FLOAT16:
            return x
        self.helpers[f"half_vector{n}"] = _HALF_VECTOR.format(n=n)
        return f"fj_rh{n}({x})"

    def broadcast(self, dtype: np.dtype, n: int, x: str) -> str:
        return f"(({self.vector_type(dtype, n)})({x}))"

    def pack(self, dtype: np.dtype, n: int) -> str:
        return f"({self.vector_type(dtype, n)})(" + ", ".join(f"{{{i}}}" for i in range(n)) + ")"

    def vector_load(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str:
        if dtype == dt.FLOAT16:
            self.helpers[f"half_io{n}"] = _HALF_VECTOR_IO.format(n=n)
            return f"fj_ldh{n}({index}, {ptr})"
        vec = f"((__global const {self.storage_type(dtype)}{n} *){ptr})[{index}]"
        # bool bytes other than 0/1 (views of other data) still mean True
        return f"convert_uchar{n}(-({vec} != (uchar{n})(0)))" if dtype.kind == "b" else vec

    def lane(self, dtype: np.dtype, lane: int) -> str:
        return "{v}.s" + format(lane, "x")

    def _unaligned(self, dtype: np.dtype, n: int) -> str:
        """A vector type aligned as its elements: loads through it are plain (unaligned) vector
        loads (PoCL's vload8 was 1.3-2x slower in a softmax row kernel)."""
        name = f"fj_u{self.storage_type(dtype)}{n}"
        self.helpers[name] = (f"typedef {self.storage_type(dtype)}{n} {name} "
                              f"__attribute__((aligned({dtype.itemsize})));\n")
        return name

    def vector_load_at(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str | None:
        if dtype == dt.FLOAT16:
            return f"vload_half{n}(0, {ptr} + {index})"
        vec = f"(*(__global const {self._unaligned(dtype, n)} *)({ptr} + {index}))"
        return f"convert_uchar{n}(-({vec} != (uchar{n})(0)))" if dtype.kind == "b" else vec

    def vector_store_at(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str | None:
        if dtype == dt.FLOAT16:
            return f"vstore_half{n}_rte({{0}}, 0, {ptr} + {index});"
        return f"*(__global {self._unaligned(dtype, n)} *)({ptr} + {index}) = {{0}};"

    def vector_store(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str:
        """A statement storing the vector operand {0} as vector number ``index``."""
        if dtype == dt.FLOAT16:
            self.helpers[f"half_io{n}"] = _HALF_VECTOR_IO.format(n=n)
            return f"fj_sth{n}({{0}}, {index}, {ptr});"
        return f"((__global {self.storage_type(dtype)}{n} *){ptr})[{index}] = {{0}};"

    # -- kernels ----------------------------------------------------------------------------------
    def buffer_param(self, name: str, dtype: np.dtype, writable: bool, restrict: bool) -> str:
        const = "" if writable else "const "
        qual = " restrict" if restrict else ""
        return f"__global {const}{self.storage_type(dtype)} *{qual} {name}"

    def scalar_param(self, name: str, dtype: np.dtype) -> str:
        return f"const {self.compute_type(dtype)} {name}"

    def kernel_header(self, name: str, params: Sequence[str],
                      local_size: tuple[int, ...] | None) -> str:
        # a fixed work-group shape lets the compiler size barriers and local arrays exactly
        dims = (*local_size, 1, 1)[:3] if local_size else None
        attr = f"__attribute__((reqd_work_group_size({dims[0]}, {dims[1]}, {dims[2]})))\n" \
            if dims else ""
        joined = ",\n    ".join(params)
        return f"{attr}__kernel void {name}(\n    {joined})"

    def prelude(self, uses_fp64: bool) -> str:
        lines = ["#pragma OPENCL FP_CONTRACT OFF"]
        # (the vector sin/cos/tan reduce their float arguments in double)
        if uses_fp64 or any(k.startswith(opencl_vmath.FP64_KEYS) for k in self.helpers):
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        body = "\n".join(lines)
        helpers = "".join(self.helpers[k] for k in sorted(self.helpers))
        return body + "\n" + helpers
