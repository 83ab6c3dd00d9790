"""Bad input on the CUDA device: each a named error before anything launches.

Without a GPU (CI): no driver or no ``fusejit[cuda]`` extra (DeviceUnavailableError naming the
fix, OpenCL unaffected), an architecture too old for the kernels or for this NVRTC (at
lowering), arrays of two devices, a read-only export written in place, an export the owning
library refuses. Fusejit's own CUDA arrays stand in for adopted ones here (abstract devices,
never launched). With a GPU: the same through torch, CuPy and JAX arrays.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import fusejit
from fusejit import ShapeDtype, fuse
from fusejit.errors import (
    ContextMismatchError,
    DeviceUnavailableError,
    ReadOnlyError,
    UnsupportedOperationError,
)

pytest.importorskip("cuda.bindings.nvrtc", reason="nvidia-cuda-nvrtc / cuda-bindings (the "
                    "fusejit[cuda] extra) are not installed")

from fusejit.runtime.cuda import device as cuda_device
from fusejit.runtime.cuda.array import Array

ON_CUDA = pytest.mark.parametrize("device", ["cuda"], indirect=True)
NO_GPU = pytest.mark.skipif(cuda_device.gpu_count() > 0, reason="a CUDA GPU is here")


@fuse
def iadd(x, y):
    x += y


def _abstract_array(monkeypatch: pytest.MonkeyPatch, arch: str, n: int = 8) -> Array:
    """A fusejit CUDA array of ``n`` float32 on the abstract device of ``arch`` (never read)."""
    monkeypatch.setenv("FUSEJIT_CUDA_ARCH", arch)
    return Array(cuda_device.default_device(), 1 << 20, (n,), np.dtype(np.float32), None, None)


# -- no GPU, no extra -------------------------------------------------------------------------------


@NO_GPU
def test_no_driver_is_device_unavailable_naming_the_fix() -> None:
    x = np.ones(8, np.float32)
    before = fusejit.get_default_device()
    fusejit.set_default_device("cuda")
    try:
        with pytest.raises(DeviceUnavailableError, match=r"no CUDA GPU.*NVIDIA GPU and the "
                           r"fusejit\[cuda\] extra"):
            fuse(lambda x: x * 2)(x)
    finally:
        fusejit.set_default_device(before if before != "cuda" else "opencl")
    fusejit.set_default_device("opencl")
    try:
        np.testing.assert_array_equal(fuse(lambda x: x * 3)(x), x * 3)  # (OpenCL unaffected)
    finally:
        fusejit.set_default_device(before if before != "cuda" else "opencl")


def test_no_extra_is_device_unavailable_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVIDIA's packages missing: lowering for CUDA names ``pip install 'fusejit[cuda]'``,
    and OpenCL calls go on as before."""
    for name in ("cuda.bindings", "cuda.bindings.nvrtc", "cuda.bindings.driver", "cuda.core",
                 "cuda.core.experimental"):
        monkeypatch.setitem(sys.modules, name, None)  # (import raises ImportError)
    monkeypatch.setattr(cuda_device, "_devices", {})
    with pytest.raises(DeviceUnavailableError, match=r"pip install 'fusejit\[cuda\]'"):
        fuse(lambda x: x + 1).lower(ShapeDtype((8,), np.float32, device="cuda"))
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(fuse(lambda x: x - 1)(x), x - 1)


# -- an architecture too old ----------------------------------------------------------------------


@pytest.mark.parametrize(("arch", "opts", "needs"), [
    ("sm_80", "agr", "sm_90a"),  # wgmma: sm_90a alone
    ("sm_100a", "ag", "sm_90a"),  # (Blackwell has no wgmma either)
    ("sm_75", "pal", "sm_80 or newer"),  # mma.sync tf32, cp.async
    ("sm_75", "", "sm_80 or newer")])
def test_an_op_the_architecture_lacks_is_refused_at_lowering(
        monkeypatch: pytest.MonkeyPatch, arch: str, opts: str, needs: str) -> None:
    from fusejit.codegen.gemm import mma as gemm_mma
    from fusejit.codegen.gemm import tune as gemm_tune

    monkeypatch.setenv("FUSEJIT_CUDA_ARCH", arch)
    monkeypatch.setenv("FUSEJIT_CUDA_MMA", "1")
    shape = (128, 64, 8, 8, 1, opts) if "g" in opts else (128, 128, 16, 2, 2, opts)
    a = ShapeDtype((256, 256), np.float32, device="cuda")
    with gemm_tune.forced(gemm_mma.config("tf32", *shape)), pytest.raises(
            UnsupportedOperationError, match=f"needs {needs}; the CUDA device is {arch}"):
        fuse(lambda a, b: a @ b, matmul_precision="tf32").lower(a, a)


def test_unforced_products_fit_the_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    """Left to itself, lowering picks what the architecture has: sm_75 runs tf32 requests on
    the SIMT kernel (explain says why), sm_80 on mma.sync."""
    monkeypatch.setenv("FUSEJIT_CUDA_MMA", "1")
    a = ShapeDtype((1024, 1024), np.float32, device="cuda")
    for arch, word in (("sm_75", None), ("sm_80", "mma.sync")):
        monkeypatch.setenv("FUSEJIT_CUDA_ARCH", arch)
        source = fuse(lambda a, b: a @ b, matmul_precision="tf32").lower(a, a).source
        assert "wgmma" not in source and (word is None or word in source)
        assert word is not None or "mma.sync" not in source


def test_an_architecture_nvrtc_does_not_build_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEJIT_CUDA_ARCH", "sm_60")
    with pytest.raises(DeviceUnavailableError, match=r"sm_60, which NVRTC [\d.]+ does not build"):
        fuse(lambda x: x + 1).lower(ShapeDtype((8,), np.float32, device="cuda"))


# -- arrays ------------------------------------------------------------------------------------------


def test_arrays_of_two_devices_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = _abstract_array(monkeypatch, "sm_80"), _abstract_array(monkeypatch, "sm_90a")
    with pytest.raises(ContextMismatchError, match="another GPU"):
        fuse(lambda x, y: x + y).lower(x, y)


def test_a_read_only_export_is_not_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only export (JAX's immutable arrays) traces apart: reading it is fine, writing
    it is NumPy's ReadOnlyError, before anything runs."""
    x, y = _abstract_array(monkeypatch, "sm_90a"), _abstract_array(monkeypatch, "sm_90a")
    x.writeable = False
    with pytest.raises(ReadOnlyError, match="argument 0 is a read-only export"):
        iadd.lower(x, y)
    assert "__global__" in fuse(lambda x, y: x * y).lower(x, y).source
    iadd.lower(y, x)  # (the writeable one may be written)


class _RefusingInterface:
    """A CUDA array whose owner refuses to export it (as torch does a conjugated view)."""

    @property
    def __cuda_array_interface__(self) -> dict:
        raise BufferError("cannot export a view with the conjugate bit set")


class _RefusingDLPack:
    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)  # kDLCUDA, GPU 0

    def __dlpack__(self, **kwargs: object) -> object:
        raise BufferError("negative strides are not supported by DLPack")


@pytest.mark.parametrize("refusing", [_RefusingInterface(), _RefusingDLPack()])
def test_without_cuda_core_a_cuda_array_names_the_extra(refusing: object, monkeypatch) -> None:
    """Without the fusejit[cuda] extra, a CUDA array is a DeviceUnavailableError naming it
    (not the ModuleNotFoundError of the import that reads it)."""
    for name in ("cuda.core", "cuda.core.utils", "cuda.core.experimental",
                 "cuda.core.experimental.utils"):
        monkeypatch.setitem(sys.modules, name, None)  # (import then raises ImportError)
    with pytest.raises(DeviceUnavailableError,
                       match=r"argument 1 is a CUDA array.*fusejit\[cuda\]"):
        fuse(lambda x, y: x + y)(np.ones(4, np.float32), refusing)


@pytest.mark.parametrize("refusing", [_RefusingInterface(), _RefusingDLPack()])
def test_an_export_the_library_refuses_is_named(refusing: object) -> None:
    pytest.importorskip("cuda.core", reason="reading CUDA arrays needs the fusejit[cuda] extra")
    with pytest.raises(UnsupportedOperationError, match=r"argument 1: \w+ does not export this "
                       r"array's memory \(BufferError: .*pass a plain copy"):
        fuse(lambda x, y: x + y)(np.ones(4, np.float32), refusing)


# -- with a GPU: torch, CuPy, JAX -------------------------------------------------------------------


@ON_CUDA
def test_torch_bad_input_is_named(device) -> None:
    torch = pytest.importorskip("torch")
    f = fuse(lambda x, y: x * y + 1)
    with pytest.raises(UnsupportedOperationError, match="requires grad"):
        f(torch.rand(8, device="cuda", requires_grad=True), torch.rand(8, device="cuda"))
    with pytest.raises(ContextMismatchError, match="torch tensor on the CPU"):
        f(torch.rand(8, device="cuda"), torch.rand(8))
    z = torch.rand(8, dtype=torch.complex64, device="cuda")
    with pytest.raises(UnsupportedOperationError, match="does not export"):
        f(z.conj(), z)  # (a view with the conjugate bit: torch refuses to export it)
    if torch.cuda.device_count() > 1:
        with pytest.raises(ContextMismatchError, match="another GPU"):
            f(torch.rand(8, device="cuda:0"), torch.rand(8, device="cuda:1"))


@ON_CUDA
def test_cupy_on_two_devices_is_refused(device) -> None:
    cp = pytest.importorskip("cupy")
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("one GPU")
    a = cp.ones(8, cp.float32)
    with cp.cuda.Device(1):
        b = cp.ones(8, cp.float32)
    with pytest.raises(ContextMismatchError, match="another GPU"):
        fuse(lambda x, y: x + y)(a, b)


@ON_CUDA
def test_jax_arrays_are_read_only(device) -> None:
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.ones(8, jnp.float32)
    y = fuse(lambda x: x * 2)(x)
    np.testing.assert_array_equal(np.asarray(y), np.full(8, 2, np.float32))
    with pytest.raises(ReadOnlyError, match="read-only export"):
        iadd(x, jnp.ones(8, jnp.float32))
    np.testing.assert_array_equal(np.asarray(x), np.ones(8, np.float32))


@pytest.mark.parametrize(("arch", "cc", "loads"), [
    ("sm_90a", (9, 0), True), ("sm_90", (9, 0), True), ("sm_80", (8, 6), True),
    ("sm_86", (8, 0), False), ("sm_80", (9, 0), False), ("sm_90a", (10, 0), False),
    ("sm_100f", (10, 3), True), ("sm_100a", (10, 3), False)])
def test_an_architecture_setting_the_gpu_cannot_load_is_caught(arch, cc, loads) -> None:
    """FUSEJIT_CUDA_ARCH on a GPU that cannot load its cubins (another major version, a newer
    minor one, an 'a' architecture of another GPU) is refused when the device opens
    (CUDADevice: DeviceUnavailableError naming the setting), not at the first launch."""
    from fusejit.runtime.cuda.build import loads_on

    assert loads_on(arch, *cc) == loads


@ON_CUDA
def test_a_traced_index_out_of_bounds_raises_on_cuda(device) -> None:
    """The checked gather's status buffer (codegen/kernels.py, runtime/status.py) on CUDA:
    NumPy's IndexError, as on OpenCL and Vulkan."""
    from fusejit.errors import DeviceIndexError

    x, i = np.arange(10, dtype=np.float32), np.array([1, 3])
    f = fuse(lambda x, i: x[i] * 2)
    np.testing.assert_array_equal(f(x, i), x[i] * 2)
    with pytest.raises(DeviceIndexError, match="index out of bounds"):
        f(x, np.array([1, 30]))
