"""Building programs: pyopencl Program with our options; failures become KernelBuildError."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
import threading
import warnings
from collections import OrderedDict
from pathlib import Path

import pyopencl as cl

from fusejit._version import __version__
from fusejit.codegen.gemm.ptx import SM90A_MARK  # (the mark codegen puts on sm_90a-only asm)
from fusejit.errors import DeviceUnavailableError, KernelBuildError
from fusejit.runtime import cache, pocl_cache
from fusejit.runtime.backend import DeviceInfo
from fusejit.runtime.files import unusable
from fusejit.runtime.quiet import stderr_to_log
from fusejit.runtime.opencl.identity import device_identity

_KERNEL = re.compile(r"__kernel void (\w+)\(")

_UNKNOWN_CPU_HINT = (
    "PoCL's compiler does not know this processor ('unknown target CPU': the pocl wheel's "
    "LLVM 14 predates it, e.g. AMD Zen 5); install a PoCL that selects its target by the CPU's "
    "features, such as Debian's or Ubuntu's (`apt install pocl-opencl-icd`): fusejit then "
    "picks the CPU device that builds")


def setup_hint(log: str) -> str | None:
    """What to install when a build log says the compiler cannot build any kernel on this
    machine (PoCL's "unknown target CPU"), else None: the setup's error, not the source's
    (a source build here, the device pick's probe build in runtime/opencl/devices.py)."""
    return _UNKNOWN_CPU_HINT if "unknown target CPU" in log else None


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
    return _checked(_build(ctx, source, options, name), source, name)


def _checked(program: cl.Program, source: str, name: str) -> cl.Program:
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
            program = _sm90a(ctx, program, source, options, name)
        for w in caught:
            log.debug("OpenCL build log of %s: %s", name, w.message)
        return program
    except cl.RuntimeError as exc:
        raise _build_error(ctx, name, source, exc) from None


def _build_error(ctx: cl.Context, name: str, source: str, exc: cl.Error) -> Exception:
    """A failed source build's error: KernelBuildError (the source's: a fusejit bug), or,
    when the device's compiler cannot build any kernel, DeviceUnavailableError (the setup's,
    saying what to install, or the disk it writes on that is full or read-only)."""
    scratch = os.environ.get("POCL_CACHE_DIR") or tempfile.gettempdir()
    disk = unusable(Path(scratch)) if os.path.isdir(scratch) else None
    if disk is not None:  # (the compiler's files could not be written: the disk's, not ours)
        return DeviceUnavailableError(f"the OpenCL compiler could not build {name}: its "
                                      f"working directory {scratch} is unusable ({disk})")
    hint = setup_hint(str(exc))
    if hint is not None:
        return DeviceUnavailableError(f"the OpenCL device {ctx.devices[0].name.strip()!r} "
                                      f"cannot build kernels here. {hint}")
    return KernelBuildError(name, source, str(exc))


# -- Hopper-only PTX ------------------------------------------------------------------------------

_TARGET = re.compile(r"^\.target\s+sm_90\b", re.MULTILINE)


def sm90a_ptx(ptx: str) -> str:
    """The PTX of a source whose sm_90a-only asm (``wgmma``) is written as comments behind
    SM90A_MARK, with those statements restored and the target raised to sm_90a.

    NVIDIA's OpenCL compiler targets sm_90 on Hopper and has no option naming sm_90a, whose
    "architecture-specific" instructions ptxas refuses on sm_90. So such a source is built
    twice: first as written (the marked statements are comments there, but their operands are
    bound like any asm's, so the registers they read and write are in place), then from its
    PTX, edited here, as a program binary: the driver accepts PTX binaries and assembles
    this one for sm_90a."""
    if not _TARGET.search(ptx):
        found = re.search(r"^[.]target.*$", ptx, re.MULTILINE)
        raise ValueError("sm_90a code needs an sm_90 device; the PTX's target is "
                         f"{found.group(0) if found else 'not stated'}")
    return _TARGET.sub(".target sm_90a", ptx.replace(SM90A_MARK, ""))


def _sm90a(ctx: cl.Context, program: cl.Program, source: str, options: list[str], name: str
           ) -> cl.Program:
    """``program`` rebuilt for sm_90a when ``source`` holds marked asm (``sm90a_ptx``)."""
    if SM90A_MARK not in source:
        return program
    ptx = bytes(program.get_info(cl.program_info.BINARIES)[0]).rstrip(b"\0").decode()
    try:
        patched = sm90a_ptx(ptx)
    except ValueError as exc:
        raise KernelBuildError(name, source, str(exc)) from None
    return cl.Program(ctx, [ctx.devices[0]], [patched.encode() + b"\0"]).build(
        options=options)


log = logging.getLogger("fusejit")
def _stderr_to_log(name: str) -> contextlib.AbstractContextManager[None]:
    """PoCL's compiler prints its diagnostics ("1 warning generated.") straight to file
    descriptor 2, past Python; during a build they go to the ``fusejit`` logger instead."""
    return stderr_to_log(f"OpenCL compiler output building {name}")


def _kernel_names(program: cl.Program) -> set[str]:
    return {n for n in program.get_info(cl.program_info.KERNEL_NAMES).split(";") if n}


# -- the disk cache ---------------------------------------------------------------------------------


def program_key(device: cl.Device, source: str, options: list[str]) -> cache.ProgramKey:
    """The disk-cache key of a build; PYOPENCL_BUILD_OPTIONS joins the options (pyopencl adds
    them to every build)."""
    forced = tuple(os.environ.get("PYOPENCL_BUILD_OPTIONS", "").split())
    ident = device_identity(device)[1]  # (queried once per device, shared with its DeviceInfo)
    return cache.ProgramKey(hashlib.sha256(source.encode()).hexdigest(),
                            tuple(options) + forced, *ident, __version__)


_MEMO_SIZE = 256  # programs kept per process (signatures with runtime extents share them)
_memo: OrderedDict[tuple, cl.Program] = OrderedDict()
_memo_lock = threading.Lock()


def build_cached(ctx: cl.Context, source: str, options: list[str], name: str
                 ) -> tuple[cl.Program, str]:
    """(program, how): a program built earlier in this process ("memory"), one loaded from
    the disk cache ("disk"), or one compiled ("compiled")."""
    memo_key = (ctx, hashlib.sha256(source.encode()).digest(), tuple(options))
    with _memo_lock:
        program = _memo.get(memo_key)
        if program is not None:
            _memo.move_to_end(memo_key)
            return program, "memory"
    program, from_disk = _build_through_disk(ctx, source, options, name)
    with _memo_lock:
        _memo[memo_key] = program
        while len(_memo) > _MEMO_SIZE:
            _memo.popitem(last=False)
    return program, "disk" if from_disk else "compiled"


def _build_through_disk(ctx: cl.Context, source: str, options: list[str], name: str
                        ) -> tuple[cl.Program, bool]:
    """``build_program`` through fusejit's disk cache: (program, whether it came from disk).

    A hit builds from the stored device binary (no compiler run), with PoCL's files for it
    restored first (runtime/pocl_cache.py); a miss compiles the source, bypassing PyOpenCL's
    pickle cache, and stores the binary. A stored binary the driver rejects, or one that
    lacks a kernel, is a bad entry: a warning, a rebuild, a rewrite.
    """
    store = cache.program_cache() if len(ctx.devices) == 1 else None
    if store is None:
        return build_program(ctx, source, options, name), False
    device = ctx.devices[0]
    key = program_key(device, source, options)
    expected = set(_KERNEL.findall(source))
    pocl = _is_pocl(device)
    entry = store.get(key)
    if entry is not None:
        why = "the binary lacks a kernel"
        try:
            if pocl:
                pocl_cache.restore(entry)
            program = from_binary(ctx, device, entry.binary, options)
            if not expected or expected <= _kernel_names(program):
                if pocl:
                    pocl_cache.watch(store, key, entry)
                return program, True
        except cl.Error as exc:
            why = f"the driver rejected the binary: {exc}".splitlines()[0]
        if pocl:
            pocl_cache.discard(entry)
        store.reject(key, why)
    program = _checked(_build_uncached(ctx, source, options, name), source, name)
    binary = program.get_info(cl.program_info.BINARIES)[0]
    if binary:
        entry = cache.Entry(bytes(binary), tuple(sorted(expected)))
        store.put(key, entry)
        if pocl:
            pocl_cache.watch(store, key, entry)
    return program, False


def from_binary(ctx: cl.Context, device: cl.Device, binary: bytes, options: list[str]
                ) -> cl.Program:
    """A program from a device binary (raises cl.Error when the driver refuses it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.CompilerWarning)
        return cl.Program(ctx, [device], [binary]).build(options=options)


def _build_uncached(ctx: cl.Context, source: str, options: list[str], name: str) -> cl.Program:
    """A source build that skips PyOpenCL's cache (pickled info files, 60 s lock stalls,
    fatal errors on corrupt files): fusejit's own cache stores the result instead."""
    try:
        # (PoCL's "N warnings generated." goes to the fusejit logger, not the terminal)
        with warnings.catch_warnings(), _stderr_to_log(name):
            warnings.simplefilter("ignore", cl.CompilerWarning)
            program = cl.Program(cl._cl._Program(ctx, source)).build(options=options)
            return _sm90a(ctx, program, source, options, name)
    except cl.RuntimeError as exc:
        raise _build_error(ctx, name, source, exc) from None


def _is_pocl(device: cl.Device) -> bool:
    # (the platform name as its DeviceInfo queried it: no platform query per build)
    return "Portable Computing Language" in device_identity(device)[1][0]
