"""Shader modules without naga's runtime bounds checks.

wgpu clamps or skips every storage-buffer access it cannot prove in bounds (naga's
``BoundsChecks``), which costs a compare and select per load and store. fusejit's index math
stays in bounds by construction (the same kernels run unchecked on OpenCL), so it builds its
modules through wgpu-native's ``wgpuDeviceCreateShaderModuleTrusted`` with no runtime checks.
wgpu-py 0.32 does not wrap that call; this builds the same GLSL descriptor its
``create_shader_module`` does. ``FUSEJIT_VULKAN_BOUNDS_CHECKS=1`` keeps the checks, and any
mismatch with wgpu-py's internals falls back to the checked module.
"""

from __future__ import annotations

import os
from typing import Any


def create_module(device: Any, code: str, label: str, wgsl: bool = False) -> Any:
    """A compute shader module from GLSL source (``label`` must name "comp"), or from WGSL."""
    if os.environ.get("FUSEJIT_VULKAN_BOUNDS_CHECKS", "") in ("", "0"):
        try:
            return _trusted(device, code, label, wgsl)
        except (ImportError, AttributeError, TypeError):
            pass  # wgpu-py's internals changed: the public, checked path
    return device.create_shader_module(code=code, label=label)


def _trusted(device: Any, code: str, label: str, wgsl: bool) -> Any:
    from wgpu import flags
    from wgpu.backends.wgpu_native import _api
    from wgpu.backends.wgpu_native._api import (
        ffi,
        lib,
        libf,
        new_array,
        new_struct_p,
        to_c_string_view,
    )

    if wgsl:
        source = new_struct_p("WGPUShaderSourceWGSL *", code=to_c_string_view(code))
        source[0].chain.sType = lib.WGPUSType_ShaderSourceWGSL
    else:
        source = new_struct_p("WGPUShaderSourceGLSL *", code=to_c_string_view(code),
                              stage=flags.ShaderStage.COMPUTE, defineCount=0,
                              defines=new_array("WGPUShaderDefine[]", []))
        source[0].chain.sType = lib.WGPUSType_ShaderSourceGLSL
    source[0].chain.next = ffi.NULL
    desc = new_struct_p("WGPUShaderModuleDescriptor *",
                        nextInChain=ffi.cast("WGPUChainedStruct *", source),
                        label=to_c_string_view(label))
    # runtimeChecks = 0: no WGPUShaderRuntimeChecks_BoundsChecks
    handle = libf.wgpuDeviceCreateShaderModuleTrusted(device._internal, desc, 0)
    if handle == ffi.NULL:
        raise RuntimeError("shader module creation failed")
    return _api.GPUShaderModule(label, handle, device)
