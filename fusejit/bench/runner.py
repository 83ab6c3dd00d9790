"""Runs every (workload, implementation) pair and collects one JSON-ready document."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyopencl as cl

from fusejit.bench import timing
from fusejit.bench.backends import ALL, BACKENDS, Backend, Unsupported
from fusejit.bench.workloads import (
    FAMILIES,
    NUMPY_ONLY,
    SCALES,
    Scale,
    Workload,
    with_elements,
    workloads,
)

SCHEMA = 1
Log = Callable[[str], None]


@dataclass
class Options:
    scale: str = "small"
    impls: Sequence[str] = ALL
    families: Sequence[str] = FAMILIES
    chain_sizes: Sequence[int] | None = None  # overrides the scale's chain sizes
    chain_lengths: Sequence[int] | None = None  # overrides the scale's chain lengths
    elements: int | None = None  # every non-chain, non-GEMM workload at this many elements
    budget_s: float | None = None  # seconds of samples per measurement; None: per scale
    min_reps: int = 5
    system: bool = True  # copy bandwidth, host overhead, cold compile
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


BUDGET = {"tiny": 0.02, "small": 0.25, "full": 0.3}
COPY_BYTES = {"tiny": 16 << 20, "small": 256 << 20, "full": 1 << 30}


def resolve_scale(opts: Options) -> Scale:
    base = SCALES[opts.scale]
    changes: dict[str, Any] = {}
    if opts.chain_sizes:
        changes["chain_sizes"] = tuple(opts.chain_sizes)
    if opts.chain_lengths:
        changes["chain_lengths"] = tuple(opts.chain_lengths)
    scale = Scale(**{**base.__dict__, **changes})
    return with_elements(scale, opts.elements) if opts.elements else scale


def matches(got: Sequence[np.ndarray], want: Sequence[np.ndarray], rtol: float = 1e-3
            ) -> tuple[bool, float]:
    """Loose agreement with NumPy (different libms and op orders): |got - want| <= rtol |want|
    + 1e-4 max|want|. Returns (ok, worst error relative to max|want|)."""
    if len(got) != len(want):
        return False, float("inf")
    ok, worst = True, 0.0
    for g, w in zip(got, want):
        g = np.asarray(g, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        if g.shape != w.shape:
            return False, float("inf")
        scale = float(np.max(np.abs(w))) or 1.0
        err = np.abs(g - w)
        worst = max(worst, float(np.max(err)) / scale)
        ok &= bool(np.all(err <= rtol * np.abs(w) + 1e-4 * scale))
    return ok, worst


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]


def run_case(wl: Workload, backends: dict[str, Backend], budget_s: float, min_reps: int,
             copy_gbs: float | None, seed: int, log: Log) -> dict[str, Any]:
    host = wl.make_inputs(seed)
    reference = [np.asarray(a) for a in _as_list(wl.fn(np, *host))]
    record: dict[str, Any] = {
        "name": wl.name, "family": wl.family, "chain": wl.chain,
        "shape": list(wl.inputs[0].shape), "size": wl.size, "bytes": wl.bytes, "impls": {},
    }
    for name, backend in backends.items():
        if wl.family in NUMPY_ONLY and name not in ("fused", "fused-cuda", "vulkan", "numpy"):
            record["impls"][name] = {"status": "unsupported: written with NumPy functions "
                                     "(sliding_window_view, np.random) this namespace lacks"}
            continue
        try:
            prepared = backend.prepare(wl, host)
            t, first = timing.measure(prepared.run, budget_s, min_reps)
            ok, err = matches(prepared.to_numpy(first), reference, wl.rtol)
            del first
            batched = timing.measure_batched(prepared.call, prepared.sync, t.median_s,
                                             budget_s) if prepared.asynchronous else t
            del prepared
        except Unsupported as exc:
            record["impls"][name] = {"status": f"unsupported: {exc}"}
            continue
        except Exception as exc:  # noqa: BLE001 (a failing implementation is a result)
            record["impls"][name] = {"status": f"failed: {_short(exc)}"}
            log(f"  {wl.name}: {name} failed: {_short(exc)}")
            continue
        gbs = wl.bytes / t.median_s / 1e9
        record["impls"][name] = {
            "status": "ok", "ms": t.median_s * 1e3, "min_ms": t.min_s * 1e3,
            "max_ms": t.max_s * 1e3, "reps": t.reps, "gbs": gbs,
            "batched_ms": batched.median_s * 1e3, "batched_calls": batched.reps,
            "batched_gbs": wl.bytes / batched.median_s / 1e9,
            "pct_copy": 100 * gbs / copy_gbs if copy_gbs else None,
            "matches": ok, "max_rel_err": err,
        }
        if not ok:
            log(f"  {wl.name}: {name} DISAGREES with NumPy (max rel err {err:.2e})")
    impls = record["impls"]
    fused = impls.get("fused", {}).get("ms")
    record["speedup"] = {  # other's time / fused time: > 1 means fused is faster
        f"vs_{other}": impls[other]["ms"] / fused
        for other in impls if other != "fused" and fused and impls[other]["status"] == "ok"
    }
    return record


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def device_record(queue: cl.CommandQueue) -> dict[str, Any]:
    d = queue.device
    return {
        "name": d.name.strip(), "platform": d.platform.name.strip(),
        "vendor": d.vendor.strip(), "driver": d.driver_version.strip(),
        "version": d.version.strip(), "type": cl.device_type.to_string(d.type),
        "compute_units": int(d.max_compute_units), "global_mem_bytes": int(d.global_mem_size),
        "max_alloc_bytes": int(d.max_mem_alloc_size),
    }


def machine_record() -> dict[str, Any]:
    import fusejit

    root = os.path.dirname(os.path.dirname(os.path.abspath(fusejit.__file__)))
    try:
        commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], check=False,
                                capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {
        "hostname": platform.node(), "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
        "python": sys.version.split()[0], "numpy": np.__version__,
        "pyopencl": cl.VERSION_TEXT, "fusejit": fusejit.__version__, "git_commit": commit,
        "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def run(opts: Options, log: Log = lambda s: print(s, file=sys.stderr, flush=True)
        ) -> dict[str, Any]:
    """Benchmark everything ``opts`` asks for; returns the JSON document."""
    import fusejit

    queue = fusejit.default_queue()
    scale = resolve_scale(opts)
    budget = opts.budget_s if opts.budget_s is not None else BUDGET[opts.scale]
    doc: dict[str, Any] = {
        "schema": SCHEMA, "fusejit_version": fusejit.__version__,
        "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "argv": sys.argv, "scale": opts.scale, "budget_s": budget, "min_reps": opts.min_reps,
        "machine": machine_record(), "device": device_record(queue), **opts.extra,
    }
    log(f"device: {doc['device']['name']} ({doc['device']['platform']}), scale {opts.scale}")

    backends: dict[str, Backend] = {}
    doc["implementations"] = {}
    for name in opts.impls:
        backend = BACKENDS[name](queue)
        try:
            reason = backend.probe()
        except Exception as exc:  # noqa: BLE001 (e.g. a peer whose driver is broken)
            reason = f"failed to start: {_short(exc)}"
        status = "ok" if reason is None else (
            reason if reason.startswith("failed") else f"missing: {reason}")
        doc["implementations"][name] = {"status": status, "device": backend.device,
                                        "version": backend.version}
        if reason is None:
            backends[name] = backend
        else:
            log(f"{name}: {status}")

    system: dict[str, Any] = {}
    copy_gbs = None
    if opts.system:
        log("measuring copy bandwidth, host overhead, cold compile ...")
        system["copy"] = timing.copy_bandwidth(queue, COPY_BYTES[opts.scale])
        copy_gbs = system["copy"]["gbs"]
        system["overhead"] = timing.host_overhead(queue, n=200 if opts.scale == "tiny" else 1000)
        system["cold_gelu"] = timing.cold_compile(scale.gelu)
    doc["system"] = system

    cases = workloads(scale, opts.families)
    doc["results"] = []
    for i, wl in enumerate(cases, 1):
        log(f"[{i}/{len(cases)}] {wl.name} {tuple(wl.inputs[0].shape)}")
        doc["results"].append(run_case(wl, backends, budget, opts.min_reps, copy_gbs,
                                       opts.seed, log))
    if hasattr(os, "getloadavg"):
        doc["machine"]["loadavg_at_end"] = list(os.getloadavg())
    return doc
