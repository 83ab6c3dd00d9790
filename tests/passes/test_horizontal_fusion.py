"""Horizontal fusion: an elementwise output over a reduction's input space is stored by the
reduction's first pass (passes/visit.py). Kernel counts (``f.lower(...).kernels``, launches),
values against NumPy, what explain() says, and the cases that must stay separate kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from test_reductions import assert_reduction_matches

import fusejit
from fusejit import fuse
from fusejit.ir.ops import Op
from fusejit.testing import assert_matches, op_ulp

FUSED = "horizontal fusion"


def kernels(f: Any, *args: Any) -> int:
    return len(f.lower(*args).kernels)


def on_gpu() -> bool:
    """Does the default device take the GPU strategies (see passes/visit.py visit_pays)?"""
    if fusejit.get_default_device() == "vulkan":
        return True
    from fusejit.runtime.opencl.backend import device_info

    return device_info(fusejit.default_queue().device).limits.is_gpu


def check(fn: Callable[..., Any], args: tuple, models: tuple[Any, ...], want_kernels: int,
          launches: list) -> Any:
    """Run ``fn`` fused and with NumPy; ``models``: per output, an ulp bound (elementwise) or
    ("sum"|"exact", spell, n) for a reduction checked by its error model."""
    f = fuse(fn)
    got, want = f(*args), fn(*args)
    for i, (g, w, m) in enumerate(zip(got, want, models, strict=True)):
        if isinstance(m, tuple):
            model, spell, n = m
            assert_reduction_matches(g, w, model, args[0], spell, n, what=f"output {i}")
        else:
            assert_matches(g, w, ulp=m, what=f"output {i}")
    assert kernels(f, *args) == want_kernels
    f(*args)  # the second call tunes large elementwise kernels, rerunning the ones before
    before = len(launches)
    f(*args)
    assert len(launches) - before == want_kernels
    return f


@pytest.mark.parametrize("n", [1000, 1 << 20])  # one kernel; a split (partials + combine)
def test_full_reduction_stores_the_elementwise_output(rng, launches, device, n: int) -> None:
    x = rng.standard_normal(n).astype(np.float32)
    # a split reduction (partials + combine) takes the stores on CPUs only (visit_pays)
    split_on_gpu = n > 1000 and on_gpu()
    f = check(lambda x: (np.exp(x) * 2, x.sum()), (x,),
              (op_ulp(Op.EXP, np.float32) + 1, ("sum", np.sum, n)),
              1 if n == 1000 else 3 if split_on_gpu else 2, launches)
    assert (FUSED in str(f.explain(x))) != split_on_gpu
    assert (FUSED in str(f.lower(x))) != split_on_gpu


@pytest.mark.parametrize("shape", [(37, 130), (64, 256)])  # odd rows; vector lanes on CPUs
def test_row_and_column_reductions(rng, launches, device, shape: tuple[int, int]) -> None:
    x = rng.standard_normal(shape).astype(np.float32)
    check(lambda x: (x * 3 + 1, x.max(axis=1)), (x,), (0, ("exact", None, 0)), 1, launches)
    # columns: fused on GPUs only (a CPU's column lanes stride down the rows, see visit.py)
    check(lambda x: (np.sqrt(np.abs(x)), x.sum(axis=0)), (x,),
          (0, ("sum", lambda a: np.sum(a, axis=0), shape[0])), 1 if on_gpu() else 2, launches)


def test_argmax_and_two_outputs(rng, launches) -> None:  # (Vulkan has no int64 index)
    x = rng.standard_normal((37, 130)).astype(np.float32)
    check(lambda x: (x * 2, x.argmax(axis=1), -x), (x,), (0, ("exact", None, 0), 0), 1,
          launches)


def test_several_axes_and_keepdims(rng, launches) -> None:
    x = rng.standard_normal((5, 6, 7)).astype(np.float32)
    spell = lambda a: np.sum(a, axis=(0, 2), keepdims=True)  # noqa: E731
    check(lambda x: (x - 1, np.sum(x, axis=(0, 2), keepdims=True)), (x,),
          (0, ("sum", spell, 35)), 1, launches)


def test_staged_reductions_keep_their_row_fusion(rng, launches, device) -> None:
    x = rng.standard_normal((64, 512)).astype(np.float32)

    def softmax_and_scaled(x: Any) -> Any:
        e = np.exp(x - np.max(x, axis=1, keepdims=True))
        return e / np.sum(e, axis=1, keepdims=True), x * 0.5

    f = fuse(softmax_and_scaled)
    got, want = f(x), softmax_and_scaled(x)
    assert_matches(got[0], want[0], ulp=2 * op_ulp(Op.EXP, np.float32) + 600)
    assert_matches(got[1], want[1])
    assert kernels(f, x) == 1
    spell = lambda a: np.var(a, axis=1)  # noqa: E731
    check(lambda x: (np.var(x, axis=1), x + 1), (x,), (("sum", spell, 512), 0), 1, launches)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int64, np.uint8])
def test_dtypes(rng, launches, dtype: type) -> None:
    x = (rng.standard_normal((48, 80)) * 10).astype(dtype)
    model = "exact" if np.dtype(dtype).kind in "iu" else "sum"
    check(lambda x: (x * x, x.sum(axis=1)), (x,),
          (0, (model, lambda a: np.sum(a, axis=1), 80)), 1, launches)


def test_outputs_wider_than_the_reduction(rng, launches) -> None:
    x = rng.standard_normal(4096).astype(np.float32)
    b = x > 0
    check(lambda x: (x.astype(np.float64) * 3, x.sum()), (x,), (0, ("sum", np.sum, 4096)), 1,
          launches)
    check(lambda b: (~b, b.any(), b.astype(np.int64) + 1), (b,), (0, ("exact", None, 0), 0), 1,
          launches)


def test_strided_input(rng, dev) -> None:
    x = rng.standard_normal((96, 40)).astype(np.float32)
    t = dev(x).T  # (40, 96) on the device, column-major: to the lanes a column sum
    f = fuse(lambda t: (t * 2, t.sum(axis=1)))
    got = f(t)
    assert_matches(got[0], x.T * 2)
    assert_reduction_matches(got[1].get(), x.T.sum(axis=1), "sum", x.T, lambda a: a.sum(axis=1), 96,
                             what="sum")
    assert kernels(f, t) == (1 if on_gpu() else 2)  # CPU: lanes along memory: t's columns
    g = fuse(lambda t: (t * 2, t.sum(axis=0)))
    got = g(t)
    assert_matches(got[0], x.T * 2)
    assert_reduction_matches(got[1].get(), x.T.sum(axis=0), "sum", x.T, lambda a: a.sum(axis=0), 40,
                             what="sum")
    assert kernels(g, t) == 1


def test_what_stays_a_separate_kernel(rng) -> None:
    x = rng.standard_normal((32, 64)).astype(np.float32)
    y = rng.standard_normal((32, 64)).astype(np.float32)
    # no input in common: nothing read twice, so nothing to share
    f = fuse(lambda x, y: (y * 2, x.sum()))
    assert kernels(f, x, y) == 2
    assert FUSED not in str(f.lower(x, y))
    got = f(x, y)
    assert_matches(got[0], y * 2)
    # a smaller output (broadcast) is not at the reduction's row index
    g = fuse(lambda x: (x[0] * 2, x.sum(axis=1)))
    assert kernels(g, x) == 2
    assert_matches(g(x)[0], x[0] * 2)

    # an in-place write of the reduction's own input: a later stage would re-read it
    def inplace(x: Any) -> Any:
        s = x.sum()
        x[...] = x * 2
        return s

    f = fuse(inplace)
    a = x.copy()
    s = f(a)
    assert_matches(a, x * 2)
    assert_reduction_matches(s, np.sum(x), "sum", x, np.sum, x.size, what="sum")
    assert FUSED not in str(f.lower(x.copy()))


def test_shared_and_unshared_inputs(rng, launches) -> None:
    x = rng.standard_normal((16, 256)).astype(np.float32)
    w = rng.standard_normal(256).astype(np.float32)
    # the output reads x and w, the reduction x: x's read is shared
    f = check(lambda x, w: (x * w, x.sum(axis=1)), (x, w),
              (0, ("sum", lambda a: a.sum(axis=1), 256)), 1, launches)
    assert FUSED in str(f.lower(x, w))


@pytest.mark.parametrize("case", ["full", "rows", "cols", "softmax"])
def test_gpu_strategies(rng, launches, gpu_style, case: str) -> None:
    x = rng.standard_normal((300, 1000) if case != "full" else 1 << 18).astype(np.float32)
    if case == "full":
        # split over work-groups: the GPU strategy keeps the elementwise kernel (visit_pays)
        check(lambda x: (x * 3, x.sum()), (x,), (0, ("sum", np.sum, x.size)), 3, launches)
    elif case == "rows":
        check(lambda x: (x * 3, x.sum(axis=1)), (x,),
              (0, ("sum", lambda a: a.sum(axis=1), 1000)), 1, launches)
    elif case == "cols":
        check(lambda x: (x * 3, x.min(axis=0)), (x,), (0, ("exact", None, 0)), 1, launches)
    else:
        spell = lambda a: np.var(a, axis=1)  # noqa: E731
        check(lambda x: (np.var(x, axis=1), x - 1), (x,), (("sum", spell, 1000), 0), 1,
              launches)
