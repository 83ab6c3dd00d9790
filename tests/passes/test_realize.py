"""Realization (fusejit/passes/realize.py): unrolled time-stepping loops stay linear.

A stencil step reads the previous step at several shifted positions; fused into one kernel,
every step recomputed all earlier ones per element and the source grew exponentially with the
steps. These tests pin the class: kernels and source grow linearly with the steps (stencils of
several shapes, the copy-and-assign and the concatenate forms, in place), loops without shifts
(Mandelbrot's masks) stay one kernel, and every result is NumPy's.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from fusejit import fuse
from fusejit.testing import assert_matches

A = 0.1


def heat_copy(u: np.ndarray, steps: int) -> np.ndarray:
    for _ in range(steps):
        new = u.copy()
        new[1:-1] = u[1:-1] + A * (u[2:] - 2 * u[1:-1] + u[:-2])
        u = new
    return u


def heat_concat(u: np.ndarray, steps: int) -> np.ndarray:
    for _ in range(steps):
        u = np.concatenate([u[:1], u[1:-1] + A * (u[2:] - 2 * u[1:-1] + u[:-2]), u[-1:]])
    return u


def laplace_2d(u: np.ndarray, steps: int) -> np.ndarray:
    for _ in range(steps):
        new = u.copy()
        new[1:-1, 1:-1] = u[1:-1, 1:-1] + A * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:]
                                              + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
        u = new
    return u


def wave_roll(u: np.ndarray, steps: int) -> np.ndarray:
    """Periodic boundaries through np.roll, a wider (5-point) 1-D stencil."""
    for _ in range(steps):
        u = u + A * (np.roll(u, 2) + np.roll(u, 1) - 4 * u + np.roll(u, -1) + np.roll(u, -2))
    return u


STENCILS = {
    "heat_copy": (heat_copy, (256,)),
    "heat_concat": (heat_concat, (256,)),
    "laplace_2d": (laplace_2d, (24, 40)),
    "wave_roll": (wave_roll, (256,)),
}


def _lowered(fn, steps: int, shape: tuple[int, ...]):
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    return fuse(lambda u: fn(u, steps)).lower(x)


@pytest.mark.parametrize("name", sorted(STENCILS))
def test_stencil_steps_grow_linearly(name):
    """Doubling the steps at most doubles the kernels and the source (plus one kernel's worth),
    and the kernels repeat: the program holds a bounded number of distinct functions."""
    fn, shape = STENCILS[name]
    small, big = _lowered(fn, 8, shape), _lowered(fn, 16, shape)
    assert 1 < len(big.kernels) <= 2 * len(small.kernels) + 1
    longest = max(len(k.source) for k in big.kernels)
    assert len(big.source) <= 2 * len(small.source) + longest
    assert len({k.source for k in big.kernels}) <= 4
    assert longest < 40_000  # a kernel holds a few steps, not all of them


@pytest.mark.parametrize("name", sorted(STENCILS))
@pytest.mark.parametrize("steps", [1, 3, 12])
def test_stencil_matches_numpy(name, steps):
    fn, shape = STENCILS[name]
    x = np.random.default_rng(steps).random(shape, dtype=np.float32)
    assert_matches(fuse(lambda u: fn(u, steps))(x), fn(x, steps))


def test_fifty_steps_are_quick_to_lower():
    """50 steps: a kernel a step or two, a handful of distinct functions (the ``fuse`` of
    issue 31 ran past 11 minutes)."""
    low = _lowered(heat_concat, 50, (512,))
    assert 25 <= len(low.kernels) <= 50
    assert len(low.source) < 50_000


def test_in_place_steps():
    """Steps written into the argument: realized steps read its old value before the last
    kernel writes it, and the argument ends as NumPy's would."""
    def steps_in_place(u):
        for _ in range(10):
            u[1:-1] = u[1:-1] + A * (u[2:] - 2 * u[1:-1] + u[:-2])
        return u.sum()

    x = np.random.default_rng(1).random(300, dtype=np.float32)
    ours, theirs = x.copy(), x.copy()
    total = fuse(steps_in_place)(ours)
    expected = steps_in_place(theirs)
    assert_matches(ours, theirs)
    np.testing.assert_allclose(total, expected, rtol=1e-5)


def test_reduction_and_second_output_read_realized_steps():
    """A reduction over the last step and an output of an intermediate step load the realized
    values (and run after the kernels that store them)."""
    def f(u):
        mid = heat_copy(u, 6)
        last = heat_copy(mid, 6)
        return mid, last.max(), (last - mid).sum()

    x = np.random.default_rng(2).random(1000, dtype=np.float32)
    got = fuse(f)(x)
    want = f(x)
    assert_matches(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-5)


def mandelbrot(cr: np.ndarray, ci: np.ndarray, steps: int) -> np.ndarray:
    zr, zi = np.zeros_like(cr), np.zeros_like(ci)
    count = np.zeros(cr.shape, np.int32)
    for _ in range(steps):
        mask = zr * zr + zi * zi <= 4.0
        zr, zi = (np.where(mask, zr * zr - zi * zi + cr, zr),
                  np.where(mask, 2 * zr * zi + ci, zi))
        count = count + mask
    return count


def test_mandelbrot_stays_one_linear_kernel():
    """Values read only at their own index are never recomputed: no realization, one kernel,
    source linear in the steps."""
    rng = np.random.default_rng(3)
    cr = rng.uniform(-2, 1, 500).astype(np.float32)
    ci = rng.uniform(-1.5, 1.5, 500).astype(np.float32)
    lows = [fuse(lambda a, b, s=s: mandelbrot(a, b, s)).lower(cr, ci) for s in (10, 20)]
    assert [len(low.kernels) for low in lows] == [1, 1]
    assert len(lows[1].source) <= 2.2 * len(lows[0].source)
    assert_matches(fuse(lambda a, b: mandelbrot(a, b, 20))(cr, ci), mandelbrot(cr, ci, 20))


def test_cheap_shifted_reads_stay_fused():
    """A value read at two positions whose recomputation costs less than the limit (an exp and
    two ops: 22 adds' worth) is recomputed, not stored: one kernel, as before."""
    def f(x):
        y = np.exp(x) * 2 + 1
        return y[1:] - y[:-1] + y[1:] * y[:-1]

    x = np.random.default_rng(4).random(100, dtype=np.float32)
    assert len(fuse(f).lower(x).kernels) == 1
    assert_matches(fuse(f)(x), f(x), ulp=8)  # (exp: the OpenCL bound)


def test_big_builds_say_so_on_the_logger(caplog):
    """A program of many distinct kernels (seconds to build) is announced at INFO on the
    ``fusejit`` logger before it is built; a small one is not."""
    def many(x):
        return tuple(np.sin(x[: 10 + i]) * (i + 1) for i in range(8))  # 8 shapes: 8 kernels

    x = np.linspace(0, 1, 64, dtype=np.float32)
    with caplog.at_level(logging.INFO, logger="fusejit"):
        fuse(many).lower(x)
        fuse(lambda u: heat_copy(u, 2)).lower(x)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("building")]
    assert len(said) == 1 and "8 kernels" in said[0], said


def _rows_heat(u, steps):
    for _ in range(steps):
        new = u.copy()
        new[:, 1:-1] = u[:, 1:-1] + A * (u[:, 2:] - 2 * u[:, 1:-1] + u[:, :-2])
        u = new
    return u


@pytest.mark.parametrize("where", ["prologue", "epilogue"])
def test_stencil_around_a_matrix_product(where):
    """Steps feeding a GEMM are stored by ordinary kernels, not inlined into its tile loads;
    steps after it read its stored result: the source stays small either way."""
    def f(a, w):
        return _rows_heat(a, 10) @ w if where == "prologue" else _rows_heat(a @ w, 10)

    rng = np.random.default_rng(5)
    a, w = rng.random((32, 48), dtype=np.float32), rng.random((48, 48), dtype=np.float32)
    low = fuse(f).lower(a, w)
    assert len(low.source) < 60_000
    np.testing.assert_allclose(fuse(f)(a, w), f(a, w), rtol=1e-5)


@pytest.mark.parametrize("device", ["opencl", "vulkan"], indirect=True)
@pytest.mark.parametrize("name", ["heat_copy", "heat_concat", "laplace_2d"])
def test_stencil_steps_on_each_device(device, name):
    """Realized steps (temporaries, kernels sharing one function) on both targets."""
    fn, shape = STENCILS[name]
    x = np.random.default_rng(6).random(shape, dtype=np.float32)
    assert_matches(fuse(lambda u: fn(u, 14))(x), fn(x, 14))


def test_output_reading_a_reduction_of_realized_steps():
    """A reduction over realized steps, and an elementwise output that reads it (reversed, so
    not its epilogue), are kernels before and after it: the output's kernel is not the one
    storing the first steps, which the reduction follows (that made a cycle)."""
    def f(x):
        u = _rows_heat(x, 10)
        return x * u.max(axis=1)[::-1, None], u

    x = np.random.default_rng(7).random((64, 64), dtype=np.float32)
    got, want = fuse(f)(x), f(x)
    assert_matches(got[0], want[0])
    assert_matches(got[1], want[1])


def heat_renormalised(u: np.ndarray, steps: int) -> np.ndarray:
    """Each step divided by its maximum: the steps are computed from reductions."""
    for _ in range(steps):
        new = u.copy()
        new[1:-1] = u[1:-1] + A * (u[2:] - 2 * u[1:-1] + u[:-2])
        u = new / new.max()
    return u


def rows_renormalised(u: np.ndarray, steps: int) -> np.ndarray:
    """Row by row, each step minus its row mean (a row reduction between the steps)."""
    for _ in range(steps):
        u = _rows_heat(u, 1)
        u = u - u.mean(axis=1, keepdims=True)
    return u


@pytest.mark.parametrize("fn, shape", [(heat_renormalised, (300,)),
                                       (rows_renormalised, (16, 40))])
def test_steps_through_reductions_stay_linear(fn, shape):
    """Realized values computed from reductions: their kernels follow the reductions', the
    reductions reading them start kernels of their own, and the source stays linear."""
    x = np.random.default_rng(8).random(shape, dtype=np.float32)
    small = fuse(lambda u: fn(u, 8)).lower(x)
    big = fuse(lambda u: fn(u, 16)).lower(x)
    assert len(big.source) <= 2 * len(small.source) + max(len(k.source) for k in big.kernels)
    assert len(big.kernels) <= 2 * len(small.kernels) + 2
    # (a mean differs from NumPy's in summation order: absolute error near zero)
    assert_matches(fuse(lambda u: fn(u, 16))(x), fn(x, 16), ulp=4, atol=1e-5)
