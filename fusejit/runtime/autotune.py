"""Autotuning of launch parameters for large elementwise kernels.

An elementwise kernel is a grid-stride loop over vectors, so its work-group size and the number
of vectors each work-item handles (how many work-items are launched) can change without
recompiling. On the first large launch of a kernel on a device, a bounded set of candidates is
timed on the call's own arguments (elementwise kernels that do not write their inputs are
idempotent, so re-running them is harmless) and the fastest is kept: in memory, and in a JSON file
in the user cache directory so the next process starts tuned. Small launches never tune.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyopencl as cl

from fusejit.runtime import cache

MIN_ITEMS = 1 << 18  # vectors; below this a launch is dominated by overhead, not the config
_lock = threading.Lock()
_memory: dict[str, tuple[int, int | None]] = {}
_loaded = False


@dataclass(frozen=True)
class LaunchConfig:
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None


def enabled(flag: bool | None) -> bool:
    if flag is not None:
        return flag
    return os.environ.get("FUSEJIT_AUTOTUNE", "1") not in ("0", "", "false")


def cache_file(name: str = "autotune.json") -> Path | None:
    """A file in fusejit's cache directory (``FUSEJIT_CACHE_DIR``), or None when it is off."""
    root = cache.cache_dir()
    return None if root is None else root / name


def _valid(value: object) -> bool:
    """A stored (vectors per work-item, work-group size) pair of the shape ``candidates``
    makes; whether it suits the device is checked again where it is used."""
    if not (isinstance(value, list) and len(value) == 2):
        return False
    per_item, local = value
    ok_int = (lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1 << 16)
    return ok_int(per_item) and (local is None or ok_int(local))


def _load() -> None:
    """Read the tuning file once per process; anything malformed is ignored (one warning)
    and replaced at the next save."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    path = cache_file()
    if path is None:
        return
    try:
        raw = cache.read_regular(path, limit=1 << 24)
        if raw is None:
            return
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
    except (OSError, ValueError) as exc:
        cache.warn_once(f"autotune:{path}", f"fusejit: ignoring the unreadable autotune file "
                                            f"{path} ({exc}); it is rewritten after tuning")
        return
    bad = 0
    for k, value in data.items():
        if _valid(value):
            _memory[k] = (value[0], value[1])
        else:
            bad += 1
    if bad:
        cache.warn_once(f"autotune:{path}", f"fusejit: ignoring {bad} malformed entries of "
                                            f"the autotune file {path}")


def _save() -> None:
    path = cache_file()
    if path is None:
        return
    write_json(path, {k: list(v) for k, v in _memory.items()})
    while len(_memory) > MAX_ENTRIES:
        del _memory[next(iter(_memory))]


MAX_ENTRIES = 4096  # per tuning file: the oldest go first (the file stays well under its read
# bound, 16 MiB, so it is never refused for its size)


def write_json(path: Path, data: dict) -> None:
    """Replace ``path`` with ``data`` safely (runtime/cache.atomic_write), dropping the oldest
    entries past MAX_ENTRIES (from ``data`` too); a read-only home keeps results in memory."""
    for k in list(data)[:max(0, len(data) - MAX_ENTRIES)]:
        del data[k]
    try:
        cache.atomic_write(path, json.dumps(data, indent=0, sort_keys=True).encode())
    except OSError as exc:
        cache.disk_failed(path.parent, exc)


def key(device_key: str, program_source: str, kernel: str, items: int) -> str:
    """A kernel's tuning key: the device, its whole program (as the program cache keys it)
    and its name in it, and the element count."""
    digest = hashlib.sha256(program_source.encode()).hexdigest()[:24]
    return f"{device_key}|{digest}|{kernel}|{items}"


def candidates(items: int, max_wg: int, is_gpu: bool) -> list[tuple[int, int | None]]:
    """(vectors per work-item, work-group size) pairs worth trying."""
    if is_gpu:
        locals_ = [wg for wg in (128, 256, 512, 1024) if wg <= max_wg]
        per_item = (1, 2, 4, 8)
    else:  # PoCL: one vector per work-item (its work-item loops defeat grid-stride loops), or
        # 2-4 in work-groups of 4096: fewer work-items, less loop overhead per vector, which a
        # memory-bound kernel gains (x * 1.5 over 2^22 floats, 2 cores: 2.05 -> 1.43 ms)
        pairs = [(1, None), (1, 64), (1, 256)] + [(p, 4096) for p in (2, 4) if max_wg >= 4096]
        return [(p, wg) for p, wg in pairs if math.ceil(items / p) >= (wg or 1)]
    return [(p, wg) for p in per_item for wg in locals_ if math.ceil(items / p) >= (wg or 1)]


def config_for(items: int, per_item: int, local: int | None) -> LaunchConfig:
    n = math.ceil(items / per_item)
    if local:
        n = (n + local - 1) // local * local
    return LaunchConfig((n,), (local,) if local else None)


def tune(queue: cl.CommandQueue, kernel: cl.Kernel, tkey: str, items: int, max_wg: int,
         is_gpu: bool) -> LaunchConfig:
    """The best launch configuration for an already argument-bound kernel."""
    if not is_gpu:  # (the CPU's work-groups of 4096: within what this kernel allows)
        max_wg = min(max_wg, kernel.get_work_group_info(
            cl.kernel_work_group_info.WORK_GROUP_SIZE, queue.device))
    with _lock:
        _load()
        known = _memory.get(tkey)
    if known is not None and known in candidates(items, max_wg, is_gpu):
        return config_for(items, *known)  # (an entry another device or version wrote is not)
    # three rounds over the candidates, each kept at its fastest: round by round, so that the
    # load of a shared machine (PoCL's cores) falls on all of them alike
    cands = candidates(items, max_wg, is_gpu)
    fastest = [math.inf] * len(cands)
    for _ in range(3):
        for i, cand in enumerate(cands):
            cfg = config_for(items, *cand)
            queue.finish()
            t0 = time.perf_counter()
            cl.enqueue_nd_range_kernel(queue, kernel, cfg.global_size, cfg.local_size)
            queue.finish()
            fastest[i] = min(fastest[i], time.perf_counter() - t0)
    best = min(zip(fastest, cands), key=lambda tc: tc[0]) if cands else None
    if best is None:  # no candidate fits (tiny work-group limit): the untuned launch
        return config_for(items, 1, None)
    with _lock:
        _memory[tkey] = best[1]
        _save()
    return config_for(items, *best[1])
