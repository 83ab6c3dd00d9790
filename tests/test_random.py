"""fusejit.random: bit-exact with NumPy's Philox streams, fused, keyed, launch-independent; and
np.random refused while tracing.

The oracles are NumPy's own generator (``Generator(Philox(key=k)).random`` for the uniform
streams, ``Philox.random_raw`` for the raw 64-bit outputs) and transforms written here in plain
NumPy / Python ints on those outputs, independent of fusejit's graph.
"""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys
import threading

import numpy as np
import pyopencl.array as cla
import pytest

import fusejit
import fusejit.api
import fusejit.runtime.autotune
from fusejit import default_queue, fuse
from fusejit import random as fr
from fusejit.testing import assert_matches

KEYS = [0, 1, 5, 2**64 + 7, 2**128 - 1, 123456789012345678901234567890]
# sizes around the vector width, the 4-word block and the 4096-element vectorisation threshold
SHAPES = [(), (1,), (7,), (3, 5), (2, 3, 4), (1001,), (4097,), (0,), (4, 0, 2), (3, 1, 1393)]
FLOATS = [np.float32, np.float64]


def np_uniform(k: np.ndarray, shape: tuple, dtype) -> np.ndarray:
    return np.random.Generator(np.random.Philox(key=k)).random(shape, dtype=dtype)


def np_normal(k: np.ndarray, shape: tuple, dtype) -> np.ndarray:
    """Box-Muller on pairs of NumPy's uniform stream, cosine half (fusejit.random.normal)."""
    t = np.dtype(dtype).type
    u = np_uniform(k, (2 * math.prod(shape),), dtype)
    z = np.sqrt(t(-2.0) * np.log(t(1.0) - u[0::2])) * np.cos(t(2.0 * np.pi) * u[1::2])
    return z.reshape(shape)


def np_integers(k: np.ndarray, low: int, high: int, shape: tuple, dtype) -> np.ndarray:
    """Lemire's multiply-shift on NumPy's raw 64-bit outputs, in Python ints."""
    raw = np.random.Philox(key=k).random_raw(math.prod(shape))
    values = [low + ((int(b) * (high - low)) >> 64) for b in np.atleast_1d(raw)]
    return np.array(values[:math.prod(shape)], dtype=dtype).reshape(shape)


def _host(x):
    return x.get() if isinstance(x, cla.Array) else np.asarray(x)


# -- bit-exactness with NumPy ----------------------------------------------------------------------


def test_op_references_are_numpys_philox_and_exact_products():
    """The PHILOX and MULHI rows of the op table (eval_graph, validate, folding) against
    NumPy's Philox outputs and Python's exact integers."""
    from fusejit.ir.philox import mulhi, philox

    for seed in KEYS:
        k = fr.key(seed)
        j = np.arange(41, dtype=np.uint64)
        words = philox(k[0], k[1], j // np.uint64(4) + np.uint64(1), 0, 0, 0, j % np.uint64(4))
        assert np.array_equal(words, np.random.Philox(key=k).random_raw(41))
    a = np.array([0, 1, 2**32 - 1, 2**32, 2**63, 2**64 - 1, 0x9E3779B97F4A7C15], np.uint64)
    b = a[:, None]
    want = [[(int(x) * int(y)) >> 64 for x in a] for y in a]
    assert mulhi(a, b).tolist() == want
    small = np.array([0, 1, 200, 255], np.uint8)
    assert mulhi(small, small[:, None]).tolist() == [[(int(x) * int(y)) >> 8 for x in small]
                                                     for y in small]



@fuse(static_argnums=1)
def _uniform_many(k, dtype):
    return tuple(fr.uniform(k, s, dtype) for s in SHAPES)


@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_is_numpy_philox_bit_for_bit(dtype):
    misses = _uniform_many.cache_info().misses
    for seed in KEYS:
        k = fr.key(seed)
        for shape, got in zip(SHAPES, _uniform_many(k, dtype)):
            assert_matches(np.asarray(got), np_uniform(k, shape, dtype),
                           what=f"uniform key={seed} shape={shape} {dtype.__name__}")
    assert _uniform_many.cache_info().misses == misses + 1  # (one compile for all keys)


@pytest.mark.parametrize("dtype", FLOATS)
def test_eager_uniform_and_key_arrays(dtype):
    k = fr.key(2**70 + 3)
    assert np.array_equal(np.random.Philox(key=k).state["state"]["key"], k)
    assert np.random.Philox(key=2**70 + 3).state["state"]["key"].tolist() == k.tolist()
    got = fr.uniform(k, (5, 7), dtype)
    assert isinstance(got, np.ndarray)
    assert_matches(got, np_uniform(k, (5, 7), dtype))


def test_eager_on_a_device_key_returns_a_device_array():
    k = fr.key(4)
    dev = fr.uniform(cla.to_device(default_queue(), k), 9, np.float32)
    assert isinstance(dev, cla.Array)
    assert_matches(dev.get(), np_uniform(k, (9,), np.float32))


def test_flat_prefix_does_not_depend_on_shape():
    f = fuse(lambda k: tuple(fr.uniform(k, s, np.float32) for s in [24, (2, 3, 4), 13]))
    whole, cube, head = f(fr.key(11))
    assert np.array_equal(cube.reshape(-1), whole)
    assert np.array_equal(head, whole[:13])


# -- launch configuration --------------------------------------------------------------------------


def _gpu_style(monkeypatch):
    """Lower as for a GPU (16-byte vectors, per-lane scalar ops, work-groups of 256, tree
    reductions in local memory) while running on the test device."""
    from fusejit.runtime.opencl import backend as opencl  # the backend that asks for device facts

    real = opencl.device_info

    def fake(device):
        info = real(device)
        return dataclasses.replace(info, limits=dataclasses.replace(info.limits, is_gpu=True))
    monkeypatch.setattr(opencl, "device_info", fake)


def _mixed(x, k):
    """Random values in an elementwise kernel, a row reduction's prologue and epilogue."""
    u = fr.uniform(k, x.shape, np.float32)
    v = x * u
    return u, v - v.max(axis=1, keepdims=True), (fr.integers(k, 1000, shape=x.shape) + x).sum(1)


def _mixed_reference(x, k):
    u = np_uniform(k, x.shape, np.float32)
    v = x * u
    ints = np_integers(k, 0, 1000, x.shape, np.int64)
    return u, v - v.max(axis=1, keepdims=True), (ints + x).sum(1)


@pytest.mark.parametrize("gpu_style", [False, True])
def test_same_values_whatever_the_lowering(gpu_style, monkeypatch):
    if gpu_style:
        _gpu_style(monkeypatch)
    k = fr.key(99)
    f = fuse(_mixed)
    for shape in [(3, 2053), (5, 7)]:  # vectors with a tail; scalar
        x = np.linspace(-1, 1, math.prod(shape), dtype=np.float32).reshape(shape)
        got = f(x, k)
        want = _mixed_reference(x, k)
        assert_matches(got[0], want[0], what=f"uniform {shape}")
        assert_matches(got[1], want[1], what=f"row epilogue {shape}")
        assert_matches(got[2], want[2], ulp=64, what=f"row sum {shape}")


@pytest.mark.parametrize("gpu_style", [False, True])
def test_same_values_in_split_reductions(gpu_style, monkeypatch):
    """A long reduction split over work-groups and combined by a second kernel sees the same
    values (argmax and max are exact whatever the order; the sum within its order bound)."""
    if gpu_style:
        _gpu_style(monkeypatch)
    k, n = fr.key(12), 1 << 18
    f = fuse(lambda k: (np.argmax(fr.uniform(k, n)), fr.uniform(k, n, np.float32).max(),
                        fr.uniform(k, n).sum()))
    u64, u32 = np_uniform(k, (n,), np.float64), np_uniform(k, (n,), np.float32)
    arg, top, total = f(k)
    assert int(arg) == int(np.argmax(u64)) and float(top) == float(u32.max())
    assert abs(float(total) - u64.sum()) <= (math.log2(n) + 13) * 2**-52 * n


def test_same_values_with_autotuned_launches(monkeypatch, tmp_path):
    monkeypatch.setattr(fusejit.runtime.autotune, "MIN_ITEMS", 1 << 10)  # tune small launches
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    k = fr.key(3)
    n = 1 << 14
    want = np_uniform(k, (n,), np.float32)
    for tune in (False, True):
        f = fuse(lambda k: fr.uniform(k, n, np.float32), autotune=tune)
        for _ in range(3):  # the second call of a tuned kernel times candidates
            assert_matches(f(k), want, what=f"autotune={tune}")


def test_float64_streams_need_fp64_and_float32_ones_do_not(monkeypatch):
    from fusejit.runtime.opencl import backend as opencl  # the backend that asks for device facts

    real = opencl.device_info
    monkeypatch.setattr(opencl, "device_info",
                        lambda device: dataclasses.replace(real(device), has_fp64=False))
    k = fr.key(6)
    f = fuse(lambda k: (fr.uniform(k, 10, np.float32), fr.normal(k, 10, np.float32),
                        fr.bernoulli(k, 0.25, 10), fr.integers(k, -3, 3, 10)))
    assert_matches(f(k)[0], np_uniform(k, (10,), np.float32))
    with pytest.raises(fusejit.UnsupportedDTypeError, match="float64"):
        fuse(lambda k: fr.uniform(k, 10, np.float64))(k)


# -- fusion, no recompiles -------------------------------------------------------------------------


@fuse
def dropout(x, k):
    return np.where(fr.bernoulli(k, 0.9, x.shape), x / 0.9, 0)


def test_dropout_is_one_kernel_and_a_new_key_does_not_recompile():
    x = np.arange(1, 3001, dtype=np.float32).reshape(60, 50)
    lowered = dropout.lower(x, fr.key(0))
    assert len(lowered.kernels) == 1
    assert not lowered.module.uses_fp64  # float32 work needs no fp64 device
    masks = []
    for step in range(4):
        k = fr.key(step)
        got = dropout(x, k)
        keep = np_uniform(k, x.shape, np.float32) < np.float32(0.9)
        assert_matches(got, np.where(keep, x / np.float32(0.9), np.float32(0)))
        masks.append(got != 0)
    assert dropout.cache_info().misses == 1
    assert not np.array_equal(masks[0], masks[1])  # a new key, a new mask
    assert 0.85 < np.mean(masks) < 0.95


@pytest.mark.parametrize("gpu_style", [False, True])
def test_the_lanes_of_a_vector_share_one_philox_block(gpu_style, monkeypatch):
    """8 lanes for kernels that draw random numbers, and every lane of a float32 vector calls
    the (pure) block function with the same operands, so the block is computed once."""
    if gpu_style:
        _gpu_style(monkeypatch)
    x = np.ones(1 << 13, np.float32)
    kernel = fuse(dropout._fn).lower(x, fr.key(0)).module.kernels[0]
    assert kernel.vec == 8
    calls = re.findall(r"fj_philox4x64\(([^;]*?)\), ", kernel.source)
    assert len(calls) == 8 and len(set(calls)) == 1, calls


def test_bernoulli_p_is_an_argument_and_exact():
    f = fuse(lambda k, p: fr.bernoulli(k, p, (40, 25)))
    k = fr.key(8)
    u = np_uniform(k, (40, 25), np.float32)
    for p in (0.0, 0.3, 0.5, 1 / 3, 1.0):
        got = f(k, p)
        assert got.dtype == np.bool_
        assert_matches(got, u < np.float32(p), what=f"p={p}")
    assert f.cache_info().misses == 1
    assert fr.bernoulli(k, 1.0, 50).all() and not fr.bernoulli(k, 0.0, 50).any()
    assert_matches(fr.bernoulli(k, np.float64(0.3), (40, 25)), u < np.float32(0.3))
    p = np.linspace(0, 1, 25)  # an array of probabilities broadcast along the rows
    assert_matches(fr.bernoulli(k, p, (40, 25)), u < p.astype(np.float32))


# -- the other samplers ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_normal_matches_its_reference_transform(dtype):
    k = fr.key(21)
    f = fuse(lambda k: tuple(fr.normal(k, s, dtype) for s in [(7,), (33, 31), (4097,)]))
    eps = np.finfo(dtype).eps
    assert f.lower(k).module.uses_fp64 == (dtype is np.float64)
    for got, shape in zip(f(k), [(7,), (33, 31), (4097,)]):
        # log, sqrt and cos are the device's: within their ULP bounds (absolute near cos = 0)
        assert_matches(got, np_normal(k, shape, dtype), ulp=32, atol=256 * eps)


def test_normal_distribution():
    n = 200_000
    for dtype in FLOATS:
        z = np.sort(fr.normal(fr.key(2024), n, dtype).astype(np.float64))
        assert abs(z.mean()) < 5 / math.sqrt(n)
        assert abs(z.var() - 1) < 5 * math.sqrt(2 / n)
        cdf = 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
        ks = max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n))
        assert ks < 1.95 / math.sqrt(n)  # Kolmogorov-Smirnov at the 0.1% level
        assert np.isfinite(z).all() and np.abs(z).max() < (8.6 if dtype is np.float64 else 5.8)


INTEGER_CASES = [
    (np.int64, 0, 10), (np.int64, -(2**63), 2**63 - 1), (np.int8, -128, 128),
    (np.uint8, 3, 250), (np.int32, -5, 5), (np.uint32, 0, 2**32), (np.uint64, 0, 2**64),
    (np.int16, 7, 8), (np.uint16, 100, 60000), (np.int64, -(2**63), 2**63),
]


def test_integers_match_the_multiply_shift_reference():
    k = fr.key(17)
    f = fuse(lambda k: tuple(fr.integers(k, lo, hi, (37, 29), d) for d, lo, hi in INTEGER_CASES))
    for got, (dtype, low, high) in zip(f(k), INTEGER_CASES):
        assert_matches(got, np_integers(k, low, high, (37, 29), dtype), what=f"{dtype} {low}")
        assert got.min() >= low and got.max() < high


def test_eager_integers_take_new_bounds_without_recompiling():
    k = fr.key(9)
    before = fr._EAGER["integers"].cache_info().misses
    for low, high in [(0, 10), (-50, 50), (7, 2**40)]:
        assert_matches(fr.integers(k, low, high, (3, 11)), np_integers(k, low, high, (3, 11),
                                                                        np.int64))
    assert fr._EAGER["integers"].cache_info().misses == before + 1


def test_integers_are_uniform():
    counts = np.bincount(fr.integers(fr.key(5), 6, shape=60_000), minlength=6)
    assert np.all(np.abs(counts - 10_000) < 5 * math.sqrt(10_000 * 5 / 6))


# -- keys ------------------------------------------------------------------------------------------


def test_split_and_fold_in_are_the_same_on_host_and_device():
    k = fr.key(42)

    @fuse
    def derive(k, step):
        return fr.split(k, 3), fr.fold_in(k, step), fr.uniform(fr.fold_in(k, step), 4)

    for step in (0, 1, 2**40, -1):
        split, folded, u = derive(k, step)
        assert_matches(split, fr.split(k, 3))
        assert_matches(folded, fr.fold_in(k, step))
        assert_matches(u, np_uniform(fr.fold_in(k, step), (4,), np.float64))
    assert derive.cache_info().misses == 1  # the step is a kernel argument
    keys = {tuple(x) for x in fr.split(k, 100)} | {tuple(fr.fold_in(k, i)) for i in range(100)}
    assert len(keys | {tuple(k)}) == 201
    a, b = fr.split(k)
    n = 20_000
    streams = [fr.uniform(key, n) for key in (k, a, b, fr.fold_in(k, 0), fr.fold_in(a, 0))]
    corr = np.corrcoef(streams)
    assert np.all(np.abs(corr[np.triu_indices(5, 1)]) < 5 / math.sqrt(n))  # uncorrelated
    assert fr.fold_in(k, -1).tolist() == fr.fold_in(k, 2**64 - 1).tolist()


def test_validate_mode_evaluates_the_random_ops():
    f = fuse(lambda x, k: x * fr.normal(k, x.shape, np.float32) + fr.integers(k, 4, shape=x.shape),
             validate=True)
    x = np.linspace(0, 1, 300, dtype=np.float32)
    f(x, fr.key(1))


@pytest.mark.parametrize("call,error,fragment", [
    (lambda: fr.uniform(np.array([1, 2]), 3), TypeError, "fusejit.random.key(seed)"),
    (lambda: fr.uniform(7, 3), TypeError, "uint64 array of shape (2,)"),
    (lambda: fr.uniform(fr.key(0), 3, np.float16), TypeError, "float32 or float64"),
    (lambda: fr.uniform(fr.key(0), (2, -1)), ValueError, "negative"),
    (lambda: fr.normal(fr.key(0), 3, np.int32), TypeError, "float32 or float64"),
    (lambda: fr.bernoulli(fr.key(0), 1.5, 3), ValueError, "[0, 1]"),
    (lambda: fr.bernoulli(fr.key(0), np.ones(4), 3), ValueError, "broadcast"),
    (lambda: fr.integers(fr.key(0), 5, 5), ValueError, "low >= high"),
    (lambda: fr.integers(fr.key(0), -1, 10, dtype=np.uint8), ValueError, "out of bounds"),
    (lambda: fr.integers(fr.key(0), 0, 2.5), TypeError, "Python ints"),
    (lambda: fr.integers(fr.key(0), 0, 2, dtype=np.float32), TypeError, "integer dtype"),
    (lambda: fr.key(-1), ValueError, "2**128"),
    (lambda: fuse(lambda x: fr.key(x.sum()))(np.arange(3)), TypeError, "fold_in(key(0), seed)"),
])
def test_bad_arguments_are_named(call, error, fragment):
    with pytest.raises(error, match=None) as info:
        call()
    assert fragment in str(info.value)


def test_a_seed_argument_is_specialised_on():
    """A Python int seed passed to the fused function is a value the trace needs: the call
    specialises on it (issue 30) and gives key(seed); fold_in(key(0), seed) avoids a compile
    per seed."""
    f = fuse(lambda s: fr.key(s))
    for seed in (3, 5):
        np.testing.assert_array_equal(f(seed), fr.key(seed))


# -- np.random while tracing -----------------------------------------------------------------------

_rng = np.random.default_rng(0)
_legacy = np.random.RandomState(0)
_bitgen = np.random.Philox(0)

NP_RANDOM_CALLS = {
    "np.random.random": lambda x: np.random.random(x.shape),
    "np.random.rand": lambda x: np.random.rand(*x.shape),
    "np.random.randn": lambda x: np.random.randn(*x.shape),
    "np.random.normal": lambda x: np.random.normal(size=x.shape),
    "np.random.uniform": lambda x: np.random.uniform(0, 1, x.shape),
    "np.random.seed": lambda x: np.random.seed(0),
    "np.random.default_rng": lambda x: np.random.default_rng(0).random(x.shape),
    "np.random.Generator.random": lambda x: _rng.random(x.shape),
    "np.random.Generator.normal": lambda x: _rng.normal(size=x.shape),
    "np.random.Generator.integers": lambda x: _rng.integers(0, 5, x.shape),
    "np.random.RandomState.rand": lambda x: _legacy.rand(*x.shape),
    "np.random.Philox.random_raw": lambda x: _bitgen.random_raw(x.shape),
}


@pytest.mark.parametrize("name", NP_RANDOM_CALLS)
def test_np_random_while_tracing_raises_and_points_to_fusejit_random(name):
    draw = NP_RANDOM_CALLS[name]
    f = fuse(lambda x: x * draw(x))
    with pytest.raises(fusejit.RandomStateError) as info:
        f(np.ones(4))
    assert isinstance(info.value, TypeError)
    message = str(info.value)
    assert message.startswith(name + "(...)") and "fusejit.random.bernoulli(key" in message
    # afterwards np.random is NumPy's own again, and works
    assert vars(np.random)["random"] == np.random.mtrand._rand.random
    assert "wrapper" not in type(np.random.Generator.__dict__["random"]).__name__
    draw(np.ones(2))


_LAZY_CHILD = """
import sys, numpy as np, fusejit
assert "numpy.random" not in sys.modules, "fusejit imported numpy.random"
ok = fusejit.fuse(lambda x: x * 2)
ok(np.ones(3))
assert "numpy.random" not in sys.modules, "a trace imported numpy.random"
for draw in (lambda x: np.random.rand(3), lambda x: np.random.default_rng(0).random(3)):
    try:
        fusejit.fuse(lambda x: x * draw(x))(np.ones(3))
        raise SystemExit("np.random imported during a trace was not refused")
    except fusejit.RandomStateError:
        pass
assert np.random.rand(2).shape == (2,)
assert vars(np.random)["rand"] is np.random.mtrand.rand
print("ok")
"""


def test_np_random_first_imported_inside_a_trace_is_refused():
    """A process's first trace does not import numpy.random (~20 ms); a function that
    imports it while traced (NumPy's lazy ``np.random``) is refused all the same."""
    out = subprocess.run([sys.executable, "-c", _LAZY_CHILD], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_threads_that_do_not_trace_keep_np_random():
    """While one thread is inside a trace, another draws from np.random undisturbed."""
    inside, drawn = threading.Event(), threading.Event()
    results, errors = [], []

    def other():
        inside.wait(30)
        try:
            results.append((np.random.random(3), _rng.random(2), _legacy.rand(1)))
        except Exception as e:  # noqa: BLE001 - the test reports whatever was raised
            errors.append(e)
        drawn.set()

    @fuse
    def slow_trace(x):
        inside.set()
        drawn.wait(30)
        return x + 1

    thread = threading.Thread(target=other)
    thread.start()
    assert_matches(slow_trace(np.zeros(3)), np.ones(3))
    thread.join()
    assert not errors and len(results) == 1


def test_concurrent_traces_each_see_only_their_own_np_random_calls():
    both = threading.Barrier(2, timeout=30)
    outcome = {}

    def trace(name, body):
        def fn(x):
            both.wait()  # the two traces overlap
            y = body(x)
            both.wait()
            return y
        try:
            outcome[name] = fuse(fn)(np.zeros(3))
        except Exception as e:  # noqa: BLE001 - the test reports whatever was raised
            outcome[name] = e
            both.wait()  # (the raising trace still meets the other at its second barrier)

    threads = [threading.Thread(target=trace, args=("bad", lambda x: x + _rng.random(3))),
               threading.Thread(target=trace, args=("good", lambda x: x + 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert isinstance(outcome["bad"], fusejit.RandomStateError)
    assert_matches(outcome["good"], np.ones(3))
    assert vars(np.random)["random"] == np.random.mtrand._rand.random  # all put back


def test_pocl_multiplies_high_through_128_bits_bit_for_bit():
    # PoCL has no vector 64-bit multiply-high (its mul_hi on ulong lanes is emulated): Philox
    # and the integer range reduction take __uint128_t products there, with NumPy's bits
    k = fr.key(99)
    f = fuse(lambda k: (fr.uniform(k, (5000,), np.float64), fr.integers(k, 3, 10**15, (777,))))
    got_u, got_i = f(k)
    gen = np.random.Generator(np.random.Philox(key=k))
    np.testing.assert_array_equal(got_u, gen.random(5000))
    assert got_i.min() >= 3 and got_i.max() < 10**15
    again = fuse(lambda k: fr.integers(k, 3, 10**15, (777,)))(k)
    np.testing.assert_array_equal(got_i, again)  # (the same stream, fused with another draw)
    source = f.lower(k).module.source
    if default_queue().device.platform.name.startswith("Portable Computing Language"):
        assert "fj_mulhi64(" in source and "mul_hi(" not in source
    else:
        assert "fj_mulhi64" not in source


def test_a_draw_feeding_a_scan_is_stored_by_a_vector_kernel_on_cpus():
    # an Asian option's paths: the scan computes its prologue lane by lane, so on a CPU the
    # normal draw is an elementwise kernel of its own (vector lanes sharing Philox blocks) and
    # the scan loads it; on a GPU it stays fused into the scan's loads
    k = fr.key(31)

    def payoff(k, s0):
        z = fr.normal(k, (512, 64), np.float32)
        path = s0 * np.exp(np.cumsum(0.01 * z - 0.00005, axis=1))
        return np.maximum(path.mean(axis=1) - 100.0, 0), path
    f = fuse(payoff)
    got_pay, got_path = f(k, 100.0)
    z = fr.normal(k, (512, 64), np.float32)  # (the same stream, drawn on its own)
    want_path = np.float32(100.0) * np.exp(np.cumsum(np.float32(0.01) * z - np.float32(5e-5),
                                                     axis=1))
    np.testing.assert_allclose(got_path, want_path, rtol=2e-5)
    np.testing.assert_allclose(got_pay, np.maximum(want_path.mean(axis=1) - 100.0, 0),
                               rtol=1e-4, atol=1e-4)
    kernels = f.lower(k, 100.0).kernels
    scan = next(kn for kn in kernels if kn.reason.startswith("scan"))
    from fusejit.runtime.opencl.devices import device_info

    on_cpu = not device_info(default_queue().device).limits.is_gpu
    assert ("philox" in scan.reason) != on_cpu
    assert ("fj_philox" in scan.source) != on_cpu
