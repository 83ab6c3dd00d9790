"""Kernels made without PyOpenCL's invoker (runtime/opencl/cl_kernels.py) bind and launch exactly as
``cl.Kernel``'s: every kind of kernel argument, through every way of setting it."""

from __future__ import annotations

import threading

import numpy as np
import pyopencl as cl
import pyopencl.invoker
import pytest

from fusejit.runtime.opencl import scalar_args
from fusejit.runtime.opencl.cl_kernels import new_kernel

_SCALARS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
            np.float32, np.float64]
_CL_TYPE = {np.int8: "char", np.uint8: "uchar", np.int16: "short", np.uint16: "ushort",
            np.int32: "int", np.uint32: "uint", np.int64: "long", np.uint64: "ulong",
            np.float32: "float", np.float64: "double"}
_VALUES = {np.int8: -100, np.uint8: 200, np.int16: -30000, np.uint16: 60000,
           np.int32: -2**31 + 3, np.uint32: 2**32 - 5, np.int64: -2**62 - 7,
           np.uint64: 2**64 - 9, np.float32: -1.5e-3, np.float64: 1.0 / 3.0}


def _source(types: list[type]) -> str:
    params = ", ".join(f"const {_CL_TYPE[t]} s{i}" for i, t in enumerate(types))
    # each work-item stores every scalar's bits (as a double for the float types), and the
    # sum of its work-group's ids through local memory
    stores = "\n".join(f"    out[gid * {len(types) + 1} + {i}] = (double)s{i};"
                       for i in range(len(types)))
    return f"""
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void probe(__global double *out, __local int *scratch, {params},
                    __global const int *inp)
{{
    const int gid = get_global_id(0), lid = get_local_id(0);
    scratch[lid] = inp[gid];
    barrier(CLK_LOCAL_MEM_FENCE);
{stores}
    out[gid * {len(types) + 1} + {len(types)}] = (double)(scratch[0] + scratch[3]);
}}
"""


@pytest.fixture(scope="module")
def probe(queue, has_fp64):
    if not has_fp64:
        pytest.skip("the probe kernel stores doubles: the device has no cl_khr_fp64")
    types = list(_SCALARS)
    program = cl.Program(queue.context, _source(types)).build()
    return program, types


def _launch(queue, knl, how: str, types: list[type]) -> np.ndarray:
    n, local = 8, 4
    out = np.zeros(n * (len(types) + 1))
    inp = np.arange(n, dtype=np.int32) * 7
    mf = cl.mem_flags
    out_buf = cl.Buffer(queue.context, mf.READ_WRITE, out.nbytes)
    in_buf = cl.Buffer(queue.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=inp)
    scratch = cl.LocalMemory(local * 4)
    scalars = [t(_VALUES[t]) for t in types]
    args = [out_buf, scratch, *scalars, in_buf]
    if how == "set_arg":
        for i, a in enumerate(args):
            knl.set_arg(i, a)
        cl.enqueue_nd_range_kernel(queue, knl, (n,), (local,))
    elif how == "set_arg_buf":  # fusejit's launchers: scalars as packed bytes
        for i, a in enumerate(args):
            if isinstance(a, np.generic):
                scalar_args.bind(knl, i, scalar_args.packer(a.dtype)(a))
            else:
                knl.set_arg(i, a)
        cl.enqueue_nd_range_kernel(queue, knl, (n,), (local,))
    elif how == "set_args":
        knl.set_args(*args)
        cl.enqueue_nd_range_kernel(queue, knl, (n,), (local,))
    elif how == "call":
        knl(queue, (n,), (local,), *args)
    elif how == "typed_call":  # PyOpenCL's typed invoker, installed after the fact
        knl.set_scalar_arg_dtypes([None, None, *types, None])
        knl(queue, (n,), (local,), out_buf, scratch, *[_VALUES[t] for t in types], in_buf)
    cl.enqueue_copy(queue, out, out_buf)
    queue.finish()
    return out


@pytest.mark.parametrize("how", ["set_arg", "set_arg_buf", "set_args", "call", "typed_call"])
def test_same_results_as_pyopencl_kernel(queue, probe, how):
    program, types = probe
    want = _launch(queue, cl.Kernel(program, "probe"), how, types)
    got = _launch(queue, new_kernel(program, "probe"), how, types)
    np.testing.assert_array_equal(got, want)
    # and the values are the arguments: each scalar, then 7 * (the group's first id + 3)
    rows = got.reshape(8, len(types) + 1)
    np.testing.assert_array_equal(rows[:, :-1], [[float(t(_VALUES[t])) for t in types]] * 8)
    np.testing.assert_array_equal(rows[:, -1], [21.0] * 4 + [7.0 * (4 + 7)] * 4)


def test_invoker_deferred_until_used_and_restored(queue, monkeypatch):
    program = cl.Program(queue.context, "__kernel void one(__global int *x) { x[0] = 1; }"
                         ).build()
    original = pyopencl.invoker.generate_enqueue_and_set_args
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(pyopencl.invoker, "generate_enqueue_and_set_args", counting)
    knl = new_kernel(program, "one")
    assert calls == []  # nothing generated for a kernel fusejit binds itself
    assert pyopencl.invoker.generate_enqueue_and_set_args is counting  # put back
    buf = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4)
    knl(queue, (1,), None, buf)
    knl(queue, (1,), None, buf)
    assert calls == ["one"]  # generated at the first call, then installed on the kernel
    out = np.zeros(1, np.int32)
    cl.enqueue_copy(queue, out, buf)
    assert out[0] == 1
    cl.Kernel(program, "one")
    assert calls == ["one", "one"]  # other kernels keep PyOpenCL's own behaviour


def test_threads_never_leave_the_stand_in_behind(queue):
    program = cl.Program(queue.context, "__kernel void one(__global int *x) { x[0] = 1; }"
                         ).build()
    original = pyopencl.invoker.generate_enqueue_and_set_args
    errors = []

    def make():
        try:
            for _ in range(50):
                new_kernel(program, "one")
                cl.Kernel(program, "one")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert pyopencl.invoker.generate_enqueue_and_set_args is original

