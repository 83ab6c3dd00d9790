"""GEMM kernels: the tiled SIMT kernel with fused prologue and epilogue (``source``; its search
space and heuristic in ``simt``), tensor cores through ``mma.sync`` and Hopper's ``wgmma``
(``mma``, ``mma_async``, ``wgmma``, ``ptx``), host GEMM steps (``host``), and NumPy models of
the arithmetic (``tf32``). ``config`` holds the configuration they share, ``tune`` chooses one
for each product, ``dispatch`` hands a group to its kind's generator."""
