"""Singular values (fusejit/codegen/svd.py, one-sided Jacobi) against NumPy's LAPACK:
np.linalg.svd(compute_uv=False), np.linalg.svdvals and the matrix norms of ord 2, -2, 'nuc';
square, tall, wide, stacked, 1x1, rank-deficient and empty matrices; dtypes and errors.
Tolerance: ``8 * max(m, n) * eps * sigma_max`` (Jacobi is accurate to a few eps per sweep)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import fusejit
from fusejit import fuse
from fusejit.codegen import svd as svd_source

RNG = np.random.default_rng(3)
SHAPES = [(4, 4), (6, 3), (3, 5), (2, 2, 5, 4), (1, 1)]


def _close(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    scale = np.max(np.abs(want), initial=1.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * 8 * np.finfo(want.dtype).eps * scale)


def _norms(a):
    return (np.linalg.svd(a, compute_uv=False), np.linalg.svdvals(a),
            np.linalg.norm(a, 2, axis=(-2, -1)), np.linalg.norm(a, -2, axis=(-2, -1)),
            np.linalg.norm(a, "nuc", axis=(-2, -1)))


def test_singular_values_and_norms():
    xs = [RNG.standard_normal(s) for s in SHAPES]
    xs.append(np.outer(np.arange(1.0, 6.0), np.arange(1.0, 5.0)))  # rank 1
    xs.append(RNG.standard_normal((5, 4)).astype(np.float32))

    def fn(*arrays):
        return tuple(v for a in arrays for v in _norms(a))

    for got, want in zip(fuse(fn)(*xs), fn(*xs)):
        _close(got, want)


def test_norm_axes_keepdims_and_integer_input():
    x = RNG.integers(-5, 5, (3, 4, 5))

    def fn(a):
        return (np.linalg.norm(a, 2, axis=(0, 2)), np.linalg.norm(a, "nuc", axis=(2, 0),
                                                                  keepdims=True),
                np.linalg.norm(a[0], -2), np.linalg.norm(a[0].T, ord=2, keepdims=True))

    for got, want in zip(fuse(fn)(x), fn(x)):
        _close(got, want)


def test_matrix_norm_and_cond():
    x = RNG.standard_normal((2, 4, 3))
    z = np.zeros((2, 2))

    def fn(a, b):
        return (np.linalg.matrix_norm(a), np.linalg.matrix_norm(a, ord=2, keepdims=True),
                np.linalg.matrix_norm(a, ord="nuc"), np.linalg.cond(a), np.linalg.cond(a, -2),
                np.linalg.cond(b))

    with np.errstate(all="ignore"):
        for got, want in zip(fuse(fn)(x, z), fn(x, z)):
            _close(got, want)
    with pytest.raises(fusejit.UnsupportedOperationError, match="inverse"):
        fuse(lambda a: np.linalg.cond(a, 1))(np.eye(3))


def test_fused_prologue_and_epilogue():
    x = RNG.standard_normal((4, 6))
    f = fuse(lambda a: np.linalg.svdvals(a * 2 + 1) ** 2)
    assert len(f.lower(x).module.kernels) == 1
    _close(f(x), np.linalg.svdvals(x * 2 + 1) ** 2)


def test_empty_and_errors():
    _close(fuse(np.linalg.svdvals)(np.ones((0, 3))), np.linalg.svdvals(np.ones((0, 3))))
    for call, error, text in [
        (lambda a: np.linalg.svdvals(a[0]), np.linalg.LinAlgError, "two-dimensional"),
        (lambda a: np.linalg.svd(a.astype(np.float16), compute_uv=False), TypeError, "float16"),
    ]:
        with pytest.raises(error, match=text):
            call(np.ones((3, 3)))
        with pytest.raises(error, match=text):
            fuse(call)(np.ones((3, 3)))
    with pytest.raises(fusejit.UnsupportedOperationError, match="compute_uv=False"):
        fuse(lambda a: np.linalg.svd(a))(np.ones((3, 3)))


def test_validate_mode():
    x = RNG.standard_normal((3, 5, 4)).astype(np.float32)
    f = fuse(lambda a: np.linalg.norm(a, 2, axis=(1, 2)), validate=True)
    _close(f(x), np.linalg.norm(x, 2, axis=(1, 2)))


@pytest.mark.slow  # PoCL takes ~10 s to build a kernel with barriers in loops
@pytest.mark.skipif(os.environ.get("FUSEJIT_FUZZ_LONG") != "1",
                    reason="long: set FUSEJIT_FUZZ_LONG=1 (PoCL builds barrier loops slowly)")
@pytest.mark.parametrize("wg", [2, 4])
def test_work_group_shape(monkeypatch, wg):
    """The GPU shape (column pairs rotated in parallel, U in local memory) forced on PoCL."""
    monkeypatch.setattr(svd_source, "work_group", lambda sm, pairs: wg)
    xs = [RNG.standard_normal((3, 9, 7)), RNG.standard_normal((5, 8)).astype(np.float32)]

    def fn(a, b):
        return np.linalg.svdvals(a), np.linalg.norm(b.T, "nuc")

    for got, want in zip(fuse(fn)(*xs), fn(*xs)):
        _close(got, want)


def test_scratch_matrices_fence_global_memory(monkeypatch):
    """A matrix beyond local memory works in a global scratch buffer that the work-group's items
    share, so the barriers between rotation rounds fence global memory too (a local fence
    alone would let a round read columns another item has not yet written)."""
    import dataclasses

    from fusejit.runtime.opencl import backend as opencl

    real = opencl.device_info

    def small_local(device):
        info = real(device)
        limits = dataclasses.replace(info.limits, is_gpu=True, max_work_group=256,
                                     local_mem=2048)
        return dataclasses.replace(info, key=info.key + " / small local", limits=limits)
    monkeypatch.setattr(opencl, "device_info", small_local)
    x = RNG.standard_normal((2, 30, 20)).astype(np.float32)
    f = fuse(lambda a: np.linalg.svdvals(a))
    source = f.lower(x).module.kernels[0].source
    assert "CLK_GLOBAL_MEM_FENCE" in source and "__global float *U" in source
    _close(f(x), np.linalg.svdvals(x))
