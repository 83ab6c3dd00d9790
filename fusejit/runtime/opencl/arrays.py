"""Result arrays of fused calls on OpenCL: each context's memory pool, and pyopencl arrays
built from a prepared attribute template instead of through pyopencl's constructor."""

from __future__ import annotations

import threading
import warnings
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pyopencl.tools as cltools

_pools: dict[cl.Context, cltools.MemoryPool] = {}
_pool_lock = threading.Lock()


def memory_pool(queue: cl.CommandQueue) -> cltools.MemoryPool:
    """The buffer pool of ``queue``'s context.

    On GPUs its buffers are allocated by the driver when first used (DeferredAllocator):
    PyOpenCL's ImmediateAllocator enqueues a clEnqueueMigrateMemObjects for each new buffer,
    and on an H200 100 threads racing to a function's first calls segfaulted in a worker
    thread of NVIDIA's OpenCL driver (a null pointer read in libnvidia-opencl.so.1) in about
    one cold run in seven with it (7 of ~51), in none of 18 without. fusejit checks sizes
    before it allocates (runtime/memory.py), so the late allocation loses no named error."""
    ctx = queue.context
    pool = _pools.get(ctx)
    if pool is None:
        with _pool_lock:
            pool = _pools.get(ctx)
            if pool is None:
                gpu = all(d.type & cl.device_type.GPU for d in ctx.devices)
                with warnings.catch_warnings():
                    # (PyOpenCL warns that a pool cannot free held blocks when a deferred
                    # allocation fails: it fails at launch instead, as any OpenCL buffer can)
                    warnings.filterwarnings("ignore", "Memory pools expect non-deferred",
                                            UserWarning)
                    pool = _pools[ctx] = cltools.MemoryPool(
                        cltools.DeferredAllocator(ctx) if gpu
                        else cltools.ImmediateAllocator(queue))
    return pool


def new_array(queue: cl.CommandQueue, pool: cltools.MemoryPool, spec: tuple
                      ) -> cla.Array:
    """A result array through pyopencl's constructor: zero-size results, and every result when
    pyopencl's internals no longer match what ``array_template`` fills in."""
    shape, dtype, size, strides, nbytes = spec
    if size == 0:
        return cla.empty(queue, shape, dtype, allocator=pool)
    return cla.Array(None, shape, dtype, allocator=pool, data=pool.allocate(nbytes),
                     strides=strides, _flags=None, _fast=True, _size=size,
                     _context=queue.context, _queue=queue)


def array_template(queue: cl.CommandQueue, pool: cltools.MemoryPool, spec: tuple
                    ) -> dict[str, Any] | None:
    """The attributes of a C-contiguous pool-backed result array of this spec on this queue,
    all but its buffer and event list; None where the public constructor must build it.

    A result is ``object.__new__(Array)`` given a copy of this dict (``from_template``, and
    inlined in the generated launchers): pyopencl's constructor re-derives (in ~10 us, ~1.3 us
    on its fast path) what the specialised signature already knows, and even a dict display
    of the twelve attributes costs twice a copy of a prepared one. The attribute set is
    checked against the real constructor at import."""
    if not templated(spec):
        return None
    shape, dtype, size, strides, nbytes = spec
    return {"queue": queue, "context": queue.context, "shape": shape, "dtype": dtype,
            "strides": strides, "events": None, "nbytes": nbytes, "size": size,
            "allocator": pool, "base_data": None, "offset": 0, "_flags": None}


def scratch_buffer(pool: cltools.MemoryPool, spec: tuple) -> Any:
    """A kernel's scratch buffer (temporaries, partial results): no array around it."""
    return pool.allocate(spec[4]) if spec[2] else None


def templated(spec: tuple) -> bool:
    return DIRECT and spec[2] > 0


def from_template(template: dict[str, Any], buf: Any) -> cla.Array:
    arr = object_new(cla.Array)
    arr.__dict__ = attrs = template.copy()
    attrs["events"] = []  # each array owns its event list (pyopencl appends to it)
    attrs["base_data"] = buf
    return arr


object_new = object.__new__


def _direct_construction_matches() -> bool:
    try:
        probe = cla.Array(None, (2,), np.dtype(np.float32), strides=(4,), _flags=None,
                          _fast=True, _size=2, _context=None, _queue=None, data=0)
        return set(vars(probe)) == {"queue", "context", "shape", "dtype", "strides", "events",
                                    "nbytes", "size", "allocator", "base_data", "offset",
                                    "_flags"}
    except Exception:  # noqa: BLE001 - any change in pyopencl's internals: use the public path
        return False


DIRECT = _direct_construction_matches()
