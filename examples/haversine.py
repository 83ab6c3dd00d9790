"""Great-circle distances between two arrays of (latitude, longitude) points in degrees:
four inputs, one fused kernel, vs the same ops as separate pyopencl kernels vs NumPy.

    python examples/haversine.py [--size N] [--repeat R]
"""

from __future__ import annotations

import numpy as np
import pyopencl.array as cla
from _bench import compare, parse_args
from pyopencl import clmath

from fusejit import default_queue

EARTH_RADIUS_KM = 6371.0088
RADIANS = np.pi / 180


def haversine(lat1, lon1, lat2, lon2):
    """NumPy code, unchanged: runs on NumPy arrays, and fused on device arrays."""
    lat1, lon1, lat2, lon2 = (np.radians(v) for v in (lat1, lon1, lat2, lon2))
    a = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin(
        (lon2 - lon1) / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(a))


def haversine_unfused(lat1, lon1, lat2, lon2):
    """The same ops on device arrays: each one a pyopencl kernel over the whole tensor."""
    lat1, lon1, lat2, lon2 = (v * RADIANS for v in (lat1, lon1, lat2, lon2))
    s_lat, s_lon = clmath.sin((lat2 - lat1) / 2), clmath.sin((lon2 - lon1) / 2)
    a = s_lat * s_lat + clmath.cos(lat1) * clmath.cos(lat2) * (s_lon * s_lon)
    return 2 * EARTH_RADIUS_KM * clmath.asin(clmath.sqrt(a))


def main() -> None:
    args = parse_args(__doc__)

    queue = default_queue()
    # trips between nearby points (up to ~1 degree apart), as in GPS traces: arcsin near 1
    # (antipodal points) would amplify any float32 rounding in NumPy and on the device alike
    rng = np.random.default_rng(0)
    lat1, lon1 = rng.uniform(-80, 80, args.size), rng.uniform(-180, 180, args.size)
    lat2, lon2 = lat1 + rng.uniform(-1, 1, args.size), lon1 + rng.uniform(-1, 1, args.size)
    host = tuple(v.astype(np.float32) for v in (lat1, lon1, lat2, lon2))
    device = [cla.to_device(queue, a) for a in host]
    compare("Haversine distance (km)", haversine, haversine_unfused, host, device, queue,
            args.repeat)


if __name__ == "__main__":
    main()
