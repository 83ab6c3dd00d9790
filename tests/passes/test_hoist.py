"""Scalar math hoisting (passes/hoist.py): expressions of scalar arguments and literals are
computed once per call on the host with NumPy, passed to the kernel as derived scalars, and give
NumPy's values bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import fusejit
from fusejit.ir.graph import Op


def _derived(f, *args):
    lowered = f.lower(*args)
    return [p for p in lowered.graph.params if p.kind == "derived"], lowered.source


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("t", [0, 3, 17, -2])
def test_power_of_a_runtime_int_is_numpys(dtype, t, has_fp64):
    if dtype == np.float64 and not has_fp64:
        pytest.skip("no fp64 on this device")
    f = fusejit.fuse(lambda x, t: x * 0.9 ** t)
    x = np.linspace(-3, 3, 257).astype(dtype)
    np.testing.assert_array_equal(f(x, t), x * 0.9 ** t)
    derived, source = _derived(f, x, t)
    assert len(derived) == 1 and "pow" not in source


def test_a_new_value_does_not_recompile():
    f = fusejit.fuse(lambda x, b, t: x / (1.0 - b ** t))
    x = np.arange(1, 65, dtype=np.float32)
    for t in range(1, 6):
        np.testing.assert_array_equal(f(x, 0.9, t), x / (1.0 - 0.9 ** t))
    assert f.cache_info().misses == 1


@pytest.mark.parametrize("scalar", [np.float32(0.7), np.float64(2.5), np.int16(3), 1.5])
def test_numpy_and_python_scalars(scalar, has_fp64):
    if not has_fp64 and np.result_type(scalar, np.float32) == np.float64:
        pytest.skip("no fp64 on this device")
    f = fusejit.fuse(lambda x, s: x + np.sqrt(s) * np.exp(-s))
    x = np.linspace(0, 1, 100).astype(np.float32)
    got, want = f(x, scalar), x + np.sqrt(scalar) * np.exp(-scalar)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert _derived(f, x, scalar)[0]


def test_cheap_expressions_stay_in_the_kernel():
    f = fusejit.fuse(lambda x, s: x * (s + np.float32(1)))
    x = np.ones(16, np.float32)
    np.testing.assert_array_equal(f(x, np.float32(2)), x * np.float32(3))
    assert not _derived(f, x, np.float32(2))[0]


def test_float64_scalar_math_is_hoisted(has_fp64):
    if not has_fp64:
        pytest.skip("no fp64 on this device")
    # 1.0 - b is Python-float (float64) math: per element it would be a float64 add and a
    # conversion; hoisted it is one host evaluation per call
    f = fusejit.fuse(lambda x, b: (1.0 - b) * x)
    x = np.linspace(-1, 1, 64).astype(np.float32)
    for b in (0.9, 0.999, -0.0):
        np.testing.assert_array_equal(f(x, b), (1.0 - b) * x)
    derived, source = _derived(f, x, 0.9)
    assert len(derived) == 1 and "double" not in source


def test_several_expressions_and_a_scalar_output():
    def f(x, a, b):
        return x * np.log(a) + np.tanh(b), np.sqrt(a) / b

    fused = fusejit.fuse(f)
    x = np.linspace(-1, 1, 33).astype(np.float32)
    for a, b in ((2.0, 0.5), (7.0, -3.0)):
        got, want = fused(x, a, b), f(x, a, b)
        np.testing.assert_array_equal(got[0], want[0])
        assert np.asarray(got[1]).shape == () and got[1] == want[1]
    graph = fused.lower(x, 2.0, 0.5).graph
    assert all(n.op not in (Op.LOG, Op.TANH, Op.SQRT) for n in graph.toposort())


def test_adam_with_runtime_hyperparameters_matches_numpy():
    def adam(p, g, m, v, lr, b1, b2, eps, t):
        m = b1 * m + (1.0 - b1) * g
        v = b2 * v + (1.0 - b2) * (g * g)
        return p - lr * (m / (1.0 - b1 ** t)) / (np.sqrt(v / (1.0 - b2 ** t)) + eps), m, v

    rng = np.random.default_rng(0)
    arrays = [rng.uniform(0.1, 1, 1000).astype(np.float32) for _ in range(4)]
    fused = fusejit.fuse(adam)
    for t in (1, 10, 1000):
        for got, want in zip(fused(*arrays, 1e-3, 0.9, 0.999, 1e-8, t),
                             adam(*arrays, 1e-3, 0.9, 0.999, 1e-8, t)):
            np.testing.assert_allclose(got, want, rtol=2e-6)
    assert fused.cache_info().misses == 1


def test_validate_mode_sees_derived_scalars():
    f = fusejit.fuse(lambda x, t: np.sin(x) * 0.5 ** t, validate=True)
    x = np.linspace(0, 6, 64).astype(np.float32)
    np.testing.assert_allclose(f(x, 5), np.sin(x) * 0.5 ** 5, rtol=1e-6)


def test_lower_shows_the_derived_parameter():
    f = fusejit.fuse(lambda x, t: x * 0.9 ** t)
    assert "derived" in str(f.lower(np.ones(4, np.float32), 2).graph)


def test_a_bundle_keeps_the_derived_scalars(tmp_path):
    from fusejit import ShapeDtype

    f = fusejit.fuse(lambda x, t: x * 0.9 ** t)
    path = fusejit.export(f, [(ShapeDtype((8,), np.float32, device=False), 3)],
                          tmp_path / "decay.fjb")
    loaded = fusejit.load(path)
    x = np.arange(8, dtype=np.float32)
    for t in (3, 11):
        np.testing.assert_array_equal(loaded(x, t), x * 0.9 ** t)
