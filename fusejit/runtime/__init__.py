"""Running compiled programs: the backend interface and registry (``backend.py``, with
``DeviceInfo``), what every backend's executables share (``executable.py``), memory checks,
the on-disk program cache and launch tuning; one subpackage per compute API (``opencl/``,
``vulkan/``), independent of each other. The only layer that talks to a driver."""
