"""``ufunc.reduce`` for the binary ufuncs that are no reduction op (``np.subtract.reduce``,
``np.gcd.reduce``, ``np.equal.reduce`` of bools, ...): folds of elementwise ops, which the
partitioner fuses into one kernel.

NumPy decides what is allowed and the result's dtype: the same call on a small array of zeros
(``_probe``) raises NumPy's own error (a dtype without a loop, an empty axis without an
identity, several axes of a non-reorderable ufunc) and gives the dtype. NumPy reduces by a left
fold, ``r = op(r, x[i])``, in its reduction loop's dtypes; fusejit does the same, unrolled along
the axis (a value per element of it, so up to ``FOLD_MAX`` elements). The associative ones
(``bitwise_or/and/xor``, ``logical_xor``, ``add``, ...) are reduction ops instead
(``ops.REDUCE_OF_UFUNC``), of any length.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusejit.errors import UnsupportedOperationError
from fusejit.frontend.numpy.build import _write_out
from fusejit.frontend.trace import TensorProxy, cast, lift, reshape
from fusejit.frontend.ufuncs import apply_ufunc
from fusejit.ir import shapes

FOLD_MAX = 256  # elements of an axis a sequential fold unrolls


def _probe(ufunc: np.ufunc, x: TensorProxy, axis: Any, dtype: Any, keepdims: bool,
           initial: Any) -> np.dtype:
    """NumPy's verdict on the call, from a zeros array of x's dtype with each axis cut to at
    most 2: its result dtype, or its exception."""
    small = np.zeros(tuple(min(d, 2) for d in x.shape), x.dtype)
    extra = {} if initial is None else {"initial": initial}
    return np.asarray(ufunc.reduce(small, axis=axis, dtype=dtype, keepdims=keepdims,
                                   **extra)).dtype


def fold_reduce(ufunc: np.ufunc, a: Any, axis: Any = 0, dtype: Any = None, out: Any = None,
                keepdims: bool = False, initial: Any = None, where: Any = True) -> TensorProxy:
    """``ufunc.reduce(a, axis, dtype, out, keepdims, initial)`` as a fold (module docstring)."""
    x = lift(a)
    if where is not True:
        raise UnsupportedOperationError(f"np.{ufunc.__name__}.reduce with where= is not "
                                        "supported inside @fuse")
    want = _probe(ufunc, x, axis, dtype, keepdims, initial)
    axes = tuple(range(x.ndim)) if axis is None else shapes.normalize_axes(axis, x.ndim)
    rest = [d for d in range(x.ndim) if d not in axes]
    order = rest + list(axes)
    moved = x.transpose(order) if order != list(range(x.ndim)) else x
    kept = tuple(x.shape[d] for d in rest)
    n = math.prod(x.shape[d] for d in axes)
    line = TensorProxy(reshape(moved.node, (*kept, n)))
    # NumPy's reduction loop: (accumulator, element, result) dtypes; the operand is cast to
    # the element's, the first element (or initial) to the accumulator's
    acc_t, item_t, _ = ufunc.resolve_dtypes(
        (None if dtype is None else np.dtype(dtype), x.dtype, None), reduction=True)
    if line.dtype != item_t:
        line = TensorProxy(cast(line.node, item_t))
    start = None if initial is None else TensorProxy(lift(np.asarray(initial).astype(acc_t)).node)
    if n > FOLD_MAX:
        raise UnsupportedOperationError(
            f"np.{ufunc.__name__}.reduce over {n} elements: NumPy folds them one after another "
            f"in {want}, which fusejit unrolls up to {FOLD_MAX} elements; reduce in pieces, "
            "or outside the fused function")
    else:
        acc = start
        for k in range(n):
            item = line[..., k]
            acc = TensorProxy(cast(item.node, acc_t)) if acc is None else \
                apply_ufunc(ufunc, (acc, item), {})
    if acc is None:  # an empty axis: the identity (NumPy refused one without, in _probe)
        acc = TensorProxy(lift(np.full(kept, np.array(ufunc.identity).astype(want))).node)
    result = TensorProxy(cast(acc.node, want))
    shape = result.shape
    if keepdims:
        shape = tuple(1 if d in axes else x.shape[d] for d in range(x.ndim))
    if result.shape != shape:
        result = TensorProxy(reshape(result.node, shape))
    return _write_out(result, out)

