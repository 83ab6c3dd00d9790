"""First-use tuning of GEMM kernels: candidates compiled in one program and timed on the
device, within a time budget, the winner persisted in ``gemm.json`` in the user cache directory
next to the launch tuning data (runtime/autotune.py). ``tuning`` hands both, the table and the
tuner, to codegen/gemm/tune.py's ``configure``, which chooses with them."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from fusejit.codegen.gemm.config import GemmConfig, with_split
from fusejit.codegen.gemm.simt import rank
from fusejit.codegen.gemm.tune import Tuner, Tuning
from fusejit.codegen.source import SourceModule
from fusejit.ir.graph import Graph, Node, Param
from fusejit.ir.ops import Op
from fusejit.passes.plan import Dest, Group, Plan, Store, gemm_problem
from fusejit.ir.shapes import row_major_strides
from fusejit.runtime import autotune, cache
from fusejit.runtime.opencl.build import build_options, build_program
from fusejit.runtime.opencl.devices import DeviceInfo
from fusejit.targets.opencl.target import OpenCLTarget

# Tuning time per compile of a fused function, all its products together: with the final
# build (~0.4 s) a first call stays under 2 s on an H200. Measured there: 6 candidates cost
# 2.8 s of a 3.4 s first call at 4096^3, so the budget now buys 2 or 3.
BUDGET_S = 1.0
COMPILE_S = 0.33
MAX_CANDIDATES = 3
# spilled bytes past which a candidate is not timed: a few spilled words cost little (3xTF32's
# 256x128 wgmma tile spills 4 bytes and is its fastest, 1.99 ms against 2.10 on an H200), a
# spilling accumulator tile costs 3x (1324 bytes: 6.29 ms)
SPILL_LIMIT = 64


def tuning(queue: cl.CommandQueue, info: DeviceInfo, flag: bool | None) -> Tuning:
    """What configure gets for a call on ``queue``: the persisted table, and the first-use
    tuner of its device unless autotuning is off (``flag``: ``@fuse(autotune=...)``)."""
    return Tuning(lookup, make_tuner(queue, info) if autotune.enabled(flag) else None,
                  reject)


def make_tuner(queue: cl.CommandQueue, info: DeviceInfo) -> Tuner:
    spent = [0.0]  # tuning time of this compile, over all its products

    def tune(group: Group, key: str, cands: list[GemmConfig], share: float = 1.0
             ) -> GemmConfig | None:
        try:
            return _tune(group, key, cands, share)
        except (cl.Error, MemoryError, ValueError):  # no room to time in: the heuristic
            return None

    def _tune(group: Group, key: str, cands: list[GemmConfig], share: float
              ) -> GemmConfig | None:
        start = time.perf_counter()
        m, n, k, b = gemm_problem(group)
        mm = group.matmul
        dtype = mm.dtype
        a_shape, b_shape = mm.srcs[0].shape, mm.srcs[1].shape
        params = (Param("array", dtype, a_shape, "a", 0, row_major_strides(a_shape)),
                  Param("array", dtype, b_shape, "b", 1, row_major_strides(b_shape)))
        an = Node.make(Op.INPUT, dtype, a_shape, (), 0)
        bn = Node.make(Op.INPUT, dtype, b_shape, (), 1)
        node = Node.make(Op.MATMUL, dtype, mm.shape, (an, bn))
        graph = Graph(params, (node,))
        remaining = min(BUDGET_S * share, BUDGET_S - spent[0])
        # building a candidate costs ~0.3 s on an H200 (the unrolled 8x8 tiles): as many as
        # the budget pays for, timing included
        count = min(MAX_CANDIDATES, int((remaining - 0.1) / COMPILE_S))
        if count < 2:
            return None  # this call's tuning budget is spent: the heuristic decides
        units = info.limits.compute_units
        ranked = cands if cands and cands[0].mma else rank(cands, m, n, b, units)
        cands = [with_split(c, m, n, k, b, units) for c in ranked[:count]]  # (MMA spaces
        # come ordered by measurement: fusejit/codegen/gemm/mma.py)
        sources, kernels = [], []
        for i, cfg in enumerate(cands):
            g = Group("gemm", node.shape, (Store(node, Dest("output", 0)),), "tuning",
                      matmul=node, gemm_config=cfg)
            mod = SourceModule(graph, Plan((g,), ()), OpenCLTarget(), info.limits).build()
            kern = mod.kernels[0]
            if len(mod.kernels) > 1:  # split-K: time the slices' kernel (the sum is cheap)
                continue
            sources.append(mod.source.replace(kern.name + "(", f"fj_tune{i}("))
            kernels.append((i, kern))
        if not kernels:
            return None
        options = build_options(info)
        nvidia = "NVIDIA" in info.key
        if nvidia:
            options = [*options, "-cl-nv-verbose"]  # ptxas's register and spill report
        try:
            program = build_program(queue.context, "\n".join(sources), options, "gemm_tune")
        except Exception:  # noqa: BLE001 - a candidate the compiler rejects: no tuning
            return None
        usage = ptxas_usage(program, queue.device) if nvidia else {}
        rng = np.random.default_rng(0)
        bufs = [cla.to_device(queue, rng.standard_normal(s).astype(dtype))
                for s in (a_shape, b_shape)]
        out = cla.empty(queue, node.shape, dtype)
        best: tuple[float, GemmConfig] | None = None
        for i, kern in kernels:
            cfg = cands[i]
            if best is not None and time.perf_counter() - start > remaining:
                break
            regs, spills = usage.get(f"fj_tune{i}", (0, 0))
            if spills > SPILL_LIMIT:
                continue  # spilling more than a few words: never the fastest
            knl = getattr(program, f"fj_tune{i}")
            for j, arg in enumerate(kern.signature.args):
                role = getattr(arg, "role", "")
                knl.set_arg(j, out.base_data if role == "output" else
                            bufs[arg.index].base_data)
            cl.enqueue_nd_range_kernel(queue, knl, kern.global_size, kern.local_size)
            queue.finish()
            t0 = time.perf_counter()
            for _ in range(2):
                cl.enqueue_nd_range_kernel(queue, knl, kern.global_size, kern.local_size)
            queue.finish()
            t = (time.perf_counter() - t0) / 2
            if best is None or t < best[0]:
                best = (t, cfg)
        spent[0] += time.perf_counter() - start
        if best is None:
            return None
        cfg = replace(best[1], why=f"tuned now over {len(cands)} candidates "
                                   f"({best[0] * 1e3:.3f} ms), kept under {key!r}")
        remember(key, replace(cfg, why=""))
        return cfg
    return tune


# -- persisted tuning results ----------------------------------------------------------------------

_lock = threading.Lock()
_memory: dict[str, dict] = {}
_loaded = False


def _cache_file() -> Path | None:
    return autotune.cache_file("gemm.json")  # (None: FUSEJIT_CACHE_DIR=0)


def lookup(key: str) -> GemmConfig | None:
    """The configuration tuned before under ``key`` (this process, or the file), or None."""
    global _loaded
    with _lock:
        if not _loaded:
            _loaded = True
            _memory.update(_read())
        found = _memory.get(key)
    if found is None:
        return None
    if not _well_formed(found):  # written by another version, or a corrupt file: tune again
        return None
    return GemmConfig(**found)


def _read() -> dict[str, dict]:
    """gemm.json's entries that are JSON objects; an unreadable file (not a regular file,
    too large, not JSON) is one warning and is rewritten after the next tuning."""
    path = _cache_file()
    if path is None:
        return {}
    try:
        raw = cache.read_regular(path, limit=1 << 24)
        stored = json.loads(raw) if raw is not None else {}
    except (OSError, ValueError) as exc:
        cache.warn_once(f"gemm:{path}", f"fusejit: ignoring the unreadable GEMM tuning file "
                                        f"{path} ({exc}); it is rewritten after tuning")
        return {}
    if not isinstance(stored, dict):
        return {}
    return {k: v for k, v in stored.items() if isinstance(k, str) and isinstance(v, dict)}


def reject(key: str, why: str) -> None:
    """A stored configuration that cannot run the product it was looked up for: one warning,
    and the entry is forgotten (tuned again, or the heuristic, and rewritten)."""
    with _lock:
        _memory.pop(key, None)
    cache.warn_once(f"gemm:{key}", f"fusejit: ignoring the GEMM configuration stored under "
                                   f"{key!r} in {_cache_file()}: {why}")


# GemmConfig's fields that are not positive ints, by their type
_FIELD_TYPES = {"local": bool, "why": str, "mma": str, "mma_opts": str}


def _well_formed(found: dict) -> bool:
    names = {f.name for f in dataclasses.fields(GemmConfig)}
    if not set(found) <= names or not {"mwg", "nwg", "kwg", "mdimc", "ndimc"} <= set(found):
        return False
    for k, v in found.items():
        t = _FIELD_TYPES.get(k, int)
        if type(v) is not t or (t is int and v < 1):
            return False
    if found.get("mma", "") not in ("", "tf32", "3xtf32", "f16"):
        return False
    return found["mwg"] % found["mdimc"] == 0 and found["nwg"] % found["ndimc"] == 0


def remember(key: str, cfg: GemmConfig) -> None:
    with _lock:
        _memory[key] = asdict(cfg)
        path = _cache_file()
        if path is not None:
            autotune.write_json(path, _memory)


_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_USED = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores")


def ptxas_usage(program: cl.Program, device: cl.Device) -> dict[str, tuple[int, int]]:
    """Registers and spilled bytes per kernel from NVIDIA's -cl-nv-verbose build log."""
    try:
        log = program.get_build_info(device, cl.program_build_info.LOG)
    except cl.Error:
        return {}
    return parse_ptxas(log)


def parse_ptxas(log: str) -> dict[str, tuple[int, int]]:
    """(registers, bytes of spill stores) per entry function of a ptxas verbose log."""
    out: dict[str, tuple[int, int]] = {}
    current = None
    regs = spills = 0
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            if current:
                out[current] = (regs, spills)
            current, regs, spills = m.group(1), 0, 0
            continue
        if (m := _USED.search(line)):
            regs = int(m.group(1))
        if (m := _SPILL.search(line)):
            spills = max(spills, int(m.group(1)))
    if current:
        out[current] = (regs, spills)
    return out
