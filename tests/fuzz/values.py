"""Value draws for fuzz programs, and the argument layouts they are passed in.

``draw_inputs`` makes arrays from a seed, mixing ordinary values with ±0, ±inf, NaN, subnormals
and integer extremes; ``place`` turns each into the layout the program asks for (NumPy arrays,
strided NumPy views, and pyopencl arrays that are transposed, offset or strided views of a
larger buffer); ``fusejit.testing.to_host`` reads any of them back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from .generator import Program


def _float_specials(dtype: np.dtype) -> np.ndarray:
    info = np.finfo(dtype)
    sub = info.smallest_subnormal
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, sub, -sub, info.tiny * 0.75, info.tiny,
                     -info.tiny, info.max, -info.max, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5,
                     info.eps, 1 + info.eps, 3.0, -7.0, 1e-3, 88.72284, 710.0], dtype=dtype)


def _int_specials(dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    cand = [0, 1, -1, 2, -2, 3, 7, 8, 31, 32, 33, 63, 64, info.min, info.max, info.min + 1,
            info.max - 1, -(2**31), 2**31 - 1, 255]
    return np.array([c for c in cand if info.min <= c <= info.max], dtype=dtype)


def draw_array(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...],
               special: float) -> np.ndarray:
    """Values of ``dtype``: a fraction ``special`` of edge values, the rest ordinary."""
    n = math.prod(shape)
    if dtype.kind == "b":
        return np.asarray(rng.random(n).reshape(shape) < 0.5)  # (0-d: an array, not np.bool)
    if dtype.kind == "f":
        scale = 10.0 ** rng.integers(-3, 4, n)
        ordinary = rng.standard_normal(n) * scale
        ordinary = np.where(rng.random(n) < 0.3, np.round(ordinary * 2) / 2, ordinary)
        pool = _float_specials(dtype)
    else:
        info = np.iinfo(dtype)
        small = rng.integers(max(info.min, -100), min(info.max, 100), n, endpoint=True)
        wide = rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
        ordinary = np.where(rng.random(n) < 0.8, small, wide)
        pool = _int_specials(dtype)
    pick = pool[rng.integers(0, len(pool), n)]
    with np.errstate(all="ignore"):
        out = np.where(rng.random(n) < special, pick, ordinary.astype(dtype))
    return out.astype(dtype).reshape(shape)


def draw_inputs(program: Program, seed: int) -> list[Any]:
    """One value draw for every argument (logical values; ``place`` applies the layout)."""
    rng = np.random.default_rng(seed)
    special = float(rng.choice([0.0, 0.1, 0.3, 0.7]))
    values: list[Any] = []
    for a in program.args:
        arr = draw_array(rng, a.dtype, a.shape, special)
        if a.kind == "pyscalar":
            v = arr.reshape(-1)[0] if arr.size else a.dtype.type(0)
            if a.dtype.kind in "iu":
                v = int(rng.choice([0, 1, -1, 2, 3, 5, 100, -7]))  # mostly in range of any dtype
            values.append({"b": bool, "i": int, "u": int, "f": float}[a.dtype.kind](v))
        elif a.kind == "npscalar":
            values.append(a.dtype.type(arr.reshape(-1)[0] if arr.size else 0))
        elif a.layout == "numpy-broadcast" and a.shape[0] > 1:  # read-only, stride 0 on axis 0
            values.append(np.broadcast_to(arr[:1], a.shape))
        else:
            values.append(arr)
    return values


@dataclass
class Placed:
    """An argument as passed to the fused function, and the device buffer behind it (to check
    that nothing outside the function's writes changed)."""

    value: Any
    base_host: np.ndarray | None = None  # contents of the whole device buffer before the call
    base_dev: cla.Array | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # "view": the index into the buffer


def _to_device(queue: Any, host: np.ndarray) -> Any:
    """A device copy on ``queue``: a pyopencl array, or a fusejit.vulkan one on a Vulkan
    device (both take the same views)."""
    if getattr(queue, "fusejit_backend", None) is not None:
        from fusejit.vulkan import to_device

        return to_device(host, queue)
    return cla.to_device(queue, host)


def place(value: Any, layout: str, queue: cl.CommandQueue) -> Placed:
    """``value`` in ``layout``: a NumPy array, a strided NumPy view, or a device view."""
    if layout == "scalar":
        return Placed(value)
    v = np.asarray(value)
    if layout == "numpy":
        return Placed(v.copy())
    if layout == "numpy-broadcast":  # (draw_inputs made it a broadcast view)
        return Placed(value if isinstance(value, np.ndarray) and not value.flags.writeable
                      else np.broadcast_to(v, v.shape))
    if layout == "device-reversed":
        dev = _to_device(queue, np.array(v[::-1], order="C"))
        return Placed(dev[::-1], np.array(v[::-1], order="C"), dev)
    if layout == "numpy-strided":
        base = np.zeros((2 * v.shape[0],) + v.shape[1:], v.dtype)
        base[::2] = v
        return Placed(base[::2])
    if layout == "device":
        base = np.array(v, order="C")
        dev = _to_device(queue, base)
        return Placed(dev, base.copy(), dev)
    if layout == "device-T":
        base = np.array(v.T, order="C")
        dev = _to_device(queue, base)
        return Placed(dev.T, base.copy(), dev)
    if layout == "device-offset":
        base = np.concatenate([np.zeros((1,) + v.shape[1:], v.dtype), v])
        dev = _to_device(queue, base)
        return Placed(dev[1:], base.copy(), dev, {"view": (slice(1, None),)})
    if layout == "device-strided":
        base = np.ones((2 * v.shape[0],) + v.shape[1:], v.dtype)
        base[::2] = v
        dev = _to_device(queue, base)
        return Placed(dev[::2], base.copy(), dev, {"view": (slice(None, None, 2),)})
    raise ValueError(layout)
