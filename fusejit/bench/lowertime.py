"""The Python side of a cold compile: ``f.lower(*args)`` (trace + passes + emit, no build, no
launch) of a freshly decorated workload, in milliseconds.

``python -m fusejit.bench.lowertime [--scale full] [--procs 5] [--reps 100]`` prints, per
workload, the first lower() of a process (after imports and ``default_queue()``, as
:mod:`fusejit.bench.cold` times it: each in its own child process) and the steady state (fresh
``Fused`` objects in a process that already lowered every other workload). Medians and minima.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

FAMILIES = ("gelu", "black_scholes", "softmax", "layernorm")


def _lower_ms(family: str, scale: str, reps: int, warm: bool) -> list[float]:
    import numpy as np
    import pyopencl.array as cla

    import fusejit
    from fusejit import fuse

    from fusejit.bench.backends import _bind
    from fusejit.bench.workloads import SCALES, workloads

    queue = fusejit.default_queue()
    cases = {wl.family: wl for wl in workloads(SCALES[scale], FAMILIES)}
    args = {name: [cla.empty(queue, s.shape, np.float32) for s in wl.inputs]
            for name, wl in cases.items()}
    if warm:  # every other workload first: code paths and caches as a long-running process has
        for name, wl in cases.items():
            if name != family:
                fuse(_bind(wl.fn, np, name)).lower(*args[name])
    wl = cases[family]
    samples = []
    for _ in range(reps):
        f = fuse(_bind(wl.fn, np, family))
        t0 = time.perf_counter()
        f.lower(*args[family])
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


def _row(name: str, samples: Sequence[float]) -> str:
    return f"{name:<28} median {statistics.median(samples):7.2f}  min {min(samples):7.2f}"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fusejit.bench.lowertime", description=__doc__)
    p.add_argument("--scale", default="full", help="workload sizes (tiny, small, full)")
    p.add_argument("--procs", type=int, default=5, help="child processes for the first call")
    p.add_argument("--reps", type=int, default=100, help="steady-state lower() calls")
    p.add_argument("--workloads", default=",".join(FAMILIES))
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:  # one first-in-process sample
        print(json.dumps(_lower_ms(args.child, args.scale, 1, warm=False)))
        return 0
    print(f"f.lower() of a fresh fused function, ms ({args.scale} sizes)")
    for family in args.workloads.split(","):
        first = []
        for _ in range(args.procs):
            out = subprocess.run([sys.executable, "-m", "fusejit.bench.lowertime", "--child",
                                  family, "--scale", args.scale], check=True,
                                 capture_output=True, text=True).stdout
            first += json.loads(out.strip().splitlines()[-1])
        print(_row(f"{family} first in process", first))
        print(_row(f"{family} steady state", _lower_ms(family, args.scale, args.reps, True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
