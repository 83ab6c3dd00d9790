"""np.einsum in every form: the two-operand contractions as one matrix product
(``linalg.einsum``, a GEMM kernel), everything else as views, one elementwise product and one
sum, which the partitioner fuses into a single kernel.

The elementwise form covers one-operand einsums (``'ij->ji'`` transposes, ``'ii->i'``
diagonals, ``'ij->i'`` / ``'ii->'`` / ``'ij->'`` sums), products without contraction
(``'ij,ij->ij'``, outer products ``'i,j->ij'``, ``'...i,...i->...i'``) and any contraction with
a repeated letter or more than two operands. A repeated letter in an operand is its diagonal
(``np.diagonal``, a view); the operands are transposed into one letter order and broadcast; the
letters missing from the output are summed. NumPy's dtypes: the operands' result type (or
``dtype=``, cast under ``casting``), kept by the sum (``np.einsum('i->', int8)`` is int8).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.errors import UnsupportedOperationError
from fusejit.frontend.dispatch import FUNCTIONS
from fusejit.frontend.numpy.build import diagonal
from fusejit.frontend.numpy.linalg import _parse_einsum, _write
from fusejit.frontend.numpy.linalg import einsum as _matmul_einsum
from fusejit.frontend.numpy.reductions import _reduce
from fusejit.frontend.numpy.shape import transpose
from fusejit.frontend.trace import TensorProxy, broadcast_to, cast, lift, reshape
from fusejit.frontend.ufuncs import apply_ufunc
from fusejit.ir.ops import Op


def _collapse(x: TensorProxy, term: str, which: str) -> tuple[TensorProxy, str]:
    """``x`` with each repeated letter of ``term`` replaced by its diagonal (moved last)."""
    while True:
        repeated = next((c for c in term if term.count(c) > 1), None)
        if repeated is None:
            return x, term
        i = term.index(repeated)
        j = term.index(repeated, i + 1)
        if x.shape[i] != x.shape[j]:
            raise ValueError(f"dimensions in {which} for collapsing index '{repeated}' don't "
                             f"match ({x.shape[i]} != {x.shape[j]})")
        x = diagonal(x, 0, i, j)
        term = "".join(c for k, c in enumerate(term) if k not in (i, j)) + repeated


def einsum(subscripts: Any, *operands: Any, out: Any = None, dtype: Any = None,
           order: str = "K", casting: str = "safe", optimize: Any = False) -> Any:
    """np.einsum: a matrix product for two-operand contractions, else views, a product and a
    sum (see the module docstring)."""
    if not isinstance(subscripts, str):
        raise UnsupportedOperationError("np.einsum inside @fuse takes a subscripts string "
                                        "(not the interleaved operand, sublist form)")
    xs = [lift(x) for x in operands]
    terms, to = _parse_einsum(subscripts, [x.ndim for x in xs])
    for c in to:
        if to.count(c) > 1:
            raise ValueError(f"einstein sum subscripts string includes output subscript "
                             f"'{c}' multiple times")
        if not any(c in t for t in terms):
            raise ValueError(f"einstein sum subscripts string included output subscript "
                             f"'{c}' which never appeared in an input")
    contracted = {c for t in terms for c in t if c not in to and sum(c in u for u in terms) > 1}
    if len(xs) == 2 and contracted and all(len(set(t)) == len(t) for t in terms):
        return _matmul_einsum(subscripts, *operands, out=out, dtype=dtype, order=order,
                              casting=casting, optimize=optimize)
    want = np.dtype(dtype) if dtype is not None else dt.result_type(*(x.dtype for x in xs))
    for k, x in enumerate(xs):
        if not np.can_cast(x.dtype, want, casting):
            raise TypeError(f"Iterator operand {k} dtype could not be cast from {x.dtype!r} "
                            f"to {want!r} according to the rule '{casting}'")
    which = "single operand" if len(xs) == 1 else "operand {}"
    parts = [_collapse(TensorProxy(cast(x.node, want)), t, which.format(k))
             for k, (x, t) in enumerate(zip(xs, terms))]
    summed = [c for _, t in parts for c in t if c not in to]
    letters = list(to) + list(dict.fromkeys(summed))
    size: dict[str, int] = {}
    for x, t in parts:
        for c, d in zip(t, x.shape):
            if c in size and d != size[c] and 1 not in (d, size[c]):
                shapes = " ".join(f"{p.shape}->{p.shape}" for p, _ in parts)
                raise ValueError("operands could not be broadcast together with remapped "
                                 f"shapes [original->remapped]: {shapes} ")
            size[c] = d if size.get(c, 1) == 1 else size[c]
    aligned = []
    for x, t in parts:
        mine = [c for c in letters if c in t]
        y = transpose(x, tuple(t.index(c) for c in mine)) if mine != list(t) else x
        aligned.append(TensorProxy(reshape(y.node, tuple(
            y.shape[mine.index(c)] if c in mine else 1 for c in letters))))
    result = aligned[0]
    for y in aligned[1:]:
        result = TensorProxy(cast(apply_ufunc(np.multiply, (result, y), {}).node, want))
    full = tuple(size[c] for c in letters)
    if result.shape != full:
        result = TensorProxy(broadcast_to(result.node, full))
    if len(letters) > len(to):
        result = _reduce(Op.SUM, result, tuple(range(len(to), len(letters))), dtype=want)
    if out is not None:
        return _write(result, out, "einsum", "unsafe")
    return result


FUNCTIONS[np.einsum] = einsum
