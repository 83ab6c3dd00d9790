"""Scans: ``np.cumsum``, ``np.cumprod``, ``np.nancumsum``, ``np.nancumprod``, the array methods
and ``ufunc.accumulate``, each traced into one SCAN node (fusejit/ir/ops.py) along one axis.

Dtypes are NumPy's: the loop dtype is ``dtype=``, else ``out``'s dtype where the input casts to
it safely, else what NumPy's reduction resolution picks (``add``/``multiply`` of bools and small
integers accumulate in the platform integer); the input is cast to it (unsafely, as NumPy's
accumulate does) and the scan runs in it, integers wrapping. ``axis=None`` scans the array flattened in C order.

Only associative ufuncs are scanned (``ops.SCAN_COMBINE``): a work-group scans in a tree on
GPUs. ``subtract.accumulate`` is the sum of the first element and the others negated (exactly,
in NumPy's order: ``a - b`` is ``a + (-b)`` in IEEE and in wrapping integers). The others
(``divide``, ``power``, ...) are sequential recurrences and are refused with a pointer to what
to write instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir import shapes
from fusejit.errors import UnsupportedOperationError
from fusejit.ir.graph import Node, const
from fusejit.frontend.dispatch import FUNCTIONS, UFUNC_METHODS, implements
from fusejit.frontend.trace import TensorProxy, cast, lift, reshape
from fusejit.frontend.trace import where as select
from fusejit.frontend.ufuncs import apply_ufunc, single_out
from fusejit.ir.ops import OP_OF_UFUNC, SCAN_COMBINE, Op


def _loop_dtype(ufunc: np.ufunc, x: np.dtype, dtype: Any, out: Any) -> np.dtype:
    """The dtype ``ufunc.accumulate`` computes in (see the module docstring)."""
    if dtype is not None:
        want = np.dtype(dtype)  # (NumPy's TypeError for a bad dtype)
        if ufunc.resolve_dtypes((want, want, None))[2] != want:
            raise TypeError("No loop matching the specified signature and casting was found "
                            f"for ufunc {ufunc.__name__}")
        return want
    if out is not None and np.can_cast(x, out.dtype, "safe") and \
            ufunc.resolve_dtypes((out.dtype, out.dtype, None))[2] == out.dtype:
        return out.dtype  # out= selects its own loop when the input casts to it safely
    return ufunc.resolve_dtypes((None, x, None), reduction=True)[0]


def _check_out(out: Any, shape: tuple[int, ...]) -> TensorProxy | None:
    if out is None:
        return None
    out = single_out(out)
    if not isinstance(out, TensorProxy):
        raise TypeError("output must be an array (out= inside @fuse must be an argument of "
                        "the fused function, or a view of one)")
    if out.shape != shape:
        raise ValueError("provided out is the wrong size for the accumulation.")
    return out


def scan(ufunc: np.ufunc, a: Any, axis: Any, dtype: Any, out: Any,
         flatten_none: bool = True) -> TensorProxy:
    """``ufunc.accumulate(a, axis, dtype, out)``; ``axis=None`` flattens (np.cumsum's rule)."""
    op = OP_OF_UFUNC.get(ufunc)
    if ufunc.nin != 2 or ufunc.nout != 1:
        raise ValueError("accumulate only supported for binary functions")
    negate = op is Op.SUB  # x0 - x1 - x2 ... is exactly x0 + (-x1) + (-x2) ..., in order
    if negate:
        op = Op.ADD
    if op not in SCAN_COMBINE:
        raise UnsupportedOperationError(
            f"np.{ufunc.__name__}.accumulate is a sequential recurrence (the ufunc is not "
            "associative), which fusejit does not scan; scannable ufuncs: "
            + ", ".join(sorted(f"np.{OP_OF_UFUNC_NAME[o]}" for o in SCAN_COMBINE))
            + ". Call it outside the fused function")
    x = lift(a)
    if flatten_none and x.ndim == 0:  # np.cumsum & co. take a 0-d array as 1-d (axis 0/-1)
        x = TensorProxy(reshape(x.node, (1,)))
    if axis is None and flatten_none:
        x = TensorProxy(reshape(x.node, (x.size,)))
        axis = 0
    if x.ndim == 0:
        raise TypeError("cannot accumulate on a scalar")
    if isinstance(axis, (tuple, list)):
        if len(axis) != 1:
            raise ValueError("accumulate does not allow multiple axes")
        axis = axis[0]
    axis = shapes.normalize_axis(axis, x.ndim)
    target = _check_out(out, x.shape)
    loop = dt.check_supported(_loop_dtype(ufunc, x.dtype, dtype, target), "scan result")
    src = cast(x.node, loop)
    if negate and x.shape[axis] > 1:  # every element but the first enters negated
        first = Node.make(Op.IOTA, dt.INT64, x.shape, (), (axis, 0, 1))
        src = select(TensorProxy(first) > 0, apply_ufunc(np.negative, (TensorProxy(src),),
                                                         {}), TensorProxy(src)).node
    if x.size == 0 or x.shape[axis] == 1:  # nothing to combine: the (cast) input itself
        node = const(0, loop, x.shape) if x.size == 0 else src
    else:
        node = Node.make(Op.SCAN, loop, x.shape, (src,), (op, axis))
    result = TensorProxy(node)
    if target is None:
        return result
    target.write(Ellipsis, TensorProxy(cast(node, target.dtype)), as_output=True)
    return target


OP_OF_UFUNC_NAME = {op: u.__name__ for u, op in OP_OF_UFUNC.items() if op in SCAN_COMBINE}


@implements(np.cumsum, method="cumsum")
def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> TensorProxy:
    """np.cumsum: the inclusive running sum along ``axis`` (flattened for None)."""
    return scan(np.add, a, axis, dtype, out)


@implements(np.cumprod, method="cumprod")
def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> TensorProxy:
    """np.cumprod: the inclusive running product along ``axis`` (flattened for None)."""
    return scan(np.multiply, a, axis, dtype, out)


FUNCTIONS[np.cumulative_sum] = lambda *a, **k: _cumulative(np.add, *a, **k)
FUNCTIONS[np.cumulative_prod] = lambda *a, **k: _cumulative(np.multiply, *a, **k)


def _cumulative(ufunc: np.ufunc, x: Any, /, *, axis: Any = None, dtype: Any = None,
                out: Any = None, include_initial: bool = False) -> TensorProxy:
    """np.cumulative_sum / cumulative_prod (the array-API names): axis may be omitted only
    for 1-d input; ``include_initial`` is not fused."""
    v = lift(x)
    if v.ndim == 0:  # (as NumPy: a 0-d array scans as one element)
        v = TensorProxy(reshape(v.node, (1,)))
    if include_initial:
        raise UnsupportedOperationError(
            f"np.cumulative_{'sum' if ufunc is np.add else 'prod'}(..., include_initial=True) "
            "is not supported inside @fuse; concatenate the identity in front of the result")
    if axis is None:
        if v.ndim > 1:
            raise ValueError("For arrays which have more than one dimension ``axis`` "
                             "argument is required.")
        axis = 0
    return scan(ufunc, v, axis, dtype, out, flatten_none=False)


@implements(np.nancumsum)
def nancumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> TensorProxy:
    """np.nancumsum: NaNs count as 0 (the NaN test is the scan's prologue)."""
    from fusejit.frontend.numpy.reduce import _replace_nan

    return scan(np.add, _replace_nan(a, 0)[0], axis, dtype, out)


@implements(np.nancumprod)
def nancumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> TensorProxy:
    """np.nancumprod: NaNs count as 1 (the NaN test is the scan's prologue)."""
    from fusejit.frontend.numpy.reduce import _replace_nan

    return scan(np.multiply, _replace_nan(a, 1)[0], axis, dtype, out)


def ufunc_accumulate(ufunc: np.ufunc, inputs: Any, kwargs: dict[str, Any]) -> TensorProxy:
    """``ufunc.accumulate(array, axis=0, dtype=None, out=None)``."""
    kwargs = dict(kwargs)
    if len(inputs) != 1:
        raise TypeError("accumulate() takes exactly one array argument")
    axis = kwargs.pop("axis", 0)
    dtype = kwargs.pop("dtype", None)
    out = kwargs.pop("out", None)
    if kwargs:
        raise TypeError(f"accumulate() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if axis is None:
        raise ValueError("accumulate does not allow multiple axes")
    return scan(ufunc, inputs[0], axis, dtype, out, flatten_none=False)


UFUNC_METHODS["accumulate"] = ufunc_accumulate
