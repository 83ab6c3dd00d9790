"""Shared fixtures: the default device (PoCL's CPU device in CI) and host<->device helpers."""

from __future__ import annotations

import numpy as np
import pyopencl.array as cla
import pytest

import fusejit
import fusejit.testing


# fusejit's tests state their tolerances: exact unless a test passes ulp= (the public default
# of assert_matches is the op table's bound, looser than most ops need)
fusejit.testing.DEFAULT_ULP = 0.0


@pytest.fixture(scope="session")
def queue():
    return fusejit.default_queue()


@pytest.fixture(scope="session")
def has_fp64(queue) -> bool:
    from fusejit.runtime.devices import device_info

    return device_info(queue.device).has_fp64


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def dev(queue):
    """Upload a NumPy array to the default device."""
    def upload(x):
        return cla.to_device(queue, np.ascontiguousarray(x))
    return upload


def pytest_addoption(parser):
    parser.addoption("--fuzz-examples", type=int, default=None,
                     help="programs the differential fuzz test runs (default 400, or "
                          "FUSEJIT_FUZZ_EXAMPLES)")


@pytest.fixture
def launches(monkeypatch):
    """Counts kernel launches of functions compiled after the fixture is set up."""
    count = []
    real = fusejit.runtime.executable._enqueue

    def counting(*args, **kwargs):
        count.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fusejit.runtime.executable, "_enqueue", counting)
    return count
