"""A small CNN's forward pass in plain NumPy (windows for convolutions and pooling), fused by
fusejit: each convolution with its bias, batch-norm, ReLU and residual is one implicit-GEMM
kernel, each pooling one reduction kernel. Compared with NumPy on the host.

    python examples/cnn_forward.py [--size N] [--repeat R]     (N: images in the batch)
"""

from __future__ import annotations

import argparse

import numpy as np
import pyopencl.array as cla

from fusejit import default_queue, fuse
from fusejit.bench.timing import median_ms

swv = np.lib.stride_tricks.sliding_window_view


def conv3x3(x, w, b):
    """3x3 convolution, stride 1, zero padding 1, NHWC image, (3, 3, C, K) filters, + bias."""
    p = swv(np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0))), (3, 3), axis=(1, 2))  # n h w c i j
    return np.einsum("nhwcij,ijck->nhwk", p, w) + b


def maxpool2x2(x):
    return swv(x, (2, 2), axis=(1, 2))[:, ::2, ::2].max(axis=(-2, -1))


def batchnorm(y, mean, var, gamma, beta, eps=1e-5):
    """Inference batch-norm: a per-channel scale and shift."""
    return (y - mean) / np.sqrt(var + eps) * gamma + beta


def forward(x, params):
    """28x28x1 images -> 10 logits: conv 8, pool, conv 16 + BN, residual conv 16 + BN, pool,
    global average, dense."""
    h = np.maximum(conv3x3(x, params["w1"], params["b1"]), 0)
    h = maxpool2x2(h)
    h = np.maximum(batchnorm(conv3x3(h, params["w2"], params["b2"]), *params["bn2"]), 0)
    h = np.maximum(batchnorm(conv3x3(h, params["w3"], params["b3"]), *params["bn3"]) + h, 0)
    h = maxpool2x2(h)
    return h.mean(axis=(1, 2)) @ params["wd"] + params["bd"]


def init(rng: np.random.Generator) -> dict:
    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))).astype(np.float32)

    def bn(c):
        return tuple((rng.random(c) + 0.5).astype(np.float32) for _ in range(4))
    return {"w1": w(3, 3, 1, 8), "b1": w(1, 8)[0], "w2": w(3, 3, 8, 16), "b2": w(1, 16)[0],
            "bn2": bn(16), "w3": w(3, 3, 16, 16), "b3": w(1, 16)[0], "bn3": bn(16),
            "wd": w(16, 10), "bd": w(1, 10)[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    params = init(rng)
    x = rng.standard_normal((args.size, 28, 28, 1)).astype(np.float32)
    queue = default_queue()
    xd = cla.to_device(queue, x)
    # the weights are read from the closure: fusejit guards small arrays by value and uploads
    # large ones on each call (see "State read from outside the arguments" in the README)
    fused = fuse(lambda x: forward(x, params))
    got, want = fused(xd).get(), forward(x, params)
    kernels = fused.lower(xd).kernels
    print(f"CNN forward on {queue.device.name.strip()}, batch {args.size}")
    print(f"max abs error vs NumPy: {np.abs(got - want).max():.3g}")
    print(f"kernels per call: {len(kernels)}")
    for k in kernels:
        print(f"  {k.name}: {k.reason.split(';')[0]}")
    t_fused = median_ms(lambda: fused(xd), queue, args.repeat)
    t_numpy = median_ms(lambda: forward(x, params), queue, args.repeat)
    print(f"\n{'variant':<10} {'median ms':>10} {'vs fused':>9}")
    for name, ms in (("fused", t_fused), ("numpy", t_numpy)):
        print(f"{name:<10} {ms:>10.3f} {ms / t_fused:>8.1f}x")


if __name__ == "__main__":
    main()
