"""First call of GELU in fresh processes: cold, then with a warm fusejit disk cache.

    python benchmarks/first_call.py [--runs 5] [--size 1048576]

Each run is a new ``python -c`` process sharing one temporary FUSEJIT_CACHE_DIR (or the one the
environment names); the first compiles (and fills the cache), the later ones load the device
binary from it. ``first_call_ms`` is the first ``gelu(x)`` plus ``queue.finish()``, measured in
a process that has already imported fusejit and made its queue and input (``import_ms`` and
``context_ms`` are those, reported apart). ``second_fn_ms`` is the first call of a second
function of the same shape in the same process: what a first call costs once the one-time
process costs (lazy imports) are paid.

``breakdown_ms`` splits the first call by stage, timed by wrapping fusejit's stage functions
from outside (nested stages are included in their parents):

* ``lower``: trace + passes + codegen (``trace``, ``passes``, ``codegen``); absent on a
  trace-cache hit, where ``trace_cache_load`` (a signature lowered by an earlier process:
  its key ``trace_key``, the disk reads, the program, the executable) stands for it and for
  the stages below but ``launch``;
* ``disk_read`` (program-cache reads), ``from_binary`` (clCreateProgramWithBinary +
  clBuildProgram) or ``compile`` (a source build, cold only), with PyOpenCL's
  ``cl_create_program`` and ``cl_build_program`` inside them; ``executable`` (kernel objects
  and launch plan); ``launch`` (the first enqueue + finish);
* ``other``: the call's time outside all the top-level stages.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import numpy as np, pyopencl as cl, pyopencl.array as cla, fusejit
t1 = time.perf_counter()
q = fusejit.default_queue()
x = cla.to_device(q, np.linspace(-4, 4, int(sys.argv[1]), dtype=np.float32)); q.finish()
t2 = time.perf_counter()
import importlib
spent = {}
def timed(module, attr, label):
    owner = importlib.import_module(module)
    for part in attr.split(".")[:-1]:
        owner = getattr(owner, part)
    name = attr.split(".")[-1]
    fn = getattr(owner, name)
    def wrapper(*a, **k):
        s = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - s
    setattr(owner, name, wrapper)
for module, attr, label in [
        ("fusejit.api", "Fused._lower", "lower"),
        ("fusejit.api", "run_pipeline", "passes"),
        ("fusejit.codegen.source", "SourceModule.build", "codegen"),
        ("fusejit.runtime.cache", "ProgramCache.get", "disk_read"),
        ("fusejit.runtime.opencl.build", "from_binary", "from_binary"),
        ("pyopencl", "Program.__init__", "cl_create_program"),
        ("pyopencl", "Program.build", "cl_build_program"),
        ("fusejit.runtime.opencl.build", "_build_uncached", "compile"),
        ("fusejit.runtime.opencl.backend", "Executable", "executable"),
        ("fusejit.compile.aot", "executable_from", "executable"),
        ("fusejit.compile.trace_cache", "entry_key", "trace_key"),
        ("fusejit.compile.trace_cache", "load", "trace_cache_load"),
        ("fusejit.runtime.opencl.executable", "Executable.run", "launch")]:
    try:
        timed(module, attr, label)
    except (AttributeError, ImportError):
        pass
TRACE = fusejit.compile.trace_call.Tracer
class Timed(TRACE):
    def __enter__(self):
        self._t = time.perf_counter()
        return super().__enter__()
    def __exit__(self, *exc):
        r = super().__exit__(*exc)
        spent["trace"] = spent.get("trace", 0.0) + time.perf_counter() - self._t
        return r
fusejit.compile.trace_call.Tracer = Timed
gelu = fusejit.fuse(lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3))))
t3 = time.perf_counter(); y = gelu(x); q.finish(); t = time.perf_counter() - t3
breakdown = {k: round(v * 1e3, 2) for k, v in spent.items()}
entries = [p for p in __import__("pathlib").Path(os.environ["FUSEJIT_CACHE_DIR"]).glob("programs/*.fjc")]
outer = ("lower", "trace_cache_load", "launch") + (() if "lower" not in spent else (
    "disk_read", "from_binary", "compile", "executable"))  # (else inside trace_cache_load)
top = sum(spent.get(k, 0.0) for k in outer)
breakdown["other"] = round((t - top) * 1e3, 2)
info = gelu.cache_info()
gelu2 = fusejit.fuse(lambda x: 0.5 * x * (1 + np.tanh(0.79788456 * (x + 0.044715 * x ** 3))))
t4 = time.perf_counter(); y2 = gelu2(x); q.finish(); t_2 = time.perf_counter() - t4
h = x.get()
want = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
ok = bool(np.allclose(y.get(), want, rtol=1e-5, atol=1e-6))
print(json.dumps({"first_call_ms": round(t * 1e3, 2), "second_fn_ms": round(t_2 * 1e3, 2),
                  "import_ms": round((t1 - t0) * 1e3, 1),
                  "context_ms": round((t2 - t1) * 1e3, 1), "breakdown_ms": breakdown,
                  "traces": info.traces, "compiles": info.compiles,
                  "disk_hits": info.disk_hits,
                  "cache_entry_bytes": sorted(e.stat().st_size for e in entries), "correct": ok, "device": q.device.name.strip()}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--no-disk-cache", action="store_true",
                    help="FUSEJIT_CACHE_DIR=0 (the baseline: PyOpenCL's own cache)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = os.environ.get("FUSEJIT_CACHE_DIR") or tmp
        env = dict(os.environ, FUSEJIT_CACHE_DIR="0" if args.no_disk_cache else where)
        env.pop("POCL_CACHE_DIR", None)
        for _ in range(args.runs):
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.size)], env=env,
                                 capture_output=True, text=True, check=True)
            print(out.stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
