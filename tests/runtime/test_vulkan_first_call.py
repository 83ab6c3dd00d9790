"""A process's first Vulkan call (benchmarks/vulkan_first_call.py): wgpu-py's C types parsed in
one go (runtime/vulkan/cffi_types.py) are the types cffi would have parsed one by one, and the
WGSL translation kept on disk (runtime/vulkan/pipelines.py's ``wgsl_of``) is the translation,
rebuilt when its entry is bad."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import fusejit
from tests.conftest import use_device

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def ffi():
    use_device("vulkan")
    from wgpu.backends.wgpu_native._api import ffi

    return ffi


def test_primed_types_are_the_ones_cffi_parses(ffi):
    """Each primed type is the very ctype cffi's own parse of the string gives (cffi keeps
    one ctype per C type, so ``is`` holds only for the same type)."""
    from fusejit.runtime.vulkan.cffi_types import TYPES

    for cdecl in TYPES:
        primed = ffi._parsed_types[cdecl]
        del ffi._parsed_types[cdecl]
        parsed = ffi._typeof(cdecl, consider_function_as_funcptr=True)
        assert parsed is primed[0], cdecl
        assert ffi._parsed_types[cdecl] == primed, cdecl


def test_a_type_cffi_cannot_parse_primes_nothing(ffi):
    from fusejit.runtime.vulkan.cffi_types import prime

    for types in (("WGPUNoSuchType *", "WGPUBufferDescriptor []"), ("int (",),
                  ("WGPUBufferDescriptor [3]", "x y z")):
        assert prime(ffi, types) == 0
        assert not set(types) & set(ffi._parsed_types)
    assert prime(object(), ("int *",)) == 0  # (not cffi at all)


_CHILD = r"""
import numpy as np
from wgpu.backends.wgpu_native._api import ffi
late = []
real = ffi._typeof_locked
def counted(cdecl):
    if cdecl not in ffi._parsed_types:
        late.append(cdecl)
    return real(cdecl)
ffi._typeof_locked = counted
import fusejit, fusejit.vulkan as fv
dev = fv.default_device()
x = np.linspace(-1, 1, 4096, dtype=np.float32).reshape(4, 1024)
soft = fusejit.fuse(lambda a: np.exp(a - a.max(-1, keepdims=True)) * 0.5)
y = fusejit.fuse(lambda a, s: a * s + 1)(fv.to_device(x), np.float32(3))
assert np.allclose(y.get(), x * 3 + 1)
assert np.allclose(soft(x), np.exp(x - x.max(-1, keepdims=True)) * 0.5)
print(late)
"""


def test_a_first_call_parses_no_type_one_by_one(ffi, tmp_path):
    """Opening the device, a GLSL and a WGSL kernel, scalars, uploads and read-backs use only
    primed types (a new wgpu-py that names its types otherwise fails here, not silently)."""
    env = dict(os.environ, FUSEJIT_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT,
               FUSEJIT_DEVICE="vulkan")
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def _wgsl_source() -> str:
    x = np.ones((4, 256), np.float32)
    lowered = fusejit.fuse(lambda a: a / a.sum(-1, keepdims=True) * 1.25).lower(x)
    kernel = lowered.module.kernels[0]
    return lowered.module.prelude + "\n" + kernel.source + "\n"


def test_the_translation_is_kept_on_disk_and_a_bad_entry_rebuilds(monkeypatch, tmp_path):
    use_device("vulkan")
    from fusejit.runtime import cache
    from fusejit.runtime.vulkan import pipelines

    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    previous = fusejit.get_default_device()
    fusejit.set_default_device("vulkan")
    try:
        source = _wgsl_source()
    finally:
        fusejit.set_default_device(previous)
    assert "barrier();" in source  # (a kernel compiled as WGSL)
    want = pipelines.translate(source)
    calls = []
    monkeypatch.setattr(pipelines, "translate", lambda s: calls.append(s) or want)
    assert pipelines.wgsl_of(source) == want and len(calls) == 1
    assert pipelines.wgsl_of(source) == want and len(calls) == 1  # from the disk
    path = cache.program_cache().path(pipelines.translation_key(source))
    for bad in (lambda b: b[:-7] + b"garbage", lambda b: b[:20], lambda b: b"\xff" * 64):
        path.write_bytes(bad(path.read_bytes()))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cache.CacheWarning)
            assert pipelines.wgsl_of(source) == want
        assert pipelines.wgsl_of(source) == want  # rewritten whole
    assert len(calls) == 4
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", "0")  # no disk cache: translated each time
    assert pipelines.wgsl_of(source) == want and len(calls) == 5


def test_the_fma_probe_runs_once_per_device_and_a_bad_answer_reprobes(monkeypatch, tmp_path):
    """The fma probe's answer (a pipeline build) is kept on disk per device: a second device
    opened on the same adapter reads it, a corrupt entry or a probe that could not run probes
    again, and the device's features are the same either way."""
    use_device("vulkan")
    from fusejit.runtime import cache
    from fusejit.runtime.vulkan import device as vk_device
    from fusejit.runtime.vulkan import probe

    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    adapter = vk_device.default_device().adapter
    real, runs = probe.run_probe, []
    monkeypatch.setattr(probe, "run_probe", lambda *a: runs.append(1) or real(*a))
    first = vk_device.VulkanDevice(adapter)
    if "shader-f64" not in first.features:
        pytest.skip("the probe runs on adapters with shader-f64 only")
    assert len(runs) == 1
    assert vk_device.VulkanDevice(adapter).features == first.features and len(runs) == 1
    path = cache.program_cache().path(probe.probe_key(first.info.key))
    path.write_bytes(path.read_bytes()[:-1] + b"x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cache.CacheWarning)
        assert vk_device.VulkanDevice(adapter).features == first.features and len(runs) == 2
    path.unlink()
    monkeypatch.setattr(probe, "run_probe", lambda *a: runs.append(1))  # (could not run)
    vk_device.VulkanDevice(adapter)
    assert not path.exists() and len(runs) == 3
