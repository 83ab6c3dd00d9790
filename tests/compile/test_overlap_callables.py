"""Issue 30: overlapping written views give NumPy's result through every kind of callable.

``fuse(obj.method)``, ``fuse(obj)`` with ``__call__``, ``fuse(functools.partial(...))`` and
``@fuse`` written on a method take the same route as a plain function (compile/overlap.py's
``as_views``: the same function, ``self`` and captured state, traced with the overlapping
arrays as views of one array), and so does a captured array read fresh (an implicit input)
that overlaps a written argument. What NumPy leaves undefined is still refused, by name.
"""

from __future__ import annotations

import functools

import numpy as np
import pyopencl.array as cla
import pytest

from fusejit import fuse
from fusejit.errors import UnsupportedOperationError

BIG = 5000  # over captured.SMALL_ARRAY: read fresh on every call (an implicit input)


def _step(a, b, alpha):
    a += b * alpha
    return b + 1  # reads what the write left there, as NumPy does


def stepper_class() -> type:
    """A class of its own per test (its @fuse method keeps every signature it is called with)."""
    class Stepper:
        def __init__(self, alpha: float) -> None:
            self.alpha = alpha

        def step(self, a, b):
            return _step(a, b, self.alpha)

        def __call__(self, a, b):
            return _step(a, b, self.alpha)

        @fuse
        def fused_step(self, a, b):
            return _step(a, b, self.alpha)
    return Stepper


# (name, the fused callable for a stepper, the same callable run by NumPy)
CALLABLES = [
    ("bound method", lambda s: fuse(s.step), lambda s: s.step),
    ("callable object", lambda s: fuse(s), lambda s: s),
    ("partial", lambda s: fuse(functools.partial(type(s).step, s)), lambda s: s.step),
    ("partial of a function", lambda s: fuse(functools.partial(_step, alpha=s)),
     lambda s: functools.partial(_step, alpha=s)),
    ("@fuse in a class body", lambda s: s.fused_step, lambda s: s.step),
]

X = np.arange(40, dtype=np.float32)
M = np.arange(36, dtype=np.float32).reshape(6, 6)
VIEWS = [
    ("x[1:], x[:-1]", X, lambda x: (x[1:], x[:-1])),
    ("x[:-1], x[1:]", X, lambda x: (x[:-1], x[1:])),
    ("strided", X, lambda x: (x[3::2], x[1:-2:2])),
    ("rows shifted", M, lambda m: (m[1:], m[:-1])),
]


def _host(a):
    return a.get() if isinstance(a, cla.Array) else np.asarray(a)


@pytest.mark.parametrize("device", [False, True], ids=["numpy", "device"])
@pytest.mark.parametrize("views", VIEWS, ids=[v[0] for v in VIEWS])
@pytest.mark.parametrize("name,make,plain", CALLABLES, ids=[c[0] for c in CALLABLES])
def test_overlapping_views_through_callables(name, make, plain, views, device, queue) -> None:
    _, base, cut = views
    stepper = stepper_class()(2.0)
    partial_alpha = name == "partial of a function"
    if partial_alpha:  # (its state is the partial's argument, a scalar)
        stepper = 2.0
    f = make(stepper)
    for call in range(3):
        if call == 2 and not partial_alpha:
            stepper.alpha = -3.0  # captured state changed: seen, also on this route
        want_base = base.copy()
        want = plain(stepper)(*cut(want_base))
        got_base = cla.to_device(queue, base) if device else base.copy()
        got = f(*cut(got_base))
        np.testing.assert_array_equal(_host(got_base), want_base)
        np.testing.assert_array_equal(_host(got), want)


def _write_then_read_w(a, w):
    a *= 2
    return a + w  # w overlaps a: it reads the doubled values


class Holder:
    def __init__(self, w) -> None:
        self.w = w

    def apply(self, a):
        return _write_then_read_w(a, self.w)

    @fuse
    def fused_apply(self, a):
        return _write_then_read_w(a, self.w)


CAPTURED = [
    ("bound method", lambda w: fuse(Holder(w).apply)),
    ("@fuse in a class body", lambda w: Holder(w).fused_apply),
    ("partial", lambda w: fuse(functools.partial(_write_then_read_w, w=w))),
    ("closure", lambda w: fuse(lambda a: _write_then_read_w(a, w))),
]


@pytest.mark.parametrize("n", [20, BIG], ids=["small (guarded by content)", "big"])
@pytest.mark.parametrize("device", [False, True], ids=["numpy", "device"])
@pytest.mark.parametrize("name,make", CAPTURED, ids=[c[0] for c in CAPTURED])
def test_a_captured_array_overlapping_a_written_argument(name, make, device, n, queue) -> None:
    if device and n < BIG:
        pytest.skip("a small captured array is a NumPy array: it shares no device memory")
    base = np.arange(n + 3, dtype=np.float32)
    want_base = base.copy()
    want = _write_then_read_w(want_base[3:], want_base[:-3])
    got_base = cla.to_device(queue, base) if device else base.copy()
    f = make(got_base[:-3])
    got = f(got_base[3:])
    np.testing.assert_array_equal(_host(got_base), want_base)
    np.testing.assert_array_equal(_host(got), want)
    # the captured array changed in place (the call wrote it through a): read fresh again
    want = _write_then_read_w(want_base[3:], want_base[:-3])
    got = f(got_base[3:])
    np.testing.assert_array_equal(_host(got_base), want_base)
    np.testing.assert_array_equal(_host(got), want)


def test_what_numpy_leaves_undefined_is_refused_for_methods_too() -> None:
    class Acc:
        @fuse
        def f(self, a, b):
            a += b

    x = np.arange(12, dtype=np.float32)
    folded = np.lib.stride_tricks.as_strided(x, shape=(3, 4), strides=(8, 4))
    for f in (Acc().f, fuse(functools.partial(Acc.f._fn, Acc()))):
        with pytest.raises(UnsupportedOperationError, match="argument 0 overlaps itself"):
            f(folded, x[:4])
        with pytest.raises(UnsupportedOperationError, match="float32 and int32"):
            f(x[4:], x.view(np.int32)[:-4])
    np.testing.assert_array_equal(x, np.arange(12, dtype=np.float32))


def test_a_refused_captured_array_is_named() -> None:
    base = np.arange(BIG + 4, dtype=np.float32)
    w = base.view(np.int32)[:-4]

    def g(a):
        a *= 2
        return a + w

    with pytest.raises(UnsupportedOperationError, match="captured array w"):
        fuse(g)(base[4:])


def test_a_fast_path_built_without_overlap_still_sees_it() -> None:
    base = np.arange(23, dtype=np.float32)
    w = base[:-3]  # small: its traces hold it by content
    f = fuse(lambda a: _write_then_read_w(a, w))
    other = np.ones(20, np.float32)
    for _ in range(3):  # the guarded launcher serves these
        f(other.copy())
    want_base = base.copy()
    want = _write_then_read_w(want_base[3:], want_base[:-3])
    got = f(base[3:])  # w unchanged, the argument now overlaps it
    np.testing.assert_array_equal(base, want_base)
    np.testing.assert_array_equal(got, want)
