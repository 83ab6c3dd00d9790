"""GEMM groups: each MATMUL is one kernel with a fused prologue and epilogue.

``partition_gemm`` wraps ``partition`` (which knows elementwise and reduction kernels):

1. **Epilogue.** A root (output, in-place write) that reads a product only at its own index,
   over the product's whole space and through no reduction, is stored by that product's
   kernel: bias, activations, residuals, casts, several outputs (before and after the
   activation). With several products in it, the latest one owns it; the others are stored.
2. **Prologue.** An operand is loaded through its elementwise cone (casts, scaling, dequantize,
   views, transposes) inside the GEMM's tile loads. When the cone reaches another product or a
   reduction, the operand's value is stored once: by the earlier product's epilogue when it
   is pointwise in it (a chain of GEMMs: ``gelu(x @ w1 + b1) @ w2`` stores the activation
   once), else by an ordinary kernel (``layernorm(x) @ w``); so is a cone that would recompute
   values at shifted positions beyond the limit (an unrolled stencil loop: ``realize.py``).
3. **The rest** (roots that are not epilogues, the stored operands) goes to ``partition`` in
   *phases*: phase p holds the roots that read products of phase p - 1, so no kernel both
   feeds a GEMM and reads it. Values stored by GEMM kernels are leaves there (stand-in
   parameters), mapped back to the graph's nodes afterwards.

Scans (SCAN nodes) follow the same rules as products: a scan reads whole rows of its operand
and its epilogue reads it at its own index, so each is a "scan" group (fusejit/codegen/scan.py).

In-place writes are then checked across all kernels: a write that a later kernel, or the
GEMM's own tile loads, could still read goes through a temporary copied back at the end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from fusejit.ir.indexing import Index, unravel
from fusejit.ir.graph import Graph, Node, Param
from fusejit.ir.ops import LEAVES, MOVEMENT, REDUCE, SHARED_BY_LANES, Op
from fusejit.ir.shapes import row_major_strides
from fusejit.ir.symbolic import Div, Expr, Mod, Var
from fusejit.passes import window
from fusejit.passes.inplace import stage
from fusejit.passes.partition import Dest, DeviceLimits, Group, Plan, Store, partition
from fusejit.passes.plan import leaves_of, reads_of
from fusejit.passes.realize import realize_cone, recompute_limit


def partition_gemm(graph: Graph, limits: DeviceLimits | None = None,
                   aliases: Sequence[frozenset[int]] = (), rows: bool = False,
                   dynamic: bool = False) -> Plan:
    """``partition`` for graphs with matrix products (see the module docstring); ``rows``:
    row reductions take their length at launch (fusejit/ir/rows.py; not with matrix products);
    ``dynamic``: kernels take their extents at launch."""
    order = graph.toposort()
    # scans are kernels of this shape too: a whole-row prologue, an epilogue at their own index
    mms = [n for n in order if n.op in (Op.MATMUL, Op.SCAN, Op.SVDVALS)]
    if not mms:
        return partition(graph, limits, aliases, rows, dynamic)
    return _GemmPartition(graph, order, mms, limits or DeviceLimits(), aliases, dynamic).plan()


def _index(shape: tuple[int, ...]) -> Index:
    return unravel(Expr.var("o", max(1, math.prod(shape))), shape)


# per axis of an epilogue node, its parts (high to low): (product axis, stride, extent)
ProductAxes = tuple[tuple[tuple[int, int, int], ...], ...]


def product_axes(node: Node, g: Node) -> ProductAxes | None:
    """How ``node`` reads the product ``g`` when it reads it at one element per own element,
    through reshapes and transposes only (a bijection: an epilogue's store in another layout,
    a grouped convolution's (G, K) columns merged into one channel axis); None otherwise.

    Found by evaluating ``node`` at independent index variables, one per part of each axis:
    an axis read through a division or modulo is split there, until each product axis reads
    a sum of distinct parts whose strides are row-major over their extents."""
    parts = [[n] for n in node.shape]  # each axis' part extents, high to low
    stop = {x for x in _cone(node) if x.op in _HEAVY or x.op in REDUCE} | {g}
    for _ in range(8):
        own = []
        for j, ext in enumerate(parts):
            e, radix = Expr(0), 1
            for k in reversed(range(len(ext))):
                e = e + Expr.var(f"?e{j}_{k}", ext[k]) * radix
                radix *= ext[k]
            own.append(e)
        reads = {tuple(i) for n, i in reads_of(node, tuple(own), stop) if n is g}
        if len(reads) != 1:
            return None
        read = reads.pop()
        split = _split_at(read, parts)
        if split is None:
            return _strides(read, parts, g.shape)
        j, k, c = split
        parts[j][k:k + 1] = [parts[j][k] // c, c]
    return None


def _split_at(read: tuple[Expr, ...], parts: list[list[int]]) -> tuple[int, int, int] | None:
    """A part read through ``// c`` or ``% c`` that ``c`` divides: (axis, part, c)."""
    for e in read:
        for atom, _ in e.terms:
            if isinstance(atom, (Div, Mod)) and len(atom.x.terms) == 1 and not atom.x.const:
                v, coef = atom.x.terms[0]
                if isinstance(v, Var) and v.name.startswith("?e") and coef == 1:
                    j, k = map(int, v.name[2:].split("_"))
                    n = parts[j][k]
                    if 1 < atom.c < n and n % atom.c == 0:
                        return j, k, atom.c
    return None


def _strides(read: tuple[Expr, ...], parts: list[list[int]], sizes: tuple[int, ...]
             ) -> ProductAxes | None:
    found: dict[tuple[int, int], tuple[int, int, int]] = {}
    for a, (e, n) in enumerate(zip(read, sizes)):
        if n == 1:
            continue
        terms = []
        for atom, c in e.terms:
            if e.const or not isinstance(atom, Var) or not atom.name.startswith("?e"):
                return None
            terms.append((c, tuple(map(int, atom.name[2:].split("_")))))
        stride = 1
        for c, jk in sorted(terms):
            if c != stride or jk in found:
                return None
            found[jk] = (a, c, parts[jk[0]][jk[1]])
            stride *= parts[jk[0]][jk[1]]
        if stride != n:
            return None
    if set(found) != {(j, k) for j, ext in enumerate(parts) for k, n in enumerate(ext) if n > 1}:
        return None
    return tuple(tuple(found.get((j, k), (-1, 1, 1)) for k in range(len(ext)))
                 for j, ext in enumerate(parts))


def product_index(axes: ProductAxes, idx: Index, sizes: tuple[int, ...]) -> Index:
    """The index of the epilogue node (``product_axes``) whose element is the product's at
    ``idx`` (the product's axes have extents ``sizes``)."""
    out = []
    for axis in axes:
        e, radix = Expr(0), 1
        for a, stride, n in reversed(axis):
            if a >= 0:
                part = idx[a] // stride if stride > 1 else idx[a]
                e = e + (part if stride * n == sizes[a] else part % n) * radix
            radix *= n
        out.append(e)
    return tuple(out)


_HEAVY = frozenset({Op.MATMUL, Op.SCAN, Op.SVDVALS})


def _cone(node: Node) -> set[Node]:
    seen: set[Node] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.srcs)
    return seen


def _below_maps(operand: Node, heavy: set[Node]) -> list[Node]:
    """The values to store for an operand whose cone reaches a product or a reduction: those
    below its index maps (views, and the writes into literals that np.pad makes), which the
    GEMM's tile loads then read through the maps. A convolution of a pooled or activated
    image stores that image, not its padded copy."""
    out: list[Node] = []
    seen: set[Node] = set()
    stack = [operand]
    while stack:
        n = stack.pop()
        if n in seen or n.op in LEAVES:
            continue
        seen.add(n)
        if n.op in MOVEMENT or (n.op is Op.SETITEM and n not in heavy):
            stack.extend(n.srcs)
        elif any(x in heavy for x in leaves_of(n, heavy)) or n in heavy:
            out.append(n)
    return out


def _strip(node: Node) -> Node:
    while node.op in MOVEMENT:
        node = node.srcs[0]
    return node


class _GemmPartition:
    def __init__(self, graph: Graph, order: list[Node], mms: list[Node], limits: DeviceLimits,
                 aliases: Sequence[frozenset[int]], dynamic: bool = False) -> None:
        self.graph, self.limits, self.aliases = graph, limits, aliases
        self.dynamic = dynamic  # (the other kernels' strategies must not follow the batch)
        self.pos = {n: i for i, n in enumerate(order)}
        self.mms = mms
        self.mm_set = set(mms)
        self.red_set = {n for n in order if n.op in REDUCE}
        self.notes: list[str] = []

    def _draws(self, node: Node) -> bool:
        """Whether computing ``node`` draws random numbers (below products and reductions)."""
        drawn = {op.name.lower() for op in SHARED_BY_LANES}
        return not drawn.isdisjoint(_ops(node, self.mm_set | self.red_set))

    def owner(self, node: Node) -> Node | None:
        """The product whose epilogue can compute ``node`` (see rule 1), or None."""
        stop = self.mm_set | self.red_set
        leaves = leaves_of(node, stop)
        deps = [x for x in leaves if x in self.mm_set]
        if not deps or any(x in self.red_set for x in leaves):
            return None
        g = max(deps, key=self.pos.__getitem__)
        if math.prod(node.shape) != math.prod(g.shape):  # not the product's whole space
            return None
        at = _index(g.shape)  # (the same expressions as node's index on the other axes)
        if all(tuple(i) == tuple(at) for n, i in reads_of(node, _index(node.shape), stop)
               if n is g):
            return g
        # a permuted reshape of the product (a convolution's rows N*H'*W' as an NCHW image)
        return g if product_axes(node, g) is not None else None

    def plan(self) -> Plan:
        graph = self.graph
        epilogue: dict[Node, list[Store]] = {m: [] for m in self.mms}
        base_roots: list[tuple[str, int, Node]] = []  # (output | write, index, node)
        for i, n in enumerate(graph.outputs):
            self._assign(Store(n, Dest("output", i)), ("output", i, n), epilogue, base_roots)
        for p, n in graph.writes:
            if n.op is Op.SETITEM and n.srcs[0].op is Op.INPUT and n.srcs[0].arg == p:
                st = Store(n.srcs[1], Dest("param", p), n.arg)
            else:
                st = Store(n, Dest("param", p))
            self._assign(st, ("write", p, n), epilogue, base_roots)
        # operands that need a stored value (rule 2)
        stored_by: dict[Node, Node] = {}  # node -> the product whose kernel stores it
        extra: list[Node] = []  # operand values an ordinary kernel stores
        for m in self.mms:
            for src in m.srcs:
                reach = leaves_of(src, self.mm_set | self.red_set)
                if not any(x in self.mm_set or x in self.red_set for x in reach):
                    # a cone that recomputes (an unrolled stencil) is stored by kernels that
                    # store its steps too (realize.py), not inlined into every tile load; on a
                    # CPU a scan computes its prologue lane by lane, so a random draw is stored
                    # first by an elementwise kernel, in vectors whose lanes share Philox
                    # blocks (an Asian-option path: 45 -> ~3 ms on PoCL)
                    p = _strip(src)
                    if p not in extra and (realize_cone(
                            [p], self.mm_set | self.red_set,
                            recompute_limit(self.limits.is_gpu)) or (
                            m.op is Op.SCAN and not self.limits.is_gpu and self._draws(p))):
                        extra.append(p)
                    continue
                for p in _below_maps(src, self.mm_set | self.red_set):
                    if p in self.mm_set:
                        stored_by[p] = p
                    elif p not in stored_by and p not in extra:
                        g = self.owner(p)
                        if g is not None:
                            stored_by[p] = g
                        else:
                            extra.append(p)
        # products read by anything but their own epilogue are stored plainly
        held = set(stored_by)
        for m, stores in epilogue.items():
            for st in stores:
                for x in leaves_of(st.node, self.mm_set | held):
                    if x in self.mm_set and x is not m:
                        stored_by.setdefault(x, x)
            for p, g in list(stored_by.items()):
                if g is m and p is not m:
                    for x in leaves_of(p, self.mm_set | held - {p}):
                        if x in self.mm_set and x is not m:
                            stored_by.setdefault(x, x)
        for _, _, n in base_roots:
            for x in leaves_of(n, self.mm_set | held):
                if x in self.mm_set:
                    stored_by.setdefault(x, x)
        for n in extra:
            for x in leaves_of(n, self.mm_set | (held - {n})):
                if x in self.mm_set:
                    stored_by.setdefault(x, x)
        stored = set(stored_by)
        phase = self._phases(epilogue, stored_by, stored, extra, base_roots)
        return self._assemble(epilogue, stored_by, stored, extra, base_roots, phase)

    def _assign(self, st: Store, root: tuple[str, int, Node], epilogue: dict[Node, list[Store]],
                base_roots: list[tuple[str, int, Node]]) -> None:
        g = self.owner(st.node)
        if g is not None:
            epilogue[g].append(st)
            return
        if any(x in self.mm_set for x in leaves_of(st.node, self.mm_set)):
            what = "output" if st.dest.kind == "output" else "the write to argument"
            self.notes.append(
                f"{what} {st.dest.index} ({st.node.describe()}) reads a matrix product other "
                "than elementwise at its own index (e.g. a reduction over its rows or "
                "columns): the product is stored once and a separate kernel reads it, since a "
                "GEMM work-group holds only a tile of each row")
        base_roots.append(root)

    def _phases(self, epilogue: dict, stored_by: dict[Node, Node], stored: set[Node],
                extra: list[Node], base_roots: list) -> dict:
        """Phase of each gemm (keyed by its MATMUL) and each base root (keyed by its node)."""
        phase: dict[Node, int] = {}
        base_phase: dict[Node, int] = {}

        def base_of(n: Node) -> int:
            if n not in base_phase:
                deps = [stored_by[x] for x in leaves_of(n, stored) if x in stored]
                base_phase[n] = 1 + max((phase[g] for g in deps), default=-1)
            return base_phase[n]
        for m in self.mms:
            reads: list[int] = []
            nodes = [src for src in m.srcs] + [st.node for st in epilogue[m]] + \
                [p for p, g in stored_by.items() if g is m and p is not m]
            stop = stored | set(extra) | {m}
            for n in nodes:
                own = n in stored and stored_by[n] is m and n is not m
                for x in {y for s in (n.srcs if own else (n,)) for y in leaves_of(s, stop)}:
                    if x in extra:
                        reads.append(base_of(x))
                    elif x in stored and stored_by[x] is not m:
                        reads.append(phase[stored_by[x]])
            phase[m] = max(reads, default=0)
        for _, _, n in base_roots:
            base_of(n)
        for n in extra:
            base_of(n)
        return {"gemm": phase, "base": base_phase}

    def _assemble(self, epilogue: dict, stored_by: dict[Node, Node], stored: set[Node],
                  extra: list[Node], base_roots: list, phase: dict) -> Plan:
        graph = self.graph
        gemm_phase, base_phase = phase["gemm"], phase["base"]
        temps: list[Node] = []
        temp_of: dict[Node, int] = {}
        for n in list(stored_by) + extra:
            temp_of[n] = len(temps)
            temps.append(n)
        n_phases = 1 + max([*gemm_phase.values(), *base_phase.values()], default=0)
        groups: list[Group] = []
        notes = list(self.notes)
        for ph in range(n_phases):
            roots = [r for r in base_roots if base_phase[r[2]] == ph]
            extras = [n for n in extra if base_phase[n] == ph]
            if roots or extras:
                # values stored by earlier phases are loaded; this phase's own are not
                avail = stored | {n for n in extra if base_phase[n] < ph}
                part, part_temps, part_notes = self._base(roots, extras, avail, temp_of,
                                                          len(temps))
                temps += part_temps
                groups += part
                notes += part_notes
            for m in self.mms:
                if gemm_phase[m] != ph:
                    continue
                stores = list(epilogue[m]) + [Store(p, Dest("temp", temp_of[p]))
                                              for p, g in stored_by.items() if g is m]
                if m.op is Op.SCAN:
                    groups.append(Group("scan", m.shape, tuple(stores),
                                        _scan_reason(m, stores, _ops(m.srcs[0], stored | set(extra))),
                                        scan=m))
                    continue
                if m.op is Op.SVDVALS:
                    groups.append(Group("svd", m.shape, tuple(stores), f"singular values of "
                                        f"{m.srcs[0].describe()} (one-sided Jacobi, a work-group "
                                        "per matrix)", svd=m))
                    continue
                why = _reason(m, stores, stored | set(extra), self.dynamic)
                groups.append(Group("gemm", m.shape, tuple(stores), why, matmul=m))
        groups, temps = _inplace(graph, groups, temps, self.aliases)
        return Plan(tuple(groups), tuple(temps), (), tuple(notes))

    def _base(self, roots: list, extras: list[Node], stored: set[Node], temp_of: dict,
              first_temp: int) -> tuple[list[Group], list[Node], list[str]]:
        """``partition`` over these roots, with stored values as stand-in parameters."""
        graph = self.graph
        params = list(graph.params)
        fake: dict[Node, Node] = {}
        for n in sorted(stored, key=temp_of.__getitem__):
            params.append(Param("array", n.dtype, n.shape, f"t{temp_of[n]}", -1,
                                row_major_strides(n.shape)))
            fake[n] = Node.make(Op.INPUT, n.dtype, n.shape, (), len(params) - 1)
        back: dict[Node, Node] = {v: k for k, v in fake.items()}
        memo: dict[Node, Node] = {}

        def sub(node: Node, top: bool = False) -> Node:
            if node in fake and not top:
                return fake[node]
            if node in memo:
                return memo[node]
            stack = [node]
            while stack:  # iterative: deep chains must not hit the recursion limit
                n = stack[-1]
                pending = [s for s in n.srcs if s not in memo and s not in fake]
                if pending:
                    stack.extend(pending)
                    continue
                stack.pop()
                new_srcs = tuple(fake.get(s) or memo[s] for s in n.srcs)
                new = n if new_srcs == n.srcs else n.replace(srcs=new_srcs)
                memo[n] = new
                if new is not n:
                    back[new] = n
            return memo[node]
        outputs = [sub(n) for kind, _, n in roots if kind == "output"]
        out_index = [i for kind, i, _ in roots if kind == "output"]
        writes = [(p, sub(n)) for kind, p, n in roots if kind == "write"]
        n_out = len(outputs)
        outputs += [sub(n, top=True) for n in extras]
        sub_graph = Graph(tuple(params), tuple(outputs), tuple(writes))
        plan = partition(sub_graph, self.limits, self.aliases, dynamic=self.dynamic)

        def orig(n: Node) -> Node:
            return back.get(n, n)

        def dest(d: Dest) -> Dest:
            if d.kind == "output":
                if d.index < n_out:
                    return Dest("output", out_index[d.index])
                return Dest("temp", temp_of[extras[d.index - n_out]])
            if d.kind == "temp":
                return Dest("temp", first_temp + d.index)
            return d

        def store(st: Store) -> Store:
            return Store(orig(st.node), dest(st.dest), st.region)
        groups = [replace(g, stores=tuple(map(store, g.stores)),
                          row_stores=tuple(map(store, g.row_stores)),
                          stages=tuple(tuple(map(orig, s)) for s in g.stages),
                          reads=frozenset(map(orig, g.reads))) for g in plan.groups]
        return groups, [orig(n) for n in plan.temps], list(plan.notes)


def _ops(node: Node, stop: set[Node]) -> list[str]:
    """Names of the computing ops in ``node``'s cone above ``stop`` (views as 'view')."""
    names: list[str] = []
    seen: set[Node] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen or n in stop:
            continue
        seen.add(n)
        if n.op in MOVEMENT:
            label = "view"
        elif n.op in (Op.INPUT, Op.CONST, Op.SCALAR, Op.IOTA):
            label = None
        else:
            label = n.op.name.lower()
        if label and label not in names:
            names.append(label)
        stack.extend(n.srcs)
    return names


def _reason(m: Node, stores: list[Store], stored: set[Node], dynamic: bool = False) -> str:
    a, b = m.srcs
    *batch, rows, k = a.shape
    cols = b.shape[-1]
    shape = "x".join(map(str, (*batch, rows, cols, k)))
    axes = "batch x M x N x K" if batch else "M x N x K"
    text = f"GEMM {'batched ' if batch else ''}{shape} ({axes}) in {m.dtype.name}"
    conv = window.describe(m, stored - {m})
    if conv:
        text += f"; {conv}"
        if dynamic:
            text += ("; extents at launch: M (the batch is its first factor); the image's "
                     "height and width, the window and the stride are specialised")
    for name, src in (("a", a), ("b", b)):
        ops = _ops(src, stored - {m})
        if _strip(src) in stored:
            text += f"; {name} is read from the temporary an earlier kernel stored"
        if ops:
            text += f"; prologue of {name} fused into its tile loads: {', '.join(ops)}"
    epi = []
    for st in stores:
        ops = _ops(st.node, (stored - {st.node}) | {m}) if st.node is not m else []
        where = {"output": "output", "param": "argument", "temp": "temporary"}[st.dest.kind]
        epi.append(f"{where} {st.dest.index}" + (f" ({', '.join(ops)})" if ops else ""))
    return text + "; epilogue stores " + ", ".join(epi)


def _scan_reason(scan: Node, stores: list[Store], prologue: list[str]) -> str:
    """The reason line of a scan group."""
    op, axis = scan.arg
    text = (f"scan ({op.name.lower()}) along axis {axis} of {scan.describe()}")
    if prologue:
        text += f"; prologue fused into its loads: {', '.join(prologue)}"
    where = {"output": "output", "param": "argument", "temp": "temporary"}
    return text + "; stores " + ", ".join(f"{where[s.dest.kind]} {s.dest.index}"
                                          for s in stores)


def _reads(group: Group, temps: set[Node]) -> set[int]:
    """Argument indices a group's kernel loads (not below stored values)."""
    nodes = [st.node for st in group.stores + group.row_stores]
    nodes += [r.srcs[0] for r in group.reductions]
    if group.whole is not None:
        nodes += list(group.whole.srcs)
    out: set[int] = set()
    for node in nodes:
        out |= {n.arg for n in leaves_of(node, temps - {node}) if n.op is Op.INPUT}
    return out


def _inplace(graph: Graph, groups: list[Group], temps: list[Node],
             aliases: Sequence[frozenset[int]]) -> tuple[list[Group], list[Node]]:
    """Stage in-place writes that a later kernel or a GEMM's own tile loads could still read
    through a temporary, copied into the argument by a final kernel (as inplace.py does
    within one phase)."""
    cls = {p: set(c) for c in aliases for p in c}
    temp_set = set(temps)
    reads = [_reads(g, temp_set) for g in groups]
    out, copies = [], []
    temps = list(temps)
    for gi, g in enumerate(groups):
        stores = list(g.stores)
        for si, st in enumerate(stores):
            if st.dest.kind != "param":
                continue
            family = cls.get(st.dest.index, {st.dest.index})
            why = None
            if g.kind in ("gemm", "scan", "svd"):
                operand_reads = set()
                for src in g.whole.srcs:
                    operand_reads |= {n.arg for n in leaves_of(src, temp_set) if
                                      n.op is Op.INPUT}
                if operand_reads & family:
                    why = ("the GEMM's tile loads read the argument it writes" if g.kind ==
                           "gemm" else f"the {g.kind} reads whole rows of the argument it "
                           "writes")
                elif _other_index(graph, st, family, temp_set | {g.whole}):
                    why = "the epilogue reads the argument at other elements than it writes"
            if why is None and any(reads[j] & family for j in range(gi + 1, len(groups))):
                why = f"a later kernel reads argument {st.dest.index}"
            if why is None:
                continue
            stores[si] = stage(st, temps, copies, why)
        out.append(replace(g, stores=tuple(stores)))
    return out + copies, temps


def _other_index(graph: Graph, st: Store, family: set[int], stop: set[Node]) -> bool:
    idx = _index(st.node.shape)
    written = st.root_index(idx)
    layout = (graph.params[st.dest.index].strides, graph.params[st.dest.index].has_offset)
    for n, i in reads_of(st.node, idx, stop):
        if n.op is Op.INPUT and n.arg in family:
            if (graph.params[n.arg].strides, graph.params[n.arg].has_offset) != layout:
                return True
            if tuple(i) != tuple(written):
                return True
    return False


__all__ = ["partition_gemm", "product_axes", "product_index"]
