"""Issue 30, part 2: the fast path (a generated guarded launcher per signature, after the
generated guard check of fusejit/frontend/guard_check.py) still notices every rebinding and
mutation of what a function captures, for each kind of capture, on device and NumPy arrays.

Each case calls until the guarded launcher serves the calls (``_mono``: the test would
otherwise not exercise that path), changes the state, and compares with NumPy.
"""

from __future__ import annotations

import functools

import numpy as np
import pyopencl.array as cla
import pytest
from test_state import same

from fusejit import fuse

BIG = 5000  # over captured.SMALL_ARRAY: read fresh on every call (an implicit input)
N = 6


def _neg(x):
    return -x


def _cube(x):
    return x * x * x


HELPERS = [_neg, _cube]
PARAMS = {"scale": 0.25, "shift": -2.0}
ALPHA = 1.5
SMALL = np.arange(N, dtype=np.float32)
LARGE = np.arange(BIG, dtype=np.float32)


class Sub:
    def __init__(self) -> None:
        self.beta = 0.5


class Layer:
    def __init__(self) -> None:
        self.alpha = 2.0
        self.sub = Sub()
        self.w = np.arange(N, dtype=np.float32)

    def apply(self, x):
        return x * self.alpha + self.sub.beta + self.w

    def __call__(self, x):
        return x * self.alpha - self.sub.beta * self.w


def _scaled(x, a, p):
    return x * a + p["k"]


def _helpers(x):
    for h in HELPERS:
        x = h(x)
    return x


def _params(x):
    return x * PARAMS["scale"] + PARAMS["shift"]


def _scalar(x):
    return x * ALPHA + 1


def _small(x):
    return x * SMALL


def _large(x):
    return x * LARGE[:N]


def _set(name, value):
    return lambda: globals().__setitem__(name, value)


def _cases():
    """(name, fn to fuse and to run as NumPy, its changes) for every kind of capture."""
    layer, obj, p = Layer(), Layer(), {"k": 1.0}
    part = functools.partial(_scaled, a=2.0, p=p)
    return [
        ("bound method", layer.apply,
         [lambda: setattr(layer, "alpha", 4.0), lambda: setattr(layer.sub, "beta", -1.0),
          lambda: setattr(layer, "sub", Sub()), lambda: layer.w.__imul__(3),
          lambda: setattr(layer, "w", layer.w[::-1].copy())]),
        ("callable object", obj,
         [lambda: setattr(obj, "alpha", -3.0), lambda: setattr(obj.sub, "beta", 7.0),
          lambda: obj.w.__setitem__(0, 9.0)]),
        ("partial", part, [lambda: p.__setitem__("k", -2.0), lambda: p.__setitem__("j", 0)]),
        ("list of helpers", _helpers,
         [lambda: HELPERS.__setitem__(1, _neg), lambda: HELPERS.append(_cube),
          _set("HELPERS", [_cube])]),
        ("dict", _params, [lambda: PARAMS.__setitem__("scale", 3.0),
                           _set("PARAMS", {"scale": -1.0, "shift": 0.0})]),
        ("global scalar", _scalar, [_set("ALPHA", 0.25), _set("ALPHA", -0.0)]),
        ("small captured array", _small, [lambda: SMALL.__imul__(2),
                                          _set("SMALL", SMALL[::-1].copy())]),
        ("large captured array", _large, [lambda: LARGE.__imul__(2),
                                          _set("LARGE", LARGE[::-1].copy())]),
    ]


@pytest.fixture
def restore_globals():
    saved = {k: globals()[k] for k in ("HELPERS", "PARAMS", "ALPHA", "SMALL", "LARGE")}
    copies = {k: (v.copy() if hasattr(v, "copy") else v) for k, v in saved.items()}
    yield
    for k, v in saved.items():  # (the objects as they were: other cases mutate them too)
        if isinstance(v, np.ndarray):
            v[...] = copies[k]
        elif isinstance(v, (list, dict)):
            v.clear()
            v.update(copies[k]) if isinstance(v, dict) else v.extend(copies[k])
        globals()[k] = v


@pytest.mark.parametrize("device", [False, True], ids=["numpy", "device"])
@pytest.mark.parametrize("case", range(len(_cases())), ids=[c[0] for c in _cases()])
def test_the_fast_path_notices_every_change(case, device, queue, restore_globals) -> None:
    name, fn, changes = _cases()[case]
    f = fuse(fn)
    x = np.linspace(-1, 1, N).astype(np.float32)
    arg = cla.to_device(queue, x) if device else x
    for change in [lambda: None, *changes]:
        change()
        for _ in range(3):
            same(f(arg), fn(x))
        if not (device and name == "large captured array"):  # (uploaded on every call:
            # NumPy and device arrays mixed take the keyed path)
            assert f._mono is not None, "the guarded launcher does not serve the calls"


def test_static_arguments_in_the_guarded_launcher(queue) -> None:
    def g(x, n, shape):
        return x[:n].reshape(shape) * 2

    f = fuse(g, static_argnums=(1, 2))
    x = cla.to_device(queue, np.arange(8, dtype=np.float32))
    for n, shape in [(4, (2, 2)), (4, (2, 2)), (4, (2, 2)), (6, (3, 2)), (6, (3, 2)),
                     (int("4"), tuple([2] * 2)), (True, (1, 1)), (1, (1, 1)), (True, (1, 1))]:
        # (equal values made anew: keyed, not by identity; True is not 1)
        same(f(x, n, shape), g(x.get(), n, shape))
    assert f._mono is not None
    sizes = [4]  # a mutable static value: the keyed path, never an identity test
    h = fuse(lambda x, s: x[:s[0]] + 1, static_argnums=1)
    for k in (4, 4, 4, 5):
        sizes[0] = k
        same(h(x, sizes), x.get()[:k] + 1)
