"""Runtime extents: from the second distinct extent of a dimension on, kernels take their loop
bounds at launch, so later extents reuse the program whenever the source comes out the same.
Every result is compared with NumPy; the program counts are the point of the feature."""

from __future__ import annotations

import warnings

import numpy as np
import pyopencl.array as cla
import pytest

import fusejit
from fusejit.compile.recompiles import RecompileWarning

RNG = np.random.default_rng(7)
X = RNG.standard_normal((300, 64)).astype(np.float32)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _programs(f) -> int:
    info = f.cache_info()
    return info.compiles + info.disk_hits


def test_softmax_over_batch_sizes_builds_at_most_three_programs():
    f = fusejit.fuse(softmax)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecompileWarning)  # reused programs do not count
        for n in range(200, 220):
            np.testing.assert_allclose(f(X[:n]), softmax(X[:n].astype(np.float64)),
                                       rtol=2e-6, atol=1e-7)
    assert f.cache_info().traces == 20 and _programs(f) <= 3


def test_elementwise_tails_and_vector_classes():
    f = fusejit.fuse(lambda x: np.tanh(x) * 2 - x)
    flat = RNG.standard_normal(9000).astype(np.float32)
    sizes = [5003, 5000, 5001, 5016, 5017, 5023, 6000, 5009, 8191]
    for n in sizes:
        x = flat[:n]
        np.testing.assert_allclose(f(x), np.tanh(x) * 2 - x, rtol=2e-6, atol=2e-6)
    assert _programs(f) < len(sizes)


def test_dynamic_false_specialises_every_extent():
    f = fusejit.fuse(lambda x: x * 2 + 1, dynamic=False)
    for n in (10, 11, 12):
        np.testing.assert_array_equal(f(X[:n]), X[:n] * 2 + 1)
    assert f.cache_info().compiles + f.cache_info().disk_hits == 3
    assert "n_v" not in f.lower(X[:13]).source


def test_dynamic_true_from_the_first_call():
    f = fusejit.fuse(lambda x: x * 3 - 1, dynamic=True)
    for n in (40, 48, 56):
        np.testing.assert_array_equal(f(X[:n]), X[:n] * 3 - 1)
    assert _programs(f) == 1 and f.cache_info().traces == 3


@pytest.mark.parametrize("case", ["reversed", "shape_constant", "full_sum", "axis0_sum",
                                  "broadcast_row", "iota"])
def test_extent_dependent_functions_stay_right(case):
    fns = {
        "reversed": lambda x: x[::-1] * 2,
        "shape_constant": lambda x: x.sum(axis=1) / x.shape[0],
        "full_sum": lambda x: x.sum(),
        "axis0_sum": lambda x: x.sum(axis=0),
        "broadcast_row": lambda x: x - x[:1],
        "iota": lambda x: x + np.arange(x.shape[0], dtype=np.float32)[:, None],
    }
    fn = fns[case]
    f = fusejit.fuse(fn)
    for n in (33, 34, 50, 35):
        x = X[:n]
        np.testing.assert_allclose(f(x), fn(x.astype(np.float64)), rtol=3e-6, atol=1e-5)


def test_device_arrays_through_the_fast_path(queue):
    f = fusejit.fuse(softmax)
    for n in (64, 65, 66, 65, 64):
        x = cla.to_device(queue, X[:n])
        for _ in range(2):  # the second call goes through the fast paths
            np.testing.assert_allclose(f(x).get(), softmax(X[:n].astype(np.float64)),
                                       rtol=2e-6, atol=1e-7)
    assert f.cache_info().traces == 3


def test_two_arguments_sharing_the_dynamic_dim():
    f = fusejit.fuse(lambda a, b: (a * b).sum(axis=1))
    y = RNG.standard_normal((300, 64)).astype(np.float32)
    for n in (20, 21, 22):
        np.testing.assert_allclose(f(X[:n], y[:n]), (X[:n].astype(np.float64) * y[:n]).sum(1),
                                   rtol=1e-5, atol=1e-5)
