"""Captured state: every value a fused function reads from outside its arguments.

A trace bakes in whatever the function read while it ran, so each such read is found here and
made either a **guard** (its value joins the cache key: a changed value traces again) or an
**implicit input** (read fresh on every call, as an extra array argument the caller did not
pass). The rules, stated for users in ``help(fuse)`` and the README:

* Reads are found in the function's bytecode (and that of the lambdas, comprehensions and
  plain Python helper functions it reaches): a global name, a closure variable or, for a
  method, ``self``, followed by constant attribute and subscript steps (``cfg.alpha``,
  ``params["scale"]``, ``self.layer.w``, ``lst[0]``). The value at the end of each chain is
  what is captured; a container used as a whole (``params[k]``, ``for w in ws``) is captured
  whole, item by item.
* Scalars, strings, bytes, ``None``, NumPy scalars and dtypes, slices, enum members,
  tuples/frozensets/lists/dicts of those and NumPy arrays of at most 4096 elements are guarded
  by value (floats by their bits). A cached call does not compute the guard values: the check
  fusejit.frontend.guard_check writes for them tells that they are unchanged.
* ``fuse(obj.method)`` and ``fuse(obj)`` bind ``obj`` as a method's ``self``, and
  ``fuse(functools.partial(...))`` runs a function whose own globals hold the partial's
  arguments (``fusejit.frontend.bound.bind_parts``): both are captured state by these rules.
* Larger NumPy arrays and every pyopencl array are implicit inputs: uploaded (NumPy) or passed
  by reference (pyopencl) on every call, so ``W -= lr * g`` between calls is seen. They are
  read-only inside the function: to write one, pass it as an argument.
* Other objects (a config instance) are guarded through their attributes.
* Functions, classes and ufuncs named through a global or closure variable (``act = np.tanh``,
  a helper) are checked by identity on every call: rebinding one (``act = np.sin``, a notebook
  cell run again) drops the traces.
* Not guarded: anything reached through library modules (``np.pi``), builtins, and state the
  function writes while it is traced (``calls["n"] += 1``: a side effect of tracing).
"""

from __future__ import annotations

import dis
import functools
import os
import sys
import sysconfig
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl.array as cla

from fusejit.ir import dtypes as dt
from fusejit.errors import CapturedStateError
from fusejit.frontend.keys import Identity, StaticKey, static_key

SMALL_ARRAY = 4096  # captured NumPy arrays up to this many elements are guarded by content
_MAX_LEAVES = 10_000  # a captured container guarded item by item holds at most this many
MAX_DEPTH = 8


CAPTURED_READ_ONLY = (
    "this array is read from outside the fused function's arguments (a global, a closure "
    "variable or an attribute), and such arrays are read-only inside @fuse: pass it as an "
    "argument to write into it")


# -- what a chain is ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    kind: str  # "attr" | "item"
    key: Any


@dataclass(frozen=True)
class Chain:
    """A read from outside the arguments: a root, then constant attribute/subscript steps."""

    root: str  # "global" | "closure" | "self" | "default"
    name: str  # the root's name (a default: the parameter's name)
    steps: tuple[Step, ...]

    def describe(self) -> str:
        text = "self" if self.root == "self" else self.name
        for s in self.steps:
            text += f".{s.key}" if s.kind == "attr" else f"[{s.key!r}]"
        return text


_LIBRARY_DIRS = tuple(sorted({os.path.realpath(p) for k in ("stdlib", "platstdlib", "purelib",
                                                               "platlib")
                              if (p := sysconfig.get_paths().get(k))}))
_LIBRARY_NAMES = frozenset({"fusejit", "numpy", "pyopencl", "builtins"})


def _is_library(module: types.ModuleType) -> bool:
    """Modules of the standard library and installed packages hold no user state."""
    if module.__name__.split(".")[0] in _LIBRARY_NAMES or module.__name__ in sys.builtin_module_names:
        return True
    path = getattr(module, "__file__", None)
    if path is None:  # built-in or frozen (a module made with types.ModuleType is the user's)
        return getattr(module, "__spec__", None) is not None
    return _library_path(path)


@functools.lru_cache(maxsize=1024)
def _library_path(path: str) -> bool:
    # (realpath stats every component: ~0.1 ms on a process's first call, paid once per file)
    return os.path.realpath(path).startswith(_LIBRARY_DIRS)


_CODE = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.ModuleType,
         type, np.ufunc, types.MethodWrapperType, types.WrapperDescriptorType,
         types.MethodDescriptorType, types.BuiltinMethodType,
         type(np.nan_to_num))  # (NumPy's array-function dispatchers: np.fix, np.round)


def is_fused(value: Any) -> bool:
    return callable(value) and hasattr(value, "_fn") and hasattr(value, "trace_count")


def fused_code(value: Any) -> Any:
    """The Python function a fused object's trace runs (a partial's: the function holding its
    arguments; a bound method's: the method itself, as it was before issue 30)."""
    return value._fn if getattr(value, "_bound", ()) else getattr(value, "_traced", value._fn)


def is_code(value: Any) -> bool:
    """Functions, classes and modules: looked up once, never guarded."""
    return isinstance(value, _CODE) or is_fused(value)


def _module_data(module: Any) -> Any:
    if not isinstance(module, types.ModuleType):
        return module
    return {k: v for k, v in vars(module).items() if not k.startswith("__") and not is_code(v)}


# -- finding the chains in bytecode ---------------------------------------------------------------

_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update",
                       "setdefault", "popitem", "add", "discard", "sort", "reverse"})
_ROOT_OPS = {"LOAD_GLOBAL": "global", "LOAD_DEREF": "closure", "LOAD_FAST": "self",
             "LOAD_FAST_CHECK": "self", "LOAD_FAST_BORROW": "self"}
_STORES = {"STORE_ATTR", "STORE_SUBSCR", "DELETE_ATTR", "DELETE_SUBSCR"}


_LOAD_GLOBAL = dis.opmap["LOAD_GLOBAL"]
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
_GLOBAL_SHIFT = 1 if sys.version_info >= (3, 11) else 0  # (3.11: the low bit is NULL + ...)
_ABSENT = object()


def _library_globals_only(fn: Any, code: types.CodeType, bound: bool) -> bool:
    """Whether the only reads of ``fn`` from outside its arguments are of library modules
    (``np.tanh``, ``math.pi``), which are never guarded: then ``_chains`` would find nothing
    to capture, and its ``dis`` walk is ~0.3-0.6 ms of a process's first call. A scan of the
    raw bytecode for LOAD_GLOBAL instead; anything else it could read (a closure, ``self``,
    nested code, a builtin, any other global) takes the full analysis."""
    if bound or code.co_freevars or any(isinstance(c, types.CodeType) for c in code.co_consts):
        return False
    scope, names, raw, ext = fn.__globals__, code.co_names, code.co_code, 0
    for k in range(0, len(raw), 2):
        op, arg = raw[k], raw[k + 1] | ext
        if op == _EXTENDED_ARG:
            ext = arg << 8
            continue
        ext = 0
        if op == _LOAD_GLOBAL:
            value = scope.get(names[arg >> _GLOBAL_SHIFT], _ABSENT)
            if not (isinstance(value, types.ModuleType) and _is_library(value)):
                return False
    return True


def _chains(code: types.CodeType, self_name: str | None, freevars: frozenset[str]
            ) -> list[tuple[Chain, bool]]:
    """(chain, written) for every read chain in ``code`` and the code objects nested in it;
    ``written``: the chain is the target of an (augmented) assignment."""
    out: list[tuple[Chain, bool]] = []
    ins = [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "EXTENDED_ARG")]
    k = 0
    while k < len(ins):
        i = ins[k]
        root = _ROOT_OPS.get(i.opname)
        name = i.argval
        k += 1
        if i.opname == "LOAD_FAST_LOAD_FAST" and self_name in name:  # (Python 3.13: two loads)
            if name[0] == self_name:
                out.append((Chain("self", self_name, ()), False))  # self, then another value
            root, name = ("self", self_name) if name[1] == self_name else (None, None)
        if root == "closure" and name == self_name:  # self held in a cell (a lambda uses it)
            root = "self"
        if root is None or not isinstance(name, str) or (root == "self" and name != self_name) \
                or (root == "closure" and name not in freevars):
            continue
        steps: list[Step] = []
        written = False
        while k < len(ins):
            op = ins[k].opname
            if op == "COPY":  # x.a += 1: an augmented assignment's target (else: the walrus)
                if k + 1 < len(ins) and ins[k + 1].opname in ("LOAD_ATTR", "LOAD_METHOD"):
                    written = True
                    k += 1
                    continue
                break
            elif op in ("LOAD_ATTR", "LOAD_METHOD"):
                steps.append(Step("attr", ins[k].argval))
                k += 1
            elif op == "LOAD_CONST" and k + 1 < len(ins):
                nxt = [j for j in ins[k + 1:k + 4] if j.opname != "COPY"][:1]
                key = ins[k].argval
                if nxt and nxt[0].opname == "BINARY_SUBSCR" and _hashable(key):
                    steps.append(Step("item", key))
                    end = ins.index(nxt[0], k)
                    written |= end > k + 1  # COPYs between: d["n"] += 1
                    k = end + 1
                    continue
                if nxt and nxt[0].opname in _STORES:
                    written = True
                break
            else:
                if op in _STORES:
                    written = True
                break
        out.append((Chain(root, name, tuple(steps)), written))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            # a nested function's free variables are the outer function's locals or free vars
            # (self among them: a lambda or comprehension of a method reading self)
            inner = frozenset(const.co_freevars) & freevars
            nested_self = self_name if self_name in const.co_freevars else None
            out += _chains(const, nested_self, inner)
    return out


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


# -- evaluating chains -----------------------------------------------------------------------------

Getter = Callable[[Any], Any]  # the bound ``self`` (or None) -> the current value


@dataclass(frozen=True)
class Capture:
    chain: Chain
    get: Getter
    owner: Any = None  # the function whose code reads it
    # a self chain: where its self is, as (anchor, steps): steps from the fused method's self
    # (anchor None) or from a global or closure variable ((id of its function, root, name))
    self_path: tuple[Any, tuple[Step, ...]] | None = None


class Captures(list):
    """The captures of a function (a list: empty when it reads nothing from outside its
    arguments), and every Python function the analysis went through (``functions``: the ones
    ``substituted`` rebuilds so that they see the implicit inputs' proxies too)."""

    functions: dict[int, Any]
    # (scope, name, value) of the functions, classes and ufuncs the function names through a
    # global or closure variable: a call first checks ``scope.get(name) is value`` (see Fused)
    code_refs: list[tuple[Any, str, Any]]
    written: list[Capture]  # chains the function writes (not guarded: see outside_values)


class _Lookup:
    """A scope for ``code_refs`` that is not a globals dict: a closure cell, a chain."""

    __slots__ = ("get_value",)

    def __init__(self, get_value: Getter) -> None:
        self.get_value = get_value

    def get(self, name: str) -> Any:
        return self.get_value(None)


def _root_getter(fn: Any, chain: Chain, self_get: Getter | None) -> Getter | None:
    if chain.root == "global":
        scope = fn.__globals__
        name = chain.name
        builtins = scope.get("__builtins__", {})
        builtins = vars(builtins) if isinstance(builtins, types.ModuleType) else builtins
        missing = _Missing(chain)
        return lambda s: scope.get(name, builtins.get(name, missing))
    if chain.root == "closure":
        cell = fn.__closure__[fn.__code__.co_freevars.index(chain.name)]
        missing = _Missing(chain)

        def from_cell(s: Any) -> Any:
            try:
                return cell.cell_contents
            except ValueError:  # not assigned yet
                return missing
        return from_cell
    if chain.root == "self":
        return self_get
    return None  # pragma: no cover


class _Missing:
    """A chain that does not resolve (yet): its guard value; tracing then raises as Python
    would."""

    __slots__ = ("chain",)

    def __init__(self, chain: Chain) -> None:
        self.chain = chain

    def __hash__(self) -> int:
        return hash(self.chain)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Missing) and other.chain == self.chain


def _walk(root: Getter, steps: tuple[Step, ...], chain: Chain) -> Getter:
    missing = _Missing(chain)

    def get(s: Any) -> Any:
        value = root(s)
        try:
            for step in steps:
                value = getattr(value, step.key) if step.kind == "attr" else value[step.key]
        except Exception:  # noqa: BLE001 - the trace raises it, as the plain call would
            return missing
        return value
    return get


def find_captures(fn: Any, self_obj: Any = None) -> Captures:
    """The reads of ``fn`` (and of the helper functions it calls) that need guarding;
    ``self_obj``: for a method, the ``self`` of this call (the chains from it are resolved on
    it to tell methods, which are analysed in turn, from data)."""
    out = Captures()
    out.functions, out.code_refs, out.written = {}, [], []
    out += _find(fn, self_obj, None, (None, ()), set(), out)
    return out


def _find(fn: Any, self_obj: Any, self_get: Getter | None, self_path: Any,
          seen: set[tuple[int, bool]], into: Captures) -> list[Capture]:
    """``self_get`` finds this function's ``self`` from the fused method's (None: it is that
    one); ``self_path``: where it is (see ``Capture.self_path``; None: unknown)."""
    if is_fused(fn) and getattr(fn, "_bound", ()):
        # fuse(obj.method) called from another fused function: obj is its self for good
        obj = fn._bound[0].value
        return _find(fn._traced, obj, lambda s: obj, (("fused", id(fn)), ()), seen, into)
    if is_fused(fn):  # its Python function
        fn = fused_code(fn)
    code = getattr(fn, "__code__", None)
    if code is None or not hasattr(fn, "__globals__"):
        return []
    bound = self_obj is not None
    if (id(code), bound) in seen:
        return []
    seen.add((id(code), bound))
    into.functions[id(fn)] = fn
    self_name = code.co_varnames[0] if bound and code.co_argcount else None
    self_get = self_get if self_get is not None else (lambda s: s)
    found = [] if _library_globals_only(fn, code, bound) else \
        _chains(code, self_name, frozenset(code.co_freevars))
    # a function of fusejit or another library (fusejit.random's samplers, fusejit.dask's
    # pieces): its own state is not the user's; only the user functions it calls are analysed
    # (asked only where it matters: a user script's realpath is ~0.1 ms of a first call)
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    library = (bool(found) or bool(getattr(fn, "__defaults__", None) or
                                   getattr(fn, "__kwdefaults__", None))) and \
        module is not None and _is_library(module)
    written = {c for c, w in found if w}
    for chain in written:
        if (root := _root_getter(fn, chain, self_get)) is not None:
            into.written.append(Capture(chain, _walk(root, chain.steps, chain), fn,
                                        self_path if chain.root == "self" else None))
    captures: list[Capture] = []
    done: set[Chain] = set()
    for chain, _ in found:
        if chain in done or chain in written:
            continue
        done.add(chain)
        root = _root_getter(fn, chain, self_get)
        if root is None:
            continue
        sample = self_obj if chain.root == "self" else None
        start = self_obj if chain.root == "self" else root(None)
        if isinstance(start, types.ModuleType) and _is_library(start):
            continue  # np.pi, math.tau: library constants
        get = _walk(root, chain.steps, chain)
        value = get(sample)
        owner = getattr(value, "__self__", None)
        if isinstance(value, types.BuiltinMethodType) and chain.steps and not is_code(owner):
            # x.sum(), params.get("k"): a method reads its object, which is captured whole;
            # log.append(x), d.update(...): a side effect on it, not a read
            if chain.steps[-1].key in _MUTATORS and isinstance(owner, (list, dict, set)):
                continue
            chain = Chain(chain.root, chain.name, chain.steps[:-1])
            if chain in done or chain in written:
                continue
            done.add(chain)
            get = _walk(root, chain.steps, chain)
            value = owner
        if library and not (is_code(value) and not isinstance(value, types.MethodType)):
            continue
        if isinstance(value, functools.partial) and is_fused(getattr(value.func, "__self__",
                                                                      None)) and value.args:
            # self.other(x), other a fused method (Fused.__get__): its reads, self bound
            bound_self = value.args[0][0].value if value.args[0] else None
            prefix = _walk(root, chain.steps[:-1], chain)
            captures += _find(value.func.__self__, bound_self,
                              prefix if bound_self is not None else None,
                              _sub_path(self_path, chain, fn), seen, into)
            continue
        if isinstance(value, types.ModuleType):
            if _is_library(value):
                continue
            # a user module used whole (passed to a helper): its data attributes
            captures.append(Capture(chain, lambda s, get=get: _module_data(get(s)), fn))
            continue
        if is_code(value):
            if library:
                captures += _find(value, None, None, None, seen, into)
                continue
            if chain.root in ("global", "closure") and not isinstance(value, types.MethodType) \
                    and (chain.steps or chain.root == "closure" or chain.name in fn.__globals__):
                # (not builtins: len, range)
                into.code_refs.append((fn.__globals__, chain.name, value) if chain.root == "global"
                                      and not chain.steps else (_Lookup(get), "", value))
            if isinstance(value, types.MethodType) and chain.steps:
                # a method of an object the function reads: analysed with that object bound
                prefix = _walk(root, chain.steps[:-1], chain)
                if isinstance(value.__func__, types.FunctionType):
                    captures += _find(value.__func__, value.__self__, prefix,
                                      _sub_path(self_path, chain, fn), seen, into)
            elif not isinstance(value, types.MethodType):
                captures += _find(value, None, None, None, seen, into)
            continue
        captures.append(Capture(chain, get, fn, self_path if chain.root == "self" else None))
    if library:
        return captures
    defaults = fn.__defaults__ or ()
    for i, default in enumerate(defaults):
        if _mutable(default):
            name = code.co_varnames[code.co_argcount - len(defaults) + i]
            captures.append(Capture(Chain("default", name, ()), lambda s, v=default: v, fn))
    for name, default in (fn.__kwdefaults__ or {}).items():
        if _mutable(default):
            captures.append(Capture(Chain("default", name, ()), lambda s, v=default: v, fn))
    return captures


def _sub_path(self_path: Any, chain: Chain, fn: Any) -> Any:
    """Where the self of a method reached through ``chain`` (in ``fn``) is."""
    if chain.root in ("global", "closure"):  # conf.method(): from the variable conf
        return (id(fn), chain.root, chain.name), chain.steps[:-1]
    if chain.root != "self" or self_path is None:
        return None
    return self_path[0], self_path[1] + chain.steps[:-1]


def _mutable(value: Any) -> bool:
    return not is_code(value) and not isinstance(value, (bool, int, float, complex, str, bytes,
                                                          np.generic, tuple, type(None)))


# -- guard values ------------------------------------------------------------------------------------


class Implicit(StaticKey):
    """A guard's stand-in for an array read fresh on each call: its position among the implicit
    inputs (its dtype, shape and layout join the key as an argument's would)."""


class Reads(list):
    """The arrays a call reads fresh (its implicit inputs), and for small NumPy arrays, which
    are keyed by content: ``args``, the call's NumPy array arguments (a small array sharing
    memory with one is read fresh instead: a write through the argument must be seen by a
    later read of it, compile/overlap.py), and ``small``, those keyed by content (a fast
    path checks them against its arguments: fusejit.frontend.guard_check.overlaps)."""

    def __init__(self, args: tuple[np.ndarray, ...] = ()) -> None:
        super().__init__()
        self.args = args
        self.small: list[np.ndarray] = []


def guard_key(value: Any, implicit: Reads, chain: Chain, depth: int = 0,
              count: list[int] | None = None) -> Any:
    """A hashable stand-in for a captured value, equal exactly when a trace would be equal;
    arrays read fresh on every call are appended to ``implicit``."""
    t = type(value)
    if t is float or t is int or t is bool or t is str or value is None:
        if count is not None:
            _tick(count, depth, chain)
        return static_key(value)
    if isinstance(value, np.ndarray) and not dt.is_masked(value):
        if value.size <= SMALL_ARRAY and not any(np.may_share_memory(value, a)
                                                 for a in implicit.args):
            implicit.small.append(value)
            return StaticKey(np.ndarray, (value.shape, value.dtype.str, value.tobytes()))
        return _implicit(value, implicit)
    if isinstance(value, cla.Array):
        return _implicit(value, implicit)
    if isinstance(value, (bytes, complex, np.generic, _Missing)):
        return static_key(value)
    if is_code(value):
        return StaticKey(t, Identity(value))
    count = [0] if count is None else count
    _tick(count, depth, chain)
    if isinstance(value, (tuple, list)):
        return StaticKey(t, tuple(guard_key(v, implicit, chain, depth + 1, count)
                                  for v in value))
    if isinstance(value, dict):
        return StaticKey(t, tuple((static_key(k), guard_key(v, implicit, chain, depth + 1, count))
                                  for k, v in value.items()))
    fields = _fields(value)
    if fields is not None:
        return StaticKey(t, tuple((k, guard_key(v, implicit, chain, depth + 1, count))
                                  for k, v in fields))
    try:  # immutable values without instance state: np.dtype, slice, range, frozenset
        return static_key(value)
    except TypeError:
        raise CapturedStateError(
            f"the fused function reads {chain.describe()} (a {t.__name__}) from outside its "
            "arguments; fusejit cannot tell when it changes. Pass the values it uses as "
            "arguments instead") from None


def _tick(count: list[int], depth: int, chain: Chain) -> None:
    count[0] += 1
    if depth > MAX_DEPTH or count[0] > _MAX_LEAVES:
        raise CapturedStateError(
            f"the fused function reads {chain.describe()} from outside its arguments, and it is "
            f"too large or too deep to guard (over {_MAX_LEAVES} items or {MAX_DEPTH} levels); "
            "pass the values it uses as arguments instead")


def _fields(value: Any) -> list[tuple[str, Any]] | None:
    """An object's state: its instance dict and slots (None: state fusejit cannot see)."""
    fields = list(vars(value).items()) if hasattr(value, "__dict__") else []
    slots = [s for c in type(value).__mro__ for s in getattr(c, "__slots__", ())]
    if not hasattr(value, "__dict__") and not slots:
        return None
    fields += [(s, getattr(value, s, None)) for s in slots if s not in ("__dict__",
                                                                         "__weakref__")]
    return fields


def _implicit(value: Any, implicit: list[Any]) -> StaticKey:
    for j, seen in enumerate(implicit):  # one array read through two chains: one input
        if seen is value:
            return Implicit(type(value), j)
    implicit.append(value)
    return Implicit(type(value), len(implicit) - 1)


def guard_values(captures: list[Capture], self_obj: Any, args: Any = ()
                 ) -> tuple[tuple[Any, ...], list[Any]]:
    """This call's guard values, and the arrays it reads fresh (its implicit inputs);
    ``args``: the call's arguments."""
    implicit = Reads(tuple(a for a in args if type(a) is np.ndarray))
    keys = tuple(guard_key(c.get(self_obj), implicit, c.chain) for c in captures
                 if self_obj is not None or not needs_self(c))
    return keys, list(implicit)


def guard_names(captures: list[Capture], self_obj: Any) -> tuple[str, ...]:
    """What each of ``guard_values``' values reads (``cfg.alpha``), for the recompile log."""
    return tuple(c.chain.describe() for c in captures if self_obj is not None or
                 not needs_self(c))


def needs_self(capture: Capture) -> bool:
    """Is it read through the fused method's self (not through a global's method)?"""
    return capture.chain.root == "self" and (capture.self_path is None or
                                             capture.self_path[0] is None)


def outside_values(captures: Captures | None, self_obj: Any) -> list[Any]:
    """Everything the function reaches from outside its arguments, as it is now: each
    capture's value, what it writes, and the bound ``self``."""
    if not captures:
        return [] if self_obj is None else [self_obj]
    found = [c.get(self_obj) for c in (*captures, *captures.written)
             if self_obj is not None or not needs_self(c)]
    return found if self_obj is None else [self_obj, *found]
