"""The NumPy functions and ndarray methods fusejit traces that need no module of their own
(where, clip, round, astype, the ``*_like`` constructors, ...), each written as NumPy defines
it, and the functions refused with a pointer to what to do instead.

They register into the tracer's dispatch table (``frontend.dispatch``) when this module is
imported, as the other modules of ``frontend.numpy`` do; a NumPy function no module registers
raises ``UnsupportedOperationError`` naming it. ``FUNCTIONS`` and ``METHODS`` are importable
from here too (the docs' API table reads them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fusejit.errors import UnsupportedOperationError
from fusejit.frontend.dispatch import FUNCTIONS, HOOKS, METHODS, implements
from fusejit.frontend.numpy import complex as numpy_complex
from fusejit.frontend.trace import (
    TensorProxy,
    _ptype,
    as_node,
    broadcast_to,
    cast,
    is_numpy_scalar,
    lift,
    to_operand,
    where,
)
from fusejit.frontend.ufuncs import apply_ufunc, check_output_cast, clip
from fusejit.ir import dtypes as dt
from fusejit.ir import shapes
from fusejit.ir.graph import const


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
HOOKS["set_real"] = lambda z, value: numpy_complex.set_part(z, "real", value)  # z.real = value
HOOKS["set_imag"] = lambda z, value: numpy_complex.set_part(z, "imag", value)


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

