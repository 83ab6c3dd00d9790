"""Abstract signatures: ``f.lower(fusejit.ShapeDtype((None, 1024), np.float32)).compile()``
builds a signature before any data exists (None: a dynamic dimension, see
``@fuse(dynamic=...)``); ``fusejit.export`` takes the same abstract arguments
(compile/aot.py, compile/aot_dynamic.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusejit.compile.signature import DeviceArraySpec
from fusejit.ir import dtypes as dt
from fusejit.ir.shapes import row_major_strides
from fusejit.runtime.backend import DEVICES, backend_named
from fusejit.runtime.memory import HostArraySpec
from fusejit.runtime.opencl.devices import default_queue

REPRESENTATIVE_EXTENT = 1024  # what a None dimension is lowered at


@dataclass(frozen=True)
class ShapeDtype:
    """An abstract array argument for ``f.lower``/``fusejit.export``: a shape (None: a
    dynamic dimension) and a dtype. ``device=True`` (default) stands for a contiguous
    pyopencl array on the default queue, ``device=False`` for a NumPy array, and a device's
    name (``"cuda"``, ``"vulkan"``, ``"opencl"``) for a contiguous array on that device's
    default GPU: ``device="cuda"`` lowers CUDA source on any machine, for the architecture in
    ``FUSEJIT_CUDA_ARCH`` (default: the GPU's, else sm_90a)."""

    shape: tuple[int | None, ...]
    dtype: Any
    device: bool | str = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "dtype", dt.check_supported(np.dtype(self.dtype), "ShapeDtype"))
        for d in self.shape:
            if d is not None and (not isinstance(d, int) or d < 0):
                raise ValueError(f"ShapeDtype dimension {d!r} must be a size >= 0 or None")
        if isinstance(self.device, str) and self.device not in DEVICES:
            raise ValueError(f"ShapeDtype device {self.device!r} is not one of "
                             f"{', '.join(DEVICES)} (or True / False)")

    @property
    def dynamic(self) -> bool:
        return None in self.shape

    @property
    def queue(self) -> Any:
        if isinstance(self.device, str):
            return backend_named(self.device).default_queue()
        return default_queue()

    def spec(self) -> DeviceArraySpec | HostArraySpec:
        """The argument spec this abstract argument traces as (a None dimension at
        ``REPRESENTATIVE_EXTENT``, with kernels that take their extents at launch)."""
        shape = tuple(REPRESENTATIVE_EXTENT if d is None else d for d in self.shape)
        if not self.device:
            return HostArraySpec(self.dtype, shape, True)
        return DeviceArraySpec(self.dtype, shape, row_major_strides(shape), False,
                               math.prod(shape) > 2**31 - 1, self.queue.context)


class Compiled:
    """What ``f.lower(...).compile()`` returns: calls with the lowered signature only launch."""

    def __init__(self, fused: Any) -> None:
        self._fused = fused

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fused(*args, **kwargs)

    def cache_info(self) -> Any:
        return self._fused.cache_info()
