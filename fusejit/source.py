"""SourceModule: turns a partition plan into kernel source through a Target.

SourceModule owns everything that is not spelling: the deterministic order values are computed
in, variable names and their lifetimes (a dead variable's name is reused for a later value of the
same type), index math (symbolic, folded for the specialised shape), loops, hoisting of
loop-invariant values, registers kept across the passes of a row kernel, and the kernel
signature. The Target only renders types, literals, op templates and idioms.

Lowering is lazy: ``Block.value(node, index)`` returns a reference to the value of ``node`` at a
symbolic ``index``, emitting instructions the first time it is asked and reusing them when the
same (node, index) is asked again from a block that can see them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import dtypes as dt
from .indexing import Index, broadcast_index, ravel, src_index, unravel
from .ir import Graph, Node, const_value, toposort
from .ops import ELEMENTWISE, LEAVES, OPS, REDUCE, Op
from .passes.partition import Dest, Group, Plan, ReduceStrategy, Store
from .shapes import row_major_strides
from .symbolic import Expr
from .targets.base import Target

# -- kernel arguments -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BufferArg:
    """A buffer argument. role: param | output | temp | partial; index: which one."""

    name: str
    dtype: np.dtype
    role: str
    index: int
    writable: bool
    restrict: bool

    def declaration(self, target: Target) -> str:
        return target.buffer_param(self.name, self.dtype, self.writable, self.restrict)


@dataclass(frozen=True)
class ScalarArg:
    """A by-value argument. role: scalar (a parameter's value converted to ``dtype``) or
    offset (an array parameter's element offset)."""

    name: str
    dtype: np.dtype
    role: str
    index: int

    def declaration(self, target: Target) -> str:
        return target.scalar_param(self.name, self.dtype)


Arg = BufferArg | ScalarArg


@dataclass(frozen=True)
class KernelSignature:
    name: str
    args: tuple[Arg, ...]

    def render(self, target: Target, local_size: tuple[int, ...] | None) -> str:
        return target.kernel_header(self.name, [a.declaration(target) for a in self.args],
                                    local_size)


@dataclass(frozen=True)
class Kernel:
    """One generated kernel and how to launch it."""

    name: str
    source: str
    signature: KernelSignature
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    group: Group
    role: str = "main"  # main | partial | combine
    work: int = 0  # elements this kernel touches (for explain / autotune decisions)
    items: int = 0  # elementwise: work-items needed at one vector per work-item (0: fixed size)
    vec: int = 1  # elementwise: elements per vector (lanes)


@dataclass(frozen=True)
class Partial:
    """A buffer of per-work-group partial results of a split reduction."""

    size: int
    dtype: np.dtype


@dataclass(frozen=True)
class Module:
    source: str
    kernels: tuple[Kernel, ...]
    partials: tuple[Partial, ...] = ()
    uses_fp64: bool = False
    wide: bool = False  # index math is 64-bit (offsets are passed as long)


# -- instructions and blocks ------------------------------------------------------------------------


@dataclass(eq=False)
class Instr:
    """``ctype name = template(operands)`` (a value) or a statement (ctype None)."""

    ctype: str | None
    template: str
    operands: tuple[Ref, ...]
    block: Block
    cached: bool = False
    name: str = ""


@dataclass(frozen=True)
class Imm:
    """An immediate operand: a literal, a kernel argument or an index expression."""

    text: str


@dataclass(frozen=True, eq=False)
class CacheRead:
    """A value an earlier k-loop of a row kernel kept in a register array (``c_v3[k]``)."""

    instr: Instr


@dataclass(frozen=True, eq=False)
class LaneOf:
    """Lane ``lane`` of a vector load (``v3.s2``), spelled by ``template`` ({v} = the vector)."""

    instr: Instr
    lane: int
    template: str
    via_cache: bool = False  # read the register copy an earlier k-loop kept (c_v3[k].s2)


@dataclass(frozen=True, eq=False)
class Lanes:
    """A value that differs between the lanes of a vectorised work-item: one ref per lane."""

    refs: tuple[Ref, ...]


Ref = Instr | Imm | CacheRead | LaneOf

LANE = "l"  # the lane variable of vectorised lowering


@dataclass(eq=False)
class Nested:
    header: str
    block: Block
    footer: str = "}"
    operands: tuple[Ref, ...] = ()


@dataclass(eq=False)
class Block:
    lowering: Lowering
    parent: Block | None = None
    loop_vars: frozenset[str] = frozenset()  # values not using these hoist to the parent
    items: list[Instr | Nested] = field(default_factory=list)
    cache_loop: bool = False  # a k-loop whose values later k-loops may read from registers
    anchor: Nested | None = None  # this block's item in its parent
    insert_at: int | None = None  # where new items go (None: at the end)

    def _add(self, item: Instr | Nested) -> None:
        if self.insert_at is None:
            self.items.append(item)
        else:
            self.items.insert(self.insert_at, item)
            self.insert_at += 1

    def sees(self, other: Block) -> bool:
        b: Block | None = self
        while b is not None:
            if b is other:
                return True
            b = b.parent
        return False

    def emit(self, ctype: str | None, template: str, *operands: Ref) -> Instr:
        instr = Instr(ctype, template, tuple(operands), self)
        self._add(instr)
        return instr

    def value(self, node: Node, idx: Index) -> Ref:
        return self.lowering.value(self, node, idx)

    def nested(self, header: str, *operands: Ref, loop_vars: frozenset[str] = frozenset(),
               cache_loop: bool = False, footer: str = "}") -> Block:
        """A nested block. ``footer="} else {"`` followed by a sibling with header "" spells an
        if/else."""
        child = Block(self.lowering, self, loop_vars, cache_loop=cache_loop)
        child.anchor = Nested(header, child, footer, operands=operands)
        self._add(child.anchor)
        return child


# -- arguments table --------------------------------------------------------------------------------


class ArgTable:
    """Kernel arguments in first-use order, with the flags their declarations need."""

    def __init__(self, graph: Graph, written_params: set[int], aliased: set[int],
                 index_dtype: np.dtype) -> None:
        self.graph = graph
        self.args: dict[tuple[str, int] | tuple[str, int, str], dict] = {}
        self.written_params = written_params
        self.aliased = aliased
        self.index_dtype = index_dtype

    def buffer(self, role: str, index: int, dtype: np.dtype, write: bool = False) -> str:
        key = (role, index)
        name = {"param": "p", "output": "out", "temp": "t", "partial": "part"}[role] + str(index)
        entry = self.args.setdefault(key, {"kind": "buffer", "name": name, "dtype": dtype,
                                           "write": False})
        entry["write"] |= write
        return name

    def offset(self, param: int) -> str:
        key = ("offset", param)
        self.args.setdefault(key, {"kind": "scalar", "name": f"off{param}",
                                   "dtype": self.index_dtype})
        return f"off{param}"

    def scalar(self, param: int, dtype: np.dtype) -> str:
        key = ("scalar", param, dtype.name)
        name = f"s{param}_{dtype.name}"
        self.args.setdefault(key, {"kind": "scalar", "name": name, "dtype": dtype})
        return name

    def signature(self, name: str) -> KernelSignature:
        out: list[Arg] = []
        for key, e in self.args.items():
            role, index = key[0], key[1]
            if e["kind"] == "buffer":
                restrict = not e["write"] and not (role == "param" and index in self.aliased) \
                    and not (role == "param" and index in self.written_params)
                if e["write"] and role != "param":
                    restrict = True
                out.append(BufferArg(e["name"], e["dtype"], role, index, e["write"], restrict))
            else:
                out.append(ScalarArg(e["name"], e["dtype"], role, index))
        return KernelSignature(name, tuple(out))


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
        self.memo: dict[tuple[Node, Index], Ref] = {}
        self.bound: dict[tuple[Node, Index], Ref] = {}  # values computed by the kernel itself
        self.var_names: dict[str, str] = {}
        self.uses_fp64 = False
        self.lanes = 1  # > 1: values are lowered for a vector of lanes (symbolic lane var "l")
        self.vector_loads: dict[tuple[str, Expr], Instr] = {}
        self._depth = 0  # nesting of value() calls (see _prefetch)
        self._prefetching = False

    # address of an element of a parameter / temporary
    def address_expr(self, node: Node, idx: Index, write: bool = False
                     ) -> tuple[str, Expr, str | None, int]:
        """(pointer, element index, offset argument or None, elements addressable)."""
        if node.op is not Op.INPUT or node in self.materialized:
            t = self.materialized[node]
            ptr = self.args.buffer("temp", t, node.dtype, write=write)
            return ptr, ravel(idx, node.shape), None, math.prod(node.shape)
        param = self.graph.params[node.arg]
        ptr = self.args.buffer("param", node.arg, node.dtype, write=write)
        strides = param.strides or row_major_strides(param.shape)
        addr = Expr(0)
        for i, st in zip(idx, strides):
            addr = addr + i * st
        offset = self.args.offset(node.arg) if param.has_offset else None
        return ptr, addr, offset, _extent(param)

    def address(self, node: Node, idx: Index) -> tuple[str, str]:
        ptr, addr, offset, _ = self.address_expr(node, idx)
        text = self.render_index(addr)
        return ptr, text if offset is None else f"({offset} + {text})"

    def vector_index(self, addr: Expr, offset: str | None, extent: int) -> Expr | None:
        """If lane ``l`` reads element ``V*B + l`` of an aligned buffer, B; else None."""
        V = self.lanes
        if V == 1 or offset is not None or LANE not in addr.vars():
            return None
        lane = Expr.var(LANE, V)
        base = (addr - lane) // V
        if LANE in base.vars() or base * V + lane != addr or base.lo < 0 or \
                (base.hi + 1) * V > extent:
            return None
        return base

    def lane_dependent(self, idx: Index) -> bool:
        return self.lanes > 1 and any(LANE in e.vars() for e in idx)

    def per_lane(self, block: Block, node: Node, idx: Index) -> Lanes:
        """The value at each lane separately (lane var substituted by 0..V-1)."""
        return Lanes(tuple(self.value(block, node, tuple(e.subs(LANE, lane) for e in idx))
                           for lane in range(self.lanes)))

    def render_index(self, e: Expr) -> str:
        return e.render(self.var_names)

    def note_dtype(self, dtype: np.dtype) -> None:
        if dtype == dt.FLOAT64:
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
            srcs = n.srcs[:1] if n.op is Op.SETITEM else n.srcs
            for k in range(len(srcs) - 1, -1, -1):
                stack.append((srcs[k], tuple(src_index(n, k, i)), False))
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
        while block.loop_vars and block.parent is not None and not any(
                v in block.loop_vars for e in idx for v in e.vars()):
            anchor = block.anchor
            block = block.parent
        if block is not start and anchor is not None:
            found = self.memo.get(key)
            if found is not None and _visible(block, found):
                return found
            saved = block.insert_at
            if saved is None:
                block.insert_at = block.items.index(anchor)
            try:
                ref = self._lower(block, node, idx)
            finally:
                block.insert_at = saved
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
            return Imm(t.literal(const_value(node), node.dtype))
        if op is Op.SCALAR:
            return Imm(self.args.scalar(node.arg[0], node.dtype))
        if op is Op.INPUT or node in self.materialized:
            if self.lane_dependent(idx):
                return self._load_lanes(block, node, idx)
            ptr, addr = self.address(node, idx)
            return block.emit(ctype, t.load(ptr, addr, node.dtype))
        if op in (Op.IOTA, Op.SETITEM) and self.lane_dependent(idx):
            return self.per_lane(block, node, idx)
        if op is Op.IOTA:
            axis, start, step = node.arg
            e = idx[axis] * step + start
            return Imm(f"(({ctype}){self.render_index(e)})")
        if op in (Op.VIEW, Op.RESHAPE):
            return self.value(block, node.srcs[0], src_index(node, 0, idx))
        if op is Op.SETITEM:
            return self._setitem(block, node, idx)
        if op in REDUCE:  # pragma: no cover - the partitioner materialises or binds these
            raise AssertionError(f"reduction {node} reached outside its kernel")
        operands = [self.value(block, s, src_index(node, k, idx))
                    for k, s in enumerate(node.srcs)]
        for s in node.srcs:
            self.note_dtype(s.dtype)
        if op is Op.CAST:
            expr = t.render_cast(node.srcs[0].dtype, node.dtype, "{0}")
        else:
            assert op in ELEMENTWISE, op
            names = [f"{{{i}}}" for i in range(len(operands))]
            expr = t.render_op(op, node.dtype, [s.dtype for s in node.srcs], names)
            if node.dtype == dt.FLOAT16 and "predicate" not in OPS[op].flags:
                expr = t.round_to_storage(node.dtype, expr)
        if any(isinstance(o, Lanes) for o in operands):
            return self._lanes_op(block, node, expr, operands)
        return block.emit(ctype, expr, *operands)

    def _lanes_op(self, block: Block, node: Node, scalar_expr: str, operands: list) -> Lanes:
        """An op whose operands differ per lane: one vector-typed op when OpenCL has an exact
        vector form (PoCL only vectorises real vector types well), else lane by lane."""
        t, V = self.target, self.lanes
        names = [f"{{{i}}}" for i in range(len(operands))]
        ins = [s.dtype for s in node.srcs]
        if node.op is Op.CAST:
            vexpr = t.render_cast_vector(ins[0], node.dtype, "{0}", V)
        else:
            vexpr = t.render_op_vector(node.op, node.dtype, ins, names, V)
            if vexpr is not None and node.dtype == dt.FLOAT16 and \
                    "predicate" not in OPS[node.op].flags:
                vexpr = t.round_to_storage_vector(node.dtype, vexpr, V)
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
        if base is None:
            return self.per_lane(block, node, idx)
        key = (ptr, base)
        vec = self.vector_loads.get(key)
        if vec is None or not block.sees(vec.block):
            t = self.target
            vec = block.emit(t.vector_type(node.dtype, self.lanes),
                             t.vector_load(ptr, self.render_index(base), node.dtype, self.lanes))
            self.vector_loads[key] = vec
        return Lanes(tuple(LaneOf(vec, lane, self.target.lane(node.dtype, lane))
                           for lane in range(self.lanes)))

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
            cond = f"({text} >= 0 && {text} < {s * (count - 1) + 1}"
            cond += f" && {text} % {s} == 0)" if s > 1 else ")"
            conds.append(cond)
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


# -- rendering with name reuse --------------------------------------------------------------------


class Renderer:
    """Assigns names (reusing dead ones of the same type) and prints blocks."""

    def __init__(self) -> None:
        self.counter = 0
        self.cache_decls: list[str] = []

    def render(self, block: Block, indent: int) -> list[str]:
        items = block.items
        last_use: dict[int, int] = {}
        pinned: set[int] = set()
        for pos, item in enumerate(items):
            for ref in self._refs(item):
                if ref.block is block:
                    last_use[id(ref)] = pos
        # values read from nested blocks or other blocks stay alive for the whole block
        for item in items:
            if isinstance(item, Nested):
                for ref in self._all_refs(item.block):
                    pinned.add(id(ref))
        free: dict[str, list[str]] = {}
        lines: list[str] = []
        pad = "    " * indent
        for pos, item in enumerate(items):
            if isinstance(item, Nested):
                header = item.header.format(*map(self._text, item.operands)) \
                    if item.operands else item.header
                if header:
                    lines.append(pad + header)
                lines += self.render(item.block, indent + 1)
                lines.append(pad + item.footer)
                continue
            text = item.template.format(*map(self._text, item.operands)) \
                if item.operands else item.template
            for ref in self._refs(item):
                if ref.block is block and last_use.get(id(ref)) == pos and id(ref) not in \
                        pinned and not ref.cached and ref.ctype is not None and ref.name:
                    free.setdefault(ref.ctype, []).append(ref.name)
            if item.ctype is None:
                lines.append(pad + text)
                continue
            reusable = free.get(item.ctype)
            if reusable and id(item) not in pinned and not item.cached and \
                    id(item) in last_use:
                item.name = reusable.pop()
                lines.append(f"{pad}{item.name} = {text};")
            else:
                item.name = f"v{self.counter}"
                self.counter += 1
                lines.append(f"{pad}{item.ctype} {item.name} = {text};")
            if item.cached:
                self.cache_decls.append(f"{item.ctype} c_{item.name}[CACHE];")
                lines.append(f"{pad}c_{item.name}[k] = {item.name};")
        return lines

    @staticmethod
    def _refs(item: Instr | Nested) -> list[Instr]:
        """The distinct instructions ``item`` reads: ``v0 * v0`` reads v0 once, so a dying
        operand frees its name once (freeing it twice hands one name to two live values)."""
        out: dict[int, Instr] = {}
        for r in item.operands:
            if isinstance(r, Instr):
                out[id(r)] = r
            elif isinstance(r, LaneOf):
                out[id(r.instr)] = r.instr
        return list(out.values())

    def _all_refs(self, block: Block) -> list[Instr]:
        out = []
        for item in block.items:
            out += self._refs(item)
            if isinstance(item, Nested):
                out += self._all_refs(item.block)
        return out

    @staticmethod
    def _text(ref: Ref) -> str:
        if isinstance(ref, CacheRead):
            return f"c_{ref.instr.name}[k]"
        if isinstance(ref, Imm):
            return ref.text
        if isinstance(ref, LaneOf):
            vec = f"c_{ref.instr.name}[k]" if ref.via_cache else ref.instr.name
            return ref.template.format(v=vec)
        assert ref.name, "operand rendered before its definition"
        return ref.name


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
        addr = Expr(0)
        for i, s in zip(st.root_index(node_idx), param.strides or row_major_strides(param.shape)):
            addr = addr + i * s
        offset = lowering.args.offset(st.dest.index) if param.has_offset else None
        extent = _extent(param)
    else:
        role = "output" if st.dest.kind == "output" else "temp"
        ptr = lowering.args.buffer(role, st.dest.index, node.dtype, write=True)
        addr, offset, extent = ravel(node_idx, node.shape), None, math.prod(node.shape)
    V = lowering.lanes
    if V > 1 and (isinstance(value, Lanes) or LANE in addr.vars()):
        refs = value.refs if isinstance(value, Lanes) else (value,) * V
        base = lowering.vector_index(addr, offset, extent)
        if base is not None:
            vec = lowering.as_vector(block, value, node.dtype)
            block.emit(None, t.vector_store(ptr, lowering.render_index(base), node.dtype, V),
                       vec)
            return
        for lane in range(V):
            text = lowering.render_index(addr.subs(LANE, lane))
            text = text if offset is None else f"({offset} + {text})"
            block.emit(None, t.store(ptr, text, "{0}", node.dtype), refs[lane])
        return
    text = lowering.render_index(addr)
    text = text if offset is None else f"({offset} + {text})"
    block.emit(None, t.store(ptr, text, "{0}", node.dtype), value)


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


class SourceModule:
    """Generates the module for a plan: deterministic, byte-identical for the same input."""

    def __init__(self, graph: Graph, plan: Plan, target: Target, limits: object = None,
                 aliased: frozenset[int] = frozenset()) -> None:
        self.graph = graph
        self.plan = plan
        self.target = target
        self.aliased = set(aliased)
        self.materialized = {node: i for i, node in enumerate(plan.temps)}
        self.written = {st.dest.index for g in plan.groups for st in g.stores + g.row_stores
                        if st.dest.kind == "param"}
        self.wide = self._needs_wide()
        self.partials: list[Partial] = []
        is_gpu = self.is_gpu = bool(getattr(limits, "is_gpu", False))
        self.default_local = min(256, getattr(limits, "max_work_group", 256)) if is_gpu else None

    def _needs_wide(self) -> bool:
        limit = 2**31 - 1
        sizes = [math.prod(g.space) for g in self.plan.groups]
        for p in self.graph.params:
            if p.kind != "scalar" and (p.wide or _extent(p) > limit):
                return True
        return any(s > limit for s in sizes)

    def _lowering(self, group: Group) -> Lowering:
        index_dtype = dt.INT64 if self.wide else dt.INT32
        args = ArgTable(self.graph, self.written, self.aliased, index_dtype)
        # what this group itself stores into temporaries it computes, never loads
        own = {st.node for st in group.stores + group.row_stores if st.dest.kind == "temp"}
        materialized = {n: t for n, t in self.materialized.items() if n not in own}
        return Lowering(self.target, self.graph, args, materialized,
                        self.target.index_type(self.wide))

    def build(self) -> Module:
        kernels: list[Kernel] = []
        uses_fp64 = False
        for i, group in enumerate(self.plan.groups):
            if group.kind == "elementwise":
                made = [self._elementwise(f"fj_k{i}", group)]
            else:
                made = self._reduce(f"fj_k{i}", group)
            for kernel, low in made:
                uses_fp64 |= low.uses_fp64
                kernels.append(kernel)
        prelude = self.target.prelude(uses_fp64)
        source = prelude + "\n" + "\n\n".join(k.source for k in kernels) + "\n"
        return Module(source, tuple(kernels), tuple(self.partials), uses_fp64, self.wide)

    # -- elementwise ------------------------------------------------------------------------------
    def _elementwise(self, name: str, group: Group, vec: int | None = None
                     ) -> tuple[Kernel, Lowering]:
        """A grid-stride loop over ``vec``-wide vectors of the iteration space, then the
        ``n % vec`` tail elements one per work-item."""
        low = self._lowering(group)
        it = low.index_type
        space = group.space
        n = math.prod(space)
        guarded = any(st.node.shape != space for st in group.stores)
        if vec is None:
            widest = max((4 if n.dtype == dt.FLOAT16 else n.dtype.itemsize)
                         for n in toposort([st.node for st in group.stores]))
            vec = default_vector_width(space, guarded, widest, self.is_gpu)
        nv, tail = divmod(n, vec)
        top = Block(low)

        def body(block: Block, idx: Index) -> None:
            for st in group.stores:
                node_idx = broadcast_index(idx, space, st.node.shape)
                guard = _guard(idx, space, st.node.shape, low)
                inner = block.nested(f"if ({guard}) {{") if guard else block
                _store(inner, st, node_idx, low, inner.value(st.node, node_idx))

        if nv:
            low.lanes = vec
            loop = top.nested(f"for ({it} w = gid; w < {nv}; w += gsz) {{",
                              loop_vars=frozenset({"w"}))
            lane = Expr.var(LANE, vec) if vec > 1 else Expr(0)
            body(loop, unravel(Expr.var("w", nv) * vec + lane, space))
        if tail:
            low.lanes = 1
            body(top.nested(f"if (gid < {tail}) {{"),
                 unravel(Expr.var("gid", tail) + nv * vec, space))
        renderer = Renderer()
        lines = renderer.render(top, 1)
        sig = low.args.signature(name)
        source = "\n".join([sig.render(self.target, None), "{",
                            f"    const {it} gid = ({it}){self.target.global_id};",
                            f"    const {it} gsz = ({it})get_global_size(0);", *lines, "}"])
        items = max(nv, tail)
        local = self.default_local
        gsize = (_round_up(items, local) if local else items,)
        return (Kernel(name, source, sig, gsize, (local,) if local else None, group, work=n,
                       items=items, vec=vec), low)

    # -- reductions -------------------------------------------------------------------------------
    def _reduce(self, name: str, group: Group) -> list[tuple[Kernel, Lowering]]:
        st = group.strategy
        assert st is not None
        if st.gy == 1:
            return [self._reduce_kernel(name, group, st, partial_out=None)]
        # split: partials per (output, work-group), then a combine kernel with the epilogue
        outer = math.prod(group.outer_shape)
        base = len(self.partials)
        for r in group.reductions:
            acc = _acc_dtype(r)
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
        lane = Expr.var(LANE, V) if V > 1 else Expr(0)
        chunk = math.ceil(R / gy)
        top = Block(low)
        outer_lin = Expr.var("o", M) * V + lane if vec_out else Expr.var("o", M)
        outer_idx = unravel(outer_lin, group.outer_shape)
        red_shape = tuple(group.space[a] for a in group.axes)
        red_it = iter(unravel(Expr.var("r", R) * V + lane if vec_rows else Expr.var("r", R),
                              red_shape))
        row_idx = tuple(next(red_it) if a in group.axes else outer_idx[a]
                        for a in range(len(group.space)))
        # local dimension 0 holds the lanes that read neighbouring addresses
        dx, dy = (1, 0) if st.along_rows else (0, 1)
        # Lanes past the last output (padding of the last work-group) recompute the last
        # output without storing it: values hoisted out of the loops are then loaded in bounds.
        pre = [f"const {it} lx_ = ({it})get_local_id({dx});",
               f"const {it} ly_ = ({it})get_local_id({dy});",
               f"const {it} o_ = ({it})get_group_id({dx}) * {lx} + lx_;",
               f"const int active = o_ < {M};",
               f"const {it} o = active ? o_ : {max(M - 1, 0)};"]
        if gy > 1:
            pre.append(f"const {it} gy_ = ({it})get_group_id({dy});")

        def slot(y: str) -> str:  # a lane's place in the local buffers, in work-item order
            return y if lx == 1 else f"lx_ * {ly} + {y}" if st.along_rows else f"{y} * {lx} + lx_"
        cache = st.cache if partial_out is None else 0
        per_lane = cache or math.ceil((chunk if gy > 1 else R) / ly)  # k-loop trip count
        local_decls: list[str] = []
        results: dict[Node, tuple[Ref, Ref | None]] = {}
        for s_i, stage in enumerate(group.stages):
            accs = []
            for j, r in enumerate(stage):
                acc_dt = _acc_dtype(r)
                low.note_dtype(acc_dt)
                ctype = t.compute_type(acc_dt) if V == 1 else t.vector_type(acc_dt, V)
                init = _identity(t, r, acc_dt) if V == 1 else \
                    t.broadcast(acc_dt, V, _identity(t, r, acc_dt))
                acc = top.emit(ctype, init)
                arg = top.emit("long", "-1") if r.op in (Op.ARGMAX, Op.ARGMIN) else None
                levels = [top.emit(ctype, init)
                          for _ in range(_cascade_levels(r, acc_dt, per_lane))]
                accs.append((r, acc, arg, acc_dt, levels))
            if cache:
                loop = _cache_loop(top, it, cache, ly, R, M % lx == 0)
            elif gy > 1:
                loop = top.nested(
                    f"for ({it} r = gy_ * {chunk} + ly_, k = 0; active && r < min(({it}){R}, "
                    f"(gy_ + 1) * {chunk}); r += {ly}, k++) {{", loop_vars=frozenset({"r"}))
            else:
                loop = top.nested(f"for ({it} r = ly_, k = 0; active && r < {R}; "
                                  f"r += {ly}, k++) {{", loop_vars=frozenset({"r"}))
            for r, acc, arg, acc_dt, levels in accs:
                v = loop.value(r.srcs[0], row_idx)
                if V > 1:
                    combined = t.render_op_vector(_COMBINE[r.op], acc_dt, [acc_dt, acc_dt],
                                                  ["{0}", "{1}"], V)
                    loop.emit(None, "{0} = " + combined + ";", acc,
                              low.as_vector(loop, v, acc_dt))
                else:
                    _accumulate(loop, t, r, acc, arg, v, acc_dt)
                if levels:
                    _cascade_step(loop, t, r, acc, levels, acc_dt)
            for r, acc, arg, acc_dt, levels in accs:
                for level in levels:  # smallest partial sums first
                    top.emit(None, "{0} = " + _combine_text(t, r, acc_dt, "{0}", "{1}") + ";",
                             acc, level)
            if vec_rows:  # the lanes hold parts of one row: combine them pairwise
                accs = [(r, top.emit(t.compute_type(acc_dt), _lanes_combined(t, r, acc_dt, V),
                                     acc), arg, acc_dt, levels)
                        for r, acc, arg, acc_dt, levels in accs]
            accs = [a[:4] for a in accs]
            # tree over ly (and nothing to do when ly == 1)
            for j, (r, acc, arg, acc_dt) in enumerate(accs):
                ctype = t.compute_type(acc_dt)
                if ly > 1:
                    buf = f"red{s_i}_{j}"
                    local_decls.append(f"__local {ctype} {buf}[{lx * ly}];")
                    top.emit(None, f"{buf}[{slot('ly_')}] = {{0}};", acc)
                    if arg is not None:
                        ibuf = f"idx{s_i}_{j}"
                        local_decls.append(f"__local long {ibuf}[{lx * ly}];")
                        top.emit(None, f"{ibuf}[{slot('ly_')}] = {{0}};", arg)
            if ly > 1:
                top.emit(None, t.barrier_local)
                step = ly // 2
                while step >= 1:
                    body = top.nested(f"if (ly_ < {step}) {{")
                    for j, (r, acc, arg, acc_dt) in enumerate(accs):
                        buf = f"red{s_i}_{j}"
                        mine = f"{buf}[{slot('ly_')}]"
                        other = f"{buf}[{slot(f'(ly_ + {step})')}]"
                        if arg is None:
                            combined = _combine_text(t, r, acc_dt, mine, other)
                            body.emit(None, f"{mine} = {combined};")
                        else:
                            ibuf = f"idx{s_i}_{j}"
                            imine = f"{ibuf}[{slot('ly_')}]"
                            iother = f"{ibuf}[{slot(f'(ly_ + {step})')}]"
                            cond = _arg_better(r, acc_dt, other, iother, mine, imine)
                            body.emit(None, f"if ({cond}) {{ {mine} = {other}; {imine} = {iother}; }}")
                    top.emit(None, t.barrier_local)
                    step //= 2
                for j, (r, acc, arg, acc_dt) in enumerate(accs):
                    ctype = t.compute_type(acc_dt)
                    final = top.emit(ctype, f"red{s_i}_{j}[{slot('0')}]")
                    farg = top.emit("long", f"idx{s_i}_{j}[{slot('0')}]") \
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
                    low.bound[(r, outer_idx)] = bound
        if partial_out is not None:
            lines_guard = top.nested("if (ly_ == 0 && active) {")
            slot = partial_out
            for r in group.reductions:
                value, arg = results[r]
                acc_dt = _acc_dtype(r)
                ptr = low.args.buffer("partial", slot, acc_dt, write=True)
                lines_guard.emit(None, t.store(ptr, f"o * {gy} + gy_", "{0}", acc_dt), value)
                slot += 1
                if arg is not None:
                    iptr = low.args.buffer("partial", slot, dt.INT64, write=True)
                    lines_guard.emit(None, f"{iptr}[o * {gy} + gy_] = {{0}};", arg)
                    slot += 1
        else:
            self._epilogue(top, low, group, outer_lin, outer_idx, row_idx, st, it, R)
        renderer = Renderer()
        body = renderer.render(top, 1)
        sig = low.args.signature(name)
        decls = [f"    {d}" for d in local_decls]
        decls += [f"    {d.replace('CACHE', str(cache))}" for d in renderer.cache_decls]
        gsize, lsize = (math.ceil(M / lx) * lx, ly * gy), (lx, ly)
        if st.along_rows:
            gsize, lsize = gsize[::-1], lsize[::-1]
        lines = [sig.render(t, lsize), "{", *(f"    {p}" for p in pre), *decls, *body, "}"]
        return (Kernel(name, "\n".join(lines), sig, gsize, lsize, group,
                       "partial" if partial_out is not None else "main",
                       work=math.prod(group.space)), low)

    def _epilogue(self, top: Block, low: Lowering, group: Group, outer_lin: Expr,
                  outer_idx: Index, row_idx: Index, st: ReduceStrategy, it: str, R: int) -> None:
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
        if group.row_stores:
            if st.cache:
                M = math.prod(group.outer_shape)
                loop = _cache_loop(top, it, st.cache, st.ly, R, M % st.lx == 0)
            else:
                loop = top.nested(f"for ({it} r = ly_; active && r < {R}; r += {st.ly}) {{",
                                  loop_vars=frozenset({"r"}))
            for store in group.row_stores:
                _store(loop, store, row_idx, low, loop.value(store.node, row_idx))

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
        while ly < min(gy, 256):
            ly *= 2
        top = Block(low)
        outer_idx = unravel(Expr.var("o", M), group.outer_shape)
        pre = [f"const {it} ly_ = ({it})get_local_id(0);",
               f"const {it} o = ({it})get_group_id(0);"]
        local_decls = []
        slot = base
        for j, r in enumerate(group.reductions):
            acc_dt = _acc_dtype(r)
            ctype = t.compute_type(acc_dt)
            ptr = low.args.buffer("partial", slot, acc_dt)
            slot += 1
            iptr = None
            if r.op in (Op.ARGMAX, Op.ARGMIN):
                iptr = low.args.buffer("partial", slot, dt.INT64)
                slot += 1
            acc = top.emit(ctype, _identity(t, r, acc_dt))
            arg = top.emit("long", "-1") if iptr else None
            loop = top.nested(f"for ({it} g = ly_; g < {gy}; g += {ly}) {{")
            v = loop.emit(ctype, t.load(ptr, f"o * {gy} + g", acc_dt))
            if iptr:
                vi = loop.emit("long", f"{iptr}[o * {gy} + g]")
                cond = _arg_better(r, acc_dt, "{0}", "{1}", "{2}", "{3}")
                loop.emit(None, "if (" + cond + ") {{ {2} = {0}; {3} = {1}; }}", v, vi, acc,
                          arg)
            else:
                loop.emit(None, "{0} = " + _combine_text(t, r, acc_dt, "{0}", "{1}") + ";",
                          acc, v)
            buf, ibuf = f"red{j}", f"idx{j}"
            local_decls.append(f"__local {ctype} {buf}[{ly}];")
            top.emit(None, f"{buf}[ly_] = {{0}};", acc)
            if iptr:
                local_decls.append(f"__local long {ibuf}[{ly}];")
                top.emit(None, f"{ibuf}[ly_] = {{0}};", arg)
            top.emit(None, t.barrier_local)
            step = ly // 2
            while step >= 1:
                body = top.nested(f"if (ly_ < {step}) {{")
                mine, other = f"{buf}[ly_]", f"{buf}[ly_ + {step}]"
                if iptr:
                    cond = _arg_better(r, acc_dt, other, f"{ibuf}[ly_ + {step}]", mine,
                                       f"{ibuf}[ly_]")
                    body.emit(None, f"if ({cond}) {{ {mine} = {other}; "
                                    f"{ibuf}[ly_] = {ibuf}[ly_ + {step}]; }}")
                else:
                    body.emit(None, f"{mine} = {_combine_text(t, r, acc_dt, mine, other)};")
                top.emit(None, t.barrier_local)
                step //= 2
            final = top.emit(ctype, f"{buf}[0]")
            farg = top.emit("long", f"{ibuf}[0]") if iptr else None
            low.bound[(r, outer_idx)] = _finish(top, t, r, final, farg)
        self._epilogue(top, low, group, Expr.var("o", M), outer_idx, (), ReduceStrategy(1, ly),
                       it, 0)
        renderer = Renderer()
        body = renderer.render(top, 1)
        sig = low.args.signature(name)
        lines = [sig.render(t, (ly,)), "{", *(f"    {p}" for p in pre),
                 *(f"    {d}" for d in local_decls), f"    const int active = o < {M};", *body,
                 "}"]
        return (Kernel(name, "\n".join(lines), sig, (M * ly,), (ly,), group, "combine",
                       work=M * gy), low)


def _cache_loop(top: Block, it: str, cache: int, ly: int, R: int, all_active: bool) -> Block:
    """``for k < cache: r = ly_ + k*ly`` over a row kept in registers: fully unrolled, with
    bounds checks only when the row does not split evenly over the lanes."""
    loop = top.nested(f"#pragma unroll\n    for (int k = 0; k < {cache}; k++) {{",
                      loop_vars=frozenset({"r"}), cache_loop=True)
    loop.emit(None, f"const {it} r = ly_ + ({it})k * {ly};")
    checks = ([] if all_active else ["!active"]) + ([] if cache * ly == R else [f"r >= {R}"])
    if checks:
        loop.emit(None, f"if ({' || '.join(checks)}) break;")
    return loop


def default_vector_width(space: tuple[int, ...], guarded: bool, widest: int = 4,
                         is_gpu: bool = True) -> int:
    """Lanes per vector: 16-byte accesses on GPUs (an H200 reaches copy bandwidth with float4,
    float8 is slower), 32-byte on CPUs (the AVX2 width: PoCL runs an 8-op float32 chain at copy
    speed with float8, 1.5-2x slower with float4). ``widest`` is the largest element size the
    kernel computes with. 1 for small or oddly shaped spaces, where lanes would not share
    loads; fewer lanes when the innermost dimension does not split evenly."""
    lanes = max(1, min(8, (16 if is_gpu else 32) // widest))
    if guarded or math.prod(space) < 4096:
        return 1
    while lanes > 1 and len(space) > 1 and space[-1] % lanes:
        lanes //= 2
    return lanes


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def _extent(p: object) -> int:
    shape, strides = p.shape, p.strides or row_major_strides(p.shape)
    if any(d == 0 for d in shape):
        return 0
    return 1 + sum((d - 1) * abs(s) for d, s in zip(shape, strides))


# -- reduction helpers --------------------------------------------------------------------------------


def _acc_dtype(r: Node) -> np.dtype:
    """Accumulator dtype: the result dtype (float16 accumulates in float32, its compute type)."""
    if r.op in (Op.ARGMAX, Op.ARGMIN):
        return r.srcs[0].dtype
    return r.dtype


def _identity(t: Target, r: Node, acc: np.dtype) -> str:
    if r.op in (Op.SUM, Op.ANY):
        return t.literal(acc.type(0), acc)
    if r.op in (Op.PROD, Op.ALL):
        return t.literal(acc.type(1), acc)
    low_end = r.op in (Op.MAX, Op.ARGMAX)
    if acc.kind == "f":
        return t.literal(acc.type(-np.inf if low_end else np.inf), acc)
    if acc.kind == "b":
        return t.literal(np.bool_(not low_end), acc)
    info = np.iinfo(acc)
    return t.literal(acc.type(info.min if low_end else info.max), acc)


_COMBINE = {Op.SUM: Op.ADD, Op.PROD: Op.MUL, Op.MAX: Op.MAXIMUM, Op.MIN: Op.MINIMUM,
            Op.ANY: Op.BITWISE_OR, Op.ALL: Op.BITWISE_AND}


def _combine_text(t: Target, r: Node, acc: np.dtype, a: str, b: str) -> str:
    return t.render_op(_COMBINE[r.op], acc, [acc, acc], [a, b])


def _accumulate(loop: Block, t: Target, r: Node, acc: Instr, arg: Instr | None, v: Ref,
                acc_dt: np.dtype) -> None:
    if arg is None:
        loop.emit(None, "{0} = " + _combine_text(t, r, acc_dt, "{0}", "{1}") + ";", acc, v)
        return
    # first occurrence wins: each lane visits its indices in increasing order
    better = ">" if r.op is Op.ARGMAX else "<"
    nan = " || (isnan({1}) && !isnan({0}))" if acc_dt.kind == "f" else ""
    loop.emit(None, "if ({2} < 0 || {1} " + better + " {0}" + nan
              + ") {{ {0} = {1}; {2} = r; }}", acc, v, arg)


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
    if r.op is not Op.SUM or acc.kind != "f":
        return 0  # integer sums are exact; max/min/any/all do not round
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
        full = block.nested(f"if (k & {CASCADE_BLOCK << j}) {{", footer="} else {")
        full.emit(None, "{0} = " + _combine_text(t, r, acc_dt, "{1}", "{0}") + ";", carry, level)
        full.emit(None, "{0} = " + zero + ";", level)
        empty = block.nested("")
        empty.emit(None, "{0} = {1};", level, carry)
        block = full
    block.emit(None, "{0} = {1};", levels[-1], carry)


def _arg_better(r: Node, acc: np.dtype, v: str, i: str, best: str, bi: str) -> str:
    """Should (v, i) replace (best, bi)?  NumPy: the first maximum, and NaN is the maximum."""
    cmp = ">" if r.op is Op.ARGMAX else "<"
    if acc.kind == "f":
        return (f"{i} >= 0 && ({bi} < 0 || {v} {cmp} {best} || (isnan({v}) && !isnan({best}))"
                f" || (({v} == {best} || (isnan({v}) && isnan({best}))) && {i} < {bi}))")
    return f"{i} >= 0 && ({bi} < 0 || {v} {cmp} {best} || ({v} == {best} && {i} < {bi}))"


def _finish(top: Block, t: Target, r: Node, value: Ref, arg: Ref | None) -> Ref:
    """A reduction's value as its node's dtype (argmax: the index; float16: rounded)."""
    if arg is not None:
        return top.emit("long", "({0} < 0 ? 0 : {0})", arg)
    if r.dtype == dt.FLOAT16:
        return top.emit("float", t.round_to_storage(r.dtype, "{0}"), value)
    return value


__all__ = ["BufferArg", "Kernel", "KernelSignature", "Module", "Partial", "ScalarArg",
           "SourceModule"]
