"""wgpu-py's C types, parsed in one go before the first device opens.

wgpu-py (0.32) drives wgpu-native through cffi in ABI mode: the first ``ffi.new(
"WGPUBindGroupLayoutEntry[]")`` of a process parses that type string with pycparser, behind a
preamble that declares again every one of wgpu.h's ~900 type names, about 40 ms a string on a
2-core host whatever the string. Opening a device and a first call use about 50 strings: 1.7 s
of a process's first Vulkan call (lavapipe host, 1.5 s of the 1.5 s ``default_device()`` took).
``prime`` parses them as the parameters of one declaration, as cffi's own ``parse_type`` does for
one (``void __dummy(<type>);``), and fills cffi's cache with what cffi would have computed, under
one preamble. Any mismatch with cffi's internals primes nothing: each type is then parsed when
first used, as before.
"""

from __future__ import annotations

from typing import Any

# the type strings wgpu-py 0.32 and fusejit (record.py, trusted.py) parse to open a device and
# run, upload and read back a first call (GLSL and WGSL kernels); the exact strings (cffi keys
# its cache by them, trailing space included)
TYPES = (
    "WGPURequestAdapterOptions *",
    "void(WGPURequestAdapterStatus, WGPUAdapter, WGPUStringView, void *, void *)",
    "WGPURequestAdapterCallbackInfo *", "WGPUInstanceDescriptor *", "WGPUAdapterInfo *",
    "WGPUChainedStruct *", "WGPUChainedStruct * ", "WGPUNativeLimits *", "WGPULimits *",
    "char []", "WGPUQueueDescriptor *", "WGPUDeviceExtras *",
    "void(WGPUDevice const *, WGPUDeviceLostReason, WGPUStringView, void *, void *)",
    "WGPUDeviceLostCallbackInfo *",
    "void(WGPUDevice const *, WGPUErrorType, WGPUStringView, void *, void *)",
    "WGPUUncapturedErrorCallbackInfo *", "WGPUFeatureName[]", "WGPUDeviceDescriptor *",
    "void(WGPURequestDeviceStatus, WGPUDevice, WGPUStringView, void *, void *)",
    "WGPURequestDeviceCallbackInfo *", "WGPUShaderSourceGLSL *", "WGPUShaderSourceWGSL *",
    "WGPUShaderModuleDescriptor *", "WGPUComputeState *", "WGPUComputePipelineDescriptor *",
    "WGPUBufferDescriptor *", "intptr_t", "uintptr_t", "WGPUBindGroupEntry *",
    "WGPUBindGroupEntry[]", "WGPUBindGroupDescriptor *", "WGPUCommandEncoderDescriptor *",
    "WGPUComputePassDescriptor *", "WGPUCommandBufferDescriptor *", "WGPUCommandBuffer[]",
    "WGPUCommandBuffer[1]", "void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)",
    "WGPUBufferMapCallbackInfo *", "uint32_t []", "uint8_t []", "uint8_t *",
    "WGPUBufferBindingLayout *", "WGPUBindGroupLayoutEntry *", "WGPUBindGroupLayoutEntry[]",
    "WGPUBindGroupLayoutDescriptor *", "WGPUBindGroupLayout[]", "WGPUPipelineLayoutDescriptor *",
)


def prime(ffi: Any, types: tuple[str, ...] = TYPES) -> int:
    """Parse the ``types`` cffi's ``ffi`` has not parsed yet, all in one pycparser run, into
    its type cache; returns how many were added (0 where cffi's internals differ)."""
    try:
        todo = [t for t in dict.fromkeys(types) if t not in ffi._parsed_types]
        if not todo:
            return 0
        parser = ffi._parser
        with ffi._lock:
            ast = parser._parse("void __fusejit_types(\n{}\n);".format(",\n".join(todo)))[0]
            params = ast.ext[-1].type.args.params
            if len(params) != len(todo):
                return 0
            made = []
            for cdecl, node in zip(todo, params):  # (cffi's _typeof_locked, per parameter)
                tp = parser._get_type_and_quals(node.type)[0]
                raw = tp.is_raw_function
                if raw:
                    tp = tp.as_function_pointer()
                made.append((cdecl, (ffi._get_cached_btype(tp), raw)))
            for cdecl, result in made:
                ffi._parsed_types.setdefault(cdecl, result)
        return len(made)
    except Exception:  # noqa: BLE001 - cffi's internals changed, or a name wgpu.h lacks
        return 0


def prime_wgpu() -> int:
    """``prime`` wgpu-py's ffi (0 if wgpu-py is laid out otherwise)."""
    try:
        from wgpu.backends.wgpu_native._api import ffi
    except (ImportError, AttributeError):
        return 0
    return prime(ffi)
