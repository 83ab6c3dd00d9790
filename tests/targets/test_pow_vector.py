"""fusejit's own float32 vector power (targets/opencl/vmath.py ``_POW_CORE``), used where a
work-item computes a float vector (CPU devices): positive bases over the whole float range
(subnormals included) against NumPy at the op table's bound and against the exact power within
1 ULP, and the lanes the builtin keeps (x <= 0, infinities, NaN, exponents of either sign and
of integer value) bit for bit against NumPy, alone and mixed into vectors of ordinary lanes."""

from __future__ import annotations

import numpy as np
import pytest

import fusejit
from fusejit.ir.ops import OPS, Op
from fusejit.testing import assert_matches, ulp_distance

BOUND = OPS[Op.POW].ulp[32]


def _vectorised_here() -> bool:
    """Whether this device computes vectors per work-item (CPUs), so fusejit's own power runs;
    GPUs use the vendor's builtin, held to the op table's bound only."""
    from fusejit.runtime.opencl.devices import device_info

    return not device_info(fusejit.default_queue().device).limits.is_gpu


def _bases() -> np.ndarray:
    rng = np.random.default_rng(11)
    near_one = np.float32(1) + rng.uniform(-1e-3, 1e-3, 2000).astype(np.float32)
    return np.concatenate([
        rng.uniform(0, 100, 4000), 10.0 ** rng.uniform(-45, 38.5, 4000), near_one,
        [1e-45, 2**-149, 2**-126, 0.5, 1.0, 2.0, 3.4e38, np.sqrt(2), np.sqrt(0.5)],
    ]).astype(np.float32)


@pytest.mark.parametrize("y", [2.2, -0.5, 0.1, 17.3, -40.0, 1e-3, 150.0, -150.5, 1e6])
def test_positive_bases_within_an_ulp_of_the_exact_power(y: float) -> None:
    x = _bases()
    y = np.float32(y)
    got = fusejit.fuse(lambda a: a ** y)(x)
    with np.errstate(all="ignore"):
        want = x ** y
        exact = x.astype(np.float64) ** np.float64(y)
    assert_matches(got, want, ulp=BOUND)
    if not _vectorised_here():
        return
    finite = (exact > 0) & (exact < np.finfo(np.float32).max)
    spacing = np.spacing(exact[finite].astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got[finite] - exact[finite]) / spacing) < 0.6
    with np.errstate(over="ignore"):
        rounded = exact.astype(np.float32)
    assert np.all(ulp_distance(got, rounded) <= 1)  # overflow and underflow too


SPECIAL = np.array([0.0, -0.0, -1.0, -2.0, -0.5, 1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45,
                    2.0, 0.5, 3.4e38], np.float32)


def test_special_lanes_are_numpys_bit_for_bit() -> None:
    if not _vectorised_here():  # (the H200's builtin differs for some of these pairs)
        pytest.skip("fusejit's own vector power runs on CPU devices only; a GPU's pow is the "
                    "vendor's, which the op catalog holds to the op table's bound")
    # every pair of special bases and exponents, each pair in a vector of ordinary lanes
    a, b = (v.ravel() for v in np.meshgrid(SPECIAL, SPECIAL))
    x = np.full((a.size, 8), 3.0, np.float32)
    y = np.full((a.size, 8), 1.7, np.float32)
    x[:, 5], y[:, 5] = a, b
    got = fusejit.fuse(np.power)(x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
        exact = a.astype(np.float64) ** b.astype(np.float64)
    # the builtin's lanes bit for bit; a positive finite base to a finite exponent is fusejit's
    # own power, within an ULP of the exact one: NumPy's float32 power is the platform's (its
    # AVX-512 build gives 3.4e38 ** 0.5 one ULP low, 0.56 of the way to the value it rounds to)
    kept = (a <= 0) | ~np.isfinite(a) | ~np.isfinite(b)
    assert np.array_equal(got[kept, 5], want[kept, 5], equal_nan=True), (a, b, got[:, 5])
    with np.errstate(over="ignore"):
        assert np.all(ulp_distance(got[~kept, 5], exact[~kept].astype(np.float32)) <= 1)
    number = ~np.isnan(want[:, 5])  # (a NaN's sign is the builtin's, as before)
    assert np.array_equal(np.signbit(got[number, 5]), np.signbit(want[number, 5]))
    assert_matches(got, want, ulp=BOUND)


def test_integer_exponents_of_negative_bases_and_runtime_exponents() -> None:
    x = np.linspace(-8, 8, 1000).astype(np.float32)
    f = fusejit.fuse(lambda a, e: a ** e)
    for e in (np.float32(3.0), np.float32(-2.0), np.float32(0.5), np.float32(2.5)):
        with np.errstate(all="ignore"):
            assert_matches(f(x, e), x ** e, ulp=BOUND)
