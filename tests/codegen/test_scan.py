"""Scans (np.cumsum, np.cumprod, the nan-variants, ufunc.accumulate) against NumPy: dtype, shape
and value, along every axis, in both kernel shapes (fusejit/codegen/scan.py), fused with their
prologue and epilogue.

Tolerance: integer, max/min, logical and bitwise scans are exact. The sequential kernel (CPUs)
adds floats in NumPy's own order, so it is checked to a few ULP; the tiled GPU kernel groups the
sums differently (lanes, then work-items, then tiles), and is checked against the bound of the
module docstring, ``4 * log2(n) * eps * cumsum(|x|)`` (NumPy's pairwise ``sum`` differs from
its sequential ``cumsum`` by as much).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import fusejit
from fusejit import fuse
from fusejit.codegen import scan as scan_source
from fusejit.codegen.scan import ScanStrategy

RNG = np.random.default_rng(17)


def _data(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return RNG.random(shape) > 0.4
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -100
        return RNG.integers(lo, 100, size=shape).astype(dtype)
    return (RNG.standard_normal(shape) * 3).astype(dtype)


def _check(got, want, x=None, tiled=False):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                 got.shape, want.shape)
    if want.dtype.kind != "f" or x is None:
        np.testing.assert_array_equal(got, want)
        return
    eps = np.finfo(want.dtype).eps
    if tiled:  # the bound of scan_source's docstring, with cumsum(|x|) of the summed values
        n = max(2, want.size)
        scale = np.abs(np.cumsum(np.abs(x.astype(np.float64)), axis=-1))
        bound = 4 * np.log2(n) * eps * np.maximum(scale, 1)
        assert np.all(np.abs(got.astype(np.float64) - want) <= bound + np.abs(want) * eps)
    else:  # NumPy's order; only the last rounding of exp/log-free adds may differ
        np.testing.assert_allclose(got, want, rtol=4 * eps, atol=4 * eps)


CASES = [((37,), 0), ((5, 9), 1), ((5, 9), 0), ((3, 4, 5), 1), ((3, 4, 5), -1), ((4, 6), None),
         ((7, 1), 1), ((0, 5), 1), ((5, 0), 1), ((), None), ((), -1)]


def test_cumulative_over_shapes_and_axes():
    """Every axis (None flattens), length-1 and empty axes, 0-d input: one fused function (one
    build) computing them all."""
    xs = [_data(shape, np.float64) / 3 for shape, _ in CASES]

    def fn(*arrays):
        return tuple(f(a, axis=axis) for a, (_, axis) in zip(arrays, CASES)
                     for f in (np.cumsum, np.cumprod))

    for got, want in zip(fuse(fn)(*xs), fn(*xs)):
        _check(got, want, want)


DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint32, np.float32,
          np.float16]


def test_result_dtypes_and_wrapping():
    """NumPy's dtypes (int8 -> int64, bool -> int64, uint8 -> uint64, float16 stays), wrapping
    integer products, float16 rounded at every step as NumPy's loop does."""
    xs = [_data((3, 41), d) for d in DTYPES] + [(RNG.random(300) * 10).astype(np.float16)]

    def fn(*arrays):
        return tuple(f(a, axis=-1) for a in arrays for f in (np.cumsum, np.cumprod))

    with np.errstate(over="ignore"):
        for got, want in zip(fuse(fn)(*xs), fn(*xs)):
            _check(got, want, want)


def test_nan_variants():
    x = _data((6, 11), np.float32)
    x[RNG.random(x.shape) < 0.3] = np.nan
    xi = np.arange(6, dtype=np.int16)

    def fn(a, b):
        return (np.nancumsum(a, axis=0), np.nancumsum(a), np.nancumprod(a, axis=1),
                np.nancumprod(a), np.nancumsum(b), np.nancumprod(b))

    for got, want in zip(fuse(fn)(x, xi), fn(x, xi)):
        _check(got, want, want)


ACCUMULATE = [np.add, np.subtract, np.multiply, np.maximum, np.minimum, np.fmax, np.fmin, np.logical_and,
              np.logical_or, np.logical_xor, np.bitwise_and, np.bitwise_or, np.bitwise_xor]


def test_ufunc_accumulate():
    """Every scannable ufunc along both axes; NaN propagates in maximum, not in fmax."""
    x = _data((4, 9), np.float64)
    x[1, 3] = np.nan
    xi = _data((4, 9), np.int32)

    def fn(a, b):
        return tuple(u.accumulate(b if u.__name__.startswith("bitwise") else a, axis=axis)
                     for u in ACCUMULATE for axis in (0, 1))

    for got, want in zip(fuse(fn)(x, xi), fn(x, xi)):
        _check(got, want, want)


def test_dtype_and_out():
    """dtype= selects the loop; out= does where the input casts to it safely (int8 into int32
    sums in int32, float into int64 sums in float and casts each result)."""
    x = _data((4, 10), np.int8)
    xf = np.full(5, 0.6)

    def fn(a, af, o32, of, oi):
        np.cumsum(a, axis=1, out=o32)
        np.add.accumulate(a, axis=0, out=of)
        np.cumsum(af, out=oi)
        return np.cumsum(a, dtype=np.int16), a.cumprod(axis=1, dtype=np.float32)

    outs = [np.zeros((4, 10), np.int32), np.zeros((4, 10), np.float32), np.zeros(5, np.int64)]
    wants = [np.zeros_like(o) for o in outs]
    got = fuse(fn)(x, xf, *outs)
    want = fn(x, xf, *wants)
    for g, w in zip(outs + list(got), wants + list(want)):
        _check(g, w)


def test_views_and_the_array_api_names():
    base = _data((8, 12), np.float64)
    x = base[1::2, ::-3].T  # transposed, strided, reversed

    @fuse
    def f(a):
        return np.cumsum(a, axis=0), np.cumulative_prod(a, axis=1), a.cumsum()

    got = f(x)
    _check(got[0], np.cumsum(x, axis=0), x)
    _check(got[1], np.cumulative_prod(x, axis=1), x)
    _check(got[2], x.cumsum(), x)


def test_prologue_and_epilogue_fuse_into_one_kernel():
    x = _data((16, 33), np.float32)

    def fn(a, b):
        c = np.cumsum(a * b + 1, axis=1)
        return np.exp(-c / 100), c

    f = fuse(fn)
    assert len(f.lower(x, x).module.kernels) == 1
    for g, w in zip(f(x, x), fn(x, x)):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)


def test_scans_read_by_other_kernels():
    """A scan read at other indices (reversed, summed, scanned again) is stored once and
    loaded by the later kernels."""
    x = _data((6, 20), np.int64)

    def fn(a):
        c = np.cumsum(a, axis=1)
        return c[:, ::-1] - c, c.sum(axis=1), np.cumsum(c, axis=0), np.maximum.accumulate(c)

    for g, w in zip(fuse(fn)(x), fn(x)):
        _check(g, w)


def test_in_place_scan_of_an_argument():
    x = _data((5, 30), np.float64)
    want = np.cumprod(x, axis=1)

    @fuse
    def f(a):
        a[...] = np.cumprod(a, axis=1)

    f(x)
    _check(x, want, x)


def test_long_rows():
    """Rows long enough for the tiled kernel on a GPU (full tiles, tails, a single row split
    into blocks: reduce-then-scan); the sequential one here."""
    x1 = RNG.random(20000).astype(np.float32)
    x2 = _data((40, 3000), np.float32)
    xi = _data((3, 2500), np.int32)

    def fn(a, b, c):
        return np.cumsum(a), np.cumsum(b, axis=1) * 2, np.cumsum(c * 3, axis=1), \
            np.maximum.accumulate(c, axis=1)

    got, want = fuse(fn)(x1, x2, xi), fn(x1, x2, xi)
    _check(got[0], want[0], x1, tiled=True)
    _check(got[1], want[1], x2 * 2, tiled=True)
    _check(got[2], want[2])
    _check(got[3], want[3])


TILED = [ScanStrategy("tiled", 4, 2, 1), ScanStrategy("tiled", 4, 2, 2),
         ScanStrategy("tiled", 8, 4, 3), ScanStrategy("tiled", 4, 1, 5)]


@pytest.mark.slow  # PoCL takes 10-20 s to build a kernel with barriers in loops
@pytest.mark.skipif(os.environ.get("FUSEJIT_FUZZ_LONG") != "1",
                    reason="long: set FUSEJIT_FUZZ_LONG=1 (PoCL builds barrier loops slowly)")
@pytest.mark.parametrize("st", TILED, ids=str)
@pytest.mark.parametrize("length", [5, 8, 45, 333])
def test_tiled_kernel_shape(monkeypatch, st, length):
    """The GPU kernel shape forced on any device with small work-groups: rows shorter than a
    tile, one whole tile, tails of one and several elements per item, rows split into blocks;
    integers exact, the prologue and epilogue fused (GPU runs take this shape in
    test_long_rows without forcing it)."""
    monkeypatch.setattr(scan_source, "strategy", lambda scan, limits: st)
    xi = _data((3, length), np.int32)

    def fn(a):
        return np.cumsum(a * 3, axis=1) - 1

    _check(fuse(fn)(xi), fn(xi))


@pytest.mark.parametrize("gy", [2, 7])
def test_sequential_blocks(monkeypatch, gy):
    """CPUs split a few long rows into blocks (reduce-then-scan, no barriers): forced here on
    short rows, with a fused prologue and epilogue and an uneven last block."""
    monkeypatch.setattr(scan_source, "strategy",
                        lambda scan, limits: ScanStrategy("sequential", gy=gy))
    xi = _data((2, 45), np.int32)
    xf = RNG.random(1001).astype(np.float32)

    def fn(a, b):
        return np.cumsum(a * 3, axis=1) - 1, np.cumsum(b) * 2, np.maximum.accumulate(a, axis=1)

    got, want = fuse(fn)(xi, xf), fn(xi, xf)
    _check(got[0], want[0])
    _check(got[1], want[1], xf * 2, tiled=True)
    _check(got[2], want[2])


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("FUSEJIT_FUZZ_LONG") != "1",
                    reason="long: set FUSEJIT_FUZZ_LONG=1 (PoCL builds barrier loops slowly)")
def test_tiled_kernel_along_a_strided_axis(monkeypatch):
    """The tiled shape GPUs use for few rows along a strided axis (per-lane loads)."""
    monkeypatch.setattr(scan_source, "strategy",
                        lambda scan, limits: ScanStrategy("tiled", 4, 1, 3))
    x = _data((70, 3), np.int64)
    _check(fuse(lambda a: np.cumsum(a, axis=0) + 1)(x), np.cumsum(x, axis=0) + 1)


def test_strategy_choice():
    from fusejit.passes.plan import DeviceLimits

    gpu = DeviceLimits(max_work_group=1024, compute_units=132, is_gpu=True)
    x = fusejit.ir.graph.Node.make(fusejit.ir.ops.Op.INPUT, np.dtype(np.float32), (16384, 1024), (), 0)

    def scan(shape, axis):
        node = fusejit.ir.graph.Node.make(fusejit.ir.ops.Op.INPUT, np.dtype(np.float32), shape, (), 0)
        return fusejit.ir.graph.Node.make(fusejit.ir.ops.Op.SCAN, node.dtype, shape, (node,),
                                    (fusejit.ir.ops.Op.ADD, axis))
    assert x.shape == (16384, 1024)
    assert scan_source.strategy(scan((16384, 1024), 1), DeviceLimits()) == ScanStrategy(
        "sequential")
    cpu_long = scan_source.strategy(scan((1 << 22,), 0), DeviceLimits(compute_units=16))
    assert cpu_long.kind == "sequential" and cpu_long.gy > 8  # a block per core
    rows = scan_source.strategy(scan((16384, 1024), 1), gpu)
    assert (rows.kind, rows.gy) == ("tiled", 1)
    long = scan_source.strategy(scan((1 << 24,), 0), gpu)
    assert long.kind == "tiled" and long.gy > 100  # reduce-then-scan over many work-groups
    assert scan_source.strategy(scan((1024, 8192), 0), gpu).kind == "sequential"
    few = scan_source.strategy(scan((1 << 20, 4), 0), gpu)  # few strided rows: blocks
    assert (few.kind, few.vec) == ("tiled", 1) and few.gy > 1


@pytest.mark.parametrize("call,error,text", [
    (lambda a: np.divide.accumulate(a), fusejit.UnsupportedOperationError, "associative"),
    (lambda a: np.sin.accumulate(a), ValueError, "binary"),
    (lambda a: np.cumsum(a, axis=2), np.exceptions.AxisError, "axis 2"),
    (lambda a: np.add.accumulate(a, axis=(0, 1)), ValueError, "multiple axes"),
    (lambda a: np.add.accumulate(a[0, 0]), TypeError, "scalar"),
    (lambda a: np.cumsum(a, dtype="foo"), TypeError, "foo"),
    (lambda a: np.cumulative_sum(a), ValueError, "axis"),
    (lambda a: np.cumsum(a[0, 0], axis=1), np.exceptions.AxisError, "dimension 1"),
    (lambda a: np.add.accumulate(a, where=True), TypeError, "where"),
])
def test_errors_are_numpys(call, error, text):
    x = np.ones((3, 4))
    if error is not fusejit.UnsupportedOperationError:
        with pytest.raises(error, match=text):
            call(x)  # NumPy raises the same class
    with pytest.raises(error, match=text):
        fuse(call)(x)


def test_out_of_the_wrong_shape():
    @fuse
    def f(a, o):
        np.cumsum(a, out=o)

    with pytest.raises(ValueError, match="wrong size"):
        f(np.ones((3, 4)), np.zeros(5))


def test_validate_mode_bounds_scans():
    x = _data((4, 50), np.float32)
    f = fuse(lambda a: (np.cumsum(a * 2, axis=1), np.cumprod(a / 8, axis=0),
                        np.maximum.accumulate(a, axis=1), np.cumsum(a > 0, axis=1)),
             validate=True)
    for got, want in zip(f(x), (np.cumsum(x * 2, axis=1), np.cumprod(x / 8, axis=0),
                                np.maximum.accumulate(x, axis=1), np.cumsum(x > 0, axis=1))):
        assert np.asarray(got).dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
