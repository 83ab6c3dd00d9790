"""fusejit's own vector sin, cos and tan (targets/opencl.py ``_TRIG_CORE``), used where a
work-item computes a float vector (CPU devices): every quadrant, the reduction's edges, huge
arguments (the lane-by-lane fallback), signed zeros, non-finite values and mixed lanes, against
NumPy at the op table's ULP bound and against the correctly rounded value within 1 ULP."""

from __future__ import annotations

import numpy as np
import pytest

import fusejit
from fusejit.ops import OPS, OP_OF_UFUNC
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
    from fusejit.runtime.devices import device_info

    return not device_info(fusejit.default_queue().device).limits.is_gpu


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
