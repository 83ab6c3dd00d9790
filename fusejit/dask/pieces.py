"""What runs on a worker: the block, chunk, combine and aggregate tasks of a dask plan.

Each step is a small fused function built from the user's function and the :class:`Recipe`, and
compiled like any other (per block shape; edge blocks are a second specialisation):

* chunk: the user's function traced at the block's shapes, returning its reductions instead of
  its outputs: the prologue and the partial reductions fuse into one kernel, the epilogue is
  dead code. argmax / argmin also return the extreme value; the index is made global here.
* combine: the partial states, concatenated along the reduced axes, merged by one fused
  function (Chan's formula for the (sum, M2, count) of a variance).
* aggregate: the same merge, then the user's function traced at a *virtual* shape (the reduced
  axes at full length, the others at the block's) with each reduction replaced by its merged
  value: the epilogue (mean's division by the full count, var's, std's sqrt) fuses in.
"""

from __future__ import annotations

import math
import threading
import weakref
from typing import Any

import numpy as np

from fusejit.api import Fused
from fusejit.errors import FusejitError
from fusejit.ir.graph import Node, toposort
from fusejit.ir.ops import REDUCE, Op
from fusejit.frontend.pytree import tree_flatten
from fusejit.frontend.trace import TensorProxy, cast, lift
from fusejit.dask.plan import MERGE, Entry, Recipe

_lock = threading.Lock()
_pieces: weakref.WeakKeyDictionary[Fused, dict[Recipe, Pieces]] = weakref.WeakKeyDictionary()
_REDUCE_OF = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "any": np.any,
              "all": np.all, "bitwise_or": np.bitwise_or.reduce,
              "bitwise_and": np.bitwise_and.reduce, "bitwise_xor": np.bitwise_xor.reduce}
_N_PARTS = {"argmax": 2, "argmin": 2, "m2": 2}


def pieces_for(fused: Fused, recipe: Recipe) -> Pieces:
    """The compiled steps of ``recipe`` for this process (built once, then cached)."""
    with _lock:
        per = _pieces.setdefault(fused, {})
        if recipe not in per:
            per[recipe] = Pieces(fused, recipe)
        return per[recipe]


def _roots(result: Any) -> list[Node]:
    leaves, _ = tree_flatten(result)
    return [(leaf if isinstance(leaf, TensorProxy) else lift(leaf)).node for leaf in leaves]


def _reductions(roots: list[Node], recipe: Recipe, where: str) -> list[Node]:
    reds = [n for n in toposort(roots) if n.op in REDUCE]
    want = [("sum" if e.kind == "m2" else e.kind) for e in recipe.entries]
    if [MERGE[r.op] for r in reds] != want:
        raise FusejitError(
            f"the function traced differently at the {where} shapes than at the full shapes "
            f"(reductions {[MERGE[r.op] for r in reds]} vs {want}); a function whose reductions "
            "depend on the shapes cannot be split into dask steps: rechunk the reduced axes "
            "into one chunk and use dask.array.map_blocks")
    return reds


def substitute(roots: list[Node], mapping: dict[Node, Node]) -> list[Node]:
    """``roots`` rebuilt with the nodes of ``mapping`` replaced (nodes are immutable)."""
    env: dict[Node, Node] = {}
    for n in toposort(roots):
        if n in mapping:
            env[n] = mapping[n]
        elif n.srcs:
            env[n] = n.replace(srcs=tuple(env[s] for s in n.srcs))
        else:
            env[n] = n
    return [env[r] for r in roots]


def merge(recipe: Recipe, states: list[tuple[Any, ...]], axes: list[tuple[int, ...]]
          ) -> list[tuple[Any, ...]]:
    """One merge step of every entry's partial states over ``axes`` (traced NumPy code)."""
    out: list[tuple[Any, ...]] = []
    for e, parts, ax in zip(recipe.entries, states, axes):
        if e.kind in _REDUCE_OF:
            (s,) = parts
            out.append((_REDUCE_OF[e.kind](s, axis=ax, keepdims=True).astype(s.dtype),))
        elif e.kind in ("argmax", "argmin"):
            v, i = parts
            best = (np.max if e.kind == "argmax" else np.min)(v, axis=ax, keepdims=True)
            # NumPy's rule: the first NaN wins; else the first extreme; first = lowest index
            hit = np.where(np.isnan(best), np.isnan(v), v == best) if v.dtype.kind == "f" \
                else v == best
            index = np.where(hit, i, np.int64(np.iinfo(np.int64).max))
            out.append((best, np.min(index, axis=ax, keepdims=True)))
        else:  # m2: Chan, Golub and LeVeque's pairwise update, over all partials at once
            m2, n = parts
            s = states[e.ref][0]
            nf = n.astype(m2.dtype)
            total = np.sum(nf, axis=ax, keepdims=True)
            mean = np.sum(s, axis=ax, keepdims=True) / total
            dev = np.where(nf > 0, s / np.maximum(nf, 1) - mean, 0)
            m2 = np.sum(m2, axis=ax, keepdims=True) + np.sum(nf * dev * dev, axis=ax,
                                                              keepdims=True)
            out.append((m2.astype(e.dtype), np.sum(n, axis=ax, keepdims=True)))
    return out


def _group(recipe: Recipe, flat: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    states, k = [], 0
    for e in recipe.entries:
        n = _N_PARTS.get(e.kind, 1)
        states.append(tuple(flat[k:k + n]))
        k += n
    return states


def _flat(states: Any) -> tuple[Any, ...]:
    return tuple(a for parts in states for a in parts)


class Pieces:
    """The fused step functions of one recipe (each compiles per block shape, as usual)."""

    def __init__(self, fused: Fused, recipe: Recipe) -> None:
        self.recipe = recipe
        fn = fused._fn
        statics = set(recipe.static_nums)
        n_flat = sum(_N_PARTS.get(e.kind, 1) for e in recipe.entries)
        # the aggregate's arguments after the states: scalars, statics, epilogue arrays
        others = [i for i, a in enumerate(recipe.args)
                  if a.kind != "array" or i in recipe.epilogue_args]
        axes = [tuple(sorted(e.red_pos)) for e in recipe.entries]

        def chunk(*args: Any) -> tuple[Any, ...]:
            outs = []
            for e, r in zip(recipe.entries, _reductions(_roots(fn(*args)), recipe, "block")):
                if e.kind in ("argmax", "argmin"):
                    x = r.srcs[0]
                    op = Op.MAX if e.kind == "argmax" else Op.MIN
                    outs.append(TensorProxy(Node.make(op, x.dtype, r.shape, (x,), r.arg)))
                outs.append(TensorProxy(r))
            return tuple(outs)

        def combine(*flat: Any) -> tuple[Any, ...]:
            return _flat(merge(recipe, _group(recipe, flat), axes))

        def aggregate(vshapes: tuple, *rest: Any) -> tuple[Any, ...]:
            merged = merge(recipe, _group(recipe, rest[:n_flat]), axes)
            values = [parts[1] if e.kind in ("argmax", "argmin") else parts[0]
                      for e, parts in zip(recipe.entries, merged)]
            it = iter(rest[n_flat:])
            call, dummies = [], []
            for i, a in enumerate(recipe.args):
                if i not in others:  # never a parameter: only reductions may read it
                    node = Node.make(Op.INPUT, np.dtype(a.dtype), vshapes[len(dummies)], (),
                                     -1 - i)
                    dummies.append(node)
                    call.append(TensorProxy(node, readonly=True))
                else:
                    call.append(next(it))
            roots = [n for k, n in enumerate(_roots(fn(*call))) if k not in recipe.plain]
            reds = _reductions(roots, recipe, "aggregate")
            new = substitute(roots, {r: cast(v.node, r.dtype) for r, v in zip(reds, values)})
            if set(toposort(new)) & set(dummies):  # (make_recipe checked this at full shape)
                raise FusejitError("the function's outputs read its array arguments besides "
                                   "their reductions at the block shapes")
            return tuple(TensorProxy(n) for n in new)

        def plain(*args: Any) -> tuple[Any, ...]:  # the outputs with no reduction
            leaves, _ = tree_flatten(fn(*args))
            return tuple(leaves[k] for k in recipe.plain)

        plain.__name__ = f"{getattr(fn, '__name__', 'fn')}_plain"
        self.plain = Fused(plain, static_argnums=tuple(statics))
        chunk.__name__ = f"{getattr(fn, '__name__', 'fn')}_chunk"
        combine.__name__ = f"{getattr(fn, '__name__', 'fn')}_combine"
        aggregate.__name__ = f"{getattr(fn, '__name__', 'fn')}_aggregate"
        self.chunk = Fused(chunk, static_argnums=tuple(statics))
        self.combine = Fused(combine)
        self.aggregate = Fused(aggregate, static_argnums=(0, *(
            1 + n_flat + k for k, i in enumerate(others) if i in statics)))


# -- the tasks (module-level functions: dask pickles them by reference) --------------------------


def _host(a: Any) -> Any:
    # (not np.ascontiguousarray: it turns a 0-d block into a 1-d one)
    return np.asarray(a, order="C") if isinstance(a, np.ndarray) else a


def block_task(fused: Fused, single: bool, *args: Any) -> Any:
    """A blockwise task: the whole function on one block of every argument."""
    leaves, _ = tree_flatten(fused(*map(_host, args)))
    return leaves[0] if single else tuple(leaves)


def plain_task(fused: Fused, recipe: Recipe, single: bool, *args: Any) -> Any:
    """A blockwise task of a reduction plan: only the outputs that reduce nothing."""
    leaves = pieces_for(fused, recipe).plain(*map(_host, args))
    leaves = leaves if isinstance(leaves, tuple) else (leaves,)
    return leaves[0] if single else leaves


def first(block: Any) -> Any:
    """A block under contracted indices (nested lists): the first, as they are all equal (an
    index the values do not vary along, or a single length-1 block)."""
    while isinstance(block, list):
        block = block[0]
    return block


def pick(block: Any, k: int) -> Any:
    """Output ``k`` of a block task's tuple."""
    return first(block)[k]


def identity(x: Any, axis: Any = None, keepdims: bool = True, **_: Any) -> Any:
    return x


def _block_sizes(recipe: Recipe, blocks: tuple[Any, ...]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for a, b in zip(recipe.args, blocks):
        if a.kind == "array":
            for label, d in zip(a.labels, np.shape(b)):
                if label >= 0:
                    sizes[label] = d
    return sizes


def chunk_task(fused: Fused, recipe: Recipe, *args: Any) -> tuple[tuple[Any, ...], ...]:
    """Prologue and partial reductions of one block; ``args`` end with the block offsets along
    the reduced axes when an argmax / argmin needs them."""
    n = len(recipe.args)
    blocks, offsets = tuple(map(_host, args[:n])), args[n:]
    outs = pieces_for(fused, recipe).chunk(*blocks)
    outs = outs if isinstance(outs, tuple) else (outs,)
    sizes = _block_sizes(recipe, blocks)
    count = math.prod(sizes[x] for x in recipe.reduced)
    states, k = [], 0
    for e in recipe.entries:
        if e.kind in ("argmax", "argmin"):
            states.append((outs[k], _global_index(recipe, e, outs[k + 1], sizes, offsets)))
            k += 2
        elif e.kind == "m2":
            # (full_like: a CuPy block's count stays on its GPU)
            states.append((outs[k], np.full_like(outs[k], count, dtype=np.int64)))
            k += 1
        else:
            states.append((outs[k],))
            k += 1
    return tuple(states)


def _global_index(recipe: Recipe, e: Entry, local: np.ndarray, sizes: dict[int, int],
                  offsets: tuple[Any, ...]) -> np.ndarray:
    """A block's flat index over its reduced axes -> the flat index over the full axes."""
    order = sorted(range(len(e.red_pos)), key=lambda k: e.red_pos[k])
    labels = [recipe.reduced[k] for k in order]
    starts = [int(offsets[k][0]) if np.size(offsets[k]) else 0 for k in order]
    # (a CuPy block's indices stay CuPy: NumPy's functions dispatch to CuPy's)
    where = np.unravel_index(local.astype(np.int64), [sizes[x] for x in labels])
    full = [recipe.size(x) for x in labels]
    return np.ravel_multi_index(tuple(w + s for w, s in zip(where, starts)), full).astype(
        np.int64)


def _concat(recipe: Recipe, nested: Any, depth: int = 0) -> Any:
    """The nested lists dask hands combine / aggregate (one level per reduced axis) -> one
    partial state per entry, concatenated along that axis."""
    if not isinstance(nested, list):
        return nested
    parts = [_concat(recipe, x, depth + 1) for x in nested]
    if len(parts) == 1:
        return parts[0]
    return tuple(tuple(np.concatenate([p[i][c] for p in parts], axis=e.red_pos[depth])
                       for c in range(len(parts[0][i])))
                 for i, e in enumerate(recipe.entries))


def combine_task(fused: Fused, recipe: Recipe, nested: Any, axis: Any = None,
                 keepdims: bool = True, **_: Any) -> tuple[tuple[Any, ...], ...]:
    states = _concat(recipe, nested)
    outs = pieces_for(fused, recipe).combine(*_flat(states))
    return tuple(_group(recipe, outs if isinstance(outs, tuple) else (outs,)))


def aggregate_task(fused: Fused, recipe: Recipe, others: tuple[Any, ...], nested: Any,
                   axis: Any = None, keepdims: bool = False, **_: Any) -> tuple[Any, ...]:
    """Final merge and epilogue of one output block: the output leaves as a tuple."""
    return _aggregate(fused, recipe, _concat(recipe, nested), others)


def epilogue_task(fused: Fused, recipe: Recipe, others: tuple[Any, ...], states: Any,
                  *blocks: Any) -> tuple[Any, ...]:
    """The epilogue of one output block when it reads arrays (``x.sum(0) + b``): the merged
    states (of a contracted index: the first, all equal) and those arrays' blocks."""
    states = first(states)
    it = iter(map(first, blocks))
    args = tuple(next(it) if a is None else a for a in others)  # None: an epilogue array
    return _aggregate(fused, recipe, states, tuple(map(_host, args)))


def _aggregate(fused: Fused, recipe: Recipe, states: Any, others: tuple[Any, ...]
               ) -> tuple[Any, ...]:
    kept = {label: states[i][0].shape[pos] for i, e in enumerate(recipe.entries)
            for pos, label in e.kept}
    vshapes = tuple(tuple(recipe.size(x) if x in recipe.reduced else kept.get(x, recipe.size(x))
                          if x >= 0 else 1 for x in a.labels)
                    for i, a in enumerate(recipe.args)
                    if a.kind == "array" and i not in recipe.epilogue_args)
    outs = pieces_for(fused, recipe).aggregate(vshapes, *_flat(states), *others)
    return outs if isinstance(outs, tuple) else (outs,)
