"""Smoke test of the benchmark runner (``python -m fusejit.bench``) at its tiniest scale.

Checks the JSON document's shape and that every implementation agreed with NumPy; never
looks at the timings themselves.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from fusejit.bench.__main__ import main

IMPLS = ("fused", "unfused", "numpy")


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, str]:
    out = tmp_path_factory.mktemp("bench")
    json_path, png_path = out / "bench.json", out / "bench.png"
    argv = ["--scale", "tiny", "--impls", ",".join(IMPLS), "--workloads", "chain,gelu",
            "--sizes", "10", "--chains", "1,8", "--budget", "0", "--min-reps", "2",
            "--json", str(json_path), "--png", str(png_path)]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(argv) == 0
    return json.loads(json_path.read_text()), stdout.getvalue(), str(png_path)


def test_json_has_expected_keys(bench_run: tuple[dict, str, str]) -> None:
    doc, _, _ = bench_run
    for key in ("schema", "fusejit_version", "timestamp", "scale", "machine", "device",
                "implementations", "system", "results"):
        assert key in doc, key
    assert doc["scale"] == "tiny"
    assert {"name", "platform", "driver", "type"} <= set(doc["device"])
    system = doc["system"]
    assert system["copy"]["gbs"] > 0
    overhead = system["overhead"]
    for part in ("fused", "unfused_4_launches", "raw_pyopencl_launch"):
        assert {"us_per_call", "us_per_call_batched"} <= set(overhead[part])
    assert system["cold_gelu"]["status"] == "ok", system["cold_gelu"]
    assert {"first_call_s", "python_side_s", "build_and_launch_s"} <= set(system["cold_gelu"])
    assert set(doc["implementations"]) == set(IMPLS)
    assert [r["name"] for r in doc["results"]] == ["chain1/2^10", "chain8/2^10", "gelu"]


def test_every_implementation_agrees_with_numpy(bench_run: tuple[dict, str, str]) -> None:
    doc, _, _ = bench_run
    for rec in doc["results"]:
        assert {"family", "shape", "size", "bytes", "impls", "speedup"} <= set(rec)
        assert set(rec["impls"]) == set(IMPLS)
        for impl, cell in rec["impls"].items():
            assert cell["status"] == "ok", (rec["name"], impl, cell["status"])
            assert cell["matches"], (rec["name"], impl, cell["max_rel_err"])
            assert {"ms", "reps", "gbs", "pct_copy"} <= set(cell)
        assert {"vs_unfused", "vs_numpy"} <= set(rec["speedup"])


def test_table(bench_run: tuple[dict, str, str]) -> None:
    _, table, _ = bench_run
    assert "fused ms" in table and "vs unfused" in table and "chain8" in table


def test_plot_or_note(bench_run: tuple[dict, str, str]) -> None:
    _, table, png = bench_run
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in table
        return
    with open(png, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_elements_resizes_every_workload_and_libm_cases_agree(tmp_path) -> None:
    json_path = tmp_path / "libm.json"
    argv = ["--scale", "tiny", "--impls", "fused,numpy", "--workloads", "libm,softmax",
            "--elements", "12", "--budget", "0", "--min-reps", "1", "--no-system",
            "--json", str(json_path)]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    doc = json.loads(json_path.read_text())
    names = [r["name"] for r in doc["results"]]
    assert names == ["sin", "cos", "tan", "exp", "log", "pow2.2", "softmax"]
    for rec in doc["results"]:
        assert rec["size"] == 2**12, (rec["name"], rec["shape"])  # softmax: 4 rows of 1024
        for impl, cell in rec["impls"].items():
            assert cell["status"] == "ok" and cell["matches"], (rec["name"], impl, cell)


def test_conv_and_pool_workloads_agree(tmp_path) -> None:
    """The window workloads (NumPy spellings only): fused agrees with NumPy, the pyopencl
    namespace is marked unsupported, not failed."""
    json_path = tmp_path / "conv.json"
    argv = ["--scale", "tiny", "--impls", "fused,unfused,numpy", "--workloads", "conv,pool",
            "--budget", "0", "--min-reps", "1", "--no-system", "--json", str(json_path)]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    doc = json.loads(json_path.read_text())
    assert [r["family"] for r in doc["results"]] == ["conv", "pool"]
    for rec in doc["results"]:
        for impl in ("fused", "numpy"):
            cell = rec["impls"][impl]
            assert cell["status"] == "ok" and cell["matches"], (rec["name"], impl, cell)
        assert rec["impls"]["unfused"]["status"].startswith("unsupported")


def test_the_cpu_workloads_of_issue_35_agree(tmp_path) -> None:
    """Sobel (hypot), the Asian option (fusejit.random against NumPy's own normals from the
    same Philox generator: equal to Monte Carlo error), the complex64 filter, the small MLP and
    x ** 2.2 are bench workloads; the pyopencl namespace has no np.random: unsupported."""
    json_path = tmp_path / "cpu.json"
    argv = ["--scale", "tiny", "--impls", "fused,unfused,numpy", "--workloads",
            "sobel,random,complex,mlp,libm", "--budget", "0", "--min-reps", "1", "--no-system",
            "--json", str(json_path)]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    doc = json.loads(json_path.read_text())
    names = [r["name"] for r in doc["results"]]
    for wanted in ("sobel/128^2", "asian_option/4096x16", "complex_filter", "pow2.2",
                   "mlp_narrow/1024x64-128-10"):
        assert wanted in names, names
    for rec in doc["results"]:
        for impl in ("fused", "numpy"):
            cell = rec["impls"][impl]
            assert cell["status"] == "ok" and cell["matches"], (rec["name"], impl, cell)
    asian = next(r for r in doc["results"] if r["family"] == "random")
    assert asian["impls"]["unfused"]["status"].startswith("unsupported")


def test_conv_table_reports_flops_and_errors_against_float64(tmp_path) -> None:
    """``python -m fusejit.bench.conv`` (tiny): each row has fusejit's and the anchor's time,
    TFLOP/s and error against the float64 reference, which is itself NumPy's layer in float64
    (strided, 1x1 and depthwise layers too)."""
    import numpy as np

    from fusejit.bench import conv

    rng = np.random.default_rng(3)
    for layer in (conv.Layer("s", 2, 11, 3, 5, 7, 2), conv.Layer("d", 1, 8, 6, 6, 3, 2, True),
                  conv.Layer("1", 1, 6, 4, 7, 1)):
        host = conv._data(layer, rng, np.dtype(np.float32))
        np.testing.assert_allclose(conv.reference(layer, host),
                                   conv.layer_fn(layer)(*[h.astype(np.float64) for h in host]),
                                   rtol=1e-13, atol=1e-13)
    json_path = tmp_path / "conv.json"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        conv.main(["--scale", "tiny", "--json", str(json_path)])
    rows = json.loads(json_path.read_text())["rows"]
    assert [r["layer"] for r in rows] == ["3x3 16->16", "maxpool 2x2/2"]
    first = rows[0]
    assert first["kernels"] == 1 and first["max_rel_err"] < 1e-5
    assert first["anchor_max_rel_err"] < 1e-5 and first["fused_tflops"] > 0
    assert "TFLOP/s" in out.getvalue() and "max err" in out.getvalue()
