"""GEMM cores through NumPy's BLAS on devices whose buffers are host memory (XLA:CPU's way).

On PoCL's CPU device a hand-written OpenCL GEMM reaches about half of what OpenBLAS does on the
same cores (1024^3 float32 on 2 cores: ~27 ms against ~12 ms), while the device's buffers are
ordinary host memory that the host can compute in once the queue is finished. So there a large
float32/float64 product's gemm group becomes a *host step* in the launch plan, with fused
kernels around it:

1. **Prologue.** An operand that is a plain strided view of an argument or of a value an
   earlier kernel stored is read in place (``np.matmul`` takes any strides); an operand with
   computation in its cone (casts, scaling, dequantize, a layernorm) is stored once by an
   elementwise kernel into a temporary.
2. **The product.** The host step finishes the queue, maps the buffers (no copies: PoCL maps
   its buffers in place) and runs ``np.matmul(a, b, out=c)`` into the product's temporary, or
   straight into the output when the product is all the group stores.
3. **Epilogue.** The group's stores (bias, activation, residual, several outputs, the stored
   operand of the next product) become one elementwise kernel that loads the product.

Small products stay in the OpenCL kernel (the finish, maps and unmaps cost ~0.3 ms), and so do
convolutions below 4x that work (the host would first store their windows as an im2col matrix);
``FUSEJIT_HOST_BLAS=0`` keeps every product there, ``=1`` sends every non-empty one here.
``explain()`` names the path in the group's reason and in the step's (comment) source.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace

from fusejit.ir import dtypes as dt
from fusejit.ir.indexing import src_index
from fusejit.ir.graph import Graph, Node
from fusejit.ir.ops import MOVEMENT, Op
from fusejit.ir.shapes import broadcast_shapes, row_major_strides
from fusejit.ir.symbolic import Expr
from fusejit.passes import window
from fusejit.passes.plan import Dest, DeviceLimits, Group, Plan, Store, gemm_problem

# B*M*N*K from which the host's BLAS pays on PoCL (2 shared cores, dense ReLU layers, fastest
# of 9: the step's finish, maps and unmaps cost ~0.3 ms, so at 128^3 the kernel took 0.12 ms
# against 0.44; at 256^3 0.7-1.0 ms either way; from 384^3 on the host wins, 1.5-2x at 1024^3)
MIN_WORK = 1 << 24
# an implicit GEMM (a convolution) pays the host's im2col matrix, written and read once: 3x3
# layers on PoCL (NHWC, M = 12544; ms host / kernel): K=144 N=16 28 / 21, K=144 N=64 28 / 35,
# K=288 N=64 37 / 76, K=576 N=64 72 / 149
CONV_MIN_WORK = 4 * MIN_WORK
ENV = "FUSEJIT_HOST_BLAS"
DTYPES = (dt.FLOAT32, dt.FLOAT64)  # what BLAS computes (float16 and integers stay in kernels)


@dataclass(frozen=True)
class HostBlas:
    """The gemm_config of a group whose product runs on the host (codegen/gemm/host.py makes its
    record, runtime/host_steps.py runs it); the group's reason says why."""


# open kept_in_kernels() blocks: while any is, every product stays in its kernel
_kept: list[None] = []


@contextlib.contextmanager
def kept_in_kernels() -> Iterator[None]:
    """Every product planned inside the block stays in its OpenCL kernel (codegen/gemm/tune.py's
    ``forced``: a test of a kernel variant must run that kernel, not the host's BLAS)."""
    _kept.append(None)
    try:
        yield
    finally:
        _kept.pop()


def mode() -> str:
    """'off', 'on' (every non-empty product) or 'auto' (products of MIN_WORK or more)."""
    v = os.environ.get(ENV, "").strip().lower()
    return "off" if v in ("0", "off", "false", "no") else "on" if v in (
        "1", "on", "true", "yes", "force") else "auto"


def operand_view(graph: Graph, node: Node, stop: set[Node]
                 ) -> tuple[Node, int, tuple[int, ...]] | None:
    """(leaf, element offset, element strides) when ``node`` is a strided view of an
    argument or of a stored value in ``stop`` (its element at index i is at offset +
    sum(i * strides) of the leaf's buffer); None when its cone computes anything."""
    names = [f"h{i}" for i in range(node.ndim)]
    idx = tuple(Expr.var(n, d) for n, d in zip(names, node.shape))
    cur = node
    while cur not in stop and cur.op in MOVEMENT:
        idx = src_index(cur, 0, idx)
        cur = cur.srcs[0]
    if cur.dtype != node.dtype:
        return None
    if cur in stop:
        strides, base = row_major_strides(cur.shape), 0
    elif cur.op is Op.INPUT and graph.params[cur.arg].kind in ("array", "const"):
        param = graph.params[cur.arg]
        strides, base = param.strides or row_major_strides(param.shape), 0
    else:
        return None
    addr = Expr(base)
    for i, s in zip(idx, strides):
        addr = addr + i * s
    coefs = addr.affine()
    if coefs is None or not set(coefs) <= set(names):
        return None
    return cur, addr.const, tuple(coefs.get(n, 0) for n in names)


def _eligible(group: Group, how: str) -> bool:
    if group.kind != "gemm" or group.gemm_config is not None or group.matmul is None:
        return False
    m = group.matmul
    if m.dtype not in DTYPES or any(s.dtype != m.dtype for s in m.srcs):
        return False
    work = math.prod(gemm_problem(group))
    # (a convolution's host product needs its windows stored first: im2col)
    least = CONV_MIN_WORK if window.reads_window(group) else MIN_WORK
    return work > 0 and (how == "on" or work >= least)


def host_blas(graph: Graph, plan: Plan, limits: DeviceLimits) -> Plan:
    """The plan with large float products on the host where the device allows it (see the
    module docstring); the plan itself everywhere else (GPUs, Vulkan, small products)."""
    how = mode()
    if not limits.host_blas or limits.is_gpu or how == "off" or _kept or not any(
            _eligible(g, how) for g in plan.groups):
        return plan
    temps = list(plan.temps)
    groups: list[Group] = []
    written: set[Node] = set()  # values stored by the groups so far (loaded from then on)
    for g in plan.groups:
        new = _split(graph, g, temps, written) if _eligible(g, how) else [g]
        groups += new
        for gg in new:
            written |= {temps[st.dest.index] for st in gg.stores + gg.row_stores
                        if st.dest.kind == "temp"}
            written |= {r for r in gg.reductions if r in temps}
    return replace(plan, groups=tuple(groups), temps=tuple(temps))


def _split(graph: Graph, g: Group, temps: list[Node], written: set[Node]) -> list[Group]:
    """Prologue kernels, the host step and the epilogue kernel of gemm group ``g``."""
    m = g.matmul
    out: list[Group] = []
    for name, src in zip("ab", m.srcs):
        if operand_view(graph, src, written) is None:
            why = "its prologue computes"
            if window.find_window(src, written) is not None:
                why = (f"it reads a window map, so it is stored as an im2col matrix "
                       f"({window.im2col_size(src)}; FUSEJIT_HOST_BLAS=0 keeps "
                       "the convolution one implicit-GEMM kernel, no im2col buffer)")
            temps.append(src)
            written.add(src)
            out.append(Group("elementwise", src.shape, (Store(src, Dest("temp", len(temps) - 1)),),
                             f"operand {name} of the host GEMM below, stored once: {why} (the "
                             "host's BLAS reads a plain strided array)"))
    # where the product goes: its own temporary or output store when the group has one
    own = [st for st in g.stores if st.node is m and st.region is None]
    dest = next((st for st in own if st.dest.kind == "temp"), None)
    if dest is None and len(g.stores) == 1 and own and own[0].dest.kind == "output":
        dest = own[0]
    if dest is None:
        temps.append(m)
        dest = Store(m, Dest("temp", len(temps) - 1))
    rest = tuple(st for st in g.stores if st is not dest)
    *batch, rows, k = m.srcs[0].shape
    shape = "x".join(map(str, (*batch, rows, m.shape[-1], k)))
    axes = "batch x M x N x K" if batch else "M x N x K"
    reason = (f"GEMM {'batched ' if batch else ''}{shape} ({axes}) in "
              f"{m.dtype.name} on the host: np.matmul (NumPy's BLAS) into the mapped "
              f"{'output' if dest.dest.kind == 'output' else 'temporary'}, after the queue "
              "finishes (this CPU device's buffers are host memory; OpenBLAS outruns an "
              "OpenCL GEMM there)" + ("; the epilogue is the next kernel" if rest else ""))
    out.append(replace(g, stores=(dest,), reason=reason, gemm_config=HostBlas()))
    if rest:
        written.add(m)
        space = broadcast_shapes(*(st.node.shape for st in rest))
        out.append(Group("elementwise", space, rest,
                         f"elementwise over {space}: the epilogue of the host GEMM above, "
                         "reading its product"))
    return out


__all__ = ["CONV_MIN_WORK", "HostBlas", "MIN_WORK", "host_blas", "operand_view"]
