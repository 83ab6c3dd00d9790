"""The raw-bytecode shortcut of the captured-state analysis (captured._library_globals_only)
finds exactly what the full ``dis`` analysis finds: nothing, for functions that read only
library modules; every other function takes the full analysis."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

import fusejit.random as fr
from fusejit.frontend import captured

SCALE = 2.0
TABLE = {"k": 3.0}
ACT = np.tanh
_user_module = types.ModuleType("user_settings")
_user_module.alpha = 0.5


def _helper(x):
    return x * SCALE


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def _math_only(x, y=2):
    return np.sqrt(x) * math.pi + y


def _defaults(x, w=[1.0]):  # noqa: B006 - a mutable default is what the test is about
    return x * w[0]


def _reads_global(x):
    return x * SCALE


def _reads_table(x):
    return x * TABLE["k"]


def _names_ufunc(x):
    return ACT(x)


def _calls_helper(x):
    return _helper(x) + 1


def _builtin(x):
    return x * len(TABLE)


def _user_mod(x):
    return x * _user_module.alpha


def _nested(x):
    return sum(v for v in (x, x))


def _make_closure():
    k = 4.0
    return lambda x: x * k


FAST = [_gelu, _math_only, _defaults, lambda x: np.exp(x) - 1]
SLOW = [_reads_global, _reads_table, _names_ufunc, _calls_helper, _builtin, _user_mod, _nested,
        _make_closure()]


def _summary(caps: captured.Captures):
    return ([(c.chain, c.owner, c.self_path, c.get(None)) for c in caps],
            [(id(scope), name, value) for scope, name, value in caps.code_refs],
            sorted(caps.functions))


@pytest.mark.parametrize("fn", FAST + SLOW + [fr.uniform, fr.bernoulli])  # (+ library code)
def test_same_captures_as_the_full_analysis(fn, monkeypatch):
    fast = _summary(captured.find_captures(fn))
    monkeypatch.setattr(captured, "_library_globals_only", lambda *a: False)
    assert fast == _summary(captured.find_captures(fn))


@pytest.mark.parametrize("fn", FAST)
def test_library_only_functions_skip_the_walk(fn, monkeypatch):
    def no_walk(*args):
        raise AssertionError("the bytecode walk ran")

    monkeypatch.setattr(captured, "_chains", no_walk)
    captured.find_captures(fn)


@pytest.mark.parametrize("fn", SLOW)
def test_other_reads_take_the_full_analysis(fn):
    assert not captured._library_globals_only(fn, fn.__code__, False)


def test_bound_methods_take_the_full_analysis():
    assert not captured._library_globals_only(_gelu, _gelu.__code__, True)
