"""@fuse(matmul_precision=...) and the tensor-core GEMM (fusejit/codegen/gemm/mma.py).

On every device: the option is validated, "highest" keeps the SIMT kernel, and where the probe
fails (PoCL) "tf32"/"3xtf32" fall back to it bit for bit with explain() saying why. The MMA
kernels themselves run on PoCL through ``gemm_mma.emulated()`` (the PTX spelled as OpenCL C
over the same fragment layouts) and, where the probe passes (an NVIDIA GPU, sm_80+), for real
against float64 NumPy within the bounds of fusejit/codegen/gemm/tf32.py's docstring."""

from __future__ import annotations

import numpy as np
import pytest

import fusejit
from fusejit import fuse
from fusejit.codegen.gemm import mma as gemm_mma, tune as gemm_tune
from fusejit.codegen.gemm.config import GemmConfig
from fusejit.errors import MatmulPrecisionError
from fusejit.runtime.opencl import gemm_bench, mma_probe
from fusejit.codegen.gemm.tf32 import error_stats

EPS = 2.0 ** -24  # float32's unit roundoff


def _relu(a, b, c):
    return np.maximum(a @ b + c, 0)


def _scale(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))


def _bound(kind: str, a: np.ndarray, b: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| allowed: tf32 rounds one operand to nearest (2**-11) and the other to
    nearest (mma.sync) or toward zero (wgmma reads it from local memory: under 2**-10), so a
    product errs by under 2**-10 + 2**-11 + 2**-21; 3xTF32 and float16 products (exact) err
    as float32 summation does; float16 results round to float16 after the product and after
    the epilogue (one unit of each)."""
    k = a.shape[-1]
    per = {"tf32": 2.0 ** -10 + 2.0 ** -11 + 2.0 ** -21, "3xtf32": 8 * EPS, "f16": 0.0}[kind]
    bound = (per + 4 * k * EPS) * _scale(a, b)
    if kind == "f16":
        ab = np.abs(a.astype(np.float64) @ b.astype(np.float64))
        bound = bound + np.spacing(np.maximum(np.abs(ref), ab).astype(np.float16)
                                   ).astype(np.float64) * 2
    return bound


def _check(kind: str, got: np.ndarray, ref: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    got = np.asarray(got)
    want_dtype = np.float16 if kind == "f16" else np.float32
    assert got.dtype == want_dtype and got.shape == ref.shape
    err = np.abs(got.astype(np.float64) - ref)
    bound = _bound(kind, a, b, ref)
    assert np.all(err <= bound), (kind, err.max(), float((err / bound).max()))


# -- the option -------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["high", "TF32", "float32", None, 3])
def test_bad_precision_is_a_named_error(bad):
    with pytest.raises(MatmulPrecisionError, match="matmul_precision=") as info:
        fuse(_relu, matmul_precision=bad)
    assert isinstance(info.value, ValueError) and "'3xtf32'" in str(info.value)


def test_highest_is_the_default_and_unchanged():
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((33, 40), (40, 17), (17,)))
    default, highest = fuse(_relu), fuse(_relu, matmul_precision="highest")
    assert default.matmul_precision == "highest"
    assert default.lower(a, b, c).source == highest.lower(a, b, c).source
    assert "mma" not in default.lower(a, b, c).source


@pytest.mark.skipif(mma_probe.unavailable(fusejit.default_queue()) is None,
                    reason="this device runs tensor cores: no fallback to test")
@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_fallback_where_the_probe_fails(precision, dtype):
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(s).astype(dtype) for s in ((33, 40), (40, 17), (17,)))
    simt, tc = fuse(_relu), fuse(_relu, matmul_precision=precision)
    assert tc.lower(a, b, c).source == simt.lower(a, b, c).source
    np.testing.assert_array_equal(tc(a, b, c), simt(a, b, c))
    report = str(tc.explain(a, b, c))
    assert f"matmul_precision={precision!r}: tensor cores unavailable" in report
    assert "fell back to the SIMT kernel" in report


def test_other_dtypes_say_the_option_does_not_apply():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    f = fuse(lambda a, b: a @ b, matmul_precision="tf32")
    np.testing.assert_array_equal(f(a, a.T), a @ a.T)
    assert "applies to float32 and float16 products" in str(f.explain(a, a.T))


def test_precision_survives_pickling():
    import pickle

    f = fuse(_relu, matmul_precision="3xtf32")
    assert pickle.loads(pickle.dumps(f)).matmul_precision == "3xtf32"


def test_selected_kernel_spells_ptx_and_is_keyed(monkeypatch):
    """With the probe passing (faked: PoCL cannot build PTX), tf32 products get the MMA kernel:
    the PTX in the source, explain() naming it, a tuning key of its own."""
    monkeypatch.setattr(mma_probe, "unavailable", lambda queue: None)
    rng = np.random.default_rng(2)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((64, 48), (48, 40), (40,)))
    keys = []
    real_lookup = gemm_bench.lookup
    monkeypatch.setattr(gemm_bench, "lookup", lambda key: keys.append(key) or real_lookup(key))
    mmas = {}
    for precision in ("tf32", "3xtf32"):
        src = fuse(_relu, matmul_precision=precision).lower(a, b, c).source
        assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in src
        assert "cvt.rna.tf32.f32" in src
        # (3xTF32 sums each step from zero into p..., added to the accumulators after)
        mmas[precision] = src.count("FJ_MMA_TF32(p") if precision == "3xtf32" else \
            src.count("FJ_MMA_TF32(acc")
        assert ("acc0_0 += p" in src) == (precision == "3xtf32")
        assert f"matmul_precision={precision!r}: tensor cores" in str(fuse(
            _relu, matmul_precision=precision).explain(a, b, c))
    h = [x.astype(np.float16) for x in (a, b, c)]
    assert "m16n8k16.row.col.f32.f16.f16.f32" in fuse(_relu, matmul_precision="tf32").lower(
        *h).source
    assert mmas["3xtf32"] == 3 * mmas["tf32"] > 0  # three products a step
    assert sorted({k.rsplit("|", 1)[-1] for k in keys}) == ["mma-3xtf32", "mma-f16", "mma-tf32"]


def test_space_and_heuristic_are_valid():
    from fusejit.passes.plan import DeviceLimits

    limits = DeviceLimits(is_gpu=True, local_mem=48 * 1024, max_work_group=1024,
                          compute_units=132)
    for kind in gemm_mma.KINDS:
        cands = gemm_mma.space(kind, limits)
        assert cands and all(gemm_mma.valid(c, limits) for c in cands)
        assert all(gemm_mma.local_bytes(c) <= 48 * 1024 for c in cands)
        assert gemm_mma.heuristic(kind, 4096, 4096, limits).mma == kind


# -- the MMA kernels on PoCL, emulated -----------------------------------------------------------


def _emulated(kind: str, cfg_shape: tuple, fn, *args):
    cfg = gemm_mma.config(kind, *cfg_shape)
    with gemm_tune.forced(cfg), gemm_mma.emulated():
        f = fuse(fn)
        src = f.lower(*args).source
        assert "asm" not in src and "FJ_MMA" in src
        return f(*args)


@pytest.mark.parametrize("kind", ["tf32", "3xtf32", "f16"])
def test_emulated_mma_odd_sizes_bias_relu(kind):
    rng = np.random.default_rng(3)
    dtype = np.float16 if kind == "f16" else np.float32
    m, n, k = 37, 21, 29  # edge tiles on both axes, a K tail
    a, b, c = (rng.standard_normal(s).astype(dtype) for s in ((m, k), (k, n), (n,)))
    got = _emulated(kind, (16, 8, 16 if kind == "f16" else 8, 1, 1), _relu, a, b, c)
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    _check(kind, got, np.maximum(ref, 0), a, b)


def test_emulated_mma_warp_grid_batched_prologue():
    """2x2 warps, a batch, a transposed and cast operand in the prologue, two outputs."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 35, 26)).astype(np.float32)
    bt = rng.standard_normal((2, 19, 26)).astype(np.float16)  # read transposed, cast

    def fn(a, bt):
        h = a @ bt.transpose(0, 2, 1).astype(np.float32)
        return h, np.maximum(h, 0) * 2

    h, r = _emulated("tf32", (32, 16, 8, 2, 2), fn, a, bt)
    ref = a.astype(np.float64) @ bt.astype(np.float64).transpose(0, 2, 1)
    bt32 = bt.astype(np.float32).transpose(0, 2, 1)
    for i in range(2):
        _check("tf32", h[i], ref[i], a[i], bt32[i])
        _check("tf32", r[i] / 2, np.maximum(ref[i], 0), a[i], bt32[i])


@pytest.mark.parametrize("kind, opts", [("tf32", "tvp"), ("f16", "tvwp")])
def test_emulated_mma_store_and_fragment_variants(kind, opts):
    """gemm_mma.OPTS: rows-fast loads, vector and word stores, pipelined fragments; sizes
    that are multiples of 4 so the vector paths run, edge tiles and a K tail still."""
    rng = np.random.default_rng(6)
    dtype = np.float16 if kind == "f16" else np.float32
    a, b, c = (rng.standard_normal(s).astype(dtype) for s in ((68, 52), (52, 44), (44,)))
    got = _emulated(kind, (32, 32, 32 if kind == "f16" else 16, 2, 2, opts), _relu, a, b, c)
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    _check(kind, got, np.maximum(ref, 0), a, b)


def test_emulated_float16_packing_rounds_as_numpy():
    """The emulation's float -> float16 bits (FJ_F2H, behind FJ_F16X2, which packs the "v"
    and "w" stores' words): NumPy's round-to-nearest-even over every tie, the subnormals,
    the overflow edge and the specials, in arithmetic (a half store read back as a uint was
    type punning: PoCL 3.1's LLVM 15 reordered it, and those kernels summed stale words)."""
    import pyopencl as cl

    from fusejit.codegen.gemm.ptx import F2H

    rng = np.random.default_rng(3)
    halves = np.arange(0x10000, dtype=np.uint32)
    base = (halves.astype(np.uint16).view(np.float16).astype(np.float32).view(np.uint32))
    base = base[np.isfinite(base.view(np.float32))]
    ties = np.concatenate([base + d for d in (0, 1, 0x1000 - 1, 0x1000, 0x1000 + 1)])
    special = np.array([0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001,
                        0x477fefff, 0x477ff000, 0x477fffff, 0x38800000, 0x387fffff, 1,
                        0x33000000, 0x33000001, 0x32ffffff], np.uint32)
    bits = np.concatenate([ties.astype(np.uint32), special,
                           rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)])
    x = bits.view(np.float32)
    queue = fusejit.default_queue()
    src = (f"{F2H}\n__kernel void k(__global const float *x, __global uint *h) {{ "
           "const int i = get_global_id(0); uint d; FJ_F2H(d, x[i]); h[i] = d; }")
    prg = cl.Program(queue.context, src).build()
    mf = cl.mem_flags
    xb = cl.Buffer(queue.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    hb = cl.Buffer(queue.context, mf.WRITE_ONLY, x.nbytes)
    prg.k(queue, (x.size,), None, xb, hb)
    got = np.empty(x.size, np.uint32)
    cl.enqueue_copy(queue, got, hb)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16).astype(np.uint32)
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], want[~nan])
    assert np.all((got[nan] & 0x7fff) == 0x7e00) and np.array_equal(got[nan] >> 15,
                                                                     want[nan] >> 15)


# -- on tensor cores (an NVIDIA GPU where the probe passes) ---------------------------------------

_why = mma_probe.unavailable(fusejit.default_queue())
on_gpu = pytest.mark.skipif(_why is not None, reason=f"tensor cores unavailable: {_why}")


@on_gpu
@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(1, 1, 1), (37, 21, 29), (257, 131, 515), (1000, 999, 1001)])
def test_gpu_mma_bias_relu(precision, dtype, shape):
    m, n, k = shape
    rng = np.random.default_rng(m)
    a, b, c = (rng.standard_normal(s).astype(dtype) for s in ((m, k), (k, n), (n,)))
    f = fuse(_relu, matmul_precision=precision)
    kind = "f16" if dtype == np.float16 else precision
    assert "tensor cores" in str(f.explain(a, b, c))
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    _check(kind, f(a, b, c), np.maximum(ref, 0), a, b)


@on_gpu
@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
def test_gpu_mma_batched_prologue(precision):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 130, 70)).astype(np.float32)
    bt = rng.standard_normal((3, 66, 70)).astype(np.float16)
    f = fuse(lambda a, bt: a @ bt.transpose(0, 2, 1).astype(np.float32),
             matmul_precision=precision)
    got = f(a, bt)
    ref = a.astype(np.float64) @ bt.astype(np.float64).transpose(0, 2, 1)
    for i in range(3):
        _check(precision, got[i], ref[i], a[i], bt[i].astype(np.float32).T)


@on_gpu
@pytest.mark.parametrize("k", [256, 1024, 4096, 8192])
def test_gpu_3xtf32_error_no_worse_than_simt(k):
    rng = np.random.default_rng(k)
    a = rng.standard_normal((256, k)).astype(np.float32)
    b = rng.standard_normal((k, 256)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    mx3, rms3 = error_stats(fuse(lambda a, b: a @ b, matmul_precision="3xtf32")(a, b), ref)
    mxs, rmss = error_stats(fuse(lambda a, b: a @ b)(a, b), ref)
    assert mx3 <= mxs and rms3 <= rmss, ((mx3, rms3), (mxs, rmss))


@pytest.mark.parametrize("bad", [GemmConfig(128, 128, 16, 7, 4, 2, mma="tf32"),
                                 GemmConfig(128, 128, 16, 16, 16, 2, mma="tf32",
                                            mma_opts="xt")])
def test_a_corrupt_persisted_mma_entry_is_tuned_again(monkeypatch, bad):
    """A gemm.json entry under an MMA key that is not a valid MMA tile (or names variants
    this version lacks) is ignored."""
    monkeypatch.setattr(mma_probe, "unavailable", lambda queue: None)
    monkeypatch.setattr(gemm_bench, "lookup", lambda key: bad if "mma-" in key else None)
    a = np.ones((64, 48), np.float32)
    src = fuse(lambda a, b: a @ b, matmul_precision="tf32").lower(a, a.T).source
    assert "mma.sync" in src and f"reqd_work_group_size({bad.threads}," not in src
