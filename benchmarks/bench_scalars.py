"""pytest-benchmark: scalar arguments cost no more than constants (passes/hoist.py).

An Adam step whose step count and hyperparameters are runtime arguments against the same step
with them baked in as constants, and ``x * 0.9 ** t`` against ``x * s``: with the scalar math
hoisted to the host each pair should time alike. Each benchmarked call includes
``queue.finish()``; results are checked against NumPy once, timings never asserted::

    pytest benchmarks/bench_scalars.py --benchmark-enable --benchmark-group-by=group
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyopencl.array as cla
import pytest

import fusejit
from fusejit.bench.workloads import scale_from_env

SCALE = scale_from_env()
SIZE = max(SCALE.chain_sizes)
LR, B1, B2, EPS, STEP = 1e-3, 0.9, 0.999, 1e-8, 10


def adam_runtime(p: Any, g: Any, m: Any, v: Any, lr: float, b1: float, b2: float, eps: float,
                 t: int) -> tuple[Any, Any, Any]:
    m = b1 * m + (1.0 - b1) * g
    v = b2 * v + (1.0 - b2) * (g * g)
    p = p - lr * (m / (1.0 - b1 ** t)) / (np.sqrt(v / (1.0 - b2 ** t)) + eps)
    return p, m, v


def adam_constant(p: Any, g: Any, m: Any, v: Any) -> tuple[Any, Any, Any]:
    return adam_runtime(p, g, m, v, LR, B1, B2, EPS, STEP)


CASES = {
    "adam": ((fusejit.fuse(adam_constant), ()),
             (fusejit.fuse(adam_runtime), (LR, B1, B2, EPS, STEP)), 4),
    "decay": ((fusejit.fuse(lambda x: x * 0.9 ** STEP), ()),
              (fusejit.fuse(lambda x, t: x * 0.9 ** t), (STEP,)), 1),
}


@pytest.mark.parametrize("variant", ["constants", "runtime scalars"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_scalars(benchmark: Any, case: str, variant: str) -> None:
    const, runtime, n_arrays = CASES[case]
    fn, scalars = const if variant == "constants" else runtime
    queue = fusejit.default_queue()
    rng = np.random.default_rng(0)
    host = [rng.uniform(0.1, 1.0, SIZE).astype(np.float32) for _ in range(n_arrays)]
    arrays = [cla.to_device(queue, h) for h in host]
    got = fn(*arrays, *scalars)
    want = fn.__wrapped__(*host, *scalars)
    for a, b in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(a.get(), b, rtol=1e-5)

    def call() -> None:
        fn(*arrays, *scalars)
        queue.finish()

    benchmark.group = f"{case} {SIZE}"
    benchmark.extra_info.update(variant=variant, size=SIZE)
    benchmark(call)
