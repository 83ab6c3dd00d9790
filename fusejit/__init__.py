"""fusejit: numpy-style functions traced into fused, shape-specialised OpenCL kernels.

    >>> from fusejit import fuse
    >>> @fuse
    ... def gelu(x):
    ...     return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
"""

from . import numpy_api  # noqa: F401 - the traced NumPy surface, loaded now, not in a first call
from . import random  # fusejit.random: keyed Philox random numbers (in __all__)
from . import linalg  # noqa: F401 - matrix products (@, matmul, dot, einsum, ...)
from .aot import BundleError, ShapeDtype, export, load
from .api import CacheInfo, Fused, Lowered, fuse
from .errors import (
    BroadcastError,
    CapturedStateError,
    ContextMismatchError,
    DeviceUnavailableError,
    DeviceMemoryError,
    FusejitError,
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
from .quant import dequantize_linear, quantize_linear
from .runtime.backend import get_default_device, set_default_device
from .runtime.devices import default_queue

__version__ = "0.1.0"

__all__ = [
    "BroadcastError",
    "BundleError",
    "CacheInfo",
    "CapturedStateError",
    "ContextMismatchError",
    "DeviceUnavailableError",
    "DeviceMemoryError",
    "Fused",
    "FusejitError",
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
