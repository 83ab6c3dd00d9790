"""Fixtures shared by the pytest-benchmark suites: the device queue and the size scale.

Sizes come from ``FUSEJIT_BENCH_SCALE`` (``tiny``, ``small``, ``full``; default ``full``).
"""

from __future__ import annotations

import pyopencl as cl
import pytest

import fusejit
from fusejit.bench.workloads import Scale, scale_from_env


@pytest.fixture(scope="session")
def queue() -> cl.CommandQueue:
    return fusejit.default_queue()


@pytest.fixture(scope="session")
def scale() -> Scale:
    return scale_from_env()
