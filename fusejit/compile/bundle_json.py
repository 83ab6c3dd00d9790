"""A compiled signature as JSON and back: what a bundle (compile/aot.py, aot_cuda.py) and the
trace cache (compile/trace_cache.py) store per signature, for any device's executable."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from fusejit.codegen.kernels import (
    BufferArg,
    HostMatmul,
    HostView,
    Kernel,
    KernelSignature,
    Module,
    Partial,
    ScalarArg,
)
from fusejit.compile.aot_dynamic import BundleError
from fusejit.compile.signature import DeviceArraySpec, ScalarSpec
from fusejit.frontend.keys import StaticKey
from fusejit.ir.graph import Graph, Node, Param, toposort
from fusejit.ir.ops import Op
from fusejit.passes.plan import Group
from fusejit.runtime.memory import HostArraySpec


def _spec_json(spec: Any) -> dict[str, Any]:
    if isinstance(spec, DeviceArraySpec):
        # (a read-only export is traced apart: named only then, so other keys stay as they were)
        ro = {} if spec.writeable else {"writeable": False}
        return {"kind": "device", "dtype": spec.dtype.str, "shape": list(spec.shape),
                "strides": list(spec.strides), "has_offset": spec.has_offset,
                "wide": spec.wide, **ro}
    if isinstance(spec, HostArraySpec):
        return {"kind": "host", "dtype": spec.dtype.str, "shape": list(spec.shape)}
    if isinstance(spec, ScalarSpec):
        p = spec.ptype
        if isinstance(p, tuple):  # (int, range) of an int beyond int64 (signature.arg_spec)
            return {"kind": "scalar", "type": p[0].__name__, "range": p[1]}
        return {"kind": "scalar", "type": p.__name__ if isinstance(p, type) else p.str}
    key = spec.value  # a StaticKey (fusejit.frontend.keys): floats by their bits
    if isinstance(key, StaticKey) and key.type is float:
        return {"kind": "static", "type": "float", "bits": key.payload.hex(),
                "value": struct.unpack("<d", key.payload)[0]}
    if isinstance(key, StaticKey) and key.type in (int, str, bool, type(None)):
        return {"kind": "static", "type": key.type.__name__, "value": key.payload}
    raise BundleError(f"static argument {spec.value!r} cannot be exported; only int, float, "
                      "str, bool and None static values can")


def _treedef_json(d: Any) -> Any:
    if d == "*" or d is None:
        return d
    kind, sub = d
    if kind is dict:
        keys, defs = sub
        return {"t": "dict", "k": list(keys), "c": [_treedef_json(x) for x in defs]}
    return {"t": kind.__name__, "c": [_treedef_json(x) for x in sub]}


def _treedef_from(j: Any) -> Any:
    if j == "*" or j is None:
        return j
    kinds = {"tuple": tuple, "list": list, "dict": dict}
    if not isinstance(j, dict) or j.get("t") not in kinds:
        raise BundleError(f"malformed output structure {j!r}")
    if j["t"] == "dict":
        return (dict, (tuple(j["k"]), tuple(_treedef_from(x) for x in j["c"])))
    return (kinds[j["t"]], tuple(_treedef_from(x) for x in j["c"]))


def _arg_json(a: BufferArg | ScalarArg) -> dict[str, Any]:
    if isinstance(a, BufferArg):
        return {"cls": "buffer", "name": a.name, "dtype": a.dtype.str, "role": a.role,
                "index": a.index, "writable": a.writable, "restrict": a.restrict}
    return {"cls": "scalar", "name": a.name, "dtype": a.dtype.str, "role": a.role,
            "index": a.index, "value": a.value}


def _arg_from(j: dict[str, Any]) -> BufferArg | ScalarArg:
    if j["cls"] == "buffer":
        return BufferArg(j["name"], np.dtype(j["dtype"]), j["role"], int(j["index"]),
                         bool(j["writable"]), bool(j["restrict"]))
    dtype = np.dtype(j["dtype"])
    return ScalarArg(j["name"], dtype, j["role"], int(j["index"]),
                     float(j["value"]) if dtype.kind == "f" else int(j["value"]))


def _host_json(h: HostMatmul | None) -> dict[str, Any] | None:
    """A host step's views (passes/host_gemm.py), or None for an OpenCL kernel."""
    if h is None:
        return None
    return {"dtype": h.dtype.str, **{k: {"arg": v.arg, "offset_arg": v.offset_arg,
                                         "offset": v.offset, "shape": list(v.shape),
                                         "strides": list(v.strides)}
                                     for k, v in (("a", h.a), ("b", h.b), ("c", h.c))}}


def _host_from(j: dict[str, Any] | None) -> HostMatmul | None:
    if j is None:
        return None
    try:
        views = [HostView(int(v["arg"]), int(v["offset_arg"]), int(v["offset"]),
                          _shape(v["shape"]), tuple(int(s) for s in v["strides"]))
                 for v in (j["a"], j["b"], j["c"])]
        return HostMatmul(*views, np.dtype(j["dtype"]))
    except (KeyError, TypeError, ValueError) as e:
        raise BundleError(f"malformed host step {j!r}") from e


def _shape(j: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in j)


def entry_of(exe: Any, specs: Sequence[Any], blob: Any, graph_text: str | None,
             options: list[str]) -> dict[str, Any]:
    """One compiled signature as JSON (``blob(bytes) -> index`` stores the captured
    constants): what ``executable_from`` needs to run it again without a trace. Raises
    BundleError for what JSON cannot hold (a static argument of another type). ``options``:
    the compiler's. ``exe``: graph, module, treedef, outputs, temps ((shape, dtype) pairs),
    constants and index_dtype of the compiled signature."""
    graph, module = exe.graph, exe.module
    return {
        "args": [_spec_json(s) for s in specs],
        "treedef": _treedef_json(exe.treedef),
        "outputs": [[o.kind, o.index] for o in exe.outputs],
        "graph": graph_text if graph_text is not None else getattr(exe, "graph_text", ""),
        "params": [{"kind": p.kind, "dtype": p.dtype.str, "shape": list(p.shape),
                    "name": p.name, "source": p.source,
                    "strides": None if p.strides is None else list(p.strides),
                    "has_offset": p.has_offset, "wide": p.wide,
                    "expr": None if p.expr is None else _expr_json(p.expr)}
                   for p in graph.params],
        "writes": [p for p, _ in graph.writes],
        "graph_outputs": [{"dtype": n.dtype.str, "shape": list(n.shape)}
                          for n in graph.outputs],
        "temps": [{"dtype": np.dtype(d).str, "shape": list(s)} for s, d in exe.temps],
        "partials": [{"size": p.size, "dtype": p.dtype.str} for p in module.partials],
        "wide": module.wide, "uses_fp64": module.uses_fp64,
        "index_dtype": exe.index_dtype.str,
        "source": module.source, "options": options,
        "kernels": [{"name": k.name, "args": [_arg_json(a) for a in k.signature.args],
                     "global_size": list(k.global_size),
                     "local_size": None if k.local_size is None else list(k.local_size),
                     "kind": k.group.kind, "role": k.role, "work": k.work,
                     "items": k.items, "vec": k.vec, "host": _host_json(k.host)}
                    for k in module.kernels],
        "constants": {str(p): {"dtype": a.dtype.str, "shape": list(a.shape),
                               "blob": blob(np.ascontiguousarray(a).tobytes())}
                      for p, a in exe.constants.items()},
    }


def _expr_json(expr: Node) -> list[dict[str, Any]]:
    """A derived scalar's expression (passes/hoist.py) as nodes in topological order: op
    name, dtype, operand positions and arg (a literal's bytes as hex, a parameter index)."""
    order = toposort([expr])
    where = {n: i for i, n in enumerate(order)}
    out = []
    for n in order:
        if n.arg is None:
            arg = None
        elif isinstance(n.arg, bytes):
            arg = {"bytes": n.arg.hex()}
        elif isinstance(n.arg, tuple) and all(isinstance(a, int) for a in n.arg):
            arg = {"ints": list(n.arg)}
        else:
            raise BundleError(f"cannot export a scalar expression with {n.op.name} {n.arg!r}")
        out.append({"op": n.op.name, "dtype": n.dtype.str, "shape": list(n.shape),
                    "srcs": [where[x] for x in n.srcs], "arg": arg})
    return out


def _expr_from(nodes: list[dict[str, Any]]) -> Node:
    built: list[Node] = []
    for j in nodes:
        a = j["arg"]
        arg = None if a is None else bytes.fromhex(a["bytes"]) if "bytes" in a else \
            tuple(int(i) for i in a["ints"])
        built.append(Node.make(Op[j["op"]], np.dtype(j["dtype"]), _shape(j["shape"]),
                               tuple(built[i] for i in j["srcs"]), arg))
    return built[-1]


def parts_from(e: dict[str, Any], blobs: Sequence[bytes]) -> tuple[Any, ...]:
    """(graph, module, constants, host_mode, temps) of an ``entry_of`` entry."""
    params = tuple(Param(p["kind"], np.dtype(p["dtype"]), _shape(p["shape"]), p["name"],
                         int(p["source"]),
                         None if p["strides"] is None else _shape(p["strides"]),
                         bool(p["has_offset"]), bool(p["wide"]),
                         _expr_from(p["expr"]) if p.get("expr") else None)
                   for p in e["params"])
    # output placeholders: the runtime reads only their shapes and dtypes
    outputs = tuple(Node.make(Op.INPUT, np.dtype(o["dtype"]), _shape(o["shape"]), (),
                              ("bundle output", k)) for k, o in enumerate(e["graph_outputs"]))
    writes = tuple((int(p), Node.make(Op.INPUT, params[int(p)].dtype,
                                      params[int(p)].shape, (), ("bundle write", p)))
                   for p in e["writes"])
    graph = Graph(params, outputs, writes)
    kernels = tuple(Kernel(k["name"], "", KernelSignature(k["name"], tuple(
        _arg_from(a) for a in k["args"])), _shape(k["global_size"]),
        None if k["local_size"] is None else _shape(k["local_size"]),
        Group(k["kind"], (), (), "loaded from a bundle"), k["role"], int(k["work"]),
        int(k["items"]), int(k["vec"]), _host_from(k.get("host"))) for k in e["kernels"])
    module = Module(e["source"], kernels, tuple(Partial(int(p["size"]), np.dtype(p["dtype"]))
                                           for p in e["partials"]),
                    bool(e["uses_fp64"]), bool(e["wide"]))
    constants = {int(p): np.frombuffer(blobs[c["blob"]], np.dtype(c["dtype"]))
                 .reshape(_shape(c["shape"])) for p, c in e["constants"].items()}
    host_mode = not any(a["kind"] == "device" for a in e["args"])
    temps = [(_shape(t["shape"]), np.dtype(t["dtype"])) for t in e["temps"]]
    return graph, module, constants, host_mode, temps
