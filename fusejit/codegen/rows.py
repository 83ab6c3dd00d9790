"""Elementwise kernels for runtime row lengths: their source does not change with the length
of the last axis (``@fuse(dynamic=...)`` once a last axis changed, as the row reductions of
fusejit/ir/rows.py), so one program serves every row length.

Two forms, both taking their extents at launch:

* **flat**: every access is the flat index (full-shape contiguous operands, temporaries and
  stores, scalars): the grid-stride loop over vectors of the flattened array of the default
  kernel (codegen/source.py), with ``n_n`` elements at launch, the whole vectors ``n_n / vec``
  counted in the kernel, a scalar tail (a condition: a grid-stride loop there made PoCL
  1.4x slower), and the lanes chosen by the element type only (not by how the row length
  splits into them);
* **rows**: any other group (a row broadcast against the batch, ``w[:n]`` against
  ``x[:, :n]``, views of a wider buffer): teams of ``n_t`` work-items walk the ``n_o`` rows
  (a grid-stride loop), a team the ``n_c / vec`` whole vectors of its row and then its
  ``n_c % vec`` last elements one by one. Rows are addressed through the launch-time row
  length (``RowExtent``: strides that are multiples of a contiguous row are ``n_c``), vector
  lanes load and store at any alignment (``vector_load_at``), and values that depend on the
  row alone (a ``(m, 1)`` operand) are computed once per row. ``n_t`` is the next power of
  two of the bucket's vectors per row, at most the work-group size (GPUs, whose teams
  coalesce) or 64 (CPUs), so lanes of short rows are not idle; a launch of any global size
  that is a multiple of ``n_t`` covers every row (the autotuner may pick another).

The index ranges are the row bucket's (fusejit/ir/rows.py), so no simplification depends on the
row length itself. Still specialised: the sizes of the other axes inside the row index of a
space of three or more axes (they are unravelled with constants, as batch extents are), rows of
0 and 1, random numbers (a Philox block's lanes follow the flat index), complex values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fusejit.ir.indexing import Index, unravel
from fusejit.ir.graph import Node
from fusejit.codegen.kernels import Kernel
from fusejit.codegen.lowering import LANE, Block, Lowering
from fusejit.ir.ops import ELEMENTWISE, Op
from fusejit.passes.plan import Group
from fusejit.codegen.render import Renderer
from fusejit.ir.rows import RowExtent, bucket, row_address
from fusejit.ir.shapes import row_major_strides
from fusejit.ir.symbolic import Expr, Var


@dataclass(frozen=True)
class RowLengths(RowExtent):
    """The rows form's row lengths: the iteration's (``n_c``) and, for every other array whose
    rows are contiguous, its own (``n_c1``, ``n_c2``, ... by first use): ``(x * x)[:, ::2]``
    iterates rows of ``ceil(n / 2)`` over an array with rows of ``n``."""

    args: Any = None
    others: dict = field(default_factory=dict, compare=False)

    def address(self, idx: tuple[Expr, ...], shape: tuple[int, ...],
                strides: tuple[int, ...] | None) -> Expr:
        if not shape or shape[-1] < 2 or shape[-1] == self.length:
            return super().address(idx, shape, strides)
        var = self.others.get(shape[-1])
        if var is None:
            name = self.args.extent(f"c{len(self.others) + 1}", shape[-1])
            var = self.others[shape[-1]] = Var(name, 1, bucket(shape[-1]))
        return row_address(idx, shape, strides, shape[-1], var)

CPU_TEAM = 64  # work-items a row at most on CPUs


def elementwise_rows(sm: Any, name: str, group: Group, low: Lowering, vec: int, body: Any
                     ) -> tuple[Kernel, Lowering]:
    """The kernel of an elementwise ``group`` whose row length comes at launch (see the
    module docstring); ``body(block, idx)`` emits its stores at ``idx``."""
    space = group.space
    if len(space) >= 2 and space[-1] >= 2 and not flat(sm, group, low):
        return _rows(sm, name, group, low, vec, body)
    return _flat(sm, name, group, low, vec, body)


def flat(sm: Any, group: Group, low: Lowering) -> bool:
    """Does every access of ``group`` address the flat index of its space?"""
    space = group.space

    def contiguous(shape: tuple[int, ...], strides: tuple[int, ...] | None) -> bool:
        return shape == space and (strides is None or tuple(strides) == row_major_strides(space))
    for st in group.stores:
        if st.region is not None or st.node.shape != space:
            return False
        if st.dest.kind == "param":
            p = sm.graph.params[st.dest.index]
            if not contiguous(p.shape, p.strides):
                return False
    seen: set[Node] = set()
    stack = [st.node for st in group.stores]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.shape == () and node.op in (Op.SCALAR, Op.CONST):
            continue
        if node in low.materialized:  # a temporary: contiguous, of its node's shape
            if node.shape != space:
                return False
        elif node.op is Op.INPUT:
            p = sm.graph.params[node.arg]
            if not contiguous(p.shape, p.strides):
                return False
        elif node.op in ELEMENTWISE and node.shape in (space, ()):
            stack.extend(node.srcs)
        else:
            return False
    return True


def _flat(sm: Any, name: str, group: Group, low: Lowering, vec: int, body: Any
          ) -> tuple[Kernel, Lowering]:
    it = low.index_type
    space = group.space
    n = math.prod(space)
    nv = n // vec
    total = low.args.extent("n", n)
    top = Block(low)
    bound = "n_v" if vec > 1 else total
    low.lanes = vec
    loop = top.nested(f"for ({it} w = gid; w < {bound}; w += gsz) {{",
                      loop_vars=frozenset({"w"}))
    lane = Expr.var(LANE, vec) if vec > 1 else Expr(0)
    body(loop, unravel(Expr.of(Var("w", 0, max(nv - 1, 1))) * vec + lane, space))
    if vec > 1:  # the n_n % vec last elements, one a work-item (a condition, not a loop:
        # PoCL ran chain8 2^22 1.4x slower with a grid-stride tail loop beside the main one)
        low.lanes = 1
        tail = top.nested(f"if (i_t < {total}) {{")
        body(tail, unravel(Expr.of(Var("i_t", 0, n - 1)), space))
    # (at least n % vec work-items: the launch reaches every tail element; a global size of
    # 2^19 + 7, say, made PoCL pick small work-groups: chain8 2^22 ran 1.3x slower)
    return _kernel(sm, name, group, low, top, max(math.ceil(n / vec), n % vec), n, vec,
                   [f"const {it} n_v = {total} / {vec};", f"const {it} i_t = n_v * {vec} + gid;"]
                   if vec > 1 else [])


def _rows(sm: Any, name: str, group: Group, low: Lowering, vec: int, body: Any
          ) -> tuple[Kernel, Lowering]:
    it = low.index_type
    space = group.space
    rows, length = math.prod(space[:-1]), space[-1]
    b = bucket(length)
    team = min(1 << (math.ceil(b / vec) - 1).bit_length(),
               sm.default_local or CPU_TEAM)
    n_o, n_c = low.args.extent("o", rows), low.args.extent("c", length)
    n_t = low.args.extent("t", team)
    low.row = RowLengths(length, n_c, b, low.args)
    top = Block(low)
    pre = [f"const {it} teams = gsz / {n_t};", f"const {it} t_ = gid % {n_t};"]
    if vec > 1:
        pre.append(f"const {it} n_cv = {n_c} / {vec};")
    guard = top.nested(f"if (gid < teams * {n_t}) {{")
    outer = guard.nested(f"for ({it} o = gid / {n_t}; o < {n_o}; o += teams) {{",
                         loop_vars=frozenset({"o"}))
    o_idx = unravel(Expr.var("o", rows), space[:-1])
    low.lanes = vec
    lane = Expr.var(LANE, vec) if vec > 1 else Expr(0)
    loop = outer.nested(f"for ({it} c = t_; c < {'n_cv' if vec > 1 else n_c}; "
                        f"c += {n_t}) {{", loop_vars=frozenset({"c"}))
    body(loop, (*o_idx, Expr.of(Var("c", 0, max(b // vec - 1, 0))) * vec + lane))
    if vec > 1:  # the row's n_c % vec last elements, one a work-item
        low.lanes = 1
        tail = outer.nested(f"for ({it} ct = n_cv * {vec} + t_; ct < {n_c}; "
                            f"ct += {n_t}) {{", loop_vars=frozenset({"ct"}))
        body(tail, (*o_idx, Expr.of(Var("ct", 0, b - 1))))
    return _kernel(sm, name, group, low, top, rows * team, rows * length, vec, pre)


def _kernel(sm: Any, name: str, group: Group, low: Lowering, top: Block, items: int,
            work: int, vec: int, pre: list[str]) -> tuple[Kernel, Lowering]:
    it = low.index_type
    t = sm.target
    lines = Renderer().render(top, 1)
    sig = low.args.signature(name)
    local = sm.default_local
    source = t.kernel(sig.render(t, (local,) if t.fixed_local_size else None), [],
                      [f"    const {it} gid = {t.cast(it, t.global_id)};",
                       f"    const {it} gsz = {t.cast(it, t.global_size)};",
                       *(f"    {p}" for p in pre), *lines])
    gsize = (-(-items // local) * local if local else items,)
    return (Kernel(name, source, sig, gsize, (local,) if local else None, group, work=work,
                   items=items, vec=vec), low)


__all__ = ["Index", "elementwise_rows", "flat"]
