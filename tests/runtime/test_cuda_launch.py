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
from typing import Any

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (the fusejit[cuda] extra) "
                    "is not installed")

from cuda_doubles import (
    F32,
    MISS,
    OK,
    CUresult,
    FakeArray,
    FakeDriver,
    FakeLibrary,
    abstract,
    adopted,
    build,
    part_fake,
)

from fusejit import fuse
from fusejit.compile.signature import fast_key
from fusejit.frontend.pytree import tree_unflatten
from fusejit.runtime import backend
from fusejit.runtime.cuda import launch
from fusejit.runtime.cuda.executable import launch_plan
from fusejit.runtime.executable import OutSpec


@pytest.fixture
def fake(monkeypatch):
    lib = FakeLibrary()
    monkeypatch.setitem(launch.LIBRARIES, "fake", lib)
    monkeypatch.setitem(backend.FAST_PARTS, FakeArray, part_fake)
    return lib


def _sliced(x, y, a):
    return x[:, :16] * a + y


def test_a_launch_gets_aligned_pointers_offsets_scalars_and_the_callers_stream(fake) -> None:
    x = FakeArray(0x30040, (64, 32), strides=(256, 8))  # strided, 64 bytes off the alignment
    y = FakeArray(0x40000, (64, 16))
    guarded, drv, recorded = build(_sliced, (x, y, 2.0))
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
    guarded, drv, _ = build(_sliced, (x, y, 2))
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
        guarded, drv, _ = build(lambda a, b: a + b, (y, z))
        args = (y, y)
    assert guarded(args) is MISS
    assert drv.launches == [] and fake.allocated == []


def test_fast_key_parts_of_raw_and_adopted_arrays(fake) -> None:
    x, y = FakeArray(0x30040, (8,)), FakeArray(0x40000, (8,))
    dev = abstract()
    raw = fast_key((x, y, 1.5), frozenset())
    assert raw == fast_key((adopted(dev, x), adopted(dev, y), 1.5), frozenset())
    assert raw[0] == ("fake", F32, (8,), (4,), True, 0) and raw[1][4] is False
    assert fast_key((x, x), frozenset()) is None  # the same array twice: the full path
    assert fast_key((adopted(dev, x), adopted(dev, x)), frozenset()) is None


def test_signatures_the_fast_path_does_not_cover(fake) -> None:
    x, y = FakeArray(0x30000, (8,)), FakeArray(0x40000, (8,))
    dev = abstract()
    lowered = fuse(lambda a, b: a + b).lower(adopted(dev, x), adopted(dev, y))
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
    guarded, drv, _ = build(lambda a: a * 2, (x,))
    guarded((x,))
    assert drv.pushed == []  # the device's context is current already: nothing to do
    drv.current = 9  # another device's (or none)
    guarded((x,))
    assert drv.pushed == [5, "pop"] and len(drv.launches) == 2


def test_a_failed_launch_raises_and_releases(fake) -> None:
    x = FakeArray(0x30000, (1000,))
    guarded, drv, _ = build(lambda a: a * 2, (x,))
    drv.result = CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    with pytest.raises(RuntimeError, match="OUT_OF_RESOURCES"):
        guarded((x,))
    drv.result, drv.current = OK, 9
    guarded((x,))  # (the lock was released, the context popped)
    assert drv.pushed == [5, "pop"]


def test_several_results_and_kernels(fake) -> None:
    x = FakeArray(0x30000, (300, 100))
    guarded, drv, recorded = build(
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
