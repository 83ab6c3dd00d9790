"""Hopper's warpgroup MMA (fusejit/codegen/gemm/wgmma.py) against float64 NumPy.

On PoCL the kernels run emulated (gemm_mma.emulated(): the wgmma spelled as OpenCL C over the
same layouts: R's fragments exchanged through local memory, Q read through the descriptor's
core-matrix layout and truncated to tf32 as the tensor cores read float32), so CI runs their
index math: both orientations (Q = b for ``a @ b.T``, Q = a for ``a @ b``, whose accumulators
hold C transposed), one and two warpgroups, several 64-row blocks a warpgroup, edge tiles, K
tails, the ldmatrix fragments of float16 R tiles, 3xTF32's split of Q and its partial sums
(in chunks of Q's columns too). A product with neither operand k-contiguous takes the
mma.sync ring. On an H200 the same cases run for real, and 3xTF32's error is compared with
the mma.sync kernel's. (PoCL compiles each emulated kernel in 5-20 s: six cases run by
default, the others with FUSEJIT_FUZZ_LONG=1.)"""

from __future__ import annotations

import os

import numpy as np
import pytest
from test_gemm_mma import _check
from test_gemm_mma_async import LAYOUTS, _null, _operands

import fusejit
from fusejit import fuse
from fusejit.codegen.gemm import mma as gemm_mma, tune as gemm_tune, wgmma as gemm_wgmma
from fusejit.passes.plan import DeviceLimits
from fusejit.runtime.opencl import build, mma_probe
from fusejit.codegen.gemm.ptx import SM90A_MARK
from fusejit.codegen.gemm.tf32 import error_stats

_queue = fusejit.default_queue()
_mma = mma_probe.unavailable(_queue) is None
_wg_why = mma_probe.wgmma_unavailable(_queue)
# tensor cores without wgmma (an A100, say) build neither the PTX nor its emulation here
_skip = pytest.mark.skipif(_mma and _wg_why is not None,
                           reason=f"this GPU runs mma.sync but not wgmma ({_wg_why}); the "
                                  "kernels run emulated on PoCL and for real on an H100/H200")
_long = pytest.mark.skipif(os.environ.get("FUSEJIT_FUZZ_LONG") != "1",
                           reason="long: PoCL builds each emulated wgmma kernel in 10-20 s, and "
                                  "these repeat the default cases' paths with other shapes and "
                                  "layouts (set FUSEJIT_FUZZ_LONG=1; an H200 runs them all)")


def _run(kind: str, shape: tuple, fn, *args):
    cfg = gemm_mma.config(kind, *shape)
    with gemm_tune.forced(cfg), (gemm_mma.emulated() if not _mma else _null()):
        f = fuse(fn, matmul_precision="tf32" if kind == "f16" else kind)
        low = f.lower(*args)
        return np.asarray(f(*args)), " ".join(k.reason for k in low.kernels), low.source


# (kind, R x Q x KWG over 4 GR x 1 warps + opts, m, n, k, layout): "r" (R's fragments from
# global memory, three register sets: the loop unrolled by three) with a number of k steps
# that is not a multiple of three; Q = a tiles that are not square
CASES = [
    ("tf32", (128, 64, 8, 8, 1, "agr"), 70, 132, 36, "nn"),  # Q = a: C transposed
    ("f16", (128, 64, 16, 8, 1, "ag"), 130, 72, 40, "nt"),  # Q = b, R from local memory
    ("f16", (128, 64, 16, 8, 1, "ag"), 70, 136, 40, "nn"),  # R's halves by ldmatrix.trans
    ("tf32", (192, 64, 8, 12, 1, "agr"), 200, 68, 28, "nt"),  # 3 warpgroups
    ("3xtf32", (128, 64, 8, 8, 1, "agr"), 70, 132, 36, "nn"),  # Q split, partial sums
    pytest.param("3xtf32", (128, 64, 8, 8, 1, "ag"), 130, 72, 40, "nt", marks=_long),
    pytest.param("f16", (128, 64, 16, 4, 1, "agr"), 70, 136, 48, "nn", marks=_long),
    pytest.param("f16", (128, 64, 16, 4, 1, "agr"), 136, 70, 40, "nt", marks=_long),
    pytest.param("tf32", (64, 64, 16, 4, 1, "ag"), 76, 140, 72, "nn", marks=_long),
]


@_skip
@pytest.mark.parametrize("kind, shape, m, n, k, layout", CASES)
def test_wgmma_orientations_edges_k_tails(kind, shape, m, n, k, layout):
    fn, ta, tb = LAYOUTS[layout]
    rng = np.random.default_rng(m * n + k)
    a, b, c, args = _operands(rng, kind, m, n, k, ta, tb)
    got, reason, src = _run(kind, shape, fn, *args)
    assert "wgmma" in reason and "register path" not in reason, reason
    ldsm = "FJ_LDSM_T(wr" in src
    # (R = b, outer-contiguous halves, from its ring stage)
    assert ldsm == (kind == "f16" and layout == "nn" and "r" not in shape[-1])
    if _mma:
        assert SM90A_MARK + "{ .reg .pred p;" in src
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    _check(kind, got, np.maximum(ref, 0), a, b)


@_skip
def test_3xtf32_partial_sums_in_chunks_of_q(monkeypatch):
    """With fewer partial-sum registers than Q's columns need, each stage's wgmmas run in
    chunks of Q (32 columns here: two a stage), each summed from zero and added after its
    wait."""
    monkeypatch.setattr(gemm_wgmma, "PARTIALS", 16)
    cfg = gemm_mma.config("3xtf32", 128, 64, 8, 8, 1, "ag")
    assert gemm_wgmma.chunk(cfg) == 32 and gemm_mma.valid(cfg)
    fn, ta, tb = LAYOUTS["nt"]
    rng = np.random.default_rng(11)
    a, b, c, args = _operands(rng, "3xtf32", 130, 72, 40, ta, tb)
    got, reason, src = _run("3xtf32", (128, 64, 8, 8, 1, "ag"), fn, *args)
    assert "32 columns at a time" in reason, reason
    assert src.count("acc0_0 += p0_0;") == 1 and "acc0_8 += p0_0;" in src  # (2nd chunk)
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    _check("3xtf32", got, np.maximum(ref, 0), a, b)


@pytest.mark.skipif(not _mma or _wg_why is not None,
                    reason="needs an H100/H200: it compares the tensor cores' own rounding, "
                           "which PoCL's float32 emulation does not have (the CASES above "
                           "check the kernels' index math there)")
@pytest.mark.parametrize("k", [256, 1024, 4096, 8192])
@pytest.mark.parametrize("shape, layout", [((128, 256, 8, 8, 1, "agr"), "nn"),
                                           ((256, 128, 8, 8, 1, "ag"), "nt")])
def test_gpu_wgmma_3xtf32_sums_as_the_mma_sync_kernel(k, shape, layout):
    """3xTF32 on wgmma sums as the mma.sync kernel does (per 8-deep k step, three products
    into a partial sum from zero, then one float32 add), so its error is no worse than that
    kernel's on one K pass (test_gemm_mma.py bounds the tuned kernel against SIMT; on one pass
    both tensor-core kernels err more than a split-K SIMT kernel at K = 8192)."""
    fn, ta, tb = LAYOUTS[layout]
    rng = np.random.default_rng(k)
    a = rng.standard_normal((256, k)).astype(np.float32)
    b = rng.standard_normal((k, 256)).astype(np.float32)
    args = (np.ascontiguousarray(a.T) if ta else a, np.ascontiguousarray(b.T) if tb else b,
            np.zeros(256, np.float32))
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0)
    got, reason, _ = _run("3xtf32", shape, fn, *args)
    assert "wgmma" in reason, reason
    ring, reason, _ = _run("3xtf32", (128, 128, 16, 2, 2, "a"), fn, *args)
    assert "mma.sync" in reason, reason
    (mx, rms), (mxr, rmsr) = error_stats(got, ref), error_stats(ring, ref)
    assert mx <= mxr * 1.01 and rms <= rmsr * 1.01, ((mx, rms), (mxr, rmsr))
    _check("3xtf32", got, ref, a, b)


@_skip
def test_neither_operand_k_contiguous_takes_the_mma_sync_ring():
    rng = np.random.default_rng(5)
    fn, ta, tb = LAYOUTS["tn"]
    *_, args = _operands(rng, "tf32", 36, 40, 24, ta, tb)
    cfg = gemm_mma.config("tf32", 64, 64, 8, 4, 1, "ag")
    with gemm_tune.forced(cfg), gemm_mma.emulated():
        low = fuse(fn, matmul_precision="tf32").lower(*args)
    reason = " ".join(k.reason for k in low.kernels)
    assert "mma.sync ring: neither operand is k-contiguous" in reason, reason
    assert "wgmma" not in low.source


def test_sm90a_ptx_restores_marked_statements_and_retargets():
    ptx = (".version 8.5\n.target sm_90, texmode_independent\n.address_size 64\n"
           f"\t{SM90A_MARK}wgmma.fence.sync.aligned;\n\tmov.u32 %r1, 0; // sm_90 kept\n")
    out = build.sm90a_ptx(ptx)
    assert ".target sm_90a, texmode_independent" in out
    assert "\twgmma.fence.sync.aligned;\n" in out and SM90A_MARK not in out
    assert "// sm_90 kept" in out
    with pytest.raises(ValueError, match="sm_90 device.*sm_80"):
        build.sm90a_ptx(".target sm_80\n")


def test_space_offers_wgmma_only_where_the_probe_passed():
    hopper = DeviceLimits(is_gpu=True, local_mem=48 * 1024, max_work_group=1024,
                          compute_units=132, wgmma=True)
    ampere = DeviceLimits(is_gpu=True, local_mem=48 * 1024, max_work_group=1024,
                          compute_units=108)
    for kind in ("tf32", "3xtf32", "f16"):
        wg = [c for c in gemm_mma.space(kind, hopper) if "g" in c.mma_opts]
        assert wg and gemm_mma.space(kind, hopper)[0] in wg
        assert all(gemm_wgmma.stages(c) >= 3 and gemm_mma.local_bytes(c) <= 48 * 1024
                   for c in wg)
        assert not [c for c in gemm_mma.space(kind, ampere) if "g" in c.mma_opts]
        big = gemm_mma.heuristic(kind, 4096, 4096, hopper)
        assert "g" in big.mma_opts and not gemm_mma.valid(big, ampere)  # (a stale entry)
    # a warpgroup's 64-row blocks must tile both extents; "g" needs the ring
    assert not gemm_mma.valid(gemm_mma.config("tf32", 64, 128, 8, 8, 1, "ag"))
    assert not gemm_mma.valid(gemm_mma.config("tf32", 128, 128, 8, 4, 1, "g"))
    # 3xTF32: a warpgroup's partial sums (64 registers) beside its accumulators
    assert gemm_wgmma.chunk(gemm_mma.config("3xtf32", 128, 256, 8, 8, 1, "agr")) == 128
    assert gemm_wgmma.chunk(gemm_mma.config("3xtf32", 256, 128, 8, 8, 1, "ag")) == 64
    assert gemm_wgmma.chunk(gemm_mma.config("tf32", 256, 128, 8, 8, 1, "ag")) == 128
    assert gemm_wgmma.chunk(gemm_mma.config("3xtf32", 256, 128, 8, 8, 1, "agrh")) == 32
    assert not gemm_mma.valid(gemm_mma.config("tf32", 256, 128, 8, 8, 1, "agrh"))  # (no partials)


def test_probe_says_why_not_off_hopper():
    if _wg_why is None:
        pytest.skip("the probe passed on this device (an H100/H200), so it has no refusal to "
                    "check; the other tests here run the wgmma kernels for real")
    assert isinstance(_wg_why, str) and _wg_why
