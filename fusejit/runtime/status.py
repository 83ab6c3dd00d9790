"""The call's status buffer: how a kernel reports an error NumPy would raise.

A checked gather (``x[idx]``, ``np.take`` with ``mode='raise'``, ``take_along_axis``: indices
only known on the device) stores the length of the axis it indexes into a one-int32 buffer
bound to its kernel (role "status", codegen/kernels.py) where an index lies outside the axis,
and reads the clamped element (memory is never read out of bounds). Each backend keeps one such
buffer per device, zero between calls, reads it back after its launches and raises
``DeviceIndexError`` (an IndexError) when it is set, before NumPy arguments written in place
get the results and before anything is returned; it clears the buffer again first.

The read-back costs no extra synchronisation where the call reads its results back anyway
(NumPy arguments: the flag's read is queued before the results' and checked after them). A
call whose results stay on the device (pyopencl or Vulkan arrays) waits for its kernels to read
the flag: one 4-byte blocking read a call, paid only by functions with a checked gather. On
OpenCL the generated launchers (the cached and guarded fast paths) do that read themselves
(``Executable._status_check``), so such a call costs a launch plus the wait for its kernels
(a 1024-element ``x[i]`` on PoCL: about a synchronised launch), never the general ``run``.

The error is raised by the call itself, never later: a deferred check (the flag read
asynchronously, raised at the next synchronisation) cannot be guaranteed to surface, because
the synchronisation a user observes is usually pyopencl's own (``result.get()``,
``queue.finish()``), which fusejit does not see; an error raised at some later unrelated call,
or never, would be worse than the wait. NumPy's ``np.take(..., mode='clip')`` or ``'wrap'``
has no check (clip clamps, wrap cannot be out of range) and stays asynchronous. Two threads
running the same signature concurrently share the buffer, so an error in one may be reported
by both.
"""

from __future__ import annotations

import numpy as np

from fusejit.codegen.kernels import STATUS_DTYPE
from fusejit.errors import DeviceIndexError

ZERO = np.zeros(1, STATUS_DTYPE)


def new_host() -> np.ndarray:
    """Where a call reads the status buffer into."""
    return np.empty(1, STATUS_DTYPE)


def raise_for(value: int) -> None:
    """``DeviceIndexError`` when a kernel set the status (``value``: the axis length)."""
    if value:
        raise DeviceIndexError(
            f"index out of bounds for axis with size {int(value)}: an index array read on the "
            "device (an argument or a value the function computed) holds a value outside "
            "[-size, size), which NumPy refuses with IndexError. Use np.take(..., mode='clip') "
            "or mode='wrap' to clamp or wrap indices instead")
