"""Compile once, keep, export: call signatures and their keys, abstract arguments
(``ShapeDtype``), tracing a signature, the trace cache on disk, AOT bundles
(``export``/``load``), pickling fused functions and the recompile log."""
