"""Test doubles of the CUDA fast path (runtime/cuda/launch.py) for machines without a GPU: a
stand-in library whose arrays are a pointer, a dtype, a shape, byte strides and a device (what
a launcher reads of a torch tensor or a CuPy array), a driver that records launches and reads
their arguments back through the pointer array ``cuLaunchKernel`` gets, and ``build``, which
makes a real launcher for a function lowered on the abstract CUDA device. Used by
tests/runtime/test_cuda_launch.py and benchmarks/cuda_dispatch.py --host."""

from __future__ import annotations

import ctypes
import enum
from typing import Any

import numpy as np

from fusejit import fuse
from fusejit.compile.signature import fast_key
from fusejit.frontend.pytree import tree_unflatten
from fusejit.runtime import backend
from fusejit.runtime.cuda import launch
from fusejit.runtime.cuda.array import Array
from fusejit.runtime.cuda.device import CUDADevice
from fusejit.runtime.cuda.executable import launch_plan
from fusejit.runtime.executable import OutSpec

F32 = np.dtype(np.float32)
MISS = object()
OK = 0  # (CUresult is an int enum)


class CUresult(enum.IntEnum):
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701


class FakeArray:
    """Another library's CUDA array, as far as a launcher reads one."""

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: Any = F32,
                 strides: tuple[int, ...] | None = None, device: int = 0) -> None:
        self.ptr, self.shape, self.dtype, self.device = ptr, shape, np.dtype(dtype), device
        item = self.dtype.itemsize
        self.strides = strides or tuple(int(np.prod(shape[k + 1:])) * item
                                        for k in range(len(shape)))


def part_fake(a: FakeArray) -> tuple:
    return ("fake", a.dtype, a.shape, a.strides, a.ptr % launch.ALIGN != 0, a.device)


class FakeLibrary(launch.Library):
    name = "fake"

    def __init__(self) -> None:
        self.handle = 7  # the library's current stream
        self.allocated: list[FakeArray] = []

    def array_type(self) -> type:
        return FakeArray

    def mismatch(self, i: int, dtype: Any, ordinal: int) -> str:
        return (f"x{i}.dtype != D{i} or x{i}.shape != S{i} or x{i}.strides != ST{i} or "
                f"x{i}.device != {ordinal}")

    def pointer(self, i: int, ordinal: int) -> list[str]:
        return [f"    p{i} = x{i}.ptr"]

    def itemsize(self, part: tuple) -> int:
        return part[1].itemsize

    def stream(self, ordinal: int) -> Any:
        return lambda: self.handle

    def empty(self, ordinal: int) -> Any:
        def empty(shape: tuple[int, ...], dtype: np.dtype) -> tuple[FakeArray, int]:
            a = FakeArray(0x9000_0000 + 0x1_0000 * len(self.allocated), shape, dtype,
                          device=ordinal)
            self.allocated.append(a)
            return a, a.ptr
        return empty


class FakeDriver:
    """cuLaunchKernel and the context calls a launcher makes, recorded."""

    def __init__(self, arity: dict[str, int], current: int = 5) -> None:
        self.arity, self.current = arity, current
        self.launches: list[tuple] = []
        self.pushed: list[Any] = []
        self.result = OK

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        n = self.arity[f]
        pointers = (ctypes.c_void_p * n).from_address(params)
        values = [ctypes.c_uint64.from_address(p).value for p in pointers]
        self.launches.append((f, (gx, gy, gz), (bx, by, bz), shared, stream, values, extra))
        return (self.result,)

    def cuCtxGetCurrent(self):
        return (OK, self.current)

    def cuCtxPushCurrent(self, ctx):
        self.pushed.append(ctx)
        return (OK,)

    def cuCtxPopCurrent(self):
        self.pushed.append("pop")
        return (OK, None)


def abstract() -> CUDADevice:
    """An abstract device (lowering only, on any machine)."""
    dev = CUDADevice(None, "sm_90a")
    dev.fusejit_backend = backend.backend_named("cuda")
    return dev


def adopted(dev: CUDADevice, a: FakeArray) -> Array:
    return Array(dev, a.ptr, a.shape, a.dtype, a.strides, a, "fake")


def build(fn: Any, args: tuple, drv: FakeDriver | None = None, treedef: Any = "*",
           unflatten: Any = tree_unflatten) -> tuple:
    """(launcher, driver, launches recorded) of ``fn`` lowered for ``args`` (fake arrays
    adopted on the abstract device, Python scalars), keyed as fast_key keys them."""
    dev = abstract()
    flat = tuple(adopted(dev, a) if isinstance(a, FakeArray) else a for a in args)
    lowered = fuse(fn).lower(*flat)
    kernels, derive, specs = launch_plan(lowered)
    drv = drv or FakeDriver({name: len(a) + 3 for name, *_, a in kernels})
    parts = fast_key(args, frozenset())
    assert parts == fast_key(flat, frozenset())  # raw and adopted arrays key alike
    recorded: list[int] = []
    outputs = [OutSpec("node", i) for i in range(len(specs["output"]))]
    guarded = launch.launcher(
        parts, [launch.Kernel(name, grid, block, a, gs) for name, grid, block, gs, a in kernels],
        lowered.graph.params, derive, {}, specs, outputs, treedef, unflatten, MISS, 5,
        drv, recorded.append)
    return guarded, drv, recorded
