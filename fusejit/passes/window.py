"""Window views in GEMM operands: how explain() tells a convolution (an implicit GEMM reading its
operand through a ``sliding_window_view`` map) from any other product, and names its shape.

A window map reads some operand axis at a sum of two of its own axes (output position + window
offset, ``[i0, i1+i4, i2+i5, i3]``); no other movement does (a transpose or slice reads each
operand axis at one axis). The GEMM's M, N and K are then products of the view's axes, shown
factor by factor (M = N*H'*W', N = K filters, K = C*kh*kw), so a reader sees the layer.
"""

from __future__ import annotations

import math

from fusejit.ir.graph import Node, format_arg
from fusejit.ir.ops import LEAVES, REDUCE, Op
from fusejit.passes.plan import Group

# values computed by kernels of their own: a window below one is not in this operand's loads
_KERNELS = REDUCE | {Op.MATMUL, Op.SCAN, Op.SVDVALS}


def is_window(node: Node) -> bool:
    """A VIEW whose map reads an operand axis at a sum of several of its axes."""
    return node.op is Op.VIEW and any(sum(1 for c in coefs if c) > 1 for _, coefs in node.arg)


def find_window(operand: Node, stop: set[Node]) -> Node | None:
    """The first window view in ``operand``'s prologue cone (above ``stop``), or None."""
    seen: set[Node] = set()
    stack = [operand]
    while stack:
        n = stack.pop()
        if n in seen or n in stop or n.op in LEAVES or n.op in _KERNELS:
            continue
        seen.add(n)
        if is_window(n):
            return n
        stack.extend(n.srcs)
    return None


def reads_window(group: Group) -> bool:
    """Does the GEMM group's product read an operand through a window map (a convolution)?"""
    m = group.matmul
    return m is not None and any(find_window(src, set()) is not None for src in m.srcs)


def _factors(dims: list[int], total: int) -> tuple[str, list[int]]:
    """The leading ``dims`` whose product is ``total``, as 'a*b*c', and the dims left over."""
    taken, size = [], 1
    while dims and size < total:
        size *= dims[0]
        taken.append(dims.pop(0))
    return ("*".join(map(str, taken)) if len(taken) > 1 and size == total else str(total)), dims


def describe(m: Node, stop: set[Node]) -> str:
    """'' for an ordinary product; for a convolution, its window map and GEMM shape."""
    a, b = m.srcs
    for name, operand in (("a", a), ("b", b)):
        window = find_window(operand, stop)
        if window is None:
            continue
        *batch, rows, k = a.shape
        cols = b.shape[-1]
        # the operand's dims before it was reshaped to a matrix: batch, then M's (or K's for
        # b), then K's (or N's), in the order the contraction laid them out
        src = operand
        while src.op is Op.RESHAPE and src.srcs[0].size == src.size:
            src = src.srcs[0]
        dims = [d for d in src.shape if d != 1]  # (length-1 axes belong to nobody)
        for d in batch:
            _, dims = _factors(dims, d)
        first, dims = _factors(dims, rows if name == "a" else k)
        second, _ = _factors(dims, k if name == "a" else cols)
        m_text, k_text = (first, second) if name == "a" else (str(rows), first)
        n_text = str(cols) if name == "a" else second
        return (f"implicit GEMM (a convolution): {name} is read through the window map "
                f"{format_arg(window)} of {window.srcs[0].describe()}, no im2col buffer; "
                f"M = {m_text}, N = {n_text}, K = {k_text}"
                + (f", batch {'*'.join(map(str, batch))}" if batch else ""))
    return ""


def im2col_size(operand: Node) -> str:
    """What an operand takes stored as a plain matrix (the host BLAS path's im2col)."""
    size = math.prod(operand.shape) * operand.dtype.itemsize
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.1f} KiB"
