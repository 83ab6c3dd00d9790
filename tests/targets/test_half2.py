"""Packed float16 lanes (targets/opencl/half2.py): through ``emulated()`` (the PTX helpers
spelled as OpenCL C) on any device, natively where the device has them (an NVIDIA GPU), with
the CPU and the GPU lowering. Every result is compared bit for bit with the unpacked spelling
(``unpacked()``: OpenCLTarget's, what the device computed before) and with NumPy; the probe's
expectations are checked against the emulated helpers."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import pytest

import fusejit
from fusejit import fuse
from fusejit.runtime.opencl.devices import device_info
from fusejit.runtime.opencl.half2_probe import mismatches
from fusejit.targets.opencl.half2 import _literal_bits, emulated, unpacked
from fusejit.testing import assert_matches


@pytest.fixture(params=["emulated", "native"])
def packed(request) -> Callable[[], AbstractContextManager[None]]:
    """How the packed spelling is asked for: emulated, or natively (the device's default)."""
    if request.param == "native":
        if not device_info(fusejit.default_queue().device).half2:
            pytest.skip("the device has no native packed float16 (runtime/opencl/half2_probe.py)")
        return nullcontext
    return emulated


def _halves(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random float16 bit patterns (all classes: subnormal, inf, NaN) and the special values."""
    x = rng.integers(0, 1 << 16, n, dtype=np.uint16).view(np.float16)
    x[:12] = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504, -65504, 6e-8, -6e-8, 6.1e-5, 1, -1]
    return x


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return np.array_equal(a, b)
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all((a.view(np.uint16 if a.itemsize == 2 else np.uint32)
                        == b.view(np.uint16 if b.itemsize == 2 else np.uint32)) | nan))


# (function, whether NumPy's result is the exact one fusejit must reproduce bit for bit)
CASES = {
    "arith": (lambda x, y: (x + y, x - y, x * y, x / y), True),
    "chain": (lambda x, y: (x * x + np.float16(1.5)) * y - x, True),
    "signs": (lambda x, y: (-x, np.abs(y), +x, np.square(x), x ** 2), True),
    "constants": (lambda x, y: (0.5 * x, x + np.float16(np.inf), x * 3.0, 1.0 - y), True),
    "where": (lambda x, y: (np.where(x > y, x, y), np.where(x < 0, -x, 2 * y),
                            np.where(x > 0, x, np.float16(-np.nan))), True),
    "extrema": (lambda x, y: (np.maximum(x, y), np.minimum(x * y, y), np.fmax(x, y)), True),
    "compare": (lambda x, y: (x * y > x, np.isnan(x + y), x == y), True),
    "casts": (lambda x, y: ((x * y).astype(np.float32) * 3, (x + y).astype(np.int32),
                            (x.astype(np.float32) * 1e-3).astype(np.float16),
                            (x > 1).astype(np.float16) * y), True),
    "math": (lambda x, y: (np.sqrt(np.abs(x)) * y, np.tanh(x) + y, np.exp(x * 0.01),
                           np.arctan2(x, y), x ** y), False),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("n", [4096 + 5, 1 << 14])
def test_packed_matches_unpacked_and_numpy(rng, lowering: str, packed: Any, case: str,
                                           n: int) -> None:
    fn, exact = CASES[case]
    x, y = _halves(rng, n), _halves(rng, n)
    with unpacked():
        before = fuse(fn)(x, y)
    with packed():
        f = fuse(fn)
        got = f(x, y)
        source = f.lower(x, y).module.source
    assert "fj_h2f" in source  # the packed spelling was used
    with np.errstate(all="ignore"):
        want = fn(x, y)
    got, before, want = (v if isinstance(v, tuple) else (v,) for v in (got, before, want))
    for g, b, w in zip(got, before, want, strict=True):
        assert _same_bits(g, b), case
        if exact:
            assert g.dtype == w.dtype and g.shape == w.shape
            if g.dtype == np.int32:  # NaN, inf and overflow to int are NumPy's C casts: only
                fine = np.abs((x + y).astype(np.float64)) < 2**31  # the defined ones
                assert np.array_equal(g[fine], w[fine]), case
            else:
                assert _same_bits(g, w), case
        else:  # (a device's float32 builtins may round to the other float16 neighbour)
            assert_matches(g, w, ulp=1)


@pytest.mark.parametrize("shape", [(4096, 12), (512, 6), (300, 10)])
def test_packed_lane_counts_and_tails(rng, lowering: str, packed: Any,
                                      shape: tuple[int, ...]) -> None:
    """4 and 2 lanes (rows that 8 does not divide), 1 lane, and the tail elements."""
    x = (rng.standard_normal(shape) * 8).astype(np.float16)
    fn = lambda x: (x * x - np.float16(0.25) * x, np.tanh(x) * x)  # noqa: E731
    with packed():
        got = fuse(fn)(x)
    with unpacked():
        before = fuse(fn)(x)
    assert _same_bits(got[0], fn(x)[0])
    assert _same_bits(got[1], before[1])
    assert_matches(got[1], fn(x)[1])


def test_packed_with_reductions_and_scalars(rng, lowering: str, packed: Any) -> None:
    x = (rng.standard_normal((256, 64)) * 4).astype(np.float16)

    def fn(x: Any, s: float) -> Any:
        y = x * x + s
        return y, y.sum(axis=1), (y / y.max(axis=1, keepdims=True))
    with packed():
        got = fuse(fn)(x, 0.5)
    for g, w in zip(got, fn(x, np.float16(0.5)), strict=True):
        assert_matches(g, w)
    assert _same_bits(got[0], fn(x, np.float16(0.5))[0])


def test_probe_expectations_match_the_helpers() -> None:
    # the probe's NumPy expectations are right: the C spelling (f32 op, then rounded) meets them
    queue = fusejit.default_queue()
    assert mismatches(queue, native=False) == 0
    if device_info(queue.device).half2:
        assert mismatches(queue, native=True) == 0


def test_tanh_float16_exhaustive(packed: Any) -> None:
    """Every float16 value: the packed tanh (the unpacked template lane by lane) is the
    unpacked one, and within a ULP of NumPy's float16 loop (equal on NumPy 2.4.6 here and on
    the H200 host's 2.5.2, both equal to float64 tanh rounded; NumPy's float16 tanh itself may
    differ between machines)."""
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    with packed():
        got = fuse(np.tanh)(h)
    with unpacked():
        before = fuse(np.tanh)(h)
    with np.errstate(invalid="ignore"):
        want = np.tanh(h)
    assert _same_bits(got, before)
    assert_matches(got, want, ulp=1)


def test_literal_bits() -> None:
    assert _literal_bits("0x1p-1f") == 0x3800
    assert _literal_bits("(-0x1p+0f)") == 0xbc00
    assert _literal_bits("INFINITY") == 0x7c00 and _literal_bits("(-INFINITY)") == 0xfc00
    assert _literal_bits("0x1.988p-1f") == int(np.array(np.float16(0.7978845608)).view(np.uint16))
    assert _literal_bits("NAN") == int(np.array(np.float16(np.nan)).view(np.uint16))
    assert _literal_bits("(-NAN)") == int(np.array(np.float16(-np.nan)).view(np.uint16))
    assert _literal_bits("v3") is None
    assert _literal_bits("0x1.0000002p+0f") is None  # not a float16 value
