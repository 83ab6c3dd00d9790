"""The SIMT GEMM kernels' configurations (codegen/gemm/source.py): what a configuration costs
(local memory, registers) and says (explain()), the pruned search space, its ranking, and the
heuristic used without tuning.

The space is CLBlast's xgemm parameters, pruned by the device's local memory and work-group
size and by a register estimate (accumulators plus the operands of one k step; NVIDIA allows
255 registers a work-item). The tensor-core kernels have their own (codegen/gemm/mma.py).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from fusejit.codegen.gemm.config import GemmConfig
from fusejit.passes.plan import DeviceLimits

REGISTER_LIMIT = 255  # registers a work-item may use on NVIDIA GPUs (the tightest common limit)


def local_bytes(cfg: GemmConfig, itemsize: int) -> int:
    """Local memory of the tiled kernel's double-buffered tiles (the direct kernel has none)."""
    return 2 * cfg.kwg * (cfg.mwg + cfg.nwg) * itemsize if cfg.local else 0


def registers(cfg: GemmConfig, words: int) -> int:
    """Estimated 32-bit registers a work-item needs: accumulators, one k step's operands,
    the prefetched next tile and ~24 for addresses."""
    tile = (cfg.mwg + cfg.nwg) * cfg.kwg // cfg.threads if cfg.local else 0
    return words * (cfg.mwi * cfg.nwi + cfg.mwi + cfg.nwi + tile) + 24


def describe(cfg: GemmConfig) -> str:
    if not cfg.local:
        return (f"direct kernel: {cfg.mwg}x{cfg.nwg} outputs per work-group of "
                f"{cfg.threads}, {cfg.mwi}x{cfg.nwi} per work-item, no local memory")
    return (f"tile {cfg.mwg}x{cfg.nwg}x{cfg.kwg}, {cfg.mdimc}x{cfg.ndimc} work-items "
            f"with {cfg.mwi}x{cfg.nwi} register tiles, local reads of {cfg.vw}, "
            f"double-buffered, launch grouped by {cfg.group_m} tile rows" +
            (f", K split over {cfg.split} work-groups per tile (a second kernel sums "
             "the slices and runs the epilogue)" if cfg.split > 1 else ""))


def _words(dtype: np.dtype) -> int:
    return 2 if dtype.itemsize == 8 else 1


def space(limits: DeviceLimits, acc: np.dtype) -> list[GemmConfig]:
    """The pruned candidate space (about 24 on a GPU)."""
    item = max(4, acc.itemsize)
    out = []
    for mwg, nwg in ((128, 128), (128, 64), (64, 128), (64, 64), (32, 64), (64, 32), (32, 32)):
        for kwg in (8, 16, 32):
            for mdimc, ndimc in ((16, 16), (8, 16), (16, 8), (8, 8)):
                cfg = GemmConfig(mwg, nwg, kwg, mdimc, ndimc, 4 if item == 4 else 2)
                if _valid(cfg, limits, acc, item):
                    out.append(cfg)
    # prune to the shapes CLBlast's tuner keeps finding: 4x4 to 8x8 register tiles
    out = [c for c in out if 4 <= c.mwi <= 8 and 4 <= c.nwi <= 8 and c.kwg <= 16 or
           (c.mwg, c.nwg) == (32, 32) and c.kwg == 16]
    return out


def _valid(cfg: GemmConfig, limits: DeviceLimits, acc: np.dtype, item: int) -> bool:
    if cfg.mwg % cfg.mdimc or cfg.nwg % cfg.ndimc or cfg.threads > limits.max_work_group:
        return False
    if cfg.mwi % cfg.vw or cfg.nwi % cfg.vw:
        return False
    if local_bytes(cfg, item) > limits.local_mem:
        return False
    if registers(cfg, _words(acc)) > REGISTER_LIMIT:
        return False
    # whole rounds of loads: every work-item loads the same number of elements of each tile
    return all((o * cfg.kwg) % cfg.threads == 0 for o in (cfg.mwg, cfg.nwg))


def unfit(cfg: GemmConfig, m: int, n: int, k: int, batch: int, limits: DeviceLimits,
          acc: np.dtype) -> str | None:
    """Why the SIMT kernels cannot run ``cfg`` for an m x n x k (x batch) product on a device
    with ``limits`` (a wrong value, a build error or a runaway source), or None: the one check
    that the heuristic's choices, the tuner's candidates and stored configurations (gemm.json)
    all pass."""
    if cfg.mma:
        return f"a tensor-core configuration ({cfg.mma})"
    if cfg.mwg % cfg.mdimc or cfg.nwg % cfg.ndimc:
        return "the work-group tile does not divide among its work-items"
    if cfg.mwi * cfg.nwi > 256 or cfg.kwg > 64 or not 1 <= cfg.group_m <= 64:
        return "a tile larger than any kernel unrolls"
    if cfg.threads > limits.max_work_group:
        return f"{cfg.threads} work-items, more than the device's {limits.max_work_group}"
    if cfg.vw not in (1, 2, 4, 8, 16):
        return f"vector width {cfg.vw}"
    if not cfg.local:
        if cfg.vw > 1 and (acc.kind != "f" or cfg.nwi % cfg.vw or n % cfg.vw):
            return f"the vector kernel needs float accumulators and N ({n}) and the " \
                   f"work-item's columns ({cfg.nwi}) in whole vectors of {cfg.vw}"
        return None
    item = max(4, acc.itemsize)
    if not _valid(cfg, limits, acc, item):
        return "the tiled kernel's local memory, registers or load rounds do not fit"
    if cfg.split not in (1, 2, 4, 8, 16) or k % (cfg.split * cfg.kwg):
        return f"split-K by {cfg.split} does not divide K ({k}) into whole steps"
    return None


def rank(cands: list[GemmConfig], m: int, n: int, batch: int, units: int
         ) -> list[GemmConfig]:
    """Candidates by expected speed: work per local-memory read (the register tile's area),
    discounted when the grid leaves compute units idle (fewer than two work-groups each) or
    pads the result (edge tiles). On an H200 at 4096^3 this orders the measured sweep's best
    five correctly (8x8 register tiles first, 128x128x8 ahead)."""
    def score(c: GemmConfig) -> float:
        tm, tn = math.ceil(m / c.mwg), math.ceil(n / c.nwg)
        tiles = tm * tn * batch
        fill = min(1.0, tiles / (2 * max(1, units)))
        waste = (tm * c.mwg * tn * c.nwg) / max(1, m * n)
        deep = 1.02 if c.kwg == 8 and c.mwg * c.nwg >= 128 * 128 else 1.0
        return c.mwi * c.nwi * fill / waste * deep * (1 + c.threads / 4096)
    return sorted(cands, key=score, reverse=True)


def heuristic(m: int, n: int, k: int, batch: int, limits: DeviceLimits, acc: np.dtype,
              window: bool = False) -> GemmConfig:
    """A cheap choice without tuning: the best-ranked candidate of the space; the direct
    kernel for small products and on CPUs. ``window``: an operand is read through a window map
    (a convolution), whose loads check the padding's bounds: on CPUs a work-item then shares
    each load over a vector of columns even for small products (PoCL, a 16x16x16 3x3 layer:
    2.3 ms one output each, 0.24 ms over float8 columns)."""
    if not limits.is_gpu and m * n <= 4096 and not window:
        return GemmConfig(8, 8, 1, 8, 8, 1, 1, local=False,
                          why="CPU device, small product: the direct kernel, one output each")
    if not limits.is_gpu:
        # PoCL: a work-item per 6 rows x 2 AVX vectors of columns (12 vector accumulators of
        # the 16 AVX registers, OpenBLAS's 6x16 float kernel shape), loads straight from
        # memory: no local memory, barriers or work-item loops to split around them. 48x32
        # measured best of 32x16..96x16 on PoCL at 1024^3 (0.12 s against 0.31-0.8 s)
        vw = 32 // max(4, acc.itemsize)
        simd = GemmConfig(48, 4 * vw, 1, 8, 2, vw, 1, local=False,
                          why=f"CPU device: the direct kernel over float{vw} vectors")
        if unfit(simd, m, n, k, batch, limits, acc) is None:
            return simd
        return GemmConfig(32, 64, 1, 8, 8, 1, 1, local=False,
                          why="CPU device: the direct kernel")
    if m * n * k * batch <= 64 * 64 * 64 * 8:
        return GemmConfig(32, 32, 1, 8, 8, 1, 1, local=False,
                          why=f"small product ({m}x{n}x{k}): the direct kernel")
    ranked = rank(space(limits, acc), m, n, batch, limits.compute_units)
    if not ranked:
        return GemmConfig(32, 32, 1, 8, 8, 1, 1, local=False, why="no tiled configuration fits")
    return replace(ranked[0], why="heuristic: the best-ranked of the space (register tile "
                   "area, compute units kept busy, edge waste)")


__all__ = ["REGISTER_LIMIT", "describe", "heuristic", "local_bytes", "rank", "registers", "space",
           "unfit"]
