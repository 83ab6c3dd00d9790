"""Convolutions written with windows: ``sliding_window_view`` contracted by ``np.einsum``,
``np.tensordot`` or ``@`` is an implicit GEMM (its operand read through the window map, no
im2col buffer) with the GEMM's epilogue. Checked against NumPy within the GEMM's
summation-order bound (integers exactly), and by kernel counts: conv + bias + ReLU is one kernel,
with an inference batch-norm and a residual still one, in NHWC and NCHW, grouped too. On each
device (``device``): Vulkan's GLSL runs the direct GEMM kernel (codegen/gemm/dispatch.py)."""

from __future__ import annotations

import numpy as np
import pytest

from fusejit import fuse

swv = np.lib.stride_tricks.sliding_window_view


def conv_nhwc(x, w, b, stride: int, pad: int):
    """NHWC image, (kh, kw, C, K) filters, + bias, ReLU: plain NumPy."""
    kh, kw = w.shape[:2]
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    p = swv(xp, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]  # n h w c i j
    return np.maximum(np.einsum("nhwcij,ijck->nhwk", p, w) + b, 0)


def conv_nchw(x, w, b, stride: int, pad: int):
    """NCHW image, (K, C, kh, kw) filters (torch's layout), + bias, ReLU."""
    kh, kw = w.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    p = swv(xp, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]  # n c h w i j
    return np.maximum(np.einsum("nchwij,kcij->nkhw", p, w) + b[:, None, None], 0)


def _data(shape, dtype, rng):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-8, 8, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _bound_ok(got, f, args, k: int) -> None:
    """|got - NumPy| <= 4 K eps (conv(|x|, |w|) + |b|): fusejit accumulates float16 in float32,
    but NumPy's einsum rounds its float16 partial sums between window positions, so for float16
    the bound is float16's."""
    want = f(*args)
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
        return
    wide = [np.abs(a.astype(np.float64)) for a in args[:3]]
    scale = f(*wide, *args[3:])  # (ReLU of a sum of non-negative terms is the sum)
    bound = 4 * k * np.finfo(want.dtype).eps * scale
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert np.all(err <= bound), (err.max(), float(bound.min()))


@pytest.mark.parametrize("layout, n, hw, c, k, window, stride, pad, dtype", [
    ("nhwc", 2, (9, 8), 5, 6, 3, 1, 1, np.float32),
    ("nchw", 1, (8, 9), 3, 4, 5, 2, 2, np.float64),
    ("nhwc", 1, (6, 6), 8, 3, 1, 1, 0, np.float16),
    ("nchw", 2, (12, 11), 3, 4, 7, 2, 3, np.float32),
    ("nhwc", 1, (7, 7), 3, 5, 2, 2, 0, np.int32),
])
def test_conv_bias_relu_is_one_kernel(rng, device, layout, n, hw, c, k, window, stride, pad,
                                      dtype):
    if layout == "nhwc":
        f, x, w = conv_nhwc, _data((n, *hw, c), dtype, rng), _data((window, window, c, k),
                                                                     dtype, rng)
    else:
        f, x, w = conv_nchw, _data((n, c, *hw), dtype, rng), _data((k, c, window, window),
                                                                     dtype, rng)
    b = _data((k,), dtype, rng)
    fused = fuse(f, static_argnums=(3, 4))
    _bound_ok(fused(x, w, b, stride, pad), f, (x, w, b, stride, pad), c * window * window)
    low = fused.lower(x, w, b, stride, pad)
    assert len(low.kernels) == 1, [kern.reason for kern in low.kernels]
    reason = low.kernels[0].reason
    assert "implicit GEMM (a convolution)" in reason and "no im2col buffer" in reason
    if window > 1:  # (K in the image's memory order: the window rows, columns, channels)
        assert f"K = {window}*{window}*{c}" in reason or f"K = {c}*{window}*{window}" in reason


def test_batchnorm_residual_grouped_still_one_kernel(rng, device) -> None:
    """Inference batch-norm (a per-channel scale and shift) and a residual after a grouped
    convolution written with np.tensordot per group: one kernel."""
    x = rng.standard_normal((1, 6, 7, 4)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 2, 2)).astype(np.float32)  # g i j c k
    stats = [rng.random(4).astype(np.float32) + 0.5 for _ in range(4)]

    def block(x, w, mean, var, gamma, beta):
        p = swv(np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0))), (3, 3), axis=(1, 2))
        p = p.reshape(p.shape[:3] + (2, 2, 3, 3))  # n h w g c i j
        y = np.einsum("nhwgcij,gijck->nhwgk", p, w).reshape(x.shape)
        y = (y - mean) / np.sqrt(var + 1e-5) * gamma + beta
        return np.maximum(y + x, 0)
    fused = fuse(block)
    got, want = fused(x, w, *stats), block(x, w, *stats)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert len(fused.lower(x, w, *stats).kernels) == 1


def test_tensordot_and_matmul_spellings(rng) -> None:
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float64)
    w = rng.standard_normal((3, 2, 2, 4)).astype(np.float64)  # c i j k

    def spellings(x, w):
        p = swv(x, (2, 2), axis=(1, 2))[:, ::2, ::2]  # n h w c i j
        a = np.tensordot(p, w, axes=([3, 4, 5], [0, 1, 2]))
        b = p.reshape(p.shape[:3] + (-1,)) @ w.reshape(-1, 4)
        return a, b
    got, want = fuse(spellings)(x, w), spellings(x, w)
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-13, atol=1e-13)
    assert len(fuse(spellings).lower(x, w).kernels) == 2  # (two products)


def test_host_blas_path_stores_the_windows(rng, monkeypatch) -> None:
    """On CPU devices large products run in the host's BLAS, which reads plain arrays: the
    window operand is then stored once (im2col), and the reason says so."""
    monkeypatch.setenv("FUSEJIT_HOST_BLAS", "1")
    x = rng.standard_normal((1, 6, 5, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    fused = fuse(conv_nhwc, static_argnums=(3, 4))
    _bound_ok(fused(x, w, b, 1, 1), conv_nhwc, (x, w, b, 1, 1), 27)
    reasons = " ".join(k.reason for k in fused.lower(x, w, b, 1, 1).kernels)
    assert "on the host" in reasons and "im2col matrix" in reasons


def test_conv_of_pooled_image_reads_it_through_the_pad(rng, device) -> None:
    """A convolution of a pooled (reduced) image stores the pooled image once and reads it
    through the pad and window maps: two kernels, not a third storing the padded copy."""
    x = rng.standard_normal((1, 8, 10, 2)).astype(np.float32)
    w = rng.standard_normal((3, 3, 2, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)

    def pool_conv(x, w, b):
        h = swv(x, (2, 2), axis=(1, 2))[:, ::2, ::2].max(axis=(-2, -1))
        return conv_nhwc(h, w, b, 1, 1)
    fused = fuse(pool_conv)
    np.testing.assert_allclose(fused(x, w, b), pool_conv(x, w, b), rtol=1e-5, atol=1e-5)
    assert len(fused.lower(x, w, b).kernels) == 2


def test_transposed_and_reshaped_epilogues(rng) -> None:
    """A product's epilogue stored through a transpose or a reshape of its rows and columns is
    still the GEMM's own: one kernel each, NumPy's values."""
    a = rng.standard_normal((12, 5)).astype(np.float64)
    b = rng.standard_normal((5, 6)).astype(np.float64)
    c = rng.standard_normal((6, 1)).astype(np.float64)
    for f in (lambda a, b, c: (a @ b).T + c, lambda a, b, c: np.tanh((a @ b).reshape(3, 4, 2, 3)),
              lambda a, b, c: (a @ b).reshape(3, 4, 6).transpose(2, 0, 1) * 2):
        fused = fuse(f)
        np.testing.assert_allclose(fused(a, b, c), f(a, b, c), rtol=1e-13, atol=1e-13)
        assert len(fused.lower(a, b, c).kernels) == 1


@pytest.mark.parametrize("config", ["tiled", "tiled4", "simd"])
def test_every_gemm_kernel_reads_windows_and_stores_images(rng, config) -> None:
    """The tiled kernels (local memory, edge tiles, vector stores of full tiles) and the CPU
    vector kernel, forced: NHWC with stride and NCHW (the product's rows stored as an image
    through a transpose), one kernel each."""
    from test_gemm import CONFIGS

    from fusejit.codegen.gemm import tune as gemm_tune

    x = rng.standard_normal((2, 11, 10, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 20)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    xc = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    wc = np.ascontiguousarray(w.transpose(3, 2, 0, 1))
    with gemm_tune.forced(CONFIGS[config]):
        for f, args in ((conv_nhwc, (x, w, b, 2, 1)), (conv_nchw, (xc, wc, b, 1, 1))):
            fused = fuse(f, static_argnums=(3, 4))
            _bound_ok(fused(*args), f, args, 27)
            assert len(fused.lower(*args).kernels) == 1


def test_several_outputs_and_a_cast(rng, device) -> None:
    """NCHW over a symmetric pad, the pre-activation and a float16 activation out: one kernel."""
    x = rng.standard_normal((2, 3, 8, 7)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)

    def two(x, w, b):
        p = swv(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="symmetric"), (3, 3),
                axis=(2, 3))
        y = np.einsum("nchwij,kcij->nkhw", p, w) + b[:, None, None]
        return y, np.maximum(y, 0).astype(np.float16)
    fused = fuse(two)
    for got, want in zip(fused(x, w, b), two(x, w, b)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-3 if want.dtype == np.float16 else 1e-5,
                                   atol=1e-5)
    assert len(fused.lower(x, w, b).kernels) == 1


def test_grouped_convolution_as_a_batched_matmul(rng, device) -> None:
    """A grouped convolution spelled with ``@``: the windows' (g, c*kh*kw) columns moved to a
    batch of groups, the products' rows moved back to NHWC channels: one batched implicit
    GEMM, its store through the permutation."""
    x = rng.standard_normal((2, 7, 6, 4)).astype(np.float32)  # n h w (g c)
    w = rng.standard_normal((2, 18, 3)).astype(np.float32)  # g (c i j) k

    def grouped(x, w):
        a = swv(x, (3, 3), axis=(1, 2)).reshape(2, 5, 4, 2, 18)  # n h w g (c i j)
        y = np.moveaxis(a, 3, 0).reshape(2, -1, 18) @ w  # g (n h w) k
        return np.moveaxis(y.reshape(2, 2, 5, 4, 3), 0, 3).reshape(2, 5, 4, 6)
    fused = fuse(grouped)
    np.testing.assert_allclose(fused(x, w), grouped(x, w), rtol=1e-5, atol=1e-5)
    kernels = fused.lower(x, w).kernels
    assert len(kernels) == 1 and "GEMM batched" in kernels[0].reason
