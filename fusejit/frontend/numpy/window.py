"""Windows inside @fuse: ``sliding_window_view`` as an index map, and the 1-D ``convolve`` and
``correlate`` built on it.

A window view is affine: output position ``(i..., w...)`` reads the operand at ``i + w`` along
each windowed axis, so it is a VIEW node like a slice or a transpose, never stored. What consumes
it decides the kernel: a reduction over the window axes is pooling (each output reads its window
through the map), a contraction over them is a convolution, which the matrix-product lowering
turns into an implicit GEMM (its operand read through the window map, no im2col buffer).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from fusejit.errors import UnsupportedOperationError
from fusejit.frontend.dispatch import implements
from fusejit.frontend.numpy.build import pad
from fusejit.frontend.numpy.complex import conjugate
from fusejit.frontend.numpy.reductions import _reduce
from fusejit.frontend.numpy.shape import _as_view_source
from fusejit.frontend.trace import TensorProxy, lift, reshape
from fusejit.ir import dtypes as dt
from fusejit.ir import shapes
from fusejit.ir.ops import Op


def window_map(shape: tuple[int, ...], window_shape: tuple[int, ...], axis: tuple[int, ...]
               ) -> tuple[shapes.AffineMap, tuple[int, ...]]:
    """The affine map and shape of ``sliding_window_view`` (NumPy's checks and messages):
    operand dim ``k`` reads ``out[k] + sum(out[ndim + w] for the windows w on axis k)``."""
    if any(d < 0 for d in window_shape):
        raise ValueError("`window_shape` cannot contain negative values")
    trimmed = list(shape)
    for ax, dim in zip(axis, window_shape):
        if trimmed[ax] < dim:
            raise ValueError("window shape cannot be larger than input array shape")
        trimmed[ax] -= dim - 1
    ndim, out_shape = len(shape), tuple(trimmed) + tuple(window_shape)
    rows = []
    for k in range(ndim):
        coefs = [int(j == k) for j in range(len(out_shape))]
        for w, ax in enumerate(axis):
            if ax == k:
                coefs[ndim + w] = 1
        rows.append((0, tuple(coefs)))
    return tuple(rows), out_shape


def _extent(d: Any) -> int:
    """A window extent as NumPy takes it: an integer (a float or a bool is NumPy's TypeError,
    not truncated). Windows and strides are static: a Python int argument giving one is
    specialised (a new value traces and builds again), a traced array value is refused."""
    if isinstance(d, (bool, np.bool_)):
        raise TypeError("an integer is required")
    return operator.index(d)


@implements(np.lib.stride_tricks.sliding_window_view)
def sliding_window_view(x: Any, window_shape: Any, axis: Any = None, *, subok: bool = False,
                        writeable: bool = False) -> TensorProxy:
    """NumPy's window view: read-only, an index map over ``x`` (padded, sliced, any axes)."""
    if writeable:
        raise UnsupportedOperationError(
            "sliding_window_view(..., writeable=True) is not supported inside @fuse: its windows "
            "overlap, so a write through one changes others; write into the array itself")
    x = _as_view_source(x)
    window = tuple(_extent(d) for d in window_shape) if np.iterable(window_shape) \
        else (_extent(window_shape),)
    if axis is None:
        axes = tuple(range(x.ndim))
        if len(window) != len(axes):
            raise ValueError(f"Since axis is `None`, must provide window_shape for all "
                             f"dimensions of `x`; got {len(window)} window_shape elements and "
                             f"`x.ndim` is {x.ndim}.")
    else:
        axes = tuple(shapes.normalize_axis(a, x.ndim) for a in
                     (axis if np.iterable(axis) else (axis,)))
        if len(window) != len(axes):
            raise ValueError(f"Must provide matching length window_shape and axis; got "
                             f"{len(window)} window_shape elements and {len(axes)} axes "
                             f"elements.")
    m, out_shape = window_map(x.shape, window, axes)
    return x._view(m, out_shape, readonly=True)


# -- 1-D convolution and correlation --------------------------------------------------------------

_MODES = {"valid": 0, "same": 1, "full": 2}


def _mode(mode: Any) -> int:
    """NumPy's mode: 'valid', 'same', 'full' or 0, 1, 2 (NumPy's errors for anything else)."""
    if isinstance(mode, str):
        if mode in _MODES:
            return _MODES[mode]
        if mode[:1].lower() in ("v", "s", "f"):
            raise ValueError("Use one of 'valid', 'same', or 'full' for convolve/correlate mode")
        raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
    if isinstance(mode, (int, np.integer)) and not isinstance(mode, (bool, np.bool_)):
        if 0 <= mode <= 2:
            return int(mode)
        raise ValueError("integer convolve/correlate mode must be 0, 1, or 2")
    raise TypeError("convolve/correlate mode not understood")


def _window_dot(a: TensorProxy, v: TensorProxy, mode: int, same_first: int) -> TensorProxy:
    """``c[k] = sum_n a_padded[k + n] * v[n]`` (``a`` padded by ``len(v) - 1`` zeros on both
    sides: NumPy's 'full' result), only the outputs of ``mode`` ('same' from ``same_first``):
    a window view sliced to those outputs times ``v``, summed over each window in the dtype of
    the operands, as NumPy's dot does (int8 stays int8, bool is bool): one reduction kernel."""
    na, nv = a.shape[0], v.shape[0]
    first, count = ((min(na, nv) - 1, abs(na - nv) + 1), (same_first, max(na, nv)),
                    (0, na + nv - 1))[mode]
    windows = sliding_window_view(pad(a, nv - 1), nv)[first:first + count]
    want = dt.result_type(a.dtype, v.dtype)
    return _reduce(Op.SUM, windows * v, (1,), dtype=want)


def _vector(x: Any, which: str, min_ndim: int) -> TensorProxy:
    x = lift(x)
    if x.ndim > 1:
        raise ValueError("object too deep for desired array")
    if x.ndim < min_ndim:
        raise ValueError("object of too small depth for desired array")
    x = TensorProxy(reshape(x.node, (1,))) if x.ndim == 0 else x
    if x.shape[0] == 0:
        raise ValueError(f"{which} cannot be empty")
    return x


@implements(np.convolve)
def convolve(a: Any, v: Any, mode: Any = "full") -> TensorProxy:
    """np.convolve: the longer operand's windows against the shorter one reversed."""
    a, v = _vector(a, "a", 0), _vector(v, "v", 0)
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    return _window_dot(a, v[::-1], _mode(mode), (v.shape[0] - 1) // 2)


@implements(np.correlate)
def correlate(a: Any, v: Any, mode: Any = "valid") -> TensorProxy:
    """np.correlate: ``c[k] = sum_n a[n + k] * conj(v[n])``. When ``v`` is the longer one
    NumPy correlates the swapped operands and reverses the result: the same sums, with the
    'same' outputs centred from the other end."""
    a, v = _vector(a, "first array argument", 1), _vector(v, "second array argument", 1)
    m = _mode(mode)
    if v.dtype.kind == "c":
        v = conjugate(v)
    na, nv = a.shape[0], v.shape[0]
    return _window_dot(a, v, m, (nv - 1) // 2 if na >= nv else na - 1 - (na - 1) // 2)
