"""float16 ``x ** k`` for the small integer powers fusejit writes as products: NumPy's float16
power is powf in float32 rounded to float16, and the products (in float32 for 3, 4 and -2:
passes/simplify.py _half_power) reproduce it for every float16 value, packed or not; on GPUs
the float32 products between float16 loads and stores keep 8 lanes (16-byte accesses)."""

from __future__ import annotations

import numpy as np
import pytest

from fusejit import fuse
from fusejit.bench.workloads import gelu
from fusejit.targets.opencl.half2 import emulated, unpacked

ALL = np.arange(1 << 16, dtype=np.uint16).view(np.float16)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and bool(np.all((a.view(np.uint16) == b.view(np.uint16))
                                              | (np.isnan(a) & np.isnan(b))))


@pytest.mark.parametrize("spelling", [unpacked, emulated])
@pytest.mark.parametrize("k", [2, 3, 4, -1, -2])
def test_every_float16_power_is_numpys(lowering: str, spelling, k: int) -> None:
    with spelling():
        got = fuse(lambda x: x ** k)(ALL)
    with np.errstate(all="ignore"):
        want = ALL ** k
    assert _same(got, want)


def test_float16_gelu_is_numpys_with_8_gpu_lanes(rng, lowering: str) -> None:
    x = rng.uniform(-4, 4, 1 << 16).astype(np.float16)
    f = fuse(lambda x: gelu(np, x))
    assert _same(f(x), gelu(np, x))
    if lowering == "gpu":  # (float16 in and out: the float32 x ** 3 does not halve the lanes)
        source = f.lower(x).module.source
        assert "ushort8" in source or "fj_ldh8" in source
