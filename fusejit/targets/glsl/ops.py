"""The op templates of the Vulkan (GLSL) target (targets/glsl/target.py): per (op, dtype kind or name),
over operands ``{a}``, ``{b}``, ``{c}`` and the fields GLSLTarget.render_op fills (``{A}``/``{B}``
the operands' truth, ``{E}`` an int exponent, ``{DEG2RAD}``/``{RAD2DEG}``). The conventions are
glsl.py's: typed exactly, NaN by bit pattern, int wrapping as SPIR-V's.
"""

from __future__ import annotations

import re

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir.ops import Op

T: dict[tuple[Op, str], str] = {
    # arithmetic (int/uint wrap in SPIR-V; bool + is or, bool * is and, as in NumPy)
    (Op.ADD, "f"): "({a} + {b})", (Op.ADD, "i"): "({a} + {b})", (Op.ADD, "u"): "({a} + {b})",
    (Op.ADD, "b"): "({a} || {b})",
    (Op.SUB, "f"): "({a} - {b})", (Op.SUB, "i"): "({a} - {b})", (Op.SUB, "u"): "({a} - {b})",
    (Op.MUL, "f"): "({a} * {b})", (Op.MUL, "i"): "({a} * {b})", (Op.MUL, "u"): "({a} * {b})",
    (Op.MUL, "b"): "({a} && {b})",
    (Op.TRUEDIV, "f"): "fj_div({a}, {b})",
    (Op.FLOORDIV, "f"): "fj_floordiv_f({a}, {b})", (Op.FLOORDIV, "i"): "fj_floordiv_i({a}, {b})",
    (Op.FLOORDIV, "u"): "({b} == 0u ? 0u : {a} / {b})",
    (Op.MOD, "f"): "fj_remainder_f({a}, {b})", (Op.MOD, "i"): "fj_remainder_i({a}, {b})",
    (Op.MOD, "u"): "({b} == 0u ? 0u : {a} % {b})",
    (Op.FMOD, "f"): "fj_fmod({a}, {b})",
    # (a - a/b*b, not %: GLSL leaves % of negative operands undefined, and NVIDIA's differs)
    (Op.FMOD, "i"): "(({b} == 0 || {b} == -1) ? 0 : {a} - ({a} / {b}) * {b})",
    (Op.FMOD, "u"): "({b} == 0u ? 0u : {a} % {b})",
    (Op.POW, "f"): "fj_pow_f({a}, {b})", (Op.POW, "i"): "fj_pow_i({a}, {b})",
    (Op.POW, "u"): "fj_pow_u({a}, {b})",
    (Op.NEG, "f"): "(-{a})", (Op.NEG, "i"): "(-{a})", (Op.NEG, "u"): "(0u - {a})",
    (Op.POS, "f"): "{a}", (Op.POS, "i"): "{a}", (Op.POS, "u"): "{a}", (Op.POS, "b"): "{a}",
    (Op.CONJ, "*"): "{a}",  # (of a real value: itself)
    (Op.ABS, "f"): "uintBitsToFloat(floatBitsToUint({a}) & 0x7fffffffu)",
    (Op.ABS, "i"): "({a} < 0 ? -{a} : {a})", (Op.ABS, "u"): "{a}", (Op.ABS, "b"): "{a}",
    (Op.SIGN, "f"): "(fj_isnan({a}) ? {a} : ({a} > 0.0 ? 1.0 : ({a} < 0.0 ? -1.0 : fj_zero)))",
    (Op.SIGN, "i"): "(int({a} > 0) - int({a} < 0))", (Op.SIGN, "u"): "uint({a} > 0u)",
    (Op.SQUARE, "f"): "({a} * {a})", (Op.SQUARE, "i"): "({a} * {a})",
    (Op.SQUARE, "u"): "({a} * {a})", (Op.SQUARE, "b"): "{a}",
    (Op.RECIPROCAL, "f"): "fj_div(1.0, {a})",
    (Op.RECIPROCAL, "i"): "(({a} == 1 || {a} == -1) ? {a} : 0)",
    (Op.RECIPROCAL, "u"): "({a} == 1u ? {a} : 0u)",
    (Op.DEG2RAD, "f"): "({a} * {DEG2RAD})", (Op.RAD2DEG, "f"): "({a} * {RAD2DEG})",
    # rounding: GLSL leaves the builtins undefined for NaN, so NaN takes the guard
    (Op.FLOOR, "f"): "(fj_isnan({a}) ? {a} : floor({a}))",
    (Op.CEIL, "f"): "(fj_isnan({a}) ? {a} : ceil({a}))",
    (Op.TRUNC, "f"): "(fj_isnan({a}) ? {a} : trunc({a}))",
    (Op.RINT, "f"): "(fj_isnan({a}) ? {a} : roundEven({a}))",
    # classification by bit pattern
    (Op.ISNAN, "f"): "fj_isnan({a})",
    (Op.ISINF, "f"): "((floatBitsToUint({a}) & 0x7fffffffu) == 0x7f800000u)",
    (Op.ISFINITE, "f"): "((floatBitsToUint({a}) & 0x7fffffffu) < 0x7f800000u)",
    (Op.SIGNBIT, "f"): "((floatBitsToUint({a}) >> 31) != 0u)", (Op.SIGNBIT, "i"): "({a} < 0)",
    # two-operand math
    (Op.ARCTAN2, "f"): "fj_atan2({a}, {b})", (Op.HYPOT, "f"): "fj_hypot({a}, {b})",
    (Op.COPYSIGN, "f"): "uintBitsToFloat((floatBitsToUint({a}) & 0x7fffffffu) | "
                        "(floatBitsToUint({b}) & 0x80000000u))",
    (Op.NEXTAFTER, "f"): "fj_nextafter({a}, {b})",
    (Op.NEXTAFTER, "float16"): "fj_nextafter_h({a}, {b})",
    (Op.LDEXP, "f"): "fj_ldexp({a}, {E})",
    (Op.LOGADDEXP, "f"): "fj_logaddexp({a}, {b})", (Op.LOGADDEXP2, "f"): "fj_logaddexp2({a}, {b})",
    (Op.HEAVISIDE, "f"): "(fj_isnan({a}) ? {a} : ({a} == 0.0 ? {b} : ({a} < 0.0 ? 0.0 : 1.0)))",
    (Op.GCD, "i"): "fj_gcd_i({a}, {b})", (Op.GCD, "u"): "fj_gcd_u({a}, {b})",
    (Op.LCM, "i"): "fj_lcm_i({a}, {b})", (Op.LCM, "u"): "fj_lcm_u({a}, {b})",
    # logic and bits ({A}, {B}: the operands' truth, see _truth)
    (Op.LOGICAL_AND, "*"): "({A} && {B})",
    (Op.LOGICAL_OR, "*"): "({A} || {B})",
    (Op.LOGICAL_XOR, "*"): "({A} != {B})",
    (Op.LOGICAL_NOT, "*"): "(!{A})",
    (Op.BITWISE_AND, "*"): "({a} & {b})", (Op.BITWISE_OR, "*"): "({a} | {b})",
    (Op.BITWISE_XOR, "*"): "({a} ^ {b})",
    (Op.BITWISE_AND, "b"): "({a} && {b})", (Op.BITWISE_OR, "b"): "({a} || {b})",
    (Op.BITWISE_XOR, "b"): "({a} != {b})",
    (Op.INVERT, "i"): "(~{a})", (Op.INVERT, "u"): "(~{a})", (Op.INVERT, "b"): "(!{a})",
    # (the taken shift's amount masked too: naga rejects a constant shift of 32 or more even
    # in the branch not taken)
    (Op.LSHIFT, "i"): "(uint({b}) < 32u ? ({a} << (uint({b}) & 31u)) : 0)",
    (Op.LSHIFT, "u"): "({b} < 32u ? ({a} << ({b} & 31u)) : 0u)",
    (Op.RSHIFT, "i"): "(uint({b}) < 32u ? ({a} >> (uint({b}) & 31u)) : ({a} < 0 ? -1 : 0))",
    (Op.RSHIFT, "u"): "({b} < 32u ? ({a} >> ({b} & 31u)) : 0u)",
    (Op.WHERE, "*"): "({a} ? {b} : {c})",
    (Op.MAXIMUM, "b"): "({a} || {b})", (Op.FMAX, "b"): "({a} || {b})",
    (Op.MINIMUM, "b"): "({a} && {b})", (Op.FMIN, "b"): "({a} && {b})",
}
_BUILTINS = {
    Op.EXP: "exp", Op.EXP2: "exp2", Op.LOG: "log", Op.LOG2: "log2", Op.SQRT: "sqrt",
    Op.SIN: "sin", Op.COS: "cos", Op.TAN: "tan", Op.ARCSIN: "asin", Op.ARCCOS: "acos",
    Op.ARCTAN: "atan", Op.SINH: "sinh", Op.COSH: "cosh", Op.TANH: "tanh", Op.ARCSINH: "asinh",
    Op.ARCCOSH: "acosh", Op.ARCTANH: "atanh",
    # not GLSL builtins: helpers below
    Op.EXPM1: "fj_expm1", Op.LOG1P: "fj_log1p", Op.LOG10: "fj_log10", Op.CBRT: "fj_cbrt",
}
for _op, _fn in _BUILTINS.items():
    # NaN in, NaN out, and the special values NumPy defines, by bit pattern (see fj_special)
    T[(_op, "f")] = f"fj_special_{_fn}({{a}})"
for _op in (Op.FLOOR, Op.CEIL, Op.TRUNC, Op.RINT):
    T[(_op, "i")] = T[(_op, "u")] = T[(_op, "b")] = "{a}"
for _op, _val in ((Op.ISNAN, "false"), (Op.ISINF, "false"), (Op.ISFINITE, "true"),
                  (Op.SIGNBIT, "false")):
    for _k in "iub":
        T.setdefault((_op, _k), _val)
for _op, _fn in ((Op.MAXIMUM, "max"), (Op.MINIMUM, "min"), (Op.FMAX, "max"), (Op.FMIN, "min")):
    T[(_op, "i")] = T[(_op, "u")] = _fn + "({a}, {b})"
# Float maximum & co.: keep {a} when it is beyond {b} (or equal where NumPy's loop returns the
# first of equal operands: dt.extremum_keeps_second) or when the NaN-winning operand is NaN
for _op, _beyond, _nan in ((Op.MAXIMUM, ">", "a"), (Op.MINIMUM, "<", "a"),
                           (Op.FMAX, ">", "b"), (Op.FMIN, "<", "b")):
    _cmp = _beyond if dt.extremum_keeps_second(dt.FLOAT32) else _beyond + "="
    T[(_op, "f")] = f"(({{a}} {_cmp} {{b}} || fj_isnan({{{_nan}}})) ? {{a}} : {{b}})"
_COMPARE = {Op.EQ: "==", Op.NE: "!=", Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">="}
for _op, _sym in _COMPARE.items():
    T[(_op, "*")] = "({a} " + _sym + " {b})"
    # a NaN operand decides the comparison itself (SPIR-V's != is ordered on lavapipe, and a
    # driver may assume no NaN at all): NaN == x is false, NaN != x true, NaN < x false
    T[(_op, "f")] = ("(!(fj_isnan({a}) || fj_isnan({b})) && ({a} " + _sym + " {b}))"
                      if _op is not Op.NE else "(fj_isnan({a}) || fj_isnan({b}) || !({a} == {b}))")
    T[(_op, "b")] = "(int({a}) " + _sym + " int({b}))"  # GLSL orders no bools
    # NumPy 2 compares int64 with uint64 exactly (no float64 round trip)
    T[(_op, "iu")] = "({a} < 0l ? (0 " + _sym + " 1) : (uint64_t({a}) " + _sym + " {b}))"
    T[(_op, "ui")] = "({b} < 0l ? (1 " + _sym + " 0) : ({a} " + _sym + " uint64_t({b})))"


# 64-bit integers (kernels that hold them compile as WGSL: see targets/wgsl/translate.py) take the 32-bit
# templates and helpers widened: their typed literals, conversions and helper names, and the
# shifts' width
_WIDE = ((re.compile(r"\b(\d+)u\b"), r"\1ul"), (re.compile(r"\bint\b"), "int64_t"),
         (re.compile(r"\buint\b"), "uint64_t"), (re.compile(r"\b32ul\b"), "64ul"),
         (re.compile(r"\b31ul\b"), "63ul"), (re.compile(r"\b(fj_\w+)\("), r"\g<1>64("))


def wide(text: str) -> str:
    """A 32-bit integer template or helper as its 64-bit twin."""
    for pattern, repl in _WIDE:
        text = pattern.sub(repl, text)
    return text


def exponent(dtype: np.dtype, x: str) -> str:
    """ldexp's exponent ``x`` of ``dtype`` as the int fj_ldexp takes: a wider one (int64,
    uint64, uint32) saturates first, as NumPy's loop does (beyond +-1024 every float result is
    0 or inf anyway)."""
    lit = {"int64": "l", "uint64": "ul", "uint32": "u"}.get(dtype.name)
    if lit is None:
        return x
    if dtype.kind == "i":
        return f"int(clamp({x}, -1024{lit}, 1024{lit}))"
    return f"int(min({x}, 1024{lit}))"


__all__ = ["T", "exponent", "wide"]
