"""Reading a call's results back to the host, whatever device array holds them: what
``validate=True`` (inspect/validate.py) compares, and ``fusejit.testing.to_host``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from fusejit.runtime.backend import DeviceArray


def to_host(x: Any) -> Any:
    """A NumPy copy of an array or result: pyopencl arrays of any layout (strided, transposed,
    offset views) are read through their whole buffer, NumPy arrays copied, scalars kept."""
    if isinstance(x, DeviceArray):  # fusejit.vulkan arrays read their views themselves
        return x.get()
    if isinstance(x, cla.Array):
        if x.flags.forc:
            return x.get()
        item = x.dtype.itemsize
        whole = np.empty(x.base_data.size // item, x.dtype)
        cl.enqueue_copy(x.queue, whole, x.base_data)
        return np.lib.stride_tricks.as_strided(whole[x.offset // item:], x.shape,
                                               x.strides).copy()
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else x
