"""Compile once, keep, export: call signatures and their keys, the trace cache on disk, AOT
bundles (``export``/``load``), pickling fused functions and the recompile log."""
