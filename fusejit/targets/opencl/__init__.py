"""OpenCL C spellings: the target, complex arithmetic, vector math for CPUs, and the NVIDIA
fast paths (speculated division, packed float16)."""
