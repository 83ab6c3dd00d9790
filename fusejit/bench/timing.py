"""How things are timed, and the device measurements the tables are read against.

* :func:`measure`: two warm-up calls (the first compiles and its result is checked against NumPy;
  fusejit tunes launch parameters on a kernel's second call), then samples of one synchronized
  call each until both ``min_reps`` samples and ``budget_s`` seconds are reached; the median is
  reported.
* :func:`measure_batched`: throughput: rounds of many calls enqueued back to back and one wait,
  the median time per call. On a GPU this hides the launch and wake-up latency of each call
  behind the previous kernel (what CUDA-event timings and steady-state pipelines see); for
  host implementations it equals the synchronized time.
* :func:`copy_bandwidth`: ``cl.enqueue_copy`` of one large buffer, counting bytes read plus
  written: the roofline every achieved GB/s is compared with.
* :func:`host_overhead`: what a cached fused call costs on the host, next to a raw launch.
* :func:`cold_compile`: the first call of a fresh fused GELU in a child process whose kernel
  caches are all off, so the build really compiles.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla


@dataclass(frozen=True)
class Timing:
    median_s: float
    min_s: float
    max_s: float
    reps: int


def measure(run: Callable[[], Any], budget_s: float, min_reps: int = 3,
            max_reps: int = 1000, warmup: int = 2) -> tuple[Timing, Any]:
    """Time ``run`` (which must wait for its own completion); returns the timing and the first
    warm-up call's result."""
    first = run()
    for _ in range(warmup - 1):
        run()
    samples: list[float] = []
    clock = time.perf_counter
    start = clock()
    while len(samples) < max_reps and (len(samples) < min_reps or clock() - start < budget_s):
        t0 = clock()
        run()
        samples.append(clock() - t0)
    return Timing(statistics.median(samples), min(samples), max(samples), len(samples)), first


def median_ms(fn: Callable[[], Any], queue: cl.CommandQueue, repeat: int) -> float:
    """Median ms of ``fn(); queue.finish()`` over ``repeat`` runs after one untimed warm-up run
    (it builds kernels and fills memory pools): the demo's and the examples' timing."""
    def run() -> None:
        fn()
        queue.finish()
    timing, _ = measure(run, budget_s=0.0, min_reps=repeat, warmup=1)
    return timing.median_s * 1e3


def measure_batched(call: Callable[[], Any], sync: Callable[[Any], None], per_call_s: float,
                    budget_s: float, rounds: int = 5, max_calls: int = 200) -> Timing:
    """Per-call time of ``k`` calls then one ``sync`` of the last result, ``k`` sized from a
    synchronized call's time ``per_call_s`` so a round takes about ``budget_s / rounds``."""
    k = int(max(2, min(max_calls, budget_s / rounds / max(per_call_s, 1e-7))))
    samples: list[float] = []
    clock = time.perf_counter
    for _ in range(rounds):
        t0 = clock()
        out = None
        for _ in range(k):
            out = call()
        sync(out)
        samples.append((clock() - t0) / k)
        del out
    return Timing(statistics.median(samples), min(samples), max(samples), rounds * k)


def copy_bandwidth(queue: cl.CommandQueue, nbytes: int, reps: int = 10) -> dict[str, float]:
    """Device-to-device copy bandwidth in GB/s (1e9 bytes), counting read + written bytes."""
    dev = queue.device
    nbytes = int(min(nbytes, dev.max_mem_alloc_size, dev.global_mem_size // 8))
    nbytes -= nbytes % 4096
    mf = cl.mem_flags
    src = cl.Buffer(queue.context, mf.READ_WRITE, nbytes)
    dst = cl.Buffer(queue.context, mf.READ_WRITE, nbytes)
    cl.enqueue_fill_buffer(queue, src, np.uint8(1), 0, nbytes)
    cl.enqueue_fill_buffer(queue, dst, np.uint8(0), 0, nbytes)

    def run() -> None:
        cl.enqueue_copy(queue, dst, src)
        queue.finish()
    timing, _ = measure(run, budget_s=0.0, min_reps=reps, warmup=1)
    src.release()
    dst.release()
    return {"bytes": nbytes, "median_s": timing.median_s,
            "gbs": 2 * nbytes / timing.median_s / 1e9,
            "best_gbs": 2 * nbytes / timing.min_s / 1e9}


def _per_call_us(call: Callable[[], Any], finish: Callable[[], None], n: int,
                 rounds: int = 5) -> dict[str, float]:
    """Median µs of ``call(); finish()``, and µs per call of ``n`` calls then one finish."""
    call()
    finish()
    clock = time.perf_counter
    single = []
    for _ in range(n):
        t0 = clock()
        call()
        finish()
        single.append(clock() - t0)
    batched = []
    for _ in range(rounds):
        t0 = clock()
        for _ in range(n):
            call()
        finish()
        batched.append((clock() - t0) / n)
    return {"us_per_call": statistics.median(single) * 1e6,
            "us_per_call_batched": statistics.median(batched) * 1e6}


def host_overhead(queue: cl.CommandQueue, n: int = 500) -> dict[str, Any]:
    """µs per call of a cached fused 4-op chain on 1024 elements, vs raw pyopencl launches."""
    from fusejit import fuse

    from fusejit.bench.backends import _bind
    from fusejit.bench.clshim import ClNamespace
    from fusejit.bench.workloads import chain_fn

    x = cla.to_device(queue, np.linspace(-2, 2, 1024, dtype=np.float32))
    fused = fuse(_bind(chain_fn(4), np, "chain4"))
    ns = ClNamespace(queue)
    xu = ns.asarray(x.get())
    unfused = _bind(chain_fn(4), ns, "chain4")
    noop = cl.Program(queue.context, "__kernel void noop(__global float *x) { }").build().noop
    noop.set_args(x.base_data)

    def raw() -> None:
        cl.enqueue_nd_range_kernel(queue, noop, (1024,), None)
    return {
        "elements": 1024, "ops": 4, "calls": n,
        "fused": _per_call_us(lambda: fused(x), queue.finish, n),
        "unfused_4_launches": _per_call_us(lambda: unfused(xu), queue.finish, n),
        "raw_pyopencl_launch": _per_call_us(raw, queue.finish, n),
    }


def cold_compile(size: int, timeout_s: float = 300.0) -> dict[str, Any]:
    """Run :mod:`fusejit.bench.cold` in a child with PyOpenCL's and the drivers' kernel caches
    disabled and fresh PyOpenCL and fusejit cache dirs, so the first call really compiles and
    the second really autotunes."""
    with tempfile.TemporaryDirectory(prefix="fusejit-cold-") as tmp:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYOPENCL_NO_CACHE="1", PYOPENCL_CACHE_DIR=tmp,
                   FUSEJIT_CACHE_DIR=tmp, POCL_KERNEL_CACHE="0", CUDA_CACHE_DISABLE="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        try:
            proc = subprocess.run([sys.executable, "-m", "fusejit.bench.cold", str(size)],
                                  env=env, check=False, capture_output=True, text=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"status": f"failed: timed out after {timeout_s:.0f} s"}
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"status": f"failed: {tail[0]}"}
    return {"status": "ok", **json.loads(proc.stdout.strip().splitlines()[-1])}
