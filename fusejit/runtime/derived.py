"""The derived scalars of one executable (passes/hoist.py), evaluated on the host per call.

A launch needs each derived scalar's value (Adam's ``1 - b1 ** t`` and ``1 - b2 ** t``) with
NumPy's exact semantics. Evaluating each expression by itself through the prepared step list
of ``reference.deriver`` cost ~20-40 µs per expression on the CI host (an errstate, a
conversion per leaf, a ufunc call per node), which was most of the host cost that separated
Adam with runtime scalars from Adam with constants. Here all of an executable's derived
scalars are one generated straight-line function: each node once (shared nodes, ``t`` read by
both expressions, are computed once), the op table's ufuncs on NumPy scalars as
``eval_node`` calls them, under a single errstate. And the last call's results are kept with
the argument *objects* they were computed from: a call passing the same objects again (the
same Python float constants, a step count that did not change) reuses them. Identity, not
equality: ``0.0 == -0.0`` and ``1 == 1.0 == True`` would be wrong keys, and only immutable
scalar types are kept, so an identical object is an identical value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir import reference
from fusejit.ir.graph import Node, Param, const_value, toposort
from fusejit.ir.ops import OPS, UFUNC_OPS, Op

# immutable scalar types: the same object is the same value on every call
_IMMUTABLE = (bool, int, float, np.generic)


class DerivedScalars:
    """All derived parameters of ``params``: ``getter(index)`` gives a function of a call's
    flattened arguments returning that parameter's value."""

    def __init__(self, params: Sequence[Param]) -> None:
        self.indices = [i for i, p in enumerate(params) if p.kind == "derived"]
        exprs = [params[i].expr for i in self.indices]
        order = toposort(exprs)
        scalars = sorted({n.arg[0] for n in order if n.op is Op.SCALAR})
        self.sources = tuple(params[p].source for p in scalars)
        self._slot = {i: k for k, i in enumerate(self.indices)}
        evaluate = _generate(order, exprs, {p: params[p].source for p in scalars}) \
            or _per_expression(exprs, {p: params[p].source for p in scalars})
        self.values = _remembering(evaluate, self.sources)

    def getter(self, index: int) -> Callable[[Sequence[Any]], np.generic]:
        slot, values = self._slot[index], self.values
        return lambda flat: values(flat)[slot]


def _remembering(evaluate: Callable[[Sequence[Any]], tuple], sources: Sequence[int]
                 ) -> Callable[[Sequence[Any]], tuple]:
    """``evaluate`` with the last result kept for the same argument objects (generated: the
    identity tests unrolled, as the launchers' guards are)."""
    env: dict[str, Any] = {"evaluate": evaluate, "IMMUTABLE": _IMMUTABLE,
                           "last": [(*(object() for _ in sources), ())]}
    same = " and ".join(f"flat[{s}] is c[{k}]" for k, s in enumerate(sources)) or "False"
    args = "".join(f"flat[{s}], " for s in sources)
    immutable = " and ".join(f"isinstance(flat[{s}], IMMUTABLE)" for s in sources) or "False"
    lines = ["def values(flat):",
             "    c = last[0]",
             f"    if {same}:",
             f"        return c[{len(sources)}]",
             "    v = evaluate(flat)",
             f"    if {immutable}:",
             f"        last[0] = ({args}v)  # one assignment: threads see old or new, not a mix",
             "    return v"]
    # generated from parameter positions only: no user string reaches it
    exec(compile("\n".join(lines), "<fusejit derived-scalar cache>", "exec"), env)  # noqa: S102
    return env["values"]


def _generate(order: Sequence[Node], exprs: Sequence[Node], source: dict[int, int]
              ) -> Callable[[Sequence[Any]], tuple] | None:
    """One straight-line function evaluating ``exprs`` over a call's flattened arguments, or
    None when a node is not a leaf, a cast or a ufunc (then the interpreter evaluates it)."""
    env: dict[str, Any] = {"errstate": np.errstate, "convert": dt.convert_scalar,
                           "checked": dt.convert_checked}
    name = {n: f"v{i}" for i, n in enumerate(order)}
    lines = ["def evaluate(flat):", "    with errstate(all='ignore'):"]
    for i, n in enumerate(order):
        v = name[n]
        env[f"d{i}"] = n.dtype
        if n.op is Op.SCALAR:
            lines.append(f"        {v} = convert(flat[{source[n.arg[0]]}], d{i})")
        elif n.op is Op.CONST:
            env[f"c{i}"] = const_value(n)
            lines.append(f"        {v} = c{i}")
        elif n.op is Op.CAST and n.arg is not None:  # checked (dtypes.RAISE)
            lines.append(f"        {v} = checked({name[n.srcs[0]]}, d{i}, {int(n.arg[0])})")
        elif n.op is Op.CAST:
            lines.append(f"        {v} = {name[n.srcs[0]]}.astype(d{i})")
        elif n.op in UFUNC_OPS:
            env[f"u{i}"] = OPS[n.op].ufunc
            lines.append(f"        {v} = u{i}({', '.join(name[s] for s in n.srcs)})")
            lines.append(f"        if {v}.dtype != d{i}:")
            lines.append(f"            {v} = {v}.astype(d{i})")
        else:
            return None
    lines.append(f"    return ({''.join(name[e] + ', ' for e in exprs)})")
    # generated from the op table and node numbering only: no user string reaches it
    exec(compile("\n".join(lines), "<fusejit derived scalars>", "exec"), env)  # noqa: S102
    return env["evaluate"]


def _per_expression(exprs: Sequence[Node], source: dict[int, int]
                    ) -> Callable[[Sequence[Any]], tuple]:
    """The interpreter's evaluation (``reference.deriver``) of each expression."""
    evaluators = [reference.deriver(e) for e in exprs]
    pairs = tuple(source.items())

    def evaluate(flat: Sequence[Any]) -> tuple:
        args = {p: flat[src] for p, src in pairs}
        return tuple(f(args) for f in evaluators)
    return evaluate
