"""Issue 30, small gaps: NumPy arrays a fused function makes itself and writes in place are its
values (frontend/numpy/local.py); ufuncs NumPy has no loop for raise NumPy's error; the
refusal of ``ufunc.at`` says it is a scatter and what to write instead."""

from __future__ import annotations

import numpy as np
import pyopencl.array as cla
import pytest

from fusejit import fuse
from fusejit.errors import UnsupportedOperationError
from fusejit.testing import assert_matches as same

X = np.linspace(-2, 3, 12).astype(np.float32)


def counts(x):
    count = np.zeros(x.shape, np.int64)
    count += x > 0
    count += x > 1
    return count


def operators(x):
    acc = np.ones((3, 4), np.float32)
    for k in range(3):
        acc += x.reshape(3, 4) * k
    acc *= 0.5
    acc -= 1
    acc **= 2
    acc /= 3
    return acc


def held_in_a_list(x):
    acc = np.zeros(x.shape, np.float32)
    kept = [acc]  # the array itself, returned: its traced value comes back
    acc += x
    acc *= x
    return kept[0]


def in_a_dict(x):
    sums = {"pos": np.zeros(x.shape, np.float32), "neg": np.zeros(x.shape, np.float32)}
    sums["pos"] += np.maximum(x, 0)
    sums["neg"] -= np.minimum(x, 0)
    return sums["pos"] - sums["neg"]


def zero_d(x):
    hits = np.zeros((), np.int64)
    for t in (0.0, 1.0, 2.0):
        hits += (x > t).sum()
    return hits


def integers(x):
    bits = np.zeros(x.shape, np.uint8)
    bits |= (x > 0).astype(np.uint8)
    bits <<= 2
    bits ^= 1
    return bits


PATTERNS = [counts, operators, held_in_a_list, in_a_dict, zero_d, integers]


@pytest.mark.parametrize("device", [False, True], ids=["numpy", "device"])
@pytest.mark.parametrize("fn", PATTERNS, ids=[f.__name__ for f in PATTERNS])
def test_arrays_made_inside_are_written_in_place(fn, device, queue) -> None:
    f = fuse(fn)
    arg = cla.to_device(queue, X) if device else X.copy()
    for _ in range(2):
        same(f(arg), fn(X.copy()))


BUFFER = np.zeros(12, np.float32)


class Holder:
    def __init__(self) -> None:
        self.acc = np.zeros(12, np.float32)

    def add(self, x):
        self.acc += x
        return self.acc

    def add_out(self, x):
        np.add(self.acc, x, out=self.acc)
        return x


def into_global(x):
    np.add(BUFFER, x, out=BUFFER)
    return x


def into_view(x):
    c = np.zeros(12, np.float32)
    c[1:] += x[1:]
    return c


def into_new_attribute(x):
    holder = Holder()
    holder.acc = np.zeros(12, np.float32)
    holder.acc += x
    return holder.acc


def test_state_from_outside_and_views_stay_refused() -> None:
    for fn in (into_global, Holder().add, Holder().add_out):
        with pytest.raises(UnsupportedOperationError, match="reached from outside the function"):
            fuse(fn)(X.copy())
    with pytest.raises(UnsupportedOperationError, match="a view of a NumPy array is neither"):
        fuse(into_view)(X.copy())
    assert not BUFFER.any()
    # an object the function makes itself holds values of the function too
    same(fuse(into_new_attribute)(X.copy()), into_new_attribute(X.copy()))


def behind_the_trace(x):
    c = np.zeros(12, np.float32)
    d = c
    c += x  # d is the array c was: it now stands for the traced value
    d[0] = 5.0  # a NumPy write the trace would not see: refused loudly, not lost
    return c


def by_out(x):
    c = np.zeros(12, np.float32)
    np.add(c, x, out=c)  # c keeps its name: NumPy's later reads of it would not see this
    return c * 2


def by_reduction_out(x):
    total = np.zeros((), np.float32)
    np.sum(x, out=total)
    return total


def test_writes_the_trace_would_not_see_are_refused() -> None:
    with pytest.raises(ValueError, match="read-only"):
        fuse(behind_the_trace)(X.copy())
    for fn in (by_out, by_reduction_out):
        with pytest.raises(UnsupportedOperationError, match=r"in-place operator \(c \+= v\)"):
            fuse(fn)(X.copy())


@pytest.mark.parametrize("name,fn,arg", [
    ("isnat of floats", np.isnat, X),
    ("isnat of ints", np.isnat, np.arange(4)),
    ("isnat of a traced scalar", lambda x: np.isnat(x.sum()), X),
    ("bitwise_count of floats", np.bitwise_count, X),
])
def test_ufuncs_numpy_has_no_loop_for_raise_numpys_error(name, fn, arg) -> None:
    with pytest.raises(Exception) as want:
        fn(arg)
    with pytest.raises(type(want.value)) as got:
        fuse(fn)(arg)
    assert str(got.value) == str(want.value)


def test_ufunc_at_is_refused_as_a_scatter_saying_what_to_write() -> None:
    idx = np.array([0, 2, 2, 5])
    v = np.array([1, 2, 3, 4], np.float32)
    for ufunc in (np.add, np.multiply, np.maximum):
        with pytest.raises(UnsupportedOperationError,
                           match=rf"np\.{ufunc.__name__}\.at is a scatter: an unbuffered "
                                 "in-place write.*outside the fused function"):
            fuse(lambda x, i, v, u=ufunc: u.at(x, i, v))(X.copy(), idx, v)
    with pytest.raises(UnsupportedOperationError, match="reductions over segments"):
        fuse(lambda x: np.add.reduceat(x, [0, 3]))(X.copy())

    def instead(x, idx, v):  # what the np.add.at refusal says to write
        x += np.where(idx[:, None] == np.arange(x.shape[0]), v[:, None], 0).sum(axis=0)
        return x

    want = X.copy()
    np.add.at(want, idx, v)
    same(fuse(instead)(X.copy(), idx, v), want)


class Accumulator:
    """A callable object whose state is written through another name."""

    def __init__(self) -> None:
        self.parts = {"acc": np.zeros(12, np.float32)}

    def __call__(self, x):
        acc = self.parts["acc"]
        acc += x
        return acc


def test_state_of_a_callable_object_stays_refused() -> None:
    obj = Accumulator()
    with pytest.raises(UnsupportedOperationError, match="reached from outside the function"):
        fuse(obj)(X.copy())
    with pytest.raises(UnsupportedOperationError, match="reached from outside the function"):
        fuse(lambda x: obj(x) + 1)(X.copy())  # (reached through a closure: the object whole)
    assert not obj.parts["acc"].any() and obj.parts["acc"].flags.writeable
