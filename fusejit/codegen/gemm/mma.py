"""Tensor-core GEMM kernels: ``mma.sync`` through inline PTX in OpenCL C (NVIDIA, sm_80+), for
``@fuse(matmul_precision="tf32" | "3xtf32")`` and for float16 operands.

The kernel is the tiled SIMT kernel of codegen/gemm/source.py with three parts replaced: the loads
(global -> registers -> local memory, double-buffered, the fused prologue in them) and the
epilogue (the Lowering's stores, guarded in edge tiles) are the same code. What changes:

* **The register tile.** A work-group is a grid of WGM x WGN warps; each warp owns a WM x WN
  block of the tile as (WM/16) x (WN/8) MMA tiles. A lane holds, per MMA tile, the C fragment
  ``c0 = (g, 2t), c1 = (g, 2t+1), c2 = (g+8, 2t), c3 = (g+8, 2t+1)`` (g = lane >> 2, t =
  lane & 3; PTX ISA "Matrix Fragments for mma.m16n8k8"), so its accumulators form a
  (WM/8) x (WN/4) grid, and ``row_of``/``col_of`` say where each one lies.
* **The local pitch.** Local tiles are k-major (``Al[k][m]``, ``Bl[k][n]``, as in the SIMT
  kernel); fragments read 8 rows of g by 4 k rows of t, so the pitch is padded to be 8 (tf32:
  rows t*pitch) or 4 (f16: rows 2t*pitch) modulo 32 banks: conflict-free reads.
* **compute.** Per k step of 8 (tf32) or 16 (f16): fragments read from local memory
  (``cvt.rna.tf32.f32``: round to nearest, ties away; float16 tiles hold halves in pairs along
  k, stored by ``vstore_half``, so an f16x2 register is one 32-bit load), then one
  ``mma.sync`` per MMA tile.
  3xTF32 splits each value x into big = tf32(x) and small = tf32(x - big) and sums
  small*big + big*small + big*big (small*small, ~2^-22 of the product, is dropped): float32
  accuracy (fusejit/codegen/gemm/tf32.py models it in NumPy, tests/codegen/test_tf32.py bounds it).

On this register path fragments are read with plain 32-bit local loads, not ldmatrix: float16
tiles are k-pair interleaved, so each fragment register is already one load (the ring below
uses ldmatrix where its layouts need it).

Tried on an H200 (tf32, 4096^3): an XOR swizzle of the local tiles making the stores of
k-contiguous operands conflict-free, slower (1.24 -> 1.45 ms); non-volatile MMA asm, no faster
(1.29 ms); no cvt (raw float bits, truncated by the hardware), 3% faster, not worth the bias.

Variants (``GemmConfig.mma_opts``, letters of OPTS; tuned like the tile shape), measured in one
run of ``python -m fusejit.bench.gemm --precision --mma-sweep`` on an H200 (4096^3 + bias +
ReLU, the shapes of ``space``):

* ``w`` (float16): an outer-contiguous operand (``b`` of ``a @ b``) is loaded by rounds in
  pairs of k rows, so a work-item packs both halves of each word of the k-pair tile
  (``cvt.rn.f16x2.f32``) and stores them as one uint4, instead of four 2-byte stores that
  collide 4-way in the banks: 0.91 -> 0.77 ms; with ``v`` 0.76 ms, the float16 default.
* ``v``: a float vector along the tile's contiguous axis as one ``vstore``; float16 k pairs
  of a k-contiguous operand as one word. tf32: no change (1.246 -> 1.245 ms: the compiler
  had merged the stores); float16 0.91 -> 0.88 ms.
* ``t``: a k-contiguous operand (``a``) loaded a row per work-item, making its stores into
  the k-major tile conflict-free: slower everywhere (tf32 1.25 -> 1.65 ms, 3xtf32 2.89 ->
  3.20, float16 0.91 -> 1.09): the global loads are no longer coalesced.
* ``p``: each k step's fragments loaded into registers of their own before the previous
  step's MMAs: no gain on 64x32 warp tiles (1.65 ms either way, with ``t``), 1.52 -> 1.43
  ms on 64x64 ones (128x128, 2x2 warps), 3xtf32 slower (3.20 -> 3.70).
* 64x64 warp tiles (128 accumulators a lane) are not faster than 64x32: tf32 with ``tvp``
  at 64x256 (1x4 warps) 1.29 ms vs 1.25; 3xtf32 at 128x128 (2x2) 3.09 vs 2.89. The launch
  order (GROUP_M 4, 8, 16) changes no kind by more than 1%.

**The cp.async ring** ("a", codegen/gemm/mma_async.py): where both operands are plain strided reads of
float32 (tf32/3xtf32) or float16 (f16) buffers with 16-byte aligned rows, the tiles skip the
registers: ``cp.async.cg.shared.global`` copies 16-byte chunks into a ring of 3 stages ("s": 4)
kept in the operands' own layouts, XOR-swizzled so fragment reads are conflict-free, fragments
by 32-bit loads or ldmatrix (``.trans`` for float16 tiles whose contiguous axis is not k; "l":
also for k-contiguous tiles), "p" loading the next step's fragments (across stages too) before
this step's MMAs. Products with a prologue, casts or misaligned rows take the register path
above (explain() says why). Probed first on the H200 (benchmarks/mma_async_probe.py): the
shared-window address of a __local pointer is ``(uint)(ulong)p`` (NVIDIA's OpenCL puts
__local arrays in .shared and a pointer's integer value is its shared address; cvta.to.shared
of it also works), cp.async with a source size zero-fills, and ldmatrix x4/x4.trans/x2.trans
deliver the documented distribution. Measured (``--precision --mlp --mma-sweep``, 4096^3 +
bias + ReLU; two runs, the second's figures, the first's in brackets where both ran):

* 128x128 tiles over 2x2 warps of 64x64 are the fastest ring tiles: tf32 1.143 ms (1.145;
  the register path's best in the same run 1.234), 3xtf32 2.646 (2.645; register path 2.86),
  f16 0.518 (0.522; register path "vw" 0.742, 30% slower).
* "p" and "l" change little: tf32 "pal" 1.122, "pa" 1.161, "al" 1.165; f16 "pal" 0.515, "pa"
  0.516, "al" 0.540. For 3xtf32 "p" is a disaster (11.35 ms: two sets of split fragments
  spill); "al" 2.725.
* Slower: 2x4 warps of 64x32 (tf32 1.32-1.40, f16 0.60, 3xtf32 3.02-3.14: 256 work-items of
  ~140 registers leave one work-group a multiprocessor), 2x1 warps on 128x64 (tf32 1.53, f16
  0.77), 4 stages of shallower tiles (tf32 128x128x8 1.35, 128x256x8 1.36; f16 128x256x16
  0.57-0.60, 256x128x16 0.70).
* So the ring lifts f16 to 44% of the MMA peak and tf32 to 40%, still 2x from torch (TF32
  0.459, half 0.263 ms in the same run). With 48 KiB of local memory (OpenCL cannot opt in to
  more) a stage of 128x128 tiles is 16 deep in float32, so every 2 MMA k steps end in a
  barrier, and 2 work-groups of 4 warps a multiprocessor leave little to hide it. Not tried:
  fewer registers (``-cl-nv-maxrregcount``) for 3 work-groups a multiprocessor, narrower but
  deeper stages, warp-specialised copies.

**wgmma** ("g", codegen/gemm/wgmma.py): on an H100/H200 where the probe passes, Hopper's warpgroup
MMA on the same ring (one operand read by the tensor cores from local memory, the other from
registers; "r": from global memory straight into registers), built for sm_90a through
runtime/opencl/build.py's PTX rebuild: tf32 1.13 -> 0.946 ms, float16 0.517 -> 0.510-0.515 (within
noise; torch 0.459 and 0.260 in the same run), 3xTF32 2.63 -> 1.99 (Q's small parts in local
memory beside its ring; the same sums as here, so the same error).

The PTX is spelled through four macros (FJ_TF32, FJ_F16X2, FJ_MMA_TF32, FJ_MMA_F16; codegen/gemm/ptx.py)
defined at the top of the kernel. ``emulated()`` defines them instead as OpenCL C that exchanges the
fragments through local memory and computes the same products, so PoCL runs the whole kernel
(fragment layouts, edge tiles, prologue, epilogue) on CI; the NVIDIA driver builds the PTX.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.errors import MatmulPrecisionError
from fusejit.codegen.gemm import mma_async, wgmma
from fusejit.codegen.gemm.config import GemmConfig
from fusejit.codegen.gemm.source import _Gen
from fusejit.codegen.lowering import Block
from fusejit.codegen.gemm.ptx import K_STEP, PTX_MACROS, _emulate, emulated, emulated_macros
from fusejit.passes.plan import DeviceLimits

PRECISIONS = ("highest", "3xtf32", "tf32")
KINDS = ("tf32", "3xtf32", "f16")


def check_precision(value: object) -> str:
    """``value`` if it is a matmul_precision name, else a MatmulPrecisionError naming it."""
    if isinstance(value, str) and value in PRECISIONS:
        return value
    raise MatmulPrecisionError(
        f"matmul_precision={value!r} is not one of {', '.join(map(repr, PRECISIONS))}: write "
        "'highest' (the default, float32 arithmetic), '3xtf32' (tensor cores, float32-grade "
        "error) or 'tf32' (tensor cores, products rounded to 10 mantissa bits)")


def kind_for(dtype: np.dtype, precision: str, unavailable: str | None) -> tuple[str, str]:
    """(the MMA kind for a product of ``dtype`` under ``precision``, or ""; a note for
    explain() when the SIMT kernel serves it instead). ``unavailable``: None when this device
    runs MMA kernels, else why not (runtime/opencl/mma_probe.py)."""
    if dtype == dt.FLOAT32:
        kind = precision
    elif dtype == dt.FLOAT16:
        kind = "f16"  # exact products, float32 sums: as accurate as the SIMT kernel
    else:
        return "", (f"matmul_precision={precision!r} applies to float32 and float16 products; "
                    f"this {dtype.name} product uses the SIMT kernel")
    if unavailable is not None:
        return "", (f"matmul_precision={precision!r}: tensor cores unavailable "
                    f"({unavailable}); fell back to the SIMT kernel")
    return kind, f"matmul_precision={precision!r}: tensor cores ({kind})"


# -- configurations ---------------------------------------------------------------------------------


# kernel variants (GemmConfig.mma_opts, letters in this order; see the module docstring)
OPTS = {
    "t": "k-contiguous operands loaded a row per work-item (conflict-free local stores)",
    "v": "vector local stores",
    "w": "float16 k-row pairs loaded by one work-item, stored as whole words",
    "p": "next k step's fragments loaded before this step's MMAs",
    "a": "tiles copied by cp.async into a ring of 3 stages (codegen/gemm/mma_async.py)",
    "s": "4 stages in the ring",
    "l": "fragments of k-contiguous ring tiles by ldmatrix",
    "g": "Hopper's warpgroup MMA (wgmma, sm_90a) on the ring (codegen/gemm/wgmma.py)",
    "r": "wgmma: the register operand's fragments loaded from global memory (no local tiles)",
    "h": "3xTF32 on wgmma: partial sums of half as many columns (two waits a stage for one: "
         "fewer registers)",
}


def config(kind: str, mwg: int, nwg: int, kwg: int, wgm: int, wgn: int, opts: str = "",
           group_m: int = 8, why: str = "") -> GemmConfig:
    """An MMA configuration: an MWG x NWG x KWG tile over a WGM x WGN grid of warps."""
    return GemmConfig(mwg, nwg, kwg, 8 * wgm, 4 * wgn, 2, group_m, mma=kind, why=why,
                      mma_opts=opts)


def warps(cfg: GemmConfig) -> tuple[int, int]:
    return cfg.mdimc // 8, cfg.ndimc // 4


def pad(kind: str) -> int:
    return 8  # fragment reads: lanes g + t * pitch, conflict-free when pitch % 32 == 8


def local_bytes(cfg: GemmConfig) -> int:
    """Local memory of the kernel: with "a" the larger of the ring and the register path's
    double buffer (it serves the products whose operands cp.async cannot copy)."""
    if "g" in cfg.mma_opts:  # (its register path is another configuration: MmaGen)
        return wgmma.local_bytes(cfg)
    item = 2 if cfg.mma == "f16" else 4  # (float16 tiles hold halves)
    regs = 2 * cfg.kwg * (cfg.mwg + pad(cfg.mma) + cfg.nwg + pad(cfg.mma)) * item
    if "a" not in cfg.mma_opts:
        return regs
    return max(regs, mma_async.local_bytes(cfg))


def valid(cfg: GemmConfig, limits: DeviceLimits | None = None) -> bool:
    wgm, wgn = warps(cfg)
    if cfg.mma not in KINDS or wgm * 8 != cfg.mdimc or wgn * 4 != cfg.ndimc:
        return False
    if cfg.mma_opts != "".join(o for o in OPTS if o in cfg.mma_opts):
        return False  # (unknown, repeated or out-of-order letters: a foreign entry)
    if "g" in cfg.mma_opts:
        return (cfg.vw == 2 and cfg.mma_opts in ("ag", "agr", "agh", "agrh") and
                wgmma.valid(cfg) and
                (limits is None or (limits.wgmma and local_bytes(cfg) <= limits.local_mem and
                                    cfg.threads <= limits.max_work_group)))
    if ("s" in cfg.mma_opts or "l" in cfg.mma_opts) and "a" not in cfg.mma_opts:
        return False
    wm, wn = cfg.mwg // wgm, cfg.nwg // wgn
    if cfg.mwg % wgm or cfg.nwg % wgn or wm % 16 or wn % 8 or cfg.kwg % K_STEP[cfg.mma]:
        return False
    if limits is not None and (local_bytes(cfg) > limits.local_mem or
                               cfg.threads > limits.max_work_group):
        return False
    # whole rounds of tile loads per work-item (as the SIMT space asks)
    return cfg.vw == 2 and all((o * cfg.kwg) % cfg.threads == 0 for o in (cfg.mwg, cfg.nwg))


def space(kind: str, limits: DeviceLimits) -> list[GemmConfig]:
    """Candidates, fastest measured first (the tuner times the first few in this order): the
    cp.async ring ("a", codegen/gemm/mma_async.py) on 128x128 tiles over 2x2 warps of 64x64, then
    other ring tiles, then the register path's tiles (which serve, on a GPU, the products
    whose operands cp.async cannot copy: MmaGen._register_path)."""
    # register path (ms measured on an H200 in one run of the sweep, 4096^3 + bias + ReLU;
    # registers as measured before: 3xtf32 249, 103, 108, 104)
    # ring, run 3 of the sweep (run 2 in brackets): 3xtf32 "a" 2.646 (2.645), "al" 2.725,
    # 2x4 warps "pal" 3.02, 128x256x8 2.84 (2.82), "pal" 11.35 (its two fragment sets spill);
    # tf32 "pal" 1.122, "pa" 1.161, "al" 1.165, "a" 1.143 (1.145), 2x4 warps 1.40, 2x1 1.53,
    # 128x256x8 "asl" 1.36; f16 "pal" 0.515, "pa" 0.516, "a" 0.518 (0.522), "al" 0.540, 2x4
    # warps 0.601, 2x1 0.767, 128x256x16 "pasl" 0.568
    if kind == "3xtf32":  # 2.89, 3.09, 3.35, 3.92, 3.32
        ring = [(128, 128, 16, 2, 2, "a"), (128, 128, 16, 2, 2, "al"), (128, 256, 8, 2, 4, "a"),
                (128, 128, 16, 2, 4, "pal")]
        shapes = [(128, 128, 16, 2, 4, ""), (128, 128, 16, 2, 2, "tv"), (128, 64, 16, 4, 2, ""),
                  (128, 128, 16, 4, 4, ""), (64, 64, 16, 2, 2, "")]
    elif kind == "tf32":  # 1.25, 1.29, 1.38, 1.43, 1.49, 1.68, 1.95 (48 KiB of local memory:
        ring = [(128, 128, 16, 2, 2, "pal"), (128, 128, 16, 2, 2, "pa"),
                (128, 128, 16, 2, 2, "al"), (128, 128, 16, 2, 2, "a"), (128, 64, 16, 2, 1, "pal"),
                (128, 128, 16, 2, 4, "pal"), (128, 256, 8, 2, 4, "asl")]
        shapes = [(128, 128, 16, 2, 4, ""), (64, 256, 16, 1, 4, "tvp"),  # float tiles 16 deep
                  (128, 256, 8, 2, 4, ""), (128, 128, 16, 2, 2, "tvp"), (128, 128, 16, 4, 2, ""),
                  (128, 64, 16, 2, 2, ""), (64, 64, 16, 2, 2, "")]
    else:  # 0.76, 0.77, 0.91, 1.11, 1.12, 1.39, 1.60 (tiles of halves: twice as deep; was
        ring = [(128, 128, 32, 2, 2, "pal"), (128, 128, 32, 2, 2, "pa"),
                (128, 128, 32, 2, 2, "al"), (128, 128, 32, 2, 2, "a"), (128, 64, 32, 2, 1, "pal"),
                (128, 256, 16, 2, 4, "pasl"), (128, 128, 32, 2, 4, "pal")]
        shapes = [(128, 256, 16, 2, 4, "vw"), (128, 256, 16, 2, 4, "w"),  # 0.91 with the
                  (128, 256, 16, 2, 4, ""), (128, 128, 32, 2, 4, ""),  # halves stored one by one)
                  (128, 128, 32, 4, 2, ""), (128, 64, 32, 2, 2, ""), (64, 64, 32, 2, 2, "")]
    # (small products; 3xTF32 without "p": two sets of split fragments spill)
    ring += [(64, 64, 32 if kind == "f16" else 16, 2, 2, "a" if kind == "3xtf32" else "pal")]
    # wgmma (codegen/gemm/wgmma.py: R x Q tiles over GR warpgroups, config's warps 4 GR x 1), where
    # the device has it
    wg: list[tuple] = []
    # (ms, 4096^3 + bias + ReLU on an H200, a @ b: tf32 0.949, 1.104, 1.087, 1.153; float16
    # 0.510, 0.979, 0.552; a @ b.T: tf32 0.990, float16 0.701, 0.508: "r" with float16 pays
    # for 16-bit loads and packing where R is outer-contiguous, so the tuner's first three
    # cover both layouts)
    if kind == "tf32":
        wg = [(192, 256, 8, 12, 1, "agr"), (256, 128, 8, 8, 1, "ag"), (192, 256, 8, 12, 1, "ag"),
              (128, 256, 8, 8, 1, "agr"), (192, 256, 16, 12, 1, "agr")]
    elif kind == "3xtf32":  # (a @ b: 1.99 (4 bytes spilled), 2.10, 2.12,
        # 2.24, 2.39, 2.63; a @ b.T: 2.27, 2.12, 2.12, 2.26, 2.49, 2.72)
        wg = [(256, 128, 8, 8, 1, "agr"), (256, 128, 8, 8, 1, "agrh"), (128, 256, 8, 8, 1, "agrh"),
              (128, 256, 8, 8, 1, "agr"), (256, 128, 8, 8, 1, "ag"), (192, 128, 8, 12, 1, "agr")]
    elif kind == "f16":
        wg = [(256, 128, 16, 8, 1, "ag"), (192, 256, 16, 12, 1, "agr"),
              (192, 256, 16, 12, 1, "ag"), (128, 256, 16, 8, 1, "ag")]
    out = [config(kind, *s) for s in wg + ring + shapes]
    return [c for c in out if valid(c, limits)]


def sweep_space(kind: str, limits: DeviceLimits) -> list[GemmConfig]:
    """What ``python -m fusejit.bench.gemm --precision --mma-sweep`` times, most telling first
    (a time budget may cut it short): the ring tiles, then the register path's best two (the
    same run's baseline)."""
    base = space(kind, limits)
    ring = [c for c in base if "a" in c.mma_opts and c.mwg * c.nwg > 64 * 64]
    regs = [c for c in base if "a" not in c.mma_opts][:2]
    return ring + regs


def heuristic(kind: str, m: int, n: int, limits: DeviceLimits) -> GemmConfig | None:
    """Without tuning: the fastest measured tile, 64x64 for products too small to fill the
    device with it; None when no tile fits the device's limits."""
    cands = space(kind, limits)
    if not cands:
        return None
    big = cands[0]
    small = next((c for c in cands if c.mwg == c.nwg == 64 and "a" in c.mma_opts), big)
    tiles = math.ceil(m / big.mwg) * math.ceil(n / big.nwg)
    cfg = big if tiles >= limits.compute_units else small
    return replace(cfg, why="heuristic tensor-core tile")


def describe(cfg: GemmConfig) -> str:
    if "g" in cfg.mma_opts:
        return wgmma.describe(cfg)
    wgm, wgn = warps(cfg)
    inst = {"tf32": "m16n8k8 tf32", "3xtf32": "m16n8k8 tf32, three products a step (3xTF32)",
            "f16": "m16n8k16 f16, float32 accumulators"}[cfg.mma]
    ring = "a" in cfg.mma_opts
    tiles = (f"cp.async ring of {4 if 's' in cfg.mma_opts else 3} stages" if ring else
             "local tiles double-buffered")
    return (f"tensor cores (mma.sync {inst}): tile {cfg.mwg}x{cfg.nwg}x{cfg.kwg}, "
            f"{wgm}x{wgn} warps of {cfg.mwg // wgm}x{cfg.nwg // wgn}, {tiles}, launch grouped "
            f"by {cfg.group_m} tile rows" +
            "".join(f"; {OPTS[o]}" for o in cfg.mma_opts if o not in "as" and not (
                ring and o in "tvw")) +
            (f", K split over {cfg.split} work-groups per tile" if cfg.split > 1 else ""))


# -- the kernel --------------------------------------------------------------------------------------


class MmaGen(_Gen):
    """The tiled GEMM kernel with the register tile of MMA fragments (module docstring)."""

    def build(self):  # type: ignore[override]
        cfg = self.cfg
        if not valid(cfg):
            raise MatmulPrecisionError(f"not a valid tensor-core configuration: {cfg}")
        self.kind = cfg.mma
        self.tiles = None
        emulate = _emulate.value
        if "a" in cfg.mma_opts:  # cp.async where both operands are plain copies
            self.S = cfg.split if cfg.local else 1
            self.Kc = self.K // self.S
            ops = mma_async.eligible(self)
            q = None
            if not isinstance(ops, str) and "g" in cfg.mma_opts:
                q = wgmma.q_operand(ops)
                if q is None:
                    self.cfg = cfg = self._ring_path(cfg, "neither operand is k-contiguous "
                                                     "(wgmma reads tf32 tiles k-major)")
                    ops = mma_async.eligible(self)
            if isinstance(ops, str):
                self.cfg = cfg = self._register_path(cfg, ops)
            elif q is not None:
                self.cfg = cfg = wgmma.oriented(cfg, q)
                self.tiles = wgmma.WgTiles(self, ops, q)
            else:
                self.tiles = mma_async.Tiles(self, ops)
        it = self.it
        self.pre += [f"const {it} lane = ({it})get_local_id(0) % 32;",
                     f"const {it} warp = ({it})get_local_id(0) / 32;",
                     f"const {it} mg = lane >> 2;", f"const {it} mt = lane & 3;"]
        if "g" in cfg.mma_opts:  # (a warp's R fragments: 16 rows of each 64-row block)
            self.wm = self.wn = 16
            self.pre += [f"const {it} wm = warp;", f"const {it} wn = warp;"]
        else:
            self.wgm, self.wgn = warps(cfg)
            self.wm, self.wn = cfg.mwg // self.wgm, cfg.nwg // self.wgn
            self.pre += [f"const {it} wm = warp / {self.wgn};",
                         f"const {it} wn = warp % {self.wgn};"]
        if self.tiles is not None:
            self.pre += list(mma_async.emulated_macros(cfg.threads) if emulate else
                             mma_async.PTX_MACROS)
        # (identical macros in each kernel of a program: a benign redefinition)
        self.pre += list(emulated_macros(cfg.threads) if emulate else PTX_MACROS)
        return super().build()

    def describe_config(self) -> str:  # (the tensor-core description, not the SIMT one)
        return describe(self.cfg)

    def _register_path(self, cfg: GemmConfig, why: str) -> GemmConfig:
        """The configuration serving a product cp.async cannot copy: the register path's
        fastest tile for this device (the same tile without the ring where the limits are
        unknown)."""
        limits = getattr(self.sm, "limits", None)
        regs = ([c for c in space(cfg.mma, limits) if "a" not in c.mma_opts]
                if limits is not None and limits.is_gpu else [])
        if regs and cfg.split == 1:  # (as heuristic() picks: 64x64 for small products)
            out = regs[0]
            tiles = math.ceil(self.M / out.mwg) * math.ceil(self.N / out.nwg) * self.B
            if tiles < limits.compute_units:  # type: ignore[union-attr]
                out = next((c for c in regs if c.mwg == c.nwg == 64), out)
        else:
            out = replace(cfg, mma_opts="".join(o for o in cfg.mma_opts if o not in "aslgrh"))
        note = f"register path: {why}" + (f"; {cfg.why}" if cfg.why else "")
        return replace(out, why=note, group_m=cfg.group_m)

    def _ring_path(self, cfg: GemmConfig, why: str) -> GemmConfig:
        """The mma.sync ring configuration serving a product wgmma cannot take (the fastest
        ring tile of this kind; its register path where cp.async cannot copy either)."""
        limits = getattr(self.sm, "limits", None)
        rings = [c for c in space(cfg.mma, limits) if "a" in c.mma_opts and
                 "g" not in c.mma_opts] if limits is not None else []
        out = rings[0] if rings else config(cfg.mma, 64, 64, cfg.kwg, 2, 2, "a")
        note = f"mma.sync ring: {why}" + (f"; {cfg.why}" if cfg.why else "")
        return replace(out, why=note, group_m=cfg.group_m, split=cfg.split)

    def tiled(self) -> None:
        if self.tiles is not None:
            self.tiles.pipeline()
        else:
            super().tiled()

    def pitch(self, is_a: bool) -> int:
        return (self.cfg.mwg if is_a else self.cfg.nwg) + pad(self.cfg.mma)

    # float16 tiles hold halves in pairs along k (a 32-bit word is one f16x2 fragment
    # register): element (k, o) at half 2 * ((k / 2) * pitch + o) + k % 2
    def local_type(self) -> str:
        return "ushort" if self.cfg.mma == "f16" else self.actype

    def local_offset(self, is_a: bool, buf: str, krow: str, outer: str) -> str:
        if self.cfg.mma != "f16":
            return super().local_offset(is_a, buf, krow, outer)
        P = self.pitch(is_a)
        return (f"{buf} * {P * self.cfg.kwg} + (({krow}) >> 1) * {2 * P} + ({outer}) * 2 + "
                f"(({krow}) & 1)")

    def local_store(self, local: str, offset: str) -> str:
        if self.cfg.mma != "f16":
            return super().local_store(local, offset)
        return f"vstore_half_rte({{0}}, {offset}, (__local half *){local});"

    def row_of(self, i: int) -> str:
        if "g" in self.cfg.mma_opts:
            return self.tiles.row_of(i)
        return f"m0 + wm * {self.wm} + mg + {16 * (i // 2) + 8 * (i % 2)}"

    def col_of(self, j: int) -> str:
        if "g" in self.cfg.mma_opts:
            return self.tiles.col_of(j)
        return f"n0 + wn * {self.wn} + mt * 2 + {8 * (j // 2) + j % 2}"

    def _paired(self, layout: str, rows: int, along: int) -> bool:
        """"w": float16 outer-contiguous tiles loaded in round pairs (2q, 2q+1) of rows
        (2r, 2r+1), so one work-item holds both halves of each word of the k-pair tile (whole
        rounds only: each pair's values are stored together after compute)."""
        return ("w" in self.cfg.mma_opts and self.kind == "f16" and layout == "outer" and
                rows * along % (2 * self.cfg.threads) == 0)

    def load_coords(self, e: str, s: int, along: int, rows: int, layout: str
                    ) -> tuple[str, str]:
        if self._paired(layout, rows, along):
            e2 = f"(tid + {s // 2 * self.cfg.threads})"
            return f"{e2} % {along}", f"{e2} / {along} * 2 + {s % 2}"
        # "t": a warp's loads of a k-contiguous operand span 32 rows (rows % 32 == 0), so its
        # stores into the k-major tile fall in 32 banks (pitch % 32 == 8), not 8 (4-way)
        if "t" in self.cfg.mma_opts and layout == "k" and rows % 32 == 0:
            return f"{e} / {rows}", f"{e} % {rows}"
        return super().load_coords(e, s, along, rows, layout)

    def local_stores(self, local: str, local_of: str, vals: list, layout: str, s: int
                     ) -> list:
        """"v": a float vector along the tile's contiguous axis as one vstore; float16 k pairs
        (one word of the k-pair interleaved tile) as one vstore_half2. "w": a pair of
        rounds' float16 vectors as one vector of words."""
        n = len(vals)
        cfg = self.cfg
        if self._paired(layout, cfg.kwg, (cfg.mwg if local == "Al" else cfg.nwg) // n):
            if s % 2 == 0:  # (rows 2r: kept for the odd round's store)
                self._even = (vals, local_of)
                return []
            even, of = self._even
            words = ", ".join(f"w{l}" for l in range(n))
            packs = " ".join(f"FJ_F16X2(w{l}, {{{l}}}, {{{n + l}}});" for l in range(n))
            vt = f"uint{n}" if n > 1 else "uint"
            return [(f"{{{{ uint {words}; {packs} *(__local {vt} *)({local} + "
                     f"({of.format(l=0)})) = ({vt})({words}); }}}}", (*even, *vals))]
        if "v" not in cfg.mma_opts or n == 1:
            return super().local_stores(local, local_of, vals, layout, s)
        if self.kind != "f16" and layout == "outer":
            args = ", ".join(f"{{{i}}}" for i in range(n))
            return [(f"vstore{n}(({self.actype}{n})({args}), 0, {local} + "
                     f"({local_of.format(l=0)}));", tuple(vals))]
        if self.kind == "f16" and layout == "k":  # (lanes 2l, 2l+1: an even k row first)
            return [(f"{{{{ uint w; FJ_F16X2(w, {{0}}, {{1}}); *(__local uint *)({local} + "
                     f"({local_of.format(l=l)})) = w; }}}}", (vals[l], vals[l + 1]))
                    for l in range(0, n, 2)]
        return super().local_stores(local, local_of, vals, layout, s)

    def compute(self, block: Block, buf: str) -> None:
        cfg, kind = self.cfg, self.kind
        pa, pb = self.pitch(True), self.pitch(False)
        ti, tj = self.wm // 16, self.wn // 8
        f16 = kind == "f16"
        step = K_STEP[kind]
        body = block.nested("{")
        emit = body.emit
        # (float16: words of k pairs, so lane t's first word row is t, as for tf32)
        lt, words = ("uint", cfg.kwg // 2) if f16 else ("float", cfg.kwg)
        emit(None, f"__local const {lt} *pa = (__local const {lt} *)Al + {buf} * "
                   f"{pa * words} + mt * {pa} + wm * {self.wm} + mg;")
        emit(None, f"__local const {lt} *pb = (__local const {lt} *)Bl + {buf} * "
                   f"{pb * words} + mt * {pb} + wn * {self.wn} + mg;")
        parts = ("h", "l") if kind == "3xtf32" else ("h",)
        piped = "p" in cfg.mma_opts
        steps = range(0, cfg.kwg, step)
        # "p": every step's fragments in registers of their own (suffix _s<k>), the next
        # step's loaded before this step's MMAs issue; else one block per step
        blocks = {kk: body if piped else None for kk in steps}

        def loads(kk: int) -> None:
            s = blocks[kk] = blocks[kk] or body.nested("{")
            x = f"_s{kk}" if piped else ""
            for p in parts:
                s.emit(None, "uint " + ", ".join(f"a{p}{i}_{r}{x}" for i in range(ti)
                                                 for r in range(4)) + ";")
                s.emit(None, "uint " + ", ".join(f"b{p}{j}_{r}{x}" for j in range(tj)
                                                 for r in range(2)) + ";")
            # (k offset, row offset) of each fragment register: PTX ISA's layouts
            if f16:  # (word rows: k pairs)
                a_regs = [(kk // 2, 0), (kk // 2, 8), (kk // 2 + 4, 0), (kk // 2 + 4, 8)]
                b_regs = [kk // 2, kk // 2 + 4]
            else:
                a_regs = [(kk, 0), (kk, 8), (kk + 4, 0), (kk + 4, 8)]
                b_regs = [kk, kk + 4]
            for i in range(ti):
                for r, (k, row) in enumerate(a_regs):
                    self._fragment(s, f"a{{p}}{i}_{r}{x}", f"pa[{k * pa + 16 * i + row}]")
            for j in range(tj):
                for r, k in enumerate(b_regs):
                    self._fragment(s, f"b{{p}}{j}_{r}{x}", f"pb[{k * pb + 8 * j}]")

        def mmas(kk: int) -> None:
            self.mmas(blocks[kk], ti, tj, f"_s{kk}" if piped else "")

        ks = list(steps)
        if piped:
            loads(ks[0])
        for n, kk in enumerate(ks):
            if not piped:
                loads(kk)
            elif n + 1 < len(ks):
                loads(ks[n + 1])
            mmas(kk)

    def mmas(self, s: Block, ti: int, tj: int, x: str) -> None:
        """One k step's MMAs from the fragment registers a<part><i>_<r><x>, b<part><j>_<r><x>."""
        kind = self.kind
        piped = bool(x)
        mma = "FJ_MMA_F16" if kind == "f16" else "FJ_MMA_TF32"
        # 3xTF32: the small cross terms first, the big product last, into partial sums
        # from zero added to the accumulators once a step: the tensor cores round their
        # sums toward zero, a bias that grows with K if they carry the whole sum
        # (fusejit/codegen/gemm/tf32.py; measured on an H200: 4-9x the SIMT kernel's error)
        terms = (("l", "h"), ("h", "l"), ("h", "h")) if kind == "3xtf32" else (("h", "h"),)
        split = kind == "3xtf32"
        acc = (f"p{x}_" if piped else "p") if split else "acc"
        if split:
            s.emit(None, "float " + ", ".join(f"{acc}{r}_{c} = 0.0f" for r in range(2 * ti)
                                              for c in range(2 * tj)) + ";")
        for pa_, pb_ in terms:
            for i in range(ti):
                for j in range(tj):
                    d = [f"{acc}{2 * i + q // 2}_{2 * j + q % 2}" for q in range(4)]
                    a = [f"a{pa_}{i}_{r}{x}" for r in range(4)]
                    b = [f"b{pb_}{j}_{r}{x}" for r in range(2)]
                    s.emit(None, f"{mma}({', '.join(d + a + b)});")
        if split:
            for r in range(2 * ti):
                s.emit(None, " ".join(f"acc{r}_{c} += {acc}{r}_{c};"
                                      for c in range(2 * tj)))

    def _fragment(self, block: Block, name: str, first: str) -> None:
        """One fragment register from local memory: tf32 (rounded; 3xTF32: big and small
        parts) from ``first``, or a word of two float16 values."""
        kind = self.kind
        if kind == "f16":  # two halves already in one word
            block.emit(None, f"{name.format(p='h')} = {first};")
        elif kind == "tf32":
            block.emit(None, f"FJ_TF32({name.format(p='h')}, {first});")
        else:
            big, small = name.format(p="h"), name.format(p="l")
            block.emit(None, f"{{ const float x = {first}; FJ_TF32({big}, x); "
                             f"FJ_TF32({small}, x - as_float({big})); }}")


__all__ = ["KINDS", "OPTS", "PRECISIONS", "MmaGen", "check_precision", "config", "describe",
           "emulated", "heuristic", "kind_for", "space", "sweep_space", "valid"]
