"""Building programs: pyopencl Program with our options; failures become KernelBuildError."""

from __future__ import annotations

import re
import warnings

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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)
            return cl.Program(ctx, source).build(options=options)
    except cl.RuntimeError as exc:
        raise KernelBuildError(name, source, str(exc)) from None


def _kernel_names(program: cl.Program) -> set[str]:
    return {n for n in program.get_info(cl.program_info.KERNEL_NAMES).split(";") if n}
