"""One call's command buffer, recorded through wgpu-native's C functions directly.

wgpu-py wraps every C call in an error-capturing proxy and a Python object (encoder, pass,
command buffer), about a dozen per call; for a cached fused call on a GPU that host time is
most of a small call's latency. The pipelines and bind groups a call uses were validated when
wgpu-py created them, so recording them needs no checks: this records and submits with the
raw functions. Any mismatch with wgpu-py's internals falls back to its public API.

It also waits for the queue (``wait``): wgpuDevicePoll returns a Rust ``bool`` where the C
header (and so cffi) says ``WGPUBool``, a 32-bit int, so only the low byte of its result is the
answer (the rest is whatever the register held: 0x920c3a01 for "queue empty" on lavapipe), which
is why a non-blocking poll had looked unreliable.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

Step = tuple[Any, Any, int, int]  # (GPUComputePipeline, GPUBindGroup, groups x, groups y)
SPIN_S = 0.002  # how long ``wait`` polls without blocking before it blocks
BATCH = 64  # dispatches one command buffer holds before it is submitted whatever the queue does


class Recorder:
    """Records calls' ``steps`` into a compute pass and submits it on ``device``'s queue: at
    once when the queue is idle, else together with the calls that follow while the device is
    busy (one command buffer, no gap between their dispatches, one submit's host time), until
    the queue is idle again, BATCH dispatches, or anything else uses the queue (``flush``:
    uploads, read-backs, ``wait``). FUSEJIT_VULKAN_BATCH=0 submits every call by itself.
    Code that submits its own wgpu commands reading fusejit's buffers calls
    ``VulkanDevice.flush()`` (or ``finish()``) first."""

    def __init__(self, device: Any) -> None:
        self.device = device
        # (re-entrant: a call holds it from its uniform writes to its submit, see
        # executable._Pipeline.take_uniform, and may flush in between)
        self.lock = threading.RLock()
        self.serial = 0  # counts submitted command buffers: the open one is number `serial`
        self._open: tuple[Any, Any] | None = None  # (encoder, pass) of unsubmitted calls
        self._held: list[Step] = []
        self.batch = os.environ.get("FUSEJIT_VULKAN_BATCH", "1") != "0"
        try:
            from wgpu.backends.wgpu_native._api import ffi, lib, new_struct_p, to_c_string_view

            self._ffi, self._lib = ffi, lib
            self._label = to_c_string_view("")
            self._enc = new_struct_p("WGPUCommandEncoderDescriptor *", label=self._label)
            self._pass = new_struct_p("WGPUComputePassDescriptor *", label=self._label,
                                      timestampWrites=ffi.NULL)
            self._cb = new_struct_p("WGPUCommandBufferDescriptor *", label=self._label)
            self._cbs = ffi.new("WGPUCommandBuffer[1]")
            self._dev = device._internal
            self._queue = device.queue._internal
            self._poll = lib.wgpuDevicePoll
            self._mapped: list[int] = []  # the statuses of finished buffer maps (``read``)

            @ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
            def mapped(status: int, message: Any, user1: Any, user2: Any) -> None:
                self._mapped.append(int(status))

            # (the pointer owns the struct, passed by value as ``[0]``)
            self._map_info = new_struct_p("WGPUBufferMapCallbackInfo *", callback=mapped,
                                          mode=lib.WGPUCallbackMode_AllowProcessEvents)
            self._on_mapped = mapped  # (the C callback lives as long as this)
            self.raw = True
        except (ImportError, AttributeError, TypeError):  # wgpu-py's internals changed
            self.raw = False

    def read(self, src: Any, offset: int, staging: Any, n: int, spin: bool) -> Any:
        """Bytes ``offset .. offset+n`` of buffer ``src`` as a NumPy uint8 array, copied
        through ``staging`` (mappable, at least ``n`` bytes, ``n`` a multiple of 4), or None
        without the raw functions. Copy, submit, wait, map and read through wgpu-native's C
        functions: wgpu-py's ``map_sync`` adds a submit, a new C callback and its poller
        thread's hand-off to every read (320 us for 4 KiB on lavapipe's host)."""
        if not self.raw:
            return None
        import numpy as np

        lib, null = self._lib, self._ffi.NULL
        with self.lock:
            self.flush()
            enc = lib.wgpuDeviceCreateCommandEncoder(self._dev, self._enc)
            lib.wgpuCommandEncoderCopyBufferToBuffer(enc, src._internal, offset,
                                                     staging._internal, 0, n)
            cb = lib.wgpuCommandEncoderFinish(enc, self._cb)
            lib.wgpuCommandEncoderRelease(enc)
            self._cbs[0] = cb
            lib.wgpuQueueSubmit(self._queue, 1, self._cbs)
            lib.wgpuCommandBufferRelease(cb)
            self.wait(spin)
            self._mapped.clear()
            lib.wgpuBufferMapAsync(staging._internal, lib.WGPUMapMode_Read, 0, n,
                                   self._map_info[0])
            for _ in range(100_000):  # (the callback runs in the first poll after the copy)
                if self._mapped:
                    break
                self._poll(self._dev, True, null)
            if self._mapped[:1] != [lib.WGPUMapAsyncStatus_Success]:
                raise RuntimeError(f"mapping a read-back buffer failed ({self._mapped})")
            ptr = lib.wgpuBufferGetConstMappedRange(staging._internal, 0, n)
            data = np.frombuffer(self._ffi.buffer(ptr, n), np.uint8).copy()
            lib.wgpuBufferUnmap(staging._internal)
        return data

    def submit(self, steps: Sequence[Step]) -> None:
        if not self.raw:
            encoder = self.device.create_command_encoder()
            cpass = encoder.begin_compute_pass()
            for pipeline, group, x, y in steps:
                cpass.set_pipeline(pipeline)
                cpass.set_bind_group(0, group)
                cpass.dispatch_workgroups(x, y, 1)
            cpass.end()
            self.device.queue.submit([encoder.finish()])
            return
        lib, null = self._lib, self._ffi.NULL
        with self.lock:
            if self._open is None:
                enc = lib.wgpuDeviceCreateCommandEncoder(self._dev, self._enc)
                self._open = (enc, lib.wgpuCommandEncoderBeginComputePass(enc, self._pass))
            cpass = self._open[1]
            for pipeline, group, x, y in steps:
                lib.wgpuComputePassEncoderSetPipeline(cpass, pipeline._internal)
                lib.wgpuComputePassEncoderSetBindGroup(cpass, 0, group._internal, 0, null)
                lib.wgpuComputePassEncoderDispatchWorkgroups(cpass, x, y, 1)
            self._held.extend(steps)  # (their pipelines and bind groups live until submitted)
            # submitted now when the queue has run everything before (the device would idle)
            if not self.batch or len(self._held) >= BATCH or \
                    self._poll(self._dev, False, null) & 0xFF:
                self._submit_open()

    def flush(self) -> None:
        """Submit the calls recorded but not yet submitted (before anything else uses the
        queue: uploads, copies, other command buffers)."""
        if self._open is not None:
            with self.lock:
                self._submit_open()

    def _submit_open(self) -> None:
        if self._open is None:
            return
        lib = self._lib
        enc, cpass = self._open
        self._open = None
        self.serial += 1
        lib.wgpuComputePassEncoderEnd(cpass)
        lib.wgpuComputePassEncoderRelease(cpass)
        cb = lib.wgpuCommandEncoderFinish(enc, self._cb)
        lib.wgpuCommandEncoderRelease(enc)
        self._cbs[0] = cb
        lib.wgpuQueueSubmit(self._queue, 1, self._cbs)
        lib.wgpuCommandBufferRelease(cb)
        self._held.clear()

    def wait(self, spin: bool) -> None:
        """Until the queue has run everything submitted. ``spin``: poll without blocking for up
        to SPIN_S first (a blocking poll sleeps in the driver and wakes late: 50-100 us on an
        H200 and on lavapipe, against about 10 us polling), then block. CPU adapters should
        not spin: the poller takes a core from the driver's own threads (lavapipe, 2 cores,
        2^16 float32 kernel: 954 us spinning, 20 us blocking). FUSEJIT_VULKAN_WAIT=block or
        spin overrides the choice."""
        how = os.environ.get("FUSEJIT_VULKAN_WAIT", "")
        if how:
            spin = how == "spin"
        if self.raw:
            self.flush()
            poll, dev, null = self._poll, self._dev, self._ffi.NULL
            if spin:
                end = time.perf_counter() + SPIN_S
                while not poll(dev, False, null) & 0xFF:  # (the low byte: see the module doc)
                    if time.perf_counter() > end:
                        break
                else:
                    return
            poll(dev, True, null)
            return
        self.device._poll_wait()
