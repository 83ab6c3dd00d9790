"""GEMM kernels: one per "gemm" group, with the operands' prologues in the tile loads and the
epilogue in the store (after CLBlast's xgemm and the myGEMM tutorial; written anew here).

The tiled kernel: a 1-d work-group of MDIMC x NDIMC work-items owns an MWG x NWG tile of the
result and walks K in steps of KWG. Each step's tiles of ``a`` and ``b`` are loaded from global
memory by all work-items (vector loads along whichever axis is contiguous), converted to the
accumulator type and written to local memory, double-buffered: the loads of the next step are
issued before the current one is computed, so one barrier per step suffices. Each work-item
keeps an (MWG/MDIMC) x (NWG/NDIMC) register tile of accumulators and reads its operands from
local memory in vectors of VW. Tiles are launched in grouped order (GROUP_M tile rows side by
side) so neighbouring work-groups share operand tiles in L2. Edge tiles clamp their loads into
range (the padding rows and columns compute values nobody stores) and zero the K tail, so odd
sizes need no padding copies; stores are guarded only in edge tiles. Batched products run the
batch on the second launch dimension. Kernels for runtime extents (``@fuse(dynamic=...)``) read
M from a launch argument (a convolution's batch is M's first factor), every tile treated as an
edge tile, so one program serves every batch size.

The direct kernel (small products, CPUs) skips local memory: each work-item loads its operands
straight into registers in a loop over K.

Operand values are whatever the group's prologue computes at an (m, k) or (k, n) index, and
stores are the epilogue's values at (m, n): both come from the shared Lowering, with the
accumulator bound as the MATMUL node's value, so any elementwise chain, view or cast fuses.
The tensor-core variant (codegen/gemm/mma.py) replaces only ``compute``, the local pitch and the
register tile layout (``row_of``/``col_of``).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.codegen.gemm.epilogue import Epilogue, _var
from fusejit.codegen.gemm.config import GemmConfig
from fusejit.codegen.gemm.simt import describe, heuristic
from fusejit.ir.indexing import Index, reshaped_index, unravel
from fusejit.ir.graph import Node
from fusejit.codegen.context import ModuleContext
from fusejit.codegen.kernels import Kernel, Partial
from fusejit.codegen.lowering import LANE, Block, Imm, LaneOf, Lanes, Lowering, Ref, _store
from fusejit.ir.ops import Op
from fusejit.passes.gemm import product_axes, product_index
from fusejit.passes.window import reads_window
from fusejit.passes.plan import Group, Store, reads_of
from fusejit.codegen.render import Renderer
from fusejit.ir.symbolic import Expr, Var


def accumulator(dtype: np.dtype) -> np.dtype:
    """The type a product of ``dtype`` operands sums in: float32 for float16 (as NumPy's
    matmul does), unsigned integers of at least 32 bits for integers and bools (wrapping
    sums mod 2**n, exact once cast back to the result dtype)."""
    if dtype == dt.FLOAT16:
        return dt.FLOAT32
    if dtype.kind == "f":
        return dtype
    return dt.UINT64 if dtype.itemsize == 8 else dt.UINT32


class _Gen(Epilogue):
    """State of one GEMM kernel being generated."""

    def __init__(self, sm: ModuleContext, name: str, group: Group) -> None:
        self.sm, self.name, self.group = sm, name, group
        m = group.matmul
        assert m is not None
        self.m = m
        self.a, self.b = m.srcs
        *batch, self.M, self.K = self.a.shape
        self.batch = tuple(batch)
        self.N = self.b.shape[-1]
        self.B = math.prod(self.batch)
        self.low = sm._lowering(group)
        # each store's layout against the product (product_axes), found once per kernel
        self.layouts = {st.node: product_axes(st.node, m) for st in group.stores
                        if st.node is not m}
        self.t = sm.target
        self.it = self.low.index_type
        self.acc = accumulator(m.dtype)
        self.low.note_dtype(self.acc)
        self.actype = self.t.compute_type(self.acc)
        limits = getattr(sm, "limits", None)
        self.cfg: GemmConfig = group.gemm_config or heuristic(
            self.M, self.N, self.K, self.B, limits if limits is not None else _gpu_limits(sm),
            self.acc, reads_window(group))
        self.bidx = unravel(_var("bz", self.B - 1), self.batch) if self.batch else ()
        # kernels for runtime extents (@fuse(dynamic=...)) read M at launch: a convolution's
        # batch is M's outermost factor, so a new batch size reuses the program
        self.dynamic = bool(getattr(sm, "dynamic", False))
        self.top = Block(self.low)
        self.pre: list[str] = []
        self.head: list[str] = []  # program-level definitions the kernel needs
        self.defined: set[tuple[str, int]] = set()

    def extent(self, label: str, value: int, low: Lowering | None = None) -> str:
        """An extent of M as the source reads it: its literal, or under ``dynamic`` a
        launch argument (``n_<label>``)."""
        if not self.dynamic:
            return str(value)
        return (low or self.low).args.extent(label, value)

    # -- indices ----------------------------------------------------------------------------------
    def a_index(self, row: Expr, k: Expr) -> Index:
        return (*self.bidx, row, k)

    def b_index(self, k: Expr, col: Expr) -> Index:
        return (*self.bidx, k, col)

    def contiguous(self, node: Node, is_a: bool) -> str:
        """'k' when the operand's loads are contiguous along K, 'outer' when along M (for a) or
        N (for b); judged from the strides of what its prologue reads."""
        o, k = Expr.var("po_", 1 << 20), Expr.var("pk_", 1 << 20)
        idx = self.a_index(o, k) if is_a else self.b_index(k, o)
        votes = {"k": 0, "outer": 0}
        for leaf, lidx in reads_of(node, idx, set(self.low.materialized)):
            if leaf.op is not Op.INPUT and leaf not in self.low.materialized:
                continue
            _, addr, _, _ = self.low.address_expr(leaf, lidx)
            coefs = {atom.name: c for atom, c in addr.terms if isinstance(atom, Var)}
            if coefs.get("pk_") == 1:
                votes["k"] += 1
            elif coefs.get("po_") == 1:
                votes["outer"] += 1
        default = "k" if is_a else "outer"
        other = "outer" if is_a else "k"
        return other if votes[other] > votes[default] else default

    # -- values -----------------------------------------------------------------------------------
    def to_acc(self, block: Block, v: Ref, src: np.dtype) -> Ref:
        if src.kind == "f":
            return v
        return block.emit(self.actype, self.t.cast(self.actype, "{0}"), v)

    def final(self, block: Block, acc: str) -> Ref:
        """The MATMUL node's value from its accumulator."""
        m, t = self.m, self.t
        if m.dtype == dt.FLOAT16:
            return block.emit("float", t.round_to_storage(dt.FLOAT16, "{0}"), Imm(acc))
        if m.dtype.kind == "f":
            return Imm(acc)
        return block.emit(t.compute_type(m.dtype), t.render_cast(self.acc, m.dtype, "{0}"),
                          Imm(acc))

    def store(self, block: Block, st: Store, idx: Index, low: Lowering | None = None) -> None:
        """Store ``st`` at the product's index ``idx`` (a root may lack or add length-1 axes:
        ``vector @ matrix + b``)."""
        low = low or self.low
        node_idx = idx
        axes = self.layouts.get(st.node)
        if axes is not None:  # a transposed or reshaped epilogue (an NCHW image of rows)
            node_idx = product_index(axes, idx, self.m.shape)
        elif st.node.shape != self.m.shape:  # a reshape: rows N*H*W stored as NHWC
            node_idx = reshaped_index(idx, self.m.shape, st.node.shape)
        _store(block, st, node_idx, low, block.value(st.node, node_idx))

    def fma(self, a: str, b: str, acc: str) -> str:
        # fma on GPUs (one instruction); a rounded product and a sum on CPUs, where PoCL
        # calls a software fma (30x slower). Both keep the summation bound of the README.
        if self.acc.kind == "f" and self.sm.is_gpu:
            return f"{acc} = fma({a}, {b}, {acc});"
        return f"{acc} += {a} * {b};"

    # -- the kernel -------------------------------------------------------------------------------
    def build(self) -> list[tuple[Kernel, Lowering]]:
        cfg, it, t = self.cfg, self.it, self.t
        T = cfg.threads
        nm, nn = math.ceil(self.M / cfg.mwg), math.ceil(self.N / cfg.nwg)
        # (under dynamic the group does not shrink to a short M: the source stays the same)
        gm = max(1, cfg.group_m if self.dynamic else min(cfg.group_m, nm))
        self.pre += [f"const {it} tid = {t.cast(it, t.local_id_of(0))};",
                     f"const {it} tn = tid % {cfg.ndimc};",
                     f"const {it} tm = tid / {cfg.ndimc};",
                     f"const {it} pid = {t.cast(it, t.group_id_of(0))};"]
        S = self.S = cfg.split if cfg.local else 1
        self.Kc = self.K // S  # the K slice of one work-group (all of K without split-K)
        if S > 1:
            self.pre += [f"const {it} kz = {t.cast(it, t.group_id_of(1))} % {S};",
                         f"const {it} kbase = kz * {self.Kc};"]
        if self.B > 1:
            self.pre.append(f"const {it} bz = {t.cast(it, t.group_id_of(1))}" +
                            (f" / {S};" if S > 1 else ";"))
        # grouped launch order: gm tile rows side by side walk the tile columns together
        group_m = t.cast(it, str(gm))
        self.pre.append(f"const {it} gfirst = pid / {gm * nn} * {gm};")
        if self.dynamic:
            # M's tiles counted from M at launch, and a spare row of tiles in the grid: a
            # bundle's grid, a formula of the batch rounded up (compile/aot_dynamic.py), then
            # covers every tile of any batch. Work-groups past the last tile compute one tile
            # row below M (loads clamped, stores guarded) rather than leave: PoCL aborts on a
            # return before a barrier
            self.pre.append(f"const {it} tiles_m = ({self.extent('m', self.M)} + "
                            f"{cfg.mwg - 1}) / {cfg.mwg};")
            gsize_expr = f"max(min(tiles_m - gfirst, {group_m}), {t.cast(it, '1')})"
        else:
            gsize_expr = f"min({t.cast(it, str(nm))} - gfirst, {group_m})"
        self.pre += [f"const {it} gsize = {gsize_expr};",
                     f"const {it} pm = gfirst + (pid % {gm * nn}) % gsize;",
                     f"const {it} pn = (pid % {gm * nn}) / gsize;",
                     f"const {it} m0 = pm * {cfg.mwg};",
                     f"const {it} n0 = pn * {cfg.nwg};"]
        simd = not cfg.local and cfg.vw > 1
        for i in range(cfg.mwi):
            for j in range(0 if simd else cfg.nwi):
                self.pre.append(f"{self.actype} acc{i}_{j} = {t.cast(self.actype, '0')};")
        if simd:
            self.simd()
        elif cfg.local:
            self.tiled()
        else:
            self.direct()
        if S > 1:
            self.partial_store()
        elif not simd:
            self.epilogue()
        renderer = Renderer()
        body = renderer.render(self.top, 1)
        name = f"{self.name}_partial" if S > 1 else self.name
        sig = self.low.args.signature(name)
        lines = [*self.head, t.kernel(sig.render(t, (T,)), [], [*(f"    {p}" for p in self.pre),
                                                                 *body])]
        gz = self.B * S
        groups = (nm + self.dynamic) * nn  # (dynamic: the spare row of tiles above)
        gsize = (groups * T, gz) if gz > 1 else (groups * T,)
        lsize = (T, 1) if gz > 1 else (T,)
        reason = f"{self.group.reason}; kernel: {self.describe_config()}" + (
            f" ({cfg.why})" if cfg.why else "")
        group = replace(self.group, reason=reason, gemm_config=cfg)
        kernel = Kernel(name, "\n".join(lines), sig, gsize, lsize, group,
                        "partial" if S > 1 else "main", work=self.B * self.M * self.N * self.K)
        out = [(kernel, self.low)]
        if S > 1:
            out.append(self.combine(group))
        return out

    def describe_config(self) -> str:
        """The configuration as explain() tells it (the tensor-core generator has its own)."""
        return describe(self.cfg)

    # -- split-K ----------------------------------------------------------------------------------
    def partial_store(self) -> None:
        """Each slice's accumulators, unconverted, into its part of the partials buffer."""
        cfg, it = self.cfg, self.it
        size = self.B * self.M * self.N
        self.part = len(self.sm.partials)
        self.sm.partials.append(Partial(self.S * size, self.acc))
        ptr = self.low.args.buffer("partial", self.part, self.acc, write=True)
        b = "bz" if self.B > 1 else "0"
        block = self.top
        mn = self.extent("mn", self.M * self.N)
        block.emit(None, f"__global {self.actype} *slice = {ptr} + (kz * {self.B} + {b}) * "
                         f"{mn};")
        for i in range(cfg.mwi):
            block.emit(None, f"const {it} gr{i} = {self.row_of(i)};")
        for j in range(cfg.nwi):
            block.emit(None, f"const {it} gc{j} = {self.col_of(j)};")
        for i in range(cfg.mwi):
            for j in range(cfg.nwi):
                block.emit(None, f"if (gr{i} < {self.extent('m', self.M)} && gc{j} < {self.N}) "
                                 f"slice[gr{i} * "
                                 f"{self.N} + gc{j}] = acc{i}_{j};")

    def combine(self, group: Group) -> tuple[Kernel, Lowering]:
        """The second kernel of split-K: the slices summed in order, then the epilogue."""
        low = self.sm._lowering(group)
        it = low.index_type
        size = self.B * self.M * self.N
        ptr = low.args.buffer("partial", self.part, self.acc)
        top = Block(low)
        n_size = self.extent("bmn", size, low)
        loop = top.nested(f"for ({it} w = gid; w < {n_size}; w += gsz) {{",
                          loop_vars=frozenset({"w"}))
        terms = " + ".join(f"{ptr}[{z} * {n_size} + w]" for z in range(self.S))
        loop.emit(None, f"const {self.actype} sum = {terms};")
        idx = unravel(Expr.var("w", size), self.m.shape)
        low.bound[(self.m, idx)] = self.final(loop, "sum")
        for st in group.stores:
            self.store(loop, st, idx, low)
        body = Renderer().render(top, 1)
        sig = low.args.signature(self.name)
        local = 256 if self.sm.is_gpu else None
        items = min(size, 1 << 20)
        gsize = (-(-items // local) * local,) if local else (items,)
        lines = [sig.render(self.t, (local,) if local else None), "{",
                 f"    const {it} gid = ({it})get_global_id(0);",
                 f"    const {it} gsz = ({it})get_global_size(0);", *body, "}"]
        return (Kernel(self.name, "\n".join(lines), sig, gsize, (local,) if local else None,
                       group, "combine", work=size), low)

    # -- tiled kernel -----------------------------------------------------------------------------
    def tiled(self) -> None:
        """Steps of KWG over K, the partial one first (its loads alone are guarded: K's tail
        reads as zero), the last one peeled (no prefetch), so the loop's loads need neither
        clamps nor guards."""
        cfg, it, K = self.cfg, self.it, self.K
        la, lb = self.a_layout, self.b_layout = (self.contiguous(self.a, True),
                                                 self.contiguous(self.b, False))
        a_size, b_size = cfg.kwg * self.pitch(True), cfg.kwg * self.pitch(False)
        ltype = self.local_type()
        self.pre += [f"__local {ltype} Al[{2 * a_size}] __attribute__((aligned(16)));",
                     f"__local {ltype} Bl[{2 * b_size}] __attribute__((aligned(16)));"]
        Kc = self.Kc
        rem = Kc % cfg.kwg
        k_first = rem - cfg.kwg if rem else 0
        steps = math.ceil(Kc / cfg.kwg)
        base = "kbase + " if self.S > 1 else ""
        top = self.top
        # the first step's tiles, into buffer 0
        stores = self.load(top, True, la, f"({base}{k_first})", "_0", "0", first=True)
        stores += self.load(top, False, lb, f"({base}{k_first})", "_0", "0", first=True)
        for tmpl, refs in stores:
            top.emit(None, tmpl, *refs)
        top.emit(None, self.t.barrier_local)
        names = frozenset(f"{p}{kind}{s}" for p in ("a_n", "b_n") for kind in ("k", "kq")
                          for s in range(256))
        if steps > 1:
            loop = top.nested(f"for ({it} kt = {k_first}; kt < {Kc - cfg.kwg}; "
                              f"kt += {cfg.kwg}) {{", loop_vars=names | {"kt"})
            loop.emit(None, f"const {it} cur = ((kt - ({k_first})) / {cfg.kwg}) & 1;")
            loop.emit(None, f"const {it} nxt = kt + {cfg.kwg};")
            # the next step's loads go first: their latency hides behind this step's FMAs
            stores = self.load(loop, True, la, f"({base}nxt)", "_n", "(cur ^ 1)", first=False)
            stores += self.load(loop, False, lb, f"({base}nxt)", "_n", "(cur ^ 1)", first=False)
            self.compute(loop, "cur")
            for tmpl, refs in stores:
                loop.emit(None, tmpl, *refs)
            loop.emit(None, self.t.barrier_local)
        self.compute(top, str((steps - 1) & 1))

    def load(self, block: Block, is_a: bool, layout: str, kstart: str, sfx: str, buf: str,
             first: bool) -> list[tuple[str, tuple[Ref, ...]]]:
        """Emit one step's loads of an operand tile; return the local stores to emit later.
        Only the first step (``first``) can start before k = 0 (the partial step)."""
        cfg, it, K = self.cfg, self.it, self.K
        node = self.a if is_a else self.b
        OW, O, o0 = (cfg.mwg, self.M, "m0") if is_a else (cfg.nwg, self.N, "n0")
        local = "Al" if is_a else "Bl"
        p = ("a" if is_a else "b") + sfx
        T = cfg.threads
        k_guard = first and self.Kc % cfg.kwg != 0
        V = 1
        if layout == "k":  # a vector lies wholly before k = 0 or wholly after
            V = next(v for v in (4, 2, 1) if cfg.kwg % v == 0 and K % v == 0)
        else:  # a vector lies wholly inside O or wholly beyond it
            V = next(v for v in (4, 2, 1) if OW % v == 0 and O % v == 0)
        along = cfg.kwg // V if layout == "k" else OW // V
        total = OW * cfg.kwg // V
        rounds = math.ceil(total / T)
        low = self.low
        stores: list[tuple[str, tuple[Ref, ...]]] = []
        q = "a" if is_a else "b"  # names shared by every step's loads: defined once, outside
        for s in range(rounds):
            inner = block
            partial = (s + 1) * T > total
            if partial:
                inner = block.nested(f"if (tid + {s * T} < {total}) {{")
            e = f"(tid + {s * T})"
            c_, r_ = f"{q}c{s}", f"{q}r{s}"
            new = (q, s) not in self.defined
            self.defined.add((q, s))
            if new:
                c_expr, r_expr = self.load_coords(e, s, along, total // along, layout)
                self.pre.append(f"const {it} {c_} = {c_expr};")
                self.pre.append(f"const {it} {r_} = {r_expr};")
            if layout == "k":  # r_: row of the tile, c_: vector along k
                outer_txt = f"{o0} + {r_}"
                k_txt = f"{kstart} + {c_} * {V}"
                local_of = self.local_offset(is_a, buf, f"({c_} * {V} + {{l}})", r_)
            else:  # r_: k row, c_: vector along the outer axis
                outer_txt = f"{o0} + {c_} * {V}"
                k_txt = f"{kstart} + {r_}"
                local_of = self.local_offset(is_a, buf, r_, f"{c_} * {V} + {{l}}")
            # the outer index, clamped into range in edge tiles (those values are not stored)
            ov = f"{q}o{s}"
            if layout == "outer" and V > 1:
                last = f"{self.extent('m', O)} / {V} - 1" if is_a and self.dynamic else O // V - 1
                if new:
                    self.pre.append(f"const {it} {ov} = min(({it})(({outer_txt}) / {V}), "
                                    f"({it})({last}));")
                outer = _var(ov, O // V - 1) * V + Expr.var(LANE, V)
            else:
                last = f"{self.extent('m', O)} - 1" if is_a and self.dynamic else O - 1
                if new:
                    self.pre.append(f"const {it} {ov} = min(({it})({outer_txt}), "
                                    f"({it})({last}));")
                outer = _var(ov, O - 1)
            kv = f"{p}k{s}" if V == 1 or layout == "outer" else f"{p}kq{s}"
            inner.emit(None, f"const {it} {kv}raw = {k_txt};")
            k0 = f"max({kv}raw, ({it})0)" if k_guard else f"{kv}raw"
            if layout == "k" and V > 1:
                inner.emit(None, f"const {it} {kv} = {k0} / {V};")
                kexpr = _var(kv, K // V - 1) * V + Expr.var(LANE, V)
            else:
                inner.emit(None, f"const {it} {kv} = {k0};")
                kexpr = _var(kv, K - 1)
            idx = self.a_index(outer, kexpr) if is_a else self.b_index(kexpr, outer)
            low.lanes = V
            try:
                value = inner.value(node, idx)
            finally:
                low.lanes = 1
            refs = value.refs if isinstance(value, Lanes) else (value,) * V
            vals = []
            for ref in refs:
                ref = self.to_acc(inner, ref, node.dtype)
                if k_guard:  # the partial step's part before k = 0 reads as zero
                    ref = inner.emit(self.actype, f"({kv}raw >= 0 ? {{0}} : "
                                     f"({self.actype})0)", ref)
                vals.append(ref)
            before = len(stores)
            stores += self.local_stores(local, local_of, vals, layout, s)
            if inner is not block:  # values defined in the guard: store there, now
                for tmpl, refs2 in stores[before:]:
                    inner.emit(None, tmpl, *refs2)
                del stores[before:]
        return stores

    def load_coords(self, e: str, s: int, along: int, rows: int, layout: str
                    ) -> tuple[str, str]:
        """(vector index along the contiguous axis, row across it) of tile load ``e`` (round
        ``s`` of ``rows * along`` vectors):
        consecutive work-items take consecutive vectors (coalesced)."""
        return f"{e} % {along}", f"{e} / {along}"

    def local_stores(self, local: str, local_of: str, vals: list[Ref], layout: str, s: int
                     ) -> list[tuple[str, tuple[Ref, ...]]]:
        """The local stores of round ``s``'s loaded vector (lane ``l`` at
        ``local_of.format(l=l)``)."""
        return [(self.local_store(local, local_of.format(l=lane)), (ref,))
                for lane, ref in enumerate(vals)]

    def pitch(self, is_a: bool) -> int:
        """Elements between consecutive k rows of an operand's local tile."""
        return self.cfg.mwg if is_a else self.cfg.nwg

    def local_type(self) -> str:
        return self.actype

    def local_offset(self, is_a: bool, buf: str, krow: str, outer: str) -> str:
        """Where element (k row, outer index) of buffer ``buf`` lies in the local tile."""
        P = self.pitch(is_a)  # (the tensor-core kernel pads it against bank conflicts)
        return f"{buf} * {P * self.cfg.kwg} + {krow} * {P} + {outer}"

    def local_store(self, local: str, offset: str) -> str:
        return f"{local}[{offset}] = {{0}};"

    def compute(self, block: Block, buf: str) -> None:
        cfg = self.cfg
        vw = cfg.vw
        ct = self.actype
        vt = f"{ct}{vw}" if vw > 1 else ct
        a_step, b_step = cfg.kwg * cfg.mwg, cfg.kwg * cfg.nwg
        inner = block.nested(f"for (int kk = 0; kk < {cfg.kwg}; kk++) {{")
        block.items.insert(len(block.items) - 1, _raw(block, "#pragma unroll"))
        inner.emit(None, f"__local const {ct} *la = Al + {buf} * {a_step} + kk * {cfg.mwg};")
        inner.emit(None, f"__local const {ct} *lb = Bl + {buf} * {b_step} + kk * {cfg.nwg};")
        for ib in range(cfg.mwi // vw):
            off = f"tm * {vw} + {ib * cfg.mdimc * vw}"
            inner.emit(None, f"const {vt} ra{ib} = " + (
                f"*((__local const {vt} *)(la + {off}));" if vw > 1 else f"la[{off}];"))
        for jb in range(cfg.nwi // vw):
            off = f"tn * {vw} + {jb * cfg.ndimc * vw}"
            inner.emit(None, f"const {vt} rb{jb} = " + (
                f"*((__local const {vt} *)(lb + {off}));" if vw > 1 else f"lb[{off}];"))
        for i in range(cfg.mwi):
            a = f"ra{i // vw}" + (f".s{i % vw:x}" if vw > 1 else "")
            for j in range(cfg.nwi):
                b = f"rb{j // vw}" + (f".s{j % vw:x}" if vw > 1 else "")
                inner.emit(None, self.fma(a, b, f"acc{i}_{j}"))

    # -- direct kernel ----------------------------------------------------------------------------
    def direct(self) -> None:
        cfg, it = self.cfg, self.it
        top = self.top
        rows, cols = [], []
        for i in range(cfg.mwi):
            last = self.t.cast(it, f"{self.extent('m', self.M)} - 1")
            top.emit(None, f"const {it} dr{i} = min(m0 + tm + {i * cfg.mdimc}, {last});")
            rows.append(_var(f"dr{i}", self.M - 1))
        for j in range(cfg.nwi):
            last = self.t.cast(it, str(self.N - 1))
            top.emit(None, f"const {it} dc{j} = min(n0 + tn + {j * cfg.ndimc}, {last});")
            cols.append(_var(f"dc{j}", self.N - 1))
        loop = top.nested(f"for ({it} k = 0; k < {self.K}; k++) {{", loop_vars=frozenset({"k"}))
        k = _var("k", self.K - 1)
        av = [self.to_acc(loop, loop.value(self.a, self.a_index(r, k)), self.a.dtype)
              for r in rows]
        bv = [self.to_acc(loop, loop.value(self.b, self.b_index(k, c)), self.b.dtype)
              for c in cols]
        for i, a in enumerate(av):
            for j, b in enumerate(bv):
                loop.emit(None, self.fma("{0}", "{1}", f"acc{i}_{j}"), a, b)

    # -- direct kernel over vectors (CPUs) -----------------------------------------------------
    def simd(self) -> None:
        """Each work-item: MWI consecutive rows by NWI consecutive columns held in vectors of
        VW (OpenCL vector types, which PoCL turns into AVX; work-items are not vectorised
        across a loop over K). Needs N % VW == 0 (whole vectors inside or beyond N)."""
        cfg, it, t, low = self.cfg, self.it, self.t, self.low
        V, nb = cfg.vw, cfg.nwi // cfg.vw
        vt = f"{self.actype}{V}"
        top = self.top
        for i in range(cfg.mwi):
            for jb in range(nb):
                self.pre.append(f"{vt} vacc{i}_{jb} = ({vt})(0);")
        rows = []
        for i in range(cfg.mwi):
            top.emit(None, f"const {it} dr{i} = min(m0 + tm * {cfg.mwi} + {i}, "
                           f"({it})({self.extent('m', self.M)} - 1));")
            rows.append(_var(f"dr{i}", self.M - 1))
        lane = Expr.var(LANE, V)
        cols = []
        for jb in range(nb):
            top.emit(None, f"const {it} dq{jb} = min((n0 + (tn * {nb} + {jb}) * {V}) / {V}, "
                           f"({it}){self.N // V - 1});")
            cols.append(_var(f"dq{jb}", self.N // V - 1) * V + lane)
        loop = top.nested(f"for ({it} k = 0; k < {self.K}; k++) {{", loop_vars=frozenset({"k"}))
        k = _var("k", self.K - 1)
        low.lanes = V
        try:
            av = [loop.value(self.a, self.a_index(r, k)) for r in rows]
            bv = [low.as_vector(loop, loop.value(self.b, self.b_index(k, c)), self.b.dtype)
                  for c in cols]
        finally:
            low.lanes = 1
        for i, a in enumerate(av):
            for jb, b in enumerate(bv):
                # (no vector fma: PoCL computes it in software, 30x slower than mul + add)
                loop.emit(None, f"vacc{i}_{jb} += ({vt})({{0}}) * {{1}};", a, b)
        # epilogue: whole rows and whole vectors are inside or outside the result
        for i in range(cfg.mwi):
            row_ok = top.nested(f"if (m0 + tm * {cfg.mwi} + {i} < "
                                f"{self.extent('m', self.M)}) {{")
            row = _var(f"dr{i}", self.M - 1)
            for jb in range(nb):
                inner = row_ok.nested(f"if (n0 + (tn * {nb} + {jb}) * {V} < {self.N}) {{")
                idx = (*self.bidx, row, cols[jb])
                text = f"vacc{i}_{jb}"
                if self.m.dtype == dt.FLOAT16:
                    text = t.round_to_storage_vector(dt.FLOAT16, text, V)
                vec = inner.emit(vt, text)
                low.lanes = V
                try:
                    low.bound[(self.m, idx)] = Lanes(tuple(
                        LaneOf(vec, l, t.lane(self.acc, l)) for l in range(V)))
                    for st in self.group.stores:
                        self.store(inner, st, idx)
                finally:
                    low.lanes = 1


def _raw(block: Block, text: str):
    """A statement with no operands (printed as it is)."""
    from fusejit.codegen.lowering import Instr

    return Instr(None, text, (), block)


def _gpu_limits(sm: object):
    from fusejit.passes.plan import DeviceLimits

    return DeviceLimits(is_gpu=bool(getattr(sm, "is_gpu", False)))


__all__ = ["accumulator"]
