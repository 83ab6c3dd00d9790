"""Bundles for the CUDA device: ``fusejit.export`` of signatures that run on CUDA (abstract
``ShapeDtype(..., device="cuda")`` arguments, CUDA arrays, or NumPy ones under
``FUSEJIT_DEVICE=cuda``), and the loaded bundle's calls.

Exporting needs no GPU: each signature is lowered for the architecture of the CUDA device it
would run on (``FUSEJIT_CUDA_ARCH``, else the GPU's, else sm_90a) and NVRTC compiles its cubin
for that architecture, stored with the entry (the same JSON as OpenCL's, compile/bundle_json.py,
the same framing, checksum and signature, compile/aot.py). The manifest says ``"device":
"cuda"`` and the architecture: a loaded bundle runs on a GPU of that architecture only (its
kernels were chosen and compiled for it: wgmma exists on sm_90a alone) and refuses any other,
and OpenCL arrays, by name; an OpenCL bundle refuses CUDA arrays by name. As for OpenCL, an
untrusted bundle's source is compiled here (through the disk cache) and its cubins are never
loaded; with the signing key or ``trust=True`` a stored cubin whose key matches is loaded as
it is. One device a bundle: export OpenCL and CUDA signatures to separate files.
"""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyopencl.array as cla

from fusejit.compile import bundle_json, bundle_trust
from fusejit.compile.aot_dynamic import BundleError
from fusejit.frontend.pytree import tree_unflatten
from fusejit.ir.graph import format_graph
from fusejit.runtime.backend import DeviceArray, adopt, backend_of


def on_cuda(queue: Any) -> bool:
    """Does a signature whose call runs on ``queue`` run on the CUDA device?"""
    return getattr(backend_of(queue), "name", "") == "cuda"


def binary_key(source: str, arch: str) -> dict[str, Any]:
    """What a stored cubin was built from (checked against the entry by bundle_trust)."""
    from fusejit.runtime.cuda.build import OPTIONS, nvrtc_version

    return {"source_sha256": hashlib.sha256(source.encode()).hexdigest(), "arch": arch,
            "options": list(OPTIONS), "compiler": f"NVRTC {nvrtc_version()}"}


def export_one(f: Any, flat: list[Any], kwnames: tuple[str, ...], key: Any, queue: Any,
               blob: Any) -> dict[str, Any]:
    """The bundle entry of one CUDA signature, with its cubin for ``queue.arch`` (NVRTC, through
    the disk cache: no GPU needed)."""
    from fusejit.runtime.cuda.build import OPTIONS, build_cached

    lowered, outputs, treedef, constants = f._lower(key, flat, kwnames, queue)
    module = lowered.module
    compiled = SimpleNamespace(
        graph=lowered.graph, module=module, treedef=treedef, outputs=outputs,
        temps=[(tuple(n.shape), n.dtype) for n in lowered.plan.temps], constants=constants,
        index_dtype=np.dtype(np.int64 if module.wide else np.int32))
    entry = bundle_json.entry_of(compiled, key.specs, blob, format_graph(lowered.graph),
                                 list(OPTIONS))
    cubin, _ = build_cached(module.source, queue.arch, getattr(f, "__qualname__", "fn"))
    entry["device"], entry["arch"] = "cuda", queue.arch
    entry["binaries"] = [{"key": binary_key(module.source, queue.arch), "blob": blob(cubin)}]
    return entry


def bundle_device(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The manifest's device fields: {} for OpenCL, the architecture for CUDA; BundleError for
    a mixture (a bundle runs on one kind of device)."""
    archs = {e.get("arch") for e in entries if e.get("device") == "cuda"}
    if not archs:
        return {}
    if len(archs) > 1 or any(e.get("device") != "cuda" for e in entries):
        raise BundleError("a bundle holds signatures for one device: export the OpenCL and "
                          "CUDA signatures (and each CUDA architecture) to separate bundles")
    return {"device": "cuda", "arch": archs.pop()}


def refuse_cuda_arrays(loaded: Any, args: tuple) -> None:
    """An OpenCL bundle called with CUDA arrays: BundleError naming what to export."""
    from fusejit.runtime.cuda.array import Array, is_foreign_cuda

    if any(isinstance(a, Array) or is_foreign_cuda(a) for a in args):
        raise BundleError(f"bundle {loaded.__name__} was exported for OpenCL and got CUDA "
                          "arrays: export the function for CUDA (ShapeDtype(..., "
                          "device='cuda'), or under FUSEJIT_DEVICE=cuda)")


def call(loaded: Any, args: tuple) -> Any:
    """A call of a CUDA bundle: CUDA arrays (torch, CuPy, JAX, fusejit's) adopted without a
    copy, matched against the entries, run on their GPU (NumPy-only calls: the default one)."""
    from fusejit.runtime.cuda.array import Array
    from fusejit.runtime.cuda.device import default_device

    flat = tuple(adopt(a, f"argument {k}") for k, a in enumerate(args))
    for k, a in enumerate(flat):
        if isinstance(a, (DeviceArray, cla.Array)) and not isinstance(a, Array):
            raise BundleError(f"bundle {loaded.__name__} was exported for CUDA; argument {k} "
                              f"is a {type(a).__module__}.{type(a).__name__}: pass CUDA arrays "
                              "(torch, CuPy, JAX) or NumPy arrays")
    i, n = loaded._match(flat)
    dev = next((a.device for a in flat if isinstance(a, Array)), None) or default_device()
    exe = executable(loaded, i, n, dev)
    return tree_unflatten(exe.treedef, exe.run(list(flat), dev))


def executable(loaded: Any, i: int, n: tuple[int, ...] | None, dev: Any) -> Any:
    """Entry ``i`` (at extents ``n``) as a CUDA executable on ``dev``, made once; BundleError
    on a GPU of another architecture."""
    key = (i, n, dev)
    exe = loaded._exes.get(key)
    if exe is not None:
        return exe
    e = loaded._entries[i] if n is None else loaded._instance(i, n)
    if e.get("arch") != dev.arch:
        raise BundleError(
            f"bundle {loaded.__name__} was exported for CUDA {e.get('arch')}, and this CUDA "
            f"device ({dev.name}) is {dev.arch}: export it again for {dev.arch} "
            f"(FUSEJIT_CUDA_ARCH={dev.arch})")
    dev.require_gpu()
    bundle_trust.check_entry(e, loaded._blobs, loaded.__name__)
    with loaded._lock:
        exe = loaded._exes.get(key)
        if exe is None:
            exe = loaded._exes[key] = _made(loaded, e, dev)
    return exe


def _made(loaded: Any, e: dict[str, Any], dev: Any) -> Any:
    from fusejit.runtime.cuda.build import remember
    from fusejit.runtime.cuda.executable import CUDAExecutable
    from fusejit.runtime.executable import OutSpec

    want = binary_key(e["source"], dev.arch)
    stored = next((b for b in e["binaries"] if b["key"] == want), None) \
        if loaded.trusted else None  # (untrusted: no machine code from the file runs)
    if stored is not None:
        remember(e["source"], dev.arch, loaded._blobs[stored["blob"]])
        loaded.binary_loads += 1
    graph, module, constants, host_mode, temps = bundle_json.parts_from(e, loaded._blobs)
    plan = SimpleNamespace(temps=[SimpleNamespace(shape=s, dtype=d) for s, d in temps])
    lowered = SimpleNamespace(graph=graph, module=module, plan=plan)
    outputs = [OutSpec(k, int(x)) for k, x in e["outputs"]]
    exe = CUDAExecutable(lowered, outputs, bundle_json._treedef_from(e["treedef"]), constants,
                         dev, host_mode, loaded.__name__)
    loaded.builds += exe.built_how == "compiled"
    return exe

