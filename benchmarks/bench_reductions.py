"""pytest-benchmark: fusejit fused vs unfused pyopencl vs NumPy, row-reduction workloads.

Softmax over rows and layernorm (mean, variance, normalise, scale, shift), float32:

* fused: one fusejit kernel per call (the reductions, the broadcast back and the elementwise
  work in one pass over each row);
* unfused: the same steps as separate ``pyopencl.array`` kernels on device arrays (row max /
  row sum as one reduction kernel each, ``clmath.exp``, broadcasting arithmetic), see
  :mod:`fusejit.bench.clshim`;
* numpy: the same function on host arrays.

Each benchmarked call ends with ``queue.finish()``; results are checked against NumPy once, and
timings are never asserted. Sizes: ``FUSEJIT_BENCH_SCALE=tiny|small|full`` (default full:
softmax 16384x1024, layernorm 8192x4096; small: 1024x1024 and 512x4096; tiny: 64x256)::

    pytest benchmarks/bench_reductions.py --benchmark-enable --benchmark-group-by=group
    FUSEJIT_BENCH_SCALE=tiny pytest benchmarks/bench_reductions.py --benchmark-enable -q
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import run_checked

from fusejit.bench.backends import Backend
from fusejit.bench.workloads import Workload, scale_from_env, workloads

SCALE = scale_from_env()
IMPLS = ("fused", "unfused", "numpy")
ROWS = workloads(SCALE, ("softmax", "layernorm"))




@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("wl", ROWS, ids=lambda w: w.name)
def test_rows(benchmark: Any, backends: dict[str, Backend], impl: str, wl: Workload) -> None:
    run_checked(benchmark, backends[impl], impl, wl,
                f"{wl.name} {'x'.join(map(str, wl.inputs[0].shape))}", bytes=wl.bytes,
                shape=wl.inputs[0].shape)
