"""Pickling fused functions: the Python function and options travel, compiled kernels do not.

The function is pickled with cloudpickle when it is installed (by value for lambdas and
functions defined in ``__main__`` or a test), else with pickle (by reference). Unpickling the
same bytes again in one process returns the same :class:`Fused`, so a dask worker that receives
the function with every task keeps one compile cache instead of rebuilding it per task.

:class:`Fused` is fusejit.api's, a layer above this one: api registers it here
(``register_fused``) when it is imported, which unpickling does too (it imports this module,
and so the ``fusejit`` package, which imports api).
"""

from __future__ import annotations

import hashlib
import pickle
import threading
import weakref
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
_blobs: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()
_restored: dict[bytes, Any] = {}  # digest -> Fused (one per distinct function per process)
_fused_type: list[Callable[..., Any]] = []  # fusejit.api.Fused, once api is imported


def register_fused(fused_type: Callable[..., Any]) -> None:
    """Make ``restore_fused`` build instances of ``fused_type`` (fusejit.api.Fused)."""
    _fused_type[:] = [fused_type]


def _dumps(obj: Any) -> bytes:
    try:
        import cloudpickle
    except ImportError:  # pragma: no cover - cloudpickle comes with dask
        return pickle.dumps(obj)
    return cloudpickle.dumps(obj)


def reduce_fused(fused: Any) -> tuple:
    with _lock:
        blob = _blobs.get(fused)
    if blob is None:
        blob = _dumps((fused._fn, sorted(fused._static_nums), sorted(fused._static_names),
                       fused.autotune, fused._validate, fused.matmul_precision))
        with _lock:
            _blobs[fused] = blob
            _restored.setdefault(hashlib.sha256(blob).digest(), fused)
    return restore_fused, (blob,)


def restore_fused(blob: bytes) -> Any:
    digest = hashlib.sha256(blob).digest()
    with _lock:
        fused = _restored.get(digest)
    if fused is None:
        fn, nums, names, autotune, validate, precision = pickle.loads(blob)
        fused = _fused_type[0](fn, nums, names, autotune, validate,
                               matmul_precision=precision)
        with _lock:
            fused = _restored.setdefault(digest, fused)
    return fused
