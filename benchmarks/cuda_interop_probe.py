"""Can kernels launched through the CUDA driver API share memory with NVIDIA's OpenCL, and
what does a hand-over between the two cost?

NVIDIA's OpenCL gives a work-group 48 KiB of local memory (benchmarks/local_memory_probe.py) and
launches no thread-block clusters (benchmarks/cluster_probe.py); those two limits bound the
tensor-core GEMM (fusejit/codegen/gemm/wgmma.py). The CUDA driver API has neither (``cuFuncSetAttribute``
opts a kernel in to 227 KiB of dynamic shared memory, ``cuLaunchKernelEx`` launches clusters, and
``cuTensorMapEncodeTiled`` makes the bulk tensor copies' maps). So, through ctypes and
``libcuda.so.1``:

1. is an OpenCL buffer's device address (a kernel writes ``(ulong)p``) known to CUDA?
2. CUDA memory (the VMM API, exported as an opaque file descriptor) imported into OpenCL through
   ``cl_khr_external_memory_opaque_fd``: OpenCL writes it, a PTX kernel with 200 KiB of dynamic
   shared memory reverses each block's slice and adds one, OpenCL reads the result (checked in
   NumPy);
3. a cluster launch over it (cluster 2, ``%cluster_nctarank``) and a tensor map of it;
4. the hand-over's cost, each step alone and alternating (host-synchronized);
5. the hand-over on the GPU alone, on OpenCL semaphores exported to CUDA;
6. the PTX NVIDIA's OpenCL compiler returns, loaded into CUDA (``cuModuleLoadDataEx``).

    python benchmarks/cuda_interop_probe.py      (prints one JSON object)

Measured on an H200 (driver 580.159.04, OpenCL 3.0 CUDA 13.0.98), 2026-12-02:

1. no: ``cuPointerGetAttribute`` answers CUDA_ERROR_INVALID_VALUE and no CUDA context is
   current after OpenCL's work (a first version of this probe ran the kernel below on that
   address in the primary context: CUDA_ERROR_ILLEGAL_ADDRESS);
2. yes: imported, acquired and released without error, and the 200 KiB kernel's result is exact;
3. yes: ranks 0, 1 of 2 in every cluster; ``cuTensorMapEncodeTiled`` succeeds;
4. a tiny OpenCL kernel + finish 12-15 us, the CUDA kernel + synchronize 49-53 us, acquire +
   release + finish 7 us (35-59 before the extension functions were looked up once rather
   than per call), but the two alternating 330-339 us (334 with acquire and release): about
   270 us a round trip for switching between the two contexts;
5. not possible: the device lists no exportable semaphore handle types and
   ``clCreateSemaphoreWithPropertiesKHR`` answers CL_INVALID_PROPERTY (-64) for an exportable
   opaque fd, with or without a device list; CUDA imports semaphores but makes none to export.

So the memory can be shared, but a GEMM launched in CUDA between OpenCL kernels pays about a
quarter of a millisecond a round trip, half of what the float16 4096^3 product takes on the
wgmma kernel (0.52 ms): a kernel as fast as cuBLAS's (0.26 ms) would only break even. It pays
only where a whole program runs in one context: an execution target on the CUDA driver,
launching and allocating through CUDA. The PTX NVIDIA's OpenCL compiler returns loads there
after two edits (6): ``cuModuleLoadDataEx`` rejects it as it is, without
``texmode_independent`` and with ``.visible`` entries (CUDA_ERROR_INVALID_IMAGE, empty log), and
takes it once the parameters' ``.ptr .global .align N`` attributes go too; a launch then gives
the right ``get_global_id`` and ``get_local_size`` (``%envreg3``, the global offset, reads 0)
but a garbage ``get_group_id`` (58995400 + the group: ``%envreg0``, set by the OpenCL runtime),
so the environment registers would need rewriting too; ``__local`` arguments are ``.ptr
.shared`` parameters.
"""

from __future__ import annotations

import ctypes as C
import json
import re
import time
from functools import cache

import numpy as np
import pyopencl as cl

SMEM = 200 * 1024
N = SMEM // 4  # floats a block reverses

PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.extern .shared .align 16 .b8 smem[];

.visible .entry rev(.param .u64 pin, .param .u64 pout, .param .u32 pn)
{
  .reg .pred %p<2>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<12>;
  .reg .f32 %f<2>;
  ld.param.u64 %rd1, [pin];
  ld.param.u64 %rd2, [pout];
  ld.param.u32 %r1, [pn];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %ctaid.x;
  mov.u64 %rd9, smem;
  cvt.u32.u64 %r10, %rd9;
  mul.wide.u32 %rd3, %r4, %r1;
  shl.b64 %rd3, %rd3, 2;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd5, %rd2, %rd3;
  mov.u32 %r5, %r2;
L1:
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra L2;
  mul.wide.u32 %rd6, %r5, 4;
  add.s64 %rd7, %rd4, %rd6;
  ld.global.f32 %f1, [%rd7];
  add.f32 %f1, %f1, 0f3F800000;
  shl.b32 %r6, %r5, 2;
  add.u32 %r7, %r10, %r6;
  st.shared.f32 [%r7], %f1;
  add.u32 %r5, %r5, %r3;
  bra L1;
L2:
  bar.sync 0;
  mov.u32 %r5, %r2;
L3:
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra L4;
  sub.u32 %r8, %r1, %r5;
  sub.u32 %r8, %r8, 1;
  shl.b32 %r6, %r8, 2;
  add.u32 %r7, %r10, %r6;
  ld.shared.f32 %f1, [%r7];
  mul.wide.u32 %rd6, %r5, 4;
  add.s64 %rd7, %rd5, %rd6;
  st.global.f32 [%rd7], %f1;
  add.u32 %r5, %r5, %r3;
  bra L3;
L4:
  ret;
}

.visible .entry ranks(.param .u64 pout)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [pout];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %cluster_ctarank;
  mov.u32 %r3, %cluster_nctarank;
  mul.wide.u32 %rd2, %r1, 8;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v2.u32 [%rd3], {%r2, %r3};
  ret;
}
"""

OPENCL_KERNEL = """
__kernel void ids(__global int *o, __local int *scratch) {
    const int g = get_global_id(0);
    scratch[get_local_id(0)] = g;
    barrier(CLK_LOCAL_MEM_FENCE);
    o[3 * g] = scratch[get_local_id(0)]; o[3 * g + 1] = get_group_id(0);
    o[3 * g + 2] = get_local_size(0);
}
"""

VA = "__kernel void va(__global ulong *o, __global float *p) { o[0] = (ulong)p; }"


class LaunchAttr(C.Structure):  # CUlaunchAttribute: id, padding, a 64-byte value union
    _fields_ = [("id", C.c_int), ("pad", C.c_char * 4), ("value", C.c_uint * 16)]


class LaunchConfig(C.Structure):
    _fields_ = [("grid", C.c_uint * 3), ("block", C.c_uint * 3), ("smem", C.c_uint),
                ("stream", C.c_void_p), ("attrs", C.POINTER(LaunchAttr)), ("nattrs", C.c_uint)]


class AllocProp(C.Structure):  # CUmemAllocationProp
    _fields_ = [("type", C.c_int), ("handles", C.c_int), ("loc_type", C.c_int),
                ("loc_id", C.c_int), ("win32", C.c_void_p), ("flags", C.c_ubyte * 8)]


class AccessDesc(C.Structure):  # CUmemAccessDesc
    _fields_ = [("loc_type", C.c_int), ("loc_id", C.c_int), ("flags", C.c_int)]


class Cuda:
    def __init__(self) -> None:
        self.lib = C.CDLL("libcuda.so.1")

    def __call__(self, name: str, *args: object) -> str:
        r = getattr(self.lib, name)(*args)
        s = C.c_char_p()
        self.lib.cuGetErrorName(r, C.byref(s))
        return s.value.decode() if s.value else str(r)


def exported(cu: Cuda, size: int, out: dict, tag: str) -> tuple[int, int]:
    """Device memory of ``size`` bytes from CUDA's VMM API, mapped in the current context and
    exported as an opaque file descriptor: (its CUDA address, the descriptor)."""
    prop = AllocProp(type=1, handles=1, loc_type=1, loc_id=0)  # pinned, POSIX fd, device 0
    gran = C.c_size_t()
    cu("cuMemGetAllocationGranularity", C.byref(gran), C.byref(prop), 0)
    size = -(-size // gran.value) * gran.value
    handle, fd, ptr = C.c_ulonglong(), C.c_int(-1), C.c_ulonglong()
    out[f"{tag}_cuMemCreate"] = cu("cuMemCreate", C.byref(handle), C.c_size_t(size),
                                   C.byref(prop), C.c_ulonglong(0))
    out[f"{tag}_export"] = cu("cuMemExportToShareableHandle", C.byref(fd), handle, 1,
                              C.c_ulonglong(0))
    cu("cuMemAddressReserve", C.byref(ptr), C.c_size_t(size), C.c_size_t(0),
       C.c_ulonglong(0), C.c_ulonglong(0))
    cu("cuMemMap", ptr, C.c_size_t(size), C.c_size_t(0), handle, C.c_ulonglong(0))
    desc = AccessDesc(1, 0, 3)  # device 0, read and write
    out[f"{tag}_cuMemSetAccess"] = cu("cuMemSetAccess", ptr, C.c_size_t(size), C.byref(desc),
                                      C.c_size_t(1))
    return ptr.value, fd.value


@cache
def opencl() -> C.CDLL:
    return C.CDLL("libOpenCL.so.1")


@cache
def cl_ext(plat: cl.Platform, name: bytes, restype: object, *argtypes: object) -> object:
    """The extension function ``name`` of ``plat``, looked up once (None: the platform has
    none of that name)."""
    get = opencl().clGetExtensionFunctionAddressForPlatform
    get.restype = C.c_void_p
    address = get(C.c_void_p(plat.int_ptr), name)
    return C.CFUNCTYPE(restype, *argtypes)(address) if address else None


def imported(ctx: cl.Context, plat: cl.Platform, fd: int, size: int, out: dict,
             tag: str) -> cl.Buffer | None:
    """An OpenCL buffer over an exported descriptor (cl_khr_external_memory_opaque_fd)."""
    lib = opencl()
    lib.clCreateBufferWithProperties.restype = C.c_void_p
    props = (C.c_ulonglong * 3)(0x2060, fd, 0)  # CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR
    err = C.c_int(0)
    mem = lib.clCreateBufferWithProperties(C.c_void_p(ctx.int_ptr), props,
                                           C.c_ulonglong(1), C.c_size_t(size), None,
                                           C.byref(err))  # CL_MEM_READ_WRITE
    out[f"{tag}_clCreateBufferWithProperties"] = err.value
    return cl.Buffer.from_int_ptr(mem, retain=False) if mem and not err.value else None


def acquire(plat: cl.Platform, q: cl.CommandQueue, bufs: list[cl.Buffer], release: bool) -> int:
    name = b"clEnqueueReleaseExternalMemObjectsKHR" if release else \
        b"clEnqueueAcquireExternalMemObjectsKHR"
    fn = cl_ext(plat, name, C.c_int, C.c_void_p, C.c_uint, C.c_void_p, C.c_uint, C.c_void_p,
                C.c_void_p)
    mems = (C.c_void_p * len(bufs))(*(b.int_ptr for b in bufs))
    return fn(C.c_void_p(q.int_ptr), len(bufs), mems, 0, None, None)


def semaphore(ctx: cl.Context, plat: cl.Platform, dev: cl.Device,
              out: dict) -> tuple[int, int] | None:
    """A binary OpenCL semaphore exportable as an opaque fd: (the semaphore, its fd)."""
    lib = opencl()
    create = cl_ext(plat, b"clCreateSemaphoreWithPropertiesKHR", C.c_void_p, C.c_void_p,
                    C.c_void_p, C.POINTER(C.c_int))
    handle = cl_ext(plat, b"clGetSemaphoreHandleForTypeKHR", C.c_int, C.c_void_p, C.c_void_p,
                    C.c_uint, C.c_size_t, C.c_void_p, C.c_void_p)
    if "semaphore_export_types" not in out:
        for key, what in ((0x204C, "semaphore_types"), (0x204E, "semaphore_export_types")):
            vals, n = (C.c_uint * 8)(), C.c_size_t()
            r = lib.clGetDeviceInfo(C.c_void_p(dev.int_ptr), C.c_uint(key), C.c_size_t(32),
                                    vals, C.byref(n))
            out[what] = (r, list(vals)[:n.value // 4])
    # binary; exported as an opaque fd; (second form) on this device
    err = C.c_int(0)
    sem = None
    for props in ((0x203D, 1, 0x203F, 0x2055, 0, 0),
                  (0x203D, 1, 0x203F, 0x2055, 0, 0x2051, dev.int_ptr, 0, 0)):
        arr = (C.c_ulonglong * len(props))(*props)
        sem = create(C.c_void_p(ctx.int_ptr), arr, C.byref(err))
        out.setdefault("clCreateSemaphoreWithPropertiesKHR", []).append(err.value)
        if sem and not err.value:
            break
    if not sem or err.value:
        return None
    fd = C.c_int(-1)
    r = handle(C.c_void_p(sem), C.c_void_p(dev.int_ptr), 0x2055, 4, C.byref(fd), None)
    out.setdefault("clGetSemaphoreHandleForTypeKHR", []).append(r)
    return (sem, fd.value) if r == 0 else None


def cuda_semaphore(cu: Cuda, fd: int, out: dict) -> int:
    """The CUDA side of an exported semaphore (CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD)."""
    desc = (C.c_ubyte * 96)()
    C.c_int.from_buffer(desc, 0).value = 1
    C.c_int.from_buffer(desc, 8).value = fd
    ext = C.c_void_p()
    out.setdefault("cuImportExternalSemaphore", []).append(
        cu("cuImportExternalSemaphore", C.byref(ext), C.byref(desc)))
    return ext.value or 0


def main() -> None:
    out: dict[str, object] = {}
    plat = next(p for p in cl.get_platforms() if "NVIDIA" in p.name)
    dev = plat.get_devices()[0]
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx)
    blocks = 4
    host = np.random.default_rng(0).standard_normal(blocks * N).astype(np.float32)
    want = (host.reshape(blocks, N)[:, ::-1] + 1).ravel()
    mf = cl.mem_flags
    probe = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host)
    va = cl.Kernel(cl.Program(ctx, VA).build(), "va")
    o = np.zeros(1, np.uint64)
    ob = cl.Buffer(ctx, mf.READ_WRITE, 8)
    va(q, (1,), (1,), ob, probe)
    cl.enqueue_copy(q, o, ob)
    q.finish()

    # 1. an OpenCL buffer's address, seen from CUDA
    cu = Cuda()
    out["cuInit"] = cu("cuInit", 0)
    cur, owner = C.c_void_p(), C.c_void_p()
    cu("cuCtxGetCurrent", C.byref(cur))
    out["current_context_after_opencl"] = hex(cur.value or 0)
    out["opencl_address_owner"] = cu("cuPointerGetAttribute", C.byref(owner), 1,
                                     C.c_ulonglong(int(o[0])))  # CU_POINTER_ATTRIBUTE_CONTEXT

    # 2. CUDA memory imported into OpenCL, a CUDA kernel with 200 KiB of shared memory over it
    cdev, prim = C.c_int(), C.c_void_p()
    cu("cuDeviceGet", C.byref(cdev), 0)
    cu("cuDevicePrimaryCtxRetain", C.byref(prim), cdev)
    cu("cuCtxPushCurrent", prim)
    (a_ptr, a_fd), (b_ptr, b_fd) = (exported(cu, host.nbytes, out, t) for t in "ab")
    a_buf = imported(ctx, plat, a_fd, host.nbytes, out, "a")
    b_buf = imported(ctx, plat, b_fd, host.nbytes, out, "b")
    if a_buf is None or b_buf is None:
        print(json.dumps(out))
        return
    out["acquire"] = acquire(plat, q, [a_buf, b_buf], False)
    cl.enqueue_copy(q, a_buf, host)
    out["release"] = acquire(plat, q, [a_buf, b_buf], True)
    q.finish()
    mod, fn, fr = C.c_void_p(), C.c_void_p(), C.c_void_p()
    out["cuModuleLoadData"] = cu("cuModuleLoadData", C.byref(mod), PTX.encode() + b"\0")
    cu("cuModuleGetFunction", C.byref(fn), mod, b"rev")
    cu("cuModuleGetFunction", C.byref(fr), mod, b"ranks")
    out["cuFuncSetAttribute_200KiB"] = cu("cuFuncSetAttribute", fn, 8, SMEM)
    a, b, n = C.c_ulonglong(a_ptr), C.c_ulonglong(b_ptr), C.c_uint(N)
    params = (C.c_void_p * 3)(*(C.cast(C.byref(x), C.c_void_p) for x in (a, b, n)))

    def launch() -> str:
        return cu("cuLaunchKernel", fn, blocks, 1, 1, 256, 1, 1, SMEM, None, params, None)

    out["cuLaunchKernel"] = launch()
    out["cuCtxSynchronize"] = cu("cuCtxSynchronize")
    got = np.full_like(host, np.nan)
    acquire(plat, q, [a_buf, b_buf], False)
    cl.enqueue_copy(q, got, b_buf)
    acquire(plat, q, [a_buf, b_buf], True)
    q.finish()
    out["shared_200KiB_result_ok"] = bool(np.array_equal(got, want))

    # 3. a cluster launch; a tensor map over the shared memory
    attr = LaunchAttr(id=4)  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value[0], attr.value[1], attr.value[2] = 2, 1, 1
    cfg = LaunchConfig((8, 1, 1), (128, 1, 1), 0, None, C.pointer(attr), 1)
    rp = C.c_ulonglong(b_ptr)
    p1 = (C.c_void_p * 1)(C.cast(C.byref(rp), C.c_void_p))
    out["cuLaunchKernelEx_cluster2"] = cu("cuLaunchKernelEx", C.byref(cfg), fr, p1, None)
    cu("cuCtxSynchronize")
    rk = np.zeros(16, np.uint32)
    acquire(plat, q, [b_buf], False)
    cl.enqueue_copy(q, rk, b_buf)
    acquire(plat, q, [b_buf], True)
    q.finish()
    out["cluster_ranks"] = rk.reshape(8, 2).tolist()
    tmap = (C.c_ubyte * 128)()
    dims = (C.c_ulonglong * 2)(N, blocks)
    strides = (C.c_ulonglong * 1)(N * 4)
    box, estr = (C.c_uint * 2)(32, 64), (C.c_uint * 2)(1, 1)
    out["cuTensorMapEncodeTiled"] = cu("cuTensorMapEncodeTiled", C.byref(tmap), 7, 2,
                                       C.c_void_p(a_ptr), dims, strides, box, estr, 0, 3, 2, 0)

    # 4. the cost of handing the memory between the two, each step alone and all together
    def median_us(step) -> float:
        for _ in range(5):
            step()
        times = []
        for _ in range(50):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        return round(1e6 * float(np.median(times)), 1)

    def opencl() -> None:
        va(q, (1,), (1,), ob, a_buf)
        q.finish()

    def cuda() -> None:
        launch()
        cu("cuCtxSynchronize")

    def handover() -> None:
        acquire(plat, q, [a_buf, b_buf], False)
        acquire(plat, q, [a_buf, b_buf], True)
        q.finish()

    def both() -> None:
        acquire(plat, q, [a_buf, b_buf], False)
        va(q, (1,), (1,), ob, a_buf)
        acquire(plat, q, [a_buf, b_buf], True)
        q.finish()
        cuda()

    def both_bare() -> None:
        opencl()
        cuda()

    out["us_median"] = {f.__name__: median_us(f) for f in (opencl, cuda, handover, both,
                                                         both_bare)}

    # 5. the hand-over on the GPU alone: two binary semaphores made by OpenCL and imported into
    # CUDA (cl_khr_external_semaphore_opaque_fd), work of both queued back to back, one finish
    per = {}
    sems = [semaphore(ctx, plat, dev, out) for _ in range(2)]
    if all(sems):
        cuda_sems = [cuda_semaphore(cu, fd, out) for _, fd in sems]
        types = (C.c_int, C.c_void_p, C.c_uint, C.c_void_p, C.c_void_p, C.c_uint, C.c_void_p,
                 C.c_void_p)
        signal = cl_ext(plat, b"clEnqueueSignalSemaphoresKHR", *types)
        wait = cl_ext(plat, b"clEnqueueWaitSemaphoresKHR", *types)
        zeros = (C.c_ubyte * 512)()

        def step(k: int) -> None:
            va(q, (1,), (1,), ob, a_buf)
            s0 = (C.c_void_p * 1)(sems[0][0])
            signal(C.c_void_p(q.int_ptr), 1, s0, None, 0, None, None)
            q.flush()
            e0 = (C.c_void_p * 1)(cuda_sems[0])
            cu("cuWaitExternalSemaphoresAsync", e0, C.byref(zeros), 1, None)
            launch()
            e1 = (C.c_void_p * 1)(cuda_sems[1])
            cu("cuSignalExternalSemaphoresAsync", e1, C.byref(zeros), 1, None)
            s1 = (C.c_void_p * 1)(sems[1][0])
            wait(C.c_void_p(q.int_ptr), 1, s1, None, 0, None, None)

        def loop(body, reps: int = 50) -> float:
            body(0)
            q.finish()
            cu("cuCtxSynchronize")
            t0 = time.perf_counter()
            for k in range(reps):
                body(k)
            q.finish()
            cu("cuCtxSynchronize")
            return round(1e6 * (time.perf_counter() - t0) / reps, 1)

        def opencl_only(k: int) -> None:
            va(q, (1,), (1,), ob, a_buf)

        def cuda_only(k: int) -> None:
            launch()

        per = {"opencl_only": loop(opencl_only), "cuda_only": loop(cuda_only),
               "alternating_on_semaphores": loop(step)}
        cl.enqueue_copy(q, got, b_buf)
        q.finish()
        per["result_ok"] = bool(np.array_equal(got, want))
    out["us_per_iteration_queued"] = per

    # 6. OpenCL C compiled by the OpenCL driver, loaded into CUDA
    ptx = cl.Program(ctx, OPENCL_KERNEL).build().binaries[0].decode().rstrip("\0")
    out["opencl_ptx_envregs"] = sorted(set(re.findall(r"%envreg\d+", ptx)))
    plain = ptx.replace(", texmode_independent", "")
    visible = re.sub(r"^\.entry", ".visible .entry", plain, flags=re.MULTILINE)
    bare = re.sub(r"\.ptr \.\w+ \.align \d+ ", "", visible)
    loaded = None
    for label, text in (("as_is", ptx), ("no_texmode", plain), ("visible", visible),
                        ("visible_bare_params", bare)):
        m, log = C.c_void_p(), C.create_string_buffer(8192)
        opts = (C.c_int * 2)(5, 6)  # CU_JIT_ERROR_LOG_BUFFER, its size
        vals = (C.c_void_p * 2)(C.cast(log, C.c_void_p), C.c_void_p(8192))
        r = cu("cuModuleLoadDataEx", C.byref(m), text.encode() + b"\0", 2, opts, vals)
        out[f"opencl_ptx_load_{label}"] = (r, log.value.decode(errors="replace")[:300])
        if r == "CUDA_SUCCESS" and loaded is None:
            loaded = m
    if loaded is not None:  # launch it: its ids, with the __local argument at shared 0
        f, ids = C.c_void_p(), C.c_ulonglong()
        cu("cuModuleGetFunction", C.byref(f), loaded, b"ids")
        G, L = 4, 64
        cu("cuMemAlloc_v2", C.byref(ids), C.c_size_t(G * L * 12))
        zero = C.c_ulonglong(0)
        args = (C.c_void_p * 2)(*(C.cast(C.byref(x), C.c_void_p) for x in (ids, zero)))
        out["opencl_ptx_launch"] = cu("cuLaunchKernel", f, G, 1, 1, L, 1, 1, L * 4, None,
                                      args, None)
        out["opencl_ptx_sync"] = cu("cuCtxSynchronize")
        res = np.zeros(G * L * 3, np.int32)
        cu("cuMemcpyDtoH_v2", res.ctypes.data_as(C.c_void_p), ids, C.c_size_t(res.nbytes))
        g = np.arange(G * L)
        out["opencl_ptx_ids_ok"] = bool(np.array_equal(
            res.reshape(-1, 3), np.stack([g, g // L, np.full_like(g, L)], 1)))
        out["opencl_ptx_ids_sample"] = res.reshape(-1, 3)[[0, 1, L, G * L - 1]].tolist()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
