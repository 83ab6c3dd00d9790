"""A process forked after its parent used a fusejit device: the child's calls raise
DeviceUnavailableError naming 'spawn' (the drivers do not survive a fork: the first launch, even
on a new context, waited forever on PoCL's threads), and a child forked before any use works.

Each scenario runs in a new Python process (its own driver state), under a timeout: a hang
fails the test instead of stalling the run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import use_device

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import multiprocessing, os, sys, numpy as np, fusejit
from fusejit.errors import DeviceUnavailableError
f = fusejit.fuse(lambda x: x * 2 + 1)

def in_child(work):
    '''work() in a forked child: "ok <value>" or "raised <class>: <message>".'''
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = f"ok {work()}"
        except Exception as exc:
            out = f"raised {type(exc).__name__}: {exc}"
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    return os.read(r, 4096).decode()
"""


def run(script: str) -> list[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH",
                                                                                  "")]))
    out = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(script)], env=env,
                         capture_output=True, text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.splitlines()


def refused(line: str) -> bool:
    return line.startswith("raised DeviceUnavailableError") and "'spawn'" in line


def test_child_forked_after_use_refuses_every_entry_point():
    lines = run("""
        x = np.ones(3, np.float32)
        f(x)
        g = fusejit.fuse(lambda x: x - 1)
        print(in_child(lambda: f(x)))                       # a cached signature
        print(in_child(lambda: f(np.ones(5, np.float32))))  # a new one
        print(in_child(lambda: g(x)))                       # a function never called
        print(in_child(lambda: f.lower(x)))
        print(in_child(fusejit.default_queue))
        print(f(x).tolist())                                # the parent is unaffected
    """)
    assert all(refused(line) for line in lines[:5]), lines
    assert lines[5] == "[3.0, 3.0, 3.0]"


def test_device_arrays_and_multiprocessing_fork_pool():
    lines = run("""
        import pyopencl.array as cla
        xd = cla.to_device(fusejit.default_queue(), np.ones(3, np.float32))
        f(xd)
        print(in_child(lambda: f(xd)))
        def work(n):
            return f(np.ones(n, np.float32)).tolist()
        with multiprocessing.get_context("fork").Pool(1) as pool:
            try:
                pool.map(work, [2])
            except DeviceUnavailableError as exc:
                print("pool raised", exc)
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            print(pool.map(len, [[1, 2]]))
    """)
    assert refused(lines[0]), lines
    assert lines[1].startswith("pool raised") and "'spawn'" in lines[1], lines


def test_child_forked_before_any_use_computes():
    lines = run("""
        print(in_child(lambda: f(np.ones(2, np.float32)).tolist()))
        print(f(np.ones(2, np.float32)).tolist())
    """)
    assert lines == ["ok [3.0, 3.0]", "[3.0, 3.0]"]


def test_vulkan_child_forked_after_use_refuses():
    use_device("vulkan")  # (skips without a Vulkan device, unless FUSEJIT_REQUIRE_VULKAN=1)
    lines = run("""
        fusejit.set_default_device("vulkan")
        x = np.ones(3, np.float32)
        f(x)
        print(in_child(lambda: f(x)))
        import fusejit.vulkan
        print(in_child(lambda: fusejit.vulkan.to_device(x)))
    """)
    assert all(refused(line) for line in lines), lines
