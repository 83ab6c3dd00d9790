"""fusejit on dask arrays: lazy results, fused steps per block, NumPy's values, a real cluster.

Semantics run on dask's synchronous scheduler (same process: kernel launches can be counted);
one module-scoped ``distributed.LocalCluster`` (2 worker processes on loopback, PoCL devices via
DevicePlugin) checks pickling, device pinning and a worker killed in the middle of a compute.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

import fusejit.dask as fdask  # noqa: E402
from fusejit import fuse  # noqa: E402


@pytest.fixture
def sync():
    with dask.config.set(scheduler="synchronous"):
        yield


@fuse
def two_outputs(x, y, s):
    t = x * y + s
    return t, np.tanh(t) * 0.5


@fuse
def stats0(x):
    """Every reduction kind over axis 0, one function: one chunk, combine and aggregate."""
    p = x > 0
    return (x.sum(0), x.prod(0), x.min(0), x.max(0), p.any(0), p.all(0), np.argmax(x, 0),
            np.argmin(x, 0), x.mean(0), x.var(0), x.std(0, keepdims=True))


@fuse
def stats_all(x):
    return (x.sum(), np.argmax(x), np.argmin(x), x.mean(), x.var(ddof=1), x.max(keepdims=True),
            x - 1)  # (an output with no reduction: blockwise beside the tree reduction)


@fuse
def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_blockwise_is_lazy_with_numpy_broadcasting_and_one_launch_per_block(sync, launches):
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((9, 10)).astype(np.float32)
    yn = rng.standard_normal(10).astype(np.float32)  # a NumPy argument, broadcast
    x = da.from_array(xn, chunks=(4, 5))
    a, b = two_outputs(x, yn, 2.0)
    assert isinstance(a, da.Array) and isinstance(b, da.Array)
    for r in (a, b):
        assert (r.shape, r.dtype, r.chunks) == ((9, 10), np.float32, ((4, 4, 1), (5, 5)))
        assert type(r._meta) is np.ndarray and r._meta.ndim == 2
        assert r._meta.dtype == np.float32
    assert not launches  # nothing ran yet
    ga, gb = dask.compute(a, b)
    assert len(launches) == 6  # 6 blocks, both outputs from one kernel per block
    ta, tb = two_outputs(xn, yn, 2.0)
    np.testing.assert_array_equal(ga, ta)
    np.testing.assert_array_equal(gb, tb)
    np.testing.assert_allclose(ga, xn * yn + np.float32(2.0), rtol=1e-6)
    # a function compiles per distinct block shape (2 here), however many blocks
    assert two_outputs.cache_info().misses <= 4
    z = two_outputs(da.from_array(np.float32(3.0)), np.float32(2.0), 1)[0]  # 0-d blocks stay 0-d
    assert z.shape == z.compute().shape == () and z.compute() == 7


@fuse
def moved(x, y):
    return x.T + y[:, None], x[1:] * 2


def test_index_maps_keep_or_rechunk_exactly_the_axes_they_move(sync):
    rng = np.random.default_rng(6)
    xn, yn = rng.standard_normal((9, 7)), rng.standard_normal(7)
    x, y = da.from_array(xn, chunks=(4, 3)), da.from_array(yn, chunks=3)
    with pytest.warns(fdask.RechunkWarning, match=r"along axes \[0\]"):  # the slice only
        t, d = moved(x, y)
    # x.T reads x along both axes: its axis 1 is the sliced axis, whole too
    assert t.chunks == ((3, 3, 1), (9,)) and d.chunks == ((8,), (3, 3, 1))
    np.testing.assert_array_equal(t.compute(), xn.T + yn[:, None])
    np.testing.assert_array_equal(d.compute(), xn[1:] * 2)


def test_reductions_over_an_axis_merge_partials(sync):
    rng = np.random.default_rng(1)
    xn = rng.standard_normal((23, 6)) + 3.0
    xn[5, 2] = xn[17, 2] = xn[:, 2].max() + 1  # a tie across blocks: the first index wins
    x = da.from_array(xn, chunks=(4, 4))
    with dask.config.set(split_every=2):  # 6 blocks along axis 0: combine steps run too
        got = dask.compute(*stats0(x))
    want = stats0.__wrapped__(xn)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g, w)
        if w.dtype.kind in "bi":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12)
    assert got[6][2] == 5


@fuse
def bitwise_stats(x):
    return (np.bitwise_or.reduce(x, axis=0), np.bitwise_and.reduce(x, axis=0),
            np.bitwise_xor.reduce(x, axis=0), np.logical_xor.reduce(x, axis=0))


@fuse
def bitwise_all(x):
    return np.bitwise_and.reduce(x, axis=None), np.bitwise_xor.reduce(x, axis=None)


def test_bitwise_reductions_merge_partials(sync):
    """``np.bitwise_*.reduce`` are reduction ops: blocks reduce, the tree merges the partials
    with the same ufunc (NumPy's values and dtypes, uint64 all-ones identity included)."""
    rng = np.random.default_rng(3)
    for dtype in (np.int64, np.uint64, np.bool_):
        xn = (rng.random((23, 6)) > 0.1) if dtype is np.bool_ else rng.integers(
            np.iinfo(dtype).min, np.iinfo(dtype).max, (23, 6), dtype=dtype, endpoint=True)
        x = da.from_array(xn, chunks=(4, 4))
        for fn in (bitwise_stats, bitwise_all):
            with dask.config.set(split_every=2), warnings.catch_warnings():
                warnings.simplefilter("error")  # (no rechunk)
                got = dask.compute(*fn(x))
            for g, w in zip(got, fn.__wrapped__(xn)):
                assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
                np.testing.assert_array_equal(g, w)


@fuse
def scaled_mean(x, b, s):
    return x.mean(0) * b + s


def test_an_epilogue_reading_arrays_is_one_more_blockwise_step(sync):
    rng = np.random.default_rng(7)
    xn, bn = rng.standard_normal((10, 7)), rng.standard_normal(7)
    x = da.from_array(xn, chunks=(4, 3))
    for b in (da.from_array(bn, chunks=2), bn):  # a dask or NumPy array, no rechunk either way
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = scaled_mean(x, b, 2.0)
        assert r.shape == (7,) and scaled_mean.explain(x, b, 2.0).kind == "reduction"
        np.testing.assert_allclose(r.compute(), xn.mean(0) * bn + 2.0, rtol=1e-12)


def test_reductions_over_all_axes_float32_and_nan(sync):
    rng = np.random.default_rng(2)
    xn = rng.standard_normal((11, 13)).astype(np.float32)
    x = da.from_array(xn, chunks=(5, 6))
    got = dask.compute(*stats_all(x))
    want = stats_all.__wrapped__(xn)
    assert [g.shape for g in got] == [np.shape(w) for w in want]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    assert got[1] == want[1] and got[2] == want[2]
    np.testing.assert_allclose(got[3], want[3], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[4], want[4], rtol=1e-5)  # Chan's merge, float32
    np.testing.assert_array_equal(got[5], want[5])
    np.testing.assert_array_equal(got[6], want[6])
    assert stats_all.explain(x).kind == "reduction"
    xn[3, 2] = xn[8, 9] = np.nan  # NumPy: the first NaN is the argmax and the argmin
    got = dask.compute(*stats_all(da.from_array(xn, chunks=(5, 6))))
    assert got[1] == got[2] == np.argmax(xn) == 3 * 13 + 2
    assert np.isnan(got[0]) and np.isnan(got[5]).all()


def test_row_fusion_rechunks_with_a_warning_or_raises(sync):
    rng = np.random.default_rng(3)
    xn = rng.standard_normal((8, 12)).astype(np.float32)
    x = da.from_array(xn, chunks=(3, 5))
    with pytest.warns(fdask.RechunkWarning, match=f"{xn.nbytes} bytes move"):
        y = softmax(x)
    assert y.chunks == ((3, 3, 2), (12,))
    np.testing.assert_allclose(y.compute(), softmax(xn), rtol=1e-6, atol=1e-7)
    plan = softmax.explain(x)
    assert plan.kind == "rechunk" and "row fusion" in str(plan)
    assert stats0.explain(x).kind == "reduction"
    assert two_outputs.explain(x, xn, 1.0).kind == "blockwise"
    with dask.config.set({"fusejit.rechunk": False}), pytest.raises(fdask.RechunkError,
                                                                   match="bytes"):
        softmax(x)
    with warnings.catch_warnings():  # rows already whole: nothing to move, no warning
        warnings.simplefilter("error")
        softmax(x.rechunk({1: -1}))


def test_fused_pickles_as_its_function():
    f = fuse(lambda x: x * 3 + 1, validate=False)
    g = pickle.loads(pickle.dumps(f))
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(g(x), x * 3 + 1)
    assert pickle.loads(pickle.dumps(f)) is g or g is f  # one copy per process


def test_fusejit_without_dask_does_not_import_it():
    code = "import sys, fusejit; fusejit.fuse(lambda x: x + 1); assert 'dask' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ)


# -- a real cluster -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None)
    c = distributed.Client(cluster)
    c.register_plugin(fdask.DevicePlugin(kind="cpu"))
    yield c
    c.close()
    cluster.close()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _slow(block):
    time.sleep(0.05)
    return block


def test_cluster_pins_devices_and_matches_numpy(client):
    devices = client.run(lambda dask_worker: dask_worker.fusejit_device)
    assert len(devices) == 2 and all("pthread" in d or "cpu" in d.lower()
                                     for d in devices.values()), devices
    xn = np.random.default_rng(4).standard_normal((40, 30))
    x = da.from_array(xn, chunks=(10, 15))
    got = client.gather(client.compute(list(stats0(x))))
    for g, w in zip(got, stats0.__wrapped__(xn)):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_a_worker_killed_mid_compute_is_retried(client):
    xn = np.random.default_rng(5).standard_normal((64, 16)).astype(np.float32)
    x = da.from_array(xn, chunks=(4, 16)).map_blocks(_slow, dtype=np.float32)
    a, _ = two_outputs(x, xn[0], 0.5)
    future = client.compute(a)
    deadline = time.time() + 30
    while not any(client.processing().values()) and time.time() < deadline:
        time.sleep(0.01)
    victim = next(w for w, tasks in client.processing().items() if tasks)
    pid = client.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)  # a worker process this test started; its nanny restarts it
    np.testing.assert_array_equal(future.result(timeout=60), two_outputs(xn, xn[0], 0.5)[0])
    assert victim not in client.scheduler_info()["workers"]  # it really died mid-compute
