"""float32 ``/``, ``1/x`` and ``sqrt`` speculated in elementwise kernels: NVIDIA's own fast
paths without their branches, and one exact fallback per element.

With ``-cl-fp32-correctly-rounded-divide-sqrt`` NVIDIA's compiler spells each of these ops as
a fast path (a ``MUFU.RCP`` or ``MUFU.RSQ`` estimate, refined by fma) guarded by a range test
(``FCHK`` for division, integer tests for 1/x and sqrt) that branches to a slow subroutine. The
fast path is correctly rounded wherever the test passes. Every op keeps its own branch region
(``BSSY``/``BSYNC``), so the compiler cannot interleave the lanes and ops of a work-item across
them: Black-Scholes on an H200 has 20 such regions per 4 elements and runs at 0.118 ms for 2^24
options, against 0.092 ms with approximate division and sqrt.

Here each op is its fast path with the same refinement, straight-line, and its range test is
folded into one flag (``fj_bad``) per element. The elementwise kernel (codegen/source.py) computes an
element that way, stores it, and where the flag is set (an operand out of range: zero divisors,
infinities, NaN, subnormals, extreme exponents) computes and stores the element again with
the exact ops. The results are the exact ops' bit for bit:

* ``x / y``: the sequence NVIDIA's div.rn fast path runs (``y0 = rcp.approx(b)``, one Newton
  step, ``q = a * y``, the residual ``r = fma(-b, q, a)``, ``q + r * y``), taken only where
  |a| and |b| lie in [2^-63, 2^64) (or a is zero): well inside FCHK's range, so the quotient,
  residual and refined reciprocal are normal and exact where they must be. ``copysign`` gives
  a zero quotient the sign of ``a * y`` (``q + r * y`` would make -0 / 1 +0);
* ``1 / x``: rcp.rn's fast path, with its own range test (biased exponent 1..252);
* ``sqrt(x)``: sqrt.rn's fast path (``s = x * rsqrt.approx(x)``, ``s + (x - s*s) * rsqrt/2``),
  with its own range test (bits 0x0d000000..0x7f7fffff: positive, normal, >= 2^-101).

The lowering (codegen/lowering.py) marks every value computed from a speculated op and computes those
again in the fallback block; other values (loads, ops on inputs alone) are shared. Kernels
that write a parameter (in-place) do not speculate: the fallback reads its inputs again.

Where: NVIDIA devices with correctly rounded division (``runtime/opencl/fastdiv_probe.py`` checks the
helpers against the exact ops on operands of every class first). ``emulated()`` spells the two
PTX estimates as OpenCL C (the reciprocal one ulp off, so the Newton step is exercised) so the
mechanism runs, and is tested against NumPy, on PoCL; ``disabled()`` turns it off, and so does
``FUSEJIT_FAST_DIV=0`` for the whole process (the same results, only slower: for comparing).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir.ops import Op
from fusejit.targets.scoped import Scoped

SPECULATED = (Op.TRUEDIV, Op.RECIPROCAL, Op.SQRT)
FLAG = "fj_bad"  # the per-element flag: an operand outside the fast paths' ranges

_ESTIMATES = {
    "ptx": """
#define FJ_RCP_APPROX(fj_y, fj_x) asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(fj_y) : "f"(fj_x))
#define FJ_RSQRT_APPROX(fj_y, fj_x) asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(fj_y) : \\
    "f"(fj_x))
""",
    # (on any device: 1/x one ulp off, as an estimate is; rsqrt rounded from double)
    "emulated": """
#define FJ_RCP_APPROX(fj_y, fj_x) \\
    { fj_y = as_float(as_uint((float)(1.0 / (double)(fj_x))) ^ 1u); }
#define FJ_RSQRT_APPROX(fj_y, fj_x) { fj_y = (float)(1.0 / sqrt((double)(fj_x))); }
""",
}
_HELPERS = """
inline float fj_fdiv(float fj_a, float fj_b, int *fj_bad) {
    float fj_y;
    FJ_RCP_APPROX(fj_y, fj_b);
    fj_y = fma(fj_y, fma(-fj_b, fj_y, 1.0f), fj_y);
    const float fj_q = fj_a * fj_y;
    const float fj_r = fma(-fj_b, fj_q, fj_a);
    const float fj_aa = fabs(fj_a), fj_ab = fabs(fj_b);
    *fj_bad |= !((fj_ab >= 0x1p-63f) & (fj_ab < 0x1p64f) & (fj_aa < 0x1p64f) &
                 ((fj_aa >= 0x1p-63f) | (fj_a == 0.0f)));
    return copysign(fma(fj_y, fj_r, fj_q), fj_q);
}
inline float fj_frcp(float fj_x, int *fj_bad) {
    float fj_y;
    FJ_RCP_APPROX(fj_y, fj_x);
    *fj_bad |= ((as_uint(fj_x) + 0x01800000u) & 0x7f800000u) <= 0x01ffffffu;
    return fma(fj_y, fma(-fj_x, fj_y, 1.0f), fj_y);
}
inline float fj_fsqrt(float fj_x, int *fj_bad) {
    float fj_r;
    FJ_RSQRT_APPROX(fj_r, fj_x);
    *fj_bad |= (as_uint(fj_x) - 0x0d000000u) > 0x727fffffu;
    const float fj_s = fj_x * fj_r;
    return fma(fma(-fj_s, fj_s, fj_x), 0.5f * fj_r, fj_s);
}
"""

_mode = Scoped(None)  # "emulated" or "off" inside the blocks below


def emulated() -> contextlib.AbstractContextManager[None]:
    """Functions compiled inside the block speculate on any OpenCL device with correctly
    rounded division, the PTX estimates spelled as OpenCL C (tests on PoCL)."""
    return _mode.set("emulated")


def disabled() -> contextlib.AbstractContextManager[None]:
    """Functions compiled inside the block use the exact ops alone (what the speculated results
    are compared with)."""
    return _mode.set("off")


def spelling(native: Callable[[], bool], emulable: bool) -> str | None:
    """"ptx", "emulated" or None, as the blocks above ask: by default "ptx" where ``native()``
    (the device's probe, asked only then) passes; "emulated" only where ``emulable`` (the
    device rounds / and sqrt correctly and has float64, which the emulated estimates use)."""
    mode = _mode.value
    if mode == "off" or mode is None and os.environ.get("FUSEJIT_FAST_DIV") == "0":
        return None
    if mode == "emulated":
        return mode if emulable else None
    return "ptx" if native() else None


def helpers(spelling: str) -> str:
    """fj_fdiv, fj_frcp and fj_fsqrt over the estimates of ``spelling``."""
    return _ESTIMATES[spelling] + _HELPERS


def template(op: Op, out: np.dtype, ins: Sequence[np.dtype], operands: Sequence[str]
             ) -> str | None:
    """The speculated spelling of ``op`` on float32, or None where it has none."""
    if out != dt.FLOAT32 or any(d != dt.FLOAT32 for d in ins) or op not in SPECULATED:
        return None
    if op is Op.TRUEDIV:  # (1 / x is the lowering's to see: it asks for RECIPROCAL then)
        return f"fj_fdiv({operands[0]}, {operands[1]}, &{FLAG})"
    name = "fj_frcp" if op is Op.RECIPROCAL else "fj_fsqrt"
    return f"{name}({operands[0]}, &{FLAG})"


__all__ = ["FLAG", "SPECULATED", "disabled", "emulated", "helpers", "spelling", "template"]
