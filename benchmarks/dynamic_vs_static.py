"""Kernels for runtime extents against shape-specialised ones, same inputs, same device.

    python benchmarks/dynamic_vs_static.py [--log2 26] [--rows 16384] [--row 1000] [--budget 1.0]

For chain8 (1-D, 2^log2 elements), softmax and layernorm (rows x 1024, and rows x ``--row``,
a length that is not its bucket's: the dynamic kernel is sized for 1024 and takes the length
at launch, fusejit/ir/rows.py; float32), and elementwise kernels over rows x ``--row``
(``x * 1.5 + 0.5`` contiguous and on a view of a rows x 1024 buffer, ``x * w + b`` with row
weights: they take the row length at launch, fusejit/codegen/rows.py), times ``@fuse(dynamic=False)`` and
``@fuse(dynamic=True)`` with ``fusejit.bench.timing.measure`` (synchronized calls; the best of
``--rounds`` alternating medians) and checks both give the same result (``same_result``:
bitwise; ``max_rel_diff``: the largest difference over the largest magnitude). Prints one
JSON line per workload with the ratio dynamic / static.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pyopencl.array as cla

import fusejit
from fusejit.bench.backends import _bind
from fusejit.bench.timing import measure
from fusejit.bench.workloads import chain_fn, layernorm, softmax


def _scale(xp: object, x: cla.Array) -> cla.Array:
    return x * 1.5 + 0.5


def _bias(xp: object, x: cla.Array, w: cla.Array, b: cla.Array) -> cla.Array:
    return x * w + b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2", type=int, default=22)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--row", type=int, default=1000, help="the other row length")
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    q = fusejit.default_queue()
    rng = np.random.default_rng(0)

    def dev(*shape: int) -> cla.Array:
        return cla.to_device(q, rng.uniform(-2, 2, shape).astype(np.float32))

    cases = [
        (f"chain8/2^{args.log2}", chain_fn(8), (dev(1 << args.log2),)),
        (f"softmax/{args.rows}x1024", softmax, (dev(args.rows, 1024),)),
        (f"layernorm/{args.rows}x1024", layernorm, (dev(args.rows, 1024), dev(1024), dev(1024))),
        (f"softmax/{args.rows}x{args.row}", softmax, (dev(args.rows, args.row),)),
        (f"layernorm/{args.rows}x{args.row}", layernorm,
         (dev(args.rows, args.row), dev(args.row), dev(args.row))),
        # elementwise kernels over rows of a runtime length (fusejit/codegen/rows.py): the flat
        # form (contiguous, 2-D), the rows form (row weights; a view of a wider buffer)
        (f"scale/{args.rows}x{args.row}", _scale, (dev(args.rows, args.row),)),
        (f"bias/{args.rows}x{args.row}", _bias,
         (dev(args.rows, args.row), dev(args.row), dev(args.row))),
        (f"view/{args.rows}x{args.row}", _scale, (dev(args.rows, 1024)[:, :args.row],)),
    ]
    for name, fn, inputs in cases:
        runs, outs = {}, {}
        for dynamic in (False, True):
            f = fusejit.fuse(_bind(fn, np, name.split("/")[0]), dynamic=dynamic)
            source = f.lower(*inputs).source
            assert ("n_" in source) == dynamic
            assert ("n_r" in source) == (dynamic and name.startswith(("softmax", "layernorm")))

            def run(f=f) -> np.ndarray:
                out = f(*inputs)
                q.finish()
                return out
            runs[dynamic], outs[dynamic] = run, run().get()
        # rounds alternate between the two, so clock and thermal drift hit both alike
        best = {False: float("inf"), True: float("inf")}
        for _ in range(args.rounds):
            for dynamic in (False, True):
                timing, _ = measure(runs[dynamic], args.budget / args.rounds)
                best[dynamic] = min(best[dynamic], timing.median_s)
        same = bool(np.array_equal(outs[False], outs[True]))
        scale = max(float(np.max(np.abs(outs[False]))), 1e-30)  # (normwise: outputs near 0)
        diff = float(np.max(np.abs(outs[True] - outs[False].astype(np.float64)))) / scale
        print(json.dumps({"workload": name, "static_ms": round(best[False] * 1e3, 4),
                          "dynamic_ms": round(best[True] * 1e3, 4),
                          "ratio": round(best[True] / best[False], 3), "same_result": same,
                          "max_rel_diff": float(f"{diff:.3g}"),
                          "device": q.device.name.strip()}), flush=True)

if __name__ == "__main__":
    main()
