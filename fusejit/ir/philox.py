"""Philox4x64-10 in NumPy: the reference of the PHILOX and MULHI ops (``fusejit.ir.ops``).

The counter-based generator of Salmon et al. (SC'11, Random123), exactly as NumPy's
``numpy.random.Philox`` computes it (numpy/random/src/philox/philox.h): ten rounds, the key
bumped by the Weyl constants between rounds, 64x64->128-bit products from 32-bit halves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def mulhi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """High half of the full unsigned product (uint64: from 32-bit halves, as NumPy's own
    Philox does without a 128-bit integer type)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.itemsize < 8:
        wide = a.astype(np.uint64) * b.astype(np.uint64)
        return (wide >> np.uint64(8 * a.dtype.itemsize)).astype(a.dtype)
    a_lo, a_hi, b_lo, b_hi = a & _M32, a >> _S32, b & _M32, b >> _S32
    lo_lo, hi_lo = a_lo * b_lo, a_hi * b_lo
    cross = (lo_lo >> _S32) + (hi_lo & _M32) + a_lo * b_hi  # < 2**64: no carry lost
    return a_hi * b_hi + (hi_lo >> _S32) + (cross >> _S32)


# Philox4x64-10 (Salmon et al., SC'11; Random123 and NumPy's numpy/random/src/philox/philox.h)
PHILOX_M = (np.uint64(0xD2E7470EE14C6C93), np.uint64(0xCA5A826395121157))
PHILOX_W = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBB67AE8584CAA73B))


def philox(k0: Any, k1: Any, c0: Any, c1: Any, c2: Any, c3: Any, w: Any) -> np.ndarray:
    """Word ``w % 4`` of the Philox4x64-10 block of counter (c0..c3) under key (k0, k1)."""
    k0, k1, c0, c1, c2, c3, w = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.uint64) for v in (k0, k1, c0, c1, c2, c3, w)))
    with np.errstate(over="ignore"):
        for r in range(10):
            if r:  # the key is bumped between rounds, not before the first
                k0, k1 = k0 + PHILOX_W[0], k1 + PHILOX_W[1]
            hi0, lo0 = mulhi(PHILOX_M[0], c0), PHILOX_M[0] * c0
            hi1, lo1 = mulhi(PHILOX_M[1], c2), PHILOX_M[1] * c2
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return np.choose((w & np.uint64(3)).astype(np.intp), (c0, c1, c2, c3))
