"""Binding by-value kernel arguments (scalars, offsets, runtime extents) cheaply.

``cl.Kernel.set_arg(i, np.float32(x))`` costs 14-20 µs in pyopencl 2026.1 on the 2-core CI
host (a buffer costs 0.1-0.4 µs): it tries the memory-object casts before it takes the buffer
protocol, and a failed cast is a C++ exception. Adam with its five hyperparameters and step
count as arguments binds eight scalars per call, which was the whole gap to the constant
version (host cost per cached call 346 µs against 62 µs with the enqueue stubbed out; on the
H200 0.63 against 0.48 ms synchronized). pyopencl's own generated invokers bind scalars with
``Kernel._set_arg_buf(i, bytes)`` (0.2 µs with a prepared ``struct`` packer); so do we, where
that method exists, with the value already converted to the kernel's declared type (so
packing it is exact: a float32 value widens to a Python float and narrows back unchanged).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pyopencl as cl

from fusejit.ir.dtypes import convert_scalar

# pyopencl's invokers use it since 2015; fall back to set_arg if a release drops it
FAST = hasattr(cl.Kernel, "_set_arg_buf")

# struct codes with standard sizes ("=": native byte order, no alignment): the bytes the
# buffer protocol of a NumPy scalar of that type would hand to clSetKernelArg
_CODES = {("f", 4): "f", ("f", 8): "d", ("i", 1): "b", ("u", 1): "B", ("b", 1): "B",
          ("i", 2): "h", ("u", 2): "H", ("i", 4): "i", ("u", 4): "I", ("i", 8): "q",
          ("u", 8): "Q", ("f", 2): "f"}  # float16 and bool travel as float and uchar


@lru_cache(maxsize=None)
def packer(dtype: np.dtype) -> Callable[[Any], bytes]:
    """The bytes of a by-value argument of kernel type ``dtype`` (given a value already
    converted to it, see runtime/executable.kernel_arg_scalar)."""
    code = _CODES.get((dtype.kind, dtype.itemsize))
    if code is None:  # complex and anything unusual: the value's own bytes
        return lambda value: np.asarray(value).tobytes()
    return struct.Struct("=" + code).pack


def converter(dtype: np.dtype, general: Callable[[Any, np.dtype], np.generic]
              ) -> Callable[[Any], np.generic]:
    """``general(value, dtype)`` (runtime/executable.kernel_arg_scalar) for one kernel dtype, with
    the dtype tests done once: the same conversion, a call less per scalar per launch."""
    if dtype.kind in "b" or (dtype.kind == "f" and dtype.itemsize == 2):
        return lambda value: general(value, dtype)  # travel as uchar / float
    return lambda value: convert_scalar(value, dtype)


def bind(kernel: cl.Kernel, index: int, data: bytes) -> None:
    """Set by-value argument ``index`` of ``kernel`` to packed ``data``."""
    if FAST:
        kernel._set_arg_buf(index, data)  # noqa: SLF001 - pyopencl's own invokers' entry
    else:
        kernel.set_arg(index, np.frombuffer(data, np.uint8))


class BindingCache:
    """The packed by-value scalars of a launcher's last call, with the argument objects they
    were converted (and derived) from. Identity, not equality, decides a hit (``0.0 == -0.0``,
    ``1 == 1.0 == True``), and only immutable scalar types are remembered, so the same object
    is the same value."""

    def __init__(self, sources: Sequence[int]) -> None:
        self.sources = tuple(sources)
        self.last = [(*(object() for _ in self.sources), ())]  # matches no call

    def remember(self, flat: Sequence[Any], packed: tuple) -> None:
        args = tuple(flat[s] for s in self.sources)
        if all(isinstance(a, _IMMUTABLE) for a in args):
            self.last[0] = (*args, packed)  # one assignment: threads see old or new


_IMMUTABLE = (bool, int, float, np.generic)


def cached(sources: Sequence[int], n: int, convert: list[str], env: dict[str, Any]
           ) -> list[str]:
    """Launcher lines that set ``b0..b{n-1}`` to the packed scalars: from the cache when every
    source argument is the object of the last call, else by running ``convert`` (lines that
    set ``s0..s{n-1}``) and packing."""
    if not sources:
        return convert + [f"    b{j} = pack{j}(s{j})" for j in range(n)]
    cache = BindingCache(sources)
    env["scache"], env["remember"] = cache.last, cache.remember
    names = "".join(f"b{j}, " for j in range(n))
    same = " and ".join(f"flat[{s}] is c[{k}]" for k, s in enumerate(sources))
    return ["    c = scache[0]",
            f"    if {same}:",
            f"        ({names}) = c[{len(sources)}]",
            "    else:",
            *("    " + line for line in convert),
            *(f"        b{j} = pack{j}(s{j})" for j in range(n)),
            f"        remember(flat, ({names}))"]
