"""pytest-benchmark: a cached gather ``x[i]`` on device arrays (1024 float32 values, 1024 int64
indices), back to back (asynchronous calls) and with ``queue.finish()`` after each call, under
``mode='raise'`` (NumPy's default: the kernel checks every index and the call reads its status
flag, runtime/status.py) against ``np.take(..., mode='clip')`` (no check). Issue 31: the check
took device gathers from 5.8 to 58.8 µs a call. Results are checked against NumPy once,
timings never asserted::

    pytest benchmarks/device_gathers.py --benchmark-enable --benchmark-group-by=group
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyopencl.array as cla
import pytest

import fusejit

N = 1024
FORMS = {"raise": lambda x, i: x[i], "clip": lambda x, i: np.take(x, i, mode="clip")}


@pytest.mark.parametrize("sync", ["async", "finish"])
@pytest.mark.parametrize("mode", list(FORMS))
def test_device_gather(benchmark: Any, queue: Any, mode: str, sync: str) -> None:
    rng = np.random.default_rng(0)
    x, i = rng.random(N).astype(np.float32), rng.integers(0, N, N)
    dx, di = cla.to_device(queue, x), cla.to_device(queue, i)
    f = fusejit.fuse(FORMS[mode])
    np.testing.assert_array_equal(f(dx, di).get(), x[i])
    if sync == "async":
        def run() -> Any:
            return f(dx, di)
    else:
        def run() -> Any:
            out = f(dx, di)
            queue.finish()
            return out
    for _ in range(3):  # (the first calls generate the launchers)
        run()
    benchmark.group = f"device gather {N} ({sync})"
    benchmark(run)
