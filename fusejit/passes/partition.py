"""Partition a graph into fusion groups: each group becomes one kernel (two for split reductions).

The rules, in the order they apply:

1. Only *roots* (outputs, in-place writes) and reduction results that some other kernel needs
   are ever stored; every elementwise or movement node is recomputed inside each kernel that
   needs it (cheap ops, and the reason fusion saves memory traffic).
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

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import BroadcastError
from ..indexing import Index, src_index, unravel
from ..ir import Graph, Node
from ..ops import LEAVES, REDUCE, Op
from ..shapes import broadcast_shapes, row_major_strides
from ..symbolic import Expr


@dataclass(frozen=True)
class Dest:
    """Where a store goes: a function output, an argument written in place, or a temporary."""

    kind: str  # "output" | "param" | "temp"
    index: int


@dataclass(frozen=True)
class Store:
    """Store ``node`` into ``dest``. A ``region`` (a SETITEM's per-dim (start, step, count,
    region dim)) stores ``node`` into that strided part of an argument only."""

    node: Node
    dest: Dest
    region: tuple[tuple[int, int, int, int], ...] | None = None

    def root_index(self, idx: Index) -> Index:
        """Index into the destination written when ``node`` is evaluated at ``idx``."""
        if self.region is None:
            return idx
        return tuple(Expr(start) + (idx[rdim] * step if rdim >= 0 else Expr(0))
                     for start, step, _, rdim in self.region)


@dataclass(frozen=True)
class DeviceLimits:
    """What the cost model needs to know about the device."""

    max_work_group: int = 256
    local_mem: int = 32 * 1024
    compute_units: int = 8
    is_gpu: bool = False
    max_arg_bytes: int = 1024  # CL_DEVICE_MAX_PARAMETER_SIZE (1 KiB is the guaranteed minimum)


@dataclass(frozen=True)
class ReduceStrategy:
    """Work-group shape of a reduction: ``lx`` lanes across outputs, ``ly`` along the reduced
    axes, ``gy`` work-groups splitting the reduced axes (then a second kernel combines), and
    ``cache`` elements per lane kept in registers between stages (0 = re-read). Neighbouring
    work-items (local dimension 0) are the lanes that read neighbouring addresses: ``ly`` when
    rows are contiguous (``along_rows``), else ``lx``."""

    lx: int
    ly: int
    gy: int = 1
    cache: int = 0
    along_rows: bool = False  # local dimension 0 is ly (rows are contiguous), else lx
    # OpenCL vector lanes inside each work-item (CPU devices vectorise these, not work-items
    # separated by barriers): along the reduced axis ("rows", a pairwise lane combine at the
    # end) or across adjacent outputs ("outputs", each lane its own result)
    vec: int = 1
    vec_axis: str = "rows"


@dataclass(frozen=True)
class Group:
    kind: str  # "elementwise" | "reduce"
    space: tuple[int, ...]  # elementwise: iteration shape; reduce: the reductions' input shape
    stores: tuple[Store, ...]  # elementwise stores; reduce: epilogue stores (kept shape)
    reason: str
    axes: tuple[int, ...] = ()
    stages: tuple[tuple[Node, ...], ...] = ()
    row_stores: tuple[Store, ...] = ()  # reduce: stores over the input space (row fusion)
    strategy: ReduceStrategy | None = None
    reads: frozenset[Node] = field(default=frozenset())  # materialised nodes it loads

    @property
    def outer_shape(self) -> tuple[int, ...]:
        return tuple(1 if i in self.axes else d for i, d in enumerate(self.space))

    @property
    def reduced_size(self) -> int:
        return math.prod(self.space[i] for i in self.axes)

    @property
    def reductions(self) -> tuple[Node, ...]:
        return tuple(r for stage in self.stages for r in stage)


@dataclass(frozen=True)
class Plan:
    groups: tuple[Group, ...]
    temps: tuple[Node, ...]  # temp i holds temps[i], contiguous
    copies: tuple[tuple[int, int], ...] = ()  # (temp, param): in-place results copied back
    notes: tuple[str, ...] = ()


# -- analysis -------------------------------------------------------------------------------------


def reads_of(node: Node, idx: Index, stop: set[Node]) -> list[tuple[Node, Index]]:
    """(node, index) pairs of every ``stop`` node or leaf reached evaluating ``node`` at ``idx``."""
    out: list[tuple[Node, Index]] = []
    seen: set[tuple[Node, Index]] = set()
    stack = [(node, idx)]
    while stack:
        n, i = stack.pop()
        if (n, i) in seen:
            continue
        seen.add((n, i))
        if n in stop or n.op in LEAVES:
            out.append((n, i))
            continue
        for k in range(len(n.srcs)):
            stack.append((n.srcs[k], src_index(n, k, i)))
    return out


def _depends(node: Node, targets: set[Node], stop: set[Node]) -> bool:
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in targets:
            return True
        if n in stop and n is not node:
            continue
        stack.extend(n.srcs)
    return False


def _outer_index(group_space: tuple[int, ...], axes: tuple[int, ...]) -> Index:
    outer = tuple(1 if i in axes else d for i, d in enumerate(group_space))
    return unravel(Expr.var("o", math.prod(outer)), outer)


def _row_index(space: tuple[int, ...], axes: tuple[int, ...]) -> Index:
    """Index of the input space in terms of the outer linear ``o`` and reduced linear ``r``."""
    outer = _outer_index(space, axes)
    red_shape = tuple(space[i] for i in axes)
    red = unravel(Expr.var("r", math.prod(red_shape)), red_shape)
    it = iter(red)
    return tuple(next(it) if i in axes else outer[i] for i in range(len(space)))


# -- strategy -------------------------------------------------------------------------------------


def choose_strategy(space: tuple[int, ...], axes: tuple[int, ...], n_stages: int,
                    inner_contiguous: bool, limits: DeviceLimits,
                    lane_bytes: int = 0) -> ReduceStrategy:
    """Cost model for a reduction's work-group shape (see ReduceStrategy). ``lane_bytes``: local
    memory each lane needs for the trees (the work-group must fit ``limits.local_mem``)."""
    red = math.prod(space[i] for i in axes)
    outer = math.prod(d for i, d in enumerate(space) if i not in axes)
    wg = min(limits.max_work_group, 1024 if limits.is_gpu else 256)
    target_groups = limits.compute_units * (8 if limits.is_gpu else 2)
    if inner_contiguous and limits.is_gpu:
        # Rows along lanes. Measured on an H200 (softmax 16384x1024, layernorm 8192x4096):
        # 64-256 lanes per row with 8-16 elements per lane kept in registers beat one element
        # per lane by 2-4x (shallower barrier trees, more independent loads per lane).
        ly = 1
        while ly * 2 <= min(wg, 256, max(32, red // 16)):
            ly *= 2
        while ly > 1 and ly // 2 >= red:
            ly //= 2
        lx = max(1, min(wg // ly, 128 // ly))
    elif inner_contiguous:
        ly = 1
        while ly < min(red, wg, 16):
            ly *= 2
        lx = max(1, min(wg // ly, max(1, outer // target_groups)))
        lx = 1 << (lx.bit_length() - 1)
    else:
        lx = 1
        while lx < min(outer, 64 if limits.is_gpu else 16):
            lx *= 2
        ly = 1
        while lx * ly * 2 <= wg and ly * 2 <= red and (outer // lx) * ly < target_groups * 4:
            ly *= 2
    # many reductions fused into one kernel each keep a tree buffer of lx * ly lanes
    while ly > 1 and lx * ly * lane_bytes > limits.local_mem:
        if lx > 1 and inner_contiguous:
            lx //= 2
        else:
            ly //= 2
    gy = 1
    groups = math.ceil(outer / lx)
    if n_stages == 1 and red > 4 * ly * 64 and groups < target_groups:
        gy = min(math.ceil(target_groups / groups), math.ceil(red / (ly * 64)))
    per_lane = math.ceil(red / (ly * gy))
    cache = per_lane if n_stages > 1 and per_lane <= (32 if limits.is_gpu else 64) else 0
    # neighbouring work-items read neighbouring addresses: coalesced on GPUs, and the dimension
    # PoCL vectorises on CPUs (the same layout everywhere, so CPU CI tests what GPUs run)
    return ReduceStrategy(lx, ly, gy, cache, inner_contiguous and ly > 1)


def cpu_vector_strategy(space: tuple[int, ...], axes: tuple[int, ...], n_stages: int,
                        inner_contiguous: bool, limits: DeviceLimits, vector_ok: bool,
                        widest: int = 4) -> ReduceStrategy | None:
    """CPU devices: one work-item per row (or per vector of adjacent outputs) with OpenCL
    vector lanes, no barriers and no local memory. PoCL turns vector types into SIMD but does
    not vectorise lanes separated by barriers (softmax 1024x1024: 4-6x slower than NumPy with
    work-group trees). Vectors stay within 32 bytes (``widest``: the largest element size the
    kernel computes with): PoCL mishandles 64-byte vectors on AVX2 machines (it warns the
    vector ABI changes and may return a program without kernels). None when the shape does not
    split into vectors."""
    if limits.is_gpu or not vector_ok:
        return None
    red = math.prod(space[i] for i in axes)
    outer = math.prod(d for i, d in enumerate(space) if i not in axes)
    kept = [d for i, d in enumerate(space) if i not in axes and d > 1]
    for vec in (v for v in (8, 4, 2) if v * widest <= 32):
        if inner_contiguous and red % vec == 0 and red >= vec:
            per_item = red // vec
            groups_wanted = 4 * limits.compute_units
            gy = 1
            if n_stages == 1 and outer < groups_wanted and per_item >= 4096:
                gy = min(math.ceil(groups_wanted / outer), per_item // 1024)
            lx = 1
            while lx * 2 <= 8 and outer // (lx * 2) >= groups_wanted:
                lx *= 2
            cache = per_item if n_stages > 1 and per_item <= 128 else 0
            return ReduceStrategy(lx, 1, gy, cache, False, vec, "rows")
        if not inner_contiguous and kept and kept[-1] % vec == 0:
            lx = 1
            while lx * 2 <= 8 and outer // (vec * lx * 2) >= 2 * limits.compute_units:
                lx *= 2
            return ReduceStrategy(lx, 1, 1, 0, False, vec, "outputs")
    return None


# -- partition ------------------------------------------------------------------------------------


def partition(graph: Graph, limits: DeviceLimits = DeviceLimits(),
              aliases: Sequence[frozenset[int]] = ()) -> Plan:
    """Group the graph's work into kernels (see the module docstring); ``aliases`` are sets of
    array parameters that share memory (the same array passed twice)."""
    roots: list[Store] = [Store(n, Dest("output", i)) for i, n in enumerate(graph.outputs)]
    for p, n in graph.writes:
        if n.op is Op.SETITEM and n.srcs[0].op is Op.INPUT and n.srcs[0].arg == p:
            # x[region] = v on an unchanged argument: store only the region
            roots.append(Store(n.srcs[1], Dest("param", p), n.arg))
        else:
            roots.append(Store(n, Dest("param", p)))
    reductions = [n for n in graph.toposort() if n.op in REDUCE]
    red_set = set(reductions)

    # 1. reductions -> groups, in topological order. A reduction joins the latest group of its
    #    (space, axes) when everything it reads is in that group (at the row's own index, a later
    #    stage) or in an earlier group; so a group only ever depends on earlier groups.
    #    Rows so long, and outputs so few, that a split pays (see _split_pays) are not staged:
    #    a later stage would pin each row to one work-group; each reduction is split instead.
    members: list[list[Node]] = []
    keys: list[tuple] = []
    stage_of: dict[Node, int] = {}
    group_of: dict[Node, int] = {}
    unstaged: set[int] = set()  # groups that start where staging was refused
    for r in reductions:
        key = (r.srcs[0].shape, r.arg)
        direct = {n for n, _ in reads_of(r.srcs[0], _row_index(*key), red_set) if n in red_set}
        target = next((g for g in range(len(keys) - 1, -1, -1) if keys[g] == key), None)
        if target is not None and all(group_of[d] <= target for d in direct) and _reads_at(
                r.srcs[0], _row_index(*key), set(members[target]),
                red_set - set(members[target]), _outer_index(*key)):
            inside = [d for d in direct if group_of[d] == target]
            if not inside or not _split_pays(graph, r, red_set, limits):
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
    for g, (key, ms) in enumerate(zip(keys, members)):
        n_stages = 1 + max(stage_of[m] for m in ms)
        contiguous = _inner_contiguous(graph, ms[0], red_set)
        vector_ok = not any(m.op in (Op.ARGMAX, Op.ARGMIN) for m in ms)
        widest = max(_compute_size(n.dtype) for m in ms for n in (m, m.srcs[0]))
        strategies.append(
            cpu_vector_strategy(key[0], key[1], n_stages, contiguous, limits, vector_ok, widest)
            or choose_strategy(key[0], key[1], n_stages, contiguous, limits,
                               sum(_lane_bytes(m) for m in ms)))
    epilogues: list[list[Store]] = [[] for _ in keys]
    row_stores: list[list[Store]] = [[] for _ in keys]
    pending: list[Store] = []
    for st in roots:
        n = st.node
        deps = {group_of[d] for d, _ in reads_of(n, _any_index(n), red_set) if d in red_set}
        g = max(deps, default=None)
        if g is not None:
            space, axes = keys[g]
            group, others = set(members[g]), red_set - set(members[g])
            if math.prod(n.shape) == math.prod(_outer_shape(space, axes)) and _reads_at(
                    n, unravel(Expr.var("o", math.prod(n.shape)), n.shape), group, others,
                    _outer_index(space, axes)):
                epilogues[g].append(st)
                continue
            if strategies[g].gy == 1 and n.shape == space and _reads_at(
                    n, _row_index(space, axes), group, others, _outer_index(space, axes)):
                row_stores[g].append(st)
                continue
        pending.append(st)

    groups: list[Group] = []
    for g, ((space, axes), ms) in enumerate(zip(keys, members)):
        n_stages = 1 + max(stage_of[m] for m in ms)
        stages = tuple(tuple(m for m in ms if stage_of[m] == s) for s in range(n_stages))
        st = strategies[g]
        how = "one output per work-group" if st.lx == 1 else f"{st.lx} outputs per work-group"
        lanes = f"{st.ly} lanes each" if st.ly > 1 else "one lane each"
        reason = f"reduction over axes {axes} of {space} ({how}, {lanes}"
        if st.gy > 1:
            outs = math.prod(_outer_shape(space, axes))
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
        groups.append(Group("reduce", space, tuple(epilogues[g]), reason, tuple(axes), stages,
                            tuple(row_stores[g]), st))

    # 3. materialise reductions that something outside their own group reads
    #    (each reader is walked once: per reduction it would be quadratic in big functions)
    needed: set[Node] = set()
    for g, gr in enumerate(groups):
        readers = [st.node for st in gr.stores + gr.row_stores] + [x.srcs[0] for x in
                                                                   gr.reductions]
        for n in readers:
            needed |= {d for d, _ in reads_of(n, _any_index(n), red_set)
                       if d in red_set and group_of[d] != g}
    for st in pending:
        needed |= {d for d, _ in reads_of(st.node, _any_index(st.node), red_set) if d in red_set}
    temps = [r for r in reductions if r in needed]

    # 4. elementwise groups: roots whose shapes broadcast together share a kernel
    #    (a zero-size root needs no store: sharing a kernel would make that kernel's iteration
    #    space zero-size too, leaving the other roots unwritten)
    buckets: list[list[Store]] = []
    for st in pending:
        if st.node.size == 0:
            continue
        for bucket in buckets:
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
               for part in _fit_arguments(graph, bucket, set(temps), limits.max_arg_bytes)]
    for bucket in buckets:
        space = broadcast_shapes(*(s.node.shape for s in bucket))
        reason = f"elementwise over {space}"
        if len(buckets) > 1:
            reason += " (a separate kernel: outputs whose shapes do not broadcast together)"
        if any(r in temps for r in red_set) and any(_depends(s.node, red_set, set())
                                                    for s in bucket):
            reason += "; reads reduction results stored by an earlier kernel"
        groups.append(Group("elementwise", space, tuple(bucket), reason))
    if len(buckets) > 1:
        notes.append("roots of non-broadcastable shapes were split into separate kernels")
    groups, temps = _inplace_safety(graph, groups, temps, aliases)
    return Plan(tuple(groups), tuple(temps), (), tuple(notes))


_ARG_BYTES = 8  # a buffer, offset or scalar argument takes at most 8 bytes


def _kernel_args(graph: Graph, stores: Sequence[Store], stop: set[Node]) -> set[tuple]:
    """The kernel arguments a set of stores needs: buffers it writes and reads, scalars."""
    args: set[tuple] = {("out", st.dest.kind, st.dest.index) for st in stores}
    for st in stores:
        for n, _ in reads_of(st.node, _any_index(st.node), stop):
            if n.op is Op.INPUT:
                args.add(("in", n.arg))
                if graph.params[n.arg].has_offset:
                    args.add(("off", n.arg))
            elif n.op is Op.SCALAR:
                args.add(("scalar", n.arg, n.dtype.str))
            elif n in stop:
                args.add(("temp", id(n)))
    return args


def _fit_arguments(graph: Graph, bucket: list[Store], temps: set[Node], limit: int
                   ) -> list[list[Store]]:
    """Split a group whose kernel would take more argument bytes than the device accepts."""
    if len(_kernel_args(graph, bucket, temps)) * _ARG_BYTES <= limit:
        return [bucket]
    parts: list[list[Store]] = [[]]
    for st in bucket:
        trial = parts[-1] + [st]
        if parts[-1] and len(_kernel_args(graph, trial, temps)) * _ARG_BYTES > limit:
            parts.append([st])
        else:
            parts[-1] = trial
    return parts


def _inplace_safety(graph: Graph, groups: list[Group], temps: list[Node],
                    aliases: Sequence[frozenset[int]]) -> tuple[list[Group], list[Node]]:
    """Route an in-place write through a temporary when storing it directly could change a
    value that is still to be read: by another work-item of the same kernel (``x[1:] +=
    x[:-1]``, a broadcast read), or by a later kernel. The temporary is copied into the
    argument by a final kernel, so the result is NumPy's, never a race."""
    cls = {p: set(c) for c in aliases for p in c}
    temps = list(temps)
    copies: list[Group] = []
    out = []
    for gi, g in enumerate(groups):
        stores = list(g.stores)
        rows = list(g.row_stores)
        for kind, lst in (("stores", stores), ("rows", rows)):
            for si, st in enumerate(lst):
                if st.dest.kind != "param":
                    continue
                p = st.dest.index
                family = cls.get(p, {p})
                why = _unsafe(graph, g, st, family, kind, temps) or next(
                    (f"kernel {gj} reads argument {p} after it" for gj, later in
                     enumerate(groups[gi + 1:], gi + 1) if _group_reads(later, family, temps)),
                    None)
                if why is None:
                    continue
                lst[si] = Store(st.node, Dest("temp", len(temps)))
                temps.append(st.node)
                copies.append(Group("elementwise", st.node.shape, (st,),
                                    f"in-place write to argument {p} staged through a "
                                    f"temporary: {why}"))
        out.append(replace(g, stores=tuple(stores), row_stores=tuple(rows)))
    return out + copies, temps


def _group_reads(g: Group, family: set[int], temps: list[Node]) -> bool:
    nodes = [st.node for st in g.stores + g.row_stores] + [r.srcs[0] for r in g.reductions]
    stop = set(temps)
    return any(n.op is Op.INPUT and n.arg in family
               for node in nodes for n, _ in reads_of(node, _any_index(node), stop))


def _unsafe(graph: Graph, g: Group, st: Store, family: set[int], kind: str,
            temps: list[Node]) -> str | None:
    """Why storing ``st`` in place inside ``g`` could race with the group's own reads."""
    stop = set(temps)
    p = st.dest.index
    layout = (graph.params[p].strides, graph.params[p].has_offset)
    if g.kind == "elementwise":
        idx = unravel(Expr.var("gid", max(1, math.prod(g.space))), g.space)
        from ..indexing import broadcast_index

        def at(node: Node) -> Index:
            return broadcast_index(idx, g.space, node.shape)
        written = st.root_index(at(st.node))
        broadcast_store = st.node.shape != g.space
        reads = [(n, i) for other in g.stores for n, i in reads_of(other.node, at(other.node),
                                                                   stop)]
    else:
        if kind != "rows":
            return "a reduction's epilogue writes the argument its rows are read from"
        row = _row_index(g.space, g.axes)
        written = st.root_index(row)
        broadcast_store = False
        reads = [(n, i) for other in g.row_stores for n, i in reads_of(other.node, row, stop)]
        reads += [(n, i) for r in g.reductions for n, i in reads_of(r.srcs[0], row, stop)]
        reads += [(n, i) for other in g.stores for n, i in reads_of(
            other.node, unravel(Expr.var("o", math.prod(other.node.shape)), other.node.shape),
            stop)]
    for n, i in reads:
        if n.op is not Op.INPUT or n.arg not in family:
            continue
        if (graph.params[n.arg].strides, graph.params[n.arg].has_offset) != layout:
            return f"argument {n.arg} shares its memory with a different layout"
        if broadcast_store:
            return "other work-items read the elements this kernel writes (broadcast store)"
        if tuple(i) != tuple(written):
            return "work-items read elements that other work-items write"
    return None


# Below this many elements per row, one work-group per row (staged) beats extra kernel launches.
SPLIT_MIN_ROW = 1 << 16


def _split_pays(graph: Graph, reduction: Node, reductions: set[Node],
                limits: DeviceLimits) -> bool:
    """Would this reduction alone be split at least 4 ways over long rows?  Then keeping it a
    later stage of a one-work-group-per-row kernel would leave most of the device idle."""
    space, axes = reduction.srcs[0].shape, reduction.arg
    if math.prod(space[i] for i in axes) < SPLIT_MIN_ROW:
        return False
    alone = choose_strategy(space, axes, 1, _inner_contiguous(graph, reduction, reductions),
                            limits)
    return alone.gy >= 4


def _compute_size(dtype: np.dtype) -> int:
    return 4 if dtype.kind == "f" and dtype.itemsize == 2 else dtype.itemsize  # half -> float


def _lane_bytes(r: Node) -> int:
    """Local memory one lane of the tree needs for ``r`` (its accumulator, and argmax's index)."""
    acc = r.srcs[0].dtype if r.op in (Op.ARGMAX, Op.ARGMIN) else r.dtype
    size = 4 if acc.itemsize == 2 and acc.kind == "f" else acc.itemsize  # half computes as float
    return size + (8 if r.op in (Op.ARGMAX, Op.ARGMIN) else 0)


def _any_index(node: Node) -> Index:
    return unravel(Expr.var("q", max(1, math.prod(node.shape))), node.shape)


def _inner_contiguous(graph: Graph, reduction: Node, stop: set[Node]) -> bool:
    """Should neighbouring lanes walk along the reduced axes (True) or across outputs (False)?

    Neighbouring lanes should read neighbouring addresses. For every array element the
    reduction's input loads, compare the address stride of the innermost reduced axis with that
    of the innermost kept axis; each load votes for the side with stride 1 (else the smaller
    stride). Loads that move with only one side (a broadcast weight in ``sum(x * w, 0)``) vote
    for nothing: they sit in a register whichever way lanes go, and must not decide for ``x``.
    """
    space, axes = reduction.srcs[0].shape, reduction.arg
    reduced = [a for a in axes if space[a] > 1]
    kept = [a for a in range(len(space)) if a not in axes and space[a] > 1]
    if not reduced or not kept:
        return bool(reduced)  # one output: lanes can only go along the row
    red_var, kept_var = f"a{reduced[-1]}", f"a{kept[-1]}"
    idx = tuple(Expr.var(f"a{i}", d) for i, d in enumerate(space))
    along = across = 0
    for n, i in reads_of(reduction.srcs[0], idx, stop):
        if n.op is not Op.INPUT:
            continue
        param = graph.params[n.arg]
        addr = Expr(0)
        for e, st in zip(i, param.strides or row_major_strides(param.shape)):
            addr = addr + e * st
        coefs = addr.affine()
        if coefs is None:
            continue  # a reshape that does not fold to strides: no clear direction
        r_stride, k_stride = abs(coefs.get(red_var, 0)), abs(coefs.get(kept_var, 0))
        if r_stride and k_stride:
            along += r_stride < k_stride
            across += k_stride < r_stride
    if along == across:  # no evidence: follow the logical layout
        return reduced[-1] > kept[-1]
    return along > across


def _outer_shape(space: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(space))


def _reads_at(node: Node, idx: Index, group: set[Node], other: set[Node],
              outer_idx: Index) -> bool:
    """True if evaluating ``node`` at ``idx`` reads the group's reductions only at the outer
    index the kernel is working on."""
    for n, i in reads_of(node, idx, group | other):
        if n in group and tuple(i) != tuple(outer_idx):
            return False
    return True
