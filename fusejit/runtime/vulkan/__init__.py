"""The Vulkan backend: GLSL compute shaders run through wgpu; ``backend.py`` is the ``Backend``
the runtime dispatches to, registered (runtime/backend.py) when this package is imported."""

from fusejit.runtime.vulkan import backend as backend  # noqa: F401 - registers VULKAN
