"""The PTX the tensor-core GEMM spells through macros, and their emulation: ``mma.sync``
(fusejit/codegen/gemm/mma.py) and Hopper's ``wgmma`` (fusejit/codegen/gemm/wgmma.py, its statements marked for
runtime/opencl/build.py's sm_90a rebuild). ``emulated()`` makes the MMA kernels generated inside it
define the macros as OpenCL C that exchanges the fragments through local memory and computes
the same products, so PoCL runs the whole kernel (fragment layouts, edge tiles, prologue,
epilogue) on CI; the NVIDIA driver builds the PTX."""

from __future__ import annotations

import contextlib

from fusejit.targets.base import SM90A_MARK
from fusejit.targets.scoped import Scoped

# (SM90A_MARK: an inline-asm statement only an sm_90a build may hold, written behind this
# comment; targets/base.py says who restores it)
# k depth of one mma.sync of each kind: m16n8k8 for tf32 (3xTF32 too), m16n8k16 for float16
K_STEP = {"tf32": 8, "3xtf32": 8, "f16": 16}

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


# float -> float16 bits, rounded to nearest even (cvt.rn.f16 / vstore_half_rte) in integer
# arithmetic: NaN (quiet, signed), overflow to inf from 65520 up, subnormals as rint(|x| 2^24)
# (exact: a power-of-two scale), normals rebiased with the tie to even. Not through memory: a
# half store read back as a uint is type punning, which LLVM 15's alias analysis (PoCL 3.1)
# reorders, so the word read its old value.
F2H = ("#define FJ_F2H(d, f) { const uint fj_x = as_uint(f), fj_a = fj_x & 0x7fffffffu, "
       "fj_m = fj_a - 0x38000000u, fj_r = fj_m & 0x1fffu; "
       "d = ((fj_x >> 16) & 0x8000u) | (fj_a > 0x7f800000u ? 0x7e00u : "
       "fj_a >= 0x477ff000u ? 0x7c00u : "
       "fj_a < 0x38800000u ? (uint)rint(as_float(fj_a) * 16777216.0f) : "
       "(fj_m >> 13) + (uint)(fj_r > 0x1000u || (fj_r == 0x1000u && ((fj_m >> 13) & 1u)))); }")


def emulated_macros(threads: int) -> tuple[str, ...]:
    return (
        f"__local uint fj_mma[{2 * threads * 6}];",
        "int fj_par = 0;",
        "#define FJ_TF32(d, x) d = (as_uint(x) + 0x1000u) & 0xffffe000u",
        F2H,
        ("#define FJ_F16X2(d, lo, hi) { uint fj_l, fj_h; FJ_F2H(fj_l, lo); FJ_F2H(fj_h, hi); "
         "d = fj_l | (fj_h << 16); }"),
        _emulated_mma("FJ_MMA_TF32", False, threads),
        _emulated_mma("FJ_MMA_F16", True, threads),
    )


def wgmma_asm(kind: str, n: int) -> str:
    """The wgmma statement (marked for build.py's sm_90a rebuild): D (n/2 floats) += R (4
    registers) x Q (descriptor)."""
    d = ", ".join(f"%{i}" for i in range(n // 2))
    a = ", ".join(f"%{n // 2 + i}" for i in range(4))
    desc, one = f"%{n // 2 + 4}", f"%{n // 2 + 5}"
    if kind == "f16":
        inst, tail = f"m64n{n}k16.f32.f16.f16", "p, 1, 1, 0"
    else:
        inst, tail = f"m64n{n}k8.f32.tf32.tf32", "p, 1, 1"
    return (f"{SM90A_MARK}{{ .reg .pred p; setp.ne.b32 p, {one}, 0; "
            f"wgmma.mma_async.sync.aligned.{inst} {{{d}}}, {{{a}}}, {desc}, {tail}; }}")


def wgmma_macros() -> tuple[str, ...]:
    """wgmma's fence, commit and wait (marked), and the generic-to-async proxy fence."""
    M = SM90A_MARK
    return (
        f'#define FJ_WG_FENCE() asm volatile("{M}wgmma.fence.sync.aligned;" ::: "memory")',
        (f'#define FJ_WG_COMMIT() asm volatile("{M}wgmma.commit_group.sync.aligned;" ::: '
         '"memory")'),
        (f'#define FJ_WG_WAIT() asm volatile("{M}wgmma.wait_group.sync.aligned 0;" ::: '
         '"memory")'),
        '#define FJ_PROXY_FENCE() asm volatile("fence.proxy.async.shared::cta;" ::: "memory")',
    )


def wgmma_emulated(kind: str, threads: int, ck: int, name: str) -> tuple[list[str], list[str]]:
    """(program-level helper, kernel lines): the wgmma as OpenCL C. A warp's R fragments go
    through local memory (``fj_wx``); ``fj_wg_dot_<name>`` sums one accumulator's products,
    Q read through the unswizzled k-major layout of ``ck`` chunks a row (tf32: truncated to
    19 bits, as the tensor cores read float32). (A function, not inlined: PoCL builds the
    kernel in a fraction of the time a macro per accumulator takes.)"""
    E = 8 if kind == "f16" else 4  # (elements a 16-byte chunk)
    q = f"qb[(cc >> 3) * {ck * 8 * E} + (ka / {E}) * {8 * E} + (cc & 7) * {E} + ka % {E}]"
    if kind == "f16":
        a = ("vload_half((((rr & 7) * 4 + ((k & 7) >> 1)) * 4 + (rr >> 3) + 2 * (k >> 3)) * 2 "
             "+ (k & 1), (__local const half *)x)")
        b = f"vload_half(0, (__local const half *)&{q})"
        depth, qt = 16, "ushort"
    else:
        a = "as_float(x[((rr & 7) * 4 + (k & 3)) * 4 + (rr >> 3) + 2 * (k >> 2)])"
        b = f"as_float(as_uint({q}) & 0xffffe000u)"
        depth, qt = 8, "float"
    fn = f"fj_wg_dot_{name}"
    head = [(f"__attribute__((noinline)) float {fn}(__local const uint *x, __local const {qt} "
             "*qb, int rr, int cc, int kk) {"),
            "    float s = 0.0f;",
            f"    for (int k = 0; k < {depth}; k++) {{ const int ka = kk + k; s += {a} * {b}; }}",
            "    return s;", "}"]
    lines = [
        f"__local uint fj_wx[{threads * 4}];",
        "#define FJ_WG_FENCE()",
        "#define FJ_WG_COMMIT()",
        "#define FJ_WG_WAIT()",
        "#define FJ_PROXY_FENCE()",
        f"#define FJ_WG_ACC(acc, rr, cc, qb, kk) acc += {fn}(fj_x, qb, rr, cc, kk)",
    ]
    return head, lines


_emulate = Scoped(False)


def emulated() -> contextlib.AbstractContextManager[None]:
    """MMA kernels generated inside the block spell the PTX as portable OpenCL C (tests on
    PoCL; see the module docstring)."""
    return _emulate.set(True)


__all__ = ["K_STEP", "PTX_MACROS", "SM90A_MARK", "emulated", "emulated_macros", "wgmma_asm",
           "wgmma_emulated", "wgmma_macros"]
