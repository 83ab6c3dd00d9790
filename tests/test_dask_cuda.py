"""Dask on the CUDA device: ``DevicePlugin(kind="cuda")`` pins one GPU per worker, and dask
arrays of CuPy chunks stay on the GPU (CuPy blocks in, CuPy blocks out, the plan's meta CuPy).
Without a GPU the plugin's refusal is named; the rest runs on a GPU with CuPy."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
pytest.importorskip("distributed")

import fusejit
import fusejit.dask as fdask
from fusejit import fuse
from fusejit.errors import DeviceUnavailableError
from fusejit.runtime.cuda.device import gpu_count

ON_CUDA = pytest.mark.parametrize("device", ["cuda"], indirect=True)


def test_the_cuda_kind_is_offered() -> None:
    assert fdask.DevicePlugin(kind="cuda").kind == "cuda"
    with pytest.raises(ValueError, match="'cuda'"):
        fdask.DevicePlugin(kind="tpu")


@pytest.mark.skipif(gpu_count() > 0, reason="a CUDA GPU is here")
def test_a_worker_without_a_gpu_is_told_so() -> None:
    before = fusejit.get_default_device()
    with pytest.raises(DeviceUnavailableError, match="no CUDA GPU 0"):
        fdask.DevicePlugin(kind="cuda").setup(SimpleNamespace(name="worker-3"))
    assert fusejit.get_default_device() == before  # (nothing changed)


@ON_CUDA
def test_a_worker_is_pinned_to_its_gpu(device) -> None:
    worker = SimpleNamespace(name=0)
    fdask.DevicePlugin(kind="cuda").setup(worker)
    assert worker.fusejit_device.startswith("CUDA GPU 0") and \
        fusejit.get_default_device() == "cuda"


@ON_CUDA
def test_cupy_chunks_stay_on_the_gpu(device) -> None:
    cp = pytest.importorskip("cupy")
    x = da.from_array(cp.arange(4000, dtype=cp.float32).reshape(40, 100) / 100, chunks=(10, 50))
    f = fuse(lambda x: (np.sin(x) * 2 + 1, x.sum(0), np.argmax(x, 0), x.var(1)))
    with dask.config.set(scheduler="sync"):
        outs = f(x)
        for got in outs:
            assert isinstance(got._meta, cp.ndarray)
        got = dask.compute(*outs)
    xs = cp.asnumpy(x.compute())
    want = (np.sin(xs) * 2 + 1, xs.sum(0), np.argmax(xs, 0), xs.var(1))
    for g, w in zip(got, want):
        assert isinstance(g, cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(g), w, rtol=1e-5, atol=1e-6)
