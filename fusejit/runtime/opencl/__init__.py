"""The OpenCL backend: devices and queues, program builds, kernel objects, the lazy device
probes and first-use GEMM tuning; ``backend.py`` is the ``Backend`` the runtime dispatches to."""
