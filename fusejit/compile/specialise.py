"""Python ints that shape the program are specialised on, as torch.compile does.

A Python int (or bool) argument is a dynamic scalar: a new value reuses the kernel. When the
trace needs one as a Python value (``np.zeros(n)``, ``axis=n``, ``x[:n]``, ``range(n)``,
``if flag``), tracing it as a scalar fails; the tracer notes which arguments were asked for
their value (TensorProxy._concrete) and trace_call raises ``NeedsValue``. ``Fused`` then makes
those arguments static from now on (a constant of the trace, keyed by value: a new value
compiles again), logs why on ``fusejit.recompiles`` and calls again. Ints used only as
operands (``x * n``) stay runtime values. Where the failure cannot be pinned on an argument
(a library refused a traced int without asking its value), every Python int argument is
tried static once; if that trace fails too, its error is raised and nothing is learned.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from fusejit.compile.recompiles import log
from fusejit.frontend.guard_check import clear, frozen


class NeedsValue(Exception):
    """The trace needed Python int (or bool) arguments as values: ``sources``, their positions
    among the call's flattened arguments (None: not known; ``ints``, all such arguments, may
    be the cause), ``cause``: the error the trace raised."""

    def __init__(self, sources: frozenset[int] | None, ints: frozenset[int],
                 cause: Exception) -> None:
        super().__init__(f"Python int arguments needed as values: {cause}")
        self.sources = sources
        self.ints = ints
        self.cause = cause


def learn(need: NeedsValue, key: Any, arg_names: list[str], n_bound: int, name: str
          ) -> tuple[set[int], set[str]]:
    """(positions, names) of the arguments to make static for ``need`` (positions as the
    caller counts them: after ``n_bound`` bound arguments, fuse(obj.method)'s self); logs why."""
    n_pos = len(key.specs) - len(key.kwnames) - key.implicit
    positions: set[int] = set()
    names: set[str] = set()
    for flat_i in sorted(need.sources or need.ints):
        i = flat_i - n_bound
        arg = arg_names[i] if 0 <= i < min(n_pos - n_bound, len(arg_names)) else \
            key.kwnames[flat_i - n_pos] if flat_i >= n_pos else None
        if flat_i < n_pos:
            positions.add(i)
        if arg is not None:
            names.add(arg)
            if arg in arg_names:
                positions.add(arg_names.index(arg))
    labels = ", ".join(f"arg {i}" + (f" ({arg_names[i]!r})" if i < len(arg_names) and
                                     arg_names[i] else "") for i in sorted(positions)
                       ) or ", ".join(repr(n) for n in sorted(names))
    how = "is" if need.sources else "may be"
    log.info("%s: specialising on the value of %s: it %s used as a Python value (%s: %s); a "
             "new value compiles again, as with static_argnums", name, labels, how,
             type(need.cause).__name__, need.cause)
    return positions, names


def again(fused: Any, need: NeedsValue, key: Any, call: Callable[[], Any]) -> Any:
    """Make the arguments ``need`` names static in ``fused`` (a Fused) and ``call`` again;
    a guess (``need.sources`` None) that fails too is forgotten."""
    saved = fused._static_nums, fused._static_names
    nums, names = learn(need, key, fused._arg_names, len(fused._bound),
                        getattr(fused._fn, "__qualname__", "function"))
    fused._static_nums, fused._static_names = saved[0] | nums, saved[1] | names
    fused._fast_static = fast_static(fused._static_nums, len(fused._bound))
    clear(fused)  # (fast-path keys hold the argument's type, not its value)
    try:
        return call()
    except Exception:
        if need.sources is None:
            fused._static_nums, fused._static_names = saved
            fused._fast_static = fast_static(fused._static_nums, len(fused._bound))
        raise


def fast_static(nums: frozenset[int], n_bound: int) -> frozenset[int]:
    """The static positions among a fast-path call's arguments: those of ``nums`` after
    fuse(obj.method)'s ``obj`` (static, keyed as itself), when there is one."""
    return frozenset({0} | {i + 1 for i in nums}) if n_bound else nums


def same_statics(args: tuple, static: frozenset[int], n_bound: int) -> dict[int, Any]:
    """The static arguments of a fast-path call that a guarded launcher may check by identity
    (``Executable.guarded``'s ``same``): fuse(obj.method)'s obj (keyed by identity, and the
    same object for good) and immutable values (their identity stands for their value)."""
    return {i: args[i] for i in static if i < len(args) and (i < n_bound or frozen(args[i]))}


def static_args(fn: Callable[..., Any], static_argnums: Sequence[int] | int,
                static_argnames: Sequence[str] | str
                ) -> tuple[frozenset[int], frozenset[str], list[str]]:
    """@fuse's static arguments: (positions, names, the parameter name of each position)."""
    params = inspect.signature(fn).parameters.values()
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    nums = {int(i) if i >= 0 else len(names) + int(i) for i in
            ((static_argnums,) if isinstance(static_argnums, int) else static_argnums)}
    argnames = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames)
    nums |= {names.index(n) for n in argnames if n in names}
    argnames |= {names[i] for i in nums if i < len(names)}
    return frozenset(nums), frozenset(argnames), names
