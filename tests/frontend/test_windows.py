"""``sliding_window_view`` inside @fuse: an index map over its operand (padded, sliced, any axes,
any number of windows), NumPy's errors, and reductions over windows (pooling, depthwise filters,
moving averages) as one kernel that reads each window through the map, on each device."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fusejit import fuse
from fusejit.errors import ReadOnlyError, UnsupportedDTypeError, UnsupportedOperationError
from fusejit.testing import assert_matches

swv = np.lib.stride_tricks.sliding_window_view


def _same(f, *args, ulp: float = 0.0, atol: float = 0.0, kernels: int | None = None) -> None:
    fused = fuse(f)
    got, want = fused(*args), f(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert_matches(g, w, ulp=ulp, atol=atol)
    if kernels is not None:
        assert len(fused.lower(*args).kernels) == kernels


def test_views_are_numpys(rng) -> None:
    """Every form of the view in one function (one kernel, several outputs): axis None, one
    axis, negative and repeated axes, stride slicing, a padded operand, a length-1 window."""
    x = rng.standard_normal((5, 7)).astype(np.float32)

    def views(x):
        return (swv(x, (2, 3)),
                swv(x, 3, axis=-1),
                swv(x, (2, 2), axis=(1, 1)),
                swv(x, (3, 2), axis=(1, 0))[::2, 1::2],
                swv(np.pad(x, 1, mode="reflect"), (3, 3))[::-2, :, 1],
                swv(np.pad(x, ((0, 0), (2, 1)), mode="wrap"), 4, axis=1),
                swv(x, (1, 1)))
    _same(views, x)


def test_windows_of_views_and_expressions(rng) -> None:
    """The operand may itself be a view or a computed value; windows of windows compose."""
    x = rng.standard_normal((4, 9)).astype(np.float64)
    _same(lambda x: swv(swv(np.exp(x.T), 2, axis=0), 3, axis=1)[..., ::2, :].sum(axis=(-2, -1)),
          x, ulp=4)


@pytest.mark.parametrize("call, err", [
    (lambda x: swv(x, (6, 1)), "window shape cannot be larger than input array shape"),
    (lambda x: swv(x, 2), "Since axis is `None`, must provide window_shape for all"),
    (lambda x: swv(x, (2, 2), axis=0), "Must provide matching length window_shape and axis"),
    (lambda x: swv(x, (-1, 2)), "`window_shape` cannot contain negative values"),
])
def test_numpys_value_errors(call, err: str) -> None:
    x = np.zeros((5, 4), np.float32)
    with pytest.raises(ValueError, match=err.replace("(", r"\(")):
        call(x)  # NumPy's own message, so that fusejit's can be held to it
    with pytest.raises(ValueError, match=err.replace("(", r"\(")):
        fuse(call)(x)


@pytest.mark.parametrize("window", [2.5, (2.0, 2), True, (2, np.True_)])
def test_window_extents_must_be_integers(window) -> None:
    """A float or bool window extent is NumPy's TypeError (it used to be truncated)."""
    x = np.zeros((5, 4), np.float32)
    axis = 0 if not isinstance(window, tuple) else None
    with pytest.raises(TypeError) as want:
        swv(x, window, axis=axis)
    with pytest.raises(TypeError, match=re.escape(str(want.value))):
        fuse(lambda x: swv(x, window, axis=axis))(x)


def test_windows_and_strides_from_int_arguments_are_specialised(rng) -> None:
    """A window or stride passed as a Python int is made static (each new value traces and
    builds again); the values are NumPy's."""
    x = rng.standard_normal((7, 4)).astype(np.float32)
    fused = fuse(lambda x, n, s: swv(x, n, axis=0)[::s].max(axis=-1))
    for n, s in ((2, 1), (3, 1), (3, 2)):
        np.testing.assert_array_equal(fused(x, n, s), swv(x, n, axis=0)[::s].max(axis=-1))
    assert fused.cache_info().compiles + fused.cache_info().disk_hits == 3


def test_axis_out_of_range_and_writes() -> None:
    x = np.zeros((5, 4), np.float32)
    with pytest.raises(np.exceptions.AxisError):
        fuse(lambda x: swv(x, 2, axis=2))(x)

    def write(x):
        v = swv(x, 2, axis=0)
        v[0, 0, 0] = 1.0
        return x
    with pytest.raises(ValueError, match="read-only"):
        write(x.copy())
    with pytest.raises(ReadOnlyError, match="read-only"):  # a ValueError, as NumPy's
        fuse(write)(x)
    with pytest.raises(UnsupportedOperationError, match="writeable=True"):
        fuse(lambda x: swv(x, 2, axis=0, writeable=True))(x)


def test_pooling_is_one_kernel(rng, device) -> None:
    """2x2/2 max pooling, 3x3/2 average pooling over a padded image, min and sum: the window
    is read through the map, never stored: one kernel per window space (two here)."""
    x = rng.standard_normal((2, 9, 8, 3)).astype(np.float32)

    def pools(x):
        p = swv(x, (2, 2), axis=(1, 2))[:, ::2, ::2]
        q = swv(np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), mode="edge"), (3, 3),
                axis=(1, 2))[:, ::2, ::2]
        return p.max(axis=(-2, -1)), q.mean(axis=(4, 5)), q.min(axis=(-1, -2)), p.sum(axis=(4, 5))
    _same(pools, x, ulp=2, atol=1e-5, kernels=2)  # (sums: the summation-order bound)


@pytest.mark.parametrize("dtype", [np.float16, np.int32])
def test_depthwise_and_moving_average(rng, device, dtype) -> None:
    """Depthwise 3x3 filtering ``(p * k).sum(axis=...)`` and a 1-D moving average, one kernel
    each; integers exactly."""
    x = (rng.standard_normal((1, 7, 6, 4)) * 4).astype(dtype)
    k = (rng.standard_normal((4, 3, 3)) * 4).astype(dtype)
    ulp, atol = (0, 0) if dtype == np.int32 else (2, 0.1)
    _same(lambda x, k: (swv(x, (3, 3), axis=(1, 2)) * k).sum(axis=(-2, -1)), x, k,
          ulp=ulp, atol=atol, kernels=1)
    s = x.ravel()
    _same(lambda s: swv(s, 5).mean(axis=-1), s, ulp=4, kernels=1)


@pytest.mark.parametrize("dtype", [np.float64, np.int8, np.complex64, np.bool_])
def test_convolve_and_correlate(rng, device, dtype) -> None:
    """np.convolve and np.correlate in the three modes, either operand the longer (NumPy swaps
    them, and centres correlate's 'same' from the other end), NumPy's dtypes: int8 wraps, bool
    is a logical sum, complex conjugates correlate's second operand. (Vulkan writes no single
    int8 elements and has no complex numbers: its named error, before anything runs.)"""
    def vec(n):
        if dtype == np.complex64:
            return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
        return (rng.standard_normal(n) * 40).astype(dtype)

    def both(a, v):
        return tuple(f(a, v, mode) for f in (np.convolve, np.correlate)
                     for mode in ("full", "same", "valid"))
    for na, nv in ((9, 4), (3, 6)):
        a, v = vec(na), vec(nv)
        if device == "vulkan" and dtype in (np.int8, np.complex64):
            with pytest.raises(UnsupportedDTypeError):
                fuse(both)(a, v)
            continue
        _same(both, a, v, ulp=4, atol=1e-5)


def test_convolve_errors() -> None:
    x = np.ones(3, np.float32)
    for call in (lambda a: np.convolve(a, a[:0]), lambda a: np.correlate(a[:0], a),
                 lambda a: np.correlate(a, a, "middle"), lambda a: np.convolve(a, a, "f"),
                 lambda a: np.convolve(a, a, 3), lambda a: np.convolve(a[None], a),
                 lambda a: np.correlate(a[0], a)):
        with pytest.raises(ValueError) as want:
            call(x)
        with pytest.raises(ValueError, match=re.escape(str(want.value))):
            fuse(call)(x)
