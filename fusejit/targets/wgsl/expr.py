"""Tokens, types and expressions of the GLSL -> WGSL translation (targets/wgsl/translate.py says why and
what it maps): ``Parser`` reads fusejit's GLSL token by token and returns each expression as
WGSL text with its WGSL type where it can tell (declared names, constructors, literals with a
suffix, the helpers' return types), which ``isnan`` and ``mod`` need to pick a helper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fusejit.errors import InternalError


class WGSLError(InternalError):
    """GLSL this translator does not know (a bug of fusejit's own shaders)."""


_SCALAR = {"float": "f32", "int": "i32", "uint": "u32", "bool": "bool", "double": "f64",
           "float16_t": "f16", "int64_t": "i64", "uint64_t": "u64", "void": ""}
_VECTOR = {"vec": "f32", "ivec": "i32", "uvec": "u32", "bvec": "bool", "dvec": "f64",
           "f16vec": "f16", "i64vec": "i64", "u64vec": "u64"}
TYPES = dict(_SCALAR)
for _p, _s in _VECTOR.items():
    for _n in (2, 3, 4):
        TYPES[f"{_p}{_n}"] = f"vec{_n}<{_s}>"

# WGSL keywords and reserved words (and predeclared names naga will not let a variable shadow)
# that fusejit's GLSL might use as identifiers
_RESERVED = frozenset("""
NULL Self abstract active alias alignas alignof array as asm async attribute auto await become
binding_array bitcast break case cast catch class co_await co_return co_yield coherent
column_major common compile compile_fragment concept const const_assert const_cast consteval
constexpr constinit continue continuing crate debugger decltype default delete demote
demote_to_helper diagnostic discard do dynamic_cast else enable enum explicit export extends
extern external f16 f32 f64 fallthrough false filter final finally fn for friend from fxgroup
get goto groupshared highp i32 if impl implements import inline instanceof interface layout
let loop lowp macro macro_rules match mediump meta mod module move mut mutable namespace new nil
noexcept noinline nointerpolation noperspective null nullptr of operator override package
packoffset partition pass patch pixelfragment precise precision premerge priv protected ptr
pub public readonly ref regardless register reinterpret_cast require requires resource
restrict return select self set shared signed sizeof smooth snorm static static_assert
static_cast std struct subroutine super switch target template this thread_local throw trait
true try type typedef typeid typename typeof u32 union unless unorm unsafe unsized use using var
varying vec2 vec3 vec4 virtual volatile wgsl where while with workgroup writeonly yield
""".split())

# GLSL builtins WGSL spells differently (by name alone)
_RENAMED = {"roundEven": "round", "inversesqrt": "inverseSqrt", "floatBitsToUint": "bitcast<u32>",
            "floatBitsToInt": "bitcast<i32>", "uintBitsToFloat": "bitcast<f32>",
            "intBitsToFloat": "bitcast<f32>", "barrier": "workgroupBarrier",
            "packHalf2x16": "pack2x16float", "unpackHalf2x16": "unpack2x16float",
            "bitCount": "countOneBits", "findMSB": "firstLeadingBit",
            "findLSB": "firstTrailingBit"}
_BUILTIN_TYPE = {"floatBitsToUint": "u32", "floatBitsToInt": "i32", "uintBitsToFloat": "f32",
                 "intBitsToFloat": "f32", "isnan": "bool", "any": "bool", "all": "bool"}
BUILTINS = {  # the shader's builtin inputs, as main's parameters
    "gl_WorkGroupID": ("workgroup_id", "vec3<u32>"),
    "gl_LocalInvocationID": ("local_invocation_id", "vec3<u32>"),
    "gl_NumWorkGroups": ("num_workgroups", "vec3<u32>"),
    "gl_GlobalInvocationID": ("global_invocation_id", "vec3<u32>"),
    "gl_LocalInvocationIndex": ("local_invocation_index", "u32"),
}
HELPERS = {
    "fj_wgsl_isnan": "fn fj_wgsl_isnan(x: f32) -> bool "
                     "{ return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }",
    "fj_wgsl_isnan_d": "fn fj_wgsl_isnan_d(x: f64) -> bool { return fj_wgsl_isnan(f32(x)); }",
    "fj_wgsl_mod": "fn fj_wgsl_mod(x: f32, y: f32) -> f32 { return x - y * floor(x / y); }",
    "fj_wgsl_mod_d": "fn fj_wgsl_mod_d(x: f64, y: f64) -> f64 { return x - y * floor(x / y); }",
}

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<num>0[xX][0-9a-fA-F]+(?:[uU]?[lL])?[uU]?
             |(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?(?:lf|LF|[uU][lL]|[lL]|[fFuU])?)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op><<=|>>=|\+\+|--|&&|\|\||==|!=|<=|>=|<<|>>|[-+*/%&|^]=|[-+*/%&|^<>=!~?:;,.(){}\[\]])
""", re.VERBOSE | re.DOTALL)
ASSIGN = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="})
_BINARY = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="),
           ("<<", ">>"), ("+", "-"), ("*", "/", "%")]


def _wrapped(text: str) -> bool:
    """Is ``text`` one parenthesised expression, ``(...)``?"""
    if not text.startswith("("):
        return False
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            return i == len(text) - 1
    return False


def _special_bits(text: str) -> bool:
    """Is ``text`` an integer literal whose float32 bits are a NaN or an infinity?"""
    m = re.fullmatch(r"\(?(-?)(0[xX][0-9a-fA-F]+|\d+)[uU]?\)?", text)
    if m is None:
        return False
    bits = int(m.group(2), 0) & 0xFFFFFFFF
    if m.group(1):
        bits = -bits & 0xFFFFFFFF
    return bits & 0x7F800000 == 0x7F800000


# GLSL converts implicitly up this order (int -> int64_t, int -> float, float -> double, ...);
# WGSL never does, so the narrower operand is converted where GLSL would have
_RANK = {t: i for i, t in enumerate(("i32", "u32", "i64", "u64", "f16", "f32", "f64"))}


# 32-bit integers widened to 64 bits by bit operations: lavapipe (Mesa 22.3, LLVM 15) compared
# i64(x) of a negative i32 x as if zero-extended (i64(x) < 0 was false for x = -1, though the
# value stored was -1), so no plain conversion between the widths is trusted
_WIDEN = {("i32", "i64"): "((i64({0}) << 32u) >> 32u)",
          ("i32", "u64"): "u64((i64({0}) << 32u) >> 32u)",
          ("u32", "i64"): "(i64({0}) & 4294967295li)",
          ("u32", "u64"): "(u64({0}) & 4294967295lu)"}


# names a constant expression of fusejit's may hold (builtins naga evaluates at compile time)
_CONSTANT_NAMES = frozenset({"select", "min", "max", "clamp", "abs", "bitcast", "true",
                             "false", *_SCALAR.values()})


def _constant(text: str) -> bool:
    """Does ``text`` name no variable (so naga evaluates it while compiling)?"""
    return all(n in _CONSTANT_NAMES for n in re.findall(r"(?<![\w.])[A-Za-z_]\w*", text))


def widen(text: str, have: str | None, want: str) -> str:
    """``want(text)``, a conversion of a value of type ``have``. naga's constant evaluator
    cannot convert a 64-bit integer to any narrower or float type ("Cannot cast scalar
    components of expression Literal(I64(1))"), as in a gather index clamped from a literal:
    such a constant is made opaque with the zero naga does not know (``fj_u0``)."""
    if have in ("i64", "u64") and want not in ("i64", "u64") and _constant(text):
        text = f"({text} | {have}(fj_u0))"
    spelled = _WIDEN.get((have or "", want))
    return spelled.format(text) if spelled else f"{want}({text})"


def coerce(text: str, have: str | None, want: str | None) -> str:
    """``text`` (of WGSL type ``have``, None where unknown or abstract) as a value of ``want``,
    as a GLSL assignment, return or argument converts it: 64-bit and half targets convert
    abstract values too (WGSL would make ``select(0, 1, c)`` an i32)."""
    if want is None or have == want or want not in _RANK:
        return text
    if have in _RANK or (have is None and want in ("i64", "u64", "f64", "f16") and
                         not re.fullmatch(r"\(?-?[0-9.eE+]+\)?", text)):
        return widen(text, have, want)
    return text


def unify(values: list[tuple[str, str | None]]) -> tuple[list[str], str | None]:
    """Operands of one operation, the narrower ones converted to the widest known type."""
    known = [t for _, t in values if t in _RANK]
    if not known:
        return [v for v, _ in values], next((t for _, t in values if t), None)
    wide = max(known, key=_RANK.__getitem__)
    return [coerce(v, t, wide) for v, t in values], wide


def safe(name: str) -> str:
    return name + "_" if name in _RESERVED else name


@dataclass
class Func:
    ret: str
    outs: tuple[bool, ...]
    params: tuple[str, ...] = ()  # their WGSL types


class Parser:
    """The token stream and the expression grammar (C precedence, every binary operation
    parenthesised in the output); the statements and the module are targets/wgsl/translate.py's."""

    toks: list[str]
    i: int
    funcs: dict[str, Func]
    scopes: list[dict[str, str]]
    pointers: set[str]  # out parameters of the function being translated
    used: set[str]  # builtin inputs referred to
    helpers: set[str]  # of HELPERS, the ones called

    # -- tokens -------------------------------------------------------------------------------
    @staticmethod
    def _lex(text: str) -> list[str]:
        out, pos = [], 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise WGSLError(f"cannot read the GLSL at {text[pos:pos + 40]!r}")
            if m.lastgroup != "space":
                out.append(m.group())
            pos = m.end()
        return out

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ""

    def take(self, expect: str | None = None) -> str:
        t = self.peek()
        if expect is not None and t != expect:
            context = " ".join(self.toks[max(0, self.i - 8):self.i + 8])
            raise WGSLError(f"expected {expect!r}, found {t!r} near: {context}")
        self.i += 1
        return t

    def accept(self, tok: str) -> bool:
        if self.peek() == tok:
            self.i += 1
            return True
        return False

    def wtype(self, glsl_type: str) -> str:
        if glsl_type not in TYPES:
            raise WGSLError(f"unknown GLSL type {glsl_type!r}")
        return TYPES[glsl_type]

    def lookup(self, name: str) -> str | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    # -- expressions ---------------------------------------------------------------------------
    def expr(self) -> tuple[str, str | None]:
        cond, ty = self.binary(0)
        if not self.accept("?"):
            return cond, ty
        a, ta = self.expr()
        self.take(":")
        b, tb = self.expr()
        (a, b), kind = unify([(a, ta), (b, tb)])
        return f"select({b}, {a}, {cond})", kind

    def binary(self, level: int) -> tuple[str, str | None]:
        if level == len(_BINARY):
            return self.unary()
        left, lt = self.binary(level + 1)
        while self.peek() in _BINARY[level]:
            op = self.take()
            right, rt = self.binary(level + 1)
            if op in ("<<", ">>"):
                right, kind = self._shift_amount(right), lt
            else:
                (left, right), kind = unify([(left, lt), (right, rt)])
            if level <= 1 or 5 <= level <= 6:
                kind = "bool"
            left, lt = f"({left} {op} {right})", kind
        return left, lt

    @staticmethod
    def _shift_amount(text: str) -> str:
        if re.fullmatch(r"\(?\d+[uU]?\)?", text):
            return text
        return f"u32({text})"

    def unary(self) -> tuple[str, str | None]:
        t = self.peek()
        if t in ("-", "!", "~", "+"):
            self.take()
            inner, ty = self.unary()
            return (inner, ty) if t == "+" else (f"({t}{inner})", ty)
        if t in ("++", "--"):
            raise WGSLError("prefix increments inside an expression")
        return self.postfix()

    def postfix(self) -> tuple[str, str | None]:
        text, ty = self.primary()
        while True:
            if self.accept("["):
                index, _ = self.expr()
                self.take("]")
                text = f"{text}[{index}]"
                if ty and ty.startswith("array<"):
                    ty = ty[6:].rsplit(",", 1)[0].rstrip(">") if "," in ty else ty[6:-1]
                elif ty and ty.startswith("vec"):
                    ty = ty[5:-1]
            elif self.accept("."):
                member = self.take()
                text = f"{text}.{member}"
                if ty and ty.startswith("vec"):
                    ty = ty[5:-1] if len(member) == 1 else f"vec{len(member)}<{ty[5:-1]}>"
            else:
                return text, ty

    def primary(self) -> tuple[str, str | None]:
        t = self.take()
        if t == "(" and self.peek() in TYPES and self.peek(1) == ")":
            raise WGSLError(f"a C cast ({self.peek()}) in the GLSL: GLSL (and WGSL) spell a "
                            "conversion as a constructor, Target.cast's")
        if t == "(":
            inner, ty = self.expr()
            self.take(")")
            return (inner if _wrapped(inner) else f"({inner})"), ty
        if re.match(r"[0-9.]", t):
            return self.number(t)
        if t in ("true", "false"):
            return t, "bool"
        if not re.match(r"[A-Za-z_]", t):
            raise WGSLError(f"unexpected {t!r} in an expression")
        if self.peek() == "(":
            return self.call(t)
        if t in BUILTINS:
            self.used.add(t)
            return t, BUILTINS[t][1]
        name = safe(t)
        if name in self.pointers:
            return f"(*{name})", self.lookup(name)
        return name, self.lookup(name)

    @staticmethod
    def number(t: str) -> tuple[str, str | None]:
        low = t.lower()
        if low.endswith("lf"):
            return t[:-2] + "lf", "f64"
        if low.endswith("ul"):  # (GLSL's 64-bit suffixes: WGSL's are li and lu)
            return t[:-2] + "lu", "u64"
        if low.endswith("l"):
            return t[:-1] + "li", "i64"
        if low.startswith("0x"):
            return t, "u32" if low.endswith("u") else None
        if low.endswith("u"):
            return t, "u32"
        if low.endswith("f"):
            t = t[:-1]
        return t, None

    def args(self) -> list[tuple[str, str | None]]:
        self.take("(")
        out = []
        while not self.accept(")"):
            out.append(self.expr())
            self.accept(",")
        return out

    def call(self, name: str) -> tuple[str, str | None]:
        args = self.args()
        texts = [a for a, _ in args]
        if name in TYPES:  # constructors and conversions
            ty = self.wtype(name)
            if len(args) == 1 and (ty in ("i64", "u64") or args[0][1] in ("i64", "u64")):
                return widen(texts[0], args[0][1], ty), ty
            return f"{ty}({', '.join(texts)})", ty
        if name in self.funcs:
            fn = self.funcs[name]
            texts = [f"&{a}" if fn.outs[i] else coerce(a, ty, fn.params[i])
                     for i, (a, ty) in enumerate(args)]
            return f"{name}({', '.join(texts)})", fn.ret
        if name == "isnan":
            helper = "fj_wgsl_isnan_d" if args[0][1] == "f64" else "fj_wgsl_isnan"
            self.helpers.update({"fj_wgsl_isnan", helper})
            return f"{helper}({texts[0]})", "bool"
        if name == "mod":
            helper = "fj_wgsl_mod_d" if "f64" in (args[0][1], args[1][1]) else "fj_wgsl_mod"
            self.helpers.add(helper)
            return f"{helper}({', '.join(texts)})", args[0][1]
        if name == "atan" and len(args) == 2:
            return f"atan2({', '.join(texts)})", args[0][1]
        if name in ("uintBitsToFloat", "intBitsToFloat") and _special_bits(texts[0]):
            # (a NaN or infinity constant is a WGSL compile error: naga must not fold it)
            zero = "fj_u0" if name.startswith("u") else "i32(fj_u0)"
            texts[0] = f"({texts[0]} | {zero})"
        if name.startswith("fj_"):
            raise WGSLError(f"call of {name}, which this shader does not define")
        if name in ("min", "max", "clamp"):
            texts, kind = unify(list(zip(texts, (ty for _, ty in args))))
            return f"{name}({', '.join(texts)})", kind
        kind = _BUILTIN_TYPE.get(name) or next((ty for _, ty in args if ty), None)
        return f"{_RENAMED.get(name, name)}({', '.join(texts)})", kind


__all__ = ["ASSIGN", "BUILTINS", "HELPERS", "TYPES", "Func", "Parser", "WGSLError", "coerce",
           "safe", "unify"]
