"""Issue 9, classes 4-7 and 9: values that must never be served stale or wrong.

Every test compares with NumPy running the same function: NumPy scalars under augmented
assignment (4), static arguments keyed by bits (5), byte order (6), captured state read by the
function from outside its arguments (7), and smaller divergences (9; most of those are rows of
tests/test_bad_inputs.py).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pyopencl.array as cla
import pytest

import fusejit
from fusejit import fuse
from fusejit.testing import to_host


def same(got, want) -> None:
    """Dtype, shape and bits (-0.0 is not 0.0, NaN matches NaN), leaf by leaf."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            same(g, w)
        return
    g, w = np.asarray(to_host(got)), np.asarray(want)
    assert (g.dtype, g.shape) == (w.dtype, w.shape), (g, w)
    if w.dtype.kind == "f":
        ok = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
    else:
        ok = g == w
    assert np.all(ok), (g, w)


# -- 5: static arguments keyed by their bits --------------------------------------------------------


def _div(x, s):
    return x / (s if not isinstance(s, (tuple, list, dict)) else
                (s["v"] if isinstance(s, dict) else s[0]))


STATIC_VALUES = [0.0, -0.0, math.nan, -math.nan, np.float32(0.0), np.float32(-0.0),
                 np.float64(-0.0), np.float16(-0.0), (0.0,), (-0.0,), [0.0], [-0.0],
                 ((-0.0,),), {"v": 0.0}, {"v": -0.0}]


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_static_floats_keyed_by_bits(dtype) -> None:
    """-0.0 and 0.0 (alone, as NumPy scalars, inside tuples, lists, dicts) compile separately;
    NaN hits the cache."""
    f = fuse(_div, static_argnums=1)
    x = np.array([1, -2, 0], dtype)
    with np.errstate(all="ignore"):
        for s in STATIC_VALUES:
            for _ in range(2):
                same(f(x, s), _div(x, s))
    assert f.trace_count == len(STATIC_VALUES)


def test_static_nan_is_one_cache_entry() -> None:
    f = fuse(lambda x, s: x + s, static_argnums=1)
    x = np.ones(3, np.float32)
    for s in (math.nan, float("nan"), np.float32(np.nan), np.float32(np.nan)):
        same(f(x, s), x + s)
    assert f.trace_count == 2  # one Python float NaN, one float32 NaN


# -- 7: captured state is guarded or read fresh ----------------------------------------------------

BIG = 5000  # more than fusejit.frontend.captured.SMALL_ARRAY elements: an implicit input
cfg = type(math)("cfg")  # a module the functions read an attribute of
cfg.alpha = 1.5
params = {"scale": 2.0, "shift": -1.0}
coeffs = [3.0, 0.5]


class Config:
    def __init__(self) -> None:
        self.beta = 0.25
        self.inner = Config.Inner()

    class Inner:
        gamma = 4.0


conf = Config()
W_GLOBAL = (np.arange(BIG) % 16 - 8).astype(np.float32) / 4  # exact sums in any order
SMALL_GLOBAL = np.arange(6, dtype=np.float64)


def reads_attributes(x):
    return x * cfg.alpha + params["scale"] * coeffs[0] - conf.beta + conf.inner.gamma


def reads_container_whole(x):
    total = x * 0
    for k in params:  # the dict is used whole: guarded item by item
        total = total + params[k]
    return total + sum(coeffs)


def reads_global_array(x):
    return x * W_GLOBAL + W_GLOBAL.sum() + W_GLOBAL[:3].mean()


def _helper(x):
    return x - cfg.alpha * SMALL_GLOBAL[1]


def calls_helper(x):
    return _helper(x) * 2


def _mutate_all(k: float) -> None:
    cfg.alpha = 1.5 * k
    params["scale"] = 2.0 - k
    params["shift"] = -k
    coeffs[0] = 3.0 * k
    conf.beta = 0.25 + k
    Config.Inner.gamma = 4.0 - k
    W_GLOBAL[:] = (np.arange(BIG) % 16 - 8) * k / 4
    SMALL_GLOBAL[1] = 7.0 * k


def _set(obj, name, value):
    return lambda: setattr(obj, name, value)


_ONE_AT_A_TIME = [
    _set(cfg, "alpha", 9.0), lambda: params.__setitem__("scale", 0.5),
    lambda: params.__setitem__("shift", 3.0), lambda: coeffs.__setitem__(0, -2.0),
    lambda: coeffs.append(1.0), lambda: coeffs.pop(), _set(conf, "beta", 8.0),
    _set(Config.Inner, "gamma", -3.0), lambda: W_GLOBAL.__imul__(2),
    lambda: SMALL_GLOBAL.__setitem__(1, -5.0),
]


@pytest.fixture
def restore_state():
    yield
    _mutate_all(1.0)
    Config.Inner.gamma = 4.0
    conf.beta = 0.25
    W_GLOBAL[:] = (np.arange(BIG) % 16 - 8) / 4
    SMALL_GLOBAL[:] = np.arange(6)


@pytest.mark.parametrize("fn", [reads_attributes, reads_container_whole, reads_global_array,
                                calls_helper])
@pytest.mark.parametrize("shape,dtype", [((BIG,), np.float32), ((2, BIG), np.int32)])
def test_captured_state_changes_are_seen(fn, shape, dtype, restore_state, queue) -> None:
    f = fuse(fn)
    x = (np.arange(math.prod(shape)) % 7).astype(dtype).reshape(shape)
    xd = cla.to_device(queue, x)
    for k in (1.0, 1.0, 2.0, -0.5, -0.5):
        _mutate_all(k)
        want = fn(x)
        np.testing.assert_allclose(f(x), want, rtol=2e-6)
        np.testing.assert_allclose(f(xd).get(), want, rtol=2e-6)
    assert f.trace_count <= 3 * 2  # an unchanged state traces no more


def reads_everything(x):
    return (reads_attributes(x), reads_container_whole(x), reads_global_array(x),
            calls_helper(x))


def test_each_piece_of_captured_state_alone_is_seen(restore_state) -> None:
    f = fuse(reads_everything)
    x = np.arange(BIG, dtype=np.float32) % 5
    for mutate in _ONE_AT_A_TIME:
        mutate()
        for got, want in zip(f(x), reads_everything(x)):
            np.testing.assert_allclose(got, want, rtol=2e-6)


def test_captured_big_array_is_read_fresh_not_retraced(restore_state) -> None:
    """W -= lr * g between calls: the array is an implicit input, no new trace per update."""
    f = fuse(lambda x: x * W_GLOBAL + 1)
    x = np.ones(BIG, np.float32)
    for step in range(4):
        same(f(x), x * W_GLOBAL + 1)
        W_GLOBAL[...] -= np.float32(0.1) * (step + 1)  # (in place, as W -= lr * g is)
    assert f.trace_count == 1


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_closure_arrays_and_device_arrays_read_fresh(dtype, queue) -> None:
    V = np.arange(BIG, dtype=dtype)
    D = cla.to_device(queue, np.arange(BIG, dtype=dtype)[::-1].copy())
    small = np.ones(3, dtype)

    def f(x):
        return x + V * 2 - D, small.sum()

    fused = fuse(f)
    x = np.ones(BIG, dtype)
    for _ in range(3):
        got = fused(x)
        same(got, (x + V * 2 - D.get(), small.sum()))
        V += 3
        D += 1
        small[0] += 1
    assert fused.trace_count == 3  # the small array is guarded by content: a new trace per change


class Layer:
    def __init__(self, n: int) -> None:
        self.scale = 2.0
        self.weight = np.linspace(0, 1, n)
        self.inner = Config()

    @fuse
    def forward(self, x):
        return x * self.scale + self.weight - self.weight.max() + self.bias()

    def bias(self):
        return self.inner.beta


def test_method_reads_self_fresh() -> None:
    layer = Layer(BIG)
    x = np.ones(BIG)
    for k in range(3):
        same(layer.forward(x), Layer.forward._fn(layer, x))
        layer.scale = 2.0 + k
        layer.weight *= 1.5
        layer.inner.beta = -k
    other = Layer(BIG)
    other.scale = -1.0
    same(other.forward(x), Layer.forward._fn(other, x))


def test_mutable_default_argument_read_fresh() -> None:
    w = np.ones(BIG, np.float32)

    def f(x, w=w):
        return x + w

    fused = fuse(f)
    x = np.zeros(BIG, np.float32)
    same(fused(x), f(x))
    w += 1
    same(fused(x), f(x))


def test_captured_array_written_is_refused() -> None:
    def f(x):
        W_GLOBAL[:] = x

    with pytest.raises(ValueError, match="pass it as an argument"):
        fuse(f)(np.ones(BIG, np.float32))


def test_unguardable_capture_is_refused() -> None:
    huge = list(range(20_000))

    def f(x):
        return x + len(huge)

    with pytest.raises(fusejit.CapturedStateError, match="pass the values it uses as arguments"):
        fuse(f)(np.ones(3))


def test_tracing_side_effects_are_not_guarded() -> None:
    traces = {"n": 0}
    log = []

    def f(x):
        traces["n"] += 1
        log.append(x.shape)
        return x * 2

    fused = fuse(f)
    for _ in range(3):
        same(fused(np.ones(4)), np.full(4, 2.0))
    assert traces["n"] == 1 and fused.trace_count == 1


def test_capturing_nothing_keeps_the_fast_path(queue) -> None:
    """Library modules (np.pi) and helper functions without state add no guard."""
    def helper(x):
        return np.sqrt(np.abs(x)) * np.pi

    fused = fuse(lambda x: helper(x) + np.float32(1))
    x = cla.to_device(queue, np.ones(8, np.float32))
    fused(x)
    fused(x)
    assert fused._guards == [] and fused._mono is not None


# -- 4: NumPy scalars are immutable; 0-d arrays are not --------------------------------------------

def _aug(op: str):
    """def f(s, x): t = s; s <op>= v; return x + t, s  (v: 1 or the array x)."""
    src = (f"def f(s, x, use_array):\n    t = s\n    v = x if use_array else 3\n"
           f"    s {op}= v\n    return x + t, s\n")
    env: dict = {}
    exec(src, env)  # noqa: S102 - test functions, one per operator
    return env["f"]


def _scalar_cases():
    # many operators over five dtypes; a Python int, and once per dtype an array, as operand
    for dtype, ops in ((np.float32, "+/*"), (np.float64, ["-", "//", "%"]),
                       (np.int32, ["+", "&", "<<", "**"]), (np.int8, ["*", ">>"]),
                       (np.uint16, ["-", "|", "^"])):
        for i, op in enumerate(ops):
            for use_array in (False, True)[:2 if i == 0 else 1]:  # s += x: once per dtype
                yield pytest.param(dtype, op, use_array,
                                   id=f"{np.dtype(dtype).name}{op}={'x' if use_array else 3}")


@pytest.mark.parametrize("dtype,op,use_array", list(_scalar_cases()))
def test_numpy_scalar_augmented_assignment_rebinds(dtype, op, use_array) -> None:
    f = _aug(op)
    x = np.array([1, 2, 5], dtype)
    for make in (dtype, lambda v: np.array(v, dtype)):  # a NumPy scalar, then a 0-d array
        args = lambda: (make(2), x.copy(), use_array)  # noqa: E731
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np_args, fj_args = args(), args()
            try:
                want = f(*np_args)
            except (TypeError, ValueError) as e:  # a 0-d array += a longer array; int casts
                with pytest.raises(type(e)):
                    fuse(f, static_argnums=2)(*fj_args)
                continue
            got = fuse(f, static_argnums=2)(*fj_args)
        same(got, want)
        same(fj_args[0], np_args[0])  # a 0-d array argument is written as NumPy writes it


def test_computed_scalars_are_immutable() -> None:
    def f(x):
        s = x.sum()
        t = s
        s += 1
        e = x[0]
        x[0] += 10
        m = np.maximum(x[1], 0.5)
        k = m
        m *= 3
        return t, s, e, k, m, x[1:2] + e

    for dtype in (np.float32, np.int64):
        x = np.array([1, 2, 3], dtype)
        fx, nx = x.copy(), x.copy()
        same(fuse(f)(fx), f(nx))
        same(fx, nx)


def test_zero_d_arrays_stay_mutable() -> None:
    def f(x, z):
        a = np.zeros_like(z)
        b = a
        a += 2
        v = z[...]
        w = v
        v += 1  # writes z through the view
        c = z.copy()
        d = c
        c *= 5
        return b, w, d, z + 0

    z = np.array(4.0)
    fz, nz = z.copy(), z.copy()
    same(fuse(f)(np.ones(2), fz), f(np.ones(2), nz))
    same(fz, nz)


def test_item_assignment_into_a_numpy_scalar_raises() -> None:
    def f(s, x):
        s[...] = 1
        return x

    with pytest.raises(TypeError, match="does not support item assignment"):
        f(np.float64(1), np.ones(2))
    with pytest.raises(TypeError, match="does not support item assignment"):
        fuse(f)(np.float64(1), np.ones(2))


# -- 6: byte order ----------------------------------------------------------------------------------

BIG_ENDIAN = [">i2", ">i4", ">u8", ">f4", ">f8"]


def _byte_order_ops(x, y):
    return x + 1, x * y, x > y, x.sum(), np.maximum(x, y), -x


@pytest.mark.parametrize("dtype", BIG_ENDIAN)
def test_big_endian_host_arrays_are_converted_on_upload(dtype) -> None:
    x = np.array([1, 7, 3, 250], dtype)
    y = np.array([2, 2, 9, 1], np.dtype(dtype).newbyteorder("="))
    with np.errstate(all="ignore"):
        want = _byte_order_ops(x, y)
        got = fuse(_byte_order_ops)(x, y)
    for g, w in zip(got, want):  # (results come back in native byte order)
        same(g, np.asarray(w).astype(np.asarray(w).dtype.newbyteorder("=")))
    fx = x.copy()
    fuse(iadd_in_place)(fx, y)
    nx = x.copy()
    iadd_in_place(nx, y)
    assert fx.dtype == nx.dtype and np.array_equal(fx, nx)  # written in its own byte order


def iadd_in_place(x, y):
    x += y


@pytest.mark.parametrize("dtype", BIG_ENDIAN)
def test_big_endian_device_arrays_are_refused_before_launch(dtype, queue, launches) -> None:
    host = np.array([1, 2, 3], dtype)
    x = cla.empty(queue, 3, np.dtype(dtype))
    x.set(host)
    with pytest.raises(TypeError, match=r"argument 1 .*non-native byte order.*newbyteorder"):
        fuse(lambda a, b: a + b)(cla.to_device(queue, np.ones(3)), x)
    captured = x

    with pytest.raises(TypeError, match="outside its arguments .*non-native byte order"):
        fuse(lambda a: a + captured)(np.ones(3))
    assert not launches


# -- 9: smaller divergences (more rows in tests/test_bad_inputs.py) ---------------------------------


def _zero_d_reductions(x):
    return (x.sum(axis=0), np.prod(x, axis=-1), x.max(axis=0), np.min(x, axis=-1),
            np.any(x, axis=0), np.all(x, axis=-1), np.argmax(x, axis=0), np.argmin(x, axis=-1),
            x.sum(axis=0, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.bool_])
def test_zero_d_reductions_along_axis_0_and_minus_1(dtype) -> None:
    x = np.array(3, dtype)
    same(fuse(_zero_d_reductions)(x), _zero_d_reductions(x))
    for bad in (lambda x: x.sum(axis=1), lambda x: x.sum(axis=(0,)), lambda x: x.mean(axis=0)):
        with pytest.raises(np.exceptions.AxisError):
            bad(x)
        with pytest.raises(np.exceptions.AxisError):
            fuse(bad)(x)


def _compare_all(x, n):
    return x < n, x <= n, x > n, x >= n, x == n, n != x, n < x


@pytest.mark.parametrize("dtype", [np.uint64, np.int64, np.uint8, np.int32])
def test_integer_arrays_compare_exactly_with_dynamic_ints(dtype, queue) -> None:
    info = np.iinfo(dtype)
    x = np.array(sorted({0, 1, int(info.max), int(info.max) - 1, int(info.min)}), dtype)
    f = fuse(_compare_all)
    xd = cla.to_device(queue, x)
    for n in (0, -1, 2**62 + 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1, 2**64, -2**63,
              -2**63 - 1, int(info.max), int(info.max) + 1):
        same(f(x, n), _compare_all(x, n))
        same(f(xd, n), _compare_all(x, n))  # (the guarded fast path must not take 2**63)
    assert f.trace_count <= 2 * 4  # one per range of n (int64, uint64, above, below), per kind


def _assign_through_leading_ones(x, v):
    x[...] = v
    x[0] = v[0]  # v[0] has shape (1, 1) into a (1,) row
    return x


@pytest.mark.parametrize("shape,vshape", [((1, 1), (1, 1, 1)), ((2, 3), (1, 1, 3)),
                                          ((2, 1), (1, 1, 2, 1))])
def test_setitem_drops_leading_length_one_axes(shape, vshape) -> None:
    v = np.arange(math.prod(vshape), dtype=np.float32).reshape(vshape) + 1
    fx, nx = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    f = _assign_through_leading_ones
    try:
        f(nx, v)
    except ValueError:
        with pytest.raises(ValueError):
            fuse(f)(fx, v)
        return
    fuse(f)(fx, v)
    same(fx, nx)


def _negative_nans(x, c):
    d = x.dtype.type
    return (x + -np.nan, x * d(-np.nan), np.maximum(x, -np.nan), np.where(c, x, -np.nan),
            x % d(0), np.fmod(x, d(0)), np.copysign(d(np.nan), -x), -x * np.nan, d(-np.nan) - x)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_negative_nan_keeps_its_sign(dtype) -> None:
    from fusejit.runtime.opencl.devices import device_info

    if dtype == np.float16 and device_info(fusejit.default_queue().device).limits.is_gpu:
        pytest.skip("NVIDIA's float->half store (vstore_half_rte) makes every NaN positive")
    x = np.array([1, -2, 0], dtype)
    c = np.array([True, False, False])
    with np.errstate(all="ignore"):
        got, want = fuse(_negative_nans)(x, c), _negative_nans(x, c)
    same([np.signbit(g) for g in got], [np.signbit(w) for w in want])
    same(got, want)


def test_misuse_raises_numpys_class_not_not_implemented(queue) -> None:
    """NotImplementedError (UnsupportedOperationError) is for NumPy features fusejit lacks;
    a mistake NumPy refuses raises NumPy's class."""
    cases = [
        (lambda x: np.add(x, x, out=object()), TypeError),
        (lambda x: np.negative(x, out=(object(),)), TypeError),
        (lambda x: x[1.5], IndexError),
        (lambda x: x["a"], IndexError),
    ]
    x = np.ones(3)
    for fn, cls in cases:
        with pytest.raises(cls) as numpy_error:
            fn(x)
        with pytest.raises(cls) as ours:
            fuse(fn)(x)
        assert not isinstance(ours.value, NotImplementedError), (numpy_error, ours)

    def write_python_scalar(x, s):
        s[...] = 1

    with pytest.raises(TypeError, match="'float' object does not support item assignment"):
        fuse(write_python_scalar)(x, 2.0)
    with pytest.raises(fusejit.UnsupportedOperationError):  # a mask: a feature fusejit lacks
        fuse(lambda x: x[x > 0])(x)


@pytest.mark.filterwarnings("ignore:the matrix subclass")
@pytest.mark.parametrize("make", [lambda: np.ma.array([1.0, 2.0], mask=[0, 1]),
                                  lambda: np.matrix([[1.0, 2.0]])])
def test_masked_arrays_and_matrices_are_refused(make) -> None:
    with pytest.raises(TypeError, match="argument 0"):
        fuse(lambda x: x + 1)(make())
    m = make()
    if isinstance(m, np.ma.MaskedArray):
        with pytest.raises(TypeError, match="mask would be ignored"):
            fuse(lambda x: x + m)(np.ones(2))


def _deep_helper(x):
    return x + W_GLOBAL.max() + W_GLOBAL  # host-side NumPy on the captured array, two calls down


def _middle_helper(x):
    return _deep_helper(x) * 2


class Block:
    def __init__(self) -> None:
        self.w = np.arange(BIG, dtype=np.float64)
        self.settings = type(math)("settings")
        self.settings.k = 2.0

    @fuse
    def outer(self, x):
        return self.inner(x) + _scaled(self.settings, x)

    @fuse
    def inner(self, x):
        return x * self.w.mean() + self.w


def _scaled(settings, x):
    return x * settings.k


def test_helpers_and_fused_methods_see_captured_state(restore_state) -> None:
    f = fuse(lambda x: _middle_helper(x) - 1)
    x = np.ones(BIG, np.float32)
    for _ in range(3):
        same(f(x), _middle_helper(x) - 1)
        W_GLOBAL[...] += 1.5
    assert f.trace_count == 1
    block = Block()
    xb = np.ones(BIG)
    for _ in range(3):
        same(block.outer(xb), Block.outer._fn(block, xb))
        block.w += 2
        block.settings.k += 1  # a module passed to a helper: its attributes are guarded


def test_containers_used_whole_see_their_arrays_fresh(queue) -> None:
    weights = [np.full(BIG, 1.0), np.arange(BIG, dtype=np.float64)]
    state = {"w": weights, "bias": 0.5}

    class Holder:
        pass

    holder = Holder()
    holder.d = cla.to_device(queue, np.ones(BIG))

    def total(ws):
        return sum(w.sum() for w in ws)  # host-side NumPy over a list used whole

    def f(x):
        return x * total(state["w"]) + state["bias"] + _from_holder(holder)

    fused = fuse(f)
    x = np.ones(BIG)
    for _ in range(3):
        want = x * total(state["w"]) + state["bias"] + holder.d.get()
        same(fused(x), want)
        weights[1] += 1
        holder.d += 2
    assert fused.trace_count == 1


def _from_holder(h):
    return h.d * 1.0


class Model:
    def __init__(self) -> None:
        self.w = np.linspace(0, 1, BIG)

    def predict(self, x):
        return x * self.w + self.w.sum()


model = Model()


def test_method_of_a_global_object_sees_its_arrays_fresh() -> None:
    f = fuse(lambda x: model.predict(x) + 1)
    x = np.ones(BIG)
    for _ in range(3):
        np.testing.assert_allclose(f(x), model.predict(x) + 1, rtol=1e-12)
        model.w *= 2
    assert f.trace_count == 1


SCALE_GLOBAL = 2.0


def test_guarded_calls_take_a_fast_path_keyed_on_the_guards(queue) -> None:
    global SCALE_GLOBAL
    f = fuse(lambda x: x * SCALE_GLOBAL)
    x = cla.to_device(queue, np.arange(4, dtype=np.float32))
    try:
        for value in (2.0, 2.0, -0.0, 0.0, 3.0, 2.0, 2.0):
            SCALE_GLOBAL = value
            same(f(x), x.get() * np.float32(value))
    finally:
        SCALE_GLOBAL = 2.0
    assert f.trace_count == 4  # -0.0 and 0.0 apart
    assert sum(1 for fast, _ in f._by_guards.values() if fast) == 4


class WithLambda:
    def __init__(self) -> None:
        self.s = 1.0
        self.w = [1.0, 2.0]

    @fuse
    def f(self, x):
        first = lambda: self.w[0]  # noqa: E731 - self in a cell: every self load is a DEREF
        return x * self.s + first() + sum([self.w[1] for _ in range(2)])


def test_self_read_in_lambdas_comprehensions_and_walrus() -> None:
    obj, x = WithLambda(), np.ones(2)
    same(obj.f(x), WithLambda.f._fn(obj, x))
    obj.s, obj.w[0], obj.w[1] = 5.0, 10.0, -1.0
    same(obj.f(x), WithLambda.f._fn(obj, x))

    def walrus(x):
        return x * (alpha := cfg.alpha) + alpha

    f = fuse(walrus)
    for value in (1.5, 3.0):
        cfg.alpha = value
        same(f(x), walrus(x))
    cfg.alpha = 1.5


ACTIVATION = np.tanh


def _act_helper(x):
    return x + 1


def test_rebound_helpers_and_ufuncs_trace_again(queue) -> None:
    global ACTIVATION, _act_helper
    saved = ACTIVATION, _act_helper

    def f(x):
        return ACTIVATION(_act_helper(x))

    fused = fuse(f)
    x = cla.to_device(queue, np.linspace(0, 1, 8))
    try:
        for act in (np.tanh, np.tanh, np.sin, np.exp):
            ACTIVATION = act
            np.testing.assert_allclose(fused(x).get(), f(x.get()), rtol=1e-14)
        _act_helper = lambda x: x - 1  # noqa: E731 - a notebook cell run again
        np.testing.assert_allclose(fused(x).get(), f(x.get()), rtol=1e-14)
    finally:
        ACTIVATION, _act_helper = saved
    assert fused.trace_count == 4
