"""The GLSL -> WGSL translation for kernels naga's GLSL frontend cannot take (barriers, int64)."""
