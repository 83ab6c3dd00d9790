"""The one op table: every operation fusejit knows, with its NumPy reference and flags.

Each ``Op`` has an ``OpInfo`` row in ``OPS``. The same row drives tracing (which NumPy callable
maps to which op), dtype resolution, constant folding and the reference interpreter, so the
semantics of an op live in one place. Op groups (``ELEMENTWISE``, ``REDUCE``, ...) are sets built
from the table; nothing outside this module switches on individual ops with ``if`` chains.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusejit.ir.philox import mulhi as _mulhi_ref
from fusejit.ir.philox import philox as _philox_ref

_clip_ufunc: np.ufunc = np._core.umath.clip  # the ufunc behind np.clip (NumPy >= 1.17)


class Op(enum.Enum):
    # leaves
    INPUT = enum.auto()  # an array argument (arg = parameter index)
    SCALAR = enum.auto()  # a scalar argument passed to the kernel (arg = (parameter index,))
    CONST = enum.auto()  # a literal (arg = Literal)
    IOTA = enum.auto()  # start + step * i along axis (np.arange, index grids)
    # movement: change how an operand is indexed, never the values
    VIEW = enum.auto()  # affine index map: broadcast, transpose, slice, squeeze, newaxis
    RESHAPE = enum.auto()  # row-major reshape
    # elementwise
    CAST = enum.auto()
    WHERE = enum.auto()
    ADD = enum.auto()
    SUB = enum.auto()
    MUL = enum.auto()
    TRUEDIV = enum.auto()
    FLOORDIV = enum.auto()
    MOD = enum.auto()
    FMOD = enum.auto()
    POW = enum.auto()
    NEG = enum.auto()
    POS = enum.auto()
    ABS = enum.auto()
    SIGN = enum.auto()
    SQUARE = enum.auto()
    RECIPROCAL = enum.auto()
    EXP = enum.auto()
    EXP2 = enum.auto()
    EXPM1 = enum.auto()
    LOG = enum.auto()
    LOG2 = enum.auto()
    LOG10 = enum.auto()
    LOG1P = enum.auto()
    SQRT = enum.auto()
    CBRT = enum.auto()
    SIN = enum.auto()
    COS = enum.auto()
    TAN = enum.auto()
    ARCSIN = enum.auto()
    ARCCOS = enum.auto()
    ARCTAN = enum.auto()
    SINH = enum.auto()
    COSH = enum.auto()
    TANH = enum.auto()
    ARCSINH = enum.auto()
    ARCCOSH = enum.auto()
    ARCTANH = enum.auto()
    DEG2RAD = enum.auto()
    RAD2DEG = enum.auto()
    FLOOR = enum.auto()
    CEIL = enum.auto()
    TRUNC = enum.auto()
    RINT = enum.auto()
    ISNAN = enum.auto()
    ISINF = enum.auto()
    ISFINITE = enum.auto()
    SIGNBIT = enum.auto()
    ARCTAN2 = enum.auto()
    HYPOT = enum.auto()
    MAXIMUM = enum.auto()
    MINIMUM = enum.auto()
    FMAX = enum.auto()
    FMIN = enum.auto()
    COPYSIGN = enum.auto()
    NEXTAFTER = enum.auto()
    LDEXP = enum.auto()
    LOGADDEXP = enum.auto()
    LOGADDEXP2 = enum.auto()
    HEAVISIDE = enum.auto()
    GCD = enum.auto()
    LCM = enum.auto()
    EQ = enum.auto()
    NE = enum.auto()
    LT = enum.auto()
    LE = enum.auto()
    GT = enum.auto()
    GE = enum.auto()
    LOGICAL_AND = enum.auto()
    LOGICAL_OR = enum.auto()
    LOGICAL_XOR = enum.auto()
    LOGICAL_NOT = enum.auto()
    BITWISE_AND = enum.auto()
    BITWISE_OR = enum.auto()
    BITWISE_XOR = enum.auto()
    INVERT = enum.auto()
    LSHIFT = enum.auto()
    RSHIFT = enum.auto()
    # random numbers (fusejit.random): counter-based, so a pure function of the operands
    MULHI = enum.auto()  # high half of the unsigned product, (a * b) >> bits (OpenCL mul_hi)
    PHILOX = enum.auto()  # (k0, k1, c0, c1, c2, c3, w): word w % 4 of Philox4x64-10(ctr, key)
    # reductions (arg = reduced axes, sorted; the result keeps those axes with length 1)
    SUM = enum.auto()
    PROD = enum.auto()
    MAX = enum.auto()
    MIN = enum.auto()
    ARGMAX = enum.auto()
    ARGMIN = enum.auto()
    ANY = enum.auto()
    ALL = enum.auto()
    BIT_OR = enum.auto()  # np.bitwise_or.reduce (and bools); identity 0
    BIT_AND = enum.auto()  # np.bitwise_and.reduce; identity all ones of the dtype
    BIT_XOR = enum.auto()  # np.bitwise_xor.reduce, np.logical_xor.reduce of bools; identity 0
    # write values into a region of an array: srcs (base, values), arg = the region's index map
    SETITEM = enum.auto()
    # read operand 0 at an index computed on the device: srcs (x, index), arg = axis; out[j] =
    # x[j with j[axis] replaced by clip(index[j], 0, x.shape[axis] - 1)] (np.take_along_axis;
    # the clip keeps every read in bounds, NumPy's index modes are traced before it)
    GATHER = enum.auto()
    # complex numbers: the parts (np.real / np.imag of a complex operand: its real dtype) and
    # the conjugate (any dtype: the identity on reals, as np.conjugate)
    REAL = enum.auto()
    IMAG = enum.auto()
    CONJ = enum.auto()
    COMPLEX = enum.auto()  # (re, im) of one float dtype -> the complex value with those parts
    # matrix product over the last two axes: srcs (a[..., M, K], b[..., K, N]) with equal batch
    # dims (broadcast by views), result [..., M, N]; integers wrap, float16 accumulates in float32
    MATMUL = enum.auto()
    # inclusive scan along one axis (np.cumsum, ufunc.accumulate): srcs (x,), arg = (combine
    # op, axis); out[..., i, ...] = x[..., 0, ...] op ... op x[..., i, ...] in the node's dtype
    SCAN = enum.auto()
    # singular values of the last two axes: srcs (x[..., m, n],), result [..., min(m, n)],
    # descending (np.linalg.svd(x, compute_uv=False)); computed by a Jacobi kernel per matrix
    SVDVALS = enum.auto()


@dataclass(frozen=True)
class OpInfo:
    """One row of the op table.

    ufunc: the NumPy ufunc whose loop resolution (NEP 50) and values define the op.
    ref: reference implementation over NumPy arrays (defaults to the ufunc).
    flags: names from FLAGS below.
    ulp: documented accuracy bound of the generated code, in units in the last place, per float
        width (None = exact / correctly rounded). Used by tests, validate mode and explain().
    culp: the bound on complex operands, per width of the real part: a normwise error in ULPs
        of the result's larger part (None = the naive formulas of NumPy's loops, exact but
        for their own roundings). See fusejit.testing.complex_ulp_distance.
    """

    name: str
    arity: int
    ufunc: np.ufunc | None = None
    ref: Callable[..., Any] | None = None
    flags: frozenset[str] = field(default_factory=frozenset)
    ulp: dict[int, float] | None = None
    culp: dict[int, float] | None = None

    def reference(self) -> Callable[..., Any]:
        assert self.ref is not None or self.ufunc is not None, self.name
        return self.ref if self.ref is not None else self.ufunc


FLAGS = {
    "commutative",  # a op b == b op a (lets CSE canonicalise operand order)
    "transcendental",  # not correctly rounded on the device; priced higher by the cost model
    "predicate",  # returns bool
}

# ULP bounds of OpenCL's full-profile built-ins (OpenCL C spec, table "ULP values for single
# and double precision built-in math functions"), widened by NumPy's own error (its SIMD libm is
# within ~1-4 ULP). Keyed by bit width: float16 results are rounded from float32, so an error of
# a few float32 ULP is at most 1 float16 ULP.
_T = {16: 1.0, 32: 8.0, 64: 8.0}
_T_POW = {16: 1.0, 32: 20.0, 64: 20.0}
_T_WIDE = {16: 2.0, 32: 16.0, 64: 16.0}
# complex: OpenCL's hypot (4 ULP in the spec; PoCL's is within 1) against NumPy's npy_hypot
_C_HYPOT = {32: 2.0, 64: 2.0}
# complex functions (fusejit/targets/opencl/complex.py) against the C library's that NumPy calls:
# a few ULP of the real built-ins each, normwise; pow through exp(b * log(a)) amplifies the error
# of log by |b * log(a)| (integer exponents below 100 are products, within _C_T)
_C_T = {32: 8.0, 64: 8.0}
_C_POW = {32: 32.0, 64: 32.0}


def _row(op: Op, ufunc: np.ufunc | None, arity: int | None = None, *flags: str, ulp=None,
         ref=None, culp=None) -> tuple[Op, OpInfo]:
    n = arity if arity is not None else (ufunc.nin if ufunc is not None else 1)
    assert set(flags) <= FLAGS, flags
    return op, OpInfo(op.name.lower(), n, ufunc, ref, frozenset(flags), ulp, culp)


def _complex_ref(re: Any, im: Any) -> Any:
    """Parts set one by one (``re + 1j * im`` would make inf * 0 a NaN and lose -0.0)."""
    re, im = np.broadcast_arrays(re, im)
    out = np.empty(re.shape, np.result_type(re.dtype, 0j))
    out.real, out.imag = re, im
    return out


def _gather_ref(x: Any, i: Any, arg: tuple[int, bool]) -> Any:
    """GATHER's meaning: ``x`` along ``axis`` at ``i`` clamped into the axis; a checked
    gather raises NumPy's IndexError for an index outside it instead (as the kernel's status
    flag makes the call raise)."""
    axis, checked = arg
    n = x.shape[axis]
    if checked and np.size(i) and (np.min(i) < 0 or np.max(i) >= n):
        bad = np.asarray(i)[(np.asarray(i) < 0) | (np.asarray(i) >= n)].reshape(-1)[0]
        raise IndexError(f"index {int(bad)} is out of bounds for axis with size {n}")
    return np.take_along_axis(x, np.clip(i, 0, n - 1), axis)


def _iota_ref(*_: Any) -> Any:  # evaluated structurally by reference.eval_graph
    raise AssertionError("IOTA is evaluated by eval_graph from its arg")


OPS: dict[Op, OpInfo] = dict([
    _row(Op.INPUT, None, 0), _row(Op.SCALAR, None, 0), _row(Op.CONST, None, 0),
    _row(Op.IOTA, None, 0, ref=_iota_ref),
    _row(Op.VIEW, None, 1), _row(Op.RESHAPE, None, 1),
    _row(Op.CAST, None, 1), _row(Op.WHERE, None, 3, ref=np.where),
    _row(Op.ADD, np.add, None, "commutative"),
    _row(Op.SUB, np.subtract),
    _row(Op.MUL, np.multiply, None, "commutative"),
    _row(Op.TRUEDIV, np.true_divide),
    _row(Op.FLOORDIV, np.floor_divide),
    _row(Op.MOD, np.remainder),
    _row(Op.FMOD, np.fmod),
    _row(Op.POW, np.power, None, "transcendental", ulp=_T_POW, culp=_C_POW),
    _row(Op.NEG, np.negative), _row(Op.POS, np.positive),
    _row(Op.ABS, np.absolute, culp=_C_HYPOT),
    _row(Op.SIGN, np.sign, culp=_C_HYPOT), _row(Op.SQUARE, np.square),
    _row(Op.RECIPROCAL, np.reciprocal),
    _row(Op.EXP, np.exp, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.EXP2, np.exp2, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.EXPM1, np.expm1, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.LOG, np.log, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.LOG2, np.log2, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.LOG10, np.log10, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.LOG1P, np.log1p, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.SQRT, np.sqrt, culp={32: 2.0, 64: 2.0}),
    _row(Op.CBRT, np.cbrt, None, "transcendental", ulp=_T),
    _row(Op.SIN, np.sin, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.COS, np.cos, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.TAN, np.tan, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.ARCSIN, np.arcsin, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.ARCCOS, np.arccos, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.ARCTAN, np.arctan, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.SINH, np.sinh, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.COSH, np.cosh, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.TANH, np.tanh, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.ARCSINH, np.arcsinh, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.ARCCOSH, np.arccosh, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.ARCTANH, np.arctanh, None, "transcendental", ulp=_T, culp=_C_T),
    _row(Op.DEG2RAD, np.deg2rad), _row(Op.RAD2DEG, np.rad2deg),
    _row(Op.FLOOR, np.floor), _row(Op.CEIL, np.ceil), _row(Op.TRUNC, np.trunc),
    _row(Op.RINT, np.rint),
    _row(Op.ISNAN, np.isnan, None, "predicate"), _row(Op.ISINF, np.isinf, None, "predicate"),
    _row(Op.ISFINITE, np.isfinite, None, "predicate"),
    _row(Op.SIGNBIT, np.signbit, None, "predicate"),
    _row(Op.ARCTAN2, np.arctan2, None, "transcendental", ulp=_T),
    _row(Op.HYPOT, np.hypot, None, "commutative", "transcendental", ulp=_T),
    # not "commutative": on equal operands (-0.0 and 0.0) NumPy returns a particular one
    _row(Op.MAXIMUM, np.maximum), _row(Op.MINIMUM, np.minimum),
    _row(Op.FMAX, np.fmax), _row(Op.FMIN, np.fmin),
    _row(Op.COPYSIGN, np.copysign), _row(Op.NEXTAFTER, np.nextafter),
    _row(Op.LDEXP, np.ldexp),
    _row(Op.LOGADDEXP, np.logaddexp, None, "commutative", "transcendental", ulp=_T_WIDE),
    _row(Op.LOGADDEXP2, np.logaddexp2, None, "commutative", "transcendental", ulp=_T_WIDE),
    _row(Op.HEAVISIDE, np.heaviside),
    _row(Op.GCD, np.gcd, None, "commutative"), _row(Op.LCM, np.lcm, None, "commutative"),
    _row(Op.EQ, np.equal, None, "commutative", "predicate"),
    _row(Op.NE, np.not_equal, None, "commutative", "predicate"),
    _row(Op.LT, np.less, None, "predicate"), _row(Op.LE, np.less_equal, None, "predicate"),
    _row(Op.GT, np.greater, None, "predicate"), _row(Op.GE, np.greater_equal, None, "predicate"),
    _row(Op.LOGICAL_AND, np.logical_and, None, "commutative", "predicate"),
    _row(Op.LOGICAL_OR, np.logical_or, None, "commutative", "predicate"),
    _row(Op.LOGICAL_XOR, np.logical_xor, None, "commutative", "predicate"),
    _row(Op.LOGICAL_NOT, np.logical_not, None, "predicate"),
    _row(Op.BITWISE_AND, np.bitwise_and, None, "commutative"),
    _row(Op.BITWISE_OR, np.bitwise_or, None, "commutative"),
    _row(Op.BITWISE_XOR, np.bitwise_xor, None, "commutative"),
    _row(Op.INVERT, np.invert),
    _row(Op.LSHIFT, np.left_shift), _row(Op.RSHIFT, np.right_shift),
    _row(Op.MULHI, None, 2, "commutative", ref=_mulhi_ref),
    _row(Op.PHILOX, None, 7, ref=_philox_ref),
    _row(Op.SUM, np.add, 1, ref=np.sum), _row(Op.PROD, np.multiply, 1, ref=np.prod),
    _row(Op.MAX, np.maximum, 1, ref=np.max), _row(Op.MIN, np.minimum, 1, ref=np.min),
    _row(Op.ARGMAX, None, 1, ref=np.argmax), _row(Op.ARGMIN, None, 1, ref=np.argmin),
    _row(Op.ANY, np.logical_or, 1, ref=np.any), _row(Op.ALL, np.logical_and, 1, ref=np.all),
    _row(Op.BIT_OR, np.bitwise_or, 1, ref=np.bitwise_or.reduce),
    _row(Op.BIT_AND, np.bitwise_and, 1, ref=np.bitwise_and.reduce),
    _row(Op.BIT_XOR, np.bitwise_xor, 1, ref=np.bitwise_xor.reduce),
    _row(Op.SETITEM, None, 2),
    _row(Op.GATHER, None, 2, ref=_gather_ref),
    _row(Op.MATMUL, np.matmul, 2, ref=np.matmul),
    _row(Op.REAL, None, 1, ref=np.real), _row(Op.IMAG, None, 1, ref=np.imag),
    _row(Op.CONJ, np.conjugate), _row(Op.COMPLEX, None, 2, ref=_complex_ref),
    _row(Op.SCAN, None, 1, ref=lambda x, arg: OPS[arg[0]].ufunc.accumulate(
        x, axis=arg[1], dtype=x.dtype)),
    _row(Op.SVDVALS, None, 1, ref=lambda x: np.linalg.svd(x, compute_uv=False)),
])
assert set(OPS) == set(Op), set(Op) - set(OPS)

LEAVES = frozenset({Op.INPUT, Op.SCALAR, Op.CONST, Op.IOTA})
MOVEMENT = frozenset({Op.VIEW, Op.RESHAPE})
REDUCE = frozenset({Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.ARGMAX, Op.ARGMIN, Op.ANY, Op.ALL,
                    Op.BIT_OR, Op.BIT_AND, Op.BIT_XOR})
CONTRACT = frozenset({Op.MATMUL})  # computed by a GEMM kernel (fusejit/passes/gemm.py)
ELEMENTWISE = frozenset(set(Op) - LEAVES - MOVEMENT - REDUCE - CONTRACT
                        - {Op.SETITEM, Op.GATHER, Op.SCAN, Op.SVDVALS})
UFUNC_OPS = frozenset(op for op in ELEMENTWISE if OPS[op].ufunc is not None)
COMMUTATIVE = frozenset(op for op, info in OPS.items() if "commutative" in info.flags)
TRANSCENDENTAL = frozenset(op for op, info in OPS.items() if "transcendental" in info.flags)
# Ops whose value at an index depends only on the operands' values at that index.
POINTWISE = ELEMENTWISE | {Op.SETITEM}

# ufunc -> op, for tracing. Reductions map separately (ufunc.reduce).
OP_OF_UFUNC: dict[np.ufunc, Op] = {OPS[op].ufunc: op for op in UFUNC_OPS}
OP_OF_UFUNC[np.divide] = Op.TRUEDIV
OP_OF_UFUNC[np.abs] = Op.ABS
OP_OF_UFUNC[np.fabs] = Op.ABS  # fabs only has float loops; resolve_dtypes casts ints to float
OP_OF_UFUNC[np.radians] = Op.DEG2RAD  # separate ufunc objects with deg2rad's loops and values
OP_OF_UFUNC[np.degrees] = Op.RAD2DEG
REDUCE_OF_UFUNC: dict[np.ufunc, Op] = {
    np.add: Op.SUM, np.multiply: Op.PROD, np.maximum: Op.MAX, np.minimum: Op.MIN,
    np.logical_or: Op.ANY, np.logical_and: Op.ALL,
    np.bitwise_or: Op.BIT_OR, np.bitwise_and: Op.BIT_AND, np.bitwise_xor: Op.BIT_XOR,
    np.logical_xor: Op.BIT_XOR,  # (of its operand cast to bool: the result dtype)
}

# The elementwise op that merges two partial results of each reduction op (codegen/reduce.py
# merges lanes, work-groups and partial kernels' results with it, in any grouping)
REDUCE_COMBINE: dict[Op, Op] = {
    Op.SUM: Op.ADD, Op.PROD: Op.MUL, Op.MAX: Op.MAXIMUM, Op.MIN: Op.MINIMUM,
    Op.ANY: Op.BITWISE_OR, Op.ALL: Op.BITWISE_AND, Op.BIT_OR: Op.BITWISE_OR,
    Op.BIT_AND: Op.BITWISE_AND, Op.BIT_XOR: Op.BITWISE_XOR,
}

# Combine ops a SCAN may use: associative, so a work-group may scan in a tree (fusejit/
# codegen/scan.py); their identities start each scan (NumPy's ufunc.identity, and the lowest /
# highest value for maximum / minimum, filled in by the kernel's dtype).
SCAN_COMBINE: dict[Op, object] = {
    Op.ADD: 0, Op.MUL: 1, Op.MAXIMUM: "lowest", Op.MINIMUM: "highest", Op.FMAX: "nan",
    Op.FMIN: "nan", Op.LOGICAL_AND: True, Op.LOGICAL_OR: False, Op.LOGICAL_XOR: False,
    Op.BITWISE_AND: -1, Op.BITWISE_OR: 0, Op.BITWISE_XOR: 0,
}

CLIP_UFUNC = _clip_ufunc

# Ops fusejit computes on complex operands (the Target spells them; fusejit/targets/
# opencl_complex.py). An op NumPy defines on complex that is missing here raises
# UnsupportedDTypeError when traced (today every complex loop of the ufuncs fusejit traces is
# here); the rest NumPy itself refuses (floor, arctan2, ...).
COMPLEX_OPS = frozenset({
    Op.CAST, Op.WHERE, Op.ADD, Op.SUB, Op.MUL, Op.TRUEDIV, Op.NEG, Op.POS, Op.CONJ, Op.ABS,
    Op.SQUARE, Op.RECIPROCAL, Op.SIGN, Op.REAL, Op.IMAG, Op.ISNAN, Op.ISINF, Op.ISFINITE,
    Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.MAXIMUM, Op.MINIMUM, Op.FMAX, Op.FMIN,
    Op.LOGICAL_AND, Op.LOGICAL_OR, Op.LOGICAL_XOR, Op.LOGICAL_NOT,
    Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.ANY, Op.ALL,
    Op.BIT_XOR,  # (np.logical_xor.reduce: of its operand cast to bool, as ANY and ALL)
    Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.LOG10, Op.SQRT, Op.POW, Op.SIN, Op.COS, Op.TAN,
    Op.SINH, Op.COSH, Op.TANH, Op.ARCSIN, Op.ARCCOS, Op.ARCTAN, Op.ARCSINH, Op.ARCCOSH,
    Op.ARCTANH, Op.EXPM1, Op.LOG1P, Op.RINT, Op.COMPLEX,
})

# Cost model weights (relative to one add): used by the partitioner when it has to decide
# between recomputing a value in several kernels and materialising it once.
COST = {op: (20 if op in TRANSCENDENTAL else 1) for op in ELEMENTWISE}
COST[Op.PHILOX] = 100  # ten rounds of two 64-bit multiply-highs: recomputing it is dear
# Ops whose work neighbouring elements share (one Philox block serves 4-8 of them, computed
# once for the vector lanes that fall in it): their kernels use 8 lanes whatever the dtypes.
SHARED_BY_LANES = frozenset({Op.PHILOX})
