"""Building programs: pyopencl Program with our options; failures become KernelBuildError."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator

import pyopencl as cl

from ..errors import KernelBuildError
from .devices import DeviceInfo

_KERNEL = re.compile(r"__kernel void (\w+)\(")


def build_options(info: DeviceInfo) -> list[str]:
    # No -cl-fast-relaxed-math, no -cl-mad-enable: results must match NumPy.
    options = ["-cl-std=CL1.2"]
    if info.correctly_rounded_div_sqrt:
        options.append("-cl-fp32-correctly-rounded-divide-sqrt")
    return options


def build_program(ctx: cl.Context, source: str, options: list[str], name: str) -> cl.Program:
    """Build (PyOpenCL keeps a persistent binary cache keyed on source, options and device).

    A build that reports success but lacks one of the source's kernels raises too: PoCL 3 does
    that for a few programs (logging only "still have references to IRs"), and launching would
    otherwise fail later with an unexplained AttributeError.
    """
    program = _build(ctx, source, options, name)
    expected = set(_KERNEL.findall(source))
    if not expected:  # (all outputs empty) NVIDIA's driver segfaults listing no kernels
        return program
    missing = expected - _kernel_names(program)
    if missing:
        raise KernelBuildError(name, source, "the OpenCL compiler reported success but the "
                                             f"program has no kernel {', '.join(sorted(missing))}")
    return program


def _build(ctx: cl.Context, source: str, options: list[str], name: str) -> cl.Program:
    try:
        with warnings.catch_warnings(record=True) as caught, _stderr_to_log(name):
            warnings.simplefilter("always", cl.CompilerWarning)
            program = cl.Program(ctx, source).build(options=options)
        for w in caught:
            log.debug("OpenCL build log of %s: %s", name, w.message)
        return program
    except cl.RuntimeError as exc:
        raise KernelBuildError(name, source, str(exc)) from None


log = logging.getLogger("fusejit")
_STDERR = threading.Lock()  # file descriptor 2 is the process's: one redirect at a time


@contextlib.contextmanager
def _stderr_to_log(name: str) -> Iterator[None]:
    """PoCL's compiler prints its diagnostics ("1 warning generated.") straight to file
    descriptor 2, past Python; during a build they go to a file and then to the ``fusejit``
    logger (at debug level) instead of the user's terminal."""
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
        log.debug("OpenCL compiler output building %s:\n%s", name, text)


def _kernel_names(program: cl.Program) -> set[str]:
    return {n for n in program.get_info(cl.program_info.KERNEL_NAMES).split(";") if n}
