"""Random numpy programs for differential fuzzing of ``@fuse`` against NumPy.

A *program* is a straight-line Python function: each step applies one entry of ``OPS`` (an
operator or numpy ufunc, ``np.where``, a cast, a reduction over small axes, or a view) to earlier
values or literals. Operands are picked with a bias towards recent values, so programs are deep
(depth up to the step count), fan out (a value read by several steps) and share subexpressions
(a step can repeat an earlier expression verbatim, which CSE must merge); several values are
returned. Every candidate step is first run by NumPy on placeholder arrays of the right dtypes
and shapes: a step NumPy rejects is redrawn, except that with a small probability it is kept as
the program's last step, to check that fusejit raises the same exception class as NumPy.

The same generator is driven by Hypothesis (``programs()``, for the pytest suite) or by a plain
``random.Random`` (``RandomChooser``, for long campaigns that must not stop at the first
failure). Value draws are not part of the program: see ``values.py``.
"""

from __future__ import annotations

import math
import os
import random
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
from hypothesis import strategies as st

from fusejit.ir.ops import Op

T = TypeVar("T")

DTYPES: tuple[np.dtype, ...] = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64))
# `s += 1` on a NumPy scalar (an argument, or a 0-d reduction result) rebinds it in NumPy
# (issue 9 class 4, being fixed separately): generated only with FUSEJIT_FUZZ_SCALAR_AUGMENT=1
# or `python -m tests.fuzz.runner --scalar-augment`
SCALAR_AUGMENT = os.environ.get("FUSEJIT_FUZZ_SCALAR_AUGMENT", "") not in ("", "0")
ARRAY_LAYOUTS = ("numpy", "numpy-strided", "numpy-broadcast", "device", "device-T",
                 "device-offset", "device-strided", "device-reversed")
_VIEW_LAYOUTS = ("device-offset", "device-strided", "device-reversed", "numpy-strided",
                 "numpy-broadcast")  # need an axis to slice
MAX_ELEMENTS = 4096  # larger intermediates (outer products of views) are redrawn
LONG_AXES = (7, 8, 9, 16, 17, 33, 64, 100, 257, 1030, 3000)


# -- choosers ---------------------------------------------------------------------------------------


class Chooser(Protocol):
    def int(self, lo: int, hi: int) -> int: ...  # inclusive

    def choice(self, seq: Sequence[T]) -> T: ...

    def coin(self, p: float) -> bool: ...


class RandomChooser:
    """Chooser over ``random.Random`` (campaign runner)."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self.rnd.randint(lo, hi)

    def choice(self, seq: Sequence[T]) -> T:
        return seq[self.rnd.randrange(len(seq))]

    def coin(self, p: float) -> bool:
        return self.rnd.random() < p


class HypothesisChooser:
    """Chooser over a Hypothesis ``draw`` (so examples shrink towards small programs)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self.draw = draw

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def choice(self, seq: Sequence[T]) -> T:
        return seq[self.draw(st.integers(0, len(seq) - 1))]

    def coin(self, p: float) -> bool:
        return self.draw(st.integers(0, 999)) < int(p * 1000)


# -- programs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    """One parameter: an array in some layout, a Python scalar or a NumPy scalar."""

    name: str
    kind: str  # "array" | "pyscalar" | "npscalar"
    dtype: np.dtype
    shape: tuple[int, ...]
    layout: str  # one of ARRAY_LAYOUTS for arrays, "scalar" otherwise


@dataclass(frozen=True)
class Step:
    """``name = code``; ``operands`` are the variables ``code`` reads (literals are inline)."""

    name: str
    op: str
    operands: tuple[str, ...]
    code: str  # an expression; for "inplace" a statement that writes ``name``
    kind: str  # "map" | "transcendental" | "cast" | "reduce" | "move" | "inplace"
    fj_op: Op | None = None  # fusejit op whose ULP bound applies (transcendental steps; and
    # on Vulkan the ops of glsl.TOLERANCES: Vulkan's division and sqrt are not correctly rounded)
    detail: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.detail).get(key, default)


@dataclass(frozen=True)
class Program:
    args: tuple[Arg, ...]
    steps: tuple[Step, ...]
    outputs: tuple[str, ...]
    single: bool = False  # return the one output bare, not in a tuple
    raises: str | None = None  # NumPy's exception class name on placeholders, if any

    def source(self, name: str = "fz") -> str:
        lines = [f"def {name}({', '.join(a.name for a in self.args)}):"]
        lines += [f"    {s.code}" if s.kind == "inplace" else f"    {s.name} = {s.code}"
                  for s in self.steps]
        outs = self.outputs[0] if self.single else "(" + ", ".join(self.outputs) + ",)"
        lines.append(f"    return {outs}")
        return "\n".join(lines) + "\n"

    @property
    def written(self) -> frozenset[str]:
        """Arguments the program writes in place."""
        names = {a.name for a in self.args}
        return frozenset(s.name for s in self.steps if s.kind == "inplace" and s.name in names)

    def function(self, name: str = "fz") -> Callable[..., Any]:
        namespace: dict[str, Any] = {"np": np}
        code = compile(self.source(name), f"<fuzz program {name}>", "exec")
        exec(code, namespace)  # noqa: S102  (our own generated source)
        return namespace[name]


# -- the op table -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpDef:
    """How to spell one op. ``kinds``: dtype kinds of operands worth trying (b i u f)."""

    key: str
    arity: int
    spellings: tuple[str, ...]
    kind: str = "map"
    kinds: str = "biuf"
    fj_op: Op | None = None
    weight: float = 1.0
    literal_ok: bool = True  # may one operand be a literal


def _b(key: str, *spellings: str, **kw: Any) -> OpDef:
    return OpDef(key, 2, spellings, **kw)


def _u(key: str, *spellings: str, **kw: Any) -> OpDef:
    return OpDef(key, 1, spellings, **kw)


def _t(key: str, ufunc: str, op: Op, arity: int = 1) -> OpDef:
    args = ", ".join(f"{{{i}}}" for i in range(arity))
    return OpDef(key, arity, (f"np.{ufunc}({args})",), "transcendental", "buf", op, 0.5)


OPDEFS: tuple[OpDef, ...] = (
    _b("add", "{0} + {1}", "np.add({0}, {1})", weight=3),
    _b("sub", "{0} - {1}", "np.subtract({0}, {1})", weight=2),
    _b("mul", "{0} * {1}", "np.multiply({0}, {1})", weight=3),
    _b("truediv", "{0} / {1}", "np.true_divide({0}, {1})", weight=1.5, fj_op=Op.TRUEDIV),
    _b("floordiv", "{0} // {1}", "np.floor_divide({0}, {1})"),
    _b("mod", "{0} % {1}", "np.remainder({0}, {1})"),
    _b("fmod", "np.fmod({0}, {1})", weight=0.5),
    _b("pow", "{0} ** {1}", "np.power({0}, {1})", kind="transcendental", fj_op=Op.POW),
    _b("maximum", "np.maximum({0}, {1})"), _b("minimum", "np.minimum({0}, {1})"),
    _b("fmax", "np.fmax({0}, {1})", weight=0.5), _b("fmin", "np.fmin({0}, {1})", weight=0.5),
    _b("copysign", "np.copysign({0}, {1})", kinds="f", weight=0.5),
    _b("nextafter", "np.nextafter({0}, {1})", kinds="f", weight=0.3),
    _b("heaviside", "np.heaviside({0}, {1})", kinds="f", weight=0.3),
    _b("and", "{0} & {1}", "np.bitwise_and({0}, {1})", kinds="biu"),
    _b("or", "{0} | {1}", "np.bitwise_or({0}, {1})", kinds="biu"),
    _b("xor", "{0} ^ {1}", "np.bitwise_xor({0}, {1})", kinds="biu"),
    _b("lshift", "{0} << {1}", "np.left_shift({0}, {1})", kinds="iu"),
    _b("rshift", "{0} >> {1}", "np.right_shift({0}, {1})", kinds="iu"),
    _b("gcd", "np.gcd({0}, {1})", kinds="iu", weight=0.3),
    _b("land", "np.logical_and({0}, {1})", weight=0.5),
    _b("lor", "np.logical_or({0}, {1})", weight=0.5),
    _b("lxor", "np.logical_xor({0}, {1})", weight=0.3),
    _b("lt", "{0} < {1}", "np.less({0}, {1})"), _b("le", "{0} <= {1}"),
    _b("gt", "{0} > {1}"), _b("ge", "np.greater_equal({0}, {1})"),
    _b("eq", "{0} == {1}", "np.equal({0}, {1})"), _b("ne", "{0} != {1}"),
    _u("neg", "-{0}", "np.negative({0})"), _u("pos", "np.positive({0})", weight=0.3),
    _u("abs", "abs({0})", "np.abs({0})", "np.fabs({0})"),
    _u("sign", "np.sign({0})"), _u("square", "np.square({0})"),
    _u("sqrt", "np.sqrt({0})", fj_op=Op.SQRT),
    _u("reciprocal", "np.reciprocal({0})", kinds="f", weight=0.5, fj_op=Op.RECIPROCAL),
    _u("floor", "np.floor({0})"), _u("ceil", "np.ceil({0})"), _u("trunc", "np.trunc({0})"),
    _u("rint", "np.rint({0})", "np.round({0})", "np.round({0}, 1)", "np.round({0}, -1)"),
    _u("fix", "np.fix({0})", weight=0.3),
    _u("isnan", "np.isnan({0})"), _u("isinf", "np.isinf({0})"),
    _u("isfinite", "np.isfinite({0})"), _u("signbit", "np.signbit({0})", weight=0.5),
    _u("not", "np.logical_not({0})", weight=0.5), _u("invert", "~{0}", kinds="biu"),
    _u("deg2rad", "np.deg2rad({0})", kinds="f", weight=0.3),
    _u("nan_to_num", "np.nan_to_num({0})", kinds="f", weight=0.3),
    OpDef("clip", 3, ("np.clip({0}, {1}, {2})",), weight=0.5),
    OpDef("where", 3, ("np.where({0}, {1}, {2})",), weight=2),
    _t("exp", "exp", Op.EXP), _t("expm1", "expm1", Op.EXPM1), _t("exp2", "exp2", Op.EXP2),
    _t("log", "log", Op.LOG), _t("log1p", "log1p", Op.LOG1P), _t("log2", "log2", Op.LOG2),
    _t("log10", "log10", Op.LOG10), _t("sin", "sin", Op.SIN), _t("cos", "cos", Op.COS),
    _t("tan", "tan", Op.TAN), _t("tanh", "tanh", Op.TANH), _t("sinh", "sinh", Op.SINH),
    _t("arcsin", "arcsin", Op.ARCSIN), _t("arctan", "arctan", Op.ARCTAN),
    _t("arccosh", "arccosh", Op.ARCCOSH), _t("cbrt", "cbrt", Op.CBRT),
    _t("arctan2", "arctan2", Op.ARCTAN2, 2), _t("hypot", "hypot", Op.HYPOT, 2),
    _t("logaddexp", "logaddexp", Op.LOGADDEXP, 2),
    OpDef("cast", 1, ("{0}.astype(np.{dtype})",), "cast", weight=2.5, literal_ok=False),
    OpDef("reduce", 1, (), "reduce", weight=3, literal_ok=False),
    OpDef("move", 1, (), "move", weight=1.5, literal_ok=False),
    OpDef("repeat", 0, (), "repeat", weight=0.5),
    OpDef("inplace", 1, (), "inplace", weight=8),
)
_WEIGHTS = [d.weight for d in OPDEFS]

REDUCTIONS = ("sum", "prod", "max", "min", "mean", "any", "all", "argmax", "argmin")
MOVES = ("{0}.T", "{0}[::-1]", "{0}[None]", "{0}[..., None]", "{0}[1:]", "{0}.reshape(-1)",
         "np.swapaxes({0}, 0, -1)", "{0}[:, ::2]", "np.broadcast_to({0}, {shape})",
         "np.expand_dims({0}, 0)", "{0}[..., :1]")

_PY_INTS = (0, 1, -1, 2, 3, 7, 8, 31, 33, 64, -5, 255, 100)
_PY_INTS_RARE = (256, 300, -129, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 2**64)
_PY_FLOATS = (0.0, -0.0, 0.5, 1.5, 2.5, -3.25, 1.0, -1.0, 2.0, 1 / 3, 1e-3, 100.0)
_PY_FLOATS_RARE = (math.inf, -math.inf, math.nan, 1e-40, 1e-310, 3.4e38, 1e300, -1e39)
_POW_EXPONENTS = (0, 1, 2, 3, 0.5, -1, 2.0, -0.5, 3.0, -2, 1 / 3)


def _float_text(v: float) -> str:
    if math.isnan(v):
        return "np.nan"
    if math.isinf(v):
        return "np.inf" if v > 0 else "(-np.inf)"
    text = repr(v)
    return f"({text})" if text.startswith("-") else text


def _literal(ch: Chooser, like: np.dtype | None) -> str:
    """A literal operand: a Python scalar (weak) or a NumPy scalar (strong)."""
    r = ch.int(0, 99)
    if r < 35:
        v = ch.choice(_PY_INTS_RARE) if ch.coin(0.08) else ch.choice(_PY_INTS)
        return f"({v})" if v < 0 else str(v)
    if r < 70:
        return _float_text(ch.choice(_PY_FLOATS_RARE) if ch.coin(0.15) else ch.choice(_PY_FLOATS))
    if r < 78:
        return ch.choice(("True", "False"))
    dtype = ch.choice(DTYPES[1:])
    if dtype.kind == "f":
        v = ch.choice(_PY_FLOATS_RARE + _PY_FLOATS)
        return f"np.{dtype.name}({_float_text(v)})"
    info = np.iinfo(dtype)
    v = ch.choice([x for x in _PY_INTS + (int(info.min), int(info.max))
                   if info.min <= x <= info.max])
    return f"np.{dtype.name}({v})"


@dataclass
class _Value:
    name: str
    placeholder: Any
    pykind: str  # "array" | "pyscalar" | "npscalar"
    code: str = ""  # defining expression (for verbatim repeats)
    target: bool = False  # may be written in place (an array of its own, not a view)

    @property
    def ndim(self) -> int:
        return int(np.ndim(self.placeholder))


def _placeholder(arg: Arg) -> Any:
    if arg.kind == "pyscalar":
        return {"b": True, "i": 3, "u": 3, "f": 1.5}[arg.dtype.kind]
    if arg.kind == "npscalar":
        return arg.dtype.type(1)
    return np.ones(arg.shape, arg.dtype)


def _draw_shape(ch: Chooser, full: tuple[int, ...]) -> tuple[int, ...]:
    n = ch.int(0, len(full)) if ch.coin(0.4) else len(full)
    suffix = full[len(full) - n:]
    return tuple(1 if ch.coin(0.25) else d for d in suffix)


def _draw_args(ch: Chooser) -> tuple[Arg, ...]:
    rank = ch.choice((0, 1, 1, 2, 2, 2, 3, 3))
    # mostly tiny; sometimes one long axis, for vector loads, padding lanes and split reductions
    dims = tuple((0 if ch.coin(0.04) else ch.choice(LONG_AXES) if ch.coin(0.08)
                  else ch.choice((1, 2, 3, 4, 5))) for _ in range(rank))
    args = []
    for i in range(ch.int(1, 4)):
        r = ch.int(0, 99)
        dtype = ch.choice(DTYPES)
        if r < 10 and i > 0:
            args.append(Arg(f"a{i}", "pyscalar", dtype, (), "scalar"))
        elif r < 15:
            args.append(Arg(f"a{i}", "npscalar", dtype, (), "scalar"))
        else:
            shape = _draw_shape(ch, dims)
            layouts = [lay for lay in ARRAY_LAYOUTS
                       if not (lay == "device-T" and len(shape) < 2)
                       and not (lay in _VIEW_LAYOUTS and not shape)]
            args.append(Arg(f"a{i}", "array", dtype, shape, ch.choice(layouts)))
    return tuple(args)


def _pick(ch: Chooser, values: list[_Value]) -> _Value:
    if ch.coin(0.6):
        return values[len(values) - 1 - ch.int(0, min(2, len(values) - 1))]
    return ch.choice(values)


def _try(code: str, env: dict[str, Any]) -> tuple[Any, BaseException | None]:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return eval(code, {"np": np}, env), None
        except Exception as exc:  # noqa: BLE001  (NumPy rejected it: the caller decides)
            return None, exc


def _render(ch: Chooser, d: OpDef, values: list[_Value], shape: tuple[int, ...],
            scalar_augment: bool = False) -> tuple[str, tuple[str, ...], dict[str, Any]] | None:
    """Source of one step of op ``d`` (code, operand names, detail), or None to redraw."""
    if d.kind == "repeat":
        done = [v for v in values if v.code]
        if not done:
            return None
        v = ch.choice(done)
        return v.code, tuple(n for n in _names_in(v.code, values)), {"repeat": v.name}
    if d.kind == "cast":
        x = _pick(ch, [v for v in values if v.pykind != "pyscalar"] or values)
        if x.pykind == "pyscalar":
            return None
        dtype = ch.choice(DTYPES)
        return f"{x.name}.astype(np.{dtype.name})", (x.name,), {"dtype": dtype.name}
    if d.kind == "reduce":
        x = _pick(ch, values)
        if x.pykind == "pyscalar":
            return None
        fn = ch.choice(REDUCTIONS)
        nd = x.ndim
        axis: Any = None
        if nd and ch.coin(0.75):
            axis = ch.int(-nd, nd - 1)
            if nd >= 2 and fn not in ("argmax", "argmin") and ch.coin(0.3):
                other = (axis + ch.int(1, nd - 1)) % nd
                axis = (axis % nd, other)
        keep = ch.coin(0.4)
        kw = (f", axis={axis}" if axis is not None or ch.coin(0.2) else "") + (
            ", keepdims=True" if keep else "")
        code = (f"{x.name}.{fn}({kw[2:]})" if ch.coin(0.4) else f"np.{fn}({x.name}{kw})")
        return code, (x.name,), {"reduce": fn, "axis": axis, "keepdims": keep}
    if d.kind == "inplace":
        return _render_inplace(ch, values, scalar_augment)
    if d.kind == "move":
        x = _pick(ch, values)
        if x.pykind == "pyscalar":
            return None
        template = ch.choice(MOVES)
        return template.format(x.name, shape=tuple(shape)), (x.name,), {}
    # elementwise: operands, one of them possibly a literal
    picks = [_pick(ch, values) for _ in range(d.arity)]
    wanted = [v for v in values if _kind(v) in d.kinds]
    if wanted and ch.coin(0.7):
        picks = [_pick(ch, wanted) if _kind(p) not in d.kinds else p for p in picks]
    texts = [p.name for p in picks]
    lit = d.literal_ok and d.arity >= 2 and ch.coin(0.25)
    if lit:
        k = ch.int(0, d.arity - 1)
        if d.key == "pow" and k == 1:
            v = ch.choice(_POW_EXPONENTS)
            texts[k] = f"({v})" if v < 0 else repr(v)
        else:
            texts[k] = _literal(ch, None)
        picks[k] = None  # type: ignore[call-overload]
    real = [p for p in picks if p is not None]
    if not real or all(p.pykind == "pyscalar" for p in real):
        return None  # Python arithmetic on Python scalars is not NumPy's; not fuzzed
    spelling = ch.choice(d.spellings)
    if d.key == "pow" and picks[1] is not None and _kind(picks[1]) in "biu":
        texts[1] = f"({texts[1]} & 3)"  # negative integer powers raise in NumPy (data-dependent)
    code = spelling.format(*texts)
    return code, tuple(dict.fromkeys(p.name for p in real)), {"args": tuple(texts)}


# augmented assignment: operator -> the ufunc NumPy runs with out= the target
AUGMENTED = {"+": "add", "-": "subtract", "*": "multiply", "/": "true_divide",
             "//": "floor_divide", "%": "remainder", "&": "bitwise_and", "|": "bitwise_or",
             "^": "bitwise_xor", "<<": "left_shift", ">>": "right_shift"}
OUT_UFUNCS = ("add", "subtract", "multiply", "true_divide", "maximum", "minimum", "fmax",
              "bitwise_or", "floor_divide", "copysign", "logical_and")
# write targets: the whole value, views of it (reversed, strided, offset), single elements
REGIONS_1D = ("", "[...]", "[:]", "[::-1]", "[1:]", "[:-1]", "[::2]", "[1::2]", "[::-2]",
              "[0]", "[-1]", "[1:-1:3]")
REGIONS_2D = ("[:, ::2]", "[::-1, 1:]", "[..., ::-1]", "[1:, :-1]", "[:, 0]", "[0]",
              "[::-1, ::-1]", "[:, 1::2]")


def _operand_text(ch: Chooser, values: list[_Value]) -> tuple[str, str | None]:
    """An operand of an in-place write: a value (name) or a literal."""
    if ch.coin(0.25):
        return _literal(ch, None), None
    v = _pick(ch, values)
    return v.name, v.name


def _render_inplace(ch: Chooser, values: list[_Value], scalar_augment: bool
                    ) -> tuple[str, tuple[str, ...], dict[str, Any]] | None:
    """``t[region] op= y``, ``np.ufunc(t[region], y, out=t[region])``,
    ``np.ufunc(y, z, out=t[region])`` or ``t[region] = y`` on a value that may be written."""
    targets = [v for v in values if v.target]
    if not targets:
        return None
    args = [v for v in targets if v.name.startswith("a")]
    t = ch.choice(args) if args and ch.coin(0.5) else _pick(ch, targets) if ch.coin(0.5) \
        else ch.choice(targets)
    nd = t.ndim
    if isinstance(t.placeholder, np.ndarray):
        regions = ("", "[...]") if nd == 0 else REGIONS_1D + (REGIONS_2D if nd >= 2 else ())
        region = ch.choice(regions)
        form = ch.choice(("aug", "aug", "out", "out2", "set", "set"))
    else:  # a NumPy scalar: only rebinding augmented assignment exists
        region, form = "", "aug"
    if form == "set" and not region:
        region = "[...]"  # (`t = y` would only rebind the name)
    if nd == 1 and region in ("[0]", "[-1]") and (form in ("out", "out2") or (
            form == "aug" and not scalar_augment)):
        # NumPy's x[0] is a scalar there: refused as out= (TypeError), and `x[0] += y` is
        # `x[0] = x[0] + y` (promoted, then cast unsafely); fusejit's 0-d proxies cannot tell
        # a scalar from a 0-d view yet (NumPy scalars: issue 9 class 4)
        region = "[...]"
    dest = t.name + region
    y, yname = _operand_text(ch, values)
    names = [t.name] + ([yname] if yname else [])
    if form == "aug":
        op = ch.choice(tuple(AUGMENTED))
        code, ufunc, rhs = f"{dest} {op}= {y}", AUGMENTED[op], (y,)
    elif form == "out":
        ufunc = ch.choice(OUT_UFUNCS)
        code, rhs = f"np.{ufunc}({dest}, {y}, out={dest})", (y,)
    elif form == "out2":
        ufunc = ch.choice(OUT_UFUNCS)
        z, zname = _operand_text(ch, values)
        names += [zname] if zname else []
        code, rhs = f"np.{ufunc}({y}, {z}, out={dest})", (y, z)
    else:
        code, ufunc, rhs = f"{dest} = {y}", None, (y,)
    return code, tuple(dict.fromkeys(names)), {"target": t.name, "region": region,
                                               "form": form, "ufunc": ufunc, "rhs": rhs}


def _try_inplace(code: str, target: str, env: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """Run an in-place statement on a copy of its target; the target's new value."""
    scope = dict(env)
    if isinstance(scope[target], np.ndarray):
        scope[target] = scope[target].copy()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec(code, {"np": np}, scope)  # noqa: S102  (our own generated statement)
            return scope[target], None
        except Exception as exc:  # noqa: BLE001  (NumPy rejected it: the caller decides)
            return None, exc


def _writable(value: Any, scalar_augment: bool) -> bool:
    if isinstance(value, np.ndarray):
        return value.base is None and value.flags.writeable
    return scalar_augment and isinstance(value, np.generic)


def _kind(v: _Value | None) -> str:
    if v is None:
        return "?"
    if v.pykind == "pyscalar":
        return {bool: "b", int: "i", float: "f"}[type(v.placeholder)]
    return np.asarray(v.placeholder).dtype.kind


def _names_in(code: str, values: list[_Value]) -> list[str]:
    import re

    found = set(re.findall(r"\b([av]\d+)\b", code))
    return [v.name for v in values if v.name in found]


def generate(ch: Chooser, max_steps: int = 10, scalar_augment: bool | None = None) -> Program:
    """Draw one program (see the module docstring). In-place steps write arguments (in any
    layout) and intermediate arrays; values that view memory a write changed are not read
    afterwards (NumPy would show them updated: fusejit does too, but the oracle is per value).
    """
    scalar_augment = SCALAR_AUGMENT if scalar_augment is None else scalar_augment
    args = _draw_args(ch)
    values = [_Value(a.name, _placeholder(a), a.kind, target=(
        a.kind == "array" and a.layout != "numpy-broadcast")  # (read-only, as in NumPy)
        or (a.kind == "npscalar" and scalar_augment)) for a in args]
    stale: set[str] = set()
    shape = max((a.shape for a in args), key=len)
    steps: list[Step] = []
    raises = None
    by_key = {d.key: d for d in OPDEFS}
    for i in range(ch.int(1, max_steps)):
        for _ in range(12):
            d = OPDEFS[_weighted(ch)]
            made = _render(ch, d, values, shape, scalar_augment)
            if made is None:
                continue
            code, operands, detail = made
            env = {v.name: v.placeholder for v in values}
            if d.kind == "inplace":
                result, exc = _try_inplace(code, detail["target"], env)
            else:
                result, exc = _try(code, env)
            if exc is not None:
                if ch.coin(0.04):  # keep: NumPy raises here, fusejit must raise alike
                    name = detail["target"] if d.kind == "inplace" else f"v{i}"
                    steps.append(Step(name, d.key, operands, code, d.kind, d.fj_op,
                                      tuple(detail.items())))
                    raises = type(exc).__name__
                    break
                continue
            if not isinstance(result, (np.ndarray, np.generic)) or np.size(result) > MAX_ELEMENTS:
                continue
            if isinstance(result, np.ndarray) and result.dtype.kind not in "biuf":
                continue
            if "repeat" in detail:
                rep = next(s for s in steps if s.name == detail["repeat"])
                d = by_key[rep.op]
                detail = dict(rep.detail)
            if d.kind == "inplace":
                name = detail["target"]
                old = next(v for v in values if v.name == name)
                steps.append(Step(name, d.key, operands, code, d.kind, None,
                                  tuple(detail.items())))
                gone = {v.name for v in values if v is not old and isinstance(
                    old.placeholder, np.ndarray) and isinstance(v.placeholder, np.ndarray)
                    and np.shares_memory(v.placeholder, old.placeholder)}
                stale |= gone
                values = [_Value(name, result, "array" if isinstance(result, np.ndarray) else
                                 "npscalar", "", _writable(result, scalar_augment) or old.target)
                          if v is old else v for v in values if v.name not in gone]
                break
            steps.append(Step(f"v{i}", d.key, operands, code, d.kind, d.fj_op,
                              tuple(detail.items())))
            values.append(_Value(f"v{i}", result, "array" if isinstance(result, np.ndarray)
                                 else "npscalar", code, _writable(result, scalar_augment)))
            break
        if raises:
            break
    if not steps:  # every draw was rejected: a trivial but valid program
        a = args[0].name
        steps.append(Step("v0", "add", (a,), f"np.add({a}, 1)", "map"))
    if raises:
        return Program(args, tuple(steps), (steps[-1].name,), True, raises)
    produced = list(dict.fromkeys(s.name for s in steps if s.name not in stale))
    if not produced:  # every value was a view a later write changed
        produced = [steps[-1].name]
    outs = [produced[-1]]
    for _ in range(ch.int(0, 3)):
        outs.append(ch.choice(produced + [a.name for a in args if a.kind == "array"]
                              if ch.coin(0.1) else produced))
    single = len(outs) == 1 and ch.coin(0.5)
    return Program(args, tuple(steps), tuple(outs), single)


def _weighted(ch: Chooser) -> int:
    total = sum(_WEIGHTS)
    x = ch.int(0, 9999) / 10000 * total
    for i, w in enumerate(_WEIGHTS):
        x -= w
        if x < 0:
            return i
    return len(_WEIGHTS) - 1


@st.composite
def programs(draw: Callable[[st.SearchStrategy[Any]], Any]) -> Program:
    """Hypothesis strategy over programs."""
    return generate(HypothesisChooser(draw))
