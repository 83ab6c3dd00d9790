"""``f.explain(*args)``: what fusejit made of a call, as a readable report and a DAG picture.

The report has the traced graph, what each pass changed, the fusion groups with the reason for
every split, the bytes moved by the fused kernels against one kernel per op, and the kernel
sources. ``Explanation.dot`` is the graph as Graphviz dot text (nodes grouped by the kernel that
computes them); ``Explanation.render(path)`` draws it when the ``dot`` executable is installed.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fusejit.ir.graph import Graph, Node, format_arg, format_graph
from fusejit.ir.ops import LEAVES, MOVEMENT, REDUCE, Op

if TYPE_CHECKING:
    from fusejit.codegen.source import Kernel
    from fusejit.inspect.lowered import Lowered


@dataclass(frozen=True)
class Traffic:
    """Bytes read and written by the fused kernels and by one kernel per op."""

    fused: int
    unfused: int

    @property
    def saved(self) -> float:
        return 1.0 - self.fused / self.unfused if self.unfused else 0.0


@dataclass(frozen=True)
class Explanation:
    """What ``Fused.explain`` returns; ``str()`` is the report."""

    name: str
    lowered: Lowered
    traffic: Traffic
    report: str
    dot: str

    def __str__(self) -> str:
        return self.report

    def render(self, path: str | Path) -> Path:
        """Draw the DAG to ``path`` (format from its suffix: png, svg, pdf...) with Graphviz."""
        exe = shutil.which("dot")
        if exe is None:
            raise RuntimeError(
                "rendering needs the Graphviz 'dot' executable, which is not on PATH (install "
                "graphviz, e.g. `apt install graphviz`); the dot text is in `.dot` and can be "
                "pasted into any Graphviz viewer")
        path = Path(path)
        fmt = path.suffix.lstrip(".") or "png"
        subprocess.run([exe, f"-T{fmt}", "-o", str(path)], input=self.dot.encode(), check=True)
        return path


def explain(name: str, lowered: Lowered) -> Explanation:
    traffic = memory_traffic(lowered)
    return Explanation(name, lowered, traffic, _report(name, lowered, traffic), to_dot(lowered))


# -- report ----------------------------------------------------------------------------------------


def _report(name: str, low: Lowered, traffic: Traffic) -> str:
    traced, graph = len(low.traced), len(low.graph)
    lines = [f"explain {name}", "", "== traced graph ==", format_graph(low.traced), "",
             "== passes =="]
    unused = low.traced_nodes - traced
    lines.append(f"  traced {low.traced_nodes} value(s); {unused} never reach an output or an "
                 f"in-place write (dropped); {traced} in the traced graph")
    for rec in low.passes:
        change = f"{rec.nodes_before} -> {rec.nodes_after} nodes"
        lines.append(f"  {rec.name:<9} {rec.count:>4} {rec.meaning} ({change})")
    lines.append(f"  result: {graph} node(s)")
    if graph != traced:
        lines += ["", "== graph after the passes ==", format_graph(low.graph)]
    lines += ["", "== fusion groups ==",
              f"  {len(low.module.kernels)} kernel(s) for {graph} node(s)"]
    for k in low.module.kernels:
        stores = ", ".join(_store_name(s) for s in k.group.stores + k.group.row_stores)
        lines.append(f"  {k.name} [{k.role}] global {k.global_size} local {k.local_size}")
        lines.append(f"      why: {k.group.reason}")
        if stores:
            lines.append(f"      stores: {stores}")
    for i, node in enumerate(low.plan.temps):
        lines.append(f"  temporary t{i}: {node.describe()} {node.op.name.lower()} result, "
                     "stored because another kernel reads it")
    lines += [f"  note: {note}" for note in low.plan.notes]
    lines += ["", "== memory traffic ==",
              f"  fused:   {_bytes(traffic.fused)} (each kernel's buffers read once, written once)",
              f"  unfused: {_bytes(traffic.unfused)} (one kernel per op: every op reads its operands "
              + "and writes its result)",
              f"  saved:   {traffic.saved:.0%}", "", "== kernel sources ==", low.source]
    return "\n".join(lines)


def _store_name(store: object) -> str:
    dest = store.dest  # type: ignore[attr-defined]
    label = {"output": "output", "param": "argument", "temp": "temporary"}[dest.kind]
    return f"{label} {dest.index} ({store.node.describe()})"  # type: ignore[attr-defined]


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover


# -- memory traffic --------------------------------------------------------------------------------


def memory_traffic(low: Lowered) -> Traffic:
    """Fused: every buffer argument of every kernel read once (and a written argument written
    once more); unfused: every op of the function as traced (before the passes, whose rewrites
    may add cheap ops) reads its operands and writes its result (movement ops are free,
    literals and scalars cost nothing, a broadcast operand is read at its own size)."""
    graph = low.traced
    fused = 0
    for kernel in low.module.kernels:
        for arg in kernel.signature.args:
            if not hasattr(arg, "writable"):
                continue  # scalars and offsets travel with the launch
            size = _arg_bytes(low, kernel, arg)
            fused += size * (2 if arg.writable and arg.role == "param" else 1)
    unfused = 0
    for node in graph.toposort():
        if node.op in LEAVES or node.op in MOVEMENT:
            continue
        unfused += node.size * node.dtype.itemsize
        unfused += sum(_read_bytes(s) for s in node.srcs)
    return Traffic(fused, unfused)


def _arg_bytes(low: Lowered, kernel: Kernel, arg: object) -> int:
    role = getattr(arg, "role", "")
    index = getattr(arg, "index", 0)
    if role == "param":
        p = low.graph.params[index]
        n = 1
        for d in p.shape:
            n *= d
        return n * p.dtype.itemsize
    if role == "output":
        node = low.graph.outputs[index]
        return node.size * node.dtype.itemsize
    if role == "temp":
        node = low.plan.temps[index]
        return node.size * node.dtype.itemsize
    if role == "partial":
        part = low.module.partials[index]
        return part.size * part.dtype.itemsize
    return 0  # scalars and offsets travel with the launch


def _read_bytes(node: Node) -> int:
    base = node
    while base.op in MOVEMENT:
        base = base.srcs[0]
    if base.op in (Op.CONST, Op.SCALAR, Op.IOTA):
        return 0
    return min(node.size, base.size) * node.dtype.itemsize


# -- Graphviz --------------------------------------------------------------------------------------


def _kernel_members(low: Lowered) -> dict[Node, list[str]]:
    """Which kernels compute each node (a node can be recomputed by several)."""
    temps = set(low.plan.temps)
    members: dict[Node, list[str]] = {}
    for kernel in low.module.kernels:
        g = kernel.group
        roots = [s.node for s in g.stores + g.row_stores] + list(g.reductions)
        own = {s.node for s in g.stores + g.row_stores if s.dest.kind == "temp"}
        seen: set[Node] = set()
        stack = list(roots)
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            members.setdefault(n, [])
            if kernel.name not in members[n]:
                members[n].append(kernel.name)
            if n in temps and n not in g.reductions and n not in own:
                continue  # loaded from its temporary, computed elsewhere
            stack.extend(n.srcs)
    return members


def _label(node: Node, graph: Graph) -> str:
    if node.op is Op.CONST:
        return f"{format_arg(node)}\\n{node.dtype.name}"
    if node.op in (Op.INPUT, Op.SCALAR):
        index = node.arg if node.op is Op.INPUT else node.arg[0]
        return f"%arg{index}\\n{node.describe()}"
    detail = "" if node.op in (Op.VIEW,) else format_arg(node)
    text = node.op.name.lower() + (f" {detail}" if detail and len(detail) < 24 else "")
    return f"{text}\\n{node.describe()}"


def to_dot(low: Lowered) -> str:
    """The optimised graph as dot text: one cluster per kernel, outputs double-circled."""
    graph = low.graph
    order = graph.toposort()
    ids = {n: f"n{i}" for i, n in enumerate(order)}
    members = _kernel_members(low)
    outputs = set(graph.outputs) | {n for _, n in graph.writes}
    temps = set(low.plan.temps)
    lines = ["digraph fused {", "  rankdir=TB;",
             '  node [shape=box, fontname="monospace", fontsize=10];']
    clustered: dict[str, list[Node]] = {k.name: [] for k in low.module.kernels}
    loose: list[Node] = []
    for n in order:
        owners = members.get(n, [])
        if len(owners) == 1 and n.op not in LEAVES:
            clustered[owners[0]].append(n)
        else:
            loose.append(n)

    def node_line(n: Node) -> str:
        attrs = [f'label="{_label(n, graph)}"']
        if n.op in LEAVES:
            attrs.append("shape=ellipse")
        if n in outputs:
            attrs.append("peripheries=2")
        if n in temps:
            attrs.append('style=filled, fillcolor="#fde9b6"')
        elif n.op in REDUCE:
            attrs.append('style=filled, fillcolor="#dbe8fb"')
        owners = members.get(n, [])
        if len(owners) > 1 and n.op not in LEAVES:
            attrs[0] = attrs[0][:-1] + f'\\n(recomputed in {", ".join(owners)})"'
            attrs.append("style=dashed")
        return f"  {ids[n]} [{', '.join(attrs)}];"

    for k in low.module.kernels:
        if not clustered[k.name]:
            continue
        lines.append(f"  subgraph cluster_{k.name} {{")
        lines.append(f'    label="{k.name}";')
        lines += ["  " + node_line(n) for n in clustered[k.name]]
        lines.append("  }")
    lines += [node_line(n) for n in loose]
    for n in order:
        for s in n.srcs:
            lines.append(f"  {ids[s]} -> {ids[n]};")
    for i, n in enumerate(graph.outputs):
        lines.append(f'  out{i} [label="output {i}", shape=plaintext];')
        lines.append(f"  {ids[n]} -> out{i};")
    for p, n in graph.writes:
        lines.append(f'  write{p} [label="writes %arg{p}", shape=plaintext];')
        lines.append(f"  {ids[n]} -> write{p};")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["Explanation", "Traffic", "explain", "memory_traffic", "to_dot"]
