"""Calls on the CUDA device: NumPy in and out, and torch/CuPy arrays adopted without a copy
(results as the caller's library type, in-place writes in the caller's memory, strided views,
work on the caller's stream), and the named errors of bad input. Skipped without an NVIDIA GPU
and the fusejit[cuda] extra (CI); tests/targets/test_cuda_source.py covers what needs no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from fusejit import fuse
from fusejit.errors import ContextMismatchError, UnsupportedOperationError

ON_CUDA = pytest.mark.parametrize("device", ["cuda"], indirect=True)


@fuse
def chain(x, y):
    return np.sqrt(x * y + 1) / (x - y + 3) + np.sin(x)


def _chain(x, y):
    return np.sqrt(x * y + 1) / (x - y + 3) + np.sin(x)


@fuse
def iadd(x, y):
    x += y


@ON_CUDA
def test_numpy_calls_run_on_cuda(device, rng) -> None:
    x, y = rng.random(100_003, np.float32), rng.random(100_003, np.float32)
    got = chain(x, y)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, _chain(x, y), rtol=2e-7)
    assert "__global__" in chain.lower(x, y).source


@ON_CUDA
def test_float16_is_bit_exact(device, rng) -> None:
    a = rng.random(4099).astype(np.float16)
    b = (rng.random(4099) + 0.5).astype(np.float16)
    f = fuse(lambda a, b: a * b + a / b - np.sqrt(a))
    np.testing.assert_array_equal(f(a, b), a * b + a / b - np.sqrt(a))


@ON_CUDA
def test_reductions_and_rows(device, rng) -> None:
    x = rng.random((300, 1000), np.float32)
    softmax = fuse(lambda x: np.exp(x - x.max(-1, keepdims=True)) /
                   np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True))
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(softmax(x), e / e.sum(-1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(fuse(lambda x: x.sum(0))(x), x.sum(0), rtol=1e-5)


@ON_CUDA
def test_torch_in_torch_out_without_copies(device) -> None:
    torch = pytest.importorskip("torch")
    x = torch.rand(4096, device="cuda")
    y = torch.rand(4096, device="cuda")
    got = chain(x, y)
    assert isinstance(got, torch.Tensor) and got.is_cuda
    np.testing.assert_allclose(got.cpu().numpy(), _chain(x.cpu().numpy(), y.cpu().numpy()),
                               rtol=2e-7)


@ON_CUDA
def test_in_place_writes_land_in_the_callers_memory(device) -> None:
    torch = pytest.importorskip("torch")
    a = torch.zeros(10, 20, device="cuda")
    view = a[:, ::2]  # a strided view
    iadd(view, torch.ones(10, 10, device="cuda"))
    assert float(a[:, ::2].sum()) == 100 and float(a[:, 1::2].sum()) == 0
    t = torch.rand(64, 48, device="cuda")
    got = chain(t.T, t.T.flip(0))  # transposed and negative-stride-free flips (a copy in torch)
    want = _chain(t.T.cpu().numpy(), t.T.flip(0).cpu().numpy())
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=2e-7)


@ON_CUDA
def test_work_runs_on_the_callers_stream(device) -> None:
    torch = pytest.importorskip("torch")
    s = torch.cuda.Stream()
    x = torch.rand(1 << 20, device="cuda")
    with torch.cuda.stream(s):
        y = x * 2  # queued on s: the call must see it without a synchronisation
        out = chain(y, x)
    s.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), _chain((x * 2).cpu().numpy(),
                                                         x.cpu().numpy()), rtol=2e-7)


@ON_CUDA
def test_cupy_in_cupy_out(device) -> None:
    cp = pytest.importorskip("cupy")
    x, y = cp.random.rand(1000, dtype=cp.float32), cp.random.rand(1000, dtype=cp.float32)
    got = chain(x, y)
    assert isinstance(got, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(got), _chain(cp.asnumpy(x), cp.asnumpy(y)), rtol=2e-7)


@ON_CUDA
def test_bad_input_is_named(device) -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(UnsupportedOperationError, match="requires grad"):
        chain(torch.rand(8, device="cuda", requires_grad=True), torch.rand(8, device="cuda"))
    with pytest.raises(ContextMismatchError, match="torch tensor on the CPU"):
        chain(torch.rand(8, device="cuda"), torch.rand(8))



@ON_CUDA
@pytest.mark.parametrize(("precision", "dtype", "n"), [
    ("highest", np.float32, 512), ("tf32", np.float32, 1024), ("tf32", np.float32, 4096),
    ("tf32", np.float16, 4096), ("3xtf32", np.float32, 4096)])
def test_products_with_bias_and_relu(device, monkeypatch, precision, dtype, n) -> None:
    """GEMM + bias + ReLU against float64, within each precision's bound (the tensor-core
    kernels opted in: FUSEJIT_CUDA_MMA=1, see runtime/cuda/backend.py)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("FUSEJIT_CUDA_MMA", "1")
    tdt = {np.float32: torch.float32, np.float16: torch.float16}[dtype]
    g = torch.Generator(device="cuda").manual_seed(n)
    a, b = (torch.randn(n, n, device="cuda", generator=g).to(tdt) * 0.1 for _ in range(2))
    c = torch.randn(n, device="cuda", generator=g).to(tdt)
    f = fuse(lambda a, b, c: np.maximum(a @ b + c, 0), matmul_precision=precision)
    got = f(a, b, c).double()
    want = torch.relu(a.double() @ b.double() + c.double())
    bound = {"highest": 1e-4, "3xtf32": 1e-4, "tf32": 2e-2}[precision]
    bound *= 4 if dtype == np.float16 else 1
    assert float((got - want).abs().max()) < bound
