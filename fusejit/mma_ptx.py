"""The PTX the tensor-core GEMM (fusejit/gemm_mma.py) spells through macros, and their emulation:
``emulated()`` makes the MMA kernels generated inside it define the macros as OpenCL C that
exchanges the fragments through local memory and computes the same products, so PoCL runs
the whole kernel (fragment layouts, edge tiles, prologue, epilogue) on CI; the NVIDIA driver
builds the PTX."""

from __future__ import annotations

import contextlib

from .scoped import Scoped

_MMA_OPERANDS = ('"+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), '
                 '"r"(b0), "r"(b1)')
PTX_MACROS = (
    '#define FJ_TF32(d, x) asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(d) : "f"(x))',
    ('#define FJ_F16X2(d, lo, hi) asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), '
     '"f"(lo))'),
    '#define FJ_MMA_TF32(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1) asm volatile('
    '"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, '
    '{%8,%9}, {%0,%1,%2,%3};" : ' + _MMA_OPERANDS + ')',
    '#define FJ_MMA_F16(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1) asm volatile('
    '"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, '
    '{%8,%9}, {%0,%1,%2,%3};" : ' + _MMA_OPERANDS + ')',
)


def _emulated_mma(name: str, f16: bool, threads: int) -> str:
    """The warp's fragments through local memory, then each lane's four results from the ISA's
    layout. One barrier a call (the macro is only used in uniform control flow): calls
    alternate between two scratch halves, so a half is rewritten only after the next call's
    barrier, which every lane reaches after reading it."""
    if f16:  # element (row, k) of A: lane (row%8)*4 + (k%8)/2, register (row>=8) + 2(k>=8)
        a = ("vload_half((((fj_r & 7) * 4 + ((fj_k & 7) >> 1)) * 6 + (fj_r >> 3) + "
             "2 * (fj_k >> 3)) * 2 + (fj_k & 1), (__local const half *)fj_s)")
        b = ("vload_half(((fj_c * 4 + ((fj_k & 7) >> 1)) * 6 + 4 + (fj_k >> 3)) * 2 + "
             "(fj_k & 1), (__local const half *)fj_s)")
        depth = 16
    else:  # element (row, k) of A: lane (row%8)*4 + k%4, register (row>=8) + 2(k>=4)
        a = "as_float(fj_s[((fj_r & 7) * 4 + (fj_k & 3)) * 6 + (fj_r >> 3) + 2 * (fj_k >> 2)])"
        b = "as_float(fj_s[(fj_c * 4 + (fj_k & 3)) * 6 + 4 + (fj_k >> 2)])"
        depth = 8
    return (
        f"#define {name}(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1) {{ "
        f"__local uint *fj_s = fj_mma + fj_par * {threads * 6} + (tid - lane) * 6; "
        "fj_par ^= 1; "
        "fj_s[lane * 6] = a0; fj_s[lane * 6 + 1] = a1; fj_s[lane * 6 + 2] = a2; "
        "fj_s[lane * 6 + 3] = a3; fj_s[lane * 6 + 4] = b0; fj_s[lane * 6 + 5] = b1; "
        "barrier(CLK_LOCAL_MEM_FENCE); float fj_d[4] = {d0, d1, d2, d3}; "
        "for (int fj_q = 0; fj_q < 4; fj_q++) { "
        "const int fj_r = mg + (fj_q >> 1) * 8, fj_c = mt * 2 + (fj_q & 1); float fj_sum = 0.0f; "
        f"for (int fj_k = 0; fj_k < {depth}; fj_k++) fj_sum += {a} * {b}; "
        "fj_d[fj_q] += fj_sum; } "
        "d0 = fj_d[0]; d1 = fj_d[1]; d2 = fj_d[2]; d3 = fj_d[3]; }")


def emulated_macros(threads: int) -> tuple[str, ...]:
    return (
        f"__local uint fj_mma[{2 * threads * 6}];",
        f"__local uint fj_pk[{threads}];",
        "int fj_par = 0;",
        "#define FJ_TF32(d, x) d = (as_uint(x) + 0x1000u) & 0xffffe000u",
        ("#define FJ_F16X2(d, lo, hi) { vstore_half_rte(lo, 2 * tid, (__local half *)fj_pk); "
         "vstore_half_rte(hi, 2 * tid + 1, (__local half *)fj_pk); d = fj_pk[tid]; }"),
        _emulated_mma("FJ_MMA_TF32", False, threads),
        _emulated_mma("FJ_MMA_F16", True, threads),
    )


_emulate = Scoped(False)


def emulated() -> contextlib.AbstractContextManager[None]:
    """MMA kernels generated inside the block spell the PTX as portable OpenCL C (tests on
    PoCL; see the module docstring)."""
    return _emulate.set(True)


__all__ = ["PTX_MACROS", "emulated", "emulated_macros"]
