"""Child process of :func:`fusejit.bench.timing.cold_compile`: one cold GELU first call.

Run with kernel caches off (the parent sets the environment). Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cla


def main(size: int) -> dict[str, float]:
    import fusejit
    from fusejit import fuse

    from fusejit.bench.backends import _bind
    from fusejit.bench.workloads import gelu

    queue = fusejit.default_queue()
    clock = time.perf_counter
    # the process's first build also pays one-off compiler start-up; keep that out of the number
    t0 = clock()
    cl.Program(queue.context, "__kernel void warm(__global float *x) { x[0] = 1.0f; }").build()
    first_build = clock() - t0
    x = cla.to_device(queue, np.linspace(-4, 4, size, dtype=np.float32))
    queue.finish()

    t0 = clock()
    lowered = fuse(_bind(gelu, np, "gelu")).lower(x)  # trace + passes + emit, no build
    python_side = clock() - t0

    f = fuse(_bind(gelu, np, "gelu"))
    calls = []
    for _ in range(3):  # compile; autotune (large kernels, second call); warm
        t0 = clock()
        f(x)
        queue.finish()
        calls.append(clock() - t0)
    return {"size": size, "first_call_s": calls[0], "python_side_s": python_side,
            "build_and_launch_s": calls[0] - python_side, "second_call_s": calls[1],
            "warm_call_s": calls[2], "process_first_build_s": first_build,
            "kernels": len(lowered.kernels), "source_chars": len(lowered.source)}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]))))
