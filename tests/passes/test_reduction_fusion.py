"""Reduction fusion: how many kernels the common patterns take (``len(f.lower(...).kernels)``),
their values against NumPy, and the plan decisions behind them (lane direction, stages,
splits, local memory) as ``lower()`` reports them.

Values are compared with an exact (long double) evaluation of the same NumPy function:
|got - exact| <= k * eps * scale, with k = log2(n) + 13 (the pairwise-sum bound, see
test_reductions.py) plus the ULP bounds of the transcendental ops involved, and scale the
magnitude the rounding errors are relative to (stated per test).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from test_reductions import assert_reduction_matches

from fusejit import fuse
from fusejit.ir.ops import Op
from fusejit.passes.partition import DeviceLimits, choose_strategy
from fusejit.testing import assert_matches, op_ulp

EPS32 = float(np.finfo(np.float32).eps)
EXP_ULP = op_ulp(Op.EXP, np.float32)
LOG_ULP = op_ulp(Op.LOG, np.float32)


def assert_close(got: Any, exact: np.ndarray, k: float, scale: np.ndarray | float,
                 dtype: type = np.float32, what: str = "result") -> None:
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype) and got.shape == exact.shape, (what, got.dtype, got.shape)
    eps = float(np.finfo(dtype).eps)
    err = np.abs(got.astype(np.longdouble) - exact)
    bound = k * eps * np.asarray(scale, dtype=np.longdouble)
    bad = ~(err <= bound)
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {got.size} beyond {k:.1f} eps * scale; "
                           f"worst error {float(err.max())}")


def lowered_text(f: Any, *args: Any) -> str:
    return str(f.lower(*args))


# -- the patterns ---------------------------------------------------------------------------------


def softmax(x: Any) -> Any:
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


def layernorm(x: Any, gamma: Any, beta: Any) -> Any:
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.var(x, axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def rmsnorm(x: Any, w: Any) -> Any:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def logsumexp(x: Any) -> Any:
    m = np.max(x, axis=1, keepdims=True)
    return (m + np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)))[:, 0]


# rows short enough to stay in registers between the stages, and rows that are re-read
ROW_SHAPES = [(33, 300), (6, 2500)]


@pytest.mark.parametrize("shape", ROW_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_softmax_over_rows_is_one_kernel(shape: tuple[int, int], rng: np.random.Generator
                                         ) -> None:
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    f = fuse(softmax)
    low = f.lower(x)
    assert len(low.kernels) == 1
    assert "2 stages in one pass" in low.kernels[0].reason
    assert "reduces max %1 | then sum" in str(low)
    got = f(x)
    exact = softmax(x.astype(np.longdouble))
    # each exp is off by EXP_ULP, the sum adds its tree bound, the division one rounding
    assert_close(got, exact, 2 * EXP_ULP + math.log2(shape[1]) + 14, exact, what="softmax")


@pytest.mark.parametrize("shape", ROW_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_layernorm_is_one_kernel(shape: tuple[int, int], rng: np.random.Generator) -> None:
    x = (rng.standard_normal(shape) + 3).astype(np.float32)
    gamma = rng.standard_normal(shape[1]).astype(np.float32)
    beta = rng.standard_normal(shape[1]).astype(np.float32)
    f = fuse(layernorm)
    low = f.lower(x, gamma, beta)
    assert len(low.kernels) == 1
    assert low.plan.groups[0].row_stores, "normalise, scale and shift run in the same kernel"
    got = f(x, gamma, beta)
    exact = layernorm(*(a.astype(np.longdouble) for a in (x, gamma, beta)))
    sigma = np.sqrt(np.var(x.astype(np.longdouble), axis=-1, keepdims=True))
    # errors of the mean and of x - mean are relative to |x|, then scaled by |gamma| / sigma
    scale = np.abs(gamma) * (np.abs(x) + np.abs(x).mean(-1, keepdims=True)) / sigma \
        + np.abs(beta) + np.abs(exact)
    assert_close(got, exact, math.log2(shape[1]) + 20, scale, what="layernorm")


def test_rmsnorm_and_logsumexp_are_one_kernel_each(rng: np.random.Generator) -> None:
    x = rng.standard_normal((40, 129)).astype(np.float32)
    w = rng.standard_normal(129).astype(np.float32)
    rms, lse = fuse(rmsnorm), fuse(logsumexp)
    assert len(rms.lower(x, w).kernels) == 1
    assert len(lse.lower(x).kernels) == 1
    exact = rmsnorm(x.astype(np.longdouble), w.astype(np.longdouble))
    assert_close(rms(x, w), exact, math.log2(129) + 16, np.abs(exact), what="rmsnorm")
    exact = logsumexp(x.astype(np.longdouble))
    # a relative error of the sum is an absolute error of its log
    assert_close(lse(x), exact, 2 * EXP_ULP + LOG_ULP + math.log2(129) + 16, np.abs(exact) + 1,
                 what="logsumexp")


def test_rmsnorm_float64(rng: np.random.Generator) -> None:
    x = rng.standard_normal((8, 1000))
    w = rng.standard_normal(1000)
    f = fuse(rmsnorm)
    assert len(f.lower(x, w).kernels) == 1
    exact = rmsnorm(x.astype(np.longdouble), w.astype(np.longdouble))
    assert_close(f(x, w), exact, math.log2(1000) + 16, np.abs(exact), np.float64, "rmsnorm64")


def test_column_mean_and_var_together_are_one_kernel(rng: np.random.Generator) -> None:
    """Horizontal fusion: both read the same columns; var's second pass is a later stage."""
    x = (rng.standard_normal((500, 37)) + 10).astype(np.float32)
    f = fuse(lambda a: (a.mean(0), a.var(0)))
    low = f.lower(x)
    assert len(low.kernels) == 1
    (group,) = low.plan.groups
    assert group.strategy.lx > 1 and not group.strategy.along_rows  # lanes across columns
    mean, var = f(x)
    assert_reduction_matches(mean, x.mean(0), "sum", x, lambda v: v.mean(0), 500, "mean(0)")
    assert_reduction_matches(var, x.var(0), "var", x, lambda v: v.var(0), 500, "var(0)")


def test_elementwise_prologue_is_fused_into_the_reduction(rng: np.random.Generator) -> None:
    x = rng.standard_normal((50, 77)).astype(np.float32)
    y = rng.standard_normal((50, 77)).astype(np.float32)
    f = fuse(lambda a, b: np.sum(np.exp(a) * b, axis=1))
    assert len(f.lower(x, y).kernels) == 1
    exact = np.sum(np.exp(x.astype(np.longdouble)) * y, axis=1)
    scale = np.sum(np.abs(np.exp(x.astype(np.longdouble)) * y), axis=1)
    assert_close(f(x, y), exact, EXP_ULP + 1 + math.log2(77) + 13, scale, what="prologue")


def test_elementwise_epilogue_is_fused_into_the_reduction(rng: np.random.Generator) -> None:
    x = rng.random((64, 301)).astype(np.float32)
    f = fuse(lambda a: np.sqrt(a.sum(1)) + 1)
    low = f.lower(x)
    assert len(low.kernels) == 1 and low.plan.groups[0].stores
    exact = np.sqrt(x.astype(np.longdouble).sum(1)) + 1
    assert_close(f(x), exact, math.log2(301) + 16, exact, what="epilogue")


def adam(p: Any, g: Any, m: Any, v: Any, lr: float, b1: float, b2: float, t: int) -> Any:
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat = m / (1 - b1 ** t)
    v_hat = v / (1 - b2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + 1e-8), m, v


def adam_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    shape = (123, 45)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(3)] + [
        rng.random(shape).astype(np.float32)]


def test_adam_update_four_inputs_three_outputs_is_one_kernel(rng: np.random.Generator) -> None:
    """Hyperparameters static (baked in), as a training loop with fixed settings would pass."""
    args = adam_inputs(rng)
    f = fuse(adam, static_argnames=("lr", "b1", "b2", "t"))
    hyper = {"lr": 1e-3, "b1": 0.9, "b2": 0.999, "t": 7}
    assert len(f.lower(*args, **hyper).kernels) == 1
    got = f(*args, **hyper)
    for g, w, name in zip(got, adam(*args, **hyper), ("p", "m", "v")):
        assert_matches(g, w, what=name)  # correctly rounded ops, same order: bit for bit


def test_adam_update_with_dynamic_scalar_hyperparameters(rng: np.random.Generator) -> None:
    args = adam_inputs(rng)
    f = fuse(adam)
    assert len(f.lower(*args, 1e-3, 0.9, 0.999, 7).kernels) == 1
    for g, w in zip(f(*args, 1e-3, 0.9, 0.999, 7), adam(*args, 1e-3, 0.9, 0.999, 7)):
        assert_matches(g, w)


# -- plan decisions --------------------------------------------------------------------------------


def along_rows(s: Any) -> bool:
    """Lanes run along the reduced axis: work-items in a work-group (GPU), or the lanes of an
    OpenCL vector inside each work-item (CPU)."""
    return (s.along_rows and s.ly > 1) or (s.vec > 1 and s.vec_axis == "rows")


def across_outputs(s: Any) -> bool:
    return (s.lx > 1 and not s.along_rows and s.vec == 1) or (
        s.vec > 1 and s.vec_axis == "outputs")


def test_column_and_middle_axis_reductions_put_lanes_across_contiguous_outputs(
        rng: np.random.Generator) -> None:
    """Neighbouring lanes must read neighbouring addresses. A broadcast weight must not decide:
    in sum(x * w, axis=0) the weight does not move along the reduced axis."""
    x = rng.standard_normal((5000, 3)).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    cube = rng.standard_normal((6, 300, 5)).astype(np.float32)
    rows = rng.standard_normal((64, 300)).astype(np.float32)
    f = fuse(lambda a, b, c, d: (np.sum(a * b, axis=0), np.sum(b * a, axis=0), c.max(1),
                                 d.sum(1), d.T.sum(1)))
    low = f.lower(x, w, cube, rows)
    strategies = [g.strategy for g in low.plan.groups]
    assert len(strategies) == 4  # both column sums share one kernel
    for s in strategies[:2] + strategies[3:]:  # columns, middle axis, rows.T: across outputs
        assert across_outputs(s), s
    assert along_rows(strategies[2])  # contiguous rows: along the row
    got = f(x, w, cube, rows)
    want = (np.sum(x * w, axis=0), np.sum(w * x, axis=0), cube.max(1), rows.sum(1),
            rows.T.sum(1))
    scales = (np.sum(np.abs(x * w), 0), np.sum(np.abs(x * w), 0), None, np.abs(rows).sum(1),
              np.abs(rows).sum(0))
    for g, wnt, scale, n in zip(got, want, scales, (5000, 5000, 300, 300, 64)):
        if scale is None:
            assert_matches(g, wnt)
        else:
            assert_close(g, wnt.astype(np.longdouble), math.log2(n) + 14, scale)


def test_long_rows_with_few_outputs_are_split_not_staged(rng: np.random.Generator) -> None:
    """var of one long row: staging it would put the whole row on one work-group, so the mean
    and the squared deviations are each split (partial + combine)."""
    x = rng.standard_normal(3 * 2**18).astype(np.float32)
    f = fuse(lambda a: a.var())
    low = f.lower(x)
    assert [k.role for k in low.kernels] == ["partial", "combine"] * 2
    assert "a pass of its own" in low.kernels[2].reason
    assert_reduction_matches(f(x), x.var(), "var", x, np.var, x.size, "var")


def test_lower_prints_kernels_their_reductions_and_stores(rng: np.random.Generator) -> None:
    x = rng.standard_normal((7, 13)).astype(np.float32)
    text = lowered_text(fuse(lambda a: (softmax(a), a.sum(0))), x)
    assert "2 kernels:" in text
    assert "reduces max %1 | then sum %" in text and "-> out0" in text and "-> out1" in text
    text = lowered_text(fuse(lambda a: a.sum()), np.ones(2**20, np.float32))
    assert "combines the partial results of fj_k0_partial" in text
    assert "split: 1048576 elements per output but only 1 work-group(s)" in text


def test_strategy_fits_local_memory() -> None:
    """A kernel with many fused reductions keeps a tree buffer per reduction per lane."""
    limits = DeviceLimits(max_work_group=1024, local_mem=4096, compute_units=16, is_gpu=True)
    for contiguous in (True, False):
        s = choose_strategy((64, 4096), (1,), 1, contiguous, limits, lane_bytes=48)
        assert s.lx * s.ly * 48 <= 4096, s
    roomy = choose_strategy((64, 4096), (1,), 1, True, limits, lane_bytes=0)
    assert roomy.lx * roomy.ly * 48 > 4096  # the budget is what made the difference


def test_full_reductions_and_argmax_over_all_axes_share_one_kernel(rng: np.random.Generator
                                                                   ) -> None:
    """np.argmax(x) of a 2-D x reduces all axes at once (the reduced index is the flat index),
    so it fuses with x.max() and x.sum() instead of reducing a flattened copy separately."""
    x = rng.integers(-4, 5, (33, 65)).astype(np.float32)  # ties: the first one wins
    f = fuse(lambda a: (a.max(), np.argmax(a), a.argmin(keepdims=True), a.sum()))
    assert len(f.lower(x).kernels) == 1
    got = f(x)
    for g, w in zip(got[:3], (x.max(), np.argmax(x), x.argmin(keepdims=True))):
        assert_matches(g, w)
    assert_reduction_matches(got[3], x.sum(), "sum", x, np.sum, x.size, "sum")


def test_lanes_follow_memory_for_strided_and_offset_device_views(
        dev: Any, rng: np.random.Generator) -> None:
    """A transposed device array: its logical rows are columns in memory, so summing them puts
    lanes across outputs, and summing its columns puts lanes along them."""
    x = rng.standard_normal((300, 70)).astype(np.float32)
    f = fuse(lambda a: (a.sum(1), a.sum(0)))
    for view, host in ((dev(x).T, x.T), (dev(x)[3:].T, x[3:].T)):
        low = f.lower(view)
        by_axes = {g.axes: g.strategy for g in low.plan.groups}
        assert across_outputs(by_axes[(1,)])  # rows of x.T: strided in memory
        assert along_rows(by_axes[(0,)])  # columns of x.T: contiguous in memory
        rows, cols = f(view)
        exact = host.astype(np.longdouble)
        assert_close(rows.get(), exact.sum(1), math.log2(host.shape[1]) + 14,
                     np.abs(host).sum(1))
        assert_close(cols.get(), exact.sum(0), math.log2(host.shape[0]) + 14,
                     np.abs(host).sum(0))
