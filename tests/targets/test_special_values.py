"""Special values (inf, -inf, NaN, -0.0, subnormals) through the rewrites a compiler may make.

A Vulkan driver may apply algebraic identities that hold for finite numbers only (SPIR-V lets
it assume no NaN or Inf): lavapipe folded ``x - x`` and ``x + (-x)`` to 0, ``0.0 * y`` of a
zero it derived itself (``float(x < x)``, ``float(i - i)``) to 0, and turned ``np.sign``'s
select chain into a sign whose zero was -0.0; its log builtins read subnormals as if normal,
and near x = 1 (where Vulkan bounds them only absolutely) were 13 % off. Each class is checked against NumPy on every edge value, in float16, float32 and float64
(float64 on Vulkan has its exact ops only), on both devices. The op catalog
(tests/test_ops_catalog.py) pairs *different* operands; here the operands are one value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import test_ops_catalog as cat

FLOATS = tuple(np.dtype(c) for c in ("f2", "f4", "f8"))
DEVICES = [pytest.param(d, id=d) for d in ("opencl", "vulkan")]

# identities of finite numbers that are wrong for some special value (comparisons of a value
# with itself are the point)
IDENTITIES: dict[str, Callable[[Any, Any], Any]] = {
    "x - x": lambda x, y: x - x,
    "x + (-x)": lambda x, y: x + (-x),
    "-x + x": lambda x, y: -x + x,
    "x - x * 1": lambda x, y: x - x * 1,
    "x * 1 - x": lambda x, y: x * 1 - x,
    "(x + y) - y": lambda x, y: (x + y) - y,
    "(x + y) - x": lambda x, y: (x + y) - x,
    "x - (x - y)": lambda x, y: x - (x - y),
    "(x - y) + y": lambda x, y: (x - y) + y,
    "(x - y) - (x - y)": lambda x, y: (x - y) - (x - y),
    "x * y - y * x": lambda x, y: x * y - y * x,
    "abs(x) - abs(x)": lambda x, y: np.abs(x) - np.abs(x),
    "x * (y - y)": lambda x, y: x * (y - y),
    "isnan(x - x)": lambda x, y: np.isnan(x - x),
    "(x - x) < 1": lambda x, y: (x - x) < 1,
    "(x - x) == 0": lambda x, y: (x - x) == 0,
    "sign(x - x)": lambda x, y: np.sign(x - x),
    "where(x - x == 0)": lambda x, y: np.where(x - x == 0, y, -y),
    "x / x": lambda x, y: x / x,
    "x * y / y": lambda x, y: x * y / y,
    "x * 0": lambda x, y: x * 0,
    "0 / x": lambda x, y: 0 / x,
    "-0.0 + x": lambda x, y: -0.0 + x,
    "0.0 - x": lambda x, y: 0.0 - x,
    # zeros the driver derives itself, then multiplied or added
    "(x < x) * y": lambda x, y: (x < x) * y,  # noqa: PLR0124
    "(x > x) * -y": lambda x, y: (x > x) * -y,  # noqa: PLR0124
    "(x < x) + y": lambda x, y: (x < x) + y,  # noqa: PLR0124
    "float(i - i) * y": lambda x, y: (x.astype(np.int32) - x.astype(np.int32)) * y,
    "float(i ^ i) + y": lambda x, y: (x.astype(np.int32) ^ x.astype(np.int32)).astype(y.dtype)
    + y,
    "float(u & 0) * y": lambda x, y: ((x > 1).astype(np.uint32) & 0).astype(y.dtype) * y,
    # products the driver must not reassociate (deg2rad twice was x * (c * c), an ulp off)
    "deg2rad(deg2rad(x))": lambda x, y: np.deg2rad(np.deg2rad(x)),
    "rad2deg(x * 3)": lambda x, y: np.rad2deg(x * 3),
    "square(x) * 3": lambda x, y: np.square(x) * 3,
    "x == x": lambda x, y: x == x,  # noqa: PLR0124
    "x >= x": lambda x, y: x >= x,  # noqa: PLR0124
    "x != x": lambda x, y: x != x,  # noqa: PLR0124
}


def _numpy(fn: Callable[..., Any], *args: Any) -> Any:
    with np.errstate(all="ignore"):
        return fn(*args)


def check_zero_signs(got: Any, want: np.ndarray, what: str) -> None:
    """Zeros have NumPy's sign (assert_matches counts +0 and -0 as 0 ULP apart)."""
    if isinstance(got, Exception) or want.dtype.kind != "f":
        return
    g, w = np.broadcast_arrays(np.asarray(got), want)
    wrong = (w == 0) & (g == 0) & (np.signbit(g) != np.signbit(w))
    assert not wrong.any(), f"{what}: {g[wrong][:4]} where NumPy has {w[wrong][:4]}"


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", DEVICES, indirect=True)
def test_identities_of_finite_numbers_keep_special_values(device: str, dtype: np.dtype) -> None:
    """Every edge value against every other, through each identity: NumPy's bits."""
    x, y = cat.grid(dtype, dtype, "scalar")
    cases = {name: (fn, ("x", "y")) for name, fn in IDENTITIES.items()}
    got = cat.run_batched({"x": x, "y": y}, cases, "scalar")
    failures = []
    for name, fn in IDENTITIES.items():
        ufunc = np.true_divide if "/" in name else None  # (Vulkan's bound for division)
        have, want = got[name], _numpy(fn, x, y)
        if not isinstance(have, Exception):  # (on the grid, also where only x is read)
            have, want, _, _ = np.broadcast_arrays(np.asarray(have), want, x, y)
        try:
            cat.check(device, have, want, [x, y], f"{name} ({dtype})", ufunc)
            check_zero_signs(have, want, f"{name} ({dtype})")
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, "\n".join(failures)


SAME = {"u(x, x)": lambda u: lambda x: u(x, x), "u(x, -x)": lambda u: lambda x: u(x, -x),
        "u(-x, x)": lambda u: lambda x: u(-x, x)}


@pytest.mark.parametrize("dtype", (*FLOATS, np.dtype("i4"), np.dtype("i8")), ids=str)
@pytest.mark.parametrize("device", DEVICES, indirect=True)
def test_binary_ops_of_one_value(device: str, dtype: np.dtype) -> None:
    """Every binary ufunc with both operands one value (or it and its negation), where a
    compiler sees that they are, within the op's bound on the device."""
    x = cat.edge_values(dtype)
    fns = {(u, form): make(u) for u in cat.BINARY for form, make in SAME.items()}
    fns = {k: fn for k, fn in fns.items() if not isinstance(cat.numpy_result(fn, x), Exception)}
    got = cat.run_batched({"x": x}, {k: (fn, ("x",)) for k, fn in fns.items()}, "scalar")
    failures = []
    for (u, form), fn in fns.items():
        try:
            cat.check(device, got[(u, form)], cat.numpy_result(fn, x), [x, x],
                      f"{form.replace('u', u.__name__, 1)} ({dtype})", u)
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", DEVICES, indirect=True)
def test_sign_of_zeros_infinities_and_nan(device: str, dtype: np.dtype) -> None:
    """np.sign(+0.0) is +0.0 and np.sign(-0.0) is NumPy's zero too (lavapipe gave -0.0)."""
    info = np.finfo(dtype)
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5, info.smallest_subnormal,
                  -info.smallest_subnormal, info.tiny, info.max, info.min], dtype)
    got = cat.run_batched({"x": x}, {"sign": (np.sign, ("x",)),
                                     "sign of sum": (lambda v: np.sign(v + v), ("x",))},
                          "scalar")
    for name, want in (("sign", np.sign(x)), ("sign of sum", _numpy(lambda v: np.sign(v + v), x))):
        cat.check(device, got[name], want, [x], f"{name} ({dtype})", np.sign)
        check_zero_signs(got[name], want, f"{name} ({dtype})")


def subnormals(dtype: np.dtype) -> np.ndarray:
    """Every power of two below the normal range, the largest subnormal, odd mantissas, their
    negatives, and the normal numbers around the boundary."""
    info = np.finfo(dtype)
    k = np.arange(info.nmant)
    small = info.smallest_subnormal
    with np.errstate(over="ignore"):
        values = np.concatenate([small * (2.0 ** k), small * (2.0 ** k * 3 + 1)[:-2],
                                 [info.tiny - small, info.tiny, info.tiny * 1.5]])
    values = values.astype(dtype)
    return np.concatenate([values, -values[::7]])


LOGS = (np.log, np.log2, np.log10, np.cbrt)


def check_each(device: str, x: np.ndarray, dtype: np.dtype,
               fns: dict[str, tuple[Callable[..., Any], np.ufunc]]) -> None:
    """Every ``fn(x)`` of ``fns`` (name -> (fn, the ufunc whose bound holds it)) in one batch
    on ``device``, against NumPy; one failure listing every function that misses."""
    got = cat.run_batched({"x": x}, {k: (fn, ("x",)) for k, (fn, _) in fns.items()}, "scalar")
    failures = []
    for name, (fn, u) in fns.items():
        try:
            cat.check(device, got[name], _numpy(fn, x), [x] * u.nin, f"{name} ({dtype})", u)
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", DEVICES, indirect=True)
def test_logs_and_roots_of_subnormals(device: str, dtype: np.dtype) -> None:
    """log, log2, log10, cbrt and power of subnormals within the op's bound (lavapipe's log2
    of 1.4e-45 was -127, NumPy's -149: the target reads a subnormal by its bits)."""
    x = subnormals(dtype)
    half = dtype.type(0.5)
    fns: dict[str, tuple[Callable[..., Any], np.ufunc]] = {
        u.__name__: (u, u) for u in LOGS}
    fns["abs(x) ** 0.5"] = (lambda v: np.abs(v) ** half, np.power)
    fns["abs(x) ** -0.25"] = (lambda v: np.abs(v) ** -dtype.type(0.25), np.power)
    check_each(device, x, dtype, fns)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", DEVICES, indirect=True)
def test_logs_and_arccos_near_one(device: str, dtype: np.dtype) -> None:
    """log, log2, log10, log1p and arccos where the result is near zero, and a power that
    scales log2(x) up, within the op's bound in ULPs (Vulkan bounds its builtins absolutely
    there: lavapipe's log(0.9999999) was 13 % off; the target uses a series for the logs of x
    in [0.5, 2], and arccos's half angle above 0.5)."""
    eps = np.finfo(dtype).eps
    k = np.arange(1, 400)
    x = np.concatenate([1 + k * eps, 1 - k * eps / 2, np.linspace(0.5, 2.0, 301)]).astype(dtype)
    fns: dict[str, tuple[Callable[..., Any], np.ufunc]] = {
        u.__name__: (u, u) for u in (np.log, np.log2, np.log10, np.arccos)}
    fns["log1p(x - 1)"] = (lambda v: np.log1p(v - 1), np.log1p)
    fns["power(x, 3000)"] = (lambda v: v ** 3000.0, np.power)  # (exp2(3000 log2(x)))
    check_each(device, x, dtype, fns)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("device", DEVICES, indirect=True)
def test_power_by_one_is_exact(device: str, dtype: np.dtype) -> None:
    """x ** 1 with the exponent known only at run time is x (through exp2(log2(x)) the largest
    float32 overflowed to inf on lavapipe)."""
    x = cat.edge_values(dtype)
    for e in (1, np.ones(len(x), np.int8)):
        got = cat.run_batched({"x": x, "e": e}, {"pow": (np.power, ("x", "e"))}, "scalar")["pow"]
        cat.check(device, got, np.power(x, e), [x, x], f"x ** {e!r} ({dtype})", np.power)
        if not isinstance(got, Exception):  # (and exactly: inf is 1 ULP from the largest float)
            cat.check(device, got, np.power(x, e), [x, x], f"x ** {e!r} ({dtype})")
