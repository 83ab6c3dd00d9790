"""Issue 16's GPU figures, each next to the variants it was chosen against (one run, device
arrays, ms synchronized and throughput as fusejit.bench times them):

* float16 GELU at 2^26: float16 computed in float and rounded after every op (OpenCLTarget's
  spelling, "before") against packed float16 lanes with native f16x2 arithmetic
  (targets/opencl/half2.py), 8 and 16 lanes, a cheaper tanh candidate, and a bound with tanh
  left out; every result compared bit for bit with "before" and with NumPy's float16;
* tanh16: np.tanh over all 65536 float16 values, each spelling against this host's NumPy;
* Black-Scholes at 2^24: 4 lanes (the default) and 2; exp's NaN test as a select instead of a
  branch (the same results); for information approximate div/sqrt and native exp/log (which
  change results, so fusejit never does it); ``black_scholes_more``: 1 and 8 lanes, 1/x as
  ``rcp.rn.f32`` and every division and sqrt as explicit ``.rn`` PTX (the same results);
* a fused GELU on the same float16 values in torch and torch.compile, where importable;
* Adam at 2^26 with constants, with runtime hyperparameters, and with a new step each call.

    PYTHONPATH=. python benchmarks/speed_variants.py [--small] [--dump DIR] [gelu16] [tanh16]
        [black_scholes] [black_scholes_more] [adam]

``--dump DIR`` writes each variant's PTX (and SASS where ptxas is found) with opcode counts
(benchmarks/isa_dump.py). The variants are made by swapping fusejit's spellings for the
duration of a case (module attributes), so they measure exactly the kernels fusejit generated
before and after.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np
import pyopencl.array as cla

import fusejit
import fusejit.runtime.opencl.build as fbuild
import fusejit.runtime.opencl.backend as focl
import fusejit.codegen.source as fsource
import fusejit.targets.opencl.half2 as half2
from fusejit.bench.timing import measure, measure_batched
from fusejit.bench.workloads import black_scholes, gelu
from fusejit.ir.ops import Op
from fusejit.runtime.opencl import half2_probe


@contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextmanager
def lanes(n: int | None) -> Iterator[None]:
    if n is None:
        yield
        return
    with patched(fsource, "default_vector_width", lambda *a, **k: n):
        yield


@contextmanager
def no_correct_rounding() -> Iterator[None]:
    def options(info: Any) -> list[str]:
        return [o for o in fbuild.build_options(info)
                if o != "-cl-fp32-correctly-rounded-divide-sqrt"]
    with patched(focl, "build_options", options):
        yield


def timed(call: Callable[[], Any], queue: Any) -> str:
    """``queue``: an OpenCL queue, or torch.cuda (its synchronize waits)."""
    finish = queue.finish if hasattr(queue, "finish") else queue.synchronize

    def sync() -> None:
        call()
        finish()
    t, _ = measure(sync, budget_s=0.4, min_reps=10)
    b = measure_batched(call, lambda _: finish(), t.median_s, 0.8)
    return f"sync {t.median_s * 1e3:.4f} ms  throughput {b.median_s * 1e3:.4f} ms"


# -- float16: packed lanes (targets/opencl/half2.py) against the float spelling -----------------

# a float32 tanh for float16 arguments (an exhaustively checked candidate, see tanh16): an odd
# polynomial below 0.6 (IEEE float ops only), 1 - 2 / (2^(2|x|/ln 2) + 1) with the device's
# native exp2 and reciprocal above; the sign copied last (tanh(-0) = -0)
FAST_TANH = """
inline float fj_tanh_h(float x) {
    float a = fabs(x), s = a * a;
    float p = a + (a * s) * (-0x1.555554p-2f + s * (0x1.1110ecp-3f + s * (-0x1.b95e3ep-5f
              + s * (0x1.59f0bap-6f + s * -0x1.9b5d3ep-8f))));
    float r = 1.0f - 2.0f * native_recip(native_exp2(a * 0x1.715476p+1f) + 1.0f);
    return copysign(a < 0.6f ? p : r, x);
}
"""


@contextmanager
def tanh_as(kind: str | None) -> Iterator[None]:
    """The packed target's float16 tanh: None (the builtin behind a NaN test, which NVIDIA
    compiles to a branch), "select" (the builtin, then a select on NaN: the same results),
    "fast" (FAST_TANH) or "x" (tanh left out: a bound on what tanh costs, wrong results)."""
    if kind is None:
        yield
        return
    render = half2.PackedHalfTarget.render_op

    def render_op(self: Any, op: Any, out: Any, ins: Any, operands: Any) -> str:
        if op is Op.TANH and out == np.float16:
            if kind == "x":
                return operands[0]
            if kind == "select":
                return f"select(tanh({operands[0]}), {operands[0]}, isnan({operands[0]}))"
            self.helpers["fast_tanh"] = FAST_TANH
            return f"(isnan({operands[0]}) ? {operands[0]} : fj_tanh_h({operands[0]}))"
        return render(self, op, out, ins, operands)
    with patched(half2.PackedHalfTarget, "render_op", render_op):
        yield


GELU16 = (  # (name, packed?, lanes, tanh)
    ("before: float, rounded per op", False, None, None),
    ("packed f16x2", True, None, None),
    ("packed f16x2, 16 lanes", True, 16, None),
    ("packed f16x2, NaN test as select", True, None, "select"),
    ("packed f16x2, fast tanh", True, None, "fast"),
    ("bound: packed, tanh left out", True, None, "x"),
    ("bound: before, 16 lanes", False, 16, None),
)


def gelu16(queue: Any) -> None:
    n = 1 << (26 - SHRINK)
    host = np.random.default_rng(0).uniform(-4, 4, n).astype(np.float16)
    x = cla.to_device(queue, host)
    numpy = gelu(np, host).view(np.uint16)
    before = None
    for name, packed, vec, tanh in GELU16:
        try:
            with (nullcontext() if packed else half2.unpacked()), lanes(vec), tanh_as(tanh):
                f = fusejit.fuse(lambda x: gelu(np, x))
                got = f(x).get().view(np.uint16)
                before = got if before is None else before
                dump(f"gelu16 {name}", f.lower(x).source, queue)
                print(f"gelu float16 2^{26 - SHRINK}, {name:34s} {timed(lambda: f(x), queue)}; "
                      f"same bits as before: {np.array_equal(got, before)}; differs from NumPy "
                      f"float16 in {int((got != numpy).sum())} elements", flush=True)
        except Exception as exc:  # noqa: BLE001 - one failing variant must not stop the run
            print(f"gelu float16, {name}: FAILED {type(exc).__name__}: {str(exc)[-2000:]}")
    torch_gelu16(host, numpy)


def torch_gelu16(host: np.ndarray, numpy: np.ndarray) -> None:
    """The same GELU in torch and torch.compile on the same float16 values, where importable."""
    try:
        import torch

        if not torch.cuda.is_available():
            return
        x = torch.from_numpy(host.view(np.int16)).cuda().view(torch.float16)
        for name, fn in (("torch", lambda x: gelu(torch, x)),
                         ("torch.compile", torch.compile(lambda x: gelu(torch, x)))):
            got = fn(x).cpu().view(torch.int16).numpy().view(np.uint16)
            print(f"gelu float16 2^{26 - SHRINK}, {name:34s} "
                  f"{timed(lambda: fn(x), torch.cuda)}; differs from NumPy float16 in "
                  f"{int((got != numpy).sum())} elements", flush=True)
    except Exception as exc:  # noqa: BLE001
        print(f"gelu float16, torch: FAILED {type(exc).__name__}: {str(exc)[-500:]}")


def tanh16(queue: Any) -> None:
    """np.tanh over every float16 value, each spelling against this host's NumPy float16 loop
    and against float64 tanh rounded to float16 (NaN counts as equal to NaN)."""
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    with np.errstate(all="ignore"):
        numpy = np.tanh(h)
        exact = np.tanh(h.astype(np.float64)).astype(np.float16)

    def diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (a.view(np.uint16) != b.view(np.uint16)) & ~(np.isnan(a) & np.isnan(b))
    print(f"tanh float16, this host's NumPy {np.__version__} against float64 rounded: "
          f"{int(diff(numpy, exact).sum())} of 65536 differ", flush=True)
    for name, packed, tanh in (("before", False, None), ("packed", True, None),
                               ("packed, select", True, "select"),
                               ("packed, fast tanh", True, "fast")):
        try:
            with (nullcontext() if packed else half2.unpacked()), tanh_as(tanh):
                got = fusejit.fuse(np.tanh)(cla.to_device(queue, h)).get()
            d = diff(got, numpy)
            first = [(float(v), float(g), float(w))
                     for v, g, w in zip(h[d][:5], got[d][:5], numpy[d][:5])]
            print(f"tanh float16 exhaustive, {name:20s} differs from NumPy in {int(d.sum())}, "
                  f"from float64 rounded in {int(diff(got, exact).sum())}; first: {first}",
                  flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"tanh float16 exhaustive, {name}: FAILED {type(exc).__name__}: {exc}")


# -- Black-Scholes ---------------------------------------------------------------------------------

_RCP = """
inline float fj_rcp_rn(float x) { float r; asm("rcp.rn.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
inline float fj_sqrt_rn(float x) {
    float r; asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
}
inline float fj_div_rn(float x, float y) {
    float r; asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(y)); return r;
}
"""


def _rewrite(src: str, kind: str) -> str:
    """Source-level variants of one kernel: "rcp" (1/x as rcp.rn.f32: the same correctly rounded
    result), "asm" (also x/y as div.rn.f32 and sqrt as sqrt.rn.f32: the same results), "select"
    (exp's NaN test as a select after it, not a branch around it: the same results), "native"
    (exp and log as native_exp/native_log: a bound, different results)."""
    if kind in ("rcp", "asm"):
        src = re.sub(r"\(0x1p\+0f / (\w+)\)", r"fj_rcp_rn(\1)", src)
        if kind == "asm":
            src = re.sub(r"\((\w+(?:\.s\w)?) / (\w+(?:\.s\w)?)\)", r"fj_div_rn(\1, \2)", src)
            src = re.sub(r"\bsqrt\(", "fj_sqrt_rn(", src)
        head, _, rest = src.partition("\n")
        return head + "\n" + _RCP + rest
    if kind == "native":
        return re.sub(r"\b(exp|log)\(", r"native_\1(", src)
    if kind == "select":  # (isnan(v) ? v : exp(v)) -> select(exp(v), v, isnan(v)): no branch
        return re.sub(r"\(isnan\((\w+)\) \? \1 : (\w+)\(\1\)\)", r"select(\2(\1), \1, isnan(\1))",
                      src)
    return src


@contextmanager
def source_as(kind: str | None) -> Iterator[None]:
    if kind is None:
        yield
        return
    build = focl.build_cached
    with patched(focl, "build_cached",
                 lambda ctx, src, opts, name: build(ctx, _rewrite(src, kind), opts, name)):
        yield


BLACK_SCHOLES = (  # (name, lanes, correctly rounded, source variant)
    ("4 lanes (default)", None, True, None),
    ("2 lanes", 2, True, None),
    ("NaN tests as select", None, True, "select"),
    ("2 lanes, NaN tests as select", 2, True, "select"),
    ("bound: approximate div/sqrt", None, False, None),
    ("bound: native exp/log", None, True, "native"),
)
# measured once (H200: none faster than the default; ``black_scholes_more`` runs them)
BLACK_SCHOLES_MORE = (
    ("1 lane", 1, True, None), ("8 lanes", 8, True, None),
    ("1/x as rcp.rn.f32", None, True, "rcp"), ("div/sqrt/rcp as .rn PTX", None, True, "asm"),
)


def black_scholes_cases(queue: Any, variants: tuple = BLACK_SCHOLES) -> None:
    n = 1 << (24 - SHRINK)
    rng = np.random.default_rng(0)
    args = [cla.to_device(queue, rng.uniform(lo, hi, n).astype(np.float32))
            for lo, hi in ((5, 30), (1, 100), (0.25, 10))]
    base = None
    for name, vec, exact, kind in variants:
        try:
            with lanes(vec), (no_correct_rounding() if not exact else lanes(None)), \
                    source_as(kind):
                f = fusejit.fuse(lambda s, k, t: black_scholes(np, s, k, t))
                got = [g.get() for g in f(*args)]
                base = got if base is None else base
                same = all(np.array_equal(a, b) for a, b in zip(got, base))
                dump(f"black_scholes {name}", _rewrite(f.lower(*args).source, kind or ""),
                     queue, exact)
                print(f"black_scholes 2^{24 - SHRINK}, {name:30s} "
                      f"{timed(lambda: f(*args), queue)}; same results as the default: {same}",
                      flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"black_scholes, {name}: FAILED {type(exc).__name__}: {str(exc)[-2000:]}")


DUMP_DIR: str | None = None  # --dump DIR: PTX (and SASS) of every variant (benchmarks/isa_dump.py)


def dump(name: str, source: str, queue: Any, exact: bool = True) -> None:
    if DUMP_DIR is None:
        return
    from isa_dump import dump as isa

    options = fbuild.build_options(focl.device_info(queue.device))
    if not exact:
        options = [o for o in options if o != "-cl-fp32-correctly-rounded-divide-sqrt"]
    print(isa(re.sub(r"\W+", "_", name), source, options, queue, DUMP_DIR), flush=True)


def adam(queue: Any) -> None:
    lr, b1, b2, eps, step = 1e-3, 0.9, 0.999, 1e-8, 10

    def runtime(p: Any, g: Any, m: Any, v: Any, lr: float, b1: float, b2: float, eps: float,
                t: int) -> tuple[Any, Any, Any]:
        m = b1 * m + (1.0 - b1) * g
        v = b2 * v + (1.0 - b2) * (g * g)
        return p - lr * (m / (1.0 - b1 ** t)) / (np.sqrt(v / (1.0 - b2 ** t)) + eps), m, v

    rng = np.random.default_rng(0)
    arrays = [cla.to_device(queue, rng.uniform(0.1, 1.0, 1 << (26 - SHRINK)).astype(np.float32))
              for _ in range(4)]
    fc = fusejit.fuse(lambda p, g, m, v: runtime(p, g, m, v, lr, b1, b2, eps, step))
    fr = fusejit.fuse(runtime)
    steps = iter(range(step, 10**9))
    for name, call in (("constants", lambda: fc(*arrays)),
                       ("runtime scalars", lambda: fr(*arrays, lr, b1, b2, eps, step)),
                       ("a new step each call", lambda: fr(*arrays, lr, b1, b2, eps,
                                                           next(steps)))):
        print(f"adam 2^{26 - SHRINK}, {name:22s} {timed(call, queue)}", flush=True)


SHRINK = 0  # --small: sizes / 2^10, a smoke test


def main(argv: list[str]) -> None:
    global SHRINK
    global DUMP_DIR
    if "--small" in argv:
        SHRINK, argv = 10, [a for a in argv if a != "--small"]
    if "--dump" in argv:
        i = argv.index("--dump")
        DUMP_DIR, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    queue = fusejit.default_queue()
    print(f"device: {queue.device.name.strip()}")
    print(f"packed float16 (runtime/opencl/half2_probe.py): "
          f"{half2_probe.unavailable(queue) or 'available'}")
    cases = {"gelu16": gelu16, "tanh16": tanh16, "black_scholes": black_scholes_cases,
             "black_scholes_more": lambda q: black_scholes_cases(q, BLACK_SCHOLES_MORE),
             "adam": adam}
    for name in argv or list(cases):
        cases[name](queue)


if __name__ == "__main__":
    main(sys.argv[1:])
