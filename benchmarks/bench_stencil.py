"""pytest-benchmark: unrolled time-stepping loops (issue 31), fusejit vs NumPy.

The 1-D heat equation ``u[1:-1] += a * (u[2:] - 2 u[1:-1] + u[:-2])`` unrolled over 20 static
steps on 2^20 float32 elements, in the copy-and-assign and the ``np.concatenate`` forms, and the
2-D 5-point Laplacian over 10 steps on 1024x1024. Fused, recomputation is costed and the steps
are stored every few steps (fusejit/passes/realize.py): a few kernels of a few steps each,
one function built for all of them. Each benchmarked call includes ``queue.finish()``; results
are checked against NumPy once, timings never asserted::

    pytest benchmarks/bench_stencil.py --benchmark-enable --benchmark-group-by=group
    FUSEJIT_BENCH_SCALE=tiny pytest benchmarks/bench_stencil.py   # CI smoke: runs once each
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import run_checked

from fusejit.bench.backends import Backend
from fusejit.bench.workloads import InputSpec, Workload, scale_from_env

IMPLS = ("fused", "numpy")
A = 0.1


def heat_copy(xp: Any, u: Any, steps: int = 20) -> Any:
    for _ in range(steps):
        new = u.copy()
        new[1:-1] = u[1:-1] + A * (u[2:] - 2 * u[1:-1] + u[:-2])
        u = new
    return u


def heat_concat(xp: Any, u: Any, steps: int = 20) -> Any:
    for _ in range(steps):
        u = xp.concatenate([u[:1], u[1:-1] + A * (u[2:] - 2 * u[1:-1] + u[:-2]), u[-1:]])
    return u


def laplace_2d(xp: Any, u: Any, steps: int = 10) -> Any:
    for _ in range(steps):
        new = u.copy()
        new[1:-1, 1:-1] = u[1:-1, 1:-1] + A * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                              + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
        u = new
    return u


def _workloads() -> list[Workload]:
    tiny = scale_from_env().gelu <= 2**14  # (the tiny scale: CI smoke runs)
    n = 2**14 if tiny else 2**20
    side = 128 if tiny else 1024
    one = (InputSpec("u", (n,), 0.0, 1.0),)
    return [
        Workload(f"heat20_copy/2^{n.bit_length() - 1}", "stencil", heat_copy, one, ((n,),)),
        Workload(f"heat20_concat/2^{n.bit_length() - 1}", "stencil", heat_concat, one, ((n,),)),
        Workload(f"laplace10/{side}^2", "stencil", laplace_2d,
                 (InputSpec("u", (side, side), 0.0, 1.0),), ((side, side),)),
    ]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("wl", _workloads(), ids=lambda w: w.name.replace("/", "-"))
def test_stencil(benchmark: Any, backends: dict[str, Backend], impl: str, wl: Workload) -> None:
    run_checked(benchmark, backends[impl], impl, wl, wl.name, size=wl.size)
