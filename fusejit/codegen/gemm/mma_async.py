"""The tensor-core GEMM's multistage tile path (``GemmConfig.mma_opts`` "a"): operand tiles go from
global to local memory by ``cp.async.cg.shared.global`` (16 bytes a copy, no registers, no
conversion) in a ring of 3 stages ("s": 4), as CUTLASS's sm80 multistage kernels do:

    prologue: stages 0 .. S-2 issued, one commit group each
    for kt in 0 .. steps-1:
        cp.async.wait_group S-2; barrier    (step kt has landed; everyone is done with kt-1)
        issue step kt+S-1 into stage (kt+S-1) % S  (the stage step kt-1 used); commit
        MMAs of stage kt % S

**Layouts.** A tile keeps its operand's contiguous axis (so every copy is a 16-byte chunk): a
k-contiguous operand as rows of the outer axis (``[o][k]``), an outer-contiguous one as rows of
k (``[k][o]``). Chunks are XOR-swizzled within their row so that the fragment reads of a warp
(8 rows x 4 words, or ldmatrix's 8 row addresses) fall in 32 distinct banks without padding
(3 stages of 128x128x16 float32 tiles fill the 48 KiB exactly):

* ``[o][k]`` rows of ``Ck`` chunks: chunk c of row o at ``c ^ ((o / (8 / Ck)) % Ck)`` (8 rows
  of a fragment read fill one 128-byte line each way);
* ``[k][o]`` rows (``o`` a multiple of 8 chunks): tf32 at ``c ^ 2 (k % 4)`` (a fragment reads
  4 k rows by two neighbouring chunks), float16 at ``c ^ (k % 8)`` (ldmatrix reads 8 k rows).

**Fragments.** Words of ``[o][k]`` tiles are the fragments' registers as they are (tf32 values;
float16 k pairs), read with 32-bit local loads; ``[k][o]`` float32 tiles give the tf32 column
fragments the same way; ``[k][o]`` float16 tiles need their k pairs transposed, done by
``ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`` (each x4: one A tile, or two n-tiles of B).

**When.** Only operands that are plain strided reads of one buffer of the MMA's element type
(float32 for tf32/3xtf32, float16 for f16): no prologue arithmetic, no casts, no runtime
offsets, the contiguous axis of stride 1 and every other stride (and the base) a multiple of a
16-byte chunk. Anything else takes the register path of codegen/gemm/mma.py (where the prologue
fuses); ``eligible`` says why. Edge tiles and the K tail copy fewer bytes (cp.async zero-fills
the rest), so no guard is needed in the MMAs; the epilogue is the SIMT kernel's.

The PTX is spelled by macros (FJ_CP_ASYNC, FJ_CP_COMMIT, FJ_CP_WAIT, FJ_LDSM_T) like the MMAs;
``emulated_macros`` spells them as OpenCL C (a plain copy with the zero fill; the ldmatrix
distribution through local memory) so PoCL runs these kernels on CI.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Protocol

from fusejit.ir import dtypes as dt
from fusejit.ir.graph import Node
from fusejit.ir.indexing import Index
from fusejit.ir.ops import Op
from fusejit.codegen.gemm.config import GemmConfig
from fusejit.codegen.gemm.ptx import K_STEP
from fusejit.codegen.lowering import Block, Lowering
from fusejit.passes.plan import reads_of
from fusejit.ir.symbolic import Expr
from fusejit.targets.base import Target


class MmaKernel(Protocol):
    """What the ring (and wgmma.py's on it) reads and calls of the tensor-core kernel it
    loads for: codegen/gemm/mma.py's MmaGen, which builds the ring, so the ring names it by
    this protocol rather than importing it."""

    cfg: GemmConfig
    kind: str  # "tf32" | "3xtf32" | "f16"
    name: str
    low: Lowering
    t: Target
    it: str  # the index type
    top: Block
    pre: list[str]  # kernel-level lines ahead of the body
    head: list[str]  # program-level definitions the kernel needs
    a: Node
    b: Node
    M: int
    N: int
    S: int  # split-K slices
    Kc: int  # the K of one slice
    wm: int  # a warp's rows of the tile
    wn: int  # a warp's columns

    def a_index(self, row: Expr, k: Expr) -> Index: ...

    def b_index(self, k: Expr, col: Expr) -> Index: ...

    def mmas(self, s: Block, ti: int, tj: int, x: str) -> None: ...

    def _fragment(self, block: Block, name: str, first: str) -> None: ...

PTX_MACROS = (
    '#define FJ_CP_ASYNC(dst, src, nb) asm volatile("cp.async.cg.shared.global [%0], [%1], 16, '
    '%2;" :: "r"((uint)(ulong)(dst)), "l"(src), "r"(nb))',
    '#define FJ_CP_COMMIT() asm volatile("cp.async.commit_group;")',
    '#define FJ_CP_WAIT(n) asm volatile("cp.async.wait_group " #n ";" ::: "memory")',
    '#define FJ_LDSM_T(r0, r1, r2, r3, base, off) asm volatile("ldmatrix.sync.aligned.m8n8.x4.'
    'trans.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : '
    '"r"((uint)(ulong)((base) + (off))))',
    '#define FJ_LDSM(r0, r1, r2, r3, base, off) asm volatile("ldmatrix.sync.aligned.m8n8.x4.'
    'shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : '
    '"r"((uint)(ulong)((base) + (off))))',
)


def emulated_macros(threads: int) -> tuple[str, ...]:
    """The macros as OpenCL C: the copy done at once (the barrier after the wait publishes it,
    as on the GPU), ldmatrix.trans from the row offsets the warp's lanes exchange."""
    return (
        f"__local uint fj_lx[{threads}];",
        "#define FJ_CP_ASYNC(dst, src, nb) { __local uchar *fj_d = (__local uchar *)(dst); "
        "__global const uchar *fj_s = (__global const uchar *)(src); const uint fj_n = (nb); "
        "for (int fj_i = 0; fj_i < 16; fj_i++) fj_d[fj_i] = fj_i < fj_n ? fj_s[fj_i] : 0; }",
        "#define FJ_CP_COMMIT()",
        "#define FJ_CP_WAIT(n)",
        # lane (g, t) gets rows 2t and 2t+1, column g, of matrix q (rows: lanes 8q .. 8q+7)
        "#define FJ_LDSM_T(r0, r1, r2, r3, base, off) { fj_lx[tid] = (uint)(off); "
        "barrier(CLK_LOCAL_MEM_FENCE); uint fj_r[4]; "
        "for (int fj_q = 0; fj_q < 4; fj_q++) { const int fj_l = tid - lane + 8 * fj_q + 2 * mt; "
        "fj_r[fj_q] = (uint)(base)[fj_lx[fj_l] + mg] | ((uint)(base)[fj_lx[fj_l + 1] + mg] << 16); } "
        "r0 = fj_r[0]; r1 = fj_r[1]; r2 = fj_r[2]; r3 = fj_r[3]; barrier(CLK_LOCAL_MEM_FENCE); }",
        # not transposed: lane (g, t) gets word t of row g of matrix q
        "#define FJ_LDSM(r0, r1, r2, r3, base, off) { fj_lx[tid] = (uint)(off); "
        "barrier(CLK_LOCAL_MEM_FENCE); uint fj_r[4]; "
        "for (int fj_q = 0; fj_q < 4; fj_q++) fj_r[fj_q] = *(__local const uint *)((base) + "
        "fj_lx[tid - lane + 8 * fj_q + mg] + 2 * mt); "
        "r0 = fj_r[0]; r1 = fj_r[1]; r2 = fj_r[2]; r3 = fj_r[3]; barrier(CLK_LOCAL_MEM_FENCE); }",
    )


def stages(cfg: GemmConfig) -> int:
    return 4 if "s" in cfg.mma_opts else 3  # (codegen/gemm/wgmma.py sets its own)


def local_bytes(cfg: GemmConfig) -> int:
    item = 2 if cfg.mma == "f16" else 4
    return stages(cfg) * cfg.kwg * (cfg.mwg + cfg.nwg) * item


def _item(kind: str) -> int:
    return 2 if kind == "f16" else 4


class Operand:
    """How one operand's chunks are copied: its layout, pointer and affine address."""

    def __init__(self, layout: str, ptr: str, coefs: dict[str, int], const: int) -> None:
        self.layout, self.ptr, self.coefs, self.const = layout, ptr, coefs, const

    def address(self, it: str, o: str, k: str) -> str:
        """Element index of (outer ``o``, k ``k``) in the buffer."""
        parts = [str(self.const)] if self.const else []
        for name, c in sorted(self.coefs.items()):
            if not c:
                continue
            v = o if name == "po_" else k if name == "pk_" else name
            parts.append(f"({it})({v})" if c == 1 else f"({it})({v}) * {c}")
        return " + ".join(parts) or "0"


def _plain(gen: MmaKernel, node: Node, is_a: bool) -> Operand | str:
    """The operand's copy plan, or why it cannot be copied by cp.async."""
    elem = dt.FLOAT16 if gen.kind == "f16" else dt.FLOAT32
    n = node
    while n.op not in (Op.INPUT,) and n not in gen.low.materialized:
        if n.op.name not in ("VIEW", "RESHAPE") or len(n.srcs) != 1:
            return "an operand has a fused prologue (computed, not copied)"
        n = n.srcs[0]
    if n.dtype != elem or node.dtype != elem:
        return f"an operand is not {elem.name} in memory"
    o, k = Expr.var("po_", 1 << 20), Expr.var("pk_", 1 << 20)
    idx = gen.a_index(o, k) if is_a else gen.b_index(k, o)
    reads = reads_of(node, idx, set(gen.low.materialized))
    if len(reads) != 1:
        return "an operand reads more than one buffer"
    leaf, lidx = reads[0]
    ptr, addr, offset, _ = gen.low.address_expr(leaf, lidx)
    coefs = addr.affine()
    if offset is not None or coefs is None or not set(coefs) <= {"po_", "pk_", "bz"}:
        return "an operand's address is not a plain strided one"
    E = 16 // _item(gen.kind)
    layout = "k" if coefs.get("pk_") == 1 else "outer" if coefs.get("po_") == 1 else ""
    other = coefs.get("po_" if layout == "k" else "pk_", 0)
    if not layout or other % E or coefs.get("bz", 0) % E or addr.const % E:
        return (f"an operand's rows are not whole {E}-element chunks (16-byte aligned rows "
                "with a contiguous axis)")
    return Operand(layout, ptr, coefs, addr.const)


def eligible(gen: MmaKernel) -> tuple[Operand, Operand] | str:
    """Both operands' copy plans, or why the register path serves this product."""
    cfg = gen.cfg
    E = 16 // _item(gen.kind)
    if cfg.kwg % E:
        return f"the tile depth {cfg.kwg} is not whole chunks"
    if gen.S > 1 and gen.Kc % E:
        return "split-K slices start off the 16-byte chunks"
    plans = (_plain(gen, gen.a, True), _plain(gen, gen.b, False))
    for p in plans:
        if isinstance(p, str):
            return p
    return plans  # type: ignore[return-value]


def _emit(block: Block, text: str) -> None:
    block.emit(None, text)  # (no operands: printed as it is)


def _swizzle_k(ck: int) -> tuple[int, int]:
    """(rows per swizzle unit, mask) of ``[o][k]`` rows of ``ck`` chunks."""
    if ck < 2 or (8 % ck and ck % 8):
        return 1, 0
    return max(1, 8 // ck), min(ck, 8) - 1


def _outer_swizzled(chunks: int) -> bool:
    return chunks % 8 == 0


class Tiles:
    """Generates the multistage loads and the MMAs of one kernel."""

    def __init__(self, gen: MmaKernel, ops: tuple[Operand, Operand]) -> None:
        self.g, self.ops = gen, ops
        cfg = gen.cfg
        self.S = stages(cfg)
        self.f16 = gen.kind == "f16"
        self.item = _item(gen.kind)
        self.E = 16 // self.item
        self.size = (cfg.mwg * cfg.kwg, cfg.nwg * cfg.kwg)
        self.copied = (True, True)  # which operands (a, b) have ring stages

    # -- loads -------------------------------------------------------------------------------
    def coords(self) -> None:
        """Per work-item constants of each copy round: destination and source row/column."""
        g, cfg, it, E = self.g, self.g.cfg, self.g.it, self.E
        T, KW = cfg.threads, cfg.kwg
        for is_a, op in zip((True, False), self.ops):
            if not self.copied[0 if is_a else 1]:
                continue
            q = "ca" if is_a else "cb"
            OW, O, o0 = (cfg.mwg, g.M, "m0") if is_a else (cfg.nwg, g.N, "n0")
            total = OW * KW // E
            for r in range(math.ceil(total / T)):
                e = f"(tid + {r * T})"
                if op.layout == "k":
                    ck = KW // E
                    o, c, d = self.k_chunk(is_a, e, ck, f"{q}o{r}", f"{q}c{r}")
                    g.pre += [f"const {it} {q}o{r} = {o}, {q}c{r} = {c};",
                              f"const {it} {q}d{r} = {d};",
                              f"const int {q}v{r} = {o0} + {q}o{r} < {O};",
                              f"const {it} {q}r{r} = min(({it})({o0} + {q}o{r}), ({it}){O - 1});"]
                else:
                    co = OW // E
                    sw = ("" if not _outer_swizzled(co) else
                          f" ^ (({q}k{r} & 3) << 1)" if not self.f16 else f" ^ ({q}k{r} & 7)")
                    g.pre += [f"const {it} {q}k{r} = {e} / {co}, {q}c{r} = {e} % {co};",
                              f"const {it} {q}d{r} = {q}k{r} * {OW} + (({q}c{r}{sw}) * {E});",
                              f"const {it} {q}og{r} = {o0} + {q}c{r} * {E};",
                              f"const uint {q}n{r} = {q}og{r} < {O} ? min((uint)({O} - "
                              f"{q}og{r}) * {self.item}u, 16u) : 0u;",
                              f"const {it} {q}r{r} = {q}og{r} < {O} ? {q}og{r} : 0;"]

    def k_chunk(self, is_a: bool, e: str, ck: int, o: str, c: str) -> tuple[str, str, str]:
        """(row, chunk, destination element) of chunk ``e`` of a ``[o][k]`` tile of ``ck``
        chunks a row (``o``, ``c``: the row's and chunk's names in the destination): rows in
        order, chunks swizzled within their row."""
        lr, mask = _swizzle_k(ck)
        KW = self.g.cfg.kwg
        return (f"{e} / {ck}", f"{e} % {ck}",
                f"{o} * {KW} + (({c} ^ (({o} / {lr}) & {mask})) * {self.E})")

    def landed(self, block: Block, pending: int, step: str) -> None:
        """Wait until at most ``pending`` copy groups of this work-item are in flight (step
        ``step``'s have landed), then a barrier: the stage every work-item copied is complete
        and visible."""
        _emit(block, f"FJ_CP_WAIT({pending});")
        _emit(block, self.g.t.barrier_local)

    def loads(self, block: Block, step: str, stage: str) -> None:
        """The copies of step ``step`` (k tile) into ring stage ``stage``."""
        g, cfg, it, E, item = self.g, self.g.cfg, self.g.it, self.E, self.item
        KW = cfg.kwg
        kbase = "kbase + " if g.S > 1 else ""
        kend = f"(kbase + {g.Kc})" if g.S > 1 else str(g.Kc)
        for is_a, op in zip((True, False), self.ops):
            if not self.copied[0 if is_a else 1]:
                continue
            q = "ca" if is_a else "cb"
            local, size = ("Al", self.size[0]) if is_a else ("Bl", self.size[1])
            for r, inner in self.rounds(block, is_a):
                if op.layout == "k":
                    kg = f"{kbase}({step}) * {KW} + {q}c{r} * {E}"
                    nb = (f"{q}v{r} && kq < {kend} ? min((uint)({kend} - kq) * {item}u, 16u) "
                          ": 0u")
                    src = op.address(it, f"{q}r{r}", f"kq < {kend} ? kq : 0")
                else:
                    kg = f"{kbase}({step}) * {KW} + {q}k{r}"
                    nb = f"kq < {kend} ? {q}n{r} : 0u"
                    src = op.address(it, f"{q}r{r}", f"kq < {kend} ? kq : 0")
                _emit(inner, f"{{ const {it} kq = {kg}; FJ_CP_ASYNC({local} + ({stage}) * "
                             f"{size} + {q}d{r}, (__global const uchar *){op.ptr} + ({src}) * "
                             f"{item}, {nb}); }}")

    def rounds(self, block: Block, is_a: bool) -> Iterator[tuple[int, Block]]:
        """Copy rounds of operand a (``is_a``) or b: (round, the block of its copies, guarded
        where the last round has fewer chunks than work-items)."""
        cfg = self.g.cfg
        T = cfg.threads
        total = (cfg.mwg if is_a else cfg.nwg) * cfg.kwg // self.E
        for r in range(math.ceil(total / T)):
            yield r, (block if (r + 1) * T <= total else
                      block.nested(f"if (tid + {r * T} < {total}) {{"))

    unroll = 1  # k steps a loop iteration (a subclass's register sets rotate through them)

    def pipeline(self) -> None:
        """The ring's loop (the module docstring), ``unroll`` steps an iteration; each step
        after ``ahead`` (a hook: nothing here) and its copies computes its stage."""
        g, cfg, it = self.g, self.g.cfg, self.g.it
        S, U = self.S, self.unroll
        lt = "ushort" if self.f16 else "float"
        g.pre += [f"__local {lt} {name}[{S * size}] __attribute__((aligned(16)));"
                  for name, size, copied in zip(("Al", "Bl"), self.size, self.copied) if copied]
        self.coords()
        steps = math.ceil(g.Kc / cfg.kwg)
        top = g.top
        if self.piped():
            self._pipeline_piped(steps)
            return
        for s in range(S - 1):
            if s < steps:
                self.loads(top, str(s), str(s))
            _emit(top, "FJ_CP_COMMIT();")
        self.ahead(top, None, steps)
        step = "kt++" if U == 1 else f"kt += {U}"
        loop = top.nested(f"for ({it} kt = 0; kt < {steps}; {step}) {{",
                          loop_vars=frozenset({"kt"}))
        for x in range(U):
            k = f"kt + {x}" if x else "kt"
            body = loop.nested(f"if ({k} < {steps}) {{") if x else loop
            self.ahead(body, x, steps)
            self.landed(body, S - 2, k)
            nxt = body.nested(f"if ({k} + {S - 1} < {steps}) {{")
            self.loads(nxt, f"{k} + {S - 1}", f"({k} + {S - 1}) % {S}")
            _emit(body, "FJ_CP_COMMIT();")
            self.compute(body, f"({k if not x else f'({k})'} % {S})", x)

    def ahead(self, block: Block, x: int | None, steps: int) -> None:
        """Work issued ahead of step ``kt + x`` (``x`` None: before the loop); nothing in the
        ring itself."""

    def _pipeline_piped(self, steps: int) -> None:
        """"p": all S stages in flight at first; a stage is refilled as soon as its last
        step's fragments are in registers (the barrier before the refill also publishes the
        next stage), and the next stage's first fragments load before this stage's last
        MMAs, so no MMA waits on a local load:

            for kt: for each k step s of stage kt % S:
                if s is not the last: fragments of s + 1 (other register set)
                else: wait_group S-2; barrier; refill stage kt % S with step kt + S;
                      fragments of step 0 of stage (kt + 1) % S
                MMAs of s
        """
        g, it, S = self.g, self.g.it, self.S
        ti, tj = g.wm // 16, g.wn // 8
        top = g.top
        for s in range(S):
            if s < steps:
                self.loads(top, str(s), str(s))
            _emit(top, "FJ_CP_COMMIT();")
        self.declare(top, "_0")
        self.declare(top, "_1")
        _emit(top, f"FJ_CP_WAIT({S - 1});")
        _emit(top, g.t.barrier_local)
        ks = self.steps()
        self.frags(top, "0", ks[0], "_0")
        loop = top.nested(f"for ({it} kt = 0; kt < {steps}; kt++) {{",
                          loop_vars=frozenset({"kt"}))
        for n, kk in enumerate(ks):
            x, nx = f"_{n % 2}", f"_{(n + 1) % 2}"
            if n + 1 < len(ks):
                self.frags(loop, f"kt % {S}", ks[n + 1], nx)
            else:
                _emit(loop, f"FJ_CP_WAIT({S - 2});")
                _emit(loop, g.t.barrier_local)
                nxt = loop.nested(f"if (kt + {S} < {steps}) {{")
                self.loads(nxt, f"kt + {S}", f"kt % {S}")
                _emit(loop, "FJ_CP_COMMIT();")
                self.frags(loop, f"(kt + 1) % {S}", ks[0], nx)
            g.mmas(loop.nested("{"), ti, tj, x)

    # -- fragments and MMAs ------------------------------------------------------------------
    def _word(self, is_a: bool, off: int, kw: int) -> str:
        """Word index (in the stage) of this lane's fragment register: outer offset ``off``
        from its warp's first row/column plus the lane's row (mg), k word ``kw`` plus the
        lane's (mt); for tf32/3xtf32 ``[k][o]`` tiles the column fragment's (k = kw + mt,
        outer = off + mg)."""
        g, cfg = self.g, self.g.cfg
        op = self.ops[0 if is_a else 1]
        W, w = (g.wm, "wm") if is_a else (g.wn, "wn")
        if op.layout == "k":
            rw = cfg.kwg * self.item // 4  # words a row
            lr, mask = _swizzle_k(rw // 4)
            c = kw // 4
            return (f"({w} * {W} + mg + {off}) * {rw} + ((({c} ^ ((mg / {lr}) & {mask})) << 2) + "
                    f"mt)")
        OW = cfg.mwg if is_a else cfg.nwg  # (tf32 only: float16 [k][o] tiles use ldmatrix)
        row = f"({kw} + mt) * {OW}"
        xt = "(mt << 1)" if _outer_swizzled(OW // 4) else "0"
        if W % 32 == 0:  # the warp's columns start on a swizzle unit: fold its offset
            return (f"{row} + {w} * {W} + (((({off >> 2}) ^ {xt}) | (mg >> 2)) << 2) + "
                    f"(mg & 3)")
        return f"{row} + (((((({w} * {W} + {off}) >> 2) ^ {xt}) | (mg >> 2)) << 2) + (mg & 3))"

    def _ldsm(self, is_a: bool, off: int, kk: int, pair: bool = True) -> str:
        """Half offset of this lane's ldmatrix row address in a float16 ``[k][o]`` stage: lanes
        8q..8q+7 address rows kk..kk+7 (+8 for the upper k half) of matrix q; A: matrices
        (k lo, m lo), (k lo, m hi), (k hi, m lo), (k hi, m hi); B: (k lo, n), (k hi, n),
        (k lo, n + 8), (k hi, n + 8)."""
        g, cfg = self.g, self.g.cfg
        W, w = (g.wm, "wm") if is_a else (g.wn, "wn")
        OW = cfg.mwg if is_a else cfg.nwg
        if is_a:
            krow, ochunk = "((lane & 7) + ((lane >> 4) << 3))", "((lane >> 3) & 1)"
        else:
            krow = "((lane & 7) + (((lane >> 3) & 1) << 3))"
            ochunk = "(lane >> 4)" if pair else "0"  # (no pair: matrices 2, 3 repeat 0, 1)
        sw = "(lane & 7)" if _outer_swizzled(OW // 8) else "0"
        chunk = f"(({w} * {W} + {off}) >> 3) + {ochunk}"
        return f"({kk} + {krow}) * {OW} + ((({chunk}) ^ {sw}) << 3)"

    def _ldsm_k(self, is_a: bool, off: int, kw: int, pair: bool = True) -> str:
        """Half offset of this lane's ldmatrix (not transposed) row address in an ``[o][k]``
        stage: A: matrices (rows lo, k chunk c), (rows hi, c), (rows lo, c + 1), (rows hi,
        c + 1) = a0..a3; B: (n, c), (n, c + 1), (n + 8, c), (n + 8, c + 1) = b0, b1 of two
        n-tiles. ``kw``: the step's first k word (chunk c = kw / 4)."""
        g, cfg = self.g, self.g.cfg
        W, w = (g.wm, "wm") if is_a else (g.wn, "wn")
        rw = cfg.kwg * self.item // 4
        lr, mask = _swizzle_k(rw // 4)
        if is_a:
            row, chunk = "((lane & 7) + (((lane >> 3) & 1) << 3))", "(lane >> 4)"
        else:
            row = "((lane & 7) + ((lane >> 4) << 3))" if pair else "(lane & 7)"
            chunk = "((lane >> 3) & 1)"
        c = kw // 4
        return (f"(({w} * {W} + {off} + {row}) * {rw} + ((({c} + {chunk}) ^ (((lane & 7) / "
                f"{lr}) & {mask})) << 2)) * 2")

    def _base(self, is_a: bool, stage: str, ctype: str) -> str:
        local, size = ("Al", self.size[0]) if is_a else ("Bl", self.size[1])
        return f"((__local const {ctype} *)({local} + ({stage}) * {size}))"

    def frags(self, s: Block, stage: str, kk: int, x: str) -> None:
        """One k step's fragment registers (suffix ``x``) from ring stage ``stage``."""
        g, cfg = self.g, self.g.cfg
        ti, tj = g.wm // 16, g.wn // 8
        la, lb = (op.layout for op in self.ops)
        ldk = "l" in cfg.mma_opts
        kw = kk // 2 if self.f16 else kk  # k word of the step's first register
        wt = "uint" if self.f16 else "float"

        def ldsm(trans: bool, regs: list[str], is_a: bool, off: str) -> None:
            base = self._base(is_a, stage, "ushort")
            if self.f16:
                _emit(s, f"FJ_LDSM{'_T' if trans else ''}({', '.join(regs)}, {base}, {off});")
                return
            tmp = [f"{r.format(p='x')}" for r in regs]  # (tf32: words to round or split)
            _emit(s, f"{{ uint {', '.join(tmp)}; FJ_LDSM({', '.join(tmp)}, {base}, {off}); " +
                  " ".join(self._tf32(r, f"as_float({t})") for r, t in zip(regs, tmp)) + " }")

        for i in range(ti):
            regs = [f"a{{p}}{i}_{r}{x}" for r in range(4)]
            if self.f16 and la == "outer":
                ldsm(True, [r.format(p="h") for r in regs], True, self._ldsm(True, 16 * i, kk))
            elif ldk and la == "k":
                ldsm(False, regs if not self.f16 else [r.format(p="h") for r in regs], True,
                     self._ldsm_k(True, 16 * i, kw))
            else:
                for r, (dk, row) in enumerate(((0, 0), (0, 8), (4, 0), (4, 8))):
                    g._fragment(s, regs[r], f"{self._base(True, stage, wt)}"
                                            f"[{self._word(True, 16 * i + row, kw + dk)}]")
        paired = (self.f16 and lb == "outer") or (ldk and lb == "k")
        for j in range(0, tj, 2 if paired else 1):
            regs = [f"b{{p}}{j}_0{x}", f"b{{p}}{j}_1{x}", f"b{{p}}{j + 1}_0{x}",
                    f"b{{p}}{j + 1}_1{x}"]
            if self.f16 and lb == "outer":  # (an odd last tile: its pair is unused)
                ldsm(True, [r.format(p="h") for r in regs], False,
                     self._ldsm(False, 8 * j, kk, j + 1 < tj))
            elif paired:
                ldsm(False, regs if not self.f16 else [r.format(p="h") for r in regs], False,
                     self._ldsm_k(False, 8 * j, kw, j + 1 < tj))
            else:
                for r, dk in enumerate((0, 4)):
                    g._fragment(s, regs[r], f"{self._base(False, stage, wt)}"
                                            f"[{self._word(False, 8 * j, kw + dk)}]")

    def _tf32(self, name: str, value: str) -> str:
        """Statements rounding ``value`` into fragment register ``name`` (3xTF32: both parts)."""
        if self.g.kind == "tf32":
            return f"FJ_TF32({name.format(p='h')}, {value});"
        big, small = name.format(p="h"), name.format(p="l")
        return (f"{{ const float x_ = {value}; FJ_TF32({big}, x_); "
                f"FJ_TF32({small}, x_ - as_float({big})); }}")

    def declare(self, block: Block, x: str) -> None:
        g = self.g
        ti, tj = g.wm // 16, g.wn // 8
        for p in (("h", "l") if g.kind == "3xtf32" else ("h",)):
            _emit(block, "uint " + ", ".join(f"a{p}{i}_{r}{x}" for i in range(ti)
                                             for r in range(4)) + ";")
            _emit(block, "uint " + ", ".join(f"b{p}{j}_{r}{x}" for j in range(tj + tj % 2)
                                             for r in range(2)) + ";")

    def steps(self) -> list[int]:
        return list(range(0, self.g.cfg.kwg, K_STEP[self.g.kind]))

    def piped(self) -> bool:
        """"p": the next step's fragments load before this step's MMAs, across stages too
        (needs an even number of k steps a stage: the register set alternates)."""
        return "p" in self.g.cfg.mma_opts and len(self.steps()) % 2 == 0

    def compute(self, block: Block, stage: str, x: int = 0) -> None:
        g = self.g
        ti, tj = g.wm // 16, g.wn // 8
        body = block.nested("{")
        for kk in self.steps():
            s = body.nested("{")
            self.declare(s, "")
            self.frags(s, stage, kk, "")
            g.mmas(s, ti, tj, "")


__all__ = ["MmaKernel", "PTX_MACROS", "Tiles", "eligible", "emulated_macros", "local_bytes",
           "stages"]
