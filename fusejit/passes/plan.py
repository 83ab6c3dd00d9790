"""The partitioner's vocabulary: where stores go, the device limits the cost model reads, the
work-group strategy of a reduction, fusion groups and plans; and the index analysis that the
partitioner, the cost model and the in-place check share."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fusejit.ir.indexing import Index, src_index, unravel
from fusejit.ir.graph import Node
from fusejit.ir.ops import LEAVES
from fusejit.ir.symbolic import Expr


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
    # work-items a work-group that synchronises with barriers may have (0: max_work_group);
    # Vulkan through naga's GLSL: one subgroup, see runtime/vulkan/device.py
    max_barrier_group: int = 0
    # with max_barrier_group: a work-group may still hold several teams of that many
    # consecutive work-items when each team's barriers and local memory stay its own (row
    # kernels, a row a team): Vulkan's barrier keeps each 32-lane subgroup in step
    barrier_teams: bool = False
    # most elements a lane of a row kernel keeps in registers between its passes over the row
    # (0: 32 on GPUs, 64 on CPUs); longer shares are read again in each pass
    row_cache: int = 0
    # buffers are host memory the host may compute in once the queue is finished (PoCL's CPU
    # device): large float products run in NumPy's BLAS there (passes/host_gemm.py)
    host_blas: bool = False
    # Hopper's warpgroup MMA runs here (runtime/opencl/mma_probe.py; set once a function asks for
    # tensor cores and the probe passes): gemm_mma.space offers the wgmma tiles
    wgmma: bool = False


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
    # > 0: sized for rows of up to this length, the true length passed at launch (kernels for
    # runtime row lengths, fusejit/ir/rows.py)
    row_bound: int = 0


@dataclass(frozen=True)
class Group:
    kind: str  # "elementwise" | "reduce" | "gemm" | "scan" | "svd"
    space: tuple[int, ...]  # elementwise: iteration shape; reduce: the reductions' input shape
    stores: tuple[Store, ...]  # elementwise stores; reduce: epilogue stores (kept shape)
    reason: str
    axes: tuple[int, ...] = ()
    stages: tuple[tuple[Node, ...], ...] = ()
    row_stores: tuple[Store, ...] = ()  # reduce: stores over the input space (row fusion)
    strategy: ReduceStrategy | None = None
    reads: frozenset[Node] = field(default=frozenset())  # materialised nodes it loads
    matmul: Node | None = None  # gemm: the MATMUL whose accumulator the stores read
    # gemm: the kernel configuration codegen uses (codegen/gemm/config.py's GemmConfig, chosen by
    # codegen/gemm/tune.py) or host_gemm.HostBlas; object: the plan is below codegen
    gemm_config: object = None
    copy: bool = False  # copies a staged in-place value from its temporary into its argument
    scan: Node | None = None  # scan: the SCAN whose running value the stores read
    svd: Node | None = None  # svd: the SVDVALS whose singular values the stores read

    @property
    def whole(self) -> Node | None:
        """gemm / scan: the node whose kernel reads whole rows of its operand(s), not only the
        element a work-item stores (the MATMUL or the SCAN)."""
        return self.matmul if self.matmul is not None else self.scan if self.scan is not None \
            else self.svd

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
    staged: frozenset[int] = frozenset()  # temps holding staged in-place values (schedule.py)


def gemm_problem(group: Group) -> tuple[int, int, int, int]:
    """(M, N, K, batch) of a gemm group's product: what its kernel's configuration, the host
    BLAS step and the tuner are chosen for."""
    m = group.matmul
    assert m is not None
    *batch, rows, k = m.srcs[0].shape
    return rows, m.shape[-1], k, math.prod(batch)


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


def leaves_of(node: Node, stop: set[Node]) -> set[Node]:
    """The nodes of ``reads_of(node, idx, stop)`` without their indices: which operands the
    walk follows does not depend on the index, so this is the same set, found with no index
    math (the partitioner asks it of every root; with indices it was most of its time)."""
    out: set[Node] = set()
    seen: set[Node] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in stop or n.op in LEAVES:
            out.add(n)
            continue
        stack.extend(n.srcs)
    return out


def depends(node: Node, targets: set[Node], stop: set[Node]) -> bool:
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


def outer_index(group_space: tuple[int, ...], axes: tuple[int, ...]) -> Index:
    outer = tuple(1 if i in axes else d for i, d in enumerate(group_space))
    return unravel(Expr.var("o", math.prod(outer)), outer)


def row_index(space: tuple[int, ...], axes: tuple[int, ...]) -> Index:
    """Index of the input space in terms of the outer linear ``o`` and reduced linear ``r``."""
    outer = outer_index(space, axes)
    red_shape = tuple(space[i] for i in axes)
    red = unravel(Expr.var("r", math.prod(red_shape)), red_shape)
    it = iter(red)
    return tuple(next(it) if i in axes else outer[i] for i in range(len(space)))


def any_index(node: Node) -> Index:
    return unravel(Expr.var("q", max(1, math.prod(node.shape))), node.shape)


def outer_shape(space: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(space))


def reads_at(node: Node, idx: Index, group: set[Node], other: set[Node],
              outer_idx: Index) -> bool:
    """True if evaluating ``node`` at ``idx`` reads the group's reductions only at the outer
    index the kernel is working on."""
    for n, i in reads_of(node, idx, group | other):
        if n in group and tuple(i) != tuple(outer_idx):
            return False
    return True
