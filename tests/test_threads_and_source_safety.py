"""Many threads calling one fused function; user-supplied strings never reach kernel source."""

from __future__ import annotations

import contextlib
import re
import threading

import numpy as np
import pyopencl.array as cla
import pytest

from fusejit import fuse
from fusejit.targets.opencl import fastdiv as fastdiv
from fusejit.testing import assert_matches


def test_100_threads_two_dtypes_two_traces(queue):
    @fuse
    def f(x, y):
        return np.exp(-x * x) * y + x.sum()

    rng = np.random.default_rng(7)
    inputs = {dt: (rng.standard_normal(513).astype(dt), rng.standard_normal(513).astype(dt))
              for dt in (np.float32, np.float64)}
    expected = {dt: np.exp(-x * x) * y + x.sum() for dt, (x, y) in inputs.items()}
    start = threading.Barrier(100)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        dt = (np.float32, np.float64)[i % 2]
        x, y = inputs[dt]
        try:
            start.wait()  # all threads call at once, most before anything is compiled
            for _ in range(3):  # the first calls compile, later ones take the cached fast path
                assert_matches(f(cla.to_device(queue, x), y), expected[dt], ulp=8, atol=1e-5)
        except BaseException as exc:  # noqa: BLE001  (re-raised below, in the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert f.trace_count == 2  # one per dtype, however many threads raced to compile it
    assert f.cache_info().currsize == 2


ODD = 'x"); } __kernel void evil(__global int *p) { p[0] = 1; } /* \\n#define'


def _traced_by(name: str, keys: tuple[str, str], mode: str, x: np.ndarray, y: np.ndarray) -> str:
    def f(*args, mode, **kwargs):
        a, b = (kwargs[k] for k in sorted(kwargs))
        scale = 2.0 if mode else 3.0  # any non-empty string: the same branch
        return {keys[0]: a * scale + b, keys[1]: np.sqrt(np.abs(a - b))}

    f.__name__ = f.__qualname__ = name
    f.__module__ = name
    fused = fuse(f, static_argnames="mode")
    return fused.lower(mode=mode, **{keys[0]: x, keys[1]: y}).source


@pytest.mark.parametrize("spelling", ["plain", "speculated"])
def test_user_strings_never_reach_kernel_source(spelling: str, has_fp64: bool):
    if spelling == "speculated" and not has_fp64:
        pytest.skip("the emulated fast-division helpers compute in float64, which this device "
                    "lacks")
    x = np.linspace(0, 1, 33, dtype=np.float32)
    y = np.ones(33, np.float32)
    with fastdiv.emulated() if spelling == "speculated" else contextlib.nullcontext():
        plain = _traced_by("f", ("a", "b"), "relu", x, y)
        # the same function with hostile names everywhere a user picks one: the function name,
        # keyword names (through **kwargs, in the same sorted order), dict output keys and a
        # static string argument
        odd = _traced_by(ODD, ("a; } //", "b */ evil("), ODD, x, y)
    assert odd == plain  # byte-identical: no user string influences the source
    for s in (ODD, "a; }", "evil", "*/", "relu"):
        assert s not in odd
    code = re.sub(r'"[^"]*"', " ", odd)  # (inline PTX: instruction strings)
    code = re.sub(r"\b0x[0-9a-fA-F.]+p[+-]?\d+f?|\b0x[0-9a-fA-F]+[uUlL]*\b|\b\d+[uUlLf]*\b",
                  " ", code)  # literals
    identifiers = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
    generated = {i for i in identifiers if re.fullmatch(
        r"fj_\w+|FJ_\w+|v\d+|c_v\d+|p\d+|out\d+|t\d+|part\d+|off\d+|s\d+_\w+|"
        r"(red|idx)\d+(_\d+)?|lx_|ly_|o_|o|r|k|w|l|gid|gsz|gy_|active", i)}
    # everything else is OpenCL C itself: keywords, types, builtins, pragmas
    assert identifiers - generated <= OPENCL_WORDS, identifiers - generated - OPENCL_WORDS


OPENCL_WORDS = {
    "pragma", "OPENCL", "FP_CONTRACT", "OFF", "EXTENSION", "cl_khr_fp64", "enable", "inline",
    "__kernel", "__global", "__local", "__attribute__", "reqd_work_group_size", "const",
    "restrict", "void", "if", "else", "for", "return", "break", "uchar", "char", "ushort",
    "short", "uint", "int", "ulong", "long", "half", "float", "double", "get_global_id",
    "get_global_size", "get_local_id", "get_group_id", "barrier", "CLK_LOCAL_MEM_FENCE",
    "sqrt", "fabs", "isnan", "vload_half", "vstore_half_rte", "min", "max", "select",
    "INFINITY", "NAN", "float4", "float8", "int4", "int8", "uchar4", "uchar8",
    "convert_float", "convert_int", "as_float", "as_int", "as_uint",
    "define", "asm", "fma", "copysign",  # (the speculated division's helpers)
}
