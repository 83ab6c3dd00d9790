"""What ``fusejit.load`` believes of a bundle (compile/aot.py), and the checks behind it.

A bundle's SHA-256 is a checksum, not a signature: anyone who can write the file can rewrite
it and the checksum. So by default a bundle is *untrusted*:

* its native binaries are never loaded: the OpenCL source it carries is compiled here (through
  the disk cache, like any function's), so no machine code from the file runs;
* its metadata are checked against themselves and that source before anything launches
  (``check_entry``): every dtype a number type (no ``|O`` object arrays: no Python objects,
  no pickle), every shape and size a non-negative integer, captured constants exactly as long
  as their shapes say, each kernel's arguments those the source declares (count, buffer or
  scalar, element size), every buffer index in range, and each elementwise kernel's outputs
  as large as the elements it writes. A bundle that fails is a BundleError naming what, never
  a crash.

What the default does not decide is whether the OpenCL source is the one fusejit generated
(a source whose digest differs from the one its binaries were built from is refused, but
whoever rewrites the source can rewrite that digest too): a source rewritten on purpose
computes what it says (device code, compiled and run like any OpenCL kernel). For bundles from others, sign them: ``export(..., key=k)`` appends an
HMAC-SHA256 of the whole file, and ``load(path, key=k)`` refuses a bundle without the right
one; a verified bundle is the exporter's own, and its binaries are loaded. ``trust=True``
loads the binaries of an unsigned bundle (one you wrote yourself).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from typing import Any

import numpy as np

from fusejit.codegen.kernels import STATUS_DTYPE
from fusejit.compile.aot_dynamic import BundleError

MAC_MAGIC = b"FJHMAC01"
MAC_SIZE = len(MAC_MAGIC) + 32
_NUMBER_KINDS = "biufc"
_MAX_ELEMENTS = 1 << 40
# (OpenCL C, and CUDA C++: targets/cuda, whose kernels take their NDRange last, fj_gs0..2)
_KERNEL_DECL = re.compile(r"(?:__kernel\s+void|__global__\s+void(?:\s+__launch_bounds__\(\d+\))?)"
                          r"\s+(\w+)\s*\(([^)]*)\)")
# OpenCL C scalar types by element size (vector types: times their width)
_CL_SIZES = {"char": 1, "uchar": 1, "bool": 1, "short": 2, "ushort": 2, "half": 2, "int": 4,
             "uint": 4, "float": 4, "long": 8, "ulong": 8, "double": 8}
_CL_TYPE = re.compile(r"\b(u?char|bool|u?short|half|u?int|float|u?long|double)(\d*)\b")


def key_bytes(key: bytes | str | None) -> bytes | None:
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode()
    if not isinstance(key, (bytes, bytearray)) or not key:
        raise TypeError("a bundle key is non-empty bytes or str")
    return bytes(key)


def sign(data: bytes, key: bytes) -> bytes:
    """``data`` (a whole bundle) with its HMAC-SHA256 under ``key`` appended."""
    return data + MAC_MAGIC + hmac.new(key, data, hashlib.sha256).digest()


def split_mac(data: bytes, body_len: int, path: Any) -> tuple[bytes, bytes | None]:
    """(bundle, its MAC or None) of a file whose bundle is ``body_len`` bytes long."""
    rest = data[body_len:]
    if not rest:
        return data, None
    if len(rest) != MAC_SIZE or not rest.startswith(MAC_MAGIC):
        raise BundleError(f"{path} is not a whole fusejit bundle ({len(rest)} bytes after its "
                          "payload): export it again")
    return data[:body_len], rest[len(MAC_MAGIC):]


def verify(body: bytes, mac: bytes | None, key: bytes, path: Any) -> None:
    if mac is None:
        raise BundleError(f"{path} is not signed; load it with the key it was exported with, "
                          "or without a key to build it from its source")
    if not hmac.compare_digest(mac, hmac.new(key, body, hashlib.sha256).digest()):
        raise BundleError(f"{path} was not signed with this key (or was changed since): "
                          "refusing to load it")


# -- metadata checks --------------------------------------------------------------------------------


def _dtype(s: Any, what: str, kinds: str = _NUMBER_KINDS) -> np.dtype:
    try:
        dtype = np.dtype(s) if isinstance(s, str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in kinds or dtype.hasobject or dtype.fields:
        raise BundleError(f"{what} has dtype {s!r}; a bundle holds only number types")
    return dtype


def _shape(j: Any, what: str) -> tuple[int, ...]:
    if not isinstance(j, list) or not all(type(d) is int and d >= 0 for d in j) or \
            math.prod(j) > _MAX_ELEMENTS:
        raise BundleError(f"{what} has shape {j!r}; shapes are lists of non-negative ints")
    return tuple(j)


def _declared(source: str) -> dict[str, list[str]]:
    """Each kernel's parameter declarations, as the source writes them."""
    return {m.group(1): [p.strip() for p in m.group(2).split(",")
                         if p.strip() and " fj_gs" not in p]
            for m in _KERNEL_DECL.finditer(source)}


def _element_size(decl: str) -> int | None:
    found = _CL_TYPE.search(decl.replace("__global", "").replace("const", ""))
    if found is None:
        return None
    return _CL_SIZES[found.group(1)] * (int(found.group(2)) if found.group(2) else 1)


def check_entry(e: dict[str, Any], blobs: list[bytes], name: str) -> None:
    """BundleError unless entry ``e`` (concrete: no template extents left) is consistent with
    itself and its source (see the module docstring)."""
    try:
        _check(e, blobs)
    except BundleError as exc:
        raise BundleError(f"bundle {name}: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise BundleError(f"bundle {name}: malformed entry ({type(exc).__name__}: {exc})"
                          ) from None


def _check(e: dict[str, Any], blobs: list[bytes]) -> None:
    _dtype(e["index_dtype"], "the index type", "iu")
    for a in e["args"]:
        if a["kind"] in ("device", "host"):
            _dtype(a["dtype"], "an argument")
            _shape(a["shape"], "an argument")
    params = [(_dtype(p["dtype"], f"parameter {p['name']!r}"),
               _shape(p["shape"], f"parameter {p['name']!r}")) for p in e["params"]]
    for p in e["params"]:
        if p.get("expr") and p["source"] == -1:
            continue  # (a scalar derived from others, passes/hoist.py)
        if type(p["source"]) is not int or not 0 <= p["source"] < len(e["args"]):
            raise BundleError(f"parameter {p['name']!r} reads argument {p['source']!r}")
        a = e["args"][p["source"]]
        if p["kind"] == "array" and a["kind"] in ("device", "host") and \
                (p["dtype"] != a["dtype"] or p["shape"] != a["shape"]):
            raise BundleError(f"parameter {p['name']!r} is {p['dtype']}{p['shape']}, the "
                              f"argument it reads {a['dtype']}{a['shape']}")
    outs = [(_dtype(o["dtype"], "an output"), _shape(o["shape"], "an output"))
            for o in e["graph_outputs"]]
    temps = [(_dtype(t["dtype"], "a temporary"), _shape(t["shape"], "a temporary"))
             for t in e["temps"]]
    for p in e["partials"]:
        _dtype(p["dtype"], "a partial buffer")
        if type(p["size"]) is not int or p["size"] < 0:
            raise BundleError(f"a partial buffer has size {p['size']!r}")
    for w in e["writes"]:
        if type(w) is not int or not 0 <= w < len(params):
            raise BundleError(f"a write to parameter {w!r}")
    for kind, index in e["outputs"]:
        if type(index) is not int or index < 0:
            raise BundleError(f"output {kind} {index!r}")
    for p, c in e["constants"].items():
        dtype, shape = _dtype(c["dtype"], "a constant"), _shape(c["shape"], "a constant")
        blob = c["blob"]
        if type(blob) is not int or not 0 <= blob < len(blobs) or \
                len(blobs[blob]) != math.prod(shape) * dtype.itemsize:
            raise BundleError(f"constant {p} is not {math.prod(shape)} x {dtype.name} bytes")
    digest = hashlib.sha256(e["source"].encode()).hexdigest()
    if any(b["key"]["source_sha256"] != digest for b in e.get("binaries", ())):
        # (consistency, not authenticity: whoever rewrites the source can rewrite this too)
        raise BundleError("its source is not the one its binaries were built from")
    declared = _declared(e["source"])
    partials = [(np.dtype(p["dtype"]), (p["size"],)) for p in e["partials"]]
    roles = {"param": params, "output": outs, "temp": temps, "partial": partials,
             "status": [(STATUS_DTYPE, (1,))]}  # (the call's error flag: checked gathers)
    for k in e["kernels"]:
        _check_kernel(k, declared, roles)


def _check_kernel(k: dict[str, Any], declared: dict[str, list[str]],
                  roles: dict[str, list[tuple[np.dtype, tuple[int, ...]]]]) -> None:
    name = k["name"]
    for what in ("global_size", "local_size"):
        if k[what] is not None:
            _shape(k[what], f"kernel {name}'s {what}")
    for what in ("work", "items", "vec"):
        if type(k[what]) is not int or k[what] < 0:
            raise BundleError(f"kernel {name}'s {what} is {k[what]!r}")
    if k.get("host") is not None:
        _dtype(k["host"]["dtype"], f"host step {name}")
        for v in ("a", "b", "c"):
            if not 0 <= k["host"][v]["arg"] < len(k["args"]):
                raise BundleError(f"host step {name} reads argument {k['host'][v]['arg']}")
        return  # (runs on the host: no kernel in the source)
    decls = declared.get(name)
    if decls is None:
        raise BundleError(f"kernel {name} is not in the bundle's source")
    if len(decls) != len(k["args"]):
        raise BundleError(f"kernel {name} takes {len(decls)} arguments in the source, the "
                          f"metadata list {len(k['args'])}")
    for a, decl in zip(k["args"], decls):
        dtype = _dtype(a["dtype"], f"argument {a['name']!r} of kernel {name}")
        pointer = "*" in decl
        if pointer != (a["cls"] == "buffer"):
            raise BundleError(f"argument {a['name']!r} of kernel {name} is "
                              f"{'a buffer' if pointer else 'a scalar'} in the source")
        size = _element_size(decl)
        if pointer and size is not None and size != dtype.itemsize and dtype != np.bool_:
            raise BundleError(f"argument {a['name']!r} of kernel {name} has {size}-byte "
                              f"elements in the source, {dtype.itemsize} in the metadata")
        if a["cls"] != "buffer":
            continue
        table = roles.get(a["role"])
        if table is None:
            raise BundleError(f"argument {a['name']!r} of kernel {name} has role {a['role']!r}")
        if type(a["index"]) is not int or not 0 <= a["index"] < len(table):
            raise BundleError(f"argument {a['name']!r} of kernel {name} is {a['role']} "
                              f"{a['index']!r}, of {len(table)}")
        have_dtype, shape = table[a["index"]]
        if have_dtype.itemsize != dtype.itemsize:
            raise BundleError(f"argument {a['name']!r} of kernel {name} is {dtype.name}, its "
                              f"{a['role']} {have_dtype.name}")
        if k["kind"] == "elementwise" and a["writable"] and a["role"] != "status" and \
                math.prod(shape) < k["work"]:  # (the status flag: any work-item may set it)
            raise BundleError(f"kernel {name} writes {k['work']} elements into "
                              f"{a['role']} {a['index']} of shape {list(shape)}")
