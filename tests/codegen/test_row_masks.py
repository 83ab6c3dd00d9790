"""GPU row kernels for runtime row lengths (fusejit/ir/rows.py) mask the slots past a row's end
instead of leaving their unrolled loops: each slot loads a clamped, in-bounds element, and a
masked slot adds the reduction's identity, never wins an argmax and stores nothing. Lowered
with an H200's limits (the ``gpu_style`` fixture) on the test device; NumPy is the oracle."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import fusejit
from fusejit.bench import workloads
from fusejit.bench.backends import _bind

RNG = np.random.default_rng(13)
ROWS = 7


def _stage2(x: Any, h: Any, d: Any, i: Any, b: Any) -> tuple:
    """Reductions that read a row twice (the second pass from the registers), over float32,
    float16, float64, int32 and bool rows: each kind of identity and an arg-reduction."""
    y = x - x.max(axis=-1, keepdims=True)
    g = h - h.min(axis=-1, keepdims=True)
    z = d - d.mean(axis=-1, keepdims=True)
    j = i - i.max(axis=-1, keepdims=True)
    c = b ^ b.any(axis=-1, keepdims=True)
    return (x.max(axis=-1), h.min(axis=-1), y.sum(axis=-1), np.argmax(y, axis=-1),
            np.exp(y) / np.exp(y).sum(axis=-1, keepdims=True), g.sum(axis=-1),
            np.argmin(g, axis=-1), np.prod(z, axis=-1), j.min(axis=-1), np.argmin(j, axis=-1),
            c.all(axis=-1), np.argmax(c, axis=-1))


def _inputs(n: int) -> tuple[np.ndarray, ...]:
    x = RNG.standard_normal((ROWS, n)).astype(np.float32)
    x[1] = 0.5  # ties: the first index wins
    x[2, -1] = np.nan  # the element the masked slots load
    x[3, n // 2] = np.nan
    x[4, -1] = 9.0  # the maximum at the last element
    h = RNG.standard_normal((ROWS, n)).astype(np.float16)
    h[5, -1] = np.nan
    d = RNG.standard_normal((ROWS, n)) * 0.5 + 1.0
    d[6, 0] = np.nan
    i = RNG.integers(-50, 50, (ROWS, n)).astype(np.int32)
    i[0, -1] = -99  # the minimum at the last element
    b = RNG.random((ROWS, n)) < 0.5
    b[0] = True
    b[1] = False
    b[2, :-1] = False
    return x, h, d, i, b


def _check(got: tuple, want: tuple, n: int, rtol: float = 2e-5) -> None:
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (n, k, g.dtype, w.dtype)
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"n={n} output {k}")
        else:
            tol = 2e-3 if w.dtype == np.float16 else rtol
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"n={n} output {k}")


def test_masked_rows_match_numpy(gpu_style: None):
    """Every length of two buckets' worth (2 to 15; primes, a bucket's first and last-but-one
    of 128), one program each; rows that leave whole lanes masked; NaNs at the element the
    masked slots read and elsewhere."""
    f = fusejit.fuse(_stage2, dynamic=True)
    for n in (97, *range(2, 16), 127, 65, 101, 113):  # buckets 128 (4 slots a lane), 16
        args = _inputs(n)
        with np.errstate(all="ignore"):
            _check(f(*args), _stage2(*args), n)
    info = f.cache_info()
    assert info.compiles + info.disk_hits == 2


UNROLLED = re.compile(r"#pragma unroll\s*for \(int k = 0; k < \d+; k\+\+\) \{")


def _unrolled_bodies(source: str) -> list[str]:
    """The bodies of the loops over a row kept in registers."""
    bodies = []
    for m in UNROLLED.finditer(source):
        depth, at = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(source[at], 0)
            at += 1
        bodies.append(source[m.end():at - 1])
    return bodies


@pytest.mark.parametrize("n", [1000, 300])
def test_no_branch_out_of_unrolled_row_loops(gpu_style: None, n: int):
    """softmax and layernorm at a length that is not its bucket's: the unrolled loops have no
    break, and every load of the row there is unconditional (only stores are guarded)."""
    softmax = _bind(workloads.softmax, np, "softmax")
    layernorm = _bind(workloads.layernorm, np, "layernorm")
    x = np.zeros((64, n), np.float32)
    w = np.zeros(n, np.float32)
    for src in (fusejit.fuse(softmax, dynamic=True).lower(x).source,
                fusejit.fuse(layernorm, dynamic=True).lower(x, w, w).source):
        bodies = _unrolled_bodies(src)
        assert "n_r" in src and len(bodies) == 3
        for body in bodies:
            assert "break" not in body and "continue" not in body and "return" not in body
            for guarded in re.findall(r"if \(([^)]*)\) \{([^}]*)\}", body):
                assert guarded[0] == "fj_in" and "=" in guarded[1] and "[" in guarded[1]
                assert re.fullmatch(r"\s*out\d+\[[^\]]*\] = \w+;\s*", guarded[1]), guarded


def test_masked_slots_never_give_an_index(gpu_style: None):
    """argmax/argmin take an index only from a slot inside the row, and every other reduction
    combines a masked slot as its identity."""
    src = fusejit.fuse(_stage2, dynamic=True).lower(*_inputs(97)).source
    bodies = _unrolled_bodies(src)
    picks = [line for body in bodies for line in body.splitlines() if "= r; }" in line]
    assert len(picks) == 4 and all(line.strip().startswith("if (fj_in && (") for line in picks)
    combines = [line for body in bodies for line in body.splitlines()
                if "fj_in ?" in line and "r_" not in line]
    assert len(combines) == 5 + 6  # (stage 0: the maxima, minima, mean and any)



@pytest.mark.parametrize("device", ["vulkan"], indirect=True)
def test_vulkan_rows_masked(device: str):
    """The GLSL target unrolls the loops in the text: the masked copies hold no break either,
    and the results are NumPy's (float32, int32, bool)."""
    def fn(x, i, b):
        y = x - x.max(axis=-1, keepdims=True)
        c = b ^ b.any(axis=-1, keepdims=True)
        return (x.max(axis=-1), y.sum(axis=-1), np.exp(y) / np.exp(y).sum(axis=-1, keepdims=True),
                (i - i.min(axis=-1, keepdims=True)).max(axis=-1), c.all(axis=-1))
    f = fusejit.fuse(fn, dynamic=True)
    for n in (1000, 13):
        x, _, _, i, b = _inputs(n)
        with np.errstate(all="ignore"):
            _check(f(x, i, b), fn(x, i, b), n, rtol=1e-4)  # (Vulkan's exp: 256 ulp)
    source = f.lower(x, i, b).source
    assert "fj_in" in source and "break" not in source
