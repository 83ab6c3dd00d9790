"""Hopper's warpgroup MMA (``wgmma.mma_async``, sm_90a) for the tensor-core GEMM: ``GemmConfig.
mma_opts`` "g", on the cp.async ring of codegen/gemm/mma_async.py, for tf32, 3xTF32 and float16.

**Getting sm_90a from OpenCL.** NVIDIA's OpenCL compiler targets sm_90 on an H100/H200 and
ptxas refuses wgmma there. The kernel therefore writes each wgmma statement as a PTX comment
behind ``ptx.SM90A_MARK``; runtime/opencl/build.py compiles the source (the comments' operands
are bound as any asm's), takes the PTX the driver returns as the program binary, restores the
statements, raises ``.target`` to sm_90a and builds that PTX as a binary (probed on an H200:
benchmarks/wgmma_probe.py; the probe at device setup checks one wgmma of each kind).

**The kernel.** A work-group is GR warpgroups (128 work-items each). One operand, Q, is read
by the tensor cores from local memory through a matrix descriptor; the other, R, is loaded into
registers as fragments (wgmma's "A from registers" form). tf32 wgmma reads local memory only in
k-major layouts, so Q is the k-contiguous operand: ``b`` when it is (``a @ b.T``, the dense
layer's ``x @ W.T``), else ``a`` (``a @ b``: the kernel computes the tile of ``(b.T @ a.T)``,
so the accumulators hold C transposed and ``row_of``/``col_of`` say so). A product with
neither operand k-contiguous takes the mma.sync ring instead (explain() says why).

* Q's ring stages use wgmma's unswizzled k-major layout: core matrices of 8 rows x 16 bytes
  (8 rows of one 16-byte chunk), the chunks of a row 128 bytes apart (the descriptor's leading
  offset), 8-row groups ``128 * chunks`` apart (its stride offset). Copy ``e`` of a stage is
  chunk ``e`` of that layout, so eight work-items write one whole 128-byte core matrix.
* R keeps the ring's swizzled layouts; its fragments are the mma.sync ones (warp ``w`` of the
  work-group holds rows ``16 w .. 16 w + 15`` of each 64-row block, blocks ``64 GR`` apart),
  read by the ring's own address functions (``_word``, ``_ldsm``).
* Per stage: every k step's fragments, ``wgmma.fence``, one wgmma per 64-row block and k step
  (m64nQk8 tf32, m64nQk16 float16; Q up to 256), ``wgmma.commit_group`` and at once
  ``wgmma.wait_group 0``, before the barrier that lets the ring refill the stage. The ring's
  copies are generic-proxy writes, so each work-item fences them to the async proxy
  (``fence.proxy.async``) before the barrier.
* "r": R has no ring stages; each work-item loads its fragments from global memory into one
  of three register sets, two k steps ahead (the loop unrolled by three), and only Q's tiles
  fill the 48 KiB: up to 8 stages, so more of the copies are in flight.

**Measured** (H200, 4096^3 + bias + ReLU, ``a @ b`` so Q = a, the tiles timed side by side):
tf32 0.949 ms on 192 x 256 "r" tiles over 3 warpgroups (1.104 on 256 x 128 from local memory,
the mma.sync ring 1.13-1.14); float16 0.510 on 256 x 128 (mma.sync 0.517; "r" 0.98: an
outer-contiguous R takes 16-bit loads and packing). So the kernels are bound by feeding the
tiles, not by the MMAs: 256 x 128 float16 tiles run about 1000 cycles a 16-deep stage, 4x the
tensor cores' time, moving 3-4 TB/s from L2 whatever the instruction. Larger tiles need more
than 48 KiB, and sharing tiles between work-groups needs clusters, which NVIDIA's OpenCL does
not launch (benchmarks/cluster_probe.py: a PTX ``.reqnctapercluster 2`` runs unclustered).
No attribute raises the 48 KiB (benchmarks/local_memory_probe.py: ``clSetKernelAttributeNV``
sets the carveout only), and kernels launched through the CUDA driver on memory shared with
OpenCL, which have 227 KiB and clusters, pay ~270 us a round trip between the two contexts,
half the float16 product's time (benchmarks/cuda_interop_probe.py).
Nor do more work-groups a multiprocessor help: 128 x 128 tiles at 2 a multiprocessor (tf32
"agr" 114 registers, float16 "ag" 104) take 1.17 and 0.595 ms.

**Not kept: retiring a stage's wgmmas one stage later** (``wait_group 1``, fragments in two
register sets): tf32 1.10 -> 0.985-1.02 ms, float16 0.510 -> 0.489-0.503, but it gave wrong
products whenever ptxas ran out of registers (a 1-warpgroup 128 x 128 float16 kernel at 255
registers, a 2-warpgroup one capped at 128 with spills; every kernel below the cap was
right, over several runs). An in-flight wgmma's registers are invisible to ptxas's
allocation: a value it moves or spills between the issue and the wait is read too early.
With the wait right after the commit nothing runs in that window.

**Not kept: the ring on mbarriers** (a full and an empty mbarrier a stage instead of the
work-group barrier a step: each work-item publishes its copies of step k + 1, waits until
all have published step k, computes it and arrives on its empty barrier, and refills step
k - 1's stage once all have arrived there, so warpgroups may drift a step apart): right on
the H200 but slower everywhere, tf32 192 x 256 "agr" 0.948 -> 1.064 ms, float16 256 x 128
"ag" 0.515 -> 0.594, 3xTF32 256 x 128 "agr" 1.99 -> 2.18. So the warpgroups' lock-step is
not what bounds these kernels.

**Rounding.** R's tf32 fragments are rounded to nearest (``cvt.rna``) as in the mma.sync
kernel; the tensor cores read Q's float32 values from local memory and use their top 19 bits
(rounding toward zero). So a tf32 product's operands err by up to 2**-11 (R) and under 2**-10
(Q); tests/codegen/test_gemm_mma.py's bound covers both. float16 products are exact either way.

**3xTF32.** R's fragments are split in registers (big = tf32(x), small = tf32(x - big)), as
the mma.sync kernel splits both operands. Q's must be in local memory: once a stage lands,
each work-item splits the chunks it copied itself (its own copies are complete after its
wait, so no barrier comes first), big in place and small into ``Qs[step % 2]``: two buffers,
as a warpgroup still computing the previous step reads the other. Per 8-deep k step, three
wgmmas (small x big, big x small, big x big) sum into partial sums from zero (the first one's
scale-d off), added to the accumulators in float32 after the wait, as the mma.sync kernel
does (the tensor cores' sums round toward zero: carrying the whole sum, that bias grows with
K). The partials are 64 registers a work-item ("h": 32), so a wide Q runs in chunks of
columns, a commit and wait each (``chunk``). The sums are the mma.sync kernel's, and so are
the errors: on an H200, 256 x 8192 x 256 in one K pass, max 4.80e-4 and RMS 5.23e-5 for both
kernels (the float64 reference's; K = 1024: 6.07e-5, 7.15e-6). Measured (4096^3 + bias +
ReLU, ms; the mma.sync ring 2.63, 2.86 for ``a @ b.T``): 256 x 128 "agr" (2 blocks a
warpgroup, 255 registers) 1.99, ``a @ b.T`` 2.27 (spilling 24 bytes); "agrh" 2.10, 2.12;
128 x 256 "agr" 2.24, 2.26, "agrh" 2.12; 256 x 128 "ag" 2.39, 2.49; 192 x 128 "agr" over 3
warpgroups 2.63 (168 registers, the cap for 384 work-items); 192 x 256 6.29 (spills). So
3xTF32 gains 24%, still far from its goal of 1.4 ms: at about 2000 cycles a stage for 770 of
tensor-core work, the split, the barrier and the waits are not hidden behind MMAs (one
work-group a multiprocessor).

``emulated()`` spells the wgmma as OpenCL C over the same layouts (the R fragments exchanged
through local memory, Q read through the descriptor's layout, truncated to tf32 as the hardware
does), so PoCL runs these kernels on CI.
"""

from __future__ import annotations

from dataclasses import replace

from fusejit.codegen.gemm.config import GemmConfig
from fusejit.codegen.gemm.mma_async import MmaKernel, Operand, Tiles, _emit
from fusejit.codegen.gemm.ptx import _emulate, wgmma_asm, wgmma_emulated, wgmma_macros
from fusejit.codegen.lowering import Block

LOCAL = 48 * 1024  # NVIDIA's OpenCL local memory a work-group (no opt-in to more)
MAX_STAGES = 8


def _item(kind: str) -> int:
    return 2 if kind == "f16" else 4


def extents(cfg: GemmConfig) -> tuple[int, int]:
    """(R, Q) of a configuration, as configured or ``oriented`` (whose Q = a tiles are
    Q x R, told by their accumulator grid: 4 rows of work-items)."""
    if cfg.mdimc == 4 and cfg.ndimc != 4:
        return cfg.nwg, cfg.mwg
    return cfg.mwg, cfg.nwg


def small_bytes(cfg: GemmConfig) -> int:
    """3xTF32: local memory of Q's small parts, two buffers of one Q tile (module docstring)."""
    return 2 * cfg.kwg * extents(cfg)[1] * 4 if cfg.mma == "3xtf32" else 0


def stage_bytes(cfg: GemmConfig) -> int:
    """Local memory of one ring stage ("r": Q's tile alone)."""
    r, q = extents(cfg)
    rows = q if "r" in cfg.mma_opts else r + q
    return cfg.kwg * rows * _item(cfg.mma)


def stages(cfg: GemmConfig) -> int:
    """Ring stages of an R x Q configuration: as many as 48 KiB holds beside the small parts
    (at most 8)."""
    return max(1, min(MAX_STAGES, (LOCAL - small_bytes(cfg)) // stage_bytes(cfg)))


def local_bytes(cfg: GemmConfig) -> int:
    return stages(cfg) * stage_bytes(cfg) + small_bytes(cfg)


PARTIALS = 64  # 3xTF32: partial-sum registers a work-item holds beside its accumulators


def partials(cfg: GemmConfig) -> int:
    """3xTF32: a work-item's partial-sum registers at most ("h": half of ``PARTIALS``)."""
    return PARTIALS // 2 if "h" in cfg.mma_opts else PARTIALS


def chunk(cfg: GemmConfig) -> int:
    """wgmma's N: Q, or for 3xTF32 Q in equal parts of whole 8-column groups, halved until a
    work-item's partial sums (N/2 for each of its 64-row blocks) fit ``partials``."""
    r, n = extents(cfg)
    blocks = r // (64 * groups(cfg))
    while cfg.mma == "3xtf32" and blocks * n // 2 > partials(cfg) and n % 16 == 0:
        n //= 2
    return n


def groups(cfg: GemmConfig) -> int:
    """Warpgroups of a work-group."""
    return cfg.threads // 128


def valid(cfg: GemmConfig) -> bool:
    """A wgmma configuration, ``config(kind, R, Q, KWG, 4 GR, 1, "ag")``: tf32 or float16;
    GR warpgroups; R (MWG: the register operand's extent) whole 64-row blocks of every
    warpgroup; Q (NWG: the local-memory operand's, wgmma's N) a multiple of 8 up to 256; at
    least 3 stages. ``oriented`` turns it into the kernel's C tile."""
    if cfg.mma not in ("tf32", "3xtf32", "f16") or "a" not in cfg.mma_opts:
        return False
    if cfg.ndimc != 4 or cfg.mdimc % 32 or cfg.threads % 128:
        return False
    if cfg.kwg % (16 if cfg.mma == "f16" else 8):
        return False
    gr = groups(cfg)
    if cfg.mwg % (64 * gr) or cfg.nwg % 8 or cfg.nwg > 256 or stages(cfg) < 3:
        return False
    if cfg.mma != "3xtf32":
        return "h" not in cfg.mma_opts
    return cfg.mwg // (64 * gr) * chunk(cfg) // 2 <= partials(cfg)


def q_operand(ops: tuple[Operand, Operand]) -> int | None:
    """Which operand the tensor cores read from local memory (0: a, 1: b), or None when
    neither is k-contiguous."""
    return 1 if ops[1].layout == "k" else 0 if ops[0].layout == "k" else None


def oriented(cfg: GemmConfig, q: int) -> GemmConfig:
    """The kernel's configuration of an R x Q one: its C tile and accumulator grid (per
    work-item, 2 rows of each 64-row block of R by Q/4 columns: ``row_of``/``col_of``).
    Q = b: R rows are C rows, as configured; Q = a: the tile is Q x R and R's rows are C's
    columns (vw 1: a work-item's neighbouring accumulators are not neighbouring columns)."""
    gr = groups(cfg)
    if q == 1:
        return cfg
    return replace(cfg, mwg=cfg.nwg, nwg=cfg.mwg, mdimc=4, ndimc=32 * gr, vw=1)


def describe(cfg: GemmConfig) -> str:
    n = chunk(cfg)
    inst = {"tf32": "k8 tf32", "f16": "k16 f16, float32 accumulators",
            "3xtf32": f"k8 tf32, three products a step (3xTF32) into partial sums, {n} "
                      "columns at a time"}[cfg.mma]
    r, q = extents(cfg)
    return (f"tensor cores (wgmma m64n{n}{inst}: the k-contiguous operand's {q} rows read "
            f"from local memory, the other's {r} from registers): tile "
            f"{cfg.mwg}x{cfg.nwg}x{cfg.kwg}, {groups(cfg)} warpgroup(s), cp.async ring of "
            f"{stages(cfg)} stages, launch grouped by {cfg.group_m} tile rows" +
            ("; the register operand's fragments loaded from global memory, two k steps "
             "ahead" if "r" in cfg.mma_opts else "") +
            (f", K split over {cfg.split} work-groups per tile" if cfg.split > 1 else ""))


def _fence(block: Block, names: list[str]) -> None:
    """Empty asm statements that read and write ``names`` (the accumulators, after the last
    wait): the compiler moves nothing the tensor cores wrote across them."""
    for n in range(0, len(names), 16):
        ops = ", ".join(f'"+f"({x})' for x in names[n:n + 16])
        _emit(block, f'asm volatile("" : {ops});')


class WgTiles(Tiles):
    """The ring with wgmma compute (module docstring). ``q``: the operand read from local
    memory (0: a, 1: b); the generator's configuration is already ``oriented``."""

    def __init__(self, gen: MmaKernel, ops: tuple[Operand, Operand], q: int) -> None:
        super().__init__(gen, ops)
        self.q = q
        self.gr = groups(gen.cfg)
        cfg = gen.cfg
        self.rw, self.qw = extents(cfg)  # R's extent (wgmma's M), Q's (wgmma's N)
        self.blocks = self.rw // (64 * self.gr)
        self.ck = cfg.kwg // self.E  # chunks a row of Q's stage
        self.split = cfg.mma == "3xtf32"
        self.n = chunk(cfg)  # wgmma's N (3xTF32: the partial sums' columns)
        self.parts = ("h", "l") if self.split else ("h",)  # fragment parts: big, small
        self.r_global = "r" in cfg.mma_opts
        if self.r_global:  # (R has no local tiles: its fragments come from global memory)
            self.copied = (q == 0, q == 1)
            self.unroll = self.SETS
        self.S = stages(cfg)

    # -- accumulators ------------------------------------------------------------------------
    def _r_row(self, x: int) -> str:
        """R's row of this work-item's accumulator index ``x`` (2 per 64-row block)."""
        return f"{64 * self.gr * (x // 2) + 8 * (x % 2)} + warp * 16 + mg"

    def _q_col(self, x: int) -> str:
        return f"{8 * (x // 2) + x % 2} + mt * 2"

    def row_of(self, i: int) -> str:
        return f"m0 + {self._q_col(i) if self.q == 0 else self._r_row(i)}"

    def col_of(self, j: int) -> str:
        return f"n0 + {self._r_row(j) if self.q == 0 else self._q_col(j)}"

    def _acc(self, block: int, reg: int) -> str:
        """The accumulator of wgmma register ``reg`` (of n/2) of 64-row block ``block``:
        (R row g + 8 (reg % 4 >= 2), Q column 8 (reg / 4) + 2 t + reg % 2)."""
        r = 2 * block + (reg % 4) // 2
        c = 2 * (reg // 4) + reg % 2
        return f"acc{c}_{r}" if self.q == 0 else f"acc{r}_{c}"

    # -- Q's layout ----------------------------------------------------------------------------
    def k_chunk(self, is_a: bool, e: str, ck: int, o: str, c: str) -> tuple[str, str, str]:
        if is_a != (self.q == 0):
            return super().k_chunk(is_a, e, ck, o, c)
        # chunk e of the core-matrix layout: 8-row group e / (8 ck), chunk (e / 8) % ck,
        # row e % 8 of the group
        return (f"({e} / {8 * ck}) * 8 + {e} % 8", f"({e} / 8) % {ck}", f"{e} * {self.E}")

    def landed(self, block: Block, pending: int, step: str) -> None:
        _emit(block, f"FJ_CP_WAIT({pending});")
        if self.split:
            self._split_q(block, step)
        _emit(block, "FJ_PROXY_FENCE();")
        _emit(block, self.g.t.barrier_local)

    def _split_q(self, block: Block, step: str) -> None:
        """3xTF32: Q's values of step ``step`` as big and small tf32 parts, big = tf32(x) in
        place, small = tf32(x - big) at the same place of ``Qs[step % 2]``. Each work-item
        splits the chunks it copied (its own copies have landed once it waited), so no
        barrier comes before; two small buffers, as another warpgroup may still read step - 1's
        when this one writes (step - 2's readers all passed the barrier of step - 1)."""
        is_a = self.q == 0
        c, size = ("ca" if is_a else "cb"), self.size[self.q]
        for r, guarded in self.rounds(block, is_a):
            inner = guarded.nested("{")
            _emit(inner, f"__local float4 *fj_q = (__local float4 *)({self._q_local()} + "
                         f"(({step}) % {self.S}) * {size} + {c}d{r});")
            _emit(inner, f"__local float4 *fj_s = (__local float4 *)(Qs + (({step}) & 1) * "
                         f"{size} + {c}d{r});")
            _emit(inner, "const float4 v_ = *fj_q; float4 h_, l_;")
            for e in "xyzw":
                _emit(inner, f"{{ uint qh, ql; {self._tf32('q{p}', f'v_.{e}')} "
                             f"h_.{e} = as_float(qh); l_.{e} = as_float(ql); }}")
            _emit(inner, "*fj_q = h_; *fj_s = l_;")

    def pipeline(self) -> None:
        g, cfg = self.g, self.g.cfg
        emulate = _emulate.value
        if emulate:
            head, lines = wgmma_emulated(cfg.mma, cfg.threads, self.ck, g.name)
            g.head += head
            g.pre += lines
        else:
            g.pre += list(wgmma_macros())
        if self.split:  # (Q's small parts; the partial sums, kept through the loop)
            g.pre.append(f"__local float Qs[{2 * self.size[self.q]}] "
                         "__attribute__((aligned(16)));")
            g.pre += [f"float {' = 0.0f, '.join(self._partials(b))} = 0.0f;"
                      for b in range(self.blocks)]
        super().pipeline()
        if not emulate:  # (after the ring's declarations)
            g.pre += self.descriptor()
            # the accumulators are the tensor cores' until the last wait: operand fences
            names = [self._acc(b, r) for b in range(self.blocks) for r in range(self.qw // 2)]
            _fence(g.top, names)

    # -- "r": R's fragments straight from global memory ----------------------------------------
    SETS = 3  # register sets of R's fragments: loads run two k steps ahead

    def ahead(self, block: Block, x: int | None, steps: int) -> None:
        """"r": only Q has ring stages (so more of them fit: deeper copies in flight); each
        work-item loads its R fragments from global memory into one of three register sets,
        two steps ahead of their wgmmas (the ring's loop unrolled by three):

            before the loop: load R of steps 0 and 1 (sets 0, 1)
            step kt: load R of step kt + 2 (set (kt + 2) % 3); the ring's step, whose
                     fragments come from set kt % 3 (tf32 rounded, halves paired)
        """
        if not self.r_global:
            return
        P = self.SETS
        if x is None:
            self._r_coords()
            for s in range(P):
                _emit(block, f"{self._raw_type()} " +
                      ", ".join(f"{r} = 0" for r in self._raws(s)) + ";")
            for s in range(min(P - 1, steps)):
                self._r_loads(block, str(s), s)
            return
        k = f"kt + {x}" if x else "kt"
        self._r_loads(block.nested(f"if ({k} + {P - 1} < {steps}) {{"), f"{k} + {P - 1}",
                      (x + P - 1) % P)

    def _r_op(self) -> tuple[bool, Operand]:
        is_a = self.q == 1  # R is a when Q is b
        return is_a, self.ops[0 if is_a else 1]

    def _parts(self) -> int:
        """Loads a fragment register takes: 2 for float16 pairs not contiguous in memory
        (outer-contiguous R, or K odd: a pair may straddle K), else 1."""
        _, op = self._r_op()
        return 2 if self.f16 and (op.layout == "outer" or self.g.Kc % 2 or self.g.S > 1) else 1

    def _raw_type(self) -> str:
        return "float" if not self.f16 else "uint" if self._parts() == 1 else "ushort"

    def _raws(self, x: int) -> list[str]:
        """Set ``x``'s loaded values: ``rv<kk>_<block>_<reg>_<part>_<x>``."""
        return [f"rv{kk}_{b}_{r}_{h}_{x}" for kk in self.steps() for b in range(self.blocks)
                for r in range(4) for h in range(self._parts())]

    def _r_coords(self) -> None:
        """Per work-item: R's rows (clamped, and whether inside) of each block's two rows."""
        g, it = self.g, self.g.it
        is_a, _ = self._r_op()
        o0, O = ("m0", g.M) if is_a else ("n0", g.N)
        for b in range(self.blocks):
            for h in (0, 8):
                row = f"{o0} + {64 * self.gr * b + h} + warp * 16 + mg"
                g.pre += [f"const int rq{b}_{h} = {row} < {O};",
                          f"const {it} rr{b}_{h} = min(({it})({row}), ({it}){O - 1});"]

    def _r_loads(self, block: Block, step: str, x: int) -> None:
        """Set ``x``'s loads of k step ``step``: register r of block b holds (row g + 8 (r %
        2), k t + 4 (r / 2)) for tf32, (row g + 8 (r % 2), k 2t, 2t + 1 (+ 8 for r / 2))
        for float16 (mma.sync's A layout); zero outside R and past K."""
        g, cfg, it = self.g, self.g.cfg, self.g.it
        _, op = self._r_op()
        kbase = "kbase + " if g.S > 1 else ""
        kend = f"(kbase + {g.Kc})" if g.S > 1 else str(g.Kc)
        parts = self._parts()
        ptr = f"((__global const {self._raw_type()} *){op.ptr})" if parts == 2 or \
            not self.f16 else f"((__global const ushort *){op.ptr})"
        inner = block.nested("{")
        for kk in self.steps():
            for b in range(self.blocks):
                for r in range(4):
                    h = 8 * (r % 2)
                    for part in range(parts):
                        if self.f16:
                            dk = f"{8 * (r // 2)} + 2 * mt + {part}"
                        else:
                            dk = f"{4 * (r // 2)} + mt"
                        name = f"rv{kk}_{b}_{r}_{part}_{x}"
                        kq = f"{kbase}({step}) * {cfg.kwg} + {kk} + {dk}"
                        _emit(inner, f"{{ const {it} kq = {kq}; const {it} e = "
                                     f"{op.address(it, f'rr{b}_{h}', f'kq < {kend} ? kq : 0')};")
                        if self.f16 and parts == 1:  # (an aligned pair: one 32-bit load)
                            load = f"*(__global const uint *)({ptr} + e)"
                        else:
                            load = f"{ptr}[e]"
                        _emit(inner, f"  {name} = rq{b}_{h} && kq < {kend} ? {load} : 0; }}")

    def _r_frags(self, s: Block, x: int) -> None:
        """Fragment registers ``wr<part><kk>_<b>_<r>`` from set ``x``'s loaded values."""
        for kk in self.steps():
            for b in range(self.blocks):
                for r in range(4):
                    name = f"wrh{kk}_{b}_{r}"
                    raw = [f"rv{kk}_{b}_{r}_{h}_{x}" for h in range(self._parts())]
                    if not self.f16:
                        tmpl = f"wr{{p}}{kk}_{b}_{r}"
                        _emit(s, f"uint {', '.join(tmpl.format(p=p) for p in self.parts)}; " +
                              self._tf32(tmpl, raw[0]))
                    elif len(raw) == 1:
                        _emit(s, f"const uint {name} = {raw[0]};")
                    else:
                        _emit(s, f"const uint {name} = (uint){raw[0]} | ((uint){raw[1]} << 16);")

    # -- compute -------------------------------------------------------------------------------
    def _q_local(self) -> str:
        return "Al" if self.q == 0 else "Bl"

    def _stage_frags(self, s: Block, stage: str, kk: int) -> None:
        """This k step's R fragments from R's ring stage: ``wr<part><kk>_<block>_<0..3>``
        (mma.sync's A layout; part h, and for 3xTF32 l: big and small)."""
        g = self.g
        is_a, op = self._r_op()
        kw = kk // 2 if self.f16 else kk
        wt = "uint" if self.f16 else "float"
        for b in range(self.blocks):
            off = 64 * self.gr * b
            tmpl = [f"wr{{p}}{kk}_{b}_{r}" for r in range(4)]
            regs = [t.format(p="h") for t in tmpl]
            _emit(s, "uint " + ", ".join(t.format(p=p) for p in self.parts for t in tmpl) + ";")
            if self.f16 and op.layout == "outer":  # (k pairs transposed by ldmatrix)
                base = self._base(is_a, stage, "ushort")
                # (b's x4: matrices (rows lo, k lo), (k hi), (rows hi, k lo), (k hi))
                order = regs if is_a else [regs[0], regs[2], regs[1], regs[3]]
                _emit(s, f"FJ_LDSM_T({', '.join(order)}, {base}, "
                         f"{self._ldsm(is_a, off, kk, True)});")
                continue
            for r, (row, dk) in enumerate(((0, 0), (8, 0), (0, 4), (8, 4))):
                g._fragment(s, tmpl[r], f"{self._base(is_a, stage, wt)}"
                                        f"[{self._word(is_a, off + row, kw + dk)}]")

    def _partials(self, b: int) -> list[str]:
        """3xTF32: block ``b``'s partial sums of one chunk of Q's columns."""
        return [f"p{b}_{r}" for r in range(self.n // 2)]

    def compute(self, block: Block, stage: str, x: int = 0) -> None:
        """One stage's fragments (from R's stage, or "r": from register set ``x``), its
        wgmmas, and the wait for all of them. 3xTF32: per chunk of ``n`` columns of Q, the
        small cross terms first and the big product last into partial sums from zero (the
        first wgmma's scale-d off), added to the accumulators after the wait (as the mma.sync
        kernel does: the tensor cores round their sums toward zero)."""
        g, emulate = self.g, _emulate.value
        body = block.nested("{")
        qsize = self.size[0 if self.q == 0 else 1]
        steps = self.steps()
        step = f"kt + {x}" if x else "kt"
        if self.r_global:
            self._r_frags(body, x)
        else:
            for kk in steps:
                self._stage_frags(body, stage, kk)
        # Q's parts: h (the ring stage; 3xTF32: its big parts) and l (3xTF32's small parts)
        bases = {"h": f"({stage}) * {qsize}", "l": f"(({step}) & 1) * {qsize}"}
        if not emulate:  # (every value the wgmmas read exists before the first issues)
            for kk in steps:
                # the descriptors of this stage's k step: its first core-matrix column
                for part, desc in zip(self.parts, ("fj_qd", "fj_qs")):
                    _emit(body, f"const ulong q{part}{kk} = {desc} + (ulong)((({bases[part]} + "
                                f"{kk // self.E * 8 * self.E}) * {self.item}) >> 4);")
        terms = (("l", "h"), ("h", "l"), ("h", "h")) if self.split else (("h", "h"),)
        half = self.n // 2  # accumulator registers of a chunk, per 64-row block

        def dst(b: int, c: int) -> list[str]:
            return self._partials(b) if self.split else [
                self._acc(b, c * half + r) for r in range(half)]

        for c in range(self.qw // self.n):
            _emit(body, "FJ_WG_FENCE();")
            if emulate:
                self._emulated(body, c, terms, dst, bases)
            else:
                for kk in steps:
                    for b in range(self.blocks):
                        for n, (rp, qp) in enumerate(terms):
                            first = self.split and n == 0 and kk == steps[0]
                            regs = [f"wr{rp}{kk}_{b}_{r}" for r in range(4)]
                            desc = f"q{qp}{kk}" + (f" + {c * self.n * self.ck}" if c else "")
                            ops = (", ".join(f'"+f"({a})' for a in dst(b, c)) + " : " +
                                   ", ".join(f'"r"({r})' for r in regs) +
                                   f', "l"({desc}), "r"({0 if first else 1})')
                            _emit(body, f'asm volatile("{wgmma_asm(g.kind, self.n)}" : {ops} : '
                                        '"memory");')
            # (the wait follows the commit at once: nothing the wgmmas read or write is
            # touched while they run, whatever registers ptxas gives the values around them)
            _emit(body, "FJ_WG_COMMIT();")
            _emit(body, "FJ_WG_WAIT();")
            if self.split:
                for b in range(self.blocks):
                    if not emulate:
                        _fence(body, self._partials(b))
                    for r0 in range(0, half, 8):
                        _emit(body, " ".join(f"{self._acc(b, c * half + r)} += p{b}_{r};"
                                             for r in range(r0, min(half, r0 + 8))))

    def _emulated(self, body: Block, c: int, terms: tuple, dst, bases: dict[str, str]) -> None:
        """Chunk ``c``'s wgmmas as OpenCL C: per k step, block and term, the warp's R
        fragments through local memory, then each accumulator's products."""
        lt = "ushort" if self.f16 else "float"
        g = self.g
        for kk in self.steps():
            for b in range(self.blocks):
                s = body.nested("{")
                _emit(s, "__local uint *fj_x = fj_wx + (tid - lane) * 4;")
                if self.split and kk == 0:  # (the PTX's first wgmma: scale-d off)
                    _emit(s, " ".join(f"{p} = 0.0f;" for p in dst(b, c)))
                for rp, qp in terms:
                    local = self._q_local() if qp == "h" else "Qs"
                    qb = f"((__local const {lt} *){local} + {bases[qp]})"
                    _emit(s, " ".join(f"fj_wx[tid * 4 + {r}] = wr{rp}{kk}_{b}_{r};"
                                      for r in range(4)))
                    _emit(s, g.t.barrier_local)
                    for reg, acc in enumerate(dst(b, c)):
                        col = c * (self.n // 2) + reg  # (the register of the whole Q)
                        rr = f"(mg + {8 * ((col % 4) // 2)})"
                        cc = f"({8 * (col // 4) + col % 2} + mt * 2)"
                        _emit(s, f"FJ_WG_ACC({acc}, {rr}, {cc}, {qb}, {kk});")
                    _emit(s, g.t.barrier_local)

    def descriptor(self) -> list[str]:
        """The kernel's base descriptors of Q's ring (stage 0, k 0; 3xTF32 also of its small
        parts): the local address >> 4, leading offset 128 bytes (the next chunk of k), stride
        offset 128 * chunks (the next 8 rows), no swizzle."""
        return [(f"const ulong fj_q{d} = (ulong)((((uint)(ulong){local}) & 0x3FFFFu) "
                 f">> 4) | ((ulong)8 << 16) | ((ulong){8 * self.ck} << 32);")
                for d, local in zip("ds", (self._q_local(), "Qs")[:len(self.parts)])]


__all__ = ["WgTiles", "describe", "groups", "oriented", "q_operand", "stages", "valid"]
