"""fusejit's own benchmark suite: ``python -m fusejit.bench --help``.

Times workloads (elementwise chains, GELU, Black-Scholes, Adam, softmax, layernorm) as fusejit
fused kernels, as unfused ``pyopencl.array`` calls on the same device, with NumPy and numexpr,
and with torch / torch.compile / cupy / cupy.fuse / jax.jit where importable. See
``benchmarks/README.md`` for how to run it and what each column means.
"""

from fusejit.bench.runner import Options, run

__all__ = ["Options", "run"]
