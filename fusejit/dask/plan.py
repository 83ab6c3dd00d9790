"""How a fused function maps onto dask blocks: one abstract trace at the full shapes, then labels.

Every axis of every value in the traced graph gets a *label*: axes that must line up block by
block share one (union-find over elementwise broadcasting and label-preserving views). A label
is *whole* when a block must hold its full length: it is reduced by a reduction the tree cannot
split, or read through an index map that moves data along it (slices, transposes, arange, a
captured constant array). From the labels and the reductions comes the :class:`Recipe`:

* ``blockwise``: no reductions; each block runs the whole function (after rechunking any whole
  label that is split into several chunks);
* ``reduction``: reductions over one set of labels whose operands are elementwise in the
  arguments, an epilogue that reads only their results; chunk / combine / aggregate steps;
* ``rechunk``: everything else with reductions (softmax, layernorm, reductions of reductions):
  the reduced labels are rechunked into one chunk, then each block runs the whole function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusejit.frontend.pytree import tree_flatten
from fusejit.ir.graph import Graph, Node, const_value, toposort
from fusejit.ir.ops import ELEMENTWISE, REDUCE, Op
from fusejit.passes.plan import leaves_of
from fusejit.ir.shapes import row_major_strides
from fusejit.compile.signature import ScalarSpec, arg_spec
from fusejit.frontend.trace import TensorProxy, Tracer, lift

MERGE = {Op.SUM: "sum", Op.PROD: "prod", Op.MAX: "max", Op.MIN: "min", Op.ANY: "any",
         Op.ALL: "all", Op.BIT_OR: "bitwise_or", Op.BIT_AND: "bitwise_and",
         Op.BIT_XOR: "bitwise_xor", Op.ARGMAX: "argmax", Op.ARGMIN: "argmin"}


@dataclass(frozen=True)
class Entry:
    """One reduction of the function, as a partial state the tree merges.

    kind: a MERGE value, or "m2" (the centred second moment of ``ref``'s operand: merged with
        Chan's formula from (sum of entry ``ref``, M2, count)).
    red_pos: axis of this reduction's (keepdims) result holding each reduced label, in the
        order of the recipe's reduced labels.
    kept: (axis, label) of the result's other axes of length > 1.
    dtype: the result's dtype (the partial's, and the value dtype of argmax / argmin below).
    value_dtype: argmax / argmin only: the dtype of the values compared.
    """

    kind: str
    red_pos: tuple[int, ...]
    kept: tuple[tuple[int, int], ...]
    dtype: str
    ref: int = -1
    value_dtype: str = ""


@dataclass(frozen=True)
class ArgInfo:
    """One call argument: 'array' (dask or NumPy), 'scalar' (dynamic) or 'static'."""

    kind: str
    shape: tuple[int, ...] = ()
    dtype: str = ""
    labels: tuple[int, ...] = ()  # per axis; -1 for an axis of length 1


@dataclass(frozen=True)
class Recipe:
    """Everything a worker needs besides the function (hashable: it keys the worker's caches)."""

    kind: str  # blockwise | reduction | rechunk
    args: tuple[ArgInfo, ...]
    static_nums: tuple[int, ...]
    out_labels: tuple[tuple[int, ...], ...]  # per output leaf, per axis (-1: length 1)
    out_shapes: tuple[tuple[int, ...], ...]
    out_dtypes: tuple[str, ...]
    whole: tuple[int, ...] = ()  # labels a block must hold whole
    reduced: tuple[int, ...] = ()  # reduction: the reduced labels, in space order
    space: tuple[int, ...] = ()  # reduction: labels of the partials array
    entries: tuple[Entry, ...] = ()
    sizes: tuple[tuple[int, int], ...] = ()  # label -> full length
    why: str = ""
    plain: tuple[int, ...] = ()  # reduction: outputs with no reduction, computed blockwise
    epilogue_args: tuple[int, ...] = ()  # reduction: arrays the epilogue reads (not reduced)

    def size(self, label: int) -> int:
        return dict(self.sizes)[label]


class Labels:
    """Union-find over axis labels, with the whole flag kept on the class root."""

    def __init__(self) -> None:
        self.parent: list[int] = []
        self.whole: set[int] = set()
        self.size: dict[int, int] = {}

    def fresh(self, size: int, whole: bool = False) -> int:
        self.parent.append(len(self.parent))
        label = len(self.parent) - 1
        self.size[label] = size
        if whole:
            self.whole.add(label)
        return label

    def find(self, a: int) -> int:
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> int:
        a, b = self.find(a), self.find(b)
        if a != b:
            self.parent[b] = a
            if b in self.whole:
                self.whole.add(a)
        return a

    def axes(self, shape: tuple[int, ...], whole: bool = False) -> list[int]:
        return [self.fresh(d, whole) if d != 1 else -1 for d in shape]


def is_dask_array(value: Any) -> bool:
    return type(value).__module__.startswith("dask.array") and hasattr(value, "chunks")


def is_array(value: Any) -> bool:
    return is_dask_array(value) or isinstance(value, np.ndarray)


# -- the abstract trace -------------------------------------------------------------------------


def trace_full(fn: Any, args: tuple, static_nums: frozenset[int]) -> tuple[Graph, Any, list[Node]]:
    """Trace ``fn`` once at the arguments' full shapes (no data): graph, treedef, output nodes."""
    with Tracer() as tracer:
        inputs: list[Any] = []
        for i, a in enumerate(args):
            if i in static_nums:
                inputs.append(a)
            elif is_array(a):
                shape = tuple(int(d) for d in a.shape)
                inputs.append(tracer.array_param(np.dtype(a.dtype), shape,
                                                 row_major_strides(shape), f"arg{i}", i,
                                                 writable=False))
            else:
                if not isinstance(arg_spec(a, False), ScalarSpec):  # (bad ones raise here)
                    raise TypeError(
                        f"argument {i} is a {type(a).__name__}; with dask arrays pass NumPy "
                        "arrays or scalars (each block runs on its worker's device)")
                inputs.append(tracer.scalar_param(a, f"arg{i}", i))
        leaves, treedef = tree_flatten(fn(*inputs))
        nodes = [(leaf if isinstance(leaf, TensorProxy) else lift(leaf)).node for leaf in leaves]
        graph = tracer.graph(nodes)
    return graph, treedef, nodes


# -- labels ---------------------------------------------------------------------------------------


def _view_axes(node: Node) -> tuple[list[int | None], set[int]]:
    """For a VIEW: the source axis each target axis reads position for position (None: a
    broadcast, length 1, or data moved), and the source axes whose data moves (a slice, a
    reversal, a strided or mixed index). Transposes and broadcasts move no data."""
    src = node.srcs[0]
    target: list[int | None] = [None] * node.ndim
    moved: set[int] = set()
    for d, (off, coefs) in enumerate(node.arg):
        if src.shape[d] == 1:
            continue
        hits = [j for j, c in enumerate(coefs) if c]
        if off == 0 and len(hits) == 1 and coefs[hits[0]] == 1 and \
                node.shape[hits[0]] == src.shape[d] and target[hits[0]] is None:
            target[hits[0]] = d
        else:
            moved.add(d)
            for j in hits:
                target[j] = -1  # (read through a moved axis: whole too)
    return target, moved


def label_graph(graph: Graph, arg_labels: dict[int, list[int]], lab: Labels
                ) -> dict[Node, list[int]]:
    """Labels of every node's axes; ``arg_labels`` maps parameter index -> axis labels."""
    env: dict[Node, list[int]] = {}
    for n in graph.toposort():
        if n.op is Op.INPUT:
            param = graph.params[n.arg]
            # a captured constant array is not cut into blocks: whole along its axes
            env[n] = list(arg_labels[n.arg]) if param.kind == "array" else lab.axes(n.shape,
                                                                                    True)
        elif n.op is Op.IOTA:  # its value depends on the position along its axis
            env[n] = [lab.fresh(d, j == n.arg[0]) if d != 1 else -1
                      for j, d in enumerate(n.shape)]
        elif n.op is Op.VIEW:
            src = env[n.srcs[0]]
            axes, moved = _view_axes(n)
            for d in moved:  # data moves along these axes: whole, in and out
                if src[d] >= 0:
                    lab.whole.add(lab.find(src[d]))
            env[n] = [src[k] if k is not None and k >= 0 else
                      (lab.fresh(d, k is not None) if d != 1 else -1)
                      for k, d in zip(axes, n.shape)]
        elif n.op is Op.RESHAPE:
            src = env[n.srcs[0]]
            keep = [k for k, d in enumerate(n.srcs[0].shape) if d != 1]
            outs = [j for j, d in enumerate(n.shape) if d != 1]
            if [n.srcs[0].shape[k] for k in keep] == [n.shape[j] for j in outs]:
                env[n] = [-1] * n.ndim  # only length-1 axes added or removed
                for j, k in zip(outs, keep):
                    env[n][j] = src[k]
            else:  # a real reshape regroups elements: whole, in and out
                for x in src:
                    if x >= 0:
                        lab.whole.add(lab.find(x))
                env[n] = lab.axes(n.shape, True)
        elif n.op in REDUCE:
            src = env[n.srcs[0]]
            env[n] = [-1 if j in n.arg else s for j, s in enumerate(src)]
        elif n.op in ELEMENTWISE:
            out = [-1] * n.ndim
            for s in n.srcs:
                lead = n.ndim - s.ndim
                for k, label in enumerate(env[s]):
                    if label < 0:
                        continue
                    j = k + lead
                    out[j] = label if out[j] < 0 else lab.union(out[j], label)
            env[n] = [lab.fresh(d) if (d != 1 and o < 0) else o for o, d in zip(out, n.shape)]
        else:  # SETITEM (a region write) and anything new: whole, to be safe
            for s in n.srcs:
                for label in env[s]:
                    if label >= 0:
                        lab.whole.add(lab.find(label))
            env[n] = lab.axes(n.shape, True)
    return env


# -- the var pattern ------------------------------------------------------------------------------


def _strip(n: Node) -> Node:
    while n.op in (Op.CAST, Op.VIEW):
        n = n.srcs[0]
    return n


def _centred_square(r: Node, reductions: list[Node]) -> int:
    """If ``r`` is sum((x - sum(x) / count)**2) over r's axes (np.var's second pass), the index
    of the inner sum in ``reductions``; else -1."""
    if r.op is not Op.SUM:
        return -1
    sq = _strip(r.srcs[0])
    if sq.op is Op.MUL and sq.srcs[0] is sq.srcs[1]:
        dev = sq.srcs[0]
    elif sq.op is Op.SQUARE:
        dev = sq.srcs[0]
    elif sq.op is Op.POW and _strip(sq.srcs[1]).op is Op.CONST and \
            float(const_value(_strip(sq.srcs[1]))) == 2.0:
        dev = sq.srcs[0]
    else:
        return -1
    dev = _strip(dev)
    if dev.op is not Op.SUB:
        return -1
    mean = _strip(dev.srcs[1])
    if mean.op is not Op.TRUEDIV or _strip(mean.srcs[1]).op is not Op.CONST:
        return -1
    inner = _strip(mean.srcs[0])
    count = math.prod(inner.srcs[0].shape[a] for a in r.arg) if inner.op is Op.SUM else 0
    if inner.op is not Op.SUM or inner.arg != r.arg or inner not in reductions or \
            _strip(inner.srcs[0]) is not _strip(dev.srcs[0]) or \
            float(const_value(_strip(mean.srcs[1]))) != float(count):
        return -1
    return reductions.index(inner)


# -- the recipe -----------------------------------------------------------------------------------


def make_recipe(fn: Any, args: tuple, static_nums: frozenset[int]) -> tuple[Recipe, Any]:
    """Trace at full shapes and decide the dask plan; also returns the output treedef."""
    graph, treedef, outputs = trace_full(fn, args, static_nums)
    if graph.writes:
        from fusejit.errors import UnsupportedOperationError

        raise UnsupportedOperationError(
            "a fused function called on dask arrays writes into an argument in place; dask "
            "arrays are immutable: return the new value instead")
    lab = Labels()
    infos: list[ArgInfo] = []
    arg_labels: dict[int, list[int]] = {}
    by_source = {p.source: i for i, p in enumerate(graph.params) if p.kind == "array"}
    for i, a in enumerate(args):
        if i in static_nums:
            infos.append(ArgInfo("static"))
        elif is_array(a):
            shape = tuple(int(d) for d in a.shape)
            labels = lab.axes(shape)
            arg_labels[by_source[i]] = labels
            infos.append(ArgInfo("array", shape, np.dtype(a.dtype).str, tuple(labels)))
        else:
            infos.append(ArgInfo("scalar"))
    env = label_graph(graph, arg_labels, lab)
    order = toposort(outputs)
    reductions = [n for n in order if n.op in REDUCE]
    red = set(reductions)

    def final(labels: list[int]) -> tuple[int, ...]:
        return tuple(lab.find(x) if x >= 0 else -1 for x in labels)

    infos = [ArgInfo(a.kind, a.shape, a.dtype, final(list(a.labels))) for a in infos]
    reduced_sets = {frozenset(lab.find(env[r.srcs[0]][a]) for a in r.arg
                              if env[r.srcs[0]][a] >= 0) for r in reductions}
    common = dict(args=tuple(infos), static_nums=tuple(sorted(static_nums)),
                  out_labels=tuple(final(env[n]) for n in outputs),
                  out_shapes=tuple(n.shape for n in outputs),
                  out_dtypes=tuple(n.dtype.str for n in outputs),
                  sizes=tuple(sorted((lab.find(k), v) for k, v in lab.size.items())))
    whole = {lab.find(x) for x in lab.whole}
    if not reductions:
        why = "an index map that moves data along an axis (a slice, a reversal, a reshape, " \
            "arange) or a captured constant array" if whole else ""
        return Recipe("blockwise", whole=tuple(sorted(whole)), why=why, **common), treedef
    plain = tuple(k for k, n in enumerate(outputs) if not (set(toposort([n])) & red))
    entries, why = _entries(reductions, red, env, lab, reduced_sets, whole,
                            [n for k, n in enumerate(outputs) if k not in plain])
    if entries is None:
        reduced = set().union(*reduced_sets)
        return Recipe("rechunk", whole=tuple(sorted(whole | reduced)), why=why, **common), \
            treedef
    (reduced_set,) = reduced_sets
    epilogue = _epilogue_args(graph, [n for k, n in enumerate(outputs) if k not in plain], red,
                              env, lab, reduced_set)
    if epilogue is None:
        why = "outputs that read the arguments along the reduced axes (row fusion)"
        return Recipe("rechunk", whole=tuple(sorted(whole | reduced_set)), why=why,
                      **common), treedef
    first = reductions[0].srcs[0]
    space = [lab.find(x) for x in env[first] if x >= 0]
    for r in reductions[1:]:
        space += [lab.find(x) for x in env[r.srcs[0]] if x >= 0 and lab.find(x) not in space]
    order_red = tuple(x for x in space if x in reduced_set)
    entries = tuple(_place(e, r, env, lab, order_red) for e, r in zip(entries, reductions))
    return Recipe("reduction", reduced=order_red, space=tuple(space), entries=entries,
                  plain=plain, epilogue_args=epilogue, **common), treedef


def _entries(reductions: list[Node], red: set[Node], env: dict[Node, list[int]], lab: Labels,
             reduced_sets: set[frozenset[int]], whole: set[int], outputs: list[Node]
             ) -> tuple[list[tuple[str, int]] | None, str]:
    """(kind, ref) per reduction when a tree reduction applies; else None and why not."""
    if len(reduced_sets) != 1:
        return None, "reductions over different axes"
    (reduced,) = reduced_sets
    if not reduced:
        return None, "reductions over length-1 axes only"
    if whole:
        return None, "an index map or a captured constant array that needs whole axes"
    for r in reductions:
        labels = [lab.find(env[r.srcs[0]][a]) for a in r.arg if env[r.srcs[0]][a] >= 0]
        if len(labels) != len(r.arg) or len(set(labels)) != len(labels):
            return None, "a reduction over a broadcast axis"
    out: list[tuple[str, int]] = []
    for r in reductions:
        deps = leaves_of(r.srcs[0], red) & red  # the reductions it reads directly
        if not deps:
            out.append((MERGE[r.op], -1))
            continue
        ref = _centred_square(r, reductions)
        if ref < 0 or deps != {reductions[ref]} or out[ref][0] != "sum":
            return None, "a reduction that reads another reduction's result (row fusion)"
        out.append(("m2", ref))
    return out, ""


def _epilogue_args(graph: Graph, outputs: list[Node], red: set[Node], env: dict[Node, list[int]],
                   lab: Labels, reduced: frozenset[int]) -> tuple[int, ...] | None:
    """The call arguments the epilogue reads besides the reductions (``x.sum(0) + b``): each
    is cut into blocks along the kept axes; None when one varies along a reduced axis (row
    fusion: softmax) or is not an argument (arange, a captured constant)."""
    found = set()
    for leaf in {leaf for root in outputs for leaf in leaves_of(root, red)}:
        if leaf.op is Op.IOTA or (leaf.op is Op.INPUT and graph.params[leaf.arg].kind != "array"):
            return None
        if leaf.op is Op.INPUT:
            if any(x >= 0 and lab.find(x) in reduced for x in env[leaf]):
                return None
            found.add(graph.params[leaf.arg].source)
    return tuple(sorted(found))


def _place(kind_ref: tuple[str, int], r: Node, env: dict[Node, list[int]], lab: Labels,
           reduced: tuple[int, ...]) -> Entry:
    kind, ref = kind_ref
    src = [lab.find(x) if x >= 0 else -1 for x in env[r.srcs[0]]]
    red_pos = tuple(src.index(x) for x in reduced)
    kept = tuple((j, x) for j, x in enumerate(src) if x >= 0 and x not in reduced)
    value_dtype = r.srcs[0].dtype.str if kind in ("argmax", "argmin") else ""
    return Entry(kind, red_pos, kept, r.dtype.str, ref, value_dtype)
