"""Common-subexpression elimination.

Nodes are hash-consed, so structurally equal nodes are already one object; what is left is
operand order: commutative ops get their operands in a canonical (first-seen) order so that
``a*b`` and ``b*a`` become one node.
"""

from __future__ import annotations

from fusejit.ir.graph import Graph, Node
from fusejit.ir.ops import COMMUTATIVE
from fusejit.passes.rewrite import rewrite


def cse(graph: Graph) -> tuple[Graph, int]:
    before = len(graph)
    rank = {node: i for i, node in enumerate(graph.toposort())}

    def canonical(node: Node) -> Node | None:
        if node.op not in COMMUTATIVE or len(node.srcs) != 2:
            return None
        a, b = node.srcs
        if rank.get(a, -1) > rank.get(b, -1) and a.shape == b.shape:
            return node.replace(srcs=(b, a))
        return None

    graph, _ = rewrite(graph, canonical)
    return graph, before - len(graph)
