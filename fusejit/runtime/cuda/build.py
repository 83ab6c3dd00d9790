"""Compiling CUDA modules: NVRTC (``nvidia-cuda-nvrtc``, through ``cuda.bindings.nvrtc``) to a
cubin for the device's exact architecture, through fusejit's checksummed disk cache.

A cubin (machine code) rather than PTX: the driver never has to JIT PTX newer than itself, a
warm process loads a binary, and sm_90a's instructions (wgmma) exist only in sm_90a code.
Needs no GPU: CI compiles the op catalog for sm_90a and sm_80 here (tests/targets/
test_cuda_source.py).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict

from fusejit._version import __version__
from fusejit.errors import DeviceUnavailableError, KernelBuildError
from fusejit.runtime import cache

DEFAULT_ARCH = "sm_90a"  # what a machine without a GPU lowers for (FUSEJIT_CUDA_ARCH)
INSTALL_HINT = "pip install 'fusejit[cuda]'"
_KERNEL = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(')

# NumPy's semantics (targets/cuda/target.py): no contraction into FMA, IEEE division and square
# root, denormals kept; -default-device makes the prelude's unannotated helpers device functions
OPTIONS = ("-fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false",
           "-default-device", "-std=c++17")


def nvrtc():
    """The NVRTC bindings, or DeviceUnavailableError naming the extra to install."""
    try:
        from cuda.bindings import nvrtc as bindings
    except ImportError as exc:
        raise DeviceUnavailableError(
            f"the CUDA device needs NVIDIA's Python packages ({exc}); {INSTALL_HINT}") from None
    return bindings


def nvrtc_version() -> str:
    """NVRTC's version, e.g. "13.0" (part of every cache key)."""
    err, major, minor = nvrtc().nvrtcVersion()
    if int(err):
        raise DeviceUnavailableError(f"NVRTC is not usable ({err!r}); {INSTALL_HINT}")
    return f"{major}.{minor}"


def check_arch(arch: str) -> str:
    """``arch`` as NVRTC names it ("sm_90a", "sm_80"); ValueError for anything else."""
    arch = arch.strip().lower()
    if not re.fullmatch(r"sm_\d{2,3}[af]?", arch):
        raise ValueError(f"FUSEJIT_CUDA_ARCH={arch!r} is not a CUDA architecture such as "
                         "'sm_90a' or 'sm_80'")
    return arch


def check_supported(arch: str, what: str) -> str:
    """``arch`` when this NVRTC builds it; DeviceUnavailableError naming the fix otherwise
    (``what``: the GPU or setting that asked for it)."""
    err, archs = nvrtc().nvrtcGetSupportedArchs()
    if not int(err) and archs and int(arch[3:].rstrip("af")) not in archs:
        raise DeviceUnavailableError(
            f"{what} is {arch}, which NVRTC {nvrtc_version()} does not build (it builds "
            f"sm_{min(archs)} to sm_{max(archs)}): install the nvidia-cuda-nvrtc release of "
            "the CUDA version that still supports it, or run on OpenCL "
            "(fusejit.set_default_device('opencl'))")
    return arch


def loads_on(arch: str, major: int, minor: int) -> bool:
    """Can a GPU of compute capability major.minor load a cubin built for ``arch``? (Cubins
    run on their own major version from their minor up; sm_90a-style ones on that exact
    version only.)"""
    cc = int(arch[3:].rstrip("af"))
    if arch[-1] in "af":
        return (cc // 10, cc % 10) == (major, minor) if arch[-1] == "a" else \
            cc // 10 == major and cc % 10 <= minor
    return cc // 10 == major and cc % 10 <= minor


def kernel_names(source: str) -> tuple[str, ...]:
    return tuple(_KERNEL.findall(source))


def _check(result: object, what: str) -> None:
    if int(result):  # (an nvrtcResult; 0 is NVRTC_SUCCESS)
        raise RuntimeError(f"{what}: {result!r}")


def compile_cubin(source: str, arch: str, name: str) -> bytes:
    """``source`` compiled for ``arch``; KernelBuildError with the numbered source and the
    compiler's log when NVRTC rejects it."""
    lib = nvrtc()
    err, prog = lib.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], [])
    _check(err, "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in OPTIONS)]
        (err,) = lib.nvrtcCompileProgram(prog, len(opts), opts)
        _, size = lib.nvrtcGetProgramLogSize(prog)
        # (NVRTC writes into the buffer: never a cached one-byte bytes object, which an
        # empty log's size of 1 would give and the terminating NUL would corrupt)
        log = b" " * max(size, 2)
        lib.nvrtcGetProgramLog(prog, log)
        if int(err):
            raise KernelBuildError(name, source, log.decode(errors="replace").rstrip("\x00"),
                                   compiler=f"NVRTC ({arch})")
        err, size = lib.nvrtcGetCUBINSize(prog)
        _check(err, "nvrtcGetCUBINSize")
        cubin = b" " * max(size, 2)
        (err,) = lib.nvrtcGetCUBIN(prog, cubin)
        _check(err, "nvrtcGetCUBIN")
        return cubin
    finally:
        lib.nvrtcDestroyProgram(prog)


def program_key(source: str, arch: str) -> cache.ProgramKey:
    """The disk-cache key of a cubin: the source, the options, NVRTC's version and the
    architecture (a cubin does not depend on the driver that loads it)."""
    return cache.ProgramKey(hashlib.sha256(source.encode()).hexdigest(),
                            (f"--gpu-architecture={arch}", *OPTIONS),
                            f"CUDA NVRTC {nvrtc_version()}", arch, "cubin", __version__)


_MEMO_SIZE = 256
_memo: OrderedDict[tuple[bytes, str], bytes] = OrderedDict()
_memo_lock = threading.Lock()


def build_cached(source: str, arch: str, name: str) -> tuple[bytes, str]:
    """(cubin, how): from this process's memo ("memory"), the disk cache ("disk"), or NVRTC
    ("compiled", then stored)."""
    memo_key = (hashlib.sha256(source.encode()).digest(), arch)
    with _memo_lock:
        cubin = _memo.get(memo_key)
        if cubin is not None:
            _memo.move_to_end(memo_key)
            return cubin, "memory"
    store = cache.program_cache()
    key = program_key(source, arch) if store is not None else None
    entry = store.get(key) if store is not None else None
    if entry is not None and set(entry.kernels) == set(kernel_names(source)):
        cubin, how = entry.binary, "disk"
    else:
        cubin, how = compile_cubin(source, arch, name), "compiled"
        if store is not None:
            store.put(key, cache.Entry(cubin, kernel_names(source)))
    with _memo_lock:
        _memo[memo_key] = cubin
        while len(_memo) > _MEMO_SIZE:
            _memo.popitem(last=False)
    return cubin, how


def remember(source: str, arch: str, cubin: bytes) -> None:
    """Serve ``source`` for ``arch`` with ``cubin`` in this process (a trusted bundle's own
    cubin: compile/aot_cuda.py), as if NVRTC had just built it."""
    with _memo_lock:
        _memo[(hashlib.sha256(source.encode()).digest(), arch)] = bytes(cubin)
        while len(_memo) > _MEMO_SIZE:
            _memo.popitem(last=False)


def arch_from_env() -> str | None:
    """FUSEJIT_CUDA_ARCH, checked, or None when unset."""
    value = os.environ.get("FUSEJIT_CUDA_ARCH", "").strip()
    return check_arch(value) if value else None
