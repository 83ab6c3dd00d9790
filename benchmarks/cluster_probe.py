"""Can NVIDIA's OpenCL launch Hopper thread-block clusters, with distributed shared memory?

The tensor-core GEMM is bound by feeding its tiles at 48 KiB of local memory a work-group
(fusejit/codegen/gemm/wgmma.py); two work-groups of a cluster could share one operand's tile through
distributed shared memory (each loads half, both read both). OpenCL has no cluster launch, but
a kernel whose PTX carries ``.reqnctapercluster`` is launched in clusters by the driver
whatever the launch call. So: the kernel below reads its cluster registers, writes a value to
its local memory, syncs the cluster, and reads its neighbour's value through ``mapa`` +
``ld.shared::cluster``. It is built as fusejit builds sm_90a code (the cluster statements
marked as PTX comments, restored in the driver's PTX, runtime/opencl/build.py), once as it is and
once with ``.reqnctapercluster 2, 1, 1`` added to the entry, and each result is checked.

    python benchmarks/cluster_probe.py [OUT_DIR]   (prints one JSON line per route)

Measured on an H200 (driver's PTX ``.version 9.0``): both routes build and run, but the
second runs unclustered as well (``%cluster_nctarank`` 1 in every work-group): NVIDIA's
OpenCL launch does not apply the PTX's cluster dimensions, so clusters and distributed shared
memory are out of reach from OpenCL.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl

from fusejit.codegen.gemm.ptx import SM90A_MARK as M
from fusejit.runtime.opencl.build import sm90a_ptx

GROUPS = 8

SOURCE = f"""
__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void k(__global uint *out) {{
    __local uint s[4] __attribute__((aligned(16)));
    const uint t = get_local_id(0), g = get_group_id(0);
    uint rank = 0, n = 0, cid = 0, peer = 0xffffffffu, remote = 0;
    asm volatile("{M}mov.u32 %0, %%cluster_ctarank;" : "+r"(rank));
    asm volatile("{M}mov.u32 %0, %%cluster_nctarank;" : "+r"(n));
    asm volatile("{M}mov.u32 %0, %%clusterid.x;" : "+r"(cid));
    if (t == 0) s[0] = g * 10u + 7u;
    barrier(CLK_LOCAL_MEM_FENCE);
    asm volatile("{M}barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("{M}barrier.cluster.wait.acquire.aligned;" ::: "memory");
    if (n > 1u) {{
        asm volatile("{M}mapa.shared::cluster.u32 %0, %1, %2;" : "+r"(remote)
                     : "r"((uint)(ulong)s), "r"(rank ^ 1u));
        asm volatile("{M}ld.shared::cluster.u32 %0, [%1];" : "+r"(peer) : "r"(remote)
                     : "memory");
    }}
    /* (a work-group's local memory must outlive its neighbour's reads) */
    asm volatile("{M}barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("{M}barrier.cluster.wait.acquire.aligned;" ::: "memory");
    if (t == 0) {{
        out[4 * g] = rank; out[4 * g + 1] = n; out[4 * g + 2] = cid; out[4 * g + 3] = peer;
    }}
}}
"""

_ENTRY = re.compile(r"(\.entry\s+\w+\s*\([^)]*\)[^{]*)\{")


def clustered(ptx: str, n: int) -> str:
    """``ptx`` with ``.reqnctapercluster n, 1, 1`` on its entry."""
    out, count = _ENTRY.subn(lambda m: f"{m.group(1)}.reqnctapercluster {n}, 1, 1\n{{", ptx,
                             count=1)
    if not count:
        raise ValueError("no .entry in the PTX")
    return out


def run(ctx: cl.Context, queue: cl.CommandQueue, ptx: str) -> np.ndarray:
    prg = cl.Program(ctx, [ctx.devices[0]], [ptx.encode() + b"\0"]).build()
    out = np.zeros(4 * GROUPS, np.uint32)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=out)
    prg.k(queue, (128 * GROUPS,), (128,), buf)
    cl.enqueue_copy(queue, out, buf)
    queue.finish()
    return out.reshape(GROUPS, 4)


def main() -> None:
    outdir = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    ctx = cl.create_some_context(interactive=False)
    queue = cl.CommandQueue(ctx)
    first = cl.Program(ctx, SOURCE).build(options=["-cl-std=CL1.2"])
    ptx = sm90a_ptx(bytes(first.get_info(cl.program_info.BINARIES)[0]).rstrip(b"\0").decode())
    version = re.search(r"^\.version.*$", ptx, re.MULTILINE)
    print(json.dumps({"device": ctx.devices[0].name, "ptx": version.group(0) if version
                      else None}), flush=True)
    for route, n in (("as built", 1), ("reqnctapercluster 2", 2)):
        row: dict[str, object] = {"route": route}
        try:
            text = clustered(ptx, n) if n > 1 else ptx
            if outdir is not None:
                outdir.mkdir(parents=True, exist_ok=True)
                (outdir / f"cluster{n}.ptx").write_text(text)
            got = run(ctx, queue, text)
            g = np.arange(GROUPS)
            want_peer = (g ^ 1) * 10 + 7 if n > 1 else np.full(GROUPS, 0xFFFFFFFF)
            row["rows (rank, n, cluster, peer)"] = got.tolist()
            row["right"] = bool(np.array_equal(got[:, 0], g % n) and np.all(got[:, 1] == n) and
                                np.array_equal(got[:, 2], g // n) and
                                np.array_equal(got[:, 3], want_peer))
        except Exception as exc:  # noqa: BLE001 - report and go on
            row["error"] = str(exc)[:600]
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
