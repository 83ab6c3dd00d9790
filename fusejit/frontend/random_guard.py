"""Refuse ``np.random`` while a function is traced.

Inside a fused function ``np.random.random(x.shape)`` or ``rng.normal(size=n)`` runs once, at
trace time, and its array would be baked into the kernel as a constant: the same "random"
numbers on every call. While any thread traces, the callables of ``numpy.random`` (the module
functions and the public methods of ``Generator``, ``RandomState`` and the bit generators) are
replaced by thin wrappers that raise ``RandomStateError`` when *their own* thread (context) is
tracing and otherwise call the original; when the last trace ends the originals are put back.
Threads that are not tracing are unaffected but for the wrapper's call while another traces.

Why wrappers and not a profile hook: NumPy's random functions are Cython functions, which
``sys.setprofile`` does not report. Their classes are immutable extension types, so a method
is replaced in the type's own dict (reached through ``gc.get_referents`` of its mappingproxy)
and the type's method cache is invalidated with ``PyType_Modified``: a CPython detail; where
``ctypes.pythonapi`` is missing only the module functions are guarded. A name bound before the
trace (``from numpy.random import rand``) keeps the original and is not caught.

NumPy imports ``numpy.random`` lazily (~20 ms), so a process that never uses it does not pay
for it at its first trace: until it is imported, a trace puts an import hook on
``sys.meta_path`` instead, which guards the module as soon as the traced function imports it
(``np.random.rand`` inside the trace), before the function gets to call anything in it.
"""

from __future__ import annotations

import functools
import gc
import importlib.abc
import importlib.machinery
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from fusejit.errors import RandomStateError

try:  # CPython: invalidate a type's method cache after its dict changes
    import ctypes

    _type_modified: Callable[[type], Any] | None = \
        lambda cls: ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))
except (ImportError, AttributeError):  # pragma: no cover - not CPython
    _type_modified = None

_CLASSES = ("Generator", "RandomState", "BitGenerator", "MT19937", "PCG64", "PCG64DXSM",
            "Philox", "SFC64")

_lock = threading.Lock()
_depth = 0  # traces in progress, all threads
_installed: list[tuple[dict, str, Any, Any]] = []  # (namespace, name, original, wrapper)
_wrappers: dict[tuple[int, str], Any] = {}  # (id(original), name) -> wrapper (built once)
_is_tracing: Callable[[], bool] = lambda: False
# other overrides that live while any thread traces, as np.random's guard does: (install,
# uninstall), called under the same lock (frontend/conversions.py: np.asarray of a traced value)
_hooks: list[tuple[Callable[[], None], Callable[[], None]]] = []


def while_tracing(install: Callable[[], None], uninstall: Callable[[], None]) -> None:
    """Call ``install`` when the first trace starts and ``uninstall`` when the last one ends."""
    _hooks.append((install, uninstall))


def _wrap(fn: Any, call: str, method: bool) -> Any:
    key = (id(fn), call)
    wrapper = _wrappers.get(key)
    if wrapper is not None and wrapper.__wrapped__ is fn:
        return wrapper
    if method:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _is_tracing():  # named by the instance's class: Philox.random_raw
                method_name = call.rpartition(".")[2]
                raise RandomStateError(f"np.random.{type(self).__name__}.{method_name}(...)")
            return fn(self, *args, **kwargs)
    else:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _is_tracing():
                raise RandomStateError(f"np.random.{call}(...)")
            return fn(*args, **kwargs)
    functools.update_wrapper(wrapper, fn)
    _wrappers[key] = wrapper
    return wrapper


_Target = tuple[dict, str, str, bool]  # (namespace, name, name in messages, is a method)
_targets: list[_Target] | None = None
_classes: list[type] = []


def _find_targets(random: types.ModuleType) -> list[_Target]:
    """What to guard, found once: np.random's public functions, and the public methods in the
    own dicts of its generator classes (reached through their mappingproxy)."""
    spaces: list[tuple[dict, str, bool]] = [(vars(random), "", False)]
    if _type_modified is not None:
        for name in _CLASSES:
            cls = getattr(random, name, None)
            real = gc.get_referents(cls.__dict__) if isinstance(cls, type) else []
            if len(real) == 1 and isinstance(real[0], dict):
                spaces.append((real[0], name + ".", True))
                _classes.append(cls)
    targets = []
    for space, prefix, method in spaces:
        for name, value in space.items():
            if name.startswith("_") or isinstance(value, type) or not callable(value) or (
                    method and isinstance(value, (classmethod, staticmethod))):
                continue
            targets.append((space, name, prefix + name, method))
    return targets


def _install(random: types.ModuleType) -> None:
    global _targets
    if _targets is None:
        _targets = _find_targets(random)
    for space, name, call, method in _targets:
        value = space.get(name)
        if value is None:  # (removed since: nothing to guard)
            continue
        wrapper = _wrap(value, call, method)
        space[name] = wrapper
        _installed.append((space, name, value, wrapper))
    for cls in _classes:
        _type_modified(cls)


def _uninstall() -> None:
    if _HOOK in sys.meta_path:
        sys.meta_path.remove(_HOOK)
    for space, name, original, wrapper in reversed(_installed):
        if space.get(name) is wrapper:  # (unless someone replaced it meanwhile)
            space[name] = original
    _installed.clear()
    for cls in _classes:
        _type_modified(cls)


def enter(is_tracing: Callable[[], bool]) -> None:
    """A trace starts in this thread: guard np.random (if no other trace already did)."""
    global _depth, _is_tracing
    with _lock:
        _is_tracing = is_tracing
        if _depth == 0:
            random = vars(np).get("random")  # (an attribute of numpy once fully imported)
            if isinstance(random, types.ModuleType):
                _install(random)
            elif _HOOK not in sys.meta_path:
                sys.meta_path.insert(0, _HOOK)
            for install, _ in _hooks:
                install()
        _depth += 1


def exit() -> None:
    """A trace ended: put np.random back when it was the last one."""
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0:
            _uninstall()
            for _, uninstall in _hooks:
                uninstall()


class _ImportHook(importlib.abc.MetaPathFinder):
    """On ``sys.meta_path`` while a trace runs before numpy.random was imported: finds
    numpy.random as the regular finders do, with a loader that guards it once executed."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "numpy.random":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _GuardingLoader(spec.loader)
        return spec


class _GuardingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        with _lock:  # (enter/exit never import under the lock: no deadlock with an import)
            if _HOOK in sys.meta_path:
                sys.meta_path.remove(_HOOK)
            if _depth > 0 and not _installed:
                _install(module)

    def __getattr__(self, name: str) -> Any:  # (get_resource_reader, is_package, ...)
        return getattr(self._loader, name)


_HOOK = _ImportHook()
