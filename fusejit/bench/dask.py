"""Dask scale-out benchmark: ``python -m fusejit.bench.dask [--workers 1,2] [--kind cpu|gpu]``.

Chunked workloads (chain8, gelu, softmax over rows, mean and var over axis 0) on a
``distributed.LocalCluster`` with one worker per device (``DevicePlugin``; ``--kind gpu`` pins
worker i to GPU i), compared three ways at the same chunks:

* ``fusejit``: the ``@fuse`` function called on the dask array (one fused kernel per chunk);
* ``dask``: the same function body with ``dask.array`` as the namespace (NumPy per chunk);
* ``single``: one process, fusejit on the whole NumPy array, no dask (the client's device).

The inputs are generated on the workers and persisted first; a timed run persists the result
on the workers and waits (nothing is gathered to the client), so GB/s counts each input read
once and each output written once. Also reported: the tasks each graph adds, and the scaling
from the first worker count to the others.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fusejit.bench.workloads import chain_fn, gelu, softmax

WORKLOADS = ("chain8", "gelu", "softmax", "meanvar")
IMPLS = ("fusejit", "dask", "single")


def meanvar(xp: Any, x: Any) -> tuple[Any, Any]:
    return xp.mean(x, axis=0), xp.var(x, axis=0)


def _body(name: str) -> tuple[Callable[..., Any], int]:
    """The workload's ``fn(xp, x)`` and its row length (0: a 1-D array)."""
    return {"chain8": (chain_fn(8), 0), "gelu": (gelu, 0), "softmax": (softmax, 1024),
            "meanvar": (meanvar, 256)}[name]


def _shape(name: str, size: int, chunk: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    _, row = _body(name)
    if not row:
        return (size,), (chunk,)
    return (size // row, row), (max(chunk // row, 1), row)  # whole rows in every chunk


def _bytes(name: str, shape: tuple[int, ...]) -> int:
    n = math.prod(shape)
    out = {"chain8": n, "gelu": n, "softmax": n, "meanvar": 2 * shape[-1]}[name]
    return 4 * (n + out)


def _median_s(run: Callable[[], Any], reps: int) -> float:
    run()  # warm-up: compiles on every worker, fills the pools
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def _tasks(result: Any, base: Any) -> int:
    import dask

    leaves = result if isinstance(result, tuple) else (result,)
    graph: dict = {}
    for leaf in dask.optimize(*leaves):
        graph.update(dict(leaf.__dask_graph__()))
    return len(set(graph) - set(dict(base.__dask_graph__())))


def run_cluster(workers: int, kind: str, names: Sequence[str], impls: Sequence[str], size: int,
                chunk: int, reps: int) -> list[dict[str, Any]]:
    import dask.array as da
    import distributed
    from dask.graph_manipulation import clone

    import fusejit
    import fusejit.dask as fdask

    rows = []
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        client.register_plugin(fdask.DevicePlugin(kind=kind))
        devices = sorted(set(client.run(lambda dask_worker: dask_worker.fusejit_device)
                             .values()))
        for name in names:
            body, _ = _body(name)
            shape, chunks = _shape(name, size, chunk)
            x = da.random.default_rng(0).random(shape, dtype=np.float32, chunks=chunks)
            x = client.persist(x)
            distributed.wait(x)
            fused = fusejit.fuse(lambda a, body=body: body(np, a))
            for impl in impls:
                if impl == "single":
                    continue
                y = fused(x) if impl == "fusejit" else body(da, x)

                seeds = iter(range(1 << 30))

                def once(y: Any = y, x: Any = x) -> None:
                    # fresh keys each run (the inputs kept): the scheduler may not have
                    # released the previous run's results yet, and would reuse them
                    leaves = y if isinstance(y, tuple) else (y,)
                    leaves = clone(*leaves, omit=x, seed=next(seeds))
                    leaves = leaves if isinstance(leaves, tuple) else (leaves,)
                    futures = client.persist(list(leaves))
                    distributed.wait(futures)
                    del futures

                seconds = _median_s(once, reps)
                rows.append({"workload": name, "impl": impl, "workers": workers,
                             "devices": devices, "shape": list(shape), "chunks": list(chunks),
                             "seconds": seconds, "gbps": _bytes(name, shape) / seconds / 1e9,
                             "tasks": _tasks(y, x)})
            if "fusejit" in impls:  # the two agree on the first block / the reduction
                got = fused(x)
                want = body(da, x)
                got, want = (got[0], want[0]) if isinstance(got, tuple) else (got, want)
                if got.ndim and name != "meanvar":
                    got, want = got.blocks[0], want.blocks[0]
                np.testing.assert_allclose(got.compute(), want.compute(), rtol=2e-5, atol=1e-5)
            del x
    return rows


def run_single(names: Sequence[str], size: int, reps: int) -> list[dict[str, Any]]:
    import fusejit

    rows = []
    device = fusejit.default_queue().device.name.strip()
    for name in names:
        body, _ = _body(name)
        shape, _ = _shape(name, size, size)
        x = np.random.default_rng(0).random(shape, dtype=np.float32)
        fused = fusejit.fuse(lambda a, body=body: body(np, a))
        seconds = _median_s(lambda: fused(x), reps)
        rows.append({"workload": name, "impl": "single", "workers": 0, "devices": [device],
                     "shape": list(shape), "chunks": list(shape), "seconds": seconds,
                     "gbps": _bytes(name, shape) / seconds / 1e9, "tasks": 0})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'workload':9} {'impl':8} {'workers':>7} {'GB/s':>8} {'ms':>9} {'tasks':>6} "
             f"{'vs dask':>8} {'scaling':>8}"]
    base: dict[tuple[str, str], dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r["workers"]):  # each case's fewest workers
        if r["workers"] > 0:
            base.setdefault((r["workload"], r["impl"]), r)
    for r in rows:
        dask_row = next((q for q in rows if q["workload"] == r["workload"] and
                         q["impl"] == "dask" and q["workers"] == r["workers"]), None)
        vs = f"{dask_row['seconds'] / r['seconds']:.2f}x" if dask_row and r["workers"] else ""
        first = base.get((r["workload"], r["impl"]))
        scale = f"{first['seconds'] / r['seconds']:.2f}x" if first and r["workers"] else ""
        lines.append(f"{r['workload']:9} {r['impl']:8} {r['workers']:>7} {r['gbps']:8.3f} "
                     f"{r['seconds'] * 1e3:9.1f} {r['tasks']:>6} {vs:>8} {scale:>8}")
    return "\n".join(lines)


def _list(text: str, allowed: Sequence[str]) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in allowed]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown {bad}; choose from {list(allowed)}")
    return items


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fusejit.bench.dask", description=__doc__.split(
        "\n")[0])
    p.add_argument("--workers", default="1,2", help="worker counts, e.g. 1,2,4 (one per GPU)")
    p.add_argument("--kind", choices=("auto", "cpu", "gpu"), default="auto",
                   help="DevicePlugin kind: GPUs round-robin, or PoCL's CPU device")
    p.add_argument("--workloads", type=lambda s: _list(s, WORKLOADS), default=list(WORKLOADS))
    p.add_argument("--impls", type=lambda s: _list(s, IMPLS), default=list(IMPLS))
    p.add_argument("--size", type=int, default=24, help="log2 of the elements (default 24)")
    p.add_argument("--chunk", type=int, default=20, help="log2 of the elements per chunk")
    p.add_argument("--reps", type=int, default=3, help="timed runs per measurement (median)")
    p.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    args = p.parse_args(argv)
    size, chunk = 2 ** args.size, 2 ** args.chunk
    rows = []
    for w in (int(t) for t in args.workers.split(",") if t.strip()):
        rows += run_cluster(w, args.kind, args.workloads, args.impls, size, chunk, args.reps)
    if "single" in args.impls:
        rows += run_single(args.workloads, size, args.reps)
    print(table(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
