"""Instruction counts of fusejit's kernels on NVIDIA: the PTX its OpenCL driver returns as the
program binary, and, where a ``ptxas`` and ``cuobjdump`` are at hand (a CUDA toolkit, or the
copies Triton ships), the SASS they assemble to, as opcode histograms.

    PYTHONPATH=. python benchmarks/isa_dump.py OUTDIR   # gelu float16 and Black-Scholes

``dump(name, source, queue, outdir)`` is what benchmarks/speed_variants.py calls per variant.
"""

from __future__ import annotations

import collections
import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyopencl as cl

_TOOLS: dict[str, str | None] = {}


def tool(name: str) -> str | None:
    if name not in _TOOLS:
        found = shutil.which(name)
        if found is None:
            patterns = [f"/usr/local/cuda*/bin/{name}"]
            for p in sys.path:
                patterns += [f"{p}/triton/backends/nvidia/bin/{name}",
                             f"{p}/nvidia/cuda_nvcc/bin/{name}"]
            hits = [h for pat in patterns for h in glob.glob(pat) if os.access(h, os.X_OK)]
            found = hits[0] if hits else None
        _TOOLS[name] = found
    return _TOOLS[name]


def ptx_histogram(ptx: str) -> collections.Counter[str]:
    """Opcodes of the PTX kernels' instructions (``mul.rn.f16x2``, ``cvt.rn.f16.f32``, ...)."""
    counts: collections.Counter[str] = collections.Counter()
    for line in ptx.splitlines():
        s = line.strip()
        if not s or s.startswith(("//", ".", "{", "}", "$")) or s.endswith(":"):
            continue
        s = re.sub(r"^@!?%p\d+\s+", "", s)
        counts[s.split()[0].rstrip(";")] += 1
    return counts


def sass_histogram(sass: str) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass):
        counts[m.group(2)] += 1
    return counts


def _fmt(counts: collections.Counter[str], top: int = 40) -> str:
    total = sum(counts.values())
    body = ", ".join(f"{k} {v}" for k, v in counts.most_common(top))
    return f"{total} instructions: {body}"


def dump(name: str, source: str, options: list[str], queue: Any, outdir: str) -> str:
    """Build ``source`` as fusejit does, write its PTX (and SASS) under ``outdir``; one line
    per kind of histogram."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    prg = cl.Program(queue.context, source).build(options=options)
    ptx = prg.binaries[0].decode(errors="replace").rstrip("\x00")
    (out / f"{name}.cl").write_text(source)
    (out / f"{name}.ptx").write_text(ptx)
    lines = [f"{name} PTX: {_fmt(ptx_histogram(ptx))}"]
    ptxas, cuobjdump = tool("ptxas"), tool("cuobjdump")
    if ptxas and cuobjdump:
        arch = re.search(r"\.target\s+(sm_\d+)", ptx)
        cubin = out / f"{name}.cubin"
        try:
            subprocess.run([ptxas, f"-arch={arch.group(1) if arch else 'sm_90'}", "-O3",
                            str(out / f"{name}.ptx"), "-o", str(cubin)], check=True,
                           capture_output=True, timeout=120)
            sass = subprocess.run([cuobjdump, "-sass", str(cubin)], check=True,
                                  capture_output=True, text=True, timeout=60).stdout
            (out / f"{name}.sass").write_text(sass)
            lines.append(f"{name} SASS: {_fmt(sass_histogram(sass))}")
        except (subprocess.SubprocessError, OSError) as exc:
            lines.append(f"{name} SASS: failed ({exc})")
    else:
        lines.append(f"{name} SASS: no ptxas/cuobjdump found")
    return "\n".join(lines)


if __name__ == "__main__":
    import numpy as np

    import fusejit
    from fusejit.bench.workloads import black_scholes, gelu
    from fusejit.runtime.opencl.build import build_options
    from fusejit.runtime.opencl.devices import device_info

    q = fusejit.default_queue()
    opts = build_options(device_info(q.device))
    x = np.zeros(1 << 20, np.float16)
    a = [np.ones(1 << 20, np.float32)] * 3
    for nm, fn, args in (("gelu16", lambda x: gelu(np, x), [x]),
                         ("black_scholes", lambda s, k, t: black_scholes(np, s, k, t), a)):
        print(dump(nm, fusejit.fuse(fn).lower(*args).source, opts, q, sys.argv[1]))
