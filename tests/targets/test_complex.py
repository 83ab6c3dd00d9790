"""complex64 and complex128 against NumPy: promotion, arguments, arithmetic, parts, casts,
comparisons, reductions and fusion, on random values and on special values (signed zeros,
infinities and NaNs in either part, huge and tiny magnitudes).

Tolerances: exact (ulp=0) for the ops NumPy computes with a fixed formula that fusejit repeats
(+ - * / with Smith's division, reciprocal, conj, parts, comparisons, casts); the op table's
``culp`` bound (normwise, ``fusejit.testing.complex_ulp_distance``) for the others.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pyopencl.array as cla
import pytest

import fusejit
from fusejit import fuse
from fusejit.ir.ops import Op
from fusejit.testing import assert_matches, op_ulp

CTYPES = (np.complex64, np.complex128)
# parts of the special values: every pair of them is one complex value
PARTS = (0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-30, -3e30, np.inf, -np.inf, np.nan)


def special(ctype: type) -> np.ndarray:
    """Every pair of PARTS as (real, imag), built part by part (``re + 1j * im`` would turn
    inf * 0 into NaN and lose the zeros' signs)."""
    pairs = np.array(list(itertools.product(PARTS, repeat=2)))
    z = np.empty(len(pairs), ctype)
    z.real, z.imag = pairs[:, 0], pairs[:, 1]
    return z


def randoms(ctype: type, n: int = 1000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * 3 + 1j * rng.standard_normal(n) * 3).astype(ctype)


def numpy(f, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        return f(*args)


def pairs(ctype: type) -> tuple[np.ndarray, np.ndarray]:
    """All special values against all special values, plus random ones."""
    s = special(ctype)
    a, b = (x.reshape(-1) for x in np.meshgrid(s, s, indexing="ij"))
    return np.concatenate([a, randoms(ctype)]), np.concatenate([b, randoms(ctype, seed=1)])


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply,
    "true_divide": np.true_divide, "equal": np.equal, "not_equal": np.not_equal,
    "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "maximum": np.maximum, "minimum": np.minimum,
    "fmax": np.fmax, "fmin": np.fmin, "logical_and": np.logical_and,
    "logical_xor": np.logical_xor,
}


@pytest.mark.parametrize("ctype", CTYPES, ids=lambda t: t.__name__)
def test_binary_ops_on_special_values(ctype):
    a, b = pairs(ctype)
    fs = list(BINARY.values())
    got = fuse(lambda a, b: [f(a, b) for f in fs])(a, b)
    for name, f, g in zip(BINARY, fs, got):
        assert_matches(g, numpy(f, a, b), what=f"np.{name}")


UNARY = {
    "negative": np.negative, "positive": np.positive, "conjugate": np.conjugate,
    "absolute": np.absolute, "square": np.square, "reciprocal": np.reciprocal,
    "sign": np.sign, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
    "logical_not": np.logical_not, "real": np.real, "imag": np.imag,
    "angle": np.angle, "angle_deg": lambda z: np.angle(z, deg=True),
}
# ops whose ULP bound the op table states (the rest are NumPy's exact formulas)
UNARY_OP = {"absolute": Op.ABS, "sign": Op.SIGN}


@pytest.mark.parametrize("ctype", CTYPES, ids=lambda t: t.__name__)
def test_unary_ops_on_special_values(ctype):
    z = np.concatenate([special(ctype), randoms(ctype)])
    fs = list(UNARY.values())
    got = fuse(lambda z: [f(z) for f in fs])(z)
    for name, f, g in zip(UNARY, fs, got):
        ulp = op_ulp(UNARY_OP[name], ctype) if name in UNARY_OP else 2.0 if "angle" in name \
            else 0.0
        assert_matches(g, numpy(f, z), ulp=ulp, what=f"np.{name}")


def test_abs_and_division_do_not_overflow():
    big = np.array([3e38 + 3e38j, 1e308 + 1e308j, 1e-308 + 1e-308j], np.complex128)
    assert_matches(fuse(np.abs)(big), np.abs(big), ulp=op_ulp(Op.ABS, np.complex128))
    num = np.array([1e300 + 1e300j, 1 + 1j, 1e-300 + 2e-300j])
    den = np.array([1e300 + 1e-300j, 1e-300 + 1e300j, 3e-300 + 1e-300j])
    assert_matches(fuse(lambda a, b: a / b)(num, den), num / den)


def test_promotion_follows_nep50():
    x32 = np.arange(4, dtype=np.float32)
    i8 = np.arange(4, dtype=np.int8)
    f16 = np.arange(4, dtype=np.float16)
    z64 = np.arange(4, dtype=np.complex64)

    def f(x32, i8, f16, z64):
        return [x32 * 1j,  # weak complex: complex64
                i8 + (2 - 1j),  # integers: complex128
                f16 * 1j,  # float16: complex64
                z64 * 2.5,  # a weak float keeps complex64
                z64 + np.float64(1),  # strong float64: complex128
                z64 + np.ones(4, np.float64), z64 + np.complex128(1j)]
    for k, (g, w) in enumerate(zip(fuse(f)(x32, i8, f16, z64), f(x32, i8, f16, z64))):
        assert_matches(g, w, what=f"promotion {k}")


def test_complex_arguments_numpy_device_and_scalars(queue):
    z = randoms(np.complex64, 64)
    f = fuse(lambda z, s, t: z * s + t)
    for s, t in ((2 - 3j, 1j), (-1 + 1j, 1j), (np.complex64(0.5j), 3), (2.0, 1j)):
        assert_matches(f(z, s, t), numpy(lambda: z * s + t), ulp=1)
    dz = cla.to_device(queue, z)
    got = fuse(lambda z: z.conj() * 1j)(dz)
    assert isinstance(got, cla.Array) and got.dtype == np.complex64
    assert_matches(got.get(), z.conj() * 1j)
    # a strided, offset view of a device array
    assert_matches(fuse(lambda z: -z)(dz[3::2]).get(), -z[3::2])


def test_casts():
    x = np.array([0.0, -0.0, 1.5, -2.5, np.inf, np.nan, 3e38], np.float32)
    i = np.array([0, -1, 2**31 - 1, -2**31], np.int32)
    b = np.array([True, False])
    z = special(np.complex128)
    got = fuse(lambda x, i, b, z: [x.astype(np.complex64), x.astype(np.complex128),
                                   i.astype(np.complex64), b.astype(np.complex128),
                                   z.astype(np.complex64), z.astype(np.complex64).astype(
                                       np.complex128), z.astype(bool), np.bool_(True) * z])
    got = got(x, i, b, z)
    want = numpy(lambda: [x.astype(np.complex64), x.astype(np.complex128), i.astype(np.complex64),
                          b.astype(np.complex128), z.astype(np.complex64),
                          z.astype(np.complex64).astype(np.complex128), z.astype(bool),
                          np.bool_(True) * z])
    for k, (g, w) in enumerate(zip(got, want)):
        assert_matches(g, w, what=f"cast {k}")


def test_complex_to_real_casts_warn_and_keep_the_real_part():
    z = special(np.complex64)
    f = fuse(lambda z: [z.astype(np.float32), z.astype(np.int16), z.astype(np.float64)])
    with pytest.warns(np.exceptions.ComplexWarning):
        got = f(z)
    for g, t in zip(got, (np.float32, np.int16, np.float64)):
        w = numpy(lambda: z.astype(t))
        mask = np.isfinite(z.real) if t is np.int16 else None  # NaN/inf to int: undefined
        assert_matches(g, w, mask=mask)
    # setitem into a real array drops the imaginary part too (NumPy warns the same way)
    y = np.zeros(z.shape, np.float32)
    g = fuse(lambda y, z: y.__setitem__(slice(None), z))
    with pytest.warns(np.exceptions.ComplexWarning):
        g(y, z)
    assert_matches(y, z.real)


def test_same_kind_refuses_complex_into_real_output():
    z = randoms(np.complex64, 8)
    out = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match="Cannot cast ufunc 'add' output"):
        fuse(lambda z, out: np.add(z, z, out=out))(z, out)


def test_writes_into_complex_parts_are_refused_not_lost():
    z = randoms(np.complex64, 8)
    for name in ("real", "imag"):
        f = fuse(lambda z: getattr(z, name).__setitem__(0, 5.0))
        with pytest.raises(fusejit.ReadOnlyError, match=f"z.{name}"):
            f(z.copy())


def test_parts_attributes_and_functions():
    z = randoms(np.complex128, 50)
    x = np.arange(5.0)
    f = fuse(lambda z, x: [z.real, z.imag, np.real(z), np.imag(z), x.real, x.imag, np.imag(x),
                           np.conj(x), np.angle(x), np.angle(np.arange(3)),
                           np.iscomplexobj(z) * 1, np.isrealobj(z) * 1, np.iscomplex(z),
                           np.isreal(z * 0), np.iscomplex(x), np.isreal(x)])
    want = [z.real, z.imag, np.real(z), np.imag(z), x.real, x.imag, np.imag(x), np.conj(x),
            np.angle(x), np.angle(np.arange(3)), np.int64(1), np.int64(0), np.iscomplex(z),
            np.isreal(z * 0), np.iscomplex(x), np.isreal(x)]
    for k, (g, w) in enumerate(zip(f(z, x), want)):
        assert_matches(g, w, ulp=1, what=f"part {k}")


@pytest.mark.parametrize("ctype", CTYPES, ids=lambda t: t.__name__)
def test_reductions(ctype):
    z = randoms(ctype, 3000).reshape(30, 100)
    s = special(ctype)
    # (few reduction shapes: each is a kernel to compile)
    f = fuse(lambda z, s: [z.sum(), z.mean(), z.var(), np.std(z, ddof=1), z.sum(axis=0),
                           z.std(axis=0), np.prod(z[:3, :20], axis=1), z.max(), z.min(),
                           s.max(), s.min(), np.any(z), np.all(s), np.logical_or.reduce(s)])
    want = numpy(lambda: [z.sum(), z.mean(), z.var(), np.std(z, ddof=1), z.sum(axis=0),
                          z.std(axis=0), np.prod(z[:3, :20], axis=1), z.max(), z.min(),
                          s.max(), s.min(), np.any(z), np.all(s), np.logical_or.reduce(s)])
    for k, (g, w) in enumerate(zip(f(z, s), want)):
        if k in (9, 10):  # NaN wins, but which NaN depends on the order (NumPy: the first)
            assert np.isnan(g) and np.isnan(w) and np.asarray(g).dtype == w.dtype
            continue
        # sums: pairwise, but in another order than NumPy's
        assert_matches(g, w, ulp=64 if k < 7 else 0, what=f"reduction {k}")
    finite = s[np.isfinite(s)]
    assert_matches(fuse(lambda s: [s.max(), s.min()])(finite), [finite.max(), finite.min()])


def test_complex_fuses_with_real_work(launches):
    x = np.linspace(-3, 3, 5000, dtype=np.float32)
    f = fuse(lambda x: np.abs(x * (1 + 2j) - 1j) + x)
    low = f.lower(x)
    assert len(low.kernels) == 1 and not low.plan.temps
    assert_matches(f(x), np.abs(x * (1 + 2j) - 1j) + x, ulp=op_ulp(Op.ABS, np.complex64) + 1)
    # a reduction with a complex prologue and epilogue (short: not split over work-groups)
    g = fuse(lambda x: (x * 1j + x).sum() * 2)
    assert len(g.lower(x[:1000]).kernels) == 1
    assert_matches(g(x[:1000]), (x[:1000] * 1j + x[:1000]).sum() * 2, ulp=64)


def test_complex64_stays_in_single_precision():
    z = randoms(np.complex64, 5000)
    low = fuse(lambda z: np.abs(z / (z * z + 1j)).sum() + z.max() + z.sum())
    module = low.lower(z).module
    # (but for the modulus on a CPU with fp64: a float's square is exact in double, and the
    # double hypot is the fast one there, targets/opencl/vmath.py)
    from fusejit.targets.opencl.vmath import scalar_hypot_helpers

    source = module.source.replace(scalar_hypot_helpers()["vhypot_scalar"], "")
    assert not module.uses_fp64 and "double" not in source


def test_unsupported_complex_ops_are_named():
    z = randoms(np.complex64, 8)
    with pytest.raises(fusejit.UnsupportedDTypeError, match="np.matmul of complex64"):
        fuse(lambda z: z.reshape(2, 4) @ z.reshape(4, 2))(z)
    with pytest.raises(TypeError):  # NumPy has no complex floor either
        fuse(np.floor)(z)


def test_vulkan_target_refuses_complex_by_name():
    from fusejit.targets.glsl.target import GLSLTarget

    with pytest.raises(fusejit.UnsupportedDTypeError, match="complex numbers"):
        GLSLTarget().compute_type(np.dtype(np.complex64))


FUNCTIONS = {
    "exp": (np.exp, Op.EXP), "exp2": (np.exp2, Op.EXP2), "log": (np.log, Op.LOG),
    "log2": (np.log2, Op.LOG2), "log10": (np.log10, Op.LOG10), "sqrt": (np.sqrt, Op.SQRT),
    "sin": (np.sin, Op.SIN), "cos": (np.cos, Op.COS), "tan": (np.tan, Op.TAN),
    "sinh": (np.sinh, Op.SINH), "cosh": (np.cosh, Op.COSH), "tanh": (np.tanh, Op.TANH),
    "arcsin": (np.arcsin, Op.ARCSIN), "arccos": (np.arccos, Op.ARCCOS),
    "arctan": (np.arctan, Op.ARCTAN), "arcsinh": (np.arcsinh, Op.ARCSINH),
    "arccosh": (np.arccosh, Op.ARCCOSH), "arctanh": (np.arctanh, Op.ARCTANH),
    "expm1": (np.expm1, Op.EXPM1), "log1p": (np.log1p, Op.LOG1P), "rint": (np.rint, Op.RINT),
}


def _unspecified_signs(got: np.ndarray, expect: np.ndarray) -> np.ndarray:
    """``got`` with the sign of an infinite part taken from ``expect`` where the other part is
    NaN: C99 Annex G leaves that sign unspecified (e.g. casinh(NaN + i inf) = +-inf + i NaN,
    so arcsin(inf + i NaN) is NaN +- i inf), and C libraries differ (glibc versions on this
    machine and on the H200's host gave opposite signs)."""
    got = got.copy()
    for part, other in (("real", "imag"), ("imag", "real")):
        g, e, o = getattr(got, part), getattr(expect, part), getattr(expect, other)
        free = np.isinf(e) & np.isinf(g) & np.isnan(o) & np.isnan(getattr(got, other))
        g[free] = e[free]
    return got


@pytest.mark.parametrize("ctype", CTYPES, ids=lambda t: t.__name__)
def test_functions_on_special_values_and_branch_cuts(ctype):
    """C99 Annex G special values (as the C library NumPy calls returns them), the branch
    cuts on both sides (sqrt and log at -1+0j and -1-0j, arcsin/arccos/arctanh on the real
    axis beyond 1, arctan/arcsinh on the imaginary axis), near the singularities (atanh at
    1 + 1e-30j), and random, tiny and huge values within the op table's normwise bound."""
    tiny = randoms(ctype, 200, seed=2) * 1e-4
    huge = randoms(ctype, 200, seed=3) * 1e18
    near = [-4 + 0j, -1e-3 + 0j, 0.9 + 0.3j, 1 + 1e-4j, 1 + 1e-30j, -1 - 1e-30j, 1e-30 + 1j,
            2 - 0j, complex(2, -0.0), complex(-0.0, 3), complex(0.0, -3), complex(1.5, 0.0)]
    z = np.concatenate([special(ctype), randoms(ctype, 2000), tiny, huge,
                        np.array(near, ctype)])
    cut = np.array([complex(-1, 0), complex(-1, -0.0), complex(-np.inf, 0),
                    complex(-np.inf, -0.0)], ctype)
    z = np.concatenate([z, cut, np.conj(cut)])
    fs = [f for f, _ in FUNCTIONS.values()]
    got = fuse(lambda z: [f(z) for f in fs])(z)
    for (name, (f, op)), g in zip(FUNCTIONS.items(), got):
        expect = numpy(f, z)
        # NumPy's complex log1p is log(hypot(1 + x, y)): near 0 its real part cancels, and
        # carries the absolute error of that hypot (about eps) whatever its size; fusejit
        # computes the same formula, so a libm one ulp apart (NVIDIA's) lands ~eps away
        atol = 4 * np.finfo(ctype).eps if op is Op.LOG1P else 0.0
        assert_matches(_unspecified_signs(g, expect), expect, ulp=op_ulp(op, ctype),
                       atol=atol, what=f"np.{name}")
    assert np.array_equal(fuse(np.sqrt)(cut[:2]), np.array([1j, -1j], ctype))
    assert np.array_equal(np.signbit(fuse(np.log)(cut[:2]).imag), [False, True])


@pytest.mark.parametrize("ctype", CTYPES, ids=lambda t: t.__name__)
def test_power(ctype):
    """NumPy's nc_pow: integer exponents below 100 as products (exact, as NumPy's), 0 and 1
    exponents, zero bases, and exp(b * log(a)) otherwise. Non-finite operands are left out:
    the C library's cpow recovers infinities through its complex product (C's __muldc3),
    which fusejit does not repeat."""
    s = special(ctype)
    s = s[np.isfinite(s)]
    a, b = (x.reshape(-1) for x in np.meshgrid(s, s, indexing="ij"))
    ints = np.array([0, 1, 2, 3, -1, -2, 5, -7, 99, -99, 0.5, -0.5, 2 + 1j, 4.5], ctype)
    base = randoms(ctype, len(ints) * 40) / 3
    expo = np.tile(ints, 40)
    got = fuse(lambda a, b, base, expo: [a ** b, np.power(base, expo), base ** 2,
                                         np.power(base, 3.0), np.power(base, 0.5), base ** 0.5,
                                         base ** -1])(a, b, base, expo)
    want = numpy(lambda: [a ** b, np.power(base, expo), base ** 2, np.power(base, 3.0),
                          np.power(base, 0.5), base ** 0.5, base ** -1])
    with np.errstate(all="ignore"):
        # (exp(b * log(a)) amplifies log's error by |b * log(a)|: the bound holds below 20)
        moderate = np.abs(b.astype(np.complex128) * np.log(a.astype(np.complex128))) < 20
        keep = (np.isfinite(want[0]) & moderate) | np.isnan(got[0]) | (a == 0) | (b == 0)
    assert_matches(got[0], want[0], ulp=op_ulp(Op.POW, ctype), mask=keep,
                   what="special ** special")
    for k in range(1, 5):
        assert_matches(got[k], want[k], ulp=op_ulp(Op.POW, ctype), what=f"power {k}")
    # ndarray ** 2, ** 0.5 and ** -1 are np.square, np.sqrt and np.reciprocal, as in NumPy
    assert_matches(got[2], want[2], what="z ** 2")
    assert_matches(got[5], want[5], ulp=op_ulp(Op.SQRT, ctype), what="z ** 0.5")
    assert_matches(got[6], want[6], what="z ** -1")


def test_fused_complex_functions_stay_one_kernel():
    x = np.linspace(-4, 4, 3000)
    f = fuse(lambda x: np.abs(np.exp(1j * x)) + np.angle(np.sqrt(x + 0j)))
    low = f.lower(x)
    assert len(low.kernels) == 1 and not low.plan.temps
    want = np.abs(np.exp(1j * x)) + np.angle(np.sqrt(x + 0j))
    assert_matches(f(x), want, ulp=16)


def test_round_and_nan_to_num_work_part_by_part():
    z = np.concatenate([special(np.complex64), randoms(np.complex64, 300)])
    f = fuse(lambda z: [np.round(z), np.round(z, 2), np.around(z, -1), np.nan_to_num(z),
                        np.nan_to_num(z, nan=1.5, posinf=2.0, neginf=-3.0)])
    want = numpy(lambda: [np.round(z), np.round(z, 2), np.around(z, -1), np.nan_to_num(z),
                          np.nan_to_num(z, nan=1.5, posinf=2.0, neginf=-3.0)])
    for k, (g, w) in enumerate(zip(f(z), want)):
        assert_matches(g, w, what=f"part by part {k}")


def test_validate_refuses_complex_before_running(launches):
    z = randoms(np.complex64, 16)
    f = fuse(lambda z: np.abs(np.exp(z)), validate=True)
    with pytest.raises(fusejit.UnsupportedDTypeError, match="no error bounds for complex"):
        f(z)
    assert not launches


def test_docs_table_lists_the_complex_ops():
    from fusejit.inspect.api_table import complex_support, render_rst

    computed, refused = complex_support()
    assert {"np.exp", "np.arctanh", "np.multiply", "np.add.reduce"} <= set(computed)
    assert not refused and "Complex numbers" in render_rst()


def test_long_reductions_split_over_work_groups():
    z = randoms(np.complex128, 1 << 17, seed=5)
    f = fuse(lambda z: [z.sum(), z.mean(), np.prod(z / np.abs(z)), z.reshape(512, 256).sum(0)])
    assert len(f.lower(z).kernels) > 1  # (partials, then a combine kernel)
    want = [z.sum(), z.mean(), np.prod(z / np.abs(z)), z.reshape(512, 256).sum(0)]
    for k, (g, w) in enumerate(zip(f(z), want)):
        assert_matches(g, w, ulp=64, atol=1e-9, what=f"long reduction {k}")


@pytest.mark.parametrize("ctype", CTYPES, ids=lambda t: t.__name__)
def test_argmax_argmin(ctype):
    """NumPy's order: lexicographic, the first of equal values, and the first value with a NaN
    part beats everything; along rows (one lane each), across them, and split over work-groups
    (partials combined by a tree)."""
    s = special(ctype)
    ties = np.array([1 + 2j, 3 - 1j, 3 + 0j, 3 + 0j, 3 - 1j, -5j], ctype)
    z = randoms(ctype, 3000).reshape(30, 100)
    z.real[:, ::7] = 1.0  # equal real parts: the imaginary parts decide
    long = randoms(ctype, 1 << 16, seed=9)
    long[40000] = complex(np.nan, 1)
    long[50000] = complex(1, np.nan)
    fs = [lambda s, t, z, l: s.argmax(), lambda s, t, z, l: s.argmin(),
          lambda s, t, z, l: t.argmax(), lambda s, t, z, l: t.argmin(),
          lambda s, t, z, l: z.argmax(axis=1), lambda s, t, z, l: z.argmin(axis=0),
          lambda s, t, z, l: l.argmax(), lambda s, t, z, l: l[:30000].argmin()]
    got = fuse(lambda *a: [f(*a) for f in fs])(s, ties, z, long)
    for k, (f, g) in enumerate(zip(fs, got)):
        assert_matches(g, numpy(f, s, ties, z, long), what=f"arg reduction {k}")


def test_export_and_load_complex_signatures(tmp_path):
    f = fuse(lambda z, s: np.exp(z * s).sum())
    path = fusejit.export(f, [(fusejit.ShapeDtype((8,), np.complex64, device=False), 1j)],
                          tmp_path / "c.fjb")
    z = randoms(np.complex64, 8)
    assert_matches(fusejit.load(path)(z, 2j), np.exp(z * 2j).sum(), ulp=16)


def test_gpu_style_kernels(monkeypatch):
    """Lowered as for a GPU (work-group trees in local memory, per-lane scalar ops) while
    running on the test device: complex accumulators in local arrays, argmax's index trees."""
    import dataclasses

    from fusejit.runtime.opencl import backend as opencl

    real = opencl.device_info
    monkeypatch.setattr(opencl, "device_info", lambda device: dataclasses.replace(
        real(device), limits=dataclasses.replace(real(device).limits, is_gpu=True)))
    z = randoms(np.complex64, 1 << 15, seed=11).reshape(64, 512)
    z[5, 300] = complex(0, np.nan)
    f = fuse(lambda z: [z.sum(axis=1), (z * 1j).mean(), z.argmax(axis=1), z.argmin(),
                        np.abs(z - z.mean(axis=1, keepdims=True)).max(axis=0)])
    want = numpy(lambda: [z.sum(axis=1), (z * 1j).mean(), z.argmax(axis=1), z.argmin(),
                          np.abs(z - z.mean(axis=1, keepdims=True)).max(axis=0)])
    assert "__local float2" in f.lower(z).source  # (the trees, as on a GPU)
    for k, (g, w) in enumerate(zip(f(z), want)):
        assert_matches(g, w, ulp=64, what=f"gpu-style {k}")


def test_assigning_the_parts_writes_the_array():
    z = randoms(np.complex64, 16)
    x = np.arange(16, dtype=np.float64)

    def f(z, x):
        z.real = x  # (float64 into complex64's float32 part: cast unsafely, as NumPy)
        z[::2].imag = -1.0
        x.real = x * 2

    got_z, got_x, want_z, want_x = z.copy(), x.copy(), z.copy(), x.copy()
    fuse(f)(got_z, got_x)
    f(want_z, want_x)
    assert_matches(got_z, want_z)
    assert_matches(got_x, want_x)
    with pytest.raises(TypeError, match="imaginary part"):
        fuse(lambda x: setattr(x, "imag", 1.0))(x.copy())


def test_nan_reductions_and_norms():
    """NumPy's nan-functions treat a value with a NaN part as NaN (nanvar squares the moduli);
    linalg.norm of complex values is the norm of their moduli, in the real dtype."""
    z = randoms(np.complex64, 600, seed=4).reshape(6, 100)
    z[1, 7] = complex(np.nan, 1)
    z[2, 3] = complex(1, np.nan)
    z[3, 50] = complex(-np.inf, -5)  # (below -inf+0j lexicographically: nanmax's fill)
    f = fuse(lambda z: [np.nansum(z), np.nanmean(z, axis=1), np.nanprod(z[:, :8], axis=1),
                        np.nanvar(z), np.nanstd(z, axis=1), np.nanmax(z, axis=1),
                        np.nanmin(z), np.nanargmax(z, axis=1), np.nanargmin(z),
                        np.linalg.norm(z[0]), np.linalg.norm(z[0], 1),
                        np.linalg.norm(z[0], np.inf), np.linalg.norm(z[:, :6], "fro")])
    want = numpy(lambda: [np.nansum(z), np.nanmean(z, axis=1), np.nanprod(z[:, :8], axis=1),
                          np.nanvar(z), np.nanstd(z, axis=1), np.nanmax(z, axis=1),
                          np.nanmin(z), np.nanargmax(z, axis=1), np.nanargmin(z),
                          np.linalg.norm(z[0]), np.linalg.norm(z[0], 1),
                          np.linalg.norm(z[0], np.inf), np.linalg.norm(z[:, :6], "fro")])
    for k, (g, w) in enumerate(zip(f(z), want)):
        assert_matches(g, w, ulp=64, what=f"nan-reduction or norm {k}")


def test_a_complex_op_missing_from_the_table_is_refused_by_name(monkeypatch):
    import fusejit.frontend.ufuncs

    monkeypatch.setattr(fusejit.frontend.ufuncs, "COMPLEX_OPS",
                        fusejit.frontend.ufuncs.COMPLEX_OPS - {Op.EXP})
    with pytest.raises(fusejit.UnsupportedDTypeError, match="np.exp on complex64"):
        fuse(np.exp)(randoms(np.complex64, 4))
