"""Ahead of time: ``export`` of compiled signatures to a bundle, ``load``.

``fusejit.export(f, signatures, path)`` writes one self-contained file (the same framing as the
disk cache: magic, length, SHA-256; JSON and bytes, no pickle, no Python code): per signature
the argument specs, the graph (as text, for reading), the kernel source, the launch metadata
(kernels with their typed arguments and geometry, outputs, temporaries, captured constants) and
the device binary of every device it was built for (and, with ``key=``, an HMAC of it all).
``fusejit.load(path)`` returns a callable that needs neither the Python function nor a trace.
What it believes of the file is compile/bundle_trust.py's: by default its metadata are checked
and its source is built here (through the disk cache), its binaries never loaded; with the
signing key (``load(path, key=)``) or ``trust=True``, on a device whose key (device, driver,
options, source) matches a stored binary nothing is compiled.

A signature with None dimensions exports as entries that serve every extent (Nones at one
position from the last axis are one extent: a batch size, a row length): it is lowered at
a few points with runtime-extent kernels (the source must come out the same, else
BundleError: e.g. a reduction over a None axis other than the row bakes its length in), and
its launch metadata are stored as multilinear formulas of the extents
(fusejit/compile/aot_dynamic.py). The loaded callable instantiates them for each call's extents, on
one program: no trace, no build. A None row length of a function that reduces rows (softmax,
layernorm) gives one entry per power-of-two row bucket up to ``max_row_length`` (default
4096; on GPUs two, the bucket's own length having its own program), every one built at
export, so a loaded bundle compiles nothing for any row length up to the bound (longer rows
are a named error). Extents 0 and 1, and extents the kernels' vector steps do not divide,
are named errors.
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from fusejit._version import __version__
from fusejit.compile import aot_cuda, bundle_json, bundle_trust
from fusejit.compile.bundle_json import (
    _spec_json,
    _treedef_from,
    parts_from,
)
from fusejit.compile.aot_dynamic import (
    BundleError,
    buckets,
    dynamic_dims,
    export_dynamic,
    extents_of,
    in_range,
    instantiate,
    instantiate_args,
    upgrade,
)
from fusejit.ir.graph import format_graph
from fusejit.frontend.keys import static_key
from fusejit.frontend.pytree import tree_unflatten
from fusejit.runtime import cache
from fusejit.runtime.opencl.build import build_cached, from_binary, program_key
from fusejit.runtime.opencl.devices import default_queue, device_info
from fusejit.runtime.executable import OutSpec
from fusejit.runtime.opencl.executable import Executable
from fusejit.compile.signature import (
    StaticSpec,
    arg_spec,
)

MAGIC = b"FJBUNDL1"
FORMAT = 3  # 2: entries may be templates of a dynamic extent, 3: of several (compile/aot_dynamic.py)
_HEADER = struct.Struct("<8sQ32s")


# -- export ---------------------------------------------------------------------------------------


def export(f: Any, signatures: Iterable[Sequence[Any]], path: str | Path, *,
           max_row_length: int = 4096, key: bytes | str | None = None) -> Path:
    """Compile ``f`` for each signature (a tuple of ShapeDtype, arrays and scalars, as f's
    positional arguments; ShapeDtypes may have None dimensions) and write the bundle to
    ``path``; see the module docstring. A None row length (the last axis of a function that
    reduces rows) is served up to ``max_row_length``, every bucket built now. ``key``: sign
    the bundle (HMAC-SHA256, compile/bundle_trust.py), so that ``load(path, key=key)`` knows
    it is yours and loads its binaries. Returns ``path``."""
    mac_key = bundle_trust.key_bytes(key)
    buckets(max_row_length)  # (a named error for a bad bound, whatever the signatures)
    entries, blobs = [], []

    def blob(data: bytes) -> int:
        blobs.append(bytes(data))
        return len(blobs) - 1

    for sig in signatures:
        sig = tuple(sig)
        made = export_dynamic(f, sig, blobs, max_row_length, _export_one) \
            if dynamic_dims(sig) else [_export_one(f, sig, blob)]
        for entry, exe, queue in made:
            if exe is not None:  # (CUDA entries come with their cubins: aot_cuda.py)
                binary = exe.program.get_info(cl.program_info.BINARIES)[0]
                entry["binaries"] = [{"key": program_key(queue.device, exe.module.source,
                                                         _options(exe)).as_json(),
                                      "blob": blob(binary)}] if binary else []
            entries.append(entry)
    manifest = json.dumps({"format": FORMAT, "fusejit": __version__,
                           "name": getattr(f, "__qualname__", "function"), "entries": entries,
                           "blobs": [len(b) for b in blobs],
                           **aot_cuda.bundle_device(entries)}, sort_keys=True).encode()
    payload = struct.pack("<I", len(manifest)) + manifest + b"".join(blobs)
    data = _HEADER.pack(MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload
    if mac_key is not None:
        data = bundle_trust.sign(data, mac_key)
    path = Path(path)
    cache.atomic_write(path, data)
    return path


def _export_one(f: Any, sig: tuple, blob: Any) -> tuple[dict[str, Any], Executable | None, Any]:
    flat, kwnames, key, queue = f._flatten(sig, {})
    if aot_cuda.on_cuda(queue):
        return aot_cuda.export_one(f, flat, kwnames, key, queue, blob), None, queue
    compiled = f._compile(key, flat, kwnames, queue)
    exe = compiled.executable
    return entry_of(exe, key.specs, blob, None if compiled.lowered is None else
                    format_graph(compiled.lowered.graph)), exe, queue


def entry_of(exe: Executable, specs: Sequence[Any], blob: Any, graph_text: str | None
             ) -> dict[str, Any]:
    """``bundle_json.entry_of`` with the OpenCL build's options."""
    return bundle_json.entry_of(exe, specs, blob, graph_text, _options(exe))


def _options(exe: Executable) -> list[str]:
    from fusejit.runtime.opencl.build import build_options

    return build_options(exe.info)


# -- load -----------------------------------------------------------------------------------------


def load(path: str | Path, *, trust: bool = False, key: bytes | str | None = None
         ) -> Loaded:
    """The exported function of the bundle at ``path`` (see the module docstring).

    Untrusted by default (compile/bundle_trust.py): its OpenCL source is compiled here and its
    metadata are checked, its native binaries are never loaded. ``key``: the bundle must carry
    an HMAC made with it (``export(..., key=)``); then, as with ``trust=True``, its binaries
    for this device are loaded. Anything that is not a whole, consistent bundle is a
    BundleError naming ``path``."""
    mac_key = bundle_trust.key_bytes(key)
    try:
        data = cache.read_regular(Path(path), follow=True)
    except (OSError, ValueError) as exc:
        raise BundleError(f"cannot read a bundle from {path}: {exc}") from None
    if data is None:
        raise BundleError(f"no bundle at {path}")
    if len(data) < _HEADER.size + 4:
        raise BundleError(f"{path} is not a fusejit bundle (truncated)")
    magic, length, digest = _HEADER.unpack_from(data)
    if magic != MAGIC or length > len(data) - _HEADER.size:
        raise BundleError(f"{path} is not a whole fusejit bundle (bad magic or length): "
                          "export it again")
    data, mac = bundle_trust.split_mac(data, _HEADER.size + length, path)
    payload = data[_HEADER.size:]
    if hashlib.sha256(payload).digest() != digest:
        raise BundleError(f"{path} is not a whole fusejit bundle (bad checksum): export it "
                          "again")
    if mac_key is not None:
        bundle_trust.verify(data, mac, mac_key, path)
    (mlen,) = struct.unpack_from("<I", payload)
    try:
        manifest = json.loads(payload[4:4 + mlen])
        if not isinstance(manifest, dict):
            raise TypeError("not a JSON object")
        if manifest.get("format") not in (1, 2, FORMAT):
            raise BundleError(f"{path} has bundle format {manifest.get('format')}, this "
                              f"fusejit reads {FORMAT}")
        blobs, at = [], 4 + mlen
        for n in manifest["blobs"]:
            if type(n) is not int or n < 0:
                raise ValueError(f"blob length {n!r}")
            blobs.append(payload[at:at + n])
            at += n
        if at != len(payload):
            raise ValueError("blob lengths do not add up to the payload")
        return Loaded(manifest, blobs, trusted=trust or mac_key is not None)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BundleError(f"{path}: unreadable manifest ({exc})") from None


class Loaded:
    """A loaded bundle: call it like the exported function. ``builds`` counts programs
    compiled from the stored source, ``binary_loads`` programs made from a stored binary;
    there are never traces. A signature exported with a None dimension runs every extent
    its kernels fit (fusejit/compile/aot_dynamic.py) on one program."""

    traces = 0
    MAX_EXTENTS = 256  # executables (per signature, extent, context) and instances kept

    def __init__(self, manifest: dict[str, Any], blobs: list[bytes], trusted: bool = False
                 ) -> None:
        self.__name__ = str(manifest.get("name", "loaded"))
        self.device = manifest.get("device", "opencl")  # (CUDA bundles: aot_cuda.py)
        self.trusted = trusted  # whether its native binaries may be loaded
        self._entries = [upgrade(e) for e in manifest["entries"]]
        self._blobs = blobs
        self._exes: dict[tuple, Executable] = {}
        self._programs: dict[tuple[int, cl.Context], cl.Program] = {}
        self._instances: dict[tuple[int, tuple], dict[str, Any] | BundleError] = {}
        self._lock = threading.Lock()
        self.builds = 0
        self.binary_loads = 0

    def __repr__(self) -> str:
        return f"<fusejit bundle {self.__name__!r}: {len(self._entries)} signatures>"

    def __call__(self, *args: Any) -> Any:
        if self.device == "cuda":
            return aot_cuda.call(self, args)
        try:
            i, n = self._match(args)
        except BundleError as refused:
            aot_cuda.refuse_cuda_arrays(self, args)
            for placed in self._uploaded(args):
                try:
                    i, n = self._match(placed)
                except BundleError:
                    continue
                return self._call_uploaded(args, placed, i, n)
            raise refused from None
        queue = next((a.queue for a in args if isinstance(a, cla.Array)), None) or \
            default_queue()
        exe = self._executable(i, n, queue)
        return tree_unflatten(exe.treedef, exe.launch(list(args), queue))

    def _uploaded(self, args: tuple) -> Iterable[tuple]:
        """NumPy arguments (none of them device arrays) placed as signatures exported with
        device arrays take them, as the fused function takes either: per such signature, its
        device positions' NumPy arrays uploaded (C-contiguous, to the default queue)."""
        if any(isinstance(a, cla.Array) for a in args) or not any(
                isinstance(a, np.ndarray) for a in args):
            return
        seen = set()
        for e in self._entries:
            where = tuple(k for k, (stored, a) in enumerate(zip(e["args"], args))
                          if stored["kind"] == "device" and isinstance(a, np.ndarray))
            if len(e["args"]) != len(args) or not where or where in seen:
                continue
            seen.add(where)
            queue = default_queue()
            yield tuple(cla.to_device(queue, np.ascontiguousarray(a)) if k in where else a
                        for k, a in enumerate(args))

    def _call_uploaded(self, args: tuple, placed: tuple, i: int,
                       n: tuple[int, ...] | None) -> Any:
        """Entry ``i`` (a device signature) run for NumPy arguments: NumPy results, and the
        arguments the function writes in place written back, as a NumPy call of the function
        gives."""
        queue = default_queue()
        exe = self._executable(i, n, queue)
        leaves = exe.launch(list(placed), queue)
        for p in {p for p, _ in exe.graph.writes}:
            k = exe.graph.params[p].source
            if isinstance(args[k], np.ndarray):
                np.copyto(args[k], placed[k].get(queue), casting="unsafe")
        host = []
        for leaf, spec in zip(leaves, exe.outputs):
            if spec.kind == "arg":
                host.append(args[spec.index])
            elif isinstance(leaf, cla.Array):
                value = leaf.get(queue)
                host.append(value[()] if value.ndim == 0 else value)
            else:
                host.append(leaf)
        return tree_unflatten(exe.treedef, host)

    def _match(self, args: tuple) -> tuple[int, tuple[int, ...] | None]:
        """The first entry the arguments match and the dynamic extents they give it (None
        for a concrete entry). When only a dynamic entry's extents do not fit (and no later
        entry matches), the BundleError that names them is raised."""
        refused, rows = None, []
        for i, entry in enumerate(self._entries):
            if len(entry["args"]) != len(args):
                continue
            xs = None
            stored = entry["args"]
            if "dynamic" in entry:
                xs = extents_of(entry, args)
                if xs is None:
                    continue
                rows += [r for r in entry["dynamic"]["ranges"] if r is not None]
                if not in_range(entry, xs):
                    continue
                try:
                    if min(xs) < 2:  # (a size-0 array's spec differs anyway: refuse it by name)
                        self._instance(i, xs)
                    stored = instantiate_args(stored, xs)
                except BundleError as exc:
                    refused = refused or exc
                    continue
            if all(_matches(e, a) for e, a in zip(stored, args)):
                if xs is not None:
                    try:
                        self._instance(i, xs)
                    except BundleError as exc:
                        refused = refused or exc
                        continue
                return i, xs
        if refused is not None:
            raise refused
        given = ", ".join(_describe_value(a) for a in args)
        served = ""
        if rows:
            lo, his = min(r[0] for r in rows), [r[1] for r in rows]
            served = f" (rows of {lo} or more elements: add a concrete signature for the " \
                "others)" if None in his else f" (rows of {lo} to {max(his)} elements: " \
                "export with a larger max_row_length, or add a concrete signature for rows " \
                "outside it)"
        raise BundleError(f"no exported signature of {self.__name__} matches ({given}){served}; "
                          "exported: " + "; ".join(dict.fromkeys(
                              "(" + ", ".join(map(_describe, e["args"])) + ")"
                              for e in self._entries)))

    def _instance(self, i: int, xs: tuple[int, ...]) -> dict[str, Any]:
        """Dynamic entry i at extents xs (fusejit/compile/aot_dynamic.py), made once; BundleError
        when its kernels cannot run them."""
        got = self._instances.get((i, xs))
        if got is None:
            try:
                got = instantiate(self._entries[i], xs, self.__name__)
            except BundleError as exc:
                got = exc
            if len(self._instances) >= self.MAX_EXTENTS:
                self._instances.pop(next(iter(self._instances)))
            self._instances[(i, xs)] = got
        if isinstance(got, BundleError):
            raise got
        return got

    def _executable(self, i: int, n: tuple[int, ...] | None, queue: cl.CommandQueue
                    ) -> Executable:
        key = (i, n, queue.context)
        exe = self._exes.get(key)
        if exe is None:
            with self._lock:
                exe = self._exes.get(key)
                if exe is None:
                    e = self._entries[i] if n is None else self._instance(i, n)
                    bundle_trust.check_entry(e, self._blobs, self.__name__)
                    exe = executable_from(e, self._blobs, self._program(i, queue),
                                          device_info(queue.device), autotune=False)
                    if len(self._exes) >= self.MAX_EXTENTS:
                        self._exes.pop(next(iter(self._exes)))
                    self._exes[key] = exe
        return exe

    def _program(self, i: int, queue: cl.CommandQueue) -> cl.Program:
        """Entry i's program on this queue's context, made once: from the stored binary when
        its key matches this device, else built from the stored source."""
        program = self._programs.get((i, queue.context))
        if program is not None:
            return program
        e = self._entries[i]
        ctx, device = queue.context, queue.device
        source, options = e["source"], list(e["options"])
        want = program_key(device, source, options).as_json()
        stored = next((b for b in e["binaries"] if b["key"] == want), None) \
            if self.trusted else None  # (untrusted: no machine code from the file runs)
        if stored is not None and len(ctx.devices) == 1:
            try:
                program = from_binary(ctx, device, self._blobs[stored["blob"]], options)
                self.binary_loads += 1
            except cl.Error:
                program = None  # a driver that refuses its own binary: rebuild from source
        if program is None:
            program, how = build_cached(ctx, source, options, self.__name__)
            self.builds += how == "compiled"
            self.binary_loads += how != "compiled"
        self._programs[(i, ctx)] = program
        return program


def executable_from(e: dict[str, Any], blobs: Sequence[bytes], program: cl.Program,
                    info: Any, autotune: bool) -> Executable:
    """The Executable of an ``entry_of`` entry, on ``program`` (built from its source)."""
    graph, module, constants, host_mode, temps = parts_from(e, blobs)
    exe = Executable(graph, module, program, info,
                     [OutSpec(k, int(x)) for k, x in e["outputs"]], temps, host_mode,
                     np.dtype(e["index_dtype"]), _treedef_from(e["treedef"]), constants,
                     autotune=autotune)
    exe.graph_text = e.get("graph", "")  # (export of a signature loaded from the trace cache)
    return exe


def _matches(stored: dict[str, Any], value: Any) -> bool:
    if stored["kind"] == "static":  # equal type and value (a float's bits)
        if stored["type"] == "float":
            return type(value) is float and static_key(value).payload.hex() == stored["bits"]
        return type(value).__name__ == stored["type"] and value == stored["value"]
    spec = arg_spec(value, False)
    return not isinstance(spec, StaticSpec) and _spec_json(spec) == stored


def _describe_value(value: Any) -> str:
    spec = arg_spec(value, False)
    return f"static {value!r}" if isinstance(spec, StaticSpec) else _describe(_spec_json(spec))


def _describe(j: dict[str, Any]) -> str:
    if j["kind"] == "static":
        return f"static {j['value']!r}"
    if j["kind"] in ("device", "host"):
        shape = tuple(None if isinstance(d, dict) else d for d in j["shape"])
        return f"{j['kind']} {np.dtype(j['dtype']).name}{shape}"
    return f"{j['kind']} {j.get('type')}"
