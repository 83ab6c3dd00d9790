"""In-place writes: NumPy's results, in the same kernel when that is race-free, staged through a
temporary when it is not; aliasing arguments; read-only targets; closure/global guards."""

from __future__ import annotations

import numpy as np
import pyopencl.array as cla
import pytest

from fusejit import ReadOnlyError, fuse
from fusejit.testing import assert_matches


def run_both(fn, make, dev=None):
    """Run ``fn`` with NumPy and fused on fresh copies; compare results and the arguments."""
    want_args, got_args = make(), make()
    want = fn(*want_args)
    if dev is not None:
        got_args = [dev(a) if isinstance(a, np.ndarray) else a for a in got_args]
    f = fuse(fn)
    got = f(*got_args)
    for w, g in zip(want_args, got_args):
        assert_matches(g, w, what="argument after the call")
    if want is not None:
        assert_matches(got, want)
    return f


def test_iadd_is_one_kernel_writing_in_place(rng):
    def f(x, y):
        x += y
        return x

    f_ = run_both(f, lambda: [np.arange(64.0), np.ones(64)])
    low = f_.lower(np.arange(64.0), np.ones(64))
    assert len(low.kernels) == 1 and "temporary" not in low.kernels[0].reason


def test_region_write_touches_only_the_region():
    def f(x, v):
        x[2:9:3] = v * 2

    f_ = run_both(f, lambda: [np.arange(12.0), np.array([1.0, 2.0, 3.0])])
    (k,) = f_.lower(np.arange(12.0), np.array([1.0, 2.0, 3.0])).kernels
    assert k.global_size[0] <= 3 or "(3,)" in k.reason  # iterates over the region only


@pytest.mark.parametrize("on_device", [False, True])
def test_overlapping_shift_gets_numpys_result(on_device, dev):
    def f(x):
        x[1:] += x[:-1]

    f_ = run_both(f, lambda: [np.arange(1000, dtype=np.float32)], dev if on_device else None)
    reasons = [k.reason for k in f_.lower(np.arange(1000, dtype=np.float32)).kernels]
    assert len(reasons) == 2 and "temporary" in reasons[1]


def test_reversed_read_of_the_written_array():
    run_both(lambda x: x.__setitem__(Ellipsis, x[::-1] * 2), lambda: [np.arange(33.0)])


def test_out_and_chained_setitems():
    def f(x, y):
        np.multiply(x, 2, out=x)
        x[::2] = 0
        x[1] = -5
        np.add(x, y, out=y)

    run_both(f, lambda: [np.arange(10.0), np.ones(10)])


def test_same_array_passed_twice_sees_the_write(dev):
    def f(x, y):
        x += 1
        return y * 2

    a, b = np.arange(6.0), np.arange(6.0)
    want = f(a, a)
    got = fuse(f)(b, b)
    assert_matches(got, want)
    assert_matches(b, a)
    d = dev(np.arange(6.0))
    got = fuse(f)(d, d)
    assert_matches(got, want)
    assert_matches(d, a)


def test_read_only_and_broadcast_targets():
    x = np.arange(4.0)
    x.flags.writeable = False
    with pytest.raises(ReadOnlyError):
        fuse(lambda a: a.__iadd__(1))(x)
    assert isinstance(ReadOnlyError("x"), ValueError)

    def into_broadcast(a):
        b = np.broadcast_to(a, (3, 4))
        b += 1
    with pytest.raises(ValueError, match="read-only"):
        fuse(into_broadcast)(np.arange(4.0))


def test_same_kind_casting_of_inplace_ops():
    def f(x):
        x += 1.5
    x = np.arange(4, dtype=np.int32)
    with pytest.raises(TypeError, match="same_kind"):
        fuse(f)(x)
    assert_matches(x, np.arange(4, dtype=np.int32))


def test_setitem_casts_unsafely_like_numpy():
    def f(x):
        x[0] = 2.7
        x[1:3] = -1.5
    run_both(f, lambda: [np.arange(5, dtype=np.int32)])


def test_closure_and_global_constants_are_never_stale():
    scale = 2.0

    @fuse
    def f(x):
        return x * scale

    x = np.ones(3, np.float32)
    assert_matches(f(x), x * 2)
    scale = 3.0  # read by f through its closure
    assert_matches(f(x), x * 3)

    table = np.array([1.0, 2.0, 3.0], np.float32)

    @fuse
    def g(x):
        return x + table

    assert_matches(g(x), x + table)
    table[0] = 100.0
    assert_matches(g(x), x + table)


def test_inplace_on_device_array_returns_the_same_array(dev):
    d = dev(np.arange(8.0))

    @fuse
    def f(x):
        x *= 3
        return x

    out = f(d)
    assert out is d
    assert_matches(d, np.arange(8.0) * 3)
    assert isinstance(out, cla.Array)


@pytest.mark.parametrize("write", [
    lambda a, b: a.__isub__(b),                      # a -= b
    lambda a, b: np.subtract(a[1::2], b, out=a[1::2]),
    lambda a, b: np.multiply(b, b, out=a[:2]),
])
def test_a_bad_cast_is_named_before_a_bad_shape(write):
    # NumPy refuses the output cast before it broadcasts: TypeError, not ValueError
    def f(a, b):
        write(a, b)
        return a

    a, b = np.arange(5, dtype=np.int8), np.linspace(0, 1, 3)
    with pytest.raises(TypeError):
        f(a.copy(), b)
    with pytest.raises(TypeError, match="Cannot cast ufunc"):
        fuse(f)(a.copy(), b)


def _set_last(x):
    x[-1] = x[:1] * 2


def _set_row(y):
    y[0] = y[1:] + 1


def _set_one(y):
    y[1, 2] = y[0, :1]


def _set_scalar(y):
    y[1, 2] = y[0, 0]


@pytest.mark.parametrize("write", [_set_last, _set_row, _set_one, _set_scalar])
def test_one_element_takes_only_a_scalar(write):
    # NumPy stores only a scalar into a single element (x[-1] = array([5.]) raises), while a
    # row or x[...] broadcasts a size-1 array
    x = np.arange(6, dtype=np.float32) if write is _set_last else \
        np.arange(6, dtype=np.float32).reshape(2, 3)
    try:
        want = x.copy()
        write(want)
    except ValueError:
        with pytest.raises(ValueError, match="sequence"):
            fuse(write)(x.copy())
        return
    got = x.copy()
    fuse(write)(got)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", [np.bool_, np.float64, np.int32])
@pytest.mark.parametrize("value", [np.float64, np.int16, np.bool_])
def test_one_element_takes_a_one_element_array_only_where_numpy_does(target, value) -> None:
    """x[-1] = array([v]): NumPy stores a one-element array into one element of a bool array
    (its truth value) and raises ValueError for every other dtype; fusejit does the same (the
    fuzzer found the bool case raising)."""
    def fn(x, v):
        y = x.copy()
        y[-1] = v * 3
        return y
    x = np.zeros(4, target)
    v = np.array([5], value)
    try:
        want = fn(x, v)
    except ValueError:
        with pytest.raises(ValueError, match="with a sequence"):
            fuse(fn)(x, v)
        return
    got = fuse(fn)(x, v)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
