"""``@fuse``: argument specs -> cache -> trace -> passes -> source -> build -> launch."""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from . import dtypes as dt
from . import validate
from .errors import ContextMismatchError, UnsupportedDTypeError, UnsupportedOperationError
from .ir import Graph, Node, format_graph, toposort
from .passes import PassRecord, run_pipeline
from .passes.partition import Plan, partition
from .runtime import autotune
from .runtime.build import build_options, build_program
from .runtime.devices import DeviceInfo, default_queue, device_info
from .runtime.executable import Executable, OutSpec
from .source import Kernel, Module, SourceModule
from .targets.opencl import OpenCLTarget
from .trace import TensorProxy, Tracer, current_tracer, lift

_current_tracer = current_tracer
_MISS = object()  # a guarded launcher's answer when the arguments changed signature

# -- argument specs ---------------------------------------------------------------------------------


class DeviceArraySpec(NamedTuple):
    """A pyopencl array argument: everything its kernel is specialised on."""

    dtype: np.dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    has_offset: bool
    wide: bool
    context: cl.Context


class HostArraySpec(NamedTuple):
    """A NumPy array argument (uploaded contiguous to the device for the call)."""

    dtype: np.dtype
    shape: tuple[int, ...]
    writeable: bool


class ScalarSpec(NamedTuple):
    """A dynamic scalar: a Python type (weak, NEP 50) or a NumPy scalar's dtype (strong)."""

    ptype: Any


class StaticSpec(NamedTuple):
    """A value baked into the kernel; a new value compiles a new kernel."""

    value: Any


Spec = DeviceArraySpec | HostArraySpec | ScalarSpec | StaticSpec

class _Static(NamedTuple):
    """A bound method's ``self``: static, keyed by identity."""

    value: Any


class _Identity:
    """Keys a cache entry on an object's identity and keeps the object alive (so its id is
    never reused by another object while the entry exists)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.obj is self.obj


_AUTO_STATIC = (type(None), str, bytes, tuple, list, slice, type(Ellipsis), np.dtype, type)
_WIDE = 2**31 - 1


def _static_key(value: Any) -> Any:
    if isinstance(value, list):
        return ("list", tuple(_static_key(v) for v in value))
    if isinstance(value, tuple):
        return ("tuple", tuple(_static_key(v) for v in value))
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"static argument {value!r} is not hashable; static arguments are part "
                        "of the cache key") from None
    return (type(value), value)


def arg_spec(value: Any, static: bool) -> Spec:
    if static:
        return StaticSpec(_static_key(value))
    if isinstance(value, cla.Array):
        dtype = dt.check_supported(value.dtype, "argument")
        item = value.dtype.itemsize
        if any(s % item for s in value.strides):
            raise ValueError("array strides must be multiples of the item size")
        strides = tuple(s // item for s in value.strides)
        # 64-bit index math when the furthest element addressed does not fit in 32 bits
        extent = sum((d - 1) * abs(s) for d, s in zip(value.shape, strides)) + 1
        wide = value.offset // item + extent > _WIDE or (value.offset != 0 and
                                                          value.offset >= _BIG_OFFSET)
        return DeviceArraySpec(dtype, value.shape, strides, value.offset != 0, wide,
                               value.context)
    if isinstance(value, np.ndarray):
        dtype = dt.check_supported(value.dtype, "argument")
        return HostArraySpec(dtype, value.shape, bool(value.flags.writeable))
    if isinstance(value, (bool, int, float, np.generic)):
        if isinstance(value, np.generic):
            dt.check_supported(value.dtype, "scalar argument")
            return ScalarSpec(value.dtype)
        return ScalarSpec(type(value))
    if isinstance(value, _AUTO_STATIC):
        return StaticSpec(_static_key(value))
    if isinstance(value, complex):
        raise UnsupportedDTypeError("complex arguments are not supported by fusejit")
    raise TypeError(f"cannot pass {type(value).__name__} to a fused function; pass "
                    "pyopencl or NumPy arrays, scalars, or mark the argument static")


@dataclass(frozen=True)
class CallKey:
    """The cache key of one call: argument specs, keyword names, device context."""

    specs: tuple[Spec, ...]
    kwnames: tuple[str, ...]
    context: cl.Context
    aliases: tuple[tuple[int, int, bool], ...] = ()
    guards: tuple[Any, ...] = ()  # closure/global data values read by the function


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int | None
    currsize: int


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
        self._guards = _guard_getters(fn)
        self._cache: dict[CallKey, _Compiled] = {}
        # raw attribute tuples of positional calls -> compiled; the full CallKey path fills it
        self._fast: dict[tuple, _Compiled] = {}
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
            self._guarded.clear()
            self._mono = None

    def __repr__(self) -> str:
        return f"<fused function {getattr(self._fn, '__qualname__', self._fn)!r}>"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """As a method: ``self`` is a static argument (keyed by identity; attributes read while
        tracing are baked into the kernel, as with JAX's static arguments)."""
        if obj is None:
            return self
        return functools.partial(self._call, (_Static(obj),))

    # -- call path --------------------------------------------------------------------------------
    def _flatten(self, args: tuple, kwargs: dict) -> tuple[list[Any], tuple[str, ...], CallKey,
                                                             cl.CommandQueue | None]:
        kwnames = tuple(sorted(kwargs))
        flat = list(args) + [kwargs[k] for k in kwnames]
        n = len(args)
        specs = []
        queue = None
        context = None
        for i, value in enumerate(flat):
            static = (i in self._static_nums) if i < n else (kwnames[i - n] in self._static_names)
            if isinstance(value, _Static):
                spec = StaticSpec(_Identity(value.value))
                flat[i] = value.value
            else:
                spec = arg_spec(value, static)
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
        aliases = _aliases(flat, specs) if len(specs) > 1 else ()
        guards = tuple(get() for get in self._guards) if self._guards else ()
        return flat, kwnames, CallKey(tuple(specs), kwnames, context, aliases, guards), queue

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        mono = self._mono
        if mono is not None and not kwargs:
            result = mono(args)
            if result is not _MISS:
                self._hits += 1
                return result
        if not kwargs and not self._guards:
            fkey = _fast_key(args, self._static_nums)
            compiled = self._fast.get(fkey) if fkey is not None else None
            if compiled is not None and _current_tracer() is None:
                self._hits += 1
                self._mono = self._guarded.get(fkey)
                exe = compiled.executable
                queue = args[exe.queue_arg].queue if exe.queue_arg >= 0 else default_queue()
                leaves = exe.launch(args, queue)
                return leaves[0] if exe.treedef == "*" else tree_unflatten(exe.treedef, leaves)
        return self._call((), *args, **kwargs)

    def _call(self, bound: tuple, *args: Any, **kwargs: Any) -> Any:
        if current_tracer() is not None:  # called from another fused function: inline
            return self._fn(*(b.value for b in bound), *args, **kwargs)
        flat, kwnames, key, queue = self._flatten(bound + args, kwargs)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._compile(key, flat, kwnames, queue)
        else:
            self._hits += 1
        if not bound and not kwnames and not key.aliases and not self._guards \
                and not self._validate:  # (the fast paths do not validate)
            fkey = _fast_key(args, self._static_nums)
            if fkey is not None:
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
            host_mode = not any(isinstance(s, DeviceArraySpec) for s in key.specs)
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
        n_pos = len(flat) - len(kwnames)
        same_as = {j: i for i, j, same in key.aliases if same}
        with Tracer() as tracer:
            inputs: list[Any] = []
            for i, (value, spec) in enumerate(zip(flat, key.specs)):
                name = f"arg{i}"
                if i in same_as:  # the same array passed twice: one parameter, one proxy
                    inputs.append(inputs[same_as[i]])
                elif isinstance(spec, StaticSpec):
                    inputs.append(value)
                elif isinstance(spec, DeviceArraySpec):
                    inputs.append(tracer.array_param(spec.dtype, spec.shape, spec.strides, name,
                                                     i, has_offset=spec.has_offset,
                                                     wide=spec.wide))
                elif isinstance(spec, HostArraySpec):
                    from .shapes import row_major_strides

                    inputs.append(tracer.array_param(spec.dtype, spec.shape,
                                                     row_major_strides(spec.shape), name, i,
                                                     writable=spec.writeable))
                else:
                    inputs.append(tracer.scalar_param(value, name, i))
            result = self._fn(*inputs[:n_pos], **dict(zip(kwnames, inputs[n_pos:])))
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
        classes = _alias_classes(key.aliases, traced)
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
            self._guarded.clear()
            self._mono = None
            self._lowered.clear()
            self._hits = self._misses = 0


_BIG_OFFSET = 2**30  # bytes; arrays starting further into their buffer take the full path


def _fast_key(args: tuple, static_nums: frozenset[int]) -> tuple | None:
    """The hot-path cache key: raw attributes of positional arguments, or None when the call
    needs the full path (aliasing arrays, unusual argument types, huge buffers)."""
    if len(args) == 1 and not static_nums and type(args[0]) is cla.Array:
        a = args[0]  # the most common call: one device array
        if a.offset < _BIG_OFFSET and a.base_data is not None:
            return ((a.dtype, a.shape, a.strides, a.offset != 0, a.context),)
        return None
    parts = []
    ptrs = []
    host = 0
    for i, a in enumerate(args):
        t = type(a)
        if i in static_nums:
            try:
                parts.append(("static", _static_key(a)))
            except TypeError:
                return None
        elif t is cla.Array:
            offset = a.offset
            if offset >= _BIG_OFFSET or a.base_data is None:
                return None  # the full path decides between 32- and 64-bit index math
            ptrs.append(a)
            parts.append((a.dtype, a.shape, a.strides, offset != 0, a.context))
        elif t is np.ndarray:
            host += 1
            parts.append(("host", a.dtype, a.shape, a.flags.writeable))
        elif t is float or t is int or t is bool:
            parts.append(t)
        elif isinstance(a, np.generic):
            parts.append(a.dtype)
        else:
            return None
    if len(ptrs) > 1:
        bases = {a.base_data.int_ptr for a in ptrs}
        if len(bases) < len(ptrs):
            return None
    if host > 1:
        arrays = [a for a in args if type(a) is np.ndarray]
        if any(np.may_share_memory(x, y) for k, x in enumerate(arrays) for y in arrays[k + 1:]):
            return None
    return tuple(parts)


def _aliases(flat: list[Any], specs: Sequence[Spec]) -> tuple[tuple[int, int, bool], ...]:
    """(i, j, identical) for array arguments that share memory: ``identical`` when they are the
    same array (same buffer, offset, shape and strides), else they merely overlap."""
    out = []
    arrays = [(i, v) for i, (v, s) in enumerate(zip(flat, specs))
              if isinstance(s, (DeviceArraySpec, HostArraySpec))]
    for a, (i, x) in enumerate(arrays):
        for j, y in arrays[a + 1:]:
            if isinstance(x, cla.Array) and isinstance(y, cla.Array):
                if x.base_data is None or y.base_data is None or \
                        x.base_data.int_ptr != y.base_data.int_ptr:
                    continue
                same = (x.offset, x.shape, x.strides, x.dtype) == \
                    (y.offset, y.shape, y.strides, y.dtype)
            elif isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
                if not np.may_share_memory(x, y):
                    continue
                same = x is y or (x.__array_interface__["data"] == y.__array_interface__["data"]
                                  and (x.shape, x.strides, x.dtype) == (y.shape, y.strides,
                                                                        y.dtype))
            else:
                continue
            out.append((i, j, same))
    return tuple(out)


_SMALL_ARRAY = 4096  # captured arrays up to this size are keyed on their contents


def _guard_value(value: Any) -> Any:
    """A hashable stand-in for a captured value: equal exactly when a trace would be equal."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str, bytes)):
        return (type(value), value)
    if isinstance(value, float):
        return (float, value.hex())
    if isinstance(value, complex):
        return (complex, value.real.hex(), value.imag.hex())
    if isinstance(value, np.generic):
        return (value.dtype.str, value.tobytes())
    if isinstance(value, np.ndarray):
        content = value.tobytes() if value.size <= _SMALL_ARRAY else None
        return ("ndarray", id(value), value.shape, value.dtype.str, content)
    if isinstance(value, tuple):
        return (tuple, tuple(_guard_value(v) for v in value))
    return ("object", id(value))


def _is_data(value: Any) -> bool:
    # lists and dicts are left out: closures commonly mutate them for side effects (logging)
    return isinstance(value, (bool, int, float, complex, str, bytes, np.generic, np.ndarray,
                              tuple)) or value is None


def _code_names(code: Any) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def _guard_getters(fn: Callable[..., Any]) -> list[Callable[[], Any]]:
    """Getters for the data a function reads from its closure and globals.

    Their values join the cache key, so a closure constant or a global that changes between
    calls is traced again instead of being served by a stale kernel. Modules, functions and
    classes are not guarded (their identity rarely changes and costs a lookup per call);
    arrays larger than 4096 elements are keyed on identity, shape and dtype only.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    getters: list[Callable[[], Any]] = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            current = cell.cell_contents
        except ValueError:  # an empty cell (a variable assigned after the definition)
            continue
        if _is_data(current):
            getters.append(lambda cell=cell: _guard_value(cell.cell_contents))
    module_globals = getattr(fn, "__globals__", {})
    for name in sorted(_code_names(code)):
        if name in module_globals and _is_data(module_globals[name]):
            getters.append(lambda name=name: _guard_value(module_globals.get(name)))
    return getters


def _alias_classes(pairs: Sequence[tuple[int, int, bool]], graph: Graph
                   ) -> list[frozenset[int]]:
    """Sets of array parameters that share memory, from pairs of aliasing call arguments.

    The same array passed twice is traced as one parameter (a write through one name is seen
    through the other, as in NumPy); arguments that only partially overlap may be read, but a
    function that writes into one of them is refused before anything runs.
    """
    param_of = {p.source: i for i, p in enumerate(graph.params) if p.kind == "array"}
    written = {p for p, _ in graph.writes}
    parent: dict[int, int] = {}

    def find(a: int) -> int:
        while parent.get(a, a) != a:
            a = parent[a]
        return a
    for a, b, _ in pairs:
        if a in param_of and b in param_of and {param_of[a], param_of[b]} & written:
            raise UnsupportedOperationError(
                f"arguments {a} and {b} overlap in memory and the function writes into one of "
                "them; NumPy would read partly updated data there. Pass a copy of one of them")
    for a, b, _ in pairs:
        if a in param_of and b in param_of:
            parent[find(param_of[a])] = find(param_of[b])
    groups: dict[int, set[int]] = {}
    for p in parent:
        groups.setdefault(find(p), set()).add(p)
    for root, members in groups.items():
        members.add(root)
    return [frozenset(m) for m in groups.values() if len(m) > 1]


def fuse(fn: Callable[..., Any] | None = None, *, static_argnums: Sequence[int] | int = (),
         static_argnames: Sequence[str] | str = (), autotune: bool | None = None,
         validate: bool | None = None) -> Any:
    """Compile a numpy-style function into fused OpenCL kernels.

    Use as ``@fuse`` or ``@fuse(static_argnums=..., static_argnames=...)``. The function is
    traced once per call signature (dtypes, shapes, layouts, static values, device); later
    calls with the same signature only launch the cached kernels.
    """
    def wrap(f: Callable[..., Any]) -> Fused:
        return Fused(f, static_argnums, static_argnames, autotune, validate)
    return wrap(fn) if fn is not None else wrap
