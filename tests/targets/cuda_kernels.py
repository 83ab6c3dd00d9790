"""Functions covering every kind of kernel fusejit generates, as abstract CUDA signatures:
what tests/targets/test_cuda_source.py lowers and compiles with NVRTC (no GPU needed).

``FAMILIES``: per family (reductions, rows, scans, gathers, complex, random, GEMM, dynamic
shapes, windows, 64-bit index math, in-place writes, float16), cases ``(fn, args, fuse options, what the lowering must show)``,
with shapes chosen to reach each strategy on a GPU (full, row and column reductions, staged
ones with partials, arg-reductions; tiled and blocked scans; split-K and batched products;
checked gathers with their status buffer...). ``PRODUCTS``: tensor-core GEMM configurations
forced one by one (every kernel path: the mma.sync register path and its variants, the cp.async
ring, wgmma), each with a bias and ReLU epilogue or a prologue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view as swv

import fusejit
import fusejit.quant
from fusejit import ShapeDtype

R = fusejit.random
F2, F4, F8 = np.float16, np.float32, np.float64
C8, C16, I8, I4 = np.complex64, np.complex128, np.int64, np.int32
KEY = (2,), np.uint64
BIG = (1 << 31) + 64


def S(shape: tuple[int | None, ...], dtype: Any = F4) -> ShapeDtype:
    return ShapeDtype(shape, np.dtype(dtype), device="cuda")


def softmax(x: Any) -> Any:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x: Any) -> Any:
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)


def _pools(x: Any) -> Any:
    p = swv(x, (2, 2), axis=(1, 2))[:, ::2, ::2]
    q = swv(np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), mode="edge"), (3, 3),
            axis=(1, 2))[:, ::2, ::2]
    return p.max(axis=(-2, -1)), q.mean(axis=(4, 5))


def _iadd(x: Any, y: Any) -> None:
    x += y * 2


def _conv(x: Any, w: Any, b: Any) -> Any:
    windows = swv(x, (3, 3), axis=(1, 2))  # (n, h, w, c, 3, 3): an implicit GEMM
    return np.maximum(np.tensordot(windows, w, axes=([3, 4, 5], [2, 0, 1])) + b, 0)


# (fn, args, fuse options, a string the source must hold, or group kinds the plan must have)
Case = tuple[Callable[..., Any], list[ShapeDtype], dict[str, Any], str | tuple[str, ...]]
FAMILIES: dict[str, list[Case]] = {
    "reductions": [
        (lambda x: x.sum(), [S((1 << 22,))], {}, "partial"),  # staged: partials, combine
        (lambda x: (x.min(), x.max(), x.mean()), [S((1 << 20,), F2)], {}, "partial"),
        (lambda x: x.sum(1), [S((4096, 7))], {}, ("reduce",)),
        (lambda x: x.var(1), [S((16, 1 << 16))], {}, ("reduce",)),
        (lambda x: x.sum(0), [S((4096, 4096))], {}, ("reduce",)),
        (lambda x: x.mean(0), [S((1000, 300), F2)], {}, ("reduce",)),
        (lambda x: x.sum(0), [S((1 << 20, 3))], {}, "partial"),
        (lambda x: (np.argmax(x), np.argmin(x)), [S((1 << 21,))], {}, "partial"),
        (lambda x: (np.argmax(x, 1), np.argmin(x, 0)), [S((300, 500), F8)], {}, ("reduce",)),
        (lambda x: np.argmax(x, 1), [S((64, 1000), F2)], {}, ("reduce",)),
        (lambda x: (x.sum((0, 2)), x.max(1)), [S((8, 64, 32))], {}, ("reduce",)),
        (lambda x: (x.prod(1), x.sum(0)), [S((100, 50), I8)], {}, ("reduce",)),
        (lambda x: (x.any(), np.all(x, 0)), [S((100, 50), np.uint8)], {}, ("reduce",)),
        (lambda x: (np.nansum(x, 1), np.nanmax(x, 0), np.nanargmin(x, 1)), [S((100, 50))], {},
         ("reduce",)),
        (lambda x: (x.sum(0), x.max(1), np.argmin(x, 0)), [S((300, 200), np.int8)], {},
         ("reduce",)),
        (lambda x: (np.any(x > 0, axis=0), np.all(x > 0, axis=1)), [S((300, 200))], {},
         ("reduce",)),
        (lambda x: (x * x).sum(axis=0), [S((4096, 96), F8)], {}, ("reduce",)),
    ],
    "rows": [
        (softmax, [S((16384, 1024))], {}, ("reduce",)),
        (layernorm, [S((8192, 4096))], {}, ("reduce",)),
        (softmax, [S((512, 40), F2)], {}, ("reduce",)),
        (layernorm, [S((64, 768), F2)], {}, ("reduce",)),
        (softmax, [S((64, 300), F8)], {}, ("reduce",)),
        (lambda x: np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)), [S((128, 2048))], {},
         ("reduce",)),
    ],
    "scans": [
        (lambda x: np.cumsum(x), [S((1 << 20,))], {}, ("scan",)),
        (lambda x: np.cumsum(x * 2), [S((1000,), F2)], {}, ("scan",)),
        (lambda x: np.cumprod(x, 1), [S((64, 4096))], {}, ("scan",)),
        (lambda x: np.cumsum(x, 0), [S((4096, 64), I4)], {}, ("scan",)),
        (lambda x: np.cumsum(x, 0), [S((3000, 7), F2)], {}, ("scan",)),
        (lambda x: np.cumsum(x, 1), [S((64, 100), np.int8)], {}, ("scan",)),
        (lambda x: np.cumprod(x), [S((100000,), F8)], {}, ("scan",)),
        (lambda x: np.nancumsum(x, 1), [S((64, 1000), F2)], {}, ("scan",)),
        (lambda x: np.maximum.accumulate(x, 1), [S((64, 3000))], {}, ("scan",)),
    ],
    "gathers": [
        (lambda x, i: x[i] * 2, [S((1000, 64)), S((100,), I8)], {}, "fj_status"),
        (lambda x, i: x[:, i] + 1, [S((64, 1000), F2), S((10,), I4)], {}, "fj_status"),
        (lambda x, i: (np.take(x, i, mode="wrap"), np.take(x, i, axis=1, mode="clip")),
         [S((64, 100)), S((10,), I8)], {}, ("elementwise",)),
        (lambda x, i: np.take_along_axis(x, i, 1), [S((64, 100), F8), S((64, 5), I8)], {},
         "fj_status"),
        (lambda x: np.take_along_axis(x, x.argmax(1)[:, None], 1), [S((64, 100))], {},
         ("reduce",)),
        (lambda a, v: (np.searchsorted(a, v), np.searchsorted(a, v, side="right")),
         [S((1000,)), S((64, 64))], {}, ("elementwise",)),
        (lambda a, v: np.searchsorted(a, v), [S((1000,), F2), S((64,), F2)], {},
         ("elementwise",)),
        (lambda x, xp, fp: np.interp(x, xp, fp), [S((4096,)), S((100,)), S((100,))], {},
         ("elementwise",)),
        (lambda x, y: -np.take_along_axis(np.log(softmax(x)), y[:, None], 1).mean(),
         [S((256, 1000)), S((256,), I8)], {}, "fj_status"),
    ],
    "complex": [
        (lambda z: (np.exp(z), np.log(z), np.sqrt(z), np.sin(z), np.tanh(z), z ** 2, np.abs(z),
                    np.angle(z), z.conj() * z / (z + 1j)), [S((256,), C8)], {}, "fj_c64"),
        (lambda z, w: (np.exp(z), np.log(z), np.cos(z), np.arctan(z), z ** w, z / w,
                       np.isnan(z), z == w), [S((256,), C16)] * 2, {}, "fj_c128"),
        (lambda z, x: (z * x, (z + x).astype(C16), z.imag), [S((256,), C8), S((256,), F8)],
         {}, "fj_c128"),
        (lambda z: (np.abs(z).sum(), z.sum(0), z.mean()), [S((100, 50), C8)], {}, ("reduce",)),
        (lambda z: (z.prod(1), z.sum()), [S((100, 50), C16)], {}, ("reduce",)),
        (lambda z: np.cumsum(z, 1), [S((64, 100), C8)], {}, ("scan",)),
        (lambda z, i: z[i].conj(), [S((100,), C16), S((10,), I8)], {}, "fj_status"),
    ],
    "random": [
        (lambda k, x: (x + R.normal(k, x.shape, F4), R.uniform(k, x.shape, F8),
                       R.bernoulli(k, 0.3, x.shape), R.integers(k, 0, 100, x.shape)),
         [S(*KEY), S((4096,))], {}, "fj_philox"),
        (lambda k, x: np.where(R.bernoulli(k, 0.9, x.shape), x / 0.9, 0),
         [S(*KEY), S((64, 1024), F2)], {}, "fj_philox"),
        (lambda k, x: x * R.uniform(R.split(k, 3)[1], x.shape, F4) +
         R.normal(R.fold_in(k, 7), x.shape, F4), [S(*KEY), S((128, 128))], {}, "fj_philox"),
        (lambda k: R.normal(k, (64, 4096), F4).sum(1), [S(*KEY)], {}, ("reduce",)),
    ],
    "gemm": [  # matmul_precision="highest" (the SIMT kernels)
        (lambda a, b, c: np.maximum(a @ b + c, 0), [S((4096, 4096)), S((4096, 4096)),
                                                     S((4096,))], {}, ("gemm",)),
        (lambda a, b: np.tanh(a @ b) * 2, [S((33, 40)), S((40, 17))], {}, ("gemm",)),
        (lambda a, b: a @ b, [S((64, 8192)), S((8192, 64))], {}, "partial"),  # split-K
        (lambda a, b: (a @ b).sum(1), [S((128, 256), F8), S((256, 64), F8)], {}, ("gemm",)),
        (lambda a, b: a @ b.T, [S((256, 256), F2), S((256, 256), F2)], {}, ("gemm",)),
        (lambda a, b: np.exp(a) @ (b * 2), [S((4, 128, 64)), S((4, 64, 96))], {}, ("gemm",)),
        (lambda a, b: a @ b, [S((64, 64), I4), S((64, 64), I4)], {}, ("gemm",)),
        (lambda a, v: a @ v + 1, [S((4096, 512)), S((512,))], {}, ("gemm",)),
        (lambda a, b: np.einsum("bij,bjk->bik", a, b), [S((8, 64, 32)), S((8, 32, 16))], {},
         ("gemm",)),
    ],
    "dynamic": [
        (softmax, [S((None, 1024))], {"dynamic": True}, ("reduce",)),
        (lambda x: np.exp(x - x.max(-1, keepdims=True)).sum(-1), [S((None, None))],
         {"dynamic": True}, ("reduce",)),
        (lambda x, y: np.sqrt(x * x + y), [S((None,)), S((None,))], {"dynamic": True},
         ("elementwise",)),
        (lambda x: x / x.sum(-1, keepdims=True), [S((64, None), F2)], {"dynamic": True},
         ("reduce",)),
        (lambda x: x.sum(0), [S((None, 64))], {"dynamic": True}, ("reduce",)),
        (lambda x: np.cumsum(x, 1), [S((None, 128))], {"dynamic": True}, ("scan",)),
        (lambda a, b: a @ b, [S((None, 64)), S((64, 32))], {"dynamic": True}, ("gemm",)),
        (lambda x, i: x[i], [S((None, 16)), S((8,), I8)], {"dynamic": True}, "fj_status"),
    ],
    "windows": [
        (_conv, [S((2, 16, 16, 8)), S((3, 3, 8, 16)), S((16,))], {}, ("gemm",)),
        (_pools, [S((2, 16, 16, 8))], {}, ("reduce",)),
        (lambda x, k: (swv(x, (3, 3), axis=(1, 2)) * k).sum(axis=(-2, -1)),
         [S((1, 16, 16, 4), F2), S((4, 3, 3), F2)], {}, ("reduce",)),
        (lambda a, v: (np.convolve(a, v), np.correlate(a, v, "same")), [S((1000,)), S((9,))],
         {}, ("reduce",)),
        (lambda s: swv(s, 5).mean(axis=-1), [S((4096,), F8)], {}, ("reduce",)),
    ],
    "wide": [  # past 2^31 elements: 64-bit index math (Module.wide)
        (lambda x: np.sin(x) * 2, [S((BIG,), F2)], {}, ("elementwise",)),
        (lambda x: x / x.sum(-1, keepdims=True), [S(((1 << 21) + 1, 1024), F2)], {},
         ("reduce",)),
        (lambda x: np.cumsum(x), [S((BIG,), np.uint8)], {}, ("scan",)),
        (lambda x, i: x[i], [S((BIG,), F2), S((100,), I8)], {}, "fj_status"),
    ],
    "writes": [  # in place, through views; ONNX quantization; norms
        (_iadd, [S((1000,)), S((1000,))], {}, ("elementwise",)),
        (lambda x, y: x[::2].__imul__(y), [S((1000,), F2), S((500,), F2)], {},
         ("elementwise",)),
        (lambda x, s: fusejit.quant.dequantize_linear(
            fusejit.quant.quantize_linear(x, s, np.uint8(3)), s, np.uint8(3)),
         [S((64, 64)), np.float32(0.1)], {}, ("elementwise",)),
        (lambda x: (np.linalg.norm(x), np.linalg.norm(x, axis=1), np.linalg.norm(x, 1, 0)),
         [S((64, 64))], {}, ("reduce",)),
    ],
    "float16": [
        (lambda x, y: (np.exp(x) * y, x.sum(), x.max(1), np.cumsum(x, 1),
                       np.where(x > y, x, y).astype(F4), x @ y.T), [S((64, 64), F2)] * 2, {},
         ("reduce", "scan", "gemm")),
        (lambda x, y: (np.concatenate([x, y], 1), np.stack([x, y]).sum(0)),
         [S((64, 64), F2)] * 2, {}, ("reduce",)),
    ],
}

# tensor-core configurations (codegen/gemm/mma.py's config(): kind, MWG x NWG x KWG over warps,
# variant letters), each forced on one product layout: every variant letter and kernel path
# at least once; a prologue (exp of a.T) takes the register path whatever the configuration
PRODUCTS: list[tuple[str, tuple[int, int, int, int, int, str], str]] = [
    ("tf32", (128, 128, 16, 2, 2, "pal"), "nn"),  # cp.async ring, ldmatrix, pipelined
    ("tf32", (64, 256, 16, 1, 4, "tvp"), "nn"),  # register path: rows, vector stores
    ("3xtf32", (128, 128, 16, 2, 2, "a"), "nt"),
    ("f16", (128, 256, 16, 2, 4, "pasl"), "nt"),  # a ring of 4 stages
    ("f16", (128, 256, 16, 2, 4, "vw"), "nn"),  # halves packed into words
    ("f16", (64, 64, 32, 2, 2, "pal"), "tn"),  # a prologue: the register path all the same
    # wgmma (sm_90a only)
    ("tf32", (192, 256, 8, 12, 1, "agr"), "nn"),  # R fragments from global memory
    ("3xtf32", (256, 128, 8, 8, 1, "agrh"), "nn"),  # partial sums of half the columns
    ("f16", (256, 128, 16, 8, 1, "ag"), "nn"),  # ldmatrix.trans of R
    ("f16", (192, 256, 16, 12, 1, "agr"), "nt"),
]
# the mma.sync kernels the sm_80 pass compiles too (their source is the same on either
# architecture: a ring and the register path)
SM80_PRODUCTS = (0, 4)


def product(kind: str, layout: str) -> tuple[Callable[..., Any], list[ShapeDtype], str]:
    """A 200 x 136 x 72 product (edge tiles, a K tail) of ``layout`` ("nn": a @ b, "nt":
    a @ b.T, "tn": exp(a.T) @ b) with an epilogue, its abstract arguments and its
    matmul_precision."""
    d = F2 if kind == "f16" else F4
    m, n, k = 200, 136, 72
    a = S((k, m) if layout == "tn" else (m, k), d)
    b = S((n, k) if layout == "nt" else (k, n), d)
    fns = {"nn": lambda a, b, c: np.maximum(a @ b + c, 0),
           "nt": lambda a, b, c: np.maximum(a @ b.T + c, 0),
           "tn": lambda a, b, c: np.tanh(np.exp(a.T) @ b) * c}
    return fns[layout], [a, b, S((n,), d)], "3xtf32" if kind == "3xtf32" else "tf32"
