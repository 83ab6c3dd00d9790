"""The public API surface: decorator forms, arguments, results, cache, lower()."""

from __future__ import annotations

import numpy as np
import pyopencl.array as cla
import pytest

import fusejit
from fusejit import fuse
from fusejit.testing import assert_matches


def gelu_np(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def test_decorator_forms(rng):
    x = rng.standard_normal(100).astype(np.float32)
    plain = fuse(gelu_np)
    configured = fuse(static_argnums=())(gelu_np)
    assert_matches(plain(x), gelu_np(x), ulp=8, atol=2e-7)
    assert_matches(configured(x), gelu_np(x), ulp=8, atol=2e-7)
    assert plain.__name__ == "gelu_np" and plain.__wrapped__ is gelu_np


def test_device_in_device_out(dev, queue, rng):
    x = rng.standard_normal((16, 33)).astype(np.float32)
    y = fuse(gelu_np)(dev(x))
    assert isinstance(y, cla.Array) and y.queue is not None
    assert_matches(y, gelu_np(x), ulp=8, atol=2e-7)


def test_host_in_host_out(rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    y = fuse(gelu_np)(x)
    assert isinstance(y, np.ndarray)
    assert_matches(y, gelu_np(x), ulp=8, atol=2e-7)


def test_one_kernel_and_one_trace_per_signature(rng):
    f = fuse(gelu_np)
    x = rng.standard_normal(256).astype(np.float32)
    low = f.lower(x)
    assert len(low.kernels) == 1
    for _ in range(3):
        f(x)
    assert f.trace_count == 1
    assert f.cache_info().misses == 1 and f.cache_info().hits == 2
    f(x.astype(np.float64))
    f(x[:10])
    assert f.trace_count == 3 and f.cache_info().currsize == 3
    f.cache_clear()
    assert f.cache_info().currsize == 0


def test_cache_hit_never_runs_python():
    calls = []

    @fuse
    def f(x):
        calls.append(1)
        return x * 2

    x = np.arange(8, dtype=np.int32)
    f(x), f(x), f(x + 1)
    assert len(calls) == 1


def test_scalar_argument_is_dynamic_static_is_baked(rng):
    @fuse
    def scale(x, a):
        return x * a

    x = rng.standard_normal(64).astype(np.float32)
    for a in (1.5, -2.0, 3.25):
        assert_matches(scale(x, a), x * a)
    assert scale.trace_count == 1  # a new value does not recompile

    static = fuse(lambda x, a: x * a, static_argnums=1)
    static(x, 1.5), static(x, 2.5)
    assert static.trace_count == 2
    assert "0x1.4p+1f" in static.lower(x, 2.5).source  # 2.5 baked in as an exact literal

    named = fuse(lambda x, *, n: x + n, static_argnames="n")
    assert_matches(named(x, n=2), x + 2)
    assert "s1_" not in named.lower(x, n=2).source


def test_results_keep_structure(rng):
    @fuse
    def f(x):
        return {"a": x + 1, "b": (x * 2, [x - 1])}

    x = rng.standard_normal(10).astype(np.float32)
    out = f(x)
    assert set(out) == {"a", "b"} and isinstance(out["b"], tuple) and isinstance(out["b"][1], list)
    assert_matches(out["b"][1][0], x - 1)
    assert len(f.lower(x).kernels) == 1  # three outputs, one kernel


def test_lower_shows_graph_kernels_and_source(rng):
    x = rng.standard_normal(32).astype(np.float32)
    low = fuse(gelu_np).lower(x)
    assert "tanh" in str(low.graph)
    (k,) = low.kernels
    assert k.name in low.source and "tanh(" in k.source
    assert "#pragma OPENCL FP_CONTRACT OFF" in low.source
    assert "elementwise" in k.reason


def test_source_is_deterministic(rng):
    x = rng.standard_normal(32).astype(np.float32)
    a = fuse(gelu_np).lower(x).source
    b = fuse(gelu_np).lower(x).source
    assert a == b


def test_returning_an_argument_returns_it(rng):
    x = rng.standard_normal(5).astype(np.float32)
    f = fuse(lambda x, y: (x, y + 1))
    a, b = f(x, x)
    assert a is x
    assert_matches(b, x + 1)


def test_fused_function_calling_fused_function(rng):
    inner = fuse(lambda x: np.exp(x) + 1)

    @fuse
    def outer(x):
        return inner(x) * 2

    x = rng.standard_normal(50).astype(np.float32)
    assert_matches(outer(x), (np.exp(x) + 1) * 2, ulp=8)
    assert len(outer.lower(x).kernels) == 1  # inlined, not a separate launch


def test_method_decoration(rng):
    class Model:
        def __init__(self, w):
            self.w = w

        @fuse
        def apply(self, x):
            return x * 2

    x = rng.standard_normal(4).astype(np.float32)
    assert_matches(Model(3).apply(x), x * 2)


def test_default_queue_is_usable():
    q = fusejit.default_queue()
    assert q.device is not None
    assert fusejit.default_queue() is q


def test_zero_size_returns_empty_without_launch():
    f = fuse(lambda x: x * 2 + 1)
    x = np.zeros((0, 3), np.float32)
    out = f(x)
    assert out.shape == (0, 3) and out.dtype == np.float32


def test_zero_d(rng):
    f = fuse(lambda x, y: x * y + 1)
    x = np.float32(3.0)
    y = np.asarray(2.0, np.float32)
    assert_matches(f(x, y), x * y + 1)


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_mixed_numpy_and_device_args(dev, n, rng):
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = fuse(lambda a, b: a * b)(dev(x), y)
    assert isinstance(out, cla.Array)
    assert_matches(out, x * y)


def test_results_return_their_memory_to_the_pool_when_dropped(dev, queue, rng):
    """No reference cycles on the call path: a dropped result frees its pooled buffer at once
    (otherwise every call allocates fresh device memory until the cyclic GC runs)."""
    import gc

    from fusejit.runtime.opencl.executable import memory_pool

    x = dev(rng.standard_normal((8, 16)).astype(np.float32))
    w = dev(rng.standard_normal(16).astype(np.float32))
    plain = fuse(lambda x, w: x * w)
    tree = fuse(lambda x, w: {"a": x * w, "b": (x + 1, [x - 1])})
    aliased = fuse(lambda x, w, b: x * w + b)
    pool = memory_pool(queue)
    gc.disable()
    try:
        for _ in range(2):  # compile, then settle
            plain(x, w), tree(x, w), aliased(x, w, w)
        before = pool.active_blocks
        for _ in range(20):
            plain(x, w), tree(x, w), aliased(x, w, w)
        assert pool.active_blocks == before
    finally:
        gc.enable()


def test_python_arithmetic_on_dynamic_scalars_stays_weak(rng):
    """NEP 50: Python computes ``1 - b`` on Python floats and keeps a (weak) Python float, so a
    float32 array times it stays float32; an explicit np.subtract gives a strong float64."""
    x = rng.standard_normal(16).astype(np.float32)

    @fuse
    def python_ops(x, b, n):
        return x * (1 - b) / (n + 1), x > -b

    got, mask = python_ops(x, 0.25, 3)
    assert_matches(got, x * (1 - 0.25) / (3 + 1))
    assert_matches(mask, x > -0.25)
    strong = fuse(lambda x, b: x * np.subtract(1.0, b))(x, 0.25)
    assert_matches(strong, x * np.subtract(1.0, 0.25))
    assert strong.dtype == np.float64


def test_many_outputs_respect_the_kernel_argument_limit(rng):
    """1 KiB of arguments is all OpenCL guarantees: 200 outputs need more than one kernel."""
    from fusejit.passes.partition import DeviceLimits, partition

    x = rng.standard_normal(8).astype(np.float32)
    f = fuse(lambda x: tuple(x * k for k in range(200)))
    low = f.lower(x)
    small = partition(low.graph, DeviceLimits(max_arg_bytes=1024))
    assert len(small.groups) >= 2
    assert all(len(g.stores) <= 127 for g in small.groups)
    for k, out in zip((0, 1, 199), (f(x)[0], f(x)[1], f(x)[199])):
        assert_matches(out, x * np.float32(k) if k else x * 0)


@pytest.mark.parametrize("shape", [(7, 5), (), (0, 3)])
def test_results_are_ordinary_pyopencl_arrays(queue, rng, shape):
    """Cached calls build their results from a prepared attribute dict, not through pyopencl's
    constructor: the arrays must be indistinguishable from ones pyopencl makes itself."""
    from fusejit.runtime.opencl.executable import memory_pool

    x = cla.to_device(queue, np.asarray(rng.standard_normal(shape), np.float32))
    f = fuse(lambda x: (x * 2, x + 1))
    for _ in range(3):  # full path, fast path, guarded launcher
        a, b = f(x)
        ref = cla.empty(queue, shape, np.float32, allocator=memory_pool(queue))
        for got in (a, b):
            assert type(got) is cla.Array
            assert set(vars(got)) == set(vars(ref))
            same = {k: v for k, v in vars(ref).items() if k not in ("base_data", "events")}
            assert {k: vars(got)[k] for k in same} == same
            assert got.flags.c_contiguous and got.queue is queue and got.offset == 0
            assert (got.base_data is None) == (got.size == 0)
        assert a.events is not b.events
        assert a.size == 0 or a.base_data is not b.base_data
        assert_matches(a, x.get() * 2)
        np.testing.assert_array_equal((a - b + 1).get(), (x.get() * 2) - (x.get() + 1) + 1)
        if a.size:
            a.fill(3.0)  # pyopencl's own kernels on it, recording their events
            assert a.events and not b.events
            assert_matches(b, x.get() + 1)
            np.testing.assert_array_equal(a.get(), np.full(shape, 3, np.float32))


def test_results_run_on_the_queue_of_their_arguments(queue, rng):
    """The launchers keep the last queue's pool and result templates: a call on another queue
    (also from another thread) must get results on its own queue."""
    import threading

    import pyopencl as cl

    other = cl.CommandQueue(queue.context)
    host = rng.standard_normal(64).astype(np.float32)
    f = fuse(lambda x: x * 3)
    errors: list[BaseException] = []

    def worker(q) -> None:
        try:
            x = cla.to_device(q, host)  # pyopencl arrays are not to be shared between threads
            for _ in range(200):
                y = f(x)
                assert y.queue is q
                assert_matches(y, host * 3)
        except BaseException as exc:  # noqa: BLE001 (re-raised below, in the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(q,)) for q in (queue, other) * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def test_an_array_without_a_queue_is_refused_with_a_hint(dev, rng):
    x = dev(rng.standard_normal(8).astype(np.float32))
    f = fuse(lambda x: x + 1)
    for _ in range(3):  # first call, then the cached paths
        with pytest.raises(ValueError, match="has no queue"):
            f(x.with_queue(None))
        f(x)
