"""Elementwise kernels whose iteration space holds a runtime row length (fusejit/codegen/rows.py):
one program for every row length, whether every access is the flat index (the flat form) or
not (rows broadcast against the batch, views of a wider buffer, strided rows of another
length, transposes: the rows form). Every result is compared with NumPy; the program counts
are the point."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyopencl.array as cla
import pytest

import fusejit

RNG = np.random.default_rng(21)
X = RNG.standard_normal((37, 300)).astype(np.float32)
W = RNG.standard_normal(300).astype(np.float32)
C = RNG.standard_normal((37, 1)).astype(np.float32)
LENGTHS = (2, 3, 7, 16, 17, 33, 40, 63, 100, 129, 255)  # whole vectors, tails, buckets


def _programs(f: Any) -> int:
    info = f.cache_info()
    return info.compiles + info.disk_hits


def _same(got: Any, want: Any) -> None:
    for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
        g = g.get() if isinstance(g, cla.Array) else g
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16, np.uint8])
def test_flat_kernels_one_program_for_every_length(dtype: Any):
    """Full-shape contiguous operands: the flat form, lanes whatever the row length."""
    def fn(x, y):
        return x * y + x, np.maximum(x, y)
    f = fusejit.fuse(fn, dynamic=True)
    x, y = (RNG.integers(0, 50, (37, 300)).astype(dtype) for _ in range(2))
    for n in LENGTHS:
        a, b = x[:, :n].copy(), y[:, :n].copy()
        _same(f(a, b), fn(a, b))
    assert _programs(f) == 1 and f.cache_info().traces == len(LENGTHS)
    assert "n_n" in f.lower(x[:, :50], y[:, :50]).source
    for m, n in ((2, 3), (3, 13), (5, 11)):  # fewer vectors than tail elements
        a, b = x[:m, :n].copy(), y[:m, :n].copy()
        _same(f(a, b), fn(a, b))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_rows_form_broadcasts_views_and_other_row_lengths(queue, lowering: str, dtype: Any,
                                                          k: float = 0.0):
    """Rows broadcast against the batch, a column, device views of a wider buffer: the rows
    form, one program for every length (and the automatic rule: the second length makes it
    dynamic, so two programs in all)."""
    k += 0.25 if lowering == "cpu" else 0.75  # (each case its own source: programs are
    # shared by source in a process)

    def fn(x, w, c):
        return np.where(x > 0, x * w, c - x) + k
    f = fusejit.fuse(fn)
    x, w, c = (a.astype(dtype) for a in (X, W, C))
    xd, wd, cd = (cla.to_device(queue, a) for a in (x, w, c))
    for n in LENGTHS:
        _same(f(xd[:, :n], wd[:n], cd), fn(x[:, :n], w[:n], c))
    assert _programs(f) == 2
    assert "n_c" in f.lower(xd[:, :50], wd[:50], cd).source
    if dtype != np.float32:
        return

    def strided(x):  # rows of ceil(n / 2) read from rows of n
        return (x * x)[:, ::2] + (1.0 + k), x.T * 2.0
    g = fusejit.fuse(strided, dynamic=True)
    for n in LENGTHS[1:]:  # (not 2: rows of 1 are specialised)
        _same(g(X[:, :n].copy()), strided(X[:, :n].copy()))
    assert _programs(g) == 1


def test_rows_form_of_packed_float16_lanes(queue, lowering: str):
    """Where float16 vectors stay packed bits (targets/opencl_half2: NVIDIA), the rows form
    loads and stores the bits at any alignment (it built vload_half8 into a ushort8 on the
    H200); emulated here."""
    from fusejit.targets.opencl.half2 import emulated

    with emulated():
        test_rows_form_broadcasts_views_and_other_row_lengths(queue, lowering, np.float16, 2.0)


def test_elementwise_kernel_beside_a_row_reduction():
    """The partitioner puts the strided part in its own kernel: the row reduction takes one
    program per bucket, the elementwise kernel one for every length."""
    def fn(x):
        return x - x.mean(axis=-1, keepdims=True), (x * x)[:, ::2]
    f = fusejit.fuse(fn, dynamic=True)
    lengths = (33, 35, 40, 47, 51, 63)  # bucket 64
    for n in lengths:
        x = X[:, :n]
        got = f(x)
        want = fn(x.astype(np.float64))
        assert [k.kind for k in f.lower(x).plan.groups] == ["reduce", "elementwise"]
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == np.float32
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-6)
    assert _programs(f) == 1


def test_launch_sizes_not_a_multiple_of_the_team_cover_every_row(gpu_style: None,
                                                                   monkeypatch):
    """GPU strategies: rows of 1000 take teams of 256 work-items; the autotuner's launch of
    2 vectors a work-item in groups of 128 (999 * 128 work-items: half a team left over)
    still covers each row exactly once."""
    from fusejit.runtime import autotune

    monkeypatch.setattr(autotune, "MIN_ITEMS", 1)
    tuned: list[int] = []
    monkeypatch.setattr(autotune, "candidates",
                        lambda items, wg, gpu: tuned.append(items) or [(2, 128)])
    def fn(x, w):
        return x * w - 1.0
    f = fusejit.fuse(fn, dynamic=True)
    x = RNG.standard_normal((999, 1000)).astype(np.float32)
    w = RNG.standard_normal(1000).astype(np.float32)
    for n in (1000, 700, 700, 700):  # (tuned at a signature's second call)
        _same(f(x[:, :n], w[:n]), fn(x[:, :n], w[:n]))
    assert tuned and "n_t" in f.lower(x[:, :700], w[:700]).source


@pytest.mark.parametrize("device", ["vulkan"], indirect=True)
def test_both_forms_on_vulkan(device: str):
    """The GLSL target spells both forms: NumPy inputs on the Vulkan device."""
    def fn(x, w, c):
        return np.where(x > 0, x * w, c - x), x * 3.5 - 1.0  # (3.5: no row length)
    f = fusejit.fuse(fn, dynamic=True)
    for n in LENGTHS:
        x = X[:, :n].copy()
        _same(f(x, W[:n], C), fn(x, W[:n], C))
    assert f.cache_info().compiles == len({f.lower(X[:, :n].copy(), W[:n], C).source
                                           for n in LENGTHS}) == 1


@pytest.mark.parametrize("shape", [(4097, 3), (999, 1001), (7, 5, 331), (2, 2049)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
def test_flat_static_kernels_take_lanes_whatever_the_last_axis(shape: Any, dtype: Any):
    """A static elementwise kernel whose every access is the flat index computes in vector
    lanes over the flattened array (then a tail), however its last axis splits: a (n, 3) array
    was computed one element at a time, 18x slower. Where an operand is broadcast or strided
    the last axis still decides (not flat), and both match NumPy."""
    x = RNG.uniform(1, 2, shape).astype(dtype)
    y = RNG.uniform(1, 2, shape).astype(dtype)
    row = RNG.uniform(1, 2, shape[-1]).astype(dtype)
    both = fusejit.fuse(lambda x, y: x * y + x)
    _same(both(x, y), x * y + x)
    bcast = fusejit.fuse(lambda x, r: x * r + x)
    _same(bcast(x, row), x * row + x)
    if fusejit.default_queue().device.type & 2:  # (CPU: lanes are PoCL's vectors)
        (k,) = both.lower(x, y).module.kernels
        assert k.vec > 1, k.source
