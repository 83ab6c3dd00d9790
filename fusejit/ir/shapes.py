"""Shape algebra: broadcasting, axes, basic indexing and the affine index maps of VIEW nodes.

A VIEW node reads its operand through an *affine map*: for every operand dimension ``k``,
``src[k] = offset_k + sum_j coef_kj * out[j]``. Broadcasting, transposes, slices with any step,
integer indexing, ``None`` axes and squeezes are all affine maps, and two maps compose into one,
so a chain of movement ops stays a single VIEW and costs nothing at run time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fusejit.errors import BroadcastError, ReadOnlyError, UnsupportedOperationError

Shape = tuple[int, ...]
# per operand dim: (offset, coefficients over the output dims)
AffineMap = tuple[tuple[int, tuple[int, ...]], ...]

AxisError = np.exceptions.AxisError


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy broadcasting; raises BroadcastError worded like NumPy's."""
    # the common case, without NumPy's machinery (most of the cost of tracing an op): every
    # operand of one shape, or a 0-d scalar, which broadcasts to anything
    common: Shape = ()
    for s in shapes:
        if s and s != common:
            if common or type(s) is not tuple:
                break
            common = s
    else:
        return common
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        pretty = "".join(format_shape(s) + " " for s in shapes)  # NumPy's trailing space too
        raise BroadcastError(
            f"operands could not be broadcast together with shapes {pretty}"
        ) from None


def broadcasts_to(src: Shape, out: Shape) -> bool:
    """Whether ``src`` broadcasts to exactly ``out`` (np.broadcast_to's rule)."""
    lead = len(out) - len(src)
    return lead >= 0 and all(s in (1, o) for s, o in zip(src, out[lead:]))


def format_shape(shape: Sequence[int]) -> str:
    """A shape as NumPy's messages print it: ``(5,5)``, ``(3,)``, -1 as ``newaxis``."""
    dims = ["newaxis" if d == -1 else str(d) for d in shape]
    return f"({','.join(dims)}{',' if len(dims) == 1 else ''})"


def normalize_axis(axis: int, ndim: int, prefix: str | None = None) -> int:
    """``axis`` as a non-negative int; ``prefix`` names the argument in the AxisError, as
    NumPy's does (``source: axis 3 is out of bounds ...``)."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"'{type(axis).__name__}' object cannot be interpreted as an integer")
    if not -ndim <= axis < ndim:
        raise AxisError(int(axis), ndim, prefix)
    return int(axis) % ndim


def normalize_axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """Sorted, unique, non-negative axes; ``None`` means all. Duplicates raise like NumPy."""
    if axis is None:
        return tuple(range(ndim))
    axes = [normalize_axis(a, ndim) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    if len(set(axes)) != len(axes):
        raise ValueError("duplicate value in 'axis'")
    return tuple(sorted(axes))


def reshape_target(size: int, shape: Sequence[int], old: Shape) -> Shape:
    """Resolve a requested shape (with one -1 allowed) like ``ndarray.reshape``."""
    shape = tuple(int(d) for d in shape)
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1:
        raise ValueError("can only specify one unknown dimension")
    if any(d < -1 for d in shape):
        raise ValueError("negative dimensions not allowed")
    known = math.prod(d for d in shape if d != -1)
    if unknown:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape "
                             f"{format_shape(shape)}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    if math.prod(shape) != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {format_shape(shape)}")
    return shape


def row_major_strides(shape: Shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


# -- affine maps ----------------------------------------------------------------------------------


def identity_map(ndim: int) -> AffineMap:
    return tuple((0, tuple(int(j == k) for j in range(ndim))) for k in range(ndim))


def broadcast_map(src: Shape, out: Shape) -> AffineMap:
    lead = len(out) - len(src)
    assert lead >= 0, (src, out)
    rows = []
    for k, n in enumerate(src):
        j = k + lead
        assert n == out[j] or n == 1, (src, out)
        rows.append((0, tuple(int(i == j and n == out[j] and n != 1) for i in range(len(out)))))
    return tuple(rows)


def permute_map(axes: Sequence[int]) -> AffineMap:
    """out[j] = src[axes[j]]"""
    return tuple((0, tuple(int(axes[j] == k) for j in range(len(axes))))
                 for k in range(len(axes)))


def compose(outer: AffineMap, inner: AffineMap) -> AffineMap:
    """The map of VIEW(VIEW(x, outer), inner): first ``inner`` (out -> mid), then ``outer``."""
    n_out = len(inner[0][1]) if inner else 0
    rows = []
    for off, coefs in outer:
        new_off = off + sum(c * inner[j][0] for j, c in enumerate(coefs))
        new_coefs = tuple(sum(c * inner[j][1][i] for j, c in enumerate(coefs))
                          for i in range(n_out))
        rows.append((new_off, new_coefs))
    return tuple(rows)


def is_identity(m: AffineMap, src: Shape, out: Shape) -> bool:
    return src == out and m == identity_map(len(out))


def format_map(m: AffineMap) -> str:
    parts = []
    for off, coefs in m:
        terms = [f"{'' if c == 1 else f'{c}*'}i{j}" for j, c in enumerate(coefs) if c]
        if off or not terms:
            terms.append(str(off))
        parts.append("+".join(terms).replace("+-", "-"))
    return "[" + ", ".join(parts) + "]"


# -- basic indexing -------------------------------------------------------------------------------


def index_map(shape: Shape, key: Any) -> tuple[Shape, AffineMap, tuple[tuple[int, int, int, int], ...]]:
    """Basic indexing ``x[key]`` as an affine map.

    Returns the result shape, the map (result index -> ``x`` index) and the *region*: per ``x``
    dim ``(start, step, count, result_dim)``, with result_dim -1 for an integer index. The region
    is what ``x[key] = v`` writes (SETITEM).
    """
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:
        if isinstance(k, (bool, np.bool_)) or (hasattr(k, "dtype") and k.dtype == np.bool_):
            raise UnsupportedOperationError(
                "boolean-mask indexing gives a data-dependent shape and cannot be fused; "
                "use np.where(mask, x, fill) to select values instead")
        if not isinstance(k, (int, np.integer, slice, type(None), type(Ellipsis))) and not (
                isinstance(k, (list, tuple, np.ndarray)) or hasattr(k, "dtype")):
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis "
                             f"(`None`) and integer or boolean arrays are valid indices (got "
                             f"{type(k).__name__})")
        if not isinstance(k, (int, np.integer, slice, type(None), type(Ellipsis))):
            raise UnsupportedOperationError(
                f"advanced (integer-array) indexing with {type(k).__name__} is a gather and is "
                "not supported inside @fuse; use basic indexing (ints, slices, None, ...)")
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(k is not None and k is not Ellipsis for k in key)
    if n_real > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, "
                         f"but {n_real} were indexed")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - n_real) + key[i + 1:]
    else:
        key = key + (slice(None),) * (len(shape) - n_real)

    out_shape: list[int] = []
    src_rows: list[tuple[int, int, int]] = []  # per src dim: (start, step, out dim or -1)
    region = []
    dim = 0
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        n = shape[dim]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            src_rows.append((start if count else 0, step, len(out_shape)))
            region.append((start if count else 0, step, count, len(out_shape)))
            out_shape.append(count)
        else:
            i = int(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {dim} with size {n}")
            i %= n
            src_rows.append((i, 0, -1))
            region.append((i, 1, 1, -1))
        dim += 1
    m = tuple((start, tuple(step if j == o else 0 for j in range(len(out_shape))))
              for start, step, o in src_rows)
    return tuple(out_shape), m, tuple(region)


def write_region(m: AffineMap, root_shape: tuple[int, ...], region_shape: tuple[int, ...]
                 ) -> tuple[tuple[int, int, int, int], ...]:
    """A write map as a per-root-dim region (start, step, count, region dim)."""
    region = []
    used: set[int] = set()
    for k, (off, coefs) in enumerate(m):
        nz = [(j, c) for j, c in enumerate(coefs) if c and region_shape[j] != 1]
        if len(nz) > 1 or any(j in used for j, _ in nz):
            raise UnsupportedOperationError("cannot write through this view (it is not a plain "
                                            "strided region of the argument)")
        if nz:
            j, c = nz[0]
            used.add(j)
            region.append((off, c, region_shape[j], j))
        else:
            size1 = [j for j, c in enumerate(coefs) if c and region_shape[j] == 1]
            region.append((off, 1, 1, -1 if not size1 else size1[0]))
    if len(used) != sum(1 for d in region_shape if d != 1):
        raise ReadOnlyError("output array is read-only (it is a broadcast view)")
    return tuple(region)
