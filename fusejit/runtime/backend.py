"""The backend interface: what fusejit needs of a compute API, and which backend runs a call.

A backend supplies the Target that spells its kernels, the facts about a device the compiler
needs (``DeviceInfo``), and builds an executable for a lowered call: it owns building programs,
allocating and copying buffers, launching and the device's limits. ``api.py`` talks only to
this interface; OpenCL (``runtime/opencl``), Vulkan (``runtime/vulkan``) and CUDA
(``runtime/cuda``) sit behind it, and another API (Metal) is one more Target plus one more
backend.

Backends register themselves here when their package is imported (``register``; the root
package imports both), so this module never imports a backend: the runtime's neutral layer
stays below them and each backend stays independent of the others.

The backend of a call follows its arguments: device arrays carry their device (a pyopencl
queue, a Vulkan or CUDA device; other libraries' arrays a backend adopts, see ``adopt``), and calls with only NumPy arrays run on the default device, chosen by
``set_default_device`` or the ``FUSEJIT_DEVICE`` environment variable (default: OpenCL).
"""

from __future__ import annotations

import abc
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fusejit.errors import DeviceUnavailableError
from fusejit.passes.partition import DeviceLimits
from fusejit.targets.base import Target

DEVICES = ("opencl", "vulkan", "cuda")


@dataclass(frozen=True)
class DeviceInfo:
    """The device facts codegen and the cost model depend on (all part of cache keys)."""

    key: str  # platform / device / driver / version: what can make a binary stale
    limits: DeviceLimits
    has_fp64: bool
    correctly_rounded_div_sqrt: bool
    is_cpu: bool
    max_alloc: int = 0  # CL_DEVICE_MAX_MEM_ALLOC_SIZE, bytes (0: unknown)
    global_mem: int = 0  # CL_DEVICE_GLOBAL_MEM_SIZE, bytes
    # the disk cache's device identity (runtime/opencl/build.program_key): platform name and
    # version, device name, driver and OpenCL versions, queried once per device
    # (runtime/opencl/identity.py)
    ident: tuple[str, ...] = ()
    simd_floats: int = 0  # float lanes of the device's native vectors (0: unknown)


class Backend(abc.ABC):
    """One compute API."""

    name: str

    @abc.abstractmethod
    def default_queue(self) -> Any:
        """What a call with only NumPy arguments runs on (an OpenCL queue, a Vulkan device)."""

    @abc.abstractmethod
    def device_info(self, queue: Any) -> DeviceInfo:
        """The device facts codegen and the cost model depend on (limits, features)."""

    @abc.abstractmethod
    def target(self, info: DeviceInfo) -> Target:
        """A fresh Target for one module on this device."""

    def products(self, queue: Any, info: DeviceInfo, precision: str, plan: Any,
                 autotune: bool | None) -> tuple[str | None, DeviceLimits, Any]:
        """What this call's matrix products get on ``queue``'s device: (why tensor cores
        cannot serve them, None when they can; the limits the GEMM configuration is chosen
        under, with ``wgmma`` where Hopper's warpgroup MMA runs; the ``Tuning`` of
        codegen/gemm/tune.py, or None for the heuristics)."""
        return "this device has no tensor-core kernels", info.limits, None

    @abc.abstractmethod
    def executable(self, lowered: Any, outputs: Sequence[Any], treedef: Any,
                   constants: dict[int, Any], queue: Any, host_mode: bool, autotune: bool,
                   name: str) -> Any:
        """Build the lowered module's kernels and return what runs them (``run``,
        ``launch``, ``guarded``, ``needs_run``, ``treedef``, ``queue_arg``)."""


class DeviceArray:
    """Base of fusejit's own device arrays (not pyopencl's): the attributes a call is
    specialised on, spelled as pyopencl spells them (strides and offset in bytes of the
    NumPy dtype, ``context`` and ``queue`` the device the array lives on)."""

    dtype: Any
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    context: Any
    queue: Any
    base_data: Any


_backends: dict[str, Backend] = {}  # name -> backend, as registered
# the backend of queues that do not name theirs (``fusejit_backend``): pyopencl's, whose
# CommandQueue fusejit cannot give an attribute
_unnamed: list[Backend] = []


def register(backend: Backend, *, unnamed_queues: bool = False) -> None:
    """Make ``backend`` available under ``backend.name`` (its package calls this when it is
    imported). ``unnamed_queues``: it owns every queue without a ``fusejit_backend``."""
    _backends[backend.name] = backend
    if unnamed_queues:
        _unnamed[:] = [backend]


def backend_named(name: str) -> Backend:
    """The registered backend called ``name`` (``"opencl"``, ``"vulkan"``)."""
    backend = _backends.get(name)
    if backend is None:
        raise DeviceUnavailableError(f"the {name} backend is not loaded (import fusejit)")
    return backend


_default = os.environ.get("FUSEJIT_DEVICE", "opencl").strip().lower() or "opencl"

# -- fork --------------------------------------------------------------------------------------------
# A driver opened before os.fork() does not work in the child: PoCL's worker threads and a GPU
# driver's context stay with the parent, and the child's first launch, or even a new context,
# waits on them forever. A child forked after this process opened a device refuses by name.

FORKED = ("this process was forked (os.fork, or multiprocessing's 'fork' start method, Linux's "
          "default before Python 3.14) after its parent used a fusejit device; OpenCL and Vulkan "
          "drivers do not survive a fork, and the call would hang. Start workers with "
          "multiprocessing.get_context('spawn') (or 'forkserver'), or fork before the parent's "
          "first fused call")
_opened = False  # this process opened or used a device (the backends call device_opened)
_forked = False  # ... and this is a child forked after that


def device_opened() -> None:
    """A backend opened (or first used) a device in this process; raises in a child forked
    after its parent did."""
    global _opened
    if _forked:
        raise DeviceUnavailableError(FORKED)
    _opened = True


def _after_fork_in_child() -> None:
    global _forked
    _forked = _opened


os.register_at_fork(after_in_child=_after_fork_in_child)


def set_default_device(name: str) -> None:
    """Run calls whose array arguments are all NumPy arrays on ``"opencl"`` (the default),
    ``"vulkan"`` or ``"cuda"``. The environment variable ``FUSEJIT_DEVICE`` sets the same at import."""
    global _default
    key = str(name).strip().lower()
    if key not in DEVICES:
        raise ValueError(f"unknown device {name!r}; choose one of {', '.join(DEVICES)}")
    _default = key


def get_default_device() -> str:
    """The name of the device NumPy-only calls run on ("opencl", "vulkan" or "cuda")."""
    return _default


def default_queue() -> Any:
    """The default device's queue (OpenCL) or device (Vulkan, CUDA)."""
    if _default not in DEVICES:
        raise DeviceUnavailableError(f"FUSEJIT_DEVICE={_default!r} names no device; choose one "
                                     f"of {', '.join(DEVICES)}")
    return backend_named(_default).default_queue()


def backend_of(queue: Any) -> Backend:
    """The backend a queue (or Vulkan device) belongs to."""
    if _forked:  # (every build and every NumPy-only launch asks: a forked child stops here)
        raise DeviceUnavailableError(FORKED)
    backend = getattr(queue, "fusejit_backend", None)
    if backend is not None:
        return backend
    if not _unnamed:
        raise DeviceUnavailableError("no backend for plain queues is loaded (import fusejit)")
    return _unnamed[0]


# Functions that turn another library's device array into a backend's DeviceArray without a
# copy (CUDA: torch, CuPy, JAX arrays), or return None for values they do not take. The call
# path asks them about arguments of types it does not know (``adopt``).
_adopters: list[Any] = []


def register_adopter(adopter: Any) -> None:
    """Add ``adopter(value, what) -> DeviceArray | None`` (a backend's package calls this)."""
    _adopters.append(adopter)


# Other libraries' array types whose calls have a fast-path key (``compile/signature.fast_key``):
# type -> ``part(value) -> tuple | None``, the attributes a compiled signature depends on, read
# cheaply (None: the call takes the full path). A backend registers a type once it adopted an
# array of it, so the key of an adopted array (its ``base_data``) and of the raw one agree.
FAST_PARTS: dict[type, Any] = {}


def register_fast_part(cls: type, part: Any) -> None:
    FAST_PARTS[cls] = part


def adopt(value: Any, what: str) -> Any:
    """``value`` as a backend's DeviceArray when one adopts it, else ``value`` itself."""
    for adopter in _adopters:
        found = adopter(value, what)
        if found is not None:
            return found
    return value
