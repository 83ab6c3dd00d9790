"""NumPy models of the tensor-core GEMM's arithmetic (fusejit/codegen/gemm/mma.py), so its accuracy is
checked without a GPU (tests/codegen/test_tf32.py) and its error bounds have one definition.

* ``tf32_round``: PTX's ``cvt.rna.tf32.f32``: round to nearest, ties away from zero, to 10
  mantissa bits (the 13 low bits cleared). Finite values only change; overflow rounds to inf.
  (The wgmma kernels, fusejit/codegen/gemm/wgmma.py, round one operand so; the tensor cores read the
  other as float32 from local memory and drop its 13 low bits: toward zero, under 2**-10.)
* ``split``: 3xTF32's operand split, big = tf32(x), small = tf32(x - big). ``x - big`` is
  exact in float32 (it has at most 13 significant bits), so ``|x - big - small| <= 2**-22 |x|``.
* ``mma_model``: a product as the kernel sums it: per k step of 8 (m16n8k8), each MMA adds its
  8 exact products to its float32 accumulator rounding toward zero, as NVIDIA's tensor cores
  do (Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021; a simplification:
  the H200's measured errors lie between this and rounding to nearest). That bias grows with
  K, so 3xTF32 sums each step's three MMAs (small*big, big*small, big*big) from zero and adds
  them to the accumulator in a float32 add, rounding to nearest. ``simt_model``: one fused
  multiply-add per k in float32, the SIMT kernel.
"""

from __future__ import annotations

import numpy as np

_HALF = np.uint32(0x1000)  # half of the 13 dropped bits' unit: ties round away (magnitude up)
_MASK = np.uint32(0xFFFFE000)


def tf32_round(x: np.ndarray) -> np.ndarray:
    """float32 ``x`` rounded to TF32 (10 mantissa bits), as ``cvt.rna.tf32.f32``."""
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32)
    # sign-magnitude: adding half a unit to the bits rounds the magnitude half up, carrying
    # into the exponent (and to inf past the largest finite tf32) as it should
    out = ((bits + _HALF) & _MASK).view(np.float32)
    return np.where(np.isfinite(x), out, x).astype(np.float32)


def split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(big, small) TF32 parts of float32 ``x`` (3xTF32)."""
    x = np.asarray(x, np.float32)
    big = tf32_round(x)
    small = tf32_round((x - big).astype(np.float32))
    return big, small


def round_toward_zero(x: np.ndarray) -> np.ndarray:
    """float64 ``x`` to float32, rounded toward zero (as the tensor cores round their sums)."""
    f = np.asarray(x, np.float64).astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(x)
    f[over] = np.nextafter(f[over], np.float32(0))
    return f


def _mma_steps(terms: list[tuple[np.ndarray, np.ndarray]], k: int, step: int, partial: bool
               ) -> np.ndarray:
    m, n = terms[0][0].shape[0], terms[0][1].shape[1]
    acc = np.zeros((m, n), np.float32)
    for k0 in range(0, k, step):
        p = np.zeros_like(acc) if partial else acc
        for a, b in terms:  # one MMA: exact products, the sum rounded toward zero
            part = a[:, k0:k0 + step].astype(np.float64) @ b[k0:k0 + step].astype(np.float64)
            p = round_toward_zero(p.astype(np.float64) + part)
        # the partial sums join the accumulator in a float32 add (round to nearest)
        acc = (acc + p).astype(np.float32) if partial else p
    return acc


def mma_model(a: np.ndarray, b: np.ndarray, precision: str = "3xtf32", step: int = 8,
              partial: bool | None = None) -> np.ndarray:
    """float32 ``a @ b`` as the tensor-core kernel computes it under ``precision``
    ('tf32' or '3xtf32'; see the module docstring). ``partial``: each k step's MMAs sum
    from zero and are added to the accumulator in float32 (the kernel does so for 3xTF32,
    the default there); else the MMAs carry the accumulator."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if precision == "tf32":
        terms = [(tf32_round(a), tf32_round(b))]
    elif precision == "3xtf32":
        (ab, as_), (bb, bs) = split(a), split(b)
        terms = [(as_, bb), (ab, bs), (ab, bb)]
    else:
        raise ValueError(f"precision {precision!r}: write 'tf32' or '3xtf32'")
    return _mma_steps(terms, a.shape[1], step, precision == "3xtf32" if partial is None
                      else partial)


def simt_model(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float32 ``a @ b`` as the SIMT kernel computes it: acc = fma(a[:, k], b[k], acc)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):  # (float32 products are exact in float64: one rounding)
        acc = (acc + np.outer(a[:, k].astype(np.float64), b[k])).astype(np.float32)
    return acc


def error_stats(got: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(max, RMS) absolute error of ``got`` against the float64 ``ref``."""
    err = np.asarray(got, np.float64) - ref
    return float(np.abs(err).max()), float(np.sqrt(np.mean(err * err)))


__all__ = ["error_stats", "mma_model", "round_toward_zero", "simt_model", "split", "tf32_round"]
