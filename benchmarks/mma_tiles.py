"""Tensor-core tiles side by side on one product (an NVIDIA GPU): for each configuration, the
steady time of n^3 + bias + ReLU, its largest difference from the first configuration of its
kind (a tile that computes wrongly shows it; products agree bit for bit across tiles when
their k order is the same), and ptxas's registers and spills (from a ``-cl-nv-verbose``
build, through runtime/opencl/build.py's sm_90a rebuild where the kernel holds wgmma).

    python benchmarks/mma_tiles.py '[("tf32", (192, 256, 8, 12, 1, "agr")),
                                      ("f16", (256, 128, 16, 8, 1, "ag"), "nt")]'

Each entry: (kind, the arguments of ``gemm_mma.config`` after the kind, optionally "nt":
``a @ b.T`` instead of ``a @ b``). ``FUSEJIT_BENCH_N`` sets n (4096).
"""

from __future__ import annotations

import ast
import json
import os
import sys

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import fusejit
from fusejit import fuse
from fusejit.codegen.gemm import mma as gemm_mma, tune as gemm_tune
from fusejit.bench.gemm_timing import steady
from fusejit.codegen.gemm.ptx import SM90A_MARK
from fusejit.runtime.opencl import build


def _ptxas(queue: cl.CommandQueue, source: str) -> list[str]:
    """ptxas's resource lines for ``source``, built as fusejit builds it."""
    prg = cl.Program(queue.context, source).build(options=["-cl-std=CL1.2", "-cl-nv-verbose"])
    if SM90A_MARK in source:
        ptx = bytes(prg.get_info(cl.program_info.BINARIES)[0]).rstrip(b"\0").decode()
        prg = cl.Program(queue.context, [queue.device],
                         [build.sm90a_ptx(ptx).encode() + b"\0"]).build(
            options=["-cl-nv-verbose"])
    log = prg.get_build_info(queue.device, cl.program_build_info.LOG)
    return [ln.strip() for ln in log.splitlines() if "Used" in ln or "spill" in ln]


def _product(nt: bool):
    if nt:
        return lambda a, bt, c: np.maximum(a @ bt.T + c, 0)
    return lambda a, b, c: np.maximum(a @ b + c, 0)


def main() -> None:
    entries = ast.literal_eval(sys.argv[1])
    queue = fusejit.default_queue()
    n = int(os.environ.get("FUSEJIT_BENCH_N", "4096"))
    rng = np.random.default_rng(1)
    host = [rng.standard_normal(s).astype(np.float32) for s in ((n, n), (n, n), (n,))]
    first: dict[str, np.ndarray] = {}
    for entry in entries:
        kind, shape = entry[0], tuple(entry[1])
        nt = len(entry) > 2 and entry[2] == "nt"
        dtype = np.float16 if kind == "f16" else np.float32
        hs = [h.astype(dtype) for h in host]
        if nt:
            hs[1] = np.ascontiguousarray(hs[1].T)
        args = [cla.to_device(queue, h) for h in hs]

        row: dict[str, object] = {"kind": kind, "config": shape, "nt": nt}
        try:
            f = fuse(_product(nt), matmul_precision="tf32" if kind == "f16" else kind)
            with gemm_tune.forced(gemm_mma.config(kind, *shape)):
                got = f(*args)
                t = steady(lambda f=f, args=args: f(*args), queue.finish, budget=0.3)
                source = f.lower(*args).module.source
            g = got.get().astype(np.float64)
            ref = first.setdefault(f"{kind}{nt}", g)
            row["vs_first"] = float(np.abs(g - ref).max() / np.abs(ref).max())
            row["ms"] = round(t * 1e3, 4)
            row["tflops"] = round(2 * n ** 3 / t / 1e12, 1)
            row["ptxas"] = _ptxas(queue, source)
        except Exception as exc:  # noqa: BLE001 - report and go on
            row["error"] = str(exc)[:400]
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
