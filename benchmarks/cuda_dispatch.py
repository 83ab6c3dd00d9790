"""Per-call cost of a cached fused call on CUDA (issue 33: <= 12 µs synchronized, <= 5 µs back
to back): the 1024-element 8-op chain (fusejit.bench.workloads.chain_fn) on torch tensors and
CuPy arrays, fused on CUDA with its fast path (runtime/cuda/launch.py) and without it
(``FUSEJIT_CUDA_FAST=0``: every call through ``CUDAExecutable.run``), next to fusejit on
OpenCL, torch eager, CuPy and cupy.fuse. Each row's values are checked against NumPy first.
"synchronized": median µs of one call and a wait for it; "back to back": µs per call of many
calls and one wait.

``--host`` times fusejit's Python alone, the launches stubbed out (CPU time, best of rounds):
on a GPU, the real call path with ``cuLaunchKernel`` (fast path) and cuda-core's ``launch``
(full path) replaced by no-ops, torch still allocating the results; without a GPU, the
generated launcher of the chain lowered for the abstract CUDA device, on the test doubles of
tests/runtime/cuda_doubles.py (stand-in arrays and driver: a floor, without torch's own
attribute reads and allocation).

    PYTHONPATH=. python benchmarks/cuda_dispatch.py            # on a GPU
    PYTHONPATH=. python benchmarks/cuda_dispatch.py --host     # Python dispatch only
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import timeit
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fusejit import fuse
from fusejit.bench import backends
from fusejit.bench.timing import _per_call_us
from fusejit.bench.workloads import chain

CHAIN = chain(8, 1024)


@contextlib.contextmanager
def fast_path(on: bool) -> Iterator[None]:
    """The CUDA fast path on or off for the launchers made inside (launch.enabled)."""
    old = os.environ.get("FUSEJIT_CUDA_FAST")
    os.environ["FUSEJIT_CUDA_FAST"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["FUSEJIT_CUDA_FAST"]
        else:
            os.environ["FUSEJIT_CUDA_FAST"] = old


def _fused(library: str, host: list[np.ndarray]) -> backends.Prepared:
    """The fused chain on CUDA, on ``library``'s arrays (results of the same type)."""
    f = fuse(lambda x: CHAIN.fn(np, x))
    if library == "torch":
        import torch

        dev = [torch.from_numpy(a).to("cuda") for a in host]
        return backends.Prepared(lambda: f(*dev), lambda out: [out.cpu().numpy()],
                                 lambda out: torch.cuda.synchronize())
    import cupy

    dev = [cupy.asarray(a) for a in host]
    return backends.Prepared(lambda: f(*dev), lambda out: [cupy.asnumpy(out)],
                             lambda out: cupy.cuda.get_current_stream().synchronize())


def _peer(name: str, queue: Any) -> Callable[[list[np.ndarray]], backends.Prepared]:
    def make(host: list[np.ndarray]) -> backends.Prepared:
        backend = backends.BACKENDS[name](queue)
        why = backend.probe()
        if why is not None:
            raise backends.Unsupported(why)
        return backend.prepare(CHAIN, host)
    return make


def rows(queue: Any) -> list[tuple[str, bool, Callable[[list[np.ndarray]], Any]]]:
    """(name, fast path on, make(host) -> Prepared)."""
    out = []
    for library in ("torch", "cupy"):
        for on in (True, False):
            out.append((f"fused-cuda, {library}{'' if on else ', no fast path'}", on,
                        lambda host, lib=library: _fused(lib, host)))
    out += [("fused OpenCL", True, _peer("fused", queue)), ("torch eager", True, _peer("torch", queue)),
            ("cupy", True, _peer("cupy", queue)), ("cupy.fuse", True, _peer("cupy.fuse", queue))]
    return out


def timed(n: int) -> None:
    try:
        import fusejit

        queue = fusejit.default_queue()
    except Exception:  # noqa: BLE001 - no OpenCL here: its row says so
        queue = None
    host = CHAIN.make_inputs()
    want = CHAIN.fn(np, host[0])
    print(f"{CHAIN.name}: µs per call (median of {n} synchronized calls; back to back: "
          f"{n} calls, one wait)")
    for name, on, make in rows(queue):
        with fast_path(on):
            try:
                prepared = make(host)
                got = prepared.to_numpy(prepared.run())[0]
            except Exception as exc:  # noqa: BLE001 - a peer missing or failing: said, skipped
                print(f"{name:34s} unavailable ({type(exc).__name__}: {exc})")
                continue
            np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=name)
            us = _per_call_us(prepared.call, lambda p=prepared: p.sync(None), n)
        print(f"{name:34s} {us['us_per_call']:8.2f} synchronized {us['us_per_call_batched']:8.2f}"
              " back to back")


class _Stub:
    """A module with one function replaced (the others its own)."""

    def __init__(self, module: Any, name: str, value: Any) -> None:
        self._module, self._name, self._value = module, name, value

    def __getattr__(self, name: str) -> Any:
        return self._value if name == self._name else getattr(self._module, name)


def _cpu_us(call: Callable[[], Any], number: int = 2000, repeat: int = 15) -> float:
    call(), call()
    return min(timeit.repeat(call, number=number, repeat=repeat,
                             timer=time.process_time)) / number * 1e6


def host_gpu() -> None:
    """The real call path on a GPU, launches stubbed out."""
    import fusejit.runtime.cuda.executable as exe

    drv, core = exe.driver(), exe.core()
    exe.driver = lambda: _Stub(drv, "cuLaunchKernel", lambda *a: (0,))
    exe.core = lambda: _Stub(core, "launch", lambda *a: None)
    host = CHAIN.make_inputs()
    print(f"{CHAIN.name}: fusejit's Python per cached call, launches stubbed (CPU µs, best of "
          "rounds)")
    for library in ("torch", "cupy"):
        for on in (True, False):
            with fast_path(on):
                try:
                    prepared = _fused(library, host)
                except ImportError as exc:
                    print(f"{library}: unavailable ({exc})")
                    break
                print(f"fused-cuda, {library}{'' if on else ', no fast path':16s} "
                      f"{_cpu_us(prepared.call):8.2f} µs")


def host_doubles() -> None:
    """No GPU: the chain's generated launcher on stand-in arrays, a driver whose launch does
    nothing and an allocator that hands out one array (the launcher's own cost)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "runtime"))
    from cuda_doubles import FakeArray, FakeDriver, FakeLibrary, build, part_fake

    from fusejit.runtime import backend
    from fusejit.runtime.cuda import launch

    class Allocated(FakeLibrary):
        def empty(self, ordinal: int) -> Any:
            out = FakeArray(0x20000, (1024,))
            return lambda shape, dtype: (out, out.ptr)

    class Quiet(FakeDriver):
        def cuLaunchKernel(self, *args: Any) -> tuple:
            return (0,)

    launch.LIBRARIES["fake"] = Allocated()
    backend.FAST_PARTS[FakeArray] = part_fake
    args = (FakeArray(0x10000, (1024,)),)
    guarded, _, _ = build(lambda x: CHAIN.fn(np, x), args, Quiet({}))
    print(f"{CHAIN.name}: the generated launcher alone, stand-in arrays, allocator and driver "
          f"(no GPU): {_cpu_us(lambda: guarded(args)):.2f} µs per call (CPU, best of rounds)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", action="store_true", help="time fusejit's Python only")
    parser.add_argument("-n", type=int, default=2000, help="calls per measurement")
    args = parser.parse_args()
    from fusejit.runtime.cuda.device import gpu_count

    if not args.host:
        if gpu_count() == 0:
            sys.exit("no CUDA GPU here: run with --host for fusejit's Python cost")
        timed(args.n)
    elif gpu_count():
        host_gpu()
    else:
        host_doubles()


if __name__ == "__main__":
    main()
