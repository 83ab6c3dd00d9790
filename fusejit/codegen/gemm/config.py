"""GEMM kernel configurations.

A configuration is a work-group tile (MWG x NWG, KWG deep), a grid of MDIMC x NDIMC work-items
each holding an (MWG/MDIMC) x (NWG/NDIMC) register tile, the vector width VW of its local
memory reads, the grouped launch order and whether tiles go through local memory at all (the
*direct* kernel for small products does not); split-K; and for tensor cores the MMA kind and
the kernel's variants.

``GemmConfig`` is data that every stage reads: the search spaces and heuristics choose one
(simt.py, mma.py), the tuner times them (runtime/opencl/gemm_bench.py), the generators build
one (source.py, mma.py). What a configuration means for its kernel, its local memory,
registers and description, is the kernel kind's own (simt.py, mma.py; dispatch.describe for
any), so this module stays below all of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


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


def with_split(cfg: GemmConfig, m: int, n: int, k: int, batch: int, units: int
               ) -> GemmConfig:
    """Split K when the output has too few tiles to keep the compute units busy and K is long
    (skinny products): slices of at least 512, whole steps of KWG each. (Any tiled kernel,
    SIMT or tensor cores, sums its slices in a second kernel.)"""
    if not cfg.local:
        return cfg
    tiles = math.ceil(m / cfg.mwg) * math.ceil(n / cfg.nwg) * batch
    split = 1
    while tiles * split < 2 * units and split < 16 and k % (2 * split * cfg.kwg) == 0 and \
            k // (2 * split) >= 512:
        split *= 2
    return replace(cfg, split=split) if split != cfg.split else cfg


__all__ = ["GemmConfig", "with_split"]
