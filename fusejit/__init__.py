"""fusejit: numpy-style functions traced into fused, shape-specialised OpenCL kernels.

    >>> from fusejit import fuse
    >>> @fuse
    ... def gelu(x):
    ...     return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
"""

# the tracer's NumPy surface, loaded once and now (not in a first call): importing these installs
# the Python operators on TensorProxy and fills its dispatch table (fusejit.frontend.dispatch)
from fusejit.frontend import operators as _operators  # noqa: F401
from fusejit.frontend import numpy as _traced_numpy  # noqa: F401
from fusejit import random  # fusejit.random: keyed Philox random numbers (in __all__)
# what every first call needs, loaded now (not in it): the OpenCL backend (with PyOpenCL's
# kernel invoker module, which cl.Kernel imports on first use), the schedule verifier, the
# GEMM tuner's runtime half
from fusejit.runtime.opencl import backend as _opencl  # noqa: F401
# the Vulkan backend registered too (runtime/backend.py), so set_default_device("vulkan") or
# FUSEJIT_DEVICE=vulkan finds it; wgpu is imported only when a Vulkan device is opened
from fusejit.runtime.vulkan import backend as _vulkan  # noqa: F401
# and CUDA (NVIDIA's packages load only when a CUDA device is used)
from fusejit.runtime.cuda import backend as _cuda  # noqa: F401
from fusejit.passes.verify import verify_module as _verify_module  # noqa: F401
from fusejit.runtime.opencl import gemm_bench as _gemm_bench  # noqa: F401
from fusejit.compile.abstract import ShapeDtype
from fusejit.compile.aot import BundleError, export, load
from fusejit.api import CacheInfo, Fused, Lowered, fuse
from fusejit.errors import (
    BroadcastError,
    CapturedStateError,
    ContextMismatchError,
    DeviceIndexError,
    DeviceUnavailableError,
    DeviceMemoryError,
    FusejitError,
    IntRangeError,
    InternalError,
    KernelBuildError,
    MatmulPrecisionError,
    RandomStateError,
    ReadOnlyError,
    ScheduleError,
    TracerBoolConversionError,
    TracerConversionError,
    UnsupportedAttributeError,
    UnsupportedDTypeError,
    UnsupportedOperationError,
    ValidationError,
)
from fusejit.quant import dequantize_linear, quantize_linear
from fusejit.runtime.backend import get_default_device, set_default_device
from fusejit.runtime.opencl.devices import default_queue

from fusejit.compile.collections import CollectionHandler, register_collection
from fusejit._version import __version__
from fusejit.compile import trace_cache as _trace_cache

_trace_cache.note_library(__version__)  # (the trace cache's key: what fusejit is made of)


def _dask_handler() -> CollectionHandler:
    """fusejit.dask, imported at the first call or explain() after dask.array was (it imports
    dask): api is below the integrations, so the root package, above them all, hands it over."""
    from fusejit import dask

    return CollectionHandler(dask.has_dask_array, dask.call, dask.explain)


register_collection("dask.array", _dask_handler)

__all__ = [
    "BroadcastError",
    "BundleError",
    "CacheInfo",
    "CapturedStateError",
    "ContextMismatchError",
    "DeviceIndexError",
    "DeviceUnavailableError",
    "DeviceMemoryError",
    "Fused",
    "FusejitError",
    "IntRangeError",
    "InternalError",
    "KernelBuildError",
    "MatmulPrecisionError",
    "Lowered",
    "RandomStateError",
    "ReadOnlyError",
    "ScheduleError",
    "TracerBoolConversionError",
    "TracerConversionError",
    "UnsupportedAttributeError",
    "UnsupportedDTypeError",
    "UnsupportedOperationError",
    "ShapeDtype",
    "ValidationError",
    "default_queue",
    "dequantize_linear",
    "export",
    "fuse",
    "get_default_device",
    "load",
    "quantize_linear",
    "random",
    "set_default_device",
]
