"""Arguments that are views of one buffer, overlapping in part, with a write: NumPy's result.

NumPy runs a function's operations one after another on the memory the views share: a write
through one argument is seen by the next read through another, and each operation reads its
inputs as if copied first (``x[1:] += x[:-1]``). Traced as separate parameters, such arguments
would not see each other's writes, so ``alias_classes`` (signature.py) refuses them with
``OverlapWriteError``. This module runs such a call instead with every group of overlapping
arguments replaced by one array spanning their memory, and the function given a view of it
in place of each argument (``TensorProxy._view``: the tracer's own views, which already stage
an overlapping read through a temporary): one parameter, as ``f(x, x)`` is one parameter, so
each operation sees the data NumPy's would.

Refused, naming why: views whose element layouts cannot be views of one array (different
dtypes or byte orders over the same bytes, offsets between them that are not a multiple of
the item size), an argument that overlaps itself (``as_strided`` with a zero stride), where
NumPy leaves the result of a write undefined, and arrays of backends without such views.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyopencl.array as cla

from fusejit.errors import UnsupportedOperationError
from fusejit.frontend.trace import TensorProxy


class OverlapWriteError(UnsupportedOperationError):
    """Arguments that overlap in memory, one of them written: run as views (``call``)."""


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


def _refuse(i: int, j: int, why: str) -> OverlapWriteError:
    return OverlapWriteError(
        f"arguments {i} and {j} overlap in memory and the function writes into one of them, "
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


def plan(flat: list[Any], pairs: tuple[tuple[int, int, bool], ...]) -> tuple[list[Any], tuple]:
    """(one array per group of overlapping arguments, and for each member: its position, its
    group, its affine map into the group's array, its shape, whether it is writeable)."""
    spans: list[Any] = []
    views = []
    for group in connected([pair[:2] for pair in pairs]):
        members = sorted(group)
        arrays = [flat[i] for i in members]
        first = members[0]
        kinds = {type(a) for a in arrays}
        if not kinds <= {np.ndarray} and not kinds <= {cla.Array}:
            raise _refuse(first, members[1], "fusejit runs them as views of one array only "
                          "where they are all NumPy or all pyopencl arrays")
        dtype = arrays[0].dtype
        for i, a in zip(members, arrays):
            if a.dtype != dtype or not a.dtype.isnative:
                raise _refuse(first, i, f"they read the same bytes as {dtype} and {a.dtype}")
            if _self_overlapping(a) and (not isinstance(a, np.ndarray) or a.flags.writeable):
                raise _refuse(first, i, f"argument {i} overlaps itself, where NumPy leaves "
                              "the result of a write undefined")
        layouts = [_layout(a) for a in arrays]
        low = min(lo for _, lo, _, _ in layouts)
        high = max(hi for _, _, hi, _ in layouts)
        item = dtype.itemsize
        for i, (start, _, _, strides) in zip(members, layouts):
            if (start - low) % item or any(s % item for s in strides):
                raise _refuse(first, i, "their elements are not aligned with each other")
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
        views += [(i, len(spans), m[0], tuple(a.shape), w)  # type: ignore[index]
                  for i, a, m, w in zip(members, arrays, maps, writeable)]
        spans.append(span)
    return spans, tuple(views)


def viewing(fn: Callable[..., Any], n_pos: int, kwnames: tuple[str, ...]) -> Callable[..., Any]:
    """``fn`` called as ``g(views, *args, *kwargs values, *spans)``: each argument ``views``
    names (a static tuple, ``plan``'s second part) made a view of its group's span."""
    def on_views(views: tuple, *rest: Any) -> Any:
        given = list(rest)
        spans = given[n_pos + len(kwnames):]
        for i, group, affine, shape, writeable in views:
            given[i] = spans[group]._view(affine, shape, readonly=not writeable) \
                if isinstance(spans[group], TensorProxy) else spans[group]
        return fn(*given[:n_pos], **dict(zip(kwnames, given[n_pos:n_pos + len(kwnames)])))
    on_views.__module__ = None  # (not fusejit's: what ``fn`` reads is the user's state)
    return on_views


def call(fused: Any, flat: list[Any], n_pos: int, kwnames: tuple[str, ...],
         pairs: tuple[tuple[int, int, bool], ...]) -> Any:
    """Run ``fused`` (a Fused) on ``flat`` (positional, then keyword arguments) whose arrays
    ``pairs`` overlap, with each group of them passed as one span (see the module's doc)."""
    spans, views = plan(flat, pairs)
    inner = fused._overlapping.get((n_pos, kwnames))
    if inner is None:
        statics = {0} | {i + 1 for i in fused._static_nums if i < n_pos} | {
            n_pos + 1 + k for k, name in enumerate(kwnames) if name in fused._static_names}
        inner = type(fused)(viewing(fused._traced, n_pos, kwnames), statics,
                            autotune=fused.autotune, validate=fused._validate,
                            matmul_precision=fused.matmul_precision)
        inner._overlapping = None  # (its spans never overlap: it never comes here)
        fused._overlapping[(n_pos, kwnames)] = inner
    members = {v[0] for v in views}
    rest = [None if i in members else v for i, v in enumerate(flat)]
    return inner(views, *rest, *spans)
