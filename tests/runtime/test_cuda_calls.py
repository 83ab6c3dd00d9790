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


# -- the fast path of cached calls (runtime/cuda/launch.py; without a GPU: test_cuda_launch.py) --


@pytest.fixture
def full_calls(monkeypatch):
    """Counts calls served by the full path (``CUDAExecutable.run``) of functions compiled
    after the fixture is set up."""
    from fusejit.runtime.cuda.executable import CUDAExecutable

    count = []
    real = CUDAExecutable.run

    def counting(self, flat, dev):
        count.append(1)
        return real(self, flat, dev)

    monkeypatch.setattr(CUDAExecutable, "run", counting)
    return count


@ON_CUDA
@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_cached_calls_take_the_fast_path(device, full_calls, library) -> None:
    """After a signature's first call, calls launch through its generated launcher: results
    of the caller's library type, on the same GPU, equal to NumPy's, every call."""
    xp = pytest.importorskip(library)
    f = fuse(_chain)

    def rand(n):
        return xp.rand(n, device="cuda") if library == "torch" else \
            xp.random.rand(n, dtype=xp.float32)

    for _ in range(6):
        x, y = rand(1024), rand(1024)
        got = f(x, y)
        assert type(got) is type(x) and got.shape == (1024,) and got.dtype == x.dtype
        if library == "torch":
            assert got.device == x.device
        host = (lambda a: a.cpu().numpy()) if library == "torch" else xp.asnumpy
        np.testing.assert_allclose(host(got), _chain(host(x), host(y)), rtol=2e-7)
    assert len(full_calls) == 1  # the first call; then the launcher
    assert f._mono is not None


@ON_CUDA
def test_fast_path_can_be_turned_off(device, full_calls, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("FUSEJIT_CUDA_FAST", "0")
    f = fuse(_chain)
    x, y = torch.rand(64, device="cuda"), torch.rand(64, device="cuda")
    for _ in range(3):
        f(x, y)
    assert len(full_calls) == 3


@ON_CUDA
def test_new_signatures_fall_back_and_alternate(device, full_calls) -> None:
    """Another dtype, shape, strided or offset view misses the launcher and runs (and keys)
    through the full path; alternating between signatures stays right."""
    torch = pytest.importorskip("torch")
    f = fuse(_chain)
    base = torch.rand(2, 4096, device="cuda", dtype=torch.float64) + 0.5
    cases = [base[0].float(), base[1].float(),  # the warm signature
             base[0], base[1],  # float64
             base[0, :1000].float(), base[1, :1000].float(),  # another shape
             base[0, ::2], base[1, ::2],  # strided views
             base[0, 1:], base[1, 1:]]  # views starting off the 256-byte alignment
    f(cases[0], cases[1])
    for _ in range(3):
        for x, y in zip(cases[::2], cases[1::2]):
            got = f(x, y)
            assert got.dtype == x.dtype and got.shape == x.shape
            want = _chain(x.cpu().numpy(), y.cpu().numpy())
            np.testing.assert_allclose(got.cpu().numpy(), want, rtol=2e-7 if x.dtype ==
                                       torch.float32 else 1e-13)
    assert len(full_calls) == 5  # each signature's first call; then their launchers


@ON_CUDA
def test_in_place_writes_on_the_fast_path(device) -> None:
    torch = pytest.importorskip("torch")
    a = torch.zeros(10, 20, device="cuda")
    ones = torch.ones(10, 10, device="cuda")
    for _ in range(5):
        iadd(a[:, ::2], ones)  # (a new view object each call: the same signature)
    assert float(a[:, ::2].sum()) == 500 and float(a[:, 1::2].sum()) == 0

    @fuse
    def scaled(x, s):
        x *= s
        return x

    b = torch.ones(300, device="cuda")
    for s in (2.0, 3.0, 0.5):
        assert scaled(b, s) is b  # an argument returned as itself: the caller's tensor
    np.testing.assert_array_equal(b.cpu().numpy(), np.full(300, 3, np.float32))


@ON_CUDA
def test_bad_input_is_named_after_the_launcher_is_made(device) -> None:
    torch = pytest.importorskip("torch")
    f = fuse(_chain)
    x, y = torch.rand(8, device="cuda"), torch.rand(8, device="cuda")
    for _ in range(3):
        f(x, y)
    with pytest.raises(UnsupportedOperationError, match="requires grad"):
        f(torch.rand(8, device="cuda", requires_grad=True), y)
    with pytest.raises(ContextMismatchError, match="torch tensor on the CPU"):
        f(x, torch.rand(8))
    if torch.cuda.device_count() > 1:
        with pytest.raises(ContextMismatchError, match="another GPU"):
            f(x, torch.rand(8, device="cuda:1"))
        got = f(x.to("cuda:1"), y.to("cuda:1"))  # (device 1's tensors run on device 1)
        assert got.device == torch.device("cuda", 1)
    f(x, y)  # (the launcher still serves the signature)


@ON_CUDA
def test_the_fast_path_queues_on_the_callers_stream(device) -> None:
    """A side stream is held back by a sleep before it writes the input: a launch queued on
    any other stream would read the input before that write."""
    torch = pytest.importorskip("torch")
    f = fuse(_chain)
    x = torch.rand(1 << 16, device="cuda")
    y = torch.zeros_like(x)
    f(x, y), f(x, y)  # the launcher is made
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # (~50 ms of GPU clock)
        y.copy_(x * 2)
        out = f(x, y)
        done = torch.cuda.Event()
        done.record(side)
    assert not done.query()  # nothing waited: the call added no synchronisation
    side.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(),
                               _chain(x.cpu().numpy(), (x * 2).cpu().numpy()), rtol=2e-7)


@ON_CUDA
def test_cupy_calls_queue_on_cupys_stream(device) -> None:
    cp = pytest.importorskip("cupy")
    f = fuse(_chain)
    x = cp.random.rand(1 << 16, dtype=cp.float32)
    f(x, x + 1), f(x, x + 1)
    with cp.cuda.Stream(non_blocking=True) as s:
        y = x * 2
        out = f(x, y)
    s.synchronize()
    assert isinstance(out, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(out), _chain(cp.asnumpy(x), cp.asnumpy(x) * 2),
                               rtol=2e-7)


@ON_CUDA
def test_device_index_arrays_are_checked(device) -> None:
    """A gather whose indices are only known on the device raises NumPy's IndexError from the
    call itself, NumPy and torch arguments alike, and the next good call is clean."""
    from fusejit.errors import DeviceIndexError

    torch = pytest.importorskip("torch")
    gather = fuse(lambda x, i: x[i] * 2)
    x = np.arange(5, dtype=np.float32) * 10
    np.testing.assert_array_equal(gather(x, np.array([4, -5])), [80, 0])
    tx, ti = torch.as_tensor(x, device="cuda"), torch.tensor([1, 7], device="cuda")
    for _ in range(3):  # (the first call and the cached ones)
        with pytest.raises(DeviceIndexError, match="size 5"):
            gather(tx, ti)
    good = gather(tx, torch.tensor([1, -1], device="cuda"))
    np.testing.assert_array_equal(good.cpu().numpy(), [20, 80])
