"""A synchronized cached call of a 1024-element chain of 8 elementwise ops, written plainly and
reading its constants from each kind of captured state (issue 30: guards cost at most about a
microsecond): µs per call with the real launch and ``queue.finish()``, the cases interleaved
over 40 rounds of 200 calls and the best round kept (a shared machine is noisy).

    PYTHONPATH=. python benchmarks/captured_chain.py

On PoCL, ``POCL_MAX_PTHREAD_COUNT=1`` makes the figures steadier on a busy machine.
"""

from __future__ import annotations

import functools
import timeit

import numpy as np
import pyopencl.array as cla

import fusejit


def _mul(x):
    return x * 1.01


def _add(x):
    return x + 0.5


HELPERS = [_mul, _add] * 4
PARAMS = {"a": 1.01, "b": 0.5}
A = 1.01


def plain(x):
    for _ in range(4):
        x = x * 1.01 + 0.5
    return x


def with_args(x, a, b):
    for _ in range(4):
        x = x * a + b
    return x


def helpers(x):
    for h in HELPERS:
        x = h(x)
    return x


def params(x):
    for _ in range(4):
        x = x * PARAMS["a"] + PARAMS["b"]
    return x


def global_scalar(x):
    for _ in range(4):
        x = x * A + 0.5
    return x


class Chain:
    def __init__(self) -> None:
        self.a, self.b = 1.01, 0.5

    def f(self, x):
        return with_args(x, self.a, self.b)

    def __call__(self, x):
        return with_args(x, self.a, self.b)


def main() -> None:
    queue = fusejit.default_queue()
    x = cla.to_device(queue, np.ones(1024, np.float32))
    w = cla.to_device(queue, np.ones(1024, np.float32))

    def captured_array(x):
        for _ in range(4):
            x = x * 1.01 + w
        return x

    cases = [("plain", plain, (x,)),
             ("a list of helpers", helpers, (x,)),
             ("a dict", params, (x,)),
             ("a global scalar", global_scalar, (x,)),
             ("a bound method", Chain().f, (x,)),
             ("a callable object", Chain(), (x,)),
             ("a partial", functools.partial(with_args, a=1.01, b=0.5), (x,)),
             ("an array argument", lambda x, w: with_args(x, 1.01, w), (x, w)),
             ("a captured array", captured_array, (x,))]
    fused = [(name, fusejit.fuse(fn), args) for name, fn, args in cases]
    best = {name: float("inf") for name, _, _ in fused}
    for name, f, args in fused:
        f(*args)
        f(*args)
    queue.finish()
    for _ in range(40):
        for name, f, args in fused:
            def call(f=f, args=args):
                f(*args)
                queue.finish()
            best[name] = min(best[name], timeit.timeit(call, number=200) / 200)
    for name, _, _ in fused:
        print(f"{name:20s} {best[name] * 1e6:6.2f} µs per synchronized call")


if __name__ == "__main__":
    main()
