"""What ``fuse`` runs for a bound method, a callable object or a partial, so that what they
bind is captured state (fusejit.frontend.captured), never values baked in at the first trace.
"""

from __future__ import annotations

import functools
import types
from typing import Any

from fusejit.frontend.captured import fused_code, is_code, is_fused

NO_SELF = object()  # ``bind_parts``' answer for a callable without a bound ``self``


def bind_parts(fn: Any) -> tuple[Any, Any]:
    """(the function whose code runs, its bound ``self`` or NO_SELF) for ``fuse(fn)``.

    ``fuse(obj.method)`` and ``fuse(obj)`` (an object with ``__call__``) run the method with
    ``obj`` bound, which the caller passes as a method's ``self`` is passed (``StaticSelf``), so
    what it reads from ``obj`` is captured state, found and guarded as for ``@fuse`` on a method.
    ``fuse(functools.partial(g, *args, **kw))`` runs a function whose own globals hold the
    partial's arguments, so they are captured state like any global (guarded by value, large
    arrays read fresh on every call), never values baked in at the first trace."""
    if isinstance(fn, functools.partial) and is_fused(getattr(fn.func, "__self__", None)) \
            and len(fn.args) == 1 and len(fn.args[0]) == 1:  # obj.f, f an @fuse method
        return fused_code(fn.func.__self__), fn.args[0][0].value
    args: tuple = ()
    keywords: dict[str, Any] = {}
    while isinstance(fn, functools.partial):
        args, keywords = fn.args + args, {**fn.keywords, **keywords}
        fn = fn.func
    self_obj = NO_SELF
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        self_obj, fn = fn.__self__, fn.__func__
    elif not is_code(fn) and callable(fn):
        call = type(fn).__call__
        call = fused_code(call) if is_fused(call) else call  # (an @fuse __call__)
        if isinstance(call, types.FunctionType):
            self_obj, fn = fn, call
    if not args and not keywords:
        return fn, self_obj
    # (globals of its own, not a closure: they cannot be rebound, and reading one is a dict
    # lookup where a cell would take a getter call on every guarded call; not fusejit's module:
    # they are the user's state. The keywords as pairs: a tuple of immutable values is checked
    # by identity alone, fusejit.frontend.guard_check)
    template = _partial_call if self_obj is NO_SELF else _partial_method
    scope = {"func": fn, "args": args, "keywords": tuple(keywords.items()),
             "__builtins__": __builtins__}
    return types.FunctionType(template.__code__, scope, "partial_call"), self_obj


# (func, args and keywords: the globals bind_parts gives them)
def _partial_call(*given: Any, **kw: Any) -> Any:
    return func(*args, *given, **{**dict(keywords), **kw})  # noqa: F821


def _partial_method(self: Any, *given: Any, **kw: Any) -> Any:  # (self read whole, guarded)
    return func(self, *args, *given, **{**dict(keywords), **kw})  # noqa: F821
