"""Runtime row lengths: reduction kernels that take the length of the reduced axis at launch.

Under ``@fuse(dynamic=...)`` a reduction over the last axis (softmax, layernorm,
``x.sum(axis=-1)``) is generated so that its source does not change with the row length
``n`` within a *bucket*, and one program serves every ``n`` there (the in-process dynamic path
reuses a program when the source comes out the same; see fusejit/compile/recompiles.py):

* the bucket is the next power of two (at least ``MIN_BUCKET``): the kernels that keep a row
  in registers (the row caches and per-work-item arrays of codegen/reduce.py) need a
  compile-time bound, so the work-group strategy is chosen for the bucket's longest row
  and the kernel loops, with a guard, up to the true length passed at launch (``n_r``); on
  GPUs the unrolled loops over a row kept in registers have no guard that leaves them: the
  slots past ``n_r`` load the row's last element and are masked (the reduction's identity,
  no argmax index, no store), so a lane's loads issue together;
* CPU kernels read rows as OpenCL vectors of ``vec`` elements: the ``n // vec`` whole vectors
  at any alignment (``vload``), then a scalar tail of ``n % vec`` elements, so every length of
  a bucket shares one program (no vector class in the key);
* row strides that are the row length (a contiguous ``(m, n)`` array) are ``n`` at launch
  (``symbolic.Scaled``), and float constants equal to the row length (``np.mean``'s divisor)
  are launch arguments too; index ranges are the bucket's, so no simplification depends on
  ``n`` itself.

Everything else stays baked in: a kernel generated at ``n`` is exact for ``n``, and only runs
at another length when that length generated the same text. What still specialises: rows of
length 0 and 1, reductions over several axes or not the last one, and split reductions (rows
of 64 Ki elements and more). Elementwise kernels whose iteration space holds the row take its
length at launch as well (fusejit/codegen/rows.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusejit.ir.graph import Node, const_value
from fusejit.ir.shapes import row_major_strides
from fusejit.ir.symbolic import Expr, Var, scaled

MIN_BUCKET = 16


def bucket(n: int) -> int:
    """The longest row length sharing ``n``'s program: the next power of two."""
    return max(MIN_BUCKET, 1 << (n - 1).bit_length())


def row_axis(space: tuple[int, ...], axes: tuple[int, ...]) -> bool:
    """Does a reduction over ``axes`` of ``space`` take its row length at launch?"""
    return len(axes) == 1 and axes[0] == len(space) - 1 and space[-1] >= 2


def row_address(idx: tuple[Expr, ...], shape: tuple[int, ...], strides: tuple[int, ...] | None,
                length: int, var: Var) -> Expr:
    """The element index of ``idx`` in an array of ``shape`` and ``strides`` (None:
    row-major), with the strides that are multiples of a contiguous row of ``length``
    elements in the launch-time extent ``var``."""
    st = strides or row_major_strides(shape)
    rows = bool(shape) and shape[-1] == length and st[-1] == 1
    addr = Expr(0)
    for i, (e, s) in enumerate(zip(idx, st)):
        if rows and i < len(shape) - 1 and s == math.prod(shape[i + 1:]):
            addr = addr + scaled(e * (s // length), var)
        else:
            addr = addr + e * s
    return addr


@dataclass(frozen=True)
class RowExtent:
    """The launch-time row length of one reduction kernel: ``length`` elements (at most
    ``bound``), the kernel argument ``name``."""

    length: int
    name: str
    bound: int

    @property
    def full(self) -> bool:
        """The bucket's own length: on GPUs, a program of its own with no row checks (the
        power-of-two lengths are the common ones, and the checks cost there)."""
        return self.length == self.bound

    @property
    def shortest(self) -> int:
        """The shortest row length whose program this is: more than half the bucket's (its
        lengths), or 2 in the smallest bucket (rows of 0 and 1 have programs of their own)."""
        return 2 if self.bound <= MIN_BUCKET else self.bound // 2 + 1

    @property
    def var(self) -> Var:
        return Var(self.name, 1, max(self.bound, 2))

    def address(self, idx: tuple[Expr, ...], shape: tuple[int, ...],
                strides: tuple[int, ...] | None) -> Expr:
        """The element index of ``idx`` in an array of ``shape`` and ``strides`` (None:
        row-major), with the strides that are multiples of a contiguous row in ``n``."""
        return row_address(idx, shape, strides, self.length, self.var)

    def constant(self, node: Node, args: Any) -> str | None:
        """A float constant equal to the row length (a mean's divisor) as a launch argument:
        its name, or None for any other constant."""
        if node.dtype not in (np.float32, np.float64) or node.shape != ():
            return None
        if float(const_value(node)) != self.length:
            return None
        return args.extent(f"rl{node.dtype.itemsize * 8}", float(self.length), node.dtype)
