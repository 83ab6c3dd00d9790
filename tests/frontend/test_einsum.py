"""np.einsum beyond matrix products (fusejit/frontend/numpy/einsum.py) against NumPy: sums over an index,
transposes, diagonals, '...' broadcasting, products without contraction, and contractions with
diagonals or three operands; dtypes, errors and fusion."""

from __future__ import annotations

import numpy as np
import pytest

import fusejit
from fusejit import fuse

RNG = np.random.default_rng(7)
A, S = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 4))
V, W, B = RNG.standard_normal(4), RNG.standard_normal(3), RNG.standard_normal((2, 3, 4))
T = RNG.standard_normal((5, 6, 4))[::2, 1::2].transpose(1, 0, 2)  # a strided, transposed view
CASES = [("ij->i", A), ("ij->j", A), ("ii->", S), ("ij->", A), ("ij->ji", A), ("ii->i", S),
         ("ij", A), ("ii", S), ("ij,ij->ij", A, A), ("i,j->ij", W, V), ("i,j", W, V),
         ("...i,...i->...i", B, V), ("...ij->...ji", B), ("i...->...", B), ("ij,ij->i", A, A),
         ("i,i,i->", V, V, V), ("ii,i->i", S, V), ("bij->bj", B), ("ijk->kji", T),
         ("iij->j", np.ones((3, 3, 2))), ("i->i", V), ("ij,jk", A, S), ("i,i->", V, V),
         ("ij->", np.ones((0, 3)))]


def test_einsum_forms_match_numpy():
    """All forms in one fused function (one build)."""
    spans = np.cumsum([0] + [len(c) - 1 for c in CASES])

    def fn(*flat):
        return tuple(np.einsum(c[0], *flat[spans[k]:spans[k + 1]]) for k, c in enumerate(CASES))

    flat = [x for c in CASES for x in c[1:]]
    for c, got, want in zip(CASES, fuse(fn)(*flat), fn(*flat)):
        got = np.asarray(got)
        assert (got.shape, got.dtype) == (want.shape, want.dtype), c[0]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=c[0])


def test_dtypes_and_out():
    """The operands' result type, kept by the sum (int8 sums wrap in int8, bools or); dtype=
    and out=."""
    xi = RNG.integers(-100, 100, (4, 5)).astype(np.int8)
    xb = RNG.random((4, 5)) > 0.5
    xf = RNG.standard_normal(5).astype(np.float32)

    def fn(a, b, c, o):
        np.einsum("ij->j", a, out=o)
        return (np.einsum("ij->i", a), np.einsum("ij->", b), np.einsum("ij,j->ij", a, c),
                np.einsum("ii->", a[:4, :4], dtype=np.int64), np.einsum("ij,ij->ij", b, b))

    o, want_o = np.zeros(5, np.float64), np.zeros(5, np.float64)
    got, want = fuse(fn)(xi, xb, xf, o), fn(xi, xb, xf, want_o)
    np.testing.assert_array_equal(o, want_o)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_prologue_and_sum_fuse_into_one_kernel():
    f = fuse(lambda a, b: np.einsum("ij,ij->i", a * 2, np.exp(b)) + 1)
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    assert len(f.lower(x, x).module.kernels) == 1
    f1 = fuse(lambda a: np.einsum("ij->i", np.abs(a)))
    assert len(f1.lower(x).module.kernels) == 1
    np.testing.assert_allclose(f1(x), np.einsum("ij->i", np.abs(x)), rtol=1e-5)


@pytest.mark.parametrize("call,error,text", [
    (lambda a: np.einsum("ii->i", a), ValueError, "collapsing index 'i'"),
    (lambda a: np.einsum("ij->ii", a), ValueError, "multiple times"),
    (lambda a: np.einsum("ij->k", a), ValueError, "never appeared"),
    (lambda a: np.einsum("i->", a[0], dtype=np.int32), TypeError, "'safe'"),
    (lambda a: np.einsum("i,i->i", a[0], a[0, :2]), ValueError, "broadcast"),
    (lambda a: np.einsum("ijk->i", a), ValueError, "too many subscripts"),
])
def test_errors_are_numpys(call, error, text):
    x = np.ones((2, 3))
    with pytest.raises(error, match=text):
        call(x)
    with pytest.raises(error, match=text):
        fuse(call)(x)


@pytest.mark.parametrize("subscripts", ["\u00e9i->i", "i\u00e4", "i\u00b5,ij->j", "i1->i", "i_"])
def test_subscripts_must_be_ascii_letters(subscripts):
    """Letters outside ASCII (NumPy: UnicodeEncodeError, a ValueError), digits, underscores:
    ValueError, in the elementwise form and the matrix-product form alike."""
    ops = [np.ones((2, 2))] * (subscripts.count(",") + 1)
    with pytest.raises(ValueError):
        np.einsum(subscripts, *ops)
    with pytest.raises(ValueError, match="subscript"):
        fuse(lambda *a: np.einsum(subscripts, *a))(*ops)


def test_sublist_form_is_refused_clearly():
    with pytest.raises(fusejit.UnsupportedOperationError, match="subscripts string"):
        fuse(lambda a: np.einsum(a, [0, 1], [1]))(np.ones((2, 2)))
