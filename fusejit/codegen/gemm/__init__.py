"""GEMM kernels: the tiled SIMT kernel with fused prologue and epilogue (``source``), tensor
cores through ``mma.sync`` and Hopper's ``wgmma`` (``mma``, ``mma_async``, ``wgmma``, ``ptx``),
the search space and heuristic (``tune``), host GEMM steps and NumPy models of the arithmetic."""
