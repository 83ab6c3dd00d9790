"""Running compiled programs: the backend interface (``backend.py``), call executables, memory,
the on-disk program cache and launch tuning; one subpackage per compute API (``opencl/``,
``vulkan/``). The only layer that talks to a driver."""
