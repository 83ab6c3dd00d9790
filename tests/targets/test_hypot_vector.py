"""fusejit's own float32 vector hypot (targets/opencl/vmath.py ``_HYPOT_CORE``), used where a
work-item computes a float vector (CPU devices): the whole float range (subnormals, values whose
squares overflow or underflow in float32) within 1 ULP of the exact value and NumPy's result at
the op table's bound; the special values (infinities beside NaN, signed zeros) as NumPy's, alone
and mixed into vectors of ordinary lanes; float16 too."""

from __future__ import annotations

import numpy as np
import pytest

import fusejit
from fusejit.ir.ops import OPS, Op
from fusejit.testing import assert_matches, ulp_distance

BOUND = OPS[Op.HYPOT].ulp[32]
hypot = fusejit.fuse(np.hypot)


def _vectorised_here() -> bool:
    from fusejit.runtime.opencl.devices import device_info

    return not device_info(fusejit.default_queue().device).limits.is_gpu


def _operands(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mags = 10.0 ** rng.uniform(-45, 38.5, (2, n))  # subnormals to FLT_MAX, squares out of range
    mags[:, : n // 4] = rng.uniform(-3, 3, (2, n // 4))  # ordinary values of both signs
    mags[1, n // 4: n // 2] = mags[0, n // 4: n // 2] * rng.uniform(0.999, 1.001, n // 4)
    a, b = mags.astype(np.float32)
    b[n // 2: 3 * n // 4] *= -1
    return a, b


def test_the_whole_range_within_an_ulp_of_the_exact_value() -> None:
    a, b = _operands(20000, 3)
    got = hypot(a, b)
    with np.errstate(over="ignore"):
        assert_matches(got, np.hypot(a, b), ulp=BOUND)
    if not _vectorised_here():
        return
    assert "fj_hypotf" in hypot.lower(a, b).kernels[0].source
    exact = np.hypot(a.astype(np.float64), b.astype(np.float64))
    with np.errstate(over="ignore"):
        assert np.all(ulp_distance(got, exact.astype(np.float32)) <= 1)
    fin = exact < np.finfo(np.float32).max
    spacing = np.spacing(exact[fin].astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got[fin] - exact[fin]) / spacing) <= 0.5 + 2.0**-20


SPECIAL = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-45, -3.4e38, 3.4e38,
                    1e-20, 1e20], np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_special_values_are_numpys(dtype) -> None:
    a, b = (v.ravel() for v in np.meshgrid(SPECIAL, SPECIAL))
    x = np.full((a.size, 64), 3.0, dtype)
    y = np.full((a.size, 64), 4.0, dtype)
    with np.errstate(over="ignore"):
        x[:, 3], y[:, 3] = a.astype(dtype), b.astype(dtype)
    got = hypot(x, y)
    if _vectorised_here():
        assert "fj_hypotf" in hypot.lower(x, y).kernels[0].source
    with np.errstate(over="ignore"):
        want = np.hypot(x, y)
    assert got.dtype == want.dtype
    assert_matches(got, want, ulp=1)  # NaN where NumPy gives NaN, inf beside a NaN, +0
    assert not np.signbit(got).any()


def test_a_sobel_magnitude_is_one_kernel_with_numpys_values() -> None:
    def sobel(img):
        gx = (img[:-2, 2:] + 2 * img[1:-1, 2:] + img[2:, 2:]) - \
            (img[:-2, :-2] + 2 * img[1:-1, :-2] + img[2:, :-2])
        gy = (img[2:, :-2] + 2 * img[2:, 1:-1] + img[2:, 2:]) - \
            (img[:-2, :-2] + 2 * img[:-2, 1:-1] + img[:-2, 2:])
        return np.hypot(gx, gy)
    img = np.random.default_rng(5).random((67, 130)).astype(np.float32)
    f = fusejit.fuse(sobel)
    assert_matches(f(img), sobel(img), ulp=BOUND, atol=1e-6)
    assert len(f.lower(img).kernels) == 1


def test_complex64_abs_and_lane_by_lane_hypot_are_numpys() -> None:
    # kernels with a complex value compute one lane at a time: there a CPU takes fusejit's
    # scalar hypot in double (PoCL's builtin is a call per element), a GPU its builtin
    a, b = (v.ravel() for v in np.meshgrid(SPECIAL, SPECIAL))
    ra, rb = _operands(4000, 4)
    x, y = np.concatenate([a, ra]), np.concatenate([b, rb])
    z = np.empty(x.size, np.complex64)
    z.real, z.imag = x, y
    f = fusejit.fuse(lambda z, p, q: (np.abs(z), np.hypot(p, q) + 0 * (z * z).real))
    got_abs, got_hypot = f(z, x, y)
    with np.errstate(all="ignore"):
        want_abs, want_hypot = np.abs(z), np.hypot(x, y) + 0 * (z * z).real
    assert_matches(got_abs, want_abs, ulp=2)  # (NumPy's complex64 abs: 2 ULP off, at times)
    assert_matches(got_hypot, want_hypot, ulp=1)
    assert not np.signbit(got_abs).any()
    if _vectorised_here():
        assert "fj_hypotf(" in f.lower(z, x, y).kernels[0].source
        with np.errstate(over="ignore"):
            exact = np.hypot(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
        assert np.all(ulp_distance(got_abs, exact) <= 1)


def test_complex64_functions_take_the_vector_sine_and_cosine_on_cpus() -> None:
    # (PoCL's scalar sin and cos are calls: complex64 exp, sinh, cosh... use the vector trig)
    rng = np.random.default_rng(12)
    y = np.concatenate([rng.uniform(-10, 10, 3000), 10.0 ** rng.uniform(-40, 38, 1000),
                        [0.0, -0.0, np.pi, 2.0**20 + 0.5, 3.4e38, np.inf, -np.inf, np.nan]])
    x = np.concatenate([rng.uniform(-5, 5, y.size - 8), [0.0, 1.0, -np.inf, np.inf, 0.5,
                                                          np.nan, 2.0, -1.0]])
    z = np.empty(y.size, np.complex64)
    z.real, z.imag = x.astype(np.float32), y.astype(np.float32)
    f = fusejit.fuse(lambda z: (np.exp(z), np.sinh(z), np.cos(z)))
    got = f(z)
    with np.errstate(all="ignore"):
        want = (np.exp(z), np.sinh(z), np.cos(z))
    for g, w in zip(got, want):
        assert_matches(g, w, ulp=OPS[Op.EXP].culp[32])
    if _vectorised_here():
        assert "fj_cos1(" in f.lower(z).module.source
