"""AOT bundles with a dynamic (None) dimension: exported once, loaded in a fresh process and
run at several extents with 0 traces and 0 builds; extents and dtypes the kernels do not fit
are named errors; signatures whose kernels are specialised on the extent are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fusejit
from fusejit import ShapeDtype
from fusejit.compile.aot import BundleError
from fusejit.compile.aot_dynamic import instantiate, instantiate_args, template, upgrade



def model(x, k):
    """Softmax over rows, an elementwise chain with a runtime scalar and a row reduction:
    several outputs."""
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"soft": e / e.sum(axis=1, keepdims=True), "chain": np.tanh(x * k + 1.0) * x,
            "rowmax": x.max(axis=1)}


def pair(x, y):
    """Two arguments with the same dynamic batch: an elementwise and a row reduction."""
    return x * y + 1.0, (x - y).max(axis=1)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> tuple[Path, Path]:
    path = tmp_path_factory.mktemp("aotdyn") / "model.fjb"
    fusejit.export(fusejit.fuse(model), [(ShapeDtype((None, 256), np.float32), 2.0),
                                           (ShapeDtype((1, 256), np.float32), 2.0)], path)
    batch = ShapeDtype((None, 64), np.float32)
    return path, fusejit.export(fusejit.fuse(pair), [(batch, batch)], path.with_name("p.fjb"))


_CHILD = """
    g, q = fusejit.load(sys.argv[1]), fusejit.default_queue()
    rng = np.random.default_rng(1)
    # the extents it was lowered at, others above and below them, small ones, random ones
    # (1: the concrete signature exported beside the dynamic one)
    for n in (1024, 7, 3001, 2, 64, 5000, 1, *rng.integers(2, 4000, 6)):
        x = rng.standard_normal((n, 256)).astype(np.float32)
        r = g(cla.to_device(q, x), 2.0)
        e = np.exp(x - x.max(1, keepdims=True))
        np.testing.assert_allclose(r["soft"].get(), e / e.sum(1, keepdims=True),
                                   rtol=2e-6, atol=1e-7)
        np.testing.assert_allclose(r["chain"].get(), np.tanh(x * 2 + 1) * x, rtol=2e-6,
                                   atol=1e-6)
        np.testing.assert_array_equal(r["rowmax"].get(), x.max(1))
        assert r["soft"].shape == (n, 256) and r["rowmax"].dtype == np.float32
    for bad in (np.zeros((0, 256), np.float32),
                np.zeros((8, 256), np.float64), np.zeros((8, 255), np.float32)):
        try:
            g(cla.to_device(q, bad), 2.0)
        except BundleError as exc:
            print("refused", bad.shape, bad.dtype, str(exc).replace(" ", "_")[:200])
        else:
            raise SystemExit(f"{bad.shape} {bad.dtype} was not refused")
    print("counts", g.traces, g.builds, g.binary_loads)
    p = fusejit.load(sys.argv[2])
    for n in (3, 1024, 777):
        x, y = (rng.standard_normal((n, 64)).astype(np.float32) for _ in range(2))
        a, b = p(cla.to_device(q, x), cla.to_device(q, y))
        np.testing.assert_allclose(a.get(), x * y + 1, rtol=2e-6, atol=1e-6)
        np.testing.assert_array_equal(b.get(), (x - y).max(1))
    try:
        p(cla.to_device(q, x), cla.to_device(q, y[:5]))
    except BundleError as exc:
        assert "no exported signature" in str(exc), exc
    else:
        raise SystemExit("two different batch extents were not refused")
    print("pair", p.traces, p.builds, p.binary_loads)
"""


def test_dynamic_bundle_runs_many_extents_in_a_fresh_process(bundles, fresh_process):
    lines = fresh_process(_CHILD, *map(str, bundles))
    # no trace, no build: one program for every extent, one for the concrete signature
    assert lines[-2:] == ["counts 0 0 2", "pair 0 0 1"]
    refused = [ln for ln in lines if ln.startswith("refused")]
    assert len(refused) == 3
    assert "extent_0" in refused[0]
    assert "float64" in refused[1] and "no_exported_signature" in refused[1]
    assert "(None,_256)" in refused[2]  # the error shows what the bundle takes


def test_reduction_over_the_dynamic_axis_is_refused_at_export(tmp_path):
    def colsum(x):
        return x.sum(axis=0)

    with pytest.raises(BundleError, match="kernel source changes with the dynamic extent"):
        fusejit.export(fusejit.fuse(colsum), [(ShapeDtype((None, 16), np.float32),)],
                       tmp_path / "b.fjb")
    assert not (tmp_path / "b.fjb").exists()


def test_independent_extents_and_dynamic_false(tmp_path):
    """(None, None): the batch and the row length are two extents (Nones at one position
    from the last axis are one); the elementwise kernel's metadata are multilinear in
    them (m * n elements)."""
    def double(x):
        return x * 2.0 - 1.0

    g = fusejit.load(fusejit.export(fusejit.fuse(double), [(ShapeDtype(
        (None, None), np.float32, device=False),)], tmp_path / "b.fjb"))
    x = np.random.default_rng(5).standard_normal((40, 3000)).astype(np.float32)
    # rows of any length (the elementwise kernels take it at launch: codegen/rows.py)
    for m, n in ((3, 64), (40, 8), (2, 16), (17, 40), (4, 12), (3, 13), (5, 2999)):
        np.testing.assert_array_equal(g(x[:m, :n].copy()), x[:m, :n] * 2 - 1)
    with pytest.raises(BundleError, match="rows of 2 or more elements"):
        g(x[:4, :1].copy())
    with pytest.raises(BundleError, match="extent 1 "):
        g(x[:1, :40].copy())
    assert (g.traces, g.builds) == (0, 0)
    with pytest.raises(BundleError, match="dynamic=False"):
        fusejit.export(fusejit.fuse(double, dynamic=False),
                       [(ShapeDtype((None, 8), np.float32),)], tmp_path / "b.fjb")


def _entry(vals: dict) -> dict:
    return {"args": [{"kind": "device", "shape": [vals["n"], 4]}], "graph": str(vals["n"]),
            "kernels": [{"global_size": [vals["g"]], "items": vals["g"],
                         "local_size": vals.get("l"), "vec": 1}],
            "dynamic": {"vars": [[[0, 0]]], "ranges": [None]}}


def test_template_fits_verifies_and_instantiates():
    ns = (1024, 2048, 1536, 512)
    t = template([_entry({"n": n, "g": n * 4 // 8}) for n in ns], ns, "sig")
    assert t["args"][0]["shape"] == [{"$x": [0, 1], "q": 1}, 4]
    assert t["graph"] == "1024"  # informational text: the first lowering's
    e = instantiate(t, 6, "f")
    assert e["args"][0]["shape"] == [6, 4] and e["kernels"][0]["global_size"] == [3]
    e = instantiate(t, 7, "f")  # launch sizes round up
    assert e["kernels"][0]["global_size"] == [4] and e["kernels"][0]["items"] == 4
    t["args"][0]["shape"][1] = t["kernels"][0]["items"]
    with pytest.raises(BundleError, match="extent 7 .* multiple of 2"):
        instantiate(t, 7, "f")  # (anything else: a whole number or refused)
    with pytest.raises(BundleError, match="not multilinear"):
        template([_entry({"n": n, "g": n * n}) for n in ns], ns, "sig")
    with pytest.raises(BundleError, match="extent 1 "):
        instantiate(t, 1, "f")
    inner = template([_entry({"n": n, "g": n}) for n in ns], ns, "sig")
    # vectors along the None axis
    inner["kernels"][0]["vec"], inner["dynamic"]["vars"] = 8, [[[0, 1]]]
    inner["args"][0]["shape"].reverse()
    assert instantiate(inner, 16, "f")["args"][0]["shape"] == [4, 16]
    with pytest.raises(BundleError, match="extent 12 .*multiple of 8"):
        instantiate(inner, 12, "f")
    rounded = template([_entry({"n": n, "g": n, "l": [256]}) for n in ns], ns, "sig")
    assert instantiate(rounded, 300, "f")["kernels"][0]["global_size"] == [512]
    # two extents: m * n, fitted on a grid and verified beyond it; a format-2 formula
    ps = [(2, 8), (4, 8), (2, 16), (4, 16), (3, 12), (1, 12)]
    two = template([{"work": m * n + 2 * m, "div": float(n)} for m, n in ps], ps, "sig")
    assert two == {"work": {"$x": [0, 2, 0, 1], "q": 1}, "div": {"$x": [0, 0, 1, 0], "q": 1,
                                                                 "float": True}}
    with pytest.raises(BundleError, match="not multilinear"):
        template([{"w": m * m * n} for m, n in ps], ps, "sig")
    old = upgrade({"args": [{"shape": [{"$n": [3, 1, 2]}]}],
                   "dynamic": {"dims": [[0, 0]], "extents": [2, 4]}})
    assert old["dynamic"]["vars"] == [[[0, 0]]] and instantiate_args(old["args"], 5) == \
        [{"shape": [8]}]
