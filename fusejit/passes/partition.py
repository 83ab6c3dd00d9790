"""Partition a graph into fusion groups: each group becomes one kernel (two for split reductions).

The rules, in the order they apply:

1. Only *roots* (outputs, in-place writes), reduction results that some other kernel needs
   and values whose recomputation would cost more than storing them (read at many shifted
   positions, as the steps of an unrolled stencil loop: ``realize.py``) are ever stored; every
   other elementwise or movement node is recomputed inside each kernel that needs it (cheap
   ops, and the reason fusion saves memory traffic).
2. Reductions over the same input space and axes share one kernel (horizontal fusion). A
   reduction that consumes another one of the same space (``var`` after ``mean``, softmax's sum
   after its max) becomes a later *stage* of the same kernel when one work-group owns whole rows
   (unless the rows are so long and so few that splitting each reduction over work-groups pays).
3. Elementwise work on reduction results at the kernel's own output index is its *epilogue*;
   elementwise work over the reduction's input space that reads the results broadcast back
   (softmax, layernorm) is its *row fusion* stage, stored in the kernel's last pass.
4. Remaining roots form elementwise groups: all roots whose shapes broadcast together go into
   one kernel, stores of smaller roots guarded to their own index range.

Every split carries a ``reason`` that ``lower()`` and ``explain()`` print.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from fusejit.errors import BroadcastError
from fusejit.ir.indexing import unravel
from fusejit.ir.graph import Graph, Node
from fusejit.ir.ops import REDUCE, Op
from fusejit.ir.shapes import broadcast_shapes
from fusejit.ir.symbolic import Expr
from fusejit.passes.inplace import fit_arguments
from fusejit.passes.plan import (
    Dest,
    DeviceLimits,
    Group,
    Plan,
    ReduceStrategy,
    Store,
    depends,
    leaves_of,
    outer_index,
    outer_shape,
    reads_at,
    reads_of,
    row_index,
)
from fusejit.passes.realize import realize, realize_reason, recompute_limit
from fusejit.passes.schedule import schedule
from fusejit.passes.visit import visit_group, visit_pays, visit_reason
from fusejit.passes.strategy import (
    choose_strategy,
    compute_size,
    cpu_vector_strategy,
    inner_contiguous,
    lane_bytes,
    sized_strategy,
    split_pays,
)

# -- partition ------------------------------------------------------------------------------------


def partition(graph: Graph, limits: DeviceLimits | None = None,
              aliases: Sequence[frozenset[int]] = (), rows: bool = False,
              dynamic: bool = False) -> Plan:
    """Group the graph's work into kernels (see the module docstring); ``aliases`` are sets of
    array parameters that share memory (the same array passed twice); ``rows``: size row
    reductions for their row-length bucket (kernels for runtime extents, fusejit/ir/rows.py);
    ``dynamic``: kernels take their extents at launch (strategies must not follow the batch)."""
    limits = limits if limits is not None else DeviceLimits()
    roots: list[Store] = [Store(n, Dest("output", i)) for i, n in enumerate(graph.outputs)]
    for p, n in graph.writes:
        if n.op is Op.SETITEM and n.srcs[0].op is Op.INPUT and n.srcs[0].arg == p:
            # x[region] = v on an unchanged argument: store only the region
            roots.append(Store(n.srcs[1], Dest("param", p), n.arg))
        else:
            roots.append(Store(n, Dest("param", p)))
    reductions = [n for n in graph.toposort() if n.op in REDUCE]
    red_set = set(reductions)
    # 0. values stored because recomputing them per reader would cost more (realize.py);
    #    like reductions, kernels load them: every walk below stops at them
    realized = realize(graph, red_set, recompute_limit(limits.is_gpu))
    stop = red_set | set(realized)
    # realized values computed from reductions: their kernels run after the reductions', so
    # what reads them never joins a reduce group (it could be one they follow)
    late = _after_reductions(realized, red_set, stop)

    # 1. reductions -> groups, in topological order. A reduction joins the latest group of its
    #    (space, axes) when everything it reads is in that group (at the row's own index, a later
    #    stage) or in an earlier group; so a group only ever depends on earlier groups.
    #    Rows so long, and outputs so few, that a split pays (see split_pays) are not staged:
    #    a later stage would pin each row to one work-group; each reduction is split instead.
    members: list[list[Node]] = []
    keys: list[tuple] = []
    stage_of: dict[Node, int] = {}
    group_of: dict[Node, int] = {}
    unstaged: set[int] = set()  # groups that start where staging was refused
    for r in reductions:
        key = (r.srcs[0].shape, r.arg)
        direct = leaves_of(r.srcs[0], stop) & red_set
        target = next((g for g in range(len(keys) - 1, -1, -1) if keys[g] == key), None)
        if late and leaves_of(r.srcs[0], stop) & late:
            target = None
        if target is not None and all(group_of[d] <= target for d in direct) and reads_at(
                r.srcs[0], row_index(*key), set(members[target]),
                stop - set(members[target]), outer_index(*key)):
            inside = [d for d in direct if group_of[d] == target]
            if not inside or not split_pays(graph, r, stop, limits):
                stage_of[r] = max((stage_of[d] + 1 for d in inside), default=0)
                group_of[r] = target
                members[target].append(r)
                continue
            unstaged.add(len(keys))
        keys.append(key)
        members.append([r])
        group_of[r] = len(keys) - 1
        stage_of[r] = 0

    # 2. each root goes to the latest reduce group it depends on when it can be fused there
    #    (epilogue at the outer index, or row fusion over the input space); else elementwise.
    strategies = []
    along: list[bool] = []  # lanes walk the rows in memory order
    for g, (key, ms) in enumerate(zip(keys, members)):
        n_stages = 1 + max(stage_of[m] for m in ms)
        contiguous = inner_contiguous(graph, ms[0], stop)
        along.append(contiguous)
        vector_ok = not any(m.op in (Op.ARGMAX, Op.ARGMIN) for m in ms)
        # every value computed per element, not just the reduced one: PoCL mishandles vectors
        # over 32 bytes (an int64 cone under a bool any() gave long8 operands and wrong results)
        widest = max(max(compute_size(m.dtype), _widest(m.srcs[0], stop)) for m in ms)
        strategies.append(sized_strategy(lambda space: (
            cpu_vector_strategy(space, key[1], n_stages, contiguous, limits, vector_ok, widest,
                                dynamic)
            or choose_strategy(space, key[1], n_stages, contiguous, limits,
                               sum(lane_bytes(m) for m in ms), dynamic)),
            key[0], key[1], rows, limits))
    epilogues: list[list[Store]] = [[] for _ in keys]
    row_stores: list[list[Store]] = [[] for _ in keys]
    visits: list[list[Store]] = [[] for _ in keys]  # stored as the first pass reads (visit.py)
    pending: list[Store] = []
    pays = visit_pays(along, strategies, limits.is_gpu)
    for st in roots:
        n = st.node
        deps = {group_of[d] for d in leaves_of(n, stop) & red_set}
        if late and leaves_of(n, stop) & late:
            pending.append(st)
            continue
        g = max(deps, default=None)
        h = visit_group(graph, st, deps, keys, members, stop, pays)
        if h is not None:
            visits[h].append(st)
            continue
        if g is not None:
            space, axes = keys[g]
            group, others = set(members[g]), stop - set(members[g])
            if math.prod(n.shape) == math.prod(outer_shape(space, axes)) and reads_at(
                    n, unravel(Expr.var("o", math.prod(n.shape)), n.shape), group, others,
                    outer_index(space, axes)):
                epilogues[g].append(st)
                continue
            if strategies[g].gy == 1 and n.shape == space and reads_at(
                    n, row_index(space, axes), group, others, outer_index(space, axes)):
                row_stores[g].append(st)
                continue
        pending.append(st)
    for g, (key, ms) in enumerate(zip(keys, members)):  # stores computed with the lanes too
        st = strategies[g]
        wide = max((_widest(x.node, stop) for x in epilogues[g] + row_stores[g] + visits[g]),
                   default=0)
        if st.vec > 1 and st.vec * wide > 32:
            n_stages = 1 + max(stage_of[m] for m in ms)
            widest = max(wide, *(compute_size(m.dtype) for m in ms),
                         *(_widest(m.srcs[0], stop) for m in ms))
            redo = sized_strategy(lambda space: cpu_vector_strategy(
                space, key[1], n_stages, st.vec_axis == "rows" or
                inner_contiguous(graph, ms[0], stop), limits, True, widest, dynamic)
                or choose_strategy(space, key[1], n_stages, inner_contiguous(graph, ms[0], stop),
                                   limits, sum(lane_bytes(m) for m in ms), dynamic),
                key[0], key[1], rows, limits)
            strategies[g] = dataclasses.replace(redo, gy=1) if row_stores[g] else redo

    groups: list[Group] = []
    for g, ((space, axes), ms) in enumerate(zip(keys, members)):
        n_stages = 1 + max(stage_of[m] for m in ms)
        stages = tuple(tuple(m for m in ms if stage_of[m] == s) for s in range(n_stages))
        st = strategies[g]
        how = "one output per work-group" if st.lx == 1 else f"{st.lx} outputs per work-group"
        lanes = f"{st.ly} lanes each" if st.ly > 1 else "one lane each"
        reason = f"reduction over axes {axes} of {space} ({how}, {lanes}"
        if st.gy > 1:
            outs = math.prod(outer_shape(space, axes))
            reason += (f"; split: {math.prod(space) // max(outs, 1)} elements per output but "
                       f"only {math.ceil(outs / st.lx)} work-group(s) of outputs, so {st.gy} "
                       "work-groups per output write partial results and a second kernel "
                       "combines them")
        reason += (f"; {n_stages} stages in one pass" if n_stages > 1 else "") + ")"
        if g in unstaged:
            reason += ("; a pass of its own, not a later stage of the earlier reduction it "
                       "reads: few, long rows are split instead")
        elif any(keys[h] == keys[g] for h in range(g)):
            reason += ("; not fused with the earlier reduction of the same shape because it "
                       "reads a result that is computed in between")
        if visits[g]:
            reason += visit_reason(len(visits[g]))
        groups.append(Group("reduce", space, tuple(epilogues[g]), reason, tuple(axes), stages,
                            tuple(row_stores[g] + visits[g]), st))

    # 3. materialise reductions that something outside their own group reads
    #    (each reader is walked once: per reduction it would be quadratic in big functions)
    needed: set[Node] = set()
    for g, gr in enumerate(groups):
        readers = [st.node for st in gr.stores + gr.row_stores] + [x.srcs[0] for x in
                                                                   gr.reductions]
        for n in readers:
            needed |= {d for d in leaves_of(n, stop) & red_set if group_of[d] != g}
    for st in pending:
        needed |= leaves_of(st.node, stop) & red_set
    for m in late:
        needed |= {d for s in m.srcs for d in leaves_of(s, stop) & red_set}
    temps = [r for r in reductions if r in needed]
    pending += [Store(m, Dest("temp", len(temps) + i)) for i, m in enumerate(realized)]
    temps += realized
    after = _levels(realized, groups, group_of, red_set, stop)
    level = {id(st): after(st.node) for st in pending}
    pending.sort(key=lambda st: level[id(st)])

    # 4. elementwise groups: roots whose shapes broadcast together share a kernel, if they read
    #    at the same level (_levels: no kernel may feed what it follows)
    #    (a zero-size root needs no store: sharing a kernel would make that kernel's iteration
    #    space zero-size too, leaving the other roots unwritten)
    buckets: list[list[Store]] = []
    for st in pending:
        if st.node.size == 0:
            continue
        for bucket in buckets:
            if level[id(bucket[0])] != level[id(st)]:
                continue
            try:
                broadcast_shapes(*(s.node.shape for s in bucket), st.node.shape)
            except BroadcastError:
                continue
            bucket.append(st)
            break
        else:
            buckets.append([st])
    notes = []
    buckets = [part for bucket in buckets
               for part in fit_arguments(graph, bucket, stop, limits.max_arg_bytes)]
    levels = [level[id(bucket[0])] for bucket in buckets]
    for bucket, at in zip(buckets, levels):
        space = broadcast_shapes(*(s.node.shape for s in bucket))
        reason = f"elementwise over {space}"
        if levels.count(at) > 1:
            reason += " (a separate kernel: outputs whose shapes do not broadcast together)"
        if at > 0:
            reason += "; a kernel of its own after the kernels that store the values it reads"
        if any(r in temps for r in red_set) and any(depends(s.node, red_set, set(realized))
                                                    for s in bucket):
            reason += "; reads reduction results stored by an earlier kernel"
        reason += realize_reason(bucket, set(realized), recompute_limit(limits.is_gpu))
        groups.append(Group("elementwise", space, tuple(bucket), reason))
    if any(levels.count(at) > 1 for at in levels):
        notes.append("roots of non-broadcastable shapes were split into separate kernels")
    groups, temps, staged = schedule(graph, groups, temps, aliases)
    return Plan(tuple(groups), tuple(temps), (), tuple(notes), staged)


__all__ = ["Dest", "DeviceLimits", "Group", "Plan", "ReduceStrategy", "Store", "choose_strategy",
           "cpu_vector_strategy", "partition", "reads_of"]


def _widest(root: Node, stop: set[Node]) -> int:
    """The largest element size computed per element for ``root`` (not below ``stop`` nodes,
    whose values are loaded)."""
    widest, seen, stack = 0, set(), [root]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        widest = max(widest, compute_size(n.dtype))
        if n is root or n not in stop:
            stack.extend(n.srcs)
    return widest


def _levels(realized: list[Node], groups: list[Group], group_of: dict[Node, int],
            red_set: set[Node], stop: set[Node]) -> Callable[[Node], int]:
    """The level of the elementwise kernel that may store a node: past the kernels storing
    the realized values it reads, and past the reduction kernels it reads, which themselves
    follow the realized values *they* read. Elementwise roots share a kernel only at one
    level, so no kernel both feeds and follows another (a reduction over realized steps, and
    an output scaled by it, are two kernels around it)."""
    level: dict[Node, int] = {}
    reduced: dict[int, int] = {}
    kept = set(realized)

    def past(nodes: Sequence[Node], own: int = -1) -> int:
        out = 0
        for n in nodes:
            for x in leaves_of(n, stop):
                if x in kept:
                    out = max(out, of(x) + 1)
                elif x in red_set and group_of[x] != own:
                    out = max(out, group_level(group_of[x]))
        return out

    def of(m: Node) -> int:
        if m not in level:
            level[m] = past(m.srcs)
        return level[m]

    def group_level(g: int) -> int:
        if g not in reduced:
            gr = groups[g]
            reduced[g] = past([st.node for st in gr.stores + gr.row_stores] +
                              [r.srcs[0] for r in gr.reductions], g)
        return reduced[g]
    for m in realized:  # topological order: each asks only what it reads, levelled already
        of(m)
    return lambda node: of(node) if node in kept else past([node])


def _after_reductions(realized: list[Node], red_set: set[Node], stop: set[Node]) -> set[Node]:
    """The realized values computed from a reduction's result, directly or through other
    realized values."""
    late: set[Node] = set()
    for m in realized:  # topological order
        if any(x in red_set or x in late for s in m.srcs for x in leaves_of(s, stop)):
            late.add(m)
    return late
