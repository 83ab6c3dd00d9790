"""Which inline-PTX spellings of cp.async and ldmatrix work in NVIDIA's OpenCL C (the probe behind
fusejit/codegen/gemm/mma.py's multistage kernel). Each spelling is its own program, so one that fails to
build does not hide the others; each copies known data and the result is checked in NumPy.

    python benchmarks/mma_async_probe.py [OUT_DIR]   (writes probe.json and the PTX of each)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl

# the shared-window address of a __local pointer, spelled several ways
ADDR = {
    "u32_of_ulong": ('"r"((uint)(ulong)(p))', "[%0]"),
    "u32_of_size_t": ('"r"((uint)(size_t)(p))', "[%0]"),
    "u64": ('"l"((ulong)(p))', "[%0]"),
    "cvta_u64": ('"l"((ulong)(p))', "cvta"),
}


def _copy_kernel(spelling: str, zfill: bool) -> str:
    cons, mode = ADDR[spelling]
    bytes_ = ", %2" if zfill else ""
    extra = ', "r"(nb)' if zfill else ""
    if mode == "cvta":
        asm = ('asm volatile("{ .reg .u64 s; cvta.to.shared.u64 s, %0; '
               f'cp.async.cg.shared.global [s], [%1], 16{bytes_}; }}" :: {cons}, "l"(g){extra})')
    else:
        asm = (f'asm volatile("cp.async.cg.shared.global {mode}, [%1], 16{bytes_};" :: '
               f'{cons}, "l"(g){extra})')
    return f"""
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void k(__global const float *src, __global float *dst) {{
    __local float pad[4] __attribute__((aligned(16)));
    __local float buf[256] __attribute__((aligned(16)));
    const int t = get_local_id(0);
    if (t < 4) pad[t] = -1.0f;
    for (int i = t; i < 256; i += 64) buf[i] = -7.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int to = (t * 5) % 64;  /* a permutation of the 64 chunks */
    __local float *p = buf + 4 * to;
    __global const float *g = src + 4 * t;
    const uint nb = (t % 3) * 8;  /* 0, 8 or 16 bytes copied, the rest zero-filled */
    {asm};
    asm volatile("cp.async.commit_group;");
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = t; i < 256; i += 64) dst[i] = buf[i];
    if (t < 4) dst[256 + t] = pad[t];
}}
"""


def _copy_expected(zfill: bool) -> tuple[np.ndarray, np.ndarray]:
    src = np.arange(256, dtype=np.float32) + 1
    want = np.empty(260, np.float32)
    for t in range(64):
        to = (t * 5) % 64
        chunk = src[4 * t:4 * t + 4].copy()
        if zfill:
            nb = (t % 3) * 8
            chunk[nb // 4:] = 0
        want[4 * to:4 * to + 4] = chunk
    want[256:] = -1
    return src, want


LDM = {
    "x4": "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
    "x4_trans": "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
    "x2_trans": "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
}


def _ldm_kernel(spelling: str, inst: str) -> str:
    cons, mode = ADDR[spelling]
    n = 2 if ".x2." in inst else 4
    regs = ", ".join(f"%{i}" for i in range(n))
    outs = ", ".join(f'"=r"(r{i})' for i in range(n))
    addr = f"%{n}"
    if mode == "cvta":
        asm = (f'asm volatile("{{ .reg .u64 s; cvta.to.shared.u64 s, {addr}; {inst} {{{regs}}}, '
               f'[s]; }}" : {outs} : {cons})')
    else:
        asm = f'asm volatile("{inst} {{{regs}}}, [{addr}];" : {outs} : {cons})'
    return f"""
__kernel __attribute__((reqd_work_group_size(32, 1, 1)))
void k(__global const ushort *src, __global uint *dst) {{
    __local ushort buf[512] __attribute__((aligned(16)));
    const int t = get_local_id(0);
    for (int i = t; i < 512; i += 32) buf[i] = src[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    /* lane t gives the address of row t % 8 of matrix t / 8: rows 32 halves apart, matrix i at
       half 8 * i of each row (the 4 matrices side by side in a 8 x 32 block of halves) */
    __local ushort *p = buf + (t % 8) * 64 + (t / 8) * 8;
    uint r0 = 0, r1 = 0, r2 = 0, r3 = 0;
    {asm};
    dst[t * 4] = r0; dst[t * 4 + 1] = r1; dst[t * 4 + 2] = r2; dst[t * 4 + 3] = r3;
}}
"""


def _ldm_expected(inst: str) -> tuple[np.ndarray, np.ndarray]:
    src = np.arange(512, dtype=np.uint16)
    n = 2 if ".x2." in inst else 4
    trans = ".trans" in inst
    want = np.zeros((32, 4), np.uint32)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(n):  # matrix i: rows r at half r * 64 + 8 * i
            mat = np.array([[src[r * 64 + 8 * i + c] for c in range(8)] for r in range(8)])
            if trans:
                mat = mat.T
            lo, hi = int(mat[g, 2 * t]), int(mat[g, 2 * t + 1])
            want[lane, i] = lo | (hi << 16)
    return src, want.ravel()


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    ctx = None
    for p in cl.get_platforms():
        for d in p.get_devices():
            if "NVIDIA" in p.name.upper():
                ctx = cl.Context([d])
    if ctx is None:
        ctx = cl.create_some_context(interactive=False)
    q = cl.CommandQueue(ctx)
    mf = cl.mem_flags
    results = {}

    def run(name: str, source: str, src: np.ndarray, want: np.ndarray, gsize: int) -> None:
        try:
            prg = cl.Program(ctx, source).build()
            try:
                (out / f"{name}.ptx").write_bytes(prg.binaries[0])
            except Exception:  # noqa: BLE001 - the PTX is a bonus
                pass
            sb = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=src)
            got = np.zeros_like(want)
            db = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=got)
            prg.k(q, (gsize,), (gsize,), sb, db)
            cl.enqueue_copy(q, got, db)
            q.finish()
            ok = bool(np.array_equal(got, want))
            results[name] = "ok" if ok else f"wrong: {int((got != want).sum())} of {got.size}"
        except cl.Error as exc:
            results[name] = f"error: {str(exc)[:600]}"
        print(name, results[name], flush=True)

    for sp in ADDR:
        for zfill in (False, True):
            src, want = _copy_expected(zfill)
            run(f"cp_async_{sp}{'_zfill' if zfill else ''}", _copy_kernel(sp, zfill), src, want,
                64)
        for ln, inst in LDM.items():
            src, want = _ldm_expected(inst)
            run(f"ldmatrix_{ln}_{sp}", _ldm_kernel(sp, inst), src, want, 32)
    (out / "probe.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
