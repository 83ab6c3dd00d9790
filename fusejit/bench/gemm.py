"""``python -m fusejit.bench.gemm``: the GEMM table of the GEMM issue, side by side in one run.

fusejit against torch with TF32 off (``torch.backends.cuda.matmul.allow_tf32 = False``, the
anchor on GPUs) or NumPy (OpenBLAS, on CPUs): each case's first call (trace, compile, tune),
its steady time (calls back to back, one wait), TFLOP/s and the speed ratio. ``--epilogue``
adds fused epilogues against the same GEMM followed by a separate fused elementwise kernel;
``--sweep`` times every candidate configuration of the tuning space on 4096^3 with NVIDIA's
register report. Results are checked against the anchor on every case.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import fusejit
from fusejit import fuse
from fusejit.bench.gemm_timing import TorchNs, anchor, steady
from fusejit.codegen.gemm import simt as gemm_simt, tune as gemm_tune
from fusejit.bench.workloads import dense_gelu, dense_relu, gelu, mlp_block


def plain(xp: Any, a: Any, b: Any) -> Any:
    return a @ b


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[..., Any]
    shapes: tuple[tuple[int, ...], ...]
    flops: float
    goal: str = ""


def cases(scale: str) -> list[Case]:
    if scale == "full":
        n = 4096
        t, d = 8192, 4096
        return [
            Case("4096^3 + bias + relu", dense_relu, ((n, n), (n, n), (n,)), 2 * n ** 3,
                 "<= 3.1 ms"),
            Case("MLP 8192 tok 4096->4096 gelu ->4096 + res", mlp_block,
                 ((t, d), (d, d), (d,), (d, d), (d,)), 2 * 2 * t * d * d, "<= 1.1x torch"),
            Case("1000^3", plain, ((1000, 1000), (1000, 1000)), 2 * 1000 ** 3, ">= 0.7x"),
            Case("4095x4097x1023", plain, ((4095, 1023), (1023, 4097)),
                 2 * 4095 * 4097 * 1023, ">= 0.7x"),
            Case("batched 64x256^3", plain, ((64, 256, 256), (64, 256, 256)),
                 2 * 64 * 256 ** 3, ">= 0.7x"),
            Case("skinny 8192x64x8192 (MxNxK)", plain, ((8192, 8192), (8192, 64)),
                 2 * 8192 * 64 * 8192, ">= 0.7x"),
        ]
    n = 1024 if scale == "small" else 128
    return [Case(f"MLP layer {n}^3 + bias + gelu", dense_gelu, ((n, n), (n, n), (n,)),
                 2 * n ** 3, ">= 0.5x NumPy"),
            Case(f"{n}^3", plain, ((n, n), (n, n)), 2 * n ** 3)]


def epilogue_cases(scale: str) -> list[tuple[str, tuple[int, int, int]]]:
    if scale == "full":
        return [("4096^3 bias+gelu", (4096, 4096, 4096)), ("8192x8192x256 bias+gelu",
                                                           (8192, 8192, 256))]
    n = 1024 if scale == "small" else 128
    return [(f"{n}^3 bias+gelu", (n, n, n))]


def run(scale: str, epilogue: bool, sweep: bool) -> dict[str, Any]:
    queue = fusejit.default_queue()
    name, torch = anchor(queue)
    rng = np.random.default_rng(0)
    rows = []
    for case in cases(scale):
        host = [(rng.standard_normal(s) / math.sqrt(s[-1] if len(s) > 1 else 1)
                 ).astype(np.float32) for s in case.shapes]
        dev = [cla.to_device(queue, h) for h in host]
        f = fuse(lambda *a, _fn=case.fn: _fn(np, *a))
        t0 = time.perf_counter()
        out = f(*dev)
        queue.finish()
        first = time.perf_counter() - t0
        t_f = steady(lambda: f(*dev), queue.finish)
        kernels = f.lower(*dev).kernels
        dump = os.environ.get("FUSEJIT_GEMM_DUMP")
        if dump:
            os.makedirs(dump, exist_ok=True)
            with open(os.path.join(dump, f"case{len(rows)}.cl"), "w") as fh:
                fh.write(f.lower(*dev).source)
        if torch is not None:
            tdev = [torch.from_numpy(h).cuda() for h in host]
            ns = TorchNs(torch)
            with torch.inference_mode():
                ref = case.fn(ns, *tdev)
                t_a = steady(lambda: case.fn(ns, *tdev), torch.cuda.synchronize)
            ref = ref.cpu().numpy()
        else:
            ref = case.fn(np, *host)
            t_a = steady(lambda: case.fn(np, *host), lambda: None)
        got = out.get()
        err = float(np.max(np.abs(got - ref)) / max(1e-30, float(np.max(np.abs(ref)))))
        rows.append({"case": case.name, "fusejit_ms": t_f * 1e3, "anchor_ms": t_a * 1e3,
                     "speed_vs_anchor": t_a / t_f, "fusejit_tflops": case.flops / t_f / 1e12,
                     "first_call_s": first, "goal": case.goal, "kernels": len(kernels),
                     "max_rel_err": err,
                     "config": [k.reason.split("kernel: ")[-1] for k in kernels
                                if "GEMM" in k.reason]})
        print(json.dumps(rows[-1]), flush=True)
    epi_rows = []
    if epilogue:
        for label, (m, n, k) in epilogue_cases(scale):
            x = cla.to_device(queue, rng.standard_normal((m, k)).astype(np.float32))
            w = cla.to_device(queue, (rng.standard_normal((k, n)) / math.sqrt(k)
                                      ).astype(np.float32))
            b = cla.to_device(queue, rng.standard_normal(n).astype(np.float32))
            fused = fuse(lambda x, w, b: dense_gelu(np, x, w, b))
            mm = fuse(lambda x, w: x @ w)
            ep = fuse(lambda h, b: gelu(np, h + b))
            t_fused = steady(lambda: fused(x, w, b), queue.finish)
            t_sep = steady(lambda: ep(mm(x, w), b), queue.finish)
            epi_rows.append({"case": label, "fused_ms": t_fused * 1e3,
                             "gemm_then_epilogue_ms": t_sep * 1e3,
                             "ratio": t_sep / t_fused})
            print(json.dumps(epi_rows[-1]), flush=True)
    if epilogue and scale == "full":  # the MLP block's kernels one by one
        t, d = 8192, 4096
        x = cla.to_device(queue, rng.standard_normal((t, d)).astype(np.float32))
        w = cla.to_device(queue, (rng.standard_normal((d, d)) / 64).astype(np.float32))
        b = cla.to_device(queue, rng.standard_normal(d).astype(np.float32))
        parts = {"x @ w1": (fuse(lambda x, w: x @ w), (x, w)),
                 "gelu(x @ w1 + b1)": (fuse(lambda x, w, b: dense_gelu(np, x, w, b)), (x, w, b)),
                 "x + h @ w2 + b2": (fuse(lambda x, h, w, b: x + h @ w + b), (x, x, w, b))}
        for label, (fn, args) in parts.items():
            t_part = steady(lambda: fn(*args), queue.finish)
            epi_rows.append({"case": f"MLP part {label} (8192x4096x4096)",
                             "ms": t_part * 1e3})
            print(json.dumps(epi_rows[-1]), flush=True)
    sweep_rows = []
    if sweep:
        sweep_rows = _sweep(queue)
        sweep_rows += _sweep(queue, dense_gelu, 8192, 4096, 4096, top=8)
    return {"anchor": name, "device": queue.device.name, "rows": rows, "epilogue": epi_rows,
            "sweep": sweep_rows}


def _sweep(queue: cl.CommandQueue, fn: Callable[..., Any] = plain, m: int = 4096,
           n: int = 4096, k: int = 4096, top: int | None = None) -> list[dict[str, Any]]:
    """Every candidate of the space (or the ``top`` best-ranked) timed on one product."""
    from fusejit.runtime.opencl.devices import device_info

    info = device_info(queue.device)
    rng = np.random.default_rng(1)
    args = [cla.to_device(queue, rng.standard_normal(s).astype(np.float32))
            for s in ((m, k), (k, n), (n,))][:3 if fn is not plain else 2]
    cands = gemm_simt.space(info.limits, np.dtype(np.float32))
    if top:
        cands = gemm_simt.rank(cands, m, n, 1, info.limits.compute_units)[:top]
    out = []
    for cfg in cands:
        f = fuse(lambda *a: fn(np, *a))
        with gemm_tune.forced(cfg):
            try:
                f(*args)
            except Exception as exc:  # noqa: BLE001 - report and go on
                out.append({"config": gemm_simt.describe(cfg), "error": str(exc)[:200]})
                continue
            t = steady(lambda: f(*args), queue.finish, budget=0.2)
        out.append({"case": f"{fn.__name__} {m}x{n}x{k}", "config": gemm_simt.describe(cfg),
                    "ms": t * 1e3, "tflops": 2 * m * n * k / t / 1e12})
        print(json.dumps(out[-1]), flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", default=os.environ.get("FUSEJIT_BENCH_SCALE", "full"),
                   choices=("tiny", "small", "full"))
    p.add_argument("--epilogue", action="store_true")
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--precision", action="store_true",
                   help="the matmul_precision table instead (fusejit/bench/gemm_precision.py)")
    p.add_argument("--mlp", action="store_true", help="with --precision: the MLP block too")
    p.add_argument("--mma-sweep", action="store_true",
                   help="with --precision: time every tensor-core candidate on 4096^3")
    p.add_argument("--sweep-budget", type=float, default=1e9,
                   help="with --mma-sweep: stop the sweep after this many seconds")
    p.add_argument("--no-table", action="store_true",
                   help="with --precision: skip the precision table (the sweep alone)")
    args = p.parse_args(argv)
    if args.precision:
        from fusejit.bench.gemm_precision import run as run_precision

        result = run_precision(args.mlp, args.mma_sweep, args.sweep_budget,
                               not args.no_table)
    else:
        result = run(args.scale, args.epilogue, args.sweep)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
