"""A probe of one property of a Vulkan device that its features do not report.

Vulkan lets a driver compute GLSL's ``fma(a, b, c)`` as a product and a sum rounded apart
(its precision is "inherited from OpFMul followed by OpFAdd"). The float32 division and square
root of targets/glsl_f64 can decide their rounding in float only where fma rounds once, so the
device runs it once on inputs where the two differ; elsewhere they decide in double.

The answer is kept in the disk cache, keyed by the device (its driver's description) and
fusejit's version: the probe is a pipeline build, which a warm process then skips (~2 s a
pipeline was seen on an H200's driver).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from fusejit._version import __version__
from fusejit.runtime import cache
from fusejit.runtime.vulkan.trusted import create_module

_SOURCE = """#version 450
layout(local_size_x = 1) in;
layout(std430, set = 0, binding = 0) buffer Data { float v[]; };
void main() {
    v[3] = fma(v[0], v[1], v[2]);
    v[7] = fma(v[4], v[5], v[6]);
}
"""

# (1 + 2^-23)^2 - (1 + 2^-22) = 2^-46 exactly; a separate product rounds it to 0
_ONE_UP, _TWO_UP = np.float32(1) + np.float32(2.0 ** -23), np.float32(1) + np.float32(2.0 ** -22)
_INPUTS = np.array([_ONE_UP, _ONE_UP, -_TWO_UP, 0.0, -_ONE_UP, _ONE_UP, _TWO_UP, 0.0], np.float32)
_WANT = (np.float32(2.0 ** -46), np.float32(-(2.0 ** -46)))


def probe_key(device_key: str) -> cache.ProgramKey:
    """The disk-cache key of the probe's answer on the device ``device_key`` names."""
    return cache.ProgramKey(hashlib.sha256(_SOURCE.encode()).hexdigest(), ("fma-probe", "1"),
                            "Vulkan device probe", device_key, "", __version__)


def fused_fma(wgpu: Any, device: Any, device_key: str) -> bool:
    """Does ``device`` (a wgpu GPUDevice; ``device_key`` its DeviceInfo.key) round GLSL's
    fma(a, b, c) once? From the disk cache when a process asked before (a bad entry: probed
    again); a probe that fails to run answers no, and is not kept."""
    store = cache.program_cache()
    key = probe_key(device_key) if store is not None else None
    entry = store.get(key) if store is not None else None
    if entry is not None and entry.binary in (b"0", b"1"):
        return entry.binary == b"1"
    answer = run_probe(wgpu, device)
    if store is not None and answer is not None:
        store.put(key, cache.Entry(b"1" if answer else b"0", ("main",)))
    return bool(answer)


def run_probe(wgpu: Any, device: Any) -> bool | None:
    """Run the probe on ``device``: does its fma round once (None: it could not run)."""
    try:
        module = create_module(device, _SOURCE, "fj_probe_fma.comp")
        pipe = device.create_compute_pipeline(layout=wgpu.AutoLayoutMode.auto,
                                              compute={"module": module, "entry_point": "main"})
        usage = wgpu.BufferUsage
        data = device.create_buffer_with_data(
            data=_INPUTS.tobytes(), usage=usage.STORAGE | usage.COPY_SRC)
        read = device.create_buffer(size=_INPUTS.nbytes, usage=usage.MAP_READ | usage.COPY_DST)
        group = device.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": 0, "resource": {"buffer": data, "offset": 0, "size": _INPUTS.nbytes}}])
        enc = device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        cpass.set_pipeline(pipe)
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups(1, 1, 1)
        cpass.end()
        enc.copy_buffer_to_buffer(data, 0, read, 0, _INPUTS.nbytes)
        device.queue.submit([enc.finish()])
        read.map_sync(wgpu.MapMode.READ)
        got = np.frombuffer(read.read_mapped(), np.float32).copy()
        read.unmap()
    except Exception:  # noqa: BLE001 - a driver that cannot run the probe gets the double path
        return None
    return bool(got[3] == _WANT[0] and got[7] == _WANT[1])
