"""Host cost of a cached fused call, the enqueue stubbed out so only fusejit's Python dispatch
is timed (CPU time, best of 25 rounds of 5000 calls): a function that captures nothing (the
fast path, which issue 9 requires to stay within +0.3 µs), one that calls a helper function
(whose identity each call checks), one that reads a guarded global scalar and one that reads a
captured array (implicit input).

    PYTHONPATH=. python benchmarks/dispatch_overhead.py
"""

from __future__ import annotations

import time
import timeit

import numpy as np
import pyopencl.array as cla

import fusejit
import fusejit.runtime.executable as executable

ALPHA = 0.5


def _twice(x):
    return x * 2


def main() -> None:
    queue = fusejit.default_queue()
    executable._enqueue = lambda *a, **k: None  # launchers bind it when they are generated
    weights = cla.to_device(queue, np.ones(64, np.float32))

    @fusejit.fuse
    def nothing(x):
        return x * 2 + 1

    @fusejit.fuse
    def helper(x):
        return _twice(x) + 1

    @fusejit.fuse
    def scalar(x):
        return x * ALPHA + 1

    @fusejit.fuse
    def array(x):
        return x * weights + 1

    x = cla.to_device(queue, np.ones(64, np.float32))
    for name, fn in (("captures nothing", nothing), ("calls a helper", helper),
                     ("a global scalar", scalar),
                     ("a captured device array", array)):
        fn(x)
        fn(x)
        best = min(timeit.repeat(lambda: fn(x), number=5000, repeat=25,
                                 timer=time.process_time)) / 5000
        print(f"{name:24s} {best * 1e6:6.2f} µs per cached call")


if __name__ == "__main__":
    main()
