"""The API boundary for fusejit's own bugs: no internal AssertionError (or any error raised by
the compiler's back half) reaches a user as itself; it becomes an ``InternalError`` that says it
is a fusejit bug, names the function and chains the original."""

from __future__ import annotations

import functools
import os
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from fusejit.errors import FusejitError, InternalError

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
# modules that only ever run fusejit's own code (after tracing): whatever they raise is a bug
_BACKEND = ("passes", "codegen/source.py", "codegen/lowering.py", "codegen/blocks.py", "codegen/reduce.py",
            "codegen/render.py", "codegen/kernels.py", "targets")

F = TypeVar("F", bound=Callable[..., Any])


def is_internal(exc: BaseException) -> bool:
    """An error that can only be a fusejit bug: an AssertionError raised by fusejit's code (not
    by the user's function), or anything raised inside the passes and code generation."""
    if isinstance(exc, FusejitError) or not isinstance(exc, Exception):
        return False
    ours = [os.path.relpath(f.filename, _PACKAGE) for f in traceback.extract_tb(exc.__traceback__)
            if os.path.abspath(f.filename).startswith(_PACKAGE + os.sep)]
    if not ours:
        return False
    innermost = traceback.extract_tb(exc.__traceback__)[-1]
    raised_by_us = os.path.abspath(innermost.filename).startswith(_PACKAGE + os.sep)
    if isinstance(exc, AssertionError) and raised_by_us:
        return True
    return ours[-1].split(os.sep)[0] in _BACKEND


def internal_errors(method: F) -> F:
    """Wrap a ``Fused`` method so fusejit bugs surface as ``InternalError``."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except InternalError as e:  # raised as one (ScheduleError): add the function's name
            if getattr(e, "function", None) is not None:
                raise
            raise _named(type(e), self, e) from e
        except Exception as e:
            if not is_internal(e):
                raise
            raise _named(InternalError, self, e) from e
    return wrapper  # type: ignore[return-value]


def _named(cls: type[InternalError], fused: Any, e: Exception) -> InternalError:
    name = getattr(fused._fn, "__qualname__", None) or repr(fused._fn)
    err = cls(f"fusejit failed to compile {name!s}: {type(e).__name__}: {e}. This is a "
              "fusejit bug, not a problem with your code; please report it with this "
              "message and the function.")
    err.function = name
    return err
