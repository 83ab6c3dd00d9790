"""pytest-benchmark: a cached call with NumPy arrays in and out against the same call on device
arrays plus ``queue.finish()`` (runtime/opencl/hostmem.py: on a device whose memory is host
memory, PoCL's CPU device, NumPy arrays are used in place or copied once, with no transfers
enqueued). The goal of issue 35: NumPy in and out within 1.5x of device arrays plus finish at
1024 elements. Also 2^20 elements (large arrays: wrapped in place when aligned), and inputs of
each layout that needs a copy. Results are checked against NumPy once, timings never asserted::

    pytest benchmarks/host_arrays.py --benchmark-enable --benchmark-group-by=group
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyopencl.array as cla
import pytest

import fusejit


def affine(x: Any, y: Any) -> Any:
    return np.sin(x) * y + 1.0


f = fusejit.fuse(affine)


def _inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random(n).astype(np.float32), rng.random(n).astype(np.float32)


@pytest.mark.parametrize("n", [1024, 2**20])
@pytest.mark.parametrize("kind", ["numpy", "device+finish", "numpy (NumPy itself)"])
def test_numpy_in_numpy_out(benchmark: Any, queue: Any, kind: str, n: int) -> None:
    x, y = _inputs(n)
    want = affine(x, y)
    if kind == "numpy":
        def run() -> Any:
            return f(x, y)
        got = run()
    elif kind == "device+finish":
        dx, dy = cla.to_device(queue, x), cla.to_device(queue, y)

        def run() -> Any:
            out = f(dx, dy)
            queue.finish()
            return out
        got = run().get()
    else:
        def run() -> Any:
            return affine(x, y)
        got = run()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    benchmark.group = f"host arrays {n}"
    benchmark(run)


@pytest.mark.parametrize("layout", ["strided", "read-only", "byte-swapped"])
def test_inputs_that_need_a_copy(benchmark: Any, layout: str) -> None:
    x, y = _inputs(1024)
    want = affine(x, y)
    if layout == "strided":
        x = np.repeat(x, 2)[::2]
    elif layout == "read-only":
        x.flags.writeable = False
    else:
        x = x.astype(x.dtype.newbyteorder(">"))
    np.testing.assert_allclose(f(x, y), want, rtol=1e-5)
    benchmark.group = "host arrays 1024, copied"
    benchmark(f, x, y)
