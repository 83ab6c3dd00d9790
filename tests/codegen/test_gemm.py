"""Matrix products against NumPy: the catalog of spellings over dtypes and shapes, the
summation-order bound for floats, NumPy's errors, and kernel counts of fused prologues and
epilogues. Both GEMM kernels run on every device: the direct one by default on CPUs, the tiled
one (local memory, double buffering, edge tiles) with small forced tiles."""

from __future__ import annotations

import numpy as np
import pyopencl.array as cla
import pytest

import fusejit
from fusejit import fuse
from fusejit.codegen.gemm import tune as gemm_tune
from fusejit.codegen.gemm.config import GemmConfig

TILED = GemmConfig(16, 16, 4, 4, 4, 2)  # small enough to have many edge tiles at test sizes
TILED_WIDE = GemmConfig(32, 32, 8, 8, 8, 4)
SIMD = GemmConfig(12, 16, 1, 2, 2, 4, 1, local=False)  # the CPU kernel: vectors of columns
CONFIGS = {"default": None, "tiled": TILED, "tiled4": TILED_WIDE, "simd": SIMD}


def _data(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True
                            ).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _bound_ok(got: np.ndarray, a: np.ndarray, b: np.ndarray, ref: np.ndarray) -> None:
    """|got - ref| <= 4 K eps sum|a||b| (+ one ulp of the result dtype for float16, which
    both round once from float32)."""
    k = a.shape[-1]
    acc = np.float32 if ref.dtype == np.float16 else ref.dtype
    eps = np.finfo(acc).eps
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    bound = 4 * k * eps * scale
    if ref.dtype == np.float16:
        bound = bound + np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    assert np.all(err <= bound), (err.max(), bound.min())


def _check(got: object, ref: np.ndarray, exact: bool, a=None, b=None) -> None:
    got = np.asarray(got)
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, got.shape,
                                                               ref.dtype, ref.shape)
    if exact or a is None:
        if exact:
            np.testing.assert_array_equal(got, ref)
        else:
            np.testing.assert_allclose(got, ref, rtol=2e-3 if ref.dtype == np.float16 else 1e-5,
                                       atol=1e-2 if ref.dtype == np.float16 else 1e-5)
    else:
        _bound_ok(got, a, b, ref)


DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype,config", [(d, "default") for d in DTYPES] + [
    (d, "tiled") for d in (np.bool_, np.int8, np.uint64, np.float16, np.float32)] + [
    (d, "simd") for d in (np.float16, np.float32, np.float64)],
    ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
def test_matmul_dtypes(dtype, config, has_fp64) -> None:
    if np.dtype(dtype) == np.float64 and not has_fp64:
        pytest.skip("the device has no float64")
    rng = np.random.default_rng(1)
    a, b = _data((19, 23), dtype, rng), _data((23, 20 if config == "simd" else 17), dtype, rng)
    if np.dtype(dtype).kind in "iu":  # wrapping: values large enough to overflow the dtype
        a = (a * 3).astype(dtype)

    @fuse
    def f(x, y):
        return x @ y
    cfg = CONFIGS[config]
    with gemm_tune.forced(cfg) if cfg else _nothing():
        got = f(a, b)
    with np.errstate(all="ignore"):
        ref = a @ b
    _check(got, ref, np.dtype(dtype).kind != "f", a, b)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


SHAPES = [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
          ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)),
          ((1, 1), (1, 1)), ((0, 4), (4, 5)), ((3, 0), (0, 5)), ((2, 0, 3), (3, 2)),
          ((33, 65), (65, 31)), ((1, 17), (17, 1))]


@pytest.mark.parametrize("config", ["default", "tiled4"])
def test_matmul_shapes(config) -> None:
    """Every shape in one fused function (one compile): broadcasting batch dims, 1-d operands,
    length 0 and 1, odd sizes."""
    rng = np.random.default_rng(2)
    args = [_data(s, np.float32, rng) for pair in SHAPES for s in pair]

    def products(*xs):
        return tuple(np.matmul(xs[i], xs[i + 1]) for i in range(0, len(xs), 2))
    cfg = CONFIGS[config]
    with gemm_tune.forced(cfg) if cfg else _nothing():
        got = fuse(products)(*args)
    for g, ref in zip(got, products(*args)):
        g = np.asarray(g)
        assert g.shape == ref.shape and g.dtype == ref.dtype
        np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-5)


SPELLINGS = [
    ("dot2", lambda a, b: np.dot(a, b), ((5, 6), (6, 3))),
    ("dot1", lambda a, b: np.dot(a, b), ((6,), (6,))),
    ("dotnd", lambda a, b: np.dot(a, b), ((2, 3, 4), (5, 4, 2))),
    ("dotvec", lambda a, b: np.dot(a, b), ((2, 3, 4), (4,))),
    ("dotscalar", lambda a, b: np.dot(a, b[0, 0]), ((2, 3), (1, 1))),
    ("method", lambda a, b: a.dot(b), ((5, 6), (6, 3))),
    ("vdot", lambda a, b: np.vdot(a, b), ((2, 6), (3, 4))),
    ("inner", lambda a, b: np.inner(a, b), ((2, 3, 4), (5, 4))),
    ("tensordot2", lambda a, b: np.tensordot(a, b), ((3, 4, 5), (4, 5, 2))),
    ("tensordot_axes", lambda a, b: np.tensordot(a, b, axes=([0, 2], [2, 0])),
     ((3, 4, 5), (5, 2, 3))),
    ("tensordot0", lambda a, b: np.tensordot(a, b, axes=0), ((2, 3), (4,))),
    ("einsum_mm", lambda a, b: np.einsum("ij,jk->ik", a, b), ((5, 6), (6, 3))),
    ("einsum_t", lambda a, b: np.einsum("ji,kj->ik", a, b), ((6, 5), (3, 6))),
    ("einsum_batch", lambda a, b: np.einsum("bij,bjk->bik", a, b), ((2, 5, 6), (2, 6, 3))),
    ("einsum_ell", lambda a, b: np.einsum("...ij,...jk", a, b), ((2, 5, 6), (6, 3))),
    ("einsum_outer", lambda a, b: np.einsum("i,j->ij", a, b), ((5,), (3,))),
    ("einsum_sum", lambda a, b: np.einsum("ijk,jl->il", a, b), ((2, 3, 4), (3, 5))),
    ("einsum_implicit", lambda a, b: np.einsum("ij,jk", a, b), ((5, 6), (6, 3))),
    ("einsum_perm", lambda a, b: np.einsum("bhqd,bhkd->bhkq", a, b),
     ((2, 3, 4, 5), (2, 3, 6, 5))),
    ("vecdot", lambda a, b: np.vecdot(a, b), ((3, 5), (5,))),
    ("matvec", lambda a, b: np.matvec(a, b), ((3, 5), (5,))),
    ("vecmat", lambda a, b: np.vecmat(a, b), ((5,), (5, 3))),
    ("rmatmul", lambda a, b: np.ones((2, 2), a.dtype) @ a, ((2, 3), (3, 2))),
]


@pytest.mark.parametrize("dtype", [np.float32, np.int16], ids=lambda d: np.dtype(d).name)
def test_spellings(dtype) -> None:
    """@, matmul, dot, vdot, inner, tensordot, einsum, vecdot & co. in one fused function."""
    cases = [(n, fn, s) for n, fn, s in SPELLINGS
             if n not in ("vecdot", "matvec", "vecmat") or isinstance(getattr(np, n, None),
                                                                      np.ufunc)]
    if np.dtype(dtype).kind != "f":  # integer dtypes: the promoting and reshaping spellings
        cases = [c for c in cases if c[0] in ("dotnd", "dotscalar", "vdot", "inner",
                                              "tensordot_axes", "einsum_sum", "einsum_perm")]
    rng = np.random.default_rng(3)
    args = [_data(s, dtype, rng) for _, _, pair in cases for s in pair]

    def spellings(*xs):
        return tuple(fn(xs[2 * i], xs[2 * i + 1]) for i, (_, fn, _) in enumerate(cases))
    got = fuse(spellings)(*args)
    with np.errstate(all="ignore"):
        refs = spellings(*args)
    for (name, _, _), g, ref in zip(cases, got, refs):
        try:
            _check(g, np.asarray(ref), np.dtype(dtype).kind != "f")
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


def test_mixed_dtypes_promote_like_numpy() -> None:
    rng = np.random.default_rng(4)
    a, b = _data((4, 5), np.int8, rng), _data((5, 3), np.float32, rng)
    got = fuse(lambda x, y: x @ y)(a, b)
    _check(got, a @ b, False)
    c = _data((5, 3), np.uint8, rng)
    _check(fuse(lambda x, y: x @ y)(a, c), a @ c, True)
    _check(fuse(lambda x, y: np.matmul(x, y, dtype=np.int32))(a, c),
           np.matmul(a, c, dtype=np.int32), True)


def test_views_and_pyopencl_views(queue) -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((20, 30)).astype(np.float32)
    b = rng.standard_normal((26, 40)).astype(np.float32)
    da, db = cla.to_device(queue, a), cla.to_device(queue, b)
    f = fuse(lambda x, y: x.T[::2] @ y[1:21, ::3].T.T)
    for cfg in (None, TILED, TILED_WIDE):
        with gemm_tune.forced(cfg) if cfg else _nothing():
            got = f(da, db).get()
        ref = a.T[::2] @ b[1:21, ::3]
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
        f.cache_clear()
    # a pyopencl view with an offset and a transposed (non-contiguous) view
    sub = da[3:18]
    got = fuse(lambda x, y: x @ y)(sub, db[:, :30].T).get()
    np.testing.assert_allclose(got, a[3:18] @ b[:, :30].T, rtol=1e-5, atol=1e-5)


# -- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn,shapes", [
    (lambda a, b: a @ b, ((3, 4), (5, 6))),
    (lambda a, b: a @ b, ((2, 3, 4), (3, 4, 5))),
    (lambda a, b: np.matmul(a, b[0, 0]), ((3, 4), (1, 1))),
    (lambda a, b: np.dot(a, b), ((3, 4), (5, 6))),
    (lambda a, b: np.inner(a, b), ((3, 4), (3, 5))),
    (lambda a, b: np.vdot(a, b), ((3, 4), (3, 5))),
    (lambda a, b: np.tensordot(a, b), ((3, 4), (5, 6))),
    (lambda a, b: np.einsum("ij,jk->ik", a, b), ((3, 4), (5, 6))),
])
def test_shape_errors_are_numpys(fn, shapes) -> None:
    a, b = (np.ones(s, np.float32) for s in shapes)
    with pytest.raises(ValueError) as numpy_err:
        fn(a, b)
    with pytest.raises(ValueError) as ours:
        fuse(fn)(a, b)
    assert str(ours.value) == str(numpy_err.value)


def test_unsupported() -> None:
    # (einsum with diagonals or one operand is traced elementwise: tests/frontend/test_einsum.py)
    with pytest.raises(fusejit.UnsupportedDTypeError):
        fuse(lambda x: x @ x)(np.ones((2, 2), np.complex64))


# -- fusion -----------------------------------------------------------------------------------------


def _kernels(f, *args) -> int:
    return len(f.lower(*args).kernels)


def test_prologue_and_epilogue_fuse_into_one_kernel() -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((17, 24)).astype(np.float32)
    w = rng.standard_normal((24, 13)).astype(np.float32)
    b = rng.standard_normal(13).astype(np.float32)
    rowb = rng.standard_normal((17, 1)).astype(np.float32)
    res = rng.standard_normal((17, 13)).astype(np.float32)

    def dense(x, w, b, rowb, res):
        h = (-x * 0.5).astype(np.float64).astype(np.float32) @ w.T.T + b + rowb
        return h, np.maximum(h, 0) + res
    f = fuse(dense)
    for cfg in (None, TILED):
        with gemm_tune.forced(cfg) if cfg else _nothing():
            assert _kernels(f, x, w, b, rowb, res) == 1
            pre, post = f(x, w, b, rowb, res)
        f.cache_clear()
        ref_pre, ref_post = dense(x, w, b, rowb, res)
        np.testing.assert_allclose(pre, ref_pre, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(post, ref_post, rtol=1e-5, atol=1e-5)
    text = str(f.lower(x, w, b, rowb, res))
    assert "GEMM" in text and "prologue of a" in text and "epilogue" in text


def test_dequantize_prologue() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((9, 16)).astype(np.float32)
    wq = rng.integers(-128, 128, (16, 11)).astype(np.int8)
    scale = (rng.random(11) * 0.1).astype(np.float32)

    def int8_linear(x, wq, scale):
        return x @ fusejit.dequantize_linear(wq, scale, np.int8(0), axis=1)
    f = fuse(int8_linear)
    assert _kernels(f, x, wq, scale) == 1
    np.testing.assert_allclose(f(x, wq, scale), int8_linear(x, wq, scale), rtol=1e-5,
                               atol=1e-4)


def test_mlp_block_chain_stores_each_intermediate_once() -> None:
    rng = np.random.default_rng(8)
    x = rng.standard_normal((12, 16)).astype(np.float32)
    w1 = rng.standard_normal((16, 16)).astype(np.float32) * 0.2
    b1 = rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((16, 16)).astype(np.float32) * 0.2
    b2 = rng.standard_normal(16).astype(np.float32)

    def block(x, w1, b1, w2, b2):
        h = x @ w1 + b1
        h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
        return x + h @ w2 + b2
    f = fuse(block)
    low = f.lower(x, w1, b1, w2, b2)
    assert len(low.kernels) == 2 and len(low.plan.temps) == 1
    np.testing.assert_allclose(f(x, w1, b1, w2, b2), block(x, w1, b1, w2, b2), rtol=1e-4,
                               atol=1e-4)


def test_reductions_before_and_after() -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((10, 16)).astype(np.float32)
    w = rng.standard_normal((16, 8)).astype(np.float32)

    def ln_matmul_sum(x, w):
        mu = x.mean(-1, keepdims=True)
        n = (x - mu) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
        y = n @ w
        return y, y.sum(-1), (y * 2).max(0)
    f = fuse(ln_matmul_sum)
    low = f.lower(x, w)
    assert len(low.kernels) >= 3  # normalise, GEMM, the reductions of its result
    assert "separate kernel" in str(low)
    for got, ref in zip(f(x, w), ln_matmul_sum(x, w)):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_two_products_in_one_epilogue() -> None:
    rng = np.random.default_rng(10)
    x = rng.standard_normal((8, 12)).astype(np.float32)
    w1, w3 = (rng.standard_normal((12, 10)).astype(np.float32) for _ in range(2))

    def swiglu(x, w1, w3):
        g = x @ w1
        return g / (1 + np.exp(-g)) * (x @ w3)
    f = fuse(swiglu)
    assert _kernels(f, x, w1, w3) == 2
    np.testing.assert_allclose(f(x, w1, w3), swiglu(x, w1, w3), rtol=1e-5, atol=1e-5)


def test_in_place_forms(queue) -> None:
    rng = np.random.default_rng(11)
    a = rng.standard_normal((6, 7)).astype(np.float32)
    b = rng.standard_normal((7, 5)).astype(np.float32)
    c = rng.standard_normal((6, 5)).astype(np.float32)

    def acc(c, a, b):
        c += a @ b
    dc = cla.to_device(queue, c)
    f = fuse(acc)
    f(dc, cla.to_device(queue, a), cla.to_device(queue, b))
    np.testing.assert_allclose(dc.get(), c + a @ b, rtol=1e-5, atol=1e-5)
    assert _kernels(f, dc, cla.to_device(queue, a), cla.to_device(queue, b)) == 1

    def into(a, b, c):
        np.matmul(a, b, out=c)
    dc = cla.to_device(queue, c)
    fuse(into)(cla.to_device(queue, a), cla.to_device(queue, b), dc)
    np.testing.assert_allclose(dc.get(), a @ b, rtol=1e-5, atol=1e-5)

    # the product reads the argument it overwrites: staged through a temporary
    sq = rng.standard_normal((5, 5)).astype(np.float32)
    w = rng.standard_normal((5, 5)).astype(np.float32)

    def square(s, w):
        s @= w
    ds = cla.to_device(queue, sq)
    fuse(square)(ds, cla.to_device(queue, w))
    np.testing.assert_allclose(ds.get(), sq @ w, rtol=1e-5, atol=1e-5)


def test_batched_broadcast_tiled() -> None:
    rng = np.random.default_rng(12)
    a = rng.standard_normal((3, 1, 18, 9)).astype(np.float32)
    bias = rng.standard_normal((4, 1, 24)).astype(np.float32)
    b = rng.standard_normal((4, 9, 24)).astype(np.float32)
    f = fuse(lambda a, b, bias: np.tanh(a @ b + bias))
    for cfg in (None, TILED_WIDE, SIMD):
        with gemm_tune.forced(cfg) if cfg else _nothing():
            got = f(a, b, bias)
        f.cache_clear()
        np.testing.assert_allclose(got, np.tanh(a @ b + bias), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k", [1, 300])
def test_float_bound_over_k(k) -> None:
    rng = np.random.default_rng(13)
    a = rng.standard_normal((9, k)).astype(np.float32) * 10
    b = rng.standard_normal((k, 7)).astype(np.float32)
    for cfg in (None, TILED):
        with gemm_tune.forced(cfg) if cfg else _nothing():
            got = fuse(lambda x, y: x @ y)(a, b)
        _bound_ok(np.asarray(got), a, b, a @ b)
    h, g = a.astype(np.float16), b.astype(np.float16)
    _bound_ok(np.asarray(fuse(lambda x, y: x @ y)(h, g)), h, g, h @ g)


def test_split_k_and_explain() -> None:
    """Split-K (slices of K summed by a second kernel that runs the epilogue), and explain()
    naming the GEMM, what it fused and the configuration."""
    rng = np.random.default_rng(14)
    a = rng.standard_normal((2, 13, 64)).astype(np.float32)
    b = rng.standard_normal((2, 64, 11)).astype(np.float32)
    c = rng.standard_normal(11).astype(np.float32)
    f = fuse(lambda a, b, c: (np.maximum(a @ b + c, 0), a @ b))
    with gemm_tune.forced(GemmConfig(16, 16, 4, 4, 4, 2, split=4)):
        relu, prod = f(a, b, c)
        low = f.lower(a, b, c)
        text = str(f.explain(a, b, c))
    assert [k.role for k in low.kernels] == ["partial", "combine"]
    np.testing.assert_allclose(relu, np.maximum(a @ b + c, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(prod, a @ b, rtol=1e-5, atol=1e-5)
    assert "GEMM batched 2x13x11x64" in text and "K split over 4" in text
    assert "epilogue stores output 0 (where, add, le), output 1" in text


def test_validate_mode_checks_products() -> None:
    rng = np.random.default_rng(15)
    x = rng.standard_normal((9, 33)).astype(np.float32)
    w = rng.standard_normal((33, 7)).astype(np.float32)
    q = rng.integers(-100, 100, (33, 7)).astype(np.int16)
    f = fuse(validate=True)(lambda x, w, q: (np.tanh(x @ w + 1), (x > 0).astype(np.int16) @ q))
    y, z = f(x, w, q)
    np.testing.assert_allclose(y, np.tanh(x @ w + 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(z, (x > 0).astype(np.int16) @ q)


def test_vector_products_fuse_their_epilogue() -> None:
    """A 1-d operand's product (M or N of 1) takes the bias and activation in its own kernel,
    through the edge tiles' guarded stores too."""
    rng = np.random.default_rng(16)
    v = rng.standard_normal(24).astype(np.float32)
    w = rng.standard_normal((24, 19)).astype(np.float32)
    b = rng.standard_normal(19).astype(np.float32)
    c = rng.standard_normal(24).astype(np.float32)
    f = fuse(lambda v, w, b, c: (np.maximum(v @ w + b, 0), np.tanh(w.T @ c) * 2))
    for cfg in (None, TILED):
        with gemm_tune.forced(cfg) if cfg else _nothing():
            assert _kernels(f, v, w, b, c) == 2
            relu, t = f(v, w, b, c)
        f.cache_clear()
        np.testing.assert_allclose(relu, np.maximum(v @ w + b, 0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(t, np.tanh(w.T @ c) * 2, rtol=1e-5, atol=1e-5)


def test_first_use_tuning_persists(queue, tmp_path, monkeypatch) -> None:
    """The tuner builds the candidates in one program, times them, keeps the winner in
    gemm.json in the cache directory; NVIDIA's register report is parsed per kernel."""
    from fusejit.codegen.gemm import tune as gt
    from fusejit.runtime.opencl import gemm_bench
    from fusejit.runtime.opencl.devices import device_info

    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(gemm_bench, "_memory", {})
    x = np.ones((40, 24), np.float32)
    f = fuse(lambda a, b: a @ b)
    group = next(g for g in f.lower(x, x.T.copy()).plan.groups if g.kind == "gemm")
    cands = [TILED, TILED_WIDE]
    tune = gemm_bench.make_tuner(queue, device_info(queue.device))
    best = tune(group, "test-key", cands, 1.0)
    assert best is not None and gt.replace(best, why="") in cands
    assert "tuned now over 2 candidates" in best.why
    assert gemm_bench.lookup("test-key") in cands and (tmp_path / "gemm.json").exists()
    log = ("ptxas info    : Compiling entry function 'fj_tune0' for 'sm_90'\n"
           "ptxas info    : Function properties for fj_tune0\n"
           "    8 bytes stack frame, 16 bytes spill stores, 16 bytes spill loads\n"
           "ptxas info    : Used 255 registers, 380 bytes cmem[0]\n"
           "ptxas info    : Compiling entry function 'fj_tune1' for 'sm_90'\n"
           "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : Used 128 registers\n")
    assert gemm_bench.parse_ptxas(log) == {"fj_tune0": (255, 16), "fj_tune1": (128, 0)}


def test_in_place_writes_before_a_product_reads_them(queue) -> None:
    """An argument written in place by one kernel and read by a later GEMM's tile loads (or
    the reverse) keeps NumPy's order: the write is staged through a temporary."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    w = rng.standard_normal((5, 4)).astype(np.float32)

    def bump_then_multiply(x, w):
        x += 1
        return x @ w, (x * 2).sum()

    def multiply_then_bump(x, w):
        y = x @ w
        x *= 3
        return y
    for fn in (bump_then_multiply, multiply_then_bump):
        dx, ref_x = cla.to_device(queue, x), x.copy()
        got = fuse(fn)(dx, cla.to_device(queue, w))
        ref = fn(ref_x, w)
        for g, r in zip(got if isinstance(got, tuple) else (got,),
                        ref if isinstance(ref, tuple) else (ref,)):
            np.testing.assert_allclose(g.get(), r, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(dx.get(), ref_x, rtol=1e-6)


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("fn,shapes", [
    (lambda q, k, v: _softmax(q @ k.swapaxes(-1, -2) / 4) @ v, ((2, 7, 4), (2, 9, 4), (2, 9, 3))),
    (lambda x, w, v: np.exp(x @ w) @ v + (x @ w).max(), ((8, 6), (6, 5), (5, 4))),
    (lambda x, w, v: (x @ w, (x @ w) @ v, ((x @ w) @ v).T @ (x @ w)), ((8, 6), (6, 5), (5, 4))),
    (lambda x, w, v: ((x * 2) @ w + (x * 2).sum(), (x @ w).T + 1), ((8, 6), (6, 5), (5, 4))),
], ids=["attention", "products_and_reductions", "chain_of_views", "shared_operand"])
def test_programs_mixing_products_and_reductions(fn, shapes) -> None:
    """Products read by reductions, reductions feeding products, products of products and
    of their views: each phase's kernels run after what they read."""
    rng = np.random.default_rng(18)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    got, ref = fuse(fn)(*args), fn(*args)
    for g, r in zip(got if isinstance(got, tuple) else (got,),
                    ref if isinstance(ref, tuple) else (ref,)):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)


def test_region_write_of_a_product_of_itself(queue) -> None:
    rng = np.random.default_rng(19)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    w = rng.standard_normal((3, 3)).astype(np.float32)

    def inplace(x, w):
        x[:, :3] = x[:, :3] @ w
    dx, ref = cla.to_device(queue, x), x.copy()
    fuse(inplace)(dx, cla.to_device(queue, w))
    inplace(ref, w)
    np.testing.assert_allclose(dx.get(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", ["vulkan"], indirect=True)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.float16])
def test_products_on_vulkan(device, rng, dtype) -> None:
    """Vulkan's GLSL runs the direct kernel (codegen/gemm/dispatch.py): a transposed operand,
    a batch, a vector and an epilogue, NumPy's dtypes; one shader per product."""
    a, b = _data((2, 33, 17), dtype, rng), _data((17, 9), dtype, rng)
    v = _data((17,), dtype, rng)

    def products(a, b, v):
        return a @ b, a[1].T.T @ b + b[0], v @ b
    fused = fuse(products)
    for got, want, x, y in zip(fused(a, b, v), products(a, b, v), (a, a[1], v), (b, b, b)):
        assert got.dtype == want.dtype and got.shape == want.shape
        if want.dtype.kind in "iub":
            np.testing.assert_array_equal(got, want)
        elif x is not a[1]:  # (the one with a sum after it: NumPy's rounding of that sum too)
            _bound_ok(got, x, y, want)
        else:
            np.testing.assert_allclose(got, want, rtol=2e-3 if dtype == np.float16 else 1e-5,
                                       atol=2e-3 if dtype == np.float16 else 1e-5)
    kernels = fused.lower(a, b, v).kernels
    assert len(kernels) == 3 and "direct kernel" in kernels[0].reason
