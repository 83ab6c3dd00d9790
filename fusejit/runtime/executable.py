"""A compiled call signature: built kernels, how each argument is bound, what is returned.

The hot path (``Executable.run``) does only: convert scalars, allocate outputs from the memory
pool, set arguments on kernels created once at build time, enqueue.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pyopencl.tools as cltools

from .. import dtypes as dt
from ..ir import Graph
from ..source import BufferArg, Module, ScalarArg
from .devices import DeviceInfo

_pools: dict[cl.Context, cltools.MemoryPool] = {}
_pool_lock = threading.Lock()


def memory_pool(queue: cl.CommandQueue) -> cltools.MemoryPool:
    ctx = queue.context
    pool = _pools.get(ctx)
    if pool is None:
        with _pool_lock:
            pool = _pools.get(ctx)
            if pool is None:
                pool = _pools[ctx] = cltools.MemoryPool(cltools.ImmediateAllocator(queue))
    return pool


@dataclass(frozen=True)
class OutSpec:
    """One returned leaf: a computed graph output, or an argument returned as itself."""

    kind: str  # "node" | "arg"
    index: int  # graph output index, or flattened argument position


def _kernel_arg_scalar(value: Any, dtype: np.dtype) -> np.generic:
    """A scalar argument converted like NumPy (OverflowError for out-of-range Python ints),
    then to the type the kernel declares (float16 -> float, bool -> uchar)."""
    v = dt.convert_scalar(value, dtype)
    if dtype == dt.FLOAT16:
        return np.float32(v)
    if dtype == dt.BOOL:
        return np.uint8(v)
    return v


class Executable:
    """Everything needed to run one specialised call signature."""

    def __init__(self, graph: Graph, module: Module, program: cl.Program, info: DeviceInfo,
                 outputs: Sequence[OutSpec], temps: Sequence[tuple[tuple[int, ...], np.dtype]],
                 host_mode: bool, index_dtype: np.dtype, treedef: Any,
                 constants: dict[int, np.ndarray]) -> None:
        self.graph = graph
        self.module = module
        self.info = info
        self.outputs = tuple(outputs)
        self.temps = tuple(temps)
        self.host_mode = host_mode
        self.index_dtype = index_dtype
        self.treedef = treedef
        self.constants = constants  # captured arrays, uploaded once per context
        self.kernels = [(getattr(program, k.name), k) for k in module.kernels
                        if math.prod(k.global_size) > 0]
        self._launch_lock = threading.Lock()  # set_args + enqueue on a shared cl.Kernel
        self._const_buffers: dict[cl.Context, dict[int, cla.Array]] = {}
        written = {p for p, _ in graph.writes}
        self._host_writes = [p for p in written if graph.params[p].kind == "array"]

    # -- per call ---------------------------------------------------------------------------------
    def run(self, flat: Sequence[Any], queue: cl.CommandQueue) -> tuple[Any, ...]:
        graph = self.graph
        # Convert every scalar first: a value NumPy refuses (``int8_array + 300`` passed as an
        # argument raises OverflowError) fails the call before anything is uploaded or launched.
        scalars = {arg: _kernel_arg_scalar(flat[graph.params[arg.index].source], arg.dtype)
                   for record in self.module.kernels for arg in record.signature.args
                   if isinstance(arg, ScalarArg) and arg.role != "offset"}
        pool = memory_pool(queue)
        buffers: dict[int, Any] = {}
        offsets: dict[int, int] = {}
        uploaded: dict[int, cla.Array] = {}
        for p, param in enumerate(graph.params):
            if param.kind == "array":
                value = flat[param.source]
                if isinstance(value, cla.Array):
                    buffers[p] = value.base_data
                    offsets[p] = value.offset // value.dtype.itemsize
                else:
                    host = np.ascontiguousarray(value, dtype=param.dtype)
                    dev = cla.to_device(queue, host, allocator=pool)
                    uploaded[p] = dev
                    buffers[p] = dev.base_data
                    offsets[p] = 0
            elif param.kind == "const":
                dev = self._const(queue, p)
                buffers[p] = dev.base_data
                offsets[p] = 0
        outs = [cla.empty(queue, node.shape, node.dtype, allocator=pool)
                for node in graph.outputs]
        temps = [cla.empty(queue, shape, dtype, allocator=pool) for shape, dtype in self.temps]
        partials = [cla.empty(queue, (p.size,), p.dtype, allocator=pool)
                    for p in self.module.partials]
        with self._launch_lock:
            for knl, record in self.kernels:
                values = []
                for arg in record.signature.args:
                    if isinstance(arg, ScalarArg):
                        if arg.role == "offset":
                            values.append(self.index_dtype.type(offsets[arg.index]))
                        else:
                            values.append(scalars[arg])
                    else:
                        values.append(self._buffer(arg, buffers, outs, temps, partials))
                knl.set_args(*values)
                cl.enqueue_nd_range_kernel(queue, knl, record.global_size, record.local_size)
        for p in self._host_writes:
            if p in uploaded:
                target = flat[graph.params[p].source]
                result = uploaded[p].get(queue)
                np.copyto(target, result, casting="unsafe")
        return self._results(flat, outs)

    def _buffer(self, arg: BufferArg, buffers: dict[int, Any], outs: list[cla.Array],
                temps: list[cla.Array], partials: list[cla.Array]) -> Any:
        if arg.role == "param":
            return buffers[arg.index]
        if arg.role == "output":
            return outs[arg.index].base_data
        if arg.role == "temp":
            return temps[arg.index].base_data
        return partials[arg.index].base_data

    def _const(self, queue: cl.CommandQueue, p: int) -> cla.Array:
        per_ctx = self._const_buffers.setdefault(queue.context, {})
        if p not in per_ctx:
            per_ctx[p] = cla.to_device(queue, self.constants[p])
        return per_ctx[p]

    def _results(self, flat: Sequence[Any], outs: list[cla.Array]) -> tuple[Any, ...]:
        leaves = []
        for spec in self.outputs:
            if spec.kind == "arg":
                leaves.append(flat[spec.index])
            elif self.host_mode:
                host = outs[spec.index].get()
                leaves.append(host[()] if host.ndim == 0 else host)
            else:
                leaves.append(outs[spec.index])
        return tuple(leaves)
