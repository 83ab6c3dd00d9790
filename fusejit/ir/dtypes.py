"""DTypes fusejit computes with, and NumPy's promotion rules (NEP 50) applied to traced values.

Promotion is not re-implemented: every elementwise op asks NumPy itself which inner loop it would
pick (``ufunc.resolve_dtypes``), passing Python scalars as their *types* so they stay weak exactly
as NEP 50 says (``float32 * 2.5 -> float32``, ``int32 + float32 -> float64``).
"""

from __future__ import annotations

from typing import Any

import math
import sys

import numpy as np

from fusejit.errors import UnsupportedDTypeError


def is_masked(value: Any) -> bool:
    """``isinstance(value, np.ma.MaskedArray)`` without importing numpy.ma (~30 ms, paid by a
    process's first fused call otherwise): no value is a masked array before it is imported."""
    ma = sys.modules.get("numpy.ma")
    return ma is not None and isinstance(value, ma.MaskedArray)

BOOL = np.dtype(np.bool_)
INT8, INT16, INT32, INT64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
UINT8, UINT16, UINT32, UINT64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
FLOAT16, FLOAT32, FLOAT64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
COMPLEX64, COMPLEX128 = np.dtype(np.complex64), np.dtype(np.complex128)

SIGNED = (INT8, INT16, INT32, INT64)
UNSIGNED = (UINT8, UINT16, UINT32, UINT64)
FLOATS = (FLOAT16, FLOAT32, FLOAT64)
COMPLEXES = (COMPLEX64, COMPLEX128)
SUPPORTED = (BOOL, *SIGNED, *UNSIGNED, *FLOATS, *COMPLEXES)
_SUPPORTED_SET = frozenset(SUPPORTED)

# A Python scalar's type stands for a *weak* operand in NumPy's promotion (NEP 50). Python bools
# are not weak: they promote as np.bool_ (see scalar_type).
WeakType = type[int] | type[float] | type[complex]
DTypeLike = np.dtype | WeakType


def kind(dt: np.dtype) -> str:
    """'b' bool, 'i' signed, 'u' unsigned, 'f' float, 'c' complex: the key op templates are
    chosen by."""
    return dt.kind


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f"


def is_int(dt: np.dtype) -> bool:
    return dt.kind in "iu"


def is_complex(dt: np.dtype) -> bool:
    return dt.kind == "c"


def real_of(dt: np.dtype) -> np.dtype:
    """The dtype of a complex dtype's parts (complex64 -> float32); other dtypes themselves."""
    return np.dtype(f"f{dt.itemsize // 2}") if dt.kind == "c" else dt


def complex_of(dt: np.dtype) -> np.dtype:
    """The complex dtype a real one becomes in complex arithmetic (NumPy's result_type with a
    weak complex: float16 and float32 -> complex64, everything else -> complex128)."""
    return np.result_type(dt, 0j)


_NAMES: dict[np.dtype, str] = {}


def type_name(dt: np.dtype) -> str:
    """``dt.name``, memoised: NumPy builds the name afresh on every access (about 3 µs), and
    source emission asks for it several times per op."""
    name = _NAMES.get(dt)
    if name is None:
        name = _NAMES.setdefault(dt, dt.name)
    return name


def extremum_keeps_second(dt: np.dtype) -> bool:
    """Of two equal operands (-0.0 and 0.0), do NumPy's maximum, minimum, fmax and fmin return
    the second? Its float32/float64 loops do (SIMD, maxps-like), its float16 loop returns the
    first (scalar C); x86 NumPy, checked by tests/frontend/test_numpy_traps.py."""
    return dt.kind == "f" and dt != FLOAT16


def bits(dt: np.dtype) -> int:
    return dt.itemsize * 8


def unsigned_of(dt: np.dtype) -> np.dtype:
    """The unsigned integer dtype of the same width (used for wrap-around arithmetic)."""
    return np.dtype(f"u{dt.itemsize}")


def check_supported(dt: np.dtype, what: str = "array") -> np.dtype:
    """Return the native-byte-order dtype fusejit computes with, or raise a clear TypeError."""
    if dt in _SUPPORTED_SET and dt.isnative:
        return dt
    if dt.kind in "iufcb" and dt.fields is None and dt.subdtype is None:
        native = dt.newbyteorder("=") if dt.byteorder not in "=|" else dt
        native = np.dtype(native.str.replace(">", "<")) if native.byteorder == ">" else native
        if native in _SUPPORTED_SET:
            return np.dtype(native.name)
    raise UnsupportedDTypeError(
        f"{what} has dtype {dt!r}, which fusejit cannot compute with; supported dtypes are "
        f"{', '.join(d.name for d in SUPPORTED)} (longdouble, clongdouble, object, structured, "
        "string and datetime dtypes are not)"
    )


INT64_RANGE = range(-2**63, 2**63)


def int_range(value: int) -> str | None:
    """Where a Python int lies beyond int64 (None: within), which decides how a dynamic int
    compares with integer arrays exactly, as NumPy 2 does: "uint64" for [2**63, 2**64), else
    "above" or "below" every integer dtype's range."""
    if value in INT64_RANGE:
        return None
    return "uint64" if value < 2**64 and value >= 0 else "above" if value > 0 else "below"


def scalar_type(value: Any) -> WeakType | np.dtype:
    """The promotion type of a Python or NumPy scalar: weak Python type or a strong dtype."""
    if isinstance(value, np.generic):
        return check_supported(value.dtype, "scalar")
    if isinstance(value, bool):
        # bool is the lowest kind, so a weak and a strong bool promote alike; and
        # ufunc.resolve_dtypes accepts only int, float and complex as weak types
        return BOOL
    if isinstance(value, int):
        return int
    if isinstance(value, float):
        return float
    if isinstance(value, complex):
        return complex
    raise UnsupportedDTypeError(
        f"cannot use {type(value).__name__} value {value!r} in a fused function; "
        "pass arrays, Python or NumPy scalars"
    )


def default_dtype(t: DTypeLike) -> np.dtype:
    """The dtype a weak Python scalar takes when nothing else decides (NumPy's defaults)."""
    if isinstance(t, np.dtype):
        return t
    return {bool: BOOL, int: INT64, float: FLOAT64, complex: COMPLEX128}[t]


_FLOAT_MAX = {2: 65504.0, 4: float(np.finfo(np.float32).max), 8: math.inf}


def convert_scalar(value: Any, dt: np.dtype) -> np.generic:
    """Convert a (possibly weak) scalar value to ``dt`` exactly as NumPy does when it promotes.

    Python ints that do not fit raise OverflowError, as in NumPy 2 (``int8 + 300``).
    """
    if type(value) is int and dt.kind in "iu":
        info = np.iinfo(dt)
        if not info.min <= value <= info.max:
            raise OverflowError(f"Python integer {value} out of bounds for {dt.name}")
        return dt.type(value)  # (in range: no warning to silence, no errstate to pay)
    if type(value) is int and dt.kind == "f" and abs(value) <= _FLOAT_MAX[dt.itemsize]:
        return dt.type(value)  # rounds to nearest without overflow: nothing to warn about
    if type(value) is float and dt.kind == "f" and (
            dt.itemsize == 8 or abs(value) <= _FLOAT_MAX[dt.itemsize] or value != value
            or abs(value) == math.inf):
        return dt.type(value)  # no overflow to warn about: no errstate to pay
    if type(value) is dt.type:
        return value
    if dt.kind != "c" and isinstance(value, (complex, np.complexfloating)):
        raise TypeError(f"cannot convert the complex value {value!r} to {dt.name} (NumPy would "
                        "discard its imaginary part with a ComplexWarning); write "
                        f"np.real(value) or value.real to keep the real part")
    with np.errstate(all="ignore"):
        if isinstance(value, np.generic):
            return value.astype(dt)
        return dt.type(value)


# A checked CAST (``Node.arg == (side,)``) converts a Python int computed on the host into an
# integer dtype as NumPy converts a Python int operand: out of range raises OverflowError
# (``RAISE``), except on the side where np.clip drops such a bound (``SATURATE_LOW`` for a
# lower bound, ``SATURATE_HIGH`` for an upper one), where it becomes the dtype's extreme, which
# clips exactly as much as no bound at all. Kernels never compute one: passes/hoist.py moves it
# to the host.
RAISE, SATURATE_LOW, SATURATE_HIGH = 0, -1, 1


def convert_checked(value: Any, dt: np.dtype, side: int) -> np.generic:
    """A host-computed integer (a Python or NumPy int) converted to ``dt`` as a checked CAST
    says (see ``RAISE``)."""
    value = int(value)
    info = np.iinfo(dt)
    if side == SATURATE_LOW:
        value = max(value, int(info.min))
    elif side == SATURATE_HIGH:
        value = min(value, int(info.max))
    return convert_scalar(value, dt)


def result_type(*types: DTypeLike) -> np.dtype:
    """NumPy's result_type with weak Python scalars (NEP 50)."""
    return np.result_type(*(t if isinstance(t, np.dtype) else t(0) for t in types))
