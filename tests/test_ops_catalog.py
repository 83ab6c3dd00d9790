"""Every elementwise op of the op table on every dtype, on edge values, against NumPy; and
gathers (``x[i]``, ``take``, ``take_along_axis``, ``searchsorted``, ``interp``) of every dtype by
every index dtype.

Each test compares one op (or one cast) with NumPy in dtype, shape and value. The device work is
batched: ``run_batched`` compiles many cases into one fused function returning a list, which is
one kernel, so the whole catalog builds a few dozen kernels. A combination NumPy rejects is
checked to raise the same exception class in fusejit; nothing is skipped.

Every case runs in two layouts, because fusejit emits two kinds of code: "scalar", few elements
(one per work-item, the scalar op templates), and "vector", enough contiguous elements for
4-lane vector code (the vector templates), shuffled so each vector mixes edge values.

Tolerances: exact everywhere (integers, bools, comparisons, min/max, selects, casts, rounding,
and the correctly rounded + - * / sqrt), except the transcendental ops, which get their
documented bound ``op_ulp(op, dtype)`` from the op table.

The scalar layout also runs on Vulkan (the ``device`` fixture), with the Vulkan target's
documented tolerances (``fusejit.targets.glsl.target.TOLERANCES``). A case with a dtype the Vulkan
target lacks must raise UnsupportedDTypeError there; every other case must match.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np
import pytest

import fusejit
from fusejit import UnsupportedDTypeError, fuse
from fusejit.ir.ops import ELEMENTWISE, OP_OF_UFUNC, Op
from fusejit.targets.glsl import target as glsl, double as glsl_double, narrow as glsl_narrow
from fusejit.testing import assert_matches, flushes_subnormals, op_ulp, ulp_distance

DTYPES = tuple(np.dtype(c) for c in ("?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8",
                                     "f2", "f4", "f8"))
UNARY = tuple(sorted((u for u in OP_OF_UFUNC if u.nin == 1), key=lambda u: u.__name__))
BINARY = tuple(sorted((u for u in OP_OF_UFUNC if u.nin == 2), key=lambda u: u.__name__))
# Binary ops also run on every pair of *different* dtypes when their result depends on more than
# casting both operands to the loop dtype (exact int64/uint64 comparisons, mixed-signedness
# shifts, ldexp's (float, int) loops), plus add and true_divide to pin NEP 50 promotion.
MIXED = frozenset({np.add, np.true_divide, np.equal, np.not_equal, np.less, np.less_equal,
                   np.greater, np.greater_equal, np.left_shift, np.right_shift, np.ldexp})
# Arguments per kernel (inputs + outputs): 8-byte pointers stay under the 1024 bytes that
# CL_DEVICE_MAX_PARAMETER_SIZE guarantees, so the catalog runs on any OpenCL device.
MAX_ARGS = 120


LAYOUTS = ("scalar", "vector")
# (layout, device) runs: both layouts on OpenCL and Vulkan (Vulkan's vector code: 4 lanes a
# work-item, computed lane by lane); the scalar one on CUDA (one element a thread)
RUNS = [pytest.param(layout, dev, id=f"{layout}-{dev}") for layout, dev in
        (("scalar", "opencl"), ("vector", "opencl"), ("scalar", "vulkan"), ("vector", "vulkan"),
         ("scalar", "cuda"))]
VULKAN_DTYPES = frozenset(np.dtype(c) for c in ("?", "i4", "u4", "f4"))


@functools.cache
def vulkan_features() -> frozenset[str]:
    """The optional features (shader-f64, ...) of the Vulkan default device's adapter."""
    from fusejit.vulkan import default_device

    return default_device().features


def vulkan_dtypes() -> frozenset[np.dtype]:
    """The dtypes this Vulkan adapter must run: the base four, plus float16 with shader-f16."""
    from fusejit.runtime.vulkan.array import supported_dtypes
    from fusejit.vulkan import default_device

    return supported_dtypes(default_device())
# fusejit vectorises contiguous elementwise kernels from this many elements on
# (source.default_vector_width); run_batched checks that the vector layout gets vector code
VECTOR_ELEMENTS = 4096


def _ids(values: Sequence[Any]) -> list[str]:
    return [getattr(v, "__name__", None) or str(v) for v in values]


def edge_values(dtype: np.dtype) -> np.ndarray:
    """Zeros of both signs, ±1, halfway values for rounding, range limits, ±inf, NaN,
    subnormals; for integers the limits, shift counts around each width and negatives."""
    if dtype.kind == "b":
        return np.array([False, True])
    if dtype.kind == "f":
        info = np.finfo(dtype)
        values = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.1, 0.3, 3.0, -7.0,
                  7.5, 100.0, -1e3, 2.0**22 + 0.5, 1e-5, float(info.max), float(info.min),
                  float(info.tiny), -float(info.tiny), float(info.smallest_subnormal),
                  -float(info.smallest_subnormal), np.inf, -np.inf, np.nan]
        with np.errstate(over="ignore"):
            return np.array(values).astype(dtype)
    info = np.iinfo(dtype)
    values = [0, 1, 2, 3, 7, 8, 15, 16, 31, 32, 63, 64, 100, info.max, info.max - 1, info.min,
              info.min + 1]
    if dtype.kind == "i":
        values += [-1, -2, -3, -7, -8, -64, -100]
    return np.array(sorted({v for v in values if info.min <= v <= info.max}), dtype=dtype)


def in_layout(layout: str, *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """Columns of values (one element per case) as the layout lays them out: unchanged for
    "scalar"; for "vector", tiled to VECTOR_ELEMENTS and shuffled by one fixed permutation
    (rows stay aligned across columns)."""
    if layout == "scalar":
        return columns
    n = len(columns[0])
    order = np.random.default_rng(0).permutation(np.resize(np.arange(n), VECTOR_ELEMENTS))
    return tuple(c[order] for c in columns)


def numpy_result(fn: Callable[..., Any], *args: Any) -> np.ndarray | Exception:
    """NumPy's answer, or the exception it raises for this combination."""
    try:
        with np.errstate(all="ignore"):
            return fn(*args)
    except (TypeError, ValueError) as exc:
        return exc


def assert_rejected_like_numpy(fn: Callable[..., Any], args: Sequence[np.ndarray],
                               numpy_error: Exception) -> None:
    """fusejit refuses what NumPy refuses, with the same exception class (at trace time)."""
    with pytest.raises(type(numpy_error)):
        fuse(fn).lower(*args)


def check(device: str, got: Any, want: np.ndarray, args: Sequence[np.ndarray], what: str,
          ufunc: np.ufunc | None = None, mask: np.ndarray | None = None) -> None:
    """``got`` matches NumPy's ``want`` within the op's bound on this device; on Vulkan a case
    may instead have raised UnsupportedDTypeError, but only when a dtype it involves (an
    input, the result, NumPy's promotion or the ufunc's loop) is one the Vulkan target lacks.
    On Vulkan the documented domain of the transcendental ops applies (glsl.tolerance,
    subnormal inputs and results)."""
    involved = {*(a.dtype for a in args), want.dtype, np.result_type(*args)}
    if ufunc is not None:
        involved |= {d for d in ufunc.resolve_dtypes(
            (*(a.dtype for a in args), *(None,) * ufunc.nout)) if d is not None}
    if isinstance(got, UnsupportedDTypeError):
        # (float64 has only its exact ops on Vulkan: targets/glsl_double.T; 8/16-bit results
        # are written as whole 32-bit words only: targets/glsl_narrow)
        partial = np.dtype(np.float64) in involved and ufunc is not None and \
            OP_OF_UFUNC[ufunc] not in glsl_double.T or \
            any(d.name in glsl_narrow.BITS for d in involved) and "one at a time" in str(got)
        assert not involved <= vulkan_dtypes() or partial, f"{what}: {got}"
        return
    op = OP_OF_UFUNC[ufunc] if ufunc is not None else None
    ulp = op_ulp(op, want.dtype) if op is not None else 0.0
    floats = any(v.dtype.kind == "f" for v in (*args, want))
    if device == "vulkan" and floats:
        extra, domain = (glsl.tolerance(op, vulkan_features(), want.dtype) if op is not None
                         else (0, math.inf))
    if device == "vulkan" and floats and (extra or domain < math.inf or flushes_subnormals()):
        ulp = max(ulp, extra)
        keep = np.ones(want.shape, bool) if mask is None else np.broadcast_to(mask, want.shape)
        tiny = np.finfo(np.float32).tiny
        # (the logs, cbrt and pow read subnormal inputs by their bits: those are compared)
        read = args if op in glsl.SUBNORMAL_INPUTS and not flushes_subnormals() else ()
        for v in (*args, want):
            if v.dtype.kind == "f" and not any(v is a for a in read):
                with np.errstate(invalid="ignore"):
                    keep = keep & ~((v != 0) & (np.abs(v) < tiny))
        if domain < math.inf:
            keep = keep & (np.abs(args[0].astype(np.float64)) < domain)
        mask = keep
    assert_matches(got, want, ulp=ulp, mask=mask, what=what)


Case = tuple[Callable[..., Any], tuple[str, ...]]  # a function and the names of its inputs


def run_batched(inputs: dict[str, np.ndarray], cases: dict[Hashable, Case], layout: str
                ) -> dict[Hashable, Any]:
    """Run every case on the device, as few kernels as MAX_ARGS allows: a chunk of cases is one
    fused function returning a list of results, compiled as one kernel, with vector code
    exactly when the layout is "vector". On Vulkan a case whose dtypes the target lacks is
    left out of the batches; its result is the UnsupportedDTypeError it raised."""
    results: dict[Hashable, Any] = {}
    if fusejit.get_default_device() == "vulkan":
        for key, (fn, needs) in list(cases.items()):
            try:
                fuse(fn).lower(*(inputs[n] for n in needs))
            except UnsupportedDTypeError as exc:
                results[key] = exc
                del cases[key]
    chunk: list[Hashable] = []
    names: list[str] = []

    def flush() -> None:
        if not chunk:
            return
        order = list(names)
        picked = [(cases[k][0], [order.index(n) for n in cases[k][1]]) for k in chunk]

        def batch(*arrays: Any) -> list[Any]:
            return [fn(*(arrays[i] for i in idx)) for fn, idx in picked]

        fused = fuse(batch)
        args = [inputs[n] for n in order]
        results.update(zip(chunk, fused(*args)))
        lanes = {k.vec for k in fused.lower(*args).module.kernels}
        assert (min(lanes) > 1) if layout == "vector" else lanes == {1}, (layout, lanes)
        chunk.clear()
        names.clear()

    for key, (_, needs) in cases.items():
        new = [n for n in needs if n not in names]
        if len(names) + len(new) + len(chunk) + 1 > MAX_ARGS:
            flush()
            new = list(dict.fromkeys(needs))
        names.extend(new)
        chunk.append(key)
    flush()
    return results


# -- unary ops ------------------------------------------------------------------------------------


@functools.cache
def unary_results(dtype: np.dtype, layout: str, device: str) -> dict[Hashable, np.ndarray]:
    (x,) = in_layout(layout, edge_values(dtype))
    cases = {u: (u, ("x",)) for u in UNARY if not isinstance(numpy_result(u, x), Exception)}
    return run_batched({"x": x}, cases, layout)


def unary_mask(ufunc: np.ufunc, x: np.ndarray) -> np.ndarray | None:
    # np.reciprocal of an integer 0 is NumPy's C conversion of 1.0/0 = inf to the integer type:
    # implementation-defined (INT_MIN or 0 on x86), so it is not compared.
    if ufunc is np.reciprocal and x.dtype.kind in "iu":
        return x != 0
    return None


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids(DTYPES))
@pytest.mark.parametrize("ufunc", UNARY, ids=_ids(UNARY))
@pytest.mark.parametrize(("layout", "device"), RUNS, indirect=["device"])
def test_unary(layout: str, device: str, ufunc: np.ufunc, dtype: np.dtype) -> None:
    if (layout, device) == ("vector", "vulkan") and np.dtype(dtype).kind != "f" and \
            np.dtype(dtype).name not in glsl_narrow.BITS:
        pytest.skip("Vulkan's vector code computes lane by lane with the scalar templates: the "
                    "float dtypes cover it, and the 8/16-bit ones, whose results only it writes")
    (x,) = in_layout(layout, edge_values(dtype))
    want = numpy_result(ufunc, x)
    if isinstance(want, Exception):
        assert_rejected_like_numpy(ufunc, [x], want)
        return
    got = unary_results(dtype, layout, device)[ufunc]
    check(device, got, want, [x], f"np.{ufunc.__name__}({dtype.name})", ufunc,
          unary_mask(ufunc, x))


# -- binary ops -----------------------------------------------------------------------------------


def grid(left: np.dtype, right: np.dtype, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of edge values: a column against a row broadcast inside the kernel
    ("scalar"), or both flattened into aligned contiguous arrays ("vector")."""
    a, b = edge_values(left), edge_values(right)
    if layout == "scalar":
        return a[:, None], b[None, :]
    return in_layout(layout, np.repeat(a, len(b)), np.tile(b, len(a)))


def partners(ufunc: np.ufunc, left: np.dtype, layout: str) -> list[np.dtype]:
    """Right operand dtypes: left itself, and every other dtype for MIXED ops in the scalar
    layout (mixed loops are lane by lane in vector code, and casts have their own catalog)."""
    return [d for d in DTYPES if d == left or (ufunc in MIXED and layout == "scalar")]


def binary_reference(ufunc: np.ufunc, a: np.ndarray, b: np.ndarray
                     ) -> tuple[np.ndarray | Exception, np.ndarray | None]:
    """NumPy's result and the mask of the elements it defines.

    np.power of integers raises ValueError for a negative integer exponent anywhere in the
    array, a value-dependent error a kernel cannot raise: those elements are masked and the
    reference is computed with exponent 0 there.
    """
    want = numpy_result(ufunc, a, b)
    if isinstance(want, ValueError) and ufunc is np.power:
        defined = np.broadcast_to(b >= 0, np.broadcast_shapes(a.shape, b.shape))
        return numpy_result(ufunc, a, np.where(b >= 0, b, 0).astype(b.dtype)), defined
    return want, None


@functools.cache
def binary_results(left: np.dtype, layout: str, device: str) -> dict[Hashable, np.ndarray]:
    inputs, cases = {}, {}
    for right in DTYPES:
        a, b = grid(left, right, layout)
        names = (f"a_{right.name}", f"b_{right.name}")
        inputs.update(zip(names, (a, b)))
        for ufunc in BINARY:
            if right in partners(ufunc, left, layout) and not isinstance(
                    binary_reference(ufunc, a, b)[0], Exception):
                cases[(ufunc, right)] = (ufunc, names)
    return run_batched(inputs, cases, layout)


@pytest.mark.parametrize("left", DTYPES, ids=_ids(DTYPES))
@pytest.mark.parametrize("ufunc", BINARY, ids=_ids(BINARY))
@pytest.mark.parametrize(("layout", "device"), RUNS, indirect=["device"])
def test_binary(layout: str, device: str, ufunc: np.ufunc, left: np.dtype) -> None:
    """``ufunc(left, right)`` for right = left, and for every other dtype if ufunc is MIXED."""
    if (layout, device) == ("vector", "vulkan") and np.dtype(left).kind != "f" and \
            np.dtype(left).name not in glsl_narrow.BITS:
        pytest.skip("Vulkan's vector code computes lane by lane with the scalar templates: the "
                    "float dtypes cover it, and the 8/16-bit ones, whose results only it writes")
    failures = []
    for right in partners(ufunc, left, layout):
        a, b = grid(left, right, layout)
        want, mask = binary_reference(ufunc, a, b)
        if isinstance(want, Exception):
            assert_rejected_like_numpy(ufunc, [a, b], want)
            continue
        try:
            check(device, binary_results(left, layout, device)[(ufunc, right)], want, [a, b],
                  f"np.{ufunc.__name__}({left.name}, {right.name})", ufunc, mask)
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, "\n".join(failures)


# -- casts ----------------------------------------------------------------------------------------


@functools.cache
def cast_results(layout: str, device: str) -> dict[Hashable, np.ndarray]:
    inputs = {src.name: in_layout(layout, edge_values(src))[0] for src in DTYPES}
    cases = {(src, dst): (functools.partial(lambda x, d: x.astype(d), d=dst), (src.name,))
             for src in DTYPES for dst in DTYPES}
    return run_batched(inputs, cases, layout)


def cast_mask(x: np.ndarray, dst: np.dtype) -> np.ndarray | None:
    """Float -> int casts of NaN, ±inf and values whose truncation is outside the target's
    range are C undefined behaviour that NumPy leaves implementation-defined (x86 gives INT_MIN
    patterns, other CPUs saturate): only the casts NumPy defines are compared."""
    if x.dtype.kind != "f" or dst.kind not in "iu":
        return None
    info = np.iinfo(dst)
    with np.errstate(invalid="ignore"):
        t = np.trunc(x.astype(np.float64))
        return np.isfinite(t) & (t >= info.min) & (t <= info.max)


@pytest.mark.parametrize("dst", DTYPES, ids=_ids(DTYPES))
@pytest.mark.parametrize("src", DTYPES, ids=_ids(DTYPES))
@pytest.mark.parametrize(("layout", "device"), RUNS, indirect=["device"])
def test_astype(layout: str, device: str, src: np.dtype, dst: np.dtype) -> None:
    (x,) = in_layout(layout, edge_values(src))
    with np.errstate(all="ignore"):
        want = x.astype(dst)
    check(device, cast_results(layout, device)[(src, dst)], want, [x],
          f"{src.name}.astype({dst.name})", mask=cast_mask(x, dst))


# -- where and clip -------------------------------------------------------------------------------

SELECTS: dict[str, Callable[..., Any]] = {
    "where": lambda c, x, y, z: np.where(c, x, y),
    "where_python_scalar": lambda c, x, y, z: np.where(c, x, 1),
    "where_scalar_first": lambda c, x, y, z: np.where(c, 0, y),
    "clip": lambda c, x, y, z: np.clip(x, y, z),
    "clip_lower_only": lambda c, x, y, z: np.clip(x, y, None),
    "clip_upper_only": lambda c, x, y, z: np.clip(x, None, z),
    "clip_method": lambda c, x, y, z: x.clip(min=z),
}


def select_inputs(dtype: np.dtype, layout: str) -> tuple[np.ndarray, ...]:
    """A condition and three operands that meet every edge value against several others
    (NaN bounds included, and lower bounds above upper ones, which NumPy resolves as
    min(max(x, lo), hi))."""
    x = edge_values(dtype)
    n = len(x)
    return in_layout(layout, np.arange(n) % 3 == 1, x, x[::-1].copy(), np.roll(x, n // 3))


@functools.cache
def select_results(layout: str, device: str) -> dict[Hashable, np.ndarray]:
    inputs, cases = {}, {}
    for dtype in DTYPES:
        names = tuple(f"{v}_{dtype.name}" for v in "cxyz")
        inputs.update(zip(names, select_inputs(dtype, layout)))
        for name, fn in SELECTS.items():
            if not isinstance(numpy_result(fn, *select_inputs(dtype, layout)), Exception):
                cases[(name, dtype)] = (fn, names)
    return run_batched(inputs, cases, layout)


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids(DTYPES))
@pytest.mark.parametrize("name", list(SELECTS))
@pytest.mark.parametrize(("layout", "device"), RUNS, indirect=["device"])
def test_where_and_clip(layout: str, device: str, name: str, dtype: np.dtype) -> None:
    fn = SELECTS[name]
    args = select_inputs(dtype, layout)
    want = numpy_result(fn, *args)
    if isinstance(want, Exception):
        assert_rejected_like_numpy(fn, args, want)
        return
    check(device, select_results(layout, device)[(name, dtype)], want, args[1:],
          f"{name}({dtype.name})")


# -- gathers -------------------------------------------------------------------------------------

# Reads at positions computed on the device: every edge value of every dtype gathered by every
# integer index dtype (negative indices too), and the sorted-array lookups built on gathers.
INDEX_DTYPES = tuple(d for d in DTYPES if d.kind in "iu")
GATHERS: dict[str, Callable[..., Any]] = {
    "getitem": lambda x, i: x[i],
    "take": lambda x, i: np.take(x, i),
    "take_along_axis": lambda x, i: np.take_along_axis(x, i, axis=0),
    "getitem_of_expression": lambda x, i: np.where(x[i] == x[0], x[-1], x[i]),
}
LOOKUPS: dict[str, Callable[..., Any]] = {
    "searchsorted": lambda s, v, f: np.searchsorted(s, v),
    "searchsorted_right": lambda s, v, f: np.searchsorted(s, v, side="right"),
    "interp": lambda s, v, f: np.interp(v, s, f),
}


def gather_inputs(dtype: np.dtype, index: np.dtype, layout: str) -> tuple[np.ndarray, ...]:
    """The edge values and every index into them that ``index`` holds (from -n on)."""
    x = edge_values(dtype)
    n = len(x)
    (i,) = in_layout(layout, np.arange(0 if index.kind == "u" else -n, n).astype(index))
    return x, i


def lookup_inputs(dtype: np.dtype, layout: str) -> tuple[np.ndarray, ...]:
    """Sorted distinct edge values (NaN last, where NumPy's sort puts it; interp's samples
    without it), every edge value to look up, and sample values for interp."""
    v = edge_values(dtype)
    s = np.unique(v)
    with np.errstate(invalid="ignore"):
        s = s[np.isfinite(s)] if dtype.kind == "f" else s
    (v,) = in_layout(layout, v)
    return s, v, np.linspace(-2.0, 3.0, len(s))


@functools.cache
def gather_results(dtype: np.dtype, layout: str, device: str) -> dict[Hashable, np.ndarray]:
    """One dtype's gathers and lookups (a batch per dtype, as the unary and binary ops: one
    batch of every dtype was the catalog's longest test, and with xdist each worker built it)."""
    inputs, cases = {}, {}
    for index in INDEX_DTYPES:
        names = ("x", f"i_{index.name}")
        inputs.update(zip(names, gather_inputs(dtype, index, layout)))
        cases.update({(name, index): (fn, names) for name, fn in GATHERS.items()})
    names = ("s", "v", "f")
    inputs.update(zip(names, lookup_inputs(dtype, layout)))
    for name, fn in LOOKUPS.items():
        if not isinstance(numpy_result(fn, *lookup_inputs(dtype, layout)), Exception):
            cases[(name, None)] = (fn, names)
    return run_batched(inputs, cases, layout)


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids(DTYPES))
@pytest.mark.parametrize("name", [*GATHERS, *LOOKUPS])
@pytest.mark.parametrize(("layout", "device"), RUNS, indirect=["device"])
def test_gathers(layout: str, device: str, name: str, dtype: np.dtype) -> None:
    """A gather (by every index dtype) or lookup of ``dtype`` values matches NumPy exactly."""
    failures = []
    for index in INDEX_DTYPES if name in GATHERS else [None]:
        args = gather_inputs(dtype, index, layout) if index else lookup_inputs(dtype, layout)
        fn = GATHERS.get(name) or LOOKUPS[name]
        want = numpy_result(fn, *args)
        if isinstance(want, Exception):
            assert_rejected_like_numpy(fn, args, want)
            continue
        try:
            check(device, gather_results(dtype, layout, device)[(name, index)], want, args,
                  f"{name}({dtype.name}, {index})")
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, "\n".join(failures)


def test_catalog_covers_every_elementwise_op() -> None:
    """Every elementwise op is reached through a ufunc (UNARY, BINARY), astype or np.where; an
    op added to the table without a ufunc would escape the catalog and fails here."""
    random_ops = {Op.MULHI, Op.PHILOX}  # no ufunc: tests/test_random.py, against NumPy's Philox
    # np.real / np.imag on complex, and complex values from parts: tests/targets/test_complex.py
    parts = {Op.REAL, Op.IMAG, Op.COMPLEX}
    assert {OP_OF_UFUNC[u] for u in UNARY + BINARY} | {Op.CAST, Op.WHERE} | random_ops \
        | parts == ELEMENTWISE
    assert MIXED <= set(BINARY)


def test_ulp_distance_counts_single_ulps_in_every_width() -> None:
    """The catalog's tolerances rest on ulp_distance: one ULP apart is 1, also for float64
    (whose 64-bit patterns do not fit a float64 difference), across zero and to infinity."""
    for dtype in (np.float16, np.float32, np.float64):
        info = np.finfo(dtype)
        a = np.array([1.0, -0.0, info.smallest_subnormal, info.max, -info.max], dtype)
        with np.errstate(over="ignore"):  # nextafter(max, inf) is inf
            b = np.nextafter(a, dtype(np.inf))
        assert list(ulp_distance(a, b)) == [1, 1, 1, 1, 1]
        assert ulp_distance(np.array([-info.smallest_subnormal], dtype),
                            np.array([info.smallest_subnormal], dtype))[0] == 2
