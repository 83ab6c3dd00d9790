"""``python -m fusejit.bench.gemm --precision``: the tensor-core table of the precision issue, side
by side with torch in one run.

For 4096^3 + bias + ReLU (and, with ``--mlp``, the MLP block): fusejit under each
matmul_precision ("highest", "3xtf32", "tf32" on float32 data; float16 data under "tf32", which
runs the f16 MMA) against torch with TF32 off, TF32 on and in half precision. Each row: steady
ms, TFLOP/s, the fraction of the measured peak of the instruction it runs (FP32 FMA 63,
TF32 MMA 304, f16 MMA 606 TFLOP/s on the H200; 3xTF32 issues three TF32 products per term),
the error against a float64 product, and the kernel chosen. ``--mma-sweep`` also times every
candidate of the MMA tuning space and its variants (gemm_mma.sweep_space) on 4096^3,
each with its error; ``--sweep-budget S`` stops it after S seconds.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import fusejit
from fusejit import fuse
from fusejit.codegen.gemm import mma as gemm_mma, tune as gemm_tune
from fusejit.bench.gemm_timing import TorchNs, anchor, steady
from fusejit.bench.workloads import dense_relu, mlp_block

PEAK = {"fp32": 63.0, "tf32": 304.0, "f16": 606.0}  # TFLOP/s, measured on the H200
GOALS = {"3xtf32": 1.4, "tf32": 0.75, "f16": 0.45}  # ms, 4096^3 + bias + ReLU


def _peak_fraction(kind: str, tflops: float) -> float:
    if kind == "3xtf32":
        return 3 * tflops / PEAK["tf32"]
    return tflops / PEAK["f16" if kind == "f16" else "tf32" if kind == "tf32" else "fp32"]


def _rows_for(label: str, fn: Any, shapes: tuple, flops: float, torch: Any,
              queue: cl.CommandQueue, rng: np.random.Generator) -> list[dict[str, Any]]:
    host = [(rng.standard_normal(s) / math.sqrt(s[-1] if len(s) > 1 else 1)).astype(np.float32)
            for s in shapes]
    ref = None
    if torch is not None:  # the float64 product, on the GPU
        with torch.inference_mode():
            ref = fn(TorchNs(torch), *[torch.from_numpy(h).cuda().double() for h in host])
            ref = ref.cpu().numpy()
    scale = float(np.max(np.abs(ref))) if ref is not None else 1.0
    rows = []
    variants = [("highest", np.float32, "highest", "fp32"), ("3xtf32", np.float32, "3xtf32",
                                                             "3xtf32"),
                ("tf32", np.float32, "tf32", "tf32"), ("f16 inputs", np.float16, "tf32", "f16")]
    for name, dtype, precision, kind in variants:
        dev = [cla.to_device(queue, h.astype(dtype)) for h in host]
        f = fuse(lambda *a, _fn=fn: _fn(np, *a), matmul_precision=precision)
        try:
            t0 = time.perf_counter()
            out = f(*dev)
            queue.finish()
            first = time.perf_counter() - t0
            t = steady(lambda: f(*dev), queue.finish)
        except Exception as exc:  # noqa: BLE001 - report the row and go on
            rows.append({"case": label, "who": f"fusejit {name}", "error": str(exc)[:400]})
            print(json.dumps(rows[-1]), flush=True)
            continue
        got = out.get().astype(np.float64)
        err = float(np.max(np.abs(got - ref)) / scale) if ref is not None else None
        rms = float(np.sqrt(np.mean((got - ref) ** 2)) / scale) if ref is not None else None
        kernels = f.lower(*dev).kernels
        tfl = flops / t / 1e12
        rows.append({"case": label, "who": f"fusejit {name}", "ms": t * 1e3, "tflops": tfl,
                     "peak_frac": _peak_fraction(kind, tfl), "first_call_s": first,
                     "max_rel_err": err, "rms_rel_err": rms,
                     "goal_ms": GOALS.get(kind) if label.startswith("4096^3") else None,
                     "config": [k.reason.split("kernel: ")[-1][:160] for k in kernels
                                if "GEMM" in k.reason or "gemm" in k.reason]})
        print(json.dumps(rows[-1]), flush=True)
    if torch is not None:
        for name, tf32, tdtype, kind in (("torch fp32 (TF32 off)", False, torch.float32, "fp32"),
                                         ("torch TF32", True, torch.float32, "tf32"),
                                         ("torch half", False, torch.float16, "f16")):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            tdev = [torch.from_numpy(h).cuda().to(tdtype) for h in host]
            ns = TorchNs(torch)
            with torch.inference_mode():
                got = fn(ns, *tdev)
                t = steady(lambda: fn(ns, *tdev), torch.cuda.synchronize)
            got = got.double().cpu().numpy()
            tfl = flops / t / 1e12
            rows.append({"case": label, "who": name, "ms": t * 1e3, "tflops": tfl,
                         "peak_frac": _peak_fraction(kind, tfl),
                         "max_rel_err": float(np.max(np.abs(got - ref)) / scale),
                         "rms_rel_err": float(np.sqrt(np.mean((got - ref) ** 2)) / scale)})
            print(json.dumps(rows[-1]), flush=True)
        torch.backends.cuda.matmul.allow_tf32 = False
    return rows


def _mma_sweep(queue: cl.CommandQueue, budget: float, torch: Any) -> list[dict[str, Any]]:
    """Every candidate of gemm_mma.sweep_space on n^3 + bias + ReLU, the kinds in turn (the
    i-th candidate of each before the (i+1)-th), until ``budget`` seconds are spent; each
    row with its error against a float64 product (torch on the GPU) so a variant that
    computes wrongly shows it."""
    from fusejit.runtime.opencl.devices import device_info
    from fusejit.runtime.opencl.mma_probe import with_wgmma

    info = device_info(queue.device)
    limits = with_wgmma(queue, info.limits)
    rng = np.random.default_rng(1)
    n = int(os.environ.get("FUSEJIT_BENCH_N", 4096))
    host = [rng.standard_normal(s).astype(np.float32) for s in ((n, n), (n, n), (n,))]
    work = []
    for kind in gemm_mma.KINDS:
        dtype = np.float16 if kind == "f16" else np.float32
        hk = [h.astype(dtype) for h in host]
        ref = scale = None
        if torch is not None:
            with torch.inference_mode():
                t64 = [torch.from_numpy(h).cuda().double() for h in hk]
                ref = torch.relu(t64[0] @ t64[1] + t64[2])
                scale = float(ref.abs().max())
        args = [cla.to_device(queue, h) for h in hk]
        work.append([(kind, cfg, args, ref, scale)
                     for cfg in gemm_mma.sweep_space(kind, limits)])
    order = [w for rank in range(max(map(len, work))) for ws in work for w in ws[rank:rank + 1]]
    out = []
    start = time.perf_counter()
    for kind, cfg, args, ref, scale in order:
        if time.perf_counter() - start > budget:
            out.append({"skipped": "sweep budget spent", "left": len(order) - len(out)})
            print(json.dumps(out[-1]), flush=True)
            break
        f = fuse(lambda *a: dense_relu(np, *a),
                 matmul_precision="tf32" if kind == "f16" else kind)
        row: dict[str, Any] = {"kind": kind, "opts": cfg.mma_opts,
                               "config": gemm_mma.describe(cfg)}
        with gemm_tune.forced(cfg):
            try:
                got = f(*args)
                t = steady(lambda: f(*args), queue.finish, budget=0.15)
            except Exception as exc:  # noqa: BLE001 - report and go on
                row["error"] = str(exc)[:300]
                out.append(row)
                print(json.dumps(row), flush=True)
                continue
        if ref is not None:
            g = torch.as_tensor(got.get()).cuda().double()
            row["max_rel_err"] = float((g - ref).abs().max()) / scale
        tfl = 2 * n ** 3 / t / 1e12
        row.update({"ms": t * 1e3, "tflops": tfl, "peak_frac": _peak_fraction(kind, tfl)})
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


def run(mlp: bool, sweep: bool, sweep_budget: float = 1e9, table: bool = True
        ) -> dict[str, Any]:
    from fusejit.runtime.opencl.mma_probe import unavailable

    queue = fusejit.default_queue()
    _, torch = anchor(queue)
    rng = np.random.default_rng(0)
    n = int(os.environ.get("FUSEJIT_BENCH_N", 4096))  # (smaller: a smoke run)
    # (the sweep first: with a budget, its rows matter most)
    sweep_rows = _mma_sweep(queue, sweep_budget, torch) if sweep else []
    rows = _rows_for(f"{n}^3 + bias + relu", dense_relu, ((n, n), (n, n), (n,)), 2 * n ** 3,
                     torch, queue, rng) if table else []
    if mlp:
        t, d = 8192, 4096
        rows += _rows_for("MLP 8192 tok 4096->4096 gelu ->4096 + res", mlp_block,
                          ((t, d), (d, d), (d,), (d, d), (d,)), 2 * 2 * t * d * d, torch,
                          queue, rng)
    return {"device": queue.device.name, "tensor_cores": unavailable(queue) or "available",
            "rows": rows, "mma_sweep": sweep_rows}


__all__ = ["run"]
