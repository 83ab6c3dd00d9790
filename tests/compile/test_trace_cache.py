"""The disk cache of lowered signatures (fusejit/compile/trace_cache.py): a later process's first call
runs without tracing, and only functions whose trace the key can name are served from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import fusejit
from fusejit.compile import trace_cache
from fusejit.runtime.opencl import build
from fusejit.runtime import cache, files

X = np.linspace(-3, 3, 1000, dtype=np.float32)
SCALE = 3.0  # a guarded global: its value is part of the trace


def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def _helper(x):
    return x * 2


def uses_helper(x):
    return _helper(x) + 1


def uses_global(x):
    return x * SCALE


def with_default(x, k=2.0):
    return x * k


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FUSEJIT_TRACE_CACHE", "1")
    monkeypatch.setattr(files, "_warned", set())
    return tmp_path


def _first_call(fn, *args):
    """A first call of a new fused function, as in a new process (no program memo)."""
    with build._memo_lock:
        build._memo.clear()
    f = fusejit.fuse(fn)
    return f(*args), f


def test_second_fused_function_of_the_same_code_skips_the_trace(root):
    out1, f1 = _first_call(gelu, X)
    assert f1.cache_info().traces == 1
    out2, f2 = _first_call(gelu, X)
    info = f2.cache_info()
    assert (info.traces, info.compiles, info.disk_hits) == (0, 0, 1)
    np.testing.assert_array_equal(out2, out1)
    np.testing.assert_allclose(out2, gelu(X.astype(np.float64)), rtol=2e-6, atol=1e-6)
    # another shape is another signature: traced
    _, f3 = _first_call(gelu, X[:10])
    assert f3.cache_info().traces == 1
    # lower() of a signature served from the trace cache traces it on demand
    lowered = f2.lower(X)
    assert "tanh" in lowered.source and f2.cache_info().traces == 1


@pytest.mark.parametrize("fn", [uses_helper, uses_global, lambda x: x * SCALE,
                                lambda x, s=[1.0]: x * s[0]], ids=[
    "helper-function", "guarded-global", "guarded-global-lambda", "mutable-default"])
def test_functions_reading_state_are_traced_every_process(root, fn):
    _first_call(fn, X)
    out, f = _first_call(fn, X)
    assert f.cache_info().traces == 1
    np.testing.assert_allclose(out, fn(X), rtol=1e-6)


def test_function_key_names_what_the_trace_reads():
    key = trace_cache.function_key
    assert key(gelu) == key(gelu) is not None
    assert key(lambda x: x * 2) != key(lambda x: x * 3)  # a constant
    assert key(lambda x: x * 2.0) != key(lambda x: x * 2)  # its type
    assert key(uses_helper) is None and key(uses_global) is None  # not keyable by name

    def make(k):
        return lambda x: x * k
    assert key(make(2.0)) is None  # a closure over a value (guarded, not named)
    assert key(with_default) != key(lambda x, k=3.0: x * k)
    import numpy.linalg as other

    def a(x):
        return np.abs(x)
    b = type(a)(a.__code__, {"np": other}, "a")  # the same code with np bound elsewhere
    assert key(a) is not None and key(b) is not None and key(a) != key(b)


def test_reads_of_the_outside_world_are_not_keyed():
    import os
    import random
    key = trace_cache.function_key
    g = {"np": np, "os": os, "random": random}
    for src in ("lambda x: x * float(os.environ.get('S', '1'))", "lambda x: x * random.random()",
                "lambda x: x * np.load('w.npy')", "lambda x: x * hash('a')",
                "lambda x: print(x) or x", "lambda x: np.save('t.npy', x) or x"):
        assert key(eval(src, g)) is None, src  # noqa: S307 - our own test strings
    assert key(eval("lambda x: np.maximum(x, 0).sum(axis=-1)", g)) is not None  # noqa: S307


def test_defaults_are_in_the_key(root):
    def scaled(x, k=2.0):
        return x * k
    _first_call(scaled, X)
    scaled.__defaults__ = (5.0,)
    out, f = _first_call(scaled, X)
    assert f.cache_info().traces == 1
    np.testing.assert_array_equal(out, X * np.float32(5.0))


def test_bad_trace_entry_is_a_miss_one_warning_and_rewritten(root):
    _first_call(gelu, X)
    trace_entry = cache.program_cache().path(_trace_key(gelu, X))
    data = bytearray(trace_entry.read_bytes())
    data[-5] ^= 0xFF
    trace_entry.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, f = _first_call(gelu, X)
    assert f.cache_info().traces == 1
    assert len([w for w in caught if issubclass(w.category, cache.CacheWarning)]) == 1
    np.testing.assert_allclose(out, gelu(X.astype(np.float64)), rtol=2e-6, atol=1e-6)
    _, f = _first_call(gelu, X)  # rewritten by the trace that followed
    assert f.cache_info().traces == 0


def _trace_key(fn, *args) -> cache.ProgramKey:
    f = fusejit.fuse(fn)
    _, _, key, queue = f._flatten(args, {})
    return trace_cache.entry_key(f, key, queue)


def _program_key(fn, *args) -> cache.ProgramKey:
    from fusejit.runtime.opencl.build import build_options, program_key
    from fusejit.runtime.opencl.devices import device_info

    queue = fusejit.default_queue()
    source = fusejit.fuse(fn).lower(*args).source
    return program_key(queue.device, source, build_options(device_info(queue.device)))


def test_program_binary_is_stored_once(root, monkeypatch):
    """A trace entry names its program instead of carrying a copy of its binary: many
    signatures of one program store it once (2,000 shapes wrote 105 MB of copies)."""
    _first_call(gelu, X)
    program = cache.program_cache().get(_program_key(gelu, X))
    trace = cache.program_cache().get(_trace_key(gelu, X))
    assert program is not None and trace is not None
    assert program.binary[:64] not in trace.binary
    assert len(trace.binary) < len(program.binary) // 4
    reads = []
    real_get = cache.ProgramCache.get
    monkeypatch.setattr(cache.ProgramCache, "get",
                        lambda self, key: reads.append(key) or real_get(self, key))
    out, f = _first_call(gelu, X)
    info = f.cache_info()
    assert (info.traces, info.compiles, info.disk_hits) == (0, 0, 1)
    assert reads == [_trace_key(gelu, X), _program_key(gelu, X)]
    np.testing.assert_allclose(out, gelu(X.astype(np.float64)), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("binary", ["garbage", "other_program"])
def test_refused_program_binary_is_a_miss_one_warning_and_rewritten(root, queue, binary):
    import pyopencl as cl

    _first_call(gelu, X)
    if binary == "garbage":
        data = b"poclbin\0" + os.urandom(2000)
    else:  # a valid binary without the kernel
        data = cl.Program(queue.context, "__kernel void other(__global float *x) { x[0] = 1; }"
                          ).build().get_info(cl.program_info.BINARIES)[0]
    key = _program_key(gelu, X)
    store = cache.program_cache()
    store.put(key, cache.Entry(bytes(data), store.get(key).kernels))  # (checksum and all)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, f = _first_call(gelu, X)
    ours = [str(w.message) for w in caught if issubclass(w.category, cache.CacheWarning)]
    assert len(ours) == 1 and ("rejected" in ours[0] or "lacks" in ours[0]), ours
    assert (f.cache_info().traces, f.cache_info().compiles) == (0, 1)
    np.testing.assert_allclose(out, gelu(X.astype(np.float64)), rtol=2e-6, atol=1e-6)
    _, f = _first_call(gelu, X)  # rewritten by the trace that followed
    assert (f.cache_info().traces, f.cache_info().compiles) == (0, 0)


def test_entry_with_a_bad_manifest_is_rejected(root):
    _first_call(gelu, X)
    f = fusejit.fuse(gelu)
    _, _, key, queue = f._flatten((X,), {})
    disk_key = trace_cache.entry_key(f, key, queue)
    store = cache.program_cache()
    meta = json.dumps({"blobs": [3]}).encode()  # a blob beyond the payload
    store.put(disk_key, cache.Entry(trace_cache._LEN.pack(len(meta)) + meta, ()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, f2 = _first_call(gelu, X)
    assert f2.cache_info().traces == 1 and any("trace entry" in str(w.message) for w in caught)
    np.testing.assert_allclose(out, gelu(X.astype(np.float64)), rtol=2e-6, atol=1e-6)


def test_trace_cache_off(root, monkeypatch):
    monkeypatch.setenv("FUSEJIT_TRACE_CACHE", "0")
    _first_call(gelu, X)
    _, f = _first_call(gelu, X)
    assert f.cache_info().traces == 1


CHILD = """
import json, sys, time
import numpy as np, fusejit
x = np.linspace(-3, 3, 4096, dtype=np.float32).reshape(64, 64)
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
f = fusejit.fuse(softmax)
y = f(x)
want = softmax(x.astype(np.float64))
i = f.cache_info()
print(json.dumps({"traces": i.traces, "compiles": i.compiles, "disk_hits": i.disk_hits,
                  "ok": bool(np.allclose(y, want, rtol=1e-5, atol=1e-7))}))
"""


def test_a_new_process_runs_without_tracing_or_compiling(tmp_path):
    env = dict(os.environ, FUSEJIT_CACHE_DIR=str(tmp_path), FUSEJIT_TRACE_CACHE="1",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                           os.environ.get("PYTHONPATH", "")]))
    env.pop("POCL_CACHE_DIR", None)
    runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD], env=env, check=True,
                                      capture_output=True, text=True, timeout=300).stdout)
            for _ in range(2)]
    assert runs[0] == {"traces": 1, "compiles": 1, "disk_hits": 0, "ok": True}
    assert runs[1] == {"traces": 0, "compiles": 0, "disk_hits": 1, "ok": True}


# The suite runs with the trace cache off (conftest), so that trace counts mean what they say;
# these run the default path, cache on, on every backend: a second fused function of the same
# code must give the first one's results (served from the disk on OpenCL, traced on Vulkan,
# whose programs this cache does not hold)
def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _two_outputs(x, y):
    return np.sqrt(np.abs(x)) + y, (x * y).mean(axis=0)


def _scalar_and_where(x, s):
    return np.where(x > 0, x * s, -x)


def _in_place(x, y):
    x += y * 2
    return x


_ROUND_TRIPS = [(_softmax, (X.reshape(10, 100),)),
                (_two_outputs, (X.reshape(20, 50), X[::-1].reshape(20, 50).copy())),
                (_scalar_and_where, (X, 1.5)), (gelu, (X,))]


@pytest.mark.parametrize("device", ["opencl", "vulkan"], indirect=True)
@pytest.mark.parametrize("fn, args", _ROUND_TRIPS, ids=[f.__name__ for f, _ in _ROUND_TRIPS])
def test_default_path_round_trips_on_every_backend(root, device, fn, args):
    out1, f1 = _first_call(fn, *args)
    out2, f2 = _first_call(fn, *args)
    def parts(value):
        return value if isinstance(value, tuple) else (value,)

    expect = parts(fn(*args))
    for got in (out1, out2):
        assert len(parts(got)) == len(expect)
        for g, e in zip(parts(got), expect):
            np.testing.assert_allclose(np.asarray(g), e, rtol=2e-6, atol=2e-6)
    assert f2.cache_info().disk_hits == (1 if device == "opencl" else 0)


def test_in_place_writes_through_the_trace_cache(root):
    x1, x2, y = X.copy(), X.copy(), X[::-1].copy()
    _, f1 = _first_call(_in_place, x1, y)
    _, f2 = _first_call(_in_place, x2, y)
    np.testing.assert_array_equal(x2, x1)
    np.testing.assert_allclose(x1, X + y * 2, rtol=1e-6)
    assert f2.cache_info().traces in (0, 1)  # (an argument write may keep it out of the cache)
