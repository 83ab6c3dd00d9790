"""Cache keys for values a trace depends on: static arguments and captured (guarded) values.

Python's ``==`` is the wrong equality for a cache key: ``-0.0 == 0.0`` (so ``x / s`` would
reuse the kernel built for the other zero) and ``nan != nan`` (so a NaN never hits the cache).
Floats are keyed by their type and bit pattern instead, at any depth inside tuples, lists and
dicts, for Python and NumPy scalars alike; containers keep their order (a trace may iterate
them) and their type (a list traces like a tuple but is a different static value).
Objects that have no value to compare (a function a trace called) are keyed by ``Identity``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

_pack_double = struct.Struct("<d").pack


@dataclass(frozen=True, slots=True)
class StaticKey:
    """One value as a key: its exact type and a hashable payload equal exactly when two values
    trace alike (the bits of a float, the keys of a container's items, else the value)."""

    type: type
    payload: Any

    def __repr__(self) -> str:
        """The value as the user wrote it (recompile messages name it): ``2``, ``-0.0``."""
        t, v = self.type, self.payload
        if t is float:
            return repr(struct.unpack("<d", v)[0])
        if t in (tuple, list):
            inner = ", ".join(map(repr, v)) + ("," if t is tuple and len(v) == 1 else "")
            return f"({inner})" if t is tuple else f"[{inner}]"
        if t is dict:
            return "{" + ", ".join(f"{k!r}: {x!r}" for k, x in v) + "}"
        if t is slice:
            return "slice({!r}, {!r}, {!r})".format(*v)
        if isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], bytes):  # NumPy scalar
            return repr(np.frombuffer(v[1], np.dtype(v[0]))[0])
        return repr(v)


def static_key(value: Any) -> StaticKey:
    """The key of a static argument. Raises TypeError for a value that cannot be keyed."""
    t = type(value)
    if t is float:
        return StaticKey(float, _pack_double(value))
    if t is complex:
        return StaticKey(complex, _pack_double(value.real) + _pack_double(value.imag))
    if isinstance(value, np.generic):
        # the dtype, not only the type: np.float64 and a big-endian float64 scalar differ
        return StaticKey(t, (value.dtype.str, value.tobytes()))
    if t is tuple or t is list:
        return StaticKey(t, tuple(static_key(v) for v in value))
    if t is dict:
        return StaticKey(dict, tuple((static_key(k), static_key(v)) for k, v in value.items()))
    if t is slice:  # (unhashable before Python 3.12; its parts keyed as values are)
        return StaticKey(slice, (static_key(value.start), static_key(value.stop),
                                 static_key(value.step)))
    if t is frozenset:
        return StaticKey(frozenset, frozenset(static_key(v) for v in value))
    if isinstance(value, (float, complex, tuple, list, dict)):  # subclasses: same rules, own type
        base = next(b for b in (float, complex, tuple, list, dict) if isinstance(value, b))
        return StaticKey(t, static_key(base(value)))
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"static argument {value!r} is not hashable; static arguments are part "
                        "of the cache key") from None
    return StaticKey(t, value)


class Identity:
    """Keys a cache entry on an object's identity and keeps the object alive (so its id is
    never reused by another object while the entry exists)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and other.obj is self.obj
