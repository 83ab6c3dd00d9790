"""Horizontal fusion (passes/visit.py): an elementwise output and a reduction over the same
input in one ``@fuse`` function, against the same two results from two separately fused
functions (what the plan was before: two kernels that each read the input). Device arrays;
synchronized time (call + finish, median) and throughput (calls back to back, one finish).

    PYTHONPATH=. python benchmarks/horizontal_fusion.py [--size 26]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
import pyopencl.array as cla

import fusejit
from fusejit.bench.timing import measure, measure_batched

CASES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], bool]] = {
    # name: (elementwise part, reduction part, 2-D input)
    "exp(x)*2, x.sum()": (lambda x: np.exp(x) * 2, lambda x: x.sum(), False),
    "x*3+1, x.max(axis=1)": (lambda x: x * 3 + 1, lambda x: x.max(axis=1), True),
    "sqrt(x), x.sum(axis=0)": (lambda x: np.sqrt(x), lambda x: x.sum(axis=0), True),
    "x-1, x.mean(), x.std()": (lambda x: x - 1, lambda x: (x.mean(), x.std()), False),
}


def _time(call: Callable[[], Any], queue: Any) -> tuple[float, float]:
    def sync() -> None:
        call()
        queue.finish()
    timing, _ = measure(sync, budget_s=0.5, min_reps=10)
    batched = measure_batched(call, lambda _: queue.finish(), timing.median_s, 1.0)
    return timing.median_s * 1e3, batched.median_s * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=22, help="log2 of the elements")
    args = ap.parse_args()
    queue = fusejit.default_queue()
    n = 1 << args.size
    host = np.random.default_rng(0).uniform(0.1, 1.0, n).astype(np.float32)
    print(f"device: {queue.device.name.strip()}, {n} float32 elements")
    print(f"{'case':28s} {'kernels':>9s} {'sync ms':>17s} {'throughput ms':>17s}")
    for name, (ew, red, two_d) in CASES.items():
        x = cla.to_device(queue, host.reshape(1 << (args.size // 2), -1) if two_d else host)
        both = fusejit.fuse(lambda x, ew=ew, red=red: (ew(x), red(x)))
        apart = fusejit.fuse(ew), fusejit.fuse(red)
        h = x.get()
        got, want = both(x), (ew(h), red(h))
        np.testing.assert_allclose(got[0].get(), want[0], rtol=1e-5)
        k_both = len(both.lower(x).kernels)
        k_apart = sum(len(f.lower(x).kernels) for f in apart)
        t_both = _time(lambda: both(x), queue)
        t_apart = _time(lambda: (apart[0](x), apart[1](x)), queue)
        print(f"{name:28s} {k_apart:>4d} -> {k_both:<2d} "
              f"{t_apart[0]:7.3f} -> {t_both[0]:7.3f} {t_apart[1]:7.3f} -> {t_both[1]:7.3f}")


if __name__ == "__main__":
    main()
