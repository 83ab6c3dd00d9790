"""Targets: how each kernel language spells types, literals, ops and idioms (``base.Target``);
one subpackage per language: ``opencl/`` (OpenCL C), ``glsl/`` (Vulkan compute), ``wgsl/`` (GLSL
kernels translated to WGSL). Spelling only: no traversal, no driver."""
