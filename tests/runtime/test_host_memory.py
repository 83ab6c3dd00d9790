"""NumPy in, NumPy out without transfers on a device whose memory is host memory (PoCL's CPU
device; runtime/opencl/hostmem.py): NumPy's results whatever the layout of the inputs
(misaligned, strided, read-only, broadcast, byte-swapped), inputs never modified and never
aliased by results, in-place writes landing in the argument, results that outlive their
inputs, calls from several threads, and the upload path kept where it is turned off."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pytest

from fusejit import fuse
from fusejit.runtime.opencl import hostmem
from fusejit.testing import assert_matches

BIG = hostmem.SMALL // 4 * 3  # float32 elements of an argument past the slots' size


@pytest.fixture(scope="module")
def align(queue) -> int:
    a = hostmem.alignment(queue, queue.context)
    if not a:
        pytest.skip("the default device's memory is not host memory")
    return a


def _affine(x, y):
    return np.sqrt(x * x + 1.0) * y + 1.0  # (no cancellation: a tight ULP bound)


def _two(x, y):
    return x + y, (x * y).sum()


f_affine = fuse(_affine)
f_two = fuse(_two)


def _misaligned(n: int, align: int, dtype=np.float32) -> np.ndarray:
    """An array whose data starts ``itemsize`` bytes past an ``align`` boundary."""
    item = np.dtype(dtype).itemsize
    raw = hostmem.empty((n + align // item + 1,), np.dtype(dtype), align)
    return raw[1:n + 1]


def _aligned(n: int, align: int, dtype=np.float32) -> np.ndarray:
    return hostmem.empty((n,), np.dtype(dtype), align)


@pytest.mark.parametrize("n", [1024, BIG])
@pytest.mark.parametrize("place", ["aligned", "misaligned", "strided", "read-only",
                                   "byte-swapped", "broadcast"])
def test_inputs_of_any_layout_give_numpys_result_and_stay_unchanged(place, n, align, rng):
    x = _aligned(n, align) if place != "misaligned" else _misaligned(n, align)
    x[:] = rng.standard_normal(n)
    y = rng.random(n).astype(np.float32)
    if place == "strided":
        x = np.repeat(x, 2)[::2]
    elif place == "read-only":
        x.flags.writeable = False
    elif place == "byte-swapped":
        x = x.astype(x.dtype.newbyteorder(">"))
    elif place == "broadcast":
        x = np.broadcast_to(x[:1], (n,))
    before_x, before_y = x.copy(), y.copy()
    got = f_affine(x, y)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    assert_matches(got, _affine(x, y), ulp=4)
    np.testing.assert_array_equal(x, before_x)
    np.testing.assert_array_equal(y, before_y)
    assert not np.shares_memory(got, x) and not np.shares_memory(got, y)


@pytest.mark.parametrize("n", [256, BIG])
def test_results_of_successive_calls_are_distinct_arrays(n, rng):
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    first, total = f_two(x, y)
    second, _ = f_two(y, x * 2)  # (a small call reuses the same staging arrays)
    assert not np.shares_memory(first, second)
    assert_matches(first, x + y)
    assert_matches(second, y + x * 2)
    assert np.ndim(total) == 0
    assert_matches(total, (x * y).sum(), ulp=64)


def test_a_large_aligned_input_is_read_where_it_lies(align, monkeypatch, rng):
    wrapped = []
    real = hostmem.wrap

    def recording(context, host, writable):
        wrapped.append(host)
        return real(context, host, writable)
    monkeypatch.setattr(hostmem, "wrap", recording)
    f = fuse(_affine)  # (its launchers, generated from here on, call the recording wrap)
    x, y = _aligned(BIG, align), _misaligned(BIG, align)
    x[:], y[:] = rng.standard_normal(BIG), rng.random(BIG)
    for _ in range(3):  # the full path, the fast path, the guarded launcher
        wrapped.clear()
        got = f(x, y)
        assert_matches(got, _affine(x, y), ulp=4)
        assert any(h is x for h in wrapped)  # in place
        assert not any(np.shares_memory(h, y) for h in wrapped)  # misaligned: a copy
    # a large result is aligned: the next call reads it in place too
    wrapped.clear()
    again = f(got, x)
    assert any(h is got for h in wrapped)
    assert_matches(again, _affine(got, x), ulp=4)


@pytest.mark.parametrize("n", [64, BIG])
@pytest.mark.parametrize("place", ["aligned", "misaligned", "strided"])
def test_in_place_writes_land_in_the_argument(place, n, align, rng):
    def body(x, y):
        x += y
        np.multiply(y, 2, out=y)
        return x
    f = fuse(body)
    for _ in range(3):  # (staging arrays reused; the third call: the guarded launcher)
        x = _misaligned(n, align) if place == "misaligned" else _aligned(n, align)
        x[:] = rng.standard_normal(n)
        y = rng.standard_normal(2 * n).astype(np.float32)
        y = y[::2] if place == "strided" else y[:n].copy()
        want_x, want_y = x + y, y * 2
        got = f(x, y)
        assert got is x
        np.testing.assert_array_equal(x, want_x)
        np.testing.assert_array_equal(y, want_y)


def test_results_outlive_their_inputs(rng):
    data = rng.random(BIG).astype(np.float32)
    results = [f_affine(data * k, data) for k in range(3)]  # temporaries, freed after each call
    gc.collect()
    for k, got in enumerate(results):
        assert_matches(got, _affine(data * k, data), ulp=4)


def test_calls_from_several_threads_get_their_own_results(rng):
    xs = [rng.standard_normal(512).astype(np.float32) for _ in range(8)]
    y = rng.random(512).astype(np.float32)
    f_affine(xs[0], y)  # compiled once, before the threads start
    got: dict[int, list] = {}

    def work(i):
        got[i] = [f_affine(xs[i], y) for _ in range(20)]
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, outs in got.items():
        for out in outs:
            assert_matches(out, _affine(xs[i], y), ulp=4)


def test_zero_copy_off_uploads_as_before(monkeypatch, rng):
    uploads = []
    real = cla.to_device

    def to_device(queue, host, *args, **kwargs):
        uploads.append(host.nbytes)
        return real(queue, host, *args, **kwargs)
    monkeypatch.setattr(cla, "to_device", to_device)
    monkeypatch.setattr(hostmem, "alignment", lambda queue, context: 0)
    x = rng.random(100).astype(np.float32)
    assert_matches(f_affine(x, x[::-1].copy()), _affine(x, x[::-1]), ulp=4)
    assert len(uploads) == 2


def test_the_probe_is_turned_off_by_the_environment(queue, monkeypatch):
    monkeypatch.setenv("FUSEJIT_ZERO_COPY", "0")
    assert hostmem._probe(queue) == 0
    monkeypatch.setenv("FUSEJIT_ZERO_COPY", "1")
    is_host = all(d.type & cl.device_type.CPU and d.host_unified_memory for d in queue.context.devices)
    assert (hostmem._probe(queue) > 0) == bool(is_host)


def test_zero_size_and_0d_results(rng):
    f = fuse(lambda x, y: (x[:0] * 2, (x * y).max(), x + y))
    x, y = rng.standard_normal(7), rng.standard_normal(7)
    empty, top, total = f(x, y)
    assert empty.shape == (0,) and np.ndim(top) == 0
    assert_matches(top, (x * y).max())
    assert_matches(total, x + y)


def test_the_guarded_launcher_misses_whenever_the_signature_changes(rng):
    f = fuse(_affine)
    x, y = rng.random(300).astype(np.float32), rng.random(300).astype(np.float32)
    for _ in range(3):  # (the second call makes the guarded launcher)
        assert_matches(f(x, y), _affine(x, y), ulp=4)
    assert f._mono is not None
    ro = x.copy()
    ro.flags.writeable = False
    for args in [(x[:200], y[:200]), (x.astype(np.float64), y), (ro, y), (x, x),
                 (x[:150], x[150:]), (np.broadcast_to(x[:1], (300,)), y), (x, 2.5), (x, y)]:
        assert_matches(f(*args), _affine(*args), ulp=4)
    assert f.cache_info().hits > 0


def test_memory_mapped_files_read_in_place_and_written_in_place(tmp_path):
    # np.memmap data is page-aligned: large ones are wrapped where they lie, read-only pages
    # included (the device only reads them), and a function that writes its argument writes
    # the file's pages
    path = tmp_path / "data.f32"
    np.arange(BIG, dtype=np.float32).tofile(path)
    ro = np.memmap(path, np.float32, "r", shape=(BIG,))
    g = fuse(lambda a: a * 2 + 1)
    for _ in range(3):
        np.testing.assert_array_equal(g(ro), np.asarray(ro) * 2 + 1)
    rw = np.memmap(path, np.float32, "r+", shape=(BIG,))
    bump = fuse(lambda a: a.__iadd__(1))
    bump(rw)
    rw.flush()
    np.testing.assert_array_equal(np.fromfile(path, np.float32), np.arange(BIG) + 1)
