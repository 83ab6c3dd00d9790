"""Exit 0 when some OpenCL CPU device here can build a kernel, else 1 (printing each failure).

.ci/run asks before the tests: the pocl wheel's LLVM 14 does not know processors newer than it
(AMD Zen 5 builds nothing: "unknown target CPU 'generic'"), and then CI installs the system's
PoCL, which picks its target by the CPU's features. It runs before fusejit is installed, with
only its runtime dependencies, on fusejit's own probe (runtime/opencl/devices.py ``build_failure``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # (the checkout's fusejit)

import pyopencl as cl

from fusejit.runtime.opencl.devices import build_failure


def main() -> int:
    for platform in cl.get_platforms():
        for device in platform.get_devices(cl.device_type.CPU):
            why = build_failure(device)
            if why is None:
                return 0
            print(f"{device.name.strip()} ({platform.version.strip()}): {why}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
