"""Issue 30, part 1: what ``fuse`` is given bound is captured state, never baked in.

``fuse(obj.method)``, ``fuse(obj)`` (an object with ``__call__``) and
``fuse(functools.partial(g, ...))`` read the bound ``self``, the callable's attributes and the
partial's arguments by the rules of ``@fuse`` on a method: scalars and small arrays guarded
(a change traces again), large arrays read fresh on every call. Each case mutates the state
after the cached calls and compares with NumPy running the same callable.
"""

from __future__ import annotations

import functools
import pickle

import numpy as np
import pyopencl.array as cla
import pytest
from test_state import same

from fusejit import fuse
from fusejit.errors import CapturedStateError

BIG = 5000  # over captured.SMALL_ARRAY: read fresh (an implicit input)


class Layer:
    scale = 1.0  # a class attribute

    def __init__(self, n: int) -> None:
        self.alpha = 2.0
        self.w = (np.arange(n) % 5).astype(np.float32)
        self.sub = Sub()

    def f(self, x):
        return x * self.alpha + self.w[: x.shape[0]] * Layer.scale + self.sub.beta

    def __call__(self, x):
        return self.f(x) - self.sub.offset()

    @classmethod
    def cm(cls, x):
        return x * cls.scale


class Sub:
    def __init__(self) -> None:
        self.beta = 0.5

    def offset(self):
        return self.beta * 2


def _mutations(layer: Layer) -> list:
    return [lambda: setattr(layer, "alpha", 4.0), lambda: layer.w.__imul__(3),
            lambda: setattr(layer, "w", layer.w[::-1].copy()),
            lambda: setattr(layer.sub, "beta", -1.5), lambda: setattr(layer, "sub", Sub()),
            lambda: setattr(Layer, "scale", 3.0)]


@pytest.fixture
def restore_class():
    yield
    Layer.scale = 1.0


@pytest.mark.parametrize("n", [6, BIG], ids=["small w", "big w"])
@pytest.mark.parametrize("kind", ["bound method", "callable object", "classmethod"])
def test_bound_state_is_read_as_captured_state(kind, n, restore_class) -> None:
    layer = Layer(n)
    fn = {"bound method": lambda: layer.f, "callable object": lambda: layer,
          "classmethod": lambda: Layer.cm}[kind]
    f = fuse(fn())
    x = np.linspace(-1, 1, 6).astype(np.float32)
    for change in [lambda: None] + _mutations(layer):
        change()
        for _ in range(2):
            same(f(x), fn()(x))


def test_bound_method_on_device_arrays_and_names(queue) -> None:
    layer = Layer(BIG)
    f = fuse(layer.f)
    assert f.__name__ == "f"
    x = cla.to_device(queue, np.ones(6, np.float32))
    same(f(x), layer.f(x.get()))
    layer.alpha = -1.0
    same(f(x), layer.f(x.get()))
    assert f.trace_count == 2


def _affine(x, w, b, scale=1.0):
    return (x @ w + b) * scale


@pytest.mark.parametrize("n", [8, 80], ids=["small", "big"])
def test_partial_arguments_are_captured_state(n) -> None:
    w = np.ones((n, n), np.float32)
    b = np.zeros(n, np.float32)
    x = np.ones((2, n), np.float32)
    for p in (functools.partial(_affine, w=w, b=b), functools.partial(_affine, w=w, b=b,
                                                                       scale=2.0)):
        g = fuse(p)
        same(g(x), p(x))
        w *= 3
        b += 1
        same(g(x), p(x))
        w /= 3
        b -= 1


def test_partial_positional_nested_and_overridden() -> None:
    x = np.arange(4, dtype=np.float32)
    w = np.full(4, 2.0, np.float32)
    cfg = {"scale": 1.0}
    inner = functools.partial(lambda w, x, s, t=0.0: x * w * s["scale"] + t, w)
    p = functools.partial(inner, s=cfg, t=1.0)
    g = fuse(p)
    same(g(x), p(x))
    cfg["scale"] = 5.0  # a dict passed through the partial: guarded item by item
    same(g(x), p(x))
    w[0] = -1.0
    same(g(x), p(x))
    same(g(x, t=-2.0), p(x, t=-2.0))  # a call's keyword wins


def test_partial_of_a_bound_method_and_static_argnums() -> None:
    class Pow:
        def __init__(self) -> None:
            self.k = 2.0

        def f(self, x, n, bias):
            return x ** n * self.k + bias

    obj = Pow()
    p = functools.partial(obj.f, bias=1.0)
    g = fuse(p, static_argnums=1)
    x = np.arange(3, dtype=np.float32)
    same(g(x, 2), p(x, 2))
    same(g(x, 3), p(x, 3))
    obj.k = -1.0
    same(g(x, 3), p(x, 3))
    fm = fuse(obj.f, static_argnames="n")
    same(fm(x, 2, 0.5), obj.f(x, 2, 0.5))
    same(fm(x, n=3, bias=0.5), obj.f(x, n=3, bias=0.5))


def test_fused_partial_pickles_with_its_arguments() -> None:
    w = np.arange(3, dtype=np.float32)
    g = fuse(functools.partial(np.add, w))
    x = np.ones(3, np.float32)
    same(g(x), x + w)
    h = pickle.loads(pickle.dumps(g))
    same(h(x), x + w)


def test_a_fused_partial_inlined_in_another_sees_its_arguments() -> None:
    w = np.full(3, 2.0, np.float32)
    scale = {"k": 1.0}
    inner = fuse(functools.partial(lambda x, w, s: x * w * s["k"], w=w, s=scale))

    @fuse
    def outer(x):
        return inner(x) + 1

    x = np.arange(3, dtype=np.float32)
    same(outer(x), x * w + 1)
    w[1] = -5.0
    scale["k"] = 3.0
    same(outer(x), x * w * 3 + 1)


def test_bound_method_lowers_specialises_and_runs_on_dask() -> None:
    class Win:
        def __init__(self) -> None:
            self.k = 2.0

        def f(self, x, n):
            return x[:n] * self.k

    obj = Win()
    f = fuse(obj.f)
    x = np.arange(6, dtype=np.float32)
    assert len(f.lower(x, 3).kernels) >= 1  # n: a window, specialised (issue 30 part 5)
    same(f(x, 3), obj.f(x, 3))
    same(f(x, 4), obj.f(x, 4))
    assert f._static_nums == {1}  # (counted as the caller counts: self is not an argument)
    da = pytest.importorskip("dask.array")
    g = fuse(Win().f, static_argnums=1)
    same(np.asarray(g(da.from_array(x, chunks=3), 6).compute()), Win().f(x, 6))


def test_fused_methods_bound_again_read_their_object() -> None:
    class Twice:
        def __init__(self) -> None:
            self.k = 2.0

        @fuse
        def f(self, x):
            return x * self.k

        @fuse
        def __call__(self, x):
            return x + self.k

    obj = Twice()
    f, g = fuse(obj.f), fuse(obj)
    x = np.arange(3, dtype=np.float32)
    for k in (2.0, 2.0, 5.0, 5.0):
        obj.k = k
        same(f(x), x * np.float32(k))
        same(g(x), x + np.float32(k))


def test_a_fused_bound_method_inlined_in_another_is_guarded() -> None:
    layer = Layer(6)
    inner = fuse(layer.f)

    @fuse
    def outer(x):
        return inner(x) * 2

    x = np.linspace(-1, 1, 6).astype(np.float32)
    for alpha in (2.0, 2.0, -3.0):
        layer.alpha = alpha
        layer.w[0] = alpha  # (a small array: guarded by content)
        same(outer(x), layer.f(x) * 2)
    big = Layer(BIG)
    inner_big = fuse(big.f)
    with pytest.raises(CapturedStateError, match="self.w"):
        fuse(lambda x: inner_big(x) + 1)(x)
