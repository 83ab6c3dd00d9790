"""Kernel objects without PyOpenCL's invoker, which a process's first call paid for.

``cl.Kernel(program, name)`` asks ``pyopencl.invoker.generate_enqueue_and_set_args`` for the
Python functions behind ``kernel(queue, ...)`` and ``kernel.set_args(...)``. Generating them
means a lookup in pytools' persistent dict: the first one in a process opens its SQLite
database under ``~/.cache/pytools`` and unpickles the generated module (most of the 0.7-0.95
ms ``executable`` stage of GELU's warm first call on the H200; on PoCL that stage went from
0.75 to 0.25 ms at best). fusejit never calls either function: its launchers bind with
``set_arg``/``_set_arg_buf`` and enqueue with ``cl.enqueue_nd_range_kernel``
(runtime/opencl/executable.py). So ``new_kernel`` makes the kernel with stand-ins that generate the
real invoker on their first use and install it on the kernel (``_set_enqueue_and_set_args``):
a kernel someone does call or ``set_args`` behaves exactly as PyOpenCL's own, it only pays
for its invoker then.

The stand-in is put in place only while ``cl.Kernel`` runs, under a lock, and always forwards
to the generator that was in place; a kernel another thread makes in that window gets the
deferred invoker too, which is equivalent. If PyOpenCL stops asking that module attribute,
nothing changes but the saving.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import pyopencl as cl

from fusejit.runtime.files import import_with_cache_fallback

# (its import opens pytools' SQLite cache in the user cache directory: on a full or read-only
# disk that raises, and then keeps it in a private temporary directory instead)
_invoker = import_with_cache_fallback("pyopencl.invoker", "pytools")
_GENERATOR = "generate_enqueue_and_set_args"
_lock = threading.Lock()


def _deferred(generate: Callable[..., tuple[Any, Any]], *args: Any, **kwargs: Any
              ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(enqueue, set_args) that call ``generate(*args, **kwargs)``'s on first use."""

    def real(kernel: cl.Kernel) -> tuple[Any, Any]:
        enqueue, set_args = generate(*args, **kwargs)
        install = getattr(kernel, "_set_enqueue_and_set_args", None)
        if install is not None:  # (later calls go straight to PyOpenCL's functions)
            install(enqueue, set_args)
        return enqueue, set_args

    def enqueue(self: cl.Kernel, *a: Any, **k: Any) -> Any:
        return real(self)[0](self, *a, **k)

    def set_args(self: cl.Kernel, *a: Any) -> Any:
        return real(self)[1](self, *a)

    return enqueue, set_args


def new_kernel(program: cl.Program, name: str) -> cl.Kernel:
    """``cl.Kernel(program, name)``, with its invoker generated only if it is ever used."""
    with _lock:
        # (the built _Program: given the Program wrapper, the constructor asks it for a
        # `_source` that one built from a binary lacks, and its __getattr__ then tries to
        # create a kernel of that name)
        raw = program._get_prg() if hasattr(type(program), "_get_prg") else program
        generate = getattr(_invoker, _GENERATOR, None)
        if generate is None:
            return cl.Kernel(raw, name)
        setattr(_invoker, _GENERATOR, functools.partial(_deferred, generate))
        try:
            return cl.Kernel(raw, name)
        finally:
            setattr(_invoker, _GENERATOR, generate)
