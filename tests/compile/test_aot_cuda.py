"""Bundles for the CUDA device (fusejit/compile/aot_cuda.py): exported without a GPU (cubins
NVRTC builds for the architecture), loaded anywhere, run on a GPU of that architecture only,
and refused by name elsewhere; OpenCL bundles refuse CUDA arrays. The calls themselves run on
a GPU (skipped in CI)."""

from __future__ import annotations

import numpy as np
import pytest

import fusejit
from fusejit import ShapeDtype, fuse
from fusejit.errors import DeviceUnavailableError

pytest.importorskip("cuda.bindings.nvrtc", reason="nvidia-cuda-nvrtc / cuda-bindings (the "
                    "fusejit[cuda] extra) are not installed")

from fusejit.compile import aot_cuda, bundle_trust
from fusejit.compile.aot import BundleError
from fusejit.runtime.cuda import device as cuda_device
from fusejit.runtime.cuda.array import Array

ON_CUDA = pytest.mark.parametrize("device", ["cuda"], indirect=True)
NO_GPU = pytest.mark.skipif(cuda_device.gpu_count() > 0, reason="a CUDA GPU is here")


def f(x, y, i):
    return np.sqrt(x) * y + 1, (x[i] * y[i]).sum(), np.cumsum(x)


def _sigs() -> list[tuple]:
    def s(shape, dtype):
        return ShapeDtype(shape, dtype, device="cuda")
    return [(s((4096,), np.float32), s((4096,), np.float32), s((16,), np.int64)),
            (s((64, 64), np.float16), s((64, 64), np.float16), s((3,), np.int32))]


def _export(tmp_path, monkeypatch, arch: str) -> fusejit.compile.aot.Loaded:
    monkeypatch.setenv("FUSEJIT_CUDA_ARCH", arch)
    path = fusejit.export(fuse(f), _sigs(), tmp_path / f"f_{arch}.fjb", key=b"k")
    return fusejit.load(path, key=b"k")


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_export_carries_cubins_for_the_architecture(tmp_path, monkeypatch, arch) -> None:
    """No GPU needed: each entry holds the cubin NVRTC built for the architecture, keyed by
    its source, and passes the loader's consistency checks (CUDA kernel declarations, the
    checked gather's status buffer)."""
    loaded = _export(tmp_path, monkeypatch, arch)
    assert loaded.device == "cuda" and len(loaded._entries) == 2
    for e in loaded._entries:
        assert e["arch"] == arch and "fj_status0" in e["source"]
        (binary,) = e["binaries"]
        assert binary["key"] == aot_cuda.binary_key(e["source"], arch)
        assert loaded._blobs[binary["blob"]][:4] == b"\x7fELF"
        bundle_trust.check_entry(e, loaded._blobs, "f")


def test_a_bundle_runs_on_its_architecture_only(tmp_path, monkeypatch) -> None:
    loaded = _export(tmp_path, monkeypatch, "sm_90a")
    other = cuda_device.CUDADevice(None, "sm_80")
    with pytest.raises(BundleError, match=r"exported for CUDA sm_90a, and this CUDA device "
                       r"\(abstract sm_80\) is sm_80: export it again for sm_80 "
                       r"\(FUSEJIT_CUDA_ARCH=sm_80\)"):
        aot_cuda.executable(loaded, 0, None, other)


@NO_GPU
def test_without_a_gpu_a_call_is_device_unavailable(tmp_path, monkeypatch) -> None:
    loaded = _export(tmp_path, monkeypatch, "sm_90a")
    x = Array(cuda_device.default_device(), 1 << 20, (4096,), np.dtype(np.float32), None, None)
    i = Array(cuda_device.default_device(), 1 << 21, (16,), np.dtype(np.int64), None, None)
    with pytest.raises(DeviceUnavailableError, match="no CUDA GPU"):
        loaded(x, x, i)
    with pytest.raises(DeviceUnavailableError, match="no CUDA GPU"):
        fuse(f).lower(*_sigs()[0]).compile()


def test_arguments_of_another_device_are_refused_by_name(tmp_path, monkeypatch, queue) -> None:
    """A CUDA bundle given pyopencl arrays, an OpenCL bundle given CUDA arrays: BundleError
    naming the device the bundle was exported for."""
    import pyopencl.array as cla

    loaded = _export(tmp_path, monkeypatch, "sm_90a")
    x = cla.to_device(queue, np.ones(4096, np.float32))
    i = cla.to_device(queue, np.zeros(16, np.int64))
    with pytest.raises(BundleError, match="exported for CUDA; argument 0 is a pyopencl"):
        loaded(x, x, i)
    opencl = fusejit.load(fusejit.export(fuse(f), [(np.ones(4096, np.float32),) * 2 +
                                                   (np.zeros(16, np.int64),)],
                                         tmp_path / "opencl.fjb"))
    dev = cuda_device.default_device()
    cx = Array(dev, 1 << 20, (4096,), np.dtype(np.float32), None, None)
    ci = Array(dev, 1 << 21, (16,), np.dtype(np.int64), None, None)
    with pytest.raises(BundleError, match="exported for OpenCL and got CUDA arrays"):
        opencl(cx, cx, ci)


def test_one_device_a_bundle(tmp_path) -> None:
    with pytest.raises(BundleError, match="one device"):
        fusejit.export(fuse(f), [_sigs()[0], (np.ones(8, np.float32),) * 2 +
                                 (np.zeros(2, np.int64),)], tmp_path / "mixed.fjb")


def test_dynamic_signatures_export_for_cuda(tmp_path) -> None:
    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    loaded = fusejit.load(fusejit.export(
        fuse(softmax), [(ShapeDtype((None, 256), np.float32, device="cuda"),)],
        tmp_path / "dyn.fjb"))
    assert loaded.device == "cuda" and all(len(e["binaries"]) == 1 for e in loaded._entries)


@ON_CUDA
def test_loaded_bundles_run_torch_arrays(device, tmp_path, monkeypatch) -> None:
    """On the GPU: the bundle's own cubins run (signed: nothing compiled) on torch arrays."""
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("FUSEJIT_CUDA_ARCH", raising=False)
    path = fusejit.export(fuse(f), _sigs(), tmp_path / "gpu.fjb", key=b"k")
    loaded = fusejit.load(path, key=b"k")
    x, y = torch.rand(4096, device="cuda"), torch.rand(4096, device="cuda")
    i = torch.arange(16, device="cuda")
    got = loaded(x, y, i)
    xs, ys, ii = (t.cpu().numpy() for t in (x, y, i))
    want = f(xs, ys, ii)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g.cpu() if hasattr(g, "cpu") else g), w,
                                   rtol=1e-5)
    assert loaded.binary_loads == 1 and loaded.builds == 0


def test_numpy_signatures_export_for_the_default_cuda_device(tmp_path) -> None:
    before = fusejit.get_default_device()
    fusejit.set_default_device("cuda")
    try:
        loaded = fusejit.load(fusejit.export(fuse(lambda x: x * 2 + 1),
                                             [(np.ones(64, np.float32),)], tmp_path / "h.fjb"))
    finally:
        fusejit.set_default_device(before)
    (e,) = loaded._entries
    assert loaded.device == "cuda" and e["args"][0]["kind"] == "host" and e["binaries"]
