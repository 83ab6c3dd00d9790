"""Tracing NumPy's ufuncs: which loop NumPy would run, and the nodes that reproduce it.

Every ufunc call on traced values (``__array_ufunc__``, the Python operators, the functions
NumPy composes from ufuncs) ends in ``apply_ufunc``: ``resolve`` asks NumPy for the loop
(``ufunc.resolve_dtypes``, Python scalars passed as weak types, NEP 50), ``elementwise``
builds one node with that loop's dtypes, and the ufuncs whose NumPy semantics are more than
one op (comparisons with out-of-range Python ints, power's fast path, clip's bounds) are
traced here too. The proxy and operand conversions it builds on are in ``trace``, which does
not import this module: NumPy's ufunc calls reach ``apply_ufunc`` through the dispatch table
(``frontend.numpy.elementwise`` registers ``__call__``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fusejit.errors import UnsupportedDTypeError, UnsupportedOperationError
from fusejit.frontend.dispatch import GUFUNCS
from fusejit.ir import dtypes as dt
from fusejit.ir import shapes
from fusejit.ir.graph import Node, const, const_value
from fusejit.ir.ops import CLIP_UFUNC, COMPLEX_OPS, OP_OF_UFUNC, Op
from fusejit.frontend.trace import (
    TensorProxy,
    _ptype,
    _shape,
    array_dtype,
    as_node,
    cast,
    checked_cast,
    current_tracer,
    lift,
    to_operand,
)


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
    gufunc = GUFUNCS.get(ufunc)  # np.matmul & co.: registered by frontend.numpy.linalg
    if gufunc is not None:
        return gufunc(*inputs, out=out, dtype=dtype, casting=casting)
    if ufunc is np.divmod:
        results = (apply_ufunc(np.floor_divide, inputs, {"dtype": dtype}),
                   apply_ufunc(np.remainder, inputs, {"dtype": dtype}))
        return _write_out(results, out, casting, "divmod") if out is not None else results
    if ufunc.nout != 1:
        raise _numpy_error(ufunc, inputs, dtype) or UnsupportedOperationError(
            f"np.{ufunc.__name__} (several outputs) is not supported inside @fuse")
    if out is not None and ufunc in OP_OF_UFUNC:
        _precheck_output_cast(ufunc, inputs, out, dtype, casting)
    if ufunc is CLIP_UFUNC:
        result = clip(*inputs, dtype=dtype)
    elif ufunc is np.power:
        result = power(*inputs, dtype=None if dtype is None else np.dtype(dtype))
    elif ufunc is np.float_power:  # pow in NumPy's float64/complex128 loops (no fast paths)
        result = elementwise(ufunc, inputs, None if dtype is None else np.dtype(dtype), Op.POW)
    elif ufunc in OP_OF_UFUNC:
        result = elementwise(ufunc, inputs, dtype=None if dtype is None else np.dtype(dtype))
    else:
        raise _numpy_error(ufunc, inputs, dtype) or UnsupportedOperationError(
            f"np.{ufunc.__name__} is not supported inside @fuse")
    if out is not None:
        return _write_out((result,), out, casting, ufunc.__name__)[0]
    return result


def _numpy_error(ufunc: np.ufunc, inputs: Sequence[Any], dtype: Any) -> Exception | None:
    """The error NumPy raises for a ufunc fusejit does not trace, where NumPy has no loop for
    these operand dtypes either (np.isnat of floats: TypeError): NumPy's answer, not a refusal.
    Found by calling it on empty arrays (and scalars) of the operands' types."""
    probes = [np.empty(0, t) if isinstance(t, np.dtype) else t(0)
              for t in (_ptype(x) for x in inputs)]
    try:
        with np.errstate(all="ignore"):
            ufunc(*probes, **({} if dtype is None else {"dtype": dtype}))
    except (TypeError, ValueError) as exc:
        return exc
    return None


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
    """Refuse to store a ufunc result into an array of ``target`` dtype, as NumPy's out= does:
    with NumPy's own exception (a ``UFuncTypeError``, which ``except`` clauses may name),
    raised by the same store of one element of ``value``'s dtype."""
    if np.can_cast(value, target, casting=casting):
        return
    ufunc = getattr(np, ufunc_name, None)
    if isinstance(ufunc, np.ufunc) and ufunc.nout == 1:
        try:
            with np.errstate(all="ignore"):
                ufunc(*[np.zeros(1, value)] * ufunc.nin, out=np.zeros(1, target),
                      casting=casting)
        except TypeError as exc:
            if str(exc).startswith("Cannot cast ufunc"):
                raise exc.with_traceback(None) from None
    raise TypeError(f"Cannot cast ufunc '{ufunc_name}' output from {value!r} to "
                    f"{target!r} with casting rule '{casting}'")


def elementwise(ufunc: np.ufunc, inputs: Sequence[Any], dtype: np.dtype | None = None,
                op: Op | None = None) -> TensorProxy:
    """One elementwise node with NumPy's loop dtypes and broadcasting."""
    op = op if op is not None else OP_OF_UFUNC[ufunc]
    types = [_ptype(x) for x in inputs]
    if len(types) == 1 and not isinstance(types[0], np.dtype):
        # one Python scalar is converted as np.asarray does (np.abs(2**63) is uint64); several
        # take the default dtypes (np.add(2**63, 1) raises OverflowError: resolve)
        types = [array_dtype(inputs[0], types[0])]
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
            "supported by fusejit yet (see fusejit.ir.ops.COMPLEX_OPS for the complex ops it "
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
