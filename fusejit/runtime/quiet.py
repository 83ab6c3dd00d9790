"""Driver chatter on file descriptor 2, past Python (PoCL's "1 warning generated.", Mesa's
"error: XDG_RUNTIME_DIR is invalid or not set in the environment." when a Vulkan instance
probes its window-system layers): sent to the ``fusejit`` logger at debug level instead of the
user's terminal, around the driver calls that print it."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator

log = logging.getLogger("fusejit")
_STDERR = threading.Lock()  # file descriptor 2 is the process's: one redirect at a time


@contextlib.contextmanager
def stderr_to_log(describe: str) -> Iterator[None]:
    """File descriptor 2 into a file for the block, then its text (if any) to the logger as
    ``describe``."""
    try:
        fd = sys.__stderr__.fileno() if sys.__stderr__ is not None else 2
    except (OSError, ValueError):  # no real stderr (an embedded interpreter): nothing to hide
        yield
        return
    with _STDERR, tempfile.TemporaryFile() as sink:
        saved = os.dup(fd)
        try:
            os.dup2(sink.fileno(), fd)
            yield
        finally:
            os.dup2(saved, fd)
            os.close(saved)
        sink.seek(0)
        text = sink.read().decode(errors="replace").strip()
    if text:
        log.debug("%s:\n%s", describe, text)
