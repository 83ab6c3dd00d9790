"""Fixtures shared by the pytest-benchmark suites: the device queue and the size scale.

Sizes come from ``FUSEJIT_BENCH_SCALE`` (``tiny``, ``small``, ``full``; default ``full``).
"""

from __future__ import annotations

import pyopencl as cl
import pytest

import fusejit
from fusejit.bench.backends import BACKENDS, Backend
from fusejit.bench.workloads import Scale, scale_from_env


@pytest.fixture(scope="session")
def queue() -> cl.CommandQueue:
    return fusejit.default_queue()


@pytest.fixture(scope="session")
def scale() -> Scale:
    return scale_from_env()


@pytest.fixture(scope="module")
def backends(request: pytest.FixtureRequest, queue: cl.CommandQueue) -> dict[str, Backend]:
    """The implementations a suite compares (its module's ``IMPLS``), probed once."""
    out = {}
    for name in request.module.IMPLS:
        backend = BACKENDS[name](queue)
        assert backend.probe() is None
        out[name] = backend
    return out


def run_checked(benchmark: object, backend: Backend, impl: str, wl: object, group: str,
                **info: object) -> None:
    """Build (the first call: compiles and, for fusejit, tunes), check the result against
    NumPy once, then benchmark the calls (timings are never asserted)."""
    import numpy as np

    from fusejit.bench.runner import matches

    host = wl.make_inputs()
    prepared = backend.prepare(wl, host)
    first = prepared.run()
    prepared.run()
    ok, err = matches(prepared.to_numpy(first), [wl.fn(np, *host)])
    assert ok, f"{impl} disagrees with NumPy on {wl.name} (max rel err {err:.2e})"
    benchmark.group = group
    benchmark.extra_info.update(impl=impl, device=backend.device, **info)
    benchmark(prepared.run)
