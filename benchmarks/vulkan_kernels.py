"""Where a Vulkan call's time goes: kernel time by timestamp queries next to the wall clock.

    python benchmarks/vulkan_kernels.py [--size 26] [--rows 16384] [--cases softmax,layernorm]

For chain8 (2^size float32), softmax (rows x 1024 float32) and layernorm (rows/2 x 4096) on
the Vulkan device, prints:

* kernel: the dispatches alone, from GPU timestamps around ten copies in one compute pass,
  after 0.1 s of calls back to back (adapters with ``timestamp-query``);
* sync: one call plus ``finish()``, median (what ``python -m fusejit.bench`` reports first);
* host: the call alone, without waiting (fusejit's and wgpu's host time per call);
* b2b: calls back to back, one wait at the end, per call (the bench's throughput table).

sync - kernel is the per-call latency a synchronized caller pays on top of the kernel.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import fusejit.vulkan as fv
from fusejit import fuse
from fusejit.bench import workloads


class Timestamps:
    """The kernel time of the steps (pipeline, bind group, groups x, y) one call submitted."""

    def __init__(self, device: Any) -> None:
        import wgpu

        self.wgpu, self.dev = wgpu, device.device
        self.steps: list[Any] = []
        submit = device.recorder.submit

        def keep(steps: Sequence[Any]) -> None:  # the last call's steps, replayed below
            self.steps = list(steps)
            submit(steps)

        device.recorder.submit = keep
        self.submit, self.finish = submit, device.finish
        usage = wgpu.BufferUsage
        self.queries = self.dev.create_query_set(type="timestamp", count=2)
        self.resolved = self.dev.create_buffer(size=16, usage=usage.QUERY_RESOLVE | usage.COPY_SRC)
        self.read = self.dev.create_buffer(size=16, usage=usage.MAP_READ | usage.COPY_DST)

    def kernel_s(self, reps: int = 5, copies: int = 10) -> float:
        """Median kernel time of the steps, timed over ``copies`` of them in one pass after
        0.1 s of them back to back (isolated single passes on an idle H200 varied 2x)."""
        end = time.perf_counter() + 0.1
        while time.perf_counter() < end:
            self.submit(self.steps)
        self.finish()
        out = []
        for _ in range(reps):
            enc = self.dev.create_command_encoder()
            cpass = enc.begin_compute_pass(timestamp_writes={
                "query_set": self.queries, "beginning_of_pass_write_index": 0,
                "end_of_pass_write_index": 1})
            for _ in range(copies):
                for pipeline, group, x, y in self.steps:
                    cpass.set_pipeline(pipeline)
                    cpass.set_bind_group(0, group)
                    cpass.dispatch_workgroups(x, y, 1)
            cpass.end()
            enc.resolve_query_set(self.queries, 0, 2, self.resolved, 0)
            enc.copy_buffer_to_buffer(self.resolved, 0, self.read, 0, 16)
            self.dev.queue.submit([enc.finish()])
            self.read.map_sync(self.wgpu.MapMode.READ)
            ticks = np.frombuffer(self.read.read_mapped(), np.uint64).copy()
            self.read.unmap()
            out.append(int(ticks[1] - ticks[0]) * 1e-9 / copies)  # (wgpu reports nanoseconds)
        return statistics.median(out)


def wall(call: Callable[[], Any], finish: Callable[[], None], reps: int = 50
         ) -> tuple[float, float, float]:
    """(sync, host, back-to-back) seconds per call."""
    call()
    finish()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        finish()
        samples.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(reps):
        call()
    host = (time.perf_counter() - t0) / reps
    finish()
    return statistics.median(samples), host, (time.perf_counter() - t0) / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=26, help="chain8 has 2**size elements")
    ap.add_argument("--rows", type=int, default=16384, help="softmax rows (of 1024)")
    ap.add_argument("--cases", default="chain8,softmax,layernorm",
                    help="which of chain8, softmax, layernorm to run")
    args = ap.parse_args()
    dev = fv.default_device()
    print(f"device: {dev.name}, features {sorted(dev.features)}")
    stamps = Timestamps(dev) if "timestamp-query" in dev.features else None
    rng = np.random.default_rng(0)
    chain = workloads.chain_fn(8)
    cases = [(f"chain8 2^{args.size}", lambda a: chain(np, a),
              rng.uniform(-2, 2, 2**args.size).astype(np.float32), 2),
             (f"softmax {args.rows}x1024", lambda a: workloads.softmax(np, a),
              rng.standard_normal((args.rows, 1024)).astype(np.float32), 2)]
    cases.append((f"layernorm {args.rows // 2}x4096",
                  lambda a, w, b: workloads.layernorm(np, a, w, b),
                  rng.standard_normal((args.rows // 2, 4096)).astype(np.float32), 2))
    wb = [fv.to_device(rng.uniform(lo, hi, 4096).astype(np.float32))
          for lo, hi in ((0.5, 1.5), (-0.5, 0.5))]
    for name, fn, host, passes in cases:
        if name.split()[0] not in args.cases.split(","):
            continue
        xs = [fv.to_device(host), *(wb if name.startswith("layernorm") else [])]
        f = fuse(fn)
        sync, per_call, b2b = wall(lambda: f(*xs), dev.finish)
        moved = passes * host.nbytes
        kernel = stamps.kernel_s() if stamps else float("nan")
        print(f"{name}: kernel {kernel * 1e6:.1f} us ({moved / kernel / 1e12:.2f} TB/s), "
              f"sync {sync * 1e6:.1f} us, host {per_call * 1e6:.1f} us, b2b {b2b * 1e6:.1f} us")


if __name__ == "__main__":
    main()
