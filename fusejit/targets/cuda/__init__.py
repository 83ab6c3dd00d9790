"""The CUDA target: CUDA C++ kernels for NVRTC (targets/cuda/target.py)."""
