"""The Vulkan backend: GLSL compute shaders (targets/glsl/target.py) run through wgpu.

The ``Backend`` (runtime/backend.py) the runtime dispatches to, registered when this package is
imported; wgpu itself is imported only when a device is opened (runtime/vulkan/device.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fusejit.targets.base import Target
from fusejit.runtime.backend import Backend, DeviceInfo, register


class VulkanBackend(Backend):
    name = "vulkan"

    def default_queue(self) -> Any:
        from fusejit.runtime.vulkan.device import default_device

        return default_device()

    def device_info(self, queue: Any) -> DeviceInfo:
        return queue.info

    def target(self, info: DeviceInfo) -> Target:
        from fusejit.targets.glsl.target import GLSLTarget

        from fusejit.runtime.vulkan.device import features_of

        return GLSLTarget(features_of(info))

    def executable(self, lowered: Any, outputs: Sequence[Any], treedef: Any,
                   constants: dict[int, Any], queue: Any, host_mode: bool, autotune: bool,
                   name: str) -> Any:
        from fusejit.errors import UnsupportedOperationError
        from fusejit.runtime.vulkan.executable import VulkanExecutable

        if any(g.kind == "svd" for g in lowered.plan.groups):
            raise UnsupportedOperationError(
                "singular values (np.linalg.svd, matrix norms of ord 2, -2, 'nuc') run on "
                "OpenCL only for now; call this function with pyopencl arrays or "
                "fusejit.set_default_device('opencl')")
        return VulkanExecutable(lowered, outputs, treedef, constants, queue, host_mode, name)


VULKAN = VulkanBackend()
register(VULKAN)  # (its devices name it: VulkanDevice.fusejit_backend)
