"""Kernel source from a partition plan: ``source.SourceModule`` orders, names and lowers each
group through a Target; ``reduce``, ``scan``, ``svd`` and ``rows`` write those kernel kinds,
``gemm/`` the matrix products (the writers name the module they write into by
``context.ModuleContext``, so none imports source.py)."""
