"""fusejit's own vector sin, cos and tan (targets/opencl/helpers.py ``_TRIG_CORE``), used where a
work-item computes a float vector (CPU devices): every quadrant, the reduction's edges, huge
arguments (the lane-by-lane fallback), signed zeros, non-finite values and mixed lanes, against
NumPy at the op table's ULP bound and against the correctly rounded value within 1 ULP."""

from __future__ import annotations

import numpy as np
import pytest

import fusejit
from fusejit.ir.ops import OPS, OP_OF_UFUNC
from fusejit.testing import assert_matches, ulp_distance

FUNCS = [np.sin, np.cos, np.tan]


def _arguments() -> np.ndarray:
    rng = np.random.default_rng(7)
    k = np.arange(-64, 65, dtype=np.float64)
    pio2 = k * (np.pi / 2)
    near = np.concatenate([np.nextafter(pio2.astype(np.float32), np.float32(s))
                           for s in (-np.inf, np.inf)] + [pio2.astype(np.float32)])
    special = np.array([0.0, -0.0, 1e-45, -1e-45, 2**-12, -(2**-12), 2**-13, 1e-30, 1.0,
                        2**20 - 0.5, 2**20, -(2**20), 2**22 + 0.5, 1e10, 3.4e38, -3.4e38,
                        np.inf, -np.inf, np.nan], np.float32)
    return np.concatenate([
        rng.uniform(-10, 10, 4000), rng.uniform(-1000, 1000, 2000),
        rng.uniform(-2**20, 2**20, 2000), rng.uniform(-1e30, 1e30, 200), near, special,
    ]).astype(np.float32)


def _vectorised_here() -> bool:
    """Whether this device computes vectors per work-item (CPUs), so fusejit's own functions
    run; GPUs use the vendor's builtins, held to the op table's bound only."""
    from fusejit.runtime.opencl.devices import device_info

    return not device_info(fusejit.default_queue().device).limits.is_gpu


def _error_in_ulps(got: np.ndarray, x: np.ndarray, fn) -> np.ndarray:
    """|got - fn(x)| in ulps of the float32 result, fn(x) computed in float64 (not rounded: an
    error below 1 here is finer than an ulp_distance of 1 from the correctly rounded value)."""
    with np.errstate(all="ignore"):
        exact = fn(x.astype(np.float64))
    finite = np.isfinite(exact) & (np.abs(exact) < np.finfo(np.float32).max)
    spacing = np.spacing(np.abs(exact[finite]).astype(np.float32)).astype(np.float64)
    return np.abs(got[finite].astype(np.float64) - exact[finite]) / spacing


@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.__name__)
def test_matches_numpy_and_the_correctly_rounded_value(fn) -> None:
    x = _arguments()
    got = fusejit.fuse(fn)(x)
    with np.errstate(all="ignore"):
        want = fn(x)
        exact = fn(x.astype(np.float64)).astype(np.float32)
    assert_matches(got, want, ulp=OPS[OP_OF_UFUNC[fn]].ulp[32])
    finite = np.isfinite(exact)
    if _vectorised_here():
        assert np.all(ulp_distance(got[finite], exact[finite]) <= 1.0)
        if fn is not np.tan:  # (tan's -1/r in double: 1.43 ulps of the exact value at worst)
            assert np.max(_error_in_ulps(got, x, fn)) < 1.0
    assert np.array_equal(np.signbit(got[x == 0]), np.signbit(want[x == 0]))


@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.__name__)
def test_one_huge_lane_does_not_spoil_its_neighbours(fn) -> None:
    x = np.full(64, 1e-5, np.float32)
    x[::7] = np.float32(3.4e38)
    x[3::9] = np.float32(2**22 + 0.5)
    with np.errstate(all="ignore"):
        want = fn(x)
    assert_matches(fusejit.fuse(fn)(x), want, ulp=OPS[OP_OF_UFUNC[fn]].ulp[32])


def test_float16_through_the_float32_vectors() -> None:
    x = np.linspace(-20, 20, 999).astype(np.float16)
    for fn in FUNCS:
        assert_matches(fusejit.fuse(fn)(x), fn(x), ulp=OPS[OP_OF_UFUNC[fn]].ulp[16])


def _near_multiples_of_pio2() -> np.ndarray:
    """Every float32 multiple of pi/2 below 2^13, 20000 more up to 2^20, and 3 float neighbours
    each side: where the reduction cancels most, so where an error in its low part (the float
    core's rl) shows; plus the edges of the float core's range and tiny arguments."""
    k = np.concatenate([np.arange(-5215, 5216), np.random.default_rng(3).integers(
        -667544, 667544, 20000)]).astype(np.float64)
    bits = (k * (np.pi / 2)).astype(np.float32).view(np.int32)
    near = np.concatenate([bits + d for d in range(-3, 4)]).view(np.float32)
    edge = np.array([2**20, np.nextafter(2**20, 0), 2**-12, np.nextafter(2**-12, 0), 2**-126,
                     2**-149, 0.78539819, 0.78539813, 0.7853982], np.float32)
    return np.concatenate([near, edge, -edge])


@pytest.mark.parametrize("fn", [np.sin, np.cos], ids=lambda f: f.__name__)
def test_float_core_is_within_1_ulp_at_every_multiple_of_pio2(fn) -> None:
    x = _near_multiples_of_pio2()
    got = fusejit.fuse(fn)(x)
    exact = fn(x.astype(np.float64)).astype(np.float32)
    assert_matches(got, fn(x), ulp=OPS[OP_OF_UFUNC[fn]].ulp[32])
    if _vectorised_here():
        assert np.all(ulp_distance(got, exact) <= 1.0)
        assert np.max(_error_in_ulps(got, x, fn)) < 1.0
