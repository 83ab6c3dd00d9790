"""The cost model: a reduction's work-group strategy from its shape and the device's limits.

Numbers in the comments are measurements (an H200 through NVIDIA's OpenCL, PoCL on a 2-core
AMD EPYC) that chose between the alternatives.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from fusejit.ir.graph import Graph, Node
from fusejit.ir.ops import Op
from fusejit.ir.rows import bucket, row_axis
from fusejit.ir.shapes import row_major_strides
from fusejit.ir.symbolic import Expr
from fusejit.passes.plan import DeviceLimits, ReduceStrategy, reads_of


# work-items of a row kernel's work-group (several rows a group when a row has fewer lanes)
ROW_GROUP = 128


def choose_strategy(space: tuple[int, ...], axes: tuple[int, ...], n_stages: int,
                    inner_contiguous: bool, limits: DeviceLimits,
                    lane_bytes: int = 0, dynamic: bool = False) -> ReduceStrategy:
    """Cost model for a reduction's work-group shape (see ReduceStrategy). ``lane_bytes``: local
    memory each lane needs for the trees (the work-group must fit ``limits.local_mem``).
    ``dynamic``: the kernel takes its extents at launch, so the work-group's shape is chosen for
    a fixed count of outputs, not this trace's (a pooling or a pooled image's mean over batches
    2, 3 and 5 is one program, not one per batch size)."""
    red = math.prod(space[i] for i in axes)
    outer = math.prod(d for i, d in enumerate(space) if i not in axes)
    # the outputs' count the shape is chosen for: under dynamic a fixed batch that fills the
    # device (the cpu_vector_strategy floor), whatever this trace's count; splitting few long
    # rows over work-groups still follows the true count
    wide = 64 * limits.compute_units if dynamic and outer > 1 else outer
    wg = min(limits.max_barrier_group or limits.max_work_group, 1024 if limits.is_gpu else 256)
    target_groups = limits.compute_units * (8 if limits.is_gpu else 2)
    if inner_contiguous and limits.is_gpu:
        # Rows along lanes. Measured on an H200 (softmax 16384x1024, layernorm 8192x4096):
        # 64-256 lanes per row with 8-16 elements per lane kept in registers beat one element
        # per lane by 2-4x (shallower barrier trees, more independent loads per lane); softmax
        # kernel 0.0391 ms with 64 lanes x 16, 0.0373 with 128 x 8, 0.0455 with 256 x 4;
        # layernorm 0.0731 with 256 x 16, 0.083 with 128 x 32.
        # (with barrier teams the lanes of a row are one team, the rows share the work-group)
        team, group = wg, wg
        if limits.barrier_teams and limits.max_barrier_group:
            group = min(limits.max_work_group, 1024)
        ly = 1
        while ly * 2 <= min(team, 256, max(32, red // 8)):
            ly *= 2
        while ly > 1 and ly // 2 >= red:
            ly //= 2
        lx = max(1, min(group // ly, ROW_GROUP // ly))
    elif inner_contiguous:
        ly = 1
        while ly < min(red, wg, 16):
            ly *= 2
        lx = max(1, min(wg // ly, max(1, wide // target_groups)))
        lx = 1 << (lx.bit_length() - 1)
    elif limits.is_gpu:
        # Columns: 16 adjacent outputs per work-group (64-byte segments of each row) and up to
        # 64 lanes down the reduced axis, fewer when there are so many outputs that the device
        # is full anyway (about 4x the 2048 work-items a CU holds). Measured on
        # an H200 (kernel ms, sum(0) / mean(0)+var(0)): 4096x4096 0.103/0.201 with 64 outputs x
        # 16 lanes (64 work-groups for 132 SMs), 0.036/0.067 with 16 x 64; 8192x4096 mean+var
        # 0.390 -> 0.126; 1024x16384 0.034/0.061 -> 0.026/0.025. 8 x 128 is close; 32 x 32 and
        # 128 x 8 are 1.5-5x slower.
        lx = 1
        while lx < min(wide, 16):
            lx *= 2
        ly = 1
        while lx * ly * 2 <= wg and ly * 2 <= min(red, 64) and \
                wide * ly * 2 <= limits.compute_units * 2048 * 4:
            ly *= 2
    else:
        lx = 1
        while lx < min(wide, 16):
            lx *= 2
        ly = 1
        while lx * ly * 2 <= wg and ly * 2 <= red and (wide // lx) * ly < target_groups * 4:
            ly *= 2
    # many reductions fused into one kernel each keep a tree buffer of lx * ly lanes
    while ly > 1 and lx * ly * lane_bytes > limits.local_mem:
        if lx > 1 and inner_contiguous:
            lx //= 2
        else:
            ly //= 2
    gy = 1
    groups = math.ceil(outer / lx)
    # (no outputs, an empty result: nothing to split over work-groups)
    if n_stages == 1 and groups and red > 4 * ly * 64 and groups < target_groups:
        gy = min(math.ceil(target_groups / groups), math.ceil(red / (ly * 64)))
    per_lane = math.ceil(red / (ly * gy))
    most = limits.row_cache or (32 if limits.is_gpu else 64)
    cache = per_lane if n_stages > 1 and per_lane <= most else 0
    # neighbouring work-items read neighbouring addresses: coalesced on GPUs, and the dimension
    # PoCL vectorises on CPUs (the same layout everywhere, so CPU CI tests what GPUs run)
    return ReduceStrategy(lx, ly, gy, cache, inner_contiguous and ly > 1)


def cpu_vector_strategy(space: tuple[int, ...], axes: tuple[int, ...], n_stages: int,
                        inner_contiguous: bool, limits: DeviceLimits, vector_ok: bool,
                        widest: int = 4, dynamic: bool = False) -> ReduceStrategy | None:
    """CPU devices: one work-item per row (or per vector of adjacent outputs) with OpenCL
    vector lanes, no barriers and no local memory. PoCL turns vector types into SIMD but does
    not vectorise lanes separated by barriers (softmax 1024x1024: 4-6x slower than NumPy with
    work-group trees). Vectors stay within 32 bytes (``widest``: the largest element size the
    kernel computes with): PoCL mishandles 64-byte vectors on AVX2 machines (it warns the
    vector ABI changes and may return a program without kernels). None when the shape does not
    split into vectors. ``dynamic``: the kernel takes its extents at launch, so nothing may
    depend on how many rows this trace has (each batch size would be a program of its own):
    rows per work-group as for a large batch, rows never split over work-groups."""
    if limits.is_gpu or not vector_ok:
        return None
    red = math.prod(space[i] for i in axes)
    outer = math.prod(d for i, d in enumerate(space) if i not in axes)
    if dynamic:
        outer = max(outer, 64 * limits.compute_units)
    kept = [d for i, d in enumerate(space) if i not in axes and d > 1]
    # (complex values are vectors already, compute_size says 64 bytes: one value a work-item,
    # still without barriers, which PoCL compiles 2-3x faster and runs faster than trees)
    # (rows whose length no vector divides, a 3x3 window: one work-item a row all the same,
    # a loop without barriers, 10x faster on PoCL than a 16-lane tree for 9 elements)
    for vec in [v for v in (8, 4, 2) if v * widest <= 32] + [1]:
        if inner_contiguous and red % vec == 0 and red >= vec:
            per_item = red // vec
            groups_wanted = 4 * limits.compute_units
            gy = 1
            if n_stages == 1 and 0 < outer < groups_wanted and per_item >= 4096 and not dynamic:
                gy = min(math.ceil(groups_wanted / outer), per_item // 1024)
            lx = 1
            while lx * 2 <= 8 and outer // (lx * 2) >= groups_wanted:
                lx *= 2
            cache = per_item if n_stages > 1 and per_item <= 128 else 0
            return ReduceStrategy(lx, 1, gy, cache, False, vec, "rows")
        if not inner_contiguous and kept and kept[-1] % vec == 0 and vec > 1:
            lx = 1
            while lx * 2 <= 8 and outer // (vec * lx * 2) >= 2 * limits.compute_units:
                lx *= 2
            return ReduceStrategy(lx, 1, 1, 0, False, vec, "outputs")
    return None


def sized_strategy(pick: Callable[[tuple[int, ...]], ReduceStrategy], space: tuple[int, ...],
                   axes: tuple[int, ...], rows: bool, limits: DeviceLimits) -> ReduceStrategy:
    """``pick(space)``; for kernels that take their row length at launch (``rows``, see
    fusejit/ir/rows.py) ``pick`` at the longest row of the length's bucket, so every length
    there gets one strategy (its ``row_bound`` set), unless that one splits rows over
    work-groups."""
    if rows and row_axis(space, axes):
        rep = bucket(space[-1])
        st = pick(space[:-1] + (rep,))
        if st.gy == 1:
            return dataclasses.replace(st, row_bound=rep)
    return pick(space)


# Below this many elements per row, one work-group per row (staged) beats extra kernel launches.
SPLIT_MIN_ROW = 1 << 16


def split_pays(graph: Graph, reduction: Node, reductions: set[Node],
                limits: DeviceLimits) -> bool:
    """Would this reduction alone be split at least 4 ways over long rows?  Then keeping it a
    later stage of a one-work-group-per-row kernel would leave most of the device idle."""
    space, axes = reduction.srcs[0].shape, reduction.arg
    if math.prod(space[i] for i in axes) < SPLIT_MIN_ROW:
        return False
    alone = choose_strategy(space, axes, 1, inner_contiguous(graph, reduction, reductions),
                            limits)
    return alone.gy >= 4


def compute_size(dtype: np.dtype) -> int:
    if dtype.kind == "c":
        return 64  # a complex value is a vector (float2) already: too wide for vector lanes
    return 4 if dtype.kind == "f" and dtype.itemsize == 2 else dtype.itemsize  # half -> float


def lane_bytes(r: Node) -> int:
    """Local memory one lane of the tree needs for ``r`` (its accumulator, and argmax's index)."""
    acc = r.srcs[0].dtype if r.op in (Op.ARGMAX, Op.ARGMIN) else r.dtype
    size = 4 if acc.itemsize == 2 and acc.kind == "f" else acc.itemsize  # half computes as float
    return size + (8 if r.op in (Op.ARGMAX, Op.ARGMIN) else 0)


def inner_contiguous(graph: Graph, reduction: Node, stop: set[Node]) -> bool:
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
        if r_stride and k_stride:  # (each load weighs its array's size: an image read through
            weight = math.prod(param.shape)  # windows outweighs the small filter beside it)
            along += weight * (r_stride < k_stride)
            across += weight * (k_stride < r_stride)
    if along == across:  # no evidence: follow the logical layout
        return reduced[-1] > kept[-1]
    return along > across
