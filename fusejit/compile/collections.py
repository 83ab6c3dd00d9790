"""Other libraries' lazy arrays (dask's): how a fused call holding one runs.

Their integrations sit above ``api``, so the root package registers them here
(``register_collection``) and ``api`` only asks ``collection_of``: it never imports one."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NamedTuple


class CollectionHandler(NamedTuple):
    """How calls with a library's lazy arrays run: ``handles(args, kwargs)`` (does the call
    hold one), ``call(fused, args, kwargs)`` and ``explain(fused, args, kwargs)``."""

    handles: Callable[[tuple, dict], bool]
    call: Callable[[Any, tuple, dict], Any]
    explain: Callable[[Any, tuple, dict], Any]


REGISTERED: list[list[Any]] = []  # [module, load, its handler once loaded]


def register_collection(module: str, load: Callable[[], CollectionHandler]) -> None:
    """Send calls and ``explain()`` with arrays of ``module`` (``"dask.array"``, looked for
    once it is imported) to the handler ``load()`` returns at first use."""
    REGISTERED.append([module, load, None])


def collection_of(args: tuple, kwargs: dict) -> CollectionHandler | None:
    """The handler of the first registered library whose arrays this call holds, or None."""
    for entry in REGISTERED:
        if entry[0] in sys.modules:  # (its library not imported: none of its arrays)
            if entry[2] is None:
                entry[2] = entry[1]()
            if entry[2].handles(args, kwargs):
                return entry[2]
    return None
