"""pytest-benchmark: fusejit's fused GEMM kernels against NumPy (OpenBLAS) or torch.

Dense layers ``relu(x @ w + b)`` and ``gelu(x @ w + b)`` (one fusejit kernel each: the bias and
activation in the GEMM's epilogue) and the transformer MLP block ``x + gelu(x @ w1 + b1) @ w2
+ b2`` (two kernels, the activation stored once), float32. Each benchmarked call ends with
``queue.finish()``; results are checked against NumPy once, timings are never asserted.
Sizes: ``FUSEJIT_BENCH_SCALE=tiny|small|full`` (full: 4096^3 and an 8192x4096 block; small:
1024^3 and 1024x1024; tiny: 64)::

    pytest benchmarks/bench_gemm.py --benchmark-enable --benchmark-group-by=group
    FUSEJIT_BENCH_SCALE=small pytest benchmarks/bench_gemm.py --benchmark-enable -q

On a GPU add torch (TF32 off) with ``FUSEJIT_BENCH_IMPLS=fused,numpy,torch``;
``python -m fusejit.bench.gemm`` prints the issue's full H200 table.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from conftest import run_checked

from fusejit.bench.backends import Backend
from fusejit.bench.workloads import Workload, scale_from_env, workloads

SCALE = scale_from_env()
IMPLS = tuple(os.environ.get("FUSEJIT_BENCH_IMPLS", "fused,numpy").split(","))
CASES = workloads(SCALE, ("gemm", "mlp"))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("wl", CASES, ids=lambda w: w.name)
def test_gemm(benchmark: Any, backends: dict[str, Backend], impl: str, wl: Workload) -> None:
    run_checked(benchmark, backends[impl], impl, wl, wl.name, flops=wl.params["flops"])
