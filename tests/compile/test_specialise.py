"""Issue 30, part 5: Python ints that shape the program are specialised on (a constant of the
trace, keyed by value, explained in the recompile log), as torch.compile does, while ints used
only as array operands stay runtime values; the RecompileWarning points at the user's line."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

import fusejit
from fusejit.compile.recompiles import RecompileWarning

X = np.arange(24, dtype=np.float32).reshape(4, 6)

# (role, function, two values of n): each needs n as a Python int somewhere
ROLES = {
    "axis": (lambda x, n: x.sum(axis=n), (0, 1)),
    "axis computed": (lambda x, n: x.sum(axis=n - 1), (1, 2)),
    "size": (lambda x, n: x[:, :1] + np.zeros(n, np.float32), (3, 5)),
    "window": (lambda x, n: x[:, :n] * 2, (2, 4)),
    "loop count": (lambda x, n: sum(x * i for i in range(n)), (2, 3)),
    "reshape": (lambda x, n: x.reshape(n, -1), (2, 3)),
    "roll shift": (lambda x, n: np.roll(x, n, axis=1), (1, 2)),
    "int()": (lambda x, n: x * int(n), (2, 3)),
    "branch": (lambda x, n: x * 2 if n else x - 1, (0, 1)),
    "flag": (lambda x, n: -x if n else x, (True, False)),
}


@pytest.mark.parametrize("role", list(ROLES))
def test_an_int_used_as_a_value_is_specialised(role, caplog) -> None:
    fn, values = ROLES[role]
    f = fusejit.fuse(fn)
    with caplog.at_level(logging.INFO, logger="fusejit"):
        for n in (*values, values[0]):
            np.testing.assert_array_equal(f(X, n), fn(X, n))
    assert f.trace_count == 3  # the failed scalar trace, then one per value
    assert f.cache_info().hits == 1
    lines = [r.getMessage() for r in caplog.records if "specialising" in r.getMessage()]
    assert len(lines) == 1 and "arg 1 ('n')" in lines[0] and "static_argnums" in lines[0]


def test_by_keyword_and_through_lower() -> None:
    fn = ROLES["window"][0]
    f = fusejit.fuse(fn)
    np.testing.assert_array_equal(f(X, n=3), fn(X, 3))
    np.testing.assert_array_equal(f(X, 3), fn(X, 3))  # positional: the same parameter
    g = fusejit.fuse(fn)
    assert len(g.lower(X, 2).kernels) >= 1
    np.testing.assert_array_equal(g(X, 2), fn(X, 2))


def test_ints_used_as_operands_stay_runtime_values() -> None:
    def f(x, n, k):
        return x[:, :n] * k + k ** 2

    fused = fusejit.fuse(f)
    for k in (1, 2, 3, -4):
        np.testing.assert_array_equal(fused(X, 2, k), f(X, 2, k))
    assert fused.trace_count == 2  # n specialised once; k never
    assert 1 in fused._static_nums and 2 not in fused._static_nums


def test_an_unrelated_error_is_raised_and_nothing_learned() -> None:
    def f(x, n):
        return x @ np.ones((5, 5), np.float32) * n  # (4, 6) @ (5, 5): NumPy's ValueError

    fused = fusejit.fuse(f)
    with pytest.raises(ValueError):
        f(X, 2)
    with pytest.raises(ValueError):
        fused(X, 2)

    def g(x, n):
        return x.astype("datetime64[s]") * n  # a TypeError with n's value known or not

    fused = fusejit.fuse(g)
    with pytest.raises(TypeError):
        fused(X, 2)
    assert not fused._static_nums


def test_recompile_warning_points_at_the_callers_line() -> None:
    f = fusejit.fuse(lambda x: x + 1, recompile_limit=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 4):
            f(np.ones(n, np.float32))
    ours = [w for w in caught if issubclass(w.category, RecompileWarning)]
    assert len(ours) == 1 and ours[0].filename == __file__


def test_recompile_warning_from_a_method_points_at_the_caller() -> None:
    class M:
        @fusejit.fuse(recompile_limit=2)
        def f(self, x):
            return x * 2

    m = M()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 4):
            m.f(np.ones(n, np.float32))
    ours = [w for w in caught if issubclass(w.category, RecompileWarning)]
    assert len(ours) == 1 and ours[0].filename == __file__
