"""Can this device run the tensor-core GEMM (fusejit/codegen/gemm/mma.py)? Checked once per device, the
first time a function asks for ``matmul_precision="tf32"`` or ``"3xtf32"``: the vendor is NVIDIA,
``cl_nv_device_attribute_query`` reports compute capability 8.0 or more, and a one-warp kernel
with one ``mma.sync`` of each kind (tf32 m16n8k8 and f16 m16n8k16, the fragments loaded by the
same macros the GEMM uses) builds and computes exactly. Functions that never ask pay nothing.
Where that passes, compute capability 9.0 and a kernel with one ``wgmma`` of each kind
(built through runtime/opencl/build.py's sm_90a rebuild) decide whether codegen/gemm/wgmma.py's tiles run."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pyopencl as cl

from fusejit.passes.plan import DeviceLimits, Plan
from fusejit.runtime.opencl.probes import PerDevice, kernel_verdict

COMPUTE_CAPABILITY_MAJOR_NV = 0x4000
COMPUTE_CAPABILITY_MINOR_NV = 0x4001


def _kernel_source() -> str:
    from fusejit.codegen.gemm.ptx import PTX_MACROS

    # lane: g = lane >> 2, t = lane & 3; A row-major 16 x K, B row-major K x 8, D 16 x 8
    return "\n".join(PTX_MACROS) + """
__kernel __attribute__((reqd_work_group_size(32, 1, 1)))
void fj_mma_probe(__global const float *a, __global const float *b, __global float *d) {
    const int lane = get_local_id(0), g = lane >> 2, t = lane & 3;
    uint a0, a1, a2, a3, b0, b1;
    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
    FJ_TF32(a0, a[g * 8 + t]); FJ_TF32(a1, a[(g + 8) * 8 + t]);
    FJ_TF32(a2, a[g * 8 + t + 4]); FJ_TF32(a3, a[(g + 8) * 8 + t + 4]);
    FJ_TF32(b0, b[t * 8 + g]); FJ_TF32(b1, b[(t + 4) * 8 + g]);
    FJ_MMA_TF32(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1);
    d[g * 8 + 2 * t] = d0; d[g * 8 + 2 * t + 1] = d1;
    d[(g + 8) * 8 + 2 * t] = d2; d[(g + 8) * 8 + 2 * t + 1] = d3;
    __global const float *ah = a + 128, *bh = b + 64;  /* the f16 product: 16 x 16 by 16 x 8 */
    FJ_F16X2(a0, ah[g * 16 + 2 * t], ah[g * 16 + 2 * t + 1]);
    FJ_F16X2(a1, ah[(g + 8) * 16 + 2 * t], ah[(g + 8) * 16 + 2 * t + 1]);
    FJ_F16X2(a2, ah[g * 16 + 2 * t + 8], ah[g * 16 + 2 * t + 9]);
    FJ_F16X2(a3, ah[(g + 8) * 16 + 2 * t + 8], ah[(g + 8) * 16 + 2 * t + 9]);
    FJ_F16X2(b0, bh[2 * t * 8 + g], bh[(2 * t + 1) * 8 + g]);
    FJ_F16X2(b1, bh[(2 * t + 8) * 8 + g], bh[(2 * t + 9) * 8 + g]);
    d0 = d1 = d2 = d3 = 0.0f;
    FJ_MMA_F16(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1);
    d[128 + g * 8 + 2 * t] = d0; d[128 + g * 8 + 2 * t + 1] = d1;
    d[128 + (g + 8) * 8 + 2 * t] = d2; d[128 + (g + 8) * 8 + 2 * t + 1] = d3;
}
"""


def probe_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, expected d): small integers, exact in tf32, float16 and any summation order."""
    a32, b32, a16, b16 = _ints((16, 8), 1), _ints((8, 8), 2), _ints((16, 16), 3), \
        _ints((16, 8), 4)
    a = np.concatenate([a32.ravel(), a16.ravel()])
    b = np.concatenate([b32.ravel(), b16.ravel()])
    d = np.concatenate([(a32 @ b32).ravel(), (a16 @ b16).ravel()])
    return a, b, d


def nvidia_capability(dev: cl.Device) -> tuple[int, int] | str:
    """An NVIDIA device's compute capability (major, minor), or why there is none to read."""
    if "NVIDIA" not in dev.platform.name.upper() and "NVIDIA" not in dev.vendor.upper():
        return f"{dev.name.strip()} is not an NVIDIA device"
    if "cl_nv_device_attribute_query" not in dev.extensions:
        return "the driver lacks cl_nv_device_attribute_query (no compute capability)"
    try:
        return (int(dev.get_info(COMPUTE_CAPABILITY_MAJOR_NV)),
                int(dev.get_info(COMPUTE_CAPABILITY_MINOR_NV)))
    except (cl.Error, ValueError, TypeError) as exc:
        return f"compute capability unreadable ({exc})"


def _launch(queue: cl.CommandQueue, kernel: cl.Kernel, inputs: tuple[np.ndarray, ...],
            out: np.ndarray, size: int) -> np.ndarray:
    """``out`` filled by one work-group of ``size`` running ``kernel(*inputs, out)``."""
    mf = cl.mem_flags
    bufs = [cl.Buffer(queue.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x) for x in inputs]
    ob = cl.Buffer(queue.context, mf.WRITE_ONLY, out.nbytes)
    kernel(queue, (size,), (size,), *bufs, ob)
    cl.enqueue_copy(queue, out, ob)
    queue.finish()
    return out


def _probe(queue: cl.CommandQueue) -> str | None:
    cc = nvidia_capability(queue.device)
    if isinstance(cc, str):
        return cc
    major, minor = cc
    if major < 8:
        return f"compute capability {major}.{minor} < 8.0 (mma.sync tf32 needs sm_80)"
    a, b, want = probe_inputs()

    def mismatches() -> int:
        prg = cl.Program(queue.context, _kernel_source()).build()
        got = _launch(queue, prg.fj_mma_probe, (a, b), np.empty_like(want), 32)
        return int((got != want).sum())

    return kernel_verdict("one-MMA", mismatches, "the exact product")


def _wgmma_source() -> str:
    """One wgmma of each kind as the GEMM spells it (codegen/gemm/wgmma.py): R (64 x k) from
    registers in mma.sync's A layout, Q (8 x k, k-major) from local memory in the unswizzled
    core-matrix layout; D = R Q^T, 64 x 8."""
    from fusejit.codegen.gemm.ptx import PTX_MACROS, wgmma_asm, wgmma_macros

    def one(kind: str, depth: int) -> str:
        e = 4 if kind == "tf32" else 8  # elements a 16-byte chunk
        load = ("FJ_TF32(r{r}, x[(row + {dr}) * 8 + t + {dk}]);" if kind == "tf32" else
                "FJ_F16X2(r{r}, x[(row + {dr}) * 16 + 2 * t + {dk}], "
                "x[(row + {dr}) * 16 + 2 * t + {dk} + 1]);")
        regs = " ".join(load.format(r=r, dr=dr, dk=dk * (depth // 8)) for r, (dr, dk) in
                        enumerate(((0, 0), (8, 0), (0, 4), (8, 4))))
        ql = "float" if kind == "tf32" else "ushort"  # (no half arrays without cl_khr_fp16)
        store = ("q[((c / {e}) * 8 + n) * {e} + c % {e}] = y[n * {d} + c];" if kind == "tf32"
                 else "vstore_half(y[n * {d} + c], ((c / {e}) * 8 + n) * {e} + c % {e}, "
                 "(__local half *)q);")
        asm = wgmma_asm(kind, 8)
        return f"""
__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void fj_wgmma_{kind}(__global const float *x, __global const float *y, __global float *d) {{
    __local {ql} q[{8 * depth}] __attribute__((aligned(128)));
    const int tid = get_local_id(0), lane = tid % 32, g = lane >> 2, t = lane & 3;
    const int row = (tid / 32) * 16 + g;
    if (tid < {8 * depth}) {{ const int n = tid / {depth}, c = tid % {depth};
        {store.format(e=e, d=depth)} }}
    FJ_PROXY_FENCE();
    barrier(CLK_LOCAL_MEM_FENCE);
    uint r0, r1, r2, r3;
    {regs}
    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
    const ulong qd = (ulong)((((uint)(ulong)q) & 0x3FFFFu) >> 4) | ((ulong)8 << 16) |
                     ((ulong){depth // e * 8} << 32);
    FJ_WG_FENCE();
    asm volatile("{asm}" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(r0), "r"(r1),
                 "r"(r2), "r"(r3), "l"(qd), "r"(1) : "memory");
    FJ_WG_COMMIT();
    FJ_WG_WAIT();
    asm volatile("" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3));
    d[row * 8 + 2 * t] = d0; d[row * 8 + 2 * t + 1] = d1;
    d[(row + 8) * 8 + 2 * t] = d2; d[(row + 8) * 8 + 2 * t + 1] = d3;
}}
"""
    return "\n".join(PTX_MACROS + wgmma_macros()) + one("tf32", 8) + one("f16", 16)


def _wgmma_probe(queue: cl.CommandQueue) -> str | None:
    """None when both wgmma kinds build (through build.py's sm_90a rebuild) and compute
    exactly on this device, else why not."""
    cc = nvidia_capability(queue.device)
    if isinstance(cc, str):
        return cc
    if cc != (9, 0):
        return f"compute capability {cc[0]}.{cc[1]}: wgmma is sm_90a's alone"
    from fusejit.errors import KernelBuildError
    from fusejit.runtime.opencl.build import build_program

    try:
        prg = build_program(queue.context, _wgmma_source(), [], "wgmma probe")
    except KernelBuildError as exc:
        return f"the one-wgmma probe kernel failed to build ({str(exc).splitlines()[0]})"

    def mismatches() -> int:
        bad = 0
        for kind, depth in (("tf32", 8), ("f16", 16)):
            x, y = _ints((64, depth), 5), _ints((8, depth), 6)
            got = _launch(queue, getattr(prg, f"fj_wgmma_{kind}"), (x, y),
                          np.empty((64, 8), np.float32), 128)
            bad += int((got != x @ y.T).sum())
        return bad

    return kernel_verdict("one-wgmma", mismatches, "the exact products")


def _ints(shape: tuple[int, int], seed: int) -> np.ndarray:
    """Small integers -8..8 (exact in tf32, float16 and any summation order), no numpy.random."""
    k = (np.arange(shape[0] * shape[1], dtype=np.uint64) + np.uint64(seed << 12)) * \
        np.uint64(0x9E3779B97F4A7C15)
    return ((k >> np.uint64(40)) % np.uint64(17)).astype(np.float32).reshape(shape) - 8


_mma = PerDevice(_probe)
_wgmma = PerDevice(_wgmma_probe)


def unavailable(queue: object) -> str | None:
    """None when the tensor-core kernels run on ``queue``'s device, else why not."""
    if not isinstance(queue, cl.CommandQueue):
        return "not an OpenCL device"
    return _mma(queue)


def wgmma_unavailable(queue: object) -> str | None:
    """None when the wgmma kernels (codegen/gemm/wgmma.py) run on ``queue``'s device, else why not;
    probed once per device, after the mma.sync probe passes."""
    why = unavailable(queue)
    return why if why is not None else _wgmma(queue)  # type: ignore[arg-type]


# -- what a call's products get: codegen chooses kernels from these answers ------------------------


def mma_unavailable(queue: object, precision: str, plan: Plan) -> str | None:
    """Why this call's products cannot use tensor cores (None: they can), for
    codegen/gemm/tune.py's ``configure``; probes the device only when ``precision`` asks for
    them and the plan has a product."""
    if precision == "highest" or not any(g.kind == "gemm" for g in plan.groups):
        return "matmul_precision='highest'"
    return unavailable(queue)


def with_wgmma(queue: object, limits: DeviceLimits) -> DeviceLimits:
    """``limits`` of a device whose tensor cores serve this call, with ``wgmma`` set where
    Hopper's warpgroup MMA runs there (FUSEJIT_WGMMA=0: never, the mma.sync kernels alone)."""
    if os.environ.get("FUSEJIT_WGMMA", "1") == "0":
        return limits
    return replace(limits, wgmma=wgmma_unavailable(queue) is None)


__all__ = ["mma_unavailable", "nvidia_capability", "unavailable", "wgmma_unavailable",
           "with_wgmma"]
