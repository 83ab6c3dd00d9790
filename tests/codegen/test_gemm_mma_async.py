"""The tensor-core GEMM's cp.async ring (fusejit/codegen/gemm/mma_async.py) against float64 NumPy.

On PoCL the kernels run emulated (gemm_mma.emulated(): the copies, ldmatrix and the MMAs spelled
as OpenCL C over the same layouts), so CI runs their index math: the swizzled layouts of every
operand layout (a @ b, a @ b.T, a.T @ b), edge tiles on M and N, K tails that are whole chunks
but not whole tiles, odd warp tiles, batches and split-K. Operands cp.async cannot copy (a
prologue, a leading dimension off the 16-byte chunks, another dtype in memory) take the
register path, and the kernel's reason says so. On an NVIDIA GPU the same cases run for real.
(PoCL compiles each emulated kernel in ~15 s: three cases run by default, the others with
FUSEJIT_FUZZ_LONG=1.)"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
from test_gemm_mma import _check

import fusejit
from fusejit import fuse
from fusejit.codegen.gemm import mma as gemm_mma, tune as gemm_tune
from fusejit.passes.plan import DeviceLimits
from fusejit.runtime.opencl import mma_probe

_real = mma_probe.unavailable(fusejit.default_queue()) is None

LAYOUTS = {
    "nn": (lambda a, b, c: np.maximum(a @ b + c, 0), False, False),
    "nt": (lambda a, bt, c: np.maximum(a @ bt.T + c, 0), False, True),
    "tn": (lambda at, b, c: np.maximum(at.T @ b + c, 0), True, False),
}


def _run(kind: str, shape: tuple, fn, *args):
    """(result, the kernels' reasons) under the forced MMA configuration."""
    cfg = gemm_mma.config(kind, *shape)
    ctx = gemm_mma.emulated() if not _real else _null()
    with gemm_tune.forced(cfg), ctx:
        f = fuse(fn, matmul_precision="tf32" if kind == "f16" else kind)
        low = f.lower(*args)
        return np.asarray(f(*args)), " ".join(k.reason for k in low.kernels), low.source


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _operands(rng, kind: str, m: int, n: int, k: int, ta: bool, tb: bool):
    dtype = np.float16 if kind == "f16" else np.float32
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = rng.standard_normal(n).astype(dtype)
    args = (np.ascontiguousarray(a.T) if ta else a, np.ascontiguousarray(b.T) if tb else b, c)
    return a, b, c, args


# (kind, tile MWG x NWG x KWG over WGM x WGN warps + opts, m, n, k, layout): edge tiles on M
# and N, K tails in whole 16-byte chunks, fewer k steps than stages, swizzled and unswizzled
# rows, odd ldmatrix pairs (3 n-tiles a warp), 4 stages, the fragment pipeline ("p") and
# ldmatrix of k-contiguous tiles ("l"); "tn" reads a.T, whose rows are M long (M is rounded
# up to a chunk)
_long = pytest.mark.skipif(os.environ.get("FUSEJIT_FUZZ_LONG") != "1",
                           reason="long: set FUSEJIT_FUZZ_LONG=1 (PoCL builds emulated MMAs slowly)")
CASES = [
    ("tf32", (32, 48, 16, 2, 2, "pal"), 37, 44, 28, "nt"),
    ("tf32", (32, 32, 16, 2, 2, "pa"), 37, 44, 28, "tn"),
    ("f16", (32, 64, 32, 2, 2, "pal"), 37, 72, 40, "nn"),
    # (the rest: paths the first cases share, with other parameters)
    pytest.param("tf32", (32, 32, 8, 2, 2, "asl"), 37, 44, 56, "nt", marks=_long),
    pytest.param("3xtf32", (32, 32, 16, 2, 2, "al"), 33, 36, 12, "nn", marks=_long),
    pytest.param("f16", (32, 48, 16, 2, 2, "a"), 45, 56, 24, "tn", marks=_long),
]


@pytest.mark.parametrize("kind, shape, m, n, k, layout", CASES)
def test_ring_layouts_edges_k_tails(kind, shape, m, n, k, layout):
    fn, ta, tb = LAYOUTS[layout]
    chunk = 8 if kind == "f16" else 4
    m = -(-m // chunk) * chunk if ta else m
    rng = np.random.default_rng(m * n + k)
    a, b, c, args = _operands(rng, kind, m, n, k, ta, tb)
    got, reason, src = _run(kind, shape, fn, *args)
    assert "cp.async" in reason and "register path" not in reason, reason
    ldsm = "FJ_LDSM_T(ah" in src or "FJ_LDSM_T(bh" in src
    assert "FJ_CP_ASYNC(Al" in src and ldsm == (kind == "f16" and layout != "nt")
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    _check(kind, got, np.maximum(ref, 0), a, b)


@pytest.mark.parametrize("kind", ["tf32"])
def test_ring_batched_and_split_k(kind):
    """A batch (the batch stride in the copies' addresses) and K split over two work-groups
    (each slice starting on a chunk; the combine kernel runs the epilogue)."""
    rng = np.random.default_rng(9)
    dtype = np.float16 if kind == "f16" else np.float32
    a = rng.standard_normal((2, 35, 48)).astype(dtype)
    b = rng.standard_normal((2, 48, 40)).astype(dtype)
    shape = (32, 32, 16, 2, 2, "pal")
    got, reason, _ = _run(kind, shape, lambda a, b: a @ b, a, b)
    assert "cp.async" in reason and "register path" not in reason
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for i in range(2):
        _check(kind, got[i], ref[i], a[i], b[i])
    cfg = replace(gemm_mma.config(kind, *shape), split=2)
    a2, b2 = a[0], b[0]
    ctx = gemm_mma.emulated() if not _real else _null()
    with gemm_tune.forced(cfg), ctx:
        f = fuse(lambda a, b: a @ b, matmul_precision="tf32")
        reason = " ".join(k.reason for k in f.lower(a2, b2).kernels)
        got2 = np.asarray(f(a2, b2))
    assert "cp.async" in reason and "split over 2" in reason
    _check(kind, got2, ref[0], a2, b2)


def test_operands_cp_async_cannot_copy_take_the_register_path():
    """A leading dimension off the 16-byte chunks (K = 29), a prologue (computed, not copied)
    and a view starting one element in: the register path's kernel, and the reason says why
    (its results are tests/codegen/test_gemm_mma.py's)."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((37, 29)).astype(np.float32)
    b = rng.standard_normal((29, 40)).astype(np.float32)
    got, reason, src = _run("tf32", (32, 32, 16, 2, 2, "a"), lambda a, b: a @ b, a, b)
    assert "register path: " in reason and "16-byte aligned rows" in reason, reason
    assert "FJ_CP_ASYNC(Al" not in src
    _check("tf32", got, a.astype(np.float64) @ b, a, b)
    a, b = a[:, :28].copy(), b[:28].copy()
    for fn, why in ((lambda a, b: np.maximum(a, 0) @ b, "fused prologue"),
                    (lambda a, b: a[:, 1:] @ b[1:], "16-byte aligned rows")):
        with gemm_tune.forced(gemm_mma.config("tf32", 32, 32, 16, 2, 2, "a")), \
                gemm_mma.emulated():
            low = fuse(fn, matmul_precision="tf32").lower(a, b)
        reason = " ".join(k.reason for k in low.kernels)
        assert "register path: " in reason and why in reason, reason
        assert "FJ_CP_ASYNC(Al" not in low.source


def test_ring_space_fits_and_heuristic_picks_it():
    limits = DeviceLimits(is_gpu=True, local_mem=48 * 1024, max_work_group=1024,
                          compute_units=132)
    for kind in gemm_mma.KINDS:
        cands = gemm_mma.space(kind, limits)
        assert all(gemm_mma.local_bytes(c) <= 48 * 1024 for c in cands)
        assert any("a" in c.mma_opts for c in cands)
        assert "a" in gemm_mma.heuristic(kind, 4096, 4096, limits).mma_opts
        assert "a" in gemm_mma.heuristic(kind, 256, 256, limits).mma_opts
    assert not gemm_mma.valid(gemm_mma.config("tf32", 128, 128, 16, 2, 4, "s"))
