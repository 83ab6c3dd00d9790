"""Building programs: pyopencl Program with our options; failures become KernelBuildError."""

from __future__ import annotations

import warnings

import pyopencl as cl

from ..errors import KernelBuildError
from .devices import DeviceInfo


def build_options(info: DeviceInfo) -> list[str]:
    # No -cl-fast-relaxed-math, no -cl-mad-enable: results must match NumPy.
    options = ["-cl-std=CL1.2"]
    if info.correctly_rounded_div_sqrt:
        options.append("-cl-fp32-correctly-rounded-divide-sqrt")
    return options


def build_program(ctx: cl.Context, source: str, options: list[str], name: str) -> cl.Program:
    """Build (PyOpenCL keeps a persistent binary cache keyed on source, options and device)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)
            return cl.Program(ctx, source).build(options=options)
    except cl.RuntimeError as exc:
        raise KernelBuildError(name, source, str(exc)) from None
