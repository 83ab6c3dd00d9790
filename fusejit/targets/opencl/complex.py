"""OpenCL C spellings of complex64 and complex128, with NumPy's own algorithms.

A complex value is a ``float2`` / ``double2`` (``.x`` the real part, ``.y`` the imaginary part),
which is also NumPy's memory layout, so buffers are read and written as they are. ``+``, ``-``
and unary ``-`` are OpenCL's own vector operators (componentwise, as NumPy's loops). The other
ops call helpers written after NumPy's loops (``loops.c.src``, ``npy_math_complex.c``): the
naive product, Smith's division, reciprocal and sign as NumPy 2 defines them, its lexicographic
comparisons with their NaN rules, and its integer-power shortcut. The functions of
``npy_math_complex.c`` (exp, log, sqrt and the trigonometric family) follow the C99 Annex G
special values there, with the textbook formulas in between (see ``ir/ops.py`` for their ULP
bounds, as normwise errors).
"""

from __future__ import annotations

import math

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir.ops import Op

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
    (Op.COMPLEX, "f"): "(({T})({a}, {b}))",
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


def fields(name: str, real_literal) -> dict[str, str]:
    """Template fields of a complex dtype: {C} its vector type, {R} the real type, {t} the
    name helpers are suffixed with, and the real constants of FUNCTION_HELPERS and the log
    and exp templates."""
    c, r, sfx = TYPES[name]
    real = np.dtype(np.float32 if name == "complex64" else np.float64)
    consts = {"M": real.type(np.finfo(real).max / 4), "TH": real.type(9 if sfx else 22),
              "LOG2E": real.type(1 / math.log(2)), "LOG10E": real.type(1 / math.log(10)),
              "LOGE2": real.type(math.log(2)), "PI2": real.type(math.pi / 2),
              "PI4": real.type(math.pi / 4), "BIG": real.type(math.sqrt(np.finfo(real).max) / 4)}
    # {SIN}, {COS}: the real sine and cosine (a CPU target may spell them as its own,
    # opencl/target.py's _CPU_TRIG)
    return {"C": c, "R": r, "t": name, "f": sfx, "SIN": "sin", "COS": "cos",
            **{k: real_literal(float(v), real) for k, v in consts.items()}}


def literal(value: complex, name: str, real_literal) -> str:
    """``(float2)(re, im)`` from the target's exact real literals."""
    c, r, _ = TYPES[name]
    real = dt.real_of(dt.COMPLEX64 if name == "complex64" else dt.COMPLEX128)
    return f"(({c})({real_literal(value.real, real)}, {real_literal(value.imag, real)}))"


def needs_helpers(template: str) -> bool:
    return "fj_c" in template


def helpers(template: str, fields: dict[str, str]) -> dict[str, str]:
    """The helper functions ``template`` calls, by name (the functions' helpers need the
    arithmetic ones)."""
    t = fields["t"]
    found = {f"complex_{t}": HELPERS.format(**fields)}
    inverse = any(f"fj_ca{fn}_" in template for fn in _INVERSE)
    if inverse or any(f"fj_c{fn}_" in template for fn in _FUNCTIONS):
        found[f"complex_{t}_functions"] = FUNCTION_HELPERS.format(**fields)
    if inverse:  # (sorted after the functions it calls)
        found[f"complex_{t}_inverse"] = INVERSE_HELPERS.format(**fields)
    return found


_FUNCTIONS = ("exp", "log", "sqrt", "pow", "sinh", "cosh", "tanh", "sin", "cos", "tan", "expm1",
              "log1p")
_INVERSE = ("sin", "cos", "tan", "sinh", "cosh", "tanh")


# NumPy's complex loops (numpy/_core/src/umath/loops.c.src, NumPy 2): written with the same
# operation order, so results round the same way. Its SIMD product and square (x86-64-v3 and
# later, the builds on PyPI) fuse one multiply-add per part, as the products below do (checked
# bit for bit by tests/targets/test_complex.py); everything else has FP_CONTRACT OFF.
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

# The functions of NumPy's complex loops (funcs.inc.src, npy_math_complex.c.src, which call the
# C library's cexp, clog, csqrt, cpow, csinh, ccosh, ctanh: C99 Annex G special values, FreeBSD's
# and glibc's algorithms), in {R} arithmetic. {M}: a quarter of the real type's maximum (csqrt
# scales above it), {TH}: where tanh(x) is 1 to the real type's precision.
FUNCTION_HELPERS = """
inline {C} fj_cmulnaive_{t}({C} a, {C} b) {{
    return ({C})(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}}
inline {C} fj_cexp_{t}({C} z) {{
    {R} x = z.x, y = z.y;
    if (isnan(x)) return y == 0 ? z : ({C})(x, x);
    if (isinf(x)) {{
        if (x < 0) return isfinite(y) ? ({C})(({R})0 * {COS}(y), ({R})0 * {SIN}(y))
                                      : ({C})(({R})0, ({R})0);
        if (y == 0) return z;
        return isfinite(y) ? ({C})(x * {COS}(y), x * {SIN}(y)) : ({C})(x, y - y);
    }}
    if (y == 0) return ({C})(exp(x), y);
    if (!isfinite(y)) return ({C})(y - y, y - y);
    {R} e = exp(x);
    return ({C})(e * {COS}(y), e * {SIN}(y));
}}
inline {C} fj_clog_{t}({C} z) {{
    {R} ax = fabs(z.x), ay = fabs(z.y);
    {R} h = hypot(z.x, z.y);
    {R} re;
    if (h > ({R})0.7 && h < ({R})1.5) {{
        /* |z| near 1: log1p(x*x + y*y - 1) / 2 with the squares split exactly (fma) */
        {R} hx = ax * ax, lx = fma(ax, ax, -hx), hy = ay * ay, ly = fma(ay, ay, -hy);
        {R} s = hx > hy ? ((hx - ({R})1) + hy) + (lx + ly) : ((hy - ({R})1) + hx) + (lx + ly);
        re = ({R})0.5 * log1p(s);
    }} else {{
        re = log(h);
    }}
    return ({C})(re, atan2(z.y, z.x));
}}
inline {C} fj_csqrt_{t}({C} z) {{
    {R} a = z.x, b = z.y;
    if (a == 0 && b == 0) return ({C})(({R})0, b);
    if (isinf(b)) return ({C})(INFINITY, b);
    if (isnan(a)) return ({C})(a, a);
    if (isinf(a)) {{
        if (signbit(a)) return ({C})(fabs(b - b), copysign(a, b));
        return ({C})(a, copysign(b - b, b));
    }}
    if (isnan(b)) return ({C})(b, b);
    {R} scale = 1;
    if (fabs(a) >= {M} || fabs(b) >= {M}) {{
        a *= ({R})0.25;
        b *= ({R})0.25;
        scale = 2;
    }}
    {C} r;
    if (a >= 0) {{
        {R} t = sqrt((a + hypot(a, b)) * ({R})0.5);
        r = ({C})(t, b / (2 * t));
    }} else {{
        {R} t = sqrt((-a + hypot(a, b)) * ({R})0.5);
        r = ({C})(fabs(b) / (2 * t), copysign(t, b));
    }}
    return r * scale;
}}
inline {C} fj_cpow_{t}({C} a, {C} b) {{
    if (b.x == 0 && b.y == 0) return ({C})(({R})1, ({R})0);
    if (a.x == 0 && a.y == 0) {{
        if (b.x > 0) return ({C})(({R})0, ({R})0);  /* (NumPy 2: whatever b.y) */
        return ({C})(({R})NAN, ({R})NAN);
    }}
    if (b.y == 0 && fabs(b.x) < 100 && b.x == rint(b.x)) {{
        /* NumPy's nc_pow: small integer powers by repeated (naive) products */
        int n = (int)b.x;
        if (n == 1) return a;
        if (n == 2) return fj_cmulnaive_{t}(a, a);
        if (n == 3) return fj_cmulnaive_{t}(a, fj_cmulnaive_{t}(a, a));
        int m = n < 0 ? -n : n;
        {C} aa = ({C})(({R})1, ({R})0), p = a;
        for (int mask = 1; ; mask <<= 1) {{
            if (m & mask) aa = fj_cmulnaive_{t}(aa, p);
            if (m < (mask << 1)) break;
            p = fj_cmulnaive_{t}(p, p);
        }}
        return n < 0 ? fj_cdiv_{t}(({C})(({R})1, ({R})0), aa) : aa;
    }}
    return fj_cexp_{t}(fj_cmulnaive_{t}(b, fj_clog_{t}(a)));
}}
inline {C} fj_csinh_{t}({C} z) {{
    {R} x = z.x, y = z.y;
    if (y == 0) return ({C})(sinh(x), y);
    if (isfinite(y)) {{
        if (isinf(x)) return ({C})(x * {COS}(y), INFINITY * {SIN}(y));
        return ({C})(sinh(x) * {COS}(y), cosh(x) * {SIN}(y));
    }}
    if (x == 0) return ({C})(x, y - y);
    if (isinf(x)) return ({C})(INFINITY, y - y);  /* (glibc: +inf whatever the sign of x) */
    return ({C})(y - y, y - y);
}}
inline {C} fj_ccosh_{t}({C} z) {{
    {R} x = z.x, y = z.y;
    if (y == 0) return ({C})(cosh(x), isnan(x) ? y : copysign(({R})1, x) * y);
    if (isfinite(y)) {{
        if (isinf(x)) return ({C})(INFINITY * {COS}(y), x * {SIN}(y));
        return ({C})(cosh(x) * {COS}(y), sinh(x) * {SIN}(y));
    }}
    if (x == 0) return ({C})(y - y, ({R})0);
    if (isinf(x)) return ({C})(INFINITY, y - y);
    return ({C})(y - y, y - y);
}}
inline {C} fj_ctanh_{t}({C} z) {{
    {R} x = z.x, y = z.y;
    if (isnan(x)) return ({C})(x, y == 0 ? y : x);
    if (isinf(x)) return ({C})(copysign(({R})1, x),
                                copysign(({R})0, isinf(y) ? y : {SIN}(y) * {COS}(y)));
    if (!isfinite(y)) return ({C})(x == 0 ? x : y - y, y - y);
    if (fabs(x) >= {TH}) {{
        {R} e = exp(-fabs(x));
        return ({C})(copysign(({R})1, x), 4 * {SIN}(y) * {COS}(y) * e * e);
    }}
    {R} t = tan(y);
    {R} beta = 1 + t * t;
    {R} s = sinh(x);
    {R} rho = sqrt(1 + s * s);
    {R} denom = 1 + beta * s * s;
    return ({C})((beta * rho * s) / denom, t / denom);
}}
/* sin, cos, tan through the hyperbolic ones: sin(z) = -i sinh(iz), cos(z) = cosh(iz) */
inline {C} fj_csin_{t}({C} z) {{
    if (!isfinite(z.x) && isinf(z.y)) return ({C})(z.x - z.x, INFINITY);  /* (as glibc) */
    {C} w = fj_csinh_{t}(({C})(-z.y, z.x));
    return ({C})(w.y, -w.x);
}}
inline {C} fj_ccos_{t}({C} z) {{
    return fj_ccosh_{t}(({C})(-z.y, z.x));
}}
/* funcs.inc.src's nc_expm1 and nc_log1p, as written there */
inline {C} fj_cexpm1_{t}({C} z) {{
    {R} a = {SIN}(z.y / 2);
    return ({C})(expm1(z.x) * {COS}(z.y) - 2 * a * a, exp(z.x) * {SIN}(z.y));
}}
inline {C} fj_clog1p_{t}({C} z) {{
    return ({C})(log(hypot(z.x + 1, z.y)), atan2(z.y, z.x + 1));
}}
inline {C} fj_ctan_{t}({C} z) {{
    {C} w = fj_ctanh_{t}(({C})(-z.y, z.x));
    return ({C})(w.y, -w.x);
}}
"""

# The inverse functions: Kahan's formulas ("Branch cuts for complex elementary functions",
# 1987) through csqrt, which keep the signed zeros on the cuts; the C99 Annex G values for
# infinite and NaN parts first. asin and atan are the rotations glibc computes them by
# (asin(z) = -i asinh(iz), atan(z) = -i atanh(iz)). {PI2}, {PI4}: pi/2, pi/4; {BIG}: where
# atanh's squares would overflow. (Parts are built one by one: (x + 1, y) keeps y = -0.)
INVERSE_HELPERS = """
inline {C} fj_casin_k_{t}({C} w) {{
    {C} s1 = fj_csqrt_{t}(({C})(1 - w.x, -w.y)), s2 = fj_csqrt_{t}(({C})(1 + w.x, w.y));
    return ({C})(atan2(w.x, s1.x * s2.x - s1.y * s2.y), asinh(s1.x * s2.y - s1.y * s2.x));
}}
inline {C} fj_casinh_{t}({C} z) {{
    {R} x = z.x, y = z.y;
    if (isinf(x)) return ({C})(x, isnan(y) ? y : copysign(isinf(y) ? {PI4} : ({R})0, y));
    if (isinf(y)) return ({C})(copysign(({R})INFINITY, x), isnan(x) ? x : copysign({PI2}, y));
    if (isnan(x)) return ({C})(x, y == 0 ? y : x);
    if (isnan(y)) return ({C})(y, y);
    {C} a = fj_casin_k_{t}(({C})(-y, x));
    return ({C})(a.y, -a.x);
}}
inline {C} fj_casin_{t}({C} z) {{
    {C} w = fj_casinh_{t}(({C})(-z.y, z.x));
    return ({C})(w.y, -w.x);
}}
inline {C} fj_cacos_{t}({C} z) {{
    {R} x = z.x, y = z.y;
    if (isinf(x)) {{
        if (isnan(y)) return ({C})(y, -({R})INFINITY);  /* (glibc's sign) */
        {R} re = isinf(y) ? (x > 0 ? {PI4} : 3 * {PI4}) : (x > 0 ? ({R})0 : 2 * {PI2});
        return ({C})(re, copysign(({R})INFINITY, -y));
    }}
    if (isinf(y)) return ({C})(isnan(x) ? x : {PI2}, copysign(({R})INFINITY, -y));
    if (isnan(x) || isnan(y)) return ({C})(x == 0 ? {PI2} : y + x, y + x);
    {C} s1 = fj_csqrt_{t}(({C})(1 - x, -y)), s2 = fj_csqrt_{t}(({C})(1 + x, y));
    return ({C})(2 * atan2(s1.x, s2.x), asinh(s2.x * s1.y - s2.y * s1.x));
}}
inline {C} fj_cacosh_{t}({C} z) {{
    {R} x = z.x, y = z.y;
    if (isinf(x) || isinf(y) || isnan(x) || isnan(y)) {{
        {C} w = fj_cacos_{t}(z);  /* acosh(z) = +-i acos(z), the sign making Re >= 0 */
        return ({C})(fabs(w.y), isnan(w.y) ? w.x : copysign(w.x, y));
    }}
    {C} s1 = fj_csqrt_{t}(({C})(x - 1, y)), s2 = fj_csqrt_{t}(({C})(x + 1, y));
    return ({C})(asinh(s1.x * s2.x + s1.y * s2.y), 2 * atan2(s1.y, s2.x));
}}
inline {C} fj_catanh_{t}({C} z) {{
    {R} x = z.x, y = z.y;
    if (isinf(x) || isinf(y)) return ({C})(copysign(({R})0, x), isnan(y) ? y : copysign({PI2}, y));
    if (isnan(x)) return ({C})(x, x);
    if (isnan(y)) return ({C})(x == 0 ? x : y, y);
    if (fabs(x) > {BIG} || fabs(y) > {BIG}) {{
        {R} h = hypot(x, y);
        return ({C})((x / h) / h, copysign({PI2}, y));
    }}
    {R} ax = fabs(x);
    /* near z = +-1 (where the squares may underflow) as a difference of logs, which then
       does not cancel; elsewhere log1p, accurate for small results */
    {R} d = (1 - ax) * (1 - ax) + y * y;
    {R} re = d < ({R})0.25 ? ({R})0.5 * (log(hypot(1 + ax, y)) - log(hypot(1 - ax, y)))
                          : ({R})0.25 * log1p(4 * ax / d);
    re = copysign(re, x);
    return ({C})(re, ({R})0.5 * atan2(2 * y, (1 - x) * (1 + x) - y * y));
}}
inline {C} fj_catan_{t}({C} z) {{
    {C} w = fj_catanh_{t}(({C})(-z.y, z.x));
    return ({C})(w.y, -w.x);
}}
"""

# funcs.inc.src: log2/log10 scale clog's parts; exp2 is cexp of z * ln 2 (componentwise)
TEMPLATES.update({
    (Op.EXP, "c"): "fj_cexp_{t}({a})", (Op.LOG, "c"): "fj_clog_{t}({a})",
    (Op.LOG2, "c"): "(fj_clog_{t}({a}) * {LOG2E})", (Op.LOG10, "c"): "(fj_clog_{t}({a}) * {LOG10E})",
    (Op.EXP2, "c"): "fj_cexp_{t}({a} * {LOGE2})",
    (Op.SQRT, "c"): "fj_csqrt_{t}({a})", (Op.POW, "c"): "fj_cpow_{t}({a}, {b})",
    (Op.SIN, "c"): "fj_csin_{t}({a})", (Op.COS, "c"): "fj_ccos_{t}({a})",
    (Op.TAN, "c"): "fj_ctan_{t}({a})", (Op.SINH, "c"): "fj_csinh_{t}({a})",
    (Op.COSH, "c"): "fj_ccosh_{t}({a})", (Op.TANH, "c"): "fj_ctanh_{t}({a})",
    (Op.ARCSIN, "c"): "fj_casin_{t}({a})", (Op.ARCCOS, "c"): "fj_cacos_{t}({a})",
    (Op.ARCTAN, "c"): "fj_catan_{t}({a})", (Op.ARCSINH, "c"): "fj_casinh_{t}({a})",
    (Op.ARCCOSH, "c"): "fj_cacosh_{t}({a})", (Op.ARCTANH, "c"): "fj_catanh_{t}({a})",
    (Op.EXPM1, "c"): "fj_cexpm1_{t}({a})", (Op.LOG1P, "c"): "fj_clog1p_{t}({a})",
    (Op.RINT, "c"): "rint({a})",  # (componentwise, as NumPy's nc_rint)
})
