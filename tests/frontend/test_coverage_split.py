"""More array building: split and friends, unstack, append, delete, rot90, meshgrid, outer,
ediff1d, cross, select. NumPy's dtype, shape and value; views where NumPy gives views; NumPy's
error classes."""

from __future__ import annotations

import numpy as np
import pytest

from fusejit import UnsupportedOperationError, fuse
from fusejit.testing import assert_matches

A = np.arange(24.0).reshape(4, 6) * 0.5 - 3
I = np.arange(12, dtype=np.int16).reshape(4, 3)

CASES = {
    "split": lambda a: np.split(a, 2),
    "split_indices": lambda a: np.split(a, [1, 4], axis=1),
    "array_split": lambda a: np.array_split(a, 4, axis=1),
    "array_split_more_than_rows": lambda a: np.array_split(a, 5),
    "hsplit": lambda a: np.hsplit(a, 3),
    "hsplit_1d": lambda a: np.hsplit(a[0], [2]),
    "vsplit": lambda a: np.vsplit(a, [1]),
    "dsplit": lambda a: np.dsplit(a.reshape(2, 2, 6), 2),
    "unstack": lambda a: np.unstack(a, axis=1),
    "append_axis": lambda a: np.append(a, a[:1], axis=0),
    "append_flat": lambda a: np.append(a, 7),
    "delete_int": lambda a: np.delete(a, 1, axis=1),
    "delete_list_flat": lambda a: np.delete(a, [0, -1]),
    "delete_slice": lambda a: np.delete(a, slice(1, None, 2), 0),
    "delete_mask": lambda a: np.delete(a, np.array([True, False, True, False]), 0),
    "rot90": lambda a: np.rot90(a),
    "rot90_2": lambda a: np.rot90(a, 2),
    "rot90_minus": lambda a: np.rot90(a, -1),
    "rot90_axes": lambda a: np.rot90(a, 1, (1, 0)),
    "meshgrid": lambda a: np.meshgrid(a[0], a[:, 0]),
    "meshgrid_ij_sparse": lambda a: np.meshgrid(a[0], a[:, 0], a[1, :2], indexing="ij",
                                                sparse=True),
    "outer": lambda a: np.outer(a[0], a[:, 1]),
    "ediff1d": lambda a: np.ediff1d(a),
    "ediff1d_ends": lambda a: np.ediff1d(a[0], to_end=[9, 8], to_begin=-1),
    "cross": lambda a: np.cross(a[:, :3], a[:, 3:]),
    "cross_axes": lambda a: np.cross(a[:3, :4], a[:3, 2:], axisa=0, axisb=0),
    "cross_broadcast": lambda a: np.cross(a[:, :3], np.array([1.0, 0, 2])),
    "select": lambda a: np.select([a > 5, a < 2], [a, -a], 0.5),
    "select_scalars": lambda a: np.select([a > 0], [3], default=-1),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_numpy(name):
    fn = CASES[name]
    for x in (A, I) if name in ("select", "delete_int", "rot90") else (A,):
        want, got = fn(x), fuse(fn)(x)
        if isinstance(want, (list, tuple)):
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert_matches(g, w, what=name)
        else:
            assert_matches(got, want, what=name)


def test_one_kernel_with_the_work_around():
    def fn(a):
        left, right = np.split(a, 2, axis=1)
        return np.rot90(left) * 2 + np.delete(np.rot90(right), 0, axis=1)[:, :1]

    low = fuse(fn).lower(A)
    assert len(low.kernels) == 1 and not low.plan.temps
    assert_matches(fuse(fn)(A), fn(A))


@pytest.mark.parametrize("fn, error", [
    (lambda a: np.split(a, 5), ValueError),
    (lambda a: np.split(a, 0), ZeroDivisionError),
    (lambda a: np.array_split(a, 0), ValueError),
    (lambda a: np.vsplit(a[0], 2), ValueError),
    (lambda a: np.dsplit(a, 2), ValueError),
    (lambda a: np.delete(a, 9, axis=0), IndexError),
    (lambda a: np.delete(a, np.array([True, False]), 0), ValueError),
    (lambda a: np.delete(a, [0.5]), IndexError),
    (lambda a: np.rot90(a, axes=(0, 0)), ValueError),
    (lambda a: np.rot90(a, axes=(0, 1, 2)), ValueError),
    (lambda a: np.rot90(a, axes=(0, 5)), ValueError),
    (lambda a: np.meshgrid(a[0], indexing="bogus"), ValueError),
    (lambda a: np.cross(a[:, :4], a[:, 2:]), ValueError),
    (lambda a: np.ediff1d(a.astype(np.int8), to_end=[0.5]), TypeError),
    (lambda a: np.select([a > 0], [a, a]), ValueError),
    (lambda a: np.select([], []), ValueError),
    (lambda a: np.select([a], [a]), TypeError),
])
def test_bad_input_raises_numpys_error(fn, error, launches):
    with pytest.raises(error):
        fn(A)
    with pytest.raises(error):
        fuse(fn)(A)
    assert not launches


@pytest.mark.parametrize("fn", [
    lambda a, n: np.cross(a[:, :2], a[:, 2:4]),
])
def test_refused_with_a_clear_error(fn):
    with pytest.raises(UnsupportedOperationError, match="inside @fuse|traced"):
        fuse(fn)(A, 2)


@pytest.mark.parametrize("fn", [
    lambda a, n: np.split(a, n),
    lambda a, n: np.delete(a, n),
])
def test_int_arguments_that_shape_the_result_are_specialised(fn):
    """A section count or index passed as a Python int is needed as a value: the call
    specialises on it (issue 30) instead of refusing the traced int."""
    f = fuse(fn)
    for n in (2, 1):
        got, want = f(A, n), fn(A, n)
        got, want = (got, want) if isinstance(want, list) else ([got], [want])
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
