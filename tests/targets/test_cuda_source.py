"""The CUDA target without a GPU: ``ShapeDtype(..., device="cuda")`` lowers CUDA C++ on any
machine, and NVRTC (the ``nvidia-cuda-nvrtc`` wheel) compiles the op catalog to cubins for
sm_90a and sm_80.

The catalog is the one tests/test_ops_catalog.py runs on devices: every unary and binary
ufunc on every dtype (and the mixed-dtype pairs whose loops differ), every cast, where and
clip; then the other kinds of kernel (reductions, rows, scans, gathers, complex, random
numbers). Cases are batched into few functions (one kernel each), and the kernels of many
functions into one NVRTC compile, so the whole catalog costs a few compiles per architecture.
On the GPU machine the same functions run and are compared with NumPy (tests/test_cuda.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fusejit
from fusejit import ShapeDtype, fuse

pytest.importorskip("cuda.bindings.nvrtc", reason="nvidia-cuda-nvrtc / cuda-bindings (the "
                    "fusejit[cuda] extra) are not installed")

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
    parts["kernels"] = [_lower(fn, arrays) for fn, arrays in _KINDS]
    return parts


def _softmax(x: Any) -> Any:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layernorm(x: Any) -> Any:
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)


_F32 = np.zeros((64, 1024), np.float32)
_KINDS: list[tuple[Callable[..., Any], list[np.ndarray]]] = [
    (_softmax, [_F32]),
    (_layernorm, [_F32]),
    (_softmax, [_F32.astype(np.float16)]),
    (lambda x: (x.sum(), x.max(axis=0), np.argmax(x, axis=1)), [_F32]),
    (lambda x: np.cumsum(x, axis=-1), [_F32]),
    (lambda x, i: x[i] * 2, [np.zeros(1000, np.float32), np.zeros(100, np.int64)]),
    (lambda z: np.abs(np.exp(z) * z.conj() / (z + 1j)) + np.sqrt(z).real,
     [np.zeros(256, np.complex64)]),
    (lambda z: np.log(z) * np.sin(z), [np.zeros(256, np.complex128)]),
    (lambda x, key: x + fusejit.random.normal(key, x.shape, np.float32),
     [np.zeros(4096, np.float32), np.zeros(2, np.uint64)]),
    (lambda x: (x * x).sum(axis=0), [np.zeros((4096, 96), np.float64)]),
    (lambda a, b: np.maximum(a @ b, 0), [np.zeros((64, 48), np.float32),
                                         np.zeros((48, 80), np.float32)]),
    (lambda a, b: np.tanh(a @ b), [np.zeros((4, 128, 64), np.float32),
                                   np.zeros((4, 64, 96), np.float32)]),
    (lambda x: (np.any(x > 0, axis=0), np.all(x > 0, axis=1)), [_F32[:300, :200]]),
    (lambda x: (x.sum(0), x.max(1), np.argmin(x, 0)), [np.zeros((300, 200), np.int8)]),
    (lambda x: np.cumsum(x, 0), [np.zeros((3000, 7), np.float16)]),
    (lambda x, i: np.take_along_axis(x, i, 1), [_F32[:, :32], np.zeros((64, 4), np.int64)]),
]


@functools.cache
def _catalog() -> dict[str, list[Any]]:
    return catalog()


def _one_source(modules: list[Any]) -> str:
    """The kernels of many lowered modules as one translation unit: one prelude, the kernels
    renamed apart (each module names its kernels fj_k0, fj_k1...)."""
    base = PRELUDE + COMPLEX
    parts = [base]
    helpers = set()
    for m, lowered in enumerate(modules):
        assert lowered.module.prelude.startswith(base)
        for block in re.split(r"\n(?=inline |__attribute__|typedef )",
                              lowered.module.prelude[len(base):]):
            if block.strip() and block not in helpers:
                helpers.add(block)
                parts.append(block)
        for k in lowered.module.kernels:
            parts.append(re.sub(r"\bfj_k(\d+)\b", rf"fj_m{m}_k\1", k.source))
    return "\n".join(parts)


def test_lowering_needs_no_gpu_and_names_the_target() -> None:
    lowered = _lower(lambda x, y: np.sqrt(x) * y + 1, [_sample(np.dtype(np.float32))] * 2)
    assert 'extern "C" __global__ void fj_k0(' in lowered.source
    assert "__kernel" not in lowered.source and "get_global_size(0)" in lowered.source
    assert [k.name for k in lowered.module.kernels] == ["fj_k0"]


def test_dynamic_shapes_lower_and_compile() -> None:
    """Kernels taking their extents at launch (a None dimension) and rows of runtime length."""
    for fn, shape in ((lambda x: np.exp(x - x.max(-1, keepdims=True)).sum(-1), (None, None)),
                      (lambda x: x / x.sum(-1, keepdims=True), (64, None))):
        lowered = fuse(fn, dynamic=True).lower(ShapeDtype(shape, np.float32, device="cuda"))
        assert compile_cubin(lowered.source, "sm_80", "dynamic")[:4] == b"\x7fELF"


def test_arch_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from fusejit.runtime.cuda.build import arch_from_env, check_arch

    monkeypatch.setenv("FUSEJIT_CUDA_ARCH", "sm_80")
    assert arch_from_env() == "sm_80"
    with pytest.raises(ValueError, match="not a CUDA architecture"):
        check_arch("compute_90; rm -rf /")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("part", ["elementwise", "kernels"])
def test_catalog_compiles_with_nvrtc(arch: str, part: str) -> None:
    modules = _catalog()[part]
    for m in modules:
        compile_cubin(m.source, arch, f"catalog_{part}") if part == "kernels" else None
    if part == "elementwise":
        cubin = compile_cubin(_one_source(modules), arch, "catalog_elementwise")
        assert cubin[:4] == b"\x7fELF"


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
    __local arrays and pointers, shared-window addresses, float4 lanes."""
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


@pytest.mark.parametrize(("precision", "dtype", "n", "wgmma"), [
    ("tf32", np.float32, 4096, True), ("3xtf32", np.float32, 4096, True),
    ("tf32", np.float16, 1024, False)])
def test_tensor_core_products_compile_for_sm90a(monkeypatch: pytest.MonkeyPatch, precision: str,
                                                dtype: type, n: int, wgmma: bool) -> None:
    """The tensor-core GEMMs (mma.sync, the cp.async ring, wgmma) as CUDA C++: OpenCL's
    address spaces adapted, and the wgmma statements unmarked (OpenCL builds them in a second
    pass over its PTX; NVRTC builds sm_90a directly)."""
    from fusejit.targets.base import SM90A_MARK

    monkeypatch.setenv("FUSEJIT_CUDA_MMA", "1")
    args = [ShapeDtype((n, n), dtype, device="cuda")] * 2 + [ShapeDtype((n,), dtype,
                                                                         device="cuda")]
    lowered = fuse(lambda a, b, c: np.maximum(a @ b + c, 0),
                   matmul_precision=precision).lower(*args)
    (cfg,) = [g.gemm_config for g in lowered.plan.groups if g.kind == "gemm"]
    assert cfg.mma and ("g" in cfg.mma_opts) == wgmma
    assert SM90A_MARK not in lowered.source and ("wgmma.mma_async" in lowered.source) == wgmma
    assert compile_cubin(lowered.source, "sm_90a", "products")[:4] == b"\x7fELF"


def test_tensor_cores_wait_for_validation_on_cuda() -> None:
    lowered = fuse(lambda a, b: a @ b, matmul_precision="tf32").lower(
        *[ShapeDtype((256, 256), np.float32, device="cuda")] * 2)
    (cfg,) = [g.gemm_config for g in lowered.plan.groups if g.kind == "gemm"]
    assert not cfg.mma  # (FUSEJIT_CUDA_MMA unset: the float32 kernels)
