"""What a kernel writer (``scan``, ``svd``, ``gemm/``) reads of the module being built.

``source.SourceModule`` dispatches each group to its kind's writer and passes itself; the
writers name it by this protocol rather than by importing source.py, which imports them.
"""

from __future__ import annotations

from typing import Protocol

from fusejit.ir.graph import Graph
from fusejit.codegen.kernels import Partial
from fusejit.codegen.lowering import Lowering
from fusejit.passes.plan import Group
from fusejit.targets.base import Target


class ModuleContext(Protocol):
    graph: Graph
    target: Target
    # the device's DeviceLimits (passes/plan.py), or None where a caller gave none
    limits: object
    is_gpu: bool
    # the widest work-group a barrier may synchronise
    barrier_group: int
    # per-work-group partial results of split kernels; a writer appends its buffers
    partials: list[Partial]

    def _lowering(self, group: Group, target: Target | None = None) -> Lowering:
        """A fresh Lowering of ``group``'s values (its arguments, the temporaries it loads)."""
        ...


__all__ = ["ModuleContext"]
