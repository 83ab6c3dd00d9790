"""Can this device speculate float32 ``/``, ``1/x`` and ``sqrt`` (fusejit/targets/
opencl_fastdiv.py)? Checked once per device, the first time an elementwise kernel with one of
those ops is lowered: the vendor is NVIDIA (inline PTX), the device's division and sqrt are
correctly rounded (OpenCLDeviceInfo.fast_div asks only then), and a kernel running the helpers over
operands of every class (random bit patterns, zeros, subnormals, infinities, NaN, extreme and
neighbouring exponents) agrees bit for bit with the exact ops wherever the helpers do not raise
their fallback flag. Other devices pay nothing."""

from __future__ import annotations

import numpy as np
import pyopencl as cl

from fusejit.targets.opencl.fastdiv import helpers
from fusejit.runtime.opencl.half2_probe import _bits
from fusejit.runtime.opencl.mma_probe import nvidia_capability
from fusejit.runtime.opencl.probes import PerDevice, kernel_verdict

_KERNEL = """
__kernel void fj_fastdiv_probe(__global const float *a, __global const float *b,
                               __global uint *out, const int n) {
    const int i = get_global_id(0);
    if (i >= n) return;
    int bad = 0;
    const float q = fj_fdiv(a[i], b[i], &bad);
    out[3 * i] = bad || as_uint(q) == as_uint(a[i] / b[i]);
    bad = 0;
    const float r = fj_frcp(b[i], &bad);
    out[3 * i + 1] = bad || as_uint(r) == as_uint(1.0f / b[i]);
    bad = 0;
    const float s = fj_fsqrt(fabs(a[i]), &bad);
    out[3 * i + 2] = bad || as_uint(s) == as_uint(sqrt(fabs(a[i])));
}
"""


def probe_inputs(n: int = 1 << 14) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): float32 operand pairs, specials included, half of them with exponents near the
    fast paths' range limits."""
    a = _bits(n, 11).view(np.float32).copy()
    b = _bits(n, 12).view(np.float32).copy()
    edge = np.array([-64, -63, -62, 62, 63, 64, -126, -125, 125, 126, 127, -101, -100], np.int32)
    e = edge[_bits(n // 2, 13) % edge.size] + 127
    sig = _bits(n // 2, 14) & np.uint32(0x807fffff)
    half = (sig | (np.clip(e, 1, 254).astype(np.uint32) << np.uint32(23))).view(np.float32)
    a[: n // 2] = half
    b[n // 4: 3 * n // 4] = half[::-1][: n // 2]
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 1.0, -1.0,
                        2.0 ** 64, 2.0 ** -63, 3.4e38, 1.2e-38], np.float32)
    a[-special.size ** 2:] = np.repeat(special, special.size)
    b[-special.size ** 2:] = np.tile(special, special.size)
    return a, b


def _probe(queue: cl.CommandQueue) -> str | None:
    found = nvidia_capability(queue.device)
    if isinstance(found, str):
        return found
    return kernel_verdict("fast-division", lambda: mismatches(queue, "ptx"), "the exact ops")


def mismatches(queue: cl.CommandQueue, spelling: str) -> int:
    """Cases where a helper (its estimates spelled as ``spelling``) differs from the exact op
    without raising its flag."""
    a, b = probe_inputs()
    ctx = queue.context
    source = ("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if spelling == "emulated"
              else "") + helpers(spelling) + _KERNEL
    prg = cl.Program(ctx, source).build(options=["-cl-fp32-correctly-rounded-divide-sqrt"])
    mf = cl.mem_flags
    bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x) for x in (a, b)]
    got = np.empty(3 * a.size, np.uint32)
    out = cl.Buffer(ctx, mf.WRITE_ONLY, got.nbytes)
    prg.fj_fastdiv_probe(queue, (a.size,), None, *bufs, out, np.int32(a.size))
    cl.enqueue_copy(queue, got, out)
    queue.finish()
    return int((got == 0).sum())


# None when a queue's device speculates float32 division and sqrt, else why not (asked only
# for devices whose division and sqrt are correctly rounded: OpenCLDeviceInfo.fast_div)
unavailable = PerDevice(_probe)


__all__ = ["mismatches", "probe_inputs", "unavailable"]
