"""What every backend's executable shares: the returned leaves (``OutSpec``), kernel scalars
converted as NumPy converts them, derived scalars evaluated on the host, and the argument
binding plan: per kernel, where each argument comes from, computed once at build time so a
call only indexes tables.

The backends' executables (runtime/opencl/executable.py, runtime/vulkan/executable.py) build on
these; nothing here talks to a driver.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusejit.codegen.kernels import Kernel, Module, ScalarArg
from fusejit.ir import dtypes as dt
from fusejit.ir.graph import Graph, Param
from fusejit.ir.ops import Op
from fusejit.runtime.derived import DerivedScalars

# where a kernel argument comes from: the call's tables, in this order (see LaunchPlan)
PARAM, OFFSET, OUT, TEMP, PART, SCALAR, EXTENT, STATUS = range(8)
BY_VALUE = frozenset({OFFSET, SCALAR, EXTENT})  # bound by value, not as buffers
_BUFFER_ROLES = {"param": PARAM, "output": OUT, "temp": TEMP, "partial": PART,
                 "status": STATUS}


@dataclass(frozen=True)
class OutSpec:
    """One returned leaf: a computed graph output, or an argument returned as itself."""

    kind: str  # "node" | "arg"
    index: int  # graph output index, or flattened argument position


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a C-contiguous array of ``shape``."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def alloc_spec(shape: tuple[int, ...], dtype: np.dtype) -> tuple:
    """(shape, dtype, size, byte strides, bytes) of a C-contiguous buffer: what a launch
    allocates for an output, a temporary or partial results."""
    size = math.prod(shape)
    strides = tuple(s * dtype.itemsize for s in row_major(shape))
    return (shape, dtype, size, strides, size * dtype.itemsize)


def kernel_arg_scalar(value: Any, dtype: np.dtype) -> np.generic:
    """A scalar argument converted like NumPy (OverflowError for out-of-range Python ints),
    then to the type the kernel declares (float16 -> float, bool -> uchar)."""
    v = dt.convert_scalar(value, dtype)
    if dtype == dt.FLOAT16:
        return np.float32(v)
    if dtype == dt.BOOL:
        return np.uint8(v)
    return v


def deriver(params: Sequence[Param], index: int, shared: list | None = None) -> Any:
    """None for a scalar bound from an argument; for a derived one (passes/hoist.py), a function
    of the call's flattened arguments that gives its value, from one evaluation of all the
    executable's derived scalars per call (runtime/derived.py; ``shared`` holds it)."""
    if params[index].kind != "derived":
        return None
    if shared is None:
        shared = []
    if not shared:
        shared.append(DerivedScalars(params))
    return shared[0].getter(index)


def results(outputs: Sequence[OutSpec], host_mode: bool, flat: Sequence[Any],
            outs: Sequence[Any]) -> tuple[Any, ...]:
    """The returned leaves of a call: arguments returned as themselves, computed outputs as
    device arrays, or (``host_mode``: every array argument was a NumPy array) copied back
    (``.get()``), a 0-d result as a 0-d array's scalar."""
    leaves = []
    for spec in outputs:
        if spec.kind == "arg":
            leaves.append(flat[spec.index])
        elif host_mode:
            host = outs[spec.index].get()
            leaves.append(host[()] if host.ndim == 0 else host)
        else:
            leaves.append(outs[spec.index])
    return tuple(leaves)


class LaunchPlan:
    """One specialised call signature's kernels and where each of their arguments comes from.

    ``_plan_arguments`` fills, once per build: the array parameters bound (``_arrays``), the
    captured constants (``_consts``), the by-value scalars with their conversions
    (``_scalars``), runtime extents (``_extents``), per kernel its plan of (table, index)
    pairs (``_plans``), and the sizes of outputs, temporaries and partial results. A backend's
    launch then binds each argument from the call's tables: (arrays, offsets, outputs,
    temporaries, partials, scalars, extents, the status buffer), indexed by PARAM ... STATUS.
    ``_checks``: a kernel reports errors in the status buffer (runtime/status.py)."""

    def __init__(self, graph: Graph, module: Module, outputs: Sequence[OutSpec],
                 temps: Sequence[tuple[tuple[int, ...], np.dtype]], host_mode: bool,
                 index_dtype: np.dtype, treedef: Any, constants: dict[int, np.ndarray]) -> None:
        self.graph = graph
        self.module = module
        self.outputs = tuple(outputs)
        self.temps = tuple(temps)
        self.host_mode = host_mode
        self.index_dtype = index_dtype
        self.treedef = treedef
        self.queue_arg = -1  # position of the first device-array argument (its queue runs us)
        self.constants = constants  # captured arrays, uploaded once per context

    def _plan_arguments(self, kernels: Sequence[tuple[Any, Kernel]]) -> None:
        """Precompute, per (launchable, kernel record) of ``kernels``, where each argument
        comes from, so a call only indexes."""
        params = self.graph.params
        self._arrays = [(p, prm.source, prm.dtype.itemsize) for p, prm in enumerate(params)
                        if prm.kind == "array"]
        self._consts = [p for p, prm in enumerate(params) if prm.kind == "const"]
        scalars: dict[tuple[int, str], int] = {}
        # (flattened argument, kernel dtype, None) or, for a derived scalar, (-1, dtype, its
        # host evaluation from the call's arguments)
        self._scalars: list[tuple[int, np.dtype, Any]] = []
        self._extents: list[np.generic] = []  # loop bounds of kernels for runtime extents
        derived: list = []  # the DerivedScalars every derived scalar's getter shares
        self._derived = derived
        self._plans = []
        for knl, record in kernels:
            plan = []
            for arg in record.signature.args:
                if isinstance(arg, ScalarArg) and arg.role == "offset":
                    plan.append((OFFSET, arg.index))
                elif isinstance(arg, ScalarArg) and arg.role == "extent":
                    plan.append((EXTENT, len(self._extents)))
                    self._extents.append(arg.dtype.type(arg.value))
                elif isinstance(arg, ScalarArg):
                    key = (arg.index, arg.dtype.str)
                    if key not in scalars:
                        scalars[key] = len(self._scalars)
                        self._scalars.append((params[arg.index].source, arg.dtype,
                                              deriver(params, arg.index, derived)))
                    plan.append((SCALAR, scalars[key]))
                else:
                    plan.append((_BUFFER_ROLES[arg.role], arg.index))
            self._plans.append([knl, None if record.role == "host" else record.global_size,
                                record.local_size, tuple(plan)])
        # arrays no kernel reads are not bound, nor uploaded (a captured array the trace did
        # not use, an argument only returned as itself)
        used = {index for _, _, _, plan in self._plans for kind, index in plan
                if kind in (PARAM, OFFSET)}
        self._arrays = [a for a in self._arrays if a[0] in used]
        # scalars that only kernels with an empty range read are still converted on every
        # call, so an out-of-range value raises as in NumPy when a result has size zero
        for n in self.graph.toposort():
            if n.op is Op.SCALAR and (n.arg[0], n.dtype.str) not in scalars:
                scalars[(n.arg[0], n.dtype.str)] = len(self._scalars)
                self._scalars.append((params[n.arg[0]].source, n.dtype,
                                      deriver(params, n.arg[0], derived)))
        n_out = len(self.graph.outputs)
        self._out_specs = [alloc_spec(n.shape, n.dtype) for n in self.graph.outputs]
        self._temp_specs = [alloc_spec(shape, dtype) for shape, dtype in self.temps]
        self._part_specs = [alloc_spec((p.size,), p.dtype) for p in self.module.partials]
        self._n_params = len(params)
        assert n_out == len(self._out_specs)
        # device outputs returned as they are, in order: a launch can return its list directly
        self._simple_out = not self.host_mode and all(
            o.kind == "node" and o.index == i for i, o in enumerate(self.outputs))
        self._offset_params = {index for _, _, _, plan in self._plans for kind, index in plan
                               if kind == OFFSET}
        self._checks = any(kind == STATUS for _, _, _, plan in self._plans for kind, _ in plan)

    def _results(self, flat: Sequence[Any], outs: Sequence[Any]) -> tuple[Any, ...]:
        return results(self.outputs, self.host_mode, flat, outs)
