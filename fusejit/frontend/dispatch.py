"""The tracer's dispatch tables: which implementation traces a NumPy call on a traced value.

``TensorProxy`` (``frontend.trace``) answers NumPy's protocols by looking its calls up here:
``__array_function__`` in ``FUNCTIONS``, ``__array_ufunc__`` in ``UFUNC_METHODS`` by the ufunc
method's name, ``x.sum()`` in ``METHODS``, and the few parts of its own syntax that need NumPy's
functions in ``HOOKS``. The tables start empty: the modules of ``frontend.numpy`` register their
implementations when imported (``fusejit/__init__.py`` imports that package before any trace),
as JAX registers each primitive's rules, so the tracer never imports what it dispatches to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fusejit.errors import UnsupportedOperationError

Impl = Callable[..., Any]

#: NumPy function (``np.sum``, ``np.linalg.norm``) -> its traced implementation
FUNCTIONS: dict[Callable[..., Any], Impl] = {}
#: ndarray method name (``"sum"``) -> implementation taking the proxy first
METHODS: dict[str, Impl] = {}
#: ufunc method name (``"__call__"``, ``"reduce"``, ``"accumulate"``, ``"outer"``) ->
#: implementation of ``(ufunc, inputs, kwargs)``
UFUNC_METHODS: dict[str, Impl] = {}
#: generalized ufuncs (``np.matmul``) -> implementation of ``(*inputs, out=, dtype=, casting=)``,
#: which ``frontend.ufuncs.apply_ufunc`` hands them to
GUFUNCS: dict[np.ufunc, Impl] = {}
#: the proxy's own syntax that NumPy's functions implement, by name: ``"gather"`` for
#: ``x[key]`` with an integer array in the key, ``"set_real"`` / ``"set_imag"`` for
#: ``x.real = v`` / ``x.imag = v``; ``"out"``: an ``out=`` as the implementations take it (a
#: NumPy array the function made itself becomes its traced value: frontend/numpy/local.py)
HOOKS: dict[str, Impl] = {}


def implements(*funcs: Callable[..., Any], method: str | None = None) -> Callable[[Impl], Impl]:
    """Register the decorated function for the NumPy functions ``funcs`` and, if given, as the
    ndarray method ``method``."""
    def register(impl: Impl) -> Impl:
        for f in funcs:
            FUNCTIONS[f] = impl
        if method:
            METHODS[method] = impl
        return impl
    return register


def array_function(func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """``__array_function__``: the registered implementation of ``func``, or an
    ``UnsupportedOperationError`` naming the function as the user called it."""
    impl = FUNCTIONS.get(func)
    if kwargs.get("out") is not None and "out" in HOOKS:
        kwargs = {**kwargs, "out": HOOKS["out"](kwargs["out"])}
    if impl is None:
        name = getattr(func, "__name__", repr(func))
        module = getattr(func, "__module__", "numpy") or "numpy"
        prefix = "np." + ("linalg." if "linalg" in module else "fft." if "fft" in module else "")
        raise UnsupportedOperationError(
            f"{prefix}{name} is not supported inside @fuse (fusejit fuses elementwise work, "
            "reductions and basic indexing); call it outside the fused function")
    return impl(*args, **kwargs)


def ufunc_method(ufunc: np.ufunc, method: str, inputs: Any, kwargs: dict[str, Any]) -> Any:
    """``__array_ufunc__``: the registered implementation of ``ufunc.method``."""
    impl = UFUNC_METHODS.get(method)
    if impl is None:
        raise unsupported_ufunc_method(ufunc, method)
    if kwargs.get("out") is not None and "out" in HOOKS:
        kwargs = {**kwargs, "out": HOOKS["out"](kwargs["out"])}
    return impl(ufunc, inputs, kwargs)


def unsupported_ufunc_method(ufunc: np.ufunc, method: str) -> UnsupportedOperationError:
    """The error for a ufunc method not traced (for this ufunc): implementations of a method
    raise it for the ufuncs they do not cover, so every refusal reads alike, saying what the
    method is where that tells why (``at``: a scatter) and what to write instead."""
    name = f"np.{ufunc.__name__}.{method}"
    if method == "at":
        instead = " Call it outside the fused function"
        if ufunc is np.add:  # (a scatter-add over few positions is a reduction)
            instead += ("; inside, np.add.at(x, idx, v) is the reduction x += np.where(idx[:, "
                        "None] == np.arange(x.shape[0]), v[:, None], 0).sum(axis=0)")
        return UnsupportedOperationError(
            f"{name} is a scatter: an unbuffered in-place write at positions only known when "
            "it runs, each index applied in turn (repeated indices accumulate), which is not "
            f"supported inside @fuse.{instead}")
    if method == "reduceat":
        return UnsupportedOperationError(
            f"{name} (reductions over segments whose bounds are data) is not supported inside "
            "@fuse; call it outside the fused function")
    return UnsupportedOperationError(f"{name} is not supported inside @fuse")
