"""Explained recompiles, the recompile warning, cache_info's counters and the signature LRU."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import fusejit
from fusejit.compile.recompiles import RecompileWarning

ROOT = Path(__file__).resolve().parents[2]
# children import this checkout first, then whatever the parent could import
CHILD_PATH = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])


def test_log_says_what_changed(caplog):
    @fusejit.fuse
    def f(x, k):
        return x * k + 1

    with caplog.at_level(logging.INFO, logger="fusejit"):
        f(np.ones((10, 4), np.float32), 2.0)
        f(np.ones((12, 4), np.float32), 2.0)
        f(np.ones((12, 4), np.float64), 2.0)
        f(np.ones((12, 4), np.float64), 2)
    lines = [r.getMessage() for r in caplog.records if r.name == "fusejit.recompiles"]
    assert lines == [
        "test_log_says_what_changed.<locals>.f: compiling (first call)",
        "test_log_says_what_changed.<locals>.f: recompiling: arg 0 shape (10, 4) -> (12, 4); "
        "dim 0 now dynamic",
        "test_log_says_what_changed.<locals>.f: recompiling: arg 0 dtype float32 -> float64",
        "test_log_says_what_changed.<locals>.f: recompiling: arg 1 type float -> int",
    ]


def test_static_and_keyword_changes_are_named(caplog):
    f = fusejit.fuse(lambda x, n: x * n, static_argnums=1)
    x = np.ones(8, np.float32)
    with caplog.at_level(logging.INFO, logger="fusejit.recompiles"):
        f(x, 2)
        f(x, 3)
        f(x, n=3)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[1].endswith("recompiling: arg 1 static value 2 -> 3")
    assert "keywords" in lines[2]


def test_fusejit_log_env_prints_to_stderr():
    code = ("import numpy as np, fusejit\n"
            "f = fusejit.fuse(lambda x: x + 1)\n"
            "f(np.ones(3, np.float32)); f(np.ones(5, np.float32))\n")
    env = dict(os.environ, FUSEJIT_LOG="recompiles", PYTHONPATH=CHILD_PATH)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "fusejit: <lambda>: recompiling: arg 0 shape (3,) -> (5,)" in out.stderr


def test_warning_names_the_changing_argument():
    f = fusejit.fuse(lambda x, y: x + y, recompile_limit=3, dynamic=False)
    y = np.ones(4, np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (2, 3, 4, 5):
            f(np.ones((n, 4), np.float32), y)
    ours = [w for w in caught if issubclass(w.category, RecompileWarning)]
    assert len(ours) == 1
    message = str(ours[0].message)
    assert "3 distinct call signatures" in message and "arg 0" in message
    assert "arg 1" not in message.split("changing:")[1].split(";")[0]
    assert "shape" in message


def test_cache_info_counters():
    f = fusejit.fuse(lambda x: x * 2 - 1)
    for n in (6, 6, 7):
        f(np.arange(n, dtype=np.float32))
    info = f.cache_info()
    assert (info.hits, info.misses, info.currsize, info.traces) == (1, 2, 2, 2)
    assert info.compiles + info.disk_hits == 2


def test_signature_lru_is_bounded_and_keeps_hot_entries():
    f = fusejit.fuse(lambda x: x - 3, cache_size=2, recompile_limit=0)
    xs = {n: np.arange(n, dtype=np.float32) for n in (3, 4, 5)}
    for n in (3, 4):
        f(xs[n])
    f(xs[3])  # a fast-path hit: 3 gets a second chance, 4 is evicted next
    f(xs[5])
    assert f.cache_info().currsize == 2 and f.trace_count == 3
    np.testing.assert_array_equal(f(xs[3]), xs[3] - 3)
    assert f.trace_count == 3  # still cached
    np.testing.assert_array_equal(f(xs[4]), xs[4] - 3)
    assert f.trace_count == 4  # was evicted: traced again, and right


@pytest.mark.parametrize("limit", ["x", "-1"])
def test_bad_env_limits_fall_back(monkeypatch, limit):
    monkeypatch.setenv("FUSEJIT_RECOMPILE_LIMIT", limit)
    f = fusejit.fuse(lambda x: x)
    assert f._stats.limit in (0, 8)
