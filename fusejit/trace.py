"""Tracing: run the user's numpy-style function once over symbolic ``TensorProxy`` values.

NumPy calls on proxies arrive through ``__array_ufunc__`` / ``__array_function__`` (and the Python
operators); each one appends hash-consed nodes to the graph. Dtypes follow NumPy exactly: every
ufunc asks NumPy which loop it would run (``ufunc.resolve_dtypes``) with Python scalars passed as
weak types (NEP 50), and explicit CAST nodes are inserted so each op sees its loop's dtypes.

A proxy is either a *root* (owns its value; parameters and op results) or a *view* of a root
(``x[1:]``, ``x.T``): a view reads through an affine map of its root's *current* value, and a
write into a view rewrites the root with a SETITEM node, which is how in-place NumPy code
(``x[1:] += y``) keeps NumPy's semantics.
"""

from __future__ import annotations

import contextvars
import functools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Self

import numpy as np

from . import dtypes as dt
from . import random_guard, shapes
from .errors import (
    BroadcastError,
    IntRangeError,
    ReadOnlyError,
    TracerBoolConversionError,
    TracerConversionError,
    UnsupportedAttributeError,
    UnsupportedDTypeError,
    UnsupportedOperationError,
)
from .ir import Graph, Node, Param, const, const_value
from .ops import CLIP_UFUNC, COMPLEX_OPS, OP_OF_UFUNC, Op

_current: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar("fusejit_tracer",
                                                                        default=None)


def current_tracer() -> Tracer | None:
    return _current.get()


def _is_tracing() -> bool:
    return _current.get() is not None


class Tracer:
    """State of one trace: the parameters seen so far and the arrays written in place."""

    def __init__(self) -> None:
        self.params: list[Param] = []
        self.param_proxies: dict[int, TensorProxy] = {}
        self.constants: dict[int, np.ndarray] = {}  # param index -> captured constant array
        self.values: list[Node] = []  # every value the function computed (explain: unused)
        # id -> (array, proxy): arrays read from outside the arguments, read fresh on each call
        self.captured: dict[int, tuple[Any, TensorProxy]] = {}

    def __enter__(self) -> Self:
        if _current.get() is not None:
            raise RuntimeError("nested traces are inlined, not started")  # pragma: no cover
        self._token = _current.set(self)
        random_guard.enter(_is_tracing)  # np.random raises while tracing (fusejit.random)
        return self

    def __exit__(self, *exc: object) -> None:
        random_guard.exit()
        _current.reset(self._token)

    # -- parameters -------------------------------------------------------------------------------
    def array_param(self, dtype: np.dtype, shape: tuple[int, ...], strides: tuple[int, ...],
                    name: str, source: int, writable: bool = True, has_offset: bool = False,
                    wide: bool = False) -> TensorProxy:
        index = len(self.params)
        self.params.append(Param("array", dtype, shape, name, source, strides, has_offset, wide))
        proxy = TensorProxy(Node.make(Op.INPUT, dtype, shape, (), index), readonly=not writable)
        proxy._param = index
        self.param_proxies[index] = proxy
        return proxy

    def scalar_param(self, value: Any, name: str, source: int) -> TensorProxy:
        """A dynamic scalar: weak if it is a Python scalar (its dtype is decided by each use)."""
        t = dt.scalar_type(value)
        index = len(self.params)
        self.params.append(Param("scalar", dt.default_dtype(t), (), name, source))
        if isinstance(t, np.dtype):
            proxy = TensorProxy(Node.make(Op.SCALAR, t, (), (), (index,)))
            proxy._pybool = type(value) is bool  # promotes as np.bool_, computes as Python's
            return proxy
        proxy = TensorProxy(None, weak=(index, t))
        proxy._int_range = dt.int_range(value) if t is int else None
        return proxy

    def constant_array(self, value: np.ndarray) -> Node:
        """A NumPy array used inside the function: a literal if uniform, else a captured buffer."""
        value = np.asarray(value)
        dtype = dt.check_supported(value.dtype, "array constant")
        value = value.astype(dtype, copy=False)
        if value.size == 0 or value.ndim == 0:
            return const(value.reshape(-1)[0] if value.size else 0, dtype, value.shape)
        flat = value.reshape(-1)
        if np.all(flat.view(np.uint8).reshape(flat.size, -1) == flat[:1].view(np.uint8)):
            return const(flat[0], dtype, value.shape)
        index = len(self.params)
        contiguous = np.ascontiguousarray(value)
        self.params.append(Param("const", dtype, value.shape, f"const{index}", -1,
                                 shapes.row_major_strides(value.shape)))
        self.constants[index] = contiguous
        return Node.make(Op.INPUT, dtype, value.shape, (), index)

    # -- result -----------------------------------------------------------------------------------
    def graph(self, outputs: Sequence[Node]) -> Graph:
        writes = []
        for index, proxy in self.param_proxies.items():
            if proxy._node is not Node.make(Op.INPUT, proxy.dtype, proxy.shape, (), index):
                writes.append((index, proxy._node))
        return Graph(tuple(self.params), tuple(outputs), tuple(writes))


# -- operands -------------------------------------------------------------------------------------

PyScalar = bool | int | float | complex


def _ptype(x: Any) -> np.dtype | type:
    """Promotion type of an operand: a dtype (strong) or a Python type (weak)."""
    if isinstance(x, TensorProxy):
        return x._weak[1] if x._weak is not None else x.dtype
    # NumPy scalars first: np.float64 subclasses float but is strong
    if isinstance(x, (np.ndarray, np.generic)):
        return dt.check_supported(x.dtype, "operand")
    if isinstance(x, (bool, int, float, complex)):
        return dt.scalar_type(x)
    raise TypeError(f"unsupported operand type for a fused function: {type(x).__name__}")


def _shape(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, (TensorProxy, np.ndarray)) else ()


def as_node(x: Any, dtype: np.dtype) -> Node:
    """The operand as a node of ``dtype`` (a CAST when a strong operand has another dtype)."""
    if isinstance(x, TensorProxy):
        if x._weak is not None:
            if x._node is not None:  # a weak value computed from weak operands: _operator
                return checked_cast(x._node, dtype)  # (a Python int: 1000 raises for int8)
            return Node.make(Op.SCALAR, dtype, (), (), (x._weak[0],))
        return cast(x.node, dtype)
    if isinstance(x, np.ndarray):
        tracer = current_tracer()
        assert tracer is not None
        if (seen := tracer.captured.get(id(x))) is not None and seen[0] is x:
            return as_node(seen[1], dtype)  # an implicit input (fusejit.captured)
        return cast(tracer.constant_array(x), dtype)
    if isinstance(x, np.generic):
        return cast(const(x, x.dtype), dtype)
    return const(dt.convert_scalar(x, dtype), dtype)


def as_array_node(x: Any, dtype: np.dtype) -> Node:
    """The operand as NumPy's array-converting functions (np.where, np.full_like) see it: a
    Python scalar first becomes an array of its default dtype (int64, float64), which is then
    cast unsafely, so ``np.where(c, int8_array, 300)`` wraps 300 to 44 as NumPy does."""
    t = _ptype(x)
    if t is int and isinstance(x, TensorProxy) and x._node is None and x._int_range == "uint64":
        return cast(as_node(x, dt.UINT64), dtype)  # (np.asarray(2**63) is a uint64 array)
    if not isinstance(t, np.dtype) and not (t is int and dtype.kind == "f"):
        return cast(as_node(x, dt.default_dtype(t)), dtype)
    return as_node(x, dtype)  # (an int for a float result converts directly: 2**64 fits)


MASKED = ("masked arrays (numpy.ma) are not supported by fusejit: their mask would be ignored. "
          "Pass np.ma.getdata(x) and the mask (np.ma.getmaskarray(x)) as arrays and combine "
          "them with np.where, or x.filled(value)")


def to_operand(x: Any) -> Any:
    """Normalise what NumPy would accept as an array (lists, tuples) into an ndarray."""
    if isinstance(x, (list, tuple)):
        return np.asarray(x)
    if dt.is_masked(x):
        raise TypeError(MASKED)
    tracer = _current.get()
    if tracer is not None and tracer.captured and (seen := tracer.captured.get(id(x))) \
            is not None and seen[0] is x:
        return seen[1]  # an array read from outside the arguments (fusejit.captured)
    return x


def cast(node: Node, dtype: np.dtype) -> Node:
    if node.dtype == dtype:
        return node
    if node.dtype.kind == "c" and dtype.kind not in "cb":
        # as NumPy's astype and setitem: the imaginary part is dropped, with NumPy's warning
        # (raised while tracing: once per specialisation, not on every call)
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=3)
    return Node.make(Op.CAST, dtype, node.shape, (node,))


def checked_cast(node: Node, dtype: np.dtype, side: int = dt.RAISE) -> Node:
    """A Python int computed from dynamic scalars (an int64 node) as ``dtype``: converted as
    NumPy converts a Python int operand, so a value out of ``dtype``'s range raises
    OverflowError on the host before the launch (or saturates on ``side``, see dtypes.RAISE),
    where a plain CAST would wrap it."""
    if node.dtype == dtype or node.dtype.kind not in "iu" or dtype.kind not in "iu":
        return cast(node, dtype)
    return Node.make(Op.CAST, dtype, node.shape, (node,), (side,))


# -- ufuncs ---------------------------------------------------------------------------------------

# generalized ufuncs traced elsewhere (np.matmul: fusejit/linalg.py), by ufunc
GUFUNCS: dict[np.ufunc, Callable[..., Any]] = {}

_UNSUPPORTED_KWARGS = ("where", "order", "subok", "signature", "axes", "axis", "keepdims")


def resolve(ufunc: np.ufunc, types: Sequence[Any], dtype: np.dtype | None = None,
            casting: str = "same_kind") -> tuple[np.dtype, ...]:
    """NumPy's loop for these operand types: input dtypes then output dtypes.

    With only Python scalars (``np.equal(n, 3)``, n a dynamic int), NumPy first makes each an
    array of its default dtype; resolve_dtypes with two weak ints would pick the object loop.
    """
    if not any(isinstance(t, np.dtype) for t in types):
        types = [dt.default_dtype(t) for t in types]
    if dtype is None:
        return ufunc.resolve_dtypes((*types, *[None] * ufunc.nout), casting=casting)
    # ``dtype=`` fixes the output as ``signature=`` does, which picks the loop of that dtype:
    # np.add(int8, int8, dtype=int16) adds in int16 (an output dtype alone keeps the int8 loop
    # and casts its wrapped result)
    return ufunc.resolve_dtypes((*types, *[None] * ufunc.nout), casting=casting,
                                signature=(*[None] * ufunc.nin, *[dtype] * ufunc.nout))


def apply_ufunc(ufunc: np.ufunc, inputs: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """Trace ``ufunc(*inputs, **kwargs)``; returns a proxy (a tuple for divmod)."""
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    dtype = kwargs.pop("dtype", None)
    casting = kwargs.pop("casting", "same_kind")
    for key in kwargs:
        if key in _UNSUPPORTED_KWARGS and not (key == "where" and kwargs[key] is True):
            raise UnsupportedOperationError(
                f"np.{ufunc.__name__}(..., {key}=...) is not supported inside @fuse")
        if key not in _UNSUPPORTED_KWARGS:
            raise TypeError(f"{ufunc.__name__}() got an unexpected keyword argument '{key}'")
    inputs = [to_operand(x) for x in inputs]
    gufunc = GUFUNCS.get(ufunc)  # np.matmul & co.: fusejit/linalg.py
    if gufunc is not None:
        return gufunc(*inputs, out=out, dtype=dtype, casting=casting)
    if ufunc is np.divmod:
        results = (apply_ufunc(np.floor_divide, inputs, {"dtype": dtype}),
                   apply_ufunc(np.remainder, inputs, {"dtype": dtype}))
        return _write_out(results, out, casting, "divmod") if out is not None else results
    if ufunc.nout != 1:
        raise UnsupportedOperationError(f"np.{ufunc.__name__} (several outputs) is not supported "
                                        "inside @fuse")
    if out is not None and ufunc in OP_OF_UFUNC:
        _precheck_output_cast(ufunc, inputs, out, dtype, casting)
    if ufunc is CLIP_UFUNC:
        result = clip(*inputs, dtype=dtype)
    elif ufunc is np.power:
        result = power(*inputs, dtype=None if dtype is None else np.dtype(dtype))
    elif ufunc in OP_OF_UFUNC:
        result = elementwise(ufunc, inputs, dtype=None if dtype is None else np.dtype(dtype))
    else:
        raise UnsupportedOperationError(f"np.{ufunc.__name__} is not supported inside @fuse")
    if out is not None:
        return _write_out((result,), out, casting, ufunc.__name__)[0]
    return result


def _write_out(results: tuple[Any, ...], out: Any, casting: str, ufunc_name: str
               ) -> tuple[Any, ...]:
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != len(results):
        raise ValueError(f"The 'out' tuple must have exactly {len(results)} entries")
    for target, value in zip(outs, results):
        if target is None:
            continue
        if not (hasattr(target, "shape") and hasattr(target, "dtype")):  # not an array at all
            raise TypeError(f"return arrays must be of ArrayType (out= got "
                            f"{type(target).__name__})")
        if not isinstance(target, TensorProxy):
            raise UnsupportedOperationError(
                "out= inside @fuse must be an argument of the fused function (or a view of one)")
        check_output_cast(ufunc_name, value.dtype, target.dtype, casting)
        target.write(Ellipsis, value, as_output=True)
    return tuple(t if t is not None else r for t, r in zip(outs, results))


def _precheck_output_cast(ufunc: np.ufunc, inputs: Sequence[Any], out: Any, dtype: Any,
                          casting: str) -> None:
    """NumPy refuses an output cast before it broadcasts the operands: ``x[1::2] -= y`` with
    a float ``y`` of another shape into an int ``x`` raises the casting TypeError, not the
    broadcast ValueError."""
    target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if not isinstance(target, TensorProxy):
        return  # (_write_out names what is wrong with it)
    try:
        loop = resolve(ufunc, [_ptype(x) for x in inputs],
                       None if dtype is None else np.dtype(dtype), casting)
    except Exception:  # noqa: BLE001 - no loop: elementwise raises NumPy's error for it
        return
    check_output_cast(ufunc.__name__, loop[-1], target.dtype, casting)


def single_out(out: Any) -> Any:
    """``out=`` of a one-output function: the array itself, or the one entry of a tuple."""
    if isinstance(out, tuple):
        if len(out) != 1:
            raise ValueError("The 'out' tuple must have exactly one entry")
        out = out[0]
    return out


def check_output_cast(ufunc_name: str, value: np.dtype, target: np.dtype,
                      casting: str = "same_kind") -> None:
    """Refuse to store a ufunc result into an array of ``target`` dtype, as NumPy's out= does."""
    if not np.can_cast(value, target, casting=casting):
        raise TypeError(f"Cannot cast ufunc '{ufunc_name}' output from {value!r} to "
                        f"{target!r} with casting rule '{casting}'")


def elementwise(ufunc: np.ufunc, inputs: Sequence[Any], dtype: np.dtype | None = None,
                op: Op | None = None) -> TensorProxy:
    """One elementwise node with NumPy's loop dtypes and broadcasting."""
    op = op if op is not None else OP_OF_UFUNC[ufunc]
    types = [_ptype(x) for x in inputs]
    folded = _fold_out_of_range_comparison(op, inputs, types)
    if folded is not None:
        return folded
    if op in _COMPARISONS and any(isinstance(t, np.dtype) and t.kind in "iu" for t in types):
        exact = _compare_dynamic_int(op, inputs, types)
        if exact is not None:
            return exact
        # NumPy 2 compares integers with any Python int exactly (uint8_array > -1 is True); a
        # dynamic one, whose value comes at call time, is compared as an int64
        types = [dt.INT64 if t is int and isinstance(x, TensorProxy) else t
                 for x, t in zip(inputs, types)]
    loop = resolve(ufunc, types, dtype)
    if op not in COMPLEX_OPS and any(d.kind == "c" for d in loop):
        raise UnsupportedDTypeError(
            f"np.{ufunc.__name__} on {next(d for d in loop if d.kind == 'c').name} values is not "
            "supported by fusejit yet (see fusejit.ops.COMPLEX_OPS for the complex ops it "
            "computes); call it outside the fused function")
    shape = shapes.broadcast_shapes(*(_shape(x) for x in inputs))
    srcs = tuple(as_node(x, t) for x, t in zip(inputs, loop[:ufunc.nin]))
    if op is Op.POW and loop[-1].kind in "iu" and _known_negative(srcs[1]):
        # NumPy checks integer exponents; one known while tracing is checked here (an exponent
        # only known on the device cannot raise: see the integer power kernel)
        raise ValueError("Integers to negative integer powers are not allowed.")
    return TensorProxy(Node.make(op, loop[-1], shape, srcs))


def _known_negative(node: Node) -> bool:
    """Is some element of this traced value negative, judging from trace-time constants?"""
    while node.op in (Op.VIEW, Op.RESHAPE, Op.CAST) and node.dtype.kind != "u":
        node = node.srcs[0]
    if node.op is Op.CONST:
        return bool(const_value(node) < 0)
    tracer = current_tracer()
    if node.op is Op.INPUT and tracer is not None and node.arg in tracer.constants:
        return bool(np.any(tracer.constants[node.arg] < 0))
    return False


_COMPARISONS = {Op.EQ: np.equal, Op.NE: np.not_equal, Op.LT: np.less, Op.LE: np.less_equal,
                Op.GT: np.greater, Op.GE: np.greater_equal}


def _fold_out_of_range_comparison(op: Op, inputs: Sequence[Any], types: Sequence[Any]
                                  ) -> TensorProxy | None:
    """NumPy 2 compares integer arrays with out-of-range Python ints exactly (``i8 < 300``)."""
    if op not in _COMPARISONS or len(inputs) != 2:
        return None
    for i, (x, t) in enumerate(zip(inputs, types)):
        other = types[1 - i]
        if (type(x) is int and isinstance(other, np.dtype) and other.kind in "iu"
                and not np.iinfo(other).min <= x <= np.iinfo(other).max):
            info = np.iinfo(other)
            stand_in = info.max if x > info.max else info.min  # any in-range value on that side
            probe = [0, 0]
            probe[i], probe[1 - i] = x, stand_in
            answer = bool(_COMPARISONS[op](*(int(p) for p in probe)))
            shape = shapes.broadcast_shapes(_shape(inputs[0]), _shape(inputs[1]))
            return TensorProxy(const(answer, dt.BOOL, shape))
    return None


def _compare_dynamic_int(op: Op, inputs: Sequence[Any], types: Sequence[Any]
                         ) -> TensorProxy | None:
    """An integer array compared with a dynamic Python int, exactly as NumPy 2 does (the int's
    range beyond int64 is part of the cache key, see signature.arg_spec):

    * an int beyond the array dtype's range gives a constant (``uint8_array < 2**63``);
    * a uint64 array with an int of [2**63, 2**64) compares in uint64;
    * a uint64 array with an int64 ``n`` compares in uint64 where ``n >= 0``, and is constant
      where ``n < 0`` (int64 and uint64 meet in float64 otherwise, which rounds).
    """
    if len(inputs) != 2:
        return None
    k = next((i for i, (x, t) in enumerate(zip(inputs, types))
              if t is int and isinstance(x, TensorProxy) and x._node is None), None)
    other = types[1 - k] if k is not None else None
    if k is None or not (isinstance(other, np.dtype) and other.kind in "iu"):
        return None
    n = inputs[k]
    shape = shapes.broadcast_shapes(_shape(inputs[0]), _shape(inputs[1]))

    def answer(n_probe: int, array_probe: int) -> Node:  # the comparison of any such pair
        probe = [0, 0]
        probe[k], probe[1 - k] = n_probe, array_probe
        return const(bool(_COMPARISONS[op](*probe)), dt.BOOL, shape)
    if n._int_range == "below":  # under every integer dtype's range
        return TensorProxy(answer(-2**65, 0))
    if n._int_range == "above" or (n._int_range == "uint64" and other != dt.UINT64):
        return TensorProxy(answer(2**65, 0))  # over the dtype's range
    if other != dt.UINT64:
        return None  # int64 holds both: compared as an int64
    scalar = Node.make(Op.SCALAR, dt.UINT64 if n._int_range else dt.INT64, (), (), (n._weak[0],))
    srcs = [None, None]
    srcs[k], srcs[1 - k] = cast(scalar, dt.UINT64), as_node(inputs[1 - k], dt.UINT64)
    compared = Node.make(op, dt.BOOL, shape, tuple(srcs))
    if n._int_range:
        return TensorProxy(compared)
    negative = Node.make(Op.LT, dt.BOOL, (), (scalar, const(0, dt.INT64)))
    return TensorProxy(Node.make(Op.WHERE, dt.BOOL, shape, (negative, answer(-1, 0), compared)))


# NumPy's float32/float64 power loop checks a scalar (stride-0) exponent against a table before it
# calls pow (loops_umath_fp.dispatch.c.src, POWER_FAST_PATH): -1 -> 1/x, 0.5 -> sqrt(x), 2 -> x*x
# (0 and 1 agree with pow). The table differs from pow at the edges (-inf ** 0.5 is nan, -0.0 **
# 0.5 is -0.0) and in rounding. The table is traced as selects: a literal exponent folds them to
# one branch, a dynamic scalar exponent keeps them.
_POWER_FAST_PATH = ((-1.0, Op.RECIPROCAL), (0.5, Op.SQRT), (2.0, Op.SQUARE))


def power(x: Any, e: Any, dtype: np.dtype | None = None) -> TensorProxy:
    """np.power, with NumPy's fast path for a scalar exponent."""
    result = elementwise(np.power, (x, e), dtype)
    node = result.node
    if node.dtype not in (dt.FLOAT32, dt.FLOAT64) or math.prod(_shape(e)) != 1 \
            or node.size == 1:  # NumPy's loop sees a stride-0 exponent only over > 1 element
        return result
    base, exponent = node.srcs
    for value, op in _POWER_FAST_PATH:
        is_value = Node.make(Op.EQ, dt.BOOL, exponent.shape,
                             (exponent, const(value, exponent.dtype)))
        fast = Node.make(op, node.dtype, base.shape, (base,))
        node = Node.make(Op.WHERE, node.dtype, node.shape, (is_value, fast, node))
    return TensorProxy(node)


def clip(x: Any, lo: Any, hi: Any, dtype: Any = None) -> TensorProxy:
    """np.clip: NumPy's clip loop dtypes, then min(max(x, lo), hi) with NaN propagation."""
    if lo is None and hi is None:
        raise ValueError("One of max or min must be given")
    if isinstance(x, (bool, int, float)):
        x = np.asarray(x)  # np.clip converts its array argument: a strong operand
    elif isinstance(x, TensorProxy) and x._weak is not None:
        x = lift(x)  # a dynamic Python scalar argument: strong too
    lo, hi = _clip_bound(x, lo, below=True), _clip_bound(x, hi, below=False)
    if lo is None and hi is None:  # both bounds beyond the integer range: nothing to clip
        result = lift(x)
        return result if dtype is None else TensorProxy(cast(result.node, np.dtype(dtype)))
    parts = [x, lo, hi]
    present = [p for p in parts if p is not None]
    types = [_ptype(p) for p in present]
    if lo is None or hi is None:
        # np.clip with one bound is maximum / minimum with that bound
        ufunc = np.minimum if lo is None else np.maximum
        loop = resolve(ufunc, types, None if dtype is None else np.dtype(dtype))
        present = [present[0], _dynamic_bound(present[0], present[1], loop[1], lo is not None)]
        return elementwise(ufunc, present, dtype=None if dtype is None else np.dtype(dtype))
    loop = resolve(CLIP_UFUNC, types, None if dtype is None else np.dtype(dtype))
    present = [x, _dynamic_bound(x, lo, loop[1], True), _dynamic_bound(x, hi, loop[2], False)]
    shape = shapes.broadcast_shapes(*(_shape(p) for p in present))
    xs, los, his = (as_node(p, t) for p, t in zip(present, loop[:3]))
    # Which of x and a bound equal to it (-0.0 vs 0.0) clip returns: NumPy's float32/float64
    # loop returns x when both bounds are the same along its inner loop, else the bound; its
    # float16 loop returns x. x goes where maximum and minimum keep the operand of two equal.
    inner_constant = all(not b.shape or b.shape[-1] == 1 for b in (los, his))
    bound_first = dt.extremum_keeps_second(loop[-1]) and inner_constant
    mid = shapes.broadcast_shapes(xs.shape, los.shape)
    out = Node.make(Op.MAXIMUM, loop[-1], mid, (los, xs) if bound_first else (xs, los))
    srcs = (his, out) if bound_first else (out, his)
    return TensorProxy(Node.make(Op.MINIMUM, loop[-1], shape, srcs))


def _clip_bound(x: Any, bound: Any, below: bool) -> Any:
    """NumPy's clip drops a Python int bound beyond an integer array's range on the side where
    it cannot clip anything (``clip(uint8, -3, 300)``); beyond the other side it raises. A
    dynamic int beyond int64 is dropped here too (its range is part of the cache key); one
    within int64 saturates at call time instead (_dynamic_bound)."""
    t = _ptype(x)
    if not (isinstance(t, np.dtype) and t.kind in "iu"):
        return bound
    if type(bound) is int:
        info = np.iinfo(t)
        if (bound < info.min) if below else (bound > info.max):
            return None
    elif isinstance(bound, TensorProxy) and bound._weak is not None and bound._node is None \
            and bound._int_range is not None:
        if bound._int_range == ("below" if below else "above") or (
                not below and bound._int_range == "uint64" and t != dt.UINT64):
            return None
    return bound


def _dynamic_bound(x: Any, bound: Any, loop: np.dtype, below: bool) -> Any:
    """A dynamic Python int clip bound of an integer array as a value of the loop's dtype that
    saturates, at call time, beyond the range on the side where NumPy drops it (an equivalent
    bound: it clips nothing either) and raises OverflowError beyond the other, as NumPy does
    (``clip(uint8_array, n, 9)`` with ``n = -7`` is ``minimum(uint8_array, 9)``)."""
    t = _ptype(x)
    if not (isinstance(bound, TensorProxy) and bound._weak is not None and bound._weak[1] is int
            and isinstance(t, np.dtype) and t.kind in "iu" and loop.kind in "iu"):
        return bound
    if bound._node is not None:
        node = bound._node
    elif bound._int_range is None:
        node = Node.make(Op.SCALAR, dt.INT64, (), (), (bound._weak[0],))
    else:
        return bound  # beyond int64 and not dropped (_clip_bound): NumPy's OverflowError
    side = dt.SATURATE_LOW if below else dt.SATURATE_HIGH
    return TensorProxy(checked_cast(node, loop, side))


# -- structural builders --------------------------------------------------------------------------


def view(node: Node, m: shapes.AffineMap, shape: tuple[int, ...]) -> Node:
    """VIEW with map composition: a view of a view is one view; identity views vanish."""
    if node.op is Op.VIEW:
        m = shapes.compose(node.arg, m)
        node = node.srcs[0]
    if shapes.is_identity(m, node.shape, shape):
        return node
    return Node.make(Op.VIEW, node.dtype, shape, (node,), m)


def reshape(node: Node, shape: tuple[int, ...]) -> Node:
    if node.shape == shape:
        return node
    # a reshape that only adds or removes length-1 axes is affine: keep it a VIEW
    if [d for d in node.shape if d != 1] == [d for d in shape if d != 1]:
        src_dims = [k for k, d in enumerate(node.shape) if d != 1]
        out_dims = [j for j, d in enumerate(shape) if d != 1]
        pos = dict(zip(src_dims, out_dims))
        m = tuple((0, tuple(int(pos.get(k) == j) for j in range(len(shape))))
                  for k in range(node.ndim))
        return view(node, m, shape)
    if node.op is Op.RESHAPE:
        node = node.srcs[0]
    return Node.make(Op.RESHAPE, node.dtype, shape, (node,))


def broadcast_to(node: Node, shape: tuple[int, ...]) -> Node:
    if node.shape == shape:
        return node
    if len(node.shape) > len(shape):
        raise BroadcastError("input operand has more dimensions than allowed by the axis "
                             "remapping")
    if not shapes.broadcasts_to(node.shape, shape):
        raise BroadcastError(f"operands could not be broadcast together with remapped shapes "
                             f"[original->remapped]: {shapes.format_shape(node.shape)}  and "
                             f"requested shape {shapes.format_shape(shape)}")
    return view(node, shapes.broadcast_map(node.shape, shape), shape)


def where(cond: Any, a: Any, b: Any) -> TensorProxy:
    cond, a, b = (to_operand(v) for v in (cond, a, b))
    out_dtype = dt.result_type(_ptype(a), _ptype(b))
    shape = shapes.broadcast_shapes(_shape(cond), _shape(a), _shape(b))
    c = as_node(cond, dt.BOOL)
    convert = as_node if _where_scalars_are_weak() else as_array_node
    return TensorProxy(Node.make(Op.WHERE, out_dtype, shape,
                                 (c, convert(a, out_dtype), convert(b, out_dtype))))


@functools.cache
def _where_scalars_are_weak() -> bool:
    """Does the installed NumPy convert np.where's Python scalars like an operator's (NEP 50:
    ``np.where(c, uint8_array, -7)`` raises OverflowError, NumPy >= 2.5), or as arrays cast
    unsafely (-7 becomes 249)?"""
    try:
        np.where(np.True_, np.zeros(1, np.uint8), -7)
    except OverflowError:
        return True
    return False


def lift(x: Any) -> TensorProxy:
    """Any array-like operand as a (strong) proxy."""
    x = to_operand(x)
    if isinstance(x, TensorProxy):
        if x._weak is not None:
            return TensorProxy(as_node(x, dt.default_dtype(x._weak[1])))
        return x
    t = _ptype(x)
    return TensorProxy(as_node(x, dt.default_dtype(t)))


# -- the proxy ------------------------------------------------------------------------------------


class TensorProxy:
    """A symbolic array standing for a value of the traced function."""

    __array_priority__ = 1000

    def __init__(self, node: Node | None, *, weak: tuple[int, type] | None = None,
                 base: TensorProxy | None = None, vmap: shapes.AffineMap | None = None,
                 shape: tuple[int, ...] | None = None, readonly: bool | str = False) -> None:
        self._node = node
        # (param index, python type) for a weak dynamic scalar argument; (None, python type)
        # with a node for a value Python arithmetic computed from weak operands only
        self._weak = weak
        if node is not None and (tracer := _current.get()) is not None:
            tracer.values.append(node)  # every value computed (explain: the unused ones)
        self._base = base  # root proxy this one is a view of
        self._vmap = vmap  # affine map from this view's index to the root's index
        self._vshape = shape
        self._readonly = readonly  # or why it is read-only (a captured array)
        self._param: int | None = None
        self._pybool = False  # a Python bool (argument or operator result): see _operator
        self._array0d = False  # a 0-d array a constructor made (zeros_like): see is_numpy_scalar
        self._int_range: str | None = None  # a dynamic Python int beyond int64: dt.int_range

    # -- value ------------------------------------------------------------------------------------
    @property
    def node(self) -> Node:
        if self._base is not None:
            assert self._vmap is not None and self._vshape is not None
            return view(self._base.node, self._vmap, self._vshape)
        if self._weak is not None and self._node is None:
            return as_node(self, dt.default_dtype(self._weak[1]))
        assert self._node is not None
        return self._node

    @property
    def shape(self) -> tuple[int, ...]:
        if self._vshape is not None:
            return self._vshape
        return () if self._node is None else self._node.shape

    @property
    def dtype(self) -> np.dtype:
        if self._weak is not None:
            return dt.default_dtype(self._weak[1])
        return self._base.dtype if self._base is not None else self._node.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}] traced value"

    def __repr__(self) -> str:
        return f"TensorProxy({self.dtype.name}[{','.join(map(str, self.shape))}])"

    # -- writes -----------------------------------------------------------------------------------
    def _root(self) -> tuple[TensorProxy, shapes.AffineMap | None]:
        return (self._base, self._vmap) if self._base is not None else (self, None)

    def write(self, key: Any, value: Any, *, as_output: bool = False) -> None:
        """``self[key] = value`` (values cast unsafely, as NumPy's setitem does)."""
        why = self._readonly or (self._base is not None and self._base._readonly)
        if why:
            raise ReadOnlyError(why if isinstance(why, str) else "output array is read-only"
                                if as_output else "assignment destination is read-only")
        if self._weak is not None:  # a Python scalar, as Python says it
            raise TypeError(f"'{self._weak[1].__name__}' object does not support item "
                            "assignment")
        if is_numpy_scalar(self):  # immutable, as in NumPy
            raise TypeError("return arrays must be of ArrayType" if as_output else
                            f"'numpy.{self.dtype.type.__name__}' object does not support item "
                            f"assignment ({self.describe()}, a NumPy scalar)")
        region_shape, m, _ = shapes.index_map(self.shape, key)
        root, vmap = self._root()
        full = m if vmap is None else shapes.compose(vmap, m)
        value = to_operand(value)
        vnode = as_node(value, self.dtype)
        if not as_output and len(vnode.shape) > len(region_shape) and \
                all(d == 1 for d in vnode.shape[:len(vnode.shape) - len(region_shape)]):
            vnode = reshape(vnode, vnode.shape[len(vnode.shape) - len(region_shape):])
        if vnode.shape != region_shape:
            try:
                vnode = broadcast_to(vnode, region_shape)
            except BroadcastError:
                raise ValueError(f"could not broadcast input array from shape {vnode.shape} "
                                 f"into shape {region_shape}") from None
        region = _region_of(full, root.shape, region_shape)
        root._node = Node.make(Op.SETITEM, root.dtype, root.shape, (root.node, vnode), region)

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, TensorProxy):
            if key.dtype == dt.BOOL and key.shape == self.shape:
                # x[mask] = v with a scalar v is a select; NumPy's array v would be a scatter
                if _shape(to_operand(value)) not in ((), (1,)):
                    raise UnsupportedOperationError(
                        "x[mask] = array is a scatter; only a scalar value can be assigned "
                        "through a boolean mask inside @fuse (or use np.where)")
                self.write(Ellipsis, where(key, value, self))
                return
            raise UnsupportedOperationError("indexing with a traced array is a gather/scatter "
                                            "and is not supported inside @fuse")
        if _selects_one_element(key, self.ndim) and _shape(to_operand(value)) != ():
            # x[-1] = array([5.]): NumPy stores into one element only a scalar (x[...] of a
            # 0-d array, or x[0] of a 2-d one, broadcast instead), except that a bool element
            # takes the truth value of any one-element array
            if self.dtype != dt.BOOL or math.prod(_shape(to_operand(value))) != 1:
                raise ValueError("setting an array element with a sequence.")
            value = value.reshape(()) if hasattr(value, "reshape") else \
                np.asarray(value).reshape(())
        self.write(key, value)

    def __getitem__(self, key: Any) -> TensorProxy:
        from . import numpy_gather  # integer-array indexing; a boolean mask raises there

        if numpy_gather.is_advanced(key):
            return numpy_gather.advanced_getitem(self, key)
        out_shape, m, _ = shapes.index_map(self.shape, key)
        result = self._view(m, out_shape)
        keys = key if isinstance(key, tuple) else (key,)
        if not out_shape and self.shape and not any(k is Ellipsis or k is None for k in keys):
            # x[0] of a 1-d array is a NumPy scalar: a copy of the element, not a view
            return TensorProxy(result.node)
        return result

    def _view(self, m: shapes.AffineMap, shape: tuple[int, ...],
              readonly: bool = False) -> TensorProxy:
        if self._weak is not None:
            return TensorProxy(view(self.node, m, shape))
        root, vmap = self._root()
        full = m if vmap is None else shapes.compose(vmap, m)
        return TensorProxy(None, base=root, vmap=full, shape=shape,
                           readonly=readonly or self._readonly)

    # -- NumPy protocols --------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from . import numpy_api

        return numpy_api.ufunc_method(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Callable, types: Any, args: Any, kwargs: Any) -> Any:
        from . import numpy_api

        return numpy_api.array_function(func, args, kwargs)

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TracerConversionError(self.describe(), "array")

    def __bool__(self) -> bool:
        raise TracerBoolConversionError(self.describe())

    def __float__(self) -> float:
        raise TracerConversionError(self.describe(), "float")

    def __complex__(self) -> complex:
        raise TracerConversionError(self.describe(), "float")

    def __int__(self) -> int:
        raise TracerConversionError(self.describe(), "int")

    __index__ = __int__

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    __hash__ = None  # type: ignore[assignment]  # == builds a traced comparison

    def __getattr__(self, name: str) -> Any:
        from . import numpy_api

        method = numpy_api.METHODS.get(name)
        if method is None:
            if hasattr(np.ndarray, name) and not name.startswith("_"):
                raise UnsupportedAttributeError(
                    f"ndarray.{name} is not supported inside @fuse ({self.describe()}); call "
                    "it outside the fused function")
            raise AttributeError(
                f"'{type(self).__name__}' ({self.describe()}) has no attribute {name!r}")
        return lambda *a, **k: method(self, *a, **k)

    @property
    def T(self) -> TensorProxy:
        from . import numpy_api

        return numpy_api.transpose(self)

    @property
    def mT(self) -> TensorProxy:
        from . import numpy_api

        return numpy_api.swapaxes(self, -1, -2)

    @property
    def real(self) -> TensorProxy:
        from .numpy_complex import real

        return real(self)

    @real.setter
    def real(self, value: Any) -> None:
        from .numpy_complex import set_part

        set_part(self, "real", value)

    @property
    def imag(self) -> TensorProxy:
        from .numpy_complex import imag

        return imag(self)

    @imag.setter
    def imag(self, value: Any) -> None:
        from .numpy_complex import set_part

        set_part(self, "imag", value)


def _region_of(m: shapes.AffineMap, root_shape: tuple[int, ...], region_shape: tuple[int, ...]
               ) -> tuple[tuple[int, int, int, int], ...]:
    """A write map as a per-root-dim region (start, step, count, region dim)."""
    region = []
    used: set[int] = set()
    for k, (off, coefs) in enumerate(m):
        nz = [(j, c) for j, c in enumerate(coefs) if c and region_shape[j] != 1]
        if len(nz) > 1 or any(j in used for j, _ in nz):
            raise UnsupportedOperationError("cannot write through this view (it is not a plain "
                                            "strided region of the argument)")
        if nz:
            j, c = nz[0]
            used.add(j)
            region.append((off, c, region_shape[j], j))
        else:
            size1 = [j for j, c in enumerate(coefs) if c and region_shape[j] == 1]
            region.append((off, 1, 1, -1 if not size1 else size1[0]))
    if len(used) != sum(1 for d in region_shape if d != 1):
        raise ReadOnlyError("output array is read-only (it is a broadcast view)")
    return tuple(region)


def _selects_one_element(key: Any, ndim: int) -> bool:
    """An index of one integer per axis (``x[-1]`` of a 1-d array, ``y[0, 1]``)."""
    parts = key if isinstance(key, tuple) else (key,)
    return ndim > 0 and len(parts) == ndim and all(
        isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)) for k in parts)


def is_numpy_scalar(x: Any) -> bool:
    """A 0-d value NumPy holds as an immutable scalar (``s += 1`` rebinds ``s``): a NumPy
    scalar argument, a 0-d result of a ufunc, a reduction or integer indexing; not a 0-d array
    argument, a view (``x[...]``) or a 0-d array a constructor made."""
    return (isinstance(x, TensorProxy) and x._weak is None and x._base is None
            and x._param is None and not x._array0d and not x.shape)


def _is_python_scalar(x: Any) -> bool:
    """A Python scalar literal or a weak value (not np.float64, which subclasses float)."""
    if isinstance(x, TensorProxy):
        return x._weak is not None or x._pybool
    return type(x) in (bool, int, float, complex)


def _is_python_bool(x: Any) -> bool:
    return x._pybool if isinstance(x, TensorProxy) else type(x) is bool


def _python_int(x: Any) -> Any:
    """A Python bool in Python arithmetic: an int (``True + True`` is 2, ``-True`` is -1)."""
    if isinstance(x, TensorProxy):
        return TensorProxy(cast(x.node, dt.INT64), weak=(None, int))
    return int(x)


_BOOL_OPERATORS = frozenset({np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.less,
                             np.less_equal, np.greater, np.greater_equal, np.equal,
                             np.not_equal})


def _operator(ufunc: np.ufunc, operands: tuple[Any, ...], inplace: bool = False) -> Any:
    """A Python operator on proxies. Between Python scalars only (dynamic scalar arguments and
    literals) it is Python arithmetic: ``1 - b1`` is a Python float, weak under NEP 50 (not
    NumPy's strong float64), and ``b1 -= 1`` rebinds the name as it does for a float. A weak
    int computed this way is computed in int64 and converted to an integer array's dtype with
    NumPy's range check (checked_cast)."""
    if all(_is_python_scalar(x) for x in operands):
        _check_int64_arithmetic(ufunc, operands)
        if not (ufunc in _BOOL_OPERATORS and all(map(_is_python_bool, operands))):
            operands = tuple(_python_int(x) if _is_python_bool(x) else x for x in operands)
        result = apply_ufunc(ufunc, operands, {})
        kind = result.dtype.kind
        if kind == "b":
            result._pybool = True  # a Python bool promotes as np.bool_
            return result
        return TensorProxy(result.node, weak=(None, {"f": float, "c": complex}.get(kind, int)))
    if inplace and not _is_python_scalar(operands[0]) and not is_numpy_scalar(operands[0]):
        # (b1 += x rebinds b1, like a float; so does s += x for a NumPy scalar s)
        apply_ufunc(ufunc, operands, {"out": operands[0]})
        return operands[0]
    return apply_ufunc(ufunc, operands, {})


def _check_int64_arithmetic(ufunc: np.ufunc, operands: tuple[Any, ...]) -> None:
    """Python arithmetic on dynamic ints is computed in int64: refuse an int beyond it (its
    range is part of the cache key), which would otherwise raise OverflowError at launch."""
    for x in operands:
        if isinstance(x, TensorProxy) and x._weak is not None and x._node is None \
                and getattr(x, "_int_range", None) is not None:
            raise IntRangeError(
                f"Python arithmetic ({ufunc.__name__}) on a dynamic int argument beyond the "
                "int64 range is not supported inside @fuse (fusejit computes it in int64); "
                "mark that argument static (static_argnums=...) or compute it outside the "
                "fused function")


def _binary(ufunc: np.ufunc, reflected: bool = False) -> Callable[..., Any]:
    if reflected:
        return lambda self, other: _operator(ufunc, (other, self))
    return lambda self, other: _operator(ufunc, (self, other))


def _inplace(ufunc: np.ufunc) -> Callable[..., Any]:
    return lambda self, other: _operator(ufunc, (self, other), inplace=True)


for _name, _ufunc in {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "and": np.bitwise_and,
    "or": np.bitwise_or, "xor": np.bitwise_xor, "lshift": np.left_shift,
    "rshift": np.right_shift,
}.items():
    setattr(TensorProxy, f"__{_name}__", _binary(_ufunc))
    setattr(TensorProxy, f"__r{_name}__", _binary(_ufunc, reflected=True))
    setattr(TensorProxy, f"__i{_name}__", _inplace(_ufunc))
for _name, _ufunc in {"lt": np.less, "le": np.less_equal, "gt": np.greater,
                      "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}.items():
    setattr(TensorProxy, f"__{_name}__", _binary(_ufunc))
for _name, _ufunc in {"neg": np.negative, "pos": np.positive, "abs": np.absolute,
                      "invert": np.invert}.items():
    setattr(TensorProxy, f"__{_name}__", lambda self, _u=_ufunc: _operator(_u, (self,)))
TensorProxy.__divmod__ = lambda self, o: apply_ufunc(np.divmod, (self, o), {})  # type: ignore
TensorProxy.__rdivmod__ = lambda self, o: apply_ufunc(np.divmod, (o, self), {})  # type: ignore


# NumPy's ``array ** exponent`` (number.c, fast_scalar_power) calls np.square for the Python int
# 2 on any array (so ``bool_array ** 2`` is int8), and np.reciprocal / np.sqrt for the Python int
# -1 / float 0.5 on float arrays, float16 included (whose power loop has no fast path).
_OPERATOR_POWER = {(int, 2): np.square, (int, -1): np.reciprocal, (float, 0.5): np.sqrt}


def _power(self: TensorProxy, exponent: Any, inplace: bool = False) -> Any:
    # ndarray.__pow__'s fast path; a NumPy scalar (a 0-d ufunc result or reduction, a NumPy
    # scalar argument) has none: np.True_ ** 2 is int64 where np.array(True) ** 2 is int8
    ndarray = bool(self.shape) or self.node.op is Op.INPUT
    if type(exponent) in (int, float) and self._weak is None and ndarray:
        fast = _OPERATOR_POWER.get((type(exponent), exponent))
        if fast is np.square or (fast is not None and self.dtype.kind in "fc"):
            return _operator(fast, (self,), inplace)
    return _operator(np.power, (self, exponent), inplace)


TensorProxy.__pow__ = lambda self, o: _power(self, o)  # type: ignore[attr-defined]
TensorProxy.__ipow__ = lambda self, o: _power(self, o, inplace=True)  # type: ignore
