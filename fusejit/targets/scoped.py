"""A per-thread setting changed for the duration of a ``with`` block (the switches that make
kernels generated inside the block spell their PTX as portable OpenCL C, for tests on PoCL)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any


class Scoped:
    """A value per thread, ``default`` until a ``with scoped.set(v):`` block sets it."""

    def __init__(self, default: Any) -> None:
        self._local = threading.local()
        self._default = default

    @property
    def value(self) -> Any:
        return getattr(self._local, "value", self._default)

    @contextlib.contextmanager
    def set(self, value: Any) -> Iterator[None]:
        old = self.value
        self._local.value = value
        try:
            yield
        finally:
            self._local.value = old
