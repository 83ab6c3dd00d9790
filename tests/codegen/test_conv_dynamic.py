"""New shapes of a traced convolution follow the compile-once rules (``@fuse(dynamic=...)``,
``ShapeDtype`` with None extents): the batch is the outermost factor of the implicit GEMM's M
(and the outer axis of pooling and depthwise windows), so kernels take it at launch and a new
batch size reuses the program. The image's height and width are inner axes the window map reads
as constants: a new image size builds a new program (still NumPy's values). Each result is
compared with NumPy; the program counts are the point."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from test_conv import _bound_ok, conv_nchw, conv_nhwc

import fusejit
from fusejit import fuse

swv = np.lib.stride_tricks.sliding_window_view


def _programs(f) -> int:
    info = f.cache_info()
    return info.compiles + info.disk_hits


def _image(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("config", [None, "tiled", "simd"])
@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_conv_over_batch_sizes_is_one_program(rng, layout, config) -> None:
    """Batches 2..5 (M = N*H'*W' in and out of whole tiles) on one program, for the default
    kernel and the tiled and CPU vector kernels forced."""
    from test_gemm import CONFIGS

    from fusejit.codegen.gemm import tune as gemm_tune

    w = _image(rng, (3, 3, 3, 20))
    b = _image(rng, (20,))
    f, image = (conv_nhwc, (11, 10, 3)) if layout == "nhwc" else (conv_nchw, (3, 11, 10))
    if layout == "nchw":
        w = np.ascontiguousarray(w.transpose(3, 2, 0, 1))
    fused = fuse(f, static_argnums=(3, 4), dynamic=True)
    forced = gemm_tune.forced(CONFIGS[config]) if config else contextlib.nullcontext()
    with forced:
        for n in (2, 3, 5, 4):
            x = _image(rng, (n, *image))
            _bound_ok(fused(x, w, b, 1, 1), f, (x, w, b, 1, 1), 27)
    assert fused.cache_info().traces == 4 and _programs(fused) == 1
    reason = fused.lower(x, w, b, 1, 1).kernels[0].reason
    assert "extents at launch: M (the batch is its first factor)" in reason


def test_default_rule_stride_and_residual(rng) -> None:
    """dynamic=None (the default): the second batch size makes the batch dynamic; from then on
    batches share a program. A strided convolution with a batch-norm and a residual."""
    w = _image(rng, (3, 3, 4, 4))
    stats = [rng.random(4).astype(np.float32) + 0.5 for _ in range(4)]

    def block(x, w, mean, var, gamma, beta):
        p = swv(np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0))), (3, 3), axis=(1, 2))[:, ::2, ::2]
        y = np.einsum("nhwcij,ijck->nhwk", p, w)
        y = (y - mean) / np.sqrt(var + 1e-5) * gamma + beta
        return np.maximum(y + x[:, ::2, ::2], 0)
    fused = fuse(block)
    for n in (1, 2, 3, 4, 6):
        x = _image(rng, (n, 9, 8, 4))
        np.testing.assert_allclose(fused(x, w, *stats), block(x, w, *stats), rtol=1e-5,
                                   atol=1e-5)
    assert _programs(fused) == 3  # batches 1 and 2 specialised; 3, 4 and 6 share one


def test_lowered_with_a_none_batch_builds_nothing_later(rng) -> None:
    """``lower(ShapeDtype((None, H, W, C)))`` then ``compile()``: every batch size runs on the
    program built there."""
    w = _image(rng, (3, 3, 3, 8))
    b = _image(rng, (8,))

    def layer(x, w, b):
        return conv_nhwc(x, w, b, 1, 1)
    fused = fuse(layer)
    compiled = fused.lower(fusejit.ShapeDtype((None, 6, 7, 3), np.float32, device=False),
                           w, b).compile()
    built = _programs(fused)
    for n in (2, 3, 7):
        x = _image(rng, (n, 6, 7, 3))
        _bound_ok(compiled(x, w, b), layer, (x, w, b), 27)
    assert _programs(fused) == built


def test_pooling_depthwise_and_moving_average_over_batch_sizes(rng) -> None:
    """Pooling and depthwise filters over batches 2..5: one program; a moving average of
    signals batched along the outer axis of a 1-D window too."""
    k = _image(rng, (4, 3, 3))

    def pool_dw(x, k):
        pooled = swv(x, (2, 2), axis=(1, 2))[:, ::2, ::2].max(axis=(-2, -1))
        xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        return pooled, (swv(xp, (3, 3), axis=(1, 2)) * k).sum(axis=(-2, -1))

    def moving(s):
        return swv(s, 5, axis=-1).mean(axis=-1)
    f, g = fuse(pool_dw, dynamic=True), fuse(moving, dynamic=True)
    for n in (2, 3, 5, 4):
        x = _image(rng, (n, 8, 6, 4))
        for got, want in zip(f(x, k), pool_dw(x, k)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        s = _image(rng, (n, 40))
        np.testing.assert_allclose(g(s), moving(s), rtol=1e-5, atol=1e-6)
    assert _programs(f) == 1 and _programs(g) == 1


def test_new_image_sizes_stay_right(rng) -> None:
    """Height and width are inner axes of the window space, which the window map reads as
    constants: each image size is its own program, with NumPy's values."""
    w = _image(rng, (3, 3, 3, 4))
    b = _image(rng, (4,))
    fused = fuse(conv_nhwc, static_argnums=(3, 4))
    sizes = ((6, 6), (7, 9), (10, 8))
    for hw in sizes:
        x = _image(rng, (2, *hw, 3))
        _bound_ok(fused(x, w, b, 2, 1), conv_nhwc, (x, w, b, 2, 1), 27)
    assert fused.cache_info().traces == len(sizes)


@pytest.mark.parametrize("device", ["vulkan"], indirect=True)
def test_vulkan_conv_over_batch_sizes_is_one_pipeline(rng, device) -> None:
    """The GLSL direct kernel takes M at launch too: one pipeline for batches 2, 3 and 5."""
    w = _image(rng, (3, 3, 2, 3))
    b = _image(rng, (3,))
    fused = fuse(conv_nhwc, static_argnums=(3, 4), dynamic=True)
    for n in (2, 3, 5):
        x = _image(rng, (n, 5, 6, 2))
        _bound_ok(fused(x, w, b, 1, 1), conv_nhwc, (x, w, b, 1, 1), 18)
    assert fused.cache_info().compiles == 1


def test_gpu_configuration_does_not_follow_the_batch(rng, gpu_style) -> None:
    """With a GPU's limits the heuristic would pick the direct kernel for small batches and a
    tiled one for large (and split K by the tile count): under dynamic it chooses as for a
    large M, so batches 2, 3, 5 and 8 share one program (run here, on the test device)."""
    w = _image(rng, (3, 3, 16, 16))
    b = _image(rng, (16,))
    fused = fuse(conv_nhwc, static_argnums=(3, 4), dynamic=True)
    for n in (2, 3, 5, 8):
        x = _image(rng, (n, 16, 16, 16))
        _bound_ok(fused(x, w, b, 1, 1), conv_nhwc, (x, w, b, 1, 1), 144)
    assert _programs(fused) == 1
    assert "the best-ranked of the space" in fused.lower(x, w, b, 1, 1).kernels[0].reason


def test_exported_none_batch_serves_every_batch(rng, tmp_path) -> None:
    """``fusejit.export`` of a convolution with a None batch: one bundle entry whose launch
    metadata are formulas of the batch (the GEMM counts its tiles from M at launch, and its
    grid has a spare row of tiles, so the grid's formula rounded up covers every batch): any
    batch runs from it, whole tiles of M or not, with no trace and no build."""
    w = _image(rng, (3, 3, 3, 8))
    b = _image(rng, (8,))

    def layer(x, w, b):
        return conv_nhwc(x, w, b, 1, 1)
    path = tmp_path / "conv.fj"
    fused = fuse(layer)
    fusejit.export(fused, [(fusejit.ShapeDtype((None, 6, 7, 3), np.float32),
                            fusejit.ShapeDtype(w.shape, np.float32),
                            fusejit.ShapeDtype(b.shape, np.float32))], path)
    loaded = fusejit.load(path)
    for n in (8, 5, 2, 3):  # M = 42 n: 336 fills the CPU kernel's 48-row tiles, the rest not
        x = _image(rng, (n, 6, 7, 3))
        _bound_ok(loaded(x, w, b), layer, (x, w, b), 27)
