"""Issue 30, parts 2 and 3: the generated guard check (fusejit/frontend/guard_check.py) never
lets a cached call serve stale captured state, whatever kind of mutation changed it, and
immutable values (slices, tuples, enums, frozen dataclasses...) are captured as values.

Each mutation happens after the function's fast path (guard check, then guarded launcher) is
in place; the result is compared with NumPy running the same function on the state as it is.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import logging
import math
import types

import numpy as np
import pyopencl.array as cla
import pytest
from test_state import same

from fusejit import fuse
from fusejit.frontend.guard_check import frozen, snapshot
from fusejit.testing import to_host


def close(got, want) -> None:
    """Dtype and shape exactly; values to float32 rounding (tanh, sin, products reordered)."""
    g = np.asarray(to_host(got))
    assert (g.dtype, g.shape) == (want.dtype, want.shape), (g, want)
    np.testing.assert_allclose(g, want, rtol=2e-6, atol=1e-6)

BIG = 5000  # over captured.SMALL_ARRAY: read fresh (an implicit input)


class Inner:
    def __init__(self) -> None:
        self.alpha = 1.5


class Cfg:
    gamma = 2.0  # a class attribute

    def __init__(self) -> None:
        self.inner = Inner()
        self.beta = 0.5


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self) -> None:
        self.a = 1.0
        self.b = 2.0


SCALE = 2.0
COUNT = 3
HELPERS = [np.tanh, np.sin]
PARAMS = {"scale": 0.5, "shift": 1.5}
COEFFS = (1.0, 2.0)
NESTED = ([1.0, 2.0], {"k": 3.0})
CFG = Cfg()
SLOTS = Slotted()
SMALL = np.arange(6, dtype=np.float32)
W = (np.arange(BIG) % 7).astype(np.float32)
MOD = types.ModuleType("user_mod")
MOD.factor = 3.0


def uses_everything(x):
    y = x * SCALE + COUNT
    for h in HELPERS:
        y = h(y)
    for v in PARAMS.values():  # (iterated: the key order is part of the trace)
        y = y * v + 1
    y = y + COEFFS[0] * COEFFS[1] + NESTED[0][1] + NESTED[1]["k"]
    y = y + CFG.inner.alpha * CFG.beta + Cfg.gamma + SLOTS.a * SLOTS.b
    return y + SMALL[2] + W[: x.shape[0]] + MOD.factor


def _set(name, value):
    return lambda: globals().__setitem__(name, value)


MUTATIONS = {
    "rebind a float": _set("SCALE", 3.0),
    "-0.0 for 2.0": _set("SCALE", -0.0),
    "an int for a float": _set("SCALE", 2),
    "a bool for an int": _set("COUNT", True),
    "a float for an int": _set("COUNT", 3.25),
    "nan": _set("SCALE", math.nan),
    "replace a helper": lambda: HELPERS.__setitem__(1, np.cos),
    "append a helper": lambda: HELPERS.append(np.exp),
    "pop a helper": lambda: HELPERS.pop(),
    "rebind the list": _set("HELPERS", [np.sin]),
    "a dict value": lambda: PARAMS.__setitem__("scale", 4.0),
    "a dict key added": lambda: PARAMS.__setitem__("extra", 0.25),
    "a dict key deleted": lambda: PARAMS.pop("shift"),
    "dict key order": lambda: PARAMS.__setitem__("scale", PARAMS.pop("scale")),
    "rebind the tuple": _set("COEFFS", (1.0, -2.0)),
    "a list in a tuple": lambda: NESTED[0].__setitem__(1, -7.0),
    "a dict in a tuple": lambda: NESTED[1].__setitem__("k", 9.0),
    "a nested attribute": lambda: setattr(CFG.inner, "alpha", -1.0),
    "a nested object replaced": lambda: setattr(CFG, "inner", types.SimpleNamespace(alpha=4.0)),
    "an attribute added": lambda: setattr(CFG, "extra", 1),
    "a class attribute": lambda: setattr(Cfg, "gamma", -4.0),
    "a slot": lambda: setattr(SLOTS, "b", 5.0),
    "a small array in place": lambda: SMALL.__setitem__(2, 40.0),
    "a small array's shape": lambda: setattr(SMALL, "shape", (6, 1)),
    "a big array in place": lambda: W.__imul__(3),
    "a big array rebound": _set("W", np.ones(BIG + 1, np.float32)),
    "a module attribute": lambda: setattr(MOD, "factor", -3.0),
}


@pytest.fixture
def fresh_state():
    saved = dict(globals())
    saved_lists = (list(HELPERS), dict(PARAMS), list(NESTED[0]), dict(NESTED[1]))
    yield
    globals().update({k: saved[k] for k in ("SCALE", "COUNT", "HELPERS", "COEFFS", "W")})
    HELPERS[:] = saved_lists[0]
    PARAMS.clear()
    PARAMS.update(saved_lists[1])
    NESTED[0][:] = saved_lists[2]
    NESTED[1].clear()
    NESTED[1].update(saved_lists[3])
    CFG.inner, CFG.beta = Inner(), 0.5
    vars(CFG).pop("extra", None)
    Cfg.gamma, SLOTS.b, MOD.factor = 2.0, 2.0, 3.0
    SMALL.shape = (6,)
    SMALL[:] = np.arange(6)
    W[:] = np.arange(BIG) % 7


@pytest.mark.parametrize("what", list(MUTATIONS))
@pytest.mark.parametrize("host", [True, False], ids=["numpy", "device"])
def test_every_mutation_after_the_fast_path_is_seen(what, host, fresh_state, queue) -> None:
    f = fuse(uses_everything)
    x = np.linspace(-1, 1, 4).astype(np.float32)
    arg = x if host else cla.to_device(queue, x)
    with np.errstate(all="ignore"):
        for _ in range(3):  # first call, snapshot, guarded launcher
            close(f(arg), uses_everything(x))
        assert f._check is not None and f._fast  # the fast path is in place
        MUTATIONS[what]()
        for _ in range(2):
            close(f(arg), uses_everything(x))


def test_equal_values_made_again_keep_the_fast_path(fresh_state) -> None:
    global SCALE, COEFFS
    f = fuse(uses_everything)
    x = np.ones(3, np.float32)
    f(x)
    f(x)
    check = f._check
    SCALE, COEFFS = float("2.0"), (float("1.0"), 2.0)  # new objects, same values
    close(f(x), uses_everything(x))
    assert f._check is check and f.trace_count == 1


def test_zero_sign_and_type_are_never_taken_for_equal(fresh_state) -> None:
    global SCALE
    f = fuse(lambda x: x / SCALE)
    x = np.ones(2, np.float32)
    with np.errstate(divide="ignore"):
        for value in (0.0, 0.0, -0.0, -0.0, 0.0, 2, 2.0, True, 1, 1.0):
            SCALE = value
            same(f(x), x / value)


def test_unfollowable_state_still_guarded_every_call(fresh_state) -> None:
    """A user module used whole has no generated check: each call computes the guard key."""
    f = fuse(lambda x: x * _mod_helper(MOD))
    x = np.ones(2, np.float32)
    for value in (3.0, 3.0, 5.0, 5.0, -1.0):
        MOD.factor = value
        same(f(x), x * np.float32(value))


def _mod_helper(m):
    return m.factor


def test_checks_cover_closures_and_defaults() -> None:
    scale = [2.0]

    def g(x, table=[1.0]):  # noqa: B006 - a mutable default is captured state
        return x * scale[0] + table[0]

    f = fuse(g)
    x = np.ones(2, np.float32)
    for _ in range(3):
        same(f(x), g(x))
    scale[0] = 5.0
    same(f(x), g(x))
    g.__defaults__[0][0] = -3.0
    same(f(x), g(x))

    def rebinding(x):
        return x * factor

    factor = 2.0
    f = fuse(rebinding)
    for value in (2.0, 2.0, 2.0, 7.0, 7.0):
        factor = value
        same(f(x), rebinding(x))


def test_snapshot_checks_what_it_keyed() -> None:
    def reads(x):
        return x * SCALE + PARAMS["scale"]

    f = fuse(reads)
    f(np.ones(2, np.float32))
    _, implicit, check = snapshot(f._guards)
    assert check() and not implicit
    PARAMS["scale"] = 7.0
    try:
        assert not check()
    finally:
        PARAMS["scale"] = 0.5
    assert check()


# -- part 3: immutable values are values -------------------------------------------------------


class Color(enum.Enum):
    RED = 1
    BLUE = 2


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: float
    s: slice


Pair = collections.namedtuple("Pair", "a b")

WINDOW = slice(1, None)
INDEX = (slice(None, 3), Ellipsis)
CHOICES = frozenset({1, 2})
COLOR = Color.RED
FROZEN = Frozen(2.0, slice(None, -1))
PAIR = Pair(3.0, 2)
DTYPE = np.dtype(np.float32)
NP_SCALAR = np.float32(1.5)
RAW = b"ab"
TEXT = "x"
COMPLEX = 1 + 2j
DOTS = Ellipsis


def uses_immutables(x):
    y = x[WINDOW] * FROZEN.a + x[FROZEN.s][: PAIR.b].sum() + len(CHOICES)
    y = y + (1.0 if COLOR is Color.RED else 2.0) + x[DOTS][INDEX][0] + NP_SCALAR
    y = y + len(RAW) + len(TEXT) + COMPLEX.imag + PAIR.a
    return y.astype(DTYPE)


IMMUTABLE_REBINDINGS = [
    ("WINDOW", slice(2, None)), ("WINDOW", slice(None, None, 2)),
    ("INDEX", (slice(1, 4), Ellipsis)), ("CHOICES", frozenset({1})), ("COLOR", Color.BLUE),
    ("FROZEN", Frozen(3.0, slice(1, None))), ("PAIR", Pair(1.0, 1)),
    ("DTYPE", np.dtype(np.float64)), ("NP_SCALAR", np.float32(-1)), ("RAW", b"abc"),
    ("TEXT", ""), ("COMPLEX", 3j), ("DOTS", ())]


@pytest.mark.parametrize("name,value", IMMUTABLE_REBINDINGS,
                         ids=[f"{n}={v!r}" for n, v in IMMUTABLE_REBINDINGS])
def test_immutable_values_are_captured_and_rebinding_traces_again(name, value) -> None:
    f = fuse(uses_immutables)
    x = np.arange(6, dtype=np.float32)
    saved = globals()[name]
    try:
        for _ in range(2):
            same(f(x), uses_immutables(x))
        globals()[name] = value
        for _ in range(2):
            same(f(x), uses_immutables(x))
        assert f.trace_count == 2
    finally:
        globals()[name] = saved


def test_a_module_level_window_indexes() -> None:
    f = fuse(lambda x: x[WINDOW] + x[:-1])
    x = np.arange(5.0)
    same(f(x), x[1:] + x[:-1])


@pytest.mark.parametrize("value,is_frozen", [
    (1, True), (2.5, True), ("s", True), (b"b", True), (None, True), (Ellipsis, True),
    (slice(1, None), True), ((1, (2.0, "a")), True), (frozenset({1}), True),
    (Color.RED, True), (Pair(1, 2), True), (np.float32(1), True), (np.dtype("f4"), True),
    (np.tanh, True), ([1], False), ((1, [2]), False), ({"a": 1}, False),
    (slice([1], None), False), (np.zeros(2), False), (Frozen(1.0, slice(1)), False)])
def test_what_counts_as_frozen(value, is_frozen) -> None:
    """Identity stands for the value only where nothing inside can change (a frozen dataclass
    is checked through its fields instead)."""
    assert frozen(value) is is_frozen


def test_recompile_log_names_the_captured_value_that_changed(fresh_state, caplog) -> None:
    global SCALE
    f = fuse(lambda x: x * SCALE + PARAMS["scale"])
    x = np.ones(2, np.float32)
    with caplog.at_level(logging.INFO, logger="fusejit"):
        f(x)
        SCALE = 3.0
        f(x)
        PARAMS["scale"] = -1.0
        f(x)
    lines = [r.getMessage() for r in caplog.records if "recompiling" in r.getMessage()]
    assert lines[0].endswith("captured data SCALE 2.0 -> 3.0")
    assert lines[1].endswith("captured data PARAMS['scale'] 0.5 -> -1.0")
