"""Issue 16's GPU figures, each next to the variant it was chosen against (one run, device
arrays, ms synchronized and throughput as fusejit.bench times them):

* float16 GELU at 2^26: the previous spelling (``vload_half4`` / ``vstore_half4_rte`` straight
  from global memory, which NVIDIA compiles to four 2-byte accesses, 4 lanes) against ushort
  vectors with 8 lanes; both results are compared bit for bit, and with NumPy's float16;
* Black-Scholes at 2^24: 4 lanes (the default), 2 lanes, and for information 2 lanes without
  ``-cl-fp32-correctly-rounded-divide-sqrt`` (which changes results, so fusejit never does it);
* Adam at 2^26 with constants, with runtime hyperparameters, and with a new step each call.

    PYTHONPATH=. python benchmarks/speed_variants.py [--small] [gelu16] [black_scholes] [adam]

The variants are made by swapping fusejit's spellings for the duration of a case (module
attributes), so they measure exactly the kernels fusejit generated before and after.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyopencl.array as cla

import fusejit
import fusejit.runtime.build as fbuild
import fusejit.runtime.opencl as focl
import fusejit.source as fsource
import fusejit.targets.opencl as tocl
from fusejit.bench.timing import measure, measure_batched
from fusejit.bench.workloads import black_scholes, gelu


@contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextmanager
def lanes(n: int | None) -> Iterator[None]:
    if n is None:
        yield
        return
    with patched(fsource, "default_vector_width", lambda *a, **k: n):
        yield


@contextmanager
def old_half_io() -> Iterator[None]:
    load, store = tocl.OpenCLTarget.vector_load, tocl.OpenCLTarget.vector_store

    def vload(self: Any, ptr: str, index: str, dtype: np.dtype, n: int) -> str:
        return f"vload_half{n}({index}, {ptr})" if dtype == np.float16 else \
            load(self, ptr, index, dtype, n)

    def vstore(self: Any, ptr: str, index: str, dtype: np.dtype, n: int) -> str:
        return f"vstore_half{n}_rte({{0}}, {index}, {ptr});" if dtype == np.float16 else \
            store(self, ptr, index, dtype, n)
    with patched(tocl.OpenCLTarget, "vector_load", vload), \
            patched(tocl.OpenCLTarget, "vector_store", vstore):
        yield


@contextmanager
def no_correct_rounding() -> Iterator[None]:
    def options(info: Any) -> list[str]:
        return [o for o in fbuild.build_options(info)
                if o != "-cl-fp32-correctly-rounded-divide-sqrt"]
    with patched(focl, "build_options", options):
        yield


def timed(call: Callable[[], Any], queue: Any) -> str:
    def sync() -> None:
        call()
        queue.finish()
    t, _ = measure(sync, budget_s=0.4, min_reps=10)
    b = measure_batched(call, lambda _: queue.finish(), t.median_s, 0.8)
    return f"sync {t.median_s * 1e3:.4f} ms  throughput {b.median_s * 1e3:.4f} ms"


def gelu16(queue: Any) -> None:
    n = 1 << (26 - SHRINK)
    host = np.random.default_rng(0).uniform(-4, 4, n).astype(np.float16)
    x = cla.to_device(queue, host)
    numpy = gelu(np, host).view(np.uint16)
    before = None
    for name, old in (("before: vload_half4, 4 lanes", True), ("after: ushort8, 8 lanes", False)):
        with (old_half_io() if old else lanes(None)), lanes(4 if old else None):
            f = fusejit.fuse(lambda x: gelu(np, x))
            got = f(x).get().view(np.uint16)
            before = got if before is None else before
            print(f"gelu float16 2^{26 - SHRINK}, {name:30s} {timed(lambda: f(x), queue)}; same bits as "
                  f"before: {np.array_equal(got, before)}; differs from NumPy float16 in "
                  f"{int((got != numpy).sum())} elements", flush=True)


def black_scholes_cases(queue: Any) -> None:
    n = 1 << (24 - SHRINK)
    rng = np.random.default_rng(0)
    args = [cla.to_device(queue, rng.uniform(lo, hi, n).astype(np.float32))
            for lo, hi in ((5, 30), (1, 100), (0.25, 10))]
    base = None
    for name, vec, exact in (("4 lanes (default)", None, True), ("2 lanes", 2, True),
                             ("2 lanes, approximate div/sqrt", 2, False)):
        with lanes(vec), (no_correct_rounding() if not exact else lanes(None)):
            f = fusejit.fuse(lambda s, k, t: black_scholes(np, s, k, t))
            got = [g.get() for g in f(*args)]
            base = got if base is None else base
            same = all(np.array_equal(a, b) for a, b in zip(got, base))
            print(f"black_scholes 2^{24 - SHRINK}, {name:30s} {timed(lambda: f(*args), queue)}; same "
                  f"results as the default: {same}", flush=True)


def adam(queue: Any) -> None:
    lr, b1, b2, eps, step = 1e-3, 0.9, 0.999, 1e-8, 10

    def runtime(p: Any, g: Any, m: Any, v: Any, lr: float, b1: float, b2: float, eps: float,
                t: int) -> tuple[Any, Any, Any]:
        m = b1 * m + (1.0 - b1) * g
        v = b2 * v + (1.0 - b2) * (g * g)
        return p - lr * (m / (1.0 - b1 ** t)) / (np.sqrt(v / (1.0 - b2 ** t)) + eps), m, v

    rng = np.random.default_rng(0)
    arrays = [cla.to_device(queue, rng.uniform(0.1, 1.0, 1 << (26 - SHRINK)).astype(np.float32))
              for _ in range(4)]
    fc = fusejit.fuse(lambda p, g, m, v: runtime(p, g, m, v, lr, b1, b2, eps, step))
    fr = fusejit.fuse(runtime)
    steps = iter(range(step, 10**9))
    for name, call in (("constants", lambda: fc(*arrays)),
                       ("runtime scalars", lambda: fr(*arrays, lr, b1, b2, eps, step)),
                       ("a new step each call", lambda: fr(*arrays, lr, b1, b2, eps,
                                                           next(steps)))):
        print(f"adam 2^{26 - SHRINK}, {name:22s} {timed(call, queue)}", flush=True)


SHRINK = 0  # --small: sizes / 2^10, a smoke test


def main(argv: list[str]) -> None:
    global SHRINK
    if "--small" in argv:
        SHRINK, argv = 10, [a for a in argv if a != "--small"]
    queue = fusejit.default_queue()
    print(f"device: {queue.device.name.strip()}")
    cases = {"gelu16": gelu16, "black_scholes": black_scholes_cases, "adam": adam}
    for name in argv or list(cases):
        cases[name](queue)


if __name__ == "__main__":
    main(sys.argv[1:])
