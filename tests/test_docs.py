"""The docs: the Sphinx site builds with warnings as errors (~5 s), its supported-API table is
generated from the dispatch tables, and every public function has a docstring."""

from __future__ import annotations

import inspect
import pathlib

import numpy as np
import pytest

import fusejit
from fusejit.frontend.numpy import api as numpy_api
from fusejit.inspect.api_table import render_rst, supported_api

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Sphinx's own, about napoleon
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_docs_build_without_warnings(tmp_path):
    sphinx_build = pytest.importorskip("sphinx.cmd.build")
    status = sphinx_build.build_main(["-W", "-q", "-b", "html", str(DOCS), str(tmp_path)])
    assert status == 0
    html = (tmp_path / "_generated" / "supported_api.html").read_text()
    assert "np.concatenate" in html and "np.linalg.norm" in html


def test_api_table_lists_every_dispatch_entry():
    names = {e.name for e in supported_api()}
    for f in numpy_api.FUNCTIONS:
        assert any(n.endswith("." + f.__name__) for n in names), f
    for m in numpy_api.METHODS:
        assert f"ndarray.{m}" in names
    assert "np.logaddexp.reduce" in names and "np.modf" in names
    refused = {e.name for e in supported_api() if not e.supported}
    assert "np.sort" in refused and "np.concatenate" not in refused
    assert "Refused with advice" in render_rst()


@pytest.mark.parametrize("name", fusejit.__all__)
def test_public_api_has_docstrings(name):
    obj = getattr(fusejit, name)
    assert inspect.getdoc(obj), name
    if inspect.isclass(obj) and not issubclass(obj, Exception):
        for attr, member in vars(obj).items():
            if not attr.startswith("_") and callable(member):
                assert inspect.getdoc(member), f"{name}.{attr}"


def test_fuse_docstring_example_runs():
    import doctest

    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for test in finder.find(fusejit.api.fuse, "fuse", globs={"np": np}):
        runner.run(test)
    assert runner.failures == 0 and runner.tries >= 3  # the example in help(fuse) is real


def test_assert_matches_defaults_to_the_op_tables_bound(monkeypatch):
    from fusejit import testing

    monkeypatch.setattr(testing, "DEFAULT_ULP", None)  # the public default (the suite pins 0)
    one = np.float32(1)
    testing.assert_matches(one + 20 * np.spacing(one), one)  # pow's float32 bound: 20 ULP
    with pytest.raises(AssertionError, match="beyond 20.0 ULP"):
        testing.assert_matches(one + 21 * np.spacing(one), one)
    with pytest.raises(AssertionError):  # integers stay exact
        testing.assert_matches(np.int32(2), np.int32(3))
    assert testing.table_ulp(np.float16) == 2.0


def test_compiler_chatter_goes_to_the_logger_not_stderr(capfd, caplog):
    """PoCL prints "N warnings generated." to file descriptor 2 while building."""
    import logging
    import os

    from fusejit.runtime.opencl.build import _stderr_to_log

    with caplog.at_level(logging.DEBUG, logger="fusejit"):
        with _stderr_to_log("fj_test"):
            os.write(2, b"3 warnings generated.\n")
    assert "warnings generated" not in capfd.readouterr().err
    assert any("3 warnings generated." in r.getMessage() for r in caplog.records)
    os.write(2, b"after\n")  # stderr is back
    assert "after" in capfd.readouterr().err


def test_benchmark_table_units_and_cache_resident_mark():
    from fusejit.bench.report import _bytes, _pct_copy, _shape

    assert _pct_copy(150.0, 100.0) == "150%*" and _pct_copy(50.0, 100.0) == "50%"
    assert _bytes(32768) == "32.8 kB" and _bytes(4.2e9) == "4.2 GB" and _bytes(12) == "12 B"
    assert _shape({"shape": [1 << 20]}) == "2^20 el" and _shape({"shape": [64, 3]}) == "64x3 el"


def test_vulkan_driver_chatter_goes_to_the_logger_not_stderr():
    """Mesa prints "error: XDG_RUNTIME_DIR is invalid or not set" (twice) when a Vulkan instance
    probes its window-system layers: a process that opens the device and runs a call prints
    nothing on stderr."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from conftest import use_device

    use_device("vulkan")
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    script = ("import numpy as np, fusejit\nfusejit.set_default_device('vulkan')\n"
              "print(fusejit.fuse(lambda x: x + 1)(np.ones(2, np.float32)))")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2. 2.]" and out.stderr == ""
