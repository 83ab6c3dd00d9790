"""Speculated float32 ``/``, ``1/x`` and ``sqrt`` (targets/opencl/fastdiv.py): fast paths with
one exact fallback per element.

On any OpenCL device with float64, ``emulated()`` spells the PTX estimates as OpenCL C (the
reciprocal one ulp off), so the mechanism (the flag, the fallback block, the values it shares
and recomputes) runs on PoCL in CI, with the CPU and the GPU lowering. Every result is compared
bit for bit with the exact ops (``disabled()``) and with NumPy. On an NVIDIA GPU the real PTX
runs the same tests, and a stress kernel checks the helpers against the exact ops on every
float32 significand of the divisor.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pytest
from test_ops_catalog import BINARY, UNARY, edge_values, in_layout, numpy_result, run_batched

import fusejit
from fusejit import fuse
from fusejit.runtime.opencl.devices import device_info
from fusejit.runtime.opencl.fastdiv_probe import mismatches
from fusejit.targets.opencl.fastdiv import disabled, emulated, helpers
from fusejit.testing import assert_matches, op_ulp
from fusejit.ir.ops import OP_OF_UFUNC

F4 = np.dtype(np.float32)


def _native() -> bool:
    return device_info(fusejit.default_queue().device).fast_div


@pytest.fixture(params=["emulated", "native"])
def speculated(request, has_fp64: bool) -> Callable[[], AbstractContextManager[None]]:
    """How speculation is asked for: emulated, or natively (the device's default)."""
    if request.param == "native":
        if not _native():
            pytest.skip("the device does not speculate float32 / and sqrt "
                        "(runtime/opencl/fastdiv_probe.py: NVIDIA with correctly rounded ops)")
        return nullcontext
    if not has_fp64:
        pytest.skip("the emulated estimates compute in float64, which this device lacks")
    return emulated


def _operands(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs: random float32 bit patterns (every class), values near the fast paths' range
    limits, and at the end every pair of edge values (signed zeros, subnormals, ±inf, NaN,
    range limits) that fits."""
    def one() -> np.ndarray:
        x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
        e = rng.choice([-126, -101, -100, -64, -63, 63, 64, 125, 126, 127], n // 2)
        x[: n // 2] = np.ldexp(rng.uniform(1, 2, n // 2) * rng.choice([-1, 1], n // 2),
                               e).astype(np.float32)
        return rng.permutation(x)
    x, y = one(), one()
    edges = edge_values(F4)
    pairs = min(n, edges.size ** 2)
    x[-pairs:] = np.repeat(edges, edges.size)[:pairs]
    y[-pairs:] = np.tile(edges, edges.size)[:pairs]
    return x, y


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    nan = np.isnan(got) & np.isnan(want)
    return got.dtype == want.dtype and bool(np.all((got.view(np.uint32) ==
                                                    want.view(np.uint32)) | nan))


CASES: dict[str, Callable[..., Any]] = {
    "divide": lambda x, y: x / y,
    "reciprocal": lambda x, y: (1.0 / x, np.reciprocal(y)),
    "sqrt": lambda x, y: np.sqrt(x) + np.sqrt(np.abs(y)),
    "chain": lambda x, y: np.sqrt(np.abs(x / y)) / (1.0 + np.abs(y)) - x / 3.0,
    # outputs that do not depend on a speculated op, and ones that do, side by side
    "mixed": lambda x, y: (x * y, np.exp(x / y), x + 1.0, np.where(x > y, x / y, y)),
    "casts": lambda x, y: ((x / y).astype(np.float16), (np.sqrt(x) > 1).astype(np.int32),
                           x.astype(np.float64) / y),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("n", [4096 * 4 + 3, 257])
def test_speculated_equals_exact_and_numpy(rng, lowering: str, speculated: Any, case: str,
                                           n: int) -> None:
    """Specials everywhere (so the fallback runs in most vectors), every pair of edge values,
    the vector loop and the tail: bit for bit the exact ops' results, and NumPy's."""
    fn = CASES[case]
    x, y = _operands(rng, n)
    with disabled():
        before = fuse(fn)(x, y)
    with speculated():
        f = fuse(fn)
        got = f(x, y)
        source = f.lower(x, y).module.source
    assert "fj_bad" in source
    with np.errstate(all="ignore"):
        want = fn(x, y)
    for g, b, w in zip(*(v if isinstance(v, (tuple, list)) else (v,)
                         for v in (got, before, want))):
        assert _same_bits(g, b) if g.dtype == F4 else np.array_equal(g, b, equal_nan=True)
        assert_matches(g, w, ulp=op_ulp(OP_OF_UFUNC[np.exp], F4) if case == "mixed" else 0,
                       what=case)


def test_catalog_float32_speculated(speculated: Any) -> None:
    """Every unary and binary ufunc of the op catalog on float32 edge values (zeros, ±inf,
    NaN, subnormals, range limits), batched into kernels that speculate: NumPy's results at the
    catalog's tolerances."""
    (x,) = in_layout("vector", edge_values(F4))
    a, b = in_layout("vector", np.repeat(edge_values(F4), edge_values(F4).size),
                     np.tile(edge_values(F4), edge_values(F4).size))
    cases = {u: (u, ("x",)) for u in UNARY if not isinstance(numpy_result(u, x), Exception)}
    cases |= {u: (u, ("a", "b")) for u in BINARY
              if not isinstance(numpy_result(u, a, b), Exception)}
    with speculated():
        results = run_batched({"x": x, "a": a, "b": b}, cases, "vector")
    for u, got in results.items():
        args = (x,) if u.nin == 1 else (a, b)
        assert_matches(got, numpy_result(u, *args), ulp=op_ulp(OP_OF_UFUNC[u], F4),
                       what=f"np.{u.__name__}(float32), speculated")


def test_only_what_depends_on_a_speculated_op_is_computed_again(speculated: Any) -> None:
    """The fallback recomputes the values that come from a fast op and shares the rest: the
    loads and exp(x) appear once, before the fallback; the division in both."""
    def fn(x, y):
        e = np.exp(x)
        return e / y + e

    x = np.linspace(-3, 3, 1 << 14, dtype=np.float32)
    with speculated():
        source = fuse(fn).lower(x, x).module.source
    body = source[source.index("for (int w"):]
    fast, fallback = body.split("if (fj_bad) {")
    assert "exp(" in fast and "fj_fdiv(" in fast and "p0)[w]" in fast, body
    assert "exp(" not in fallback and "p0)[w]" not in fallback, body
    assert " / " in fallback and "fj_" not in fallback, body


def test_kernels_that_write_their_inputs_do_not_speculate(speculated: Any, dev) -> None:
    """An in-place write: the fallback would read inputs the fast pass already overwrote."""
    def fn(x, y):
        x[...] = x / y
        return x

    x = np.linspace(1, 2, 4096, dtype=np.float32)
    y = np.full(4096, 3.0, np.float32)
    with speculated():
        f = fuse(fn)
        xd = dev(x)
        f(xd, dev(y))
        source = f.lower(xd, dev(y)).module.source
    assert "fj_bad" not in source
    assert _same_bits(xd.get(), x / y)


def test_other_dtypes_and_ops_keep_their_spelling(speculated: Any, has_fp64: bool) -> None:
    """float16 and float64 division, and float32 ops without a fast path, are not speculated."""
    with speculated():
        h = np.ones(4096, np.float16)
        assert "fj_bad" not in fuse(lambda a, b: a / b).lower(h, h).module.source
        f = np.ones(4096, np.float32)
        assert "fj_bad" not in fuse(lambda a: np.exp(a) * 2 - a).lower(f).module.source
        if has_fp64:
            d = np.ones(4096, np.float64)
            assert "fj_bad" not in fuse(lambda a, b: a / np.sqrt(b)).lower(d, d).module.source


def test_disabled_turns_speculation_off() -> None:
    x = np.ones(4096, np.float32)
    with disabled():
        assert "fj_bad" not in fuse(lambda a: 1.0 / a).lower(x).module.source


def test_probe_helpers_agree_with_the_exact_ops(queue, has_fp64: bool) -> None:
    """The probe's own check, on the emulated estimates here and the PTX ones on NVIDIA."""
    if has_fp64:
        assert mismatches(queue, "emulated") == 0
    if _native():
        assert mismatches(queue, "ptx") == 0


_STRESS = """
__kernel void stress(const uint seed, __global uint *bad_out) {
    const uint gid = get_global_id(0);
    uint st = gid * 2654435761u ^ seed, nbad = 0;
    for (int i = 0; i < 64; i++) {
        st = st * 1664525u + 1013904223u; const uint ra = st;
        st = st * 1664525u + 1013904223u; const uint rb = st;
        /* the divisor's significand from gid (all 2^23 over the grid), its sign and exponent
           random; the dividend random bits */
        const float b = as_float((gid & 0x7fffffu) | (rb & 0xff800000u));
        const float a = as_float(ra);
        int bad = 0;
        const float q = fj_fdiv(a, b, &bad);
        nbad += !bad && as_uint(q) != as_uint(a / b);
        bad = 0;
        const float r = fj_frcp(b, &bad);
        nbad += !bad && as_uint(r) != as_uint(1.0f / b);
        bad = 0;
        const float s = fj_fsqrt(fabs(a), &bad);
        nbad += !bad && as_uint(s) != as_uint(sqrt(fabs(a)));
    }
    if (nbad) atomic_add(bad_out, nbad);
}
"""


def test_ptx_fast_paths_on_every_divisor_significand(queue) -> None:
    """NVIDIA only: 2^23 divisor significands x 256 random dividends (random exponents), the
    reciprocals of the same divisors and the square roots of the dividends, each compared with
    the exact op wherever its flag is clear."""
    if not _native():
        pytest.skip("the device does not speculate float32 / and sqrt (NVIDIA only)")
    prg = cl.Program(queue.context, helpers("ptx") + _STRESS).build(
        options=["-cl-fp32-correctly-rounded-divide-sqrt"])
    kernel = cl.Kernel(prg, "stress")
    count = cla.zeros(queue, 1, np.uint32)
    for seed in range(4):
        kernel(queue, (1 << 23,), (256,), np.uint32(7919 * seed + 1), count.data)
    assert int(count.get()[0]) == 0
