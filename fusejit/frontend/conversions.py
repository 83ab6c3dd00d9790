"""``np.asarray`` / ``np.asanyarray`` / ``np.array`` of a traced value inside a fused function.

NumPy converts through ``__array__``, which must return a real array, so a traced value could
only refuse (``TracerConversionError``). While any thread traces, these three names in NumPy's
namespace are wrappers (installed and put back with np.random's guard: ``random_guard``'s
``while_tracing``) that answer for a traced value of the tracing thread (``converted``) and
call the original for anything else. A name bound before the trace (``from numpy import
asarray``) keeps the original. Imported by ``frontend.numpy`` (with the rest of the NumPy
surface).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from fusejit.frontend import random_guard
from fusejit.frontend.trace import TensorProxy, current_tracer, is_numpy_scalar, reshape

NAMES = ("asarray", "asanyarray", "array")
_saved: dict[str, Any] = {}


def converted(name: str, args: tuple, kwargs: dict) -> TensorProxy | None:
    """``np.<name>(*args, **kwargs)`` of a traced value while this thread traces: the value
    itself where NumPy returns its argument, a new value where NumPy makes one (another dtype;
    ``np.array``'s default ``copy=True``, so an in-place write to it leaves the original alone;
    a scalar, which becomes a 0-d array); None for anything else, which NumPy converts."""
    x = args[0]
    if not isinstance(x, TensorProxy) or current_tracer() is None:
        return None
    dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
    copy = kwargs.get("copy", name == "array")
    ndmin = kwargs.get("ndmin", 0)
    strong = x._weak is None and not is_numpy_scalar(x)
    if dtype is not None and np.dtype(dtype) != x.dtype:
        out = x.astype(dtype)
    elif copy or not strong:
        out = TensorProxy(x.node)
        out._array0d = True
    else:
        out = x
    if ndmin > out.ndim:
        out = TensorProxy(reshape(out.node, (1,) * (ndmin - out.ndim) + out.shape))
    return out


def _wrapper(name: str, original: Any) -> Any:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if args:
            result = converted(name, args, kwargs)
            if result is not None:
                return result
        return original(*args, **kwargs)
    return wrapper


def _install() -> None:
    space = vars(np)
    for name in NAMES:
        _saved[name] = space[name]
        space[name] = _wrapper(name, space[name])


def _uninstall() -> None:
    space = vars(np)
    for name, original in _saved.items():
        if getattr(space.get(name), "__wrapped__", None) is original:  # (unless replaced)
            space[name] = original
    _saved.clear()


random_guard.while_tracing(_install, _uninstall)
