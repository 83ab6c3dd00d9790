"""Arguments that are views of one buffer, overlapping in part, with a write: NumPy's result.

NumPy runs a function's operations one after another on the memory the views share: a write
through one argument is seen by the next read through another, and each operation reads its
inputs as if copied first (``x[1:] += x[:-1]``). Traced as separate parameters, such arguments
would not see each other's writes, so ``alias_classes`` refuses them with ``OverlapWriteError``
when the trace writes one. ``Fused`` then calls again with the key ``as_views`` makes: every
group of overlapping arrays (arguments, and captured arrays read fresh: implicit inputs) is
one array spanning their memory, passed in the place of the group's first argument, and the
trace (compile/trace_call.py) gives the function a view of it in place of each member
(``TensorProxy._view``: the tracer's own views, which already stage an overlapping read
through a temporary): one parameter, as ``f(x, x)`` is one parameter, so each operation sees
the data NumPy's would. It is the same function, the same bound ``self`` and the same
captured state, so methods, callable objects and partials take this path as plain functions
do.

Refused, naming why: views whose element layouts cannot be views of one array (different
dtypes or byte orders over the same bytes, offsets between them that are not a multiple of
the item size), an argument that overlaps itself (``as_strided`` with a zero stride), where
NumPy leaves the result of a write undefined, and arrays of backends without such views.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyopencl.array as cla

from fusejit.compile.signature import CallKey, arg_spec
from fusejit.errors import UnsupportedOperationError
from fusejit.frontend.captured import Implicit
from fusejit.ir.graph import Graph


class OverlapWriteError(UnsupportedOperationError):
    """Arguments that overlap in memory, one of them written: run as views (``call``)."""


class Overlapped:
    """The call keys a function traced as views of one buffer (``as_views``), at most
    ``limit`` (0: no limit, as the signature cache's size), the oldest forgotten first: a key
    holds its guard values, which must not be kept alive for ever (the signature cache that
    serves those calls is bounded the same way)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._keys: dict[CallKey, None] = {}

    def __contains__(self, key: CallKey) -> bool:
        return key in self._keys

    def place(self, flat: list[Any], key: CallKey, n_bound: int) -> tuple[list[Any], CallKey]:
        """``flat`` and ``key`` as the call is traced: views of one array (``as_views``) where
        this signature was refused as separate arrays before, else as they are."""
        if key.aliases and key in self._keys:
            return as_views(flat, key, n_bound)
        return flat, key

    def remember(self, key: CallKey, refused: OverlapWriteError) -> None:
        """A signature refused as separate arrays: its calls are traced as views from now on
        (the caller calls again); ``refused`` itself where they already were."""
        if key.views:
            raise refused
        self.add(key)

    def add(self, key: CallKey) -> None:
        self._keys[key] = None
        while self.limit and len(self._keys) > self.limit:
            del self._keys[next(iter(self._keys))]

    def clear(self) -> None:
        self._keys.clear()

    def __len__(self) -> int:
        return len(self._keys)


class _Span:
    """A NumPy view of raw memory (``__array_interface__``) that keeps its owner alive."""

    def __init__(self, address: int, size: int, dtype: np.dtype, owner: Any, writeable: bool
                 ) -> None:
        self.__array_interface__ = {"data": (address, not writeable), "shape": (size,),
                                    "typestr": dtype.str, "version": 3}
        self.owner = owner


def connected(pairs: Sequence[tuple[int, ...]]) -> list[set[int]]:
    """The groups of the positions ``pairs`` link, directly or through others."""
    parent: dict[int, int] = {}

    def find(a: int) -> int:
        while parent.get(a, a) != a:
            a = parent[a]
        return a
    for i, j in pairs:
        parent[find(i)] = find(j)
    groups: dict[int, set[int]] = {}
    for i in {k for pair in pairs for k in pair}:
        groups.setdefault(find(i), set()).add(i)
    return list(groups.values())


def _layout(a: Any) -> tuple[int, int, int, tuple[int, ...]]:
    """(address of element 0, lowest byte, end byte, strides in bytes) of an array."""
    if isinstance(a, np.ndarray):
        start = a.__array_interface__["data"][0]
    else:
        start = a.base_data.int_ptr + a.offset
    low = start + sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s < 0)
    high = start + sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s > 0)
    return start, low, high + a.dtype.itemsize, tuple(a.strides)


def _refuse(first: str, other: str, why: str) -> OverlapWriteError:
    return OverlapWriteError(
        f"{first} and {other} overlap in memory and the function writes into one of them, "
        f"but {why}. Pass a copy of one of them")


def _self_overlapping(a: Any) -> bool:
    """Does some element of ``a`` share its memory with another (a zero or folded stride)?"""
    dims = sorted((abs(s), n) for n, s in zip(a.shape, a.strides) if n > 1)
    extent = a.dtype.itemsize
    for stride, n in dims:
        if stride < extent:
            return True
        extent = stride * (n - 1) + extent
    return False


def _grids(arrays: list[Any], low: int, size: int, item: int) -> list[tuple[int, ...]]:
    """Candidate shapes for the span (C order), best first: the shape of the NumPy array all
    the views are of, one made of the views' own strides, and one dimension (any view's
    elements are reached, but a write must be a strided region of one dimension per axis)."""
    out = []
    owner = arrays[0]
    while isinstance(owner, np.ndarray) and isinstance(owner.base, np.ndarray):
        owner = owner.base
    if isinstance(owner, np.ndarray) and owner.flags.c_contiguous and owner.ndim > 1 and \
            owner.__array_interface__["data"][0] == low and owner.size == size and \
            all(o.base is owner or o is owner or _root(o) is owner for o in arrays):
        out.append(tuple(owner.shape))
    strides = sorted({abs(s) // item for a in arrays for n, s in zip(a.shape, a.strides)
                      if n > 1 and s} | {1}, reverse=True)
    if len(strides) > 1 and all(x % y == 0 for x, y in itertools.pairwise(strides)) and \
            size % strides[0] == 0:
        out.append((size // strides[0],) + tuple(x // y for x, y in itertools.pairwise(strides)))
    out.append((size,))
    return out


def _root(a: Any) -> Any:
    while isinstance(a, np.ndarray) and isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _map(offset: int, strides: tuple[int, ...], shape: tuple[int, ...],
         grid: tuple[int, ...]) -> tuple[tuple[tuple[int, tuple[int, ...]], ...], bool] | None:
    """The view of a span of shape ``grid`` at ``offset`` with these element strides as an
    affine map (per span dimension: start, coefficient per view axis), and whether a write
    through it is a strided region (one view axis per span dimension); None: not in bounds."""
    steps = [1] * len(grid)
    for k in range(len(grid) - 2, -1, -1):
        steps[k] = steps[k + 1] * grid[k + 1]
    digits = [(offset // steps[k]) % grid[k] if k else offset // steps[0]
              for k in range(len(grid))]
    coefs = [[0] * len(shape) for _ in grid]
    for a, (n, s) in enumerate(zip(shape, strides)):
        if n == 1 or s == 0:
            continue
        k = next(k for k, step in enumerate(steps) if s % step == 0)
        coefs[k][a] = s // steps[k]
    for k in range(len(grid)):
        lo = digits[k] + sum(min(0, c * (n - 1)) for c, n in zip(coefs[k], shape))
        hi = digits[k] + sum(max(0, c * (n - 1)) for c, n in zip(coefs[k], shape))
        if lo < 0 or hi >= grid[k]:
            return None
    plain = all(sum(1 for c in row if c) <= 1 for row in coefs) and \
        len({a for row in coefs for a, c in enumerate(row) if c}) == \
        sum(1 for row in coefs for c in row if c)
    return tuple((d, tuple(row)) for d, row in zip(digits, coefs)), plain


def plan(flat: list[Any], pairs: tuple[tuple[int, int, bool], ...],
         name: Callable[[int], str] = "argument {}".format) -> tuple[list[Any], tuple]:
    """(one array per group of overlapping arrays, and for each member: its position, the
    position of its group's first member (where the group's array is passed), its affine map
    into the group's array, its shape, whether it is writeable); ``name`` says what is at a
    position, for the refusals."""
    spans: list[Any] = []
    views = []
    for group in connected([pair[:2] for pair in pairs]):
        members = sorted(group)
        arrays = [flat[i] for i in members]
        first = name(members[0])
        kinds = {type(a) for a in arrays}
        if not kinds <= {np.ndarray} and not kinds <= {cla.Array}:
            raise _refuse(first, name(members[1]), "fusejit runs them as views of one array "
                          "only where they are all NumPy or all pyopencl arrays")
        dtype = arrays[0].dtype
        for i, a in zip(members, arrays):
            if a.dtype != dtype or not a.dtype.isnative:
                raise _refuse(first, name(i),
                              f"they read the same bytes as {dtype} and {a.dtype}")
            if _self_overlapping(a) and (not isinstance(a, np.ndarray) or a.flags.writeable):
                raise _refuse(first, name(i), f"{name(i)} overlaps itself, where NumPy leaves "
                              "the result of a write undefined")
        layouts = [_layout(a) for a in arrays]
        low = min(lo for _, lo, _, _ in layouts)
        high = max(hi for _, _, hi, _ in layouts)
        item = dtype.itemsize
        for i, (start, _, _, strides) in zip(members, layouts):
            if (start - low) % item or any(s % item for s in strides):
                raise _refuse(first, name(i), "their elements are not aligned with each other")
        size = (high - low) // item
        writeable = [not isinstance(a, np.ndarray) or bool(a.flags.writeable) for a in arrays]
        maps = None
        for grid in _grids(arrays, low, size, item):
            maps = [_map((start - low) // item, tuple(s // item for s in strides), a.shape, grid)
                    for a, (start, _, _, strides) in zip(arrays, layouts)]
            if all(m is not None and (m[1] or not w) for m, w in zip(maps, writeable)):
                break
        if isinstance(arrays[0], np.ndarray):
            span = np.asarray(_Span(low, size, dtype, arrays, any(writeable))).reshape(grid)
        else:
            base = arrays[0]
            span = cla.Array(base.queue, grid, dtype, data=base.base_data,
                             offset=low - base.base_data.int_ptr)
        views += [(i, members[0], m[0], tuple(a.shape), w)  # type: ignore[index]
                  for i, a, m, w in zip(members, arrays, maps, writeable)]
        spans.append(span)
    return spans, tuple(views)




def as_views(flat: list[Any], key: CallKey, n_bound: int) -> tuple[list[Any], CallKey]:
    """The call ``flat``, ``key`` (whose overlapping arrays ``alias_classes`` refused) made one
    whose trace sees each group of them as views of one array (see the module's doc):
    the group's array passed at its first member's position, and the views in the key.
    ``n_bound``: arguments bound before the caller's (fuse(obj.method)'s obj)."""
    n_args = len(flat) - key.implicit
    n_pos = n_args - len(key.kwnames)

    def name(i: int) -> str:
        if i < n_pos:
            return f"argument {i - n_bound}"
        if i < n_args:
            return f"argument {key.kwnames[i - n_pos]!r}"
        read = next((n for g, n in zip(key.guards, key.guard_names)
                     if isinstance(g, Implicit) and g.payload == i - n_args), None)
        return f"the captured array {read}" if read else "an array read from outside the " \
            "function's arguments"
    spans, views = plan(flat, key.aliases, name)
    flat = list(flat)
    specs = list(key.specs)
    for span, i in zip(spans, dict.fromkeys(v[1] for v in views)):  # (in group order)
        flat[i] = span
        specs[i] = arg_spec(span, False, name(i))
    return flat, dataclasses.replace(key, specs=tuple(specs), views=views)


def alias_classes(pairs: Sequence[tuple[int, int, bool]], graph: Graph
                  ) -> list[frozenset[int]]:
    """Sets of array parameters that share memory, from pairs of aliasing call arguments.

    The same array passed twice is traced as one parameter (a write through one name is seen
    through the other, as in NumPy); arguments that only partially overlap may be read, and a
    function that writes into one of them raises OverlapWriteError before anything runs: the
    call then runs with them as views of one array (``as_views``).
    """
    param_of = {p.source: i for i, p in enumerate(graph.params) if p.kind == "array"}
    written = {p for p, _ in graph.writes}
    for a, b, _ in pairs:
        if a in param_of and b in param_of and {param_of[a], param_of[b]} & written:
            raise OverlapWriteError(  # (Fused calls again with the key as_views makes)
                f"arguments {a} and {b} overlap in memory and the function writes into one of "
                "them; NumPy would read partly updated data there. Pass a copy of one of them")
    return [frozenset(m) for m in connected([(param_of[a], param_of[b]) for a, b, _ in pairs
                                             if a in param_of and b in param_of])
            if len(m) > 1]
