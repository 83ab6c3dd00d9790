"""Dead-code elimination.

A graph holds exactly what its roots reach (nodes are only found by walking from the roots), so
values the function computed but never returned are gone once the graph is built; ``api``
reports how many. This pass removes what remains dead at the roots: writes that store an
argument's own unchanged value (``x[...] = x``, ``x += 0`` after folding)."""

from __future__ import annotations

from fusejit.ir.graph import Graph
from fusejit.ir.ops import Op


def dce(graph: Graph) -> tuple[Graph, int]:
    writes = tuple((p, n) for p, n in graph.writes if not (n.op is Op.INPUT and n.arg == p))
    if len(writes) == len(graph.writes):
        return graph, 0
    return graph.with_roots(graph.outputs, writes), len(graph.writes) - len(writes)
