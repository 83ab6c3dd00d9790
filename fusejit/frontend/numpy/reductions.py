"""NumPy's reductions inside @fuse: the reduction ops (sum, prod, max, min, any, all and the
bitwise or/and/xor of ``np.bitwise_*.reduce``), argmax and argmin, and mean, var and std, as
functions and ndarray methods.

Each is one REDUCE node with NumPy's result dtype and NumPy's rules for empty axes; mean, var
and std are traced with the same steps and dtypes as NumPy's own ``_methods.py``, so results
round the same way. ``where=`` masks the excluded elements with the reduction's identity first.
The reductions NumPy composes from these (nan-functions, average, norm, ufunc.reduce beyond
the reduction ops) are in ``reduce``, which builds on this module as most of
``frontend.numpy`` does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusejit.errors import UnsupportedOperationError
from fusejit.frontend.dispatch import implements
from fusejit.frontend.numpy import complex as numpy_complex
from fusejit.frontend.trace import TensorProxy, as_node, broadcast_to, cast, lift, reshape
from fusejit.frontend.trace import where as select  # (``where`` is the reductions' keyword)
from fusejit.frontend.ufuncs import apply_ufunc
from fusejit.ir import dtypes as dt
from fusejit.ir import shapes
from fusejit.ir.graph import Node, const
from fusejit.ir.ops import OPS, Op

#: ``initial``'s default: NumPy's own sentinel, so "not given" and ``initial=None`` differ
_NOVALUE = getattr(np, "_NoValue", None)


# -- where= ---------------------------------------------------------------------------------------


# NumPy's ufunc.identity of each reduction op (cast to the dtype: -1 is all ones; max and min
# have none)
_IDENTITY = {Op.SUM: 0, Op.PROD: 1, Op.ANY: False, Op.ALL: True, Op.BIT_OR: 0, Op.BIT_AND: -1,
             Op.BIT_XOR: 0}


def _mask(x: TensorProxy, where: Any) -> TensorProxy:
    """``where=`` as NumPy takes it: a bool array (cast 'safe') broadcast to ``x``."""
    w = lift(where)
    if not np.can_cast(w.dtype, dt.BOOL, casting="safe"):
        raise TypeError(f"Cannot cast array data from {w.dtype!r} to dtype('bool') according "
                        "to the rule 'safe'")
    return TensorProxy(broadcast_to(w.node, x.shape))


def masked(op: Op, x: TensorProxy, where: Any, initial: Any) -> TensorProxy:
    """``x`` with the elements ``where`` excludes replaced by the reduction's identity (by
    ``initial`` for max/min, which NumPy requires there)."""
    if op in (Op.MAX, Op.MIN) and (initial is _NOVALUE or initial is None):
        raise ValueError(f"reduction operation '{OPS[op].ufunc.__name__}' does not have an "
                         "identity, so to use a where mask one has to specify 'initial'")
    fill = initial if op in (Op.MAX, Op.MIN) else _IDENTITY[op]
    return where_(x, _mask(x, where), fill)


def where_(x: TensorProxy, keep: TensorProxy, fill: Any) -> TensorProxy:
    """``x`` where ``keep``, else ``fill`` cast to x's dtype (NumPy's copyto into a copy)."""
    return select(keep, x, TensorProxy(as_node(np.asarray(fill).astype(x.dtype)[()], x.dtype)))


def masked_count(x: TensorProxy, axis: Any, where: Any, keepdims: bool) -> TensorProxy:
    """NumPy's ``_count_reduce_items`` under where=: the mask summed as intp."""
    return _sum(_mask(x, where), axis, np.intp, None, keepdims)


# -- reductions -----------------------------------------------------------------------------------


def _reduce(op: Op, a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False, initial: Any = _NOVALUE, where: Any = True,
            ufunc: np.ufunc | None = None) -> TensorProxy:
    """One REDUCE node with NumPy's result dtype, then NumPy's empty-axis rules. ``ufunc``:
    the one whose ``reduce`` this is, when not the op's own (np.logical_xor for BIT_XOR)."""
    x = lift(a)
    axis = _zero_d_axis(x, axis)
    reference = ufunc if ufunc is not None else OPS[op].ufunc
    probe_kw = {} if dtype is None else {"dtype": np.dtype(dtype)}
    out_dtype = reference.reduce(np.zeros(1, x.dtype), **probe_kw).dtype
    out_dtype = dt.check_supported(out_dtype, "reduction result")
    x = TensorProxy(cast(x.node, out_dtype))  # (before masking: the identity in that dtype)
    if where is not True:  # excluded elements become the reduction's identity (or initial)
        x = masked(op, x, where, initial)
    axes = shapes.normalize_axes(axis, x.ndim)
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    empty = any(x.shape[i] == 0 for i in axes)
    if op in (Op.MAX, Op.MIN) and empty and initial is _NOVALUE:
        raise ValueError(f"zero-size array to reduction operation {reference.__name__} which has "
                         "no identity")
    if empty:  # nothing to reduce: the identity (0, 1, False, True, all ones; -inf before
        # initial=), in the result's dtype
        identity = _lowest(out_dtype) if op is Op.MAX else _highest(out_dtype) \
            if op is Op.MIN else np.asarray(_IDENTITY[op]).astype(out_dtype)[()]
        node = const(identity, out_dtype, kept)
    else:
        node = Node.make(op, out_dtype, kept, (x.node,), axes)
    result = TensorProxy(node)
    if initial is not _NOVALUE and initial is not None:
        result = apply_ufunc(reference, (result, initial), {})
        result = TensorProxy(cast(result.node, out_dtype))
    if not keepdims:
        result = TensorProxy(reshape(result.node, tuple(d for i, d in enumerate(x.shape)
                                                       if i not in axes)))
    if out is not None:
        out.write(Ellipsis, result, as_output=True)
        return out
    return result


def _zero_d_axis(x: TensorProxy, axis: Any) -> Any:
    """NumPy reduces a 0-d value along an integer axis 0 or -1 (but not a tuple, and mean and
    var do not): as over no axis at all."""
    if x.ndim == 0 and isinstance(axis, (int, np.integer)) and not isinstance(axis, bool) \
            and axis in (0, -1):
        return None
    return axis


def _lowest(dtype: np.dtype) -> Any:
    return -np.inf if dtype.kind == "f" else False if dtype.kind == "b" else np.iinfo(dtype).min


def _highest(dtype: np.dtype) -> Any:
    return np.inf if dtype.kind == "f" else True if dtype.kind == "b" else np.iinfo(dtype).max


def _count(x: TensorProxy, axis: Any, where: Any = True, keepdims: bool = False) -> Any:
    """Elements per result: an int, or under where= NumPy's traced intp count."""
    if where is not True:
        return masked_count(x, axis, where, keepdims)
    axes = shapes.normalize_axes(axis, x.ndim)
    return math.prod(x.shape[i] for i in axes)


@implements(np.sum, method="sum")
def _sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = _NOVALUE, where: Any = True) -> TensorProxy:
    return _reduce(Op.SUM, a, axis, dtype, out, keepdims, initial, where)


@implements(np.prod, method="prod")
def _prod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
          initial: Any = _NOVALUE, where: Any = True) -> TensorProxy:
    return _reduce(Op.PROD, a, axis, dtype, out, keepdims, initial, where)


@implements(np.max, np.amax, method="max")
def _max(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = _NOVALUE, where: Any = True) -> TensorProxy:
    return _reduce(Op.MAX, a, axis, None, out, keepdims, initial, where)


@implements(np.min, np.amin, method="min")
def _min(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = _NOVALUE, where: Any = True) -> TensorProxy:
    return _reduce(Op.MIN, a, axis, None, out, keepdims, initial, where)


@implements(np.any, method="any")
def _any(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *,
         where: Any = True) -> TensorProxy:
    return _reduce(Op.ANY, a, axis, dt.BOOL, out, keepdims, _NOVALUE, where)


@implements(np.all, method="all")
def _all(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *,
         where: Any = True) -> TensorProxy:
    return _reduce(Op.ALL, a, axis, dt.BOOL, out, keepdims, _NOVALUE, where)


def _arg_reduce(op: Op, a: Any, axis: Any, out: Any, keepdims: bool) -> TensorProxy:
    x = lift(a)
    axis = _zero_d_axis(x, axis)
    name = "argmax" if op is Op.ARGMAX else "argmin"
    if axis is None and x.ndim > 1:
        # over all axes at once: the reduced index runs row-major, so it is the flat index;
        # and the node shares a kernel with the other full reductions of x (x.max(), x.sum())
        node = Node.make(op, dt.INT64, (1,) * x.ndim, (x.node,), tuple(range(x.ndim)))
        result = TensorProxy(node if keepdims else reshape(node, ()))
    elif axis is None:
        flat = TensorProxy(reshape(x.node, (x.size,)))
        result = _arg_reduce(op, flat, 0, None, False)
        if keepdims:
            result = TensorProxy(reshape(result.node, (1,) * x.ndim))
    else:
        ax = shapes.normalize_axis(axis, x.ndim)
        if x.shape[ax] == 0:
            raise ValueError(f"attempt to get {name} of an empty sequence")
        kept = tuple(1 if i == ax else d for i, d in enumerate(x.shape))
        result = TensorProxy(Node.make(op, dt.INT64, kept, (x.node,), (ax,)))
        if not keepdims:
            result = TensorProxy(reshape(result.node, tuple(d for i, d in enumerate(x.shape)
                                                           if i != ax)))
    if out is not None:
        out.write(Ellipsis, result, as_output=True)
        return out
    return result


@implements(np.argmax, method="argmax")
def _argmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False
            ) -> TensorProxy:
    if axis is None and lift(a).size == 0:
        raise ValueError("attempt to get argmax of an empty sequence")
    return _arg_reduce(Op.ARGMAX, a, axis, out, keepdims)


@implements(np.argmin, method="argmin")
def _argmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False
            ) -> TensorProxy:
    if axis is None and lift(a).size == 0:
        raise ValueError("attempt to get argmin of an empty sequence")
    return _arg_reduce(Op.ARGMIN, a, axis, out, keepdims)


def _divide_by_count(total: TensorProxy, count: Any, result_dtype: np.dtype) -> TensorProxy:
    """NumPy's ``true_divide(ret, rcount, casting='unsafe')`` with rcount an intp (a traced
    intp array under where=)."""
    count = count if isinstance(count, TensorProxy) else np.intp(count)
    quotient = apply_ufunc(np.true_divide, (total, count), {})
    return TensorProxy(cast(quotient.node, result_dtype))


@implements(np.mean, method="mean")
def _mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
          *, where: Any = True) -> TensorProxy:
    x = lift(a)
    is_float16_result = False
    if dtype is None:
        if x.dtype.kind in "biu":
            dtype = dt.FLOAT64
        elif x.dtype == dt.FLOAT16:
            dtype, is_float16_result = dt.FLOAT32, True
    total = _reduce(Op.SUM, x, axis, dtype, None, keepdims, _NOVALUE, where)
    result = _divide_by_count(total, _count(x, axis, where, keepdims), total.dtype)
    if is_float16_result:
        result = TensorProxy(cast(result.node, dt.FLOAT16))
    if out is not None:
        out.write(Ellipsis, result, as_output=True)
        return out
    return result


@implements(np.var, method="var")
def _var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
         keepdims: bool = False, *, where: Any = True, mean: Any = None,
         correction: Any = None) -> TensorProxy:
    """NumPy's ``_var``: two passes (mean, then squared deviations), same dtypes."""
    if mean is not None:
        raise UnsupportedOperationError("np.var(..., mean=...) is not supported inside @fuse")
    if correction is not None:
        ddof = correction
    x = lift(a)
    count = _count(x, axis, where, True)
    if dtype is None and x.dtype.kind in "biu":
        dtype = dt.FLOAT64
    arrmean = _reduce(Op.SUM, x, axis, dtype, None, True, _NOVALUE, where)
    arrmean = _divide_by_count(arrmean, count, arrmean.dtype)
    dev = apply_ufunc(np.subtract, (x, arrmean), {})
    sq = numpy_complex.squared_magnitude(dev) if dev.dtype.kind == "c" else \
        apply_ufunc(np.multiply, (dev, dev), {})
    total = _reduce(Op.SUM, sq, axis, dtype, None, keepdims, _NOVALUE, where)
    if isinstance(count, TensorProxy):
        count = TensorProxy(reshape(count.node, total.shape))
        dof = apply_ufunc(np.maximum, (apply_ufunc(np.subtract, (count, ddof), {}), 0), {})
    else:
        dof = max(count - ddof, 0)
    result = _divide_by_count(total, dof, total.dtype)
    if out is not None:
        out.write(Ellipsis, result, as_output=True)
        return out
    return result


@implements(np.std, method="std")
def _std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
         keepdims: bool = False, *, where: Any = True, mean: Any = None,
         correction: Any = None) -> TensorProxy:
    var = _var(a, axis, dtype, None, ddof, keepdims, where=where, mean=mean,
               correction=correction)
    result = apply_ufunc(np.sqrt, (var,), {})
    if out is not None:
        out.write(Ellipsis, result, as_output=True)
        return out
    return result
