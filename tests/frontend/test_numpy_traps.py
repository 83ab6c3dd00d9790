"""The places where a naive NumPy-to-C translation goes wrong, one named test each.

NEP 50 promotion, floor semantics, integer wrap-around, NaN propagation, rounding, literals and
FMA contraction: each result must equal NumPy's bit for bit (NaN payloads aside).
"""

from __future__ import annotations

import numpy as np
import pytest

from fusejit import fuse
from fusejit.ir.dtypes import extremum_keeps_second
from fusejit.testing import assert_matches

SIGNED = (np.int8, np.int16, np.int32, np.int64)
UNSIGNED = (np.uint8, np.uint16, np.uint32, np.uint64)
FLOATS = (np.float16, np.float32, np.float64)


def assert_bits(got: np.ndarray, want: np.ndarray, what: str = "result") -> None:
    """Same dtype, shape and bit pattern (any NaN matches any NaN: payloads are not NumPy's
    contract), so -0.0 vs 0.0 and 1-ULP differences fail."""
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), what
    bits = np.dtype(f"u{got.dtype.itemsize}")
    same = got.view(bits) == want.view(bits)
    if got.dtype.kind == "f":
        same |= np.isnan(got) & np.isnan(want)
    assert same.all(), (f"{what}: {int((~same).sum())} of {got.size} differ; first at "
                        f"{np.argwhere(~same)[0]}: got {got[~same][0]!r}, NumPy {want[~same][0]!r}")


def numpy_errstate(fn):
    def run(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return run


# -- NEP 50: Python scalars are weak, NumPy scalars are strong ------------------------------------


def test_float32_times_python_float_stays_float32():
    x = np.array([1.1, -2.5, 3.3], np.float32)
    assert_bits(fuse(lambda x: x * 2.5 + 0.1)(x), x * 2.5 + 0.1)
    assert_bits(fuse(lambda x, s: x * s)(x, 2.5), x * 2.5)  # a dynamic Python float too


def test_int32_plus_float32_is_float64():
    a, b = np.array([1, -7, 2**31 - 1], np.int32), np.array([0.1, 2.5, 1.0], np.float32)
    assert_bits(fuse(lambda a, b: a + b)(a, b), a + b)


def test_int_true_divide_int_is_float64():
    a, b = np.array([1, -7, 9], np.int8), np.array([3, 2, -4], np.int8)
    got = fuse(lambda a, b: (a / b, a / 3))(a, b)
    assert_bits(got[0], a / b)
    assert_bits(got[1], a / 3)


def test_int8_plus_out_of_range_python_int_raises_overflow():
    x = np.array([1, 2], np.int8)
    with pytest.raises(OverflowError, match="300"):
        x + 300  # NumPy 2 itself
    with pytest.raises(OverflowError, match="300"):
        fuse(lambda x: x + 300)(x)
    with pytest.raises(OverflowError, match="300"):
        fuse(lambda x, s: x + s)(x, 300)  # a dynamic argument, checked before launching


def test_uint8_plus_negative_python_int_raises():
    x = np.array([1, 2], np.uint8)
    with pytest.raises(OverflowError):
        fuse(lambda x: x + (-1))(x)
    with pytest.raises(OverflowError):
        fuse(lambda x, s: x + s)(x, -1)


def test_arithmetic_on_python_scalar_arguments_is_python_arithmetic():
    """``1 - b`` on a dynamic Python float is a Python float, still weak: float32 stays
    float32 (Adam's bias corrections). ``b += 1`` rebinds b as it does a float. NumPy
    functions of a Python scalar (np.sqrt(b)) give a strong np.float64, in NumPy and here."""
    x = np.array([1.5, 2.5, 3.25], np.float32)

    def f(x, b, t, n):
        c = b
        c += 1
        c *= 2
        return (x * (1 - b) / (1 - b ** t), x + c, x * -b, x * abs(b), x * (n // 2 + 1),
                x.astype(np.int8) + (n - 3), (b > 0.5) & (x > 2), x * np.sqrt(b),
                x + (b + np.float64(0)))

    got = fuse(f)(x, 0.9, 7, 5)
    for i, (g, w) in enumerate(zip(got, f(x, 0.9, 7, 5))):
        assert_matches(g, w, ulp=1, what=f"expression {i}")  # b ** t: pow vs Python's pow


def test_numpy_functions_of_python_scalars_use_their_default_dtypes():
    """np.equal(n, 3) on Python ints compares int64s in NumPy (each scalar becomes an array of
    its default dtype); resolve_dtypes of two weak ints would pick an object loop."""
    x = np.array([1.5, -2.0, 3.0], np.float32)

    def f(x, n, r):
        return (x * np.equal(n, 3), x + np.less(n, 2**40), np.multiply(n, 2) >> 1,
                x * (n == -3), np.maximum(n, 2) + x, np.arctan2(r, n) * x, np.add(r, n) + x)

    for n in (3, -3, 2**31):
        got = fuse(f)(x, n, 0.5)
        for i, (g, w) in enumerate(zip(got, f(x, n, 0.5))):
            assert_matches(g, w, ulp=1, what=f"n={n}, expression {i}")


def test_comparison_with_out_of_range_python_int_is_exact():
    x = np.array([-128, 0, 127], np.int8)
    got = fuse(lambda x: (x < 300, x > -1000, x == 256))(x)
    for g, w in zip(got, (x < 300, x > -1000, x == 256)):
        assert_bits(g, w)


def test_numpy_scalars_are_strong():
    """np.float64 subclasses Python float, yet promotes float32 to float64."""
    x = np.array([1.1, 2.2], np.float32)
    got = fuse(lambda x: (x + np.float64(0.1), x * np.int64(3), x + np.float16(2)))(x)
    want = (x + np.float64(0.1), x * np.int64(3), x + np.float16(2))
    for g, w in zip(got, want):
        assert_bits(g, w)
    assert_bits(fuse(lambda x, s: x + s)(x, np.float64(0.1)), x + np.float64(0.1))


def test_python_bool_operands():
    x = np.array([1, -2, 127], np.int8)
    assert_bits(fuse(lambda x: x + True)(x), x + True)
    assert_bits(fuse(lambda x, s: x * s)(x, False), x * False)
    m = np.array([True, False])
    assert_bits(fuse(lambda m, s: (m & s) | True)(m, True), (m & True) | True)


# -- floor division and remainder -----------------------------------------------------------------


def test_floor_divide_and_remainder_follow_the_divisor_sign():
    a = np.array([7, -7, 7, -7, 0, 1, -1, 5], np.int32)
    b = np.array([2, 2, -2, -2, 3, -3, 3, 5], np.int32)
    got = fuse(lambda a, b: (a // b, a % b, np.divmod(a, b), np.fmod(a, b)))(a, b)
    want = (a // b, a % b, np.divmod(a, b), np.fmod(a, b))
    for g, w in zip(got[:2] + got[2] + got[3:], want[:2] + want[2] + want[3:]):
        assert_bits(g, w)
    fa, fb = a.astype(np.float32) + 0.5, b.astype(np.float32)
    fa[4], fb[5] = -0.0, -0.0
    got = fuse(lambda a, b: (a // b, a % b, np.fmod(a, b)))(fa, fb)
    for g, w in zip(got, numpy_errstate(lambda a, b: (a // b, a % b, np.fmod(a, b)))(fa, fb)):
        assert_bits(g, w)


@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED, ids=lambda t: t.__name__)
def test_integer_division_by_zero_gives_zero(dtype):
    a, b = np.array([7, 0, 1, 100], dtype), np.zeros(4, dtype)
    got = fuse(lambda a, b: (a // b, a % b, np.fmod(a, b)))(a, b)
    for g in got:
        assert_bits(g, np.zeros(4, dtype))


def test_int_min_divided_by_minus_one():
    """INT_MIN // -1 overflows (NumPy wraps to INT_MIN); INT_MIN % -1 is 0. In C both trap."""
    args = [(np.array([np.iinfo(t).min, np.iinfo(t).min + 1], t), np.array([-1, -1], t))
            for t in SIGNED]
    got = fuse(lambda *xs: [f(xs[i], xs[i + 1]) for i in range(0, len(xs), 2)
                            for f in (np.floor_divide, np.remainder, np.fmod)])(
        *[x for pair in args for x in pair])
    want = [numpy_errstate(f)(a, b) for a, b in args
            for f in (np.floor_divide, np.remainder, np.fmod)]
    for g, w in zip(got, want):
        assert_bits(g, w)


# -- NaN, signs and rounding ----------------------------------------------------------------------


def test_maximum_minimum_propagate_nan_fmax_fmin_do_not():
    a = np.array([np.nan, 1.0, np.nan, -np.inf, 2.0], np.float32)
    b = np.array([1.0, np.nan, np.nan, np.nan, -0.0], np.float32)
    ops = (np.maximum, np.minimum, np.fmax, np.fmin)
    got = fuse(lambda a, b: [f(a, b) for f in ops])(a, b)
    for g, f in zip(got, ops):
        assert_matches(g, f(a, b), what=f.__name__)
    assert np.isnan(got[0][:4]).all() and not np.isnan(got[2][[0, 1, 3]]).any()


def test_rint_and_round_are_half_to_even():
    x = np.array([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 0.49999997, 2.0**23 - 0.5, -0.0],
                 np.float32)
    got = fuse(lambda x: (np.rint(x), np.round(x), np.around(x), x.round()))(x)
    for g in got:
        assert_bits(g, np.rint(x))
    assert list(got[0][:7]) == [0, 2, 2, 4, -0.0, -2, -2]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
def test_round_with_decimals_matches_numpy_scaling(dtype):
    """np.round(x, d) is rint(x * 10**d) / 10**d in x's dtype (not correctly rounded decimal
    rounding): 2.675 -> 2.67, 0.125 -> 0.12, and inf when x * 10**d overflows."""
    with np.errstate(over="ignore"):  # 1e30 is inf in float16
        x = np.array([1.25, 1.35, 2.675, -1.005, 0.125, 1234.5678, 15.0, 25.0, -35.0, 1e30,
                      np.nan, -0.0, 60000.0]).astype(dtype)
    decimals = (-2, -1, 1, 2, 3, 5)
    got = fuse(lambda x: [np.round(x, d) for d in decimals])(x)
    for g, d in zip(got, decimals):
        assert_bits(g, numpy_errstate(np.round)(x, d), what=f"round({dtype.__name__}, {d})")


def test_round_integers_with_decimals():
    x = np.array([15, 25, 35, -15, -25, 149, 150, 250, 2**31 - 1, -2**31], np.int32)
    u = np.array([15, 25, 35, 249, 250, 255], np.uint8)
    got = fuse(lambda x, u: (np.round(x, 2), np.round(x, -1), np.round(x, -2), np.round(u, -1)))(
        x, u)
    assert_bits(got[0], x)  # decimals >= 0 returns integers as they are
    # 2**31 - 1 rounds to 2147483650.0, whose cast back to int32 is implementation-defined
    fits = np.abs(x) < 2**31 - 5
    assert_matches(got[1], numpy_errstate(np.round)(x, -1), mask=fits)
    assert_matches(got[2], numpy_errstate(np.round)(x, -2), mask=fits)
    assert_bits(got[3], np.round(u, -1))


def test_round_bool_like_numpy():
    """Bools are not integers to np.round: decimals=0 is rint (float16); other decimals fail
    NumPy's same_kind store of the float64 scaling back into a bool array."""
    m = np.array([True, False])
    assert_bits(fuse(lambda m: np.round(m))(m), np.round(m))
    for d in (1, -1):
        with pytest.raises(TypeError) as numpy_error:
            np.round(m, d)
        with pytest.raises(TypeError, match="Cannot cast ufunc") as ours:
            fuse(lambda m, d=d: np.round(m, d))(m)
        assert str(ours.value) == str(numpy_error.value)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
def test_signed_zeros_where_numpy_defines_them(dtype):
    """The sign of a zero result, where NumPy defines it (the catalog's value comparison treats
    +0 and -0 alike). nextafter of equal values is y in C but x in NumPy's float16 loop.
    maximum & co. are in the test below."""
    a = np.array([0.0, -0.0, 0.0, -0.0, -0.5, 0.5, -1e-30, 1.0], dtype)
    b = np.array([-0.0, 0.0, 0.0, -0.0, 0.0, -0.0, 1.0, -0.0], dtype)

    def zeros(a, b):
        return [np.nextafter(a, b), np.copysign(a, b), -a, np.abs(a), a * b, a + b, a - b,
                np.floor(a), np.ceil(a), np.trunc(a), np.rint(a), np.sign(a), np.sqrt(a * a),
                a // 1, np.fmod(a, 1), a % -1, np.remainder(b, 1)]

    got = fuse(zeros)(a, b)
    for i, (g, w) in enumerate(zip(got, numpy_errstate(zeros)(a, b))):
        assert_bits(g, w, what=f"expression {i}")


def _second_of_equal_operands(dtype) -> bool:
    return not np.signbit(np.maximum(np.array([-0.0] * 8, dtype), np.zeros(8, dtype))[0])


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
def test_maximum_minimum_of_signed_zeros_and_constants(dtype):
    """Which of two equal operands maximum, minimum, fmax, fmin and clip return (relu of -0.0
    is +0.0 in NumPy's float32 loop): x86 NumPy's float32/float64 loops return the second, its
    float16 loop the first; clip returns x. Constant operands go through the simplifier's
    one-comparison selects, arrays through the NaN-propagating templates."""
    if any(_second_of_equal_operands(t) != extremum_keeps_second(np.dtype(t)) for t in FLOATS):
        pytest.skip("fusejit reproduces x86 NumPy's choice between equal operands (-0.0 and "
                    "0.0); this NumPy build (another CPU's SIMD loops) chooses differently")
    vals = [np.nan, -0.0, 0.0, -1.0, 0.1, 1.0, np.inf, -np.inf]
    a = np.array(vals * len(vals), dtype)
    b = np.array([v for v in vals for _ in vals], dtype)
    ops = (np.maximum, np.minimum, np.fmax, np.fmin)

    def f(a, b):
        out = [op(a, b) for op in ops]
        for c in (0.0, 0.1, -np.inf, np.nan):
            out += [op(a, c) for op in ops] + [op(c, a) for op in ops]
        return out + [np.clip(a, 0.0, 1.0), np.clip(a, -1.0, 0.0), np.clip(a, b, 1.0),
                      np.clip(a, -1.0, b), np.clip(a, 0.0, 0.0)]

    got = fuse(f)(a, b)
    for i, (g, w) in enumerate(zip(got, numpy_errstate(f)(a, b))):
        assert_bits(g, w, what=f"expression {i}")


def test_maximum_with_a_constant_is_one_comparison():
    """maximum(x, 0.1) needs no NaN test: x < 0.1 is false for NaN, which keeps x."""
    source = fuse(lambda x: np.maximum(np.minimum(x, 6.0), 0.0)).lower(
        np.ones(8, np.float32)).source
    assert "isnan" not in source and "<= 0x0p+0f" in source and ">= 0x1.8p+2f" in source


def test_sign_of_nan_is_nan():
    x = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, -3.0, 2.0], np.float64)
    got = fuse(lambda x: (np.sign(x), np.sign(x.astype(np.float16))))(x)
    assert_bits(got[0], np.sign(x))
    assert_bits(got[1], np.sign(x.astype(np.float16)))
    assert np.isnan(got[0][0])


# -- exact code generation ------------------------------------------------------------------------


def test_no_fma_contraction():
    """a*b - c rounds the product first; an FMA would return the product's rounding error."""
    a = np.array([1 + 2**-12, 1 + 2**-23], np.float32)
    c = np.array([1 + 2**-11, 1 + 2**-22], np.float32)
    fma = (a.astype(np.float64) * a - c).astype(np.float32)
    assert (fma != a * a - c).all()  # the inputs tell an FMA apart
    f = fuse(lambda a, c: a * a - c)
    assert "#pragma OPENCL FP_CONTRACT OFF" in f.lower(a, c).source
    assert_bits(f(a, c), a * a - c)
    d = a.astype(np.float64)
    e = np.array([1 + 2**-26 + 2**-52, 1 + 2**-25], np.float64)
    assert_bits(fuse(lambda d, e: d * d - e)(d, e), d * d - e)


def test_operand_used_twice_by_one_op_stays_alive():
    """``x * x`` reads x twice in one instruction; its register must be freed once only, or
    the next two values share it (``x*x - y*2`` computed ``y*2 - y*2``)."""
    x = np.array([1.5, 2.0, -3.0], np.float32)
    y = np.array([0.25, 3.0, 1.0], np.float32)
    assert_bits(fuse(lambda x, y: x * x - y * 2)(x, y), x * x - y * 2)
    assert_bits(fuse(lambda x, y: x * x * x - y)(x, y), x * x * x - y)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
def test_float_literals_are_exact(dtype):
    x = np.array([1.0, 3.0, 7.0, -0.0, 1e-3], dtype)
    consts = (0.1, 1 / 3, 2 / 3, 1e-7, 3.4e38, 5e-324, 0.1 + 0.2)
    f = fuse(lambda x: [x * k for k in consts] + [x + 1 / 3, x - 0.1])
    got = f(x)
    want = numpy_errstate(lambda x: [x * k for k in consts] + [x + 1 / 3, x - 0.1])(x)
    for g, w, k in zip(got, want, consts + (1 / 3, 0.1)):
        assert_bits(g, w, what=f"{dtype.__name__} * {k!r}")


@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED, ids=lambda t: t.__name__)
def test_integer_overflow_wraps(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, info.max // 2 + 1, info.min + 1, 3], dtype)
    ops = (lambda x: x + x, lambda x: x * x, lambda x: -x, lambda x: x - x[::-1],
           lambda x: x + 1, lambda x: x * 3, lambda x: x ** 3, lambda x: np.square(x))
    got = fuse(lambda x: [op(x) for op in ops])(x)
    for g, w in zip(got, numpy_errstate(lambda x: [op(x) for op in ops])(x)):
        assert_bits(g, w)


def test_abs_of_int_min_is_int_min():
    xs = [np.array([np.iinfo(t).min, -1, 0], t) for t in SIGNED]
    got = fuse(lambda *xs: [(np.abs(x), abs(x), np.absolute(x)) for x in xs])(*xs)
    for x, triple in zip(xs, got):
        for g in triple:
            assert_bits(g, np.abs(x))
        assert g[0] == np.iinfo(x.dtype).min


@pytest.mark.parametrize("dtype", (np.int8, np.int32, np.int64, np.uint8, np.uint64),
                         ids=lambda t: t.__name__)
def test_shifts_by_width_or_more_and_negative_counts(dtype):
    """NumPy defines what C leaves undefined: a shift by >= the width gives 0 (or -1 for a
    negative value shifted right), and a negative count counts as a huge one."""
    width = np.dtype(dtype).itemsize * 8
    counts = [0, 1, width - 1, width, width + 1, 2 * width, 100]
    if np.dtype(dtype).kind == "i":
        counts += [-1, -width]
        x = np.array([1, -1, 5, np.iinfo(dtype).min, np.iinfo(dtype).max], dtype)
    else:
        x = np.array([1, 5, np.iinfo(dtype).max], dtype)
    a, b = x[:, None], np.array([c for c in counts if c <= np.iinfo(dtype).max], dtype)[None]
    got = fuse(lambda a, b: (a << b, a >> b, a << 3, a >> 3))(a, b)
    for g, w in zip(got, (a << b, a >> b, a << 3, a >> 3)):
        assert_bits(g, w)


def _random_floats(dtype, n, rng):
    """Random bit patterns (every exponent: subnormals, inf, NaN) and ordinary values."""
    bits = rng.integers(0, 2 ** (8 * np.dtype(dtype).itemsize), n, dtype=np.uint64)
    patterns = bits.astype(f"u{np.dtype(dtype).itemsize}").view(dtype)
    ordinary = rng.standard_normal(n).astype(dtype) * dtype(rng.choice([1, 100, 1e-3], n))
    return np.concatenate([patterns, ordinary])


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
def test_correctly_rounded_arithmetic_is_bit_exact(dtype, rng):
    """+ - * / and sqrt round exactly as NumPy's (float16: each op computed in float32 and
    rounded to half, which is what NumPy's float16 loops do)."""
    a, b = _random_floats(dtype, 4000, rng), _random_floats(dtype, 4000, rng)

    def arithmetic(a, b):
        return [a + b, a - b, a * b, a / b, np.sqrt(np.abs(a)), np.sqrt(a), a * b + a,
                (a - b) / (a + b), a * 0.1, 1 / b]

    got = fuse(arithmetic)(a, b)
    for i, (g, w) in enumerate(zip(got, numpy_errstate(arithmetic)(a, b))):
        assert_bits(g, w, what=f"{dtype.__name__} expression {i}")


def test_float32_divide_and_sqrt_are_built_correctly_rounded(queue):
    """OpenCL allows 2.5 ULP for float32 division and 3 for sqrt unless asked otherwise."""
    from fusejit.runtime.opencl.build import build_options
    from fusejit.runtime.opencl.devices import device_info

    info = device_info(queue.device)
    flag = "-cl-fp32-correctly-rounded-divide-sqrt"
    assert (flag in build_options(info)) == info.correctly_rounded_div_sqrt
    assert not any("fast-relaxed" in o or "mad-enable" in o for o in build_options(info))


def test_float16_accumulates_in_float16_not_float32():
    """Each float16 op rounds to half: (x + y) - x is not y when x + y is inexact."""
    x = np.array([2048.0, 1000.0], np.float16)
    y = np.array([1.0, 0.3], np.float16)
    got = fuse(lambda x, y: (x + y) - x)(x, y)
    assert_bits(got, (x + y) - x)
    assert got[0] == 0.0


# -- NumPy's own special paths --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
def test_power_takes_numpy_fast_paths(dtype):
    """``x ** 0.5`` is np.sqrt, and np.power with a scalar exponent of 0.5 / -1 / 2 is
    sqrt / reciprocal / square in float32 and float64 loops: -inf ** 0.5 is nan, not inf."""
    x = np.array([-np.inf, -0.0, 0.0, 2.0, 7.0, np.inf, -2.0, 1e-3, np.nan], dtype)

    def powers(x):
        return [x ** 0.5, x ** -1, x ** 2, np.power(x, 0.5), np.power(x, -1.0),
                np.power(x, 2), np.power(x, dtype(0.5)), np.power(x, np.array(0.5, dtype))]

    got = fuse(powers)(x)
    for i, (g, w) in enumerate(zip(got, numpy_errstate(powers)(x))):
        assert_bits(g, w, what=f"power form {i}")
    dynamic = fuse(lambda x, e: np.power(x, e))
    for e in (0.5, -1.0, 2.0, 3.0):
        assert_matches(dynamic(x, e), numpy_errstate(np.power)(x, e), ulp=20)
    assert_bits(dynamic(x, 0.5), numpy_errstate(np.power)(x, 0.5))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
def test_small_integer_powers_do_not_overflow_inside(dtype):
    """x ** k for the k written as products (passes/simplify.py::_power) near the ends of the
    dtype's range: no intermediate overflows or underflows where the power itself does not
    (float16 np.power(-358.5, -2) is the subnormal 7.8e-06; 1 / (x*x) gave 0). Found by fuzz
    seed 2222."""
    info = np.finfo(dtype)
    edges = [info.max, np.sqrt(info.max) * 0.9, np.sqrt(info.max) * 1.1, info.max ** 0.25 * 1.1,
             np.cbrt(info.max) * 1.1, 1 / np.sqrt(info.tiny) * 1.5, info.tiny, info.tiny * 4,
             np.sqrt(info.tiny) * 0.7, 1.0, 358.5, 0.0016651, 3.0]
    x = np.array([sign * e for e in edges for sign in (1, -1)], dtype)

    def powers(x):
        return [np.power(x, k) for k in (-2, -1, 2, 3, 4)]

    got = fuse(powers)(x)
    want = numpy_errstate(powers)(x)
    for k, g, w in zip((-2, -1, 2, 3, 4), got, want):
        assert_matches(g, w, ulp=2, what=f"x ** {k}")


def test_bool_squared_is_int8():
    m = np.array([True, False])
    assert_bits(fuse(lambda m: (m ** 2, np.power(m, 2)))(m)[0], m ** 2)


def test_where_converts_python_scalars_like_numpy():
    """np.where casts a Python scalar branch to the result dtype unsafely before NumPy 2.5 (300
    wraps to 44 in int8) and converts it like an operator's since (OverflowError)."""
    c = np.array([True, False, True])
    x = np.array([1, 2, 3], np.int8)
    u = np.array([1, 2, 3], np.uint8)
    for f in (lambda c, x, u: np.where(c, x, 300), lambda c, x, u: np.where(c, u, -1),
              lambda c, x, u: np.where(c, x, 2.5), lambda c, x, u: np.where(c, 7, u)):
        try:
            want = f(c, x, u)
        except OverflowError as numpy_error:
            with pytest.raises(OverflowError, match="out of bounds") as ours:
                fuse(f)(c, x, u)
            assert str(ours.value) == str(numpy_error)
            continue
        assert_bits(fuse(f)(c, x, u), want)


def test_clip_drops_python_int_bounds_outside_the_dtype():
    """NumPy's np.clip treats an int bound beyond an integer dtype's range as no bound."""
    x = np.array([0, 1, 200, 255], np.uint8)
    clips = (lambda x: np.clip(x, -1, 100), lambda x: np.clip(x, 10, 1000),
             lambda x: np.clip(x, -5, 300), lambda x: np.clip(x, None, None),
             lambda x: x.clip(2.5, 10))
    got = fuse(lambda x: [c(x) for c in clips])(x)
    for g, c in zip(got, clips):
        assert_bits(g, c(x))
    with pytest.raises(OverflowError):
        fuse(lambda x: np.clip(x, None, -1))(x)  # an upper bound below the range still fails


def test_comparison_with_dynamic_python_int_is_exact():
    """A Python int argument is compared exactly too, whatever the array's integer dtype."""
    u = np.array([0, 7, 255], np.uint8)
    i = np.array([-128, 0, 127], np.int8)
    big = np.array([0, 2**63, 2**64 - 1], np.uint64)
    f = fuse(lambda u, i, big, n: (u > n, u == n, i < n, i >= n, big > n, n <= big))
    for n in (-1, 7, 300, -2**40, 2**62):
        want = (u > n, u == n, i < n, i >= n, big > n, n <= big)
        for g, w in zip(f(u, i, big, n), want):
            assert_bits(g, w)
    assert f.trace_count == 1


def test_int64_against_uint64_compares_exactly():
    """NumPy 2 compares int64 with uint64 without a lossy float64 round trip."""
    a = np.array([-1, 2**63 - 1, 0, -(2**63)], np.int64)
    b = np.array([2**64 - 1, 2**63, 0, 0], np.uint64)
    ops = (np.less, np.less_equal, np.equal, np.not_equal, np.greater, np.greater_equal)
    got = fuse(lambda a, b: [f(a, b) for f in ops] + [f(b, a) for f in ops])(a, b)
    for g, w in zip(got, [f(a, b) for f in ops] + [f(b, a) for f in ops]):
        assert_bits(g, w)
