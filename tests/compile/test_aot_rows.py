"""AOT bundles with a None row length (fusejit/compile/aot_dynamic.py): one entry per row bucket up
to ``max_row_length``, each built at export, so a fresh process runs every batch size and
row length with 0 traces and 0 builds; on GPUs a bucket's own length has an entry of its
own; rows beyond the bound, rows of 0 and 1 and kernels specialised on the row are named
errors. NumPy (float64) is the oracle; the counts are the point."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pyopencl as cl
import pytest

import fusejit
from fusejit import ShapeDtype
from fusejit.compile.aot import BundleError

X = np.random.default_rng(8).standard_normal((37, 32)).astype(np.float32)


def layernorm(x, w, b):
    """Two row reductions, np.mean's divisor (the row length at launch), row weights."""
    mu = np.mean(x, axis=-1, keepdims=True)
    d = x - mu
    return d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + 3e-6) * w + b


def _entries(path: Path) -> list[dict]:
    data = path.read_bytes()[48:]  # (magic, length, SHA-256)
    (n,) = struct.unpack_from("<I", data)
    return json.loads(data[4:4 + n])["entries"]


def _per_bucket() -> int:
    """Entries per row bucket: GPUs build a bucket's own length without row checks."""
    return 2 if fusejit.default_queue().device.type & cl.device_type.GPU else 1


_CHILD = """
    g, q = fusejit.load(sys.argv[1]), fusejit.default_queue()
    rng = np.random.default_rng(3)
    def ref(x, w, b):
        x = x.astype(np.float64); mu = x.mean(-1, keepdims=True); d = x - mu
        return (d / np.sqrt((d * d).mean(-1, keepdims=True) + 3e-6) * w + b).astype(np.float32)
    # every bucket's ends and insides, batch sizes that are not multiples of anything
    for m, n in ((2, 2), (7, 3), (64, 15), (5, 16), (1000, 17), (3, 24), (33, 31), (2, 32),
                 (9, 9), (130, 29)):
        x = rng.standard_normal((m, n)).astype(np.float32)
        w, b = rng.standard_normal((2, n)).astype(np.float32)
        for got in (g(x, w, b), g(*(cla.to_device(q, a) for a in (x, w, b))).get()):
            assert got.shape == (m, n) and got.dtype == np.float32, (got.shape, got.dtype)
            np.testing.assert_allclose(got, ref(x, w, b), rtol=2e-5, atol=2e-6)
    x = np.ones((4, 40), np.float32)
    for args in ((x, x[0], x[0]), (x[:, :1], x[0, :1], x[0, :1]), (x[:1, :8], x[0, :8], x[0, :8]),
                 (x[:, :8], x[0, :9], x[0, :8])):
        try:
            g(*args)
        except BundleError as exc:
            print("refused", str(exc).replace(" ", "_")[:300])
        else:
            raise SystemExit(f"{[a.shape for a in args]} was not refused")
    print("counts", g.traces, g.builds, g.binary_loads)
"""


def test_row_bundle_runs_every_row_length_in_a_fresh_process(tmp_path, fresh_process):
    f = fusejit.fuse(layernorm)
    host = [ShapeDtype((None, None), np.float32, device=False),
            ShapeDtype((None,), np.float32, device=False), ShapeDtype((None,), np.float32,
                                                                      device=False)]
    dev = [ShapeDtype((None, None), np.float32), *[ShapeDtype((None,), np.float32)] * 2]
    path = fusejit.export(f, [host, dev], tmp_path / "ln.fjb", max_row_length=32)
    entries = _entries(path)
    per = _per_bucket()
    assert len(entries) == 2 * 2 * per  # 2 signatures x buckets 16, 32
    assert [e["dynamic"]["ranges"][-1] for e in entries[:2 * per]] == \
        ([[2, 16], [17, 32]] if per == 1 else [[2, 15], [16, 16], [17, 31], [32, 32]])
    # the host and the device signatures' kernels are the same: one program per bucket
    assert f.cache_info().compiles + f.cache_info().disk_hits == 2 * per
    lines = fresh_process(_CHILD, str(path))
    assert lines[-1] == f"counts 0 0 {4 * per}"  # programs from the stored binaries only
    refused = [ln for ln in lines if ln.startswith("refused")]
    assert len(refused) == 4
    assert "rows_of_2_to_32_elements" in refused[0] and "max_row_length" in refused[0]
    assert "rows_of_2_to_32" in refused[1]  # rows of 1: not a bucket's
    assert "extent_1" in refused[2]  # a batch of 1 lowers differently
    assert "no_exported_signature" in refused[3]  # x's rows and w disagree


def test_gpu_bucket_length_has_its_own_entry(gpu_style: None, tmp_path):
    """GPU row kernels at a bucket's own length drop the row checks: their own entry, built
    at export too, so every length of the bucket runs from a stored binary."""
    def softmax(x):  # (rows kept in registers: the bucket's own length differs)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    path = fusejit.export(fusejit.fuse(softmax), [(ShapeDtype((None, None), np.float32,
                                                             device=False),)],
                          tmp_path / "r.fjb", max_row_length=16)
    entries = _entries(path)
    assert [e["dynamic"]["ranges"] for e in entries] == [[None, [2, 15]], [None, [16, 16]]]
    assert "fj_in" in entries[0]["source"] and "fj_in" not in entries[1]["source"]  # masks
    g = fusejit.load(path)
    x = np.random.default_rng(4).standard_normal((37, 16)).astype(np.float32)
    for n in (2, 5, 15, 16):
        got = g(x[:, :n].copy())
        e = np.exp(x[:, :n].astype(np.float64) - x[:, :n].max(-1, keepdims=True))
        assert got.shape == (37, n) and got.dtype == np.float32
        np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=2e-5, atol=2e-6)
    assert (g.traces, g.builds, g.binary_loads) == (0, 0, 2)


def test_kernels_specialised_on_a_none_axis_and_bad_bounds_are_refused(tmp_path):
    def scan_and_sum(x):  # the scan over the batch is specialised on its length
        return x.sum(axis=-1), np.cumsum(x, axis=0)

    sig = [(ShapeDtype((None, None), np.float32),)]
    with pytest.raises(BundleError, match="within one row bucket"):
        fusejit.export(fusejit.fuse(scan_and_sum), sig, tmp_path / "a.fjb", max_row_length=16)
    for bad in (1, 1 << 20, 16.0):
        with pytest.raises(BundleError, match="max_row_length"):
            fusejit.export(fusejit.fuse(layernorm), [(sig[0][0], *[ShapeDtype(
                (None,), np.float32)] * 2)], tmp_path / "b.fjb", max_row_length=bad)
    assert not (tmp_path / "a.fjb").exists() and not (tmp_path / "b.fjb").exists()


def test_elementwise_kernel_beside_the_row_reduction_in_a_bundle(tmp_path):
    """An elementwise kernel over the row (here a transpose, its own kernel) takes the row
    length at launch too (fusejit/codegen/rows.py): each bucket's entry serves it."""
    def fn(x):
        return x.max(axis=-1), np.tanh(x).T * 2.0
    f = fusejit.fuse(fn)
    assert [g.kind for g in f.lower(X[:, :20]).plan.groups] == ["reduce", "elementwise"]
    path = fusejit.export(f, [(ShapeDtype((None, None), np.float32, device=False),)],
                          tmp_path / "t.fjb", max_row_length=32)
    # (one entry per bucket; on GPUs a second for a bucket's own length where its source
    # differs from the masked one, which it does not for a max over rows this short)
    assert len(_entries(path)) in (2, 2 * _per_bucket())
    g = fusejit.load(path)
    for m, n in ((5, 2), (37, 15), (2, 16), (37, 17), (9, 32), (3, 23)):
        got = g(X[:m, :n].copy())
        want = fn(X[:m, :n].astype(np.float64))
        np.testing.assert_array_equal(got[0], X[:m, :n].max(-1))
        assert got[1].shape == (n, m) and got[1].dtype == np.float32
        np.testing.assert_allclose(got[1], want[1], rtol=4e-6, atol=1e-6)
    assert (g.traces, g.builds) == (0, 0)
