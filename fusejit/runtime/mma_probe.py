"""Can this device run the tensor-core GEMM (fusejit/gemm_mma.py)? Checked once per device, the
first time a function asks for ``matmul_precision="tf32"`` or ``"3xtf32"``: the vendor is NVIDIA,
``cl_nv_device_attribute_query`` reports compute capability 8.0 or more, and a one-warp kernel
with one ``mma.sync`` of each kind (tf32 m16n8k8 and f16 m16n8k16, the fragments loaded by the
same macros the GEMM uses) builds and computes exactly. Functions that never ask pay nothing."""

from __future__ import annotations

import threading

import numpy as np
import pyopencl as cl

COMPUTE_CAPABILITY_MAJOR_NV = 0x4000
COMPUTE_CAPABILITY_MINOR_NV = 0x4001

_lock = threading.Lock()
_results: dict[int, str | None] = {}


def _kernel_source() -> str:
    from ..gemm_mma import PTX_MACROS

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
    def ints(shape: tuple[int, int], seed: int) -> np.ndarray:  # -8..8, no numpy.random
        k = (np.arange(shape[0] * shape[1], dtype=np.uint64) + np.uint64(seed << 12)) * \
            np.uint64(0x9E3779B97F4A7C15)
        return ((k >> np.uint64(40)) % np.uint64(17)).astype(np.float32).reshape(shape) - 8
    a32, b32, a16, b16 = ints((16, 8), 1), ints((8, 8), 2), ints((16, 16), 3), ints((16, 8), 4)
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


def _probe(queue: cl.CommandQueue) -> str | None:
    cc = nvidia_capability(queue.device)
    if isinstance(cc, str):
        return cc
    major, minor = cc
    if major < 8:
        return f"compute capability {major}.{minor} < 8.0 (mma.sync tf32 needs sm_80)"
    try:
        prg = cl.Program(queue.context, _kernel_source()).build()
        a, b, want = probe_inputs()
        mf = cl.mem_flags
        ab = cl.Buffer(queue.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
        bb = cl.Buffer(queue.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
        got = np.empty_like(want)
        db = cl.Buffer(queue.context, mf.WRITE_ONLY, got.nbytes)
        prg.fj_mma_probe(queue, (32,), (32,), ab, bb, db)
        cl.enqueue_copy(queue, got, db)
        queue.finish()
    except cl.Error as exc:
        return f"the one-MMA probe kernel failed to build or run ({str(exc).splitlines()[0]})"
    if not np.array_equal(got, want):
        return "the one-MMA probe kernel computed a wrong product"
    return None


def unavailable(queue: object) -> str | None:
    """None when the tensor-core kernels run on ``queue``'s device, else why not."""
    if not isinstance(queue, cl.CommandQueue):
        return "not an OpenCL device"
    key = queue.device.int_ptr
    with _lock:
        if key in _results:
            return _results[key]
    result = _probe(queue)
    with _lock:
        _results.setdefault(key, result)
        return _results[key]


__all__ = ["nvidia_capability", "unavailable"]
