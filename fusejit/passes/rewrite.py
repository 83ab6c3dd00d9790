"""The one graph-rewriting loop the passes share."""

from __future__ import annotations

from collections.abc import Callable

from fusejit.ir.graph import Graph, Node


def rewrite(graph: Graph, rule: Callable[[Node], Node | None], max_rounds: int = 8
            ) -> tuple[Graph, int]:
    """Rebuild ``graph`` bottom-up, replacing each node by ``rule(node)`` until it returns None.

    Returns the new graph and how many replacements the rule made.
    """
    memo: dict[Node, Node] = {}
    changes = 0
    for node in graph.toposort():
        srcs = tuple(memo[s] for s in node.srcs)
        new = node if all(a is b for a, b in zip(srcs, node.srcs)) else node.replace(srcs=srcs)
        for _ in range(max_rounds):
            replaced = rule(new)
            if replaced is None or replaced is new:
                break
            new, changes = replaced, changes + 1
        memo[node] = new
    outputs = tuple(memo[n] for n in graph.outputs)
    writes = tuple((p, memo[n]) for p, n in graph.writes)
    if outputs == graph.outputs and writes == graph.writes:
        return graph, changes  # unchanged: keep the graph (and its cached order)
    return graph.with_roots(outputs, writes), changes
