"""Scan kernels: one per "scan" group (a SCAN node with its prologue and epilogue), two when a
few long rows are split over several work-groups.

The group's SCAN runs along one axis of its space; the other axes are *rows* (``R`` of them, of
length ``L``). Its operand's elementwise cone (casts, the NaN test of nancumsum, arithmetic on
inputs) is computed where the scan reads it, and the group's stores (the epilogue: anything
elementwise on the running value at its own index) are written where the running value is made,
so a fused ``cumsum`` reads its inputs once and writes its outputs once.

Two kernel shapes, chosen by ``strategy``:

* **sequential** (CPUs; GPU scans of short rows, or along a strided axis with enough rows to
  fill the device): one work-item per row
  walks it in order carrying the running value: ``L`` combines per row, NumPy's own order (so
  float sums round exactly as NumPy's sequential ``add.accumulate``). On a GPU neighbouring
  work-items own neighbouring rows, which for a scan along a non-innermost axis are neighbouring
  addresses: the loads coalesce.
  On CPUs a few long rows (a 1-d ``cumsum``) are split into ``gy`` blocks, one per core: a
  first kernel sums each block, then each block's work-item starts from the totals of the
  blocks before it (combined in order), so floats are summed per block, as the tiled kernel's.
* **tiled** (other GPU scans): a work-group of ``WG`` work-items owns a row
  (or one of ``gy`` blocks of it) and walks it in tiles of ``WG * V`` elements. Each work-item
  loads ``V`` consecutive elements (one vector load), scans them in registers, and the
  work-group scans the ``WG`` per-item totals in local memory with the work-efficient
  Brent-Kung / Blelloch up-sweep and down-sweep (``2 (WG - 1)`` combines, ``2 log2 WG``
  barriers); each item then adds the exclusive prefix (and the carry of the earlier tiles) to
  its ``V`` values and the epilogue stores them. Work is ``O(L)`` per row: each element is
  combined a constant number of times. The tail tile (``L % (WG V)`` elements) is scanned the
  same way with a short loop per item. For few, long rows (a 1-d ``cumsum`` of 2**24), each
  row is split into ``gy`` blocks: a first kernel reduces every block to its total
  (reduce-then-scan); the scan kernel's work-group for block ``b`` starts its carry from the
  totals of blocks ``0..b-1`` (combined by the work-group in a tree: ``O(gy)`` extra work per
  work-group, with ``gy`` a few times the compute units).

Float accuracy: the sequential kernel adds in NumPy's order. The tiled kernel adds each value
to a prefix of a different grouping (partial sums of lanes, items and tiles), like NumPy's own
pairwise ``sum`` versus its sequential ``cumsum``: the difference of element ``i`` is within
``~(log2(WG V) + 2) * eps * sum(|x[:i+1]|)`` (tests use ``4 * log2(n) * eps * cumsum(|x|)``).
Integer scans wrap and are exact in every shape; max/min and the logical and bitwise scans are
exact (associative without rounding).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir.indexing import Index, unravel
from fusejit.ir.graph import Node, const, const_value
from fusejit.codegen.context import ModuleContext
from fusejit.codegen.kernels import Kernel, Partial
from fusejit.codegen.lowering import LANE, Block, Imm, Lanes, Lowering, Ref, _store
from fusejit.ir.ops import SCAN_COMBINE, Op
from fusejit.passes.plan import Group
from fusejit.codegen.render import Renderer
from fusejit.ir.symbolic import Expr

_TILED_MIN_LENGTH = 64  # shorter rows: one work-item per row beats a work-group's barriers
# rows per compute unit from which a scan along a strided axis runs one work-item per row
# (fewer rows, e.g. axis 0 of a (2**20, 4) array, leave the device idle: tiled, in blocks)
_SEQUENTIAL_ROWS_PER_CU = 32
_CPU_BLOCK = 1 << 15  # elements per block below which a CPU work-item scans a row alone


@dataclass(frozen=True)
class ScanStrategy:
    """How a scan group runs: ``kind`` "sequential" or "tiled"; for tiled, ``wg`` work-items of
    ``vec`` lanes per work-group and ``gy`` work-groups (blocks) per row."""

    kind: str
    wg: int = 1
    vec: int = 1
    gy: int = 1


def strategy(scan: Node, limits: object) -> ScanStrategy:
    """The kernel shape for ``scan`` on a device with ``limits`` (see the module docstring)."""
    _, axis = scan.arg
    L = scan.shape[axis]
    R = math.prod(scan.shape) // max(L, 1)
    cus = getattr(limits, "compute_units", 8)
    if not getattr(limits, "is_gpu", False):
        # few long rows: split into blocks so that every core scans one (reduce-then-scan)
        gy = 1 if R >= 2 * cus else max(1, min(L // _CPU_BLOCK, math.ceil(4 * cus / R)))
        return ScanStrategy("sequential", gy=gy)
    if L < _TILED_MIN_LENGTH:
        return ScanStrategy("sequential")
    if axis != scan.ndim - 1 and R >= _SEQUENTIAL_ROWS_PER_CU * cus:
        return ScanStrategy("sequential")  # enough rows: neighbouring items read neighbours
    wg = 256
    limit = min(getattr(limits, "max_work_group", 256),
                getattr(limits, "max_barrier_group", 0) or 1 << 30)
    while wg > limit:
        wg //= 2
    size = 4 if scan.dtype == dt.FLOAT16 else max(1, scan.dtype.itemsize)
    # (a strided axis gains nothing from vector lanes: each lane is its own load)
    vec = max(1, min(4, 16 // size)) if axis == scan.ndim - 1 else 1
    while vec > 1 and wg * vec > L:
        vec //= 2
    tiles = max(1, L // (wg * vec))
    # enough work-groups to fill the device: a few per compute unit
    want = 4 * cus
    gy = 1 if R >= want else min(tiles, math.ceil(want / R))
    if gy > 1:  # whole tiles per block
        gy = math.ceil(tiles / math.ceil(tiles / gy))
    return ScanStrategy("tiled", wg, vec, gy)


def _identity(op: Op, dtype: np.dtype) -> Node:
    """The combine op's identity in ``dtype`` as a literal node."""
    ident = SCAN_COMBINE[op]
    if ident in ("lowest", "highest"):
        low = ident == "lowest"
        if dtype.kind == "f":
            value = -np.inf if low else np.inf
        elif dtype.kind == "b":
            value = not low
        else:
            info = np.iinfo(dtype)
            value = info.min if low else info.max
    elif ident == "nan":
        value = np.nan
    else:
        value = ident
    return const(value, dtype)


class _Gen:
    """State of one scan group's kernels."""

    def __init__(self, sm: ModuleContext, name: str, group: Group) -> None:
        self.sm, self.name, self.group = sm, name, group
        scan = group.scan
        assert scan is not None
        self.scan = scan
        self.op, self.axis = scan.arg
        self.src = scan.srcs[0]
        self.L = scan.shape[self.axis]
        self.R = math.prod(scan.shape) // self.L
        self.t = sm.target
        self.st = strategy(scan, sm.limits)
        self.outer_shape = tuple(1 if a == self.axis else d for a, d in enumerate(scan.shape))

    def index(self, row: Expr, pos: Expr) -> Index:
        """The element at position ``pos`` of row ``row``."""
        outer = unravel(row, self.outer_shape)
        return tuple(pos if a == self.axis else e for a, e in enumerate(outer))

    def combine(self, low: Lowering, block: Block, a: Ref, b: Ref) -> Ref:
        """``a op b`` in the scan's dtype, as a new value."""
        dtype = self.scan.dtype
        leaf = const(0, dtype)
        text = low._expr(Node.make(self.op, dtype, (), (leaf, leaf)))
        return block.emit(self.t.compute_type(dtype), text, a, b)

    def update(self, low: Lowering, block: Block, acc: Ref, b: Ref) -> None:
        """``acc = acc op b``."""
        self.assign(low, block, acc, acc, b)

    def assign(self, low: Lowering, block: Block, dest: Ref, a: Ref, b: Ref) -> None:
        """``dest = a op b``."""
        dtype = self.scan.dtype
        leaf = const(0, dtype)
        text = low._expr(Node.make(self.op, dtype, (), (leaf, leaf)))
        block.emit(None, "{0} = " + text.replace("{1}", "{2}").replace("{0}", "{1}") + ";",
                   dest, a, b)

    def identity(self, low: Lowering) -> str:
        """The combine op's identity, as a literal of the scan's dtype."""
        node = _identity(self.op, self.scan.dtype)
        low.note_dtype(node.dtype)
        return self.t.literal(const_value(node), node.dtype)

    def emit_stores(self, block: Block, low: Lowering, idx: Index, value: Ref | Lanes) -> None:
        """Bind the running value at ``idx`` and write the group's stores there."""
        low.bind(self.scan, idx, value)
        for st in self.group.stores:
            node_idx = idx
            if st.node.shape != self.scan.shape:  # (length-1 axes added or removed)
                rest = iter(e for e, d in zip(idx, self.scan.shape) if d != 1)
                node_idx = tuple(Expr(0) if d == 1 else next(rest) for d in st.node.shape)
            _store(block, st, node_idx, low, block.value(st.node, node_idx))

    def kernels(self) -> list[tuple[Kernel, Lowering]]:
        if self.st.kind == "sequential" and self.st.gy == 1:
            return [self.sequential(None)]
        if self.st.kind == "sequential":
            part = len(self.sm.partials)
            self.sm.partials.append(Partial(self.R * self.st.gy, self.scan.dtype))
            return [self.sequential(part, totals=True), self.sequential(part)]
        if self.st.gy == 1:
            return [self.tiled(None)]
        part = len(self.sm.partials)
        self.sm.partials.append(Partial(self.R * self.st.gy, self.scan.dtype))
        return [self.block_totals(part), self.tiled(part)]

    # -- one work-item per row ---------------------------------------------------------------------
    def sequential(self, part: int | None, totals: bool = False) -> tuple[Kernel, Lowering]:
        """One work-item per row, or per block of a row (``gy`` blocks: with ``totals`` the
        first kernel, each block's total into ``part``; else the scan, each block starting
        from the totals of the blocks before it, combined in order)."""
        sm, t, gy = self.sm, self.t, self.st.gy
        dtype = self.scan.dtype
        low = sm._lowering(self.group)
        it = low.index_type
        low.note_dtype(dtype)
        ctype = t.compute_type(dtype)
        top = Block(low)
        local = 64 if sm.is_gpu else None
        items = self.R * gy
        pre = [f"const {it} g = {t.cast(it, t.global_id)};"]
        pre += [f"const {it} o = g / {gy};", f"const {it} b = g % {gy};"] if gy > 1 else \
            [f"const {it} o = g;"]
        body = top.nested(f"if (g < {items}) {{") if local else top
        acc = body.emit(ctype, self.identity(low))
        if part is not None and not totals:
            ptr = low.args.buffer("partial", part, dtype)
            prev = body.nested(f"for ({it} j = 0; j < b; j++) {{")
            self.update(low, prev, acc, prev.emit(ctype, t.load(ptr, f"o * {gy} + j", dtype)))
        chunk = math.ceil(self.L / gy)
        start, end = (f"b * {chunk}", f"min({t.cast(it, str(self.L))}, (b + 1) * {chunk})") \
            if gy > 1 else ("0", str(self.L))
        loop = body.nested(f"for ({it} r = {start}; r < {end}; r++) {{",
                           loop_vars=frozenset({"r"}))
        idx = self.index(Expr.var("o", self.R), Expr.var("r", self.L))
        self.update(low, loop, acc, loop.value(self.src, idx))
        if totals:
            ptr = low.args.buffer("partial", part, dtype, write=True)
            body.emit(None, t.store(ptr, "g", "{0}", dtype), acc)
        else:
            self.emit_stores(loop, low, idx, acc)
        gsize = (math.ceil(items / local) * local,) if local else (items,)
        return self.finish(f"{self.name}_partial" if totals else self.name, low, top, pre, [],
                           gsize, (local,) if local else None, "partial" if totals else "main")

    def finish(self, name: str, low: Lowering, top: Block, pre: list[str], shared: list[str],
               gsize: tuple[int, ...], lsize: tuple[int, ...] | None, role: str
               ) -> tuple[Kernel, Lowering]:
        body = Renderer().render(top, 1)
        sig = low.args.signature(name)
        source = self.t.kernel(sig.render(self.t, lsize), shared,
                               [*(f"    {p}" for p in pre), *body])
        return (Kernel(name, source, sig, gsize, lsize, self.group, role,
                       work=math.prod(self.scan.shape)), low)

    # -- a work-group per row (block) ------------------------------------------------------------
    def geometry(self) -> tuple[int, int, int, int]:
        """(tile elements, full tiles per row, tiles per block, elements per block)."""
        st = self.st
        tile = st.wg * st.vec
        full = self.L // tile
        per_block = math.ceil(max(full, 1) / st.gy)
        return tile, full, per_block, per_block * tile

    def preamble(self, low: Lowering) -> list[str]:
        t, it, gy = self.t, low.index_type, self.st.gy
        pre = [f"const {it} lid = {t.cast(it, t.local_id_of(0))};",
               f"const {it} grp = {t.cast(it, t.group_id_of(0))};"]
        if gy > 1:
            pre += [f"const {it} o = grp / {gy};", f"const {it} b = grp % {gy};"]
        else:
            pre += [f"const {it} o = grp;"]
        return pre

    def block_totals(self, part: int) -> tuple[Kernel, Lowering]:
        """Reduce-then-scan, first kernel: each (row, block) work-group's combined total."""
        sm, t, st = self.sm, self.t, self.st
        low = sm._lowering(self.group)
        it = low.index_type
        low.note_dtype(self.scan.dtype)
        ctype = t.compute_type(self.scan.dtype)
        top = Block(low)
        tile, full, _, chunk = self.geometry()
        acc = top.emit(ctype, self.identity(low))
        # block b: the full tiles [b * chunk, (b + 1) * chunk), and the last block the tail
        bound = f"min({t.cast(it, str(full * tile))}, (b + 1) * {chunk})"
        loop = top.nested(f"for ({it} r = b * {chunk} + lid; r < {bound}; r += {st.wg}) {{",
                          loop_vars=frozenset({"r"}))
        idx = self.index(Expr.var("o", self.R), Expr.var("r", self.L))
        self.update(low, loop, acc, loop.value(self.src, idx))
        tail = top.nested(f"if (b == {st.gy - 1}) {{")
        tloop = tail.nested(f"for ({it} r = {full * tile} + lid; r < {self.L}; "
                            f"r += {st.wg}) {{", loop_vars=frozenset({"r"}))
        self.update(low, tloop, acc, tloop.value(self.src, idx))
        total = self.tree(low, top, acc)
        ptr = low.args.buffer("partial", part, self.scan.dtype, write=True)
        top.nested("if (lid == 0) {").emit(None, t.store(ptr, "grp", "{0}", self.scan.dtype),
                                           total)
        shared = [t.local_array(ctype, "sc", st.wg)]
        return self.finish(f"{self.name}_partial", low, top, self.preamble(low), shared,
                           (self.R * st.gy * st.wg,), (st.wg,), "partial")

    def tree(self, low: Lowering, top: Block, acc: Ref) -> Ref:
        """The work-group's ``acc`` values combined (in item order) through local ``sc``."""
        t, wg = self.t, self.st.wg
        top.emit(None, "sc[lid] = {0};", acc)
        top.emit(None, t.barrier_local)
        d = 1
        while d < wg:
            step = top.nested(f"if ((lid & {2 * d - 1}) == 0) {{")
            self.update(low, step, Imm("sc[lid]"), Imm(f"sc[lid + {d}]"))
            top.emit(None, t.barrier_local)
            d *= 2
        total = top.emit(t.compute_type(self.scan.dtype), "sc[0]")
        top.emit(None, t.barrier_local)
        return total

    def work_group_scan(self, low: Lowering, block: Block, total: Ref) -> tuple[Ref, Ref]:
        """Brent-Kung exclusive scan of the items' ``total`` over the work-group: (this item's
        exclusive prefix, the work-group's total)."""
        t, wg = self.t, self.st.wg
        ctype = t.compute_type(self.scan.dtype)
        block.emit(None, "sc[lid] = {0};", total)
        block.emit(None, t.barrier_local)
        d = 1
        while d < wg:  # up-sweep: sc[i] holds the total of its subtree
            step = block.nested(f"if (((lid + 1) & {2 * d - 1}) == 0) {{")
            self.assign(low, step, Imm("sc[lid]"), Imm(f"sc[lid - {d}]"), Imm("sc[lid]"))
            block.emit(None, t.barrier_local)
            d *= 2
        whole = block.emit(ctype, f"sc[{wg - 1}]")
        block.emit(None, t.barrier_local)
        block.nested(f"if (lid == {wg - 1}) {{").emit(None, "sc[lid] = {0};",
                                                       Imm(self.identity(low)))
        block.emit(None, t.barrier_local)
        d = wg // 2
        while d >= 1:  # down-sweep: sc[i] becomes the combine of everything before it
            step = block.nested(f"if (((lid + 1) & {2 * d - 1}) == 0) {{")
            left = step.emit(ctype, f"sc[lid - {d}]")
            step.emit(None, f"sc[lid - {d}] = sc[lid];")
            self.update(low, step, Imm("sc[lid]"), left)
            block.emit(None, t.barrier_local)
            d //= 2
        prefix = block.emit(ctype, "sc[lid]")
        block.emit(None, t.barrier_local)
        return prefix, whole

    def tiled(self, part: int | None) -> tuple[Kernel, Lowering]:
        sm, t, st = self.sm, self.t, self.st
        low = sm._lowering(self.group)
        it = low.index_type
        dtype = self.scan.dtype
        low.note_dtype(dtype)
        ctype = t.compute_type(dtype)
        top = Block(low)
        tile, full, per_block, _ = self.geometry()
        carry = top.emit(ctype, self.identity(low))
        if part is not None:  # the totals of the earlier blocks of this row
            ptr = low.args.buffer("partial", part, dtype)
            acc = top.emit(ctype, self.identity(low))
            loop = top.nested(f"for ({it} j = lid; j < b; j += {st.wg}) {{")
            self.update(low, loop, acc, loop.emit(ctype, t.load(ptr, f"o * {st.gy} + j",
                                                                dtype)))
            self.update(low, top, carry, self.tree(low, top, acc))
        row = Expr.var("o", self.R)
        V = st.vec
        if full:
            start = f"b * {per_block}" if part is not None else "0"
            end = f"min({t.cast(it, str(full))}, (b + 1) * {per_block})" if part is not None \
                else str(full)
            # (a loop of one trip is a plain block: values there must not be hoisted above
            # the running value they read)
            loop = top.nested(f"for ({it} w = {start}; w < {end}; w++) {{",
                              loop_vars=frozenset({"w"})) if full > 1 else \
                top.nested("if (b == 0) {" if part is not None else "{")
            lane = Expr.var(LANE, V) if V > 1 else Expr(0)
            pos = Expr.var("w", full) * tile + Expr.var("lid", st.wg) * V + lane
            idx = self.index(row, pos)
            low.lanes = V
            try:
                v = loop.value(self.src, idx)
                refs = v.refs if isinstance(v, Lanes) else (v,) * V
                run = [loop.emit(ctype, "{0}", refs[0])]
                for r in refs[1:]:
                    run.append(self.combine(low, loop, run[-1], r))
                prefix, whole = self.work_group_scan(low, loop, run[-1])
                prefix = self.combine(low, loop, carry, prefix)
                vals = [self.combine(low, loop, prefix, r) for r in run]
                self.emit_stores(loop, low, idx, Lanes(tuple(vals)) if V > 1 else vals[0])
                self.update(low, loop, carry, whole)
            finally:
                low.lanes = 1
        rest = self.L - full * tile
        if rest:
            tail = top.nested(f"if (b == {st.gy - 1}) {{") if part is not None else top
            k = math.ceil(rest / st.wg)
            base = f"{full * tile} + lid * {k}"
            pos = Expr.var("lid", st.wg) * k + Expr.var("j", k) + full * tile
            idx = self.index(row, pos)
            acc = tail.emit(ctype, self.identity(low))
            guard = f"{base} + j < {self.L}"

            def steps() -> Block:  # the item's k positions (one: a guarded block, see above)
                if k == 1:
                    return tail.nested(f"if ({full * tile} + lid < {self.L}) {{")
                return tail.nested(f"for ({it} j = 0; j < {k} && {guard}; j++) {{",
                                   loop_vars=frozenset({"j"}))
            loop = steps()
            self.update(low, loop, acc, loop.value(self.src, idx))
            prefix, _ = self.work_group_scan(low, tail, acc)
            run = self.combine(low, tail, carry, prefix)
            loop = steps()
            self.update(low, loop, run, loop.value(self.src, idx))
            self.emit_stores(loop, low, idx, run)
        shared = [t.local_array(ctype, "sc", st.wg)]
        return self.finish(self.name, low, top, self.preamble(low), shared,
                           (self.R * st.gy * st.wg,), (st.wg,), "main")


def scan_kernels(sm: ModuleContext, name: str, group: Group) -> list[tuple[Kernel, Lowering]]:
    """The kernels of one scan group (see the module docstring)."""
    return _Gen(sm, name, group).kernels()


__all__ = ["ScanStrategy", "scan_kernels", "strategy"]
