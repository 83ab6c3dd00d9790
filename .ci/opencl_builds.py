"""Exit 0 when some OpenCL CPU device here can build a kernel, else 1 (printing each failure).

.ci/run asks before the tests: the pocl wheel's LLVM 14 does not know processors newer than it
(AMD Zen 5 builds nothing: "unknown target CPU 'generic'"), and then CI installs the system's
PoCL, which picks its target by the CPU's features. Standalone (only pyopencl), as it runs
before fusejit is installed.
"""

from __future__ import annotations

import sys

import pyopencl as cl

SOURCE = "__kernel void k(__global float *a) { a[get_global_id(0)] += 1.0f; }"


def main() -> int:
    for platform in cl.get_platforms():
        for device in platform.get_devices(cl.device_type.CPU):
            try:
                cl.Program(cl.Context([device]), SOURCE).build()
            except cl.Error as exc:
                lines = [ln for ln in str(exc).splitlines() if "error" in ln.lower()]
                print(f"{device.name.strip()} ({platform.version.strip()}): "
                      f"{(lines or [str(exc)])[-1].strip()}", file=sys.stderr)
            else:
                return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
