"""Host cost of a cached fused call, the enqueue stubbed out so only fusejit's Python dispatch
is timed (CPU time, best of 25 rounds of 5000 calls): a function that captures nothing (the
fast path, which issue 9 requires to stay within +0.3 µs), one that calls a helper function
(whose identity each call checks), one that reads a guarded global scalar, one that calls
helpers from a captured list, one that reads a captured dict of scalars, one that reads a
captured device array (implicit input) and one a small NumPy array (guarded by content), a
bound method, a callable object and a partial
(``fuse(obj.f)``, ``fuse(obj)``, ``fuse(functools.partial(g, a=2.0))``: their object and
arguments are captured state), and
Adam with constants against Adam with its hyperparameters and step count as arguments.

    PYTHONPATH=. python benchmarks/dispatch_overhead.py
"""

from __future__ import annotations

import functools
import time
import timeit

import numpy as np
import pyopencl.array as cla

import fusejit
import fusejit.runtime.opencl.executable as executable

ALPHA = 0.5


def _twice(x):
    return x * 2


def _plus_one(x):
    return x + 1


HELPERS = [_twice, _plus_one]
PARAMS = {"scale": 0.5, "shift": 1.0}


class _Layer:
    def __init__(self) -> None:
        self.alpha = 2.0

    def apply(self, x):
        return x * self.alpha + 1

    def __call__(self, x):
        return x * self.alpha + 1


def _scaled(x, a):
    return x * a + 1


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
    def helpers(x):
        for h in HELPERS:
            x = h(x)
        return x

    @fusejit.fuse
    def params(x):
        return x * PARAMS["scale"] + PARAMS["shift"]

    @fusejit.fuse
    def array(x):
        return x * weights + 1

    small = np.full(64, 2.0, np.float32)  # (guarded by content)

    @fusejit.fuse
    def small_array(x):
        return x * small + 1

    @fusejit.fuse
    def adam_constants(p, g, m, v):
        m = 0.9 * m + (1.0 - 0.9) * g
        v = 0.999 * v + (1.0 - 0.999) * (g * g)
        return p - 1e-3 * (m / (1.0 - 0.9 ** 10)) / (np.sqrt(v / (1.0 - 0.999 ** 10)) + 1e-8), m, v

    @fusejit.fuse
    def adam_scalars(p, g, m, v, lr, b1, b2, eps, t):
        m = b1 * m + (1.0 - b1) * g
        v = b2 * v + (1.0 - b2) * (g * g)
        return p - lr * (m / (1.0 - b1 ** t)) / (np.sqrt(v / (1.0 - b2 ** t)) + eps), m, v

    x = cla.to_device(queue, np.ones(64, np.float32))
    state = [cla.to_device(queue, np.ones(64, np.float32)) for _ in range(4)]
    hyper = [1e-3, 0.9, 0.999, 1e-8]
    steps = iter(range(10, 10**9))
    for name, fn, args in (
            ("captures nothing", nothing, lambda: (x,)), ("calls a helper", helper, lambda: (x,)),
            ("a global scalar", scalar, lambda: (x,)),
            ("a list of helpers", helpers, lambda: (x,)), ("a dict", params, lambda: (x,)),
            ("a bound method", fusejit.fuse(_Layer().apply), lambda: (x,)),
            ("a callable object", fusejit.fuse(_Layer()), lambda: (x,)),
            ("a partial", fusejit.fuse(functools.partial(_scaled, a=2.0)), lambda: (x,)),
            ("a captured device array", array, lambda: (x,)),
            ("a captured small array", small_array, lambda: (x,)),
            # Adam's 5 hyperparameters and step as arguments (runtime/opencl/scalar_args.py): the
            # same objects each call, then a new step count each call (derived scalars
            # evaluated again)
            ("adam, constants", adam_constants, lambda: state),
            ("adam, runtime scalars", adam_scalars, lambda: (*state, *hyper, 10)),
            ("adam, new step each call", adam_scalars,
             lambda: (*state, *hyper, next(steps)))):
        fn(*args())
        fn(*args())
        best = min(timeit.repeat(lambda: fn(*args()), number=5000, repeat=25,
                                 timer=time.process_time)) / 5000
        print(f"{name:24s} {best * 1e6:6.2f} µs per cached call")


if __name__ == "__main__":
    main()
