"""Shapes and layouts: broadcasting, device-array views, movement functions, 0-d and zero-size
arrays, the NumPy functions and methods fusejit implements, and shape errors worded like NumPy's.
"""

from __future__ import annotations

import re

import numpy as np
import pyopencl.array as cla
import pytest

from fusejit import BroadcastError, fuse
from fusejit.testing import assert_matches


def assert_all_match(got, want, **kw):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_matches(g, w, what=f"result {i}", **kw)




# -- broadcasting ---------------------------------------------------------------------------------


@pytest.mark.parametrize("a_shape, b_shape", [
    ((3, 1, 4), (5, 1)), ((), (4,)), ((1,), (3, 2)), ((2, 1, 1), (1, 3, 1)),
    ((4, 1), (1,)), ((1, 1), (1, 1, 1)), ((7, 1, 5), (7, 3, 1)),
])
def test_broadcasting(a_shape, b_shape, rng):
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.integers(-5, 5, b_shape).astype(np.int16)
    got = fuse(lambda a, b: (a * b + 1, np.maximum(a, b) - b))(a, b)
    assert_all_match(got, (a * b + 1, np.maximum(a, b) - b))


def test_scalars_and_zero_d_operands_broadcast():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    zero_d = np.array(2.5, np.float32)
    got = fuse(lambda x, z, s: (x * z, x + s, z * s, x + np.float32(1), x * np.array(3.0)))(
        x, zero_d, 4.0)
    assert_all_match(got, (x * zero_d, x + 4.0, zero_d * 4.0, x + np.float32(1),
                           x * np.array(3.0)))
    assert np.ndim(got[2]) == 0


# -- views of device arrays -----------------------------------------------------------------------

DEVICE_VIEWS = {
    "step": lambda a: a[::2],
    "transpose_property": lambda a: a.T,
    "cla_transpose": lambda a: cla.transpose(a),
    "offset_subarray": lambda a: a[2:5, 1:],
    "negative_row_step": lambda a: a[::-1],
    "negative_column_step": lambda a: a[:, ::-2],
    "strided_offset_block": lambda a: a[1::2, 3:7],
    "column_with_offset": lambda a: a[:, 3],
}


@pytest.mark.parametrize("shape", [(6, 8), (128, 136)], ids=["scalar_code", "vector_code"])
@pytest.mark.parametrize("view", list(DEVICE_VIEWS))
def test_device_array_views(view, shape, dev, rng):
    """Strides, negative strides and nonzero offsets of pyopencl arrays are read in place, by
    one element per work-item and (from 4096 elements) by 4-lane vector code."""
    host = rng.standard_normal(shape).astype(np.float32)
    make = DEVICE_VIEWS[view]
    f = fuse(lambda v: (v * 2 + 1, np.sqrt(np.abs(v)), np.maximum(v, 0.5), v.reshape(-1) * 1))
    view_dev = make(dev(host))
    want = make(host)
    assert_all_match(f(view_dev), (want * 2 + 1, np.sqrt(np.abs(want)), np.maximum(want, 0.5),
                                   want.reshape(-1)))
    lanes = {k.vec for k in f.lower(view_dev).module.kernels}
    vectorised = want.size >= 4096 and want.shape[-1] % 4 == 0
    assert (min(lanes) > 1) if vectorised else lanes == {1}, lanes


def test_two_views_of_one_device_buffer(dev, rng):
    host = rng.standard_normal(40).astype(np.float32)
    d = dev(host)
    got = fuse(lambda a, b: a - b)(d[1:], d[:-1])
    assert_matches(got, host[1:] - host[:-1])
    got = fuse(lambda a, b: a * b)(d[::-1], d)
    assert_matches(got, host[::-1] * host)


def test_one_d_device_views(dev):
    host = np.arange(20, dtype=np.int32)
    d = dev(host)
    views = (lambda a: a[5:15], lambda a: a[3::4], lambda a: a[15:2:-3], lambda a: a[::-1])
    for make in views:
        assert_matches(fuse(lambda v: v * 3 - 1)(make(d)), make(host) * 3 - 1)


# -- indexing and movement inside the function ----------------------------------------------------


def test_indexing_inside_the_function(rng):
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)

    def index(x):
        return (x[None] + 0, x[..., 0] * 2, x[::-1] - 1, x[1:-1, ::2, -1], x[-1, None, 2:],
                x[:, None, 1] * x[:, :1, None], x[..., ::-2])

    assert_all_match(fuse(index)(x), index(x))


def test_numpy_movement_functions(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)

    def move(x):
        return (np.transpose(x) + 0, np.transpose(x, (1, 2, 0)) * 2, np.swapaxes(x, 0, 2) - 1,
                np.moveaxis(x, 0, -1) + 1, np.moveaxis(x, [0, 1], [2, 0]) + 1,
                np.expand_dims(x, (0, -1)) * 3, np.squeeze(x[None, :, :1]) + 2,
                np.broadcast_to(x[:, :1], (5, 2, 3, 4)) + 0, np.flip(x) * 1, np.flip(x, 1) * 1,
                np.reshape(x, (4, 6)) + 0, np.ravel(x) + 0, x.T + 0)

    assert_all_match(fuse(move)(x), move(x))


def test_reshape_of_contiguous_and_transposed_data(dev, rng):
    host = rng.standard_normal((6, 8)).astype(np.float32)

    def reshape(x):
        return (x.reshape(4, 12) + 0, x.reshape(-1) * 2, x.T.reshape(-1) + 0,
                x.T.reshape(4, 12) * 1, np.ravel(x.T) + 1, x[::2].reshape(2, -1) + 0,
                x.reshape(2, 3, 8).transpose(2, 0, 1).reshape(16, 3) + 0)

    assert_all_match(fuse(reshape)(host), reshape(host))
    assert_all_match(fuse(reshape)(dev(host)), reshape(host))
    # a device array that is itself transposed, then reshaped in the function
    assert_matches(fuse(lambda t: t.reshape(-1) + 0)(dev(host).T), host.T.reshape(-1))


def test_returning_views_materialises_them(dev, rng):
    host = rng.standard_normal((3, 4)).astype(np.float32)
    for fn in (lambda x: x.T, lambda x: x[::-1, 1:], lambda x: x.reshape(2, 6)):
        assert_matches(fuse(fn)(host), fn(host))
        assert_matches(fuse(fn)(dev(host)), fn(host))


# -- 0-d and zero-size arrays ---------------------------------------------------------------------


def test_zero_d_arrays():
    a = np.array(3.5, np.float32)
    b = np.array(-2, np.int64)
    got = fuse(lambda a, b: (a * b, np.sqrt(a), a > b, -b, a[()] + 1, a[None] * 2))(a, b)
    want = (a * b, np.sqrt(a), a > b, -b, a[()] + 1, a[None] * 2)
    assert_all_match(got, want)
    assert [np.ndim(g) for g in got] == [0, 0, 0, 0, 0, 1]


@pytest.mark.parametrize("a_shape, b_shape", [((0,), (0,)), ((0, 3), (3,)), ((3, 0), (1, 0)),
                                              ((0, 1), (4,)), ((2, 0, 5), ())])
def test_zero_size_arrays_give_empty_results_without_launching(a_shape, b_shape, launches):
    a = np.zeros(a_shape, np.float32)
    b = np.ones(b_shape, np.int8)
    f = fuse(lambda a, b: (a * b + 1, (a > b).astype(np.float64), np.sqrt(a)))
    assert_all_match(f(a, b), (a * b + 1, (a > b).astype(np.float64), np.sqrt(a)))
    assert not launches


def test_zero_size_device_arrays(dev, launches):
    f = fuse(lambda x: x * 2 - 1)
    out = f(dev(np.zeros((0, 4), np.float32)))
    assert isinstance(out, cla.Array) and out.shape == (0, 4) and out.dtype == np.float32
    assert not launches
    f(dev(np.zeros((1, 4), np.float32)))
    assert len(launches) == 1  # the counter does see launches


# -- NumPy functions and array methods ------------------------------------------------------------

SPECIALS = np.array([-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.49, 2.5, 3.7, np.nan, np.inf, -np.inf,
                     1e30, -7.25], np.float32)


def test_where_and_clip_functions():
    x = SPECIALS
    i = np.arange(-4, 5, dtype=np.int16)

    def selects(x, i):
        return (np.where(x > 0, x, 0), np.where(i % 2 == 0, i, -i), np.where(x > 0, 1.5, i[0]),
                np.clip(x, -1, 1), np.clip(x, None, 0.5), np.clip(x, -0.5, None),
                np.clip(x, min=0.0), np.clip(i, -2, 3), np.clip(i, None, 1.5))

    assert_all_match(fuse(selects)(x, i), selects(x, i))


def test_rounding_and_special_value_functions():
    x = SPECIALS

    def special(x):
        return (np.round(x), np.round(x, 1), np.around(x, -1), np.fix(x), np.nan_to_num(x),
                np.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0), np.isposinf(x),
                np.isneginf(x), np.isfinite(x))

    with np.errstate(all="ignore"):
        want = special(x)
    assert_all_match(fuse(special)(x), want)
    ints = np.array([-3, 0, 7], np.int32)
    assert_all_match(fuse(lambda i: (np.fix(i), np.nan_to_num(i), np.isposinf(i)))(ints),
                     (np.fix(ints), np.nan_to_num(ints), np.isposinf(ints)))


def test_like_functions():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    i = np.arange(3, dtype=np.int8)

    def likes(x, i):
        return (np.zeros_like(x), np.ones_like(x), np.full_like(x, 7.5),
                np.zeros_like(x, dtype=np.int8), np.full_like(x, 3, dtype=np.int16),
                np.ones_like(x, shape=(4,)), np.full_like(i, 7.9), np.full_like(i, -2),
                np.ones_like(i, dtype=bool))

    assert_all_match(fuse(likes)(x, i), likes(x, i))
    # empty_like's values are unspecified (NumPy's may hold NaN: `* 0` is no oracle)
    empty = fuse(lambda x: np.empty_like(x, dtype=np.float64))(x)
    assert empty.shape == x.shape and empty.dtype == np.float64
    with pytest.raises(OverflowError):
        fuse(lambda i: np.full_like(i, 300))(i)  # NumPy 2 refuses too


def test_array_methods():
    x = SPECIALS.reshape(2, 7)

    def methods(x):
        return (x.astype(np.int64, casting="unsafe") * 0 + 1, x.astype(np.float16),
                x.astype(bool), x.clip(-1, 1), x.clip(max=0.0), x.T, x.reshape(7, 2),
                x.reshape((14,)), x.round(), x.round(2))

    with np.errstate(all="ignore"):
        want = methods(x)
    assert_all_match(fuse(methods)(x), want)


def test_astype_refuses_a_cast_its_casting_rule_forbids():
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="Cannot cast array data"):
        x.astype(np.int32, casting="safe")
    with pytest.raises(TypeError, match="Cannot cast array data"):
        fuse(lambda x: x.astype(np.int32, casting="safe"))(x)


# -- shape errors, worded like NumPy --------------------------------------------------------------


def assert_same_error(fn, *args):
    """fusejit raises NumPy's exception class (or a subclass) with NumPy's message."""
    with pytest.raises(Exception) as numpy_error:
        fn(*args)
    with pytest.raises(type(numpy_error.value), match=re.escape(str(numpy_error.value))):
        fuse(fn)(*args)


@pytest.mark.parametrize("a_shape, b_shape", [((3,), (4,)), ((2, 3), (3, 2)), ((2, 1, 3), (4,))])
def test_non_broadcastable_shapes_raise_numpy_value_error(a_shape, b_shape):
    a, b = np.ones(a_shape, np.float32), np.ones(b_shape, np.float32)
    assert_same_error(lambda a, b: a + b, a, b)
    with pytest.raises(BroadcastError):  # fusejit's class, a ValueError
        fuse(lambda a, b: a * b)(a, b)


@pytest.mark.parametrize("fn", [
    lambda x: np.broadcast_to(x, (3, 8)),
    lambda x: np.broadcast_to(x, (8,)),
    lambda x: x.reshape(5, 5),
    lambda x: x.reshape(5, -1),
    lambda x: x.reshape(-1, -1),
    lambda x: np.squeeze(x, 0),
    lambda x: np.transpose(x, (0, 0)),
    lambda x: np.transpose(x, (1, 0, 2)),
], ids=["broadcast_to", "broadcast_to_fewer_dims", "reshape", "reshape_newaxis",
        "reshape_two_unknowns", "squeeze_non_one", "transpose_repeated_axis",
        "transpose_too_many_axes"])
def test_shape_function_errors_are_numpy_value_errors(fn):
    assert_same_error(fn, np.ones((6, 8), np.float32))


@pytest.mark.parametrize("fn", [lambda x: x[10], lambda x: x[:, -9], lambda x: x[1, 2, 3],
                                lambda x: x[..., 1, ...]],
                         ids=["row", "negative_column", "too_many", "two_ellipses"])
def test_bad_indices_raise_numpy_index_error(fn):
    assert_same_error(fn, np.ones((6, 8), np.float32))


@pytest.mark.parametrize("fn", [
    lambda x: np.sum(x, axis=2), lambda x: np.expand_dims(x, 5), lambda x: np.squeeze(x, 3),
    lambda x: np.moveaxis(x, 3, 0), lambda x: np.moveaxis(x, 0, -3), lambda x: np.swapaxes(x, 0, 3),
    lambda x: np.flip(x, -3), lambda x: x.max(axis=-3),
], ids=["sum", "expand_dims", "squeeze", "moveaxis_source", "moveaxis_destination", "swapaxes",
        "flip", "max"])
def test_bad_axes_raise_axis_error(fn):
    assert_same_error(fn, np.ones((6, 8), np.float32))
    with pytest.raises(np.exceptions.AxisError):
        fuse(fn)(np.ones((6, 8), np.float32))
