"""OpenCL C spellings of complex64 and complex128, with NumPy's own algorithms.

A complex value is a ``float2`` / ``double2`` (``.x`` the real part, ``.y`` the imaginary part),
which is also NumPy's memory layout, so buffers are read and written as they are. ``+``, ``-``
and unary ``-`` are OpenCL's own vector operators (componentwise, as NumPy's loops). The other
ops call helpers written after NumPy's loops (``loops.c.src``, ``npy_math_complex.c``): the
naive product, Smith's division, reciprocal and sign as NumPy 2 defines them, its lexicographic
comparisons with their NaN rules, and its integer-power shortcut. The functions of
``npy_math_complex.c`` (exp, log, sqrt and the trigonometric family) follow the C99 Annex G
special values there, with the textbook formulas in between (see ``ops.py`` for their ULP
bounds, as normwise errors).
"""

from __future__ import annotations

from .. import dtypes as dt
from ..ops import Op

# complex dtype name -> (vector type, real type, literal suffix of the real type)
TYPES = {"complex64": ("float2", "float", "f"), "complex128": ("double2", "double", "")}

_NONZERO = "({a}.x != 0 || {a}.y != 0)"
_NAN_A = "(isnan({a}.x) || isnan({a}.y))"
_NAN_B = "(isnan({b}.x) || isnan({b}.y))"


def _lexicographic(sym: str) -> str:
    """NumPy's CLT/CLE/CGT/CGE: the real parts decide unless equal, and a NaN imaginary part
    makes an ordered real comparison false."""
    strict = sym[0]
    return (f"(({{a}}.x {strict} {{b}}.x && !isnan({{a}}.y) && !isnan({{b}}.y)) || "
            f"({{a}}.x == {{b}}.x && {{a}}.y {sym} {{b}}.y))")


TEMPLATES: dict[tuple[Op, str], str] = {
    (Op.ADD, "c"): "({a} + {b})", (Op.SUB, "c"): "({a} - {b})",
    (Op.MUL, "c"): "fj_cmul_{t}({a}, {b})", (Op.TRUEDIV, "c"): "fj_cdiv_{t}({a}, {b})",
    (Op.NEG, "c"): "(-{a})", (Op.POS, "c"): "{a}",
    (Op.CONJ, "c"): "(({S})({a}.x, -{a}.y))",
    (Op.CONJ, "*"): "{a}",  # (of a real value: itself)
    (Op.ABS, "c"): "hypot({a}.x, {a}.y)",
    (Op.SQUARE, "c"): "fj_csquare_{t}({a})",
    (Op.RECIPROCAL, "c"): "fj_crecip_{t}({a})",
    (Op.SIGN, "c"): "fj_csign_{t}({a})",
    (Op.REAL, "c"): "{a}.x", (Op.IMAG, "c"): "{a}.y",
    (Op.ISNAN, "c"): "((uchar)" + _NAN_A + ")",
    (Op.ISINF, "c"): "((uchar)(isinf({a}.x) || isinf({a}.y)))",
    (Op.ISFINITE, "c"): "((uchar)(isfinite({a}.x) && isfinite({a}.y)))",
    (Op.EQ, "c"): "((uchar)({a}.x == {b}.x && {a}.y == {b}.y))",
    (Op.NE, "c"): "((uchar)({a}.x != {b}.x || {a}.y != {b}.y))",
    (Op.LT, "c"): "((uchar)" + _lexicographic("<") + ")",
    (Op.LE, "c"): "((uchar)" + _lexicographic("<=") + ")",
    (Op.GT, "c"): "((uchar)" + _lexicographic(">") + ")",
    (Op.GE, "c"): "((uchar)" + _lexicographic(">=") + ")",
    # NumPy's maximum/minimum keep the first operand when it is NaN or not smaller (larger);
    # fmax/fmin keep it when the second is NaN or it is not smaller (larger)
    (Op.MAXIMUM, "c"): "((" + _NAN_A + " || " + _lexicographic(">=") + ") ? {a} : {b})",
    (Op.MINIMUM, "c"): "((" + _NAN_A + " || " + _lexicographic("<=") + ") ? {a} : {b})",
    (Op.FMAX, "c"): "((" + _NAN_B + " || " + _lexicographic(">=") + ") ? {a} : {b})",
    (Op.FMIN, "c"): "((" + _NAN_B + " || " + _lexicographic("<=") + ") ? {a} : {b})",
    (Op.LOGICAL_AND, "c"): "((uchar)(" + _NONZERO + " && " + _NONZERO.replace("a", "b") + "))",
    (Op.LOGICAL_OR, "c"): "((uchar)(" + _NONZERO + " || " + _NONZERO.replace("a", "b") + "))",
    (Op.LOGICAL_XOR, "c"): "((uchar)(" + _NONZERO + " != " + _NONZERO.replace("a", "b") + "))",
    (Op.LOGICAL_NOT, "c"): "((uchar)!" + _NONZERO + ")",
}


def fields(name: str) -> dict[str, str]:
    """Template fields of a complex dtype: {C} its vector type, {R} the real type, {t} the
    name helpers are suffixed with."""
    c, r, sfx = TYPES[name]
    return {"C": c, "R": r, "t": name, "f": sfx}


def literal(value: complex, name: str, real_literal) -> str:
    """``(float2)(re, im)`` from the target's exact real literals."""
    c, r, _ = TYPES[name]
    real = dt.real_of(dt.COMPLEX64 if name == "complex64" else dt.COMPLEX128)
    return f"(({c})({real_literal(value.real, real)}, {real_literal(value.imag, real)}))"


def needs_helpers(template: str) -> bool:
    return "fj_c" in template


# NumPy's complex loops (numpy/_core/src/umath/loops.c.src, NumPy 2): written with the same
# operation order, so results round the same way. Its SIMD product and square (x86-64-v3 and
# later, the builds on PyPI) fuse one multiply-add per part, as the products below do (checked
# bit for bit by tests/test_complex.py); everything else has FP_CONTRACT OFF.
HELPERS = """
inline {C} fj_cmul_{t}({C} a, {C} b) {{
    return ({C})(fma(a.x, b.x, -(a.y * b.y)), fma(a.x, b.y, a.y * b.x));
}}
inline {C} fj_csquare_{t}({C} a) {{
    return ({C})(fma(a.x, a.x, -(a.y * a.y)), a.x * a.y + a.y * a.x);
}}
inline {C} fj_cdiv_{t}({C} a, {C} b) {{
    {R} br = fabs(b.x), bi = fabs(b.y);
    if (br >= bi) {{
        if (br == 0 && bi == 0) return ({C})(a.x / br, a.y / br);
        {R} rat = b.y / b.x;
        {R} scl = ({R})1 / (b.x + b.y * rat);
        return ({C})((a.x + a.y * rat) * scl, (a.y - a.x * rat) * scl);
    }}
    {R} rat = b.x / b.y;
    {R} scl = ({R})1 / (b.y + b.x * rat);
    return ({C})((a.x * rat + a.y) * scl, (a.y * rat - a.x) * scl);
}}
inline {C} fj_crecip_{t}({C} a) {{
    if (fabs(a.y) <= fabs(a.x)) {{
        {R} r = a.y / a.x;
        {R} d = a.x + a.y * r;
        return ({C})(({R})1 / d, -r / d);
    }}
    {R} r = a.x / a.y;
    {R} d = a.x * r + a.y;
    return ({C})(r / d, ({R})-1 / d);
}}
inline {C} fj_csign_{t}({C} a) {{
    {R} m = hypot(a.x, a.y);
    if (isnan(m)) return ({C})(({R})NAN, ({R})NAN);
    if (isinf(m)) {{
        if (isinf(a.x)) {{
            if (isinf(a.y)) return ({C})(({R})NAN, ({R})NAN);
            return ({C})(a.x > 0 ? ({R})1 : ({R})-1, ({R})0);
        }}
        return ({C})(({R})0, a.y > 0 ? ({R})1 : ({R})-1);
    }}
    if (m == 0) return ({C})(({R})0, ({R})0);
    return ({C})(a.x / m, a.y / m);
}}
"""
