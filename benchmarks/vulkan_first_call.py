"""A process's first Vulkan calls, cold and warm: opening the device, then the first call of
chain8 (GLSL), softmax and layernorm (row kernels, compiled as WGSL).

    python benchmarks/vulkan_first_call.py [--runs 2]

Each run is a fresh process with its own XDG_CACHE_HOME (fusejit's disk cache and Mesa's
shader cache both live there): ``cold`` starts from an empty one, ``warm`` is a second process
on the same directory. ``before`` turns off what issue 35 added for first calls (the one-go
parse of wgpu-py's C types, runtime/vulkan/cffi_types.py, the disk cache of the WGSL
translation, runtime/vulkan/pipelines.py's ``wgsl_of``, and of the fma probe's answer,
runtime/vulkan/probe.py), ``after`` keeps them, ``no-mesa`` is ``after`` with Mesa's shader
cache off (MESA_SHADER_CACHE_DISABLE=true: lavapipe's LLVM compile of each pipeline, which its
disk cache otherwise keeps); the variants alternate. Per process: ``open``
(``default_device()``), each function's first call (with its inputs uploaded and
``finish()``), and the build split summed over the three: ``translate``
(GLSL -> WGSL), ``module`` (naga's front end) and ``pipeline`` (naga's SPIR-V back end and the
driver's pipeline creation; lavapipe compiles at the first dispatch, inside the first call).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
import numpy as np
import fusejit.vulkan as fv
from fusejit import fuse
from fusejit.bench import workloads
import fusejit.runtime.vulkan.cffi_types as ct
import fusejit.runtime.vulkan.pipelines as P
spent = {"translate": 0.0, "module": 0.0, "pipeline": 0.0}
def timed(fn, label):
    def wrapper(*a, **k):
        s = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[label] += time.perf_counter() - s
    return wrapper
import fusejit.runtime.vulkan.probe as PR
if sys.argv[1] == "before":
    ct.prime_wgpu = lambda: 0
    P.wgsl_of = P.translate
    PR.fused_fma = lambda wgpu, device, key: bool(PR.run_probe(wgpu, device))
P.wgsl_of = timed(P.wgsl_of, "translate")
P.create_module = timed(P.create_module, "module")
t = time.perf_counter()
dev = fv.default_device()
out = {"open": time.perf_counter() - t}
cls = type(dev.device)
cls.create_compute_pipeline = timed(cls.create_compute_pipeline, "pipeline")
rng = np.random.default_rng(0)
chain = workloads.chain_fn(8)
for name, fn, args in [
        ("chain8", lambda a: chain(np, a), [rng.uniform(-2, 2, 1024).astype(np.float32)]),
        ("softmax", lambda a: workloads.softmax(np, a),
         [rng.standard_normal((8, 1024)).astype(np.float32)]),
        ("layernorm", lambda a, w, b: workloads.layernorm(np, a, w, b),
         [rng.standard_normal((4, 4096)).astype(np.float32), np.ones(4096, np.float32),
          np.zeros(4096, np.float32)])]:
    f = fuse(fn)
    t = time.perf_counter()
    f(*[fv.to_device(a) for a in args])
    dev.finish()
    out[name] = time.perf_counter() - t
out.update(spent)
print(json.dumps({k: round(v * 1e3, 1) for k, v in out.items()}))
"""


def run(variant: str, cache: str) -> dict[str, float]:
    env = dict(os.environ, XDG_CACHE_HOME=cache, PYTHONPATH=os.getcwd())
    for name in ("FUSEJIT_CACHE_DIR", "MESA_SHADER_CACHE_DIR", "MESA_SHADER_CACHE_DISABLE"):
        env.pop(name, None)
    if variant == "no-mesa":
        env["MESA_SHADER_CACHE_DISABLE"] = "true"
    done = subprocess.run([sys.executable, "-c", CHILD, variant], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    rows: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.runs):
        for variant in ("before", "after", "no-mesa"):
            with tempfile.TemporaryDirectory() as cache:
                for state in ("cold", "warm"):
                    rows.setdefault((variant, state), []).append(run(variant, cache))
    keys = list(next(iter(rows.values()))[0])
    print("ms, min [range] over", args.runs, "runs")
    print(f"{'':14}" + "".join(f"{k:>20}" for k in keys))
    for (variant, state), runs in rows.items():
        cells = []
        for k in keys:
            vals = [r[k] for r in runs]
            cells.append(f"{min(vals):>8.1f} [{min(vals):.0f}-{max(vals):.0f}]")
        print(f"{variant + ' ' + state:14}" + "".join(f"{c:>20}" for c in cells))


if __name__ == "__main__":
    main()
