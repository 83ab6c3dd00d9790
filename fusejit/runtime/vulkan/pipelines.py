"""Compute pipelines shared by source: one shader module, bind-group layout and pipeline per
(device, shader source, binding types), whatever call signature asks for it.

A dynamic function traced again for a new extent generates the same source (its extents are
uniform-block scalars) and so reuses the pipeline; only a new source builds one (naga's GLSL
front end, then the driver's pipeline compile), and only those count as compiles in
``f.cache_info()``. A kernel compiled as WGSL keeps its translation (fusejit's own, in Python:
35-60 ms for a row kernel on a 2-core host) in the disk cache, so a warm process skips it; what
is left of a build is naga's and the driver's (wgpu-native 0.32 has no pipeline cache and hands
out no SPIR-V to keep; the driver's own disk cache, Mesa's on lavapipe, keeps its compile). What differs per executable (the uniform buffer, the bind groups, the
dispatch geometry) stays with the executable (executable.py's ``_Pipeline``).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import Any

from fusejit._version import __version__
from fusejit.errors import KernelBuildError
from fusejit.runtime import cache
from fusejit.targets.wgsl.translate import translate
from fusejit.runtime.vulkan.trusted import create_module

MAX_PIPELINES = 512  # per device, least recently used dropped
_TRANSLATION = ("glsl-to-wgsl", "1")  # the disk-cache key's options: bump "1" to drop entries
_lock = threading.Lock()


def wgsl_needed(device: Any, source: str) -> bool:
    """Is ``source`` compiled as WGSL on ``device``? Kernels with a barrier or 64-bit integers
    are (targets/wgsl/translate.py says why), unless the device keeps GLSL only (which then has no 64-bit
    integers); in mode "all" every kernel is (the tests run the op catalog so, to check the
    translation)."""
    mode = device.wgsl_mode
    return mode == "all" or (mode == "barriers" and (
        "barrier();" in source or "int64_t" in source))


def wgsl_mode() -> str:
    """``FUSEJIT_VULKAN_WGSL`` when a device opens: "barriers" (the default: kernels with
    barriers compile as WGSL), "all", or "off" (0: GLSL only, so barriers synchronise 32-lane
    teams: see VulkanDevice)."""
    value = os.environ.get("FUSEJIT_VULKAN_WGSL", "1").lower()
    return {"0": "off", "off": "off", "all": "all"}.get(value, "barriers")


def pipeline(device: Any, source: str, kernel_name: str, entries: list[dict[str, Any]],
             name: str) -> tuple[Any, Any, bool]:
    """(bind-group layout, pipeline, built now) for ``source`` with bindings ``entries``."""
    key = (source, tuple((e["binding"], str(e["buffer"]["type"])) for e in entries))
    with _lock:
        made: OrderedDict = device.__dict__.setdefault("_fusejit_pipelines", OrderedDict())
        hit = made.get(key)
        if hit is not None:
            made.move_to_end(key)
            return hit[0], hit[1], False
    dev = device.device
    code, compiler = source, "Vulkan (GLSL, naga)"
    try:
        if wgsl_needed(device, source):
            compiler = "Vulkan (WGSL, naga)"
            code = wgsl_of(source)
            module = create_module(dev, code, kernel_name, wgsl=True)
        else:
            # naga's GLSL frontend compiles a compute shader when the label names "comp"
            module = create_module(dev, source, f"{kernel_name}.comp")
    except Exception as exc:  # noqa: BLE001 - wgpu raises GPUValidationError & co.
        raise KernelBuildError(name, code, str(exc), compiler) from None
    layout = dev.create_bind_group_layout(entries=entries)
    try:
        pipe = dev.create_compute_pipeline(
            layout=dev.create_pipeline_layout(bind_group_layouts=[layout]),
            compute={"module": module, "entry_point": "main"})
    except Exception as exc:  # noqa: BLE001
        raise KernelBuildError(name, code, str(exc), compiler) from None
    with _lock:
        hit = made.setdefault(key, (layout, pipe))  # (another thread may have built it too)
        while len(made) > MAX_PIPELINES:
            made.popitem(last=False)
    return hit[0], hit[1], hit[1] is pipe


def translation_key(source: str) -> cache.ProgramKey:
    """The disk-cache key of ``source``'s WGSL: the source and fusejit's version (the
    translation is fusejit's, the same for every device)."""
    return cache.ProgramKey(hashlib.sha256(source.encode()).hexdigest(), _TRANSLATION,
                            "fusejit WGSL translation", "", "", __version__)


def wgsl_of(source: str) -> str:
    """``translate(source)``, from the disk cache where a process translated it before (a
    corrupt or unreadable entry is translated again and rewritten: cache.py)."""
    store = cache.program_cache()
    key = translation_key(source) if store is not None else None
    entry = store.get(key) if store is not None else None
    if entry is not None:
        try:
            return entry.binary.decode("utf-8")
        except UnicodeDecodeError:
            store.reject(key, "not UTF-8 text")
    code = translate(source)
    if store is not None:
        store.put(key, cache.Entry(code.encode("utf-8"), ("main",)))
    return code
