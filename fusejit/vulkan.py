"""Vulkan device arrays: ``fusejit.vulkan.to_device(x)`` puts a NumPy array on the Vulkan
device (through wgpu); fused functions called with such arrays run there as GLSL compute
shaders and return ``fusejit.vulkan.Array`` results (``.get()`` copies one back).

    >>> import fusejit, fusejit.vulkan as fv
    >>> x = fv.to_device(np.arange(8, dtype=np.float32))
    >>> f(x).get()
"""

from __future__ import annotations

from fusejit.runtime.vulkan.array import Array, empty, supported_dtypes, to_device
from fusejit.runtime.vulkan.device import VulkanDevice, default_device, vulkan_available

__all__ = ["Array", "VulkanDevice", "default_device", "empty", "supported_dtypes", "to_device",
           "vulkan_available"]
