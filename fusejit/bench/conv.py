"""``python -m fusejit.bench.conv``: convolution layers written with windows, side by side in one run.

Each layer is NumPy code (``sliding_window_view`` + ``np.einsum``) + bias + ReLU, timed as

* **fused**: the whole layer under ``@fuse``: one implicit-GEMM kernel (on CPU devices a large
  product may run in the host's BLAS instead, its window operand stored as an im2col matrix;
  ``fused_in_kernel`` is the same layer kept in the OpenCL kernel);
* **gemm_then_epilogue**: the convolution fused alone, then bias + ReLU as a second kernel;
* **im2col_then_gemm**: the windows stored as a matrix first (NumPy-style im2col), then the
  product with its fused bias + ReLU;
* the **anchor**: torch's cuDNN (``conv2d`` + ``relu`` on channels_last tensors, the mode's
  precision) where torch has CUDA, else NumPy (``np.einsum(..., optimize=True)``).

``--impls fused,fused-cuda`` runs fusejit on the OpenCL device and on the CUDA device (torch CUDA
tensors in and out); ``--modes float32,tf32,float16`` runs every layer in each precision mode:
float32 (fusejit's "highest", cuDNN with TF32 off), tf32 (``matmul_precision="tf32"``, cuDNN with
TF32 on), 3xtf32, float16 (float16 data, fusejit's tensor cores under "tf32", cuDNN in half).
Every row gives milliseconds and TFLOP/s of fusejit and of the anchor, and both one's max error
against a float64 reference (the same rounded inputs, computed on the host one window offset at
a time, independent of either). ``--scale full`` is the issue's GPU table (ResNet-50's 3x3 layer,
a 1x1 layer, the 7x7/2 stem and a depthwise 3x3 layer, N=32).

Pooling (2x2 max, stride 2) is timed against the same anchor, in float32.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import fusejit
from fusejit import fuse
from fusejit.bench.gemm_timing import steady
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


@dataclass(frozen=True)
class Mode:
    """A precision mode: the data's dtype, fusejit's matmul_precision, cuDNN's TF32 switch."""

    name: str
    dtype: str
    precision: str
    tf32: bool


MODES = {"float32": Mode("float32", "float32", "highest", False),
         "tf32": Mode("tf32", "float32", "tf32", True),
         "3xtf32": Mode("3xtf32", "float32", "3xtf32", True),
         # (float16 products run on tensor cores under any precision but "highest")
         "float16": Mode("float16", "float16", "tf32", False)}


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


def reference(layer: Layer, host: list[np.ndarray]) -> np.ndarray:
    """The layer in float64 on the host, one window offset (i, j) at a time: a sum of shifted
    images times the filter tap (a product over channels, or per channel for depthwise)."""
    x, w, b = (a.astype(np.float64) for a in host)
    p, s, o = layer.pad, layer.stride, layer.out_hw
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    out = np.zeros((layer.n, o, o, layer.k))
    for i in range(layer.window):
        for j in range(layer.window):
            shifted = xp[:, i:i + s * (o - 1) + 1:s, j:j + s * (o - 1) + 1:s]
            out += shifted * w[:, i, j] if layer.depthwise else shifted @ w[i, j]
    return np.maximum(out + b, 0)


def _data(layer: Layer, rng: np.random.Generator, dtype: np.dtype) -> list[np.ndarray]:
    x = rng.standard_normal((layer.n, layer.hw, layer.hw, layer.c)).astype(dtype)
    shape = (layer.c, layer.window, layer.window) if layer.depthwise else \
        (layer.window, layer.window, layer.c, layer.k)
    w = (rng.standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))).astype(dtype)
    return [x, w, rng.standard_normal(layer.k).astype(dtype)]


def _errors(got: Any, ref: np.ndarray) -> dict[str, float]:
    err = np.abs(np.asarray(got, np.float64) - ref)
    return {"max_abs_err": float(err.max()), "max_rel_err": float(err.max() / np.abs(ref).max())}


# -- where fusejit runs -----------------------------------------------------------------------------


class Impl:
    """fusejit on the OpenCL device: pyopencl arrays in and out."""

    name = "fused"

    def __init__(self) -> None:
        self.queue = fusejit.default_queue()
        self.device = self.queue.device.name.strip()

    def put(self, a: np.ndarray) -> Any:
        import pyopencl.array as cla

        return cla.to_device(self.queue, a)

    def get(self, a: Any) -> np.ndarray:
        return a.get()

    def sync(self) -> None:
        self.queue.finish()


class CudaImpl(Impl):
    """fusejit on the CUDA device (``fused-cuda``): torch CUDA tensors in and out."""

    name = "fused-cuda"

    def __init__(self, torch: Any) -> None:
        from fusejit.runtime.backend import backend_named

        self.torch = torch
        self.device = backend_named("cuda").default_queue().name

    def put(self, a: np.ndarray) -> Any:
        return self.torch.from_numpy(a).cuda()

    def get(self, a: Any) -> np.ndarray:
        return a.cpu().numpy()

    def sync(self) -> None:
        self.torch.cuda.synchronize()


def cuda_torch() -> Any:
    """torch, when it is installed and has a CUDA GPU; else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def impls(names: list[str], torch: Any) -> list[Impl]:
    out: list[Impl] = []
    for name in names:
        if name == "fused":
            out.append(Impl())
        elif name == "fused-cuda":
            if torch is None:
                raise SystemExit("fused-cuda runs on torch CUDA tensors: it needs torch with a "
                                 "CUDA GPU")
            out.append(CudaImpl(torch))
        else:
            raise SystemExit(f"unknown implementation {name!r} (fused, fused-cuda)")
    return out


# -- the anchor: torch's cuDNN, else NumPy ----------------------------------------------------------


def torch_layer(torch: Any, layer: Layer, host: list[np.ndarray]) -> Callable[[], Any]:
    """The layer as torch writes it: conv2d + relu on channels_last tensors (NCHW shapes, NHWC
    memory), filters (K, C/groups, kh, kw), in the host arrays' dtype."""
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


def anchor(layer: Layer, host: list[np.ndarray], torch: Any, mode: Mode
           ) -> tuple[str, float, np.ndarray]:
    """(name, seconds per call, NHWC result) of the anchor."""
    if torch is None:
        full = layer_fn(layer)
        return "numpy", steady(lambda: full(*host), lambda: None), full(*host)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = mode.tf32
    call = torch_layer(torch, layer, host)
    with torch.inference_mode():
        out = call().permute(0, 2, 3, 1).cpu().numpy()
        t = steady(call, torch.cuda.synchronize)
    return f"torch cuDNN ({'TF32' if mode.tf32 else host[0].dtype.name})", t, out


# -- the table --------------------------------------------------------------------------------------


def run(scale: str, modes: list[str], impl_names: list[str]) -> dict[str, Any]:
    torch = cuda_torch()
    where = impls(impl_names, torch)
    rows = []
    for layer in layers(scale):
        for mode in (MODES[m] for m in modes):
            rng = np.random.default_rng(0)
            host = _data(layer, rng, np.dtype(mode.dtype))
            ref = reference(layer, host)
            name, t_anchor, out = anchor(layer, host, torch, mode)
            base = {"layer": layer.name, "mode": mode.name,
                    "shape": f"N={layer.n} {layer.hw}x{layer.hw}x{layer.c} -> "
                             f"{layer.out_hw}x{layer.out_hw}x{layer.k}",
                    "anchor": name, "anchor_ms": t_anchor * 1e3,
                    "anchor_tflops": layer.flops / t_anchor / 1e12,
                    **{f"anchor_{k}": v for k, v in _errors(out, ref).items()}}
            for impl in where:
                row = {**base, **_layer_row(layer, impl, host, ref, mode.precision)}
                row["fused_vs_anchor"] = t_anchor / (row["fused_ms"] / 1e3)
                print(json.dumps(row), flush=True)
                rows.append(row)
    for impl in where:
        rows.append(_pool(scale, impl, torch))
        print(json.dumps(rows[-1]), flush=True)
    return {"devices": {i.name: i.device for i in where}, "modes": modes, "rows": rows}


def _layer_row(layer: Layer, impl: Impl, host: list[np.ndarray], ref: np.ndarray,
               precision: str) -> dict[str, Any]:
    """One layer timed every way on ``impl`` (see the module docstring)."""
    def fuse_(f: Callable[..., Any]) -> Any:
        return fuse(f, matmul_precision=precision)
    dev = [impl.put(h) for h in host]
    full, conv = layer_fn(layer), conv_fn(layer)
    fused = fuse_(full)
    kernels = fused.lower(*dev).kernels
    row = {"impl": impl.name, "device": impl.device, "kernels": len(kernels),
           "kernel": kernels[0].reason.rpartition("kernel: ")[2],
           **_errors(impl.get(fused(*dev)), ref)}
    t_fused = steady(lambda: fused(*dev), impl.sync)
    row.update(fused_ms=t_fused * 1e3, fused_tflops=layer.flops / t_fused / 1e12)
    if impl.name == "fused":  # (CPU devices: a large product in the host's BLAS, or not)
        in_kernel = fuse_(full)
        with kept_in_kernels():
            in_kernel(*dev)
        row["fused_in_kernel_ms"] = steady(lambda: in_kernel(*dev), impl.sync) * 1e3
    alone, epilogue = fuse_(conv), fuse(lambda y, b: np.maximum(y + b, 0))
    t_split = steady(lambda: epilogue(alone(dev[0], dev[1]), dev[2]), impl.sync)
    row.update(gemm_then_epilogue_ms=t_split * 1e3, fused_vs_split=t_split / t_fused)
    if not layer.depthwise:
        # (an output is stored as a plain array: the im2col matrix)
        im2col = fuse(lambda x: windows(x, layer).transpose(0, 1, 2, 4, 5, 3).reshape(
            -1, layer.window ** 2 * layer.c))
        gemm = fuse_(lambda a, w, b: np.maximum(a @ w.reshape(-1, layer.k) + b, 0))
        t_im2col = steady(lambda: gemm(im2col(dev[0]), dev[1], dev[2]), impl.sync)
        row.update(im2col_then_gemm_ms=t_im2col * 1e3, fused_vs_im2col=t_im2col / t_fused)
    return row


def _pool(scale: str, impl: Impl, torch: Any) -> dict[str, Any]:
    n, hw, c = {"full": (32, 112, 64), "small": (4, 56, 64)}.get(scale, (1, 16, 16))
    x = np.random.default_rng(0).standard_normal((n, hw, hw, c)).astype(np.float32)

    def pool(x: Any) -> Any:
        return swv(x, (2, 2), axis=(1, 2))[:, ::2, ::2].max(axis=(-2, -1))
    if torch is not None:
        xt = torch.from_numpy(x).cuda().permute(0, 3, 1, 2).contiguous(
            memory_format=torch.channels_last)
        name = "torch cuDNN"
        t_anchor = steady(lambda: torch.nn.functional.max_pool2d(xt, 2), torch.cuda.synchronize)
    else:
        name, t_anchor = "numpy", steady(lambda: pool(x), lambda: None)
    xd = impl.put(x)
    fused = fuse(pool)
    assert np.array_equal(impl.get(fused(xd)), pool(x))
    t_fused = steady(lambda: fused(xd), impl.sync)
    return {"layer": "maxpool 2x2/2", "mode": "float32", "shape": f"N={n} {hw}x{hw}x{c}",
            "impl": impl.name, "device": impl.device, "anchor": name,
            "kernels": len(fused.lower(xd).kernels), "anchor_ms": t_anchor * 1e3,
            "fused_ms": t_fused * 1e3, "fused_vs_anchor": t_anchor / t_fused}


def table(rows: list[dict[str, Any]]) -> str:
    """The rows side by side: fusejit and the anchor, ms, TFLOP/s, max relative error."""
    def num(x: Any, fmt: str) -> str:
        return format(x, fmt) if isinstance(x, float) else "-".rjust(int(fmt.split(".")[0]))
    head = (f"{'layer':<20} {'mode':<8} {'impl':<10} {'ms':>9} {'TFLOP/s':>8} {'max err':>8}  "
            f"{'anchor':<20} {'ms':>9} {'TFLOP/s':>8} {'max err':>8} {'speedup':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['layer']:<20} {r['mode']:<8} {r['impl']:<10} {num(r['fused_ms'], '9.3f')} "
            f"{num(r.get('fused_tflops'), '8.2f')} {num(r.get('max_rel_err'), '8.1e')}  "
            f"{r['anchor']:<20} {num(r['anchor_ms'], '9.3f')} "
            f"{num(r.get('anchor_tflops'), '8.2f')} {num(r.get('anchor_max_rel_err'), '8.1e')} "
            f"{num(r['fused_vs_anchor'], '7.2f')}")
    note = "(max err: max |x - float64 reference| / max |reference|; speedup: anchor ms / fusejit ms)"
    return "\n".join([*lines, note])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", default=os.environ.get("FUSEJIT_BENCH_SCALE", "small"),
                   choices=("tiny", "small", "full"))
    p.add_argument("--modes", default=None,
                   help=f"comma-separated precision modes ({', '.join(MODES)}); default: the "
                        "one --dtype and --precision name")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    p.add_argument("--precision", default="highest", choices=("highest", "tf32", "3xtf32"),
                   help="fusejit's matmul_precision (and cuDNN's TF32 when not highest)")
    p.add_argument("--impls", default="fused",
                   help="comma-separated: fused (the OpenCL device), fused-cuda (the CUDA device)")
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    if args.modes is None:
        modes = ["float16" if args.dtype == "float16" else
                 "float32" if args.precision == "highest" else args.precision]
    else:
        modes = [m.strip() for m in args.modes.split(",")]
        unknown = [m for m in modes if m not in MODES]
        if unknown:
            p.error(f"unknown modes {unknown}: choose from {', '.join(MODES)}")
    result = run(args.scale, modes, [i.strip() for i in args.impls.split(",")])
    print(table(result["rows"]), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
