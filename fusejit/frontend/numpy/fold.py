"""``ufunc.reduce`` for the binary ufuncs that are no reduction op (``np.bitwise_or.reduce``,
``np.subtract.reduce``, ``np.gcd.reduce``, ``np.equal.reduce`` of bools, ...): folds of
elementwise ops, which the partitioner fuses into one kernel.

NumPy decides what is allowed and the result's dtype: the same call on a small array of zeros
(``_probe``) raises NumPy's own error (a dtype without a loop, an empty axis without an
identity, several axes of a non-reorderable ufunc) and gives the dtype. NumPy reduces by a left
fold, ``r = op(r, x[i])``, in its reduction loop's dtypes; fusejit does the same, unrolled along
the axis (a value per element of it, so up to ``FOLD_MAX`` elements), except for the bitwise
ops of integers and bools (``bitwise_or/and/xor``, ``logical_xor``): those are reductions of
each bit (``any``, ``all``, the parity of a sum), exact and of any length.
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
    if ufunc in _BITWISE and want.kind in "biu" and acc_t == item_t == want:
        acc = _bitwise(ufunc, line)  # (any length: reductions of the bits)
        if start is not None:
            acc = start if acc is None else apply_ufunc(ufunc, (start, acc), {})
    elif n > FOLD_MAX:
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


_BITWISE = (np.bitwise_or, np.bitwise_and, np.bitwise_xor, np.logical_xor)


def _bitwise(ufunc: np.ufunc, line: TensorProxy) -> TensorProxy:
    """A bitwise reduce of the last axis as reductions of each bit (exact, any length, one
    kernel): a bit of the OR is ``any`` of that bit, of the AND ``all``, of the XOR the parity
    of its count."""
    logical = line.dtype.kind == "b" or ufunc is np.logical_xor
    width = 1 if logical else line.dtype.itemsize * 8
    acc = None
    for b in range(width):
        bit = apply_ufunc(np.not_equal, (line, 0), {}) if logical else apply_ufunc(
            np.not_equal, (apply_ufunc(np.bitwise_and, (line >> b, 1), {}), 0), {})
        if ufunc is np.bitwise_or:
            got = np.any(bit, axis=-1)
        elif ufunc is np.bitwise_and:
            got = np.all(bit, axis=-1)
        else:
            got = apply_ufunc(np.equal, (np.sum(bit, axis=-1, dtype=np.int64) % 2, 1), {})
        if logical:
            return TensorProxy(cast(got.node, line.dtype))
        term = apply_ufunc(np.left_shift, (TensorProxy(cast(got.node, line.dtype)),
                                           line.dtype.type(b)), {})
        acc = term if acc is None else apply_ufunc(np.bitwise_or, (acc, term), {})
    return acc
