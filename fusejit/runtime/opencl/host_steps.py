"""Steps of a launch plan that the host runs between kernels (passes/host_gemm.py): a GEMM core
in NumPy's BLAS on a CPU device whose buffers are host memory.

A step finishes the kernels before it, maps its buffers (PoCL maps its
CPU buffers in place: no copies), runs ``np.matmul`` into the result's mapping and unmaps
them, so the kernels enqueued after it see the product. The executable holds its launch
lock around the whole plan, so a step never interleaves with another thread's launches of the
same kernels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyopencl as cl

from fusejit.codegen.kernels import HostMatmul, HostView, Kernel


def _span(view: HostView) -> tuple[int, int]:
    """(lowest, highest) element the view addresses, relative to its offset."""
    lo = sum(min(0, (d - 1) * s) for d, s in zip(view.shape, view.strides))
    hi = sum(max(0, (d - 1) * s) for d, s in zip(view.shape, view.strides))
    return lo, hi


def _blas_ready(a: np.ndarray) -> np.ndarray:
    """``a`` itself when BLAS can read its last two axes (one of them unit-stride, the other
    past it), else a contiguous copy: NumPy's matmul falls back to a slow loop otherwise."""
    s0, s1 = (abs(s) // a.itemsize for s in a.strides[-2:])
    rows, cols = a.shape[-2:]
    if min(a.strides[-2:]) >= 0 and ((s1 == 1 and s0 >= max(1, cols)) or
                                     (s0 == 1 and s1 >= max(1, rows))):
        return a
    return np.ascontiguousarray(a)


class HostStep:
    """The host's part of one ``Kernel`` record of role "host"."""

    def __init__(self, record: Kernel) -> None:
        self.spec: HostMatmul = record.host  # type: ignore[assignment]  # (role "host": set)
        self.name = record.name

    def __call__(self, queue: cl.CommandQueue, args: Sequence[Any]) -> None:
        spec = self.spec
        # the kernels before it, finished before anything is mapped (whatever the queue's
        # ordering); the maps alone would wait as long on an in-order queue
        queue.finish()
        maps: list[Any] = []
        try:
            # three maps enqueued, one wait: blocking maps cost a round trip each (PoCL:
            # ~0.3 ms against ~0.12 ms for the three)
            views = [self._map(queue, args, v, spec.dtype, flags, maps) for v, flags in (
                (spec.a, cl.map_flags.READ), (spec.b, cl.map_flags.READ),
                (spec.c, cl.map_flags.WRITE_INVALIDATE_REGION))]
            cl.wait_for_events([event for _, event in maps])
            a, b, c = views
            np.matmul(_blas_ready(a), _blas_ready(b), out=c)
        finally:
            for mapped, event in reversed(maps):
                event.wait()  # (a map still under way when something above raised)
                mapped.base.release(queue)

    @staticmethod
    def _map(queue: cl.CommandQueue, args: Sequence[Any], view: HostView, dtype: np.dtype,
             flags: int, maps: list[Any]) -> np.ndarray:
        """``view`` of its buffer, the map enqueued (only the elements it spans)."""
        offset = view.offset + (int(args[view.offset_arg]) if view.offset_arg >= 0 else 0)
        lo, hi = _span(view)
        item = dtype.itemsize
        flat, event = cl.enqueue_map_buffer(queue, args[view.arg], flags, (offset + lo) * item,
                                            (hi - lo + 1,), dtype, is_blocking=False)
        maps.append((flat, event))
        return np.ndarray(view.shape, dtype, buffer=flat, offset=-lo * item,
                          strides=tuple(s * item for s in view.strides))


__all__ = ["HostStep"]
