"""quantize_linear / dequantize_linear against a NumPy transcription of the ONNX reference."""

from __future__ import annotations

import numpy as np
import pytest

from fusejit import dequantize_linear, fuse, quantize_linear
from fusejit.testing import assert_matches


def onnx_quantize(x, scale, zero_point=None, axis=1, dtype=np.uint8):
    out = np.dtype(zero_point.dtype if zero_point is not None else dtype)
    if np.ndim(scale):
        shape = [1] * x.ndim
        shape[axis % x.ndim] = -1
        scale = scale.reshape(shape)
        zero_point = None if zero_point is None else zero_point.reshape(shape)
    q = np.rint(x / scale)
    if zero_point is not None:
        q = q + zero_point.astype(q.dtype)
    info = np.iinfo(out)
    return np.clip(q, info.min, info.max).astype(out)


def onnx_dequantize(x, scale, zero_point=None, axis=1):
    if np.ndim(scale):
        shape = [1] * x.ndim
        shape[axis % x.ndim] = -1
        scale = scale.reshape(shape)
        zero_point = None if zero_point is None else zero_point.reshape(shape)
    y = x.astype(np.float32)
    if zero_point is not None:
        y = y - zero_point.astype(np.float32)
    return (y * scale.astype(np.float32)).astype(scale.dtype)


@pytest.mark.parametrize("qtype", [np.uint8, np.int8, np.int16])
def test_per_tensor_roundtrip(rng, qtype):
    x = (rng.standard_normal((6, 40)) * 50).astype(np.float32)
    scale = np.float32(0.37)
    zp = np.array(3 if qtype != np.uint8 else 128, dtype=qtype)
    q = quantize_linear(x, scale, zp)
    assert_matches(q, onnx_quantize(x, scale, zp))
    assert_matches(dequantize_linear(q, scale, zp), onnx_dequantize(q, scale, zp))


def test_round_half_to_even_and_saturation():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 300.0, -300.0, 254.5, 255.5], np.float32)
    got = quantize_linear(x, np.float32(1.0), dtype=np.uint8)
    assert got.tolist() == [0, 2, 2, 0, 0, 0, 255, 0, 254, 255]
    got = quantize_linear(x, np.float32(1.0), np.array(0, np.int8))
    assert got.tolist() == [0, 2, 2, 0, -2, -2, 127, -128, 127, 127]


def test_per_axis(rng):
    x = rng.standard_normal((4, 3, 5)).astype(np.float32) * 10
    scale = np.array([0.1, 0.2, 0.5], np.float32)
    zp = np.array([0, 10, -10], np.int8)
    q = quantize_linear(x, scale, zp, axis=1)
    assert_matches(q, onnx_quantize(x, scale, zp, axis=1))
    assert_matches(dequantize_linear(q, scale, zp, axis=1), onnx_dequantize(q, scale, zp, axis=1))
    with pytest.raises(ValueError, match="per-axis"):
        quantize_linear(x, scale, zp, axis=2)


def test_fused_into_a_larger_function(rng):
    @fuse
    def fake_quant(x, scale):
        return dequantize_linear(quantize_linear(x, scale, dtype=np.int8), scale) * 2

    x = rng.standard_normal(1000).astype(np.float32) * 4
    s = np.float32(0.05)
    want = onnx_dequantize(onnx_quantize(x, s, dtype=np.int8), s) * 2
    assert_matches(fake_quant(x, s), want)
    assert len(fake_quant.lower(x, s).kernels) == 1


def test_unsupported_output_type():
    with pytest.raises(TypeError, match="uint8, int8"):
        quantize_linear(np.ones(3, np.float32), np.float32(1), dtype=np.float32)
