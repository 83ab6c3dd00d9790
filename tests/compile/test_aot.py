"""AOT: abstract signatures, export to a bundle, load and run in a fresh process with no trace
and no build; a bundle for another driver rebuilds from its source; a damaged bundle is a
named error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import fusejit
from fusejit import ShapeDtype

ROOT = Path(__file__).resolve().parents[2]
# children import this checkout first, then whatever the parent could import
CHILD_PATH = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def scaled(x, k, n):
    return {"y": x * k + n, "s": (x * k).sum(axis=0)}


SIGS = [(ShapeDtype((96, 64), np.float32),), (ShapeDtype((50, 64), np.float32, device=False),)]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("aot") / "softmax.fjb"
    fusejit.export(fusejit.fuse(softmax), SIGS, path)
    return path


_CHILD = textwrap.dedent("""
    import sys
    import numpy as np, pyopencl.array as cla
    import fusejit, fusejit.compile.aot, fusejit.frontend.trace, fusejit.runtime.opencl.build as build
    def forbidden(*a, **k):
        raise SystemExit("a trace or a source build happened")
    fusejit.frontend.trace.Tracer.__enter__ = forbidden
    build._build_uncached = forbidden
    if sys.argv[2] == "other-driver":  # no stored binary fits: the source is built
        real = build.program_key
        build.program_key = lambda d, s, o: real(d, s, o).__class__(
            **{**real(d, s, o).__dict__, "driver": "another driver"})
        fusejit.compile.aot.program_key = build.program_key
        build._build_uncached = build.__dict__["_build"]
    g = fusejit.load(sys.argv[1])
    x = np.random.default_rng(1).standard_normal((96, 64)).astype(np.float32)
    e = np.exp(x - x.max(-1, keepdims=True)); want = e / e.sum(-1, keepdims=True)
    q = fusejit.default_queue()
    np.testing.assert_allclose(g(cla.to_device(q, x)).get(), want, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(g(x[:50].copy()), want[:50], rtol=2e-6, atol=1e-7)
    print(g.traces, g.builds, g.binary_loads)
""")


def _child(path: Path, mode: str) -> str:
    env = dict(os.environ, PYTHONPATH=CHILD_PATH)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), mode], env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.split()


def test_load_in_a_fresh_process_no_trace_no_build(bundle):
    assert _child(bundle, "same") == ["0", "0", "2"]


def test_other_driver_rebuilds_from_the_stored_source(bundle, tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))  # a cold disk cache
    traces, builds, loads = _child(bundle, "other-driver")
    assert (traces, builds) == ("0", "2")


def test_bundle_holds_no_pickle_and_the_graph(bundle):
    data = bundle.read_bytes()
    assert data.startswith(b"FJBUNDL1") and b"__kernel void" in data and b"pickle" not in data
    assert b"exp(" in data and b"max" in data  # the graph, as text


def test_unmatched_call_and_damaged_bundle(bundle, tmp_path):
    g = fusejit.load(bundle)
    with pytest.raises(fusejit.BundleError, match=r"host float32\(49, 64\)"):
        g(np.ones((49, 64), np.float32))
    bad = tmp_path / "bad.fjb"
    data = bytearray(bundle.read_bytes())
    data[-1] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(fusejit.BundleError, match="checksum"):
        fusejit.load(bad)
    with pytest.raises(fusejit.BundleError, match="no bundle"):
        fusejit.load(tmp_path / "missing.fjb")


def test_pytree_outputs_scalars_and_statics(tmp_path):
    f = fusejit.fuse(scaled, static_argnums=2)
    path = fusejit.export(f, [(ShapeDtype((8, 4), np.float32, device=False), 2.0, 3)],
                          tmp_path / "s.fjb")
    g = fusejit.load(path)
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    out = g(x, 2.5, 3)
    np.testing.assert_allclose(out["y"], x * 2.5 + 3)
    np.testing.assert_allclose(out["s"], (x * 2.5).sum(axis=0), rtol=1e-6)
    with pytest.raises(fusejit.BundleError):
        g(x, 2.5, 4)  # another static value was not exported


def test_lower_abstract_then_compile_serves_calls(tmp_path):
    f = fusejit.fuse(softmax)
    lowered = f.lower(ShapeDtype((None, 64), np.float32, device=False))
    assert "n_o" in lowered.source  # the batch extent is a launch argument
    compiled = lowered.compile()
    x = np.random.default_rng(2).standard_normal((1024, 64)).astype(np.float32)
    for n in (1016, 1000, 1024):  # 1024: the extent None was lowered at, a cache hit
        np.testing.assert_allclose(compiled(x[:n]), softmax(x[:n].astype(np.float64)),
                                   rtol=2e-6, atol=1e-7)
    info = f.cache_info()
    assert info.traces == 3 and info.hits == 1
    # the later extents reused the program (0 when an earlier test built the same source in
    # this process: the program memo serves it)
    assert info.compiles + info.disk_hits <= 1
    # a None dimension exports as one signature for every extent (tests/compile/test_aot_dynamic.py)
    g = fusejit.load(fusejit.export(f, [(ShapeDtype((None, 64), np.float32, device=False),)],
                                    tmp_path / "x.fjb"))
    for n in (1016, 3, 1024):  # NumPy arguments: host mode
        np.testing.assert_allclose(g(x[:n]), softmax(x[:n].astype(np.float64)), rtol=2e-6,
                                   atol=1e-7)


def _add_into(a, v):
    a += v
    return a.sum()


def test_device_signature_takes_numpy_arguments_too(tmp_path, queue):
    """A bundle exported for device arrays runs NumPy arguments of the same shapes and dtypes,
    as the fused function does: NumPy results, in-place writes back in the NumPy argument; a
    shape it was not exported for is still refused, named as the caller passed it."""
    import pyopencl.array as cla

    f = fusejit.fuse(lambda x, y: (x * 2 + y, x.sum()))
    x, y = np.arange(6, dtype=np.float32), np.ones(6, np.float32)
    g = fusejit.load(fusejit.export(f, [(cla.to_device(queue, x), cla.to_device(queue, y))],
                                    tmp_path / "d.fjb"))
    dev = g(cla.to_device(queue, x), cla.to_device(queue, y))
    host = g(x, y)
    assert isinstance(dev[0], cla.Array) and isinstance(host[0], np.ndarray)
    np.testing.assert_array_equal(host[0], x * 2 + y)
    assert host[1] == dev[1].get() == x.sum()
    with pytest.raises(fusejit.BundleError, match=r"host float32\(3,\)"):
        g(np.ones(3, np.float32), np.ones(3, np.float32))
    w = fusejit.load(fusejit.export(fusejit.fuse(_add_into), [(cla.to_device(queue, x), y)],
                                    tmp_path / "w.fjb"))
    target = x.copy()
    assert w(target, y) == (x + y).sum()
    np.testing.assert_array_equal(target, x + y)


@pytest.mark.parametrize("trusted", [False, True])
def test_checked_gathers_load_and_raise(tmp_path, trusted) -> None:
    """A checked gather's status buffer (role "status", one flag every work-item may set) is
    part of a consistent bundle: it loads, runs, and an index out of bounds is still
    NumPy's IndexError."""
    from fusejit.errors import DeviceIndexError

    x, i = np.arange(10, dtype=np.float32), np.array([1, 3, -2])
    key = b"k" if trusted else None
    loaded = fusejit.load(fusejit.export(fusejit.fuse(lambda x, i: x[i] * 2), [(x, i)],
                                         tmp_path / "g.fjb", key=key), key=key)
    np.testing.assert_array_equal(loaded(x, i), x[i] * 2)
    with pytest.raises(DeviceIndexError, match="index out of bounds"):
        loaded(x, np.array([1, 30, 0]))
