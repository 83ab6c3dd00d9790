"""Horizontal fusion of elementwise outputs into a reduction's first pass ("visit stores").

``(np.exp(x) * 2, x.sum())`` used to run as two kernels that each read ``x``: the reduction,
and an elementwise kernel for the other output. A reduction kernel's first pass already visits
every element of its input space exactly once (each row index ``(o, r)`` belongs to one lane of
one work-group, split reductions included: the partial kernels share out the rows), so it can
also store an elementwise output over that space at the element it is visiting, and the
separate kernel and its second read of ``x`` disappear.

The partitioner puts such a root into the reduce group's ``row_stores`` (so every consumer of
a group's stores sees it); what tells it apart from row fusion (softmax's ``exp(x - max)``) is
that it reads none of the group's reductions, so ``reduce_source`` stores it inside the first
pass rather than in a last pass after the reductions have finished. The rules:

* it is a function output (a fresh buffer): an in-place write of an argument in the first
  pass would change what a later stage of the same work-item reads again;
* it reads no reduction result at all (those are row fusion or epilogues, or need a kernel
  that runs after the reduction's);
* its shape is the reduction's input space, element for element (the row index it is
  evaluated at is the one the reduction's loop visits);
* the cost model: it pays when the output reads an array the reduction reads too (that read
  is shared, and a launch saved); an unrelated output would only move its work onto the
  reduction's work-group shape, chosen for the reduction, for no saved traffic. And the
  reduction's layout must suit the stores (``visit_pays``, measured with
  benchmarks/horizontal_fusion.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from fusejit.ir.graph import Graph, Node
from fusejit.ir.ops import Op
from fusejit.passes.plan import Group, ReduceStrategy, Store, depends, leaves_of


def visit_group(graph: Graph, st: Store, deps: set[int], keys: Sequence[tuple],
                members: Sequence[Sequence[Node]], reductions: set[Node],
                pays: Sequence[bool]) -> int | None:
    """The reduce group (index into ``keys``/``members``) whose first pass should also store
    root ``st``, or None; ``deps`` are the groups of the reductions the root reads, ``pays``
    per group whether its lanes' layout suits an elementwise store (see the docstring)."""
    n = st.node
    if st.dest.kind != "output" or deps or n.size == 0:
        return None
    mine = _arrays(graph, n, reductions)
    if not mine:
        return None
    best, shared = None, 0
    for g, (key, ms) in enumerate(zip(keys, members)):
        if key[0] != n.shape or not pays[g]:
            continue
        theirs: set[int] = set()
        for r in ms:
            theirs |= _arrays(graph, r.srcs[0], reductions)
        common = len(mine & theirs)
        if common > shared:  # the group sharing the most input arrays (the first on a tie)
            best, shared = g, common
    return best


def visit_pays(along: Sequence[bool], strategies: Sequence[ReduceStrategy], is_gpu: bool
               ) -> list[bool]:
    """Per reduce group: does storing an elementwise output in its first pass beat a kernel
    of its own? Measured against two kernels (benchmarks/horizontal_fusion.py):

    * CPUs (PoCL, 2 cores): when the lanes walk the rows in memory order (``along``: row and
      full reductions, split or not): ``(x*3+1, x.max(axis=1))`` at 2048x2048 6.3 -> 2.2 ms.
      Not columns, whose work-items stride down the rows: ``(np.sqrt(x), x.sum(axis=0))``
      went 12 -> 17 ms.
    * GPUs: when one work-group owns each output (no split, ``gy == 1``), rows or columns:
      H200 at 8192x8192 float32, throughput, row max 0.201 -> 0.137 ms, column sum 0.266 ->
      0.208. Not split reductions (a full ``x.sum()``), whose few long-running lanes were
      slower with the stores than the two kernels: ``(np.exp(x) * 2, x.sum())`` at 2^26
      0.260 -> 0.314 ms, ``(x - 1, x.mean(), x.std())`` 0.380 -> 0.432.
    """
    if is_gpu:
        return [st.gy == 1 for st in strategies]
    return list(along)


def visit_stores(group: Group) -> tuple[Store, ...]:
    """The row stores of a reduce group that its first pass writes (they read none of the
    group's reductions; see the module docstring)."""
    if not group.row_stores:
        return ()
    mine = set(group.reductions)
    return tuple(st for st in group.row_stores if not depends(st.node, mine, set()))


def visit_reason(count: int) -> str:
    """What ``explain()`` says about a group's visit stores."""
    what = "an elementwise output" if count == 1 else f"{count} elementwise outputs"
    return (f"; its first pass also stores {what} over the same input space as it reads "
            "each element (horizontal fusion: one read of the shared inputs, one kernel "
            "fewer)")


def _arrays(graph: Graph, node: Node, reductions: set[Node]) -> set[int]:
    """Array parameters ``node`` reads (not through a reduction)."""
    return {x.arg for x in leaves_of(node, reductions)
            if x.op is Op.INPUT and graph.params[x.arg].kind in ("array", "const")}
