"""Bad and unusual inputs, one table: each row is an input and what NumPy does with it.

Every row runs the same function through NumPy and through ``@fuse`` on separate copies of its
inputs and asserts parity: the same exception class (checked against the class the row names,
which NumPy is first checked to raise), or the same values (dtype, shape, bits: -0.0 is not
0.0, NaN matches NaN). Every row also asserts that no input was modified except by the
function's own writes: after the call fusejit's inputs must equal NumPy's (both start equal),
and after an exception they must equal what they were before the call.

A few rows document where fusejit deliberately differs (``deviation=``: what fusejit does
instead, and why); a few have no NumPy counterpart (``numpy=FUSEJIT_ONLY``: fusejit-specific
inputs such as device arrays from two OpenCL contexts). The parity figure printed at the end of
the module counts rows whose fusejit behaviour matches NumPy's.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pytest

import fusejit
from fusejit import (
    ContextMismatchError,
    TracerConversionError,
    UnsupportedDTypeError,
    UnsupportedOperationError,
    fuse,
)
from fusejit.testing import to_host

VALUES = "values"  # NumPy returns values: fusejit must return the same
FUSEJIT_ONLY = "fusejit only"  # no NumPy counterpart: the row names what fusejit must do


def _numpy_where_out_of_range() -> Any:
    """NumPy < 2.5 wraps an out-of-range Python int branch of np.where; 2.5 raises."""
    try:
        np.where(np.True_, np.zeros(1, np.uint8), -7)
    except OverflowError:
        return OverflowError
    return VALUES


WHERE_OUT_OF_RANGE = _numpy_where_out_of_range()


@dataclass(frozen=True)
class Row:
    id: str
    fn: Callable[..., Any]
    args: Callable[[], tuple[Any, ...]]  # fresh inputs on every call
    numpy: type[BaseException] | str  # NumPy's exception class, or VALUES
    deviation: type[BaseException] | str | None = None  # what fusejit does instead, if it differs
    why: str = ""  # for deviations and fusejit-only rows
    device: tuple[int, ...] = ()  # argument positions passed as pyopencl arrays
    fusejit_values: Callable[[], Any] | None = None  # a deviation's documented values
    defined: Callable[[], np.ndarray] | None = None  # elements NumPy defines (the rest: any)
    setup: Callable[[pytest.MonkeyPatch], None] | None = None  # monkeypatches for this row


def a(values: Any, dtype: Any = None) -> np.ndarray:
    return np.array(values, dtype=dtype)


def twice(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same array as two arguments."""
    return x, x


I32, I64, U8, U64, F32, F64 = np.int32, np.int64, np.uint8, np.uint64, np.float32, np.float64
INT32_MIN, INT32_MAX = np.iinfo(I32).min, np.iinfo(I32).max


# -- the functions --------------------------------------------------------------------------------


def add(x, y):
    return x + y


def full_of_argument(x, n):
    return np.full(3, n, dtype=np.int8) + x


def iadd(x, y):
    x += y


def iadd_float(x):
    x += 1.5


def add_into_broadcast_view(x, y):
    view = np.broadcast_to(x, (3, 4))
    view += y


def shift_right_in_place(x):
    x[1:] += x[:-1]


def shift_left_in_place(x):
    x[:-1] += x[1:]


def add_twice_then_read(x, y):
    x += y
    return x * 2


def list_times_scalar(v, s):
    return v * s + s  # Python: a list repeated s times, then list + int: TypeError


def overflow_then_type_error(x, n):
    y = np.left_shift(x, n)  # NumPy stops here: -7 is out of bounds for uint8
    return np.bitwise_and(y, 1.5)  # (no loop for float: a TypeError, had it got here)


def reverse_into(x, y):
    x[:] = y[::-1]


def zero_size(x):
    return x * 2, x.sum(axis=0), x.sum(axis=1), x.prod(axis=0)


def everything_of(x, y):
    return x + y, np.sqrt(np.abs(x)), x > y, x.sum(), np.maximum(x, y)  # all exact ops


def div_mod(x, y):
    return x // y, x % y, np.fmod(x, y)


def by_minus_one(x):
    return x // -1, x % -1, np.fmod(x, -1), -x, np.abs(x)


def shifts(x, y):
    return x << y, x >> y


def nan_reductions(x):
    return (x.max(), x.min(), np.maximum(x, 0.0), np.minimum(x, 0.0), np.fmax(x, 0.0),
            np.sign(x), np.argmax(x), np.argmin(x), np.clip(x, -1, 1))


def rounding(x):
    return np.round(x), np.rint(x), np.round(x, 1), np.round(x, -1), np.floor(x), np.trunc(x)


def fma_candidate(x, y, z):
    return x * y + z


def signed_zeros(x):
    return (x * 1.0, x + 0.0, x - 0.0, -x, np.abs(x), np.sign(x), np.sqrt(x), 1.0 / x, x * 0.0,
            np.copysign(1.0, x), np.signbit(x))


def subnormal_math(x):
    return x * np.float32(0.5), x / np.float32(2), x * np.float32(2 ** 20), np.sqrt(x), x + x


def affine(x):
    return x * 2 + 1


def compare_mixed(x, y):
    return x + y, x < y, x == y, x >= y


def int_power(x):
    return x ** -1


def power(x, y):
    return x ** y


def float_powers(x):
    return x ** 0.5, x ** -1, x ** 2, x ** 0, x ** 1, np.power(x, 0.5), x ** -0.5, x ** 3


def plus_big_literal(x):
    return x + 2 ** 70


def control_flow_on_array(x):
    if x > 0:
        return x
    return -x


def control_flow_on_reduction(x):
    if x.sum() > 0:
        return x
    return -x


def sort(x):
    return np.sort(x)


def mask_gather(x):
    return x[x > 0]


def dead_overflow(x, n):
    unused = x + n  # noqa: F841  (NumPy raises here for n = -1; fusejit never computes it)
    return x * 2


def where_wraps(c, x):
    return np.where(c, x, -7), np.where(c, x, 300)


def clip_bounds(x):
    return np.clip(x, -3, 300), np.clip(x, 3, 4)


def cast_out_of_range(x):
    return x.astype(np.int32)


def weak_scalar_math(x, s):
    return x * (s + 1), x * 0.1


def out_wrong_shape(x, y, out):
    np.add(x, y, out=out)


def ufunc_out(x, y, out):
    np.add(x, y, out=out)
    return out


def empty_stats(x):
    return np.mean(x), np.sum(x), np.prod(x), np.any(x), np.all(x)


def empty_argmax(x):
    return np.argmax(x)


def edge_math(x):
    return np.sqrt(x), np.log(x), np.log1p(x), np.arcsin(x), x / 0.0, np.exp(x * 100)


def reshape_bad(x):
    return x.reshape(4, 4)


def int_wrap(x):
    return x + 1, x * 2, -x, np.abs(x), x - INT32_MIN


def reciprocal_int(x):
    return np.reciprocal(x)


def deep_chain(x):
    for _ in range(5000):  # 10,003 nodes: the input, two literals, 10,000 ops
        x = x * 1.0001 + 0.5
    return x


inner = fuse(lambda x: np.exp(x) + 1)


def calls_fused(x):
    return inner(x) * 2


def writes_readonly(x):
    x += 1


def zero_d_reductions(x):
    return x.sum(axis=0), x.max(axis=-1), np.prod(x, axis=0), np.argmax(x, axis=-1)


def compare_u64(x, n):
    return x < n, x == n, x >= n


def assign_all(x, v):
    x[...] = v


def negative_nan(x):
    return np.signbit(x + -np.nan), x * -np.nan, np.where(x > 0, x, -np.nan)


def scalar_iadd(s, x):
    t = s
    s += 1
    return x + t, s


def scalar_iadd_array(s, x):
    s += x
    return s


# -- the table --------------------------------------------------------------------------------------


ROWS = [
    Row("shapes that do not broadcast", add, lambda: (a([1., 2, 3], F32), a([1., 2], F32)),
        ValueError),
    Row("in-place add into a broadcast view", add_into_broadcast_view,
        lambda: (a([1., 2, 3, 4], F32), np.ones((3, 4), F32)), ValueError),
    Row("int32 += 1.5", iadd_float, lambda: (a([1, 2, 3], I32),), TypeError),
    Row("int32 += float64 array", iadd, lambda: (a([1, 2], I32), a([0.5, 1.5])), TypeError),
    Row("overlapping in-place slices x[1:] += x[:-1]", shift_right_in_place,
        lambda: (a([1., 2, 3, 4, 5], F32),), VALUES),
    Row("overlapping in-place slices x[:-1] += x[1:]", shift_left_in_place,
        lambda: (a([1., 2, 3, 4, 5], F32),), VALUES),
    Row("overlapping in-place slices on a device array", shift_right_in_place,
        lambda: (a(np.arange(40.0), F32),), VALUES, device=(0,)),
    Row("the same array passed twice (x += y, y is x)", add_twice_then_read,
        lambda: twice(a([1., 2, 3], F32)), VALUES),
    Row("the same device array passed twice, read reversed", reverse_into,
        lambda: twice(a([1., 2, 3, 4], F32)), VALUES, device=(0, 1)),
    Row("zero-size arrays", zero_size, lambda: (np.zeros((0, 3), F32),), VALUES),
    Row("zero-size max (no identity)", lambda x: x.max(), lambda: (np.zeros((0, 3), F32),),
        ValueError),
    Row("zero-size mean, sum, prod, any, all", empty_stats, lambda: (np.zeros(0, F64),),
        VALUES),
    Row("zero-size argmax", empty_argmax, lambda: (np.zeros(0, F32),), ValueError),
    Row("0-d arrays", everything_of, lambda: (a(2.5, F32), a(3, I32)), VALUES),
    Row("0-d device arrays", everything_of, lambda: (a(2.5, F32), a(3, I32)), VALUES,
        device=(0, 1)),
    Row("axis out of range", lambda x: x.sum(axis=2), lambda: (np.ones((2, 3), F32),),
        np.exceptions.AxisError),
    Row("duplicate axes", lambda x: x.sum(axis=(0, 0)), lambda: (np.ones((2, 3), F32),),
        ValueError),
    Row("bad reshape", reshape_bad, lambda: (np.ones(6, F32),), ValueError),
    Row("int8 + 300", lambda x: x + 300, lambda: (a([1, 2], np.int8),), OverflowError),
    Row("uint8 + (-1)", lambda x: x + (-1), lambda: (a([1, 2], U8),), OverflowError),
    Row("uint8 - 1 wraps", lambda x: x - 1, lambda: (a([0, 1, 255], U8),), VALUES),
    Row("uint64 with int64 (float64 result, exact comparisons)", compare_mixed,
        lambda: (a([2 ** 64 - 1, 0, 2 ** 63], U64), a([-1, 2 ** 63 - 1, -(2 ** 63)], I64)),
        VALUES),
    Row("bool subtraction", lambda x, y: x - y, lambda: (a([True, False]), a([True, True])),
        TypeError),
    Row("bool negation", lambda x: -x, lambda: (a([True, False]),), TypeError),
    Row("integer power, negative scalar exponent", int_power, lambda: (a([1, 2, -1], I32),),
        ValueError),
    Row("integer power, negative array exponent", power,
        lambda: (a([1, -1, 2, 0, 3], I32), a([-1, -3, -1, 2, 2], I32)), ValueError,
        deviation=VALUES, fusejit_values=lambda: a([1, -1, 0, 0, 9], I32),
        why="data-dependent: the kernel cannot raise, so it returns (int)(1/x**|b|) for a "
            "negative exponent (1 for 1, ±1 for -1, 0 otherwise); non-negative exponents are "
            "exact"),
    Row("integer power, negative exponent passed as an argument", power,
        lambda: (a([2, 1, -1], I32), -1), ValueError, deviation=VALUES,
        fusejit_values=lambda: a([0, 1, -1], I32),
        why="the exponent is a kernel argument: the kernel computes (int)(1/x**|b|) instead of "
            "raising (a literal or captured constant exponent raises ValueError as in NumPy)"),
    Row("float powers take NumPy's ** shortcuts (x**0.5 is sqrt)", float_powers,
        lambda: (a([-np.inf, -0.0, 4, -1, np.inf, 0], F32),), VALUES),
    Row("integer // and % by zero", div_mod,
        lambda: (a([7, -7, 0, INT32_MIN], I32), a([0, 0, 0, 0], I32)), VALUES),
    Row("integer // and % by -1 at INT_MIN", by_minus_one,
        lambda: (a([INT32_MIN, 7, -7, INT32_MAX], I32),), VALUES),
    Row("float // and % by zero, signed zeros, inf", div_mod,
        lambda: (a([1., -1, 0, np.inf, np.nan, -0.0]), a([0., -0.0, 0, 2, 1, 3])), VALUES),
    Row("shifts by >= width and negative amounts", shifts,
        lambda: (a([1, -8, 3, -1, 5, 7], I32), a([0, 31, 32, 33, 64, -1], I32)), VALUES),
    Row("NaN in max/min/sign/argmax/clip", nan_reductions,
        lambda: (a([1., np.nan, -2, 3, np.nan], F32),), VALUES),
    Row("round half to even", rounding,
        lambda: (a([0.5, 1.5, 2.5, -0.5, -2.5, 0.25, 0.35, 15, 25, -0.0], F64),), VALUES),
    Row("cancellation in a*b+c (no FMA contraction)", fma_candidate,
        lambda: (a([1 + 2. ** -12], F32), a([1 + 2. ** -12], F32), a([-(1 + 2. ** -11)], F32)),
        VALUES),
    Row("-0.0", signed_zeros, lambda: (a([-0.0, 0.0], F64),), VALUES),
    Row("subnormals", subnormal_math,
        lambda: (a([1e-45, -3e-42, 1.1754942e-38, 1e-40], F32),), VALUES),
    Row("NaN, inf, log(0), sqrt(-1), overflow", edge_math,
        lambda: (a([-1., 0, -0.0, np.inf, -np.inf, np.nan, 8], F32),), VALUES),
    Row("integer overflow wraps, abs(INT_MIN)", int_wrap,
        lambda: (a([INT32_MAX, INT32_MIN, -1], I32),), VALUES),
    Row("float16 (no cl_khr_fp16 needed)", affine, lambda: (a([0.1, 1000, 65504, -3], np.float16),),
        VALUES),
    Row("float64 on a device without fp64 (simulated)", affine, lambda: (a([1., 2]),),
        FUSEJIT_ONLY, deviation=UnsupportedDTypeError, setup=lambda mp: _no_fp64(mp),
        why="NumPy computes float64 on the host; the device cannot, so fusejit refuses before "
            "building or launching anything"),
    Row("big-endian input", affine, lambda: (a([1.5, -2, 3], ">f4"),), VALUES),
    Row("big-endian array written in place", iadd, lambda: (a([1, 2, 3], ">i4"), a([5, 6, 7], I32)),
        VALUES),
    Row("object dtype", affine, lambda: (a([1, 2], object),), VALUES,
        deviation=UnsupportedDTypeError, why="Python objects cannot run on an OpenCL device"),
    Row("structured dtype", affine, lambda: (np.zeros(2, "i4,f4"),), TypeError),
    Row("complex input", affine, lambda: (a([1 + 2j]),), VALUES),
    Row("complex128 on a device without fp64 (simulated)", affine, lambda: (a([1 + 2j]),),
        FUSEJIT_ONLY, deviation=UnsupportedDTypeError, setup=lambda mp: _no_fp64(mp),
        why="complex128 computes in double2: the device cannot, so fusejit refuses before "
            "building or launching anything"),
    Row("Python int beyond int64 with int64", plus_big_literal, lambda: (a([1, 2], I64),),
        OverflowError),
    Row("Python int beyond int64 with float64", plus_big_literal, lambda: (a([1., 2]),), VALUES),
    Row("Python int argument beyond int64", add, lambda: (a([1, 2], I64), 2 ** 70),
        OverflowError),
    Row("Python int argument beyond int64, float array", add, lambda: (a([1., 2]), 2 ** 70),
        VALUES),
    Row("NumPy mixed with device arrays", everything_of, lambda: (a([1., -2, 3], F32),
                                                                 a([2, 2, 2], I32)),
        VALUES, device=(0,)),
    Row("device arrays from two contexts", add, lambda: (a([1., 2], F32), a([3., 4], F32)),
        FUSEJIT_ONLY, deviation=ContextMismatchError, device=(0, 1),
        why="buffers of two OpenCL contexts cannot meet in one kernel"),
    Row("Python control flow on a traced array", control_flow_on_array,
        lambda: (a([1., -2], F32),), ValueError),
    Row("Python control flow on a traced reduction", control_flow_on_reduction,
        lambda: (a([1., -2], F32),), VALUES, deviation=TracerConversionError,
        why="the value is only known on the device: write np.where(x.sum() > 0, x, -x) or make "
            "the condition a static argument"),
    Row("unsupported function np.sort", sort, lambda: (a([3., 1, 2], F32),), VALUES,
        deviation=UnsupportedOperationError, why="sorting is not elementwise"),
    Row("np.full with a traced fill value", full_of_argument, lambda: (a([3., -1, 2], F32), 7.5),
        VALUES, deviation=UnsupportedOperationError,
        why="np.full copies into a NumPy array it makes, a constant of the trace: the error "
            "says to write np.full_like or np.broadcast_to"),
    Row("np.full with a Python int fill value", full_of_argument,
        lambda: (a([3., -1, 2], F32), 7), VALUES,
        why="an int argument the trace needs as a Python int is specialised on (issue 30)"),
    Row("boolean mask x[x > 0]", mask_gather, lambda: (a([3., -1, 2], F32),), VALUES,
        deviation=UnsupportedOperationError, why="the result's shape depends on the data"),
    Row("a function calling another fused function", calls_fused, lambda: (a([0., 1, -1], F32),),
        VALUES),
    Row("a DAG of 10,003 nodes", deep_chain, lambda: (np.linspace(-1, 1, 256, dtype=F32),),
        VALUES),
    Row("value-dependent error in dead code", dead_overflow, lambda: (a([1, 2], U8), -1),
        OverflowError),  # (the trace converts n where NumPy does, before dead code is removed)
    Row("OverflowError before a later trace-time TypeError", overflow_then_type_error,
        lambda: (a([1, 2], U8), -7), OverflowError),
    Row("np.where with an out-of-range Python int", where_wraps,
        lambda: (a([True, False]), a([1, 2], U8)), WHERE_OUT_OF_RANGE),
    Row("np.clip bounds beyond the dtype", clip_bounds, lambda: (a([0, 5, 250], U8),), VALUES),
    Row("np.clip lower bound above the dtype", lambda x: np.clip(x, 300, 400),
        lambda: (a([0, 5], U8),), OverflowError),
    # implementation-defined in C: NumPy's value depends on the machine (x86: INT_MIN); fusejit
    # saturates. Only the defined elements are compared.
    Row("float to int of NaN, inf, out of range", cast_out_of_range,
        lambda: (a([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7]),), VALUES,
        defined=lambda: a([False] * 5 + [True] * 2)),
    # NumPy computes (int)(1.0 / x): undefined at 0 (x86: INT_MIN); fusejit gives 0
    Row("integer reciprocal of 0", reciprocal_int, lambda: (a([0, 1, -1, 2], I32),), VALUES,
        defined=lambda: a([False, True, True, True])),
    Row("Python scalar arithmetic stays weak", weak_scalar_math,
        lambda: (a([1., 2], F32), 2.5), VALUES),
    Row("out= of the wrong shape", out_wrong_shape,
        lambda: (a([1., 2], F32), a([1., 2], F32), np.zeros(3, F32)), ValueError),
    Row("out= an argument", ufunc_out, lambda: (a([1., 2], F32), a([3., 4], F32),
                                                np.zeros(2, F32)), VALUES),
    Row("writing into a read-only array", writes_readonly, lambda: (_readonly(a([1., 2])),),
        ValueError),
    Row("0-d reductions along axis 0 and -1", zero_d_reductions, lambda: (a(2.5, F32),), VALUES),
    Row("0-d reduction along axis 1", lambda x: x.sum(axis=1), lambda: (a(2.5, F32),),
        np.exceptions.AxisError),
    Row("uint64 array compared with a dynamic 2**63", compare_u64,
        lambda: (a([1, 2 ** 63, 2 ** 64 - 1], U64), 2 ** 63), VALUES),
    Row("uint64 array compared with a dynamic int64", compare_u64,
        lambda: (a([2 ** 62 + 1, 2 ** 62, 2 ** 64 - 1], U64), 2 ** 62), VALUES),
    Row("x[...] = v, v (1, 1, 1) into (1, 1)", assign_all,
        lambda: (np.zeros((1, 1), F32), np.ones((1, 1, 1), F32)), VALUES),
    Row("x[...] = v, v (2, 1, 1) into (1, 1)", assign_all,
        lambda: (np.zeros((1, 1), F32), np.ones((2, 1, 1), F32)), ValueError),
    Row("masked array", affine, lambda: (np.ma.array([1., 2], mask=[0, 1]),), VALUES,
        deviation=TypeError, why="a kernel would drop the mask; fusejit refuses masked arrays "
        "(pass np.ma.getdata(x) and the mask as arrays)"),
    Row("-nan constant keeps its sign", negative_nan, lambda: (a([1., 0, -2], F32),), VALUES),
    Row("out= that is not an array", lambda x: np.add(x, x, out=object()), lambda: (a([1., 2]),),
        TypeError),
    Row("index of a float", lambda x: x[1.5], lambda: (a([1., 2]),), IndexError),
    Row("big-endian device array", affine, lambda: (a([1.5, -2, 3], ">f4"),), VALUES,
        deviation=UnsupportedDTypeError, device=(0,),
        why="kernels compute in the device's byte order; fusejit refuses a non-native pyopencl "
            "array before launching (NumPy arrays are converted on upload)"),
    Row("big-endian array copied", lambda x: x.copy(), lambda: (a([1.5, -2, 3], ">f4"),), VALUES,
        deviation=VALUES, fusejit_values=lambda: a([1.5, -2, 3], F32),
        why="results are computed and returned in native byte order (the values are NumPy's)"),
    Row("NumPy scalar argument: s += 1 rebinds s", scalar_iadd,
        lambda: (np.float64(1), np.zeros(3)), VALUES),
    Row("NumPy scalar argument: s += array is a new array", scalar_iadd_array,
        lambda: (np.float32(1), np.arange(3.)), VALUES),
    Row("0-d array argument: s += 1 writes s", scalar_iadd,
        lambda: (a(1.0), np.zeros(3)), VALUES),
    Row("index array past the end", lambda x, i: x[i], lambda: (a([0., 10, 20]), a([1, 7])),
        IndexError),
    Row("index array before -n", lambda x, i: np.take(x, i), lambda: (a([0., 10]), a([-3])),
        IndexError),
    Row("device index array out of bounds", lambda x, i: x[i] * 2,
        lambda: (a([0., 10, 20], F32), a([0, 3])), IndexError, device=(0, 1)),
    Row("take_along_axis label = number of classes",
        lambda p, k: np.take_along_axis(p, k[:, None], 1),
        lambda: (np.ones((2, 4), F32), a([1, 4])), IndexError),
    Row("in-place write through an out-of-bounds index", lambda x, i: iadd(x, x[i]),
        lambda: (a([1., 2, 3]), a([0, 1, 3])), IndexError),
    Row("tuple of arrays as an argument", lambda t: t[0] + t[1],
        lambda: ((a([1., 2]), a([3., 4])),), VALUES, deviation=TypeError,
        why="lists and tuples are static Python values (shapes, axes), the same rule for both; "
            "arrays inside one are refused by name: pass them as arguments of their own"),
    Row("list argument times a dynamic Python int", list_times_scalar, lambda: ([1, 2], 2),
        TypeError),
    Row("tuple argument times a dynamic Python int", list_times_scalar, lambda: ((1, 2), 2),
        TypeError),
    # NumPy repeats the list by the scalar's __index__ ([1, 2, 1, 2] + 2): the trace asks for
    # the count, so the scalar is specialised on its value (compile/specialise.py)
    Row("list argument times a NumPy int", list_times_scalar, lambda: ([1, 2], np.int64(2)),
        VALUES),
    Row("NumPy float times a list argument", lambda v, s: s * v + s,
        lambda: ([1, 2], np.float32(2)), TypeError),
    Row("NumPy float plus a list argument", lambda v, s: s + v,
        lambda: ([1, 2], np.float32(2)), VALUES),
    Row("0-d array times a list argument", lambda v, s: v * s,
        lambda: ([1, 2], a(2)), VALUES),
    Row("list argument times an array", lambda v, x: x * v,
        lambda: ([1.5, 2.0], a([2., 4])), VALUES),
    Row("list argument repeated by a literal", lambda v, x: x + len(v * 2),
        lambda: ([1, 2], a([2., 4])), VALUES),
    Row("ndarray subclass with its own __array_ufunc__ (units)", add,
        lambda: (scaled([1.5, 2], 1000.0), scaled([1, 2], 1.0)), VALUES, deviation=TypeError,
        why="its override (astropy's units) cannot run in a kernel, and computing the plain "
            "values would drop it: refused by name, as np.matrix is; pass np.asarray(x)"),
]


class Scaled(np.ndarray):
    """An ndarray subclass that overrides NumPy's dispatch, as astropy's Quantity does for
    units: ``+`` of two of them adds their values scaled by each one's ``unit``."""

    unit = 1.0

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [np.asarray(x) * getattr(x, "unit", 1.0) for x in inputs]
        return getattr(ufunc, method)(*plain, **kwargs)


def scaled(values: Any, unit: float) -> Scaled:
    x = a(values, F64).view(Scaled)
    x.unit = unit
    return x


def _readonly(x: np.ndarray) -> np.ndarray:
    x.flags.writeable = False
    return x


def _no_fp64(mp: pytest.MonkeyPatch) -> None:
    from fusejit.runtime.opencl import backend as opencl  # the backend that asks for device facts and builds

    real = opencl.device_info

    def without_fp64(device: cl.Device) -> Any:
        return dataclasses.replace(real(device), has_fp64=False)

    def no_build(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a kernel was built for a device without fp64")

    mp.setattr(opencl, "device_info", without_fp64)
    mp.setattr(opencl, "build_cached", no_build)


# -- the runner -------------------------------------------------------------------------------------


@dataclass
class Outcome:
    value: Any = None
    exc: BaseException | None = None


def _run(fn: Callable[..., Any], args: tuple[Any, ...]) -> Outcome:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return Outcome(fn(*args))
        except Exception as exc:  # noqa: BLE001  (the outcome being compared)
            return Outcome(exc=exc)


def _leaves(x: Any) -> list[Any]:
    if isinstance(x, (tuple, list)):
        return [leaf for item in x for leaf in _leaves(item)]
    return [] if x is None else [to_host(x)]


def _same(got: Any, want: Any) -> str | None:
    g, w = np.asarray(got), np.asarray(want)
    if g.dtype != w.dtype or g.shape != w.shape:
        return f"{g.dtype}{list(g.shape)} != NumPy's {w.dtype}{list(w.shape)}"
    if w.dtype.kind == "f":
        same = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
    else:
        same = g == w
    if not np.all(same):
        return f"{g!r} != NumPy's {w!r}"
    return None


def _compare_values(got: Any, want: Any, defined: np.ndarray | None = None) -> None:
    gl, wl = _leaves(got), _leaves(want)
    assert len(gl) == len(wl), f"{len(gl)} results, NumPy {len(wl)}"
    for i, (g, w) in enumerate(zip(gl, wl)):
        if defined is not None:
            assert np.asarray(g).dtype == np.asarray(w).dtype, (g, w)
            g, w = np.asarray(g)[defined], np.asarray(w)[defined]
        problem = _same(g, w)
        assert problem is None, f"result {i}: {problem}"


def _snapshot(args: tuple[Any, ...]) -> list[Any]:
    return [to_host(x) if isinstance(x, (np.ndarray, cla.Array)) else x for x in args]


def _place(row: Row, args: tuple[Any, ...], queue: cl.CommandQueue) -> tuple[Any, ...]:
    """The fusejit inputs: the row's device positions as pyopencl arrays (the same array
    twice where the row passes one array twice; a second context for the two-context row)."""
    if not row.device:
        return args
    out = list(args)
    placed: dict[int, cla.Array] = {}
    for k in row.device:
        x = args[k]
        if id(x) in placed:
            out[k] = placed[id(x)]
            continue
        q = queue
        if row.numpy == FUSEJIT_ONLY and k == row.device[-1] and len(row.device) > 1:
            q = cl.CommandQueue(cl.Context(devices=[queue.device]))
        out[k] = placed[id(x)] = cla.to_device(q, np.array(x, order="C"))
    return tuple(out)


RESULTS: dict[str, str] = {}  # row id -> "parity" | "deviation" | "fusejit only" (passed rows)


@pytest.fixture(scope="module", autouse=True)
def parity_report(request: pytest.FixtureRequest):
    yield
    why = {r.id: r.why for r in ROWS}
    count = {k: sum(v == k for v in RESULTS.values()) for k in ("parity", "deviation")}
    only = [k for k, v in RESULTS.items() if v == FUSEJIT_ONLY]
    lines = [(f"bad-input catalog: {len(RESULTS)} rows passed; {count['parity']} match NumPy's "
              f"exception class or values, {count['deviation']} documented deviations, "
              f"{len(only)} without a NumPy counterpart")]
    lines += [f"  deviation: {k}: {why[k]}" for k, v in RESULTS.items() if v == "deviation"]
    lines += [f"  fusejit only: {k}: {why[k]}" for k in only]
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("\n" + "\n".join(lines))


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_row(row: Row, queue: cl.CommandQueue, monkeypatch: pytest.MonkeyPatch) -> None:
    if row.setup is not None:
        row.setup(monkeypatch)
    np_args, fj_args = row.args(), row.args()
    before = _snapshot(fj_args)
    want = Outcome() if row.numpy == FUSEJIT_ONLY else _run(row.fn, np_args)
    if isinstance(row.numpy, type):  # the table's claim about NumPy holds
        assert isinstance(want.exc, row.numpy), f"NumPy: {want.exc!r}"
    elif row.numpy == VALUES:
        assert want.exc is None, f"NumPy raised {want.exc!r}"
    placed = _place(row, fj_args, queue)
    start = time.perf_counter()
    got = _run(fuse(row.fn), placed)
    elapsed = time.perf_counter() - start
    if row.id.startswith("a DAG of"):
        print(f"\n{row.id}: traced, compiled and run in {elapsed:.2f} s")
    expected = row.deviation if row.deviation is not None else row.numpy
    if isinstance(expected, type):
        assert isinstance(got.exc, expected), f"fusejit: {got.exc!r}, expected {expected}"
        after = _snapshot(placed)
        for i, (b, x) in enumerate(zip(before, after)):
            if isinstance(b, np.ndarray):
                assert _same(x, b) is None, f"argument {i} modified by a call that raised"
    else:
        assert got.exc is None, f"fusejit raised {got.exc!r}"
        _compare_values(got.value, row.fusejit_values() if row.fusejit_values else want.value,
                        row.defined() if row.defined else None)
        if row.numpy == VALUES and row.deviation is None:  # writes as NumPy's, nothing else
            for i, (x, y) in enumerate(zip(_snapshot(placed), _snapshot(np_args))):
                if isinstance(y, np.ndarray):
                    assert _same(x, y) is None, f"argument {i} differs from NumPy's after " \
                                                f"the call: {_same(x, y)}"
    RESULTS[row.id] = (FUSEJIT_ONLY if row.numpy == FUSEJIT_ONLY else
                       "parity" if row.deviation is None else "deviation")


# -- scenario rows: behaviour across calls ---------------------------------------------------------


SCALE = 2.0


def test_closure_constant_that_changes_between_calls() -> None:
    k = 2.0

    def f(x):
        return x * k + SCALE

    fused = fuse(f)
    x = a([1., 2], F32)
    _compare_values(fused(x), f(x))
    k = 3.0
    globals()["SCALE"] = -1.0
    try:
        _compare_values(fused(x), f(x))  # the new values are used, not a stale kernel
    finally:
        globals()["SCALE"] = 2.0
    RESULTS["closure constant that changes between calls"] = "parity"


def test_exception_during_tracing_leaves_no_half_built_cache_entry() -> None:
    calls = {"n": 0}

    def flaky(x):
        calls["n"] += 1
        y = x * 2
        if calls["n"] == 1:
            raise RuntimeError("fails on the first trace only")
        return y + 1

    fused = fuse(flaky)
    x = a([1., 2], F32)
    with pytest.raises(RuntimeError):
        fused(x)
    assert fused.cache_info().currsize == 0
    assert fusejit.frontend.trace.current_tracer() is None  # the tracing context was left
    _compare_values(fused(x), x * 2 + 1)
    assert fused.trace_count == 2 and fused.cache_info().currsize == 1
    RESULTS["exception during tracing leaves no half-built cache entry"] = "parity"
