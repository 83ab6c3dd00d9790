"""``python -m fusejit.bench.conv``: convolution layers written with windows, side by side in one run.

Each layer is NumPy code (``sliding_window_view`` + ``np.einsum``) + bias + ReLU, timed as

* **fused**: the whole layer under ``@fuse``: one implicit-GEMM kernel (on CPU devices a large
  product may run in the host's BLAS instead, its window operand stored as an im2col matrix;
  ``fused_in_kernel`` is the same layer kept in the OpenCL kernel);
* **gemm_then_epilogue**: the convolution fused alone, then bias + ReLU as a second kernel;
* **im2col_then_gemm**: the windows stored as a matrix first (NumPy-style im2col), then the
  product with its fused bias + ReLU;
* the **anchor**: torch (channels_last, TF32 off) on a CUDA device, else NumPy
  (``np.einsum(..., optimize=True)``).

``--dtype float16`` runs every layer in float16, ``--precision tf32`` (or ``3xtf32``) fuses with
that ``matmul_precision`` and lets cuDNN use TF32 too.

Pooling (2x2 max, stride 2) is timed against the same anchor. Results are checked against it.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl.array as cla

import fusejit
from fusejit import fuse
from fusejit.bench.gemm_timing import anchor, steady
from fusejit.passes.host_gemm import kept_in_kernels

swv = np.lib.stride_tricks.sliding_window_view


@dataclass(frozen=True)
class Layer:
    name: str
    n: int
    hw: int
    c: int
    k: int
    window: int
    stride: int = 1
    depthwise: bool = False

    @property
    def pad(self) -> int:
        return self.window // 2

    @property
    def out_hw(self) -> int:
        return (self.hw + 2 * self.pad - self.window) // self.stride + 1

    @property
    def flops(self) -> float:
        per = self.window ** 2 * (1 if self.depthwise else self.c)
        return 2.0 * self.n * self.out_hw ** 2 * self.k * per


def layers(scale: str) -> list[Layer]:
    if scale == "full":
        return [Layer("resnet 3x3 64->64", 32, 56, 64, 64, 3),
                Layer("1x1 64->256", 32, 56, 64, 256, 1),
                Layer("stem 7x7/2 3->64", 32, 224, 3, 64, 7, 2),
                Layer("depthwise 3x3 256", 32, 56, 256, 256, 3, depthwise=True)]
    if scale == "small":
        return [Layer("resnet 3x3 64->64", 4, 56, 64, 64, 3),
                Layer("1x1 64->256", 4, 56, 64, 256, 1),
                Layer("depthwise 3x3 256", 4, 56, 256, 256, 3, depthwise=True)]
    return [Layer("3x3 16->16", 1, 16, 16, 16, 3)]


def windows(x: Any, layer: Layer) -> Any:
    """The layer's (n, h', w', c, kh, kw) window view of the zero-padded NHWC image."""
    p, s = layer.pad, layer.stride
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    return swv(xp, (layer.window,) * 2, axis=(1, 2))[:, ::s, ::s]


def conv_fn(layer: Layer) -> Callable[..., Any]:
    def conv(x: Any, w: Any) -> Any:
        p = windows(x, layer)
        if layer.depthwise:  # w: (c, kh, kw)
            return (p * w).sum(axis=(-2, -1))
        return np.einsum("nhwcij,ijck->nhwk", p, w, optimize=True)
    return conv


def layer_fn(layer: Layer) -> Callable[..., Any]:
    conv = conv_fn(layer)
    return lambda x, w, b: np.maximum(conv(x, w) + b, 0)


def _data(layer: Layer, rng: np.random.Generator, dtype: np.dtype) -> list[np.ndarray]:
    x = rng.standard_normal((layer.n, layer.hw, layer.hw, layer.c)).astype(dtype)
    shape = (layer.c, layer.window, layer.window) if layer.depthwise else \
        (layer.window, layer.window, layer.c, layer.k)
    w = (rng.standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))).astype(dtype)
    return [x, w, rng.standard_normal(layer.k).astype(dtype)]


def _torch_layer(torch: Any, layer: Layer, host: list[np.ndarray]) -> Callable[[], Any]:
    x = torch.from_numpy(host[0]).cuda().permute(0, 3, 1, 2).contiguous(
        memory_format=torch.channels_last)
    w = host[1]
    w = w[:, None] if layer.depthwise else w.transpose(3, 2, 0, 1)  # (k, c/groups, kh, kw)
    wt = torch.from_numpy(np.ascontiguousarray(w)).cuda().contiguous(
        memory_format=torch.channels_last)
    b = torch.from_numpy(host[2]).cuda()
    groups = layer.c if layer.depthwise else 1
    f = torch.nn.functional
    return lambda: f.relu(f.conv2d(x, wt, b, layer.stride, layer.pad, groups=groups))


def run(scale: str, dtype: str = "float32", precision: str = "highest") -> dict[str, Any]:
    queue = fusejit.default_queue()
    name, torch = anchor(queue)
    if torch is not None and precision != "highest":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        name = "torch (TF32)"
    rng = np.random.default_rng(0)
    rows = [_layer_row(layer, queue, torch, name, rng, np.dtype(dtype), precision)
            for layer in layers(scale)]
    rows.append(_pool(scale, queue, torch, name, rng))
    print(json.dumps(rows[-1]), flush=True)
    return {"anchor": name, "device": queue.device.name, "dtype": dtype, "precision": precision,
            "rows": rows}


def _layer_row(layer: Layer, queue: Any, torch: Any, name: str, rng: np.random.Generator,
               dtype: np.dtype, precision: str) -> dict[str, Any]:
    """One layer timed every way (see the module docstring)."""
    host = _data(layer, rng, dtype)

    def fuse_(f: Callable[..., Any]) -> Any:
        return fuse(f, matmul_precision=precision)
    dev = [cla.to_device(queue, h) for h in host]
    full, conv = layer_fn(layer), conv_fn(layer)
    if torch is not None:
        call = _torch_layer(torch, layer, host)
        with torch.inference_mode():
            ref = call().permute(0, 2, 3, 1).cpu().numpy()
            t_anchor = steady(call, torch.cuda.synchronize)
    else:
        ref = full(*host)
        t_anchor = steady(lambda: full(*host), lambda: None)
    fused = fuse_(full)
    got = fused(*dev).get().astype(np.float64)
    row = {"layer": layer.name, "shape": f"N={layer.n} {layer.hw}x{layer.hw}x{layer.c} -> "
           f"{layer.out_hw}x{layer.out_hw}x{layer.k}",
           "kernels": len(fused.lower(*dev).kernels),
           "max_rel_err": float(np.abs(got - ref).max() / np.abs(ref).astype(np.float64).max()),
           "anchor": name, "anchor_ms": t_anchor * 1e3}
    t_fused = steady(lambda: fused(*dev), queue.finish)
    in_kernel = fuse_(full)
    with kept_in_kernels():
        in_kernel(*dev)
    t_in_kernel = steady(lambda: in_kernel(*dev), queue.finish)
    alone, epilogue = fuse_(conv), fuse(lambda y, b: np.maximum(y + b, 0))
    t_split = steady(lambda: epilogue(alone(dev[0], dev[1]), dev[2]), queue.finish)
    row.update(fused_ms=t_fused * 1e3, fused_in_kernel_ms=t_in_kernel * 1e3,
               gemm_then_epilogue_ms=t_split * 1e3)
    if not layer.depthwise:
        # (an output is stored as a plain array: the im2col matrix)
        im2col = fuse(lambda x: windows(x, layer).transpose(0, 1, 2, 4, 5, 3).reshape(
            -1, layer.window ** 2 * layer.c))
        gemm = fuse_(lambda a, w, b: np.maximum(a @ w.reshape(-1, layer.k) + b, 0))
        t_im2col = steady(lambda: gemm(im2col(dev[0]), dev[1], dev[2]), queue.finish)
        row["im2col_then_gemm_ms"] = t_im2col * 1e3
        row["fused_vs_im2col"] = t_im2col / t_fused
    row.update(fused_vs_split=t_split / t_fused, fused_vs_anchor=t_anchor / t_fused,
               fused_tflops=layer.flops / t_fused / 1e12)
    print(json.dumps(row), flush=True)
    return row


def _pool(scale: str, queue: Any, torch: Any, name: str, rng: np.random.Generator
          ) -> dict[str, Any]:
    n, hw, c = {"full": (32, 112, 64), "small": (4, 56, 64)}.get(scale, (1, 16, 16))
    x = rng.standard_normal((n, hw, hw, c)).astype(np.float32)

    def pool(x: Any) -> Any:
        return swv(x, (2, 2), axis=(1, 2))[:, ::2, ::2].max(axis=(-2, -1))
    if torch is not None:
        xt = torch.from_numpy(x).cuda().permute(0, 3, 1, 2).contiguous(
            memory_format=torch.channels_last)
        t_anchor = steady(lambda: torch.nn.functional.max_pool2d(xt, 2), torch.cuda.synchronize)
    else:
        t_anchor = steady(lambda: pool(x), lambda: None)
    xd = cla.to_device(queue, x)
    fused = fuse(pool)
    assert np.array_equal(fused(xd).get(), pool(x))
    t_fused = steady(lambda: fused(xd), queue.finish)
    return {"layer": "maxpool 2x2/2", "shape": f"N={n} {hw}x{hw}x{c}", "anchor": name,
            "kernels": len(fused.lower(xd).kernels), "anchor_ms": t_anchor * 1e3,
            "fused_ms": t_fused * 1e3, "fused_vs_anchor": t_anchor / t_fused}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", default=os.environ.get("FUSEJIT_BENCH_SCALE", "small"),
                   choices=("tiny", "small", "full"))
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    p.add_argument("--precision", default="highest", choices=("highest", "tf32", "3xtf32"),
                   help="fusejit's matmul_precision (and cuDNN's TF32 when not highest)")
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    result = run(args.scale, args.dtype, args.precision)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
