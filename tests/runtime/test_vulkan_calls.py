"""How Vulkan calls reach the device: rows kept in registers as runs of adjacent elements,
calls recorded together while the device is busy, and the wait for the queue
(fusejit/runtime/vulkan/record.py)."""

from __future__ import annotations

import numpy as np
import pytest

from fusejit import fuse
from fusejit.bench.workloads import softmax

# every test here runs on the Vulkan device (skipped with the reason where there is none)
pytestmark = pytest.mark.parametrize("device", ["vulkan"], indirect=True)


@pytest.fixture
def fv(device):
    import fusejit.vulkan

    return fusejit.vulkan


def _softmax(a):
    return softmax(np, a)


@pytest.mark.parametrize("run", ["1", "4"])
@pytest.mark.parametrize("cols", [128, 1024])
def test_row_slots_in_runs_of_adjacent_elements(fv, glsl_barriers, rng, monkeypatch, run,
                                                 cols) -> None:
    """Rows of one subgroup (GLSL barriers) kept in registers give each lane one element every
    32, or runs of 4 adjacent elements (FUSEJIT_VULKAN_ROW_RUN=4): every element is read,
    combined and written in its own place, whichever slot of which lane holds it."""
    monkeypatch.setenv("FUSEJIT_VULKAN_ROW_RUN", run)
    rows = 9
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[np.arange(rows), (np.arange(rows) * 37 + 5) % cols] = 10.0  # maxima at other slots
    x[np.arange(rows), (np.arange(rows) * 53 + 2) % cols] = -10.0
    d = fv.to_device(x)
    f = fuse(lambda a: (a - a.max(axis=1, keepdims=True), a.min(axis=1), _softmax(a)))
    got = f(d)
    np.testing.assert_array_equal(got[0].get(), x - x.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(got[1].get(), x.min(axis=1))
    np.testing.assert_allclose(got[2].get(), _softmax(x), rtol=1e-4, atol=1e-7)
    assert ("4 * ((k / 4) * 32 + ly_)" in f.lower(d).source) == (run == "4")


@pytest.mark.parametrize("how", ["spin", "block"])
def test_finish_waits_until_the_queue_is_empty(fv, monkeypatch, how) -> None:
    """finish() returns once everything submitted has run, whether it polls or blocks
    (wgpuDevicePoll's answer is the low byte of what cffi reads: see runtime/vulkan/record.py)."""
    monkeypatch.setenv("FUSEJIT_VULKAN_WAIT", how)
    dev = fv.default_device()
    if not dev.recorder.raw:
        pytest.skip("wgpu-py's internals changed: finish() takes the public path")
    f = fuse(lambda a: a * np.float32(2) + np.float32(1))
    x = fv.to_device(np.ones(1 << 18, np.float32))
    for _ in range(3):
        y = f(x)
        dev.finish()
        assert dev.recorder._poll(dev.recorder._dev, False, dev.recorder._ffi.NULL) & 0xFF == 1
    np.testing.assert_array_equal(y.get(), np.full(1 << 18, 3, np.float32))


def test_calls_recorded_together_keep_their_order_and_inputs(fv, rng, monkeypatch) -> None:
    """Calls made while the device is busy share one command buffer (record.Recorder): a call
    reading the one before, outputs whose pooled buffers the next call writes, uploads into
    buffers a recorded call still reads, scalars and view offsets in uniform blocks (more calls
    than a kernel has blocks) and read-backs keep NumPy's results. The queue is made to look
    busy, so every call is recorded together."""
    rec = fv.default_device().recorder
    if not rec.raw:
        pytest.skip("wgpu-py's internals changed: calls are submitted one by one")
    real = rec._poll
    monkeypatch.setattr(rec, "_poll", lambda d, wait, n: real(d, wait, n) if wait else 0)
    step = fuse(lambda a: np.abs(a * np.float32(1.5) - np.float32(0.25)))
    rows = fuse(lambda a: a - a.max(axis=-1, keepdims=True))
    scaled = fuse(lambda a, s: a * s)
    x = rng.standard_normal((8, 256)).astype(np.float32)
    z, want = fv.to_device(x), x
    for _ in range(6):  # each output's buffer returns to the pool as the next call runs
        z = rows(step(z))
        want = np.abs(want * np.float32(1.5) - np.float32(0.25))
        want = want - want.max(axis=-1, keepdims=True)
    assert rec._held  # (recorded, not yet submitted)
    np.testing.assert_array_equal(z.get(), want)
    outs = [rows(fv.to_device(x + np.float32(i))) for i in range(4)]  # uploads in between
    outs += [scaled(fv.to_device(x), np.float32(i)) for i in range(4)]  # uniforms in between
    for i, o in enumerate(outs[:4]):
        np.testing.assert_array_equal(o.get(), (x + np.float32(i)) -
                                      (x + np.float32(i)).max(axis=-1, keepdims=True))
    for i, o in enumerate(outs[4:]):
        np.testing.assert_array_equal(o.get(), x * np.float32(i))
    d = fv.to_device(x)
    outs = [scaled(d, np.float32(i)) for i in range(20)]  # more calls than uniform blocks
    assert rec._held
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o.get(), x * np.float32(i))
    views = [rows(d[i:]) for i in range(5)]  # a view's offset is a uniform scalar too
    for i, v in enumerate(views):
        np.testing.assert_array_equal(v.get(), x[i:] - x[i:].max(axis=-1, keepdims=True))
    np.testing.assert_array_equal(rows(x + np.float32(1)),  # NumPy in and out
                                  (x + 1) - (x + 1).max(axis=-1, keepdims=True))


def test_threads_recording_calls_together_keep_their_own_scalars(fv, rng, monkeypatch) -> None:
    """Calls from several threads into one command buffer each read their own uniform block
    (a call holds the recorder's lock from its uniform writes to its submit)."""
    import threading

    rec = fv.default_device().recorder
    if not rec.raw:
        pytest.skip("wgpu-py's internals changed: calls are submitted one by one")
    real = rec._poll
    monkeypatch.setattr(rec, "_poll", lambda d, wait, n: real(d, wait, n) if wait else 0)
    scaled = fuse(lambda a, s: a * s + s)
    x = rng.standard_normal(4096).astype(np.float32)
    d = fv.to_device(x)
    scaled(d, np.float32(0))  # (built before the threads start)
    bad: list[int] = []

    def work(t: int) -> None:
        outs = [(s, scaled(d, np.float32(s))) for s in range(t * 100, t * 100 + 30)]
        bad.extend(s for s, o in outs if not np.array_equal(o.get(), x * np.float32(s) +
                                                             np.float32(s)))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert bad == []


def test_arrays_collected_in_garbage_cycles_pool_live_buffers(fv) -> None:
    """Arrays that die in a garbage cycle (as a traceback's frames hold them) are finalized
    together with what only they reach; their buffers must come back to the pool alive, and
    every later array of that size get a working one."""
    import gc

    x = np.arange(1000, dtype=np.float32)
    for _ in range(8):
        a = fv.to_device(x)
        a.cycle = a
        del a
        gc.collect()
        b = fv.to_device(x + 1)
        assert np.array_equal(b.get(), x + 1)
        b.cycle = b
        del b
    gc.collect()
    for _ in range(3):
        c = fv.to_device(x + 2)
        assert np.array_equal(c.get(), x + 2)


def test_status_buffer_makes_an_out_of_bounds_gather_raise(fv) -> None:
    """The kernel's status flag (runtime/status.py) on Vulkan: an index outside its axis
    raises IndexError with NumPy and Vulkan arrays, a NumPy argument written in place is left
    alone, and the flag is clear for the next call. (A one-element axis: the gather's check
    without its clamp.)"""
    from fusejit.errors import DeviceIndexError

    x = np.array([3.0, 4.0], np.float32)
    f = fuse(lambda x, i: np.take(x[:1], i) * 2)
    ok, bad = np.array([0, -1], np.int32), np.array([0, 3], np.int32)
    for place in (np.asarray, fv.to_device):
        with pytest.raises(DeviceIndexError):
            f(place(x), place(bad))
        got = f(place(x), place(ok))
        np.testing.assert_array_equal(got if isinstance(got, np.ndarray) else got.get(),
                                      [6.0, 6.0])

    def write(x, i):
        x[:1] += np.take(x[:1], i)

    y = x.copy()
    with pytest.raises(IndexError):
        fuse(write)(y, np.array([-2], np.int32))
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("raw", [True, False])
def test_calls_on_new_buffers_each_time_bind_their_own(fv, rng, monkeypatch, raw) -> None:
    """Outputs kept and fed to the next function give every call buffers no cached bind group
    binds (binds.py): more buffer sets than a kernel keeps groups for, made through
    wgpu-native's C function (``raw``) or wgpu-py's API, each call reads and writes its own.
    Recorded together, so groups dropped from the cache are still in unsubmitted calls."""
    from fusejit.runtime.vulkan import binds

    monkeypatch.setattr(binds, "CACHE", 3)
    rec = fv.default_device().recorder
    if rec.raw:
        real = rec._poll
        monkeypatch.setattr(rec, "_poll", lambda d, wait, n: real(d, wait, n) if wait else 0)
    step = fuse(lambda a, b: a * np.float32(0.5) + b)
    rows = fuse(lambda a: a - a.max(axis=-1, keepdims=True))
    x = rng.standard_normal((4, 256)).astype(np.float32)
    step(fv.to_device(x), fv.to_device(x)), rows(fv.to_device(x))  # (built)
    for f in (step, rows):
        for compiled in f._fast.values():
            for pipe in compiled.executable.pipelines:
                if not raw:
                    pipe.bind_groups.raw = False
                assert pipe.bind_groups.raw == raw
    ins = [fv.to_device(x + np.float32(i)) for i in range(8)]
    outs, want = [], []
    for i in range(8):
        y = step(ins[i], ins[(i + 3) % 8])
        outs += [y, rows(y)]
        w = (x + np.float32(i)) * np.float32(0.5) + (x + np.float32((i + 3) % 8))
        want += [w, w - w.max(axis=-1, keepdims=True)]
    for o, w in zip(outs, want):
        np.testing.assert_array_equal(o.get(), w)


def test_a_numpy_array_passed_twice_is_uploaded_once_and_written_back(fv) -> None:
    """One NumPy array as two parameters (read twice, or written in place and read): one
    upload, one buffer back to the pool, NumPy's result."""
    x = np.linspace(-2, 2, 300, dtype=np.float32)
    np.testing.assert_array_equal(fuse(lambda a, b: a * b + a)(x, x), x * x + x)

    def write(a, b):
        a[:] = a * np.float32(2) + b

    y = x.copy()
    fuse(write)(y, x)
    np.testing.assert_array_equal(y, x * np.float32(2) + x)
    dev = fv.default_device()
    free = sum(len(v) for v in dev._free.values())
    fuse(lambda a, b: a - b)(x, x)
    assert sum(len(v) for v in dev._free.values()) == free  # (none lost, none added twice)


@pytest.mark.filterwarnings("ignore::fusejit.compile.recompiles.RecompileWarning")
def test_the_inline_cache_runs_only_calls_of_its_signature(fv, rng) -> None:
    """A repeated call on device arrays runs through its signature's generated guard
    (guard.py); any argument that no longer matches (shape, dtype, strides, a view's offset,
    one buffer passed twice, a scalar's type, NumPy in place of a device array) takes the
    keyed path and gets NumPy's result."""
    f = fuse(lambda a, b, s: a * s + b)
    x = rng.standard_normal((6, 40)).astype(np.float32)
    y = rng.standard_normal((6, 40)).astype(np.float32)
    dx, dy = fv.to_device(x), fv.to_device(y)
    for _ in range(3):
        np.testing.assert_array_equal(f(dx, dy, 2.0).get(), x * np.float32(2.0) + y)
    first = f._mono
    assert first is not None and first.__name__ == "guarded"
    hits = f._hits
    np.testing.assert_array_equal(f(dx, dy, 3.0).get(), x * np.float32(3.0) + y)
    assert f._hits == hits + 1
    both = fv.to_device(np.concatenate([y, x]))  # an offset alone (the guard in place)
    np.testing.assert_array_equal(f(both[6:], dy, 2.0).get(), x * np.float32(2.0) + y)
    cases = [
        ((dx[:3], dy[:3], 2.0), x[:3] * np.float32(2) + y[:3]),  # shape
        ((dx.T, dy.T, 2.0), x.T * np.float32(2) + y.T),  # shape and strides
        ((fv.to_device(x.T.copy()).T, dy, 2.0), x * np.float32(2) + y),  # strides alone
        ((dx[1:], dy[1:], 2.0), x[1:] * np.float32(2) + y[1:]),  # offset
        ((dx, dx, 2.0), x * np.float32(2) + x),  # one buffer twice
        ((dx, dy, 2), x * np.float32(2) + y),  # an int scalar
        ((dx, dy, True), x * np.float32(1) + y),  # a bool scalar
        ((x, dy, 2.0), x * np.float32(2) + y),  # NumPy and a device array
        ((fv.to_device(x.astype(np.int32)), dy, 2.0), x.astype(np.int32) * 2.0 + y),  # dtype
        ((dx, dy, 2.0), x * np.float32(2) + y),  # back to the first signature
    ]
    for args, want in cases:
        f(dx, dy, 2.0)  # (the first signature's guard in place: the one each case must miss)
        assert f._mono is first
        np.testing.assert_allclose(f(*args).get(), want, rtol=1e-6)
    def flip(a, b):
        a[:] = b[::-1] * np.float32(2)

    h = fuse(flip)
    v = rng.standard_normal(4096).astype(np.float32)
    for _ in range(3):
        h(fv.to_device(v), fv.to_device(v))
    d = fv.to_device(v)
    h(d, d)  # one buffer as both: the keyed path's overlap analysis, not the guard
    np.testing.assert_array_equal(d.get(), v[::-1] * np.float32(2))
    g = fuse(lambda a: (a + 1, a.sum(axis=0)))  # a pytree of results through the guard
    for _ in range(3):
        s, t = g(dx)
    np.testing.assert_array_equal(s.get(), x + 1)
    np.testing.assert_allclose(t.get(), x.sum(axis=0), rtol=1e-5)
    assert g._mono is not None


@pytest.mark.parametrize("raw", [True, False])
def test_read_backs_of_any_offset_and_length(fv, monkeypatch, raw) -> None:
    """``get()`` copies through a mapped staging buffer with wgpu-native's C functions
    (record.Recorder.read) or wgpu-py's API: views starting and ending anywhere in a buffer of
    bytes (not whole 4-byte words), of floats, and one staging buffer used again and again
    read what NumPy has."""
    dev = fv.default_device()
    if not raw:
        monkeypatch.setattr(dev.recorder, "read", lambda *a, **k: None)
    elif not dev.recorder.raw:
        pytest.skip("wgpu-py's internals changed: read-backs take its API")
    b = np.arange(37, dtype=np.uint8) * np.uint8(7)
    db = fv.to_device(b)
    for lo, hi in ((0, 37), (1, 2), (3, 8), (5, 36), (36, 37), (4, 4)):
        np.testing.assert_array_equal(db[lo:hi].get(), b[lo:hi])
    x = np.linspace(-3, 3, 5000, dtype=np.float32)
    dx = fv.to_device(x)
    for step in (1, 3):
        np.testing.assert_array_equal(dx[7::step].get(), x[7::step])
    f = fuse(lambda a: a * np.float32(2))
    for i in range(3):  # (a kernel's output read back after each call)
        np.testing.assert_array_equal(f(dx[i:]).get(), x[i:] * np.float32(2))


def test_static_and_bound_arguments_on_device_arrays(fv, rng) -> None:
    """Signatures with static arguments or a bound ``self`` (which OpenCL's inline cache
    checks itself) take Vulkan's keyed path and stay right when the static value or the
    object's state changes."""
    class Scale:
        def __init__(self) -> None:
            self.alpha = 2.0

        def apply(self, a):
            return a * self.alpha

    x = rng.standard_normal(300).astype(np.float32)
    dx = fv.to_device(x)
    s = Scale()
    method = fuse(s.apply)
    scaled = fuse(lambda a, n: a * n + n, static_argnums=1)
    for n in (2, 2, 2, 3, 3, 2):
        np.testing.assert_array_equal(scaled(dx, n).get(), x * np.float32(n) + np.float32(n))
    for alpha in (2.0, 2.0, 2.0, 5.0, 5.0):
        s.alpha = alpha
        np.testing.assert_array_equal(method(dx).get(), x * np.float32(alpha))
