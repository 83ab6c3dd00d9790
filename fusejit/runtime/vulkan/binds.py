"""The bind groups of one kernel: cached by the buffers they bind, made through wgpu-native's C
function with a descriptor filled in place.

A call whose buffers no cached group binds (its outputs kept, so the pool hands out new
buffers; inputs that are earlier calls' results) makes one. wgpu-py's ``create_bind_group``
builds a cffi struct per entry, an array and a descriptor for it, ~70 us on a 2-core host; this
fills one descriptor made with the kernel's layout and rewrites only the buffers and sizes.
The groups are kept least recently used first, up to ``CACHE`` per kernel (they hold their
buffers, which the device's pool holds anyway). Any mismatch with wgpu-py's internals makes
them through its public API.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

CACHE = 256  # bind groups kept per kernel


class BindGroups:
    """Bind groups for ``layout`` binding storage buffers 0..n-1 and, at n, one of the kernel's
    uniform buffers (``uniform_size`` bytes). Not thread-safe: callers hold the recorder's
    lock (executable.VulkanExecutable.run)."""

    def __init__(self, device: Any, layout: Any, n: int, uniform_size: int) -> None:
        self.device, self.layout, self.n, self.uniform_size = device, layout, n, uniform_size
        self.cache: OrderedDict[tuple, Any] = OrderedDict()
        try:
            from wgpu.backends.wgpu_native._api import (
                GPUBindGroup,
                ffi,
                libf,
                new_struct_p,
                to_c_string_view,
            )

            self._entries = ffi.new("WGPUBindGroupEntry[]", n + 1)
            for i in range(n + 1):
                e = self._entries[i]
                e.nextInChain, e.binding, e.offset = ffi.NULL, i, 0
                e.sampler, e.textureView = ffi.NULL, ffi.NULL
            self._desc = new_struct_p("WGPUBindGroupDescriptor *", label=to_c_string_view(""),
                                      layout=layout._internal, entries=self._entries,
                                      entryCount=n + 1)
            self._create, self._wrap = libf.wgpuDeviceCreateBindGroup, GPUBindGroup
            self._dev = device._internal
            self.raw = True
        except (ImportError, AttributeError, TypeError):  # wgpu-py's internals changed
            self.raw = False

    def get(self, buffers: Sequence[Any], uniform: Any) -> Any:
        """The group binding ``buffers`` (wgpu GPUBuffers, bound whole) and ``uniform``."""
        key = (*buffers, uniform)
        cache = self.cache
        group = cache.get(key)
        if group is not None:
            cache.move_to_end(key)
            return group
        group = self._make(buffers, uniform)
        cache[key] = group
        if len(cache) > CACHE:
            cache.popitem(last=False)
        return group

    def _make(self, buffers: Sequence[Any], uniform: Any) -> Any:
        if not self.raw:
            entries = [{"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                       for i, b in enumerate(buffers)]
            entries.append({"binding": self.n, "resource": {
                "buffer": uniform, "offset": 0, "size": self.uniform_size}})
            return self.device.create_bind_group(layout=self.layout, entries=entries)
        entries = self._entries
        for i, b in enumerate(buffers):
            e = entries[i]
            e.buffer, e.size = b._internal, b.size
        e = entries[self.n]
        e.buffer, e.size = uniform._internal, self.uniform_size
        return self._wrap("", self._create(self._dev, self._desc), self.device)
