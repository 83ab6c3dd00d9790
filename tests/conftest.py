"""Shared fixtures: the default device (PoCL's CPU device in CI) and host<->device helpers.

``device`` runs a test on each backend (parametrize it, usually ``indirect``, with "opencl",
"vulkan" and "cuda"): NumPy inputs then run on that device. Without a Vulkan loader or adapter
the Vulkan cases skip and say why; ``FUSEJIT_REQUIRE_VULKAN=1`` (CI) turns that skip into a
failure. The CUDA cases skip without an NVIDIA GPU and the fusejit[cuda] extra (CI has neither;
``FUSEJIT_REQUIRE_CUDA=1`` on a GPU machine turns that skip into a failure).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl.array as cla
import pytest

# every test traces (trace counts, and the trace path itself, are what most tests check):
# the disk cache of lowered signatures is on only in tests/compile/test_trace_cache.py
os.environ.setdefault("FUSEJIT_TRACE_CACHE", "0")

# tests/ mirrors the package's folders, and test modules share helpers across them (the op
# catalog, the reduction oracle, the GEMM checks): each folder is importable whatever subset runs
sys.path.extend(str(p) for p in sorted(Path(__file__).parent.iterdir())
                if p.is_dir() and p.name.isidentifier() and any(p.glob("test_*.py")))

import fusejit  # noqa: E402
import fusejit.testing  # noqa: E402


# fusejit's tests state their tolerances: exact unless a test passes ulp= (the public default
# of assert_matches is the op table's bound, looser than most ops need)
fusejit.testing.DEFAULT_ULP = 0.0


@pytest.fixture(scope="session")
def queue():
    return fusejit.default_queue()


@pytest.fixture(scope="session")
def has_fp64(queue) -> bool:
    from fusejit.runtime.opencl.devices import device_info

    return device_info(queue.device).has_fp64


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def dev(queue):
    """Upload a NumPy array to the default device."""
    def upload(x):
        return cla.to_device(queue, np.ascontiguousarray(x))
    return upload


def pytest_addoption(parser):
    parser.addoption("--fuzz-examples", type=int, default=None,
                     help="programs the differential fuzz test runs (default 400, or "
                          "FUSEJIT_FUZZ_EXAMPLES)")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``-n N`` schedules as ``--dist worksteal`` unless ``--dist`` is given: each worker starts
    on a contiguous part of the tests and an idle one takes half of another's queue, so tests
    sharing a module's cached batch of kernels (the op catalog's) mostly run on one worker and a
    long test does not idle the other (the catalog's OpenCL half on 2 workers, cold: 107 -> 79
    CPU-s against xdist's default ``load``, which deals the tests out one by one). A hook rather
    than ``addopts``, which ``-p no:xdist`` would reject."""
    args = [*config.invocation_params.args, *os.environ.get("PYTEST_ADDOPTS", "").split()]
    if config.getvalue("dist") != "load" or any(
            a in ("-d", "--dist", "--distload") or a.startswith("--dist=") for a in args):
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)


@pytest.fixture
def launches(monkeypatch):
    """Counts kernel launches of functions compiled after the fixture is set up."""
    count = []
    real = fusejit.runtime.opencl.executable._enqueue

    def counting(*args, **kwargs):
        count.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fusejit.runtime.opencl.executable, "_enqueue", counting)
    try:  # Vulkan dispatches, when wgpu is there
        from fusejit.runtime.vulkan import executable as vk
    except ImportError:
        return count
    monkeypatch.setattr(vk, "_record", count.append)
    from fusejit.runtime.cuda import executable as cu

    monkeypatch.setattr(cu, "_record", count.append)
    return count


def vulkan_missing() -> str | None:
    """Why Vulkan cannot run here, or None."""
    try:
        from fusejit.vulkan import vulkan_available
    except ImportError as exc:
        return f"wgpu is not installed ({exc})"
    return vulkan_available()


def cuda_missing() -> str | None:
    """Why the CUDA device cannot run here, or None."""
    from fusejit.runtime.cuda.device import gpu_count

    if gpu_count() == 0:
        return "no NVIDIA GPU with a CUDA driver, or no fusejit[cuda] extra (cuda-core, " \
               "cuda-bindings, nvidia-cuda-nvrtc)"
    return None


def use_device(name: str) -> None:
    """Skip (or, with FUSEJIT_REQUIRE_VULKAN=1 / FUSEJIT_REQUIRE_CUDA=1, fail) when ``name``
    cannot run here."""
    if name == "cuda":
        why = cuda_missing()
        if why is not None:
            if os.environ.get("FUSEJIT_REQUIRE_CUDA", "") not in ("", "0"):
                pytest.fail(f"FUSEJIT_REQUIRE_CUDA is set but {why}")
            pytest.skip(why)
    if name == "vulkan":
        why = vulkan_missing()
        if why is not None:
            if os.environ.get("FUSEJIT_REQUIRE_VULKAN", "") not in ("", "0"):
                pytest.fail(f"FUSEJIT_REQUIRE_VULKAN is set but {why}")
            pytest.skip(why)


@pytest.fixture(params=["opencl", "vulkan", "cuda"])
def device(request):
    """The device NumPy inputs run on for this test ("opencl", "vulkan" or "cuda")."""
    name = request.param
    use_device(name)
    previous = fusejit.get_default_device()
    fusejit.set_default_device(name)
    yield name
    fusejit.set_default_device(previous)


def vulkan_mode(monkeypatch: Any, mode: str) -> Any:
    """Swap the default Vulkan device for one opened with ``FUSEJIT_VULKAN_WGSL=mode`` ("0":
    GLSL barriers, which keep 32-lane teams; "all": every kernel translated to WGSL) until the
    test ends; returns it. Programs of the two never mix: the mode is part of the device key."""
    use_device("vulkan")
    from fusejit.runtime.vulkan import device as vk_device

    monkeypatch.setenv("FUSEJIT_VULKAN_WGSL", mode)
    swapped = vk_device.VulkanDevice(vk_device.default_device().adapter)
    monkeypatch.setattr(vk_device, "_default", swapped)
    return swapped


@pytest.fixture
def glsl_barriers(monkeypatch):
    """The default Vulkan device keeps naga's GLSL barriers (see vulkan_mode)."""
    return vulkan_mode(monkeypatch, "0")


def _fake_gpu(monkeypatch, **limits: Any) -> None:
    """Lower with a GPU's limits (is_gpu and the given ones) while running on the test device."""
    import dataclasses

    from fusejit.runtime.opencl import backend as opencl

    real = opencl.device_info

    def fake(device: Any) -> Any:
        info = real(device)
        return dataclasses.replace(info, limits=dataclasses.replace(info.limits, is_gpu=True,
                                                                    **limits))
    monkeypatch.setattr(opencl, "device_info", fake)


@pytest.fixture(params=["cpu", "gpu"])
def lowering(request, monkeypatch) -> str:
    """Lower as the test device does, or with a GPU's limits (8 float16 lanes, 16-byte loads,
    ops lane by lane)."""
    if request.param == "gpu":
        _fake_gpu(monkeypatch)
    return request.param


@pytest.fixture
def gpu_style(monkeypatch):
    """Lower with an H200's limits (work-group trees in local memory, no vector lanes) while
    running on the test device, so the GPU strategies' code is checked here too."""
    _fake_gpu(monkeypatch, compute_units=132, max_work_group=1024, local_mem=48 * 1024)


# what a fresh process that loads an AOT bundle may not do: trace or build from source
_NO_TRACE_NO_BUILD = textwrap.dedent("""
    import sys, numpy as np, pyopencl.array as cla
    import fusejit, fusejit.frontend.trace, fusejit.runtime.opencl.build as build
    from fusejit.compile.aot import BundleError
    def forbidden(*a, **k):  # no trace, no build from source in this process
        raise SystemExit("a trace or a source build happened")
    fusejit.frontend.trace.Tracer.__enter__ = build._build_uncached = forbidden
""")


@pytest.fixture
def fresh_process():
    """``run(script, *args)``: the script in a new Python process (this checkout first on its
    path) that may neither trace nor build from source; its stdout lines."""
    path = os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                            os.environ.get("PYTHONPATH", "")])

    def run(script: str, *args: Any) -> list[str]:
        out = subprocess.run([sys.executable, "-c", _NO_TRACE_NO_BUILD + textwrap.dedent(script),
                              *map(str, args)], env=dict(os.environ, PYTHONPATH=path),
                             capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout.splitlines()
    return run
