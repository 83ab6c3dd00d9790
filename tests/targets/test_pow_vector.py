"""fusejit's own vector power (targets/opencl/vmath.py: ``_POW_SMALL_Y`` for exponents
|y| <= 4 in the type of x, float32 or float64; float32 ``_POW_CORE`` in double beyond), used
where a work-item computes a vector (CPU devices; lane-by-lane kernels take lane 0 of the
2-lane form): positive bases over the whole range (subnormals included) against NumPy at the
op table's bound and against the exact power (5 ULP float32, 8 float64, 1 in double), and the
lanes the builtin keeps (x <= 0, infinities, NaN, exponents of either sign and of integer value)
bit for bit against NumPy, alone and mixed into vectors of ordinary lanes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import vulkan_mode

import fusejit
from fusejit.ir.ops import OPS, Op
from fusejit.testing import assert_matches, ulp_distance

BOUND = OPS[Op.POW].ulp[32]
# |y| <= 4: computed in float (measured: 3.96 ULP at most over 1.2e6 bases; a margin for
# compilers that contract the polynomials to fma differently)
FLOAT_PATH = 5.0


def own_bound(y: float) -> tuple[float, int]:
    """(ULPs from the exact power, from the power rounded to float) that fusejit's own power
    keeps for the exponent ``y``."""
    return (FLOAT_PATH, 5) if abs(y) <= 4 else (0.6, 1)


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


@pytest.mark.parametrize("y", [2.2, -0.5, 0.1, 17.3, -40.0, 1e-3, 150.0, -150.5, 1e6, 3.7,
                               -3.9, 4.0, -4.0, 0.75, 4.0000005])
def test_positive_bases_within_the_bound_of_the_exact_power(y: float) -> None:
    x = _bases()
    y = np.float32(y)
    got = fusejit.fuse(lambda a: a ** y)(x)
    with np.errstate(all="ignore"):
        want = x ** y
        exact = x.astype(np.float64) ** np.float64(y)
    assert_matches(got, want, ulp=BOUND)
    if not _vectorised_here():
        return
    from_exact, from_rounded = own_bound(float(y))
    finite = (exact > 0) & (exact < np.finfo(np.float32).max)
    spacing = np.spacing(exact[finite].astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got[finite] - exact[finite]) / spacing) < from_exact
    with np.errstate(over="ignore"):
        rounded = exact.astype(np.float32)
    assert np.all(ulp_distance(got, rounded) <= from_rounded)  # overflow and underflow too


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
    # own power, within its bound of the exact one: NumPy's float32 power is the platform's (its
    # AVX-512 build gives 3.4e38 ** 0.5 one ULP low, 0.56 of the way to the value it rounds to)
    kept = (a <= 0) | ~np.isfinite(a) | ~np.isfinite(b)
    assert np.array_equal(got[kept, 5], want[kept, 5], equal_nan=True), (a, b, got[:, 5])
    with np.errstate(over="ignore"):
        own = ulp_distance(got[~kept, 5], exact[~kept].astype(np.float32))
    assert np.all(own <= [own_bound(v)[1] for v in b[~kept]])
    assert np.all(got[a == 1, 5] == 1)  # 1 ** y is exactly 1, also in fusejit's own lanes
    number = ~np.isnan(want[:, 5])  # (a NaN's sign is the builtin's, as before)
    assert np.array_equal(np.signbit(got[number, 5]), np.signbit(want[number, 5]))
    assert_matches(got, want, ulp=BOUND)


def test_integer_exponents_of_negative_bases_and_runtime_exponents() -> None:
    x = np.linspace(-8, 8, 1000).astype(np.float32)
    f = fusejit.fuse(lambda a, e: a ** e)
    for e in (np.float32(3.0), np.float32(-2.0), np.float32(0.5), np.float32(2.5)):
        with np.errstate(all="ignore"):
            assert_matches(f(x, e), x ** e, ulp=BOUND)


EDGES = np.array([0.0, -0.0, -1.0, -2.5, -1e-45, 1.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45,
                  2**-149 * 3, 1.1754942e-38, 2**-126, 0.5, 2.0, 3.4e38, 1e-30, 1e30, 7.0],
                 np.float32)


def _constant_powers(c: float, device: str) -> None:
    # x ** c, np.power(x, c) and np.float_power(x, c) with a Python float c (the form the
    # kernel folds to one path): zeros of both signs, negative bases, infinities, NaN, 1 and
    # subnormals, each lane among ordinary ones (float64 on Vulkan: the exact ops only)
    x = np.full((EDGES.size, 16), 3.0, np.float32)
    x[:, 7] = EDGES
    forms = [lambda a: a ** c, lambda a: np.power(a, c)]
    if device != "vulkan":
        forms.append(lambda a: np.float_power(a, c))
    got = fusejit.fuse(lambda a: [form(a) for form in forms])(x)
    with np.errstate(all="ignore"):
        want = [form(x) for form in forms]
        exact = EDGES.astype(np.float64) ** np.float64(np.float32(c))
    kept = (EDGES <= 0) | ~np.isfinite(EDGES) | (EDGES == 1)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        assert_matches(g, w, ulp=BOUND)
        assert np.array_equal(g[kept, 7], w[kept, 7], equal_nan=True), (c, g[:, 7], w[:, 7])
        number = kept & ~np.isnan(w[:, 7])  # (a NaN's sign is the builtin's)
        assert np.array_equal(np.signbit(g[number, 7]), np.signbit(w[number, 7]))
    if device == "opencl" and _vectorised_here():  # (subnormals within fusejit's own bound)
        with np.errstate(over="ignore", under="ignore"):
            own = ulp_distance(got[0][:, 7], exact.astype(np.float32))
        assert np.all(own[~((EDGES <= 0) | ~np.isfinite(EDGES))] <= own_bound(c)[1])


CONSTANTS = [2.2, -2.2, 0.3, -0.3, 3.9, -1.5, 0.001, 17.3, -40.5]


@pytest.mark.parametrize("c", CONSTANTS)
def test_a_constant_exponent_keeps_numpys_special_values(c: float, device: str) -> None:
    _constant_powers(c, device)


def test_a_constant_exponent_in_wgsl(monkeypatch: pytest.MonkeyPatch) -> None:
    previous = fusejit.get_default_device()
    vulkan_mode(monkeypatch, "all")  # (every kernel translated to WGSL)
    fusejit.set_default_device("vulkan")
    try:
        for c in CONSTANTS:
            _constant_powers(c, "vulkan")
    finally:
        fusejit.set_default_device(previous)


FLOAT64_PATH = 8.0  # |y| <= 4 in float64: the same path in double (measured: 3.99 ULP at most)


def _bases64() -> np.ndarray:
    rng = np.random.default_rng(5)
    return np.concatenate([
        rng.uniform(0, 100, 20000), 10.0 ** rng.uniform(-320, 308, 60000),
        1 + rng.uniform(-1e-6, 1e-6, 2000),
        rng.integers(1, 0x7FF0000000000000, 60000).view(np.float64),  # every finite exponent
        [5e-324, 2.2250738585072014e-308, 1.0, 2.0, 0.5, 1.7976931348623157e308]])


@pytest.mark.parametrize("y", [2.2, -0.5, 3.7, -3.9, 4.0, -4.0, 0.1, 1e-3, 17.3, -40.5])
def test_float64_positive_bases_within_the_bound_of_the_exact_power(y: float) -> None:
    x = _bases64()
    got = fusejit.fuse(lambda a: a ** y)(x)
    with np.errstate(all="ignore"):
        want = x ** y
        exact = np.power(x.astype(np.longdouble), np.longdouble(y))  # (64-bit mantissa)
    assert_matches(got, want, ulp=BOUND)
    if not _vectorised_here() or abs(y) > 4:  # (beyond: the builtin, the op table's bound)
        return
    info = np.finfo(np.float64)
    normal = (exact > info.tiny) & (exact < info.max)
    spacing = np.spacing(exact[normal].astype(np.float64)).astype(np.longdouble)
    err = np.abs(got[normal].astype(np.longdouble) - exact[normal]) / spacing
    assert float(np.max(err)) < FLOAT64_PATH
    assert np.all(ulp_distance(got[~normal], want[~normal]) <= 2)  # subnormal, 0 and inf


EDGES64 = np.array([0.0, -0.0, -1.0, -2.5, -5e-324, 1.0, np.inf, -np.inf, np.nan, 5e-324,
                    2.2250738585072014e-308, 0.5, 2.0, 1.7976931348623157e308, 1e-300, 1e300,
                    7.0])


@pytest.mark.parametrize("c", [2.2, -2.2, 0.3, -3.9, 17.3])
def test_float64_constant_exponents_keep_numpys_special_values(c: float) -> None:
    x = np.full((EDGES64.size, 8), 3.0)
    x[:, 5] = EDGES64
    got = fusejit.fuse(lambda a: a ** c)(x)
    with np.errstate(all="ignore"):
        want = x ** c
    assert_matches(got, want, ulp=BOUND)
    kept = (EDGES64 <= 0) | ~np.isfinite(EDGES64) | (EDGES64 == 1)
    assert np.array_equal(got[kept, 5], want[kept, 5], equal_nan=True), (c, got[:, 5])
    number = kept & ~np.isnan(want[:, 5])
    assert np.array_equal(np.signbit(got[number, 5]), np.signbit(want[number, 5]))


def test_kernels_with_a_power_take_wide_vectors_where_the_device_has_them() -> None:
    # on AVX-512 CPUs a kernel computing fusejit's own power gets 64-byte vectors (float16,
    # double8): every other op beside it, PoCL's builtins among them, must still be right
    rng = np.random.default_rng(1)
    n = 2**16
    x, y = rng.uniform(-3, 50, n).astype(np.float32), rng.uniform(0.1, 5, n).astype(np.float32)
    i, d = rng.integers(-100, 100, n).astype(np.int32), rng.uniform(0, 10, n)

    def f(x, y, i, d):
        return (np.abs(x) ** 2.2 + np.exp(y) - np.log(y) * np.sqrt(y),
                np.where(x > 1, np.sin(x) ** 1.5, np.cos(y) + i),
                (np.abs(x) ** -0.7).astype(np.float64) * d + d ** 3.3 + d ** 17.3,
                np.tanh(x) + np.floor(y ** 0.3) + i ** 2 + np.maximum(x, y) ** 2.5,
                np.hypot(x, y) ** 1.1 + np.arctan2(x, y) + (x < y),
                (x.astype(np.int64) * 3) ** 2 + np.abs(x).astype(np.float64) ** 0.5)
    fused = fusejit.fuse(f)
    with np.errstate(all="ignore"):
        want = f(x, y, i, d)
    for k, (g, w) in enumerate(zip(fused(x, y, i, d), want)):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=3e-5, err_msg=f"result {k}")
    if _vectorised_here() and fusejit.default_queue().device.native_vector_width_float >= 16:
        source = fused.lower(x, y, i, d).module.source
        assert "double8 " in source  # (float64 values among them: 8 lanes of each type)


def _powers_of(c: float):
    return lambda a, b: (a ** c, b ** c)  # (c a constant of the trace)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lane_by_lane_kernels_take_the_same_power(dtype) -> None:
    # rows of 3 (no vector divides them) and a vector kernel's tail compute one lane at a time:
    # fusejit's own power there too (lane 0 of its 2-lane form), special values NumPy's
    edges = EDGES.astype(dtype) if dtype == np.float32 else EDGES64
    rng = np.random.default_rng(3)
    x = np.concatenate([edges, rng.uniform(0, 100, 3000).astype(dtype)])
    x = x[:x.size // 3 * 3].reshape(-1, 3)
    tail = np.concatenate([x.ravel(), edges])[:4096 + 5]  # (4096 in vectors, 5 after)
    for c in (2.2, -0.3, 17.3):
        got = fusejit.fuse(_powers_of(c))(x, tail)
        with np.errstate(all="ignore"):
            want = (x ** c, tail ** c)
        for base, g, w in zip((x, tail), got, want):
            assert_matches(g, w, ulp=BOUND)
            kept = ~np.isfinite(w) | (w == 0) | (base == 1)  # (NaN, infinities, zeros, 1 ** c)
            assert np.array_equal(g[kept], w[kept], equal_nan=True)
