"""pytest-benchmark: fusejit fused vs unfused pyopencl vs NumPy, elementwise workloads.

Chains of 1..32 cheap ops over 2^10..2^26 elements, then GELU, Black-Scholes and Adam. Each
benchmarked call includes ``queue.finish()``; results are checked against NumPy once, timings
never asserted. Sizes: ``FUSEJIT_BENCH_SCALE=tiny|small|full`` (default full)::

    pytest benchmarks/bench_elementwise.py --benchmark-enable --benchmark-group-by=group
    FUSEJIT_BENCH_SCALE=tiny pytest benchmarks/bench_elementwise.py   # CI smoke: runs once each
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fusejit.bench.backends import Backend
from fusejit.bench.runner import matches
from fusejit.bench.workloads import Workload, chain, scale_from_env, workloads

SCALE = scale_from_env()
IMPLS = ("fused", "unfused", "numpy")
CHAINS = [chain(n, size) for size in SCALE.chain_sizes for n in SCALE.chain_lengths]
REAL = workloads(SCALE, ("gelu", "haversine", "black_scholes", "adam"))




def _bench(benchmark: Any, backend: Backend, wl: Workload) -> None:
    host = wl.make_inputs()
    prepared = backend.prepare(wl, host)
    first = prepared.run()  # compiles; checked once, outside the timing
    want = wl.fn(np, *host)
    ok, err = matches(prepared.to_numpy(first), list(want) if isinstance(want, tuple) else [want])
    assert ok, f"{backend.name} disagrees with NumPy on {wl.name} (max rel err {err:.2e})"
    benchmark.group = wl.name
    benchmark.extra_info.update(impl=backend.name, bytes=wl.bytes, shape=wl.inputs[0].shape,
                                device=backend.device)
    benchmark(prepared.run)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("wl", CHAINS, ids=lambda w: w.name.replace("/", "-"))
def test_chain(benchmark: Any, backends: dict[str, Backend], impl: str, wl: Workload) -> None:
    _bench(benchmark, backends[impl], wl)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("wl", REAL, ids=lambda w: w.name)
def test_workload(benchmark: Any, backends: dict[str, Backend], impl: str, wl: Workload
                  ) -> None:
    _bench(benchmark, backends[impl], wl)
