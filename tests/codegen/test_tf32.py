"""The tensor-core GEMM's arithmetic in NumPy (fusejit/codegen/gemm/tf32.py), no GPU needed: TF32 rounding as
cvt.rna.tf32.f32 does it, the 3xTF32 split's exactness, and the 3xTF32 product's error against
float64 no worse than the SIMT float32 kernel's over K from 256 to 8192."""

from __future__ import annotations

import numpy as np
import pytest

from fusejit.codegen.gemm.tf32 import error_stats, mma_model, simt_model, split, tf32_round


def _f32(bits: int) -> np.float32:
    return np.array([bits], np.uint32).view(np.float32)[0]


def test_tf32_round_to_nearest_ties_away():
    one = np.float32(1.0)
    ulp = np.float32(2.0 ** -10)  # tf32's unit at 1
    cases = {
        one + ulp / 2: one + ulp,  # a tie: away from zero
        -(one + ulp / 2): -(one + ulp),
        one + ulp / 2 - np.float32(2 ** -23): one,  # just below the tie: down
        one + ulp / 2 + np.float32(2 ** -23): one + ulp,
        one + ulp: one + ulp,  # already tf32: unchanged
        np.float32(0.0): np.float32(0.0),
        _f32(0x00001000): _f32(0x00002000),  # subnormal tie: away
        _f32(0x7F7FFFFF): np.float32(np.inf),  # the largest float32 rounds past tf32's range
    }
    for x, want in cases.items():
        got = tf32_round(np.array([x], np.float32))[0]
        assert got.view(np.uint32) == np.float32(want).view(np.uint32), (x, got, want)
    special = np.array([np.inf, -np.inf, np.nan], np.float32)
    np.testing.assert_array_equal(tf32_round(special), special)


def test_tf32_round_keeps_ten_mantissa_bits_and_is_nearest():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(100_000) * 10.0 ** rng.integers(-30, 30, 100_000)).astype(np.float32)
    r = tf32_round(x)
    assert np.all(r.view(np.uint32) & 0x1FFF == 0)
    # nearest: no tf32 neighbour (one unit up or down) is closer
    unit = (np.abs(x).view(np.uint32) & 0x7F800000).view(np.float32) * np.float32(2.0 ** -10)
    err = np.abs(r.astype(np.float64) - x)
    assert np.all(err <= unit.astype(np.float64) / 2)
    assert np.all(np.sign(r) == np.sign(x))


def test_split_reproduces_x():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(100_000) * 10.0 ** rng.integers(-20, 20, 100_000)).astype(np.float32)
    big, small = split(x)
    assert np.all(big.view(np.uint32) & 0x1FFF == 0) and np.all(small.view(np.uint32) & 0x1FFF == 0)
    # x - big is exact in float32 (at most 13 significant bits) ...
    np.testing.assert_array_equal((x - big).astype(np.float64), x.astype(np.float64) - big)
    # ... and small keeps 11 of them: big + small is x to 2**-22 relative (float32's
    # rounding unit is 2**-24): the split loses less than the float32 product rounding would
    resid = np.abs(x.astype(np.float64) - big - small)
    assert np.all(resid <= 2.0 ** -22 * np.abs(x.astype(np.float64)))
    assert np.median(resid / np.abs(x.astype(np.float64))) < 2.0 ** -24


@pytest.mark.parametrize("k", [256, 1024, 4096, 8192])
def test_3xtf32_error_no_worse_than_simt_float32(k):
    rng = np.random.default_rng(k)
    a = rng.standard_normal((24, k)).astype(np.float32)
    b = rng.standard_normal((k, 24)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    mx3, rms3 = error_stats(mma_model(a, b, "3xtf32"), ref)
    mxs, rmss = error_stats(simt_model(a, b), ref)
    assert mx3 <= mxs and rms3 <= rmss, ((mx3, rms3), (mxs, rmss))
    # why the kernel sums each step from zero: tensor cores carrying the whole sum, rounding
    # toward zero, drift past the SIMT kernel's error
    mxc, rmsc = error_stats(mma_model(a, b, "3xtf32", partial=False), ref)
    assert mxc > mxs and rmsc > rmss
    # plain TF32 is the far coarser one (products rounded to 10 bits), as documented
    mxt, rmst = error_stats(mma_model(a, b, "tf32"), ref)
    assert rmst > 50 * rmss
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert mxt <= np.max((2.0 ** -10 + 2.0 ** -21 + 4 * k * 2.0 ** -24) * scale)


def test_round_toward_zero():
    from fusejit.codegen.gemm.tf32 import round_toward_zero

    x = np.array([1 + 2.0 ** -30, -(1 + 2.0 ** -30), 1 - 2.0 ** -30, 3.0, -0.0])
    want = np.array([1.0, -1.0, np.nextafter(np.float32(1), np.float32(0)), 3.0, -0.0],
                    np.float32)
    np.testing.assert_array_equal(round_toward_zero(x), want)
