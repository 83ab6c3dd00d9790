"""Matrix products traced into MATMUL nodes: ``@``, np.matmul, dot, vdot, inner, tensordot,
two-operand einsum, vecdot, matvec and vecmat, each written as NumPy defines it.

Every product becomes one MATMUL node over ``a[..., M, K]`` and ``b[..., K, N]`` whose batch
dimensions are already broadcast (by views, so nothing is copied); 1-d operands, transposes and
the reshapes of dot, tensordot and einsum are views or reshapes around it, and the partitioner
folds them into the GEMM kernel's loads (fusejit/passes/gemm.py). Result dtypes are NumPy's
(``np.matmul.resolve_dtypes``). Shape errors are NumPy's own: when a check here fails, the same
call is made on zero-stride stand-ins of the operands, which NumPy rejects before computing.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir import shapes
from fusejit.errors import BroadcastError, UnsupportedDTypeError, UnsupportedOperationError
from fusejit.ir.graph import Node, const
from fusejit.frontend.dispatch import FUNCTIONS, GUFUNCS, implements
from fusejit.frontend.numpy.reductions import _reduce
from fusejit.frontend.numpy.shape import transpose
from fusejit.frontend.trace import TensorProxy, broadcast_to, cast, lift, reshape
from fusejit.frontend.ufuncs import apply_ufunc, check_output_cast, single_out
from fusejit.ir.ops import Op

# -- the core -------------------------------------------------------------------------------------


def _stand_in(x: TensorProxy) -> np.ndarray:
    """A zero-stride array of ``x``'s shape and dtype: NumPy checks shapes on it for free."""
    return np.broadcast_to(np.zeros((), x.dtype), x.shape)


def _numpy_error(fn: Any, *args: Any, fallback: str, **kwargs: Any) -> Exception:
    """The error NumPy raises for these operand shapes (or a ValueError with ``fallback``)."""
    try:
        fn(*args, **kwargs)
    except (ValueError, TypeError) as exc:
        return exc
    return ValueError(fallback)  # pragma: no cover - our checks mirror NumPy's


def _matmul_dtypes(a: TensorProxy, b: TensorProxy, dtype: Any, name: str,
                   casting: str = "same_kind") -> tuple[np.dtype, np.dtype]:
    """(the loop's operand dtype, its result dtype) as np.matmul resolves them; ``dtype=``
    selects the loop of that dtype (the operands are cast to it under ``casting``)."""
    want = None if dtype is None else np.dtype(dtype)
    try:
        types = (a.dtype, b.dtype, None) if want is None else (want, want, want)
        if want is not None and not all(np.can_cast(x, want, casting)
                                        for x in (a.dtype, b.dtype)):
            raise TypeError
        ta, tb, out = np.matmul.resolve_dtypes(types)
    except TypeError:  # e.g. no loop for the requested dtype: NumPy's own message
        raise _numpy_error(np.matmul, _stand_in(a), _stand_in(b), dtype=want, casting=casting,
                           fallback=f"{name}: no loop for {a.dtype}, {b.dtype}") from None
    dt.check_supported(out, f"np.{name} result")
    if out.kind == "c":
        raise UnsupportedDTypeError(f"np.{name} of {out.name} operands is not supported by "
                                    "fusejit yet (no complex GEMM); call it outside the fused "
                                    "function")
    assert ta == tb
    return ta, out


def matmul_nodes(a: TensorProxy, b: TensorProxy, dtype: Any = None, name: str = "matmul",
                 casting: str = "same_kind") -> TensorProxy:
    """``np.matmul(a, b)``: NumPy's gufunc (n?,k),(k,m?)->(n?,m?) with broadcast batch dims."""
    if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        raise _numpy_error(np.matmul, _stand_in(a), _stand_in(b),
                           fallback=f"{name}: shapes {a.shape} and {b.shape} do not match")
    try:
        batch = shapes.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except BroadcastError:
        raise _numpy_error(np.matmul, _stand_in(a), _stand_in(b),
                           fallback="operands could not be broadcast together") from None
    loop, out = _matmul_dtypes(a, b, dtype, name, casting)
    an, bn = cast(a.node, loop), cast(b.node, loop)
    if a.ndim == 1:
        an = reshape(an, (1,) + a.shape)
    if b.ndim == 1:
        bn = reshape(bn, b.shape + (1,))
    (m, k), n = an.shape[-2:], bn.shape[-1]
    an = broadcast_to(an, batch + (m, k))
    bn = broadcast_to(bn, batch + (k, n))
    shape = batch + (m, n)
    if k == 0 or math.prod(shape) == 0:  # nothing to sum: zeros, and no kernel for them
        node = const(0, out, shape)
    else:
        node = Node.make(Op.MATMUL, loop, shape, (an, bn))
        node = cast(node, out)
    final = batch + (() if a.ndim == 1 else (m,)) + (() if b.ndim == 1 else (n,))
    return TensorProxy(reshape(node, final))


def _write(result: TensorProxy, out: Any, name: str, casting: str = "same_kind") -> Any:
    if out is None:
        return result
    out = single_out(out)
    if not isinstance(out, TensorProxy):
        raise UnsupportedOperationError(
            "out= inside @fuse must be an argument of the fused function (or a view of one)")
    if out.shape != result.shape:
        raise ValueError(f"{name}: Output operand 0 has a mismatch in its core dimensions: "
                         f"expected shape {result.shape}, got {out.shape}")
    check_output_cast(name, result.dtype, out.dtype, casting)
    out.write(Ellipsis, result, as_output=True)
    return out


def _matmul_ufunc(a: Any, b: Any, out: Any = None, dtype: Any = None,
                  casting: str = "same_kind") -> Any:
    return _write(matmul_nodes(lift(a), lift(b), dtype, casting=casting), out, "matmul",
                  casting)


GUFUNCS[np.matmul] = _matmul_ufunc


def _vector_form(name: str, a_vec: bool, b_vec: bool) -> Any:
    """np.vecdot (n),(n)->(), np.matvec (m,n),(n)->(m), np.vecmat (n),(n,m)->(m): a matmul
    with a vector operand as a row (the first) or a column (the second), its length-1 axis
    dropped again (real values: no conjugation)."""
    def impl(a: Any, b: Any, out: Any = None, dtype: Any = None,
             casting: str = "same_kind") -> Any:
        a, b = lift(a), lift(b)
        if a.ndim < (1 if a_vec else 2) or b.ndim < (1 if b_vec else 2) or \
                a.shape[-1] != b.shape[-1 if b_vec else -2]:
            raise _numpy_error(getattr(np, name), _stand_in(a), _stand_in(b),
                               fallback=f"{name}: shapes do not match")
        an = reshape(a.node, a.shape[:-1] + (1, a.shape[-1])) if a_vec else a.node
        bn = reshape(b.node, b.shape + (1,)) if b_vec else b.node
        r = matmul_nodes(TensorProxy(an), TensorProxy(bn), dtype, name)
        shape = r.shape[:-1] if b_vec else r.shape
        if a_vec:
            shape = shape[:-1] if b_vec else shape[:-2] + shape[-1:]
        return _write(TensorProxy(reshape(r.node, shape)), out, name, casting)
    return impl


for _name, _a_vec, _b_vec in (("vecdot", True, True), ("matvec", False, True),
                              ("vecmat", True, False)):
    if isinstance(getattr(np, _name, None), np.ufunc):
        GUFUNCS[getattr(np, _name)] = _vector_form(_name, _a_vec, _b_vec)


# -- dot, vdot, inner, tensordot --------------------------------------------------------------------


def _product(a: TensorProxy, b: TensorProxy) -> TensorProxy:
    return apply_ufunc(np.multiply, (a, b), {})


@implements(np.dot, method="dot")
def dot(a: Any, b: Any, out: Any = None) -> Any:
    """np.dot: a scalar operand multiplies; otherwise a sum over a's last axis and b's
    second-to-last (b's only axis when it is 1-d)."""
    a, b = lift(a), lift(b)
    if a.ndim == 0 or b.ndim == 0:
        return _write(_product(a, b), out, "dot")
    k_b = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if a.shape[-1] != k_b:
        raise _numpy_error(np.dot, _stand_in(a), _stand_in(b), fallback="shapes not aligned")
    if b.ndim <= 2:
        return _write(matmul_nodes(a, b, name="dot"), out, "dot")
    # (..., K) . (..., K, N): a as rows (A, K), b's K axis first, the rest flattened (K, B*N)
    rows = TensorProxy(reshape(a.node, (math.prod(a.shape[:-1]), a.shape[-1])))
    bt = transpose(b, (b.ndim - 2, *range(b.ndim - 2), b.ndim - 1))
    cols = TensorProxy(reshape(bt.node, (k_b, math.prod(b.shape) // max(k_b, 1))))
    r = matmul_nodes(rows, cols, name="dot")
    shape = a.shape[:-1] + b.shape[:-2] + b.shape[-1:]
    return _write(TensorProxy(reshape(r.node, shape)), out, "dot")


@implements(np.vdot)
def vdot(a: Any, b: Any) -> TensorProxy:
    """np.vdot: both operands flattened, one inner product (real values: no conjugation)."""
    a, b = lift(a), lift(b)
    if a.size != b.size:
        raise _numpy_error(np.vdot, _stand_in(a), _stand_in(b), fallback="vdot: sizes differ")
    fa = TensorProxy(reshape(a.node, (a.size,)))
    fb = TensorProxy(reshape(b.node, (b.size,)))
    return matmul_nodes(fa, fb, name="vdot")


@implements(np.inner)
def inner(a: Any, b: Any) -> TensorProxy:
    """np.inner: a sum over the last axes of both; result a.shape[:-1] + b.shape[:-1]."""
    a, b = lift(a), lift(b)
    if a.ndim == 0 or b.ndim == 0:
        return _product(a, b)
    if a.shape[-1] != b.shape[-1]:
        raise _numpy_error(np.inner, _stand_in(a), _stand_in(b), fallback="shapes not aligned")
    k = a.shape[-1]
    rows = TensorProxy(reshape(a.node, (math.prod(a.shape[:-1]), k)))
    cols = TensorProxy(reshape(b.node, (math.prod(b.shape[:-1]), k)))
    r = matmul_nodes(rows, transpose(cols), name="inner")
    return TensorProxy(reshape(r.node, a.shape[:-1] + b.shape[:-1]))


@implements(np.tensordot)
def tensordot(a: Any, b: Any, axes: Any = 2) -> TensorProxy:
    """np.tensordot, step by step as numpy/_core/numeric.py writes it: the summed axes moved
    last in ``a`` and first in ``b``, both reshaped to matrices, one product, reshaped back."""
    a, b = lift(a), lift(b)
    try:
        iter(axes)
    except TypeError:
        axes_a, axes_b = list(range(-axes, 0)), list(range(axes))
    else:
        axes_a, axes_b = axes
    axes_a = [axes_a] if isinstance(axes_a, (int, np.integer)) else list(axes_a)
    axes_b = [axes_b] if isinstance(axes_b, (int, np.integer)) else list(axes_b)
    if len(axes_a) != len(axes_b) or any(
            a.shape[x] != b.shape[y] for x, y in zip(axes_a, axes_b)):
        raise ValueError("shape-mismatch for sum")
    axes_a = [x + a.ndim if x < 0 else x for x in axes_a]
    axes_b = [y + b.ndim if y < 0 else y for y in axes_b]
    free_a = [i for i in range(a.ndim) if i not in axes_a]
    free_b = [i for i in range(b.ndim) if i not in axes_b]
    k = math.prod(a.shape[x] for x in axes_a)
    m = math.prod(a.shape[i] for i in free_a)
    n = math.prod(b.shape[i] for i in free_b)
    strides = window_strides(a)
    if strides is not None:  # contract a window view in memory order (see window_strides)
        pairs = sorted(zip(axes_a, axes_b), key=lambda p: -abs(strides[p[0]]))
        axes_a, axes_b = [p[0] for p in pairs], [p[1] for p in pairs]
    at = transpose(a, tuple(free_a + axes_a))
    bt = transpose(b, tuple(axes_b + free_b))
    r = matmul_nodes(TensorProxy(reshape(at.node, (m, k))),
                     TensorProxy(reshape(bt.node, (k, n))), name="tensordot")
    shape = tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b)
    return TensorProxy(reshape(r.node, shape))


# -- einsum ------------------------------------------------------------------------------------------


def _parse_einsum(subscripts: str, ndims: Sequence[int]) -> tuple[list[str], str]:
    """Operand subscripts and the output's, with '...' spelled as letters that the
    subscripts do not use (right-aligned, as NumPy broadcasts them)."""
    subscripts = subscripts.replace(" ", "")
    for c in subscripts:  # (NumPy encodes the string as ASCII: other letters are refused too)
        if c not in ".,->" and not (c.isascii() and c.isalpha()):
            raise ValueError(f"invalid subscript {c!r} in einstein sum subscripts string, "
                             "subscripts must be ASCII letters")
    if "->" in subscripts:
        ins, out = subscripts.split("->")
        explicit = True
    else:
        ins, out, explicit = subscripts, "", False
    terms = ins.split(",")
    if len(terms) != len(ndims):
        raise ValueError("more operands provided to einstein sum function than specified in the "
                         "subscripts string" if len(ndims) > len(terms) else
                         "fewer operands provided to einstein sum function than specified in "
                         "the subscripts string")
    used = set(subscripts) - set(".,->")
    spare = [c for c in string.ascii_uppercase + string.ascii_lowercase if c not in used]
    ell = max((nd - len(t.replace("...", "")) for t, nd in zip(terms, ndims) if "..." in t),
              default=0)
    if ell < 0:
        raise ValueError("einstein sum subscripts string contains too many subscripts for "
                         "operand")
    ell_letters = "".join(spare[:ell])
    out_terms = []
    for t, nd in zip(terms, ndims):
        if "..." in t:
            t = t.replace("...", ell_letters[ell - (nd - len(t.replace("...", ""))):])
        if len(t) != nd:
            raise ValueError(f"operand has more dimensions than subscripts given in einstein "
                             f"sum, but no '...' ellipsis provided to broadcast the extra "
                             f"dimensions." if nd > len(t) else
                             "einstein sum subscripts string contains too many subscripts for "
                             "operand")
        out_terms.append(t)
    if explicit:
        out = out.replace("...", ell_letters)
    else:
        counts = {c: "".join(out_terms).count(c) for c in "".join(out_terms)}
        out = ell_letters + "".join(sorted(c for c, n in counts.items()
                                           if n == 1 and c not in ell_letters))
    return out_terms, out


@implements(np.einsum)
def einsum(subscripts: Any, *operands: Any, out: Any = None, dtype: Any = None,
           order: str = "K", casting: str = "safe", optimize: Any = False) -> Any:
    """Two-operand np.einsum as one matrix product: letters in both operands and the output
    are batch dims, in both but not the output are summed by the product, in one operand only
    are its rows or columns (or, when not in the output either, summed beforehand)."""
    if not isinstance(subscripts, str):
        raise UnsupportedOperationError("np.einsum inside @fuse takes a subscripts string")
    if len(operands) != 2:
        raise UnsupportedOperationError("np.einsum inside @fuse takes exactly two operands "
                                        "(write one-operand forms with transpose/sum)")
    a, b = (lift(x) for x in operands)
    (ta, tb), to = _parse_einsum(subscripts, (a.ndim, b.ndim))
    for t, x in ((ta, a), (tb, b)):
        if len(set(t)) != len(t):
            raise UnsupportedOperationError(
                f"np.einsum subscripts {t!r} repeat a letter (a diagonal); take the diagonal "
                "outside the fused function")
    for c in to:
        if c not in ta and c not in tb:
            raise ValueError(f"einstein sum subscripts string included output subscript "
                             f"'{c}' which never appeared in an input")
    size: dict[str, int] = {}
    for t, x in ((ta, a), (tb, b)):
        for c, d in zip(t, x.shape):
            if c in size and d != size[c] and 1 not in (d, size[c]):
                raise _numpy_error(np.einsum, subscripts, _stand_in(a), _stand_in(b),
                                   fallback="operands could not be broadcast together")
            size[c] = max(size.get(c, d), d)
    want = np.dtype(dtype) if dtype is not None else dt.result_type(a.dtype, b.dtype)
    strides = window_strides(a)
    a_stride = {} if strides is None else dict(zip(ta, strides))
    a = TensorProxy(cast(a.node, want))
    b = TensorProxy(cast(b.node, want))

    def prepare(x: TensorProxy, t: str, other: str) -> tuple[TensorProxy, str]:
        # letters only here and not in the output are summed first (einsum keeps the dtype)
        lone = [i for i, c in enumerate(t) if c not in other and c not in to]
        if lone:
            x = _reduce(Op.SUM, x, tuple(lone), dtype=want)
            t = "".join(c for i, c in enumerate(t) if i not in lone)
        return x, t
    a, ta = prepare(a, ta, tb)
    b, tb = prepare(b, tb, ta)
    batch = [c for c in to if c in ta and c in tb]
    summed = [c for c in ta if c in tb and c not in to]
    if a_stride:  # a window view's K in memory order (see window_strides)
        summed.sort(key=lambda c: -abs(a_stride[c]))
    rows = [c for c in ta if c not in tb]
    cols = [c for c in tb if c not in ta]

    def arrange(x: TensorProxy, t: str, inner: list[str], outer: list[str]) -> Node:
        order = [t.index(c) for c in batch + inner + outer]
        node = transpose(x, tuple(order)).node
        shape = tuple(x.shape[t.index(c)] for c in batch)
        node = broadcast_to(node, tuple(size[c] for c in batch) + node.shape[len(batch):]) \
            if shape != tuple(size[c] for c in batch) else node
        lead = tuple(size[c] for c in batch)
        dims = [math.prod(size[c] for c in inner), math.prod(size[c] for c in outer)]
        for c in inner + outer:  # a length-1 labelled dim broadcast against the other operand
            if x.shape[t.index(c)] != size[c]:
                raise _numpy_error(np.einsum, subscripts, _stand_in(a), _stand_in(b),
                                   fallback="operands could not be broadcast together")
        return reshape(node, lead + tuple(dims))
    an = arrange(a, ta, rows, summed)
    bn = arrange(b, tb, summed, cols)
    r = matmul_nodes(TensorProxy(an), TensorProxy(bn), name="einsum")
    r = TensorProxy(cast(r.node, want))
    got = batch + rows + cols
    r = TensorProxy(reshape(r.node, tuple(size[c] for c in got)))
    result = transpose(r, tuple(got.index(c) for c in to)) if got else r
    if out is not None:
        return _write(result, out, "einsum", "unsafe")
    return result


def window_strides(x: TensorProxy) -> tuple[int, ...] | None:
    """Element strides of each axis of ``x`` over its operand when ``x`` is a window view (a
    VIEW reading an operand axis at a sum of its own axes: ``sliding_window_view``), else None.

    A convolution written with windows sums over (C, kh, kw) in the view's axis order, C
    outermost, while an NHWC image holds C innermost: contracting in memory order makes the
    implicit GEMM's K loop walk contiguous channels (2.6x on PoCL for ResNet's 3x3 layer)."""
    node = x.node
    if node.op is not Op.VIEW or not any(sum(1 for c in coefs if c) > 1 for _, coefs in node.arg):
        return None
    src = shapes.row_major_strides(node.srcs[0].shape)
    return tuple(sum(coefs[j] * s for (_, coefs), s in zip(node.arg, src))
                 for j in range(node.ndim))


def _matmul_operator(self: TensorProxy, other: Any) -> Any:
    return _matmul_ufunc(self, other)


def _rmatmul_operator(self: TensorProxy, other: Any) -> Any:
    return _matmul_ufunc(other, self)


def _imatmul_operator(self: TensorProxy, other: Any) -> Any:
    """``a @= b``: NumPy computes into ``a`` (its shape must not change)."""
    return _matmul_ufunc(self, other, out=self)


TensorProxy.__matmul__ = _matmul_operator  # type: ignore[attr-defined]
TensorProxy.__rmatmul__ = _rmatmul_operator  # type: ignore[attr-defined]
TensorProxy.__imatmul__ = _imatmul_operator  # type: ignore[attr-defined]
FUNCTIONS.setdefault(np.matmul, _matmul_ufunc)

__all__ = ["dot", "einsum", "inner", "matmul_nodes", "tensordot", "vdot"]
