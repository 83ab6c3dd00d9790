"""Shared by the examples: their options, kernel-launch counting and the results table."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyopencl as cl
from pyopencl import _cl

from fusejit import fuse
from fusejit.bench.timing import median_ms


def parse_args(doc: str | None) -> argparse.Namespace:
    """The examples' command line: ``--size`` elements and ``--repeat`` timed runs."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--repeat", type=int, default=5)
    return parser.parse_args()


@contextlib.contextmanager
def counting_pyopencl_launches() -> Iterator[list[int]]:
    """Counts kernels that pyopencl.array / pyopencl.clmath operations enqueue: their kernel
    invokers call ``pyopencl._cl.enqueue_nd_range_kernel``."""
    count: list[int] = []
    real = _cl.enqueue_nd_range_kernel

    def counted(*args: Any) -> Any:
        count.append(1)
        return real(*args)

    _cl.enqueue_nd_range_kernel = counted
    try:
        yield count
    finally:
        _cl.enqueue_nd_range_kernel = real


def max_abs_error(got: Any, want: Any) -> float:
    got = got.get() if hasattr(got, "get") else got
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))


def report(title: str, queue: cl.CommandQueue, n: int, error: float, kernels: dict[str, int],
           times: dict[str, float]) -> None:
    """Print the error, the launches per call and the timing table."""
    print(f"{title} on {queue.device.name.strip()}, {n:,} elements")
    print(f"max abs error vs NumPy: {error:.3g}")
    print("kernels launched per call: "
          + ", ".join(f"{name} {count}" for name, count in kernels.items()))
    fused = times["fused"]
    print(f"\n{'variant':<10} {'median ms':>10} {'vs fused':>9}")
    for name, ms in times.items():
        print(f"{name:<10} {ms:>10.3f} {ms / fused:>8.1f}x")


def compare(title: str, fn: Callable[..., Any], unfused: Callable[..., Any],
            host: Sequence[np.ndarray], device: Sequence[Any], queue: cl.CommandQueue,
            repeat: int) -> None:
    """Run ``fn`` fused, ``unfused`` (the same ops as pyopencl calls) and with NumPy; report the
    largest error against NumPy, the kernels each launches per call and the median times."""
    fused = fuse(fn)
    got, want = fused(*device), fn(*host)
    pairs = zip(got, want) if isinstance(want, tuple) else [(got, want)]
    error = max(max_abs_error(g, w) for g, w in pairs)
    with counting_pyopencl_launches() as unfused_launches:
        unfused(*device)
        queue.finish()
    kernels = {"fused": len(fused.lower(*device).kernels), "unfused": len(unfused_launches)}
    times = {
        "fused": median_ms(lambda: fused(*device), queue, repeat),
        "unfused": median_ms(lambda: unfused(*device), queue, repeat),
        "numpy": median_ms(lambda: fn(*host), queue, repeat),
    }
    report(title, queue, host[0].size, error, kernels, times)
