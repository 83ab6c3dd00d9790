"""float16 arrays move as ushort vectors (targets/opencl/target.py fj_ldh/fj_sth) and, on GPUs, 8
lanes at a time (codegen/source.py): values bit-identical to NumPy's float16 arithmetic, with the
CPU and the GPU lowering (run here on the test device), tails and mixed-width kernels."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fusejit import fuse
from fusejit.testing import assert_matches


def exact_ops(x: Any) -> Any:
    # each op is correctly rounded in float32, then rounded to half, as NumPy's float16 loops
    return (x * x + np.float16(1.5)) / (np.abs(x) + np.float16(3)) - np.sqrt(np.abs(x))


@pytest.mark.parametrize("n", [8, 4096 + 5, 1 << 16])
def test_float16_elementwise_is_numpys(rng, lowering: str, n: int) -> None:
    x = (rng.standard_normal(n) * 50).astype(np.float16)
    x[:4] = [0.0, -0.0, 65504, -6e-8]
    f = fuse(exact_ops)
    got = f(x)
    want = exact_ops(x)
    assert got.dtype == np.float16
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    if n >= 4096 and lowering == "gpu":
        source = f.lower(x).module.source  # (packed float16 lanes load the ushort8 as is)
        assert "fj_ldh8" in source or "((const __global ushort8 *)p0)" in source


def test_mixed_widths(rng, lowering: str) -> None:
    x = (rng.standard_normal(4096) * 4).astype(np.float16)
    y = rng.standard_normal(4096).astype(np.float32)
    f = fuse(lambda x, y: (x * y, (x + x).astype(np.float32), (y * 2).astype(np.float16)))
    for got, want in zip(f(x, y), (x * y, (x + x).astype(np.float32),
                                   (y * 2).astype(np.float16)), strict=True):
        assert_matches(got, want)
