"""First-use tuning of GEMM kernels: candidates compiled in one program and timed on the
device, within a time budget, the winner persisted (fusejit/gemm_tune.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..gemm_tune import GemmConfig, problem, remember
from ..ir import Graph, Node, Param
from ..ops import Op
from ..passes.plan import Dest, Group, Plan, Store
from ..shapes import row_major_strides
from .build import build_options, build_program
from .devices import DeviceInfo

BUDGET_S = 1.2  # tuning time per product: a first call stays under ~2 s on an H200
MAX_CANDIDATES = 8


def _ranked(cands: list[GemmConfig], m: int, n: int) -> list[GemmConfig]:
    """Candidates most likely to win first: big register tiles, tiles that fit the shape."""
    def score(c: GemmConfig) -> tuple:
        waste = (-(-m // c.mwg) * c.mwg * -(-n // c.ndimc * c.nwi) * 1.0) / max(m * n, 1)
        return (round(waste, 1), -(c.mwi * c.nwi), -c.threads, c.kwg != 16)
    return sorted(cands, key=score)[:MAX_CANDIDATES]


def make_tuner(queue: cl.CommandQueue, info: DeviceInfo
               ) -> Callable[[Group, str, list[GemmConfig]], GemmConfig | None]:
    def tune(group: Group, key: str, cands: list[GemmConfig]) -> GemmConfig | None:
        from ..source import SourceModule
        from ..targets.opencl import OpenCLTarget

        start = time.perf_counter()
        m, n, k, b = problem(group)
        mm = group.matmul
        dtype = mm.dtype
        a_shape, b_shape = mm.srcs[0].shape, mm.srcs[1].shape
        params = (Param("array", dtype, a_shape, "a", 0, row_major_strides(a_shape)),
                  Param("array", dtype, b_shape, "b", 1, row_major_strides(b_shape)))
        an = Node.make(Op.INPUT, dtype, a_shape, (), 0)
        bn = Node.make(Op.INPUT, dtype, b_shape, (), 1)
        node = Node.make(Op.MATMUL, dtype, mm.shape, (an, bn))
        graph = Graph(params, (node,))
        cands = _ranked(cands, m, n)
        sources, kernels = [], []
        for i, cfg in enumerate(cands):
            g = Group("gemm", node.shape, (Store(node, Dest("output", 0)),), "tuning",
                      matmul=node, gemm_config=cfg)
            mod = SourceModule(graph, Plan((g,), ()), OpenCLTarget(), info.limits).build()
            kern = mod.kernels[0]
            sources.append(mod.source.replace(kern.name + "(", f"fj_tune{i}("))
            kernels.append(kern)
        try:
            program = build_program(queue.context, "\n".join(sources), build_options(info),
                                    "gemm_tune")
        except Exception:  # noqa: BLE001 - a candidate the compiler rejects: no tuning
            return None
        rng = np.random.default_rng(0)
        bufs = [cla.to_device(queue, rng.standard_normal(s).astype(dtype))
                for s in (a_shape, b_shape)]
        out = cla.empty(queue, node.shape, dtype)
        best: tuple[float, GemmConfig] | None = None
        for i, (cfg, kern) in enumerate(zip(cands, kernels)):
            if best is not None and time.perf_counter() - start > BUDGET_S:
                break
            knl = getattr(program, f"fj_tune{i}")
            for j, arg in enumerate(kern.signature.args):
                role = getattr(arg, "role", "")
                knl.set_arg(j, out.base_data if role == "output" else
                            bufs[arg.index].base_data)
            cl.enqueue_nd_range_kernel(queue, knl, kern.global_size, kern.local_size)
            queue.finish()
            t0 = time.perf_counter()
            for _ in range(2):
                cl.enqueue_nd_range_kernel(queue, knl, kern.global_size, kern.local_size)
            queue.finish()
            t = (time.perf_counter() - t0) / 2
            if best is None or t < best[0]:
                best = (t, cfg)
        if best is None:
            return None
        cfg = replace(best[1], why=f"tuned now over {len(cands)} candidates "
                                   f"({best[0] * 1e3:.3f} ms), kept under {key!r}")
        remember(key, replace(cfg, why=""))
        return cfg
    return tune
