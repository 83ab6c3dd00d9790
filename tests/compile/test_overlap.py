"""Issue 30, part 4: arguments that are overlapping views of one buffer, one of them written,
give NumPy's result (run as views of one array: fusejit/compile/overlap.py); only what NumPy
leaves undefined, or what cannot be a view of one array, is refused, saying which."""

from __future__ import annotations

import numpy as np
import pyopencl.array as cla
import pytest

from fusejit import fuse
from fusejit.errors import UnsupportedOperationError


def add_into(a, b):
    a += b
    return a


def scaled_copy(a, b):
    a[...] = b * 2


def write_then_read(a, b):
    a *= 2
    return b + 1  # reads what the write left there, as NumPy does


def three(a, b, c):
    a += b * c


def with_others(a, w, b, s):
    np.add(b, w * s, out=a)
    return a.sum()


def by_keyword(a, *, b):
    a -= b


X = np.arange(20, dtype=np.float32)
M = np.arange(36, dtype=np.float32).reshape(6, 6)

# (name, function, base array, views of it -> the call's arguments and keywords)
PATTERNS = [
    ("x[1:] += x[:-1]", add_into, X, lambda x: ((x[1:], x[:-1]), {})),
    ("x[:-1] += x[1:]", add_into, X, lambda x: ((x[:-1], x[1:]), {})),
    ("interleaved x[::2], x[1::2]", scaled_copy, X, lambda x: ((x[::2], x[1::2]), {})),
    ("reversed", add_into, X, lambda x: ((x, x[::-1]), {})),
    ("strided shift", add_into, X, lambda x: ((x[3::2], x[1:-2:2]), {})),
    ("rows shifted", add_into, M, lambda m: ((m[1:], m[:-1]), {})),
    ("transposed", add_into, M, lambda m: ((m, m.T), {})),
    ("a column and a row", add_into, M, lambda m: ((m[:, 2], m[1]), {})),
    ("write, then read", write_then_read, X, lambda x: ((x[2:12], x[5:15]), {})),
    ("three views", three, X, lambda x: ((x[2:], x[1:-1], x[:-2]), {})),
    ("with other arguments", with_others, X,
     lambda x: ((x[4:], np.ones(16, np.float32), x[:-4], 3.0), {})),
    ("by keyword", by_keyword, X, lambda x: ((x[:-3],), {"b": x[3:]})),
]


def _on(queue, device, base):
    return cla.to_device(queue, base) if device else base.copy()


@pytest.mark.parametrize("device", [False, True], ids=["numpy", "device"])
@pytest.mark.parametrize("name,fn,base,views", PATTERNS, ids=[p[0] for p in PATTERNS])
def test_overlapping_written_views_give_numpys_result(name, fn, base, views, device,
                                                      queue) -> None:
    want_base = base.copy()
    args, kwargs = views(want_base)
    want = fn(*args, **kwargs)
    f = fuse(fn)
    for _ in range(2):  # the second call takes the same route without a failed trace
        got_base = _on(queue, device, base)
        args, kwargs = views(got_base)
        got = f(*args, **kwargs)
        host = got_base.get() if device else got_base
        np.testing.assert_array_equal(host, want_base)
        if want is not None:
            got = got.get() if isinstance(got, cla.Array) else np.asarray(got)
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_read_only_views_stay_read_only() -> None:
    x = np.arange(10.0)
    b = x[:-1]
    b.flags.writeable = False
    fuse(add_into)(x[1:], b)  # writes a, reads b: fine
    want = np.arange(10.0)
    want[1:] += want[:-1].copy()
    np.testing.assert_array_equal(x, want)
    y = np.arange(10.0)
    r = y[1:]
    r.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fuse(add_into)(r, y[:-1])
    np.testing.assert_array_equal(y, np.arange(10.0))


def test_what_cannot_be_one_array_is_refused_saying_why() -> None:
    x = np.arange(12, dtype=np.float32)
    with pytest.raises(UnsupportedOperationError, match="float32 and int32"):
        fuse(add_into)(x[4:], x.view(np.int32)[:-4])
    folded = np.lib.stride_tricks.as_strided(x, shape=(3, 4), strides=(8, 4))
    with pytest.raises(UnsupportedOperationError, match="overlaps itself.*undefined"):
        fuse(add_into)(folded, x[:4])
    raw = np.zeros(40, np.uint8)
    with pytest.raises(UnsupportedOperationError, match="not aligned"):
        fuse(add_into)(raw[:32].view(np.float32), raw[2:34].view(np.float32))
    np.testing.assert_array_equal(x, np.arange(12, dtype=np.float32))


def test_the_overlapped_signatures_are_bounded_and_cleared() -> None:
    """What a function remembers of calls traced as views of one buffer is bounded like its
    signature cache (a key holds its guard values alive) and forgotten by cache_clear; calls
    past the bound still give NumPy's result."""
    f = fuse(add_into, cache_size=2)
    for n in (10, 11, 12, 13, 10):
        base = np.arange(n + 1, dtype=np.float32)
        want = base.copy()
        want[1:] += want[:-1].copy()
        f(base[1:], base[:-1])
        np.testing.assert_array_equal(base, want)
        assert len(f._overlapped) <= 2
    f.cache_clear()
    assert len(f._overlapped) == 0
