"""GELU (tanh form) on a float32 tensor: one fused kernel vs the same ops as separate
pyopencl kernels vs NumPy on the host.

    python examples/gelu.py [--size N] [--repeat R]
"""

from __future__ import annotations

import numpy as np
import pyopencl.array as cla
from _bench import compare, parse_args
from pyopencl import clmath

from fusejit import default_queue


def gelu(x):
    """NumPy code, unchanged: runs on NumPy arrays, and fused on device arrays."""
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def gelu_unfused(x: cla.Array) -> cla.Array:
    """The same ops on device arrays: each one a pyopencl kernel over the whole tensor."""
    return 0.5 * x * (1 + clmath.tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x))))


def main() -> None:
    args = parse_args(__doc__)

    queue = default_queue()
    host = [np.random.default_rng(0).standard_normal(args.size).astype(np.float32)]
    device = [cla.to_device(queue, host[0])]
    compare("GELU", gelu, gelu_unfused, host, device, queue,
            args.repeat)


if __name__ == "__main__":
    main()
