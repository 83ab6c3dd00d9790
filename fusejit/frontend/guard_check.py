"""One generated check per fused function that tells, in well under a microsecond, that every
value it captured is still the one its last guard key was computed from.

``guard_values`` (fusejit.frontend.captured) walks every captured value and keys it by
content: exact, but ~1 µs per item, too slow to run on every call. Instead each time the
guard key is computed, the values it was computed from are snapshot into a straight-line
Python function, as torch.compile builds one guard function per frame::

    def check():
        try:
            return (((t1 := k0.get('HELPERS', k2)) is not None and (type(t1) is k3
                    and len(t1) == 2 and t1[0] is k4 and t1[1] is k6)) and ...)
        except Exception:
            return False

Sound because a check passes only where the guard key would come out the same: immutable
leaves (numbers, strings, bytes, None, NumPy scalars and dtypes, functions, classes, ufuncs,
enum members, tuples, frozensets and slices of those) are checked by identity, or ints,
strings, bytes and nonzero floats by exact type and ``==``, NumPy scalars by type, dtype
and bytes (equal values there have equal
keys: a value made again, ``scale = 2.0`` run again, passes); a mutable container or object
is checked by exact type, size, key order and each item in turn (so ``lst.append``,
``d[k] = v``, ``obj.a = 1`` fail it), and a small NumPy array (guarded by content) by
identity, shape, dtype and bytes. A failed check (a value changed, or a container made
again) sends the call through ``guard_values``, which finds the key (and the traces of an
equal value) and snapshots again. A captured array read
fresh (an implicit input) is checked by identity: the call passes it on as an argument, whose
layout the fast path checks as it checks the others'. Values this scheme cannot follow (a
module used whole, an object without instance state) make no check: such calls compute the
key each time.
"""

from __future__ import annotations

import enum
import math
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pyopencl.array as cla

from fusejit.frontend.captured import (
    SMALL_ARRAY,
    Capture,
    Captures,
    Reads,
    _fields,
    _Missing,
    guard_key,
    is_code,
    needs_self,
)

_ATOMS = (int, float, bool, complex, str, bytes, type(None), type(Ellipsis), np.generic,
          np.dtype, range, enum.Enum)


_UNSET = object()  # an empty slot, an unbound global


class _Unsupported(Exception):
    """A captured value the generated check cannot follow (the call takes the full path)."""


def frozen(value: Any, depth: int = 0) -> bool:
    """Is ``value`` immutable all the way down, so that its identity stands for its value?"""
    if depth > 8:
        return False
    if value is _UNSET or isinstance(value, _ATOMS) or \
            is_code(value) and not isinstance(value, types.ModuleType):
        return True
    if type(value) in (tuple, frozenset) or isinstance(value, tuple) and \
            type(value).__dict__.get("__slots__") == ():  # (a namedtuple)
        return all(frozen(v, depth + 1) for v in value)
    if type(value) is slice:
        return all(frozen(v, depth + 1) for v in (value.start, value.stop, value.step))
    return False


class _Writer:
    """Writes the condition of one check and collects the constants it names."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {}
        self.temps = 0

    def const(self, value: Any) -> str:
        name = f"k{len(self.names)}"
        self.names[name] = value
        return name

    def temp(self) -> str:
        self.temps += 1
        return f"t{self.temps}"

    def value(self, expr: str, value: Any, depth: int) -> str:
        """A condition that holds only while ``expr`` evaluates to a value that keys as
        ``value`` does (evaluated left to right: temporaries are bound before they are read)."""
        if depth > 8:
            raise _Unsupported
        kind, k, t = type(value), self.const(value), self.temp()
        if kind in (int, str, bytes) or kind is float and not math.isnan(value) and value != 0:
            # equal values of one exact type key alike (floats but for the zeros and NaN), so a
            # value made again (``scale = 2.0`` run again) still passes
            return f"(({t} := {expr}) is {k} or type({t}) is {self.const(kind)} and {t} == {k})"
        if isinstance(value, np.generic):  # (made anew by every read of an array's item)
            return (f"(({t} := {expr}) is {k} or type({t}) is {self.const(kind)} and "
                    f"{t}.dtype == {self.const(value.dtype)} and "
                    f"{t}.tobytes() == {self.const(value.tobytes())})")
        if kind is tuple and frozen(value):
            return f"(({t} := {expr}) is {k} or {self._items(t, value, depth)})"
        if frozen(value):
            return f"{expr} is {k}"
        if kind is cla.Array or kind is np.ndarray and value.size > SMALL_ARRAY:
            # read fresh (an implicit input): the fast path's launcher checks its layout
            return f"{expr} is {k}"
        if kind is np.ndarray:
            return (f"(({t} := {expr}) is {k} and {t}.shape == {self.const(value.shape)} and "
                    f"{t}.dtype == {self.const(value.dtype)} and "
                    f"{t}.tobytes() == {self.const(value.tobytes())})")
        if kind in (list, tuple):
            return f"(({t} := {expr}) is not None and {self._items(t, value, depth)})"
        if kind is dict:
            return f"(type({t} := {expr}) is dict and {self._mapping(t, value, depth)})"
        if is_code(value) or isinstance(value, (_Missing, np.ndarray)) or _fields(value) is None:
            raise _Unsupported  # (a module used whole, an array subclass, a foreign object)
        # an object guarded through its state: its exact type, then its instance dict and slots
        conds = [f"type({t} := {expr}) is {self.const(kind)}"]
        if hasattr(value, "__dict__"):
            d = self.temp()
            conds.append(f"({d} := {t}.__dict__) is not None and "
                         + self._mapping(d, vars(value), depth))
        slots = [s for c in kind.__mro__ for s in getattr(c, "__slots__", ())
                 if s not in ("__dict__", "__weakref__")]
        conds += [self.value(f"getattr({t}, {self.const(s)}, {self.const(_UNSET)})",
                             getattr(value, s, _UNSET), depth + 1) for s in slots]
        return "(" + " and ".join(conds) + ")"

    def _items(self, t: str, value: Any, depth: int) -> str:
        """``t`` (bound) is a list or tuple of the exact type, length and items of ``value``."""
        conds = [f"type({t}) is {self.const(type(value))}", f"len({t}) == {len(value)}"]
        conds += [self.value(f"{t}[{i}]", item, depth + 1) for i, item in enumerate(value)]
        return "(" + " and ".join(conds) + ")"

    def _mapping(self, t: str, value: dict, depth: int) -> str:
        """``t`` (a bound dict) has the keys of ``value`` in its order, and its items."""
        if any(type(k) is not str for k in value):
            raise _Unsupported  # (== tells 1 from True, 1.0 and -0.0 from 0.0 too little)
        conds = [f"tuple({t}) == {self.const(tuple(value))}"]
        conds += [self.value(f"{t}[{self.const(k)}]", item, depth + 1)
                  for k, item in value.items()]
        return "(" + " and ".join(conds) + ")"


def _read(w: _Writer, capture: Capture, self_obj: Any) -> str:
    """The expression that reads a capture's current value (as ``capture.get`` does)."""
    chain, fn = capture.chain, capture.owner
    steps = chain.steps
    if needs_self(capture) and capture.self_path is None:  # (its self found some other way)
        return f"{w.const(capture.get)}({w.const(self_obj)})"
    if needs_self(capture):  # (fuse(obj.method): its self is obj, for good)
        expr = w.const(self_obj)
        steps = capture.self_path[1] + steps  # (a method of self.sub: from obj to its self)
    elif chain.root == "global":
        scope = fn.__globals__
        if chain.name not in scope:
            raise _Unsupported  # (a builtin, or not bound yet)
        expr = f"{w.const(scope)}.get({w.const(chain.name)}, {w.const(_UNSET)})"
    elif chain.root == "closure":
        cell = fn.__closure__[fn.__code__.co_freevars.index(chain.name)]
        expr = f"{w.const(cell)}.cell_contents"
    else:  # (a global object's method's self, a default: read through the getter)
        return f"{w.const(capture.get)}(None)"
    for step in steps:
        if step.kind == "attr" and step.key.isidentifier() and not step.key.startswith("__"):
            expr += f".{step.key}"
        elif step.kind == "attr":
            expr = f"getattr({expr}, {w.const(step.key)})"
        else:
            expr += f"[{w.const(step.key)}]"
    return expr


def snapshot(captures: Captures, build: bool = True, self_obj: Any = None
             ) -> tuple[tuple[Any, ...], list[Any], Callable[[], bool] | None]:
    """(guard values, implicit inputs, check) for the captured values as they are now: the
    first two as ``guard_values`` gives them (``self_obj``: fuse(obj.method)'s obj, else
    None), and a check that holds while the values stay the ones these were computed from,
    the implicit inputs the same arrays (None: ``build`` is off, or no check can tell; every
    call computes the key)."""
    active = [c for c in captures if self_obj is not None or not needs_self(c)]
    values = [c.get(self_obj) for c in active]
    implicit = Reads()
    keys = tuple(guard_key(v, implicit, c.chain) for c, v in zip(active, values))
    if not build:
        return keys, implicit, None
    w = _Writer()
    try:
        conds = [w.value(_read(w, c, self_obj), v, 0) for c, v in zip(active, values)]
    except _Unsupported:
        return keys, implicit, None
    body = " and\n            ".join(conds) or "True"
    source = f"def check():\n    try:\n        return bool({body})\n" \
             "    except Exception:\n        return False\n"
    scope = dict(w.names)
    exec(compile(source, "<fusejit guard check>", "exec"), scope)  # noqa: S102 - our own source
    check = scope["check"]
    # (a capture read other than through its chain, a module used whole: its data, fails)
    return keys, implicit, check if check() else None


# -- the fast paths of a Fused (fusejit/api.py) ---------------------------------------------------


def clear(fused: Any) -> None:
    """Forget every fast-path entry of ``fused`` and its check."""
    fused._by_guards.clear()
    fused._check, fused._implicit, fused._unchecked, fused._small = None, (), 0, ()
    select(fused, ())


def select(fused: Any, guards: tuple) -> None:
    """Point ``fused``'s fast paths at the signatures compiled for these guard values."""
    fused._fast, fused._guarded = fused._by_guards.setdefault(guards, ({}, {}))
    fused._mono = None


def recheck(fused: Any) -> None:
    """``fused``'s captured values changed (or it has no check yet): select the fast paths of
    their guard values and check for those from now on."""
    self_obj = fused._bound[0].value if fused._bound else None
    guards, implicit, fused._check = snapshot(fused._guards, fused._unchecked < 3, self_obj)
    fused._unchecked += fused._check is None  # (no check can tell: stop writing them)
    fused._implicit, fused._small = tuple(implicit), tuple(implicit.small)
    if fused._fast is not fused._by_guards.get(guards, (None,))[0]:
        select(fused, guards)


def overlaps(small: tuple[np.ndarray, ...], args: tuple) -> bool:
    """Does a NumPy argument share memory with a small captured array the fast paths' traces
    hold by content (``Reads.small``)? Then the call takes the full path, which reads that
    array fresh, so that a write through the argument is seen by a later read of it."""
    if np.ndarray not in map(type, args):  # (device arrays, scalars: the common call)
        return False
    return any(type(a) is np.ndarray and np.may_share_memory(a, s) for a in args for s in small)
