"""Buffer sizes before anything is allocated: broadcast NumPy inputs are uploaded un-broadcast
(the kernel reads them with stride 0), and every buffer a call needs is checked against the
device's largest allocation and its global memory, so a too-big request fails at once with a
``DeviceMemoryError`` that names the buffer, not late in the driver (or the host's memory).
Here too, below the call signatures that key on them (compile/signature.py): how a NumPy
argument is uploaded (``HostArraySpec``) and the offset past which a device array leaves the
fast paths (``BIG_OFFSET``)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from fusejit.errors import DeviceMemoryError

# bytes; device arrays starting further into their buffer take a call's full path (the fast
# key and the guarded launchers leave them out: the full path decides between 32- and 64-bit
# index math for them)
BIG_OFFSET = 2**30


class HostArraySpec(NamedTuple):
    """A NumPy array argument (uploaded contiguous to the device for the call)."""

    dtype: np.dtype
    shape: tuple[int, ...]
    writeable: bool
    zero: tuple[int, ...] = ()  # broadcast (stride-0) axes: uploaded un-broadcast


def zero_axes(value: np.ndarray) -> tuple[int, ...]:
    """Axes of a read-only NumPy array that repeat one element (stride 0, length > 1), as
    ``np.broadcast_to`` makes them. A writeable array is uploaded whole (writes come back)."""
    if value.flags.writeable or value.flags.c_contiguous:
        return ()
    return tuple(i for i, (d, s) in enumerate(zip(value.shape, value.strides))
                 if s == 0 and d > 1)


def compact_strides(shape: tuple[int, ...], zero: Sequence[int]) -> tuple[int, ...]:
    """Element strides of the un-broadcast upload: row-major over ``shape`` with the ``zero``
    axes of length one, and stride 0 along them."""
    out, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        if i in zero:
            continue
        out[i] = acc
        acc *= shape[i]
    return tuple(out)


def compact(value: np.ndarray, strides: Sequence[int] | None, dtype: np.dtype) -> np.ndarray:
    """The host data to upload for an array parameter specialised with ``strides``: one copy
    of each repeated element along the stride-0 axes, contiguous, in ``dtype``."""
    if strides is not None and 0 in strides:
        value = value[tuple(slice(0, 1) if s == 0 else slice(None) for s in strides)]
    return np.ascontiguousarray(value, dtype=dtype)


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"


def buffers(graph: Any, plan: Any, module: Any, host_params: Sequence[int]
            ) -> Iterator[tuple[str, int]]:
    """(description, bytes) of every buffer a call allocates: NumPy inputs' uploads, outputs,
    temporaries and partial results."""
    for p in host_params:
        prm = graph.params[p]
        n = math.prod(1 if s == 0 else d for d, s in zip(prm.shape, prm.strides or ()))
        yield (f"argument {prm.name} ({prm.dtype.name}[{','.join(map(str, prm.shape))}], "
               "uploaded from NumPy)", n * prm.dtype.itemsize)
    for i, node in enumerate(graph.outputs):
        yield f"output {i} ({node.describe()})", node.size * node.dtype.itemsize
    for i, node in enumerate(plan.temps):
        yield f"temporary {i} ({node.describe()})", node.size * node.dtype.itemsize
    for i, part in enumerate(module.partials):
        yield f"partial results {i} ({part.dtype.name}[{part.size}])", \
            part.size * part.dtype.itemsize


def check_buffers(graph: Any, plan: Any, module: Any, host_params: Sequence[int],
                  device_bytes: int, max_alloc: int, global_mem: int, device: str) -> None:
    """Raise ``DeviceMemoryError`` when a buffer is larger than ``max_alloc``
    (CL_DEVICE_MAX_MEM_ALLOC_SIZE) or all of them, with the device arrays passed in
    (``device_bytes``), exceed ``global_mem``. Limits of 0 are unknown and not checked."""
    total = device_bytes
    for what, nbytes in buffers(graph, plan, module, host_params):
        if max_alloc and nbytes > max_alloc:
            raise DeviceMemoryError(
                f"{what} needs {_gib(nbytes)}, more than the {_gib(max_alloc)} the device "
                f"({device}) can allocate in one buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE); "
                "process the data in smaller pieces")
        total += nbytes
    if global_mem and total > global_mem:
        raise DeviceMemoryError(
            f"this call needs {_gib(total)} of device memory (its arguments, outputs and "
            f"temporaries), more than the device's {_gib(global_mem)} "
            f"(CL_DEVICE_GLOBAL_MEM_SIZE, {device}); process the data in smaller pieces")


def check_call(lowered: Any, specs: Sequence[Any], flat: Sequence[Any]) -> None:
    """``check_buffers`` for a call being compiled: its NumPy inputs are uploaded, its device
    arrays already hold their memory."""
    graph = lowered.graph
    host = [p for p, prm in enumerate(graph.params) if prm.kind == "array"
            and isinstance(specs[prm.source], HostArraySpec)]
    seen: dict[int, int] = {}
    for value in flat:
        data = getattr(value, "base_data", None)
        if data is not None and hasattr(data, "int_ptr"):
            seen[data.int_ptr] = max(seen.get(data.int_ptr, 0), int(data.size))
    info = lowered.device
    check_buffers(graph, lowered.plan, lowered.module, host, sum(seen.values()),
                  info.max_alloc, info.global_mem, info.key)
