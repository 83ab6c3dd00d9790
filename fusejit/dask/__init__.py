"""Fused kernels on every block of a dask array (``pip install fusejit[dask]``).

Calling a ``@fuse`` function with any ``dask.array.Array`` argument returns dask arrays (lazily,
in the function's output structure) instead of computing. The plan (``f.explain(dask_x)``):

* **blockwise**: elementwise functions become one ``da.blockwise`` task per block (chunks
  unified first; NumPy arguments and scalars broadcast as NumPy does); several outputs come from
  one task and one fused kernel launch per block.
* **reduction**: ``da.reduction`` with fused steps: chunk = prologue + partial reductions,
  combine = fused merge of the partials, aggregate = final merge + the fused epilogue. mean, var
  and std merge (sum, M2, count) with Chan's formula; argmax / argmin merge (value, index).
* **rechunk**: functions that need a whole axis in one block (softmax, layernorm: a reduction
  whose result is broadcast back over its input) rechunk that axis into one chunk, with a
  :class:`RechunkWarning` saying how many bytes move. To raise :class:`RechunkError` instead::

      with dask.config.set({"fusejit.rechunk": False}):
          y = f(x)

Workers compile each step once per distinct block shape (edge blocks are a second shape). Pin one
OpenCL device per worker with :class:`DevicePlugin`. Fused functions travel to workers pickled as
their Python function (``cloudpickle``), never as compiled kernels.
"""

from __future__ import annotations

import contextvars
import inspect
import math
import warnings
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import dask
import dask.array as da
import numpy as np

from fusejit.api import Fused
from fusejit.errors import FusejitError
from fusejit.dask import pieces
from fusejit.frontend.pytree import tree_unflatten
from fusejit.dask.plan import Recipe, is_dask_array, make_recipe

__all__ = ["DaskPlan", "DevicePlugin", "RechunkError", "RechunkWarning", "call", "explain",
           "has_dask_array", "pick_device"]


class RechunkWarning(UserWarning):
    """A fused function needs an axis whole in each block, so dask moves data to rechunk it."""


class RechunkError(FusejitError, ValueError):
    """Rechunking was needed but refused with ``dask.config.set({"fusejit.rechunk": False})``."""


def __getattr__(name: str) -> Any:  # distributed is imported only when a plugin is wanted
    if name in ("DevicePlugin", "pick_device"):
        from fusejit.dask import device

        return getattr(device, name)
    raise AttributeError(f"module 'fusejit.dask' has no attribute {name!r}")


def has_dask_array(args: tuple, kwargs: dict) -> bool:
    return any(is_dask_array(a) for a in args) or any(is_dask_array(a) for a in kwargs.values())


@dataclass
class DaskPlan:
    """What ``f.explain(dask_x)`` returns: the dask plan of one call, and why."""

    kind: str
    why: str
    tasks: int
    outputs: list[str]
    rechunks: list[str] = field(default_factory=list)
    moved_bytes: int = 0
    recipe: Recipe | None = None

    def __str__(self) -> str:
        lines = [f"dask plan: {self.kind}" + (f" ({self.why})" if self.why else ""),
                 f"  {self.tasks} tasks in the graph"]
        lines += [f"  rechunk: {r}" for r in self.rechunks]
        lines += [f"  output {i}: {o}" for i, o in enumerate(self.outputs)]
        lines.append("  (f.explain(block) on one NumPy block shows the fused kernels)")
        return "\n".join(lines)


def _bind(fused: Fused, args: tuple, kwargs: dict) -> tuple:
    if not kwargs:
        return args
    bound = inspect.signature(fused._fn).bind(*args, **kwargs)
    if bound.kwargs:
        raise TypeError(f"pass {sorted(bound.kwargs)} positionally when calling a fused "
                        "function on dask arrays")
    return tuple(bound.args)


def call(fused: Fused, args: tuple, kwargs: dict) -> Any:
    """``fused(*args, **kwargs)`` where some argument is a dask array: lazy dask results."""
    leaves, treedef, _ = _build(fused, _bind(fused, args, kwargs))
    return tree_unflatten(treedef, leaves)


def explain(fused: Fused, args: tuple, kwargs: dict) -> DaskPlan:
    """The dask plan of a call (builds the dask graph, computes nothing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RechunkWarning)
        leaves, _, plan = _build(fused, _bind(fused, args, kwargs))
    graph = {}
    for leaf in leaves:
        graph.update(dict(leaf.__dask_graph__()))
    plan.tasks = len(graph)
    plan.outputs = [f"{x.dtype}{list(x.shape)} in chunks {x.chunksize}" for x in leaves]
    return plan


# -- building the dask graph ----------------------------------------------------------------------


def _letter(label: int) -> str:
    return f"l{label}"


def _inputs(recipe: Recipe, args: tuple) -> tuple[list[Any], DaskPlan]:
    """The arguments as blockwise (value, index) pairs, rechunked where a label must be whole."""
    plan = DaskPlan(recipe.kind, recipe.why, 0, [], recipe=recipe)
    whole = set(recipe.whole)
    pairs: list[Any] = []
    for i, (a, info) in enumerate(zip(args, recipe.args)):
        if info.kind != "array":
            pairs += [a, None]
            continue
        x = a if is_dask_array(a) else da.from_array(np.asarray(a), chunks=-1)
        split = {j: -1 for j, label in enumerate(info.labels)
                 if label in whole and x.numblocks[j] > 1}
        if split:
            plan.rechunks.append(f"argument {i} ({x.dtype}{list(x.shape)}) along axes "
                                 f"{sorted(split)}: {x.nbytes} bytes move")
            plan.moved_bytes += int(x.nbytes)
            x = x.rechunk(split)
        index = tuple(_letter(x_) if x_ >= 0 else f"u{i}_{j}" for j, x_ in enumerate(info.labels))
        pairs += [x, index]
    if plan.rechunks:
        if not dask.config.get("fusejit.rechunk", True):
            raise RechunkError(
                f"this function needs whole axes in each block ({recipe.why or 'an index map'}"
                f"), which means rechunking {plan.moved_bytes} bytes; rechunk was refused by "
                "dask.config 'fusejit.rechunk': rechunk those axes yourself "
                "(x.rechunk({axis: -1})) or allow it")
        warnings.warn(f"fusejit rechunks for {recipe.why or 'whole axes'}: "
                      + "; ".join(plan.rechunks), RechunkWarning, stacklevel=6)
    return pairs, plan


def _build(fused: Fused, args: tuple) -> tuple[list[Any], Any, DaskPlan]:
    if any(is_dask_array(a) and any(math.isnan(c) for cs in a.chunks for c in cs)
           for a in args):
        raise ValueError("a dask array argument has unknown chunk sizes; call "
                         "x.compute_chunk_sizes() first")
    recipe, treedef = make_recipe(fused._fn, args, fused._static_nums)
    pairs, plan = _inputs(recipe, args)
    present = {label for a in recipe.args for label in a.labels if label >= 0}
    like = _CHUNK_TYPE.set(next((a._meta for a in args if is_dask_array(a)), None))
    try:
        if recipe.kind == "reduction":
            leaves = _reduction(fused, recipe, pairs, present)
        else:
            leaves = _blockwise(fused, recipe, pairs, present)
    finally:
        _CHUNK_TYPE.reset(like)
    return leaves, treedef, plan


# the first dask argument's meta while a plan is built: results have its chunk type (CuPy
# chunks give CuPy chunks, computed on their GPU: DevicePlugin(kind="cuda"))
_CHUNK_TYPE: contextvars.ContextVar[Any] = contextvars.ContextVar("fusejit_chunk_type",
                                                                  default=None)


def _meta(ndim: int, dtype: Any = float) -> Any:
    like = _CHUNK_TYPE.get()
    if like is not None and not isinstance(like, np.ndarray):
        return da.utils.meta_from_array(like, ndim=ndim, dtype=np.dtype(dtype))
    return np.empty((0,) * ndim, dtype=np.dtype(dtype))


def _out_index(recipe: Recipe, k: int) -> tuple[tuple[str, ...], dict[str, int]]:
    """Output ``k``'s blockwise index and the new axes of length 1 it needs."""
    index, new = [], {}
    for j, label in enumerate(recipe.out_labels[k]):
        if label >= 0:
            index.append(_letter(label))
        else:
            index.append(f"o{k}_{j}")
            new[index[-1]] = 1
    return tuple(index), new


def _blockwise(fused: Fused, recipe: Recipe, pairs: list[Any], present: set[int],
               which: tuple[int, ...] | None = None) -> list[Any]:
    """Outputs ``which`` (default all), from one task per block."""
    which = tuple(range(len(recipe.out_shapes))) if which is None else which
    single = len(which) == 1
    if single:
        index, new = _out_index(recipe, which[0])
    else:
        labels = list(dict.fromkeys(x for k in which for x in recipe.out_labels[k] if x >= 0))
        index, new = tuple(map(_letter, labels)), {}
    new.update({_letter(x): recipe.size(x) for x in
                {x for k in which for x in recipe.out_labels[k] if x >= 0} - present
                if _letter(x) in index})
    meta = _meta(len(index), recipe.out_dtypes[which[0]] if single else float)
    task = partial(pieces.block_task, fused, single) if recipe.kind != "reduction" else \
        partial(pieces.plain_task, fused, recipe, single)
    main = da.blockwise(task, index, *pairs, new_axes=new, concatenate=True, meta=meta,
                        token=f"{getattr(fused, '__name__', 'fused')}-block")
    if single:
        return [main]
    outs = []
    for j, k in enumerate(which):
        idx, new_k = _out_index(recipe, k)
        outs.append(da.blockwise(pieces.pick, idx, main, index, k=j, new_axes=new_k,
                                 concatenate=False,
                                 meta=_meta(len(idx), recipe.out_dtypes[k])))
    return outs


def _reduction(fused: Fused, recipe: Recipe, pairs: list[Any], present: set[int]
               ) -> list[Any]:
    plain = dict(zip(recipe.plain, _blockwise(fused, recipe, pairs, present, recipe.plain)
                     if recipe.plain else ()))
    pairs = list(pairs)
    space = tuple(map(_letter, recipe.space))
    if any(e.kind in ("argmax", "argmin") for e in recipe.entries):
        for label in recipe.reduced:  # block offsets along the reduced axes, for the index
            chunks = next(x.chunks[j] for x, ix in zip(pairs[::2], pairs[1::2]) if ix
                          for j, letter in enumerate(ix) if letter == _letter(label))
            pairs += [da.arange(recipe.size(label), chunks=chunks), (_letter(label),)]
    name = getattr(fused, "__name__", "fused")
    partials = da.blockwise(partial(pieces.chunk_task, fused, recipe), space, *pairs,
                            adjust_chunks={_letter(x): 1 for x in recipe.reduced},
                            concatenate=True, meta=_meta(len(space)), token=f"{name}-chunk")
    epi = recipe.epilogue_args  # (None stands for an epilogue array's block)
    others = tuple(None if i in epi else a
                   for i, (a, info) in enumerate(zip(pairs[:2 * len(recipe.args):2], recipe.args))
                   if info.kind != "array" or i in epi)
    axis = tuple(recipe.space.index(x) for x in recipe.reduced)
    kept = tuple(_letter(x) for x in recipe.space if x not in recipe.reduced)
    final = partial(pieces.combine_task, fused, recipe) if epi else \
        partial(pieces.aggregate_task, fused, recipe, others)
    agg = da.reduction(partials, chunk=pieces.identity,
                       combine=partial(pieces.combine_task, fused, recipe), aggregate=final,
                       axis=axis, keepdims=False, dtype=float, concatenate=False,
                       meta=_meta(len(kept)), name=f"{name}-reduce")
    reduced_outs = [k for k in range(len(recipe.out_shapes)) if k not in plain]
    if epi:  # the epilogue reads arrays too: one more blockwise step over them and the states
        labels = list(dict.fromkeys(x for k in reduced_outs for x in recipe.out_labels[k]
                                    if x >= 0))
        kept = tuple(map(_letter, labels))
        agg = da.blockwise(partial(pieces.epilogue_task, fused, recipe, others), kept,
                           agg, tuple(_letter(x) for x in recipe.space
                                      if x not in recipe.reduced),
                           *[v for i in epi for v in pairs[2 * i:2 * i + 2]],
                           concatenate=False, meta=_meta(len(kept)),
                           new_axes={_letter(x): recipe.size(x) for x in labels
                                     if x not in recipe.space and x not in present},
                           token=f"{name}-epilogue")
    outs, j = [], 0
    for k in range(len(recipe.out_shapes)):
        if k in plain:
            outs.append(plain[k])
            continue
        idx, new_k = _out_index(recipe, k)
        outs.append(da.blockwise(pieces.pick, idx, agg, kept, k=j, new_axes=new_k,
                                 concatenate=False, meta=_meta(len(idx), recipe.out_dtypes[k])))
        j += 1
    return outs
