"""``@fuse``: argument specs -> cache -> trace -> passes -> source -> build -> launch."""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl

from . import validate
from .captured import CAPTURED_READ_ONLY, Capture, find_captures, guard_values
from .overlay import substituted
from .errors import ContextMismatchError, UnsupportedDTypeError
from .ir import Graph, Node, format_graph, toposort
from .passes import PassRecord, run_pipeline
from .passes.partition import Plan, partition
from .runtime import autotune
from .shapes import row_major_strides
from .runtime.build import build_options, build_program
from .runtime.devices import DeviceInfo, default_queue, device_info
from .runtime.executable import NO_QUEUE, Executable, OutSpec
from .signature import (
    CacheInfo,
    CallKey,
    DeviceArraySpec,
    HostArraySpec,
    Identity,
    StaticSelf,
    StaticSpec,
    alias_classes,
    aliases_of,
    arg_spec,
    fast_key,
)
from .source import Kernel, Module, SourceModule
from .targets.opencl import OpenCLTarget
from .trace import TensorProxy, Tracer, current_tracer, lift

_current_tracer = current_tracer
_MISS = object()  # a guarded launcher's answer when the arguments changed signature

# -- output pytrees ---------------------------------------------------------------------------------


def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    if isinstance(tree, (tuple, list)):
        leaves, defs = [], []
        for item in tree:
            lv, d = tree_flatten(item)
            leaves += lv
            defs.append(d)
        return leaves, (type(tree), tuple(defs))
    if isinstance(tree, dict):
        keys = sorted(tree)
        leaves, defs = [], []
        for k in keys:
            lv, d = tree_flatten(tree[k])
            leaves += lv
            defs.append(d)
        return leaves, (dict, (tuple(keys), tuple(defs)))
    if tree is None:
        return [], None
    return [tree], "*"


def tree_unflatten(treedef: Any, leaves: Sequence[Any]) -> Any:
    # A module-level helper, not a recursive closure: a closure that refers to itself forms a
    # reference cycle that would keep the results (and their pooled buffers) alive until the
    # cyclic garbage collector runs.
    return _build(treedef, iter(leaves))


def _build(d: Any, it: Any) -> Any:
    if d == "*":
        return next(it)
    if d is None:
        return None
    kind, sub = d
    if kind is dict:
        keys, defs = sub
        return {k: _build(x, it) for k, x in zip(keys, defs)}
    return kind(_build(x, it) for x in sub)


# -- lowering results -------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelInfo:
    name: str
    source: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    reason: str
    nodes: int
    role: str = "main"  # main | partial | combine (the two kernels of a split reduction)


@dataclass(frozen=True)
class Lowered:
    """What ``f.lower(*args)`` returns: the traced graph, the plan and the generated source."""

    traced: Graph
    graph: Graph
    passes: tuple[PassRecord, ...]
    plan: Plan
    module: Module
    device: DeviceInfo
    traced_nodes: int  # values the function computed, including ones no output uses

    @property
    def source(self) -> str:
        return self.module.source

    @property
    def kernels(self) -> tuple[KernelInfo, ...]:
        return tuple(KernelInfo(k.name, k.source, k.global_size, k.local_size, k.group.reason,
                                _group_nodes(k), k.role) for k in self.module.kernels)

    def __str__(self) -> str:
        """The optimised graph, then one entry per kernel: why it exists (its group's reason),
        the reductions it computes (by stage) and what it stores, in the graph's %names."""
        names = {n: f"%{i}" for i, n in enumerate(self.graph.toposort())}
        temps = {n: i for i, n in enumerate(self.plan.temps)}
        kernels = self.module.kernels
        lines = [format_graph(self.graph, names), "",
                 f"{len(kernels)} kernel{'s' if len(kernels) != 1 else ''}:"]
        for k in kernels:
            g = k.group
            if k.role == "combine":
                lines.append(f"  {k.name}: combines the partial results of {k.name}_partial")
            else:
                lines.append(f"  {k.name}: {g.reason}")
                if g.kind == "reduce":
                    stages = " | then ".join(", ".join(f"{r.op.name.lower()} {names[r]}"
                                                       for r in stage) for stage in g.stages)
                    lines.append(f"      reduces {stages}")
            if k.role == "partial":
                continue
            stores = [f"{names[s.node]} -> {_dest(s.dest)}" for s in g.stores + g.row_stores]
            stores += [f"{names[r]} -> temp{temps[r]}" for r in g.reductions if r in temps]
            if stores:
                lines.append("      stores " + ", ".join(stores))
        lines += [f"note: {n}" for n in self.plan.notes]
        return "\n".join(lines)


def _dest(dest: Any) -> str:
    return {"output": "out", "param": "%arg", "temp": "temp"}[dest.kind] + str(dest.index) + (
        " (in place)" if dest.kind == "param" else "")


def _group_nodes(kernel: Kernel) -> int:
    g = kernel.group
    roots = [s.node for s in g.stores + g.row_stores] + list(g.reductions)
    return len(toposort(roots))


# -- the wrapper ------------------------------------------------------------------------------------


@dataclass
class _Compiled:
    executable: Executable
    lowered: Lowered


class Fused:
    """A function traced into fused OpenCL kernels, one compile per call signature."""

    def __init__(self, fn: Callable[..., Any], static_argnums: Sequence[int] = (),
                 static_argnames: Sequence[str] = (), autotune: bool | None = None,
                 validate: bool | None = None) -> None:
        functools.update_wrapper(self, fn)
        self._fn = fn
        sig = inspect.signature(fn)
        names = [n for n, p in sig.parameters.items()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        nums = {int(i) if i >= 0 else len(names) + int(i) for i in
                ((static_argnums,) if isinstance(static_argnums, int) else static_argnums)}
        argnames = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames)
        nums |= {names.index(n) for n in argnames if n in names}
        argnames |= {names[i] for i in nums if i < len(names)}
        self._static_nums = frozenset(nums)
        self._static_names = frozenset(argnames)
        self.autotune = autotune
        self._validate = validate if validate is not None else (
            os.environ.get("FUSEJIT_VALIDATE", "") not in ("", "0"))
        # reads from outside the arguments (fusejit.captured), found on the first call
        self._guards: list[Capture] | None = None
        self._code_refs: tuple = ()  # the helpers it names, checked on each call (captured.py)
        self._cache: dict[CallKey, _Compiled] = {}
        # raw attribute tuples of positional calls -> compiled; the full CallKey path fills it
        self._fast: dict[tuple, _Compiled] = {}
        # (raw attribute tuple, guard values) -> compiled, for functions reading captured values
        self._fast_captured: dict[tuple, _Compiled] = {}
        self._mono: Callable[[tuple], Any] | None = None  # guarded launcher, last signature
        self._guarded: dict[tuple, Callable[[tuple], Any] | None] = {}
        self._lowered: dict[CallKey, tuple] = {}  # traced by lower(), not yet built
        self._lock = threading.RLock()
        self._hits = 0
        self._misses = 0
        self.trace_count = 0

    @property
    def validate(self) -> bool:
        """Check every call against a float64 NumPy evaluation of its graph (fusejit.validate).
        While on, calls take the full path; turning it on drops the fast paths' entries."""
        return self._validate

    @validate.setter
    def validate(self, on: bool) -> None:
        with self._lock:
            self._validate = bool(on)
            self._fast.clear()
            self._fast_captured.clear()
            self._guarded.clear()
            self._mono = None

    def __repr__(self) -> str:
        return f"<fused function {getattr(self._fn, '__qualname__', self._fn)!r}>"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """As a method: ``self`` is a static argument (keyed by identity; attributes read while
        tracing are baked into the kernel, as with JAX's static arguments)."""
        if obj is None:
            return self
        return functools.partial(self._call, (StaticSelf(obj),))

    # -- call path --------------------------------------------------------------------------------
    def _flatten(self, args: tuple, kwargs: dict) -> tuple[list[Any], tuple[str, ...], CallKey,
                                                             cl.CommandQueue | None]:
        kwnames = tuple(sorted(kwargs))
        flat = list(args) + [kwargs[k] for k in kwnames]
        n = len(args)
        bound_self = args[0].value if args and isinstance(args[0], StaticSelf) else None
        if self._guards is None:
            self._guards = find_captures(self._fn, bound_self)
            self._code_refs = tuple(self._guards.code_refs)
        guards, implicit = guard_values(self._guards, bound_self) if self._guards else ((), [])
        flat += implicit  # captured arrays, read fresh: extra (read-only) arguments
        n_given = n + len(kwnames)
        specs = []
        queue = None
        context = None
        for i, value in enumerate(flat):
            static = (i in self._static_nums) if i < n else (
                i < n_given and kwnames[i - n] in self._static_names)
            if isinstance(value, StaticSelf):
                spec = StaticSpec(Identity(value.value))
                flat[i] = value.value
            else:
                spec = arg_spec(value, static, f"argument {i}" if i < n_given else
                                "an array the function reads from outside its arguments")
            if isinstance(spec, DeviceArraySpec):
                if context is None:
                    context, queue = spec.context, value.queue
                elif spec.context != context:
                    raise ContextMismatchError(
                        f"argument {i} lives in a different OpenCL context than argument 0's; "
                        "all device arrays of one call must share a context")
            specs.append(spec)
        if context is None:
            queue = default_queue()
            context = queue.context
        elif queue is None:
            raise ValueError(NO_QUEUE)
        aliases = aliases_of(flat, specs) if len(specs) > 1 else ()
        return flat, kwnames, CallKey(tuple(specs), kwnames, context, aliases, guards,
                                      len(implicit)), queue

    def _code_changed(self) -> None:
        """A helper function (class, ufunc) the function names was rebound since it was traced
        (a notebook cell run again, ``act = np.sin``): every trace is stale, start again."""
        for scope, name, value in self._code_refs:
            if scope.get(name) is not value:
                self.cache_clear()
                self._guards, self._code_refs = None, ()
                return

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        refs = self._code_refs
        if refs:
            for scope, name, value in refs:  # (_code_changed inlined: this is the hot path)
                if scope.get(name) is not value:
                    self._code_changed()
                    break
        mono = self._mono
        if mono is not None and not kwargs:
            result = mono(args)
            if result is not _MISS:
                self._hits += 1
                return result
        if not kwargs and not self._guards:
            fkey = fast_key(args, self._static_nums)
            compiled = self._fast.get(fkey) if fkey is not None else None
            if compiled is not None and _current_tracer() is None:
                self._hits += 1
                self._mono = self._guarded.get(fkey)
                return self._launch(compiled, args)
        elif not kwargs and self._fast_captured:  # guarded captured values, no captured arrays
            fkey = fast_key(args, self._static_nums)
            if fkey is not None and _current_tracer() is None:
                guards, implicit = guard_values(self._guards, None)
                compiled = None if implicit else self._fast_captured.get((fkey, guards))
                if compiled is not None:
                    self._hits += 1
                    return self._launch(compiled, args)
        return self._call((), *args, **kwargs)

    def _launch(self, compiled: _Compiled, args: tuple) -> Any:
        exe = compiled.executable
        queue = args[exe.queue_arg].queue if exe.queue_arg >= 0 else default_queue()
        leaves = exe.launch(args, queue)
        return leaves[0] if exe.treedef == "*" else tree_unflatten(exe.treedef, leaves)

    def _call(self, bound: tuple, *args: Any, **kwargs: Any) -> Any:
        if current_tracer() is not None:  # called from another fused function: inline
            return self._fn(*(b.value for b in bound), *args, **kwargs)
        if self._code_refs:
            self._code_changed()
        flat, kwnames, key, queue = self._flatten(bound + args, kwargs)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._compile(key, flat, kwnames, queue)
        else:
            self._hits += 1
        if not bound and not kwnames and not key.aliases and not key.implicit \
                and not self._validate:  # (the fast paths do not validate)
            fkey = fast_key(args, self._static_nums)
            if fkey is not None and self._guards:  # keyed on the guard values too
                self._fast_captured[(fkey, key.guards)] = compiled
            elif fkey is not None:
                self._fast[fkey] = compiled
                self._mono = self._guarded[fkey] = compiled.executable.guarded(
                    fkey, compiled.executable.treedef, tree_unflatten, _MISS)
        exe = compiled.executable
        if self._validate:  # results checked against a float64 NumPy evaluation of the graph
            leaves = validate.run_checked(exe, flat, queue, getattr(self, "__name__", "fn"))
        else:
            leaves = exe.run(flat, queue)
        return tree_unflatten(exe.treedef, leaves)

    def _compile(self, key: CallKey, flat: list[Any], kwnames: tuple[str, ...],
                 queue: cl.CommandQueue) -> _Compiled:
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is not None:
                self._hits += 1
                return compiled
            lowered, outputs, treedef, constants = self._lowered.pop(key, None) or self._lower(
                key, flat, kwnames, queue)
            info = lowered.device
            if lowered.module.uses_fp64 and not info.has_fp64:
                raise UnsupportedDTypeError(
                    f"this function computes in float64, which the device ({info.key}) does "
                    "not support (no cl_khr_fp64); use float32 inputs or another device")
            program = build_program(queue.context, lowered.module.source,
                                    build_options(info), getattr(self._fn, "__name__", "fn"))
            host_mode = not any(isinstance(s, DeviceArraySpec)  # (of the arguments passed)
                                for s in key.specs[:len(key.specs) - key.implicit])
            temps = [(n.shape, n.dtype) for n in lowered.plan.temps]
            index_dtype = np.dtype(np.int64 if lowered.module.wide else np.int32)
            exe = Executable(lowered.graph, lowered.module, program, info, outputs, temps,
                             host_mode, index_dtype, treedef, constants,
                             autotune=autotune.enabled(self.autotune))
            exe.queue_arg = next((i for i, s in enumerate(key.specs)
                                  if isinstance(s, DeviceArraySpec)), -1)
            compiled = _Compiled(exe, lowered)
            self._cache[key] = compiled
            self._misses += 1
            return compiled

    # -- tracing and lowering ---------------------------------------------------------------------
    def _lower(self, key: CallKey, flat: list[Any], kwnames: tuple[str, ...],
               queue: cl.CommandQueue) -> tuple[Lowered, list[OutSpec], Any, dict]:
        self.trace_count += 1
        n_pos = len(flat) - len(kwnames) - key.implicit
        first_implicit = len(flat) - key.implicit
        same_as = {j: i for i, j, same in key.aliases if same}
        with Tracer() as tracer:
            inputs: list[Any] = []
            for i, (value, spec) in enumerate(zip(flat, key.specs)):
                name = f"arg{i}"
                if i in same_as:  # the same array passed twice: one parameter, one proxy
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
                elif isinstance(spec, HostArraySpec):
                    inputs.append(tracer.array_param(spec.dtype, spec.shape,
                                                     row_major_strides(spec.shape), name, i,
                                                     writable=spec.writeable))
                else:
                    inputs.append(tracer.scalar_param(value, name, i))
            fn = self._fn
            if key.implicit:
                for value, proxy in zip(flat[first_implicit:], inputs[first_implicit:]):
                    tracer.captured[id(value)] = (value, proxy)
                bound_self = flat[0] if isinstance(key.specs[0], StaticSpec) and isinstance(
                    key.specs[0].value, Identity) else None
                fn, new_self = substituted(fn, self._guards, lambda v: (
                    tracer.captured.get(id(v), (None, None))[1]), bound_self)
                if bound_self is not None:
                    inputs[0] = new_self
            result = fn(*inputs[:n_pos], **dict(zip(kwnames, inputs[n_pos:])))
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
        graph, records = run_pipeline(traced)
        info = device_info(queue.device)
        classes = alias_classes(key.aliases, traced)
        plan = partition(graph, info.limits, classes)
        aliased = frozenset(p for c in classes for p in c)
        module = SourceModule(graph, plan, OpenCLTarget(), info.limits, aliased).build()
        lowered = Lowered(traced, graph, records, plan, module, info, traced_nodes)
        return lowered, outputs, treedef, constants

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """Trace and generate code for these arguments without launching anything."""
        flat, kwnames, key, queue = self._flatten(args, kwargs)
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is not None:
                return compiled.lowered
            if key not in self._lowered:
                self._lowered[key] = self._lower(key, flat, kwnames, queue)
            return self._lowered[key][0]

    def explain(self, *args: Any, **kwargs: Any) -> Any:
        """A readable report of what fusejit makes of a call with these arguments (graph, passes,
        fusion groups and why they split, bytes moved, kernel sources; ``.dot`` for a picture);
        see ``fusejit.explain``. Launches nothing."""
        from .explain import explain

        return explain(getattr(self, "__qualname__", "function"), self.lower(*args, **kwargs))

    # -- cache ------------------------------------------------------------------------------------
    def cache_info(self) -> CacheInfo:
        return CacheInfo(self._hits, self._misses, None, len(self._cache))

    def cache_clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._fast.clear()
            self._fast_captured.clear()
            self._guarded.clear()
            self._mono = None
            self._lowered.clear()
            self._hits = self._misses = 0


def fuse(fn: Callable[..., Any] | None = None, *, static_argnums: Sequence[int] | int = (),
         static_argnames: Sequence[str] | str = (), autotune: bool | None = None,
         validate: bool | None = None) -> Any:
    """Compile a numpy-style function into fused OpenCL kernels.

    Use as ``@fuse`` or ``@fuse(static_argnums=..., static_argnames=...)``. The function is
    traced once per call signature (dtypes, shapes, layouts, static values, device); later
    calls with the same signature only launch the cached kernels. Static arguments are keyed by
    type and value, floats by their bits (``-0.0`` is not ``0.0``; NaN hits the cache).

    State read from outside the arguments is never served stale. Every global, closure variable,
    ``self`` attribute (for a method) and constant attribute/subscript chain from them
    (``cfg.alpha``, ``params["scale"]``, ``self.w``), in the function and the plain Python
    helpers it calls, is either

    * guarded (a changed value traces again): scalars, strings, NumPy scalars, containers and
      objects made of them, NumPy arrays of at most 4096 elements (by content); or
    * read fresh on every call: larger NumPy arrays (uploaded) and pyopencl arrays (by
      reference), which are read-only inside the function (pass an array as an argument to
      write it).

    Helper functions, classes and ufuncs it names are checked by identity (rebinding one
    traces again). Library constants (``np.pi``) and builtins are not guarded, nor state the
    function writes while traced (``log.append(x)``). State too large to guard raises
    ``CapturedStateError``: pass it as an argument instead.
    """
    def wrap(f: Callable[..., Any]) -> Fused:
        return Fused(f, static_argnums, static_argnames, autotune, validate)
    return wrap(fn) if fn is not None else wrap
