"""``python -m fusejit.demo``: fusejit against NumPy, then against unfused pyopencl.

Runs GELU and an 8-op elementwise chain three ways — one fused fusejit kernel, NumPy on the host,
and the same ops as separate ``pyopencl.array`` calls (one kernel and one full read+write of the
tensor per op) — checks they agree, and prints timings and the generated kernel. It says what
it is doing as it goes: the first call of each function traces and compiles (a few seconds on
a CPU device).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
from pyopencl import clmath

from fusejit import default_queue, fuse
from fusejit.bench.timing import median_ms
from fusejit.runtime.opencl.devices import device_info


def gelu(x: Any) -> Any:
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def gelu_unfused(x: cla.Array) -> cla.Array:
    # the same ops, each a separate pyopencl kernel over the whole tensor
    return 0.5 * x * (1 + clmath.tanh(0.7978845608 * (x + 0.044715 * (x * x * x))))


def chain8(x: Any) -> Any:
    y = x * 1.5 + 0.5
    y = np.abs(y) * 0.9
    y = np.maximum(y, 0.1)
    return (y + 1.0) * 0.25 - 0.125


def chain8_unfused(x: cla.Array) -> cla.Array:
    y = x * 1.5 + 0.5
    y = abs(y) * 0.9
    # pyopencl's maximum(array, scalar) does not build on every device: compare to an array
    y = cla.maximum(y, _filled(x, 0.1))
    return (y + 1.0) * 0.25 - 0.125


_fills: dict[tuple[int, float], cla.Array] = {}


def _filled(like: cla.Array, value: float) -> cla.Array:
    key = (id(like), value)
    if key not in _fills:
        _fills[key] = cla.empty_like(like).fill(np.float32(value))
    return _fills[key]


def say(message: str) -> None:
    """Progress, as it happens (flushed: the demo's steps take seconds each)."""
    print(message, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=0,
                        help="elements (default: 2**26 on a GPU, 2**22 on a CPU)")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)

    queue = default_queue()
    info = device_info(queue.device)
    n = args.size or (1 << 26 if info.limits.is_gpu else 1 << 22)
    print(f"device: {queue.device.name.strip()} ({queue.device.platform.name.strip()})")
    print(f"tensor: {n:,} float32 elements ({n * 4 / 2**20:.3g} MiB)\n")

    say("uploading the tensor and measuring the device's copy bandwidth ...")
    rng = np.random.default_rng(0)
    host = rng.standard_normal(n).astype(np.float32)
    x = cla.to_device(queue, host)
    copy_dst = cla.empty_like(x)
    copy_ms = median_ms(lambda: cl.enqueue_copy(queue, copy_dst.data, x.data), queue, args.repeat)

    rows = []
    for name, fn, unfused, ops in (("gelu", gelu, gelu_unfused, 8),
                                   ("chain8", chain8, chain8_unfused, 8)):
        fused = fuse(fn)
        say(f"{name}: tracing and compiling the fused kernel (first call) ...")
        expected = fn(host)
        got = fused(x).get()
        err = float(np.max(np.abs(got - expected)))
        kernels = len(fused.lower(x).kernels)
        say(f"{name}: timing fused, NumPy and unfused pyopencl ({args.repeat} runs each) ...")
        t_fused = median_ms(lambda f=fused: f(x), queue, args.repeat)
        t_numpy = median_ms(lambda f=fn: f(host), queue, max(3, args.repeat // 3))
        t_unfused = median_ms(lambda f=unfused: f(x), queue, args.repeat)
        rows.append((name, ops, kernels, err, t_fused, t_numpy, t_unfused))

    print(f"\n{'workload':10s} {'ops':>4s} {'kernels':>8s} {'max |err|':>10s} {'fused ms':>9s} "
          f"{'numpy ms':>9s} {'vs numpy':>9s} {'unfused ms':>11s} {'vs unfused':>11s} "
          f"{'GB/s':>7s}")
    for name, ops, kernels, err, tf, tn, tu in rows:
        gbs = 2 * n * 4 / (tf * 1e-3) / 1e9
        print(f"{name:10s} {ops:4d} {kernels:8d} {err:10.2e} {tf:9.3f} {tn:9.2f} "
              f"{tn / tf:8.1f}x {tu:11.3f} {tu / tf:10.1f}x {gbs:7.1f}")
    print("\nvs numpy: NumPy's time on the host / fusejit's; vs unfused: the same ops as "
          "separate pyopencl.array kernels / fusejit's (a weak baseline on a CPU device, where "
          "each of those kernels also pays a launch)")
    print(f"device-to-device copy of the tensor: {copy_ms:.3f} ms "
          f"({2 * n * 4 / (copy_ms * 1e-3) / 1e9:.1f} GB/s): the floor for one read + one write")
    print("\ngenerated kernel for gelu:\n")
    print(fuse(gelu).lower(x).kernels[0].source)


if __name__ == "__main__":
    main()
