"""Can NVIDIA's OpenCL run Hopper's warpgroup MMA (``wgmma``, sm_90a only)? Three routes, each its
own program so one that fails does not hide the others, each checked in NumPy:

* ``source``: OpenCL C with the wgmma inline PTX, built as usual (the driver targets sm_90);
* ``option <o>``: the same with a build option that might name sm_90a;
* ``ptx``: the asm written as PTX comments (``// FJPTX ...``, so the sm_90 build accepts it),
  the PTX the driver returns as the program's binary uncommented and retargeted to sm_90a, then
  built from that binary.

Also: how much ``__local`` memory a kernel argument may take (the static limit is 48 KiB).

    python benchmarks/wgmma_probe.py [OUT_DIR]   (writes probe.json and the PTX)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl

MARK = "// FJPTX "


def _asm(text: str, comment: bool) -> str:
    return (MARK + text) if comment else text


def _kernel(comment: bool, mma_on: bool = True, fence_on: bool = True) -> str:
    fence = _asm("fence.proxy.async.shared::cta;", comment)
    wfence = _asm("wgmma.fence.sync.aligned;", comment)
    mma = _asm("{ .reg .pred p; setp.ne.b32 p, %6, 0; "
               "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3}, %4, %5, p, 1, 1; }", comment)
    commit = _asm("wgmma.commit_group.sync.aligned;", comment)
    wait = _asm("wgmma.wait_group.sync.aligned 0;", comment)
    if not mma_on:
        mma = "// %0 %1 %2 %3 %4 %5 %6"
    if not fence_on:
        fence = wfence = commit = wait = "// none"
    return f"""
__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void k(__global const float *A, __global const float *B, __global float *D, ulong lbo,
       ulong sbo) {{
    /* A: 64 x 8 (k-major), B: 8 (n) x 8 (k-major); no swizzle: core matrices of 8 rows x 16
       bytes, row group i and k chunk kk at byte (i * 2 + kk) * 128 */
    __local float As[512] __attribute__((aligned(128)));
    __local float Bs[64] __attribute__((aligned(128)));
    const int t = get_local_id(0);
    for (int e = t; e < 512; e += 128) {{
        const int m = e / 8, kq = e % 8;
        As[((m / 8) * 2 + kq / 4) * 32 + (m % 8) * 4 + kq % 4] = A[e];
    }}
    if (t < 64) {{
        const int n = t / 8, kq = t % 8;
        Bs[(kq / 4) * 32 + n * 4 + kq % 4] = B[t];
    }}
    asm volatile("{fence}" ::: "memory");
    barrier(CLK_LOCAL_MEM_FENCE);
    const ulong da = (ulong)((((uint)(ulong)As) & 0x3FFFF) >> 4) | ((lbo >> 4) << 16)
                     | ((sbo >> 4) << 32);
    const ulong db = (ulong)((((uint)(ulong)Bs) & 0x3FFFF) >> 4) | ((lbo >> 4) << 16)
                     | ((sbo >> 4) << 32);
    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
    asm volatile("{wfence}" ::: "memory");
    asm volatile("{mma}" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(da), "l"(db), "r"(0));
    asm volatile("{commit}" ::: "memory");
    asm volatile("{wait}" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) :: "memory");
    const int w = t / 32, g = (t % 32) / 4, c = 2 * (t % 4);
    D[(16 * w + g) * 8 + c] = d0;
    D[(16 * w + g) * 8 + c + 1] = d1;
    D[(16 * w + g + 8) * 8 + c] = d2;
    D[(16 * w + g + 8) * 8 + c + 1] = d3;
}}
"""


def _retarget(ptx: str) -> str:
    ptx = ptx.replace(MARK, "")
    ptx = re.sub(r"^\.target\s+sm_90\b", ".target sm_90a", ptx, flags=re.MULTILINE)
    m = re.search(r"^\.version\s+(\d+)\.(\d+)", ptx, flags=re.MULTILINE)
    if m and (int(m.group(1)), int(m.group(2))) < (8, 0):
        ptx = ptx.replace(m.group(0), ".version 8.0")
    return ptx


LOCAL_ARG = """
__kernel void k(__global float *out, __local float *buf, int n) {
    const int t = get_local_id(0);
    for (int i = t; i < n; i += get_local_size(0)) buf[i] = (float)i;
    barrier(CLK_LOCAL_MEM_FENCE);
    float s = 0.0f;
    for (int i = t; i < n; i += get_local_size(0)) s += buf[n - 1 - i];
    out[t] = s;
}
"""


def _context() -> tuple[cl.Device, cl.Context, cl.CommandQueue]:
    dev = next(d for p in cl.get_platforms() if "NVIDIA" in p.name.upper()
               for d in p.get_devices())
    ctx = cl.Context([dev])
    return dev, ctx, cl.CommandQueue(ctx)


def case(name: str, out: Path) -> str:
    """One probe in this process (a kernel that faults loses the context)."""
    dev, ctx, q = _context()
    mf = cl.mem_flags
    rng = np.random.default_rng(1)
    a = rng.integers(-8, 8, (64, 8)).astype(np.float32)
    b = rng.integers(-8, 8, (8, 8)).astype(np.float32)  # (n, k)
    want = a @ b.T

    def launch(prg: cl.Program, lbo: int, sbo: int) -> str:
        ab = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
        bb = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
        got = np.full((64, 8), np.nan, np.float32)
        db = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=got)
        prg.k(q, (128,), (128,), ab, bb, db, np.uint64(lbo), np.uint64(sbo))
        cl.enqueue_copy(q, got, db)
        q.finish()
        if np.array_equal(got, want):
            return "ok"
        return f"wrong: {int((got != want).sum())} of 512, zeros {int((got == 0).sum())}"

    def via_ptx(**kw) -> cl.Program:
        first = cl.Program(ctx, _kernel(True, **kw)).build()
        ptx = first.binaries[0].decode().rstrip("\0")
        new = _retarget(ptx)
        (out / f"{name}.ptx").write_text(new)
        return cl.Program(ctx, [dev], [new.encode() + b"\0"]).build()

    if name == "source":
        return launch(cl.Program(ctx, _kernel(False)).build(), 128, 256)
    if name.startswith("option"):
        return launch(cl.Program(ctx, _kernel(False)).build(name[7:]), 128, 256)
    if name == "ptx_plain":
        return launch(via_ptx(mma_on=False, fence_on=False), 128, 256)
    if name == "ptx_fences":
        return launch(via_ptx(mma_on=False), 128, 256)
    if name.startswith("ptx_mma"):
        lbo, sbo = map(int, name.split("_")[2:])
        return launch(via_ptx(), lbo, sbo)
    if name.startswith("local_arg"):
        kib = int(name.split("_")[2])
        prg = cl.Program(ctx, LOCAL_ARG).build()
        n = kib * 256
        o = cl.Buffer(ctx, mf.READ_WRITE, 256 * 4)
        prg.k(q, (256,), (256,), o, cl.LocalMemory(n * 4), np.int32(n))
        q.finish()
        return "ok"
    raise ValueError(name)


CASES = ("ptx_plain", "ptx_fences", "ptx_mma_128_256", "ptx_mma_256_128", "source",
         "option -cl-nv-arch sm_90a", "local_arg_48", "local_arg_64", "local_arg_100",
         "local_arg_227")


def main() -> None:
    import subprocess

    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    if len(sys.argv) > 2:  # a child: one case
        try:
            print("RESULT", case(sys.argv[2], out))
        except Exception as exc:  # noqa: BLE001 - the probe reports every failure
            print("RESULT", f"{type(exc).__name__}: {str(exc)[:400]}")
        return
    results = {}
    for name in CASES:
        run = subprocess.run([sys.executable, __file__, str(out), name], capture_output=True, check=False,
                             text=True, timeout=60)
        lines = [ln[7:] for ln in run.stdout.splitlines() if ln.startswith("RESULT ")]
        results[name] = lines[0] if lines else f"no result (rc {run.returncode})"
        print(name, "->", results[name], flush=True)
    (out / "probe.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
