"""Constraints applied after grouping: kernel argument size. (In-place safety and kernel
order are ``schedule.py``'s.)"""

from __future__ import annotations

from collections.abc import Sequence

from fusejit.ir.graph import Graph, Node
from fusejit.ir.ops import Op
from fusejit.passes.plan import Dest, Group, Store, leaves_of

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


def stage(st: Store, temps: list[Node], copies: list[Group], why: str) -> Store:
    """``st`` redirected into a new temporary, and the kernel that copies the temporary into
    the argument afterwards appended to ``copies``."""
    temps.append(st.node)
    copies.append(Group("elementwise", st.node.shape, (st,),
                        f"in-place write to argument {st.dest.index} staged through a "
                        f"temporary: {why}"))
    return Store(st.node, Dest("temp", len(temps) - 1))
