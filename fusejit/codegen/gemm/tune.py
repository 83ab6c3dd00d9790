"""GEMM kernel configurations: the pruned search space, the heuristic used without tuning, and
the persisted winners of tuning.

A configuration is a work-group tile (MWG x NWG, KWG deep), a grid of MDIMC x NDIMC work-items
each holding an (MWG/MDIMC) x (NWG/NDIMC) register tile, the vector width VW of its local
memory reads, the grouped launch order and whether tiles go through local memory at all (the
*direct* kernel for small products does not). The space is CLBlast's xgemm parameters, pruned
by the device's local memory and work-group size and by a register estimate (accumulators plus
the operands of one k step; NVIDIA allows 255 registers a work-item).

Tuning results are kept per (device, dtype, layout, shape bucket, epilogue class): ``tune_key``
names them, the runtime times and keeps them (runtime/opencl/gemm_bench.py) and hands them to
``configure`` as a ``Tuning``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from fusejit.passes.host_gemm import kept_in_kernels
from fusejit.passes.plan import DeviceLimits, Group, Plan, gemm_problem

REGISTER_LIMIT = 255  # registers a work-item may use on NVIDIA GPUs (the tightest common limit)


@dataclass(frozen=True)
class GemmConfig:
    mwg: int
    nwg: int
    kwg: int
    mdimc: int
    ndimc: int
    vw: int = 4
    group_m: int = 8
    local: bool = True  # False: the direct kernel (global loads straight into registers)
    split: int = 1  # split-K: work-groups per output tile summing slices of K (then combined)
    why: str = ""
    # tensor cores (fusejit/codegen/gemm/mma.py): "" (the SIMT kernel), "tf32", "3xtf32" or "f16";
    # then MDIMC x NDIMC is 8 x 4 per warp of the warp grid (an MMA lane's accumulator layout)
    mma: str = ""
    # tensor-core kernel variants, letters of gemm_mma.OPTS ("": the first kernel's layout)
    mma_opts: str = ""

    @property
    def mwi(self) -> int:
        return self.mwg // self.mdimc

    @property
    def nwi(self) -> int:
        return self.nwg // self.ndimc

    @property
    def threads(self) -> int:
        return self.mdimc * self.ndimc

    def local_bytes(self, itemsize: int) -> int:
        if self.mma:
            from fusejit.codegen.gemm.mma import local_bytes

            return local_bytes(self)
        return 2 * self.kwg * (self.mwg + self.nwg) * itemsize if self.local else 0

    def registers(self, words: int) -> int:
        """Estimated 32-bit registers a work-item needs: accumulators, one k step's operands,
        the prefetched next tile and ~24 for addresses."""
        tile = (self.mwg + self.nwg) * self.kwg // self.threads if self.local else 0
        return words * (self.mwi * self.nwi + self.mwi + self.nwi + tile) + 24

    def describe(self) -> str:
        if self.mma:
            from fusejit.codegen.gemm.mma import describe

            return describe(self)
        if not self.local:
            return (f"direct kernel: {self.mwg}x{self.nwg} outputs per work-group of "
                    f"{self.threads}, {self.mwi}x{self.nwi} per work-item, no local memory")
        return (f"tile {self.mwg}x{self.nwg}x{self.kwg}, {self.mdimc}x{self.ndimc} work-items "
                f"with {self.mwi}x{self.nwi} register tiles, local reads of {self.vw}, "
                f"double-buffered, launch grouped by {self.group_m} tile rows" +
                (f", K split over {self.split} work-groups per tile (a second kernel sums "
                 "the slices and runs the epilogue)" if self.split > 1 else ""))


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
    if cfg.local_bytes(item) > limits.local_mem:
        return False
    if cfg.registers(_words(acc)) > REGISTER_LIMIT:
        return False
    # whole rounds of loads: every work-item loads the same number of elements of each tile
    return all((o * cfg.kwg) % cfg.threads == 0 for o in (cfg.mwg, cfg.nwg))


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


def with_split(cfg: GemmConfig, m: int, n: int, k: int, batch: int, units: int
               ) -> GemmConfig:
    """Split K when the output has too few tiles to keep the compute units busy and K is long
    (skinny products): slices of at least 512, whole steps of KWG each."""
    if not cfg.local:
        return cfg
    tiles = math.ceil(m / cfg.mwg) * math.ceil(n / cfg.nwg) * batch
    split = 1
    while tiles * split < 2 * units and split < 16 and k % (2 * split * cfg.kwg) == 0 and \
            k // (2 * split) >= 512:
        split *= 2
    return replace(cfg, split=split) if split != cfg.split else cfg


def heuristic(m: int, n: int, k: int, batch: int, limits: DeviceLimits, acc: np.dtype
              ) -> GemmConfig:
    """A cheap choice without tuning: the best-ranked candidate of the space; the direct
    kernel for small products and on CPUs."""
    if not limits.is_gpu and m * n <= 4096:
        return GemmConfig(8, 8, 1, 8, 8, 1, 1, local=False,
                          why="CPU device, small product: the direct kernel, one output each")
    if not limits.is_gpu:
        # PoCL: a work-item per 6 rows x 2 AVX vectors of columns (12 vector accumulators of
        # the 16 AVX registers, OpenBLAS's 6x16 float kernel shape), loads straight from
        # memory: no local memory, barriers or work-item loops to split around them. 48x32
        # measured best of 32x16..96x16 on PoCL at 1024^3 (0.12 s against 0.31-0.8 s)
        vw = 32 // max(4, acc.itemsize)
        if acc.kind == "f" and n % vw == 0:
            return GemmConfig(48, 4 * vw, 1, 8, 2, vw, 1, local=False,
                              why=f"CPU device: the direct kernel over float{vw} vectors")
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


# -- choosing a configuration for each gemm group ---------------------------------------------------

_forced: list[GemmConfig] = []


@contextlib.contextmanager
def forced(cfg: GemmConfig) -> Iterator[None]:
    """Use ``cfg`` for every GEMM compiled inside the block (tests of each kernel variant),
    and keep every product in its kernel (not the host's BLAS: passes/host_gemm.py)."""
    _forced.append(cfg)
    try:
        with kept_in_kernels():
            yield
    finally:
        _forced.pop()


def epilogue_class(group: Group) -> str:
    """'plain' (the product stored as it is), 'light' (a few cheap ops per element), 'heavy'
    (transcendental or long chains): what the epilogue adds to the kernel's registers."""
    from fusejit.ir.ops import TRANSCENDENTAL

    m = group.matmul
    ops = 0
    heavy = False
    seen: set = set()
    stack = [st.node for st in group.stores]
    while stack:
        n = stack.pop()
        if n in seen or n is m:
            continue
        seen.add(n)
        ops += 1
        heavy |= n.op in TRANSCENDENTAL
        stack.extend(n.srcs)
    return "plain" if ops == 0 else "heavy" if heavy or ops > 12 else "light"


def layout(group: Group) -> str:
    """Which axis each operand is read along contiguously ('k' or 'mn'), from its strides."""
    from fusejit.ir.ops import MOVEMENT

    parts = []
    for src in group.matmul.srcs:
        node = src
        while node.op in MOVEMENT and node.op.name == "VIEW":
            node = node.srcs[0]
        # a transposing view over the last two axes swaps which axis is contiguous
        swapped = src.op.name == "VIEW" and src.ndim >= 2 and len(src.arg) >= 2 and \
            src.arg[-1][1][-2:] == (1, 0)
        parts.append("t" if swapped else "n")
    return "".join(parts)


# times candidates for one product: (group, tuning key, candidates in order, its share of the
# call's tuning budget) -> the fastest, or None (no budget or no room to time in)
Tuner = Callable[[Group, str, list[GemmConfig], float], "GemmConfig | None"]


@dataclass(frozen=True)
class Tuning:
    """The runtime's part in choosing a product's configuration, which codegen can neither
    time nor keep (runtime/opencl/gemm_bench.py makes it): ``known`` the configuration tuned
    before under a key (the persisted table, None if none), ``tuner`` times candidates now
    (None: autotuning is off)."""

    known: Callable[[str], "GemmConfig | None"]
    tuner: Tuner | None = None


def configure(plan: Plan, device_key: str, limits: DeviceLimits, tuning: Tuning | None = None,
              precision: str = "highest", mma: str | None = None) -> Plan:
    """The plan with a configuration on every gemm group: forced (tests), tuned before
    (``tuning.known``), tuned now (``tuning.tuner``, on first use, each product given its
    share of the call's tuning budget) or the heuristic. ``precision`` is ``@fuse``'s
    matmul_precision; ``mma`` None when tensor cores serve it on this device, else why not
    (fusejit/codegen/gemm/mma.py)."""
    tuner = tuning.tuner if tuning is not None else None
    products = sum(g.kind == "gemm" for g in plan.groups)
    groups = []
    for g in plan.groups:
        if g.kind != "gemm" or g.gemm_config is not None:
            groups.append(g)
            continue
        from fusejit.codegen.gemm.source import accumulator

        m, n, k, b = gemm_problem(g)
        acc = accumulator(g.matmul.dtype)
        kind, note = "", ""
        if precision != "highest":
            from fusejit.codegen.gemm.mma import kind_for

            kind, note = kind_for(g.matmul.dtype, precision, mma)
        key = tune_key(device_key, g.matmul.dtype, layout(g), bucket(m, n, k, b),
                       epilogue_class(g)) + (f"|mma-{kind}" if kind else "")
        cfg = _forced[-1] if _forced else tuning.known(key) if tuning is not None else None
        if cfg is not None and not _forced:
            cfg = replace(cfg, why=f"tuned on first use, kept under {key!r}")
        if kind and not _forced:
            from fusejit.codegen.gemm.mma import (
                heuristic as mma_heuristic,
                space as mma_space,
                valid,
            )

            if cfg is not None and (cfg.mma != kind or not valid(cfg, limits)):
                cfg = None  # (a stale, foreign or corrupt entry)
            if cfg is None and tuner is not None and m * n * k * b >= 1 << 24:
                cfg = tuner(g, key, mma_space(kind, limits), 1 / products)
            if cfg is None:
                cfg = mma_heuristic(kind, m, n, limits)
            if cfg is None:
                note = (f"matmul_precision={precision!r}: no tensor-core tile fits this "
                        "device's local memory; fell back to the SIMT kernel")
        if cfg is None and tuner is not None and limits.is_gpu and m * n * k * b >= 1 << 24:
            cfg = tuner(g, key, space(limits, acc), 1 / products)
        if cfg is None:
            cfg = heuristic(m, n, k, b, limits, acc)
        if note:
            cfg = replace(cfg, why=f"{note}; {cfg.why}" if cfg.why else note)
        if not _forced and limits.is_gpu:
            cfg = with_split(cfg, m, n, k, b, limits.compute_units)
        groups.append(replace(g, gemm_config=cfg))
    return replace(plan, groups=tuple(groups))


def bucket(m: int, n: int, k: int, batch: int) -> str:
    """Shape bucket: powers of two of each extent (a config tuned at 4096 serves 3000-5000)."""
    def b(x: int) -> int:
        return 1 << max(0, round(math.log2(max(x, 1))))
    return f"{b(m)}x{b(n)}x{b(k)}x{b(batch)}"


def tune_key(device: str, dtype: np.dtype, layout: str, shape: str, epilogue: str) -> str:
    return f"{device}|{dtype.name}|{layout}|{shape}|{epilogue}"


__all__ = ["GemmConfig", "Tuner", "Tuning", "bucket", "configure", "forced", "heuristic", "rank",
           "space", "tune_key"]
