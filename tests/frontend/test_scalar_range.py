"""Dynamic Python int arguments whose value lies outside the dtype they are bound as.

A Python int argument is a kernel argument: the trace is made with one value and later calls
pass others without tracing again, so the range checks NumPy does on the value (NEP 50) run at
call time. For each op that takes a scalar, one trace is called with values inside and beyond
the array dtype's range, beyond int64 too, and its result (or the builtin class of the error it
raises, before anything is launched) must be NumPy's:

* arithmetic, maximum/minimum, in-place writes: NumPy raises OverflowError out of range, also
  for a value computed from the argument with Python arithmetic (``x + (n - 1)``);
* comparisons compare exactly; np.where (NumPy 2.4) converts the int to an array first;
* np.clip drops a bound beyond the range on the side where it clips nothing and raises beyond
  the other (the fuzzer's program 6161018483: ``clip(uint8(255), n, True)`` with ``n = -7``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fusejit import fuse
from fusejit.errors import IntRangeError
from fusejit.testing import assert_matches

# the first value is traced; every later one within int64 reuses that trace
VALUES = (3, -7, 127, 128, 255, 256, -128, -129, 1000, -1000, 2**62, -(2**63))
# Python arithmetic on a dynamic int is computed in int64 (wrapping beyond it): not these
ARITHMETIC_VALUES = VALUES[:-2]
BEYOND = (2**63 + 5, 2**64 - 1, -(2**64))  # a trace each (their range is in the key)

CASES: dict[str, Callable[..., Any]] = {
    "clip(x, n, 50)": lambda x, n: np.clip(x, n, 50),
    "clip(x, 2, n)": lambda x, n: np.clip(x, 2, n),
    "clip(x, n, None)": lambda x, n: np.clip(x, n, None),
    "clip(x, None, n)": lambda x, n: np.clip(x, None, n),
    "clip(x, n, n)": lambda x, n: np.clip(x, n, n),
    "clip(uint8(255), n, True)": lambda x, n: (np.clip(np.uint8(255), n, np.bool_(True)), x),
    "clip(x, n, int16(40))": lambda x, n: np.clip(x, n, np.int16(40)),
    "clip(x, n - 1, 50)": lambda x, n: np.clip(x, n - 1, 50),
    "x + n": lambda x, n: x + n,
    "x + (n - 1)": lambda x, n: x + (n - 1),
    "maximum(x, n * 2)": lambda x, n: np.maximum(x, n * 2),
    "minimum(x, n)": lambda x, n: np.minimum(x, n),
    "x < n": lambda x, n: x < n,
    "x >= n - 1": lambda x, n: x >= n - 1,
    "where(x > 1, x, n)": lambda x, n: np.where(x > 1, x, n),
    "x += n": lambda x, n: x.__iadd__(n),
    "pad(x, 1, constant_values=n)": lambda x, n: np.pad(x, 1, constant_values=n),
    # a Python int that NumPy makes an array of (np.asarray: uint64 for [2**63, 2**64))
    "isclose(x, n)": lambda x, n: np.isclose(x, n),
    "abs(n) + x": lambda x, n: np.abs(n) + x,
    "clip(n, 0, 5) + x": lambda x, n: np.clip(n, 0, 5) + x,
}
# int8: every case; uint8 and uint64: the clip bounds, the ops whose NumPy rule is per side
PLAN = ([(np.int8, name) for name in CASES]
        + [(np.uint8, name) for name in list(CASES)[:6] + ["pad(x, 1, constant_values=n)"]]
        + [(np.uint64, name) for name in list(CASES)[:3]])
BEYOND_PLAN = [(np.int8, name) for name in ("clip(x, n, 50)", "clip(x, 2, n)", "x + n",
                                            "x < n", "where(x > 1, x, n)", "x + (n - 1)")] \
    + [(np.uint64, "clip(x, n, 50)")] \
    + [(dtype, name) for dtype in (np.int8, np.uint64)
       for name in ("isclose(x, n)", "abs(n) + x", "clip(n, 0, 5) + x")]


@pytest.mark.parametrize("dtype", (np.int8, np.uint8), ids=lambda d: d.__name__)
def test_literal_pad_value_out_of_range(dtype: type) -> None:
    """np.pad stores its value as a NumPy int: range-checked into a signed array, wrapped into
    an unsigned one."""
    def fn(x):
        return np.pad(x, 1, constant_values=1000)
    x = np.arange(3, dtype=dtype)
    want = _numpy(lambda x, n: fn(x), x, 0)
    if isinstance(want, Exception):
        with pytest.raises(type(want)):
            fuse(fn)(x)
    else:
        assert_matches(fuse(fn)(x), want)


def _numpy(fn: Callable[..., Any], x: np.ndarray, n: int) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(x, n)
    except Exception as exc:  # noqa: BLE001 - the class fusejit must raise too
        return exc


def _check(name: str, dtype: type, values: tuple[int, ...]) -> None:
    """One fused function called with each value: NumPy's values, or its error's class with
    the input left as it was."""
    fn = CASES[name]
    f = fuse(fn)
    start = np.array([0, 5, 100, 127], dtype)
    for n in values:
        want = _numpy(fn, start.copy(), n)
        x = start.copy()
        try:
            got = f(x, n)
        except Exception as exc:  # noqa: BLE001 - compared with what NumPy did
            if isinstance(exc, IntRangeError) and n not in range(-2**63, 2**63):
                continue  # documented: Python arithmetic beyond int64 is refused by name
            assert isinstance(want, Exception), f"{name}, n={n}: fusejit raised {exc!r}, " \
                f"NumPy returned {want!r}"
            assert isinstance(exc, type(want)), f"{name}, n={n}: {exc!r} is not {want!r}"
            np.testing.assert_array_equal(x, start, err_msg=f"{name}, n={n}: input modified")
            continue
        assert not isinstance(want, Exception), f"{name}, n={n}: NumPy raised {want!r}, " \
            f"fusejit returned {got!r}"
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            assert_matches(g, w, what=f"{name}, n={n}")


@pytest.mark.parametrize("dtype, name", PLAN, ids=[f"{d.__name__}-{n}" for d, n in PLAN])
def test_runtime_int_out_of_dtype_range(dtype: type, name: str) -> None:
    arithmetic = any(op in name for op in ("n -", "n *"))
    _check(name, dtype, ARITHMETIC_VALUES if arithmetic else VALUES)


@pytest.mark.parametrize("dtype, name", BEYOND_PLAN,
                         ids=[f"{d.__name__}-{n}" for d, n in BEYOND_PLAN])
def test_runtime_int_beyond_int64(dtype: type, name: str) -> None:
    as_array = name in ("isclose(x, n)", "abs(n) + x", "clip(n, 0, 5) + x")
    # (np.asarray(-2**64) is an object array, which fusejit does not compute with)
    _check(name, dtype, (3, *BEYOND[:2]) if as_array else (3, *BEYOND))


def test_hoisted_check_in_validate_and_bundles(tmp_path) -> None:
    """The checked conversion is host work (a derived scalar): validate mode evaluates it in
    NumPy, and an exported bundle keeps it."""
    import fusejit

    def fn(x, n):
        return np.clip(x, n - 1, 50) + np.int8(1)

    f = fuse(fn, validate=True)
    x = np.array([0, 5, 100], np.int8)
    for n in (3, -1000, 20):
        assert_matches(f(x, n), fn(x, n))
    with pytest.raises(OverflowError):
        f(x, 1000)
    path = tmp_path / "bundle"
    fusejit.export(fuse(fn), [(x, 3)], path)
    g = fusejit.load(path)
    assert_matches(g(x, -1000), fn(x, -1000))
    with pytest.raises(OverflowError):
        g(x, 1000)


DTYPE_CASES = [
    ("add int8 dtype=int16",
     lambda x, n: np.add(x, n, dtype=np.int16) + np.add(x, x, dtype=np.int16), np.int8),
    ("multiply float32 dtype=float64", lambda x, n: np.multiply(x, x / 3, dtype=np.float64),
     np.float32),
    ("subtract int8 dtype=float32", lambda x, n: np.subtract(x, n, dtype=np.float32), np.int8),
    ("negative int8 dtype=int16", lambda x, n: np.negative(x, dtype=np.int16) * n, np.int8),
]


@pytest.mark.parametrize("name, fn, dtype", DTYPE_CASES, ids=[c[0] for c in DTYPE_CASES])
def test_ufunc_dtype_picks_the_loop(name: str, fn: Callable[..., Any], dtype: type) -> None:
    """``dtype=`` computes in that dtype, as ``signature=`` does (np.add(int8, int8,
    dtype=int16) adds in int16), so a Python int is bound as it too (1000 fits int16)."""
    x = np.array([-128, -5, 0, 100, 127], dtype) if dtype is np.int8 else \
        np.array([1.5, 3e-8, 7.1, -2.3e5], dtype)
    f = fuse(fn)
    for n in (2, 1000):
        assert_matches(f(x, n), fn(x, n), what=f"{name}, n={n}")
