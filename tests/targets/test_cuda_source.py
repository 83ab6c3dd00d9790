"""The CUDA target without a GPU: ``ShapeDtype(..., device="cuda")`` lowers CUDA C++ on any
machine, and NVRTC (the ``nvidia-cuda-nvrtc`` wheel) compiles the op catalog to cubins for
sm_90a and sm_80.

The catalog is the one tests/test_ops_catalog.py runs on devices: every unary and binary
ufunc on every dtype (and the mixed-dtype pairs whose loops differ), every cast, where and
clip; then every other kind of kernel (tests/targets/cuda_kernels.py: reductions, rows,
scans, gathers with their status buffer, complex, random numbers, GEMMs of every precision
with every tensor-core kernel path, dynamic shapes, windows, 64-bit index math, in-place
writes, float16), each lowered for the
architecture it is compiled for. Cases are batched into few functions (one kernel each), and
the kernels of many functions into one NVRTC compile, so the whole catalog costs a few
compiles per architecture. On a GPU the suite runs them (FUSEJIT_DEVICE=cuda).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import fusejit
from fusejit import ShapeDtype, fuse

pytest.importorskip("cuda.bindings.nvrtc", reason="nvidia-cuda-nvrtc / cuda-bindings (the "
                    "fusejit[cuda] extra) are not installed")

from cuda_kernels import FAMILIES, PRODUCTS, SM80_PRODUCTS, product
from test_ops_catalog import BINARY, DTYPES, MIXED, SELECTS, UNARY, numpy_result

from fusejit.errors import DeviceUnavailableError
from fusejit.runtime.cuda.build import compile_cubin
from fusejit.targets.cuda.prelude import COMPLEX, PRELUDE

ARCHS = ("sm_90a", "sm_80")
N = 64
CHUNK = 160  # results per fused function (arguments stay far under CUDA's 4 KiB)


def _abstract(arrays: list[np.ndarray]) -> list[ShapeDtype]:
    return [ShapeDtype(a.shape, a.dtype, device="cuda") for a in arrays]


def _lower(fn: Callable[..., Any], arrays: list[np.ndarray]) -> Any:
    return fuse(fn).lower(*_abstract(arrays))


def _batched(cases: list[tuple[Callable[..., Any], list[np.ndarray]]]) -> list[Any]:
    """Lowered modules of ``cases``, CHUNK results a function (one kernel each)."""
    modules = []
    for start in range(0, len(cases), CHUNK):
        chunk = cases[start:start + CHUNK]
        inputs: list[np.ndarray] = []
        picks = []
        for fn, arrays in chunk:
            idx = []
            for a in arrays:
                found = next((i for i, b in enumerate(inputs) if b is a), None)
                if found is None:
                    inputs.append(a)
                    found = len(inputs) - 1
                idx.append(found)
            picks.append((fn, idx))

        def batch(*xs: Any, picks: list = picks) -> list[Any]:
            return [fn(*(xs[i] for i in idx)) for fn, idx in picks]
        modules.append(_lower(batch, inputs))
    return modules


@functools.cache
def _sample(dtype: np.dtype) -> np.ndarray:
    return np.zeros(N, dtype)


def catalog() -> dict[str, list[Any]]:
    """Lowered modules by part of the catalog."""
    parts: dict[str, list[Any]] = {}
    with np.errstate(all="ignore"):
        unary = [(u, [_sample(d)]) for d in DTYPES for u in UNARY
                 if not isinstance(numpy_result(u, _sample(d)), Exception)]
        binary = [(u, [_sample(a), _sample(b)]) for a in DTYPES for b in DTYPES for u in BINARY
                  if (a == b or u in MIXED) and
                  not isinstance(numpy_result(u, _sample(a), _sample(b)), Exception)]
        casts = [(functools.partial(lambda x, d: x.astype(d), d=dst), [_sample(src)])
                 for src in DTYPES for dst in DTYPES]
        selects = [(lambda c, x, y, z, fn=fn: fn(c, x, y, z),
                    [_sample(np.dtype(bool)), _sample(d), _sample(d), _sample(d)])
                   for d in DTYPES for fn in SELECTS.values()
                   if not isinstance(numpy_result(fn, _sample(np.dtype(bool)), _sample(d),
                                                  _sample(d), _sample(d)), Exception)]
    parts["elementwise"] = _batched(unary + binary + casts + selects)
    return parts


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def _shows(lowered: Any, want: str | tuple[str, ...]) -> bool:
    """Does the lowering take the path its case is there for (a kernel kind, split partials,
    a word of the source)?"""
    if want == "partial":
        return bool(lowered.module.partials)
    if isinstance(want, str):
        return want in lowered.source
    return set(want) <= {g.kind for g in lowered.plan.groups}


@functools.cache
def _family(family: str, arch: str) -> tuple[Any, ...]:
    """A family's cases lowered for ``arch`` (each checked to take the path it is there for)."""
    out = []
    with _env(FUSEJIT_CUDA_ARCH=arch):
        for k, (fn, args, opts, want) in enumerate(FAMILIES[family]):
            lowered = fuse(fn, **opts).lower(*args)
            assert _shows(lowered, want), (family, k, want)
            assert lowered.module.wide == (family == "wide"), (family, k)
            out.append(lowered)
    return tuple(out)


def _product(k: int, arch: str) -> Any:
    """PRODUCTS[k] lowered for ``arch`` with its tensor-core configuration forced."""
    from fusejit.codegen.gemm import mma as gemm_mma
    from fusejit.codegen.gemm import tune as gemm_tune

    kind, shape, layout = PRODUCTS[k]
    fn, args, precision = product(kind, layout)
    with _env(FUSEJIT_CUDA_ARCH=arch, FUSEJIT_CUDA_MMA="1"), \
            gemm_tune.forced(gemm_mma.config(kind, *shape)):
        lowered = fuse(fn, matmul_precision=precision).lower(*args)
    (cfg,) = [g.gemm_config for g in lowered.plan.groups if g.kind == "gemm"]
    assert (cfg.mma, cfg.mma_opts) == (kind, shape[-1])
    return lowered


@functools.cache
def _catalog() -> dict[str, list[Any]]:
    return catalog()


def _one_source(modules: list[Any]) -> str:
    """The kernels of many lowered modules as one translation unit: one prelude, the kernels
    renamed apart (each module names its kernels fj_k0, fj_k1_partial...), each helper once."""
    base = PRELUDE + COMPLEX
    parts = [base]
    helpers = set()
    for m, lowered in enumerate(modules):
        assert lowered.module.prelude.startswith(base)
        for block in re.split(r"\n(?=[A-Za-z_#])", lowered.module.prelude[len(base):]):
            if block.strip() and block not in helpers:
                helpers.add(block)
                parts.append(block)
        kernels = lowered.module.source[len(lowered.module.prelude):]  # (as finished)
        parts.append(re.sub(r"\bfj_k(\d+)", rf"fj_m{m}_k\1", kernels))
    return "\n".join(parts)


def test_lowering_needs_no_gpu_and_names_the_target() -> None:
    lowered = _lower(lambda x, y: np.sqrt(x) * y + 1, [_sample(np.dtype(np.float32))] * 2)
    assert 'extern "C" __global__ void fj_k0(' in lowered.source
    assert "__kernel" not in lowered.source and "get_global_size(0)" in lowered.source
    assert [k.name for k in lowered.module.kernels] == ["fj_k0"]


def test_arch_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from fusejit.runtime.cuda.build import arch_from_env, check_arch

    monkeypatch.setenv("FUSEJIT_CUDA_ARCH", "sm_80")
    assert arch_from_env() == "sm_80"
    with pytest.raises(ValueError, match="not a CUDA architecture"):
        check_arch("compute_90; rm -rf /")


@pytest.mark.parametrize("arch", ARCHS)
def test_catalog_compiles_with_nvrtc(arch: str) -> None:
    cubin = compile_cubin(_one_source(_catalog()["elementwise"]), arch, "catalog_elementwise")
    assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("arch", ARCHS)
def test_every_kernel_family_compiles_with_nvrtc(arch: str, family: str) -> None:
    """Reductions, rows, scans, gathers, complex, random, GEMMs, dynamic shapes, windows,
    64-bit index math, in-place writes, float16: lowered for ``arch``, a family a translation unit (NVRTC's time grows faster
    than its input: one unit of every family takes twice as long as ten)."""
    source = _one_source(list(_family(family, arch)))
    assert compile_cubin(source, arch, f"{family}_{arch}")[:4] == b"\x7fELF"


@pytest.mark.parametrize("arch", ARCHS)
def test_tensor_core_kernels_compile_with_nvrtc(arch: str) -> None:
    """Every tensor-core kernel path (mma.sync: the register path and its variants, the
    cp.async ring; wgmma on sm_90a), forced, with an epilogue or a prologue: the GEMMs'
    OpenCL C (address spaces, vectors, PTX) adapted by CUDATarget.finish."""
    from fusejit.targets.base import SM90A_MARK

    picks = range(len(PRODUCTS)) if arch == "sm_90a" else SM80_PRODUCTS
    for k in picks:
        lowered = _product(k, arch)
        assert SM90A_MARK not in lowered.source
        _, (*_, opts), layout = PRODUCTS[k]
        assert ("wgmma.mma_async" in lowered.source) == ("g" in opts)
        # (the ring copies plain operands by cp.async; a prologue takes the register path)
        assert ("cp.async" in lowered.source) == ("a" in opts and layout != "tn")
        assert compile_cubin(lowered.source, arch, f"product{k}")[:4] == b"\x7fELF"


@pytest.mark.parametrize(("arch", "precision", "dtype", "path"), [
    ("sm_90a", "tf32", np.float32, "wgmma.mma_async"),
    ("sm_90a", "3xtf32", np.float32, "wgmma.mma_async"),
    ("sm_90a", "tf32", np.float16, "wgmma.mma_async"),
    ("sm_80", "tf32", np.float32, "mma.sync"), ("sm_80", "3xtf32", np.float32, "mma.sync"),
    ("sm_80", "tf32", np.float16, "mma.sync")])
def test_tensor_cores_as_the_architecture_has_them(arch: str, precision: str, dtype: type,
                                                   path: str) -> None:
    """Unforced, a large product takes wgmma on sm_90a, mma.sync elsewhere (sm_80)."""
    with _env(FUSEJIT_CUDA_ARCH=arch, FUSEJIT_CUDA_MMA="1"):
        lowered = fuse(lambda a, b, c: np.maximum(a @ b + c, 0), matmul_precision=precision
                       ).lower(*[ShapeDtype((4096, 4096), dtype, device="cuda")] * 2,
                               ShapeDtype((4096,), dtype, device="cuda"))
    (cfg,) = [g.gemm_config for g in lowered.plan.groups if g.kind == "gemm"]
    assert cfg.mma and path in lowered.source
    assert ("wgmma.mma_async" in lowered.source) == (path == "wgmma.mma_async")


def test_build_errors_show_source_and_log() -> None:
    from fusejit.errors import KernelBuildError

    with pytest.raises(KernelBuildError, match="NVRTC .sm_80. build of broken failed"):
        compile_cubin('extern "C" __global__ void k() { undefined_name(); }', "sm_80", "broken")


def test_abstract_device_cannot_run() -> None:
    from fusejit.runtime.cuda.device import CUDADevice

    dev = CUDADevice(None, "sm_80")
    with pytest.raises(DeviceUnavailableError, match="abstract CUDA device"):
        dev.require_gpu()
    assert ShapeDtype((4,), np.float32, device="cuda").spec().shape == (4,)
    assert fusejit.get_default_device() in ("opencl", "vulkan", "cuda")


def test_opencl_spellings_become_cuda() -> None:
    """What C++ reads otherwise is rewritten: vector literals (a comma expression in C++),
    complex ones and the GEMMs' float4/uint4, __local arrays and pointers, shared-window
    addresses, float4 lanes."""
    from fusejit.targets.cuda.target import CUDATarget, spell

    assert spell("((float2)(a, -b))") == "(fj_c64(a, -b))"
    assert spell("double2 z = (double2)(x, y);") == "fj_c128 z = fj_c128(x, y);"
    assert spell("return (ulong4)(c0, c1, c2, c3); b.s2") == \
        "return make_ulong4(c0, c1, c2, c3); b.z"
    done = CUDATarget().finish(
        "__local float Al[64] __attribute__((aligned(16)));\n"
        "__local const uint *p = (__local const uint *)Al;\n"
        'asm("..." :: "r"((uint)(ulong)((Al) + (k * 2))), "r"((uint)(ulong)Bl));\n'
        "acc = fma(ra.s0, rb.s3, acc);")
    assert "__shared__ float Al[64]" in done and "__local" not in done
    assert "const uint *p = (const uint *)Al;" in done
    assert '"r"(fj_saddr(((Al) + (k * 2))))' in done and '"r"(fj_saddr(Bl))' in done
    assert "fma(ra.x, rb.w, acc)" in done
    vectors = CUDATarget().finish("vstore4((float4)(v1, v2, v3, v4), 0, Bl + 8);\n"
                                  "*(uint4 *)(Bl + 4) = (uint4)(w0, w1, w2, w3);")
    assert "vstore4(make_float4(v1, v2, v3, v4), 0, Bl + 8)" in vectors  # (the prelude's)
    assert "= make_uint4(w0, w1, w2, w3);" in vectors


def test_shape_dtype_names_a_device() -> None:
    with pytest.raises(ValueError, match="is not one of"):
        ShapeDtype((4,), np.float32, device="metal")


def test_adopted_views_keep_the_buffer_alignment_codegen_assumes() -> None:
    """A view starting mid-buffer (x[1:], a negative stride) is addressed from the aligned
    address below it with an element offset, so kernels never take it for an aligned buffer;
    the CUDA Array Interface still exports the view's own first element."""
    from fusejit.runtime.cuda.array import ALIGN, Array

    base = 1 << 20  # (an allocation's aligned start)
    view = Array(None, base + 4, (10,), np.dtype(np.float32), None, None)
    assert (view.ptr, view.offset) == (base, 4)
    flipped = Array(None, base + 4 + 36, (10,), np.dtype(np.float32), (-4,), None)
    assert flipped.ptr % ALIGN == 0 and flipped.ptr + flipped.offset == base + 40
    assert flipped.__cuda_array_interface__["data"][0] == base + 40
    assert flipped.__cuda_array_interface__["strides"] == (-4,)


def test_an_empty_build_log_corrupts_no_interned_bytes() -> None:
    """NVRTC writes its log into the buffer it is given: for an empty log (size 1, the NUL) a
    ``b" " * 1`` buffer is CPython's cached one-byte object, and every b" " of the process
    became b"\\x00" (on the H100 that broke ``import torch`` after the first build)."""
    compile_cubin('extern "C" __global__ void k() {}', "sm_80", "empty_log")
    assert b" " == bytes([32]) and b" ".join([b"a", b"b"]) == bytes([97, 32, 98])


def test_tensor_cores_wait_for_validation_on_cuda() -> None:
    lowered = fuse(lambda a, b: a @ b, matmul_precision="tf32").lower(
        *[ShapeDtype((256, 256), np.float32, device="cuda")] * 2)
    (cfg,) = [g.gemm_config for g in lowered.plan.groups if g.kind == "gemm"]
    assert not cfg.mma  # (FUSEJIT_CUDA_MMA unset: the float32 kernels)
