"""ONNX QuantizeLinear / DequantizeLinear as fused functions.

Both are ordinary ``@fuse`` functions: called inside another fused function they are inlined
into its kernel; called on their own they run on NumPy arrays (results come back as NumPy) or
on pyopencl arrays. Semantics follow the ONNX operators: per-tensor or per-axis scale and zero
point, ``round`` half to even, saturation to the output type.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusejit.api import fuse

_QUANT_TYPES = (np.uint8, np.int8, np.uint16, np.int16)


def _along(param: Any, x: Any, axis: int) -> Any:
    """A per-axis (1-D) scale or zero point shaped to broadcast along ``axis`` of ``x``."""
    if np.ndim(param) == 0 or x.ndim == 0:
        return param
    axis = axis % x.ndim
    if param.shape[0] != x.shape[axis]:
        raise ValueError(f"per-axis quantization parameter has {param.shape[0]} entries but "
                         f"axis {axis} of the input has {x.shape[axis]}")
    return np.reshape(param, (-1,) + (1,) * (x.ndim - axis - 1))


@fuse(static_argnames=("axis", "dtype"))
def quantize_linear(x: Any, scale: Any, zero_point: Any = None, *, axis: int = 1,
                    dtype: Any = None) -> Any:
    """``saturate(round_half_even(x / scale) + zero_point)`` in the zero point's dtype.

    ``zero_point`` defaults to 0 of ``dtype`` (uint8 when neither is given). ``scale`` and
    ``zero_point`` are scalars (per tensor) or 1-D along ``axis`` (per axis).
    """
    if zero_point is not None:
        out = np.dtype(zero_point.dtype)
    else:
        out = np.dtype(dtype if dtype is not None else np.uint8)
    if out.type not in _QUANT_TYPES:
        raise TypeError(f"quantize_linear produces uint8, int8, uint16 or int16, not {out}")
    info = np.iinfo(out)
    q = np.rint(x / _along(scale, x, axis))
    if zero_point is not None:
        q = q + _along(zero_point, x, axis).astype(q.dtype)
    return np.clip(q, info.min, info.max).astype(out)


@fuse(static_argnames=("axis",))
def dequantize_linear(x: Any, scale: Any, zero_point: Any = None, *, axis: int = 1) -> Any:
    """``(x - zero_point) * scale``, computed in float32 and returned in ``scale``'s dtype."""
    shifted = x.astype(np.float32)
    if zero_point is not None:
        shifted = shifted - _along(zero_point, x, axis).astype(np.float32)
    s = _along(scale, x, axis)
    return (shifted * s.astype(np.float32)).astype(s.dtype)
