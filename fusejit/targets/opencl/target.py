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

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir.ops import OPS, Op
from fusejit.targets.opencl import (
    complex as opencl_complex,
    fastdiv as opencl_fastdiv,
    vmath as opencl_vmath,
)
from fusejit.targets.base import Target
from fusejit.targets.opencl.helpers import (
    _FLOAT_HELPERS,
    _GCD_HELPER,
    _HALF_FROM_DOUBLE,
    _HALF_HELPERS,
    _HALF_VECTOR,
    _HALF_VECTOR_IO,
    _HALF_VECTOR_IO_AT,
    _MULHI64_HELPER,
    _POW_HELPER,
    _SIGNED_HELPERS,
    _trig_helpers,
    philox_helper,
)

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
# (opencl_helpers.py), 30-50x faster on PoCL than its scalar builtins lane by lane
for _op, _fn in ((Op.SIN, "sin"), (Op.COS, "cos"), (Op.TAN, "tan")):
    for _key in ("float32", "float16"):
        _VEC[(_op, _key)] = "fj_" + _fn + "{n}({a})"
# float32 power and hypot of whole vectors: fusejit's own (opencl_vmath.py), 3x PoCL's pow
_VEC[(Op.POW, "float32")] = "fj_powf{n}({a}, {b})"
_VEC[(Op.POW, "float64")] = "fj_pow64_{n}({a}, {b})"
_OWN_VECTOR_MATH = ("fj_powf", "fj_pow64")  # (float sin, cos, tan: no faster with 16 lanes)
_VEC[(Op.HYPOT, "float32")] = _VEC[(Op.HYPOT, "float16")] = "fj_hypotf{n}({a}, {b})"
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
    barrier_global = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"
    local_qualifier = "__local"

    # float32 / and sqrt speculated (opencl_fastdiv.py): the backend sets this to a function
    # that answers, once per target and when first asked (it may probe the device), with
    # opencl_fastdiv.spelling's "ptx", "emulated" or None
    fast_div: Callable[[], str | None] | None = None
    # fusejit's own float32 math where the builtin is a call per element (opencl_vmath.py):
    # hypot and complex64 abs in double, complex64 functions' sine and cosine by the vector
    # trig; the backend sets it on CPU devices with fp64
    cpu_math = False
    # 64-bit multiply-high through __uint128_t (helpers.py's fj_mulhi64): PoCL's compiler
    wide_mul = False

    @functools.cached_property
    def fast_div_spelling(self) -> str | None:
        return self.fast_div() if self.fast_div is not None else None

    def speculates(self) -> bool:
        return self.fast_div_spelling is not None

    def speculated(self, op: Op, out: np.dtype, ins: Sequence[np.dtype],
                   operands: Sequence[str]) -> str | None:
        spelling = self.fast_div_spelling
        text = opencl_fastdiv.template(op, out, ins, operands) if spelling else None
        if text is not None:
            self.helpers[f"fastdiv_{spelling}"] = opencl_fastdiv.helpers(spelling)
        return text

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
            if self.cpu_math and src == dt.COMPLEX64:
                f.update(SIN="fj_sin1", COS="fj_cos1")
        return f

    def render_op(self, op: Op, out: np.dtype, ins: Sequence[np.dtype],
                  operands: Sequence[str]) -> str:
        src = ins[0] if ins else out
        if self.wide_mul and op is Op.MULHI and src == dt.UINT64:
            self.helpers["mulhi64"] = _MULHI64_HELPER
            return "fj_mulhi64({a}, {b})".format(**dict(zip("ab", operands)))
        own = opencl_vmath.scalar_form(op, src.name) if self.cpu_math else None
        if own is not None:  # (one lane of fusejit's own CPU math: vmath.py)
            self.helpers.update(own[1])
            return own[0].format(**dict(zip("ab", operands)))
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
            self.helpers["philox"] = philox_helper(self.wide_mul)
        if src.kind == "c" and opencl_complex.needs_helpers(template):
            self.helpers.update(opencl_complex.helpers(template, fields))
            if fields["SIN"] != "sin" and f"complex_{fields['t']}_functions" in self.helpers:
                self.helpers.update({**_trig_helpers(2), **opencl_vmath.scalar_trig_helpers()})
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

    def wide_vector_op(self, op: Op, dtype: np.dtype) -> bool:
        """Own vector power (x ** 2.2, one PoCL thread, 16 lanes: 5.9 -> 4.5 ms at 2^22)."""
        return _VEC.get((op, dtype.name), "").startswith(_OWN_VECTOR_MATH)

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
        elif template.startswith(("fj_powf", "fj_pow64")):
            self.helpers.update(opencl_vmath.pow_helpers(n, double="pow64" in template))
        elif template.startswith("fj_hypotf"):
            self.helpers.update(opencl_vmath.hypot_helpers(n))
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

    def _half_io_at(self, n: int) -> None:
        """float16 vectors at any element offset (opencl_helpers._HALF_VECTOR_IO_AT), through
        the unaligned ushort vector type the other 16-bit accesses share."""
        self.helpers[f"half_io_at{n}"] = _HALF_VECTOR_IO_AT.format(
            n=n, u=self._unaligned(np.dtype(np.uint16), n))

    def vector_load_at(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str | None:
        if dtype == dt.FLOAT16:
            self._half_io_at(n)
            return f"fj_ldhu{n}({ptr} + {index})"
        vec = f"(*(__global const {self._unaligned(dtype, n)} *)({ptr} + {index}))"
        return f"convert_uchar{n}(-({vec} != (uchar{n})(0)))" if dtype.kind == "b" else vec

    def vector_store_at(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str | None:
        if dtype == dt.FLOAT16:
            self._half_io_at(n)
            return f"fj_sthu{n}({{0}}, {ptr} + {index});"
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
        if uses_fp64 or any(k.startswith(opencl_vmath.FP64_KEYS + ("fastdiv_emulated",))
                            for k in self.helpers):
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        body = "\n".join(lines)
        helpers = "".join(self.helpers[k] for k in sorted(self.helpers))
        return body + "\n" + helpers
