"""GLSL 450 compute spellings for the Vulkan backend: the target, its op templates and helpers,
float64 and packed narrow integers."""
