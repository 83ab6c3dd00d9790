"""Singular values: ``np.linalg.svd(a, compute_uv=False)``, ``np.linalg.svdvals`` and the
matrix norms that need them (``np.linalg.norm`` with ``ord`` 2, -2 and 'nuc'), traced into one
SVDVALS node per stack of matrices (computed by fusejit/codegen/svd.py, a one-sided Jacobi
kernel per matrix), as NumPy's ``_multi_svd_norm`` does: the two axes moved last, then the
largest, smallest or summed singular value.

``np.linalg.matrix_norm`` and ``np.linalg.cond`` (p None, 2, -2) are built on them.

Dtypes are NumPy's linalg rules: integers and bools are computed in float64, float16 is refused
(LAPACK has no half precision; NumPy raises TypeError), float32 stays float32. Singular vectors
(``compute_uv=True``) are not computed: that is refused with a pointer to ``compute_uv=False``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.errors import UnsupportedOperationError
from fusejit.ir.graph import Node, const
from fusejit.frontend.dispatch import FUNCTIONS
from fusejit.frontend.numpy.reductions import _max, _min, _reduce, _sum
from fusejit.frontend.numpy.shape import transpose
from fusejit.frontend.trace import TensorProxy, cast, lift, reshape
from fusejit.frontend.trace import where as select
from fusejit.frontend.ufuncs import apply_ufunc
from fusejit.ir.ops import Op


def _any(x: TensorProxy, axes: tuple[int, ...]) -> TensorProxy:
    return _reduce(Op.ANY, x, axes)


def svdvals(a: Any) -> TensorProxy:
    """The singular values of the last two axes, descending (``np.linalg.svdvals``)."""
    x = lift(a)
    if x.ndim < 2:
        raise np.linalg.LinAlgError(f"{x.ndim}-dimensional array given. Array must be at "
                                    "least two-dimensional")
    if x.dtype == dt.FLOAT16:
        raise TypeError("array type float16 is unsupported in linalg")
    want = x.dtype if x.dtype.kind == "f" else dt.FLOAT64
    *batch, m, n = x.shape
    shape = (*batch, min(m, n))
    if x.size == 0:
        return TensorProxy(const(0, want, shape))
    return TensorProxy(Node.make(Op.SVDVALS, want, shape, (cast(x.node, want),)))


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False) -> TensorProxy:
    """``np.linalg.svd`` without singular vectors."""
    if compute_uv:
        raise UnsupportedOperationError(
            "np.linalg.svd inside @fuse computes singular values only: pass compute_uv=False "
            "(or use np.linalg.svdvals), or call it outside the fused function")
    return svdvals(a)


def matrix_svd_norm(v: TensorProxy, row: int, col: int, ord: Any, keepdims: bool
                    ) -> TensorProxy:
    """np.linalg.norm of the matrices over axes (row, col) for ord 2, -2 or 'nuc'."""
    nd = v.ndim
    rest = [d for d in range(nd) if d not in (row, col)]
    s = svdvals(transpose(v, (*rest, row, col)))
    ret = (_max if ord == 2 else _min if ord == -2 else _sum)(s, -1)
    if keepdims:
        shape = list(v.shape)
        shape[row] = shape[col] = 1
        ret = TensorProxy(reshape(ret.node, tuple(shape)))
    return ret


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> TensorProxy:
    """np.linalg.matrix_norm: np.linalg.norm over the last two axes."""
    return FUNCTIONS[np.linalg.norm](x, ord, (-2, -1), keepdims)


def cond(x: Any, p: Any = None) -> TensorProxy:
    """np.linalg.cond for p None, 2 and -2: the ratio of the extreme singular values (NaN
    from a zero matrix becomes inf, as NumPy's); the other orders need an inverse."""
    if p not in (None, 2, -2):
        raise UnsupportedOperationError(
            f"np.linalg.cond(..., p={p!r}) needs a matrix inverse, which fusejit does not "
            "compute; use p=None, 2 or -2, or call it outside the fused function")
    v = lift(x)
    s = svdvals(v)
    first, last = s[..., 0], s[..., -1]
    r = apply_ufunc(np.true_divide, (first, last) if p != -2 else (last, first), {})
    nan = apply_ufunc(np.isnan, (r,), {})
    finite_input = apply_ufunc(np.logical_not, (_any(apply_ufunc(np.isnan, (v,), {}),
                                                     (-2, -1)),), {})
    return select(apply_ufunc(np.logical_and, (nan, finite_input), {}),
                  TensorProxy(const(np.inf, r.dtype)), r)


FUNCTIONS[np.linalg.svd] = svd
FUNCTIONS[np.linalg.svdvals] = svdvals
FUNCTIONS[np.linalg.matrix_norm] = matrix_norm
FUNCTIONS[np.linalg.cond] = cond
