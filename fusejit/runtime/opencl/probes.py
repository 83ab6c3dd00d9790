"""What the lazy device probes (half2_probe, fastdiv_probe) share: one answer per device, probed
by one thread while the others wait, and a probe kernel's outcome as a reason or None."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pyopencl as cl


class PerDevice:
    """``probe(queue)``'s answer, computed once per device: None (available) or why not."""

    def __init__(self, probe: Callable[[cl.CommandQueue], str | None]) -> None:
        self._probe = probe
        self._results: dict[int, str | None] = {}
        self._lock = threading.Lock()

    def __call__(self, queue: cl.CommandQueue) -> str | None:
        key = queue.device.int_ptr
        with self._lock:
            if key not in self._results:
                self._results[key] = self._probe(queue)
            return self._results[key]


def kernel_verdict(what: str, mismatches: Callable[[], int], reference: str) -> str | None:
    """None when the probe kernel of ``what`` builds, runs and ``mismatches()`` finds no case
    that differs from ``reference``, else why not."""
    try:  # (on the caller's queue: no context of its own made and torn down beside it)
        bad = mismatches()
    except cl.Error as exc:
        return f"the {what} probe kernel failed to build or run ({str(exc).splitlines()[0]})"
    return f"the {what} probe kernel differs from {reference} in {bad} cases" if bad else None


__all__ = ["PerDevice", "kernel_verdict"]
