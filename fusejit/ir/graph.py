"""The traced program: immutable, hash-consed nodes and the graph that holds them.

Nodes are built only through ``Node.make``, which interns them: two requests for the same op on
the same operands return the same object, so common subexpressions are shared by construction and
nodes can be compared by identity and used as dict keys. Operands are an ordered tuple.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fusejit.ir.ops import OPS, Op

Shape = tuple[int, ...]


class Node:
    """One value in the traced program: ``op`` applied to ``srcs`` with static ``arg``.

    ``dtype`` and ``shape`` are the value's (specialised, known at trace time). ``arg`` holds
    everything else that identifies the op (axes, index maps, literal bits); it must be hashable.
    """

    __slots__ = ("__weakref__", "_hash", "arg", "dtype", "op", "shape", "srcs")
    _interned: ClassVar[weakref.WeakValueDictionary[tuple, Node]] = \
        weakref.WeakValueDictionary()

    op: Op
    dtype: np.dtype
    shape: Shape
    srcs: tuple[Node, ...]
    arg: Any

    def __init__(self) -> None:  # pragma: no cover - use Node.make
        raise TypeError("use Node.make(...) to build nodes")

    @classmethod
    def make(cls, op: Op, dtype: np.dtype, shape: Shape, srcs: tuple[Node, ...] = (),
             arg: Any = None) -> Node:
        key = (op, dtype, shape, tuple(map(id, srcs)), arg)
        node = cls._interned.get(key)
        if node is None:
            node = object.__new__(cls)
            for name, value in zip(("op", "dtype", "shape", "srcs", "arg"),
                                   (op, dtype, shape, srcs, arg)):
                object.__setattr__(node, name, value)
            object.__setattr__(node, "_hash", hash(key))
            cls._interned[key] = node
        return node

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("nodes are immutable; build a new one with Node.make")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other

    def replace(self, **changes: Any) -> Node:
        fields = {"op": self.op, "dtype": self.dtype, "shape": self.shape, "srcs": self.srcs,
                  "arg": self.arg, **changes}
        return Node.make(**fields)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def describe(self) -> str:
        """Short type string used in messages: ``float32[1024,3]``."""
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    def __repr__(self) -> str:
        return f"<Node {self.op.name} {self.describe()}>"


# -- literals -------------------------------------------------------------------------------------
# A CONST node's arg is the value's bytes in its dtype: exact (keeps -0.0 apart from 0.0, NaN
# payloads, float16 bits) and hashable.

def const(value: Any, dtype: np.dtype, shape: Shape = ()) -> Node:
    """A literal of ``dtype`` (converted with NumPy's rules), broadcast to ``shape``."""
    with np.errstate(all="ignore"):
        scalar = np.asarray(value).astype(dtype)
    node = Node.make(Op.CONST, dtype, (), (), scalar.tobytes())
    return node if shape == () else broadcast_view(node, shape)


def const_value(node: Node) -> np.generic:
    assert node.op is Op.CONST
    return np.frombuffer(node.arg, dtype=node.dtype)[0]


def broadcast_view(node: Node, shape: Shape) -> Node:
    from fusejit.ir.shapes import broadcast_map  # local: shapes imports ir

    if node.shape == shape:
        return node
    return Node.make(Op.VIEW, node.dtype, shape, (node,), broadcast_map(node.shape, shape))


# -- graphs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One runtime argument of the traced function.

    kind: "array" (a buffer), "scalar" (a value passed to the kernel), "const" (an array
        captured while tracing, uploaded once) or "derived" (a scalar the launcher computes on
        the host from the scalar parameters, see passes/hoist.py).
    strides: element strides of the array argument as specialised (None for scalars).
    source: index of the flattened call argument the parameter is bound from.
    has_offset: the array starts at a non-zero element offset into its buffer (passed at run
        time, so a new offset does not recompile).
    wide: the buffer holds 2**31 elements or more, so index math needs 64 bits.
    expr: a derived scalar's expression (over SCALAR and CONST leaves).
    """

    kind: str
    dtype: np.dtype
    shape: Shape
    name: str
    source: int
    strides: tuple[int, ...] | None = None
    has_offset: bool = False
    wide: bool = False
    expr: Node | None = None


@dataclass(frozen=True)
class Graph:
    """A traced function: parameters, output nodes and in-place writes (param index, new value)."""

    params: tuple[Param, ...]
    outputs: tuple[Node, ...]
    writes: tuple[tuple[int, Node], ...] = ()

    @property
    def roots(self) -> tuple[Node, ...]:
        return self.outputs + tuple(node for _, node in self.writes)

    def toposort(self) -> list[Node]:
        return list(self._order())

    def _order(self) -> tuple[Node, ...]:
        # A graph never changes (frozen, immutable nodes), so its order is computed once: the
        # passes, the partitioner and lower() each ask for it (~15 walks per compile before).
        order = self.__dict__.get("_topo")
        if order is None:
            order = tuple(toposort(self.roots))
            object.__setattr__(self, "_topo", order)
        return order

    def consumers(self) -> dict[Node, list[Node]]:
        users: dict[Node, list[Node]] = {n: [] for n in self.toposort()}
        for node in users:
            for src in node.srcs:
                users[src].append(node)
        return users

    def with_roots(self, outputs: Iterable[Node], writes: Iterable[tuple[int, Node]]) -> Graph:
        return Graph(self.params, tuple(outputs), tuple(writes))

    def __len__(self) -> int:
        return len(self._order())

    def __str__(self) -> str:
        return format_graph(self)


def toposort(roots: Iterable[Node]) -> list[Node]:
    """Operands before users, deterministic (depth-first in operand order), iterative."""
    order: list[Node] = []
    seen: set[Node] = set()
    for root in roots:
        if root in seen:
            continue
        stack: list[tuple[Node, Iterator[Node]]] = [(root, iter(root.srcs))]
        seen.add(root)
        while stack:
            node, it = stack[-1]
            for src in it:
                if src not in seen:
                    seen.add(src)
                    stack.append((src, iter(src.srcs)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def verify(graph: Graph) -> None:
    """Structural invariants every pass must keep (run after each pass in debug mode)."""
    for node in graph.toposort():
        info = OPS[node.op]
        assert len(node.srcs) == info.arity, (node, info.arity)
        assert all(isinstance(d, int) and d >= 0 for d in node.shape), node
        if node.op is Op.INPUT:
            param = graph.params[node.arg]
            assert param.kind == "array" and param.shape == node.shape, (node, param)
        if node.op is Op.SCALAR:
            assert graph.params[node.arg[0]].kind in ("scalar", "derived"), node
    for index, node in graph.writes:
        assert graph.params[index].shape == node.shape, (index, node)
        assert graph.params[index].dtype == node.dtype, (index, node)


def format_arg(node: Node) -> str:
    if node.op is Op.CONST:
        return repr(const_value(node).item())
    if node.op is Op.INPUT:
        return f"%arg{node.arg}"
    if node.op is Op.SCALAR:
        return f"%arg{node.arg[0]}"
    if node.op is Op.SCAN:
        return f"{node.arg[0].name.lower()}, axis={node.arg[1]}"
    if node.op is Op.VIEW:
        from fusejit.ir.shapes import format_map

        return format_map(node.arg)
    return "" if node.arg is None else str(node.arg)


def format_graph(graph: Graph, names: dict[Node, str] | None = None) -> str:
    """One line per node in topological order, like a jaxpr."""
    names = dict(names or {})
    lines = ["graph(" + ", ".join(
        f"%arg{i}: {p.dtype.name}[{','.join(map(str, p.shape))}]"
        + {"array": "", "derived": " derived"}.get(p.kind, " scalar")
        for i, p in enumerate(graph.params)) + ") {"]
    for node in graph.toposort():
        names.setdefault(node, f"%{len(names)}")
        operands = ", ".join(names[s] for s in node.srcs)
        arg = format_arg(node)
        detail = ", ".join(x for x in (operands, arg) if x)
        lines.append(f"  {names[node]}: {node.describe()} = {node.op.name.lower()}({detail})")
    outs = ", ".join(names[n] for n in graph.outputs)
    lines.append(f"  return ({outs})")
    for index, node in graph.writes:
        lines.append(f"  write %arg{index} <- {names[node]}")
    lines.append("}")
    return "\n".join(lines)
