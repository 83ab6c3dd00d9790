"""Vulkan pipelines are shared by source (fusejit/runtime/vulkan/pipelines.py): a dynamic
function traced again for a new extent or row length reuses the pipeline its source already
has, and ``cache_info().compiles`` counts pipelines built, not signatures. NumPy is the
oracle; the counts are the point."""

from __future__ import annotations

import numpy as np
import pytest

import fusejit

RNG = np.random.default_rng(12)
X = RNG.standard_normal((23, 300)).astype(np.float32)


def _sources(f, shapes) -> int:
    return len({f.lower(np.zeros(s, np.float32)).source for s in shapes})


@pytest.mark.parametrize("device", ["vulkan"], indirect=True)
def test_row_lengths_and_batches_count_real_compiles(device: str):
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True)) * 1.5  # (its own source in this file)
        return e / e.sum(axis=-1, keepdims=True)
    f = fusejit.fuse(softmax, dynamic=True)
    lengths = (33, 35, 40, 47, 53, 61, 63, 100)  # bucket 64, then one of bucket 128
    for n in lengths:
        x = X[:, :n].astype(np.float64)
        e = np.exp(x - x.max(-1, keepdims=True)) * 1.5
        np.testing.assert_allclose(f(X[:, :n]), e / e.sum(-1, keepdims=True), rtol=1e-4,
                                   atol=1e-6)
    info = f.cache_info()
    assert info.traces == len(lengths)
    assert info.compiles == _sources(f, [(23, n) for n in lengths]) == 2

    g = fusejit.fuse(lambda x: x * 2.5 - 1.0, dynamic=True)
    for m in (64, 100, 200, 300, 64):  # 64 again: a cache hit, no trace
        x = RNG.standard_normal((m, 64)).astype(np.float32)
        np.testing.assert_array_equal(g(x), x * np.float32(2.5) - np.float32(1))
    assert g.cache_info().traces == 4 and g.cache_info().compiles == 1
    # another function with the same kernel builds nothing either
    h = fusejit.fuse(lambda x: x * 2.5 - 1.0, dynamic=True)
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    np.testing.assert_array_equal(h(x), x * np.float32(2.5) - np.float32(1))
    assert h.lower(x).source == g.lower(x).source and h.cache_info().compiles == 0
