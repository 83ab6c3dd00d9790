"""A compiled call signature on CUDA: one cubin (runtime/cuda/build.py), its kernels loaded
once, launched through cuda-core on the caller's stream.

Arrays adopted from torch or CuPy run on that library's current stream (so no
synchronisation is added and none is missing); NumPy-only calls run on the device's default
stream and copy their results back. Launch geometry: OpenCL's NDRange (``global_size``,
``local_size``) as a grid of whole blocks; kernels take the NDRange as their last three
arguments (targets/cuda/target.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fusejit.codegen.kernels import BufferArg, Module, ScalarArg
from fusejit.errors import ContextMismatchError, UnsupportedOperationError
from fusejit.runtime import status
from fusejit.runtime.cuda.array import Array, as_library, library_empty, owned, upload
from fusejit.runtime.cuda.build import build_cached
from fusejit.runtime.cuda.device import CUDADevice, check, core, driver
from fusejit.runtime.executable import OutSpec, deriver, kernel_arg_scalar, results

DEFAULT_BLOCK = 256  # threads a block where the kernel leaves the work-group size open
_MAX_GRID_YZ = 65535


def _record(n: int) -> None:
    """Called once per launch: a hook the tests count launches with (tests/conftest.py)."""


def geometry(global_size: Sequence[int], local_size: Sequence[int] | None
             ) -> tuple[tuple[int, int, int], tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block, NDRange) of a kernel, each three-dimensional."""
    gs = (*global_size, 1, 1)[:3]
    if local_size:
        ls = (*local_size, 1, 1)[:3]
    else:  # the runtime's choice: whole warps along dimension 0, surplus threads return
        ls = (min(DEFAULT_BLOCK, -(-gs[0] // 32) * 32), 1, 1)
    grid = tuple(-(-g // max(lo, 1)) for g, lo in zip(gs, ls))
    if grid[1] > _MAX_GRID_YZ or grid[2] > _MAX_GRID_YZ:
        raise UnsupportedOperationError(
            f"a kernel needs a grid of {grid} blocks; CUDA allows at most 65,535 in y and z")
    return grid, ls, gs  # type: ignore[return-value]


def launch_plan(lowered: Any) -> tuple[list[tuple], dict[int, Any], dict[str, list[tuple]]]:
    """What launching a lowered signature takes, whichever path launches it: per kernel with
    a non-empty range (name, grid, block, NDRange, its arguments), the functions of its
    derived scalars by parameter, and the (shape, dtype) of its "output", "temp" and
    "partial" buffers."""
    module: Module = lowered.module
    params = lowered.graph.params
    shared: list = []
    derive = {i: deriver(params, i, shared) for i, p in enumerate(params) if p.kind == "derived"}
    kernels = [(k.name, *geometry(k.global_size, k.local_size), k.signature.args)
               for k in module.kernels if math.prod(k.global_size) > 0]
    specs = {"output": [(tuple(n.shape), n.dtype) for n in lowered.graph.outputs],
             "temp": [(tuple(n.shape), n.dtype) for n in lowered.plan.temps],
             "partial": [((p.size,), p.dtype) for p in module.partials]}
    return kernels, derive, specs


class CUDAExecutable:
    """Everything needed to run one specialised call signature on a CUDA device."""

    def __init__(self, lowered: Any, outputs: Sequence[OutSpec], treedef: Any,
                 constants: dict[int, np.ndarray], dev: CUDADevice, host_mode: bool,
                 name: str) -> None:
        dev.require_gpu()
        module: Module = lowered.module
        if any(k.role == "host" for k in module.kernels):
            raise UnsupportedOperationError("host steps do not run on CUDA")
        self.graph = graph = lowered.graph
        self.module = module
        self.device = dev
        self.outputs = tuple(outputs)
        self.treedef = treedef
        self.host_mode = host_mode
        self.queue_arg = -1
        self.constants = constants
        cubin, self.built_how = build_cached(module.source, dev.arch, name)
        self.cubin, self.name = cubin, name  # (the fast path loads its own module: launch.py)
        self._module: Any = None
        mod = core()
        dev.device.set_current()
        code = mod.ObjectCode.from_cubin(cubin) if hasattr(mod.ObjectCode, "from_cubin") \
            else mod.ObjectCode(cubin, "cubin")
        self.params = graph.params
        self._geometry, self._derive, specs = launch_plan(lowered)
        self.launches = [(code.get_kernel(kname), mod.LaunchConfig(grid=grid, block=block), args,
                          tuple(np.uint64(g) for g in gs))
                         for kname, grid, block, gs, args in self._geometry]
        self._arrays = [(p, prm.source) for p, prm in enumerate(self.params)
                        if prm.kind == "array"]
        self._consts = {p: np.asarray(constants[p], dtype=prm.dtype)
                        for p, prm in enumerate(self.params) if prm.kind == "const"}
        self._const_arrays: dict[int, Array] = {}  # uploaded at the first call
        self._specs = specs
        self._out_specs, self._temp_specs, self._part_specs = \
            specs["output"], specs["temp"], specs["partial"]
        self._host_writes = [p for p, _ in graph.writes if self.params[p].kind == "array"]
        # kernels that report errors share one zeroed status buffer (runtime/status.py)
        self._checked = any(isinstance(a, BufferArg) and a.role == "status"
                            for *_, args in self._geometry for a in args)
        self._status: Array | None = None
        self.launch = self.run

    def guarded(self, parts: tuple, treedef: Any, unflatten: Any, miss: object,
                same: dict[int, Any] | None = None) -> Any:
        """The generated launcher of this signature's calls with torch tensors or CuPy
        arrays (runtime/cuda/launch.py), or None: calls take the keyed full path. ``same``
        (the static arguments a test tells unchanged, OpenCL's ``guarded``) is not used: a
        signature with static arguments takes the keyed path."""
        from fusejit.runtime.cuda import launch

        if not launch.enabled() or self.host_mode:
            return None
        if any(p not in self._const_arrays for p in self._consts):
            return None  # (uploaded by the first call, which ``run`` serves)
        drv = driver()
        context, functions = self._functions(drv)
        kernels = [launch.Kernel(f, grid, block, args, gs)
                   for f, (_, grid, block, gs, args) in zip(functions, self._geometry)]
        return launch.launcher(
            parts, kernels, self.params, self._derive,
            {p: arr.ptr for p, arr in self._const_arrays.items()}, self._specs,
            self.outputs, treedef, unflatten, miss, context, drv, _record, self.name)

    def _functions(self, drv: Any) -> tuple[Any, list[Any]]:
        """(the device's primary context, the CUfunction of each launch) from this
        executable's cubin, loaded once more as a driver module of that context."""
        if self._module is None:
            self.device.device.set_current()
            context = check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
            module = check(drv.cuModuleLoadData(self.cubin), "cuModuleLoadData")
            functions = [check(drv.cuModuleGetFunction(module, name.encode()),
                               "cuModuleGetFunction") for name, *_ in self._geometry]
            self._module = (context, module, functions)
        context, _, functions = self._module
        return context, functions

    @staticmethod
    def _check_status(stream: Any, flag: Array) -> None:
        """Wait for the kernels, read the status flag, clear it and raise where it is set
        (runtime/status.py: the call itself raises, never a later one)."""
        stream.sync()
        host = status.new_host()
        drv = driver()
        check(drv.cuMemcpyDtoH(host.ctypes.data, flag.ptr, host.nbytes), "cuMemcpyDtoH")
        if host[0]:
            check(drv.cuMemcpyHtoD(flag.ptr, status.ZERO.ctypes.data, status.ZERO.nbytes),
                  "cuMemcpyHtoD")
            status.raise_for(int(host[0]))

    def needs_run(self) -> bool:
        return False

    def run(self, flat: Sequence[Any], dev: CUDADevice) -> tuple[Any, ...]:
        own = self.device
        if dev is not own:
            raise ContextMismatchError("this call's arrays live on another CUDA device")
        own.device.set_current()
        adopted = next((v for v in flat if isinstance(v, Array) and v.library), None)
        stream = own.stream(adopted.stream_handle if adopted is not None else None)
        ptrs: dict[tuple[str, int], int] = {}
        offs: dict[int, int] = {}
        keep: list[Any] = []  # cuda-core scratch and uploads (freed after a synchronisation)
        queued: list[Any] = []  # the library's scratch (freed once the launches are queued)
        uploaded: dict[int, tuple[Array, np.ndarray]] = {}
        for p, src in self._arrays:
            value = flat[src]
            if isinstance(value, Array):
                if value.device is not own:
                    raise ContextMismatchError(
                        f"argument {src} lives on CUDA device {value.device.ordinal}, the "
                        f"call's other arrays on device {own.ordinal}")
                ptrs[("param", p)] = value.ptr
                offs[p] = value.offset // value.dtype.itemsize
                continue
            if not isinstance(value, np.ndarray):
                raise TypeError(f"argument {src}: pass NumPy arrays or CUDA arrays (torch, "
                                "CuPy, JAX) to a call that runs on CUDA")
            same = next((q for q in uploaded if flat[self.params[q].source] is value), None)
            arr = uploaded[same][0] if same is not None else \
                upload(own, value.astype(self.params[p].dtype, copy=False), stream)
            uploaded[p] = (arr, value)
            keep.append(arr)
            ptrs[("param", p)] = arr.ptr
            offs[p] = 0
        for p, host in self._consts.items():
            arr = self._const_arrays.get(p)
            if arr is None:
                arr = self._const_arrays[p] = upload(own, host, stream)
            ptrs[("param", p)] = arr.ptr
        empty = library_empty(adopted.library, own) if adopted is not None else None
        if empty is not None and not self.host_mode:  # (torch in, torch out: its allocator)
            outs = []
            for i, (shape, dtype) in enumerate(self._out_specs):
                out, ptrs[("output", i)] = empty(shape, dtype)
                outs.append(out)
        else:
            outs = [owned(own, shape, dtype, stream) for shape, dtype in self._out_specs]
            for i, o in enumerate(outs):
                ptrs[("output", i)] = o.ptr
        for role, specs in (("temp", self._temp_specs), ("partial", self._part_specs)):
            for i, (shape, dtype) in enumerate(specs):
                if empty is not None:  # (alive until the launches are queued: the library's
                    # pool then reuses it in stream order)
                    held, ptrs[(role, i)] = empty(shape, dtype)
                    queued.append(held)
                    continue
                scratch = owned(own, shape, dtype, stream)
                keep.append(scratch)
                ptrs[(role, i)] = scratch.ptr
        if self._checked:
            if self._status is None:
                self._status = upload(own, status.ZERO, stream)
            ptrs[("status", 0)] = self._status.ptr
        launch = core().launch
        for kernel, config, args, ndrange in self.launches:
            values = []
            for a in args:
                if isinstance(a, BufferArg):
                    values.append(np.uint64(ptrs[(a.role, a.index)]))
                elif isinstance(a, ScalarArg) and a.role == "offset":
                    values.append(a.dtype.type(offs[a.index]))
                elif isinstance(a, ScalarArg) and a.role == "extent":
                    values.append(a.dtype.type(a.value))
                else:
                    derive = self._derive.get(a.index)
                    value = flat[self.params[a.index].source] if derive is None else derive(flat)
                    values.append(kernel_arg_scalar(value, a.dtype))
            launch(stream, config, kernel, *values, *ndrange)
            _record(1)
        if self._checked:  # before any argument is written: a call that raises writes none
            self._check_status(stream, self._status)
        for p in self._host_writes:  # NumPy arguments written in place get the result
            if p in uploaded:
                arr, target = uploaded[p]
                np.copyto(target, arr.get().reshape(target.shape), casting="unsafe")
        if keep:
            stream.sync()  # (scratch and uploads go back to the pool after the kernels)
        if not self.host_mode and adopted is not None and empty is None:
            outs = [as_library(o, adopted.library) for o in outs]
        leaves = results(self.outputs, self.host_mode, flat, outs)
        # an argument returned as itself: the caller's own array (torch in, torch out), as the
        # fast path returns it
        return tuple(v.base_data if isinstance(v, Array) and v.library else v for v in leaves)
