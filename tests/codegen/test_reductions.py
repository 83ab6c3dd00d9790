"""Reductions against NumPy: every spelling × axis forms × dtypes × shapes.

Each case traces ONE fused function returning a dict of reductions (one build per dtype and
shape keeps CI fast); every entry is compared with NumPy on dtype, shape and value.

Tolerances (n = number of reduced elements, eps = machine epsilon of the result dtype):
* integer and bool results, max/min, argmax/argmin: exact;
* float sum / mean:  |got - ref| <= (log2(n) + 13) * eps * sum(|x|)   (mean: / n), the
  worst-case bound of pairwise summation with short serial leaves: NumPy's own pairwise sum
  (16-element leaves) obeys it, and so do fusejit's lanes (8-element blocks merged pairwise,
  then a tree across lanes and work-groups); +1 for mean's division;
* float prod:        |got - ref| <= (n + 2) * eps * |ref|   (order-independent bound);
* var / std:         |got - ref| <= (log2(n) + 16) * eps * ref: the sum bound on the squares
  plus the roundings of the deviation, the square and the division;
where ref is the same NumPy expression evaluated in long double (for integer inputs, from the
values as NumPy casts them to the result dtype).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import fusejit
from fusejit import UnsupportedDTypeError, fuse
from fusejit.testing import assert_matches

DTYPES = [np.bool_, np.int8, np.int32, np.int64, np.uint8, np.uint64, np.float16, np.float32,
          np.float64]

# (axis, keepdims) forms per rank: int, negative int, tuple, None, keepdims on and off. Each
# distinct set of reduced axes is one kernel, so the 3-D forms pick the interesting ones: the
# middle axis, outer + inner, the two leading axes, everything.
AXES: dict[int, list[tuple[Any, bool]]] = {
    1: [(0, False), (-1, True), (None, False)],
    2: [(1, False), (0, True), (-1, False), (None, False), ((0, 1), True), ((-1, 0), False),
        (None, True), (-2, False)],
    3: [(1, False), ((0, 2), True), (-2, True), (None, False), ((-3, -2), False), (None, True)],
}

Spelling = Callable[[Any, Any, bool], Any]

# family -> (error model, spellings). Spellings rotate over the axis forms so that every spelling
# meets several axis forms across the shapes.
FAMILIES: dict[str, tuple[str, list[Spelling]]] = {
    "sum": ("sum", [lambda x, a, k: np.sum(x, axis=a, keepdims=k),
                    lambda x, a, k: x.sum(axis=a, keepdims=k),
                    lambda x, a, k: np.add.reduce(x, axis=a, keepdims=k)]),
    "prod": ("prod", [lambda x, a, k: np.prod(x, axis=a, keepdims=k),
                      lambda x, a, k: x.prod(a, keepdims=k),
                      lambda x, a, k: np.multiply.reduce(x, axis=a, keepdims=k)]),
    "max": ("exact", [lambda x, a, k: np.max(x, axis=a, keepdims=k),
                      lambda x, a, k: np.amax(x, a, keepdims=k),
                      lambda x, a, k: x.max(axis=a, keepdims=k),
                      lambda x, a, k: np.maximum.reduce(x, axis=a, keepdims=k)]),
    "min": ("exact", [lambda x, a, k: np.min(x, axis=a, keepdims=k),
                      lambda x, a, k: x.min(a, keepdims=k),
                      lambda x, a, k: np.amin(x, axis=a, keepdims=k),
                      lambda x, a, k: np.minimum.reduce(x, axis=a, keepdims=k)]),
    "any": ("exact", [lambda x, a, k: np.any(x, axis=a, keepdims=k),
                      lambda x, a, k: x.any(axis=a, keepdims=k),
                      lambda x, a, k: np.logical_or.reduce(x, axis=a, keepdims=k)]),
    "all": ("exact", [lambda x, a, k: np.all(x, axis=a, keepdims=k),
                      lambda x, a, k: x.all(a, keepdims=k),
                      lambda x, a, k: np.logical_and.reduce(x, axis=a, keepdims=k)]),
    "mean": ("sum", [lambda x, a, k: np.mean(x, axis=a, keepdims=k),
                     lambda x, a, k: x.mean(axis=a, keepdims=k)]),
    "var": ("var", [lambda x, a, k: np.var(x, axis=a, keepdims=k),
                    lambda x, a, k: x.var(axis=a, ddof=1, keepdims=k)]),
    "std": ("var", [lambda x, a, k: np.std(x, axis=a, ddof=1, keepdims=k),
                    lambda x, a, k: x.std(a, keepdims=k)]),
}
# argmax/argmin take one int axis or None
ARG_FAMILIES: dict[str, list[Spelling]] = {
    "argmax": [lambda x, a, k: np.argmax(x, axis=a, keepdims=k),
               lambda x, a, k: x.argmax(axis=a, keepdims=k)],
    "argmin": [lambda x, a, k: np.argmin(x, axis=a, keepdims=k),
               lambda x, a, k: x.argmin(a, keepdims=k)],
}


class Case(NamedTuple):
    label: str
    model: str  # error model: exact | sum | prod | var
    fn: Callable[[Any], Any]  # x -> result, NumPy-style
    axis: Any


def _spell(spelling: Spelling, axis: Any, keepdims: bool, x: Any) -> Any:
    return spelling(x, axis, keepdims)


def cases(ndim: int, families: tuple[str, ...],
          forms: list[tuple[Any, bool]] | None = None) -> list[Case]:
    """Every family over every axis form (by default, all forms of this rank)."""
    out = []
    forms = AXES[ndim] if forms is None else forms
    for name in families:
        if name in ARG_FAMILIES:
            model, spellings = "exact", ARG_FAMILIES[name]
            forms_here = [(a, k) for a, k in forms if a is None or isinstance(a, int)]
        else:
            (model, spellings), forms_here = FAMILIES[name], forms
        for i, (axis, keep) in enumerate(forms_here):
            j = i % len(spellings)
            fn = functools.partial(_spell, spellings[j], axis, keep)
            out.append(Case(f"{name}#{j} axis={axis} keepdims={keep}", model, fn, axis))
    return out


def make_input(rng: np.random.Generator, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    """Values that exercise each dtype: full-range integers (sums and products wrap as in
    NumPy), floats of both signs near 1 (products neither overflow nor underflow; float16
    quantisation makes ties), and a zero slab so any/all see all-false rows."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        x = rng.random(shape) < 0.7
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    else:
        x = (rng.uniform(0.98, 1.02, shape) * rng.choice([-1.0, 1.0], shape)).astype(dtype)
    if len(shape) > 1 and shape[0] > 1:
        x[0] = 0
    return x


def reduced_count(shape: tuple[int, ...], axis: Any) -> int:
    axes = range(len(shape)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    return math.prod(shape[a] for a in axes)


def assert_reduction_matches(got: Any, want: np.ndarray, model: str, x: np.ndarray,
                             spell: Callable[[Any], Any], n: int, what: str) -> None:
    """Compare one result with NumPy's: dtype and shape exactly, value by the error model."""
    want = np.asarray(want)
    if want.dtype.kind != "f" or model == "exact":
        assert_matches(got, want, what=what)
        return
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape)
    # integers enter float results through a cast to the result dtype (NumPy's x - mean), and
    # that rounding is NumPy's semantics, not an error: the reference starts from it too
    exact = x if x.dtype.kind == "f" else x.astype(want.dtype)
    ref = np.asarray(spell(exact.astype(np.longdouble)), dtype=np.longdouble)
    eps = float(np.finfo(want.dtype).eps)
    log_n = math.log2(max(n, 2))
    if model == "sum":
        scale = np.asarray(spell(np.abs(x.astype(np.longdouble))), dtype=np.longdouble)
        bound = (log_n + 13) * eps * scale
    elif model == "prod":
        bound = (n + 2) * eps * np.abs(ref)
    else:
        bound = (log_n + 16) * eps * np.abs(ref)
    err = np.abs(got.astype(np.longdouble) - ref)
    same = (got == ref) | (np.isnan(got) & np.isnan(ref))  # inf, and NaN of 0/0 (ddof=n)
    bad = ~(same | (err <= bound + np.finfo(want.dtype).tiny))
    if bad.any():
        worst = np.unravel_index(np.argmax(np.where(bad, err, 0)), err.shape)
        limit = float(np.broadcast_to(bound, err.shape)[worst])
        raise AssertionError(f"{what}: {int(bad.sum())} of {got.size} beyond the {model} "
                             f"bound; worst error {float(err[worst])} vs bound {limit}")


def run_catalog(x: np.ndarray, families: tuple[str, ...],
                forms: list[tuple[Any, bool]] | None = None) -> None:
    """One fused function computes every case; each result is checked against NumPy's."""
    table = cases(x.ndim, families, forms)
    # Vulkan adapters may bind as few as 8 storage buffers per shader: batches of 6 outputs
    chunk = len(table) or 1
    if fusejit.get_default_device() == "vulkan":
        table, chunk = vulkan_cases(table, x), 6
    got = {}
    for start in range(0, len(table), chunk):
        part = table[start:start + chunk]
        got.update(fuse(lambda a, part=part: {c.label: c.fn(a) for c in part})(x))
    for c in table:
        assert_reduction_matches(got[c.label], c.fn(x), c.model, x, c.fn,
                                 reduced_count(x.shape, c.axis),
                                 f"{x.dtype}{list(x.shape)} {c.label}")


def dt_names(dtypes: frozenset[np.dtype]) -> set[str]:
    """The names of the dtypes NOT in ``dtypes`` (what an UnsupportedDTypeError may name)."""
    return {np.dtype(c).name for c in "?bBhHiIlLefd"} - {d.name for d in dtypes}


def vulkan_cases(table: list, x: np.ndarray) -> list:
    """The cases the Vulkan target computes; the others must raise UnsupportedDTypeError and
    involve a dtype it lacks (int64 sums and indices, float64 means of integers, ...)."""
    kept = []
    from fusejit.runtime.vulkan.array import supported_dtypes
    from fusejit.vulkan import default_device

    lacking = supported_dtypes(default_device())  # (what it does not lack)
    for c in table:
        try:
            fuse(c.fn).lower(x)
        except UnsupportedDTypeError as exc:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                dtypes = {x.dtype, np.asarray(c.fn(x)).dtype}
            # (or an intermediate the lowering picks: float16 variances go through float64)
            named = str(exc).split()[0]
            narrow = "one at a time" in str(exc) and x.dtype.itemsize < 4  # (glsl_narrow)
            assert not dtypes <= lacking or named in dt_names(lacking) or narrow, \
                f"{c.label} on {x.dtype}: {exc}"
            continue
        kept.append(c)
    return kept


ALL = tuple(FAMILIES) + tuple(ARG_FAMILIES)


def dtype_id(d: type) -> str:
    return np.dtype(d).name


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_catalog_2d(dtype: type, device: str, rng: np.random.Generator) -> None:
    """Every family and spelling over rows, columns, everything, with keepdims on and off."""
    run_catalog(make_input(rng, dtype, (7, 13)), ALL)


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.float64], ids=dtype_id)
def test_catalog_3d(dtype: type, rng: np.random.Generator) -> None:
    """Middle axis, outer + inner axes, leading axes: the reduced elements are not contiguous."""
    run_catalog(make_input(rng, dtype, (4, 5, 6)), ALL)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint64, np.float16], ids=dtype_id)
def test_catalog_1d(dtype: type, rng: np.random.Generator) -> None:
    run_catalog(make_input(rng, dtype, (11,)), ALL)


@pytest.mark.parametrize(("dtype", "shape"), [(np.int32, (1, 9)), (np.float32, (9, 1))],
                         ids=["int32-1x9", "float32-9x1"])
def test_catalog_length_one_axes(dtype: type, shape: tuple[int, ...],
                                 rng: np.random.Generator) -> None:
    """Reducing a length-1 axis (one element per output; ddof=1 gives NaN as in NumPy)."""
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        run_catalog(make_input(rng, dtype, shape), ALL)


LARGE = {  # shape -> the axis forms that make it interesting
    (3, 5000): [(1, False), (-1, True)],  # rows much longer than a work-group, few outputs
    (4096, 3): [(1, False), (-1, True)],  # many short rows
    (5000, 3): [(0, False), (-2, True)],  # a column reduction: lanes across outputs
    (6, 300, 5): [(1, False), (-2, True)],  # a middle axis of a 3-D array
}
LARGE_FAMILIES = ("sum", "max", "argmin", "any", "mean", "var")


@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.float16, np.float32], ids=dtype_id)
@pytest.mark.parametrize("shape", list(LARGE), ids=lambda s: "x".join(map(str, s)))
def test_catalog_large(dtype: type, shape: tuple[int, ...], device: str,
                       rng: np.random.Generator) -> None:
    run_catalog(make_input(rng, dtype, shape), LARGE_FAMILIES, LARGE[shape])


ZERO_EXTENT = [(0, 5841), (0, 8193), (0, 65536), (0, 1 << 20), (2, 0, 8193), (0, 3, 65536)]


@pytest.mark.parametrize("shape", ZERO_EXTENT, ids=lambda s: "x".join(map(str, s)))
def test_zero_extent_long_rows(shape: tuple[int, ...], device: str) -> None:
    """No outputs (a 0-length kept axis) beside long rows: an empty result, as NumPy gives, not
    a division by the zero work-groups in the cost model (sum, mean, a row fusion, columns)."""
    def softmax(x: Any) -> Any:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    x = np.ones(shape, np.float32)
    for fn in (lambda a: a.sum(axis=-1), lambda a: a.mean(axis=-1), softmax,
               lambda a: a.sum(axis=0)):
        assert_matches(fuse(fn)(x), fn(x))


def test_zero_extent_strategies() -> None:
    """The cost model itself on every device kind: empty output spaces and empty rows."""
    from fusejit.passes.plan import DeviceLimits
    from fusejit.passes.strategy import choose_strategy, cpu_vector_strategy

    gpu = DeviceLimits(max_work_group=1024, compute_units=132, is_gpu=True)
    for limits in (DeviceLimits(), gpu):
        for space, axes in [((0, 1 << 20), (1,)), ((2, 0, 8193), (2,)), ((0, 64), (0,)),
                            ((5, 0), (1,)), ((0,), (0,))]:
            for contiguous in (True, False):
                st = choose_strategy(space, axes, 1, contiguous, limits)
                assert st.gy == 1, (space, st)
                cpu_vector_strategy(space, axes, 1, contiguous, limits, True)
