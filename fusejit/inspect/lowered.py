"""What ``f.lower(*args)`` returns (``Lowered``): the traced and optimised graphs, the plan, the
generated source and its kernels (``KernelInfo``), printable as a plan."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fusejit.compile.abstract import Compiled
from fusejit.ir.graph import Graph, format_graph, toposort
from fusejit.passes import PassRecord
from fusejit.passes.partition import Plan
from fusejit.runtime.backend import DeviceInfo
from fusejit.codegen.source import Kernel, Module


@dataclass(frozen=True)
class KernelInfo:
    name: str
    source: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    reason: str
    nodes: int
    role: str = "main"  # main | partial | combine (the two kernels of a split reduction)


@dataclass(frozen=True)
class Lowered:
    """What ``f.lower(*args)`` returns: the traced graph, the plan and the generated source."""

    traced: Graph
    graph: Graph
    passes: tuple[PassRecord, ...]
    plan: Plan
    module: Module
    device: DeviceInfo
    traced_nodes: int  # values the function computed, including ones no output uses
    _compile: Callable[[], Any] | None = dataclasses.field(default=None, compare=False,
                                                             repr=False)

    def compile(self) -> Compiled:
        """Build what was lowered (``f.lower(ShapeDtype(...)).compile()``): later calls with
        this signature only launch. Returns a callable."""
        if self._compile is None:
            raise ValueError("this Lowered was not made by a fused function's lower()")
        return self._compile()

    @property
    def source(self) -> str:
        return self.module.source

    @property
    def kernels(self) -> tuple[KernelInfo, ...]:
        return tuple(KernelInfo(k.name, k.source, k.global_size, k.local_size, k.group.reason,
                                _group_nodes(k), k.role) for k in self.module.kernels)

    def __str__(self) -> str:
        """The optimised graph, then one entry per kernel: why it exists (its group's reason),
        the reductions it computes (by stage) and what it stores, in the graph's %names."""
        names = {n: f"%{i}" for i, n in enumerate(self.graph.toposort())}
        temps = {n: i for i, n in enumerate(self.plan.temps)}
        kernels = self.module.kernels
        lines = [format_graph(self.graph, names), "",
                 f"{len(kernels)} kernel{'s' if len(kernels) != 1 else ''}:"]
        for k in kernels:
            g = k.group
            if k.role == "combine":
                lines.append(f"  {k.name}: combines the partial results of {k.name}_partial")
            else:
                lines.append(f"  {k.name}: {g.reason}")
                if g.kind == "reduce":
                    stages = " | then ".join(", ".join(f"{r.op.name.lower()} {names[r]}"
                                                       for r in stage) for stage in g.stages)
                    lines.append(f"      reduces {stages}")
            if k.role == "partial":
                continue
            stores = [f"{names[s.node]} -> {_dest(s.dest)}" for s in g.stores + g.row_stores]
            stores += [f"{names[r]} -> temp{temps[r]}" for r in g.reductions if r in temps]
            if stores:
                lines.append("      stores " + ", ".join(stores))
        lines += [f"note: {n}" for n in self.plan.notes]
        return "\n".join(lines)


def _dest(dest: Any) -> str:
    return {"output": "out", "param": "%arg", "temp": "temp"}[dest.kind] + str(dest.index) + (
        " (in place)" if dest.kind == "param" else "")


def _group_nodes(kernel: Kernel) -> int:
    g = kernel.group
    roots = [s.node for s in g.stores + g.row_stores] + list(g.reductions)
    return len(toposort(roots))
