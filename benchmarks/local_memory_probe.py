"""Can an NVIDIA OpenCL kernel take more than 48 KiB of local memory?

CL_DEVICE_LOCAL_MEM_SIZE says 48 KiB, and a ``__local`` argument past it fails to launch
(benchmarks/wgmma_probe.py), while a Hopper multiprocessor has 228 KiB and CUDA opts a kernel
in to 227 KiB. The driver exports ``clSetKernelAttributeNV`` / ``clGetKernelAttributeNV``
(extension ``cl_nv_kernel_attribute``, declared in the CUDA toolkit's CL/cl_ext.h with one
attribute, ``CL_KERNEL_PREFERRED_LOCAL_MEMORY_SIZE_NV`` = 0) and answers the device query
``CL_DEVICE_MAX_LOCAL_MEMORY_PER_SM_NV`` (0x400B). This probe reads both, sets the attribute
on a kernel with a ``__local`` argument, and launches it with 48 to 227 KiB, checking each
result in NumPy.

    python benchmarks/local_memory_probe.py      (prints one JSON object)

Measured on an H200 (driver 580.159.04), 2026-12-02: MAX_LOCAL_MEMORY_PER_SM_NV is 233472
(228 KiB), but the attribute is the multiprocessor's shared-memory carveout in percent, not a
per-kernel opt-in: 100 is taken and read back, 227 KiB (as a size_t or a cl_uint) is refused
with CL_INVALID_VALUE (-50). With or without it, 32 and 47 KiB ``__local`` arguments launch
and compute right, and 48 KiB and more (64, 100, 227) fail with CL_OUT_OF_RESOURCES. So 48 KiB
a work-group (static and ``__local`` arguments together, less what the kernel declares) is the
ceiling from OpenCL.
"""

from __future__ import annotations

import ctypes as C
import json

import numpy as np
import pyopencl as cl
from cuda_interop_probe import cl_ext, opencl
from wgmma_probe import LOCAL_ARG as SOURCE  # (the same kernel: fill, barrier, read back)

PREFERRED_LOCAL_MEMORY_SIZE_NV = 0
MAX_LOCAL_MEMORY_PER_SM_NV = 0x400B


def main() -> None:
    out: dict[str, object] = {}
    lib = opencl()
    plat = next(p for p in cl.get_platforms() if "NVIDIA" in p.name)
    dev = plat.get_devices()[0]
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx)
    val = C.c_ulonglong(0)
    size = C.c_size_t(0)
    r = lib.clGetDeviceInfo(C.c_void_p(dev.int_ptr), C.c_uint(MAX_LOCAL_MEMORY_PER_SM_NV),
                            C.c_size_t(8), C.byref(val), C.byref(size))
    out["MAX_LOCAL_MEMORY_PER_SM_NV"] = (r, val.value, size.value)
    out["LOCAL_MEM_SIZE"] = dev.local_mem_size
    set_attr = cl_ext(plat, b"clSetKernelAttributeNV", C.c_int, C.c_void_p, C.c_void_p,
                      C.c_int, C.c_size_t, C.c_void_p)
    get_attr = cl_ext(plat, b"clGetKernelAttributeNV", C.c_int, C.c_void_p, C.c_void_p, C.c_int,
                      C.c_size_t, C.c_void_p, C.POINTER(C.c_size_t))
    out["functions"] = (set_attr is not None, get_attr is not None)
    if set_attr is None or get_attr is None:
        print(json.dumps(out))
        return
    prg = cl.Program(ctx, SOURCE).build()
    mf = cl.mem_flags
    o = cl.Buffer(ctx, mf.READ_WRITE, 256 * 4)

    def read(kern: cl.Kernel) -> tuple[int, int, int]:
        v, s = C.c_ulonglong(0), C.c_size_t(0)
        r = get_attr(C.c_void_p(kern.int_ptr), C.c_void_p(dev.int_ptr),
                     PREFERRED_LOCAL_MEMORY_SIZE_NV, 8, C.byref(v), C.byref(s))
        return r, v.value, s.value

    def launch(kern: cl.Kernel, kib: int) -> str:
        n = kib * 256
        try:
            kern(q, (256,), (256,), o, cl.LocalMemory(n * 4), np.int32(n))
            got = np.empty(256, np.float32)
            cl.enqueue_copy(q, got, o)
            q.finish()
        except cl.Error as exc:
            return f"{type(exc).__name__}: {str(exc)[:120]}"
        want = np.array([sum(float(n - 1 - i) for i in range(t, n, 256)) for t in range(256)],
                        np.float32)
        return "ok" if np.allclose(got, want, rtol=1e-5) else "wrong"

    sizes = (32, 47, 48, 64, 100, 227)
    base = cl.Kernel(prg, "k")
    out["attr_default"] = read(base)
    out["no_attr"] = {k: launch(base, k) for k in sizes}
    for label, width, value in (("size_t 227KiB", 8, 227 * 1024), ("uint 227KiB", 4, 227 * 1024),
                                ("size_t 100", 8, 100)):
        kern = cl.Kernel(prg, "k")
        buf = (C.c_ulonglong if width == 8 else C.c_uint)(value)
        r = set_attr(C.c_void_p(kern.int_ptr), C.c_void_p(dev.int_ptr),
                     PREFERRED_LOCAL_MEMORY_SIZE_NV, width, C.byref(buf))
        out[label] = {"set": r, "read": read(kern), **{f"{k}KiB": launch(kern, k)
                                                      for k in sizes}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
