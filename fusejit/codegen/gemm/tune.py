"""Choosing each gemm group's kernel configuration (``configure``): forced by a test, tuned
before, tuned now, or the heuristic of its kind (the SIMT kernels' in simt.py, the tensor
cores' in mma.py).

Tuning results are kept per (device, dtype, layout, shape bucket, epilogue class): ``tune_key``
names them, the runtime times and keeps them (runtime/opencl/gemm_bench.py) and hands them to
``configure`` as a ``Tuning``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from fusejit.codegen.gemm import mma as gemm_mma  # (configure's ``mma`` is the probe's answer)
from fusejit.codegen.gemm.config import GemmConfig, with_split
from fusejit.codegen.gemm.simt import heuristic, space
from fusejit.codegen.gemm.simt import unfit as simt_unfit
from fusejit.codegen.gemm.source import accumulator
from fusejit.ir.ops import MOVEMENT, TRANSCENDENTAL
from fusejit.passes.host_gemm import kept_in_kernels
from fusejit.passes.plan import DeviceLimits, Group, Plan, gemm_problem
from fusejit.passes.window import reads_window

_forced: list[GemmConfig] = []  # forced() blocks open, innermost last


@contextlib.contextmanager
def forced(cfg: GemmConfig) -> Iterator[None]:
    """Use ``cfg`` for every GEMM compiled inside the block (tests of each kernel variant),
    and keep every product in its kernel (not the host's BLAS: passes/host_gemm.py)."""
    _forced.append(cfg)
    try:
        with kept_in_kernels():
            yield
    finally:
        _forced.pop()


def epilogue_class(group: Group) -> str:
    """'plain' (the product stored as it is), 'light' (a few cheap ops per element), 'heavy'
    (transcendental or long chains): what the epilogue adds to the kernel's registers."""
    m = group.matmul
    ops = 0
    heavy = False
    seen: set = set()
    stack = [st.node for st in group.stores]
    while stack:
        n = stack.pop()
        if n in seen or n is m:
            continue
        seen.add(n)
        ops += 1
        heavy |= n.op in TRANSCENDENTAL
        stack.extend(n.srcs)
    return "plain" if ops == 0 else "heavy" if heavy or ops > 12 else "light"


def layout(group: Group) -> str:
    """Which axis each operand is read along contiguously ('k' or 'mn'), from its strides."""
    parts = []
    for src in group.matmul.srcs:
        node = src
        while node.op in MOVEMENT and node.op.name == "VIEW":
            node = node.srcs[0]
        # a transposing view over the last two axes swaps which axis is contiguous
        swapped = src.op.name == "VIEW" and src.ndim >= 2 and len(src.arg) >= 2 and \
            src.arg[-1][1][-2:] == (1, 0)
        parts.append("t" if swapped else "n")
    return "".join(parts)


# times candidates for one product: (group, tuning key, candidates in order, its share of the
# call's tuning budget) -> the fastest, or None (no budget or no room to time in)
Tuner = Callable[[Group, str, list[GemmConfig], float], "GemmConfig | None"]


@dataclass(frozen=True)
class Tuning:
    """The runtime's part in choosing a product's configuration, which codegen can neither
    time nor keep (runtime/opencl/gemm_bench.py makes it): ``known`` the configuration tuned
    before under a key (the persisted table, None if none), ``tuner`` times candidates now
    (None: autotuning is off)."""

    known: Callable[[str], GemmConfig | None]
    tuner: Tuner | None = None
    # told when a configuration ``known`` returned cannot run the product at hand (and why)
    reject: Callable[[str, str], None] = lambda key, why: None


DYNAMIC_M = 1 << 16  # the M that configurations of kernels for runtime extents are chosen for


def configure(plan: Plan, device_key: str, limits: DeviceLimits, tuning: Tuning | None = None,
              precision: str = "highest", mma: str | None = None, dynamic: bool = False
              ) -> Plan:
    """The plan with a configuration on every gemm group: forced (tests), tuned before
    (``tuning.known``), tuned now (``tuning.tuner``, on first use, each product given its
    share of the call's tuning budget) or the heuristic. ``precision`` is ``@fuse``'s
    matmul_precision; ``mma`` None when tensor cores serve it on this device, else why not
    (fusejit/codegen/gemm/mma.py)."""
    tuner = tuning.tuner if tuning is not None else None
    products = sum(g.kind == "gemm" for g in plan.groups)
    groups = []
    for g in plan.groups:
        if g.kind != "gemm" or g.gemm_config is not None:
            groups.append(g)
            continue
        m, n, k, b = gemm_problem(g)
        # kernels for runtime extents read M at launch (a convolution's batch is its first
        # factor): the configuration is chosen, and kept, as for a large M, and K is not
        # split by how many tiles this M makes, so every batch size gets the same source
        m_pick = max(m, DYNAMIC_M) if dynamic else m
        acc = accumulator(g.matmul.dtype)
        kind, note = "", ""
        if precision != "highest":
            kind, note = gemm_mma.kind_for(g.matmul.dtype, precision, mma)
        key = tune_key(device_key, g.matmul.dtype, layout(g), bucket(m_pick, n, k, b),
                       epilogue_class(g)) + (f"|mma-{kind}" if kind else "")
        cfg = _forced[-1] if _forced else tuning.known(key) if tuning is not None else None
        if cfg is not None and not _forced:
            # a stored configuration passes the check a generated one does, for this very
            # shape (the key's bucket spans several), or is reported and ignored
            why = unfit(cfg, kind, m, n, k, b, limits, acc)
            if why is not None:
                tuning.reject(key, f"{why} (for {m}x{k} @ {k}x{n})")
                cfg = None
            else:
                cfg = replace(cfg, why=f"tuned on first use, kept under {key!r}")
        if kind and not _forced:
            if cfg is None and tuner is not None and m * n * k * b >= 1 << 24:
                cfg = tuner(g, key, gemm_mma.space(kind, limits), 1 / products)
            if cfg is None:
                cfg = gemm_mma.heuristic(kind, m_pick, n, limits)
            if cfg is None:
                note = (f"matmul_precision={precision!r}: no tensor-core tile fits this "
                        "device's local memory; fell back to the SIMT kernel")
        if cfg is None and tuner is not None and limits.is_gpu and m * n * k * b >= 1 << 24:
            cfg = tuner(g, key, [c for c in space(limits, acc)
                                 if unfit(c, "", m, n, k, b, limits, acc) is None], 1 / products)
        if cfg is None:
            cfg = heuristic(m_pick, n, k, b, limits, acc, reads_window(g))
        if note:
            cfg = replace(cfg, why=f"{note}; {cfg.why}" if cfg.why else note)
        if not _forced and limits.is_gpu and not dynamic:
            cfg = with_split(cfg, m, n, k, b, limits.compute_units)
        groups.append(replace(g, gemm_config=cfg))
    return replace(plan, groups=tuple(groups))


def unfit(cfg: GemmConfig, kind: str, m: int, n: int, k: int, batch: int,
          limits: DeviceLimits, acc: np.dtype) -> str | None:
    """Why ``cfg`` cannot run an m x n x k (x batch) product as a kernel of ``kind`` ("" the
    SIMT kernels, else the tensor cores' MMA kind), or None: its kind's own check."""
    if kind:
        if cfg.mma != kind or not gemm_mma.valid(cfg, limits):
            return f"not a {kind} tensor-core configuration for this device"
        return None
    return simt_unfit(cfg, m, n, k, batch, limits, acc)


def bucket(m: int, n: int, k: int, batch: int) -> str:
    """Shape bucket: powers of two of each extent (a config tuned at 4096 serves 3000-5000)."""
    def b(x: int) -> int:
        return 1 << max(0, round(math.log2(max(x, 1))))
    return f"{b(m)}x{b(n)}x{b(k)}x{b(batch)}"


def tune_key(device: str, dtype: np.dtype, layout: str, shape: str, epilogue: str) -> str:
    return f"{device}|{dtype.name}|{layout}|{shape}|{epilogue}"


__all__ = ["Tuner", "Tuning", "bucket", "configure", "epilogue_class", "forced", "layout",
           "tune_key", "unfit"]
