"""Gathers with static output shapes (issue 17 §4): ``x[idx]``, ``np.take``,
``np.take_along_axis``, with host-known and traced indices. NumPy's values, dtypes and shapes;
one kernel with the surrounding work; IndexError before launching for a host-known index out of
bounds; a traced one follows np.take's mode, never reads out of bounds, and under mode='raise'
(x[i], take_along_axis) makes the call raise IndexError (the kernel's status flag)."""

from __future__ import annotations

import numpy as np
import pytest

from fusejit import UnsupportedOperationError, fuse
from fusejit.errors import DeviceIndexError
from fusejit.testing import assert_matches

X = np.arange(20, dtype=np.float32).reshape(4, 5) * 0.5 - 3
X3 = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
IDX = np.array([1, 3, 0, -2])

CASES = {
    "traced_rows": (lambda x, i: x[i] * 2, (X, IDX)),
    "traced_cols": (lambda x, i: x[:, i[:3]] + 1, (X, IDX)),
    "traced_pairs": (lambda x, i: x[i % 4, (i + 2) % 5], (X, IDX)),
    "traced_2d_index": (lambda x, i: x[i.reshape(2, 2)], (X, IDX)),
    "traced_scalar_index": (lambda x, i: x[i[0]], (X, IDX)),
    "newaxis_and_ellipsis": (lambda x, i: x[1:, None, i[:2], ...], (X, IDX)),
    "non_adjacent": (lambda x, i: x[i[:3] % 3, :, i[1:]], (X3, IDX)),
    "int_and_array_non_adjacent": (lambda x, i: x[1, :, i], (X3, IDX)),
    "int_and_array_adjacent": (lambda x, i: x[:, i[0], i[1:3]], (X3, IDX)),
    "static_list": (lambda x: x[[0, 2, 2, -1]], (X,)),
    "static_pairs": (lambda x: x[[0, 2], [1, -3]], (X,)),
    "static_array_cols": (lambda x: x[:, np.array([[4, 0], [1, 1]])], (X,)),
    "take_flat": (lambda x, i: np.take(x, i + 7), (X, IDX)),
    "take_axis": (lambda x, i: np.take(x, i, axis=1), (X, IDX)),
    "take_wrap": (lambda x, i: np.take(x, i * 7 - 3, mode="wrap"), (X, IDX)),
    "take_clip": (lambda x, i: np.take(x, i * 3, axis=1, mode="clip"), (X, IDX)),
    "take_static_wrap": (lambda x: np.take(x, [-30, 7, 44], axis=1, mode="wrap"), (X,)),
    "take_static_clip": (lambda x: x.take([-3, 2, 9], axis=0, mode="clip"), (X,)),
    "take_scalar": (lambda x, i: np.take(x, i[1], axis=1), (X, IDX)),
    "take_along_axis": (lambda x, i: np.take_along_axis(x, i[:, None] % 5, axis=1), (X, IDX)),
    "take_along_axis_0": (lambda x, i: np.take_along_axis(x, (i[:2, None] + np.arange(5)) % 4,
                                                          axis=0),
                          (X, IDX)),
    "take_along_axis_static": (lambda x: np.take_along_axis(x, np.array([[0], [4], [2], [1]]),
                                                            1), (X,)),
    "take_along_axis_none": (lambda x, i: np.take_along_axis(x, i + 5, axis=None), (X, IDX)),
    "empty_list": (lambda x: x[[]], (X,)),
    "take_empty": (lambda x: np.take(x, [], axis=1), (X,)),
    "zero_d_index": (lambda x: np.take(x, np.array(2)) + x[np.array(1)], (X,)),
    "argmax_gather": (lambda x, i: np.take_along_axis(x, x.argmax(1)[:, None], 1), (X, IDX)),
    "gather_of_reduction": (lambda x, i: x.sum(1)[i] - x[i, 0], (X, IDX)),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_numpy(name):
    fn, args = CASES[name]
    assert_matches(fuse(fn)(*args), fn(*args), what=name)


def test_validate_mode_checks_gathers():
    fn = CASES["take_along_axis"][0]
    assert_matches(fuse(fn, validate=True)(X, IDX), fn(X, IDX))


def cross_entropy(logits, labels):
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -np.take_along_axis(logp, labels[:, None], axis=1)[:, 0]


def test_cross_entropy_with_integer_labels_is_one_kernel(rng):
    logits = rng.standard_normal((64, 10)).astype(np.float32)
    labels = rng.integers(0, 10, 64)
    f = fuse(cross_entropy)
    assert_matches(f(logits, labels), cross_entropy(logits, labels), ulp=16, atol=1e-6)
    assert len(f.lower(logits, labels).kernels) == 1


def test_gather_fuses_with_elementwise_work():
    def fn(x, i):
        return np.exp(x[i])[:, :4] + np.take(x, i, axis=1).T

    f = fuse(fn)
    low = f.lower(X, IDX)
    assert len(low.kernels) == 1 and not low.plan.temps
    assert_matches(f(X, IDX), fn(X, IDX), ulp=8)


OUT_OF_BOUNDS = {  # a traced (device) index outside the axis: NumPy's IndexError
    "x[i] past the end": (lambda x, i: x[i], (X[:, 0], np.array([0, 7, 100]))),
    "x[i] before -n": (lambda x, i: x[i] * 2, (X[:, 0], np.array([-5, 1]))),
    "x[i] far": (lambda x, i: x[i], (X[:, 0], np.array([0, 10**12, -10**12]))),
    "two index arrays": (lambda x, i: x[i, i], (X, np.array([0, 4]))),
    "int8 index": (lambda x, i: x[i], (X[0], np.array([-6], np.int8))),
    "uint8 index": (lambda x, i: np.take(x, i), (X, np.array([3, 200], np.uint8))),
    "take axis": (lambda x, i: np.take(x, i, axis=1) + 1, (X, np.array([5]))),
    "take_along_axis label = classes": (
        lambda x, i: np.take_along_axis(x, i[:, None], 1), (X, np.array([0, 4, 1, 5]))),
    "computed index": (lambda x, i: x[i + 3], (X[:, 0], np.array([0, 1]))),
    "gather inside a reduction": (lambda x, i: x[i].sum(1), (X, np.array([3, 4]))),
    "one-element axis": (lambda x, i: x[:1][i], (X, np.array([0, 1]))),
}


@pytest.mark.parametrize("name", OUT_OF_BOUNDS)
def test_traced_index_out_of_bounds_raises_index_error(name):
    """The kernel flags an index NumPy would refuse and the call raises IndexError (never a
    clamped element); the next call of the same signature is unaffected."""
    fn, args = OUT_OF_BOUNDS[name]
    with pytest.raises(IndexError):
        fn(*args)
    f = fuse(fn)
    with pytest.raises(DeviceIndexError, match="out of bounds for axis with size"):
        f(*args)
    good = tuple(np.zeros_like(a) if a.dtype.kind in "iu" else a for a in args)
    assert_matches(f(*good), fn(*good))


def test_traced_index_out_of_bounds_on_device_arrays(queue, monkeypatch):
    """Device-resident indices and results: the call raises too (it waits for its kernels to
    read the flag), also from the generated fast paths of later calls, which read the flag
    themselves (no fallback to ``Executable.run``); the flag is clear again afterwards."""
    import pyopencl.array as cla

    from fusejit.runtime.opencl.executable import Executable

    runs = []
    run = Executable.run
    monkeypatch.setattr(Executable, "run", lambda self, *a: runs.append(1) or run(self, *a))
    x = cla.to_device(queue, X)
    f = fuse(lambda x, i: x[i] + 1)
    ok = cla.to_device(queue, np.array([1, -1]))
    for _ in range(3):  # (the first call, then the cached and guarded paths)
        assert_matches(f(x, ok).get(), X[[1, -1]] + 1)
    assert len(runs) == 1  # (only a process's first call of a signature takes run)
    for bad in ([1, 4], [-5, 0], [2, 1 << 40]):
        with pytest.raises(DeviceIndexError, match="size 4"):
            f(x, cla.to_device(queue, np.array(bad)))
        assert_matches(f(x, ok).get(), X[[1, -1]] + 1)
    assert len(runs) == 1
    # a bad index computed on the device from another call's device result
    g, step = fuse(lambda x, i: x[i * 2]), fuse(lambda i: i + 1)
    zero = cla.to_device(queue, np.array([0, 0]))
    for _ in range(3):
        assert_matches(g(x, step(zero)).get(), X[[2, 2]])
    with pytest.raises(DeviceIndexError):
        g(x, step(ok))  # (x[[4, 0]])


def test_in_place_write_through_a_bad_index_leaves_numpy_arguments_alone():
    def f(x, i):
        x += x[i]

    x = np.arange(6.0)
    with pytest.raises(IndexError):
        fuse(f)(x, np.array([0, 1, 2, 3, 4, 6]))
    assert_matches(x, np.arange(6.0))


def test_clip_and_wrap_modes_do_not_raise():
    far = np.array([0, 4, 10**9, -10**9, -1])
    for mode in ("clip", "wrap"):
        got = fuse(lambda x, i, mode=mode: np.take(x, i, mode=mode))(X[:, 0], far)
        assert_matches(got, np.take(X[:, 0], far, mode=mode))
    assert_matches(fuse(lambda x, i: np.take(x, i, mode="clip"))(X, far.astype(np.uint8)),
                   np.take(X, far.astype(np.uint8), mode="clip"))


def test_checked_gather_source_on_every_target():
    """The check is the target's spelling of a comparison and a store into the status
    buffer, in the kernel that gathers; clip and in-range constructions have none."""
    from fusejit.targets.glsl.target import GLSLTarget
    from fusejit.targets.opencl.target import OpenCLTarget

    for target in (OpenCLTarget(), GLSLTarget(frozenset({"fj-wgsl-int64"}))):
        cond = target.index_outside("v", np.dtype(np.int64), 5)
        assert "v" in cond and "4" in cond and "||" in cond
        assert "||" not in target.index_outside("v", np.dtype(np.uint8), 5)
    checked = fuse(lambda x, i: x[i]).lower(X[:, 0], IDX)
    assert len(checked.kernels) == 1 and "fj_status0" in checked.source
    clipped = fuse(lambda x, i: np.take(x, i, mode="clip")).lower(X[:, 0], IDX)
    assert "fj_status" not in clipped.source
    sorted_ = fuse(lambda a, v: np.searchsorted(a, v)).lower(np.sort(X[0]), X[1])
    assert "fj_status" not in sorted_.source


def test_device_array_views_with_offsets(queue):
    import pyopencl.array as cla

    from fusejit.testing import to_host

    x = cla.to_device(queue, np.arange(40.0).reshape(5, 8))[1:, 2:]
    i = cla.to_device(queue, np.array([3, 0, 2, 1]))
    got = fuse(lambda x, i: x[i] + np.pad(x, 1, mode="wrap")[1:-1, 1:-1])(x, i)
    host = to_host(x)
    assert_matches(got, host[i.get()] + np.pad(host, 1, mode="wrap")[1:-1, 1:-1])


def test_narrow_traced_indices_into_a_long_axis():
    x = np.arange(300, dtype=np.float32)
    i = np.array([-100, 5, 127, -1], np.int8)
    for mode in ("raise", "wrap", "clip"):
        assert_matches(fuse(lambda x, i: np.take(x, i, mode=mode))(x, i), np.take(x, i, mode=mode))
    assert_matches(fuse(lambda x, i: x[i])(x, i), x[i])


def test_in_place_write_of_a_gather_is_staged():
    def f(x, i):
        x[...] = x[i]

    want, got = np.arange(6.0), np.arange(6.0)
    i = np.array([5, 4, 3, 2, 1, 0])
    f(want, i)
    fuse(f)(got, i)
    assert_matches(got, want)


@pytest.mark.parametrize("fn, error", [
    (lambda x, i: x[[0, 4]], IndexError),
    (lambda x, i: x[:, [-6]], IndexError),
    (lambda x, i: np.take(x, [20]), IndexError),
    (lambda x, i: np.take(x, [1], axis=2), np.exceptions.AxisError),
    (lambda x, i: np.take(x, [1], mode="bogus"), ValueError),
    (lambda x, i: np.take_along_axis(x, np.array([[5]]), 1), IndexError),
    (lambda x, i: np.take_along_axis(x, i, 1), ValueError),
    (lambda x, i: np.take_along_axis(x, i[:, None], None), ValueError),
    (lambda x, i: x[i.astype(np.float32)], IndexError),
    (lambda x, i: x[np.array([0.5])], IndexError),
    (lambda x, i: x[i, i, i], IndexError),
    (lambda x, i: x[:0][i], IndexError),  # a traced index into an empty axis
    (lambda x, i: x[:, :0][:, i], IndexError),
])
def test_bad_input_raises_numpys_error(fn, error, launches):
    with pytest.raises(error):
        fn(X, IDX)
    with pytest.raises(error):
        fuse(fn)(X, IDX)
    assert not launches


@pytest.mark.parametrize("fn", [
    lambda x, i: x[x > 0],
    lambda x, i: x[:, np.array([True, False, True, False, True])],
    lambda x, i: x[[True, False, True, True]],
])
def test_boolean_masks_are_refused(fn):
    with pytest.raises(UnsupportedOperationError, match="data-dependent shape.*np.where"):
        fuse(fn)(X, IDX)


def test_out_argument():
    def f(x, i, out):
        np.take(x, i, axis=0, out=out)

    got = np.zeros((4, 5), np.float32)
    fuse(f)(X, IDX, got)
    assert_matches(got, np.take(X, IDX, axis=0))
    # (an array the function makes itself is a value only for in-place operators: local.py)
    with pytest.raises(UnsupportedOperationError, match="out="):
        fuse(lambda x, i: np.take(x, i, out=np.zeros(4, np.float32)))(X, IDX)
    with pytest.raises(UnsupportedOperationError, match="out="):
        fuse(lambda x, i: np.concatenate([x, x], out=np.zeros((8, 5), np.float32)))(X, IDX)


@pytest.mark.parametrize("dtype", [np.float16, np.bool_, np.uint8, np.int64])
def test_dtypes(dtype):
    """Gathers and index maps over storage types with their own loads (half, uchar bools)."""
    def fn(x, i):
        return (x[i], np.take_along_axis(x, (i[:, None] + 8) % 8, 1),
                np.pad(x, 2, mode="symmetric"), np.concatenate([x, x[:1]]), np.roll(x, 3, 1),
                np.diff(x, axis=0), np.nanmax(x, 1), np.searchsorted(np.arange(3).astype(dtype), x))

    x = (np.arange(40).reshape(5, 8) % 3).astype(dtype)
    i = np.array([4, 0, -1, 2, 1])
    for got, want in zip(fuse(fn)(x, i), fn(x, i)):
        assert_matches(got, want)


def _scatter_traced(x, i):
    x[i] = 1.0


def _scatter_pair(x, i):
    x[i, 0] = 1.0


def _scatter_list(x, i):
    x[[0, 2]] = 1.0


@pytest.mark.parametrize("fn", [_scatter_traced, _scatter_pair, _scatter_list])
def test_scatters_are_refused_as_scatters(fn):
    """x[idx] = v is refused by name as a scatter (reads through idx, gathers, are fused)."""
    with pytest.raises(UnsupportedOperationError, match="is a scatter") as info:
        fuse(fn)(X.copy(), np.array([0, 2]))
    assert "gather/scatter" not in str(info.value)
