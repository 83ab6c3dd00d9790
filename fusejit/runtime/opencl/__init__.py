"""The OpenCL backend: devices and queues, program builds, kernel objects, the lazy device
probes and first-use GEMM tuning; ``backend.py`` is the ``Backend`` the runtime dispatches to,
registered (runtime/backend.py) when this package is imported."""

from fusejit.runtime.opencl import backend as backend  # noqa: F401 - registers OPENCL
