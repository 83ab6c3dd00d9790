"""Comparing results with NumPy: dtype, shape and value, with tolerances in ULP.

Used by fusejit's own tests and by users checking their fused functions; ``to_host`` is
inspect/readback.py's, which ``validate=True`` reads results back with too.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from fusejit.api import fuse
from fusejit.inspect.readback import to_host  # (public: fusejit.testing.to_host)
from fusejit.ir.ops import OPS, Op
from fusejit.runtime.backend import get_default_device

_INT_OF = {2: np.int16, 4: np.int32, 8: np.int64}


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Units in the last place between two float arrays of one dtype (NaN==NaN is 0, NaN vs
    number is inf; +0 and -0 are 0 apart)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    assert a.dtype == b.dtype and a.dtype.kind == "f", (a.dtype, b.dtype)
    itype = _INT_OF[a.dtype.itemsize]
    ia = a.view(itype).astype(np.int64)
    ib = b.view(itype).astype(np.int64)
    top = np.int64(1) << (8 * a.dtype.itemsize - 1)
    # map sign-magnitude bit patterns to a monotonic integer line (np.where evaluates both
    # branches: the one discarded for non-negative patterns may overflow)
    with np.errstate(over="ignore"):
        ia = np.where(ia < 0, -(ia + top) if a.dtype.itemsize < 8 else -(ia ^ top), ia)
        ib = np.where(ib < 0, -(ib + top) if b.dtype.itemsize < 8 else -(ib ^ top), ib)
    # |ia - ib| < 2**64 always: subtract in uint64 (wrapping) to keep float64's 64-bit patterns
    # exact (a float64 difference of ~2**62 patterns would round to multiples of 512)
    ua, ub = ia.astype(np.uint64), ib.astype(np.uint64)
    d = np.where(ia >= ib, ua - ub, ub - ua).astype(np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    d = np.where(nan_a & nan_b, 0.0, np.where(nan_a | nan_b, np.inf, d))
    return d


def complex_ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distance of two complex arrays of one dtype in ULPs of their real dtype: the
    smaller of the componentwise distance (the larger of the parts') and, where both are
    finite, the normwise one, ``|a - b|`` over the ULP of ``b``'s larger part (so a part that
    cancels to nearly zero, the real part of ``exp(1j * pi / 2)``, is judged against the
    value's magnitude, as complex functions are specified)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    assert a.dtype == b.dtype and a.dtype.kind == "c", (a.dtype, b.dtype)
    parts = np.maximum(ulp_distance(a.real, b.real), ulp_distance(a.imag, b.imag))
    with np.errstate(all="ignore"):
        scale = np.spacing(np.maximum(np.abs(b.real), np.abs(b.imag))).astype(np.float64)
        norm = np.abs(a.astype(np.complex128) - b.astype(np.complex128)) / scale
    finite = np.isfinite(a) & np.isfinite(b)
    return np.where(finite, np.minimum(parts, np.where(np.isnan(norm), np.inf, norm)), parts)


def op_ulp(op: Op, dtype: np.dtype) -> float:
    """The documented accuracy bound of ``op`` on ``dtype`` (0 for exact ops). For a complex
    ``dtype``, the op's bound on complex operands (``OpInfo.culp``, normwise)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        bound = OPS[op].culp
        return 0.0 if bound is None else bound.get(dtype.itemsize * 4, 0.0)
    bound = OPS[op].ulp
    return 0.0 if bound is None else bound.get(dtype.itemsize * 8, 0.0)


# The tolerance assert_matches uses when the caller gives none: None means the op table's
# largest documented bound for the result's float width (any op may have produced it). A test
# suite that states its tolerances itself may pin it (fusejit's own sets 0: exact unless said).
DEFAULT_ULP: float | None = None


def table_ulp(dtype: np.dtype) -> float:
    """The largest ULP bound the op table documents for floats of ``dtype``'s width: the
    default tolerance of assert_matches (0 for non-floats, which compare exactly)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        return 0.0
    return max(op_ulp(op, dtype) for op in OPS)


def assert_matches(got: Any, want: Any, *, ulp: float | None = None, atol: float | None = None,
                   mask: np.ndarray | None = None, what: str = "result",
                   inputs: Any = ()) -> None:
    """Assert ``got`` equals NumPy's ``want`` in dtype, shape and value.

    Args:
        got: fusejit's result (a NumPy array, a ``pyopencl.array.Array`` or a scalar).
        want: NumPy's result.
        ulp: floats may differ by this many units in the last place (complex values: in
            ULPs of their real dtype, see ``complex_ulp_distance``). Default: the op table's
            documented bound for the dtype (``table_ulp``; ``DEFAULT_ULP`` overrides it).
        atol: or by this much absolutely (results near zero after cancellation). Default:
            ``ulp`` units of the dtype's epsilon scaled to the largest finite magnitude of
            ``inputs`` and ``want`` (``scaled_atol``): a value computed by cancellation (a
            normalisation's ``x - mean``) is only as exact as the operands it came from.
        mask: True where to compare; excludes elements whose value NumPy leaves
            implementation-defined.
        what: names the value in the message.
        inputs: the arrays the result was computed from, for the default ``atol``.

    Raises:
        AssertionError: naming the first differing element, its ULP distance and the worst.
        NaN must match NaN; integers, booleans, dtypes and shapes must match exactly.
    """
    if ulp is None:
        ulp = DEFAULT_ULP if DEFAULT_ULP is not None else table_ulp(np.asarray(want).dtype)
    g = np.asarray(got.get() if hasattr(got, "get") and not isinstance(got, np.ndarray)
                   else got)
    w = np.asarray(want)
    if atol is None:
        atol = scaled_atol(ulp, w, inputs)
    if g.dtype != w.dtype:
        raise AssertionError(f"{what}: dtype {g.dtype} != NumPy's {w.dtype}")
    if g.shape != w.shape:
        raise AssertionError(f"{what}: shape {g.shape} != NumPy's {w.shape}")
    if g.size == 0:
        return
    keep = np.ones(g.shape, bool) if mask is None else np.broadcast_to(mask, g.shape)
    if w.dtype.kind not in "fc":
        bad = (g != w) & keep
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            raise AssertionError(f"{what}: {int(bad.sum())} of {g.size} elements differ; "
                                 f"first at {i}: got {g[i]!r}, NumPy {w[i]!r}")
        return
    d = complex_ulp_distance(g, w) if w.dtype.kind == "c" else ulp_distance(g, w)
    wide = np.complex128 if w.dtype.kind == "c" else np.float64
    with np.errstate(invalid="ignore"):  # inf - inf: those compare by ULP distance
        close = (d <= ulp) | (np.abs(g.astype(wide) - w.astype(wide)) <= atol)
    bad = ~close & keep
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        worst = tuple(np.unravel_index(np.argmax(np.where(keep, d, 0)), d.shape))
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {g.size} elements beyond {ulp} ULP / atol {atol}; "
            f"first at {i}: got {g[i]!r}, NumPy {w[i]!r} ({d[i]:.0f} ULP); "
            f"worst {d[worst]:.0f} ULP at {worst}")


def scaled_atol(ulp: float, want: np.ndarray, inputs: Any = ()) -> float:
    """``ulp`` units of ``want``'s epsilon at the largest finite magnitude among ``want`` and
    ``inputs`` (arrays, device arrays or scalars; a tuple of them): the absolute error a
    result near zero may carry from cancelling operands of that size. 0 for exact dtypes."""
    if want.dtype.kind not in "fc":
        return 0.0
    eps = float(np.finfo(want.dtype).eps)
    largest = 0.0
    for x in (want, *(inputs if isinstance(inputs, (tuple, list)) else (inputs,))):
        a = np.asarray(to_host(x))
        if a.dtype.kind in "fciub" and a.size:
            mag = np.abs(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64))
            finite = mag[np.isfinite(mag)]
            largest = max(largest, float(finite.max()) if finite.size else 0.0)
    return ulp * eps * largest


def flushes_subnormals() -> bool:
    """Does the default device flush float32 subnormals in arithmetic (NVIDIA's Vulkan may;
    PoCL and lavapipe do not)? Where it does, subnormal inputs and results are outside the
    promise of its transcendental ops."""
    return _flushes_subnormals(get_default_device())


@functools.cache
def _flushes_subnormals(device: str) -> bool:
    tiny = np.array([np.finfo(np.float32).smallest_subnormal], np.float32)
    return bool(np.asarray(fuse(lambda x, y: x * y)(tiny, np.ones(1, np.float32)))[0] == 0)
