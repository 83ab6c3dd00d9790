"""Black-Scholes call and put prices for a book of European options: three input arrays, two
outputs, one fused kernel, vs the same ops as separate pyopencl kernels vs NumPy.

The normal CDF uses the Abramowitz-Stegun polynomial (|error| < 7.5e-8), written with NumPy
ops only (NumPy has no erf), so the fused, unfused and NumPy versions compute the same thing.

    python examples/black_scholes.py [--size N] [--repeat R]
"""

from __future__ import annotations

import numpy as np
import pyopencl.array as cla
from _bench import compare, parse_args
from pyopencl import clmath

from fusejit import default_queue

RATE, VOLATILITY = 0.02, 0.30
A = (0.319381530, -0.356563782, 1.781477937, -1.821255978, 1.330274429)


def normal_cdf(d):
    k = 1 / (1 + 0.2316419 * np.abs(d))
    poly = k * (A[0] + k * (A[1] + k * (A[2] + k * (A[3] + k * A[4]))))
    tail = 0.3989422804014327 * np.exp(-0.5 * d * d) * poly  # pdf(d) * poly = 1 - cdf(|d|)
    return np.where(d > 0, 1 - tail, tail)


def black_scholes(spot, strike, years):
    """NumPy code, unchanged: runs on NumPy arrays, and fused on device arrays."""
    sigma_t = VOLATILITY * np.sqrt(years)
    d1 = (np.log(spot / strike) + (RATE + 0.5 * VOLATILITY**2) * years) / sigma_t
    d2 = d1 - sigma_t
    discounted = strike * np.exp(-RATE * years)
    call = spot * normal_cdf(d1) - discounted * normal_cdf(d2)
    put = discounted * normal_cdf(-d2) - spot * normal_cdf(-d1)
    return call, put


def normal_cdf_unfused(d: cla.Array) -> cla.Array:
    k = 1 / (1 + 0.2316419 * abs(d))
    poly = k * (A[0] + k * (A[1] + k * (A[2] + k * (A[3] + k * A[4]))))
    tail = 0.3989422804014327 * clmath.exp(-0.5 * d * d) * poly
    return cla.if_positive(d, 1 - tail, tail)


def black_scholes_unfused(spot: cla.Array, strike: cla.Array, years: cla.Array):
    """The same ops on device arrays: each one a pyopencl kernel over the whole book."""
    sigma_t = VOLATILITY * clmath.sqrt(years)
    d1 = (clmath.log(spot / strike) + (RATE + 0.5 * VOLATILITY**2) * years) / sigma_t
    d2 = d1 - sigma_t
    discounted = strike * clmath.exp(-RATE * years)
    call = spot * normal_cdf_unfused(d1) - discounted * normal_cdf_unfused(d2)
    put = discounted * normal_cdf_unfused(-d2) - spot * normal_cdf_unfused(-d1)
    return call, put


def main() -> None:
    args = parse_args(__doc__)

    queue = default_queue()
    rng = np.random.default_rng(0)
    book = (rng.uniform(10, 100, args.size), rng.uniform(10, 100, args.size),
            rng.uniform(0.1, 5, args.size))
    host = [a.astype(np.float32) for a in book]
    device = [cla.to_device(queue, a) for a in host]
    compare("Black-Scholes (call and put)", black_scholes, black_scholes_unfused, host, device, queue,
            args.repeat)


if __name__ == "__main__":
    main()
