"""validate=True / FUSEJIT_VALIDATE=1: results checked against a float64 NumPy evaluation."""

from __future__ import annotations

import numpy as np
import pytest

import fusejit
from fusejit import ValidationError, fuse
from fusejit.inspect import validate
from fusejit.ir.ops import Op
from fusejit.targets.opencl import target as opencl


def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


@pytest.fixture
def x(rng):
    return rng.standard_normal(1000).astype(np.float32)


def _many(x):
    return (gelu(x), np.sum(x), np.mean(x), np.var(x), np.exp(x).sum(), np.argmax(x),
            (x * 1000).astype(np.int32), np.floor(x * 10) // 3, x > 0.5,
            np.where(x > 0, np.log1p(np.abs(x)), np.expm1(x)))


# (one test per dtype: each builds its own program, ~10 s on PoCL, which xdist runs side by side)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_correct_results_pass(x, dev, dtype):
    f = fuse(_many, validate=True)
    f(x.astype(dtype))
    f(dev(x.astype(dtype)))  # device arrays too (the fast path is bypassed while validating)


def test_no_false_alarm_on_cancellation_or_undefined_casts(x):
    big = np.float32(1e8)
    f = fuse(lambda x: ((x + big) - big, (x * np.nan).astype(np.int32),
                        np.sum(x * 1e30) - np.sum(x * 1e30)), validate=True)
    f(x)
    z = np.array([0.0, -0.0, 1.0], np.float32)
    i = np.array([0, 1, -1], np.int64)
    g = fuse(lambda z, i: (np.signbit(np.fmod(3, z) / z), np.copysign(1.0, z / z),
                           np.cbrt(np.reciprocal(i))), validate=True)
    g(z, i)  # NaN signs and NumPy's (int)(1.0 / 0) are implementation-defined
    h = fuse(lambda a: (np.sin(np.sinh(a)), np.fmod(np.exp(a), 3.0)), validate=True)
    h(np.array([-550.5, 2.5, 300.25]))  # the operand's bound spans many periods
    # tanh(80) may be 1 or 1 - 2**-24 (within its 8 ULP): fmod by 1 jumps from 0 to ~1
    k = fuse(lambda a: np.fmod(np.tanh(a), np.float32(1)), validate=True)
    k(np.array([80.0, 0.5], np.float32))


def test_in_place_writes_are_validated(x):
    def step(a, b):
        a += np.sin(b)

    a = x.copy()
    fuse(step, validate=True)(a, x)
    np.testing.assert_allclose(a, x + np.sin(x), rtol=1e-6)


def test_a_wrong_kernel_is_caught(x, monkeypatch):
    # a target template off by 1e-3: far beyond tanh's documented 8 ULP
    for key in ("f", "float32"):  # (float32 has its own spelling: a select after the builtin)
        monkeypatch.setitem(opencl._TEMPLATES, (Op.TANH, key), "(tanh({a}) + 1e-3f)")
    monkeypatch.setitem(opencl._VEC, (Op.TANH, "f"), "(tanh({a}) + 1e-3f)")
    with pytest.raises(ValidationError) as info:
        fuse(gelu, validate=True)(x)
    message = str(info.value)
    assert "output 0 float32[1000]" in message
    assert "ULP" in message and "exceeds the bound" in message
    # off: the same wrong kernel runs silently
    fuse(gelu)(x)


def test_a_wrong_integer_result_is_caught(monkeypatch):
    monkeypatch.setitem(opencl._TEMPLATES, (Op.BITWISE_XOR, "*"), "(({S})({a} | {b}))")
    monkeypatch.setitem(opencl._VEC, (Op.BITWISE_XOR, "*"), "({a} | {b})")
    a = np.arange(10, dtype=np.int32)
    with pytest.raises(ValidationError, match="differ from the reference"):
        fuse(lambda a: a ^ 3, validate=True)(a)


def test_bitwise_reductions_are_validated_exactly(monkeypatch):
    """Bitwise reductions are exact: correct ones pass, a wrong combine (xor merged with |) is
    caught; a reduction of a constant is folded while tracing (the reference interpreter)."""
    from fusejit.codegen import reduce as codegen_reduce

    a = np.random.default_rng(5).integers(-2**31, 2**31 - 1, (7, 300)).astype(np.int32)
    fuse(lambda a: (np.bitwise_or.reduce(a, 1), np.bitwise_and.reduce(a, None),
                    np.bitwise_xor.reduce(a > 0, 0), np.logical_xor.reduce(a, 1)),
         validate=True)(a)
    folded = fuse(lambda s: np.bitwise_and.reduce(np.full((3, 5), 6, np.uint16), axis=1) + s)
    assert "bit_and" not in str(folded.lower(np.uint16(1)))
    np.testing.assert_array_equal(folded(np.uint16(1)), np.full(3, 7, np.uint16))
    monkeypatch.setitem(codegen_reduce.REDUCE_COMBINE, Op.BIT_XOR, Op.BITWISE_OR)
    with pytest.raises(ValidationError, match="differ from the reference"):
        fuse(lambda a: np.bitwise_xor.reduce(a, 1), validate=True)(a)


def test_environment_variable_turns_it_on(monkeypatch, x):
    monkeypatch.setenv("FUSEJIT_VALIDATE", "1")
    assert fuse(gelu).validate
    monkeypatch.setenv("FUSEJIT_VALIDATE", "0")
    assert not fuse(gelu).validate


def test_every_call_is_validated_including_repeats(x, dev, monkeypatch):
    calls = []
    real = validate.run_checked
    monkeypatch.setattr(validate, "run_checked", lambda *a: calls.append(1) or real(*a))
    f = fuse(gelu, validate=True)
    for arg in (x, x, dev(x), dev(x), dev(x)):
        f(arg)
    assert len(calls) == 5  # repeated signatures do not slip onto the unvalidated fast path
    g = fuse(gelu)
    g(dev(x)), g(dev(x))  # fast path entries exist now
    g.validate = True
    g(dev(x))
    assert len(calls) == 6


def test_off_means_no_validation_work(x, dev, monkeypatch):
    def boom(*args):
        raise AssertionError("validation ran while off")

    monkeypatch.setattr(validate, "run_checked", boom)
    f = fuse(gelu)
    for arg in (x, dev(x), x, dev(x)):
        f(arg)


def test_bound_rule_is_documented():
    assert "bound rule" in validate.__doc__.lower() and "ULP" in validate.__doc__
    assert validate.SLACK_ULP == 1.0
    assert issubclass(fusejit.ValidationError, AssertionError)
