"""First call of GELU in fresh processes: cold, then with a warm fusejit disk cache.

    python benchmarks/first_call.py [--runs 5] [--size 1048576]

Each run is a new ``python -c`` process sharing one temporary FUSEJIT_CACHE_DIR; the first
compiles (and fills the cache), the later ones load the device binary from it. The time is
the first ``gelu(x)`` plus ``queue.finish()`` (trace, passes, source, build, launch), measured
inside the child after the input is on the device. Prints one JSON line per process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = """
import json, sys, time
import numpy as np, pyopencl.array as cla, fusejit
q = fusejit.default_queue()
x = cla.to_device(q, np.linspace(-4, 4, int(sys.argv[1]), dtype=np.float32)); q.finish()
gelu = fusejit.fuse(lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3))))
t0 = time.perf_counter(); y = gelu(x); q.finish(); t = time.perf_counter() - t0
info = gelu.cache_info()
h = x.get()
want = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
ok = bool(np.allclose(y.get(), want, rtol=1e-5, atol=1e-6))
print(json.dumps({"first_call_ms": round(t * 1e3, 2), "compiles": info.compiles,
                  "disk_hits": info.disk_hits, "correct": ok, "device": q.device.name.strip()}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--no-disk-cache", action="store_true",
                    help="FUSEJIT_CACHE_DIR=0 (the baseline: PyOpenCL's own cache)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, FUSEJIT_CACHE_DIR="0" if args.no_disk_cache else tmp)
        env.pop("POCL_CACHE_DIR", None)
        for _ in range(args.runs):
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.size)], env=env,
                                 capture_output=True, text=True, check=True)
            print(out.stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
