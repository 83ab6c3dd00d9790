"""Per-call time of cached calls on Vulkan against OpenCL, in one process on one machine.

    python benchmarks/vulkan_calls.py [--cases chain8-10,chain8-20,softmax,layernorm]
                                      [--seconds 0.5] [--rows 256]

For chain8 (2^10 and 2^20 float32), softmax (rows x 1024) and layernorm (rows/2 x 4096), with
device arrays in and a new output each call (as a user's loop writes ``y = f(x)``):

* sync: one call, then ``finish()``: median per call (the latency a synchronized caller sees);
* host: the 30 calls of that loop alone, before its ``finish()``, per call: the host's time
  (fusejit's Python, wgpu's recording and submission), median;
* b2b: 30 calls in a row, then one ``finish()``: median over repeats, per call (issue 35's
  back-to-back loop).

on the Vulkan device (fusejit.vulkan arrays) and on the OpenCL device (pyopencl arrays), and
Vulkan's time over OpenCL's. At 2^10 elements the device time is negligible: what is left is
the host's per-call cost (fusejit's Python, wgpu's recording and submission, the wait).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from fusejit import fuse
from fusejit.bench import workloads

ROW = 30  # calls back to back per finish


def per_call(call: Callable[[], Any], finish: Callable[[], None], seconds: float
             ) -> tuple[float, float, float]:
    """(sync, host, back-to-back) seconds per call, medians over ``seconds`` each."""
    for _ in range(3):
        call()
    finish()
    sync = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(sync) < 5:
        t0 = time.perf_counter()
        call()
        finish()
        sync.append(time.perf_counter() - t0)
    host, b2b = [], []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(b2b) < 3:
        t0 = time.perf_counter()
        for _ in range(ROW):
            y = call()
        t1 = time.perf_counter()
        finish()
        host.append((t1 - t0) / ROW)
        b2b.append((time.perf_counter() - t0) / ROW)
        del y
    return statistics.median(sync), statistics.median(host), statistics.median(b2b)


def cases(rows: int) -> dict[str, tuple[Callable[..., Any], list[np.ndarray]]]:
    rng = np.random.default_rng(0)
    chain = workloads.chain_fn(8)
    out: dict[str, tuple[Callable[..., Any], list[np.ndarray]]] = {}
    for p in (10, 20):
        out[f"chain8-{p}"] = (lambda a: chain(np, a),
                              [rng.uniform(-2, 2, 2**p).astype(np.float32)])
    out["softmax"] = (lambda a: workloads.softmax(np, a),
                      [rng.standard_normal((rows, 1024)).astype(np.float32)])
    out["layernorm"] = (lambda a, w, b: workloads.layernorm(np, a, w, b),
                        [rng.standard_normal((rows // 2, 4096)).astype(np.float32),
                         rng.uniform(0.5, 1.5, 4096).astype(np.float32),
                         rng.uniform(-0.5, 0.5, 4096).astype(np.float32)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="chain8-10,chain8-20,softmax,layernorm")
    ap.add_argument("--rows", type=int, default=256, help="softmax rows (layernorm: half)")
    ap.add_argument("--seconds", type=float, default=0.5, help="per measurement")
    args = ap.parse_args()
    import pyopencl.array as cla

    import fusejit
    import fusejit.vulkan as fv

    vk = fv.default_device()
    queue = fusejit.default_queue()
    print(f"vulkan: {vk.name}; opencl: {queue.device.name.strip()}")
    print(f"{'case':>12} {'vk sync':>9} {'cl sync':>9} {'vk/cl':>6} {'vk host':>9} "
          f"{'cl host':>9} {'vk b2b':>9} {'cl b2b':>9} {'vk/cl':>6}  (us per call)")
    table = cases(args.rows)
    for name in args.cases.split(","):
        fn, host = table[name]
        got = {}
        for dev, put, finish in (("vk", lambda a: fv.to_device(a, vk), vk.finish),
                                 ("cl", lambda a: cla.to_device(queue, a), queue.finish)):
            f, xs = fuse(fn), [put(a) for a in host]
            got[dev] = per_call(lambda f=f, xs=xs: f(*xs), finish, args.seconds)
        (vs, vh, vb), (cs, ch, cb) = got["vk"], got["cl"]
        print(f"{name:>12} {vs * 1e6:9.1f} {cs * 1e6:9.1f} {vs / cs:6.2f} {vh * 1e6:9.1f} "
              f"{ch * 1e6:9.1f} {vb * 1e6:9.1f} {cb * 1e6:9.1f} {vb / cb:6.2f}")


if __name__ == "__main__":
    main()
