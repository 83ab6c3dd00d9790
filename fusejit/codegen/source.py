"""SourceModule: turns a partition plan into kernel source through a Target.

SourceModule owns everything that is not spelling: the deterministic order values are computed
in, variable names and their lifetimes (a dead variable's name is reused for a later value of the
same type), index math (symbolic, folded for the specialised shape), loops, hoisting of
loop-invariant values, registers kept across the passes of a row kernel, and the kernel
signature. The Target only renders types, literals, op templates and idioms.

The work is split by concern: ``lowering`` (lazy lowering of (node, index) requests into
blocks of instructions), ``render`` (names and C text), ``kernels`` (the records the runtime
binds from), ``reduce_source`` (reduction kernels); this module holds SourceModule and the
elementwise kernels.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable

from fusejit.ir import dtypes as dt
from fusejit.codegen.gemm.dispatch import gemm_kernels
from fusejit.ir.indexing import Index, broadcast_index, unravel
from fusejit.ir.graph import Graph, Node
from fusejit.codegen.context import ModuleContext
from fusejit.codegen.kernels import BufferArg, Kernel, KernelSignature, Module, Partial, ScalarArg
from fusejit.codegen.lowering import LANE, ArgTable, Block, Lowering, _extent, _guard, _store
from fusejit.ir.ops import ELEMENTWISE, SHARED_BY_LANES, Op
from fusejit.passes.partition import Group, Plan
from fusejit.passes.schedule import loaded
from fusejit.codegen.reduce import ReductionKernels
from fusejit.codegen.render import Renderer
from fusejit.codegen.scan import scan_kernels
from fusejit.codegen.rows import elementwise_rows, flat
from fusejit.codegen.svd import svd_kernels
from fusejit.ir.symbolic import Expr, Var
from fusejit.targets.base import Target

# The writers of the group kinds whose kernels are a codegen module of their own: each takes the
# module being built (as codegen/context.py's ModuleContext), the kernel's name and the group.
# Elementwise and reduction groups are SourceModule's own (it holds their shared machinery).
# A new kind of kernel is a module with such a writer and its line here.
Writer = Callable[[ModuleContext, str, Group], list[tuple[Kernel, Lowering]]]
WRITERS: dict[str, Writer] = {"gemm": gemm_kernels, "scan": scan_kernels, "svd": svd_kernels}


class SourceModule(ReductionKernels):
    """Generates the module for a plan: deterministic, byte-identical for the same input."""

    def __init__(self, graph: Graph, plan: Plan, target: Target, limits: object = None,
                 aliased: frozenset[int] = frozenset(), dynamic: bool = False,
                 rows: bool = False) -> None:
        self.graph = graph
        # loop bounds that follow the extents are kernel arguments (ScalarArg role "extent"),
        # so one program serves every extent whose source comes out the same
        self.dynamic = dynamic
        # ... and elementwise kernels the row length too (codegen/rows.py), as row reductions
        self.rows = dynamic and rows
        self.plan = plan
        self.target = target
        self.aliased = set(aliased)
        self.materialized = {node: i for i, node in enumerate(plan.temps)}
        # the kernel that writes each temporary: only later kernels load it (an earlier one
        # computing the same value, e.g. before an in-place write is staged, computes it)
        self.writer: dict[int, int] = {}
        for gi, g in enumerate(plan.groups):
            for st in g.stores + g.row_stores:
                if st.dest.kind == "temp":
                    self.writer.setdefault(st.dest.index, gi)
            for r in g.reductions:
                if r in self.materialized:
                    self.writer.setdefault(self.materialized[r], gi)
        self.current = len(plan.groups)  # the group being generated (build sets it)
        self.written = {st.dest.index for g in plan.groups for st in g.stores + g.row_stores
                        if st.dest.kind == "param"}
        self.wide = self._needs_wide()
        self.partials: list[Partial] = []
        self.limits = limits
        is_gpu = self.is_gpu = bool(getattr(limits, "is_gpu", False))
        self.default_local = min(256, getattr(limits, "max_work_group", 256)) if is_gpu else None
        # the widest work-group a barrier may synchronise (split reductions' combine kernels)
        self.barrier_group = getattr(limits, "max_barrier_group", 0) or \
            getattr(limits, "max_work_group", 256)

    def _needs_wide(self) -> bool:
        limit = 2**31 - 1
        sizes = [math.prod(g.space) for g in self.plan.groups]
        for p in self.graph.params:
            if p.kind != "scalar" and (p.wide or _extent(p) > limit):
                return True
        return any(s > limit for s in sizes)

    def _lowering(self, group: Group, target: Target | None = None) -> Lowering:
        index_dtype = dt.INT64 if self.wide else dt.INT32
        args = ArgTable(self.graph, self.written, self.aliased, index_dtype)
        # what the schedule says the kernel loads (passes/schedule.py), and of that only what an
        # earlier kernel wrote (the GEMM partitioner's plans are not scheduled there)
        materialized = {n: t for n, t in loaded(self.plan.temps, self.plan.staged, group).items()
                        if self.writer.get(t, len(self.plan.groups)) < self.current}
        for r in group.reductions:  # its own results, bound where it reads them
            if r in self.materialized:
                materialized.setdefault(r, self.materialized[r])
        low = Lowering(target or self.target, self.graph, args, materialized,
                       self.target.index_type(self.wide))
        low.vector_ops = not self.is_gpu
        return low

    def build(self) -> Module:
        kernels: list[Kernel] = []
        uses_fp64 = False
        for i, group in enumerate(self.plan.groups):
            self.current = i
            writer = WRITERS.get(group.kind)
            if writer is not None:
                made = writer(self, f"fj_k{i}", group)
            elif group.kind == "elementwise":
                made = [self._elementwise(f"fj_k{i}", group)]
            else:
                made = self._reduce(f"fj_k{i}", group)
            for kernel, low in made:
                uses_fp64 |= low.uses_fp64
                kernels.append(kernel)
        prelude = self.target.prelude(uses_fp64)
        kernels = shared_functions(kernels)
        unique = list({id(k.source): k.source for k in kernels}.values())
        source = prelude + "\n" + self.target.finish("\n\n".join(unique)) + "\n"
        return Module(source, tuple(kernels), tuple(self.partials), uses_fp64, self.wide,
                      prelude)

    # -- elementwise ------------------------------------------------------------------------------
    def _elementwise(self, name: str, group: Group, vec: int | None = None
                     ) -> tuple[Kernel, Lowering]:
        """A grid-stride loop over ``vec``-wide vectors of the iteration space, then the
        ``n % vec`` tail elements one per work-item."""
        low = self._lowering(group, self.target.elementwise_target())
        it = low.index_type
        space = group.space
        n = math.prod(space)
        guarded = any(st.node.shape != space for st in group.stores)
        nodes = _kernel_nodes([st.node for st in group.stores], low.materialized)
        # (8 lanes share one Philox block of the flat index; a complex value is a vector)
        shared = any(n.op in SHARED_BY_LANES or n.dtype.kind == "c" for n in nodes)
        if vec is None:
            # float16 computes as float, but on GPUs it is the 2-byte loads that count: 8 lanes
            # make them 16 bytes (H200 float16 gelu at 2^26: 0.143 -> 0.131 ms with 8 lanes)
            half = 2 if self.is_gpu else 4
            # (on GPUs a kernel that reads and writes only float16 holds every value in a float
            # register either way, so float32 values between, float16 x ** 3's, count as half)
            narrow = {dt.FLOAT16, dt.FLOAT32} if self.is_gpu and all(
                n.dtype == dt.FLOAT16 for n in nodes if n.op is Op.INPUT or n in low.materialized
            ) and all(st.node.dtype == dt.FLOAT16 for st in group.stores) else {dt.FLOAT16}
            widest = max((half if n.dtype in narrow else n.dtype.itemsize) for n in nodes)
            if any(n.op in SHARED_BY_LANES for n in nodes):  # 8 lanes share one Philox block
                widest = (16 if self.is_gpu else 32) // 8
            if not self.target.lanes_by_bytes:
                widest = 16 // self.target.max_lanes
            # (compute-bound own vector math: the device's full SIMD width where wider)
            wide = not self.is_gpu and any(
                self.target.wide_vector_op(n.op, n.srcs[0].dtype if n.srcs else n.dtype)
                for n in nodes if n.op in ELEMENTWISE)
            # (every access the flat index: lanes as for the flattened array, whatever its
            # last axis, so a (n, 3) array is not computed one element at a time)
            lanes_space = (n,) if len(space) > 1 and not guarded and flat(self, group, low) \
                else space
            vec = min(default_vector_width(lanes_space, guarded, widest, self.is_gpu,
                                           rows=self.rows,
                                           cpu_bytes=self.target.wide_lane_bytes if wide
                                           else 32),
                      self.target.max_lanes) if self.target.vector_code else 1
            if any(n.dtype.kind == "c" for n in nodes):
                vec = 1  # a complex value is a vector (float2) already: no vectors of them
        nv, tail = divmod(n, vec)
        top = Block(low)

        def stores(block: Block, idx: Index) -> None:
            for st in group.stores:
                node_idx = broadcast_index(idx, space, st.node.shape)
                guard = _guard(idx, space, st.node.shape, low)
                inner = block.nested(f"if ({guard}) {{") if guard else block
                _store(inner, st, node_idx, low, inner.value(st.node, node_idx))
        if self.rows and n and not shared:  # the row length at launch too (codegen/rows.py)
            return elementwise_rows(self, name, group, low, vec, stores)
        speculate = _speculates(low.target, group, nodes)

        def body(block: Block, idx: Index) -> None:
            """The stores; where the target speculates, computed with its fast ops first and
            again with the exact ones where an element's fallback flag is set
            (targets/opencl/fastdiv.py)."""
            if not speculate:
                return stores(block, idx)
            block.emit(None, low.target.speculation_begin)
            low.begin_speculation(block)
            stores(block, idx)
            low.end_speculation()
            stores(block.nested(low.target.speculation_fallback), idx)

        dyn = self.dynamic
        if nv:
            low.lanes = vec
            bound = low.args.extent("v", nv) if dyn else nv
            loop = top.nested(f"for ({it} w = gid; w < {bound}; w += gsz) {{",
                              loop_vars=frozenset({"w"}))
            lane = Expr.var(LANE, vec) if vec > 1 else Expr(0)
            body(loop, unravel(Expr.var("w", nv) * vec + lane, space))
        if tail:
            low.lanes = 1
            if dyn:  # gid < tail <= vec - 1, and the tail starts at n_tb = nv * vec
                start = Expr.of(Var(low.args.extent("tb", nv * vec), 0, n - 1))
                tail_idx = Expr.var("gid", vec - 1) + start
                bound = low.args.extent("tail", tail)
            else:
                tail_idx, bound = Expr.var("gid", tail) + nv * vec, tail
            body(top.nested(f"if (gid < {bound}) {{"), unravel(tail_idx, space))
        renderer = Renderer()
        lines = renderer.render(top, 1)
        sig = low.args.signature(name)
        t = self.target
        items = max(nv, tail)
        local = self.default_local
        source = t.kernel(sig.render(t, (local,) if t.fixed_local_size else None), [],
                          [f"    const {it} gid = {t.cast(it, t.global_id)};",
                           f"    const {it} gsz = {t.cast(it, t.global_size)};", *lines])
        gsize = (_round_up(items, local) if local else items,)
        return (Kernel(name, source, sig, gsize, (local,) if local else None, group, work=n,
                       items=items, vec=vec), low)

    # -- reductions -------------------------------------------------------------------------------


def _kernel_nodes(roots: list[Node], loaded: dict[Node, int]) -> list[Node]:
    """The nodes a kernel computes or loads for ``roots``: not below the values it loads (a
    walk of the whole graph per kernel was quadratic in a loop of many realized steps)."""
    seen: set[Node] = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n not in loaded or n in roots:
            stack.extend(n.srcs)
    return list(seen)


def shared_functions(kernels: list[Kernel]) -> list[Kernel]:
    """Kernels whose source differs from an earlier kernel's only in the names of the kernel
    and its arguments (the steps of an unrolled time-stepping loop, each reading the previous
    step's temporary) launch that earlier kernel's function with their own arguments: the
    program holds, and the compiler builds, one copy. (Arguments bind by position.)"""
    first: dict[str, Kernel] = {}
    out = []
    for k in kernels:
        if k.role == "host":
            out.append(k)
            continue
        names = [k.name] + [a.name for a in k.signature.args]
        slot = {n: f"@{i}" for i, n in enumerate(names)}
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
        prior = first.setdefault(pattern.sub(lambda m, slot=slot: slot[m.group(1)], k.source), k)
        if prior is not k:
            k = dataclasses.replace(k, name=prior.name, source=prior.source,
                                    signature=dataclasses.replace(k.signature, name=prior.name))
        out.append(k)
    return out


def _speculates(target: Target, group: Group, nodes: list[Node]) -> bool:
    """Do ``group``'s elementwise ops include one the target speculates? Not where the kernel
    writes a parameter (its fallback reads the inputs again) or holds values a fallback could
    not simply compute again (scatters, gathers, random numbers)."""
    if not target.speculates() or any(st.dest.kind == "param" for st in group.stores):
        return False
    if any(n.op in (Op.SETITEM, Op.GATHER) or n.op in SHARED_BY_LANES for n in nodes):
        return False
    return any(target.speculated(n.op, n.dtype, [s.dtype for s in n.srcs],
                                 [f"{{{i}}}" for i in range(len(n.srcs))]) is not None
               for n in nodes if n.op in ELEMENTWISE)


def default_vector_width(space: tuple[int, ...], guarded: bool, widest: int = 4,
                         is_gpu: bool = True, rows: bool = False, cpu_bytes: int = 32) -> int:
    """Lanes per vector: 16-byte accesses on GPUs (an H200 reaches copy bandwidth with float4,
    float8 is slower), 32-byte on CPUs (the AVX2 width: PoCL runs an 8-op float32 chain at copy
    speed with float8, 1.5-2x slower with float4), ``cpu_bytes`` where the caller knows more
    (64 on AVX-512 for compute-bound kernels: x ** 2.2 with float16, 1.35x float8's speed).
    ``widest`` is the largest element size the kernel computes with. 1 for small or oddly
    shaped spaces, where lanes would not share loads; fewer lanes when the innermost dimension
    does not split evenly. (``rows``: the row length comes at launch, codegen/rows.py: lanes by
    the element size alone.)"""
    lanes = max(1, min(cpu_bytes // 4, (16 if is_gpu else cpu_bytes) // widest))
    if guarded:
        return 1
    if rows:
        return lanes
    if math.prod(space) < 4096:
        return 1
    while lanes > 1 and len(space) > 1 and space[-1] % lanes:
        lanes //= 2
    return lanes


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


__all__ = ["BufferArg", "Kernel", "KernelSignature", "Module", "Partial", "ScalarArg",
           "SourceModule", "default_vector_width"]
