"""``@fuse``: argument specs -> cache -> trace -> passes -> source -> build -> launch."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyopencl as cl

from fusejit.compile import trace_cache
from fusejit.compile.collections import REGISTERED as _collections, collection_of
from fusejit.compile.serialize import reduce_fused, register_fused
from fusejit.compile import overlap, specialise
from fusejit.compile.overlap import OverlapWriteError, alias_classes
from fusejit.compile.specialise import NeedsValue
from fusejit.compile.trace_call import trace_call
from fusejit.inspect import validate
from fusejit.compile.abstract import Compiled, ShapeDtype
from fusejit.frontend.bound import NO_SELF, bind_parts
from fusejit.frontend.captured import Capture, find_captures
from fusejit.frontend.captured import guard_names, guard_values
from fusejit.frontend import guard_check
from fusejit.errors import ContextMismatchError
from fusejit.internal import internal_errors
from fusejit.passes import run_pipeline
from fusejit.codegen.gemm import tune as gemm_tune
from fusejit.codegen.gemm.mma import check_precision
from fusejit.passes.gemm import partition_gemm
from fusejit.passes.host_gemm import host_blas
from fusejit.compile.recompiles import (
    DEFAULT_CACHE_SIZE,
    DEFAULT_LIMIT,
    CallStats,
    SignatureLRU,
    env_int,
)
from fusejit.runtime import autotune
from fusejit.runtime.backend import adopt, backend_of, default_queue
from fusejit.runtime.executable import OutSpec
from fusejit.runtime.opencl.executable import NO_QUEUE, Executable
from fusejit.runtime.memory import check_call
from fusejit.compile.signature import (
    CacheInfo,
    CallKey,
    DeviceArraySpec,
    Identity,
    StaticSelf,
    StaticSpec,
    aliases_of,
    arg_spec,
    fast_key,
)
from fusejit.codegen.source import SourceModule
from fusejit.frontend.trace import current_tracer
from fusejit.inspect.lowered import KernelInfo, Lowered  # noqa: F401  (fusejit.api.Lowered, as before)
from fusejit.frontend.pytree import tree_unflatten

_current_tracer = current_tracer
_instances: weakref.WeakSet = weakref.WeakSet()  # every Fused, for _forget_after_fork
_MISS = object()  # a guarded launcher's answer when the arguments changed signature

_log = logging.getLogger("fusejit")
# what makes a trace or a build take seconds, said on the log at INFO: a trace of this long or of
# this many nodes; more distinct kernels (about 0.2-0.4 s each to build on PoCL) or source
_SLOW_S, _BIG_GRAPH = 2.0, 20_000
_MANY_KERNELS, _BIG_SOURCE = 6, 256 * 1024


# -- the wrapper ------------------------------------------------------------------------------------


@dataclass
class _Compiled:
    executable: Executable
    lowered: Lowered | None  # None: loaded from the trace cache (lower() retraces)
    backend: Any = None  # the runtime backend the executable runs on
    used: bool = False  # set by fast-path hits: the signature LRU's second chance


class Fused:
    """A function traced into fused OpenCL kernels, one compile per call signature."""

    def __init__(self, fn: Callable[..., Any], static_argnums: Sequence[int] = (),
                 static_argnames: Sequence[str] = (), autotune: bool | None = None,
                 validate: bool | None = None, recompile_limit: int | None = None,
                 cache_size: int | None = None, dynamic: bool | None = None,
                 matmul_precision: str = "highest") -> None:
        # (a callable object's own attributes are its state, not the wrapper's)
        functools.update_wrapper(self, fn, updated=() if not inspect.isfunction(fn) else
                                 functools.WRAPPER_UPDATES)
        self.matmul_precision = check_precision(matmul_precision)  # (codegen/gemm/mma.py)
        # fuse(obj.method), fuse(obj), fuse(partial(...)): what they bind is captured state
        self._fn = fn
        self._traced, bound_self = bind_parts(fn)  # (the function the trace runs)
        self._bound = () if bound_self is NO_SELF else (StaticSelf(bound_self),)
        self._static_nums, self._static_names, self._arg_names = specialise.static_args(
            fn, static_argnums, static_argnames)
        self._fast_static = specialise.fast_static(self._static_nums, len(self._bound))
        self.autotune = autotune
        self._validate = validate if validate is not None else (
            os.environ.get("FUSEJIT_VALIDATE", "") not in ("", "0"))
        # reads from outside the arguments (fusejit.frontend.captured), found on the first call
        self._guards: list[Capture] | None = None
        self._cache = SignatureLRU(
            env_int("FUSEJIT_CACHE_SIZE", DEFAULT_CACHE_SIZE) if cache_size is None
            else cache_size, self._evicted)
        self._stats = CallStats(getattr(fn, "__qualname__", "function"),
                                env_int("FUSEJIT_RECOMPILE_LIMIT", DEFAULT_LIMIT)
                                if recompile_limit is None else recompile_limit, dynamic)
        self._code_refs: tuple = ()  # the helpers it names, checked on each call (frontend/captured.py)
        # guard values -> (raw attribute tuples of positional calls -> compiled, -> guarded
        # launcher); the full CallKey path fills them. ``_fast`` and ``_guarded`` are those of
        # the captured values ``_check`` (frontend/guard_check.py) last found (no captures: ())
        self._by_guards: dict[tuple, tuple[dict, dict]] = {}
        self._mono: Callable[[tuple], Any] | None = None  # guarded launcher, last signature
        # _check, _implicit: the check, the captured arrays it saw (read fresh); _unchecked
        guard_check.clear(self)  # counts snapshots no check could tell
        self._lowered: dict[CallKey, tuple] = {}  # traced by lower(), not yet built
        self._lock = threading.RLock()
        self._overlapped = overlap.Overlapped(self._cache.maxsize)  # (views of one buffer)
        self._hits = self._misses = self.trace_count = 0
        _instances.add(self)

    @property
    def validate(self) -> bool:
        """Check every call against a float64 NumPy evaluation of its graph (fusejit.inspect.validate).
        While on, calls take the full path; turning it on drops the fast paths' entries."""
        return self._validate

    @validate.setter
    def validate(self, on: bool) -> None:
        with self._lock:
            self._validate = bool(on)
            guard_check.clear(self)

    def __repr__(self) -> str:
        return f"<fused function {getattr(self._fn, '__qualname__', self._fn)!r}>"

    def __reduce__(self) -> tuple:
        """Pickled as the Python function and options, never as compiled kernels: the copy
        compiles (or finds the disk cache) where it is unpickled (fusejit.dask's workers)."""
        return reduce_fused(self)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """As a method: ``self`` is a static argument keyed by identity; what the method reads
        from it is captured state, guarded or read fresh (fusejit/frontend/captured.py)."""
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
            self._guards = find_captures(self._traced, bound_self)
            self._code_refs = tuple(self._guards.code_refs)
        guards, implicit = guard_values(self._guards, bound_self, flat) if self._guards else \
            ((), [])
        flat += implicit  # captured arrays, read fresh: extra (read-only) arguments
        n_given = n + len(kwnames)
        specs = []
        queue = None
        context = None
        for i, value in enumerate(flat):
            static = (i - len(self._bound) in self._static_nums) if i < n else (
                i < n_given and kwnames[i - n] in self._static_names)
            if isinstance(value, StaticSelf):
                spec = StaticSpec(Identity(value.value))
                flat[i] = value.value
            elif isinstance(value, ShapeDtype):  # an abstract argument (f.lower, export)
                spec = value.spec()
            else:
                what = f"argument {i}" if i < n_given else \
                    "an array the function reads from outside its arguments"
                if not static:  # (another library's device array: a backend's, no copy)
                    value = flat[i] = adopt(value, what)
                spec = arg_spec(value, static, what)
            if isinstance(spec, DeviceArraySpec):
                if context is None:
                    context, queue = spec.context, value.queue
                elif spec.context != context:
                    raise ContextMismatchError(
                        f"argument {i} lives in a different OpenCL context (or on another "
                        "GPU) than argument 0's; all device arrays of one call must share a "
                        "context")
            specs.append(spec)
        if context is None:
            queue = default_queue()
            context = queue.context
        elif queue is None:
            raise ValueError(NO_QUEUE)
        aliases = aliases_of(flat, specs) if len(specs) > 1 else ()
        names = guard_names(self._guards, bound_self) if guards else ()
        return flat, kwnames, CallKey(tuple(specs), kwnames, context, aliases, guards,
                                      len(implicit), names), queue

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
        given = args
        if self._bound:  # fuse(obj.method), fuse(obj): obj first, as a method's self
            args = (self._bound[0].value, *args)
        if self._guards:  # captured values: the fast paths serve those ``_check`` last saw
            check = self._check
            if check is None or not check():
                guard_check.recheck(self)
            if self._small and guard_check.overlaps(self._small, args):  # (read fresh there)
                return self._call(self._bound, *given, **kwargs)
            if self._implicit:  # captured arrays read fresh: passed on as arguments
                args = args + self._implicit
        mono = self._mono
        if mono is not None and not kwargs:
            result = mono(args)
            if result is not _MISS:
                self._hits += 1
                return result
        if not kwargs:
            fkey = fast_key(args, self._fast_static)
            compiled = self._fast.get(fkey) if fkey is not None else None
            if compiled is not None and _current_tracer() is None:
                self._hits += 1
                compiled.used = True
                mono = self._guarded.get(fkey, _MISS)
                if mono is _MISS:  # this signature's second call: its guarded launcher
                    exe = compiled.executable
                    mono = exe.guarded(fkey, exe.treedef, tree_unflatten, _MISS,
                                       specialise.same_statics(args, self._fast_static,
                                                               len(self._bound)))
                    if mono is not None or not exe.needs_run():  # (tuning: ask again later)
                        self._guarded[fkey] = mono
                    if mono is not None:  # (launching as the calls after this one will)
                        self._mono = mono
                        result = mono(args)
                        if result is not _MISS:
                            return result
                self._mono = mono
                return self._launch(compiled, args, given, mono)
        return self._call(self._bound, *given, **kwargs)

    def _launch(self, compiled: _Compiled, args: tuple, given: tuple,
                guarded: Callable[[tuple], Any] | None) -> Any:
        exe = compiled.executable
        if exe.queue_arg >= 0:
            queue = getattr(args[exe.queue_arg], "queue", None)
            if queue is None:  # another library's arrays (runtime/cuda/launch.py): launched
                # by this signature's guarded launcher, else adopted by the full path
                result = guarded(args) if guarded is not None else _MISS
                return result if result is not _MISS else self._call(self._bound, *given)
        else:
            queue = default_queue()
            if backend_of(queue) is not compiled.backend:  # set_default_device changed it
                return self._call(self._bound, *given)
        leaves = exe.launch(args, queue)
        return leaves[0] if exe.treedef == "*" else tree_unflatten(exe.treedef, leaves)

    def _call(self, bound: tuple, *args: Any, **kwargs: Any) -> Any:
        if current_tracer() is not None:  # called from another fused function: inline
            return self._traced(*(b.value for b in bound), *args, **kwargs)
        if self._code_refs:
            self._code_changed()
        if _collections and bound is self._bound:  # dask arrays: fusejit.dask builds the graph
            handler = collection_of(args, kwargs)
            if handler is not None:
                return handler.call(self, args, kwargs)
        flat, kwnames, key, queue = self._flatten(bound + args, kwargs)
        flat, key = self._overlapped.place(flat, key, len(bound))  # (written views of one buffer)
        compiled = self._cache.lookup(key)
        need = None
        if compiled is None:
            try:
                compiled = self._compile(key, flat, kwnames, queue)
            except NeedsValue as e:
                need = e
            except OverlapWriteError as refused:
                self._overlapped.remember(key, refused)
                return self._call(bound, *args, **kwargs)
        else:
            self._hits += 1
        if need is not None:  # Python ints used as values: specialise on them (specialise.py)
            return specialise.again(self, need, key, lambda: self._call(bound, *args, **kwargs))
        if (not bound or bound is self._bound) and not kwnames and not key.aliases and \
                not self._validate:  # (the fast paths do not validate; captured arrays are
            fkey = fast_key(tuple(flat), self._fast_static)  # passed on after the args)
            if fkey is not None:  # (under this call's guard values)
                fast, guarded = self._by_guards.setdefault(key.guards, ({}, {}))
                fast[fkey] = compiled
                # the guarded launcher is generated at the second call (above): a process's
                # first call does not pay for compiling it
                guarded.pop(fkey, None)
                self._mono = None
        exe = compiled.executable
        if self._validate:  # results checked against a float64 NumPy evaluation of the graph
            leaves = validate.run_checked(exe, flat, queue, getattr(self, "__name__", "fn"))
        else:
            leaves = exe.run(flat, queue)
        return tree_unflatten(exe.treedef, leaves)

    @internal_errors
    def _compile(self, key: CallKey, flat: list[Any], kwnames: tuple[str, ...],
                 queue: cl.CommandQueue) -> _Compiled:
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is not None:
                self._hits += 1
                return compiled
            self._stats.note_miss(lambda: reversed(list(self._cache)), key)
            backend = backend_of(queue)  # builds, allocates, copies and launches
            pre = self._lowered.pop(key, None)
            # a signature lowered in an earlier process: no trace (fusejit/compile/trace_cache.py)
            stored = None if pre is not None else trace_cache.load(
                self, key, queue, autotune.enabled(self.autotune))
            if stored is not None:
                (exe, how), lowered = stored, None
            else:
                lowered, outputs, treedef, constants = pre or self._lower(
                    key, flat, kwnames, queue)
                check_call(lowered, key.specs, flat)  # too-big buffers fail here, named
                host_mode = not any(isinstance(s, DeviceArraySpec)  # (of the arguments passed)
                                    for s in key.specs[:len(key.specs) - key.implicit])
                exe = backend.executable(lowered, outputs, treedef, constants, queue,
                                         host_mode, autotune.enabled(self.autotune),
                                         getattr(self._fn, "__name__", "fn"))
                how = getattr(exe, "built_how", "compiled")
                trace_cache.store(self, key, queue, exe, lowered)
            exe.queue_arg = next((i for i, s in enumerate(key.specs)
                                  if isinstance(s, DeviceArraySpec)), -1)
            self._stats.note_build(how)
            compiled = _Compiled(exe, lowered, backend)
            self._cache.insert(key, compiled)
            self._misses += 1
            return compiled

    # -- tracing and lowering ---------------------------------------------------------------------
    @internal_errors
    def _lower(self, key: CallKey, flat: list[Any], kwnames: tuple[str, ...],
               queue: cl.CommandQueue) -> tuple[Lowered, list[OutSpec], Any, dict]:
        self.trace_count += 1
        self._stats.traces += 1
        start = time.perf_counter()
        traced, traced_nodes, outputs, treedef, constants = trace_call(
            self._traced, self._guards, key, flat, kwnames)
        graph, records = run_pipeline(traced)
        name = getattr(self._fn, "__qualname__", "fn")
        if time.perf_counter() - start > _SLOW_S or len(traced) > _BIG_GRAPH:
            _log.info("tracing %s: %d nodes, %d after simplifying (%.1f s)", name, len(traced),
                      len(graph), time.perf_counter() - start)
        backend = backend_of(queue)
        info = backend.device_info(queue)
        classes = alias_classes(key.aliases, traced)
        plan = partition_gemm(graph, info.limits, classes, rows=self._stats.rows_on,
                              dynamic=self._stats.dynamic_on)
        plan = host_blas(graph, plan, info.limits)  # CPU devices: BLAS products (host_gemm.py)
        precision = self.matmul_precision
        # tensor cores, wgmma and the GEMM tuner as the device's backend has them
        mma, limits, tuning = backend.products(queue, info, precision, plan, self.autotune)
        plan = gemm_tune.configure(plan, info.key, limits, tuning, precision, mma,
                                   self._stats.dynamic_on)
        aliased = frozenset(p for c in classes for p in c)
        module = SourceModule(graph, plan, backend.target(info), limits, aliased,
                              dynamic=self._stats.dynamic_on, rows=self._stats.rows_on).build()
        module.verify(graph, plan, classes)  # kernel order and no races (passes/verify.py)
        functions = len({k.source for k in module.kernels})
        if functions > _MANY_KERNELS or len(module.source) > _BIG_SOURCE:
            _log.info("building %s: %d kernels (%d distinct), %d KB of source", name,
                      len(module.kernels), functions, len(module.source) // 1024)
        lowered = Lowered(traced, graph, records, plan, module, info, traced_nodes)
        return lowered, outputs, treedef, constants

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """Trace and generate code for these arguments without launching anything. Arguments
        may be abstract (``fusejit.ShapeDtype``; a None dimension makes it dynamic);
        ``.compile()`` on the result builds it."""
        if any(isinstance(a, ShapeDtype) and a.dynamic for a in (*args, *kwargs.values())):
            if self._stats.dynamic is False:
                raise ValueError("a ShapeDtype with a None (dynamic) dimension needs "
                                 "@fuse(dynamic=None or True); this function has dynamic=False")
            self._stats.dynamic_on = True
            self._stats.rows_on |= any(isinstance(a, ShapeDtype) and a.shape[-1:] == (None,)
                                       for a in (*args, *kwargs.values()))
        flat, kwnames, key, queue = self._flatten(self._bound + args, kwargs)
        flat, key = self._overlapped.place(flat, key, len(self._bound))
        build = functools.partial(self._compile_lowered, key, flat, kwnames, queue)
        need = None
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is not None and compiled.lowered is not None:  # (None: trace cache)
                return dataclasses.replace(compiled.lowered, _compile=build)
            try:
                if key not in self._lowered:
                    self._lowered[key] = self._lower(key, flat, kwnames, queue)
                return dataclasses.replace(self._lowered[key][0], _compile=build)
            except NeedsValue as e:
                need = e
            except OverlapWriteError as refused:
                self._overlapped.remember(key, refused)
                return self.lower(*args, **kwargs)
        return specialise.again(self, need, key, lambda: self.lower(*args, **kwargs))

    def _compile_lowered(self, key: CallKey, flat: list[Any], kwnames: tuple[str, ...],
                         queue: cl.CommandQueue) -> Compiled:
        self._compile(key, flat, kwnames, queue)
        return Compiled(self)

    def explain(self, *args: Any, **kwargs: Any) -> Any:
        """A readable report of what fusejit makes of a call with these arguments (graph, passes,
        fusion groups and why they split, bytes moved, kernel sources; ``.dot`` for a picture);
        see ``fusejit.inspect.explain``. Launches nothing."""
        from fusejit.inspect.explain import explain

        handler = collection_of(args, kwargs)
        if handler is not None:  # the dask plan: blockwise, reduction...
            return handler.explain(self, args, kwargs)
        return explain(getattr(self, "__qualname__", "function"), self.lower(*args, **kwargs))

    # -- cache ------------------------------------------------------------------------------------
    def cache_info(self) -> CacheInfo:
        """Hits and misses of call signatures; ``traces`` (runs of the Python function),
        ``compiles`` (programs the OpenCL compiler built) and ``disk_hits`` (programs loaded
        from the disk cache instead)."""
        st = self._stats
        return CacheInfo(self._hits, self._misses, self._cache.maxsize or None,
                         len(self._cache), st.traces, st.compiles, st.disk_hits)

    def _evicted(self, compiled: _Compiled) -> None:
        """The signature LRU dropped ``compiled``: drop the fast paths' keys to it too."""
        for guards, (fast, guarded) in list(self._by_guards.items()):
            for fkey in [k for k, c in fast.items() if c is compiled]:
                del fast[fkey]
                if guarded.pop(fkey, None) is self._mono:
                    self._mono = None
            if not fast and fast is not self._fast:
                del self._by_guards[guards]

    def cache_clear(self) -> None:
        """Forget every compiled signature (the next call traces and builds again)."""
        with self._lock:
            self._cache.clear()
            guard_check.clear(self)
            self._lowered.clear()
            self._overlapped.clear()
            self._hits = self._misses = 0
            self._stats = CallStats(self._stats.name, self._stats.limit, self._stats.dynamic)


def _forget_after_fork() -> None:
    """A forked child cannot launch its parent's kernels: every fused function forgets them
    (and gets a new lock, which a parent's thread may have held), so its next call takes the
    full path, where a child forked after the parent used a device is refused by name
    (``runtime.backend.FORKED``) instead of hanging in the driver."""
    for fused in list(_instances):
        fused._lock = threading.RLock()
        fused.cache_clear()


os.register_at_fork(after_in_child=_forget_after_fork)

register_fused(Fused)  # (unpickling makes Fused objects: compile/serialize.py sits below api)


def fuse(fn: Callable[..., Any] | None = None, *, static_argnums: Sequence[int] | int = (),
         static_argnames: Sequence[str] | str = (), autotune: bool | None = None,
         validate: bool | None = None, recompile_limit: int | None = None,
         cache_size: int | None = None, dynamic: bool | None = None,
         matmul_precision: str = "highest") -> Any:
    """Compile a numpy-style function into fused OpenCL kernels.

    Use as ``@fuse`` or ``@fuse(static_argnums=..., static_argnames=..., autotune=...,
    validate=...)``. The function is traced once per call signature; later calls with the
    same signature only launch the cached kernels.

    Args:
        fn: the function. Its body uses NumPy on its arguments: ufuncs, operators, the NumPy
            functions and ndarray methods listed in the docs' "Supported NumPy API" table,
            basic and integer-array indexing, in-place writes (``x += y``, ``x[1:] = v``,
            ``out=``). It returns an array, a scalar, ``None`` or a tuple/list/dict of them.
        static_argnums: positions of arguments that are *static*: their values are baked into
            the kernel and are part of the cache key (shapes, axes, Python ints that decide
            control flow, ``np.pad`` widths). A new value traces and compiles again.
        static_argnames: the same, by parameter name.
        autotune: time candidate work-group shapes on the first call of a reduction
            (default: on unless ``FUSEJIT_AUTOTUNE=0``).
        validate: check every call against a float64 NumPy evaluation of the graph and raise
            ``ValidationError`` beyond the documented ULP bounds (default:
            ``FUSEJIT_VALIDATE``).
        matmul_precision: "highest" (default: float32 products, the SIMT kernel), "3xtf32"
            (NVIDIA tensor cores, three TF32 products per term: float32-grade error) or
            "tf32" (tensor cores, operands rounded to 10 mantissa bits); either of the
            latter also runs float16 products on tensor cores. Elsewhere the SIMT kernel
            runs and ``explain()`` says why.

    Returns:
        A ``Fused`` callable (or, without ``fn``, a decorator making one). Calling it with
        ``pyopencl.array.Array`` arguments returns device arrays on the first array's queue;
        with NumPy arrays it uploads them, runs on ``default_queue()`` and returns NumPy
        arrays. A 0-d result comes back as a 0-d array.

    What is traced and what is baked in:
        * Array arguments (NumPy or pyopencl) are *dynamic*: the kernel is specialised on
          their dtype, shape and layout (strides, offset), not their values.
        * Python and NumPy scalars are dynamic kernel arguments: a new value does not
          recompile (Python scalars promote weakly, as NEP 50 says). A Python int or bool
          the trace needs as a value (a size, an axis, a window, a loop count, an ``if``)
          is made static instead, and the recompile log says so.
        * Static arguments are constants of the kernel, keyed by type and value, floats by
          their bits (``-0.0`` is not ``0.0``; NaN hits the cache).
        * State read from outside the arguments is never served stale (see "Captured state"
          below).
        * Python control flow runs once, while tracing: ``if`` on a traced value raises
          ``TracerBoolConversionError`` (use ``np.where``); loops over ``range(n)`` with a
          static ``n`` unroll.
        * Writes into arguments happen in place, as in NumPy; nothing else is modified.

    Raises:
        UnsupportedOperationError: a NumPy feature fusejit does not trace (a subclass of
            ``NotImplementedError``; the message says what to write instead).
        TracerConversionError, TracerBoolConversionError: a traced value used where Python
            needs a concrete one.
        UnsupportedDTypeError: object, datetime, longdouble dtypes; float64 or complex128 on
            a device without fp64; complex values where fusejit lacks them (matrix products).
        TypeError, ValueError, IndexError, ...: wherever NumPy raises them for the same
            call (bad ``out=``, mismatched shapes, an index out of bounds known while
            tracing), before anything is launched.

    Caching and recompiles:
        Built programs also go to a disk cache (``FUSEJIT_CACHE_DIR``; ``=0`` turns it off),
        so a new process skips the OpenCL compiler. ``recompile_limit`` (default 8) distinct
        signatures give a RecompileWarning naming the arguments that change; ``cache_size``
        (default 512) bounds the signatures kept in memory (least recently used are dropped).
        ``dynamic``: None (default) generates kernels that take their extents at launch from
        the second distinct extent of a dimension on, so later extents reuse the program; True
        from the first call; False never (every shape specialised).

    Captured state:
        State read from outside the arguments is never served stale. Every global, closure
        variable, ``self`` attribute (for a method) and constant attribute/subscript chain
        from them (``cfg.alpha``, ``params["scale"]``, ``self.w``), in the function and the
        plain Python helpers it calls, is either

        * guarded (a changed value traces again): scalars, strings, NumPy scalars, containers and
          objects made of them, NumPy arrays of at most 4096 elements (by content); or
        * read fresh on every call: larger NumPy arrays (uploaded) and pyopencl arrays (by
          reference), which are read-only inside the function (pass an array as an argument to
          write it).

        Helper functions, classes and ufuncs it names are checked by identity (rebinding one
        traces again). ``fuse(obj.method)``, ``fuse(obj)`` with ``__call__`` and
        ``fuse(functools.partial(g, ...))`` read ``obj`` and the partial's arguments by the
        same rules. Library constants (``np.pi``) and builtins are not guarded, nor state
        the function writes while traced (``log.append(x)``). State too large to guard raises
        ``CapturedStateError``: pass it as an argument instead.

    Example:
        >>> import numpy as np
        >>> from fusejit import fuse
        >>> @fuse
        ... def softmax(x):
        ...     e = np.exp(x - x.max(axis=-1, keepdims=True))
        ...     return e / e.sum(axis=-1, keepdims=True)
        >>> softmax(np.zeros((2, 4), np.float32))
        array([[0.25, 0.25, 0.25, 0.25],
               [0.25, 0.25, 0.25, 0.25]], dtype=float32)
        >>> len(softmax.lower(np.zeros((2, 4), np.float32)).kernels)  # one fused kernel
        1
    """
    def wrap(f: Callable[..., Any]) -> Fused:
        return Fused(f, static_argnums, static_argnames, autotune, validate, recompile_limit,
                     cache_size, dynamic, matmul_precision)
    return wrap(fn) if fn is not None else wrap
