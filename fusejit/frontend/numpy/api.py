"""The NumPy functions and ndarray methods fusejit traces, each written as NumPy defines it.

Reductions that NumPy composes from others (mean, var, std) are traced with the same steps and
dtypes as NumPy's own ``_methods.py``, so results round the same way. Anything not listed here
raises ``UnsupportedOperationError`` naming the function.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.frontend.numpy import complex as numpy_complex
from fusejit.ir import shapes
from fusejit.errors import UnsupportedOperationError
from fusejit.ir.graph import Node, const
from fusejit.ir.ops import REDUCE_OF_UFUNC, Op
from fusejit.frontend.trace import (
    TensorProxy,
    _ptype,
    apply_ufunc,
    as_node,
    broadcast_to,
    cast,
    check_output_cast,
    clip,
    is_numpy_scalar,
    lift,
    reshape,
    to_operand,
    where,
)

FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {}
METHODS: dict[str, Callable[..., Any]] = {}

_NOVALUE = getattr(np, "_NoValue", None)


def implements(*funcs: Callable[..., Any], method: str | None = None) -> Callable:
    def register(impl: Callable[..., Any]) -> Callable[..., Any]:
        for f in funcs:
            FUNCTIONS[f] = impl
        if method:
            METHODS[method] = impl
        return impl
    return register


def array_function(func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    impl = FUNCTIONS.get(func)
    if impl is None:
        name = getattr(func, "__name__", repr(func))
        module = getattr(func, "__module__", "numpy") or "numpy"
        prefix = "np." + ("linalg." if "linalg" in module else "fft." if "fft" in module else "")
        raise UnsupportedOperationError(
            f"{prefix}{name} is not supported inside @fuse (fusejit fuses elementwise work, "
            "reductions and basic indexing); call it outside the fused function")
    return impl(*args, **kwargs)


def ufunc_method(ufunc: np.ufunc, method: str, inputs: Any, kwargs: dict[str, Any]) -> Any:
    if method == "__call__":
        from fusejit.frontend.numpy.elementwise import MULTI_OUTPUT

        if ufunc in MULTI_OUTPUT:
            return MULTI_OUTPUT[ufunc](inputs, kwargs)
        return apply_ufunc(ufunc, inputs, kwargs)
    if method == "reduce" and ufunc in REDUCE_OF_UFUNC:
        x = inputs[0]
        axis = kwargs.pop("axis", 0)
        return _reduce(REDUCE_OF_UFUNC[ufunc], x, axis, **kwargs)
    from fusejit.frontend.numpy.reduce import EXTRA_REDUCE, ufunc_reduce

    if method == "reduce" and ufunc in EXTRA_REDUCE:
        return ufunc_reduce(ufunc, inputs, kwargs)
    if method == "accumulate":
        from fusejit.frontend.numpy.scan import ufunc_accumulate

        return ufunc_accumulate(ufunc, inputs, kwargs)
    if method == "outer" and ufunc.nin == 2:
        a, b = (lift(v) for v in inputs)
        a2 = TensorProxy(reshape(a.node, a.shape + (1,) * b.ndim))
        return apply_ufunc(ufunc, (a2, b), kwargs)
    raise UnsupportedOperationError(f"np.{ufunc.__name__}.{method} is not supported inside @fuse")


# -- elementwise functions ------------------------------------------------------------------------


@implements(np.where)
def _where(cond: Any, x: Any = None, y: Any = None) -> TensorProxy:
    if x is None or y is None:
        raise UnsupportedOperationError(
            "np.where(cond) with one argument returns indices (a data-dependent shape) and "
            "cannot be fused; use np.where(cond, x, y)")
    result = where(cond, x, y)
    result._array0d = True  # np.where returns an array even from 0-d operands, not a scalar
    return result


@implements(np.clip, method="clip")
def _clip(a: Any, a_min: Any = None, a_max: Any = None, out: Any = None, *,
          min: Any = None, max: Any = None, **kwargs: Any) -> TensorProxy:
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    if kwargs:
        raise UnsupportedOperationError(f"np.clip(..., {next(iter(kwargs))}=...) is not "
                                        "supported inside @fuse")
    x = to_operand(a)
    t = _ptype(x)
    if isinstance(t, np.dtype) and t.kind in "iu":
        # NumPy's _methods._clip: a Python int bound beyond the integer dtype's range clips
        # nothing and is dropped (NEP 50 would otherwise refuse to convert it)
        info = np.iinfo(t)
        lo = None if type(lo) is int and lo <= info.min else lo
        hi = None if type(hi) is int and hi >= info.max else hi
    if lo is None and hi is None:
        result = apply_ufunc(np.positive, (x,), {})
    else:
        result = clip(x, to_operand(lo), to_operand(hi))
    if out is not None:
        out.write(Ellipsis, result, as_output=True)
        return out
    return result


@implements(np.round, np.around, method="round")
def _round(a: Any, decimals: int = 0, out: Any = None) -> TensorProxy:
    """NumPy's PyArray_Round: integers are returned as they are for decimals >= 0; otherwise
    rint for decimals=0, else scale by 10**decimals into an array of the input's dtype (float64
    for integers), rint, unscale, and cast back. Bools are not integers there: rint gives
    float16, and scaling a bool fails NumPy's same_kind store back into a bool array."""
    x = lift(a)
    if x.dtype.kind == "c":  # NumPy rounds the parts as real arrays
        result = numpy_complex.from_parts(_round(numpy_complex.real(x), decimals),
                                          _round(numpy_complex.imag(x), decimals))
        return result if out is None else out.write(Ellipsis, result, as_output=True) or out
    if x.dtype.kind in "iu" and decimals >= 0:
        return TensorProxy(x.node)
    if decimals == 0:
        result = apply_ufunc(np.rint, (x,), {})
    else:
        scale, unscale = ((np.multiply, np.true_divide) if decimals > 0
                          else (np.true_divide, np.multiply))
        f = 10.0 ** abs(decimals)
        work = dt.FLOAT64 if x.dtype.kind in "iu" else x.dtype
        scaled = apply_ufunc(scale, (x, f), {})
        check_output_cast(scale.__name__, scaled.dtype, work)
        rounded = apply_ufunc(np.rint, (TensorProxy(cast(scaled.node, work)),), {})
        result = apply_ufunc(unscale, (rounded, f), {})
        result = TensorProxy(cast(result.node, x.dtype))
    if out is not None:
        out.write(Ellipsis, result, as_output=True)
        return out
    return result


@implements(np.fix)
def _fix(x: Any, out: Any = None) -> TensorProxy:
    x = lift(x)
    return where(apply_ufunc(np.greater_equal, (x, 0), {}), apply_ufunc(np.floor, (x,), {}),
                 apply_ufunc(np.ceil, (x,), {}))


@implements(np.nan_to_num)
def _nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
                neginf: float | None = None) -> TensorProxy:
    x = lift(x)
    if x.dtype.kind == "c":  # each part on its own, with the real dtype's limits
        return numpy_complex.from_parts(
            *(_nan_to_num(p(x), copy, nan, posinf, neginf)
              for p in (numpy_complex.real, numpy_complex.imag)))
    if x.dtype.kind != "f":  # NumPy returns a copy (a write into it must not reach x)
        return TensorProxy(x.node) if copy else x
    info = np.finfo(x.dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    x = where(apply_ufunc(np.isnan, (x,), {}), TensorProxy(const(nan, x.dtype)), x)
    x = where(apply_ufunc(np.isinf, (x,), {}),
              where(apply_ufunc(np.greater, (x, 0), {}), TensorProxy(const(hi, x.dtype)),
                    TensorProxy(const(lo, x.dtype))), x)
    return x


FUNCTIONS.update({np.real: numpy_complex.real, np.imag: numpy_complex.imag,
                  np.angle: numpy_complex.angle, np.iscomplexobj: numpy_complex.iscomplexobj,
                  np.isrealobj: numpy_complex.isrealobj, np.iscomplex: numpy_complex.iscomplex,
                  np.isreal: numpy_complex.isreal})
METHODS["conj"] = METHODS["conjugate"] = numpy_complex.conjugate


def _isinf_signed(positive: bool) -> Callable[..., TensorProxy]:
    def impl(x: Any, out: Any = None) -> TensorProxy:
        x = lift(x)
        side = np.greater if positive else np.less
        return apply_ufunc(np.logical_and, (apply_ufunc(np.isinf, (x,), {}),
                                            apply_ufunc(side, (x, 0), {})), {})
    return impl


FUNCTIONS[np.isposinf] = _isinf_signed(True)
FUNCTIONS[np.isneginf] = _isinf_signed(False)


@implements(method="astype")
def _astype(x: Any, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
            copy: bool = True) -> TensorProxy:
    x = lift(x)
    target = dt.check_supported(np.dtype(dtype), "astype target")
    if not np.can_cast(x.dtype, target, casting=casting):
        raise TypeError(f"Cannot cast array data from {x.dtype!r} to {target!r} according to "
                        f"the rule '{casting}'")
    result = TensorProxy(cast(x.node, target))
    result._array0d = not is_numpy_scalar(x)  # a 0-d array's astype is an array
    return result


@implements(np.copy, method="copy")
def _copy(x: Any, *args: Any, **kwargs: Any) -> TensorProxy:
    result = TensorProxy(lift(x).node)
    result._array0d = not is_numpy_scalar(x)
    return result


def _filled_like(fill: float | None) -> Callable[..., TensorProxy]:
    def impl(a: Any, *args: Any, dtype: Any = None, shape: Any = None, **kwargs: Any
             ) -> TensorProxy:
        a = lift(a)
        value = fill
        if fill is None:  # full_like(a, fill_value, dtype=None)
            value = args[0] if args else kwargs.pop("fill_value")
            args = args[1:]
        if args:
            dtype = args[0]
        target = dt.check_supported(np.dtype(dtype) if dtype is not None else a.dtype)
        shp = tuple(np.atleast_1d(shape)) if shape is not None else a.shape
        # NumPy fills with copyto(..., casting='unsafe'): 7.5 fills an int8 array with 7, and
        # a Python int out of the dtype's range raises OverflowError (NEP 50), as in as_node
        node = as_node(to_operand(value), target)
        result = TensorProxy(broadcast_to(node, tuple(map(int, shp))))
        result._array0d = True  # an array even when 0-d (mutable, unlike a NumPy scalar)
        return result
    return impl


FUNCTIONS[np.zeros_like] = _filled_like(0)
FUNCTIONS[np.empty_like] = _filled_like(0)
FUNCTIONS[np.ones_like] = _filled_like(1)
FUNCTIONS[np.full_like] = _filled_like(None)


@implements(method="fill")
def _fill(x: TensorProxy, value: Any) -> None:
    x.write(Ellipsis, value)


@implements(np.shape)
def _np_shape(x: Any) -> tuple[int, ...]:
    return lift(x).shape


@implements(np.ndim)
def _np_ndim(x: Any) -> int:
    return lift(x).ndim


@implements(np.size)
def _np_size(x: Any, axis: int | None = None) -> int:
    x = lift(x)
    return x.size if axis is None else x.shape[shapes.normalize_axis(axis, x.ndim)]


@implements(np.result_type)
def _result_type(*args: Any) -> np.dtype:
    return dt.result_type(*(_ptype(a) if not isinstance(a, (np.dtype, type, str)) else
                            np.dtype(a) for a in args))


# -- reductions -----------------------------------------------------------------------------------


def _reduce(op: Op, a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False, initial: Any = _NOVALUE, where: Any = True) -> TensorProxy:
    """One REDUCE node with NumPy's result dtype, then NumPy's empty-axis rules."""
    x = lift(a)
    axis = _zero_d_axis(x, axis)
    if where is not True:  # excluded elements become the reduction's identity (or initial)
        from fusejit.frontend.numpy.reduce import masked

        x = masked(op, x, where, initial)
    axes = shapes.normalize_axes(axis, x.ndim)
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    empty = any(x.shape[i] == 0 for i in axes)
    reference = {Op.SUM: np.add, Op.PROD: np.multiply, Op.MAX: np.maximum, Op.MIN: np.minimum,
                 Op.ANY: np.logical_or, Op.ALL: np.logical_and}[op]
    probe_kw = {} if dtype is None else {"dtype": np.dtype(dtype)}
    out_dtype = reference.reduce(np.zeros(1, x.dtype), **probe_kw).dtype
    out_dtype = dt.check_supported(out_dtype, "reduction result")
    if op in (Op.MAX, Op.MIN) and empty and initial is _NOVALUE:
        raise ValueError(f"zero-size array to reduction operation {reference.__name__} which has "
                         "no identity")
    if empty:  # nothing to reduce: the identity (0, 1, False, True; -inf before initial=)
        identity = {Op.SUM: 0, Op.PROD: 1, Op.ANY: False, Op.ALL: True,
                    Op.MAX: _lowest(out_dtype), Op.MIN: _highest(out_dtype)}[op]
        node = const(identity, out_dtype, kept)
    else:
        node = Node.make(op, out_dtype, kept, (cast(x.node, out_dtype),), axes)
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
        from fusejit.frontend.numpy.reduce import masked_count

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


# -- not fusible, with a pointer to what to do instead ---------------------------------------------


def _unsupported(what: str, instead: str) -> Callable[..., Any]:
    def impl(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOperationError(f"{what} is not supported inside @fuse: {instead}")
    impl.refused = instead  # type: ignore[attr-defined]  # (the docs' API table reads it)
    return impl


for _f, _why in {
    np.sort: "sorting is not elementwise; sort outside the fused function",
    np.argsort: "sorting is not elementwise; sort outside the fused function",
    np.nonzero: "its result shape depends on the data; use np.where(cond, x, y)",
    np.unique: "its result shape depends on the data",
}.items():
    FUNCTIONS[_f] = _unsupported(f"np.{_f.__name__}", _why)


# NumPy functions implemented in their own modules register into FUNCTIONS / METHODS on import
# (the shape functions first: the others import transpose and _as_view_source from here)
from fusejit.frontend.numpy import shape as numpy_shape  # noqa: E402
from fusejit.frontend.numpy.shape import _as_view_source, swapaxes, transpose  # noqa: E402,F401
from fusejit.frontend.numpy import (
    build as numpy_build,
    elementwise as numpy_elementwise,
    gather as numpy_gather,
    reduce as numpy_reduce,
)  # noqa: E402,F401
from fusejit.frontend.numpy import split as numpy_split  # noqa: E402,F401
from fusejit.frontend.numpy import scan as numpy_scan, svd as numpy_svd  # noqa: E402,F401
