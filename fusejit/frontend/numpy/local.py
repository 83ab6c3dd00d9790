"""NumPy arrays a traced function makes itself and updates with in-place operators: values,
not outputs.

``count = np.zeros(n, np.int64)`` inside a fused function is a real NumPy array (NumPy makes
it: no traced value takes part), and ``count += mask`` asks NumPy to write a traced value into
it (``out=count``), which no concrete array can hold. Such an array is no output of the
function, only one of its values: an in-place operator on it (an augmented assignment, which
rebinds its target to what the operation returns) makes it stand for a traced value from then
on (registered as ``tracer.captured`` entries are, so wherever the trace meets the array again,
``to_operand`` gives that value), and the write goes into that value. The array itself is made
read-only, so a later NumPy write through another name for it fails loudly instead of being
lost.

Refused by name: ``out=`` into such an array from a call (``np.add(a, b, out=c)``: ``c``
keeps its name, and NumPy's later reads of it would not see the write), state from outside
the function's arguments (captured state, what it writes, ``self``: ``tracer.outside``), and
views.
"""

from __future__ import annotations

import dis
import sys
from typing import Any

import numpy as np

from fusejit.errors import UnsupportedOperationError
from fusejit.frontend.captured import is_code
from fusejit.frontend.dispatch import HOOKS
from fusejit.frontend.trace import TensorProxy, current_tracer, lift

_MAX_ITEMS = 10_000  # values walked to tell what the function reaches from outside
_MAX_DEPTH = 8

OUT_NOT_ARGUMENT = ("out= inside @fuse must be an argument of the fused function (or a view "
                    "of one), or an array the function makes itself (np.zeros(...))")


def outputs(out: Any) -> Any:
    """``out=`` (an array or a tuple of them, entries None) with each NumPy array the
    function made itself replaced by its traced value (``HOOKS["out"]``)."""
    if isinstance(out, tuple):
        return tuple(_value(o) if type(o) is np.ndarray else o for o in out)
    return _value(out) if type(out) is np.ndarray else out


def _value(target: np.ndarray) -> TensorProxy:
    tracer = current_tracer()
    if tracer is None:  # pragma: no cover - dispatch runs inside a trace
        raise UnsupportedOperationError(OUT_NOT_ARGUMENT)
    seen = tracer.captured.get(id(target))
    if seen is not None and seen[0] is target:  # written before, or read from outside
        if seen[1]._readonly or _in_place_operator():  # (read-only: refused by its write)
            return seen[1]
        raise _not_in_place()
    if tracer.outside is None or target.base is not None:
        raise UnsupportedOperationError(
            f"{OUT_NOT_ARGUMENT}; a view of a NumPy array is neither" if target.base is not None
            else OUT_NOT_ARGUMENT)
    if _reached(tracer.outside(), target):
        raise UnsupportedOperationError(
            f"{OUT_NOT_ARGUMENT}; this NumPy array is reached from outside the function's "
            "arguments (a global, a closure variable or an attribute): pass it as an argument "
            "to write into it")
    if not _in_place_operator():
        raise _not_in_place()
    if not target.flags.writeable:
        raise ValueError("output array is read-only")
    value = TensorProxy(lift(target).node)  # (its contents now, a value of the trace)
    value._array0d = True  # (an array even when 0-d: written in place, not a NumPy scalar)
    tracer.captured[id(target)] = (target, value)
    target.flags.writeable = False  # (its contents now live in ``value``)
    return value


def _not_in_place() -> UnsupportedOperationError:
    return UnsupportedOperationError(
        f"{OUT_NOT_ARGUMENT}, updated by an in-place operator (c += v): out= into an array "
        "the function made itself would leave NumPy's later reads of it without the write; "
        "write c = np.add(a, b) (a value), or c += ... instead")


_CACHE = dis.opmap["CACHE"]
_BINARY_OP = dis.opmap["BINARY_OP"]
# (dis._nb_ops: BINARY_OP's operators, as CPython 3.11+ numbers them; without it, none is
# known to be in place and such writes stay refused)
_IN_PLACE = frozenset(i for i, (_, symbol) in enumerate(getattr(dis, "_nb_ops", ()))
                      if symbol.endswith("="))


def _in_place_operator() -> bool:
    """Is the user's code (the first frame outside fusejit's frontend) running an augmented
    assignment (``c += v``: BINARY_OP with an in-place operator), which rebinds ``c``?"""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(
            "fusejit.frontend"):
        frame = frame.f_back
    if frame is None:
        return False
    code, at = frame.f_code.co_code, frame.f_lasti
    while at > 0 and code[at] == _CACHE:
        at -= 2
    return code[at] == _BINARY_OP and code[at + 1] in _IN_PLACE


def _reached(values: list[Any], target: np.ndarray) -> bool:
    """Is ``target`` (an array owning its memory) among ``values`` or inside them, or the
    memory of an array that is?"""
    seen: set[int] = set()
    todo = [(v, 0) for v in values]
    while todo and len(seen) < _MAX_ITEMS:
        value, depth = todo.pop()
        if id(value) in seen or depth > _MAX_DEPTH:
            continue
        seen.add(id(value))
        if isinstance(value, np.ndarray):
            while isinstance(value, np.ndarray):
                if value is target:
                    return True
                value = value.base
            continue
        if isinstance(value, (list, tuple, set, frozenset)):
            items: Any = value
        elif isinstance(value, dict):
            items = value.values()
        elif hasattr(value, "__dict__") and not is_code(value):  # (objects, not functions)
            items = vars(value).values()
        else:
            continue
        todo += [(v, depth + 1) for v in items]
    return bool(todo)  # (too much to walk: treated as reached, refused)


HOOKS["out"] = outputs
