"""The CUDA fast path's generated launcher (runtime/cuda/launch.py) without a GPU: signatures
lowered for the abstract CUDA device, a stand-in library whose arrays are a pointer, a dtype,
a shape, byte strides and a device (as a torch tensor or a CuPy array reads), and a test
double of the driver that reads the kernel arguments back through the pointer array
``cuLaunchKernel`` gets. What runs is fusejit's: the launch plan, the argument slots, the
offsets, the guards and their misses, the context switch, the fast-path key of raw and
adopted arrays. tests/runtime/test_cuda_calls.py runs the same path on a GPU with torch and
CuPy."""

from __future__ import annotations

import ctypes
import enum
from typing import Any

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the fusejit[cuda] extra) "
                    "is not installed")

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


@pytest.fixture
def fake(monkeypatch):
    lib = FakeLibrary()
    monkeypatch.setitem(launch.LIBRARIES, "fake", lib)
    monkeypatch.setitem(backend.FAST_PARTS, FakeArray, part_fake)
    return lib


def _abstract() -> CUDADevice:
    """An abstract device (lowering only, on any machine)."""
    dev = CUDADevice(None, "sm_90a")
    dev.fusejit_backend = backend.backend_named("cuda")
    return dev


def _adopted(dev: CUDADevice, a: FakeArray) -> Array:
    return Array(dev, a.ptr, a.shape, a.dtype, a.strides, a, "fake")


def _build(fn: Any, args: tuple, drv: FakeDriver | None = None, treedef: Any = "*",
           unflatten: Any = tree_unflatten) -> tuple:
    """(launcher, driver, launches recorded) of ``fn`` lowered for ``args`` (fake arrays
    adopted on the abstract device, Python scalars), keyed as fast_key keys them."""
    dev = _abstract()
    flat = tuple(_adopted(dev, a) if isinstance(a, FakeArray) else a for a in args)
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


def _sliced(x, y, a):
    return x[:, :16] * a + y


def test_a_launch_gets_aligned_pointers_offsets_scalars_and_the_callers_stream(fake) -> None:
    x = FakeArray(0x30040, (64, 32), strides=(256, 8))  # strided, 64 bytes off the alignment
    y = FakeArray(0x40000, (64, 16))
    guarded, drv, recorded = _build(_sliced, (x, y, 2.0))
    out = guarded((FakeArray(0x50080, (64, 32), strides=(256, 8)), y, 3.0))
    assert out is fake.allocated[-1] and out.shape == (64, 16) and out.dtype == F32
    (f, grid, block, shared, stream, values, extra), = drv.launches
    assert (f, grid, block, shared, stream, extra) == ("fj_k0", (4, 1, 1), (256, 1, 1), 0, 7, 0)
    three = int.from_bytes(np.float32(3.0).tobytes(), "little")
    # p0 (aligned down), off0 (elements), the scalar as float32, p1, out0, the NDRange
    assert values == [0x50000, 0x80 // 4, three, 0x40000, out.ptr, 1024, 1, 1]
    assert recorded == [1] and drv.pushed == []
    fake.handle = 0  # the library's stream changed (0: the legacy default stream)
    guarded((x, y, 2.0))
    assert drv.launches[-1][4] == 0 and drv.launches[-1][5][1] == 0x40 // 4


@pytest.mark.parametrize("change", [
    "dtype", "shape", "strides", "device", "aligned", "unaligned", "scalar type", "huge int",
    "same array twice", "arity", "a foreign object"])
def test_any_mismatch_misses_and_launches_nothing(fake, change) -> None:
    x = FakeArray(0x30040, (64, 32), strides=(256, 8))
    y = FakeArray(0x40000, (64, 16))
    guarded, drv, _ = _build(_sliced, (x, y, 2))
    args = {"dtype": (x, FakeArray(0x40000, (64, 16), np.float64), 2),
            "shape": (x, FakeArray(0x40000, (64, 17)), 2),
            "strides": (x, FakeArray(0x40000, (64, 16), strides=(128, 4)), 2),
            "device": (x, FakeArray(0x40000, (64, 16), device=1), 2),
            "aligned": (FakeArray(0x30000, (64, 32), strides=(256, 8)), y, 2),
            "unaligned": (x, FakeArray(0x40010, (64, 16)), 2),
            "scalar type": (x, y, 2.0), "huge int": (x, y, 2**63),
            "arity": (x, y), "a foreign object": (x, object(), 2)}.get(change)
    if change == "same array twice":
        z = FakeArray(0x40000, (64, 16))
        guarded, drv, _ = _build(lambda a, b: a + b, (y, z))
        args = (y, y)
    assert guarded(args) is MISS
    assert drv.launches == [] and fake.allocated == []


def test_fast_key_parts_of_raw_and_adopted_arrays(fake) -> None:
    x, y = FakeArray(0x30040, (8,)), FakeArray(0x40000, (8,))
    dev = _abstract()
    raw = fast_key((x, y, 1.5), frozenset())
    assert raw == fast_key((_adopted(dev, x), _adopted(dev, y), 1.5), frozenset())
    assert raw[0] == ("fake", F32, (8,), (4,), True, 0) and raw[1][4] is False
    assert fast_key((x, x), frozenset()) is None  # the same array twice: the full path
    assert fast_key((_adopted(dev, x), _adopted(dev, x)), frozenset()) is None


def test_signatures_the_fast_path_does_not_cover(fake) -> None:
    x, y = FakeArray(0x30000, (8,)), FakeArray(0x40000, (8,))
    dev = _abstract()
    lowered = fuse(lambda a, b: a + b).lower(_adopted(dev, x), _adopted(dev, y))
    kernels, derive, specs = launch_plan(lowered)
    plan = [launch.Kernel(name, grid, block, a, gs) for name, grid, block, gs, a in kernels]

    def build(parts: tuple) -> Any:
        return launch.launcher(parts, plan, lowered.graph.params, derive, {}, specs,
                               [OutSpec("node", 0)], "*", tree_unflatten, MISS, 5,
                               FakeDriver({}), print)

    other = FakeArray(0x40000, (8,), device=1)
    assert build((part_fake(x), part_fake(other))) is None  # two devices: the full path names it
    assert build((part_fake(x), ("host", F32, (8,), True))) is None  # a NumPy argument
    assert build((part_fake(x), part_fake(y))) is not None


def test_another_current_context_is_swapped_for_the_launch(fake) -> None:
    x = FakeArray(0x30000, (1000,))
    guarded, drv, _ = _build(lambda a: a * 2, (x,))
    guarded((x,))
    assert drv.pushed == []  # the device's context is current already: nothing to do
    drv.current = 9  # another device's (or none)
    guarded((x,))
    assert drv.pushed == [5, "pop"] and len(drv.launches) == 2


def test_a_failed_launch_raises_and_releases(fake) -> None:
    x = FakeArray(0x30000, (1000,))
    guarded, drv, _ = _build(lambda a: a * 2, (x,))
    drv.result = CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    with pytest.raises(RuntimeError, match="OUT_OF_RESOURCES"):
        guarded((x,))
    drv.result, drv.current = OK, 9
    guarded((x,))  # (the lock was released, the context popped)
    assert drv.pushed == [5, "pop"]


def test_several_results_and_kernels(fake) -> None:
    x = FakeArray(0x30000, (300, 100))
    guarded, drv, recorded = _build(
        lambda a: (a * 2, (a - a.max(-1, keepdims=True)).sum(0)), (x,), treedef="pair",
        unflatten=lambda treedef, leaves: (treedef, *leaves))
    treedef, *got = guarded((x,))
    assert treedef == "pair" and [o.shape for o in got] == [(300, 100), (100,)]
    assert len(recorded) == len(drv.launches) >= 1
    written = {v for launch_ in drv.launches for v in launch_[5]}
    assert {o.ptr for o in got} <= written and 0x30000 in written


def test_slots_hold_by_value_arguments_as_the_kernel_reads_them() -> None:
    assert launch.slot(np.float32(1.0)) == 0x3F80_0000
    assert launch.slot(np.int32(-1)) == 0xFFFF_FFFF
    assert launch.slot(np.uint64(2**64 - 1)) == 2**64 - 1
    assert launch.slot(np.float16(1.0)) == 0x3C00
    with pytest.raises(ValueError, match="wider than 8 bytes"):
        launch.slot(np.complex128(1))
    slots = launch.Slots([1, 2, 3])
    slots.values[1] = 42
    pointers = (ctypes.c_void_p * 3).from_address(slots.address)
    assert [ctypes.c_uint64.from_address(p).value for p in pointers] == [1, 42, 3]
