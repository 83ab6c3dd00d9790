"""Can this device hold float16 lanes packed with native float16 arithmetic
(fusejit/targets/opencl/half2.py)? Checked once per device, when its DeviceInfo is made: the
vendor is NVIDIA, ``cl_nv_device_attribute_query`` reports compute capability 8.0 or more
(``cvt.rn.f16x2.f32`` needs sm_80; ``add/sub/mul.rn.f16x2`` sm_53), and a small kernel with the
inline-PTX helpers builds and reproduces NumPy's float16 +, -, * and float32 -> float16
rounding bit for bit on operands that cover normal, subnormal, zero, infinite and overflowing
results. Other devices pay nothing."""

from __future__ import annotations

import numpy as np
import pyopencl as cl

from fusejit.targets.opencl.half2 import helpers
from fusejit.runtime.opencl.mma_probe import nvidia_capability
from fusejit.runtime.opencl.probes import PerDevice, kernel_verdict

_KERNEL = """
__kernel void fj_half2_probe(__global const uint *a, __global const uint *b,
                             __global const float2 *f, __global uint *out, const int n) {
    const int i = get_global_id(0);
    if (i >= n) return;
    out[4 * i] = fj_hadd2(a[i], b[i]);
    out[4 * i + 1] = fj_hsub2(a[i], b[i]);
    out[4 * i + 2] = fj_hmul2(a[i], b[i]);
    out[4 * i + 3] = fj_f2h2(f[i].x, f[i].y);
}
"""


def _bits(n: int, seed: int) -> np.ndarray:
    """n well-mixed 32-bit words (a multiplicative hash of the index: no numpy.random, whose
    import costs a process's first call ~20 ms and which a trace must not import)."""
    x = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + \
        np.uint64(seed * 0xD1B54A32D192ED03 % 2 ** 64)
    x ^= x >> np.uint64(29)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    return (x >> np.uint64(32)).astype(np.uint32)


def probe_inputs(n: int = 4096) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, f): float16 operands (every finite bit pattern class, specials included) and
    float32 values to round (ties, overflow, subnormal results)."""
    special = np.array([0, 0x8000, 1, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0xfbff,
                        0x7c00, 0xfc00, 0x3555, 0x1000, 0x0200], np.uint16)
    finite = 2 * 0x7c00  # the finite bit patterns, both signs: 0..0x7bff and 0x8000..0xfbff
    a = (_bits(n, 1) % finite).astype(np.uint16)
    b = (_bits(n, 2) % finite).astype(np.uint16)
    a, b = (np.where(v >= 0x7c00, v - 0x7c00 + 0x8000, v).astype(np.uint16) for v in (a, b))
    a[:special.size], b[:special.size] = special, special[::-1]
    # neighbouring exponents, so sums round and differences cancel
    near = (_bits(n - n // 2, 3) % 6000).astype(np.int32) - 3000
    b[n // 2:] = (a[n // 2:] & 0x8000) ^ 0x8000 | np.clip(
        (a[n // 2:] & 0x7fff).astype(np.int32) + near, 0, 0x7bff).astype(np.uint16)
    # float32 values of magnitudes 2^-30 .. 2^20, both signs, all significands
    sig = (_bits(2 * n, 4) & np.uint32(0x807fffff))  # sign and significand bits
    exp = (_bits(2 * n, 5) % 50 + 127 - 30).astype(np.uint32) << np.uint32(23)
    f = (sig | exp).view(np.float32)
    f[:4] = [65520.0, 65519.0, 2.0 ** -25, 1.5 * 2.0 ** -24]  # overflow, max, ties to even
    return a, b, f


def expected(a: np.ndarray, b: np.ndarray, f: np.ndarray) -> np.ndarray:
    ha, hb = a.view(np.float16), b.view(np.float16)
    with np.errstate(all="ignore"):
        res = [(ha + hb), (ha - hb), (ha * hb)]
        packed = f.astype(np.float16).view(np.uint16).reshape(-1, 2)
    words = [r.view(np.uint16) for r in res]
    out = np.empty((a.size, 4), np.uint32)
    for k, w in enumerate(words):  # both halves of a word hold the same lane's result
        out[:, k] = w.astype(np.uint32) * 0x10001
    out[:, 3] = packed[:, 0].astype(np.uint32) | packed[:, 1].astype(np.uint32) << 16
    return out


def _probe(queue: cl.CommandQueue) -> str | None:
    device = queue.device
    cc = nvidia_capability(device)
    if isinstance(cc, str):
        return cc
    if cc[0] < 8:
        return f"compute capability {cc[0]}.{cc[1]} < 8.0 (cvt.rn.f16x2.f32 needs sm_80)"
    return kernel_verdict("float16x2", lambda: mismatches(queue, native=True), "NumPy float16")


def mismatches(queue: cl.CommandQueue, native: bool) -> int:
    """Rows of the probe whose results differ from NumPy's (the helpers as PTX or as C)."""
    a16, b16, f = probe_inputs()
    a = (a16.astype(np.uint32) * 0x10001).astype(np.uint32)  # the same lane in both halves
    b = (b16.astype(np.uint32) * 0x10001).astype(np.uint32)
    want = expected(a16, b16, f)
    ctx = queue.context
    prg = cl.Program(ctx, helpers(native) + _KERNEL).build()
    mf = cl.mem_flags
    bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x) for x in (a, b, f)]
    got = np.empty_like(want)
    out = cl.Buffer(ctx, mf.WRITE_ONLY, got.nbytes)
    prg.fj_half2_probe(queue, (a.size,), None, *bufs, out, np.int32(a.size))
    cl.enqueue_copy(queue, got, out)
    queue.finish()
    return int((~_same(got, want)).any(axis=1).sum())


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per word: both float16 halves equal, or both NaN (NaN payloads are the device's)."""
    def halves(w: np.ndarray) -> list[np.ndarray]:
        return [(w & 0xffff).astype(np.uint16), (w >> 16).astype(np.uint16)]

    def nan(h: np.ndarray) -> np.ndarray:
        return ((h & 0x7c00) == 0x7c00) & ((h & 0x03ff) != 0)
    ok = np.ones(got.shape, bool)
    for g, w in zip(halves(got), halves(want)):
        ok &= (g == w) | (nan(g) & nan(w))
    return ok


# None when packed float16 lanes with native arithmetic work on a queue's device, else why not
unavailable = PerDevice(_probe)


__all__ = ["expected", "mismatches", "probe_inputs", "unavailable"]
