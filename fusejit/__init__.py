"""fusejit: numpy-style functions traced into fused, shape-specialised OpenCL kernels.

    >>> from fusejit import fuse
    >>> @fuse
    ... def gelu(x):
    ...     return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
"""

from . import numpy_api  # noqa: F401 - the traced NumPy surface, loaded now, not in a first call
from . import random  # fusejit.random: keyed Philox random numbers (in __all__)
from .api import CacheInfo, Fused, Lowered, fuse
from .errors import (
    BroadcastError,
    ContextMismatchError,
    FusejitError,
    KernelBuildError,
    RandomStateError,
    ReadOnlyError,
    TracerBoolConversionError,
    TracerConversionError,
    UnsupportedAttributeError,
    UnsupportedDTypeError,
    UnsupportedOperationError,
    ValidationError,
)
from .quant import dequantize_linear, quantize_linear
from .runtime.devices import default_queue

__version__ = "0.1.0"

__all__ = [
    "BroadcastError",
    "CacheInfo",
    "ContextMismatchError",
    "Fused",
    "FusejitError",
    "KernelBuildError",
    "Lowered",
    "RandomStateError",
    "ReadOnlyError",
    "TracerBoolConversionError",
    "TracerConversionError",
    "UnsupportedAttributeError",
    "UnsupportedDTypeError",
    "UnsupportedOperationError",
    "ValidationError",
    "default_queue",
    "dequantize_linear",
    "fuse",
    "quantize_linear",
    "random",
]
