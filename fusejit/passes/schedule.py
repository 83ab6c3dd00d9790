"""Kernel order and in-place safety: the last step of partitioning.

A plan's kernels share buffers: reduction results stored in temporaries, and arguments written
in place. Every read in the graph of an argument (an INPUT node) reads its *old* value; the new
value is a node of its own. So the schedule must keep three rules:

1. a kernel runs after the kernel that stores each temporary it loads (read after write);
2. every kernel that reads an argument's old value runs before the kernel that writes it
   (write after read), and a write is stored directly only when no other work-item of its own
   kernel reads the elements it overwrites (no race);
3. where (2) cannot hold (the writer produces a temporary its readers need, or its own
   work-items race), the write is *staged*: the kernel stores the value into a temporary and
   a final copy kernel writes it into the argument after everything else has run.

A staged temporary is loaded only by its copy kernel (``loaded``): other kernels recompute the
value from old data as they did before, so staging never adds an ordering constraint.
``passes.verify`` proves these rules again on the lowered module.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import replace

from fusejit.ir.indexing import Index, broadcast_index, unravel
from fusejit.ir.graph import Graph, Node
from fusejit.ir.ops import REDUCE, Op
from fusejit.ir.symbolic import Expr
from fusejit.passes.plan import Dest, Group, Store, leaves_of, reads_of, row_index


def loaded(temps: Sequence[Node], staged: frozenset[int], group: Group) -> dict[Node, int]:
    """The temporaries ``group``'s kernel loads instead of computing (node -> temp index): every
    temporary it reaches but stores itself, except staged values, which only their copy kernel
    reads. Lowering and the verifier both ask this, so they agree on what a kernel reads."""
    own = {st.node for st in group.stores + group.row_stores if st.dest.kind == "temp"}
    every = {n: i for i, n in enumerate(temps)}
    return {n: i for n, i in every.items()
            if n not in own and (group.copy or i not in staged)}


def families(aliases: Sequence[frozenset[int]]) -> dict[int, frozenset[int]]:
    """Parameter -> the parameters sharing its memory (itself included)."""
    return {p: c for c in aliases for p in c}


def computed(stop: set[Node], group: Group) -> set[Node]:
    """``stop`` without the temporaries ``group`` stores itself (a realized value: its kernel
    computes it, reading what it is computed from)."""
    own = {st.node for st in group.stores + group.row_stores if st.dest.kind == "temp"}
    return stop - own if own & stop else stop


def group_roots(group: Group) -> list[Node]:
    """The nodes a group's kernel evaluates: its stores and its reductions' inputs."""
    return [st.node for st in group.stores + group.row_stores] + [r.srcs[0] for r in
                                                                   group.reductions]


def params_read(group: Group, stop: set[Node]) -> set[int]:
    """Array parameters whose (old) values the group's kernel reads, given what it loads."""
    return {n.arg for root in group_roots(group) for n in leaves_of(root, stop)
            if n.op is Op.INPUT and n not in stop}  # (a staged argument value is a temp)


def race(graph: Graph, g: Group, st: Store, family: frozenset[int], kind: str,
         stop: set[Node]) -> str | None:
    """Why storing ``st`` directly into its argument inside ``g`` could change an element that
    another work-item of the same kernel still reads; None when every work-item reads the
    argument's family only at the element it writes itself. ``kind`` is "stores" or "rows"
    (a reduction's row stores); ``stop`` the temporaries the kernel loads."""
    p = st.dest.index
    layout = (graph.params[p].strides, graph.params[p].has_offset)
    if g.kind in ("gemm", "scan", "svd") and g.whole is not None:
        # the product (scan) reads whole rows and columns (rows) of its operands; the epilogue
        # reads its inputs at the output element it stores
        if any(n.op is Op.INPUT and n.arg in family and n not in stop
               for src in g.whole.srcs for n in leaves_of(src, stop)):
            return f"the {dict(gemm='product').get(g.kind, g.kind)} reads the argument its " \
                "kernel writes"
        def at_out(node: Node) -> Index:
            return unravel(Expr.var("o", max(1, math.prod(node.shape))), node.shape)
        written = st.root_index(at_out(st.node))
        stop = stop | {g.whole}
        broadcast_store = False
        reads = [(n, i) for other in g.stores if other.node.shape == st.node.shape
                 for n, i in reads_of(other.node, at_out(other.node), stop)]
        if any(n.op is Op.INPUT and n.arg in family for other in g.stores
               if other.node.shape != st.node.shape for n in leaves_of(other.node, stop)):
            return "a store of another shape reads the argument this kernel writes"
    elif g.kind == "elementwise":
        idx = unravel(Expr.var("gid", max(1, math.prod(g.space))), g.space)

        def at(node: Node) -> Index:
            return broadcast_index(idx, g.space, node.shape)
        written = st.root_index(at(st.node))
        # a smaller root is stored by several work-items (leading 1-dims are not a broadcast)
        broadcast_store = math.prod(st.node.shape) != math.prod(g.space)
        reads = [(n, i) for other in g.stores for n, i in reads_of(other.node, at(other.node),
                                                                   stop)]
    else:
        # the group's own reductions are finished (all stages, across the work-group) before
        # its last pass stores anything: they are values, not reads of the argument
        stop = stop | set(g.reductions)
        row = row_index(g.space, g.axes)
        reads = [(n, i) for other in g.row_stores for n, i in reads_of(other.node, row, stop)]
        reads += [(n, i) for r in g.reductions for n, i in reads_of(r.srcs[0], row, stop)]
        reads += [(n, i) for other in g.stores for n, i in reads_of(
            other.node, unravel(Expr.var("o", math.prod(other.node.shape)), other.node.shape),
            stop)]
        if kind != "rows":
            if any(n.op is Op.INPUT and n.arg in family for n, _ in reads):
                return "a reduction's epilogue writes the argument its rows are read from"
            return None
        written = st.root_index(row)
        broadcast_store = False
    for n, i in reads:
        if n.op is not Op.INPUT or n.arg not in family or n in stop:
            continue  # (an argument's value staged in a temporary is not a read of it)
        if (graph.params[n.arg].strides, graph.params[n.arg].has_offset) != layout:
            return f"argument {n.arg} shares its memory with a different layout"
        if broadcast_store:
            return "other work-items read the elements this kernel writes (broadcast store)"
        if tuple(i) != tuple(written):
            return "work-items read elements that other work-items write"
    return None


def schedule(graph: Graph, groups: list[Group], temps: list[Node],
             aliases: Sequence[frozenset[int]]) -> tuple[list[Group], list[Node], frozenset[int]]:
    """Order the groups so that rules 1-2 of the module docstring hold, staging the writes
    where they cannot; returns the groups in launch order, the temporaries and which of them
    are staged values. ``temps`` are the values other kernels load (reduction results, realized
    values: passes/realize.py)."""
    fam = families(aliases)
    stop = set(temps)  # what kernels load; staged values are never loaded but by copies
    temps = list(temps)
    staged: set[int] = set()
    copies: list[Group] = []
    groups = list(groups)

    def stage(gi: int, kind: str, si: int, why: str) -> None:
        g = groups[gi]
        lst = list(g.stores if kind == "stores" else g.row_stores)
        st = lst[si]
        if st.node.op in REDUCE or st.node in stop:  # its own kernel stores it anyway
            if st.node not in temps:
                temps.append(st.node)
            del lst[si]
        else:
            lst[si] = Store(st.node, Dest("temp", len(temps)))
            staged.add(len(temps))
            temps.append(st.node)
        copies.append(Group("elementwise", st.node.shape, (st,),
                            f"in-place write to argument {st.dest.index} staged through a "
                            f"temporary: {why}", copy=True))
        groups[gi] = replace(g, **({"stores": tuple(lst)} if kind == "stores"
                                   else {"row_stores": tuple(lst)}))

    # 2b. races inside a kernel, judged on each group as it was built (a staged store still
    #     computes its value in the same kernel, so the other stores' reads do not change)
    for gi, g in enumerate(list(groups)):
        for kind, lst in (("stores", g.stores), ("rows", g.row_stores)):
            for si in range(len(lst) - 1, -1, -1):  # backwards: staging may delete an entry
                st = lst[si]
                if st.dest.kind == "param":
                    why = race(graph, g, st, fam.get(st.dest.index, frozenset({st.dest.index})),
                               kind, computed(stop, g))
                    if why is not None:
                        stage(gi, kind, si, why)

    # 1. read-after-write edges: the kernel storing a temporary -> the kernels loading it
    after: list[set[int]] = [set() for _ in groups]  # after[a]: groups that must follow a
    producer = {r: gi for gi, g in enumerate(groups) for r in g.reductions if r in stop}
    producer.update({st.node: gi for gi, g in enumerate(groups) for st in g.stores
                     if st.dest.kind == "temp" and st.node in stop and st.node not in producer})
    reads = [params_read(g, computed(stop, g)) for g in groups]
    for gi, g in enumerate(groups):
        local = computed(stop, g)
        for root in group_roots(g):
            for n in leaves_of(root, local) & stop:
                src = producer.get(n)
                if src is not None and src != gi:
                    after[src].add(gi)

    # 2a. write-after-read edges, one write at a time: every reader of the old value before the
    #     writer, unless a reader must itself follow the writer (then stage the write)
    for gi in range(len(groups)):
        g = groups[gi]
        for kind, lst in (("stores", g.stores), ("rows", g.row_stores)):
            for si in range(len(lst) - 1, -1, -1):
                st = lst[si]
                if st.dest.kind != "param":
                    continue
                family = fam.get(st.dest.index, frozenset({st.dest.index}))
                readers = {r for r in range(len(groups)) if r != gi and reads[r] & family}
                late = readers & _reachable(after, gi)
                if late:
                    stage(gi, kind, si, f"kernel {min(late)} reads argument "
                                        f"{st.dest.index} and needs a result of this kernel")
                    continue
                for r in readers:
                    after[r].add(gi)
    order = _stable_toposort(after)
    return [groups[i] for i in order] + copies, temps, frozenset(staged)


def _reachable(after: list[set[int]], start: int) -> set[int]:
    seen, stack = set(), [start]
    while stack:
        for nxt in after[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _stable_toposort(after: list[set[int]]) -> list[int]:
    """Groups in dependency order, keeping the partitioner's order wherever it is free."""
    indegree = [0] * len(after)
    for succ in after:
        for s in succ:
            indegree[s] += 1
    ready = [i for i, d in enumerate(indegree) if d == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        i = heapq.heappop(ready)
        out.append(i)
        for s in after[i]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, s)
    if len(out) != len(after):  # pragma: no cover - edges are only added when acyclic
        from fusejit.errors import ScheduleError

        raise ScheduleError("kernel dependencies form a cycle")
    return out
