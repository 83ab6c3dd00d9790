"""Realization: which elementwise values are stored once instead of recomputed per reader.

Fusion recomputes every elementwise value inside each kernel that needs it, at each index it
is read at. That is free for a value read at its own index, but a value read at k shifted
indices (``u[2:] - 2 * u[1:-1] + u[:-2]``) is computed k times per element, and a time-stepping
loop compounds it: step s of an unrolled stencil reads step s - 1 at three positions, each of
which reads step s - 2 at three more, so one fused kernel computes early steps thousands of
times and its source grows exponentially with the steps (12 heat steps: 4.6 MB of OpenCL).

The cost model, as Inductor realizes a buffer whose reads would be duplicated: walk the
(node, index) pairs a kernel evaluates for a value, counting each distinct pair once (what the
lowering's memo shares); every node evaluated at a second, third... index is *recomputation*,
weighted by its op cost (``ir.ops.COST``). Where that exceeds the device's limit (about a
store and a few loads' worth of work), the topmost recomputed values are *realized*: an
elementwise kernel stores each into a temporary and readers load it. Each kernel then holds a
bounded number of steps (recomputing a little rather than launching a kernel per step), so
kernels, source and build time grow linearly with the steps.

Values computed from a reduction may be realized too (a loop that renormalises each step): the
partitioner runs their kernels after the reduction's and keeps their readers out of reduce
groups. Leaves and views are never realized (a view of a stored value is a load already).
"""

from __future__ import annotations

from collections.abc import Sequence

from fusejit.ir.graph import Graph, Node, toposort
from fusejit.ir.indexing import Index, src_index
from fusejit.ir.ops import COST, LEAVES, MOVEMENT, REDUCE, Op
from fusejit.ir.symbolic import Expr
from fusejit.passes.plan import Store

# Recomputed work (in adds, ``ir.ops.COST``) per element that one fused kernel may carry before
# the recomputed values are stored instead. GPUs: a transcendental function and a few ops
# recomputed twice stay fused, and an unrolled 1-D heat step (six ops, read at three positions)
# is stored every third step: their kernels are memory-bound, each stored step is a write and a
# read of the whole array more, and the recomputation is nearly free. CPUs compute the steps
# lane by lane where a step's region boundary differs between vector lanes, so a kernel of
# several steps costs more than the traffic it saves: PoCL, 2^20 float32 (fastest of 12 runs):
# 20 heat steps 12-14 ms at every limit from 0 to 48 (20 to 7 kernels), 10 steps of the 2-D
# 5-point Laplacian on 1024^2 10.4 ms at 20 (a kernel a step), 19.7 at 48 (two steps a kernel).
RECOMPUTE_LIMIT = 48
CPU_RECOMPUTE_LIMIT = 24


def recompute_limit(is_gpu: bool) -> int:
    """The recomputed work per element a kernel may carry on this kind of device."""
    return RECOMPUTE_LIMIT if is_gpu else CPU_RECOMPUTE_LIMIT


# (node, index) pairs one walk visits at most: a bigger cone is not walked further (its
# recomputation, if any, was judged where it arose, lower in the graph)
_WALK = 512
# ops an elementwise kernel computes inline, which realization may store (reductions are
# always in ``stop``: their kernels store them)
_INLINE = frozenset(set(Op) - {Op.MATMUL, Op.SCAN, Op.SVDVALS} - LEAVES - REDUCE)


def realize(graph: Graph, stop: set[Node], limit: int = RECOMPUTE_LIMIT) -> list[Node]:
    """The nodes to store in temporaries (in topological order) so that no kernel recomputes
    more than ``limit`` per element (``recompute_limit``); ``stop``: values kernels load
    already (the reductions)."""
    return realize_cone((*graph.outputs, *(w for _, w in graph.writes)), stop, limit,
                        graph.toposort())


def realize_cone(roots: Sequence[Node], stop: set[Node], limit: int = RECOMPUTE_LIMIT,
                 order: Sequence[Node] | None = None) -> list[Node]:
    """``realize`` for the values ``roots`` need (``order``: their cone in topological order,
    when known). A GEMM asks it of an operand it would compute in its tile loads."""
    order = list(order) if order is not None else toposort(roots)
    # values computed from another kind of kernel's result (a product, a scan) stay inline
    blocked: set[Node] = set()
    for n in order:
        if (n.op not in _INLINE and n.op not in LEAVES and n not in stop) or \
                any(s in blocked for s in n.srcs):
            blocked.add(n)
    realized: list[Node] = []
    done = set(stop)
    memo: dict[tuple[Node, int, Index], Index] = {}  # src_index answers (the walks overlap)
    for n in _anchors(roots, order):
        if n in blocked:
            continue
        waste, count = _recomputation(n, done, memo, limit)
        if waste <= limit:
            continue
        for m in _topmost(n, count, done):
            if m not in blocked and m.size > 0:
                realized.append(m)
                done.add(m)
    pos = {n: i for i, n in enumerate(order)}
    return sorted(realized, key=pos.__getitem__)


def _anchors(roots: Sequence[Node], order: list[Node]) -> list[Node]:
    """Where the walks start, in topological order: values read at another index than their
    own (through a view, as a SETITEM's values, gathered) and the values kernels store or
    reduce. Recomputation inside a value read only at its own index shows in its reader's
    walk; walking every node instead made the pass quadratic-looking (50 heat steps: 1000
    walks)."""
    out: set[Node] = set(roots)
    for n in order:
        if n.op in MOVEMENT or n.op is Op.GATHER:
            out.add(n.srcs[0])
        elif n.op is Op.SETITEM:
            out.add(n.srcs[1])
        elif n.op in REDUCE:
            out.add(n.srcs[0])
    return [n for n in order if n in out and n.op not in MOVEMENT and n.op not in LEAVES]


def _index(node: Node) -> Index:
    return tuple(Expr.var(f"a{d}", n) for d, n in enumerate(node.shape))


def _recomputation(node: Node, stop: set[Node], memo: dict[tuple[Node, int, Index], Index],
                   limit: int) -> tuple[int, dict[Node, int]]:
    """(recomputed work, indices per node) of evaluating ``node`` at one index with everything
    not in ``stop`` inlined; stops early once the work is over the limit."""
    count: dict[Node, int] = {}
    seen: set[tuple[Node, Index]] = set()
    stack = [(node, _index(node))]
    waste = 0
    while stack and len(seen) < _WALK and waste <= limit:
        n, i = stack.pop()
        if (n, i) in seen:
            continue
        seen.add((n, i))
        if n in stop or n.op in LEAVES:
            continue
        count[n] = count.get(n, 0) + 1
        if count[n] > 1 and n.op not in MOVEMENT:
            waste += COST.get(n.op, 1)
        for k, s in enumerate(n.srcs):
            key = (n, k, i)
            at = memo.get(key)
            if at is None:
                at = memo[key] = src_index(n, k, i)
            stack.append((s, at))
    return waste, count


def _topmost(node: Node, count: dict[Node, int], stop: set[Node]) -> list[Node]:
    """The recomputed values (evaluated at several indices) nearest ``node``: storing them
    removes the recomputation beneath them too."""
    out: list[Node] = []
    seen: set[Node] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen or n in stop or n not in count:
            continue
        seen.add(n)
        if n is not node and count[n] > 1 and n.op not in MOVEMENT:
            out.append(n)
            continue
        stack.extend(n.srcs)
    return out


def realize_reason(stores: Sequence[Store], realized: set[Node], limit: int) -> str:
    """What ``explain()`` says of a kernel that stores realized values."""
    k = sum(st.dest.kind == "temp" and st.node in realized for st in stores)
    if not k:
        return ""
    what = "a value" if k == 1 else f"{k} values"
    return (f"; stores {what} that later kernels read at several positions, where recomputing "
            f"per position would cost more than the store (over {limit} ops an "
            "element: passes/realize.py)")
