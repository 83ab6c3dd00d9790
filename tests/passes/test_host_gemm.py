"""GEMM cores in NumPy's BLAS on CPU devices whose buffers are host memory (passes/host_gemm.py):
results against NumPy for float32/float64, views read in place (transposed, strided, offset,
reversed, broadcast batches), computed prologues stored once, epilogues after the product,
chains, in-place writes, threads, AOT bundles, and the switch that keeps products in OpenCL."""

from __future__ import annotations

import threading

import numpy as np
import pyopencl.array as cla
import pytest

import fusejit
from fusejit import fuse
from fusejit.passes import host_gemm
from fusejit.runtime.opencl.devices import device_info


@pytest.fixture(autouse=True)
def _host_memory_device(queue, monkeypatch):
    """Every non-empty product on the host (test sizes stay small); the default threshold has
    its own test."""
    if not device_info(queue.device).limits.host_blas:
        pytest.skip("the default device's buffers are not host memory (host BLAS is off)")
    monkeypatch.setenv(host_gemm.ENV, "1")


def _roles(f, *args) -> list[str]:
    return [k.role for k in f.lower(*args).kernels]


def _bound_ok(got, a, b, ref, extra: float = 0.0) -> None:
    """|got - ref| <= 4 K eps sum|a||b| (+ ``extra`` relative slack for epilogue rounding)."""
    got = np.asarray(got)
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, got.shape)
    eps = np.finfo(ref.dtype).eps
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    bound = 4 * a.shape[-1] * eps * scale + extra * np.abs(ref.astype(np.float64))
    err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    assert np.all(err <= bound), (err.max(), bound.min())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dense_layer_runs_on_the_host(dtype, rng, has_fp64) -> None:
    if dtype == np.float64 and not has_fp64:
        pytest.skip("no float64 on this device")
    x = rng.standard_normal((160, 136)).astype(dtype)
    w = rng.standard_normal((136, 144)).astype(dtype)
    b = rng.standard_normal(144).astype(dtype)
    f = fuse(lambda x, w, b: np.maximum(x @ w + b, 0))
    assert _roles(f, x, w, b) == ["host", "main"]  # the product, then bias + relu
    got = f(x, w, b)
    ref = np.maximum(x @ w + b, 0)
    _bound_ok(got, x, w, ref, 2 * np.finfo(dtype).eps)
    text = str(f.explain(x, w, b))
    assert "np.matmul" in text and "NumPy's BLAS" in text and "epilogue" in text


def test_views_are_read_in_place(queue, rng) -> None:
    """Transposed, strided, offset and reversed device views: no prologue kernel, NumPy's
    values."""
    big = rng.standard_normal((300, 260)).astype(np.float32)
    other = rng.standard_normal((200, 280)).astype(np.float32)
    bd, od = cla.to_device(queue, big), cla.to_device(queue, other)
    cases = {  # (function, slice of big, slice of other)
        "transposed": (lambda a, b: a.T @ b, np.s_[:150, :130], np.s_[:150, :140]),
        "strided": (lambda a, b: a @ b, np.s_[::2, 1:261:2], np.s_[:130, ::2]),
        "offset": (lambda a, b: a @ b.T, np.s_[7:157, 3:143], np.s_[11:171, 5:145]),
        "reversed": (lambda a, b: a[::-1] @ b[:, ::-1], np.s_[:140, :130], np.s_[:130, :150]),
    }
    for name, (fn, sa, sb) in cases.items():
        f = fuse(fn)
        assert _roles(f, bd[sa], od[sb]) == ["host"], name  # straight into the output
        np.testing.assert_allclose(f(bd[sa], od[sb]).get(), fn(big[sa], other[sb]),
                                   rtol=1e-4, atol=1e-3, err_msg=name)


def test_computed_prologue_is_stored_once(rng) -> None:
    """A dequantized operand (int8 cast and scaled) is computed by one kernel into a temporary
    the host's product reads; float16 activations are widened the same way."""
    x = rng.standard_normal((128, 192)).astype(np.float16)
    wq = rng.integers(-128, 128, (192, 160)).astype(np.int8)
    scale = (rng.random(160) * 0.01).astype(np.float32)

    def int8_linear(x, wq, scale):
        return x.astype(np.float32) @ (wq.astype(np.float32) * scale)
    f = fuse(int8_linear)
    assert _roles(f, x, wq, scale) == ["main", "main", "host"]
    a = x.astype(np.float32)
    b = wq.astype(np.float32) * scale
    _bound_ok(f(x, wq, scale), a, b, int8_linear(x, wq, scale))


def test_epilogue_with_several_outputs_and_residual(rng) -> None:
    x = rng.standard_normal((130, 140)).astype(np.float32)
    w = rng.standard_normal((140, 150)).astype(np.float32)
    res = rng.standard_normal((130, 150)).astype(np.float32)

    def fn(x, w, res):
        y = x @ w
        return y, np.tanh(y) + res, (y * 2).astype(np.float16)
    f = fuse(fn)
    assert "host" in _roles(f, x, w, res)
    got = f(x, w, res)
    ref = fn(x, w, res)
    _bound_ok(got[0], x, w, ref[0])
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-5)
    assert got[2].dtype == np.float16
    np.testing.assert_allclose(got[2].astype(np.float32), ref[2].astype(np.float32),
                               rtol=2e-3, atol=1e-2)


def test_mlp_block_chain(rng) -> None:
    """gelu(x @ w1 + b1) is stored once by the first epilogue kernel and read in place by the
    second product; the residual epilogue follows it."""
    t, d = 128, 160
    x = rng.standard_normal((t, d)).astype(np.float32)
    w1, w2 = (rng.standard_normal((d, d)).astype(np.float32) * 0.1 for _ in range(2))
    b1, b2 = (rng.standard_normal(d).astype(np.float32) for _ in range(2))

    def block(x, w1, b1, w2, b2):
        h = x @ w1 + b1
        h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
        return x + h @ w2 + b2
    f = fuse(block)
    assert _roles(f, x, w1, b1, w2, b2) == ["host", "main", "host", "main"]
    np.testing.assert_allclose(f(x, w1, b1, w2, b2), block(x, w1, b1, w2, b2), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_and_broadcast_batches(dtype, rng, has_fp64) -> None:
    if dtype == np.float64 and not has_fp64:
        pytest.skip("no float64 on this device")
    a = rng.standard_normal((3, 1, 96, 80)).astype(dtype)
    b = rng.standard_normal((4, 80, 72)).astype(dtype)
    bias = rng.standard_normal(72).astype(dtype)
    f = fuse(lambda a, b, bias: a @ b + bias)
    assert "host" in _roles(f, a, b, bias)
    got = f(a, b, bias)
    ref = a @ b + bias
    assert got.shape == ref.shape == (3, 4, 96, 72)
    _bound_ok(got - bias, np.broadcast_to(a, (3, 4, 96, 80)), np.broadcast_to(b, (3, 4, 80, 72)),
              ref - bias, 4 * np.finfo(dtype).eps)


def test_in_place_writes(queue, rng) -> None:
    """``c += a @ b`` and ``a[...] = a @ b`` (the product reads the argument it overwrites)."""
    a = rng.standard_normal((144, 144)).astype(np.float32)
    b = rng.standard_normal((144, 144)).astype(np.float32)
    c = rng.standard_normal((144, 144)).astype(np.float32)

    def acc(c, a, b):
        c += a @ b

    def overwrite(a, b):
        a[...] = a @ b
    cd, ad, bd = (cla.to_device(queue, v) for v in (c, a, b))
    fuse(acc)(cd, ad, bd)
    np.testing.assert_allclose(cd.get(), c + a @ b, rtol=1e-4, atol=1e-4)
    fuse(overwrite)(ad, bd)
    np.testing.assert_allclose(ad.get(), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(bd.get(), b)  # inputs not written by design stay


def test_switch_and_default_threshold(monkeypatch, rng) -> None:
    x = rng.standard_normal((256, 256)).astype(np.float32)
    assert 256 ** 3 >= host_gemm.MIN_WORK
    monkeypatch.setenv(host_gemm.ENV, "0")
    off = fuse(lambda x, w: x @ w + 1)
    assert "host" not in _roles(off, x, x)
    np.testing.assert_allclose(off(x, x), x @ x + 1, rtol=1e-4, atol=1e-4)
    monkeypatch.delenv(host_gemm.ENV)  # by size: large products on the host, small ones not
    auto = fuse(lambda x, w: x @ w + 1)
    assert "host" in _roles(auto, x, x)
    assert "host" not in _roles(auto, x[:64], x[:, :64])
    np.testing.assert_allclose(auto(x, x), x @ x + 1, rtol=1e-4, atol=1e-4)
    monkeypatch.setenv(host_gemm.ENV, "1")
    small = fuse(lambda x, w: x @ w + 1)
    assert "host" in _roles(small, x[:8, :9], x[:9, :7])  # every size when forced
    np.testing.assert_allclose(small(x[:8, :9], x[:9, :7]), x[:8, :9] @ x[:9, :7] + 1,
                               rtol=1e-5, atol=1e-5)


def test_gpu_limits_keep_the_kernel(gpu_style, rng) -> None:
    """A GPU (its buffers are not the host's) never gets a host step."""
    x = rng.standard_normal((160, 160)).astype(np.float32)
    assert "host" not in _roles(fuse(lambda x: x @ x), x)


def test_forced_kernel_configuration_keeps_the_kernel(rng) -> None:
    """gemm_tune.forced (the kernel tests' variants) keeps products in OpenCL."""
    from fusejit.codegen.gemm import tune as gemm_tune
    from fusejit.codegen.gemm.config import GemmConfig

    x = rng.standard_normal((64, 64)).astype(np.float32)
    with gemm_tune.forced(GemmConfig(16, 16, 4, 4, 4, 2)):
        f = fuse(lambda x: x @ x)
        assert "host" not in _roles(f, x)
        np.testing.assert_allclose(f(x), x @ x, rtol=1e-4, atol=1e-4)


def test_threads_share_one_function(rng) -> None:
    xs = [rng.standard_normal((128, 136)).astype(np.float32) for _ in range(6)]
    w = rng.standard_normal((136, 128)).astype(np.float32)
    f = fuse(lambda x, w: np.maximum(x @ w, 0))
    f(xs[0], w)  # compiled once
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        for _ in range(3):
            results[i] = f(xs[i], w)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, x in enumerate(xs):
        np.testing.assert_allclose(results[i], np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)


def test_aot_bundle_keeps_the_host_step(tmp_path, rng) -> None:
    x = rng.standard_normal((150, 140)).astype(np.float32)
    w = rng.standard_normal((140, 130)).astype(np.float32)
    path = tmp_path / "dense.fjb"

    def dense(x, w):
        return np.maximum(x @ w.T.T, 0) * 2
    fusejit.export(fuse(dense), [(fusejit.ShapeDtype(x.shape, np.float32, device=False),
                                  fusejit.ShapeDtype(w.shape, np.float32, device=False))], path)
    g = fusejit.load(path)
    np.testing.assert_allclose(g(x, w), dense(x, w), rtol=1e-4, atol=1e-4)
