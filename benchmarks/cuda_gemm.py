"""4096^3 + bias + ReLU on the CUDA device against torch, in one run: ms, TFLOP/s and the
largest error against a float64 product, per matmul_precision (tf32 and float16 data under
"tf32", "3xtf32", "highest"). Needs a CUDA GPU, torch and fusejit[cuda]; tensor cores on the
CUDA target are opt-in until validated (``FUSEJIT_CUDA_MMA=1``, runtime/cuda/backend.py).

    FUSEJIT_CUDA_MMA=1 python benchmarks/cuda_gemm.py [n]
"""

from __future__ import annotations

import functools
import sys
import time

import numpy as np
import torch

import fusejit


def per_call_ms(fn, reps: int = 20) -> float:
    """Mean ms per call over ``reps`` calls back to back between two CUDA events."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def dense(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.relu(a @ b + c)


def main(n: int = 4096) -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    flop = 2 * n**3
    for precision, dtype in (("tf32", torch.float32), ("tf32", torch.float16),
                             ("3xtf32", torch.float32), ("highest", torch.float32)):
        a = torch.randn(n, n, device="cuda", dtype=dtype, generator=g) * 0.1
        b = torch.randn(n, n, device="cuda", dtype=dtype, generator=g) * 0.1
        c = torch.randn(n, device="cuda", dtype=dtype, generator=g)
        ref = torch.relu(a.double() @ b.double() + c.double())
        f = fusejit.fuse(lambda a, b, c: np.maximum(a @ b + c, 0), matmul_precision=precision)
        t0 = time.perf_counter()
        err = float((f(a, b, c).double() - ref).abs().max())
        first = time.perf_counter() - t0
        ms = per_call_ms(functools.partial(f, a, b, c))
        (cfg,) = [x.gemm_config for x in f.lower(a, b, c).plan.groups if x.kind == "gemm"]
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        tms = per_call_ms(functools.partial(dense, a, b, c))
        terr = float((dense(a, b, c).double() - ref).abs().max())
        torch.backends.cuda.matmul.allow_tf32 = False
        print(f"{precision:8s} {dtype!s:14s} fused-cuda {ms:.3f} ms "
              f"{flop / ms / 1e9:.0f} TFLOP/s err {err:.2e} (first call {first:.2f} s, "
              f"{cfg.mma or 'simt'} {cfg.mwg}x{cfg.nwg} {cfg.mma_opts}) | torch {tms:.3f} ms "
              f"{flop / tms / 1e9:.0f} TFLOP/s err {terr:.2e}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4096)
