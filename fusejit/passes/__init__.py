"""Graph passes. Each is a pure ``Graph -> (Graph, count)`` function; ``PIPELINE`` lists them in
order and ``run_pipeline`` runs them, verifying the graph after each pass in debug mode."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from fusejit.ir.graph import Graph, verify
from fusejit.passes.cse import cse
from fusejit.passes.dce import dce
from fusejit.passes.fold import fold
from fusejit.passes.hoist import hoist
from fusejit.passes.simplify import simplify

Pass = Callable[[Graph], tuple[Graph, int]]

# (name, pass, what its count means)
PIPELINE: tuple[tuple[str, Pass, str], ...] = (
    ("fold", fold, "nodes folded to constants"),
    ("simplify", simplify, "nodes rewritten by algebraic identities"),
    ("cse", cse, "duplicate nodes merged"),
    ("dce", dce, "dead nodes and no-op writes removed"),
    ("hoist", hoist, "scalar expressions computed once per call on the host"),
)

DEBUG = os.environ.get("FUSEJIT_DEBUG", "") not in ("", "0")


@dataclass(frozen=True)
class PassRecord:
    name: str
    count: int
    meaning: str
    nodes_before: int
    nodes_after: int


def run_pipeline(graph: Graph) -> tuple[Graph, tuple[PassRecord, ...]]:
    records = []
    for name, fn, meaning in PIPELINE:
        before = len(graph)
        graph, count = fn(graph)
        if DEBUG:
            verify(graph)
        records.append(PassRecord(name, count, meaning, before, len(graph)))
    return graph, tuple(records)
