"""Elementwise functions still missing before issue 17 §2: modf and frexp (multi-output ufuncs),
copyto, sinc, i0, isclose, allclose, interp, searchsorted, choose. NumPy's dtype, shape and
value; one kernel with the surrounding work; NumPy's error classes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fusejit import UnsupportedOperationError, fuse
from fusejit.testing import assert_matches

EDGES = np.array([np.inf, -np.inf, np.nan, -2.0, -0.0, 0.0, 2.5, 1e-310, 3.0, 7.75, 1e300,
                  -0.1, 0.5, 1.0, -1e-5, 8.0, 9.5, -20.0], np.float64)
with np.errstate(over="ignore"):  # 1e300 becomes inf in the narrow types, on purpose
    F64, F32, F16 = EDGES, EDGES.astype(np.float32), EDGES.astype(np.float16)
INTS = np.array([3, 0, -5, 1, 2, 4, 7], np.int16)
XP = np.array([0.0, 1.0, 2.5, 2.5, 4.0])
FP = np.array([1.0, -1.0, 2.0, 3.0, 0.0])

EXACT = {
    "modf_f64": (np.modf, F64), "modf_f32": (np.modf, F32), "modf_f16": (np.modf, F16),
    "modf_int": (np.modf, INTS),
    "frexp_f64": (np.frexp, F64), "frexp_f32": (np.frexp, F32), "frexp_f16": (np.frexp, F16),
    "frexp_int": (np.frexp, INTS),
    "isclose": (lambda x: np.isclose(x, 2.5), F64),
    "isclose_nan": (lambda x: np.isclose(x, x * np.float32(1.000001), equal_nan=True), F32),
    "isclose_int": (lambda x: np.isclose(x, 3, atol=1), INTS),
    "allclose": (lambda x: np.allclose(x, x + 1e-9), F64),
    "allclose_false": (lambda x: np.allclose(x, 3), F32),
    "searchsorted": (lambda x: np.searchsorted(XP, x), F64),
    "searchsorted_right": (lambda x: np.searchsorted(XP, x, side="right"), F64),
    "searchsorted_nan_last": (lambda x: np.searchsorted(np.array([1, 2, np.nan]), x), F32),
    "searchsorted_int": (lambda x: np.searchsorted(np.arange(0, 40, 3), x * 5), INTS),
    "searchsorted_method": (lambda x: (np.arange(7) * 3 + x * 0).searchsorted(x * 5, "right"),
                            INTS),
    "interp": (lambda x: np.interp(x, XP, FP), F64),
    "interp_f32_lr": (lambda x: np.interp(x, XP, FP, left=-9, right=9), F32),
    "interp_int": (lambda x: np.interp(x, [0, 2, 6], [5, 1, 0]), INTS),
    "choose": (lambda x: np.choose(x % 3, [x * 2, 10, -x]), INTS),
    "choose_wrap": (lambda x: np.choose(x, [x * 2, 10, -x], mode="wrap"), INTS),
    "choose_clip": (lambda x: np.choose(x, [x * 2.0, np.float32(10)], mode="clip"), INTS),
}
APPROX = {  # (function, input, ULP bound): sin, exp, sqrt inside
    "sinc_f32": (np.sinc, F32, 8), "sinc_f64": (np.sinc, F64, 8), "sinc_int": (np.sinc, INTS, 8),
    "i0_f64": (np.i0, F64[np.abs(F64) < 700], 64), "i0_f32": (np.i0, F32[np.abs(F32) < 80], 64),
    "i0_int": (np.i0, INTS, 64),
}


def _compare(fn, x, ulp):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = fn(x)
    got = fuse(fn)(x)
    for g, w in zip(got, want) if isinstance(want, tuple) else ((got, want),):
        assert_matches(g, w, ulp=ulp)


@pytest.mark.parametrize("name", EXACT)
def test_exact_functions_match_numpy_bitwise(name):
    _compare(*EXACT[name], 0)


@pytest.mark.parametrize("name", APPROX)
def test_transcendental_functions_match_numpy(name):
    _compare(*APPROX[name])


def test_searchsorted_against_a_device_array(rng):
    a = np.sort(rng.standard_normal(1000))
    v = rng.standard_normal(37) * 2
    for side in ("left", "right"):
        got = fuse(lambda a, v: np.searchsorted(a, v, side=side))(a, v)
        assert_matches(got, np.searchsorted(a, v, side=side))
    shuffled = rng.permutation(a)
    order = np.argsort(shuffled)
    got = fuse(lambda a, v: np.searchsorted(a, v, sorter=order))(shuffled, v)
    assert_matches(got, np.searchsorted(shuffled, v, sorter=order))


def test_interp_against_device_samples(rng):
    xp = np.sort(rng.uniform(-3, 3, 50))
    fp = rng.standard_normal(50)
    x = rng.uniform(-4, 4, 200)
    assert_matches(fuse(np.interp)(x, xp, fp), np.interp(x, xp, fp))


def test_copyto_with_where_and_casting():
    def f(dst, src):
        np.copyto(dst, src * 2, where=src > 0)
        np.copyto(dst[:2], 7)

    want, got = np.zeros(5, np.float32), np.zeros(5, np.float32)
    src = np.array([1.0, -1.0, 2.0, 0.0, 3.0], np.float32)
    f(want, src)
    fuse(f)(got, src)
    assert_matches(got, want)

    def unsafe(dst, src):
        np.copyto(dst, src, casting="unsafe")

    want, got = np.zeros(3, np.int8), np.zeros(3, np.int8)
    unsafe(want, np.array([1.7, -2.5, 300.0]))
    fuse(unsafe)(got, np.array([1.7, -2.5, 300.0]))
    assert_matches(got, want)


@pytest.mark.parametrize("fn, kernels", [
    (lambda x: np.modf(x)[0] + np.frexp(x)[1], 1),
    (lambda x: np.interp(np.sinc(x), XP, FP) * np.isclose(x, 0), 1),
    (lambda x: np.choose((x > 0).astype(int), [np.i0(x), x]), 1),
])
def test_fuses_into_one_kernel(fn, kernels):
    x = np.linspace(-5, 5, 64)
    low = fuse(fn).lower(x)
    assert len(low.kernels) == kernels and not low.plan.temps, low
    _compare(fn, x, 64)


@pytest.mark.parametrize("fn, error", [
    (lambda d, s: np.copyto(d, s), TypeError),  # float64 into int8 under same_kind
    (lambda d, s: np.copyto(d, 1.5), TypeError),
    (lambda d, s: np.copyto(d, s, where=s), TypeError),
    (lambda d, s: np.searchsorted(s.reshape(3, 1), s), ValueError),
    (lambda d, s: np.searchsorted(s, s, side="middle"), ValueError),
    (lambda d, s: np.interp(s, [1, 2], [1, 2, 3]), ValueError),
    (lambda d, s: np.interp(s, [], []), ValueError),
    (lambda d, s: np.choose([0, 3, 1], [s, s, s]), ValueError),
    (lambda d, s: np.choose([0, 1, 1], [s, s], mode="bogus"), ValueError),
    (lambda d, s: np.modf(s, bogus=1), TypeError),
])
def test_bad_input_raises_numpys_error(fn, error, launches):
    with pytest.raises(error):
        fn(np.zeros(3, np.int8), np.array([1.5, 2.5, 3.5]))
    with pytest.raises(error):
        fuse(fn)(np.zeros(3, np.int8), np.array([1.5, 2.5, 3.5]))
    assert not launches


def test_refused_with_a_clear_error():
    with pytest.raises(UnsupportedOperationError, match="period"):
        fuse(lambda x: np.interp(x, XP, FP, period=2))(F64)
