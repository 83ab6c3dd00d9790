"""The disk cache of lowered signatures: a new process's first call skips the trace.

The program cache (runtime/cache.py) spares the OpenCL compiler; this one spares what runs
before it, tracing, passes and code generation (~3 ms of a 7 ms first call on the H200). An
entry is what ``fusejit.export`` writes for one signature (aot.entry_of: kernels, launch
metadata, output structure, captured constants), stored in the program cache's directory with
all of its safety (one checksummed file, atomic writes, LRU eviction, bad entries are a miss
and a warning) under a key that holds everything the trace could have read:

* the function's code (bytecode, constants, names, nested code objects), its defaults, and
  what each global or closure variable it reads is bound to: only pure library modules
  (``np``, ``math``; not ``os``, ``time`` or ``random``) and computing builtins are allowed,
  by name, and no attribute named like a read of the outside world (``np.load``);
* the argument specs, keyword names and aliasing, the ``dynamic`` state;
* the device (platform, name, driver), the Python, NumPy, PyOpenCL and fusejit versions, and
  the size and mtime of every fusejit module loaded (an edited fusejit misses).

A function that reads anything else from outside its arguments (a guarded value, a captured
array, a helper function, a method's ``self``) is traced as before: its trace may depend on
state no key here can name. So are ``validate=True`` functions (they check against the
graph), multi-device contexts, and signatures with a GEMM (their plan depends on the tuner).
An entry is stored only if the Executable rebuilt from it launches exactly like the one just
built (same kernels, arguments, geometry, outputs), and one loaded from it has no ``Lowered``:
``f.lower`` retraces on demand. ``FUSEJIT_TRACE_CACHE=0`` turns this cache off alone.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import os
import struct
import sys
import types
from typing import Any

import numpy as np
import pyopencl as cl

from fusejit._version import __version__
from fusejit.compile import aot
from fusejit.frontend.captured import _is_library
from fusejit.runtime import cache
from fusejit.runtime.opencl.build import build_cached, build_options, program_key
from fusejit.runtime.opencl.executable import Executable

log = logging.getLogger("fusejit")
_KIND = "fusejit-trace"  # the "option" that tells a trace entry's key from a program's
_LEN = struct.Struct("<I")


def enabled() -> bool:
    return os.environ.get("FUSEJIT_TRACE_CACHE", "1").strip().lower() not in (
        "0", "off", "false", "no")


# -- the key ------------------------------------------------------------------------------------


def _const(value: Any) -> Any:
    """A code constant as JSON-able data, or raise TypeError (not cacheable)."""
    if value is None or isinstance(value, (bool, int, str)):
        return [type(value).__name__, value]
    if isinstance(value, float):
        return ["float", value.hex()]
    if isinstance(value, complex):
        return ["complex", value.real.hex(), value.imag.hex()]
    if isinstance(value, bytes):
        return ["bytes", value.hex()]
    if isinstance(value, tuple):
        return ["tuple", [_const(v) for v in value]]
    if isinstance(value, frozenset):
        return ["frozenset", sorted((_const(v) for v in value), key=json.dumps)]
    if value is Ellipsis:
        return ["..."]
    if isinstance(value, types.CodeType):
        return ["code", _code(value)]
    raise TypeError(type(value).__name__)


def _code(code: types.CodeType) -> Any:
    return [code.co_code.hex(), [_const(c) for c in code.co_consts], list(code.co_names),
            list(code.co_varnames), list(code.co_freevars), list(code.co_cellvars),
            code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags]


def _names(code: types.CodeType, into: set[str]) -> None:
    """Every name ``code`` (and the code nested in it) loads: globals and attributes alike
    (an attribute that shares a global's name makes the key stricter, never wrong)."""
    into.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _names(c, into)


# What a keyed function may read besides its arguments: modules whose functions are pure
# (a trace through os, time, random or an I/O call would bake in a value of the process that
# traced: in-process that is the documented rule for library state, across processes it
# would freeze it), the builtins that compute, and no attribute named like a read of the
# outside world (np.load of a weights file edited between runs) or writes to it
_PURE_MODULES = frozenset({"numpy", "math", "cmath", "operator", "fusejit"})
_PURE_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "complex", "divmod", "enumerate", "filter", "float",
    "frozenset", "getattr", "hasattr", "int", "isinstance", "issubclass", "iter", "len", "list",
    "map", "max", "min", "next", "pow", "range", "reversed", "round", "slice", "sorted", "sum",
    "tuple", "dict", "set", "type", "zip", "callable", "ValueError", "TypeError",
    "IndexError", "KeyError", "NotImplementedError", "RuntimeError", "ArithmeticError",
    "ZeroDivisionError", "Exception", "True", "False", "None"})
_IMPURE_ATTRS = frozenset({"load", "loads", "loadtxt", "genfromtxt", "fromfile", "fromregex",
                           "memmap", "open", "read", "environ", "getenv", "time", "urandom",
                           "random", "seed", "now", "today",
                           # (writes: a trace served from disk would skip them)
                           "save", "savez", "savez_compressed", "savetxt", "tofile", "write"})


def _binding(value: Any) -> Any:
    """What a global or closure variable names, if it may be keyed by name: a pure library
    module (by its name and its package's version); else TypeError."""
    if isinstance(value, types.ModuleType) and _is_library(value) and \
            value.__name__.partition(".")[0] in _PURE_MODULES:
        top = sys.modules.get(value.__name__.partition(".")[0])
        return ["module", value.__name__, str(getattr(top, "__version__", ""))]
    raise TypeError(type(value).__name__)


def function_key(fn: Any) -> Any:
    """The JSON-able identity of what tracing ``fn`` can depend on, or None when it reads
    something that cannot be named (see the module docstring)."""
    code = getattr(fn, "__code__", None)
    scope = getattr(fn, "__globals__", None)
    if not isinstance(code, types.CodeType) or not isinstance(scope, dict):
        return None
    try:
        names: set[str] = set()
        _names(code, names)
        # a name the function's globals bind must be a pure module; any other is a builtin
        # or an attribute (a global the trace could not find raised NameError)
        reads = [[name, _binding(scope[name])] for name in sorted(names) if name in scope]
        builtin_names = vars(builtins)
        if any(name in builtin_names and name not in _PURE_BUILTINS or name in _IMPURE_ATTRS
               for name in names if name not in scope):
            return None
        cells = [_binding(c.cell_contents) for c in fn.__closure__ or ()]
        defaults = [_const(d) for d in fn.__defaults__ or ()]
        kwdefaults = sorted([k, _const(v)] for k, v in (fn.__kwdefaults__ or {}).items())
        return [_code(code), reads, cells, defaults, kwdefaults]
    except (TypeError, ValueError):  # (an empty cell raises ValueError)
        return None


_library: list[Any] = []


def note_library(version: str) -> None:
    """Record what the trace and the lowering run on: the versions of Python, NumPy,
    PyOpenCL and fusejit, and fusejit's modules loaded by its import, by size and mtime (a
    development checkout changes without changing its version). Called once at the end of
    fusejit's import, next to the ~100 stat calls that import made anyway."""
    mods = []
    for name, mod in sorted(sys.modules.items()):
        path = getattr(mod, "__file__", None)
        if (name == "fusejit" or name.startswith("fusejit.")) and path:
            try:
                st = os.stat(path)
            except OSError:
                continue
            mods.append([name, st.st_size, st.st_mtime_ns])
    text = json.dumps([version, np.__version__, cl.VERSION_TEXT, sys.version,
                       sys.implementation.cache_tag, mods])
    _library[:] = [hashlib.sha256(text.encode()).hexdigest()]  # (hashed once, not per key)


def _library_key() -> str:
    if not _library:
        note_library(__version__)
    return _library[0]


def entry_key(fused: Any, key: Any, queue: cl.CommandQueue) -> cache.ProgramKey | None:
    """The disk key of this call's lowered signature, or None when it may not be cached."""
    if not enabled() or fused._validate or key.guards or key.implicit or fused._code_refs \
            or fused._guards or key.views:  # (views: traced again after a failed trace)
        return None
    from fusejit.runtime.backend import backend_of
    from fusejit.runtime.opencl.backend import OPENCL

    # (an OpenCL queue only: a Vulkan queue has no context.devices, and its programs are not
    # in the program cache)
    if backend_of(queue) is not OPENCL or len(queue.context.devices) != 1 \
            or cache.program_cache() is None:
        return None
    fn_key = function_key(fused._fn)
    if fn_key is None:
        return None
    try:
        specs = [aot._spec_json(s) for s in key.specs]
    except aot.BundleError:
        return None
    # (runtime row lengths, fusejit/ir/rows.py: named only when on, so other keys stay as they were)
    rows = ["rows"] if fused._stats.rows_on else []
    text = json.dumps([fn_key, specs, list(key.kwnames), [list(a) for a in key.aliases],
                       bool(fused._stats.dynamic_on), _library_key(), *rows], sort_keys=True)
    return program_key(queue.device, text, [_KIND])


# -- load and store -----------------------------------------------------------------------------


def load(fused: Any, key: Any, queue: cl.CommandQueue, autotune: bool
         ) -> tuple[Executable, str] | None:
    """(executable, how its program was built) from a stored entry, or None (a miss)."""
    disk_key = entry_key(fused, key, queue)
    store = cache.program_cache() if disk_key is not None else None
    if store is None:
        return None
    stored = store.get(disk_key)
    if stored is None:
        return None
    try:
        (n,) = _LEN.unpack_from(stored.binary)
        entry = json.loads(stored.binary[_LEN.size:_LEN.size + n])
        blobs, at = [], _LEN.size + n
        for size in entry["blobs"]:
            blobs.append(stored.binary[at:at + size])
            at += size
        if at != len(stored.binary):
            raise ValueError("blob lengths do not add up")
        info = fused_device_info(queue)
        # the program itself comes from its own program-cache entry (stored once, not in
        # every signature's entry)
        program, how = build_cached(queue.context, entry["source"], build_options(info),
                                    getattr(fused._fn, "__name__", "fn"))
        exe = aot.executable_from(entry, blobs, program, info, autotune)
    except (ValueError, KeyError, TypeError, IndexError, struct.error) as exc:
        store.reject(disk_key, f"unusable trace entry: {exc}")
        return None
    return exe, how


def fused_device_info(queue: cl.CommandQueue) -> Any:
    from fusejit.runtime.opencl.devices import device_info

    return device_info(queue.device)


def store(fused: Any, key: Any, queue: cl.CommandQueue, exe: Executable, lowered: Any) -> None:
    """Write this signature's entry, if it may be cached and reloads exactly as built."""
    disk_key = entry_key(fused, key, queue)
    target = cache.program_cache() if disk_key is not None else None
    if target is None or any(k.group.kind == "gemm" for k in exe.module.kernels):
        return
    blobs: list[bytes] = []

    def blob(data: bytes) -> int:
        blobs.append(bytes(data))
        return len(blobs) - 1

    from fusejit.ir.graph import format_graph

    try:
        entry = aot.entry_of(exe, key.specs, blob, format_graph(lowered.graph))
        entry["blobs"] = [len(b) for b in blobs]
        again = aot.executable_from(json.loads(json.dumps(entry)), blobs, exe.program,
                                    exe.info, exe.autotune)
    except (aot.BundleError, TypeError, ValueError) as exc:
        log.debug("fusejit: signature not stored in the trace cache: %s", exc)
        return
    if launch_plan(again) != launch_plan(exe):
        log.debug("fusejit: signature not stored in the trace cache: it reloads differently")
        return
    meta = json.dumps(entry, sort_keys=True).encode()
    payload = _LEN.pack(len(meta)) + meta + b"".join(blobs)
    target.put(disk_key, cache.Entry(payload, tuple(k.name for k in exe.module.kernels)))


def launch_plan(exe: Executable) -> Any:
    """Everything a launch of ``exe`` does, comparable: the round-trip check of ``store``."""
    return (exe._arrays, exe._consts, [(s, d.str) for s, d, _ in exe._scalars],
            [(k.function_name, g, loc, plan) for k, g, loc, plan in exe._plans],
            [(float(e), e.dtype.str) for e in exe._extents], exe._out_specs,
            exe._temp_specs, exe._part_specs, exe.outputs, exe.treedef, exe._host_writes,
            exe.index_dtype, exe._simple_out, exe._to_tune, exe.host_mode,
            {p: (a.dtype.str, a.shape, a.tobytes()) for p, a in exe.constants.items()})
