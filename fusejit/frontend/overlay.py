"""Tracing with captured arrays in place: each implicit input (fusejit.frontend.captured) replaced by its
proxy wherever the traced code can name it, so NumPy code on it is traced, not run on the host
once while tracing (``W.sum()`` would otherwise be baked into the kernel)."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pyopencl.array as cla

from fusejit.errors import CapturedStateError
from fusejit.frontend.captured import (
    MAX_DEPTH,
    Captures,
    fused_code,
    is_code,
    is_fused,
    needs_self,
)


def substituted(fn: Any, captures: Captures, proxy_of: Callable[[Any], Any],
                self_obj: Any) -> tuple[Any, Any]:
    """``fn`` (and ``self``) as the trace runs them: each implicit input replaced by its proxy
    where a function names it (a global or closure name, or the end of an attribute/subscript
    chain from one: ``cfg.w``, ``params["w"]``, ``self.layer.w``), in ``fn`` and in every helper
    function it reaches (rebuilt over a copy of their globals), so NumPy code on the array is
    traced, not run once on the host. Returns (function, self)."""
    trees: dict[tuple[int, str, str], Any] = {}
    self_tree: dict = {}
    for c in captures:
        if c.chain.root == "default" or (self_obj is None and needs_self(c)):
            continue
        value = c.get(self_obj)
        proxy = proxy_of(value)
        if proxy is None:
            if not _holds_implicit(value, proxy_of, 0):
                continue
            proxy = _Deep(proxy_of)  # a container used whole: its arrays replaced inside
        if c.chain.root == "self":
            anchor, steps = c.self_path  # type: ignore[misc]
            if isinstance(anchor, tuple) and anchor[0] == "fused":
                raise CapturedStateError(
                    f"a fuse(obj.method) called from another fused function reads "
                    f"self{''.join('.' + str(s.key) for s in steps + c.chain.steps)}, an "
                    "array read fresh on every call; pass it as an argument there")
            path = steps + c.chain.steps
            node = self_tree if anchor is None else trees.setdefault(anchor, {})
            if not path or not isinstance(node, dict):
                continue  # (self itself is no array)
        else:
            path = c.chain.steps
            key = (id(c.owner), c.chain.root, c.chain.name)
            if not path:
                trees[key] = proxy
                continue
            node = trees.setdefault(key, {})
        for step in path[:-1]:
            node = node.setdefault(step, {})
            if not isinstance(node, dict):
                break  # (an array on the way: its own chain already replaces it)
        else:
            node[path[-1]] = proxy
    if not trees and not self_tree:
        return fn, self_obj
    functions = captures.functions
    rebuilt: dict[int, Any] = {}

    def rebuild(f: Any) -> Any:
        if id(f) in rebuilt:
            return rebuilt[id(f)]
        scope = dict(f.__globals__)
        cells = tuple(types.CellType() for _ in f.__closure__ or ())
        new = types.FunctionType(f.__code__, scope, f.__name__, f.__defaults__,
                                 cells if f.__closure__ else None)
        new.__kwdefaults__ = f.__kwdefaults__
        rebuilt[id(f)] = new
        for name, value in list(scope.items()):
            if isinstance(value, types.FunctionType) and id(value) in functions:
                scope[name] = rebuild(value)
            elif is_fused(value) and id(fused_code(value)) in functions:
                scope[name] = rebuild(fused_code(value))  # (a fused function is inlined)
            if (key := (id(f), "global", name)) in trees:
                scope[name] = _overlay(value, trees[key], rebuilt)
        for name, old, cell in zip(f.__code__.co_freevars, f.__closure__ or (), cells):
            try:
                value = old.cell_contents
            except ValueError:  # not assigned yet: stays empty
                continue
            if isinstance(value, types.FunctionType) and id(value) in functions:
                value = rebuild(value)
            if (key := (id(f), "closure", name)) in trees:
                value = _overlay(value, trees[key], rebuilt)
            cell.cell_contents = value
        return new
    for f in list(functions.values()):
        rebuild(f)
    if self_obj is not None:
        self_obj = _overlay(self_obj, self_tree, rebuilt)
    return rebuilt.get(id(fn), fn), self_obj


class _Deep:
    """A tree leaf: the value is a container (or object) holding implicit inputs."""

    def __init__(self, proxy_of: Callable[[Any], Any]) -> None:
        self.proxy_of = proxy_of


def _holds_implicit(value: Any, proxy_of: Callable[[Any], Any], depth: int) -> bool:
    if proxy_of(value) is not None:
        return True
    if depth > MAX_DEPTH or is_code(value):
        return False
    items = _items(value)
    return items is not None and any(_holds_implicit(v, proxy_of, depth + 1) for _, v in items)


def _items(value: Any) -> list[tuple[Any, Any]] | None:
    if type(value) in (list, tuple):
        return list(enumerate(value))
    if type(value) is dict:
        return list(value.items())
    if hasattr(value, "__dict__") and not isinstance(value, (np.ndarray, cla.Array)):
        return list(vars(value).items())
    return None


def _replaced(value: Any, proxy_of: Callable[[Any], Any], rebuilt: dict[int, Any]) -> Any:
    """``value`` with every implicit input inside it replaced by its proxy."""
    proxy = proxy_of(value)
    if proxy is not None:
        return proxy
    if not _holds_implicit(value, proxy_of, 0):
        return value
    new = {k: _replaced(v, proxy_of, rebuilt) for k, v in _items(value)}  # type: ignore[union-attr]
    if type(value) in (list, tuple):
        return type(value)(new[i] for i in range(len(value)))
    if type(value) is dict:
        return new
    return _AttrOverlay(value, new, rebuilt)


def _overlay(obj: Any, tree: Any, rebuilt: dict[int, Any]) -> Any:
    """``obj`` as the trace sees it: the steps in ``tree`` lead to proxies instead, and its
    methods are the ``rebuilt`` functions."""
    if isinstance(tree, _Deep):
        return _replaced(obj, tree.proxy_of, rebuilt)
    if not isinstance(tree, dict):
        return tree  # the proxy itself
    if type(obj) in (dict, list, tuple):
        items = dict(obj) if type(obj) is dict else list(obj)
        for step, sub in tree.items():
            if step.kind != "item":
                return obj
            items[step.key] = _overlay(obj[step.key], sub, rebuilt)
        return tuple(items) if type(obj) is tuple else items
    attrs = {}
    for step, sub in tree.items():
        if step.kind != "attr":
            return obj
        attrs[step.key] = _overlay(getattr(obj, step.key), sub, rebuilt)
    return _AttrOverlay(obj, attrs, rebuilt)


class _AttrOverlay:
    """An object seen while tracing with some attributes replaced (by proxies of implicit
    inputs); its methods (and a module's functions) are the rebuilt ones, bound to the
    overlay, so they see the proxies too. Writes go to the object itself."""

    def __init__(self, obj: Any, attrs: dict[str, Any], rebuilt: dict[int, Any]) -> None:
        object.__setattr__(self, "_fusejit_obj", obj)
        object.__setattr__(self, "_fusejit_attrs", attrs)
        object.__setattr__(self, "_fusejit_rebuilt", rebuilt)

    def __getattr__(self, name: str) -> Any:
        attrs = object.__getattribute__(self, "_fusejit_attrs")
        if name in attrs:
            return attrs[name]
        obj = object.__getattribute__(self, "_fusejit_obj")
        rebuilt = object.__getattribute__(self, "_fusejit_rebuilt")
        if isinstance(obj, types.ModuleType):
            value = getattr(obj, name)
            return rebuilt.get(id(value), value) if isinstance(value, types.FunctionType) \
                else value
        if name not in getattr(obj, "__dict__", {}):
            raw = getattr(type(obj), name, None)
            if is_fused(raw):
                raw = fused_code(raw)
            if isinstance(raw, types.FunctionType):
                return types.MethodType(rebuilt.get(id(raw), raw), self)
        return getattr(obj, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_fusejit_obj"), name, value)
