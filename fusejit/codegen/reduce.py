"""Reduction kernels: the part of SourceModule that emits reduction groups.

One kernel per group (two when a long reduction is split over work-groups: partials, then a
combine kernel with the epilogue). Inside a kernel each stage is a loop over a lane's share of
the reduced elements, accumulated pairwise (8-element blocks merged like a binary counter), then
a tree over the lanes in local memory (GPUs) or a pairwise combine of vector lanes (CPUs).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir.indexing import Index, unravel
from fusejit.ir.graph import Node
from fusejit.codegen.kernels import Kernel, Partial
from fusejit.codegen.lowering import LANE, Block, Instr, LaneOf, Lanes, Lowering, Ref, _store
from fusejit.ir.ops import REDUCE_COMBINE, Op
from fusejit.passes.partition import Dest, Group, ReduceStrategy, Store
from fusejit.passes.visit import visit_stores
from fusejit.codegen.render import Renderer
from fusejit.ir.rows import RowExtent
from fusejit.ir.symbolic import Expr
from fusejit.targets.base import Target


class ReductionKernels:
    """Mixin of SourceModule: ``_reduce`` and the kernels it emits."""

    def _whole_groups(self, M: int, lx: int) -> bool:
        """Do the outputs fill whole work-groups (no ``active`` test)? Never assumed for
        launch-time extents: each batch size would need a program of its own."""
        return lx == 1 or (not self.dynamic and M % lx == 0)

    def _reduce(self, name: str, group: Group) -> list[tuple[Kernel, Lowering]]:
        st = group.strategy
        assert st is not None
        if st.gy == 1:
            return [self._reduce_kernel(name, group, st, partial_out=None)]
        # split: partials per (output, work-group), then a combine kernel with the epilogue
        outer = math.prod(group.outer_shape)
        base = len(self.partials)
        for r in group.reductions:
            acc = _acc_dtype(r, self.target)
            self.partials.append(Partial(outer * st.gy, acc))
            if r.op in (Op.ARGMAX, Op.ARGMIN):
                self.partials.append(Partial(outer * st.gy, dt.INT64))
        first = self._reduce_kernel(name + "_partial", group, st, partial_out=base)
        combine = self._combine_kernel(name, group, st, base)
        return [first, combine]

    def _reduce_kernel(self, name: str, group: Group, st: ReduceStrategy,
                       partial_out: int | None) -> tuple[Kernel, Lowering]:
        t = self.target
        low = self._lowering(group)
        it = low.index_type
        M_all = math.prod(group.outer_shape)
        R_all = group.reduced_size
        lx, ly, gy, V = st.lx, st.ly, st.gy, st.vec
        vec_rows, vec_out = V > 1 and st.vec_axis == "rows", V > 1 and st.vec_axis == "outputs"
        # o and r count work items: vectors of V elements when the lanes run along that axis
        M = M_all // V if vec_out else M_all
        R = R_all // V if vec_rows else R_all
        low.lanes = V
        # a runtime row length (fusejit/ir/rows.py): loops run to n_r (whole vectors, then the
        # other n_rn % V elements one by one), sized for st.row_bound
        row = None
        bound_r, sized_r = R, R  # the row's work items as the kernel text says it; at most
        row_pre: list[str] = []
        if self.dynamic and st.row_bound and partial_out is None:
            sized_r = st.row_bound // V if vec_rows else st.row_bound
            if vec_rows:  # the whole vectors are computed here, so that every launch
                # argument is the row length itself (AOT bundles fit them: compile/aot_dynamic.py)
                rn = low.args.extent("rn", R_all)
                bound_r, row_pre = "n_r", [f"const {it} n_r = {rn} / {V};"]
            else:
                bound_r = rn = low.args.extent("r", R)
            row = RowExtent(R_all, rn, st.row_bound)
        low.row = row
        tail = row is not None and vec_rows
        lane = Expr.var(LANE, V) if V > 1 else Expr(0)
        chunk = math.ceil(R / gy)
        top = Block(low)
        outer_lin = Expr.var("o", M) * V + lane if vec_out else Expr.var("o", M)
        outer_idx = unravel(outer_lin, group.outer_shape)
        red_shape = tuple(group.space[a] for a in group.axes)
        red_lin = Expr.var("r", sized_r) * V + lane if vec_rows else Expr.var("r", sized_r)
        # (a runtime row's index is not reduced modulo its length: the loops bound it)
        red_it = iter((red_lin,) if row else unravel(red_lin, red_shape))
        row_idx = tuple(next(red_it) if a in group.axes else outer_idx[a]
                        for a in range(len(group.space)))
        tail_idx = tuple(Expr.var("rt", st.row_bound) if a in group.axes else outer_idx[a]
                         for a in range(len(group.space))) if tail else None
        # local dimension 0 holds the lanes that read neighbouring addresses
        dx, dy = (1, 0) if st.along_rows else (0, 1)
        # Lanes past the last output (padding of the last work-group) recompute the last
        # output without storing it: values hoisted out of the loops are then loaded in bounds.
        n_o = low.args.extent("o", M) if self.dynamic else None  # outputs, at launch
        pre = [*row_pre, f"const {it} lx_ = {t.cast(it, t.local_id_of(dx))};",
               f"const {it} ly_ = {t.cast(it, t.local_id_of(dy))};",
               f"const {it} o_ = {t.cast(it, t.group_id_of(dx))} * {lx} + lx_;",
               f"const bool active = o_ < {n_o or M};",
               f"const {it} o = active ? o_ : {f'{n_o} - 1' if n_o else max(M - 1, 0)};"]
        if gy > 1:
            pre.append(f"const {it} gy_ = {t.cast(it, t.group_id_of(dy))};")

        def slot(y: str) -> str:  # a lane's place in the local buffers, in work-item order
            return y if lx == 1 else f"lx_ * {ly} + {y}" if st.along_rows else f"{y} * {lx} + lx_"
        cache = st.cache if partial_out is None else 0
        per_lane = cache or math.ceil((chunk if gy > 1 else sized_r) / ly)  # k-loop trips
        local_decls: list[str] = []
        results: dict[Node, tuple[Ref, Ref | None]] = {}
        visits = visit_stores(group)
        for s_i, stage in enumerate(group.stages):
            accs = []
            for j, r in enumerate(stage):
                acc_dt = _acc_dtype(r, t)
                low.note_dtype(acc_dt)
                ctype = t.compute_type(acc_dt) if V == 1 else t.vector_type(acc_dt, V)
                init = _identity(t, r, acc_dt) if V == 1 else \
                    t.broadcast(acc_dt, V, _identity(t, r, acc_dt))
                acc = top.emit(ctype, init)
                arg = top.emit(t.compute_type(dt.INT64), "-1") \
                    if r.op in (Op.ARGMAX, Op.ARGMIN) else None
                levels = [top.emit(ctype, init)
                          for _ in range(_cascade_levels(r, acc_dt, per_lane))]
                accs.append((r, acc, arg, acc_dt, levels))
            mask = None  # a slot mask of the cache loop (_cache_loop)
            if cache:
                loop, mask = _cache_loop(top, t, it, cache, ly, bound_r, self._whole_groups(M, lx),
                                         self.is_gpu, row)
            elif gy > 1:
                loop = top.nested(
                    f"for ({it} r = gy_ * {chunk} + ly_, k = 0; active && r < "
                    f"min({t.cast(it, str(R))}, "
                    f"(gy_ + 1) * {chunk}); r += {ly}, k++) {{", loop_vars=frozenset({"r"}))
            else:
                loop = top.nested(f"for ({it} r = ly_, k = 0; active && r < {bound_r}; "
                                  f"r += {ly}, k++) {{", loop_vars=frozenset({"r"}))
            for r, acc, arg, acc_dt, levels in accs:
                v = loop.value(r.srcs[0], row_idx)
                if acc_dt != r.srcs[0].dtype and r.srcs[0].dtype == dt.BOOL and V == 1:
                    v = loop.emit(t.compute_type(acc_dt), t.render_cast(dt.BOOL, acc_dt, "{0}"),
                                  v)  # a bool accumulated in the target's bool_accumulator
                if mask is not None and arg is None:  # (argmax: the mask is in its condition)
                    v = loop.emit(t.compute_type(acc_dt),
                                  f"({mask} ? {{0}} : {_identity(t, r, acc_dt)})", v)
                if V > 1:
                    combined = t.render_op_vector(REDUCE_COMBINE[r.op], acc_dt, [acc_dt, acc_dt],
                                                  ["{0}", "{1}"], V)
                    loop.emit(None, "{0} = " + combined + ";", acc,
                              low.as_vector(loop, v, acc_dt))
                else:
                    _accumulate(loop, t, r, acc, arg, v, acc_dt, mask)
                if levels:
                    _cascade_step(loop, t, r, acc, levels, acc_dt)
            if s_i == 0:  # horizontal fusion: outputs stored as the first pass reads
                for store in visits:
                    value = loop.value(store.node, row_idx)
                    _store(_masked(loop, mask), store, row_idx, low, value)
            for r, acc, arg, acc_dt, levels in accs:
                for level in levels:  # smallest partial sums first
                    top.emit(None, "{0} = " + _combine_text(t, r, acc_dt, "{0}", "{1}") + ";",
                             acc, level)
            if vec_rows:  # the lanes hold parts of one row: combine them pairwise
                accs = [(r, top.emit(t.compute_type(acc_dt), _lanes_combined(t, r, acc_dt, V),
                                     acc), arg, acc_dt, levels)
                        for r, acc, arg, acc_dt, levels in accs]
            if tail_idx is not None:  # a runtime row's elements after its whole vectors
                low.lanes = 1
                loop = _tail_loop(top, t, it, V, str(bound_r), row.name, self._whole_groups(M, lx))
                for r, acc, arg, acc_dt, _ in accs:
                    v = loop.value(r.srcs[0], tail_idx)
                    if acc_dt != r.srcs[0].dtype and r.srcs[0].dtype == dt.BOOL:
                        v = loop.emit(t.compute_type(acc_dt),
                                      t.render_cast(dt.BOOL, acc_dt, "{0}"), v)
                    _accumulate(loop, t, r, acc, arg, v, acc_dt)
                if s_i == 0:
                    for store in visits:
                        _store(loop, store, tail_idx, low, loop.value(store.node, tail_idx))
                low.lanes = V
            accs = [a[:4] for a in accs]
            # tree over ly (and nothing to do when ly == 1)
            for j, (r, acc, arg, acc_dt) in enumerate(accs):
                ctype = t.compute_type(acc_dt)
                if ly > 1:
                    buf = f"red{s_i}_{j}"
                    local_decls.append(t.local_array(ctype, buf, lx * ly))
                    top.emit(None, f"{buf}[{slot('ly_')}] = {{0}};", acc)
                    if arg is not None:
                        ibuf = f"idx{s_i}_{j}"
                        local_decls.append(t.local_array(t.compute_type(dt.INT64), ibuf,
                                                         lx * ly))
                        top.emit(None, f"{ibuf}[{slot('ly_')}] = {{0}};", arg)
            if ly > 1:
                top.emit(None, t.barrier_local)
                _tree(top, t, ly, slot, [(r, acc_dt, f"red{s_i}_{j}",
                                          f"idx{s_i}_{j}" if arg is not None else None)
                                         for j, (r, acc, arg, acc_dt) in enumerate(accs)])
                for j, (r, acc, arg, acc_dt) in enumerate(accs):
                    ctype = t.compute_type(acc_dt)
                    final = top.emit(ctype, f"red{s_i}_{j}[{slot('0')}]")
                    farg = top.emit(t.compute_type(dt.INT64), f"idx{s_i}_{j}[{slot('0')}]") \
                        if arg is not None else None
                    results[r] = (final, farg)
            else:
                for r, acc, arg, acc_dt in accs:
                    results[r] = (acc, arg)
            for r, (value, arg) in results.items():
                if r in stage:
                    if vec_out:  # each lane holds the result of its own output
                        if r.dtype == dt.FLOAT16:
                            value = top.emit(t.vector_type(r.dtype, V),
                                             t.round_to_storage_vector(r.dtype, "{0}", V), value)
                        bound = Lanes(tuple(LaneOf(value, i, t.lane(r.dtype, i))
                                            for i in range(V)))
                    else:
                        bound = _finish(top, t, r, value, arg)
                    low.bind(r, outer_idx, bound)
        if partial_out is not None:
            lines_guard = top.nested("if (ly_ == 0 && active) {")
            slot = partial_out
            for r in group.reductions:
                value, arg = results[r]
                acc_dt = _acc_dtype(r, t)
                ptr = low.args.buffer("partial", slot, acc_dt, write=True)
                lines_guard.emit(None, t.store(ptr, f"o * {gy} + gy_", "{0}", acc_dt), value)
                slot += 1
                if arg is not None:
                    iptr = low.args.buffer("partial", slot, dt.INT64, write=True)
                    lines_guard.emit(None, f"{iptr}[o * {gy} + gy_] = {{0}};", arg)
                    slot += 1
        else:
            self._epilogue(top, low, group, outer_lin, outer_idx, row_idx, st, it, bound_r,
                           tail_idx)
        renderer = Renderer()
        body = renderer.render(top, 1)
        sig = low.args.signature(name)
        decls = [f"    {d.replace('CACHE', str(cache))}" for d in renderer.cache_decls]
        gsize, lsize = (math.ceil(M / lx) * lx, ly * gy), (lx, ly)
        if st.along_rows:
            gsize, lsize = gsize[::-1], lsize[::-1]
        source = t.kernel(sig.render(t, lsize), local_decls,
                          [*(f"    {p}" for p in pre), *decls, *body])
        return (Kernel(name, source, sig, gsize, lsize, group,
                       "partial" if partial_out is not None else "main",
                       work=math.prod(group.space)), low)

    def _epilogue(self, top: Block, low: Lowering, group: Group, outer_lin: Expr,
                  outer_idx: Index, row_idx: Index, st: ReduceStrategy, it: str,
                  R: int | str, tail_idx: Index | None = None) -> None:
        if group.stores:
            block = top.nested("if (ly_ == 0 && active) {")
            for store in group.stores:
                node_idx = unravel(outer_lin, store.node.shape)
                _store(block, store, node_idx, low, block.value(store.node, node_idx))
        for node in group.reductions:
            if node in self.materialized:
                block = top.nested("if (ly_ == 0 && active) {")
                temp = Store(node, Dest("temp", self.materialized[node]))
                _store(block, temp, outer_idx, low, low.bound[(node, outer_idx)])
        row_stores = [x for x in group.row_stores if x not in visit_stores(group)]
        if row_stores:
            mask = None
            if st.cache:
                M = math.prod(group.outer_shape)
                loop, mask = _cache_loop(top, self.target, it, st.cache, st.ly, R,
                                         self._whole_groups(M, st.lx), self.is_gpu, low.row)
            else:
                loop = top.nested(f"for ({it} r = ly_; active && r < {R}; r += {st.ly}) {{",
                                  loop_vars=frozenset({"r"}))
            for store in row_stores:
                value = loop.value(store.node, row_idx)
                _store(_masked(loop, mask), store, row_idx, low, value)
            if tail_idx is not None:  # a runtime row's elements after its whole vectors
                low.lanes = 1
                M = math.prod(group.outer_shape)
                loop = _tail_loop(top, self.target, it, st.vec, str(R), low.row.name,
                                  self._whole_groups(M, st.lx))
                for store in row_stores:
                    _store(loop, store, tail_idx, low, loop.value(store.node, tail_idx))
                low.lanes = st.vec

    def _combine_kernel(self, name: str, group: Group, st: ReduceStrategy, base: int
                        ) -> tuple[Kernel, Lowering]:
        """Second kernel of a split reduction: one work-group per output combines the
        partials in a tree, then runs the epilogue."""
        t = self.target
        low = self._lowering(group)
        it = low.index_type
        M = math.prod(group.outer_shape)
        gy = st.gy
        ly = 1
        while ly < min(gy, 256) and ly * 2 <= self.barrier_group:
            ly *= 2
        top = Block(low)
        outer_idx = unravel(Expr.var("o", M), group.outer_shape)
        pre = [f"const {it} ly_ = {t.cast(it, t.local_id_of(0))};",
               f"const {it} o = {t.cast(it, t.group_id_of(0))};"]
        local_decls = []
        slot = base
        for j, r in enumerate(group.reductions):
            acc_dt = _acc_dtype(r, t)
            ctype = t.compute_type(acc_dt)
            ptr = low.args.buffer("partial", slot, acc_dt)
            slot += 1
            iptr = None
            if r.op in (Op.ARGMAX, Op.ARGMIN):
                iptr = low.args.buffer("partial", slot, dt.INT64)
                slot += 1
            acc = top.emit(ctype, _identity(t, r, acc_dt))
            arg = top.emit(t.compute_type(dt.INT64), "-1") if iptr else None
            loop = top.nested(f"for ({it} g = ly_; g < {gy}; g += {ly}) {{")
            v = loop.emit(ctype, t.load(ptr, f"o * {gy} + g", acc_dt))
            if iptr:
                vi = loop.emit(t.compute_type(dt.INT64), f"{iptr}[o * {gy} + g]")
                cond = _arg_better(r, acc_dt, "{0}", "{1}", "{2}", "{3}", t)
                loop.emit(None, "if (" + cond + ") {{ {2} = {0}; {3} = {1}; }}", v, vi, acc,
                          arg)
            else:
                loop.emit(None, "{0} = " + _combine_text(t, r, acc_dt, "{0}", "{1}") + ";",
                          acc, v)
            buf, ibuf = f"red{j}", f"idx{j}"
            local_decls.append(t.local_array(ctype, buf, ly))
            top.emit(None, f"{buf}[ly_] = {{0}};", acc)
            if iptr:
                local_decls.append(t.local_array(t.compute_type(dt.INT64), ibuf, ly))
                top.emit(None, f"{ibuf}[ly_] = {{0}};", arg)
            top.emit(None, t.barrier_local)
            _tree(top, t, ly, lambda y: y, [(r, acc_dt, buf, ibuf if iptr else None)])
            final = top.emit(ctype, f"{buf}[0]")
            farg = top.emit(t.compute_type(dt.INT64), f"{ibuf}[0]") if iptr else None
            low.bind(r, outer_idx, _finish(top, t, r, final, farg))
        self._epilogue(top, low, group, Expr.var("o", M), outer_idx, (), ReduceStrategy(1, ly),
                       it, 0)
        bound = low.args.extent("o", M) if self.dynamic else M
        renderer = Renderer()
        body = renderer.render(top, 1)
        sig = low.args.signature(name)
        source = t.kernel(sig.render(t, (ly,)), local_decls,
                          [*(f"    {p}" for p in pre), f"    const bool active = o < {bound};",
                           *body])
        return (Kernel(name, source, sig, (M * ly,), (ly,), group, "combine", work=M * gy), low)


def _cache_loop(top: Block, t: Target, it: str, cache: int, ly: int, R: int | str,
                all_active: bool, gpu: bool = True, row: RowExtent | None = None
                ) -> tuple[Block, str | None]:
    """``for k < cache: r = ly_ + k*ly`` over a row kept in registers: fully unrolled, with
    bounds checks only when the row does not split evenly over the lanes (always for a row
    length ``R`` passed at launch, a name, unless the ``row`` is ``full``: its bucket's length,
    a program of its own). Returns the loop and its slot mask: None, or (a GPU's runtime row)
    the name of a bool that is false in the slots past the row's end, whose ``r`` is clamped
    to the row's last element. Their values must then be the reduction's identity before they
    are combined, and their stores skipped (see ``_masked``)."""
    full = row is not None and row.full
    if isinstance(R, str) and ly == 1 and not gpu:
        # a runtime row on a CPU: the row's own trip count, not unrolled (PoCL, layernorm
        # 4096 x 1024, kernel ms: 2.8 this way, 3.4 unrolled to the bucket with a break)
        loop = top.nested(f"for (int k = 0; {'' if all_active else 'active && '}k < {R}; k++) {{",
                          loop_vars=frozenset({"r"}), cache_loop=True)
        loop.emit(None, f"const {it} r = {t.cast(it, 'k')};")
        return loop, None
    loop = top.nested(f"{t.unroll_hint}for (int k = 0; k < {cache}; k++) {{",
                      loop_vars=frozenset({"r"}), cache_loop=True)
    at = f"ly_ + {t.cast(it, 'k')} * {ly}"
    run = t.row_slot_run
    if run > 1 and not isinstance(R, str) and cache * ly == R and cache % run == 0:
        # runs of adjacent elements a lane (Target.row_slot_run); each lane still visits its
        # elements in increasing order (argmax's first occurrence), and runtime rows keep the
        # strided layout their slot masks assume
        at = f"{run} * ((k / {run}) * {ly} + ly_) + (k % {run})"
    if gpu and isinstance(R, str) and not full:
        # A GPU's runtime row: no branch in the loop. A break ahead of each slot's load kept
        # NVIDIA's compiler from issuing the slots' loads together (H200, 16384 rows of 1000,
        # dynamic / specialised kernel time: softmax 1.45, layernorm 1.30); every slot loads
        # in bounds instead and the mask drops what it read (nvcc's sm_90 code for the kernels
        # in CUDA: softmax's 8 loads one per branch before, back to back now, as at 1024).
        # The slots below every length of the bucket need no mask: k is a constant once the
        # loop is unrolled, so their addresses stay affine (one base register, not one each)
        inside = f"r_ < {R}" if row is None or row.shortest < ly else \
            f"(k < {row.shortest // ly} || r_ < {R})"
        flag = "fj_in" if all_active else "fj_row"
        loop.emit(None, f"const {it} r_ = {at};")
        loop.emit(None, f"const bool {flag} = {inside};")
        loop.emit(None, f"const {it} r = {flag} ? r_ : {R} - 1;")
        if not all_active:
            loop.emit(None, "const bool fj_in = active && fj_row;")
        return loop, "fj_in"
    loop.emit(None, f"const {it} r = {at};")
    # (H200, softmax 16384 x 1024: 0.073 ms with the runtime check, 0.051 without; each check
    # is a branch before a load, which NVIDIA's compiler does not hoist past)
    checks = ([] if all_active else ["!active"]) + (
        [] if cache * ly == R or full else [f"r >= {R}"])
    if checks:
        loop.emit(None, f"if ({' || '.join(checks)}) break;")
    return loop, None


def _masked(loop: Block, mask: str | None) -> Block:
    """Where a cache loop's slot stores: the loop, or the slots its mask keeps."""
    return loop if mask is None else loop.nested(f"if ({mask}) {{")


def _tail_loop(top: Block, t: Target, it: str, V: int, vectors: str, length: str,
               all_active: bool) -> Block:
    """The elements of a runtime row after its ``vectors`` whole vectors of ``V`` (fewer than
    ``V``: ``length`` is the row's), one at a time as ``rt``, read again in each pass (not
    kept in registers: PoCL ran layernorm 1.3x slower with the tails' register arrays, even
    where the tail was empty), and not unrolled."""
    return top.nested(f"for ({it} rt = {V} * {vectors}; "
                      f"{'' if all_active else 'active && '}rt < {length}; rt++) {{",
                      loop_vars=frozenset({"rt"}))


# -- reduction helpers --------------------------------------------------------------------------------


def _acc_dtype(r: Node, t: Target) -> np.dtype:
    """Accumulator dtype: the result dtype (float16 accumulates in float32, its compute type;
    bool in the target's ``bool_accumulator`` where it has one)."""
    if r.op in (Op.ARGMAX, Op.ARGMIN):
        return r.srcs[0].dtype
    if r.dtype == dt.BOOL and t.bool_accumulator is not None:
        return t.bool_accumulator
    return r.dtype


def _identity(t: Target, r: Node, acc: np.dtype) -> str:
    if r.op in (Op.SUM, Op.ANY, Op.BIT_OR, Op.BIT_XOR):
        return t.literal(acc.type(0), acc)
    if r.op in (Op.PROD, Op.ALL, Op.BIT_AND):  # (and: all ones; a bool's True may be wider)
        ones = r.op is Op.BIT_AND and r.dtype != dt.BOOL
        return t.literal(np.array(-1 if ones else 1).astype(acc)[()], acc)
    low_end = r.op in (Op.MAX, Op.ARGMAX)
    if acc.kind == "c":  # the lexicographic extremes (NaN still wins: see opencl_complex)
        inf = -np.inf if low_end else np.inf
        return t.literal(acc.type(complex(inf, inf)), acc)
    if acc.kind == "f":
        return t.literal(acc.type(-np.inf if low_end else np.inf), acc)
    if acc.kind == "b":
        return t.literal(np.bool_(not low_end), acc)
    info = np.iinfo(acc)
    return t.literal(acc.type(info.min if low_end else info.max), acc)


def _combine_text(t: Target, r: Node, acc: np.dtype, a: str, b: str) -> str:
    return t.render_op(REDUCE_COMBINE[r.op], acc, [acc, acc], [a, b])


def _accumulate(loop: Block, t: Target, r: Node, acc: Instr, arg: Instr | None, v: Ref,
                acc_dt: np.dtype, mask: str | None = None) -> None:
    if arg is None:
        loop.emit(None, "{0} = " + _combine_text(t, r, acc_dt, "{0}", "{1}") + ";", acc, v)
        return
    # first occurrence wins: each lane visits its indices in increasing order; a masked slot
    # (past a runtime row's end) never wins, so no index comes from it
    if acc_dt.kind == "c":
        better = "{2} < 0 || " + _complex_arg_order(t, r, acc_dt, "{1}", "{0}")[0]
    else:
        nan = " || (isnan({1}) && !isnan({0}))" if acc_dt.kind == "f" else ""
        better = "{2} < 0 || " + _beyond(r, acc_dt, "{1}", "{0}") + nan
    if mask is not None:
        better = f"{mask} && ({better})"
    loop.emit(None, "if (" + better + ") {{ {0} = {1}; {2} = r; }}", acc, v, arg)


def _complex_arg_order(t: Target, r: Node, acc: np.dtype, v: str, best: str) -> tuple[str, str]:
    """(v beats best, v ties best) for complex argmax/argmin: NumPy's lexicographic order, and
    a value with a NaN part beats any without (so the first NaN wins)."""
    nan_v = t.render_op(Op.ISNAN, dt.BOOL, [acc], [v])
    nan_b = t.render_op(Op.ISNAN, dt.BOOL, [acc], [best])
    order = t.render_op(Op.GT if r.op is Op.ARGMAX else Op.LT, dt.BOOL, [acc, acc], [v, best])
    equal = t.render_op(Op.EQ, dt.BOOL, [acc, acc], [v, best])
    return f"(!{nan_b} && ({order} || {nan_v}))", f"({equal} || ({nan_v} && {nan_b}))"


# A lane adds CASCADE_BLOCK elements serially, then merges that block into a binary counter of
# partial sums (level j holds 2**j blocks): pairwise summation inside the lane, so a float sum's
# rounding error grows with log2(n) as in NumPy's pairwise sum, not with the lane's trip count.
CASCADE_BLOCK = 8


def _lanes_combined(t: Target, r: Node, acc: np.dtype, n: int) -> str:
    """Pairwise combination of the n lanes of vector operand {0}: ((s0+s1)+(s2+s3))+..."""
    parts = ["{0}.s" + format(i, "x") for i in range(n)]
    while len(parts) > 1:
        parts = [_combine_text(t, r, acc, a, b) for a, b in zip(parts[::2], parts[1::2])]
    return parts[0]


def _cascade_levels(r: Node, acc: np.dtype, per_lane: int) -> int:
    """How many partial-sum levels a lane needs for ``per_lane`` elements (0: plain loop)."""
    if r.op is not Op.SUM or acc.kind not in "fc":
        return 0  # integer sums are exact; max/min/any/all/bitwise do not round
    blocks = math.ceil(per_lane / CASCADE_BLOCK)
    return 0 if blocks <= 1 else (blocks - 1).bit_length() + 1


def _cascade_step(loop: Block, t: Target, r: Node, acc: Instr, levels: list[Instr],
                  acc_dt: np.dtype) -> None:
    """After the k-th element (k counts from 0): when a block is complete, carry it up the
    levels like a binary increment of the block count."""
    zero = _identity(t, r, acc_dt)
    block = loop.nested(f"if ((k & {CASCADE_BLOCK - 1}) == {CASCADE_BLOCK - 1}) {{")
    carry = block.emit(acc.ctype, "{0}", acc)  # the accumulator's type: scalar or vector
    block.emit(None, "{0} = " + zero + ";", acc)
    for j, level in enumerate(levels[:-1]):
        full = block.nested(f"if ((k & {CASCADE_BLOCK << j}) != 0) {{", footer="} else {")
        full.emit(None, "{0} = " + _combine_text(t, r, acc_dt, "{1}", "{0}") + ";", carry, level)
        full.emit(None, "{0} = " + zero + ";", level)
        empty = block.nested("")
        empty.emit(None, "{0} = {1};", level, carry)
        block = full
    block.emit(None, "{0} = {1};", levels[-1], carry)


# Lanes combined per step of a work-group tree: 64 lanes take 2 steps (and barriers), not 6
# (H200, kernel time: softmax 0.0401 -> 0.0391 ms, layernorm 0.0739 -> 0.0731). Trees of
# argmax/argmin stay binary: their serial compare-and-index chain made fan 8 slower there
# (0.0402 -> 0.0419 ms over 16384 rows of 1024).
TREE_FAN = 8
ARG_TREE_FAN = 2


def _tree_steps(ly: int, fan: int) -> list[tuple[int, int]]:
    """(width, fan) per step of a tree over ``ly`` (a power of two) lanes: each lane below
    ``width`` combines the slots ``lane + k * width`` for ``k < fan``."""
    steps = []
    while ly > 1:
        f = min(fan, ly)
        ly //= f
        steps.append((ly, f))
    return steps


def _tree(top: Block, t: Target, ly: int, slot: Callable[[str], str],
          entries: list[tuple[Node, np.dtype, str, str | None]]) -> None:
    """Reduce local buffers of ``ly`` lanes into slot 0, each step's operands in a register;
    ``entries`` are (reduction, accumulator dtype, value buffer, index buffer or None)."""
    most = ARG_TREE_FAN if any(ibuf for *_, ibuf in entries) else TREE_FAN
    for width, fan in _tree_steps(ly, most):
        body = top.nested(f"if (ly_ < {width}) {{")
        for r, acc_dt, buf, ibuf in entries:
            mine = slot("ly_")
            value = body.emit(t.compute_type(acc_dt), f"{buf}[{mine}]")
            index = body.emit(t.compute_type(dt.INT64), f"{ibuf}[{mine}]") if ibuf else None
            for k in range(1, fan):
                theirs = slot(f"(ly_ + {k * width})")
                other = f"{buf}[{theirs}]"
                if index is None:
                    body.emit(None, "{0} = " + _combine_text(t, r, acc_dt, "{0}", other) + ";",
                              value)
                else:
                    cond = _arg_better(r, acc_dt, other, f"{ibuf}[{theirs}]", "{0}", "{1}", t)
                    body.emit(None, f"if ({cond}) {{{{ {{0}} = {other}; "
                                    f"{{1}} = {ibuf}[{theirs}]; }}}}", value, index)
            body.emit(None, f"{buf}[{mine}] = {{0}};", value)
            if index is not None:
                body.emit(None, f"{ibuf}[{mine}] = {{0}};", index)
        top.emit(None, t.barrier_local)


def _arg_better(r: Node, acc: np.dtype, v: str, i: str, best: str, bi: str,
                t: Target) -> str:
    """Should (v, i) replace (best, bi)?  NumPy: the first maximum, and NaN is the maximum."""
    if acc.kind == "c":
        beats, ties = _complex_arg_order(t, r, acc, v, best)
        return f"{i} >= 0 && ({bi} < 0 || {beats} || ({ties} && {i} < {bi}))"
    beyond = _beyond(r, acc, v, best)
    if acc.kind == "f":
        return (f"{i} >= 0 && ({bi} < 0 || {beyond} || (isnan({v}) && !isnan({best}))"
                f" || (({v} == {best} || (isnan({v}) && isnan({best}))) && {i} < {bi}))")
    return f"{i} >= 0 && ({bi} < 0 || {beyond} || ({v} == {best} && {i} < {bi}))"


def _beyond(r: Node, acc: np.dtype, v: str, best: str) -> str:
    """Is ``v`` beyond ``best`` for argmax (greater) or argmin (less)? Bools by logic: GLSL and
    WGSL do not order them."""
    if acc.kind == "b":
        return f"({v} && !{best})" if r.op is Op.ARGMAX else f"(!{v} && {best})"
    return f"{v} {'>' if r.op is Op.ARGMAX else '<'} {best}"


def _finish(top: Block, t: Target, r: Node, value: Ref, arg: Ref | None) -> Ref:
    """A reduction's value as its node's dtype (argmax: the index; float16: rounded)."""
    if arg is not None:
        return top.emit(t.compute_type(dt.INT64), "({0} < 0 ? 0 : {0})", arg)
    if r.dtype == dt.FLOAT16:
        return top.emit(t.compute_type(dt.FLOAT32), t.round_to_storage(r.dtype, "{0}"), value)
    acc = _acc_dtype(r, t)
    if acc != r.dtype:  # a bool accumulated in the target's bool_accumulator
        return top.emit(t.compute_type(r.dtype), t.render_cast(acc, r.dtype, "{0}"), value)
    return value
