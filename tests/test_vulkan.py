"""The Vulkan device's own surface: fusejit.vulkan arrays and views, choosing the device, the
errors for what the Vulkan target lacks. (The op and reduction catalogs and the fuzz slice run
on Vulkan through the ``device`` fixture.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusejit
from fusejit import UnsupportedDTypeError, fuse
from fusejit.ir.ops import Op
from fusejit.testing import assert_matches, flushes_subnormals, op_ulp

# every test here runs on the Vulkan device (skipped with the reason where there is none)
pytestmark = pytest.mark.parametrize("device", ["vulkan"], indirect=True)


@pytest.fixture
def fv(device):
    import fusejit.vulkan

    return fusejit.vulkan


def test_arrays_views_and_results(fv, rng) -> None:
    x = rng.standard_normal((6, 40)).astype(np.float32)
    d = fv.to_device(x)
    assert (d.shape, d.dtype) == (x.shape, x.dtype)
    np.testing.assert_array_equal(d.get(), x)
    f = fuse(lambda a: a * 2 + 1)
    for view, host in ((d[1::2, 3:30:3], x[1::2, 3:30:3]), (d.T, x.T), (d[::-1, 5], x[::-1, 5]),
                       (d[2], x[2])):
        np.testing.assert_array_equal(view.get(), host)
        out = f(view)
        assert isinstance(out, fv.Array)
        np.testing.assert_array_equal(out.get(), host * np.float32(2) + np.float32(1))


def test_bool_and_integer_arrays(fv) -> None:
    b = np.array([True, False, True, True])
    i = np.array([5, -7, 2**31 - 1, -(2**31)], np.int32)
    got = fuse(lambda b, i: (np.where(b, i + 1, i // 3), ~b))(fv.to_device(b), fv.to_device(i))
    np.testing.assert_array_equal(got[0].get(), np.where(b, i + np.int32(1), i // 3))
    np.testing.assert_array_equal(got[1].get(), ~b)
    assert got[1].get().dtype == np.bool_


def test_in_place_several_outputs_and_validate(fv, rng) -> None:
    x = rng.standard_normal(1000).astype(np.float32)

    @fuse(validate=True)
    def step(p, g):
        p -= 0.5 * g
        return p.sum(), np.abs(g).max()

    d = fv.to_device(x)
    total, biggest = step(d, fv.to_device(x))
    want = x - np.float32(0.5) * x
    np.testing.assert_array_equal(d.get(), want)
    np.testing.assert_allclose(total.get(), want.sum(), rtol=1e-5)
    assert biggest.get() == np.abs(x).max()


def test_default_device_picks_the_target_for_numpy_inputs(fv) -> None:
    f = fuse(lambda a: a + 1)
    x = np.arange(8, dtype=np.float32)
    previous = fusejit.get_default_device()
    try:
        for name in ("vulkan", "opencl", "vulkan"):
            fusejit.set_default_device(name)
            np.testing.assert_array_equal(f(x), x + 1)
            np.testing.assert_array_equal(f(x), x + 1)  # the fast path honours the switch
            assert f.lower(x).device.key.startswith("vulkan") == (name == "vulkan")
    finally:
        fusejit.set_default_device(previous)
    with pytest.raises(ValueError, match="unknown device"):
        fusejit.set_default_device("metal")


def test_missing_dtypes_name_what_is_missing(fv) -> None:
    # an adapter without shader-f16 names the feature (lavapipe and the H200 have it)
    from fusejit.targets.glsl.target import GLSLTarget

    with pytest.raises(UnsupportedDTypeError, match="shader-int64"):
        GLSLTarget(frozenset()).storage_type(np.dtype(np.int64))

    with pytest.raises(UnsupportedDTypeError, match="shader-f16"):
        GLSLTarget(frozenset()).storage_type(np.dtype(np.float16))
    with pytest.raises(UnsupportedDTypeError, match="shader-f64"):
        GLSLTarget(frozenset()).storage_type(np.dtype(np.float64))
    if "shader-f64" in fv.default_device().features:  # float64: the exact ops only
        d = fv.to_device(np.array([0.5, 2.0]))
        with pytest.raises(UnsupportedDTypeError, match="float64 exp .*transcendental"):
            fuse(np.exp)(d)
        np.testing.assert_array_equal(fuse(lambda a: np.sqrt(a) / 3)(d).get(),
                                      np.sqrt(d.get()) / 3)
    d = fv.to_device(np.arange(4, dtype=np.int32))
    np.testing.assert_array_equal(fuse(lambda a: a.sum(dtype=np.int32))(d).get(), 6)
    if "shader-int64" not in fv.default_device().features:
        with pytest.raises(UnsupportedDTypeError, match="int64"):
            fuse(lambda a: a.sum())(d)  # NumPy sums int32 into int64


def test_64_bit_integers_compile_as_wgsl(fv, rng) -> None:
    """int64 and uint64 (the adapter's shader-int64; naga's GLSL has no int64_t) run in WGSL
    kernels: NumPy's int32 sums, argmax indices, wrapping arithmetic, and the conversions
    between the widths, which bit operations spell (see targets/wgsl_expr._WIDEN)."""
    from fusejit.runtime.vulkan.pipelines import wgsl_needed

    dev = fv.default_device()
    if "shader-int64" not in dev.features:
        pytest.skip("this Vulkan adapter has no shader-int64: int64 arrays raise "
                    "UnsupportedDTypeError naming it (test_missing_dtypes_name_what_is_missing)")
    x = rng.integers(-2**31, 2**31, 5000, dtype=np.int64).astype(np.int32)
    x[:3] = -1, -2**31, 2**31 - 1
    big = x.astype(np.int64) * np.int64(3_000_000_007)
    d, dbig = fv.to_device(x), fv.to_device(big)
    f = fuse(lambda a, b: (a.sum(), np.argmax(a), np.argmin(b), a.astype(np.int64) < 0,
                           a.astype(np.uint64), (b // 7) % 11, b.astype(np.float64),
                           b.astype(np.uint64) >> np.uint64(3), (b > a).sum()))
    got = f(d, dbig)
    want = (x.sum(), np.argmax(x), np.argmin(big), x.astype(np.int64) < 0, x.astype(np.uint64),
            (big // 7) % 11, big.astype(np.float64), big.astype(np.uint64) >> np.uint64(3),
            (big > x).sum())
    for g, w in zip(got, want):
        g = g.get()
        assert g.dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w)
    assert all(wgsl_needed(dev, k.source) for k in f.lower(d, dbig).module.kernels)


def test_fancy_indexing_of_a_device_array_is_refused(fv) -> None:
    d = fv.to_device(np.arange(4, dtype=np.float32))
    with pytest.raises(TypeError, match="basic indexing"):
        d[[0, 2]]


def _halves() -> np.ndarray:
    """float16 edge cases: every rounding boundary kind (halfway up/down/to even, into the
    subnormals, to the largest finite and past it to inf), signed zeros, NaN, inf."""
    with np.errstate(over="ignore"):
        h = np.array([0.0, -0.0, 1.0, 1.0009765625, 2049.0, 2051.0, 65504.0, 65519.9, 65520.0,
                      -65520.0, 6.1035156e-05, 6.0975552e-05, 5.9604645e-08, 2.9802322e-08,
                      8.940697e-08, -1.1920929e-07, 1e-9, np.inf, -np.inf, np.nan, 0.1, 0.3,
                      1e5], np.float32)
    return h


def test_float16_rounds_each_op_as_numpy(fv, rng) -> None:
    if "shader-f16" not in fv.default_device().features:
        pytest.skip("this Vulkan adapter has no shader-f16")
    x32 = np.concatenate([_halves(), rng.standard_normal(200).astype(np.float32) * 300])
    y32 = np.concatenate([np.full(_halves().size, 1.0009766, np.float32),
                          rng.standard_normal(200).astype(np.float32)])
    x, y = x32.astype(np.float16), y32.astype(np.float16)

    def f(a, b, c):
        return a * b + a, a / b, (c.astype(np.float16) - a) * b, np.nextafter(a, b), \
            np.where(np.isfinite(a), a, 0).astype(np.int32), (a * b).sum(), np.maximum(a, b)

    with np.errstate(all="ignore"):
        want = f(x, y, x32)
        got = fuse(f)(fv.to_device(x), fv.to_device(y), fv.to_device(x32))
    for g, w in zip(got, want):
        g = g.get()
        assert g.dtype == w.dtype
        if w.ndim == 0:  # a float32 pairwise sum in another order: within a half ulp or two
            np.testing.assert_allclose(g, w, rtol=2e-3)
        else:
            np.testing.assert_array_equal(g, w)


def test_cached_calls_keep_the_aliasing_rules(fv, rng) -> None:
    """Repeated calls take the fast cache path; arrays sharing a buffer still take the full
    path (its aliasing analysis), whichever came first."""
    x = rng.standard_normal(64).astype(np.float32)

    @fuse
    def acc(a, b):
        a += b[::-1]

    want = x + x[::-1]
    for _ in range(3):
        d, e = fv.to_device(x), fv.to_device(x)
        acc(d, e)
        np.testing.assert_array_equal(d.get(), want)
        d = fv.to_device(x)
        acc(d, d)  # NumPy reads b before writing a where they overlap
        np.testing.assert_array_equal(d.get(), want)


def test_random_numbers_name_what_vulkan_lacks(fv) -> None:
    import fusejit.random as fr

    x = fv.to_device(np.ones(64, np.float32))
    with pytest.raises(UnsupportedDTypeError, match="fusejit.random's Philox4x64-10"):
        fuse(lambda a, k: a * fr.bernoulli(k, 0.5, a.shape))(x, fr.key(0))


def test_a_buffer_returns_to_the_pool_once_its_array_and_views_are_gone(fv) -> None:
    dev = fv.default_device()

    def pooled(buf) -> bool:
        return any(b is buf for b in dev._free.get(buf.size, []))

    a = fuse(lambda x: x + 1)(fv.to_device(np.arange(1000, dtype=np.float32)))  # a result
    buf, view = a.base_data, a[::2]
    del a
    assert not pooled(buf)  # the view still reads it
    np.testing.assert_array_equal(view.get(), np.arange(0, 1000, 2, dtype=np.float32) + 1)
    del view
    assert pooled(buf)


def _softmax(a):
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layernorm(a):
    m = a.mean(axis=-1, keepdims=True)
    return (a - m) / np.sqrt(((a - m) ** 2).mean(axis=-1, keepdims=True) + np.float32(1e-5))


@pytest.mark.parametrize("cols", [33, 1000, 1024])
def test_rows_kept_in_registers_are_unrolled(fv, rng, cols) -> None:
    """Row fusion keeps each row in registers over loops unrolled in the GLSL text (naga has
    no unroll hint); rows that do not split evenly over the lanes leave the copies early."""
    from fusejit.targets.glsl.target import unroll

    x = rng.standard_normal((37, cols)).astype(np.float32)
    d = fv.to_device(x)
    for fn in (_softmax, _layernorm):
        f = fuse(fn)
        np.testing.assert_allclose(f(d).get(), fn(x), rtol=1e-4, atol=1e-6)  # exp: 256 ulp
        source = f.lower(d).source
        assert "} while (false);" in source and "/*fj_unroll*/" not in source
    loop = ["/*fj_unroll*/for (int k = 0; k < 2; k++) {", "    s += c[k];", "}"]
    assert unroll(loop) == ["do {", "{ const int k = 0;", "    s += c[k];", "}",
                            "{ const int k = 1;", "    s += c[k];", "}", "} while (false);"]
    odd = ["/*fj_unroll*/for (int k = 0; k < 2; k++) {", "    if (k > 0) continue;", "}"]
    assert unroll(odd) == [odd[0].replace("/*fj_unroll*/", ""), *odd[1:]]  # left a loop


@pytest.mark.parametrize("shape", [(37, 1000), (6, 4096), (9, 40)])
def test_row_kernels_hold_several_rows_of_one_subgroup_each(fv, glsl_barriers, rng,
                                                            shape) -> None:
    """With GLSL barriers (FUSEJIT_VULKAN_WGSL=0), which keep only a subgroup in step, a row's
    lanes are one 32-lane team and a work-group holds several rows (the last group only
    partly): every lane's part of every row, from lane 32 and row 4 on too, reaches the row's
    result."""
    x = rng.standard_normal(shape).astype(np.float32)
    x[:, -1] = 50.0  # the maximum in the last lane of each row
    x[-1, 33 % shape[1]] = 60.0  # and once in lane 33 of the last (padded) group's last row
    d = fv.to_device(x)
    f = fuse(lambda a: (a.max(axis=1), a.sum(axis=1), (a > 49).any(axis=1), _softmax(a)))
    got = f(d)
    np.testing.assert_array_equal(got[0].get(), x.max(axis=1))
    np.testing.assert_allclose(got[1].get(), x.sum(axis=1), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(got[2].get(), (x > 49).any(axis=1))
    np.testing.assert_allclose(got[3].get(), _softmax(x), rtol=1e-4, atol=1e-7)
    sizes = {k.local_size for k in f.lower(d).module.kernels}
    assert (32, 4) in sizes and all(math.prod(s) <= 128 for s in sizes)


def test_float64_literals_and_scalars_are_exact(fv) -> None:
    """naga's GLSL has no 64-bit literals: constants are sums of float32 parts scaled by
    powers of two, and dynamic scalars arrive as std140 doubles in the uniform block."""
    if "shader-f64" not in fv.default_device().features:
        pytest.skip("this Vulkan adapter has no shader-f64, so no float64 at all (its arrays raise "
                    "UnsupportedDTypeError, which test_missing_dtypes_name_what_is_missing covers)")
    d = fv.to_device(np.ones(3))
    for v in (0.1, 1 / 3, np.pi, -1e300, 1e-300, 123456789.123456789, 2.0**-1000 * 3):
        np.testing.assert_array_equal(fuse(lambda a, v=v: a * v)(d).get(), v)  # a literal
        got = fuse(lambda a, t, s: (a * s, a + t))(d, np.float32(2.5), v)  # std140: reordered
        np.testing.assert_array_equal(got[0].get(), v)
        np.testing.assert_array_equal(got[1].get(), 3.5)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_constant_shifts_of_the_width_or_more(fv, dtype) -> None:
    """x << 100 is 0 and x >> 100 is 0 or -1, as in NumPy: naga rejects a constant shift of 32
    or more even in the branch that is not taken (found by the fuzzer on the H200)."""
    x = np.array([1, -7, 12345, -2**31, 2**31 - 1, 0], np.int64).astype(dtype)
    for c in (0, 5, 31, 32, 100):
        def f(x, c=c):
            return x << c, x >> c
        for got, want in zip(fuse(f)(fv.to_device(x)), f(x)):
            np.testing.assert_array_equal(got.get(), want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_constant_zeros_are_not_folded_with_the_other_operand(fv, dtype) -> None:
    """0 * x and 0 / x are NaN for x NaN (and 0 * inf): lavapipe folded a literal 0.0 there to
    0 (found by the fuzzer: 1e-310 / NaN in float32 is 0 / NaN)."""
    if np.dtype(dtype) not in fv.supported_dtypes(fv.default_device()):
        pytest.skip(f"this Vulkan adapter has no {np.dtype(dtype)}")
    x = np.array([np.nan, np.inf, -np.inf, 2.0, -3.0, 0.0, -0.0, 5e-5], dtype)

    def f(x):
        return 0.0 * x, x * -0.0, 0.0 / x, -0.0 / x, 1e-310 / x, x + 0.0, x - 0.0
    with np.errstate(all="ignore"):
        want = f(x)
    for got, w in zip(fuse(f)(fv.to_device(x)), want):
        g = got.get()
        np.testing.assert_array_equal(g, w)
        num = ~np.isnan(w)  # (a NaN's sign bit is the device's)
        np.testing.assert_array_equal(np.signbit(g[num]), np.signbit(w[num]))  # zeros' signs


@pytest.mark.parametrize("off", [-1, 1])
def test_float64_division_and_sqrt_round_correctly_from_a_driver_an_ulp_off(fv, rng,
                                                                           monkeypatch, off):
    """Vulkan lets a driver's double / and sqrt be 2.5 ULP off (NVIDIA's are an ulp off): the
    FMA correction rounds them as NumPy does. The driver's results are pushed about an ulp off
    here, so the correction is what makes them exact."""
    if "shader-f64" not in fv.default_device().features:
        pytest.skip("this Vulkan adapter has no shader-f64, so no float64 at all (its arrays raise "
                    "UnsupportedDTypeError, which test_missing_dtypes_name_what_is_missing covers)")
    from fusejit.targets.glsl import double as glsl_double
    nudge = f"(double(1.0) + double({off}) * double({2.0 ** -52!r}))"
    text = glsl_double._HELPERS.replace("q = (a / b) * one;", f"q = (a / b) * {nudge};")
    text = text.replace("s = sqrt(a) * one;", f"s = sqrt(a) * {nudge};")
    assert text.count(nudge) == 2
    monkeypatch.setattr(glsl_double, "_HELPERS", text)
    glsl_double.helpers.cache_clear()
    monkeypatch.setattr(glsl_double, "helpers", glsl_double.helpers)  # cleared again after
    try:
        a = rng.standard_normal(4096) * np.exp2(rng.integers(-1000, 1000, 4096))
        b = rng.standard_normal(4096) * np.exp2(rng.integers(-1000, 1000, 4096))
        a[:4] = 5e-324, -3e-310, 1.7e308, 2.0 ** -1022  # subnormal and extreme operands
        q, r = fuse(lambda a, b: (a / b, np.sqrt(np.abs(a))))(fv.to_device(a), fv.to_device(b))
        with np.errstate(all="ignore"):
            want = a / b
        normal = ~(np.abs(want) < np.finfo(np.float64).tiny)  # subnormal quotients: an ulp
        np.testing.assert_array_equal(q.get()[normal], want[normal])
        np.testing.assert_array_max_ulp(q.get(), want, maxulp=1)
        # (a device that flushes subnormals takes the subnormal root's input as 0)
        keep = (np.abs(a) >= np.finfo(np.float32).tiny) | (not flushes_subnormals())
        np.testing.assert_array_equal(r.get()[keep], np.sqrt(np.abs(a))[keep])
    finally:
        glsl_double.helpers.cache_clear()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_results_are_not_reassociated_or_contracted(fv, dtype) -> None:
    """SPIR-V lets a driver reassociate and contract float ops (lavapipe folded (x + b) - x to
    b); each sum and product is kept as NumPy rounds it."""
    if np.dtype(dtype) not in fv.supported_dtypes(fv.default_device()):
        pytest.skip(f"this Vulkan adapter has no {np.dtype(dtype)}")
    e = dtype(2.0 ** (-12 if dtype is np.float32 else -27))
    a = np.array([764.5, 1 + e, 3e7], dtype)
    b = np.array([3.6997268, 1 + e, 1.5], dtype)
    c = np.array([0.0, 1 + 2 * e, 2.0], dtype)

    def f(a, b, c):
        return (a * a * a + b) - a * a * a, a * b - c, (a + b) + b  # cancel, FMA, reassociate

    for got, want in zip(fuse(f)(*(fv.to_device(v) for v in (a, b, c))), f(a, b, c)):
        np.testing.assert_array_equal(got.get(), want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16])
def test_narrow_integers_wrap_and_write_whole_words(fv, rng, dtype) -> None:
    """8/16-bit arrays are packed in 32-bit words: any element can be read (views too), each
    op wraps as NumPy's do, and results are written as whole words by the work-item owning
    them; a kernel that would write single elements is refused before it runs."""
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, 4096 * 3, endpoint=True).astype(dtype)
    y = rng.integers(info.min, info.max, 4096 * 3, endpoint=True).astype(dtype)
    d, e = fv.to_device(x), fv.to_device(y)

    def f(a, b):
        return a * b - a, (a >> 3) + b, a < b, (a.astype(np.float32) * 2.5).astype(a.dtype)

    with np.errstate(all="ignore"):
        want = f(x, y)
        got = fuse(f)(d, e)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.get(), w)
    np.testing.assert_array_equal(d[5::7].get(), x[5::7])
    np.testing.assert_array_equal(fuse(lambda a: a.sum(dtype=np.int32))(d[1::3]).get(),
                                  x[1::3].sum(dtype=np.int32))  # reads of a strided view
    with pytest.raises(UnsupportedDTypeError, match="whole 32-bit words"):
        fuse(lambda a: a + 1)(d[:10])


@pytest.mark.parametrize("fn", [np.sin, np.cos, np.tan])
def test_trig_reduces_large_arguments_itself(fv, fn) -> None:
    """float32 sin/cos/tan are fusejit's (glsl_f64) where the adapter has shader-f64: within
    1 ULP of the exact value on lavapipe (the catalog's bound on GPUs, see below) over every int16
    value, the floats nearest multiples of pi/2 (where the result is all reduction error),
    up to 2^20, and for subnormals, zeros and specials; NVIDIA's builtins were 41139 ULP off for an int16 cos below 128."""
    from fusejit.targets.glsl import target as glsl

    extra, domain = glsl.tolerance(Op.SIN, fv.default_device().features)
    if extra:
        pytest.skip("this adapter lacks shader-f64: the builtins and their pi domain apply")
    near = (np.arange(1, 30000) * (np.pi / 2)).astype(np.float32)
    x = np.concatenate([np.arange(-2**15, 2**15).astype(np.float32), near, -near,
                        np.float32([2**20 - 0.0625, 1e-30, -1e-45, 0.0, -0.0, 2**-12, 3e-4]),
                        np.geomspace(1e-3, 2**20 - 1, 20001).astype(np.float32)])
    got = np.asarray(fuse(lambda v: fn(v))(x))
    assert got.dtype == np.float32 and domain == 2**20
    want = fn(x)
    if not fv.default_device().is_cpu:
        # NVIDIA's Vulkan: the catalog's bound, but not within 2^-12 of a zero or a pole, where
        # its result was up to 110 ULP off (tan 206): its double reduction is not exact there
        with np.errstate(divide="ignore"):
            keep = (np.abs(want) > 2.0**-12) & (np.abs(want) < 2.0**12)
        assert_matches(got, want, ulp=op_ulp(Op.SIN, want.dtype), mask=keep, what=fn.__name__)
    else:  # within 1 ULP of the exact value: NumPy's float32 tan is the platform's (3 ULP off
        # on an AVX-512 host, where fusejit's was within 1 of the exact)
        exact = fn(x.astype(np.float64)).astype(np.float32)
        assert_matches(got, exact, ulp=1, what=fn.__name__)
        assert_matches(got, want, ulp=op_ulp(Op.SIN, want.dtype), what=fn.__name__)
    np.testing.assert_array_equal(np.signbit(got[x == 0]), np.signbit(fn(x[x == 0])))
    specials = np.float32([np.inf, -np.inf, np.nan])
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.asarray(fuse(lambda v: fn(v))(specials))).all()
    ints = np.arange(-2**15, 2**15, dtype=np.int16)
    assert_matches(fuse(lambda v: fn(v))(ints), fn(ints), ulp=op_ulp(Op.SIN, np.dtype(np.float32)),
                   what=f"{fn.__name__}(int16)")



# fma(a, b, c) rounded once, emulated in double where the driver does not (lavapipe): exact
# wherever the division and sqrt tests read it (their residuals fit in 24 bits there)
_FMA_IN_DOUBLE = """
float fj_fma_d(float a, float b, float c) { return float(double(a) * double(b) + double(c)); }
"""


@pytest.mark.parametrize("path", ["double", "fma"])
@pytest.mark.parametrize("push", ["", "fj_next_up(fj_next_up", "fj_next_down(fj_next_down"])
def test_float32_division_and_sqrt_round_correctly_from_a_driver_ulps_off(fv, rng, monkeypatch,
                                                                          push, path) -> None:
    """Vulkan lets float32 / and sqrt be 2.5 ULP off (NVIDIA's sqrt is an ulp off in 17 % of
    elements): with shader-f64, glsl_f64 moves them to NumPy's float, deciding in float with
    fma where the device's fma rounds once (its probe), else in double. The driver's results
    are pushed two ulps off here, so the correction is what makes them exact; both paths run
    on every adapter with shader-f64 (fma emulated where the driver's is not fused)."""
    from fusejit.runtime.vulkan import device as vk_device
    from fusejit.targets.glsl import f64 as glsl_f64

    dev = fv.default_device()
    if "shader-f64" not in dev.features:
        pytest.skip("this Vulkan adapter has no shader-f64: its float32 / and sqrt keep the "
                    "driver's rounding, which the op table's 3 ULP bound covers (test_ops_catalog)")
    if push:  # the driver's quotients and roots each path starts from
        for name, driver in (("_DOUBLE_ONLY", "fj_quot(a, b)"), ("_ROUNDED", "float(sqrt(xd))"),
                             ("_FMA", "fj_quot(a, b)"), ("_FMA", "sqrt(x)")):
            text = getattr(glsl_f64, name)
            assert text.count(driver) == 1
            monkeypatch.setattr(glsl_f64, name, text.replace(driver, f"({push}({driver})))"))
    features = dev.features - {glsl_f64.FUSED_FMA}
    if path == "fma":
        features |= {glsl_f64.FUSED_FMA}
        if glsl_f64.FUSED_FMA not in dev.features:
            monkeypatch.setattr(glsl_f64, "_FMA", _FMA_IN_DOUBLE + glsl_f64._FMA.replace(
                "fma(", "fj_fma_d("))
    monkeypatch.setitem(vk_device._features, dev.info.key, features)
    glsl_f64.helpers.cache_clear()
    try:
        n = 1 << 14
        a = (rng.standard_normal(n) * np.exp2(rng.integers(-126, 127, n))).astype(np.float32)
        b = (rng.standard_normal(n) * np.exp2(rng.integers(-126, 127, n))).astype(np.float32)
        a[:4] = 1.0, 2.0 ** -126, 3.4e38, 1e-45  # exact quotients, extremes, a subnormal root
        # near the fma path's edges: roots and quotients around 2^-100 and 2^125, powers of two
        a[4:12] = np.float32([2.0 ** -100, 2.0 ** -99.9, 2.0 ** -100.1, 2.0 ** 126.9, 4.0, 2.0,
                              2.0 ** 127, 1.7e38])
        b[4:12] = np.float32([3.0, 2.0 ** -24, 2.0 ** 100, 2.0 ** -3, 4.0 - 2.0 ** -21,
                              1.0 + 2.0 ** -23, 1.5, 2.0 ** -30])
        f = fuse(lambda a, b: (a / b, np.sqrt(np.abs(a)), 1 / b))
        q, r, inv = f(fv.to_device(a), fv.to_device(b))
        source = f.lower(fv.to_device(a), fv.to_device(b)).source
        assert ("fma(" in source or "fj_fma_d(" in source) == (path == "fma")
        with np.errstate(all="ignore"):
            want = a / b
        # (below the normal range the driver's rounding stays; the push turns inf into NaN; a
        # device that flushes subnormals takes subnormal inputs as 0)
        tiny = np.finfo(np.float32).tiny
        kept_a, kept_b = ((np.abs(v) >= tiny) | (v == 0) | (not flushes_subnormals())
                          for v in (a, b))
        normal = (np.abs(want) >= tiny) & np.isfinite(want) & kept_a & kept_b
        np.testing.assert_array_equal(q.get()[normal], want[normal])
        np.testing.assert_array_equal(r.get()[kept_a], np.sqrt(np.abs(a))[kept_a])
        with np.errstate(all="ignore"):
            want = np.float32(1) / b
        normal = (np.abs(want) >= tiny) & np.isfinite(want) & kept_b
        np.testing.assert_array_equal(inv.get()[normal], want[normal])
    finally:
        glsl_f64.helpers.cache_clear()


@pytest.mark.parametrize("fn", [np.fmod, np.remainder, np.floor_divide])
def test_float_modulo_of_subnormals_ends_and_is_exact(fv, rng, fn) -> None:
    """fmod runs on the bits (glsl_helpers.fj_fmod): its float loop, halving toward a subnormal
    divisor, never ended on NVIDIA's Vulkan, which flushes subnormals (the catalog hung)."""
    tiny = np.float32([1e-45, -1e-45, 3e-39, -1.1754942e-38, 1.1754944e-38, 0.0, -0.0, np.inf,
                       -np.inf, np.nan, 3.4e38, -3.4e38, 1.0, -7.0])
    a = (rng.standard_normal(4096) * np.exp2(rng.integers(-149, 127, 4096))).astype(np.float32)
    b = (rng.standard_normal(4096) * np.exp2(rng.integers(-149, 127, 4096))).astype(np.float32)
    a = np.concatenate([a, np.repeat(tiny, tiny.size)])
    b = np.concatenate([b, np.tile(tiny, tiny.size)])
    got = np.asarray(fuse(lambda x, y: fn(x, y))(a, b))
    with np.errstate(all="ignore"):
        want = fn(a, b)
    if fn is np.fmod or not flushes_subnormals():  # (floor_divide/remainder divide: outside the promise
        np.testing.assert_array_equal(got, want)  # for subnormals where the driver flushes)
        real = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[real]), np.signbit(want[real]))


@pytest.mark.parametrize("fn", [np.sinh, np.cosh])
def test_hyperbolic_functions_stay_finite_up_to_their_own_overflow(fv, fn) -> None:
    """The builtins compute e^x, which overflows from 88.7 on, while sinh and cosh stay finite up
    to 89.4: beyond 9 they are (e^(|x|/2) / 2) * e^(|x|/2), within the op's Vulkan tolerance."""
    from fusejit.targets.glsl import target as glsl

    x = np.concatenate([np.linspace(-95, 95, 4001), [88.8, 89.4, -89.41, 9.0001]]).astype(
        np.float32)
    with np.errstate(over="ignore"):
        want = fn(x)
    got = np.asarray(fuse(lambda v: fn(v))(x))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    extra, _ = glsl.tolerance(Op.SINH, fv.default_device().features)
    assert_matches(got, want, ulp=extra, what=fn.__name__)


@pytest.mark.parametrize("form", ["broadcast", "row_sum", "scalar"])
def test_division_by_a_prepared_divisor_rounds_as_numpy(fv, rng, monkeypatch, form) -> None:
    """A divisor the loop does not change (a broadcast row value, a row's sum, a scalar shared
    by vector lanes) is prepared once as y = RN(1/b), and each quotient is Markstein's
    q + (a - q b) y (glsl_f64's fj_div_by, where fma rounds once; emulated in double where the
    adapter's does not): NumPy's bits, in range and out of it (fj_div_rn there)."""
    from fusejit.runtime.vulkan import device as vk_device
    from fusejit.targets.glsl import f64 as glsl_f64

    dev = fv.default_device()
    if "shader-f64" not in dev.features:
        pytest.skip("this Vulkan adapter has no shader-f64, which the exact division needs")
    if glsl_f64.FUSED_FMA not in dev.features:
        monkeypatch.setattr(glsl_f64, "_DIV_BY", _FMA_IN_DOUBLE + glsl_f64._DIV_BY.replace(
            "fma(", "fj_fma_d("))
    monkeypatch.setitem(vk_device._features, dev.info.key, dev.features | {glsl_f64.FUSED_FMA})
    glsl_f64.helpers.cache_clear()
    try:
        rows, cols = 64, 1000
        a = (rng.standard_normal((rows, cols)) *
             np.exp2(rng.integers(-70, 70, (rows, cols)))).astype(np.float32)
        b = (rng.standard_normal((rows, 1)) * np.exp2(rng.integers(-70, 70, (rows, 1)))
             ).astype(np.float32)
        a[0, :8] = 0.0, -0.0, np.inf, np.nan, 2.0 ** -62, 2.0 ** 63, 3.0, 1e-40
        b[:6, 0] = 1.0 + 2.0 ** -23, 2.0 - 2.0 ** -23, 2.0 ** -62, 2.0 ** 62.99, 0.0, np.inf
        b[6:9, 0] = 3.0, -7.0, 1.5
        if form == "broadcast":
            f, args = fuse(lambda x, y: x / y), (a, b)
            with np.errstate(all="ignore"):
                want = a / b
        elif form == "row_sum":
            a = np.abs(a)
            f, args = fuse(lambda x: x / x.sum(axis=1, keepdims=True)), (a,)
            with np.errstate(all="ignore"):
                s = a.sum(axis=1, keepdims=True)
        else:
            f, args = fuse(lambda x, y: x / y), (a.ravel(), np.float32(3.0))
            with np.errstate(all="ignore"):
                want = a.ravel() / np.float32(3.0)
        got = f(*(fv.to_device(v) if isinstance(v, np.ndarray) else v for v in args)).get()
        if form == "row_sum":  # (fusejit's sum need not add in NumPy's order: its own sums)
            s = fuse(lambda x: x.sum(axis=1, keepdims=True))(fv.to_device(a)).get()
            with np.errstate(all="ignore"):
                want = a / s
        tiny = np.finfo(np.float32).tiny
        normal = (np.abs(want) >= tiny) | ~np.isfinite(want) | (want == 0)
        if flushes_subnormals():
            x = args[0]
            normal &= (np.abs(x) >= tiny) | (x == 0) | ~np.isfinite(x)
        np.testing.assert_array_equal(got[normal], want[normal])
        kernel = "\n".join(k.source for k in f.lower(*(
            fv.to_device(v) if isinstance(v, np.ndarray) else v for v in args)).module.kernels)
        assert "fj_div_by(" in kernel and kernel.count("fj_div_rn(1.0, ") == 1
    finally:
        glsl_f64.helpers.cache_clear()



@pytest.mark.parametrize("dtype", ["?", "i1", "u1", "i2", "i4", "u4", "i8", "f2", "f4"])
def test_scans_match_numpy(fv, rng, dtype) -> None:
    """np.cumsum, np.cumprod, ufunc.accumulate and the nan-variants on Vulkan (their kernels
    have barriers, so WGSL): several axes, a long row of several blocks, NumPy's result dtypes
    (int8 -> int64, bool -> int64, float16 stays). Integer and max scans are exact; float sums
    within the tiled kernel's bound (scan_source: 4 log2(n) eps cumsum(|x|)), products within
    4 n eps, float16 (NumPy rounds its running sum at every step, so it drifts) within 1 % or
    0.25. int8 rows long enough for blocks load 2 lanes a work-item: part of a packed word."""
    from fusejit.runtime.vulkan.array import supported_dtypes

    dt_ = np.dtype(dtype)
    if dt_ not in supported_dtypes(fv.default_device()):
        pytest.skip(f"this Vulkan adapter has no {dt_} (see test_missing_dtypes_name_what_is_"
                    "missing)")

    def data(shape):
        if dt_.kind == "b":
            return rng.random(shape) > 0.4
        if dt_.kind in "iu":
            return rng.integers(0 if dt_.kind == "u" else -100, 100, shape).astype(dt_)
        return (rng.standard_normal(shape) * 3).astype(dt_)
    long = (2, 70000) if dt_ != np.float16 else (2, 300)  # (float16: see the docstring)
    a, b, c, d = data((37,)), data((5, 9)), data((3, 4, 65)), data(long)
    if dt_.kind == "f":
        b[1, 2] = np.nan
    cases = [(np.cumsum, a, None), (np.cumsum, b, 0), (np.cumsum, c, 1), (np.cumsum, d, -1),
             (np.cumprod, b / 2 if dt_.kind == "f" else b, -1)]
    if dt_.itemsize >= 4 or dt_ == np.float16:  # (8/16-bit results: whole words only)
        cases.append((np.maximum.accumulate, c, -1))
    if dt_.kind == "f":
        cases += [(np.nancumsum, b, 1), (np.nancumprod, b, 0)]
    f = fuse(lambda *xs: tuple(fn(x, axis=ax) for (fn, _, ax), x in zip(cases, xs)))
    with np.errstate(all="ignore"):
        got = f(*(fv.to_device(x) for _, x, _ in cases))
        for (fn, x, axis), g in zip(cases, got):
            want, g = fn(x, axis=axis), g.get()
            assert g.dtype == want.dtype and g.shape == want.shape, fn
            if want.dtype.kind != "f" or fn is np.maximum.accumulate:
                np.testing.assert_array_equal(g, want, err_msg=str(fn))
                continue
            np.testing.assert_array_equal(np.isnan(g), np.isnan(want), err_msg=str(fn))
            ok = ~np.isnan(want)
            g64, w64 = g.astype(np.float64)[ok], want.astype(np.float64)[ok]
            eps = float(np.finfo(want.dtype).eps)
            if want.dtype == np.float16:
                np.testing.assert_allclose(g64, w64, rtol=1e-2, atol=0.25, err_msg=str(fn))
                continue
            n = want.size if axis is None else want.shape[axis]
            if fn in (np.cumprod, np.nancumprod):
                np.testing.assert_allclose(g64, w64, rtol=4 * n * eps, err_msg=str(fn))
                continue
            flat = x.ravel() if axis is None else x
            scale = np.cumsum(np.abs(np.nan_to_num(flat.astype(np.float64))),
                              axis=0 if axis is None else axis)[ok]
            assert np.all(np.abs(g64 - w64) <= 4 * np.log2(max(n, 2)) * eps *
                          np.maximum(scale, 1) + np.abs(w64) * eps), fn
