"""Implementations a workload runs as: fusejit, unfused pyopencl, NumPy, numexpr and peers.

Every backend turns (workload, host inputs) into a ``call()`` that enqueues one call and a
``sync(out)`` that waits for it (``queue.finish()``, ``torch.cuda.synchronize()``,
``block_until_ready``); ``run()`` is the two together. All of them are timed the same ways: one
synchronized call at a time, and many calls back to back with one wait (throughput). Peers are imported lazily: one that is missing or fails is reported
as such and never stops the run.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from fusejit.bench.clshim import ClNamespace
from fusejit.bench.workloads import Workload

# the order of columns in the table
ALL = ("fused", "fused-cuda", "vulkan", "unfused", "numpy", "numexpr", "torch", "torch.compile", "cupy",
       "cupy.fuse", "jax.jit")
OPENCL = ("fused", "unfused")  # the implementations on the OpenCL device


class Unsupported(Exception):
    """This backend cannot run this workload (reported, not an error)."""


@dataclass
class Prepared:
    """A workload ready to time: ``call()`` enqueues one call, ``sync(out)`` waits for it (host
    implementations need no wait), ``run()`` does both."""

    call: Callable[[], Any]
    to_numpy: Callable[[Any], list[np.ndarray]]
    sync: Callable[[Any], None] | None = None  # None: call() returns a finished result

    @property
    def asynchronous(self) -> bool:
        return self.sync is not None

    def run(self) -> Any:
        out = self.call()
        if self.sync is not None:
            self.sync(out)
        return out


def _leaves(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _get(out: Any) -> list[np.ndarray]:
    return [a.get() for a in _leaves(out)]


class Backend:
    """One implementation. ``probe()`` returns why it is unavailable, or None."""

    name = ""

    def __init__(self, queue: cl.CommandQueue) -> None:
        self.queue = queue
        self.device = ""
        self.version = ""

    def probe(self) -> str | None:
        return None

    def prepare(self, wl: Workload, host: list[np.ndarray]) -> Prepared:
        raise NotImplementedError

    def _finish(self, out: Any) -> None:
        self.queue.finish()


def _opencl_device(queue: cl.CommandQueue) -> str:
    return f"opencl: {queue.device.name.strip()} ({queue.device.platform.name.strip()})"


class FusedBackend(Backend):
    name = "fused"

    def probe(self) -> str | None:
        import fusejit

        self.device, self.version = _opencl_device(self.queue), fusejit.__version__
        return None

    def prepare(self, wl: Workload, host: list[np.ndarray]) -> Prepared:
        from fusejit import fuse

        f = fuse(_bind(wl.fn, np, wl.family))
        dev = [cla.to_device(self.queue, a) for a in host]
        return Prepared(functools.partial(f, *dev), _get, self._finish)


class VulkanFusedBackend(Backend):
    """The same fused function on the Vulkan device (GLSL through wgpu), fusejit.vulkan arrays
    in and out."""

    name = "vulkan"

    def probe(self) -> str | None:
        import fusejit
        from fusejit.vulkan import default_device, vulkan_available

        why = vulkan_available()
        if why is not None:
            return why
        self.vk = default_device()
        self.device, self.version = f"vulkan: {self.vk.name}", fusejit.__version__
        return None

    def prepare(self, wl: Workload, host: list[np.ndarray]) -> Prepared:
        from fusejit import fuse
        from fusejit.vulkan import to_device

        f = fuse(_bind(wl.fn, np, wl.family))
        dev = [to_device(a, self.vk) for a in host]
        return Prepared(functools.partial(f, *dev), _get, lambda out: self.vk.finish())


class CudaFusedBackend(Backend):
    """The same fused function on the CUDA device, on torch CUDA tensors (adopted without a
    copy, results returned as torch tensors, work on torch's current stream)."""

    name = "fused-cuda"

    def probe(self) -> str | None:
        import fusejit
        from fusejit.runtime.backend import backend_named

        try:
            import torch
        except ImportError:
            return "torch is not installed (fused-cuda runs on torch CUDA tensors)"
        if not torch.cuda.is_available():
            return "no CUDA GPU"
        dev = backend_named("cuda").default_queue()
        if dev.device is None:
            return "no CUDA GPU (or no fusejit[cuda] extra)"
        self.torch = torch
        self.device, self.version = f"cuda: {dev.name} ({dev.arch})", fusejit.__version__
        return None

    def prepare(self, wl: Workload, host: list[np.ndarray]) -> Prepared:
        from fusejit import fuse

        torch = self.torch
        f = fuse(_bind(wl.fn, np, wl.family))
        dev = [torch.from_numpy(a).to("cuda") for a in host]
        return Prepared(functools.partial(f, *dev),
                        lambda out: [t.cpu().numpy() for t in _leaves(out)],
                        lambda out: torch.cuda.synchronize())


class UnfusedBackend(Backend):
    name = "unfused"

    def probe(self) -> str | None:
        self.device, self.version = _opencl_device(self.queue), cl.VERSION_TEXT
        self.ns = ClNamespace(self.queue)
        return None

    def prepare(self, wl: Workload, host: list[np.ndarray]) -> Prepared:
        if wl.family in ("gemm", "mlp"):
            raise Unsupported("pyopencl.array has no matrix product")
        if wl.family == "scan":
            raise Unsupported("pyopencl.array has no cumsum (pyopencl.scan is a kernel builder)")
        dev = [self.ns.asarray(a) for a in host]
        return Prepared(functools.partial(wl.fn, self.ns, *dev), _get, self._finish)


class NumpyBackend(Backend):
    name = "numpy"

    def probe(self) -> str | None:
        self.device, self.version = "host", np.__version__
        return None

    def prepare(self, wl: Workload, host: list[np.ndarray]) -> Prepared:
        return Prepared(functools.partial(wl.fn, np, *host), _leaves)


_FLOAT = re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
                    r"|\d+[eE][-+]?\d+)")


@functools.cache
def _float32_literals(expr: str) -> tuple[str, tuple[np.float32, ...]]:
    """numexpr reads ``1.5`` as a double and promotes float32 arrays to float64; NumPy (NEP 50)
    keeps float32. Replace each float literal by a float32 variable to compute like NumPy."""
    names: dict[str, str] = {}

    def sub(m: re.Match[str]) -> str:
        return names.setdefault(m.group(0), f"_c{len(names)}")
    return _FLOAT.sub(sub, expr), tuple(np.float32(text) for text in names)


def numexpr_eval(expr: str, **arrays: Any) -> np.ndarray:
    """``numexpr.evaluate`` with NumPy's float32 semantics for float literals."""
    import numexpr

    rewritten, consts = _float32_literals(expr)
    arrays.update({f"_c{i}": c for i, c in enumerate(consts)})
    return numexpr.evaluate(rewritten, local_dict=arrays)


class NumexprBackend(Backend):
    name = "numexpr"

    def probe(self) -> str | None:
        try:
            import numexpr
        except ImportError:
            return "not installed (pip install numexpr)"
        self.device = f"host, {numexpr.nthreads} threads"
        self.version = numexpr.__version__
        return None

    def prepare(self, wl: Workload, host: list[np.ndarray]) -> Prepared:
        if wl.numexpr is None:
            raise Unsupported("no numexpr spelling")
        return Prepared(functools.partial(wl.numexpr, numexpr_eval, *host), _leaves)


class TorchNamespace:
    """NumPy spellings over torch (torch names the keyword ``dim``/``keepdim``)."""

    def __init__(self, torch: Any) -> None:
        self.t = torch
        self.abs, self.exp, self.log = torch.abs, torch.exp, torch.log
        self.sqrt, self.tanh, self.where = torch.sqrt, torch.tanh, torch.where
        self.sin, self.cos, self.arcsin = torch.sin, torch.cos, torch.arcsin

    def maximum(self, a: Any, b: Any) -> Any:
        if not isinstance(b, self.t.Tensor):
            return self.t.clamp(a, min=b)
        return self.t.maximum(a, b)

    def max(self, x: Any, axis: int, keepdims: bool = False) -> Any:
        return self.t.amax(x, dim=axis, keepdim=keepdims)

    def sum(self, x: Any, axis: int, keepdims: bool = False) -> Any:
        return self.t.sum(x, dim=axis, keepdim=keepdims)

    def mean(self, x: Any, axis: int, keepdims: bool = False) -> Any:
        return self.t.mean(x, dim=axis, keepdim=keepdims)

    def cumsum(self, x: Any, axis: int) -> Any:
        return self.t.cumsum(x, dim=axis)


class TorchBackend(Backend):
    name = "torch"
    compiled = False

    def probe(self) -> str | None:
        try:
            import torch
        except ImportError:
            return "not installed"
        self.torch = torch
        # FP32 products in FP32 (the GEMM issue's anchor): TF32 rounds the operands to 10 bits
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.cuda = torch.cuda.is_available()
        self.dev = "cuda" if self.cuda else "cpu"
        self.device = f"cuda: {torch.cuda.get_device_name()}" if self.cuda else "cpu"
        self.version = torch.__version__
        self.ns = TorchNamespace(torch)
        return None

    def prepare(self, wl: Workload, host: list[np.ndarray]) -> Prepared:
        torch = self.torch
        dev = [torch.from_numpy(a).to(self.dev) for a in host]
        fn = _bind(wl.fn, self.ns, wl.family)
        if self.compiled:
            # every case compiles afresh: dynamo would otherwise pile all cases onto one code
            # object and fall back to eager past its recompile limit
            torch._dynamo.reset()
            fn = torch.compile(fn)

        def call() -> Any:
            with torch.inference_mode():
                return fn(*dev)

        def sync(out: Any) -> None:
            torch.cuda.synchronize()
        return Prepared(call, lambda out: [t.detach().cpu().numpy() for t in _leaves(out)],
                        sync if self.cuda else None)


class TorchCompileBackend(TorchBackend):
    name = "torch.compile"
    compiled = True


class CupyBackend(Backend):
    name = "cupy"
    fused = False

    def probe(self) -> str | None:
        try:
            import cupy
            n = cupy.cuda.runtime.getDeviceCount()
        except ImportError:
            return "not installed"
        except Exception as exc:  # noqa: BLE001 (a cupy without a usable CUDA driver)
            return f"no CUDA device ({type(exc).__name__})"
        if n == 0:
            return "no CUDA device"
        self.cupy = cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        self.device = f"cuda: {props['name'].decode()}"
        self.version = cupy.__version__
        return None

    def prepare(self, wl: Workload, host: list[np.ndarray]) -> Prepared:
        cupy = self.cupy
        dev = [cupy.asarray(a) for a in host]
        fn = _bind(wl.fn, cupy, wl.family)
        if self.fused:
            fn = cupy.fuse(kernel_name=wl.family)(fn)  # with options, fuse is a decorator
        stream = cupy.cuda.get_current_stream()
        return Prepared(functools.partial(fn, *dev), lambda out: [cupy.asnumpy(a) for a in _leaves(out)],
                        lambda out: stream.synchronize())


class CupyFuseBackend(CupyBackend):
    name = "cupy.fuse"
    fused = True


class JaxBackend(Backend):
    name = "jax.jit"

    def probe(self) -> str | None:
        # jax grabs 75% of GPU memory at first use by default, starving the other GPU libraries
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        try:
            import jax
            import jax.numpy as jnp
            device = jax.devices()[0]
        except ImportError:
            return "not installed"
        self.jax, self.jnp = jax, jnp
        self.device = f"{device.platform}: {getattr(device, 'device_kind', device)}"
        self.version = jax.__version__
        return None

    def prepare(self, wl: Workload, host: list[np.ndarray]) -> Prepared:
        jax = self.jax
        dev = [jax.device_put(a) for a in host]
        fn = jax.jit(_bind(wl.fn, self.jnp, wl.family))
        return Prepared(functools.partial(fn, *dev), lambda out: [np.asarray(a) for a in _leaves(out)],
                        jax.block_until_ready)


def _bind(fn: Callable[..., Any], xp: Any, name: str) -> Callable[..., Any]:
    """``fn(xp, *arrays)`` as a function of the arrays alone, named for kernel names."""
    def bound(*arrays: Any) -> Any:
        return fn(xp, *arrays)
    bound.__name__ = bound.__qualname__ = name
    return bound


BACKENDS: dict[str, type[Backend]] = {
    b.name: b for b in (FusedBackend, CudaFusedBackend, VulkanFusedBackend, UnfusedBackend, NumpyBackend,
                        NumexprBackend,
                        TorchBackend, TorchCompileBackend, CupyBackend, CupyFuseBackend,
                        JaxBackend)
}
