"""Output pytrees: the nested tuples, lists and dicts (and None) a fused function returns,
flattened to leaves and rebuilt around the results (api.py, compile/aot.py, the dask integration)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    if isinstance(tree, (tuple, list)):
        leaves, defs = [], []
        for item in tree:
            lv, d = tree_flatten(item)
            leaves += lv
            defs.append(d)
        return leaves, (type(tree), tuple(defs))
    if isinstance(tree, dict):
        keys = sorted(tree)
        leaves, defs = [], []
        for k in keys:
            lv, d = tree_flatten(tree[k])
            leaves += lv
            defs.append(d)
        return leaves, (dict, (tuple(keys), tuple(defs)))
    if tree is None:
        return [], None
    return [tree], "*"


def tree_unflatten(treedef: Any, leaves: Sequence[Any]) -> Any:
    # A module-level helper, not a recursive closure: a closure that refers to itself forms a
    # reference cycle that would keep the results (and their pooled buffers) alive until the
    # cyclic garbage collector runs.
    return _build(treedef, iter(leaves))


def _build(d: Any, it: Any) -> Any:
    if d == "*":
        return next(it)
    if d is None:
        return None
    kind, sub = d
    if kind is dict:
        keys, defs = sub
        return {k: _build(x, it) for k, x in zip(keys, defs)}
    return kind(_build(x, it) for x in sub)
