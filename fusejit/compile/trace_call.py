"""A call signature traced: the tracer's parameters made from the signature's argument specs
(one parameter for an array passed twice, read-only captured arrays, broadcast NumPy inputs
read with stride 0), the function run on them, and its returned leaves as ``OutSpec``: what
``Fused`` lowers next (fusejit/api.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fusejit.compile.signature import CallKey, DeviceArraySpec, Identity, ScalarSpec, StaticSpec
from fusejit.compile.specialise import NeedsValue
from fusejit.errors import UnsupportedOperationError
from fusejit.frontend.captured import CAPTURED_READ_ONLY, Captures, outside_values
from fusejit.frontend.overlay import substituted
from fusejit.frontend.pytree import tree_flatten
from fusejit.frontend.trace import TensorProxy, Tracer, lift
from fusejit.ir.graph import Graph, Node, toposort
from fusejit.ir.shapes import row_major_strides
from fusejit.runtime.executable import OutSpec
from fusejit.runtime.memory import HostArraySpec, compact_strides

_VALUE_ERRORS = (TypeError, UnsupportedOperationError)  # what NumPy and fusejit raise there


def trace_call(fn: Callable[..., Any], guards: Captures | None, key: CallKey,
               flat: list[Any], kwnames: tuple[str, ...]
               ) -> tuple[Graph, int, list[OutSpec], Any, dict[int, Any]]:
    """Trace ``fn`` for ``key`` on the call's flattened arguments ``flat`` (positional, then
    keyword values in ``kwnames`` order, then the captured arrays that ``guards`` found): (the
    traced graph, how many values the function computed, returned or not, its returned
    leaves, their tree structure, the captured constants by parameter)."""
    n_pos = len(flat) - len(kwnames) - key.implicit
    first_implicit = len(flat) - key.implicit
    same_as = {j: i for i, j, same in key.aliases if same}
    # overlapping arrays as views of one array, passed at the first's position (overlap.py)
    viewed = {v[0] for v in key.views} - {v[1] for v in key.views}
    bound_self = flat[0] if key.specs and isinstance(key.specs[0], StaticSpec) and \
        isinstance(key.specs[0].value, Identity) else None
    with Tracer() as tracer:
        tracer.outside = lambda: outside_values(guards, bound_self)
        inputs: list[Any] = []
        for i, (value, spec) in enumerate(zip(flat, key.specs)):
            name = f"arg{i}"
            if i in viewed:
                inputs.append(None)  # (its view, below)
            elif i in same_as:  # the same array passed twice: one parameter, one proxy
                inputs.append(inputs[same_as[i]])
            elif i >= first_implicit:  # a captured array: read-only, read fresh
                strides = spec.strides if isinstance(spec, DeviceArraySpec) else None
                inputs.append(tracer.array_param(
                    spec.dtype, spec.shape, strides if strides is not None else
                    row_major_strides(spec.shape), f"captured{i - first_implicit}", i,
                    writable=False, has_offset=getattr(spec, "has_offset", False),
                    wide=getattr(spec, "wide", False)))
                inputs[-1]._readonly = CAPTURED_READ_ONLY
            elif isinstance(spec, StaticSpec):
                inputs.append(value)
            elif isinstance(spec, DeviceArraySpec):
                inputs.append(tracer.array_param(spec.dtype, spec.shape, spec.strides, name,
                                                 i, has_offset=spec.has_offset,
                                                 wide=spec.wide))
                if not spec.writeable:
                    inputs[-1]._readonly = (f"argument {i} is a read-only export (a JAX array, "
                                            "say, is immutable): write into a copy of it")
            elif isinstance(spec, HostArraySpec):
                strides = compact_strides(spec.shape, spec.zero) if spec.zero else \
                    row_major_strides(spec.shape)  # broadcast axes: read with stride 0
                inputs.append(tracer.array_param(spec.dtype, spec.shape, strides, name, i,
                                                 writable=spec.writeable))
            else:
                inputs.append(tracer.scalar_param(value, name, i))
        spans = {i: inputs[i] for _, i, _, _, _ in key.views}
        for i, at, affine, shape, writeable in key.views:
            inputs[i] = spans[at]._view(affine, shape, readonly=CAPTURED_READ_ONLY if
                                        i >= first_implicit else not writeable)
        if key.implicit:
            for value, proxy in zip(flat[first_implicit:], inputs[first_implicit:]):
                tracer.captured[id(value)] = (value, proxy)
            fn, new_self = substituted(fn, guards, lambda v: (
                tracer.captured.get(id(v), (None, None))[1]), bound_self)
            if bound_self is not None:
                inputs[0] = new_self
        try:
            result = fn(*inputs[:n_pos], **dict(zip(kwnames, inputs[n_pos:])))
        except _VALUE_ERRORS as exc:
            ints = {i for i, s in enumerate(key.specs[:first_implicit]) if isinstance(s, ScalarSpec)
                    and (s.ptype in (int, bool) or isinstance(s.ptype, tuple))}
            if ints:  # (a dynamic Python int beyond int64 is keyed by its range: a tuple)
                raise NeedsValue(frozenset(tracer.concrete & ints) or None, frozenset(ints),
                                 exc) from exc
            raise
        leaves, treedef = tree_flatten(result)
        nodes: list[Node] = []
        outputs: list[OutSpec] = []
        for leaf in leaves:
            param = next((p for p, proxy in tracer.param_proxies.items() if proxy is leaf),
                         None)
            if param is not None:
                outputs.append(OutSpec("arg", tracer.params[param].source))
                continue
            proxy = leaf if isinstance(leaf, TensorProxy) else lift(leaf)
            outputs.append(OutSpec("node", len(nodes)))
            nodes.append(proxy.node)
        traced = tracer.graph(nodes)
        constants = dict(tracer.constants)
    # everything the function computed, returned or not (explain() reports the unused)
    traced_nodes = len(toposort(list(traced.roots) + tracer.values))
    return traced, traced_nodes, outputs, treedef, constants
