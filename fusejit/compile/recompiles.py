"""Why a call compiled: explained recompiles, per-function counters, and a bounded cache.

A miss is explained against the most similar signature already compiled for the function
(``f: recompiling: arg 0 shape (1000, 64) -> (1024, 64)``) on the ``logging`` logger
``fusejit.recompiles`` (a child of ``fusejit``); ``FUSEJIT_LOG=recompiles`` sends those
records to stderr. A function that passes ``recompile_limit`` distinct signatures (default 8,
``FUSEJIT_RECOMPILE_LIMIT``) warns once, naming the arguments that keep changing.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("fusejit.recompiles")
DEFAULT_LIMIT = 8
DEFAULT_CACHE_SIZE = 512  # signatures per function (~120 KiB of host memory each)


class RecompileWarning(UserWarning):
    """A fused function keeps being compiled for new call signatures."""


def _configure_from_env() -> None:
    wanted = {w.strip() for w in os.environ.get("FUSEJIT_LOG", "").split(",")}
    if "recompiles" in wanted or "all" in wanted:
        if not any(getattr(h, "_fusejit", False) for h in log.handlers):
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("fusejit: %(message)s"))
            handler._fusejit = True  # type: ignore[attr-defined]
            log.addHandler(handler)
        log.setLevel(logging.INFO)


_configure_from_env()


def env_int(name: str, default: int) -> int:
    try:
        return max(0, int(os.environ.get(name, default)))
    except ValueError:
        return default


# -- describing the difference between two keys ----------------------------------------------------


def _arg_label(i: int, n_pos: int, kwnames: tuple[str, ...]) -> str:
    return f"arg {i}" if i < n_pos else f"argument {kwnames[i - n_pos]!r}"


def spec_changes(old: Any, new: Any) -> list[tuple[str, str]]:
    """(field, "old -> new") for each field of an argument spec that differs."""
    if type(old) is not type(new):
        return [("kind", f"{_kind(old)} -> {_kind(new)}")]
    out = []
    for name in getattr(type(new), "_fields", ()):
        if name == "context":
            continue
        a, b = getattr(old, name), getattr(new, name)
        if a != b:
            out.append((_FIELD_NAMES.get(name, name), f"{_short(a)} -> {_short(b)}"))
    return out


_FIELD_NAMES = {"ptype": "type", "value": "static value", "has_offset": "offset",
                "wide": "64-bit indexing", "writeable": "writeable"}


def _kind(spec: Any) -> str:
    return {"DeviceArraySpec": "device array", "HostArraySpec": "NumPy array",
            "ScalarSpec": "scalar", "StaticSpec": "static"}.get(type(spec).__name__,
                                                                 type(spec).__name__)


def _short(v: Any) -> str:
    if isinstance(v, type):
        return v.__name__
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], type):  # a static key
        v = v[1]
    text = str(v)
    return text if len(text) <= 60 else text[:57] + "..."


def key_changes(old: Any, new: Any) -> list[tuple[str, str, str]]:
    """(argument label, field, "old -> new") between two CallKeys."""
    if old.kwnames != new.kwnames or len(old.specs) != len(new.specs):
        return [("call", "keywords", f"{old.kwnames} -> {new.kwnames}")]
    n_pos = len(new.specs) - len(new.kwnames)
    out = []
    for i, (a, b) in enumerate(zip(old.specs, new.specs)):
        if a != b:
            label = _arg_label(i, n_pos, new.kwnames)
            out += [(label, f, d) for f, d in spec_changes(a, b)] or [(label, "spec", "")]
    if old.context != new.context:
        out.append(("call", "device", "another OpenCL context"))
    if old.aliases != new.aliases:
        out.append(("call", "aliasing", f"{old.aliases} -> {new.aliases}"))
    if old.views != new.views:
        out.append(("call", "aliasing", "overlapping arrays traced as views of one array"))
    if old.guards != new.guards:
        names = new.guard_names if len(new.guard_names) == len(new.guards) == len(old.guards) \
            else ()
        moved = [f"{n} {_short(a)} -> {_short(b)}" for n, a, b in zip(names, old.guards,
                                                                       new.guards) if a != b]
        out.append(("call", "captured data", "; ".join(moved) or
                    "a closure or global value changed"))
    return out


def closest(previous: Iterator[Any], new: Any) -> tuple[Any, list[tuple[str, str, str]]]:
    """The previous key with the fewest changes to ``new``, and those changes."""
    best, best_changes = None, None
    for old in previous:
        changes = key_changes(old, new)
        if best_changes is None or len(changes) < len(best_changes):
            best, best_changes = old, changes
    return best, best_changes or []


def changed_dims(old: Any, new: Any) -> list[tuple[str, int]] | None:
    """(argument label, dim) of every array extent that differs between two keys, when
    extents of same-rank arrays (none of them 0 or 1) are all that differ; else None."""
    if old is None or old.kwnames != new.kwnames or len(old.specs) != len(new.specs) or \
            (old.context, old.aliases, old.guards, old.views) != \
            (new.context, new.aliases, new.guards, new.views):
        return None
    n_pos = len(new.specs) - len(new.kwnames)
    dims = []
    for i, (a, b) in enumerate(zip(old.specs, new.specs)):
        if a == b:
            continue
        shape_a, shape_b = getattr(a, "shape", None), getattr(b, "shape", None)
        if type(a) is not type(b) or shape_a is None or len(shape_a) != len(shape_b) or \
                a._replace(shape=shape_b, **_strides_of(b)) != b:
            return None
        for d, (x, y) in enumerate(zip(shape_a, shape_b)):
            if x != y:
                if min(x, y) <= 1:
                    return None  # size 0 and 1 stay specialised
                dims.append((_arg_label(i, n_pos, new.kwnames), d))
    return dims or None


def _last_axis_changed(old: Any, new: Any) -> bool:
    """Does an array argument's last extent differ between two keys (``changed_dims`` said
    that only extents do)?"""
    return any(getattr(a, "shape", ())[-1:] != getattr(b, "shape", ())[-1:]
               for a, b in zip(old.specs, new.specs))


def _strides_of(spec: Any) -> dict[str, Any]:
    # contiguous strides follow the shape; other layout changes are not extents
    return {"strides": spec.strides} if hasattr(spec, "strides") else {}


def explain(name: str, previous: Iterator[Any], new: Any) -> str:
    """The log line for a miss of ``new``, against the closest of the previous keys."""
    old, changes = closest(previous, new)
    if old is None:
        return f"{name}: compiling (first call)"
    return f"{name}: recompiling: " + _changes_text(changes)


def _changes_text(changes: list[tuple[str, str, str]]) -> str:
    return "; ".join(f"{label} {what} {diff}".rstrip() for label, what, diff in changes)


# -- per-function state -----------------------------------------------------------------------------


@dataclass
class CallStats:
    """Counters behind ``cache_info()``, the recompile log and warning, and the automatic
    dynamic-extent rule (torch's: the second distinct extent of a dim makes it dynamic)."""

    name: str
    limit: int
    dynamic: bool | None = None  # the @fuse(dynamic=...) setting
    traces: int = 0
    compiles: int = 0  # programs the OpenCL compiler built from source
    disk_hits: int = 0  # programs loaded from the disk cache instead
    reused: int = 0  # signatures served by a program already built (runtime extents)
    signatures: int = 0
    dynamic_on: bool = False  # kernels take their extents at launch
    # ... and row reductions their row length (fusejit/ir/rows.py): dynamic=True, or a last axis
    # changed (a batch that changes alone keeps the kernels sized for its rows)
    rows_on: bool = False
    warned: bool = False
    retracing: bool = False  # the current miss only changed extents of a dynamic function
    changing: dict[str, set] = field(default_factory=dict)
    _moves: set = field(default_factory=set)

    def __post_init__(self) -> None:
        self.dynamic_on = self.rows_on = self.dynamic is True

    @property
    def programs(self) -> int:
        return self.compiles + self.disk_hits

    def note_miss(self, previous: Callable[[], Iterator[Any]], key: Any) -> None:
        """Record a signature miss, decide the dynamic rule, log why."""
        self.signatures += 1
        n_pos = len(key.specs) - len(key.kwnames)
        for i, spec in enumerate(key.specs):
            self.changing.setdefault(_arg_label(i, n_pos, key.kwnames), set()).add(spec)
        old, changes = closest(previous(), key)
        self._moves |= {what for _, what, _ in changes}
        dims = changed_dims(old, key)
        became = ""
        self.retracing = bool(dims) and self.dynamic_on
        if dims and self.dynamic is not False and _last_axis_changed(old, key):
            self.rows_on = True
        if dims and self.dynamic is None and not self.dynamic_on:
            self.dynamic_on = True
            labels = {label for label, _ in dims}
            became = "; " + ", ".join(f"dim {d}" if len(labels) == 1 else f"{label} dim {d}"
                                      for label, d in dims) + " now dynamic"
        if log.isEnabledFor(logging.INFO):
            if old is None:
                log.info("%s: compiling (first call)", self.name)
            elif self.dynamic_on and not became and dims:
                log.info("%s: retracing for %s (dynamic extents: the program is reused when "
                         "the source comes out the same)", self.name, _changes_text(changes))
            else:
                log.info("%s: recompiling: %s%s", self.name, _changes_text(changes), became)

    def note_build(self, how: str) -> None:
        """``how``: compiled | disk | memory (a program built earlier, reused). Warns once
        when the function has needed ``limit`` programs."""
        if how == "memory":
            self.reused += 1
            return
        if how == "disk":
            self.disk_hits += 1
        else:
            self.compiles += 1
            if self.retracing:
                log.info("%s: compiling a new program: the kernel source changed (a new size "
                         "or alignment class)", self.name)
        if self.limit and self.programs >= self.limit and not self.warned:
            self.warned = True
            moving = [label for label, seen in self.changing.items() if len(seen) > 1]
            fields = sorted(self._moves)
            warnings.warn(
                f"{self.name} has been compiled for {self.programs} distinct call signatures"
                f" (the arguments that keep changing: {', '.join(moving) or 'none'}"
                f"{'; ' + ', '.join(fields) if fields else ''}). Pass values that change "
                "every call as arguments of fixed shape, mark changing Python values static "
                "only when they take few values, or raise @fuse(recompile_limit=...) / "
                "FUSEJIT_RECOMPILE_LIMIT", RecompileWarning, stacklevel=_user_level())


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _user_level() -> int:
    """The ``stacklevel`` of the first frame outside fusejit: the user's line that called
    the fused function, however deep in fusejit the warning is raised."""
    frame, level = sys._getframe(2), 2  # (the caller of the function that warns)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


class SignatureLRU(OrderedDict):
    """A bounded signature -> compiled map: a second-chance LRU. Lookups on the full path
    refresh an entry; the fast paths only set ``compiled.used`` (one attribute store), and
    eviction gives a used entry a second chance before dropping it. ``on_evict`` lets the
    owner drop what else points at an evicted entry (its fast-path keys)."""

    def __init__(self, maxsize: int, on_evict: Callable[[Any], None]) -> None:
        super().__init__()
        self.maxsize = maxsize
        self.on_evict = on_evict

    def lookup(self, key: Any) -> Any:
        compiled = self.get(key)
        if compiled is not None:
            self.move_to_end(key)
        return compiled

    def insert(self, key: Any, compiled: Any) -> None:
        self[key] = compiled
        while self.maxsize and len(self) > self.maxsize:
            old_key, old = next(iter(self.items()))
            if getattr(old, "used", False) and old is not compiled:
                old.used = False
                self.move_to_end(old_key)
                continue
            del self[old_key]
            self.on_evict(old)
