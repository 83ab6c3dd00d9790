"""Reductions NumPy composes from others: ``where=``, the nan-functions, ``np.average``,
``np.ptp``, ``np.count_nonzero``, ``np.linalg.norm`` and ``ufunc.reduce`` beyond the
reduction ops.

Each is traced with the steps and dtypes of NumPy's own implementation (``_methods.py``,
``lib/_nanfunctions_impl.py``, ``linalg/_linalg.py``), so results round as NumPy's do, and the
partitioner fuses them: a nan-reduction is one kernel (the NaN test is its prologue), a mean
with ``where=`` counts and sums in the same pass.

Where NumPy raises on values (an all-NaN slice in ``nanargmax``, weights summing to zero in
``average``), the device cannot: traced values give NaN/inf or index 0 there; host-known
values (constant weights) raise NumPy's error before launching.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.frontend.dispatch import (
    FUNCTIONS,
    UFUNC_METHODS,
    implements,
    unsupported_ufunc_method,
)
from fusejit.frontend.numpy import complex as numpy_complex
from fusejit.frontend.numpy.build import _write_out
from fusejit.frontend.numpy.fold import fold_reduce
from fusejit.frontend.numpy.reductions import (
    _NOVALUE,
    _mask,
    _max,
    _mean,
    _min,
    _reduce,
    _sum,
    _var,
    where_,
)
from fusejit.frontend.trace import TensorProxy, broadcast_to, cast, lift, reshape
from fusejit.frontend.trace import where as select  # (``where`` is the reductions' keyword)
from fusejit.frontend.ufuncs import apply_ufunc
from fusejit.ir import shapes
from fusejit.errors import UnsupportedOperationError
from fusejit.ir.graph import const
from fusejit.ir.ops import REDUCE_OF_UFUNC, Op

# -- nan-functions --------------------------------------------------------------------------------


def _replace_nan(a: Any, value: float) -> tuple[TensorProxy, TensorProxy | None]:
    """NumPy's ``_replace_nan``: NaNs replaced by ``value`` and the NaN mask (None for
    non-float arrays, which have no NaNs)."""
    x = lift(a)
    if x.dtype.kind not in "fc":
        return x, None
    if x.dtype.kind == "c" and math.isinf(value):
        value = complex(value, value)  # (the lexicographic end: -inf+0j is above -inf-5j)
    mask = apply_ufunc(np.isnan, (x,), {})
    return where_(x, apply_ufunc(np.logical_not, (mask,), {}), value), mask


@implements(np.nansum)
def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = _NOVALUE, where: Any = True) -> TensorProxy:
    x, _ = _replace_nan(a, 0)
    return _sum(x, axis, dtype, out, keepdims, initial, where)


@implements(np.nanprod)
def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False, initial: Any = _NOVALUE, where: Any = True) -> TensorProxy:
    x, _ = _replace_nan(a, 1)
    return _reduce(Op.PROD, x, axis, dtype, out, keepdims, initial, where)


def _nan_extremum(op: Op, a: Any, axis: Any, out: Any, keepdims: bool, initial: Any,
                  where: Any) -> TensorProxy:
    """fmax/fmin.reduce, as NumPy's nanmax/nanmin: NaNs skipped, NaN for an all-NaN slice."""
    x = lift(a)
    reduce = _max if op is Op.MAX else _min
    if x.dtype.kind not in "fc":
        return reduce(x, axis, out, keepdims, initial, where)
    isnan = apply_ufunc(np.isnan, (x,), {})
    skip = -np.inf if op is Op.MAX else np.inf
    skip = complex(skip, skip) if x.dtype.kind == "c" else skip  # (see _replace_nan)
    result = reduce(where_(x, apply_ufunc(np.logical_not, (isnan,), {}), skip), axis, None,
                    keepdims, initial, where)
    all_nan = _reduce(Op.ALL, isnan if where is True else apply_ufunc(
        np.logical_and, (isnan, _mask(x, where)), {}), axis, dt.BOOL, None, keepdims)
    if initial is not _NOVALUE and initial is not None:
        all_nan = TensorProxy(const(False, dt.BOOL, result.shape))
    result = select(all_nan, TensorProxy(const(np.nan, x.dtype)), result)
    return _write_out(result, out)


@implements(np.nanmax)
def nanmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = _NOVALUE, where: Any = True) -> TensorProxy:
    return _nan_extremum(Op.MAX, a, axis, out, keepdims, initial, where)


@implements(np.nanmin)
def nanmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = _NOVALUE, where: Any = True) -> TensorProxy:
    return _nan_extremum(Op.MIN, a, axis, out, keepdims, initial, where)


def _nan_arg(name: str, fill: float) -> Any:
    def impl(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False
             ) -> TensorProxy:
        x, _ = _replace_nan(a, fill)
        return FUNCTIONS[getattr(np, name)](x, axis, out, keepdims=keepdims)
    impl.__name__ = impl.__qualname__ = f"nan{name}"
    impl.__doc__ = (f"np.nan{name}: np.{name} with NaNs replaced by {fill}. An all-NaN slice "
                    "gives index 0 (NumPy raises ValueError; the device cannot).")
    return impl


FUNCTIONS[np.nanargmax] = _nan_arg("argmax", -np.inf)
FUNCTIONS[np.nanargmin] = _nan_arg("argmin", np.inf)


@implements(np.nanmean)
def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False, *, where: Any = True) -> TensorProxy:
    x, mask = _replace_nan(a, 0)
    if mask is None:
        return _mean(x, axis, dtype, out, keepdims, where=where)
    keep = apply_ufunc(np.logical_not, (mask,), {})
    cnt = _sum(keep, axis, np.intp, None, keepdims, _NOVALUE, where)
    tot = _sum(x, axis, dtype, None, keepdims, _NOVALUE, where)
    avg = TensorProxy(cast(apply_ufunc(np.true_divide, (tot, cnt), {}).node, tot.dtype))
    return _write_out(avg, out)


@implements(np.nanvar)
def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
           keepdims: bool = False, *, where: Any = True, mean: Any = None,
           correction: Any = None) -> TensorProxy:
    if mean is not None:
        raise UnsupportedOperationError("np.nanvar(..., mean=...) is not supported inside "
                                        "@fuse")
    if correction is not None:
        ddof = correction
    x, mask = _replace_nan(a, 0)
    if mask is None:
        return _var(x, axis, dtype, out, ddof, keepdims, where=where)
    keep = apply_ufunc(np.logical_not, (mask,), {})
    cnt = _sum(keep, axis, np.intp, None, True, _NOVALUE, where)
    avg = _sum(x, axis, dtype, None, True, _NOVALUE, where)
    avg = TensorProxy(cast(apply_ufunc(np.true_divide, (avg, cnt), {}).node, avg.dtype))
    dev = TensorProxy(cast(apply_ufunc(np.subtract, (x, avg), {}).node, x.dtype))
    dev = where_(dev, keep, 0)
    if dev.dtype.kind == "c":  # NumPy: (dev * dev.conj()).real
        sqr = numpy_complex.real(apply_ufunc(np.multiply, (
            dev, apply_ufunc(np.conjugate, (dev,), {})), {}))
    else:
        sqr = apply_ufunc(np.multiply, (dev, dev), {})
    var = _sum(sqr, axis, dtype, None, keepdims, _NOVALUE, where)
    dof = apply_ufunc(np.subtract, (TensorProxy(reshape(cnt.node, var.shape)), ddof), {})
    var = TensorProxy(cast(apply_ufunc(np.true_divide, (var, dof), {}).node, var.dtype))
    var = select(apply_ufunc(np.less_equal, (dof, 0), {}), TensorProxy(const(np.nan, var.dtype)),
                var)
    return _write_out(var, out)


@implements(np.nanstd)
def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
           keepdims: bool = False, *, where: Any = True, mean: Any = None,
           correction: Any = None) -> TensorProxy:
    var = nanvar(a, axis, dtype, None, ddof, keepdims, where=where, mean=mean,
                 correction=correction)
    return _write_out(apply_ufunc(np.sqrt, (var,), {}), out)


# -- average, ptp, count_nonzero -------------------------------------------------------------------


@implements(np.average)
def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *,
            keepdims: bool = False) -> Any:
    x = lift(a)
    axes = None if axis is None else shapes.normalize_axes(axis, x.ndim)
    if weights is None:
        avg = _mean(x, axes, keepdims=keepdims)
        scl = TensorProxy(const(x.size / max(avg.size, 1), avg.dtype, avg.shape))
    else:
        static = None if isinstance(weights, TensorProxy) else np.asarray(weights)
        w = lift(weights)
        result_dtype = (dt.result_type(x.dtype, w.dtype, dt.FLOAT64) if x.dtype.kind in "biu"
                        else dt.result_type(x.dtype, w.dtype))
        if x.shape != w.shape:
            if axes is None:
                raise TypeError("Axis must be specified when shapes of a and weights differ.")
            if w.shape != tuple(x.shape[ax] for ax in axes):
                raise ValueError("Shape of weights must be consistent with shape of a along "
                                 "specified axis.")
            w = w.transpose(tuple(np.argsort(axes)))
            w = TensorProxy(reshape(w.node, tuple(s if ax in axes else 1
                                                  for ax, s in enumerate(x.shape))))
            if static is not None:
                static = np.reshape(np.transpose(static, np.argsort(axes)), w.shape)
        if static is not None and np.any(np.sum(static, axis=axes, dtype=result_dtype) == 0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        scl = _sum(w, axes, result_dtype, None, keepdims)
        product = apply_ufunc(np.multiply, (x, w), {"dtype": result_dtype})
        avg = apply_ufunc(np.true_divide, (_sum(product, axes, None, None, keepdims), scl), {})
    if returned:
        if scl.shape != avg.shape:
            scl = TensorProxy(broadcast_to(scl.node, avg.shape))
        return avg, scl
    return avg


@implements(np.ptp)
def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> TensorProxy:
    result = apply_ufunc(np.subtract, (_max(a, axis, None, keepdims),
                                       _min(a, axis, None, keepdims)), {})
    return _write_out(result, out)


@implements(np.count_nonzero)
def count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False) -> TensorProxy:
    x = lift(a)
    return _sum(TensorProxy(cast(x.node, dt.BOOL)), axis, np.intp, None, keepdims)


# -- np.linalg.norm --------------------------------------------------------------------------------


def _abs(x: TensorProxy) -> TensorProxy:
    return apply_ufunc(np.absolute, (x,), {})


@implements(np.linalg.norm)
def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> TensorProxy:
    """NumPy's linalg.norm for real arrays: vector norms of any order, the Frobenius norm and
    the matrix 1/-1/inf/-inf norms; the singular-value norms (2, -2, 'nuc') need an SVD."""
    v = lift(x)
    if v.dtype.kind == "c":  # (NumPy: the norms of complex values are those of their moduli)
        v = _abs(v)
    if v.dtype.kind not in "f":
        v = TensorProxy(cast(v.node, dt.FLOAT64))
    nd = v.ndim
    if axis is None and (ord is None or (ord in ("f", "fro") and nd == 2)
                         or (ord == 2 and nd == 1)):
        flat = TensorProxy(reshape(v.node, (v.size,)))
        ret = apply_ufunc(np.sqrt, (_sum(apply_ufunc(np.multiply, (flat, flat), {})),), {})
        return TensorProxy(reshape(ret.node, (1,) * nd)) if keepdims else ret
    if axis is None:
        axis = tuple(range(nd))
    elif not isinstance(axis, tuple):
        try:
            axis = (int(axis),)
        except Exception as e:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from e
    if len(axis) == 1:
        if isinstance(ord, str):
            raise ValueError(f"Invalid norm order '{ord}' for vectors")
        if ord == np.inf:
            return _max(_abs(v), axis, None, keepdims)
        if ord == -np.inf:
            return _min(_abs(v), axis, None, keepdims)
        if ord == 0:
            nonzero = apply_ufunc(np.not_equal, (v, 0), {})
            return _sum(TensorProxy(cast(nonzero.node, v.dtype)), axis, None, None, keepdims)
        if ord == 1:
            return _sum(_abs(v), axis, None, None, keepdims)
        if ord is None or ord == 2:
            s = apply_ufunc(np.multiply, (v, v), {})
            return apply_ufunc(np.sqrt, (_sum(s, axis, None, None, keepdims),), {})
        absx = apply_ufunc(np.power, (_abs(v), ord), {})
        ret = _sum(absx, axis, None, None, keepdims)
        return apply_ufunc(np.power, (ret, apply_ufunc(np.reciprocal, (np.asarray(
            ord, dtype=ret.dtype),), {})), {})
    if len(axis) != 2:
        raise ValueError("Improper number of dimensions to norm.")
    row, col = (shapes.normalize_axis(a, nd) for a in axis)
    if row == col:
        raise ValueError("Duplicate axes given.")
    if ord in (2, -2, "nuc"):  # singular values: a Jacobi kernel per matrix
        from fusejit.frontend.numpy.svd import matrix_svd_norm

        return matrix_svd_norm(v, row, col, ord, keepdims)
    if ord in (1, -1):
        pick = _max if ord == 1 else _min
        ret = pick(_sum(_abs(v), row), col - (col > row), None, False)
    elif ord in (np.inf, -np.inf):
        pick = _max if ord == np.inf else _min
        ret = pick(_sum(_abs(v), col), row - (row > col), None, False)
    elif ord in (None, "fro", "f"):
        ret = apply_ufunc(np.sqrt, (_sum(apply_ufunc(np.multiply, (v, v), {}), (row, col)),),
                          {})
    else:
        raise ValueError("Invalid norm order for matrices.")
    if keepdims:
        shape = list(v.shape)
        shape[row] = shape[col] = 1
        ret = TensorProxy(reshape(ret.node, tuple(shape)))
    return ret


# -- ufunc.reduce beyond the reduction ops ---------------------------------------------------------


def _logaddexp_reduce(ufunc: np.ufunc, x: TensorProxy, axis: Any, dtype: Any, out: Any,
                      keepdims: bool = False, initial: Any = _NOVALUE,
                      where: Any = True) -> TensorProxy:
    """logaddexp.reduce as ``m + log(sum(exp(x - m)))`` with ``m`` the maximum (one row
    kernel): within logaddexp's documented ULP bound of NumPy's pairwise fold, exact at the
    edges (all -inf gives -inf, an inf gives inf, NaN propagates)."""
    exp, log = (np.exp, np.log) if ufunc is np.logaddexp else (np.exp2, np.log2)
    if where is not True:
        x = where_(x, _mask(x, where), -np.inf)
    if dtype is not None:
        x = TensorProxy(cast(x.node, np.dtype(dtype)))
    if x.dtype.kind != "f":
        x = TensorProxy(cast(x.node, apply_ufunc(ufunc, (x, x), {}).dtype))
    m = _max(x, axis, None, True)
    finite = apply_ufunc(np.isfinite, (m,), {})
    shift = select(finite, m, TensorProxy(const(0, m.dtype)))
    total = _sum(apply_ufunc(exp, (apply_ufunc(np.subtract, (x, shift), {}),), {}), axis, None,
                 None, True)
    ret = apply_ufunc(np.add, (apply_ufunc(log, (total,), {}), shift), {})
    ret = select(finite, ret, m)  # -inf (all -inf), inf, NaN: the maximum is the answer
    if initial is not _NOVALUE and initial is not None:
        ret = apply_ufunc(ufunc, (ret, initial), {})
    if not keepdims:
        axes = shapes.normalize_axes(axis, x.ndim)
        ret = TensorProxy(reshape(ret.node, tuple(d for i, d in enumerate(x.shape)
                                                  if i not in axes)))
    return _write_out(ret, out)


def _extremum_reduce(ufunc: np.ufunc, x: TensorProxy, axis: Any, dtype: Any, out: Any,
                     keepdims: bool = False, initial: Any = _NOVALUE,
                     where: Any = True) -> TensorProxy:
    if dtype is not None:
        x = TensorProxy(cast(x.node, np.dtype(dtype)))
    op = Op.MAX if ufunc is np.fmax else Op.MIN
    return _nan_extremum(op, x, axis, out, keepdims, initial, where)


EXTRA_REDUCE = {np.logaddexp: _logaddexp_reduce, np.logaddexp2: _logaddexp_reduce,
                np.fmax: _extremum_reduce, np.fmin: _extremum_reduce}


def ufunc_reduce(ufunc: np.ufunc, inputs: Any, kwargs: dict[str, Any]) -> TensorProxy:
    """``ufunc.reduce(x, axis=0, ...)`` for the ufuncs of EXTRA_REDUCE."""
    kwargs = dict(kwargs)
    axis = kwargs.pop("axis", 0)
    return EXTRA_REDUCE[ufunc](ufunc, lift(inputs[0]), axis, kwargs.pop("dtype", None),
                               kwargs.pop("out", None), **kwargs)


def _reduce_method(ufunc: np.ufunc, inputs: Any, kwargs: dict[str, Any]) -> TensorProxy:
    """``ufunc.reduce``: one REDUCE node for the reduction ops' ufuncs, a reduction of
    EXTRA_REDUCE, else a fold of the binary ufunc (fold.py)."""
    if ufunc in REDUCE_OF_UFUNC:
        axis = kwargs.pop("axis", 0)
        return _reduce(REDUCE_OF_UFUNC[ufunc], inputs[0], axis, ufunc=ufunc, **kwargs)
    if ufunc in EXTRA_REDUCE:
        return ufunc_reduce(ufunc, inputs, kwargs)
    if ufunc.nin == 2 and ufunc.nout == 1 and ufunc.signature is None:
        return fold_reduce(ufunc, inputs[0], **kwargs)  # (subtract, gcd, ...)
    raise unsupported_ufunc_method(ufunc, "reduce")


UFUNC_METHODS["reduce"] = _reduce_method
