"""Constraints applied after grouping: kernel argument size, and in-place safety.

An in-place write to an argument is stored directly only when no other work-item of its kernel
and no later kernel reads the old values; otherwise it goes through a temporary that a final
kernel copies into the argument, so the result is NumPy's and never a race.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from ..indexing import Index, unravel
from ..ir import Graph, Node
from ..ops import Op
from ..symbolic import Expr
from .plan import Dest, Group, Store, leaves_of, reads_of, row_index

_ARG_BYTES = 8  # a buffer, offset or scalar argument takes at most 8 bytes


def _kernel_args(graph: Graph, stores: Sequence[Store], stop: set[Node]) -> set[tuple]:
    """The kernel arguments a set of stores needs: buffers it writes and reads, scalars."""
    args: set[tuple] = {("out", st.dest.kind, st.dest.index) for st in stores}
    for st in stores:
        for n in leaves_of(st.node, stop):
            if n.op is Op.INPUT:
                args.add(("in", n.arg))
                if graph.params[n.arg].has_offset:
                    args.add(("off", n.arg))
            elif n.op is Op.SCALAR:
                args.add(("scalar", n.arg, n.dtype.str))
            elif n in stop:
                args.add(("temp", id(n)))
    return args


def fit_arguments(graph: Graph, bucket: list[Store], temps: set[Node], limit: int
                   ) -> list[list[Store]]:
    """Split a group whose kernel would take more argument bytes than the device accepts."""
    if len(_kernel_args(graph, bucket, temps)) * _ARG_BYTES <= limit:
        return [bucket]
    parts: list[list[Store]] = [[]]
    for st in bucket:
        trial = parts[-1] + [st]
        if parts[-1] and len(_kernel_args(graph, trial, temps)) * _ARG_BYTES > limit:
            parts.append([st])
        else:
            parts[-1] = trial
    return parts


def inplace_safety(graph: Graph, groups: list[Group], temps: list[Node],
                    aliases: Sequence[frozenset[int]]) -> tuple[list[Group], list[Node]]:
    """Route an in-place write through a temporary when storing it directly could change a
    value that is still to be read: by another work-item of the same kernel (``x[1:] +=
    x[:-1]``, a broadcast read), or by a later kernel. The temporary is copied into the
    argument by a final kernel, so the result is NumPy's, never a race."""
    cls = {p: set(c) for c in aliases for p in c}
    temps = list(temps)
    copies: list[Group] = []
    out = []
    for gi, g in enumerate(groups):
        stores = list(g.stores)
        rows = list(g.row_stores)
        for kind, lst in (("stores", stores), ("rows", rows)):
            for si, st in enumerate(lst):
                if st.dest.kind != "param":
                    continue
                p = st.dest.index
                family = cls.get(p, {p})
                why = _unsafe(graph, g, st, family, kind, temps) or next(
                    (f"kernel {gj} reads argument {p} after it" for gj, later in
                     enumerate(groups[gi + 1:], gi + 1) if _group_reads(later, family, temps)),
                    None)
                if why is None:
                    continue
                lst[si] = stage(st, temps, copies, why)
        out.append(replace(g, stores=tuple(stores), row_stores=tuple(rows)))
    return out + copies, temps


def stage(st: Store, temps: list[Node], copies: list[Group], why: str) -> Store:
    """``st`` redirected into a new temporary, and the kernel that copies the temporary into
    the argument afterwards appended to ``copies``."""
    temps.append(st.node)
    copies.append(Group("elementwise", st.node.shape, (st,),
                        f"in-place write to argument {st.dest.index} staged through a "
                        f"temporary: {why}"))
    return Store(st.node, Dest("temp", len(temps) - 1))


def _group_reads(g: Group, family: set[int], temps: list[Node]) -> bool:
    nodes = [st.node for st in g.stores + g.row_stores] + [r.srcs[0] for r in g.reductions]
    stop = set(temps)
    return any(n.op is Op.INPUT and n.arg in family
               for node in nodes for n in leaves_of(node, stop))


def _unsafe(graph: Graph, g: Group, st: Store, family: set[int], kind: str,
            temps: list[Node]) -> str | None:
    """Why storing ``st`` in place inside ``g`` could race with the group's own reads."""
    stop = set(temps)
    p = st.dest.index
    layout = (graph.params[p].strides, graph.params[p].has_offset)
    if g.kind == "elementwise":
        idx = unravel(Expr.var("gid", max(1, math.prod(g.space))), g.space)
        from ..indexing import broadcast_index

        def at(node: Node) -> Index:
            return broadcast_index(idx, g.space, node.shape)
        written = st.root_index(at(st.node))
        broadcast_store = st.node.shape != g.space
        reads = [(n, i) for other in g.stores for n, i in reads_of(other.node, at(other.node),
                                                                   stop)]
    else:
        if kind != "rows":
            return "a reduction's epilogue writes the argument its rows are read from"
        row = row_index(g.space, g.axes)
        written = st.root_index(row)
        broadcast_store = False
        reads = [(n, i) for other in g.row_stores for n, i in reads_of(other.node, row, stop)]
        reads += [(n, i) for r in g.reductions for n, i in reads_of(r.srcs[0], row, stop)]
        reads += [(n, i) for other in g.stores for n, i in reads_of(
            other.node, unravel(Expr.var("o", math.prod(other.node.shape)), other.node.shape),
            stop)]
    for n, i in reads:
        if n.op is not Op.INPUT or n.arg not in family:
            continue
        if (graph.params[n.arg].strides, graph.params[n.arg].has_offset) != layout:
            return f"argument {n.arg} shares its memory with a different layout"
        if broadcast_store:
            return "other work-items read the elements this kernel writes (broadcast store)"
        if tuple(i) != tuple(written):
            return "work-items read elements that other work-items write"
    return None
