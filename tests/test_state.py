"""Issue 9, classes 4-7 and 9: values that must never be served stale or wrong.

Every test compares with NumPy running the same function: NumPy scalars under augmented
assignment (4), static arguments keyed by bits (5), byte order (6), captured state read by the
function from outside its arguments (7), and smaller divergences (9; most of those are rows of
tests/test_bad_inputs.py).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pyopencl.array as cla
import pytest

from fusejit import fuse
from fusejit.testing import to_host


def same(got, want) -> None:
    """Dtype, shape and bits (-0.0 is not 0.0, NaN matches NaN), leaf by leaf."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            same(g, w)
        return
    g, w = np.asarray(to_host(got)), np.asarray(want)
    assert (g.dtype, g.shape) == (w.dtype, w.shape), (g, w)
    if w.dtype.kind == "f":
        ok = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
    else:
        ok = g == w
    assert np.all(ok), (g, w)


# -- 5: static arguments keyed by their bits --------------------------------------------------------


def _div(x, s):
    return x / (s if not isinstance(s, (tuple, list, dict)) else
                (s["v"] if isinstance(s, dict) else s[0]))


STATIC_VALUES = [0.0, -0.0, math.nan, -math.nan, np.float32(0.0), np.float32(-0.0),
                 np.float64(-0.0), np.float16(-0.0), (0.0,), (-0.0,), [0.0], [-0.0],
                 ((-0.0,),), {"v": 0.0}, {"v": -0.0}]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_static_floats_keyed_by_bits(dtype) -> None:
    """-0.0 and 0.0 (alone, as NumPy scalars, inside tuples, lists, dicts) compile separately;
    NaN hits the cache."""
    f = fuse(_div, static_argnums=1)
    x = np.array([1, -2, 0], dtype)
    with np.errstate(all="ignore"):
        for s in STATIC_VALUES:
            for _ in range(2):
                same(f(x, s), _div(x, s))
    assert f.trace_count == len(STATIC_VALUES)


def test_static_nan_is_one_cache_entry() -> None:
    f = fuse(lambda x, s: x + s, static_argnums=1)
    x = np.ones(3, np.float32)
    for s in (math.nan, float("nan"), np.float32(np.nan), np.float32(np.nan)):
        same(f(x, s), x + s)
    assert f.trace_count == 2  # one Python float NaN, one float32 NaN
