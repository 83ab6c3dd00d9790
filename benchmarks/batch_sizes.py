"""A softmax called on 50 distinct batch sizes, ``f(x[:n])``: programs built and time taken.

    python benchmarks/batch_sizes.py [--start 1000] [--count 50] [--cols 64]

Runs with a fresh FUSEJIT_CACHE_DIR (so every program is really compiled), once with the
default ``dynamic=None`` and once with ``dynamic=False`` (every shape specialised). Each result
is checked against NumPy. Prints one JSON line per mode.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", type=int, default=1000)
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--cols", type=int, default=64)
    ap.add_argument("--static-too", action="store_true", help="also time dynamic=False")
    args = ap.parse_args()
    os.environ["FUSEJIT_CACHE_DIR"] = tempfile.mkdtemp()
    import fusejit

    x = np.random.default_rng(0).standard_normal((args.start + args.count, args.cols))
    x = x.astype(np.float32)
    for dynamic in (None, False) if args.static_too else (None,):
        f = fusejit.fuse(softmax, dynamic=dynamic)
        t0 = time.perf_counter()
        for n in range(args.start, args.start + args.count):
            np.testing.assert_allclose(f(x[:n]), softmax(x[:n].astype(np.float64)),
                                       rtol=2e-6, atol=1e-7)
        total = time.perf_counter() - t0
        info = f.cache_info()
        print(json.dumps({"dynamic": dynamic, "batch_sizes": args.count, "traces": info.traces,
                          "compiles": info.compiles, "disk_hits": info.disk_hits,
                          "total_s": round(total, 3)}), flush=True)


if __name__ == "__main__":
    main()
