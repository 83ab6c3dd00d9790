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
