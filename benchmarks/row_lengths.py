"""Softmax, layernorm and ``x.sum(axis=-1)`` over 50 distinct row lengths, ``f(x[:, :n])``:
programs built (``f.cache_info()``) and time taken.

    python benchmarks/row_lengths.py [--start 100] [--stop 1100] [--count 50] [--rows 64]

The lengths are ``count`` values spread evenly over ``[start, stop]`` (odd, even and
power-of-two lengths among them). Runs with a fresh FUSEJIT_CACHE_DIR, so every program is
really compiled, with the default ``dynamic=None`` (``--static`` for ``dynamic=False``).
Each result is checked against NumPy. Prints one JSON line per workload.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np


def row_sum(x):
    return x.sum(axis=-1)


def lengths(start: int, stop: int, count: int) -> list[int]:
    return sorted({int(round(v)) for v in np.linspace(start, stop, count)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", type=int, default=100)
    ap.add_argument("--stop", type=int, default=1100)
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--static", action="store_true", help="dynamic=False (every length)")
    ap.add_argument("--only", default="", help="comma-separated workloads to run")
    args = ap.parse_args()
    os.environ["FUSEJIT_CACHE_DIR"] = tempfile.mkdtemp()
    import fusejit  # (after FUSEJIT_CACHE_DIR is set)
    from fusejit.bench import workloads
    from fusejit.bench.backends import _bind

    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.rows, args.stop)).astype(np.float32)
    w, b = rng.standard_normal((2, args.stop)).astype(np.float32)
    softmax = _bind(workloads.softmax, np, "softmax")
    layernorm = _bind(workloads.layernorm, np, "layernorm")
    cases = {"softmax": (softmax, lambda n: (x[:, :n],)),
             "layernorm": (layernorm, lambda n: (x[:, :n], w[:n], b[:n])),
             "sum": (row_sum, lambda n: (x[:, :n],))}
    ns = lengths(args.start, args.stop, args.count)
    for name in args.only.split(",") if args.only else cases:
        fn, make = cases[name]
        f = fusejit.fuse(fn, dynamic=False if args.static else None)
        t0 = time.perf_counter()
        for n in ns:
            inputs = make(n)
            want = fn(*(a.astype(np.float64) for a in inputs))
            np.testing.assert_allclose(f(*inputs), want, rtol=3e-5, atol=3e-5)
        total = time.perf_counter() - t0
        info = f.cache_info()
        print(json.dumps({"workload": name, "dynamic": False if args.static else None,
                          "row_lengths": len(ns), "traces": info.traces,
                          "compiles": info.compiles, "disk_hits": info.disk_hits,
                          "total_s": round(total, 2)}), flush=True)


if __name__ == "__main__":
    main()
