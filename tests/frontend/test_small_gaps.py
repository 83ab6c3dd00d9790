"""Small gaps of issue 31 §7: ``ufunc.reduce`` of every binary ufunc NumPy can reduce,
``np.asarray``/``np.array`` of a traced value, NumPy's own exception classes (UFuncTypeError)
and NumPy's order of errors (an OverflowError before a later trace-time TypeError)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fusejit import UnsupportedOperationError, fuse
from fusejit.testing import assert_matches

RNG = np.random.default_rng(31)
BINARY = sorted(name for name in dir(np) if isinstance(getattr(np, name), np.ufunc)
                and getattr(np, name).nin == 2 and getattr(np, name).nout == 1
                and getattr(np, name).signature is None)
INPUTS = {
    "int32": np.where(RNG.integers(-9, 9, (5, 7)) == 0, 3, RNG.integers(-9, 9, (5, 7))
                      ).astype(np.int32),
    "uint8": RNG.integers(1, 255, (5, 7)).astype(np.uint8),
    "float32": RNG.uniform(0.5, 2, (5, 7)).astype(np.float32),
    "bool": RNG.random((5, 7)) > 0.5,
}
FORMS = {"axis0": {}, "axis1": {"axis": 1}, "all": {"axis": None},
         "keepdims_initial": {"axis": 1, "keepdims": True, "initial": 1}}


def _numpy(name: str, x: np.ndarray, kw: dict) -> object:
    """NumPy's answer, or its exception."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return getattr(np, name).reduce(x, **kw)
        except Exception as exc:  # noqa: BLE001 - NumPy's verdict, compared below
            return exc


def _left_fold(name: str, x: np.ndarray, kw: dict) -> np.ndarray:
    """NumPy's documented definition of a one-axis reduce, ``r = op(r, x[i])``, in NumPy calls
    with its reduction loop's dtypes. NumPy 2's SIMD loops of arctan2, power and ldexp reduce
    in another order on a contiguous (or cast) axis: arctan2 0.80 where the fold, and NumPy on
    a strided float64 view, gives 0.21; fusejit folds, so those are held to the fold."""
    ufunc = getattr(np, name)
    acc_t, item_t, _ = ufunc.resolve_dtypes((None, x.dtype, None), reduction=True)
    axis = kw.get("axis", 0)
    xs = np.moveaxis(x, axis, -1).astype(item_t)
    acc, first = (np.full(xs.shape[:-1], kw["initial"], acc_t), 0) if "initial" in kw else \
        (xs[..., 0].astype(acc_t), 1)
    with np.errstate(all="ignore"):
        for k in range(first, xs.shape[-1]):
            acc = ufunc(acc, xs[..., k])
    return np.expand_dims(acc, axis) if kw.get("keepdims") else acc


def _traced(name: str, x: np.ndarray) -> bool:
    """Does fusejit trace the ufunc itself here (else its reduce is refused by name too)?"""
    try:
        with np.errstate(all="ignore"):
            fuse(lambda a: getattr(np, name)(a, a)).lower(x)
    except UnsupportedOperationError:
        with pytest.raises(UnsupportedOperationError):
            fuse(lambda a: getattr(np, name).reduce(a)).lower(x)
        return False
    except TypeError:  # (no loop for this dtype: NumPy's error, compared with its reduce's)
        return True
    return True


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", INPUTS)
def test_ufunc_reduce_of_every_binary_ufunc(dtype, form):
    """Every binary ufunc NumPy reduces on this dtype and form gives NumPy's values and dtype
    (one fused function returns them all: one build); the others raise NumPy's class."""
    x, kw = INPUTS[dtype], FORMS[form]
    answers = {name: _numpy(name, x, kw) for name in BINARY if _traced(name, x)}
    good = [n for n, a in answers.items() if not isinstance(a, Exception)]
    assert "bitwise_or" in good or dtype == "float32"
    with np.errstate(all="ignore"):
        got = fuse(lambda a: {n: getattr(np, n).reduce(a, **kw) for n in good})(x)
    for name in good:
        want = answers[name]
        if name in ("arctan2", "atan2", "power", "pow", "ldexp") and form != "all":
            want = _left_fold(name, x, kw).astype(np.asarray(want).dtype)
        # (a fold of up to 35 transcendental ops: each within its documented ULP bound)
        assert_matches(got[name], want, ulp=64, what=f"np.{name}.reduce")
    for name in sorted(set(answers) - set(good)):
        if "negative integer powers" in str(answers[name]):
            continue  # a value the device computes: the README's documented deviation
        with pytest.raises((type(answers[name]), UnsupportedOperationError)):
            fuse(lambda a, name=name: getattr(np, name).reduce(a, **kw))(x)


def test_bitwise_reductions_of_any_length():
    """bitwise_or/and/xor and logical_xor reduce as reduction ops (like sum): exact on a long
    axis, one kernel; a long sequential fold (subtract) is refused by name."""
    x = RNG.integers(-(1 << 62), 1 << 62, (3, 100_003)).astype(np.int64)
    b = x[:, :5000] > 0
    fns = (lambda a: np.bitwise_or.reduce(a, axis=1), lambda a: np.bitwise_xor.reduce(a, None),
           lambda a: np.bitwise_and.reduce(a[:, :7] | 5, axis=1),
           lambda a: np.bitwise_and.reduce(a[:, :0], axis=1),
           lambda a: np.logical_xor.reduce(a[:, :5000] > 0, axis=1),
           lambda a: np.bitwise_xor.reduce(a[:, :5000] > 0, axis=1, keepdims=True),
           lambda a: np.bitwise_or.reduce(a[:, :9].astype(np.uint8), axis=1, initial=64))
    f = fuse(lambda a: tuple(fn(a) for fn in fns))
    for g, fn in zip(f(x), fns):
        assert_matches(g, fn(x))
    assert b.any()
    with pytest.raises(UnsupportedOperationError, match="subtract.reduce over 1000"):
        fuse(lambda a: np.subtract.reduce(a, axis=1))(x[:, :1000])


INTEGER_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                  "uint64"]


def _full_range(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Values over the whole range of ``dtype`` (every bit set somewhere, sign bits too)."""
    if dtype == np.bool_:
        return RNG.random(shape) > 0.2  # (mostly True: an AND that is not always False)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


BITWISE_CASES = {
    "or_axis0": lambda a, m: np.bitwise_or.reduce(a),
    "and_axis1": lambda a, m: np.bitwise_and.reduce(a, axis=1),
    "xor_all": lambda a, m: np.bitwise_xor.reduce(a, axis=None),
    "or_last_keepdims": lambda a, m: np.bitwise_or.reduce(a, axis=-1, keepdims=True),
    "and_all_keepdims": lambda a, m: np.bitwise_and.reduce(a, axis=None, keepdims=True),
    "and_rows_of_three": lambda a, m: np.bitwise_and.reduce(a[:, 5:8], axis=1),
    "xor_axis0_keepdims": lambda a, m: np.bitwise_xor.reduce(a, 0, keepdims=True),
    "logical_xor": lambda a, m: np.logical_xor.reduce(a, axis=1),
    "and_where": lambda a, m: np.bitwise_and.reduce(a, axis=1, where=m),
    "or_initial": lambda a, m: np.bitwise_or.reduce(a, axis=0, initial=1),
    "and_to_int64": lambda a, m: np.bitwise_and.reduce(a, axis=1, dtype=np.int64),
    "empty_and": lambda a, m: np.bitwise_and.reduce(a[:, :0], axis=1),
    "empty_or_keepdims": lambda a, m: np.bitwise_or.reduce(a[:0], axis=0, keepdims=True),
    "empty_xor_all": lambda a, m: np.bitwise_xor.reduce(a[:0], axis=None),
    "empty_logical_xor": lambda a, m: np.logical_xor.reduce(a[:, :0], axis=-1),
    "methods_agree": lambda a, m: np.bitwise_or.reduce(a != 0, axis=1) == (a != 0).any(1),
}


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
def test_bitwise_reductions_of_every_integer_dtype(device, dtype):
    """Every form of ``np.bitwise_or/and/xor.reduce`` and ``np.logical_xor.reduce`` on every
    integer dtype and bool: NumPy's values, dtypes (bool stays bool, small ints stay small)
    and identities (an empty axis: 0, all ones, 0); short and long rows (a long row is
    split over work-groups), on each device (one build per dtype)."""
    dtype = np.dtype(dtype)
    if device == "vulkan" and dtype.kind != "b" and dtype.itemsize < 4:
        pytest.skip("naga's GLSL writes 8/16-bit elements only in whole words (README)")
    x, mask = _full_range(dtype, (5, 300)), RNG.random((5, 300)) > 0.5
    long = _full_range(dtype, (2, 70_001))
    if dtype.kind == "b":
        long[:, 1:] = True  # (one False: an AND of the row must see element 0)
    long[0, -1] = ~long[0, -1] if dtype.kind == "b" else long[0, -1] | 1

    def all_forms(a, m, lg):
        out = {name: fn(a, m) for name, fn in BITWISE_CASES.items()}
        out.update(long_or=np.bitwise_or.reduce(lg, axis=1), long_and=np.bitwise_and.reduce(lg, 1),
                   long_xor=np.bitwise_xor.reduce(lg, axis=None))
        return out

    got = fuse(all_forms)(x, mask, long)
    want = all_forms(x, mask, long)
    for name, w in want.items():
        g = np.asarray(got[name].get() if hasattr(got[name], "get") else got[name])
        assert g.dtype == np.asarray(w).dtype and g.shape == np.shape(w), name
        np.testing.assert_array_equal(g, w, err_msg=f"{dtype} {name}")


def test_bitwise_reduce_is_one_reduction_op():
    """``np.bitwise_or.reduce`` of int64 is one reduction node, not a reduction per bit (the
    per-bit form was ~70 KB of source)."""
    x = np.arange(1000, dtype=np.int64) * 7919
    low = fuse(lambda a: np.bitwise_or.reduce(a)).lower(x)
    assert "bit_or" in str(low) and len(low.source) < 10_000


def test_asarray_and_array_of_a_traced_value():
    """np.asarray is the value itself (writes through it reach it, as in NumPy); np.array is a
    copy (writes to it do not); dtype= casts, ndmin= adds axes, a Python scalar becomes a 0-d
    array (strong: float32 * np.asarray(2.0) is float64)."""
    def through(a):
        b = np.asarray(a)
        b += 1
        return a, np.asanyarray(a) * 2

    def copied(a):
        b = np.array(a)
        b += 1
        return a, b, np.array(a, dtype=np.int16), np.array(a, ndmin=3)

    x = np.arange(4.0, dtype=np.float32)
    for fn in (through, copied):
        got, want = fuse(fn)(x.copy()), fn(x.copy())
        for g, w in zip(got, want):
            assert_matches(g, w)
    f = fuse(lambda a, s: np.asarray(s) * a)
    assert_matches(f(x, 2.0), np.asarray(2.0) * x)


def test_asarray_wrappers_are_gone_after_tracing():
    import numpy

    fuse(lambda a: np.asarray(a) + 1)(np.ones(2))
    assert not hasattr(numpy.asarray, "__wrapped__") and not hasattr(numpy.array, "__wrapped__")


@pytest.mark.parametrize("fn", [
    lambda x, i: np.add(x, x, out=i),
    lambda x, i: np.add(i, 1.5, out=i),
    lambda x, i: np.multiply(i, x, out=i),
    lambda x, i: np.gcd(x, x),
])
def test_numpys_exception_class_for_ufunc_type_errors(fn):
    """Where NumPy raises a UFuncTypeError (its output cast, a loop it lacks), fusejit raises
    that very class, so ``except np._core._exceptions.UFuncTypeError`` code keeps working."""
    x, i = np.ones(3, np.float32), np.zeros(3, np.int8)
    with pytest.raises(TypeError) as numpy_error:
        fn(x.copy(), i.copy())
    with pytest.raises(type(numpy_error.value)):
        fuse(fn)(x.copy(), i.copy())
    assert type(numpy_error.value) is not TypeError  # (a subclass: the test can fail)


def _batch_norm(x):
    mean = x.mean(axis=0)
    return (x - mean) / np.sqrt(x.var(axis=0) + 1e-5)


def test_assert_matches_default_has_an_absolute_part_scaled_to_the_inputs(monkeypatch):
    """A correct batch norm (results near zero after x - mean) passes the public default
    tolerance given its inputs; a wrong one still fails; integers stay exact. (The suite pins
    ``DEFAULT_ULP = 0``, which makes the absolute part 0 too: its tests stay exact.)"""
    from fusejit import testing
    from fusejit.testing import scaled_atol

    monkeypatch.setattr(testing, "DEFAULT_ULP", None)

    x = (1000 + RNG.standard_normal((256, 8))).astype(np.float32)
    x[0] = x[1:].mean(axis=0)  # (a row at the mean: results at zero, all cancellation)
    got, want = fuse(_batch_norm)(x), _batch_norm(x)
    assert_matches(got, want, inputs=(x,))
    assert_matches(got, want, inputs=x)
    with pytest.raises(AssertionError, match="beyond"):
        assert_matches(got * np.float32(1.001), want, inputs=(x,))
    with pytest.raises(AssertionError, match="beyond"):  # no absolute part: the ULPs show
        assert_matches(got, want, atol=0.0, ulp=0)
    assert scaled_atol(4, np.ones(3, np.int32), (x,)) == 0.0
    assert scaled_atol(4, np.array([1.0, np.inf]), (np.array([-3.0]),)) == \
        4 * np.finfo(np.float64).eps * 3
