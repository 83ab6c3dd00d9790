"""``eval_graph``: the NumPy interpreter of a graph.

It is the oracle for tests and validate mode and the engine of constant folding, so it calls each
op's NumPy reference from the op table and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir.graph import Graph, Node, const_value, toposort
from fusejit.ir.ops import ELEMENTWISE, OPS, REDUCE, UFUNC_OPS, Op


def eval_node(node: Node, srcs: Sequence[np.ndarray], args: Sequence[Any] = ()) -> np.ndarray:
    """The value of one node given its operands' values (and the call's parameter values)."""
    op = node.op
    with np.errstate(all="ignore"):
        if op is Op.INPUT:
            value = np.asarray(args[node.arg])
        elif op is Op.SCALAR:
            value = np.asarray(dt.convert_scalar(args[node.arg[0]], node.dtype))
        elif op is Op.CONST:
            value = np.asarray(const_value(node))
        elif op is Op.IOTA:
            axis, start, step = node.arg
            line = (start + step * np.arange(node.shape[axis])).astype(node.dtype)
            value = np.broadcast_to(line.reshape([-1 if i == axis else 1
                                                  for i in range(node.ndim)]), node.shape)
        elif op is Op.VIEW:
            value = _apply_map(srcs[0], node.arg, node.shape)
        elif op is Op.RESHAPE:
            value = np.reshape(srcs[0], node.shape)
        elif op is Op.CAST and node.arg is not None:  # checked (dtypes.RAISE)
            value = np.asarray(dt.convert_checked(srcs[0][()], node.dtype, node.arg[0]))
        elif op is Op.CAST:
            value = srcs[0].astype(node.dtype)
        elif op is Op.WHERE:
            value = np.where(*srcs)
        elif op in UFUNC_OPS:
            value = OPS[op].ufunc(*srcs)
        elif OPS[op].ref is not None and op in ELEMENTWISE:  # ops without a ufunc (PHILOX)
            value = OPS[op].ref(*srcs)
        elif op in (Op.ARGMAX, Op.ARGMIN):
            value = _arg_reduce(op, srcs[0], node.arg)
        elif op in REDUCE:
            value = OPS[op].reference()(srcs[0], axis=node.arg, keepdims=True)
        elif op is Op.SETITEM:
            value = _setitem(srcs[0], srcs[1], node.arg)
        elif op is Op.GATHER:
            value = OPS[op].reference()(srcs[0], srcs[1], node.arg)
        elif op is Op.SVDVALS:
            value = OPS[op].reference()(srcs[0])
        elif op is Op.SCAN:
            value = OPS[op].reference()(srcs[0], node.arg)
        elif op is Op.MATMUL:  # NumPy's own loop: wrapping ints, float16 summed in float32
            value = OPS[op].reference()(*srcs)
        else:  # pragma: no cover - every op is handled above
            raise NotImplementedError(op)
    value = np.asarray(value)
    if value.dtype != node.dtype:
        value = value.astype(node.dtype)
    return np.broadcast_to(value, node.shape) if value.shape != node.shape else value


def eval_graph(graph: Graph, args: Sequence[Any]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Evaluate ``graph`` on host values: returns (outputs, new values of written params)."""
    env: dict[Node, np.ndarray] = {}
    values = with_derived(graph, args)
    for index, param in enumerate(graph.params):
        if param.kind == "array":
            values[index] = np.asarray(values[index])
    for node in graph.toposort():
        env[node] = eval_node(node, [env[s] for s in node.srcs], values)
    return ([np.array(env[n]) for n in graph.outputs],
            [np.array(env[n]) for _, n in graph.writes])


def derive(expr: Node, args: Any) -> np.generic:
    """A derived scalar's value (passes/hoist.py): ``expr`` evaluated on the host, where ``args``
    maps the parameter indices its SCALAR leaves read to the call's values."""
    return deriver(expr)(args)


def deriver(expr: Node) -> Any:
    """``derive`` for one expression as a function of ``args``, prepared once: the launcher
    calls it on every call, so it is a flat list of steps over NumPy scalars under a single
    errstate (the op table's ufuncs, as ``eval_node`` calls them), not a graph walk."""
    order = toposort([expr])
    where = {n: i for i, n in enumerate(order)}
    steps: list[tuple] = []
    for n in order:
        srcs = tuple(where[s] for s in n.srcs)
        if n.op is Op.SCALAR:
            steps.append((0, n.arg[0], n.dtype))
        elif n.op is Op.CONST:
            steps.append((1, const_value(n), n.dtype))
        elif n.op is Op.CAST and n.arg is not None:  # checked (dtypes.RAISE)
            steps.append((4, (srcs[0], n.arg[0]), n.dtype))
        elif n.op is Op.CAST:
            steps.append((2, srcs[0], n.dtype))
        elif n.op in UFUNC_OPS:
            steps.append((3, (OPS[n.op].ufunc, srcs), n.dtype))
        else:  # anything else: the interpreter, node by node
            def slow(args: Any) -> np.generic:
                env: dict[Node, np.ndarray] = {}
                for node in order:
                    env[node] = eval_node(node, [env[s] for s in node.srcs], args)
                return env[expr][()]
            return slow
    convert, checked, errstate = dt.convert_scalar, dt.convert_checked, np.errstate

    def fast(args: Any) -> np.generic:
        vals: list[Any] = []
        with errstate(all="ignore"):
            for kind, a, dtype in steps:
                if kind == 0:
                    v = convert(args[a], dtype)
                elif kind == 1:
                    v = a
                elif kind == 2:
                    v = vals[a].astype(dtype)
                elif kind == 4:
                    v = checked(vals[a[0]], dtype, a[1])
                else:
                    ufunc, srcs = a
                    v = ufunc(*[vals[i] for i in srcs])
                    if v.dtype != dtype:
                        v = v.astype(dtype)
                vals.append(v)
        return vals[-1]
    return fast


def with_derived(graph: Graph, args: Sequence[Any]) -> list[Any]:
    """Parameter values (indexed like ``graph.params``) with the derived scalars filled in."""
    values = list(args) + [None] * (len(graph.params) - len(args))
    for index, param in enumerate(graph.params):
        if param.kind == "derived":
            values[index] = derive(param.expr, values)
    return values


def _arg_reduce(op: Op, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """argmax/argmin over several axes: the index into those axes flattened row-major (over
    all axes: NumPy's flat index), kept axes of length 1."""
    kept = [a for a in range(x.ndim) if a not in axes]
    reduced = math.prod(x.shape[a] for a in axes)  # (not -1: a kept axis may have length 0)
    moved = np.transpose(x, kept + list(axes)).reshape([x.shape[a] for a in kept] + [reduced])
    index = OPS[op].reference()(moved, axis=-1)
    return np.reshape(index, [1 if a in axes else x.shape[a] for a in range(x.ndim)])


def _apply_map(src: np.ndarray, m: Any, shape: tuple[int, ...]) -> np.ndarray:
    grids = np.indices(shape, dtype=np.int64) if shape else np.zeros((0,), np.int64)
    index = []
    for off, coefs in m:
        idx = np.full(shape, off, dtype=np.int64)
        for j, c in enumerate(coefs):
            if c:
                idx = idx + c * grids[j]
        index.append(idx)
    if not index:  # 0-d source
        return np.broadcast_to(src, shape)
    return src[tuple(index)]


def _setitem(base: np.ndarray, values: np.ndarray, region: Any) -> np.ndarray:
    out = np.array(base, copy=True)
    index = [np.arange(start, start + step * count, step) if count else np.zeros(0, np.int64)
             for start, step, count, _ in region]
    mapped = [r for *_, r in region if r >= 0]
    drop = tuple(j for j in range(values.ndim) if j not in mapped)
    vals = np.squeeze(values, axis=drop) if drop else values
    # values' axes are in region-dim order; the root wants them in its own dim order
    rank = {r: i for i, r in enumerate(sorted(mapped))}
    vals = np.transpose(vals, [rank[r] for r in mapped]) if mapped else vals
    shape = [count if r >= 0 else 1 for _, _, count, r in region]
    out[np.ix_(*index)] = np.reshape(vals, shape)
    return out
