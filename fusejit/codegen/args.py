"""The arguments table of a kernel being lowered (``lowering.Lowering.args``): buffers, offsets,
scalars and runtime extents in first-use order, and the kernel signature they make."""

from __future__ import annotations

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir.graph import Graph
from fusejit.codegen.kernels import Arg, BufferArg, KernelSignature, ScalarArg


class ArgTable:
    """Kernel arguments in first-use order, with the flags their declarations need."""

    def __init__(self, graph: Graph, written_params: set[int], aliased: set[int],
                 index_dtype: np.dtype) -> None:
        self.graph = graph
        self.args: dict[tuple[str, int] | tuple[str, int, str], dict] = {}
        self.written_params = written_params
        self.aliased = aliased
        self.index_dtype = index_dtype

    def buffer(self, role: str, index: int, dtype: np.dtype, write: bool = False) -> str:
        key = (role, index)
        name = {"param": "p", "output": "out", "temp": "t", "partial": "part",
                "status": "fj_status"}[role] + str(index)
        entry = self.args.setdefault(key, {"kind": "buffer", "name": name, "dtype": dtype,
                                           "write": False})
        entry["write"] |= write
        return name

    def offset(self, param: int) -> str:
        key = ("offset", param)
        self.args.setdefault(key, {"kind": "scalar", "name": f"off{param}",
                                   "dtype": self.index_dtype})
        return f"off{param}"

    def scalar(self, param: int, dtype: np.dtype) -> str:
        key = ("scalar", param, dt.type_name(dtype))
        name = f"s{param}_{key[2]}"
        self.args.setdefault(key, {"kind": "scalar", "name": name, "dtype": dtype})
        return name

    def extent(self, label: str, value: int | float, dtype: np.dtype | None = None) -> str:
        """A loop bound passed at launch (kernels for runtime extents): its argument name.
        ``dtype`` (default: the index type) for a float value that follows an extent (a
        row length as a mean's divisor: fusejit/ir/rows.py)."""
        entry = self.args.setdefault(("extent", 0, label), {
            "kind": "scalar", "name": f"n_{label}", "dtype": dtype or self.index_dtype,
            "value": value if dtype is not None and dtype.kind == "f" else int(value)})
        assert entry["value"] == value, (label, entry["value"], value)
        return f"n_{label}"

    def signature(self, name: str) -> KernelSignature:
        out: list[Arg] = []
        for key, e in self.args.items():
            role, index = key[0], key[1]
            if e["kind"] == "buffer":
                restrict = not e["write"] and not (role == "param" and index in self.aliased) \
                    and not (role == "param" and index in self.written_params)
                if e["write"] and role != "param":
                    restrict = True
                out.append(BufferArg(e["name"], e["dtype"], role, index, e["write"], restrict))
            else:
                out.append(ScalarArg(e["name"], e["dtype"], role, index, e.get("value", 0)))
        return KernelSignature(name, tuple(out))


__all__ = ["ArgTable"]
