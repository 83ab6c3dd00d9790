"""Reductions NumPy composes (issue 17 §6): nan-functions, where=, average, ptp, count_nonzero,
linalg.norm and ufunc.reduce (logaddexp, fmax, fmin): NumPy's dtype, shape and value, one
kernel where the work allows, NumPy's error classes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fusejit import UnsupportedOperationError, fuse
from fusejit.testing import assert_matches

NAN = np.nan
F = np.array([[1.5, NAN, 3, -2, 0.25], [NAN] * 5, [0.5, 2, -1, 4, -0.0], [7, 1, NAN, 2, 2]],
             np.float32)
D = F.astype(np.float64)
I8 = np.array([[3, -7, 0, 5], [1, 1, -1, 0]], np.int8)
M = F > 0.4

CASES = {
    "nansum": (lambda x: np.nansum(x, axis=1), F),
    "nansum_all_dtype": (lambda x: np.nansum(x, dtype=np.float64), F),
    "nansum_int": (lambda x: np.nansum(x, 0), I8),
    "nanprod": (lambda x: np.nanprod(x, 1, keepdims=True), D),
    "nanmax": (lambda x: np.nanmax(x, 1), F),
    "nanmin_0": (lambda x: np.nanmin(x, 0), D),
    "nanmax_int": (lambda x: np.nanmax(x, 1), I8),
    "nanmax_initial": (lambda x: np.nanmax(x, 1, initial=5.0), F),
    "nanmean": (lambda x: np.nanmean(x, 1), F),
    "nanmean_dtype": (lambda x: np.nanmean(x, 0, dtype=np.float64), F),
    "nanmean_int": (lambda x: np.nanmean(x), I8),
    "nanvar": (lambda x: np.nanvar(x, 1), D),
    "nanvar_ddof": (lambda x: np.nanvar(x, 0, ddof=1, keepdims=True), F),
    "nanstd": (lambda x: np.nanstd(x, 1, ddof=1), D),
    "nanargmax": (lambda x: np.nanargmax(x[[0, 2, 3]], 1), F),
    "nanargmin": (lambda x: np.nanargmin(x[[0, 2, 3]], 0), D),
    "sum_where": (lambda x: np.sum(x, 1, where=x > 0), F),
    "sum_where_broadcast": (lambda x: x.sum(0, where=np.array([True, False, True, True, False])),
                            D),
    "prod_where": (lambda x: np.prod(x, 1, where=x > 0), D),
    "mean_where": (lambda x: np.mean(x, 1, where=x > 0), F),
    "mean_where_int": (lambda x: np.mean(x, 0, where=x != 0), I8),
    "max_where": (lambda x: np.max(x, 0, where=x > 0, initial=-5), F),
    "min_where": (lambda x: x.min(1, where=x < 2, initial=100), D),
    "any_where": (lambda x: np.any(x > 2, 1, where=~np.isnan(x)), F),
    "all_where": (lambda x: np.all(x > 0, 0, where=x != 2), D),
    "var_where": (lambda x: np.var(x, 1, where=x > 0), D),
    "std_where": (lambda x: np.std(x, 1, where=x > 0, ddof=1), D),
    "average": (lambda x: np.average(x), D),
    "average_axis": (lambda x: np.average(x, 0), I8),
    "average_weights": (lambda x: np.average(x[[0, 2]], 1, weights=[1, 2, 3, 4, 0.5]), F),
    "average_weights_same": (lambda x: np.average(x, weights=np.abs(x) + 1), I8),
    "average_returned": (lambda x: np.average(x, 1, weights=[[1, 2, 3, 4]] * 2,
                                              returned=True), I8),
    "ptp": (lambda x: np.ptp(x[[0, 2]], 1), F),
    "ptp_int": (lambda x: np.ptp(x, 0), I8),
    "count_nonzero": (lambda x: np.count_nonzero(x, 1), F),
    "count_nonzero_all": (lambda x: np.count_nonzero(x, keepdims=True, axis=(0, 1)), I8),
    "norm": (lambda x: np.linalg.norm(x[2]), F),
    "norm_int": (lambda x: np.linalg.norm(x), I8),
    "norm_fro": (lambda x: np.linalg.norm(x[[0, 2]], "fro"), D),
    "norm_axis_ord3": (lambda x: np.linalg.norm(x[[0, 2]], 3, axis=1), F),
    "norm_axis_ord0": (lambda x: np.linalg.norm(x, 0, axis=0), D),
    "norm_inf": (lambda x: np.linalg.norm(x[[0, 2]], np.inf, axis=1, keepdims=True), F),
    "norm_minus_inf": (lambda x: np.linalg.norm(x[2], -np.inf), D),
    "norm_1": (lambda x: np.linalg.norm(x[2], 1), F),
    "norm_2": (lambda x: np.linalg.norm(x[[0, 2]], 2, axis=-1), D),
    "norm_matrix_1": (lambda x: np.linalg.norm(x[[0, 2]], 1), D),
    "norm_matrix_inf": (lambda x: np.linalg.norm(x[[0, 2]], np.inf, keepdims=True), F),
    "norm_matrix_neg": (lambda x: np.linalg.norm(x[[0, 2]], -1, axis=(1, 0)), D),
    "logaddexp_reduce": (lambda x: np.logaddexp.reduce(x[[0, 2]], axis=1), F),
    "logaddexp_reduce_edges": (lambda x: np.logaddexp.reduce(
        np.where(x > 1, np.inf, -np.inf), axis=0), D),
    "logaddexp2_reduce": (lambda x: np.logaddexp2.reduce(x[2]), D),
    "fmax_reduce": (lambda x: np.fmax.reduce(x, axis=1), F),
    "fmin_reduce": (lambda x: np.fmin.reduce(x, axis=0), D),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_numpy(name):
    fn, x = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy's all-NaN / empty-slice warnings
        want = fn(x)
    got = fuse(fn)(x)
    for g, w in zip(got, want) if isinstance(want, tuple) else ((got, want),):
        assert_matches(g, w, ulp=16, what=name)


@pytest.mark.parametrize("fn, kernels", [
    (lambda x: np.nanmax(x, 1), 1),  # max and the all-NaN test share the pass
    (lambda x: np.nanmean(x, 1) * 2, 1),  # count and sum in one pass, divide as epilogue
    (lambda x: np.mean(x, 1, where=x > 0) + 1, 1),
    (lambda x: np.logaddexp.reduce(x, axis=1), 1),  # max, then the sum as a later stage
    (lambda x: np.linalg.norm(x, axis=1) + np.ptp(x, 1), 1),
])
def test_kernel_counts(fn, kernels):
    x = np.nan_to_num(F)
    low = fuse(fn).lower(x)
    assert len(low.kernels) == kernels, low
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a row with no positive element: NumPy's empty mean
        want = fn(x)
    assert_matches(fuse(fn)(x), want, ulp=16)


@pytest.mark.parametrize("fn, error", [
    (lambda x: np.max(x, where=x > 0), ValueError),  # no identity: initial= needed
    (lambda x: np.sum(x, where=x), TypeError),  # a float mask
    (lambda x: np.average(x, weights=[1, 2]), TypeError),
    (lambda x: np.average(x, 1, weights=[1, 2]), ValueError),
    (lambda x: np.average(x, 1, weights=[1, -1, 0, 0, 0]), ZeroDivisionError),
    (lambda x: np.linalg.norm(x, "fro", axis=1), ValueError),
    (lambda x: np.linalg.norm(x, 3), ValueError),
    (lambda x: np.linalg.norm(x, axis=(0, 0)), ValueError),
    (lambda x: np.linalg.norm(x, axis=(0, 1, 1)), ValueError),
])
def test_bad_input_raises_numpys_error(fn, error, launches):
    with pytest.raises(error):
        fn(D)
    with pytest.raises(error):
        fuse(fn)(D)
    assert not launches


@pytest.mark.parametrize("fn", [
    lambda x: np.linalg.svd(x),  # singular vectors (values only: tests/codegen/test_svd.py)
])  # (np.subtract.reduce folds, up to a length it names: tests/frontend/test_small_gaps.py)
def test_refused_with_a_clear_error(fn):
    with pytest.raises(UnsupportedOperationError, match="inside @fuse|SVD"):
        fuse(fn)(D)
