"""The Vulkan device (through wgpu): adapter, limits, features, buffer pool, copies.

``default_device()`` opens the adapter wgpu prefers (high performance) once per process and
asks it for its real limits (largest storage binding and buffer, workgroup storage, storage
buffers per stage) and for the optional features fusejit can use: wgpu's defaults are far
smaller (128 MiB bindings, 8 storage buffers per shader stage).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from fusejit.errors import DeviceUnavailableError
from fusejit.passes.partition import DeviceLimits
from fusejit.runtime.backend import DeviceInfo, backend_named, device_opened
from fusejit.runtime.quiet import stderr_to_log

_FEATURES = ("shader-f16", "shader-f64", "shader-int64", "subgroup", "subgroup-barrier",
             "timestamp-query")
_LIMITS = ("max-storage-buffer-binding-size", "max-buffer-size",
           "max-compute-workgroup-storage-size", "max-compute-invocations-per-workgroup",
           "max-compute-workgroup-size-x", "max-compute-workgroup-size-y",
           "max-storage-buffers-per-shader-stage", "max-bindings-per-bind-group",
           "max-uniform-buffer-binding-size")
WGSL_INT64 = "fj-wgsl-int64"  # a pseudo-feature: int64/uint64 kernels compile as WGSL
BARRIER_GROUP = 32  # work-items of a Vulkan work-group that uses barrier() (see VulkanDevice)
MAX_GROUPS = 65535  # per dispatch dimension (WebGPU's guaranteed minimum; wgpu enforces it)
_lock = threading.Lock()
_features: dict[str, frozenset[str]] = {}  # DeviceInfo.key -> the adapter's optional features
_default: VulkanDevice | None = None
_unavailable: str | None = None


def _wgpu() -> Any:
    try:
        import wgpu
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise DeviceUnavailableError(
            "the Vulkan device needs wgpu: pip install 'fusejit[vulkan]' "
            f"(wgpu-py 0.32) ({exc})") from None
    return wgpu


class VulkanDevice:
    """One wgpu device on a Vulkan adapter, with its pools and staging buffers."""

    def __init__(self, adapter: Any) -> None:
        wgpu = _wgpu()
        self.wgpu = wgpu
        self.fusejit_backend = backend_named("vulkan")  # (the registry: no import of it here)
        self.adapter = adapter
        self.features = frozenset(f for f in _FEATURES if f in adapter.features)
        self.limits = {k: adapter.limits[k] for k in _LIMITS if k in adapter.limits}
        self.device = adapter.request_device_sync(required_features=sorted(self.features),
                                                  required_limits=self.limits)
        self.queue = self
        self.context = self
        info = adapter.info
        self.name = f"{info.get('device', '?')} ({info.get('adapter_type', '?')})"
        self.is_cpu = str(info.get("adapter_type", "")).lower().startswith("cpu")
        lim = self.limits
        from fusejit.runtime.vulkan.pipelines import wgsl_mode

        self.wgsl_mode = wgsl_mode()
        glsl_barriers = self.wgsl_mode == "off"
        if "shader-int64" in self.features and not glsl_barriers:
            # 64-bit integers: naga's WGSL has i64/u64 (its GLSL frontend has no int64_t)
            self.features |= {WGSL_INT64}
        self.info = DeviceInfo(
            key=f"vulkan / {info.get('vendor', '')} / {info.get('device', '')} / "
                f"{info.get('description', '')} / wgpu {wgpu.__version__}"
                + (" / GLSL barriers" if glsl_barriers else ""),
            limits=DeviceLimits(
                max_work_group=min(lim["max-compute-invocations-per-workgroup"],
                                   lim["max-compute-workgroup-size-x"],
                                   lim["max-compute-workgroup-size-y"], 1024),
                local_mem=lim["max-compute-workgroup-storage-size"],
                # Vulkan does not report compute units: the host's cores for a CPU adapter,
                # an H200-sized guess (132 SMs) for GPUs; it only sizes split reductions
                compute_units=(os.cpu_count() or 2) if self.is_cpu else 132,
                # the Target of every Vulkan kernel uses work-groups with barriers
                is_gpu=True,
                # fit_arguments counts 8 bytes per kernel argument; one binding is the
                # uniform block
                max_arg_bytes=8 * (min(lim["max-storage-buffers-per-shader-stage"],
                                       lim["max-bindings-per-bind-group"]) - 1),
                # naga's GLSL frontend has only barrier(), which it turns into an
                # OpControlBarrier of Subgroup execution scope (naga's Barrier::all() holds
                # SUB_GROUP), and on an H200 that synchronised only each 32-lane subgroup (row
                # reductions wrong from lane 32 on). So kernels with barriers compile as WGSL,
                # whose workgroupBarrier() has Workgroup scope (targets/wgsl/translate.py), and barriers
                # span whole work-groups. FUSEJIT_VULKAN_WGSL=0 keeps GLSL: barriers then
                # synchronise teams of 32 consecutive work-items (one subgroup on NVIDIA and
                # AMD), row kernels put several rows of 32 lanes in a work-group and other
                # kernels with barriers keep to 32 work-items.
                max_barrier_group=BARRIER_GROUP if glsl_barriers else 0,
                barrier_teams=glsl_barriers,
                # a row is one 32-lane subgroup, so layernorm's 4096 columns are 128 a lane,
                # beyond the 32 kept in registers: read again in each of its 3 passes.
                # FUSEJIT_VULKAN_ROW_CACHE=128 keeps them (not yet measured on a GPU)
                row_cache=int(os.environ.get("FUSEJIT_VULKAN_ROW_CACHE", "0"))),
            has_fp64=False, correctly_rounded_div_sqrt=False, is_cpu=self.is_cpu)
        if "shader-f64" in self.features and os.environ.get("FUSEJIT_VULKAN_FMA", "1") != "0":
            # (the float32 / and sqrt of targets/glsl_f64 decide in float where fma rounds
            # once; FUSEJIT_VULKAN_FMA=0 keeps them in double)
            from fusejit.targets.glsl.f64 import FUSED_FMA
            from fusejit.runtime.vulkan.probe import fused_fma

            if fused_fma(wgpu, self.device, self.info.key):
                self.features |= {FUSED_FMA}
        _features[self.info.key] = self.features
        self._free: dict[int, list[Any]] = {}
        self._in_use: dict[int, Any] = {}  # id -> buffer, from allocate until release
        self._staging: dict[int, Any] = {}
        self._sync: Any = None
        from fusejit.runtime.vulkan.record import Recorder

        self.recorder = Recorder(self.device)
        self._pool_lock = threading.RLock()  # (the staging buffers')
        self.usage = (wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
                      | wgpu.BufferUsage.COPY_DST)

    def __repr__(self) -> str:
        return f"<fusejit Vulkan device {self.name}>"

    # -- buffers ----------------------------------------------------------------------------------
    def allocate(self, nbytes: int) -> Any:
        """A storage buffer of at least ``nbytes`` (reused from the pool when one is free)."""
        return self.take(self.buffer_size(nbytes))

    def buffer_size(self, nbytes: int) -> int:
        """The size of the pooled buffer that holds ``nbytes`` (the pool's size class);
        DeviceUnavailableError beyond the adapter's largest storage binding."""
        size = max(16, (nbytes + 255) // 256 * 256)
        if size > self.limits["max-storage-buffer-binding-size"]:
            raise DeviceUnavailableError(
                f"{nbytes} bytes exceed the Vulkan adapter's largest storage binding "
                f"({self.limits['max-storage-buffer-binding-size']} bytes)")
        return size

    def take(self, size: int) -> Any:
        """A storage buffer of ``size`` bytes, a ``buffer_size``: the last one released of
        that size, else a new one. (Reuse needs no wait: the queue runs in order, so what was
        submitted with the buffer before runs before anything submitted with it after, and
        writes outside command buffers flush the recorded calls first: ``upload``.)"""
        # (no lock: each step is one dict or list operation, atomic as the GIL runs them, so
        # threads and an array's __del__ releasing in between leave the pool consistent)
        try:
            buf = self._free[size].pop()
        except (KeyError, IndexError):
            buf = self.device.create_buffer(size=size, usage=self.usage)
        self._in_use[id(buf)] = buf
        return buf

    def release(self, buf: Any) -> None:
        """Give a buffer back to the pool (work already submitted that uses it stays ordered
        before any later use: one queue runs everything).

        The pool holds every buffer it gave out (``_in_use``) until it comes back: an array
        that dies in a garbage cycle (a traceback's frames holding arrays) is finalized with
        everything only it reaches, and a buffer only the array held would be released by
        wgpu-py's own finalizer in the same collection, after or before the array pooled it,
        and fail the next upload into it. Held here, the buffer is never in that cycle."""
        self._in_use.pop(id(buf), None)  # (no lock: see take)
        self._free.setdefault(buf.size, []).append(buf)

    def flush(self) -> None:
        """Submit the calls recorded but not yet submitted (see record.Recorder); before any
        other use of the queue that reads or writes fusejit's buffers."""
        self.recorder.flush()

    def upload(self, buf: Any, data: np.ndarray, offset: int = 0) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        pad = (-raw.size) % 4
        if pad:
            raw = np.concatenate([raw, np.zeros(pad, np.uint8)])
        if raw.size:
            # (a write lands before the queue's next command buffer: the calls recorded so far,
            # which may use this buffer before it returned to the pool, go first)
            self.recorder.flush()
            self.device.queue.write_buffer(buf, offset, raw)

    def write_uniform(self, buf: Any, words: np.ndarray) -> None:
        """Write a uniform block that no recorded, unsubmitted call reads (the caller made
        sure: executable._Pipeline.take_uniform), without submitting those calls first."""
        self.device.queue.write_buffer(buf, 0, words)

    def download(self, buf: Any, offset: int, nbytes: int) -> np.ndarray:
        """Bytes ``offset .. offset+nbytes`` of ``buf``, through a mappable staging buffer."""
        wgpu = self.wgpu
        lo = offset // 4 * 4
        n = (offset + nbytes - lo + 3) // 4 * 4
        if n == 0:
            return np.zeros(0, np.uint8)
        size = max(256, 1 << (n - 1).bit_length())
        with self._pool_lock:
            staging = self._staging.pop(size, None)
        if staging is None:
            staging = self.device.create_buffer(
                size=size, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        data = self.recorder.read(buf, lo, staging, n, spin=not self.is_cpu)
        if data is not None:
            with self._pool_lock:
                self._staging[size] = staging
            return data[offset - lo: offset - lo + nbytes]
        self.recorder.flush()
        enc = self.device.create_command_encoder()
        enc.copy_buffer_to_buffer(buf, lo, staging, 0, n)
        self.device.queue.submit([enc.finish()])
        if self.recorder.raw or hasattr(self.device, "_poll_wait"):
            # the copy is done: the map below resolves without the poller's wait
            self.recorder.wait(spin=not self.is_cpu)
        staging.map_sync(wgpu.MapMode.READ, 0, n)
        try:
            data = np.frombuffer(staging.read_mapped(0, n, copy=True), np.uint8)
        finally:
            staging.unmap()
        with self._pool_lock:
            self._staging[size] = staging
        return data[offset - lo: offset - lo + nbytes]

    def finish(self) -> None:
        """Wait until the device has run everything submitted: wgpuDevicePoll, spinning a
        while first on GPUs (Recorder.wait; wgpu-py's on_submitted_work_done_sync fails against
        its bundled wgpu-native in 0.32; a mapped read-back through its poller thread took
        0.2 ms on an H200), else map a copy."""
        if self.recorder.raw or hasattr(self.device, "_poll_wait"):
            self.recorder.wait(spin=not self.is_cpu)
            return
        if self._sync is None:
            self._sync = self.device.create_buffer(size=16, usage=self.usage)
        self.download(self._sync, 0, 4)


def features_of(info: DeviceInfo) -> frozenset[str]:
    """The optional features (shader-f16, ...) of the Vulkan device ``info`` describes."""
    return _features.get(info.key, frozenset())


def default_device() -> VulkanDevice:
    """The Vulkan device NumPy arguments run on when the default device is "vulkan"."""
    global _default, _unavailable
    if _default is None:
        device_opened()  # (in a forked child: raises, see _forget_after_fork)
    with _lock:
        if _default is None:
            if _unavailable is not None:
                raise DeviceUnavailableError(_unavailable)
            wgpu = _wgpu()
            from fusejit.runtime.vulkan.cffi_types import prime_wgpu

            prime_wgpu()  # (1.5 s of C type parsing less: cffi_types.py)
            try:  # (Mesa prints its window-system probing to fd 2: to the logger instead)
                with stderr_to_log("Vulkan driver output opening the device"):
                    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
            except Exception as exc:  # noqa: BLE001 - any loader/driver failure means "none"
                adapter, why = None, f"{type(exc).__name__}: {exc}"
            else:
                why = "wgpu found no adapter"
            if adapter is None or str(adapter.info.get("backend_type", "")).lower() != "vulkan":
                if adapter is not None:
                    why = f"wgpu's adapter runs on {adapter.info.get('backend_type')}, not Vulkan"
                _unavailable = (f"no Vulkan device: {why}. Install a Vulkan driver (Debian: "
                                "apt-get install mesa-vulkan-drivers libvulkan1) or use OpenCL")
                raise DeviceUnavailableError(_unavailable)
            _default = VulkanDevice(adapter)
        return _default


def _forget_after_fork() -> None:
    """A forked child cannot use its parent's Vulkan device (runtime/backend.py, FORKED)."""
    global _default, _lock
    _default, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def vulkan_available() -> str | None:
    """None when a Vulkan device can be opened, else why not."""
    try:
        default_device()
    except DeviceUnavailableError as exc:
        return str(exc)
    return None
