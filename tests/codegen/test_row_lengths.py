"""Runtime row lengths (fusejit/ir/rows.py): reductions over the last axis take the row length
at launch, so the lengths of one bucket (next power of two) share a program.
Every result is compared with NumPy (float64 references); the program counts are the point."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyopencl as cl

import fusejit
from fusejit.ir.rows import bucket

RNG = np.random.default_rng(11)
X = RNG.standard_normal((19, 300)).astype(np.float32)
W, B = RNG.standard_normal((2, 300)).astype(np.float32)


def stats(c: float) -> Any:
    """Several row reductions in one kernel (stages and row stores): sum, max, var, softmax;
    ``c`` makes each test's source its own (programs are shared by source in a process)."""
    def rowstats(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return x.sum(axis=-1) + c, x.max(axis=-1), np.var(x, axis=-1), \
            e / e.sum(axis=-1, keepdims=True)
    return rowstats


def norm(eps: float) -> Any:
    def layernorm(x, w, b):
        mu = np.mean(x, axis=-1, keepdims=True)
        d = x - mu
        return d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + eps) * w + b
    return layernorm


def _programs(f: Any) -> int:
    info = f.cache_info()
    return info.compiles + info.disk_hits


def _check(got: Any, want: Any) -> None:
    for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
        assert g.shape == w.shape and g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)


def _ref(fn: Any, *args: np.ndarray) -> Any:
    out = fn(*(a.astype(np.float64) for a in args))
    return tuple(o.astype(np.float32) for o in out) if isinstance(out, tuple) else \
        out.astype(np.float32)


def test_buckets():
    assert [bucket(n) for n in (1, 2, 16, 17, 100, 128, 129, 1000)] == [16, 16, 16, 32, 128, 128,
                                                                       256, 1024]


def test_many_lengths_match_numpy():
    """1, primes, odd and even lengths, bucket edges (16, 17, 33, 129)."""
    fn = stats(1.0)
    f = fusejit.fuse(fn)
    for n in (1, 2, 3, 7, 13, 16, 17, 33, 129):
        x = X[:, :n]
        _check(f(x), _ref(fn, x))


def test_one_program_per_bucket():
    """Odd, even and whole-vector lengths alike: the CPU kernels' vectors load at any
    alignment and a scalar tail takes the rest of the row."""
    fn = stats(2.0)
    f = fusejit.fuse(fn, dynamic=True)
    lengths = (33, 35, 40, 37, 42, 44, 47, 53, 56, 61, 63)  # bucket 64 (64: see gpu below)
    for n in lengths:
        _check(f(X[:, :n]), _ref(fn, X[:, :n]))
    assert _programs(f) == 1 and f.cache_info().traces == len(lengths)
    assert "n_r" in f.lower(X[:, :50]).source


def test_same_results_as_specialised_kernels():
    """A length whose specialised kernel has the same work-group shape gives the same bits
    (here the bucket's own length: the same vectors, no tail)."""
    fn = stats(3.0)
    dyn, static = fusejit.fuse(fn, dynamic=True), fusejit.fuse(fn, dynamic=False)
    for a, b in zip(dyn(X[:, :64]), static(X[:, :64])):
        np.testing.assert_array_equal(a, b)


def test_mean_divisor_and_row_weights():
    """np.mean's divisor is the row length at launch; weights of the row's length."""
    fn = norm(1e-5)
    f = fusejit.fuse(fn, dynamic=True)
    for n in (40, 47, 62, 33):  # (not 64: on GPUs a bucket's own length has its own program)
        args = (X[:, :n], W[:n], B[:n])
        _check(f(*args), _ref(fn, *args))
    assert _programs(f) == 1


def test_a_constant_equal_to_the_row_length_is_not_the_length():
    """A user's literal that happens to equal one row length must stay itself at others."""
    fn = lambda x: x.sum(axis=-1) / 40.0 + x.max(axis=-1) * 41  # noqa: E731
    f = fusejit.fuse(fn, dynamic=True)
    for n in (40, 48, 41):
        _check(f(X[:, :n]), _ref(fn, X[:, :n]))


def test_empty_rows_and_empty_batches():
    f = fusejit.fuse(lambda x: (x.sum(axis=-1), np.prod(x, axis=-1)), dynamic=True)
    for shape in ((19, 40), (19, 0), (0, 40), (19, 44), (0, 0)):
        x = np.ones(shape, np.float32) * 1.01
        got = f(x)
        want = (x.sum(axis=-1), np.prod(x, axis=-1))
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_device_array_views_of_a_wider_buffer(queue):
    import pyopencl.array as cla

    fn = stats(4.0)
    f = fusejit.fuse(fn, dynamic=True)
    xd = cla.to_device(queue, X)
    for n in (33, 45, 63):
        got = f(xd[:, :n])
        _check(tuple(g.get() for g in got), _ref(fn, X[:, :n]))
    assert _programs(f) == 1


def _softmax(x: Any) -> Any:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_batch_sizes_share_programs():
    """Twenty batch sizes (rows of 64, shuffled) on the CPU: the first is specialised, the
    rest take the batch at launch, whatever it is (odd or even, below or above a work-group
    of rows): two programs, where each rows-per-work-group choice and its parity were one."""
    if fusejit.default_queue().device.type & cl.device_type.GPU:
        return  # (GPU strategies: test_gpu_strategies_one_program_per_bucket)
    f = fusejit.fuse(_softmax)
    for m in np.random.default_rng(0).permutation(np.arange(2, 22)):
        x = RNG.standard_normal((m, 64)).astype(np.float32)
        _check(f(x), _ref(_softmax, x))
    assert _programs(f) == 2 and f.cache_info().traces == 20


def test_a_lowered_dynamic_batch_builds_once():
    """lower(ShapeDtype((None, 64))).compile() builds the one program every batch runs (a
    batch of one row is a shape of its own: a broadcastable extent)."""
    f = fusejit.fuse(_softmax)
    compiled = f.lower(fusejit.ShapeDtype((None, 64), np.float32, device=False)).compile()
    built = _programs(f)
    for m in (3, 100, 7, 2048):
        x = RNG.standard_normal((m, 64)).astype(np.float32)
        _check(compiled(x), _ref(_softmax, x))
    gpu = fusejit.default_queue().device.type & cl.device_type.GPU
    assert _programs(f) == built or gpu


def test_lower_a_fully_dynamic_signature():
    """f.lower(ShapeDtype((None, None))) builds kernels for runtime extents; calls of other
    batch sizes and row lengths then reuse its program (same bucket and classes)."""
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    f = fusejit.fuse(softmax)
    lowered = f.lower(fusejit.ShapeDtype((None, None), np.float32, device=False))
    assert "n_r" in lowered.source and "n_o" in lowered.source
    compiled = lowered.compile()
    for m, n in ((64, 601), (72, 1000), (128, 523)):  # bucket 1024
        x = RNG.standard_normal((m, n)).astype(np.float32)
        _check(compiled(x), _ref(softmax, x))
    # (lowered at 1024, the bucket's own length: GPUs build that one without row checks)
    gpu = fusejit.default_queue().device.type & cl.device_type.GPU
    assert _programs(f) == (2 if gpu else 1) and f.cache_info().traces == 4


def test_gpu_strategies_one_program_per_bucket(gpu_style: None):
    fn = stats(6.0)
    f = fusejit.fuse(fn, dynamic=True)
    for n in (129, 130, 131, 200, 255):  # bucket 256
        _check(f(X[:, :n]), _ref(fn, X[:, :n]))
    assert _programs(f) == 1
    _check(f(X[:, :256]), _ref(fn, X[:, :256]))  # the bucket's own length: no row checks
    assert _programs(f) == 2 and "n_r) break" not in f.lower(X[:, :256]).source
    fn = norm(2e-5)
    f = fusejit.fuse(fn, dynamic=True)
    for n in (3, 9, 7, 15):
        args = (X[:, :n], W[:n], B[:n])
        _check(f(*args), _ref(fn, *args))
    assert _programs(f) == 1
