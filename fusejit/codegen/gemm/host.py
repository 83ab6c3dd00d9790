"""The record of a host GEMM step (passes/host_gemm.py): which signature arguments hold the
operands and the result, and each one's view (offset, strides) of its buffer. No OpenCL is
generated; the record's source is a comment saying what the runtime does in its place
(runtime/host_steps.py), so ``lower().source`` and ``explain()`` show it."""

from __future__ import annotations

import math

from fusejit.errors import InternalError
from fusejit.codegen.context import ModuleContext
from fusejit.codegen.kernels import BufferArg, HostMatmul, HostView, Kernel, ScalarArg
from fusejit.codegen.lowering import Lowering
from fusejit.passes.host_gemm import operand_view
from fusejit.passes.plan import Group, gemm_problem
from fusejit.ir.shapes import row_major_strides


def host_kernels(sm: ModuleContext, name: str, group: Group) -> list[tuple[Kernel, Lowering]]:
    """The host step of one host gemm group."""
    m = group.matmul
    low = sm._lowering(group)
    keys: list[tuple[str, int, tuple[str, int] | None, int, tuple[int, ...], tuple[int, ...]]] = []
    for src in m.srcs:
        view = operand_view(sm.graph, src, set(low.materialized))
        if view is None:  # the pass stored every other operand
            raise InternalError(f"host GEMM operand {src.describe()} is not a strided view")
        leaf, offset, strides = view
        if leaf in low.materialized:
            t = low.materialized[leaf]
            low.args.buffer("temp", t, leaf.dtype)
            keys.append(("temp", t, None, offset, src.shape, strides))
        else:
            low.args.buffer("param", leaf.arg, leaf.dtype)
            off = None
            if sm.graph.params[leaf.arg].has_offset:
                low.args.offset(leaf.arg)
                off = ("offset", leaf.arg)
            keys.append(("param", leaf.arg, off, offset, src.shape, strides))
    (st,) = group.stores
    low.args.buffer(st.dest.kind, st.dest.index, m.dtype, write=True)
    keys.append((st.dest.kind, st.dest.index, None, 0, m.shape, row_major_strides(m.shape)))
    sig = low.args.signature(name)
    where = {(a.role, a.index): i for i, a in enumerate(sig.args) if isinstance(a, BufferArg)}
    where.update({(a.role, a.index): i for i, a in enumerate(sig.args)
                  if isinstance(a, ScalarArg) and a.role == "offset"})
    views = [HostView(where[(role, index)], where[off] if off else -1, offset, shape, strides)
             for role, index, off, offset, shape, strides in keys]
    a, b, c = (sig.args[v.arg].name for v in views)
    source = (f"/* {name}: a host step, not an OpenCL kernel: after the queue finishes, "
              f"np.matmul({a}, {b}, out={c}) in {m.dtype.name} on the mapped buffers "
              f"(NumPy's BLAS); {a} {views[0].shape} strides {views[0].strides}, "
              f"{b} {views[1].shape} strides {views[1].strides} (elements) */")
    kernel = Kernel(name, source, sig, (1,), None, group, "host",
                    work=math.prod(gemm_problem(group)),
                    host=HostMatmul(*views, m.dtype))
    return [(kernel, low)]


__all__ = ["host_kernels"]
