"""What the GEMM tables (bench/gemm.py, bench/gemm_precision.py) share: steady-state timing,
the anchor fusejit is compared with, and torch spelled as the workloads' NumPy namespace."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyopencl as cl


def steady(call: Callable[[], Any], sync: Callable[[], None], budget: float = 0.6) -> float:
    """Median seconds per call over rounds of back-to-back calls and one wait."""
    call()
    sync()
    t0 = time.perf_counter()
    call()
    sync()
    one = max(time.perf_counter() - t0, 1e-6)
    per_round = max(1, min(50, int(0.05 / one)))
    rounds = []
    start = time.perf_counter()
    while len(rounds) < 3 or (time.perf_counter() - start < budget and len(rounds) < 15):
        t0 = time.perf_counter()
        for _ in range(per_round):
            call()
        sync()
        rounds.append((time.perf_counter() - t0) / per_round)
    return float(np.median(rounds))


def anchor(queue: cl.CommandQueue) -> tuple[str, Any]:
    """(name, torch or None): what fusejit is timed against, torch with TF32 off on a GPU
    where it has CUDA, else NumPy."""
    if queue.device.type & cl.device_type.GPU:
        try:
            import torch
            if torch.cuda.is_available():
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
                return "torch (TF32 off)", torch
        except ImportError:
            pass
    return "numpy", None


class TorchNs:
    """The few NumPy names the GEMM workloads call, spelled in torch (``fn(ns, *arrays)``)."""

    def __init__(self, torch: Any) -> None:
        self.tanh = torch.tanh
        self.t = torch

    def maximum(self, a: Any, b: Any) -> Any:
        return self.t.clamp(a, min=b)
