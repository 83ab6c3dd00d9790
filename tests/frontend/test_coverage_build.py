"""Building arrays (issue 17 §3): joins, pads, tiles, repeats, rolls, differences, triangles and
diagonals match NumPy in dtype, shape and value, read their operands through index maps (one
kernel with the work around them, no copy), and refuse bad input with NumPy's error class."""

from __future__ import annotations

import numpy as np
import pytest

from fusejit import UnsupportedOperationError, fuse
from fusejit.testing import assert_matches

A = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
B = np.arange(8, dtype=np.int16).reshape(2, 4)
V = np.arange(5, dtype=np.float64) * 1.5 - 2

CASES = {
    "concatenate_0": (lambda a, b: np.concatenate([a, b]) * 2, (A, B)),
    "concatenate_1": (lambda a, b: np.concatenate((a, a[:, :1], b.T[:3]), axis=1), (A, B)),
    "concatenate_none": (lambda a, b: np.concatenate([a, b], axis=None) + 1, (A, B)),
    "concatenate_dtype": (lambda a, b: np.concatenate([a, b], dtype=np.float64), (A, B)),
    "concatenate_const": (lambda a: np.concatenate([a, np.ones((1, 4), np.float32)]), (A,)),
    "stack_0": (lambda a: np.stack([a, a * 2, -a]), (A,)),
    "stack_last": (lambda a: np.stack([a, a + 1], axis=-1).sum(-1), (A,)),
    "hstack": (lambda a, b: np.hstack([a[:2], b]), (A, B)),
    "hstack_1d": (lambda v: np.hstack([v, v[::-1]]), (V,)),
    "vstack": (lambda a, v: np.vstack([a, v[:4]]), (A, V)),
    "dstack": (lambda a: np.dstack([a, a * a]), (A,)),
    "column_stack": (lambda v: np.column_stack([v, v * 2, v[::-1]]), (V,)),
    "pad_constant": (lambda a: np.pad(a, ((1, 2), (3, 0)), constant_values=((7, 8), (9, 10))),
                     (A,)),
    "pad_constant_scalar": (lambda a: np.pad(a, 2) * 3, (A,)),
    "pad_edge": (lambda a: np.pad(a, ((2, 1), (1, 3)), mode="edge"), (A,)),
    "pad_reflect": (lambda a: np.pad(a, ((2, 7), (3, 1)), mode="reflect"), (A,)),
    "pad_symmetric": (lambda v: np.pad(v, (6, 2), mode="symmetric"), (V,)),
    "pad_wrap": (lambda a: np.pad(a, ((4, 1), (9, 2)), mode="wrap") + 1, (A,)),
    "tile": (lambda a: np.tile(a, (2, 1, 3)), (A,)),
    "tile_1d": (lambda v: np.tile(v, 3) * v[0], (V,)),
    "repeat_scalar": (lambda a: np.repeat(a, 3, axis=1), (A,)),
    "repeat_flat": (lambda a: np.repeat(a, 2), (A,)),
    "repeat_counts": (lambda a: np.repeat(a, [2, 0, 3], axis=0), (A,)),
    "repeat_many_counts": (lambda v: np.repeat(np.tile(v, 8), np.arange(40) % 3), (V,)),
    "repeat_method": (lambda a: a.repeat(2, axis=0), (A,)),
    "roll": (lambda a: np.roll(a, 2), (A,)),
    "roll_axis": (lambda a: np.roll(a, (-1, 5), axis=(0, 1)), (A,)),
    "diff": (lambda a: np.diff(a), (A,)),
    "diff_n2_axis0": (lambda a: np.diff(a, n=2, axis=0), (A,)),
    "diff_prepend": (lambda v: np.diff(v, prepend=0, append=v[-1:]), (V,)),
    "diff_bool": (lambda a: np.diff(a > 0), (A,)),
    "diff_int": (lambda b: np.diff(b.astype(np.uint8)), (B,)),
    "tril": (lambda a: np.tril(a), (A,)),
    "tril_k": (lambda a: np.tril(a, -1) + np.triu(a, 2), (A,)),
    "triu_int": (lambda b: np.triu(b, 1), (B,)),
    "tril_1d": (lambda v: np.tril(v), (V,)),
    "diag_1d": (lambda v: np.diag(v), (V,)),
    "diag_1d_k": (lambda v: np.diag(v, 2) + np.diag(v, -2), (V,)),
    "diag_2d": (lambda a: np.diag(a, 1) * 2, (A,)),
    "diagonal": (lambda a: np.diagonal(np.stack([a, a]), 1, 1, 2), (A,)),
    "diagonal_method": (lambda a: a.diagonal(-1), (A,)),
    "trace": (lambda a: np.trace(a), (A,)),
    "trace_int8": (lambda b: np.trace(b.astype(np.int8), 1), (B,)),
    "trace_method": (lambda a: a.trace(offset=-1, dtype=np.float64), (A,)),
    "zero_size_concatenate": (lambda a: np.concatenate([a, a[:0]]) + np.concatenate(
        [a[:0], a]), (A,)),
    "zero_size_ops": (lambda a: (np.pad(a[:0], 1), np.tile(a, 0), np.repeat(a, 0, axis=1),
                                 np.roll(a[:0], 3, 0), np.diff(a[:0], axis=0)), (A,)),
    "bool_concatenate": (lambda a: np.concatenate([a > 0, a < -3]), (A,)),
    "stack_0d": (lambda a: np.stack([a[0, 0], a[1, 1]]), (A,)),
    "diagonal_out_of_range": (lambda a: (np.diagonal(a, 5), np.trace(a, 10)), (A,)),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_numpy(name):
    fn, args = CASES[name]
    got, want = fuse(fn)(*args), fn(*args)
    for g, w in zip(got, want) if isinstance(want, tuple) else ((got, want),):
        assert_matches(g, w, what=name)


@pytest.mark.parametrize("mode", ["edge", "reflect", "symmetric", "wrap"])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_pad_any_width(mode, n):
    """Widths beyond the axis length (NumPy pads those by repeated reflection / wrapping)."""
    v = np.arange(n, dtype=np.int32) * 3 + 1
    for before, after in ((0, 1), (3, 0), (7, 11)):
        want = np.pad(v, (before, after), mode=mode)
        assert_matches(fuse(lambda v: np.pad(v, (before, after), mode=mode))(v), want)


@pytest.mark.parametrize("fn, kernels", [
    (lambda a, b: np.exp(np.concatenate([a, b])) + 1, 1),
    (lambda a, b: np.pad(a, 1, mode="reflect") * 2 - np.tile(b, (6, 2))[:, :7], 1),
    (lambda a, b: np.stack([a, a]).sum(0) + np.roll(a, 1), 1),  # a reduction and its epilogue
    (lambda a, b: np.diff(np.tril(a)) + np.repeat(a, 2, axis=1)[:, :4], 1),
])
def test_fuses_into_one_kernel(fn, kernels):
    a = np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5)
    b = np.arange(5, dtype=np.float32).reshape(1, 5)
    f = fuse(fn)
    assert_matches(f(a, b), fn(a, b), ulp=8)
    low = f.lower(a, b)
    assert len(low.kernels) == kernels, low
    assert not low.plan.temps  # nothing materialised in between


def test_no_index_buffer_for_affine_pieces():
    """pad/roll read the operand through affine pieces: the kernel takes only x and out."""
    low = fuse(lambda x: np.roll(np.pad(x, 3, mode="wrap"), 2)).lower(V)
    assert len(low.module.kernels[0].signature.args) == 2, low.source  # (p0, out0)


@pytest.mark.parametrize("fn, error", [
    (lambda a, b: np.concatenate([a, b[0]]), ValueError),
    (lambda a, b: np.concatenate([a, b[:, :2]]), ValueError),
    (lambda a, b: np.concatenate([a, b], dtype=np.int16), TypeError),
    (lambda a, b: np.concatenate([a[0, 0], a[0, 1]]), ValueError),
    (lambda a, b: np.concatenate([]), ValueError),
    (lambda a, b: np.stack([a, b]), ValueError),
    (lambda a, b: np.concatenate([a, a], axis=2), np.exceptions.AxisError),
    (lambda a, b: np.pad(a, -1), ValueError),
    (lambda a, b: np.pad(a, 1.5), TypeError),
    (lambda a, b: np.pad(a[:0], 1, mode="edge"), ValueError),
    (lambda a, b: np.pad(a, 1, mode="bogus"), ValueError),
    (lambda a, b: np.pad(a, 1, mode="edge", constant_values=3), ValueError),
    (lambda a, b: np.tile(a, -1), ValueError),
    (lambda a, b: np.repeat(a, [1, 2], axis=0), ValueError),
    (lambda a, b: np.repeat(a, -1), ValueError),
    (lambda a, b: np.repeat(a, [1, -1, 1], axis=0), ValueError),
    (lambda a, b: np.diff(a, n=-1), ValueError),
    (lambda a, b: np.diff(a[0, 0]), ValueError),
    (lambda a, b: np.diag(np.stack([a, a])), ValueError),
    (lambda a, b: np.diagonal(a[0]), ValueError),
    (lambda a, b: np.diagonal(a, 0, 1, 1), ValueError),
])
def test_bad_input_raises_numpys_error(fn, error):
    with pytest.raises(error):
        fn(A, B)  # NumPy's own class ...
    with pytest.raises(error):
        fuse(fn)(A, B)  # ... and fusejit's, before anything runs


@pytest.mark.parametrize("fn", [
    lambda a, n: np.pad(a, 1, mode="maximum"),
])
def test_refused_with_a_clear_error(fn):
    with pytest.raises(UnsupportedOperationError, match="inside @fuse|traced"):
        fuse(fn)(A, 2)


@pytest.mark.parametrize("fn", [
    lambda a, n: np.repeat(a, n),
    lambda a, n: np.roll(a, n),
])
def test_int_counts_passed_as_arguments_are_specialised(fn):
    """A repeat count or shift passed as a Python int is needed as a value: the call
    specialises on it (issue 30) instead of refusing the traced int."""
    f = fuse(fn)
    for n in (2, 3):
        np.testing.assert_array_equal(f(A, n), fn(A, n))


BIG = np.random.default_rng(7).standard_normal((64, 128)).astype(np.float32)


@pytest.mark.parametrize("fn", [
    lambda a: np.concatenate([a, -a], 1) * 2,
    lambda a: np.pad(a, ((3, 5), (7, 9)), mode="reflect"),
    lambda a: np.roll(a, 5, axis=1) + np.tile(a[:, :64], (1, 2)),
    lambda a: np.tril(a) - np.triu(a, 3) + np.repeat(a[:, ::2], 2, axis=1),
    lambda a: a[:, np.arange(128) * 7 % 128] - np.take_along_axis(a, a.argmax(1)[:, None], 1),
])
def test_vectorised_kernels(fn):
    """Arrays large enough for vector lanes: pieces and gathers are lowered per lane."""
    assert_matches(fuse(fn)(BIG), fn(BIG))
