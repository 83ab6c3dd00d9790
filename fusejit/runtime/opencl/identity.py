"""What names an OpenCL device: its platform, name, driver and version strings, queried once
per device and shared by its DeviceInfo (``key``, runtime/opencl/devices.py) and the disk
cache's program keys (``ident``, runtime/opencl/build.py): PoCL's CL_DEVICE_VERSION alone costs
~0.1 ms a query, on a process's first call. Below both, so a build never imports the device
module (whose lazy probes build kernels)."""

from __future__ import annotations

from functools import cache

import pyopencl as cl


@cache
def device_identity(device: cl.Device) -> tuple[str, tuple[str, str, str]]:
    """(key, ident) of ``device``: ``DeviceInfo.key`` ("platform / device / driver / version":
    what can make a binary stale) and the disk cache's device identity (platform name and
    version, device name, driver and OpenCL versions)."""
    platform = device.platform
    pname, name = platform.name.strip(), device.name.strip()
    driver, version = device.driver_version.strip(), device.version.strip()
    key = f"{pname} / {name} / {driver} / {version}"
    ident = (f"{pname} {platform.version.strip()}", name, f"{driver} / {version}")
    return key, ident
