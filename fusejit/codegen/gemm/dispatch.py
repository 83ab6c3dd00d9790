"""A gemm group's kernels by the kind of its configuration: a host BLAS step (host.py), tensor
cores (mma.py, with the ring of mma_async.py and wgmma.py) or the SIMT kernel (source.py).

This is the top of the GEMM package: it alone knows every kind, so the kinds below need not
know each other (the tensor-core generator extends the SIMT one, not the other way round).
"""

from __future__ import annotations

from dataclasses import replace

from fusejit.codegen.context import ModuleContext
from fusejit.codegen.gemm import mma as gemm_mma, simt
from fusejit.codegen.gemm.config import GemmConfig
from fusejit.codegen.gemm.host import host_kernels
from fusejit.codegen.gemm.source import _Gen
from fusejit.codegen.kernels import Kernel
from fusejit.codegen.lowering import Lowering
from fusejit.passes.host_gemm import HostBlas
from fusejit.passes.plan import Group


# targets without the tiled kernels' constructs (GLSL): a work-group of 8x8 work-items, each
# 4x4 outputs loaded straight from global memory into registers
DIRECT = GemmConfig(32, 32, 1, 8, 8, 1, 1, local=False,
                    why="the direct kernel: this target spells no local tiles or vector types")


def gemm_kernels(sm: ModuleContext, name: str, group: Group) -> list[tuple[Kernel, Lowering]]:
    """The kernel of one gemm group, two with split-K (see codegen/gemm/source.py)."""
    if isinstance(group.gemm_config, HostBlas):  # NumPy's BLAS on the host: codegen/gemm/host.py
        return host_kernels(sm, name, group)
    cfg = group.gemm_config
    if not sm.target.tiled_gemm and (cfg is None or cfg.local or cfg.vw > 1 or cfg.mma):
        group = replace(group, gemm_config=DIRECT)
    if getattr(group.gemm_config, "mma", ""):  # tensor cores: fusejit/codegen/gemm/mma.py
        return gemm_mma.MmaGen(sm, name, group).build()
    return _Gen(sm, name, group).build()


def describe(cfg: GemmConfig) -> str:
    """A configuration of either kind as explain() tells it."""
    return gemm_mma.describe(cfg) if cfg.mma else simt.describe(cfg)


__all__ = ["describe", "gemm_kernels"]
