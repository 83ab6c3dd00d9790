"""Reduction semantics at the edges, against NumPy: NaN and ties, empty axes, bad axes, dtype=,
initial=, 0-d inputs, the accuracy of long float sums, and split reductions (a partial kernel
plus a combine kernel) including argmax/argmin.

Value checks use the error models documented in test_reductions.py.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import pytest
from test_reductions import assert_reduction_matches

from fusejit import fuse
from fusejit.testing import assert_matches

nan, inf = np.nan, np.inf


def check_all(got: Any, want: Any, what: str) -> None:
    """Exact comparison of matching tuples of results (NaN equals NaN)."""
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_matches(g, w, what=f"{what}[{i}]")


# -- NaN, infinities and ties ----------------------------------------------------------------------


def nan_rows(dtype: type, rng: np.random.Generator) -> np.ndarray:
    """Rows of 37 (longer than the 16 lanes of a row): NaN first / middle / last / twice / only,
    infinities, all-equal values, and ties placed so that the first occurrence sits in a
    higher lane than a later one (index 5 in lane 5 and index 20 in lane 4)."""
    x = rng.standard_normal((9, 37)).astype(dtype)
    x[0, 0] = nan
    x[1, 20] = nan
    x[2, 36] = nan
    x[3, [5, 30]] = nan
    x[4, :] = nan
    x[5, 7], x[5, 9] = inf, -inf
    x[6, :] = 1
    x[7, :] = 0
    x[7, [5, 20]] = 2
    x[7, [4, 21]] = -2
    x[8, :] = -inf
    return x


def reductions_with_nan(a: Any) -> tuple[Any, ...]:
    return (np.max(a, 1), np.min(a, 1), np.argmax(a, 1), np.argmin(a, 1), np.max(a, 0),
            np.min(a, 0), np.argmax(a, 0), np.argmin(a, 0), np.argmax(a), np.argmin(a),
            np.max(a), np.any(a, 1), np.all(a, 1), np.sum(a, 1) * 0)


def test_nan_propagates_and_arg_reductions_return_the_first_occurrence(
        rng: np.random.Generator) -> None:
    """max/min propagate NaN; argmax/argmin return the first NaN, else the first extremum."""
    xs = [nan_rows(d, rng) for d in (np.float16, np.float32, np.float64)]
    got = fuse(lambda *a: [reductions_with_nan(v) for v in a])(*xs)
    with np.errstate(invalid="ignore"):
        for x, g in zip(xs, got):
            check_all(g, reductions_with_nan(x), str(x.dtype))


def test_integer_ties_return_the_first_occurrence(rng: np.random.Generator) -> None:
    x = rng.integers(-3, 3, size=(40, 33)).astype(np.int8)  # many ties per row and column
    b = x > 0
    f = fuse(lambda a, c: (a.argmax(1), a.argmin(0), np.argmax(c, 1), np.argmin(c), a.max(0)))
    check_all(f(x, b), (x.argmax(1), x.argmin(0), np.argmax(b, 1), np.argmin(b), x.max(0)),
              "int8")


# -- empty axes, 0-d, axis=() ----------------------------------------------------------------------


def test_empty_axis_gives_the_identity() -> None:
    """sum -> 0, prod -> 1, any -> False, all -> True, max with initial= -> initial; reducing a
    non-empty axis of an empty array gives an empty result."""
    e = np.zeros((3, 0), np.float32)

    def f(a: Any, i: Any) -> tuple[Any, ...]:
        return (a.sum(1), a.prod(1), a.any(1), a.all(1), a.sum(), a.sum(1, keepdims=True),
                a.sum(0), a.max(0), np.argmax(a, 0), np.max(a, axis=1, initial=-5.0),
                i.sum(1), i.prod(1), np.min(i, axis=1, initial=3), np.add.reduce(i, 1))

    ei = e.astype(np.int8)
    check_all(fuse(f)(e, ei), f(e, ei), "empty")


@pytest.mark.filterwarnings("ignore:Mean of empty slice:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_mean_and_var_of_an_empty_axis_are_nan() -> None:
    e = np.zeros((3, 0), np.float32)
    f = fuse(lambda a: (np.mean(a, 1), np.var(a, 1), a.std(1), a.mean()))
    check_all(f(e), (np.mean(e, 1), np.var(e, 1), e.std(1), e.mean()), "empty mean")


@pytest.mark.parametrize("reduction", [
    lambda a: np.max(a, axis=1), lambda a: np.amin(a, axis=-1), lambda a: a.max(1),
    lambda a: np.maximum.reduce(a, axis=1), lambda a: np.argmax(a, axis=1),
    lambda a: a.argmin(1), lambda a: np.argmax(a[0]), lambda a: np.min(a[0]),
], ids=["max", "amin", "x.max", "maximum.reduce", "argmax", "x.argmin", "argmax-None",
        "min-None"])
def test_max_and_argmax_of_an_empty_axis_raise_like_numpy(reduction: Any) -> None:
    e = np.zeros((3, 0), np.float32)
    with pytest.raises(ValueError) as numpy_error:
        reduction(e)
    f = fuse(reduction)
    with pytest.raises(ValueError) as ours:
        f.lower(e)  # raised while tracing: nothing is built or launched
    assert str(ours.value) == str(numpy_error.value)
    assert f.cache_info().currsize == 0


def test_zero_d_input_and_empty_axis_tuple(rng: np.random.Generator) -> None:
    a0 = np.asarray(np.float32(2.5))
    x = rng.standard_normal((3, 4)).astype(np.float32)

    def f(s: Any, a: Any) -> tuple[Any, ...]:
        return (np.sum(s), np.max(s), np.argmax(s), s.mean(), s.var(), np.prod(s),
                np.sum(a, axis=()), np.max(a, axis=()), np.mean(a, axis=()))

    check_all(fuse(f)(a0, x), f(a0, x), "0-d")


# -- errors raised while tracing -------------------------------------------------------------------


@pytest.mark.parametrize("reduction", [
    lambda a: a.sum(axis=2), lambda a: np.max(a, axis=-3), lambda a: np.argmax(a, axis=2),
    lambda a: np.mean(a, axis=(0, 2)), lambda a: a.var(axis=5), lambda a: np.any(a, axis=-4),
    lambda a: np.add.reduce(a, axis=2), lambda a: a.argmin(-3),
], ids=["sum", "max", "argmax", "mean-tuple", "var", "any", "add.reduce", "x.argmin"])
def test_bad_axis_raises_axis_error_before_anything_is_built(reduction: Any) -> None:
    x = np.ones((3, 4), np.float32)
    with pytest.raises(np.exceptions.AxisError) as numpy_error:
        reduction(x)
    f = fuse(reduction)
    with pytest.raises(np.exceptions.AxisError) as ours:
        f(x)
    assert str(ours.value) == str(numpy_error.value)
    assert f.cache_info().currsize == 0 and f.cache_info().misses == 0


def test_duplicate_axes_and_tuple_axis_of_argmax_raise_like_numpy() -> None:
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="duplicate value in 'axis'"):
        fuse(lambda a: np.sum(a, axis=(0, -2))).lower(x)
    with pytest.raises(TypeError):
        fuse(lambda a: np.argmax(a, axis=(0, 1))).lower(x)


def test_where_argument_matches_numpy() -> None:
    # (supported since issue 17; tests/frontend/test_coverage_reduce.py covers where= in full)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    got = fuse(lambda a: np.sum(a, where=a > 0))(x)
    np.testing.assert_array_equal(got, np.sum(x, where=x > 0))


# -- dtype=, initial= ------------------------------------------------------------------------------


class DtypeCase(NamedTuple):
    label: str
    model: str  # error model (test_reductions.py): exact | sum | var
    reads: str  # which input: i8 u8 f32 f16 b
    n: int  # reduced elements
    fn: Any  # the NumPy expression
    ref: Any = None  # the same without dtype=, for the long double reference


R, C = 9, 21  # input shape; axis 1 reduces C elements, axis 0 R
DTYPE_CASES = [
    DtypeCase("sum int8 dtype=int8 (wraps)", "exact", "i8", C,
              lambda x: np.sum(x, 1, dtype=np.int8)),
    DtypeCase("add.reduce uint8 dtype=uint8", "exact", "u8", C,
              lambda x: np.add.reduce(x, 1, dtype=np.uint8)),
    DtypeCase("sum bool dtype=bool (logical or)", "exact", "b", C,
              lambda x: np.sum(x, 1, dtype=bool)),
    DtypeCase("prod int8 dtype=int64", "exact", "i8", R, lambda x: np.prod(x, 0, dtype=np.int64)),
    DtypeCase("sum float32 dtype=int32", "exact", "f32", R,
              lambda x: np.sum(x, 0, dtype=np.int32)),
    DtypeCase("sum float32 dtype=float64", "sum", "f32", C,
              lambda x: np.sum(x, 1, dtype=np.float64), lambda x: np.sum(x, 1)),
    DtypeCase("sum int8 dtype=float16", "sum", "i8", C,
              lambda x: x.sum(axis=1, dtype=np.float16), lambda x: x.sum(axis=1)),
    DtypeCase("mean float32 dtype=float64", "sum", "f32", C,
              lambda x: np.mean(x, 1, dtype=np.float64), lambda x: np.mean(x, 1)),
    DtypeCase("mean int8 dtype=float32", "sum", "i8", R,
              lambda x: x.mean(0, dtype=np.float32), lambda x: x.mean(0)),
    DtypeCase("mean float16 (a float32 sum inside)", "sum", "f16", C, lambda x: x.mean(1)),
    DtypeCase("var float32 dtype=float64", "var", "f32", C,
              lambda x: np.var(x, 1, dtype=np.float64), lambda x: np.var(x, 1)),
    DtypeCase("std uint8 dtype=float32 ddof=2", "var", "u8", R,
              lambda x: np.std(x, 0, dtype=np.float32, ddof=2), lambda x: np.std(x, 0, ddof=2)),
    DtypeCase("var float16 ddof=1", "var", "f16", C, lambda x: x.var(1, ddof=1)),
    DtypeCase("sum initial=5", "sum", "f32", C + 1, lambda x: np.sum(x, 1, initial=5)),
    DtypeCase("prod int8 initial=2", "exact", "i8", R, lambda x: np.prod(x, 0, initial=2)),
    DtypeCase("max initial=0.5", "exact", "f32", C, lambda x: np.max(x, 1, initial=0.5)),
    DtypeCase("min uint8 initial=7", "exact", "u8", R * C, lambda x: np.min(x, initial=7)),
]


def test_dtype_ddof_and_initial_arguments(rng: np.random.Generator) -> None:
    inputs = {
        "i8": rng.integers(-128, 128, (R, C)).astype(np.int8),
        "u8": rng.integers(0, 256, (R, C)).astype(np.uint8),
        "f32": rng.uniform(-2, 2, (R, C)).astype(np.float32),
        "f16": rng.uniform(-2, 2, (R, C)).astype(np.float16),
        "b": rng.random((R, C)) < 0.5,
    }
    keys = list(inputs)
    f = fuse(lambda *a: [c.fn(a[keys.index(c.reads)]) for c in DTYPE_CASES])
    got = f(*inputs.values())
    for c, g in zip(DTYPE_CASES, got):
        x = inputs[c.reads]
        assert_reduction_matches(g, c.fn(x), c.model, x, c.ref or c.fn, c.n, c.label)


# -- accuracy of long float sums -------------------------------------------------------------------


def test_float32_sum_of_2_pow_24_elements_is_as_accurate_as_numpy(rng: np.random.Generator
                                                                  ) -> None:
    """A serial float32 loop stalls once the total reaches 2**24 (random [0, 1) values lose
    most of their bits); pairwise lanes + trees stay within the pairwise bound NumPy obeys."""
    n = 2**24
    u = rng.random(n, dtype=np.float32)
    f = fuse(lambda a: (np.sum(a * 0 + 1), np.sum(a), np.mean(a)))  # a * 0 + 1: ones, in-kernel
    low = f.lower(u)
    assert [k.role for k in low.kernels] == ["partial", "combine"]
    ones, total, mean = f(u)
    assert ones.dtype == np.float32 and ones == 2**24
    exact = math.fsum(u.astype(np.float64))
    bound = (math.log2(n) + 13) * float(np.finfo(np.float32).eps) * exact  # sum(|u|) == exact
    numpy_error = abs(float(np.sum(u)) - exact)
    assert numpy_error <= bound, "the bound must hold for NumPy's own float32 sum"
    assert abs(float(total) - exact) <= bound, (float(total), exact, numpy_error)
    assert mean.dtype == np.float32
    assert abs(float(mean) - exact / n) <= bound / n + float(np.spacing(np.float32(0.5)))


def test_float64_and_float16_long_sums(rng: np.random.Generator) -> None:
    d = rng.standard_normal(3 * 2**20)
    h = rng.random(2**16).astype(np.float16)  # total ~ 32768, below float16's 65504
    f = fuse(lambda a, b: (a.sum(), b.sum(), a.mean()))
    got = f(d, h)
    assert_reduction_matches(got[0], d.sum(), "sum", d, np.sum, d.size, "float64 sum")
    assert_reduction_matches(got[1], h.sum(), "sum", h, np.sum, h.size, "float16 sum")
    assert_reduction_matches(got[2], d.mean(), "sum", d, np.mean, d.size, "float64 mean")


# -- split reductions: partial results per work-group, then a combine kernel -----------------------


def test_split_reductions_of_a_long_vector_keep_numpy_semantics(rng: np.random.Generator) -> None:
    """Ties and NaNs placed in different work-groups' chunks: argmax/argmin must return the first
    occurrence across the combine step, max/min must propagate NaN."""
    n = 2**20 + 3
    x = rng.standard_normal(n).astype(np.float32)

    def f(x: Any, y: Any, i: Any, b: Any) -> tuple[Any, ...]:
        return (np.argmax(x), np.argmin(x), np.max(x), np.min(x), np.argmax(y), np.argmin(y),
                np.max(y), np.min(y), i.argmax(), i.argmin(), i.sum(), i.prod(), i.max(),
                b.any(), b.all(), np.logical_not(b).all(), np.sum(b),
                np.argmax(x, keepdims=True), np.max(y, keepdims=True))

    fused = fuse(f)
    i = rng.integers(-5, 6, n).astype(np.int64)
    b = np.zeros(n, bool)
    low = fused.lower(x, x, i, b)
    (group,) = low.plan.groups
    gy = group.strategy.gy
    assert gy > 1 and [k.role for k in low.kernels] == ["partial", "combine"]
    assert "split" in low.kernels[0].reason and "split" in str(low)
    chunk = math.ceil(n / gy)  # work-group g reduces [g * chunk, (g + 1) * chunk)
    top, bottom = float(np.max(x)) + 1, float(np.min(x)) - 1
    x[[2 * chunk + 1, chunk + 5, n - 1]] = top  # first occurrence in the second chunk
    x[[n - 2, (gy - 1) * chunk, 3]] = bottom  # first occurrence in the first chunk
    y = x.copy()
    y[[(gy - 1) * chunk + 7, 2 * chunk - 1]] = nan  # first NaN: the last of the second chunk
    i[[chunk + 9, 7, n - 1]] = 99
    b[n - 1] = True
    check_all(fused(x, y, i, b), f(x, y, i, b), "split")


def test_split_full_reduction_of_a_2d_array_with_epilogue(rng: np.random.Generator) -> None:
    """axis=None over 2-D: argmax returns the flat index; the epilogue runs in the combine
    kernel, so the split still takes two kernels; a row-space consumer takes a third."""
    x = rng.standard_normal((1023, 1029)).astype(np.float32)
    x[700, 3] = x[1000, 1000] = 50

    def f(a: Any) -> tuple[Any, ...]:
        return np.argmax(a), np.sqrt(np.sum(a * a)) + 1, a.std()

    fused = fuse(f)
    assert [k.role for k in fused.lower(x).kernels[:2]] == ["partial", "combine"]
    got, want = fused(x), f(x)
    assert_matches(got[0], want[0])
    assert_reduction_matches(got[2], want[2], "var", x, np.std, x.size, "std")
    sq = x.astype(np.float64) ** 2
    bound = (math.log2(x.size) + 14) * float(np.finfo(np.float32).eps) * math.sqrt(sq.sum())
    assert got[1].dtype == np.float32 and abs(float(got[1]) - want[1]) <= bound

    centred = fuse(lambda a: a - a.mean())
    kernels = centred.lower(x).kernels
    assert [k.role for k in kernels] == ["partial", "combine", "main"]
    got = centred(x)
    exact = x.astype(np.float64) - x.astype(np.float64).mean()
    eps = float(np.finfo(np.float32).eps)
    mean_error = (math.log2(x.size) + 13) * eps * float(np.abs(x).mean())
    assert got.dtype == np.float32
    assert np.all(np.abs(got - exact) <= mean_error + eps * np.abs(exact))
