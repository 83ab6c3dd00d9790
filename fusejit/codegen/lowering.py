"""Lowering: (node, index) requests turned into instructions in nested blocks.

Lowering is lazy: ``Block.value(node, index)`` returns a reference to the value of ``node`` at a
symbolic ``index``, emitting instructions the first time it is asked and reusing them when the
same (node, index) is asked again from a block that can see them. Values that do not depend on a
loop's variable are hoisted before the loop; values of a row kept in registers are read back
from the register arrays in later passes; with vector lanes, contiguous aligned accesses become
one vector load or store and lane-dependent ops one vector op where OpenCL has an exact form.
"""

from __future__ import annotations

import math

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir.indexing import Index, gathered_index, ravel, src_index
from fusejit.ir.graph import Graph, Node, const_value
from fusejit.codegen.args import ArgTable  # (importable from here too, as before the split)
from fusejit.codegen.kernels import STATUS_DTYPE, STATUS_MAX
from fusejit.codegen.blocks import LANE, Block, CacheRead, Imm, Instr, LaneOf, Lanes, Ref
from fusejit.ir.ops import ELEMENTWISE, LEAVES, OPS, REDUCE, Op
from fusejit.passes.partition import Store
from fusejit.ir.rows import RowExtent
from fusejit.ir.shapes import row_major_strides
from fusejit.ir.symbolic import Expr
from fusejit.targets.base import Target

# -- lowering -------------------------------------------------------------------------------------


_MAX_DEPTH = 100  # value() nesting beyond which operand chains are lowered iteratively


class Lowering:
    """Per-kernel state: arguments, memo of computed (node, index) values, materialised nodes."""

    def __init__(self, target: Target, graph: Graph, args: ArgTable,
                 materialized: dict[Node, int], index_type: str) -> None:
        self.target = target
        self.graph = graph
        self.args = args
        self.materialized = materialized  # node -> temp index
        self.index_type = index_type
        self.row: RowExtent | None = None  # a runtime row length (fusejit/ir/rows.py)
        self.memo: dict[tuple[Node, Index], Ref] = {}
        self.bound: dict[tuple[Node, Index], Ref] = {}  # values computed by the kernel itself
        self.var_names: dict[str, str] = {}
        self.uses_fp64 = False
        self.lanes = 1  # > 1: values are lowered for a vector of lanes (symbolic lane var "l")
        # lane-dependent ops as one OpenCL vector op (CPUs: PoCL turns those into SIMD) or one
        # scalar op per lane (GPUs, which scalarise vectors anyway: per-lane predicates beat
        # the -1/0 masks vector comparisons and select need, e.g. a 32-op chain on an H200)
        self.vector_ops = True
        self.vector_loads: dict[tuple[str, Expr], Instr] = {}
        self.exprs: dict[tuple, str | None] = {}  # op templates by (op, dtypes): see _expr
        self.prepared: dict[tuple, Ref] = {}  # prepared divisors: see _prepared_division
        self.vector_exprs: dict[tuple, str | None] = {}
        # gathered positions (GATHER): variable name -> the variables its value depends on
        self.gathered: dict[str, frozenset[str]] = {}
        self._depth = 0  # nesting of value() calls (see _prefetch)
        self._prefetching = False
        # speculation (targets/opencl/fastdiv.py): inside this block ops take the target's fast
        # spellings, and every value computed from one is marked (ids of its instructions)
        self.speculate: Block | None = None
        self.speculative: set[int] = set()

    # address of an element of a parameter / temporary
    def address_expr(self, node: Node, idx: Index, write: bool = False
                     ) -> tuple[str, Expr, str | None, int]:
        """(pointer, element index, offset argument or None, elements addressable)."""
        if node.op is not Op.INPUT or node in self.materialized:
            t = self.materialized[node]
            ptr = self.args.buffer("temp", t, node.dtype, write=write)
            return ptr, self.ravel(idx, node.shape), None, math.prod(node.shape)
        param = self.graph.params[node.arg]
        ptr = self.args.buffer("param", node.arg, node.dtype, write=write)
        addr = self.linear(idx, param.shape, param.strides)
        offset = self.args.offset(node.arg) if param.has_offset else None
        return ptr, addr, offset, _extent(param)

    def linear(self, idx: Index, shape: tuple[int, ...], strides: tuple[int, ...] | None
               ) -> Expr:
        """The element index of ``idx`` in an array of ``shape`` and ``strides`` (None:
        row-major); rows of a runtime length are addressed through it (fusejit/ir/rows.py)."""
        if self.row is not None:
            return self.row.address(idx, shape, strides)
        addr = Expr(0)
        for i, st in zip(idx, strides or row_major_strides(shape)):
            addr = addr + i * st
        return addr

    def ravel(self, idx: Index, shape: tuple[int, ...]) -> Expr:
        return ravel(idx, shape) if self.row is None else self.row.address(idx, shape, None)

    def address(self, node: Node, idx: Index) -> tuple[str, str]:
        ptr, addr, offset, _ = self.address_expr(node, idx)
        text = self.render_index(addr)
        return ptr, text if offset is None else f"({offset} + {text})"

    def vector_index(self, addr: Expr, offset: str | None, extent: int) -> Expr | None:
        """If lane ``l`` reads element ``V*B + l`` of an aligned buffer, B; else None. (In a
        runtime row the loops keep every access in bounds, and the index ranges are the
        bucket's, so only the alignment is asked for.)"""
        V = self.lanes
        if V == 1 or offset is not None or LANE not in addr.vars():
            return None
        lane = Expr.var(LANE, V)
        base = (addr - lane) // V
        if LANE in base.vars() or base * V + lane != addr or base.lo < 0 or \
                (base.hi + 1) * V > extent and self.row is None:
            return None
        return base

    def bind(self, node: Node, idx: Index, ref: Ref | Lanes) -> None:
        """Record a value the kernel computed itself (a reduction result) at ``idx``. A value
        that differs by lane is also bound at each lane's own index, where ``per_lane`` asks
        for it (a SETITEM in an epilogue lowers lane by lane)."""
        self.bound[(node, tuple(idx))] = ref
        if isinstance(ref, Lanes) and self.lane_dependent(idx):
            for lane, part in enumerate(ref.refs):
                self.bound[(node, tuple(e.subs(LANE, lane) for e in idx))] = part

    def lane_dependent(self, idx: Index) -> bool:
        return self.lanes > 1 and any(LANE in e.vars() for e in idx)

    def per_lane(self, block: Block, node: Node, idx: Index) -> Lanes:
        """The value at each lane separately (lane var substituted by 0..V-1)."""
        return Lanes(tuple(self.value(block, node, tuple(e.subs(LANE, lane) for e in idx))
                           for lane in range(self.lanes)))

    def render_index(self, e: Expr) -> str:
        return e.render(self.var_names)

    def note_dtype(self, dtype: np.dtype) -> None:
        if dtype == dt.FLOAT64 or dtype == dt.COMPLEX128:
            self.uses_fp64 = True

    def value(self, block: Block, node: Node, idx: Index) -> Ref:
        idx = tuple(idx)
        key = (node, idx)
        bound = self.bound.get(key)
        if bound is not None:
            return bound
        if self._depth > _MAX_DEPTH and not self._prefetching and key not in self.memo:
            self._prefetch(block, node, idx)
        self._depth += 1
        try:
            return self._value(block, node, idx, key)
        finally:
            self._depth -= 1

    def _prefetch(self, block: Block, node: Node, idx: Index) -> None:
        """Lower the operands of a deep chain bottom-up with an explicit stack, in the order the
        recursion would, so that value() never nests deeper than _MAX_DEPTH (a chain of 10,000
        ops would exceed Python's recursion limit). SETITEM values are left to their region's
        block, which the recursion creates."""
        order: list[tuple[Node, Index]] = []
        seen: set[tuple[Node, Index]] = set()
        stack: list[tuple[Node, Index, bool]] = [(node, idx, False)]
        while stack:
            n, i, done = stack.pop()
            key = (n, i)
            if done:
                order.append(key)
                continue
            if key in seen or key in self.memo or key in self.bound:
                continue
            seen.add(key)
            stack.append((n, i, True))
            if n.op in LEAVES or n.op in REDUCE or n in self.materialized:
                continue
            # (a gathered operand's index is only known once its gather is lowered)
            ks = (0,) if n.op is Op.SETITEM else (1,) if n.op is Op.GATHER else \
                range(len(n.srcs))
            for k in reversed(ks):
                stack.append((n.srcs[k], tuple(src_index(n, k, i)), False))
        self._prefetching = True
        try:
            for n, i in order[:-1]:  # the node itself is lowered by the caller
                self.value(block, n, i)
        finally:
            self._prefetching = False

    def _value(self, block: Block, node: Node, idx: Index, key: tuple[Node, Index]) -> Ref:
        # loop-invariant values are computed before the loop, in the enclosing block
        start = block
        anchor = None
        used = self.index_vars(idx)
        while block.loop_vars and block.parent is not None and not any(
                v in block.loop_vars for v in used):
            anchor = block.anchor
            block = block.parent
        if block is not start and anchor is not None:
            found = self.memo.get(key)
            if found is not None and _visible(block, found):
                return found
            with block.before(anchor):
                ref = self._lower(block, node, idx)
            self.memo[key] = ref
            return ref
        found = self.memo.get(key)
        if found is not None:
            if _visible(block, found):
                return found
            if _in_cache_loop(block):
                cached = _cache_ref(found)  # computed by an earlier k-loop: its register copy
                if cached is not None:
                    return cached
        ref = self._lower(block, node, idx)
        self.memo[key] = ref
        return ref

    def _lower(self, block: Block, node: Node, idx: Index) -> Ref:
        t = self.target
        op = node.op
        self.note_dtype(node.dtype)
        ctype = t.compute_type(node.dtype)
        if op is Op.CONST:
            name = self.row.constant(node, self.args) if self.row is not None else None
            return Imm(name or t.literal(const_value(node), node.dtype))
        if op is Op.SCALAR:
            return Imm(self.args.scalar(node.arg[0], node.dtype))
        if op is Op.INPUT or node in self.materialized:
            if self.lane_dependent(idx):
                return self._load_lanes(block, node, idx)
            ptr, addr = self.address(node, idx)
            return block.emit(ctype, t.load(ptr, addr, node.dtype))
        if op in (Op.IOTA, Op.SETITEM, Op.GATHER) and self.lane_dependent(idx):
            return self.per_lane(block, node, idx)
        if op is Op.IOTA:
            axis, start, step = node.arg
            e = idx[axis] * step + start
            return Imm(t.cast(ctype, self.render_index(e)))
        if op in (Op.VIEW, Op.RESHAPE):
            return self.value(block, node.srcs[0], src_index(node, 0, idx))
        if op is Op.SETITEM:
            return self._setitem(block, node, idx)
        if op is Op.GATHER:
            return self._gather(block, node, idx)
        if op in REDUCE:  # pragma: no cover - the partitioner materialises or binds these
            raise AssertionError(f"reduction {node} reached outside its kernel")
        operands = [self.value(block, s, src_index(node, k, idx))
                    for k, s in enumerate(node.srcs)]
        for s in node.srcs:
            self.note_dtype(s.dtype)
        fast = self._speculated(block, node, operands)
        split = self._prepared_division(block, node, operands) if fast is None else None
        expr, operands = fast or split or (self._expr(node), operands)
        if any(isinstance(o, Lanes) for o in operands):
            ref: Ref | Lanes = self._lanes_op(block, node, expr, operands,
                                              vector=fast is None and split is None)
        else:
            ref = block.emit(ctype, expr, *operands)
        if fast is not None or any(self.is_speculative(o) for o in operands):
            self._mark_speculative(ref)
        return ref

    def _prepared_division(self, block: Block, node: Node, operands: list
                           ) -> tuple[str, list] | None:
        """``a / b`` whose divisor the loop around it does not change, where the target divides
        from a value prepared from ``b`` alone (Target.divisor_prep): that value computed once,
        before the loop (next to ``b``), and the quotient's template with it as a third
        operand. Where ``b`` changes in the loop, or is a literal or an argument, it qualifies
        only with several vector lanes, which share the prepared value (a grid-stride loop may
        run once a work-item)."""
        b = operands[1] if node.op is Op.TRUEDIV else None
        if b is None or isinstance(b, Lanes) or (
                isinstance(b, Imm) and not isinstance(operands[0], Lanes)):
            return None
        key = ("divisor_prep", node.dtype, *(s.dtype for s in node.srcs))
        if key not in self.exprs:
            self.exprs[key] = self.target.divisor_prep(node.dtype, [s.dtype for s in node.srcs])
        spelled = self.exprs[key]
        if spelled is None:
            return None
        outer, anchor = block, None
        while outer.loop_vars and outer.parent is not None and _visible(outer.parent, b):
            anchor, outer = outer.anchor, outer.parent
        if anchor is None and not isinstance(operands[0], Lanes):
            return None  # b changes in this loop, for one quotient: nothing to share
        memo = (spelled[0], b)  # (the ref itself: an id could be reused once it is gone)
        prepared = self.prepared.get(memo)
        if prepared is None or not _visible(block, prepared):
            with outer.before(anchor):
                prepared = outer.emit(self.target.compute_type(node.dtype), spelled[0], b)
            self.prepared[memo] = prepared
        return spelled[1], [operands[0], b, prepared]

    # -- speculation ------------------------------------------------------------------------------
    def _speculated(self, block: Block, node: Node, operands: list
                    ) -> tuple[str, list] | None:
        """The target's fast spelling of ``node`` and its operands, inside the speculated block
        (``1 / x`` asks for the reciprocal's)."""
        if self.speculate is None or not block.sees(self.speculate):
            return None
        op, ins = node.op, [s.dtype for s in node.srcs]
        if op is Op.TRUEDIV and isinstance(operands[0], Imm) and \
                operands[0].text == self.target.literal(np.float32(1), node.dtype):
            op, ins, operands = Op.RECIPROCAL, ins[1:], operands[1:]
        key = ("speculated", op, node.dtype, *ins)
        if key not in self.exprs:
            self.exprs[key] = self.target.speculated(
                op, node.dtype, ins, [f"{{{i}}}" for i in range(len(ins))])
        expr = self.exprs[key]
        return None if expr is None else (expr, operands)

    def is_speculative(self, ref: Ref | Lanes) -> bool:
        """Was ``ref`` computed from a speculated op?"""
        if isinstance(ref, Lanes):
            return any(self.is_speculative(r) for r in ref.refs)
        if isinstance(ref, Imm):
            return False
        instr = ref.instr if isinstance(ref, (LaneOf, CacheRead)) else ref
        return id(instr) in self.speculative

    def _mark_speculative(self, ref: Ref | Lanes) -> None:
        for r in ref.refs if isinstance(ref, Lanes) else (ref,):
            if not isinstance(r, Imm):
                self.speculative.add(id(r.instr if isinstance(r, (LaneOf, CacheRead)) else r))

    def begin_speculation(self, block: Block) -> None:
        """Ops lowered in ``block`` (and blocks in it) take the target's fast spellings."""
        self.speculate = block

    def end_speculation(self) -> None:
        """Back to the exact spellings; values computed from fast ones are forgotten, so the
        fallback computes them again (the others it shares)."""
        self.speculate = None
        self.memo = {k: v for k, v in self.memo.items() if not self.is_speculative(v)}

    def _expr(self, node: Node) -> str:
        """The op's scalar template over operands {0}, {1}, ... The spelling depends only on
        the op and the dtypes, so it is asked of the target once per kernel and kept (asking
        again would only re-register the same helpers)."""
        key = (node.op, node.dtype, *(s.dtype for s in node.srcs))
        expr = self.exprs.get(key)
        if expr is None:
            t, op = self.target, node.op
            if op is Op.CAST:
                expr = t.render_cast(node.srcs[0].dtype, node.dtype, "{0}")
            else:
                assert op in ELEMENTWISE, op
                names = [f"{{{i}}}" for i in range(len(node.srcs))]
                expr = t.render_op(op, node.dtype, [s.dtype for s in node.srcs], names)
                if node.dtype == dt.FLOAT16 and "predicate" not in OPS[op].flags:
                    expr = t.round_to_storage(node.dtype, expr)
            self.exprs[key] = expr
        return expr

    def _vector_expr(self, node: Node) -> str | None:
        """The op over ``self.lanes``-wide vector operands, or None (kept like ``_expr``)."""
        key = (self.lanes, node.op, node.dtype, *(s.dtype for s in node.srcs))
        if key in self.vector_exprs:
            return self.vector_exprs[key]
        t, V = self.target, self.lanes
        ins = [s.dtype for s in node.srcs]
        if node.op is Op.CAST:
            vexpr = t.render_cast_vector(ins[0], node.dtype, "{0}", V)
        else:
            names = [f"{{{i}}}" for i in range(len(ins))]
            vexpr = t.render_op_vector(node.op, node.dtype, ins, names, V)
            if vexpr is not None and node.dtype == dt.FLOAT16 and \
                    "predicate" not in OPS[node.op].flags:
                vexpr = t.round_to_storage_vector(node.dtype, vexpr, V)
        self.vector_exprs[key] = vexpr
        return vexpr

    def _lanes_op(self, block: Block, node: Node, scalar_expr: str, operands: list,
                  vector: bool = True) -> Lanes:
        """An op whose operands differ per lane: one vector-typed op when OpenCL has an exact
        vector form (PoCL only vectorises real vector types well), else lane by lane (always
        for a speculated op, ``vector`` False: its fast spelling is scalar)."""
        t, V = self.target, self.lanes
        vexpr = self._vector_expr(node) if vector and (
            self.vector_ops or t.packed_lanes(node.dtype)) else None
        if vexpr is None:
            ctype = t.compute_type(node.dtype)
            return Lanes(tuple(
                block.emit(ctype, scalar_expr, *(o.refs[lane] if isinstance(o, Lanes) else o
                                                 for o in operands))
                for lane in range(V)))
        vops = [self.as_vector(block, o, s.dtype) for o, s in zip(operands, node.srcs)]
        vec = block.emit(t.vector_type(node.dtype, V), vexpr, *vops)
        return Lanes(tuple(LaneOf(vec, lane, t.lane(node.dtype, lane)) for lane in range(V)))

    def as_vector(self, block: Block, value: Ref | Lanes, dtype: np.dtype) -> Ref:
        """A value as one vector-typed operand: the vector it came from, a packed vector of
        its lanes, or a lane-invariant value broadcast."""
        t, V = self.target, self.lanes
        if isinstance(value, Lanes):
            first = value.refs[0]
            if isinstance(first, LaneOf) and all(
                    isinstance(r, LaneOf) and r.instr is first.instr and r.lane == i
                    and r.via_cache == first.via_cache for i, r in enumerate(value.refs)):
                return CacheRead(first.instr) if first.via_cache else first.instr
            return block.emit(t.vector_type(dtype, V), t.pack(dtype, V), *value.refs)
        if isinstance(value, Imm):
            return Imm(t.broadcast(dtype, V, value.text))
        return block.emit(t.vector_type(dtype, V), t.broadcast(dtype, V, "{0}"), value)

    def _load_lanes(self, block: Block, node: Node, idx: Index) -> Lanes:
        """One vector load when the lanes read consecutive aligned elements, else per lane."""
        ptr, addr, offset, extent = self.address_expr(node, idx)
        base = self.vector_index(addr, offset, extent)
        t = self.target
        text = None
        if base is None and self.row is not None:  # a runtime row: any alignment
            start = lane_start(addr, self.lanes)
            if start is not None:
                at = self.render_index(start)
                text = t.vector_load_at(ptr, at if offset is None else f"({offset} + {at})",
                                        node.dtype, self.lanes)
                base = ("at", offset, start)
        if base is None or (text is None and isinstance(base, tuple)):
            return self.per_lane(block, node, idx)
        key = (ptr, base)
        vec = self.vector_loads.get(key)
        if vec is None or not block.sees(vec.block):
            vec = block.emit(t.vector_type(node.dtype, self.lanes), text or
                             t.vector_load(ptr, self.render_index(base), node.dtype, self.lanes))
            self.vector_loads[key] = vec
        return Lanes(tuple(LaneOf(vec, lane, self.target.lane(node.dtype, lane))
                           for lane in range(self.lanes)))

    def index_vars(self, idx: Index) -> set[str]:
        """The variables an index depends on, through the gathered positions it holds."""
        used = {v for e in idx for v in e.vars()}
        for v in [v for v in used if v in self.gathered]:
            used |= self.gathered[v]
        return used

    def _gather(self, block: Block, node: Node, idx: Index) -> Ref:
        """x at a position computed on the device: the index value clamped into the axis
        (never a read out of bounds) in a named variable, which the load's index expression
        names (with its range, so the index math still simplifies). A checked gather first
        stores the axis length into the call's status buffer where the index is outside the
        axis: the runtime reads it back and raises IndexError (runtime/status.py)."""
        (axis, checked), x, index = node.arg, node.srcs[0], node.srcs[1]
        n = x.shape[axis]
        name = f"g{len(self.gathered)}"
        self.gathered[name] = frozenset(self.index_vars(idx))
        if n > 1 or checked:
            value = self.value(block, index, src_index(node, 1, idx))
            self.note_dtype(index.dtype)
        if checked:
            t = self.target
            status = self.args.buffer("status", 0, STATUS_DTYPE, write=True)
            flag = t.store(status, "0", t.literal(STATUS_DTYPE.type(min(n, STATUS_MAX)),
                                                   STATUS_DTYPE), STATUS_DTYPE)
            inner = block.nested("if (" + t.index_outside("{0}", index.dtype, n) + ") {{", value)
            inner.emit(None, flag.replace("{", "{{").replace("}", "}}"))
        if n > 1:
            text = self.target.clamp_index("{0}", index.dtype, n - 1, self.index_type)
            block.emit(self.index_type, text, value).name = name
        return self.value(block, x, gathered_index(node, idx, name))

    def _setitem(self, block: Block, node: Node, idx: Index) -> Ref:
        """base, overwritten inside the region: ``v = base; if (in region) { v = value; }``."""
        base = self.value(block, node.srcs[0], idx)
        conds = []
        for (start, step, count, _), i in zip(node.arg, idx):
            if start == 0 and step == 1 and count >= i.hi + 1 and i.lo >= 0:
                continue  # the region spans this whole dim
            rel = (i - start) if step > 0 else (Expr(start) - i)
            s = abs(step)
            text = self.render_index(rel)
            if rel.hi < 0 or rel.lo > s * (count - 1):
                return base  # this index is never inside the region
            # (only the bounds the index's range does not already decide)
            parts = [f"{text} >= 0"] if rel.lo < 0 else []
            parts += [f"{text} < {s * (count - 1) + 1}"] if rel.hi >= s * (count - 1) + 1 else []
            parts += [f"{text} % {s} == 0"] if s > 1 else []
            if parts:
                conds.append("(" + " && ".join(parts) + ")")
        ctype = self.target.compute_type(node.dtype)
        result = block.emit(ctype, "{0}", base)
        if not conds:
            value = self.value(block, node.srcs[1], src_index(node, 1, idx))
            return block.emit(ctype, "{0}", value)
        inner = block.nested("if (" + " && ".join(conds) + ") {")
        value = inner.value(node.srcs[1], src_index(node, 1, idx))
        inner.emit(None, "{0} = {1};", result, value)
        return result


def _visible(block: Block, ref: Ref | Lanes) -> bool:
    """Can code in ``block`` use ``ref`` (defined in it or in an enclosing block)?"""
    if isinstance(ref, Lanes):
        return all(_visible(block, r) for r in ref.refs)
    if isinstance(ref, Imm):
        return True
    if isinstance(ref, (LaneOf, CacheRead)):
        return block.sees(ref.instr.block)
    return block.sees(ref.block)


def _cache_ref(ref: Ref | Lanes) -> Ref | Lanes | None:
    """``ref`` as read from the register arrays an earlier k-loop of a row kernel filled, or
    None when some part of it was not computed in such a loop."""
    if isinstance(ref, Imm):
        return ref
    if isinstance(ref, Lanes):
        parts = [_cache_ref(r) for r in ref.refs]
        return None if any(p is None for p in parts) else Lanes(tuple(parts))
    instr = ref.instr if isinstance(ref, (LaneOf, CacheRead)) else ref
    if not instr.block.cache_loop:
        return None
    instr.cached = True
    if isinstance(ref, LaneOf):
        return LaneOf(instr, ref.lane, ref.template, via_cache=True)
    return CacheRead(instr)


def _in_cache_loop(block: Block) -> bool:
    b: Block | None = block
    while b is not None:
        if b.cache_loop:
            return True
        b = b.parent
    return False


# -- kernels ----------------------------------------------------------------------------------------


def _store(block: Block, st: Store, node_idx: Index, lowering: Lowering, value: Ref | Lanes
           ) -> None:
    """Store a root's value: one vector store when the lanes write consecutive aligned
    elements, else a scalar store per lane (or one, for an unvectorised kernel)."""
    t = lowering.target
    node = st.node
    if st.dest.kind == "param":
        param = lowering.graph.params[st.dest.index]
        ptr = lowering.args.buffer("param", st.dest.index, node.dtype, write=True)
        addr = lowering.linear(st.root_index(node_idx), param.shape, param.strides)
        offset = lowering.args.offset(st.dest.index) if param.has_offset else None
        extent = _extent(param)
    else:
        role = "output" if st.dest.kind == "output" else "temp"
        ptr = lowering.args.buffer(role, st.dest.index, node.dtype, write=True)
        addr, offset, extent = lowering.ravel(node_idx, node.shape), None, math.prod(node.shape)
    V = lowering.lanes
    if V > 1 and (isinstance(value, Lanes) or LANE in addr.vars()):
        refs = value.refs if isinstance(value, Lanes) else (value,) * V
        base = lowering.vector_index(addr, offset, extent)
        if base is not None:
            vec = lowering.as_vector(block, value, node.dtype)
            block.emit(None, t.vector_store(ptr, lowering.render_index(base), node.dtype, V),
                       vec)
            return
        start = lane_start(addr, V) if lowering.row is not None else None  # a runtime row
        if start is not None:
            at = lowering.render_index(start)
            text = t.vector_store_at(ptr, at if offset is None else f"({offset} + {at})",
                                     node.dtype, V)
            if text is not None:
                block.emit(None, text, lowering.as_vector(block, value, node.dtype))
                return
        for lane in range(V):
            text = lowering.render_index(addr.subs(LANE, lane))
            text = text if offset is None else f"({offset} + {text})"
            block.emit(None, t.store(ptr, text, "{0}", node.dtype), refs[lane])
        return
    text = lowering.render_index(addr)
    text = text if offset is None else f"({offset} + {text})"
    block.emit(None, t.store(ptr, text, "{0}", node.dtype), value)


def lane_start(addr: Expr, lanes: int) -> Expr | None:
    """The first lane's element when lane ``l`` addresses element ``start + l``, else None."""
    start = addr - Expr.var(LANE, lanes)
    return None if LANE in start.vars() else start


def _guard(idx: Index, space: tuple[int, ...], shape: tuple[int, ...],
           lowering: Lowering) -> str | None:
    """Condition under which a work-item of ``space`` stores an element of a smaller
    (broadcast) root: the broadcast dims' indices are 0."""
    lead = len(space) - len(shape)
    conds = []
    for d, n in enumerate(space):
        k = d - lead
        if n > 1 and (k < 0 or shape[k] == 1):
            conds.append(f"{lowering.render_index(idx[d])} == 0")
    return " && ".join(conds) or None


def _extent(p: object) -> int:
    shape, strides = p.shape, p.strides or row_major_strides(p.shape)
    if any(d == 0 for d in shape):
        return 0
    return 1 + sum((d - 1) * abs(s) for d, s in zip(shape, strides))
