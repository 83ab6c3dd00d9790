"""Singular-value kernels: one per "svd" group (an SVDVALS node), one work-group per matrix.

One-sided Jacobi (Hestenes): the matrix ``A`` (``m x n``, transposed when ``m < n`` so that the
working matrix ``U`` is ``M x N`` with ``M >= N``) is orthogonalised by plane rotations of
column pairs until every pair is orthogonal to working precision
(``|u_p . u_q| <= eps sqrt(|u_p|^2 |u_q|^2)``); the singular values are then the column norms.
This is the accurate algorithm for small matrices (high relative accuracy, no bidiagonal
reduction) and parallel by construction: each sweep is ``N' - 1`` rounds of the round-robin
tournament order, in which the ``N' / 2`` column pairs are disjoint, so the work-group's items
rotate one pair each, with a barrier between rounds (``N'`` is ``N`` rounded up to even; the
padding column sits out). On CPUs the work-group is one work-item (no barriers, which PoCL
builds slowly) walking the same order.

``U`` lives in local memory when it fits (GPUs, small matrices), else in a global scratch
buffer per matrix. The operand's prologue is computed where ``U`` is loaded; the values are
sorted in descending order (NumPy's) and bound as the node's value for the epilogue's stores.
Sweeps stop at convergence or after ``_SWEEPS`` (Jacobi converges quadratically; 6-10 sweeps
is typical for double precision).
"""

from __future__ import annotations

import math

import numpy as np

from fusejit.ir.indexing import unravel
from fusejit.codegen.context import ModuleContext
from fusejit.codegen.kernels import Kernel, Partial
from fusejit.codegen.lowering import Block, Lowering, _store
from fusejit.passes.plan import Group
from fusejit.codegen.render import Renderer
from fusejit.ir.symbolic import Expr

_SWEEPS = 40


def work_group(sm: ModuleContext, pairs: int) -> int:
    """Work-items per matrix: one per column pair on GPUs (a power of two, within the
    device's barrier limit), one on CPUs."""
    wg = 1
    if sm.is_gpu:
        limit = min(getattr(sm.limits, "max_work_group", 256), sm.barrier_group)
        while wg * 2 <= min(pairs, limit):
            wg *= 2
    return wg


def svd_kernels(sm: ModuleContext, name: str, group: Group) -> list[tuple[Kernel, Lowering]]:
    """The kernel of one svd group (see the module docstring)."""
    node = group.svd
    assert node is not None
    x = node.srcs[0]
    *batch, m, n = x.shape
    B = math.prod(batch)
    M, N = max(m, n), min(m, n)
    trans = m < n
    dtype = node.dtype
    t = sm.target
    low = sm._lowering(group)
    low.note_dtype(dtype)
    it = low.index_type
    T = t.compute_type(dtype)
    Np = N + N % 2
    wg = work_group(sm, Np // 2)
    local_ok = wg > 1 and M * N * dtype.itemsize + 4 * Np * dtype.itemsize <= getattr(
        sm.limits, "local_mem", 32 * 1024) - 1024
    shared, pre = [], [f"const {it} lid = {t.cast(it, t.local_id_of(0))};",
                       f"const {it} bz = {t.cast(it, t.group_id_of(0))};"]
    if local_ok:
        shared.append(t.local_array(T, "U", M * N))
    else:
        part = len(sm.partials)
        sm.partials.append(Partial(B * M * N, dtype))
        ptr = low.args.buffer("partial", part, dtype, write=True)
        pre.append(f"__global {T} *U = {ptr} + bz * {M * N};")
    if wg > 1:
        shared += [t.local_array(T, "S", Np), t.local_array("int", "rot", 1)]
    else:
        pre += [f"{T} S[{Np}];", "int rot[1];"]
    # (U in the scratch buffer: the barriers must order its global-memory accesses too)
    sync = [t.barrier_local if local_ok else t.barrier_global] if wg > 1 else []
    eps = t.literal(np.finfo(dtype).eps, dtype)
    one = t.literal(dtype.type(1), dtype)
    zero = t.literal(dtype.type(0), dtype)
    top = Block(low)
    bidx = unravel(Expr.var("bz", B), tuple(batch)) if batch else ()
    # U[j * M + i] = A[i, j] (column-major: a column is contiguous), A transposed when m < n
    load = top.nested(f"for ({it} e = lid; e < {M * N}; e += {wg}) {{", loop_vars=frozenset("e"))
    j, i = unravel(Expr.var("e", M * N), (N, M))
    idx = (*bidx, j, i) if trans else (*bidx, i, j)
    load.emit(None, "U[e] = {0};", load.value(x, idx))
    rot = "rot[0]"
    lines = [*sync,
             f"for (int sweep = 0; sweep < {_SWEEPS}; sweep++) {{",
             f"    if (lid == 0) {rot} = 0;", *(f"    {s}" for s in sync),
             f"    for (int r = 0; r < {Np - 1}; r++) {{",
             f"        for ({it} k = lid; k < {Np // 2}; k += {wg}) {{",
             # the round-robin pairs: column Np - 1 meets r, the others (r + k, r - k)
             f"            const {it} p = k == 0 ? {Np - 1} : (r + k) % {max(Np - 1, 1)};",
             f"            const {it} q = (r + {Np - 1} - k) % {max(Np - 1, 1)};",
             f"            if (p < {N} && q < {N}) {{",
             f"                {T} alpha = {zero}, beta = {zero}, gamma = {zero};",
             f"                for ({it} i = 0; i < {M}; i++) {{",
             f"                    const {T} up = U[p * {M} + i], uq = U[q * {M} + i];",
             "                    alpha += up * up; beta += uq * uq; gamma += up * uq;",
             "                }",
             f"                if (fabs(gamma) > {eps} * sqrt(alpha * beta)) {{",
             f"                    {rot} = 1;",
             f"                    const {T} zeta = (beta - alpha) / (2 * gamma);",
             f"                    const {T} tn = copysign({one}, zeta) / (fabs(zeta) + "
             f"sqrt({one} + zeta * zeta));",
             f"                    const {T} c = {one} / sqrt({one} + tn * tn), s = c * tn;",
             f"                    for ({it} i = 0; i < {M}; i++) {{",
             f"                        const {T} up = U[p * {M} + i], uq = U[q * {M} + i];",
             f"                        U[p * {M} + i] = c * up - s * uq;",
             f"                        U[q * {M} + i] = s * up + c * uq;",
             "                    }",
             "                }",
             "            }",
             "        }", *(f"        {s}" for s in sync),
             "    }",
             f"    const int again = {rot};", *(f"    {s}" for s in sync),
             "    if (!again) break;",
             "}",
             # the column norms, then sorted descending by one item (N is small)
             f"for ({it} j = lid; j < {N}; j += {wg}) {{",
             f"    {T} acc = {zero};",
             f"    for ({it} i = 0; i < {M}; i++) acc += U[j * {M} + i] * U[j * {M} + i];",
             "    S[j] = sqrt(acc);",
             "}", *sync,
             "if (lid == 0) {",
             f"    for ({it} a = 1; a < {N}; a++) {{",
             f"        const {T} v = S[a];",
             f"        {it} b = a;",
             "        for (; b > 0 && S[b - 1] < v; b--) S[b] = S[b - 1];",
             "        S[b] = v;",
             "    }",
             "}", *sync]
    for line in lines:
        top.emit(None, line)
    # (one value: a plain block, so nothing of the epilogue is hoisted above S)
    out = top.nested(f"for ({it} j = lid; j < {N}; j += {wg}) {{", loop_vars=frozenset("j")) \
        if N > 1 else top.nested("if (lid == 0) {")
    oidx = (*bidx, Expr.var("j", N))
    low.bind(node, oidx, out.emit(T, "S[j]" if N > 1 else "S[0]"))
    for st in group.stores:
        _store(out, st, oidx, low, out.value(st.node, oidx))
    body = Renderer().render(top, 1)
    sig = low.args.signature(name)
    source = t.kernel(sig.render(t, (wg,)), shared, [*(f"    {p}" for p in pre), *body])
    return [(Kernel(name, source, sig, (B * wg,), (wg,), group, work=B * M * N * N), low)]
