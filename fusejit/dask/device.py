"""One device per dask worker: OpenCL GPUs round-robin (one worker per GPU), else PoCL's CPU;
or, with ``kind="cuda"``, one CUDA GPU per worker (dask arrays of CuPy chunks then stay on it:
each block's call adopts its CuPy chunk and returns a CuPy array)."""

from __future__ import annotations

import re
from typing import Any

import pyopencl as cl
from distributed.diagnostics.plugin import WorkerPlugin

from fusejit.runtime.backend import set_default_device
from fusejit.runtime.cuda.device import gpu_count, use_gpu
from fusejit.runtime.opencl.devices import usable, use_device


def _devices(kind: str) -> list[cl.Device]:
    devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    cpus = [d for d in devices if d.type & cl.device_type.CPU]
    pocl = [d for d in cpus if "Portable Computing Language" in d.platform.name]
    if kind == "gpu" or (kind == "auto" and gpus):
        if not gpus:
            raise RuntimeError("DevicePlugin(kind='gpu'): this worker sees no OpenCL GPU")
        return gpus
    if not (pocl or cpus):
        raise RuntimeError("DevicePlugin: this worker sees no OpenCL CPU device; "
                           "`pip install pocl-binary-distribution` provides one")
    return usable(pocl or cpus)


def pick_device(index: int, kind: str = "auto") -> cl.Device:
    """Device ``index`` (round-robin) of the GPUs (``kind='auto'`` when there are any, or
    ``'gpu'``) or of the CPU devices (``'cpu'``, PoCL first)."""
    devices = _devices(kind)
    return devices[index % len(devices)]


def _worker_index(name: Any) -> int:
    """LocalCluster names its workers 0, 1, ...; other names use their trailing number."""
    if isinstance(name, int):
        return name
    digits = re.findall(r"\d+", str(name))
    return int(digits[-1]) if digits else 0


class DevicePlugin(WorkerPlugin):
    """Pins one device per worker process as fusejit's default device.

    ``client.register_plugin(DevicePlugin())`` on a cluster with one worker per GPU (e.g.
    ``LocalCluster(n_workers=n_gpus, threads_per_worker=1)``, as dask-cuda does): worker ``i``
    gets GPU ``i % n_gpus``; with ``kind='cpu'`` (or no GPU) every worker uses PoCL's CPU
    device; with ``kind='cuda'``, CUDA GPU ``i % n_gpus`` through the CUDA device
    (DeviceUnavailableError on a worker without one). ``index_of`` overrides how a worker's
    number is read from its name.
    """

    name = "fusejit-device"

    def __init__(self, kind: str = "auto", index_of: Any = None) -> None:
        if kind not in ("auto", "gpu", "cpu", "cuda"):
            raise ValueError(f"DevicePlugin(kind={kind!r}): choose 'auto', 'gpu', 'cpu' or "
                             "'cuda'")
        self.kind = kind
        self.index_of = index_of

    def setup(self, worker: Any) -> None:
        index = (self.index_of or _worker_index)(worker.name)
        if self.kind == "cuda":  # GPU index % count, the default device of NumPy-only calls
            gpu = use_gpu(index % max(gpu_count(), 1))
            set_default_device("cuda")
            worker.fusejit_device = f"CUDA GPU {gpu.ordinal} / {gpu.name}"
            return
        device = pick_device(index, self.kind)
        use_device(device)
        worker.fusejit_device = f"{device.platform.name.strip()} / {device.name.strip()}"
