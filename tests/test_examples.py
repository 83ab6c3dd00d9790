"""The examples' NumPy functions, fused, agree with NumPy (the scripts time them; this keeps
them working without the timing)."""

from __future__ import annotations

import importlib
import pathlib

import numpy as np
import pytest

from fusejit import fuse
from fusejit.testing import assert_matches

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def example(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return importlib.import_module


def test_gelu(example, rng):
    gelu = example("gelu").gelu
    x = rng.standard_normal(1000).astype(np.float32)
    assert_matches(fuse(gelu)(x), gelu(x), ulp=8, atol=1e-6)


def test_black_scholes_call_and_put(example, rng):
    black_scholes = example("black_scholes").black_scholes
    book = [rng.uniform(10, 100, 1000), rng.uniform(10, 100, 1000), rng.uniform(0.1, 5, 1000)]
    args = [a.astype(np.float32) for a in book]
    call, put = fuse(black_scholes)(*args)
    want_call, want_put = black_scholes(*args)
    assert_matches(call, want_call, ulp=64, atol=1e-4)
    assert_matches(put, want_put, ulp=64, atol=1e-4)
    # put-call parity holds for the float64 prices
    call64, put64 = fuse(black_scholes)(*book)
    parity = call64 - put64 - (book[0] - book[1] * np.exp(-0.02 * book[2]))
    assert np.abs(parity).max() < 1e-5


def test_haversine(example):
    haversine = example("haversine").haversine
    # Paris -> London, and a point to itself
    lat1, lon1 = np.array([48.8566, 10.0]), np.array([2.3522, 20.0])
    lat2, lon2 = np.array([51.5074, 10.0]), np.array([-0.1278, 20.0])
    got = fuse(haversine)(lat1, lon1, lat2, lon2)
    assert_matches(got, haversine(lat1, lon1, lat2, lon2), ulp=64)
    assert abs(got[0] - 343.6) < 1 and got[1] == 0


def test_cnn_forward(example, rng):
    """The small CNN (convolutions, batch-norm, residual, pooling, dense head) fused: NumPy's
    logits, one kernel per convolution layer with its epilogue."""
    cnn = example("cnn_forward")
    params = cnn.init(rng)
    x = rng.standard_normal((2, 28, 28, 1)).astype(np.float32)
    fused = fuse(lambda x: cnn.forward(x, params))
    np.testing.assert_allclose(fused(x), cnn.forward(x, params), rtol=1e-5, atol=1e-5)
    reasons = [k.reason for k in fused.lower(x).kernels]
    assert sum("implicit GEMM" in r for r in reasons) == 3, reasons  # (not the dense head)
    assert len(reasons) == 7, reasons  # 3 convolutions, 2 poolings, the mean, the dense head


@pytest.mark.parametrize("device", ["opencl", "vulkan"], indirect=True)
def test_cnn_forward_over_batch_sizes_is_one_program(example, rng, device):
    """The CNN called with new batch sizes (dynamic=True): every kernel, convolutions, pooling,
    the mean and the dense head, takes the batch at launch, and no kernel's work-group shape
    follows the batch: one build for batches 2, 3 and 5 (on Vulkan 2 and 3), NumPy's logits for each."""
    cnn = example("cnn_forward")
    params = cnn.init(rng)
    fused = fuse(lambda x: cnn.forward(x, params), dynamic=True)
    sizes = (2, 3, 5) if device == "opencl" else (2, 3)  # (lavapipe: CI's time)
    for n in sizes:
        x = rng.standard_normal((n, 28, 28, 1)).astype(np.float32)
        np.testing.assert_allclose(fused(x), cnn.forward(x, params), rtol=1e-5, atol=1e-5)
    info = fused.cache_info()
    assert info.traces == len(sizes)
    assert info.compiles + info.disk_hits == 1
