"""Records of generated kernels: typed arguments that render their own declarations (the
runtime binds from the same records, so a signature and its launch cannot drift apart), the
kernels with their launch geometry, and the module that holds them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fusejit.ir.graph import Graph
from fusejit.passes.partition import Group, Plan
from fusejit.passes.verify import verify_module
from fusejit.targets.base import Target

# -- kernel arguments -------------------------------------------------------------------------------

# The call's status buffer (role "status"): one int32, 0 unless a checked gather met an index
# outside its axis, which stores the axis length there (at most STATUS_MAX) for the runtime's
# IndexError (runtime/status.py).
STATUS_DTYPE = np.dtype(np.int32)
STATUS_MAX = 2**31 - 1



@dataclass(frozen=True)
class BufferArg:
    """A buffer argument. role: param | output | temp | partial | status (the call's error
    flag, which checked gathers set: runtime/status.py); index: which one."""

    name: str
    dtype: np.dtype
    role: str
    index: int
    writable: bool
    restrict: bool

    def declaration(self, target: Target) -> str:
        return target.buffer_param(self.name, self.dtype, self.writable, self.restrict)


@dataclass(frozen=True)
class ScalarArg:
    """A by-value argument. role: scalar (a parameter's value converted to ``dtype``),
    offset (an array parameter's element offset) or extent (a loop bound of a kernel
    generated for runtime extents: ``value``, so the source does not change with it)."""

    name: str
    dtype: np.dtype
    role: str
    index: int
    value: int | float = 0  # (float: a row length as a mean's divisor, fusejit/ir/rows.py)

    def declaration(self, target: Target) -> str:
        return target.scalar_param(self.name, self.dtype)


Arg = BufferArg | ScalarArg


@dataclass(frozen=True)
class KernelSignature:
    name: str
    args: tuple[Arg, ...]

    def render(self, target: Target, local_size: tuple[int, ...] | None) -> str:
        return target.kernel_header(self.name, [a.declaration(target) for a in self.args],
                                    local_size)


@dataclass(frozen=True)
class HostView:
    """An operand or result of a host step as a NumPy view of a mapped buffer: signature
    argument ``arg`` (its offset argument ``offset_arg``, -1 for none) at element ``offset``
    with element ``strides``."""

    arg: int
    offset_arg: int
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True)
class HostMatmul:
    """A host step: ``np.matmul(a, b, out=c)`` on the mapped buffers (passes/host_gemm.py)."""

    a: HostView
    b: HostView
    c: HostView
    dtype: np.dtype


@dataclass(frozen=True)
class Kernel:
    """One generated kernel and how to launch it."""

    name: str
    source: str
    signature: KernelSignature
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    group: Group
    role: str = "main"  # main | partial | combine
    work: int = 0  # elements this kernel touches (for explain / autotune decisions)
    items: int = 0  # elementwise: work-items needed at one vector per work-item (0: fixed size)
    vec: int = 1  # elementwise: elements per vector (lanes)
    host: HostMatmul | None = None  # role "host": a step the host runs, not an OpenCL kernel

    @property
    def buffers(self) -> tuple[BufferArg, ...]:
        """The buffer arguments, in binding order (what passes/verify.py proves the order of)."""
        return tuple(a for a in self.signature.args if isinstance(a, BufferArg))


@dataclass(frozen=True)
class Partial:
    """A buffer of per-work-group partial results of a split reduction."""

    size: int
    dtype: np.dtype


@dataclass(frozen=True)
class Module:
    source: str
    kernels: tuple[Kernel, ...]
    partials: tuple[Partial, ...] = ()
    uses_fp64: bool = False
    wide: bool = False  # index math is 64-bit (offsets are passed as long)
    prelude: str = ""  # what each kernel needs ahead of it (targets with one kernel a module)

    def verify(self, graph: Graph, plan: Plan, aliases: Sequence[frozenset[int]] = ()) -> None:
        """Prove the kernel order (every temporary is written before it is read; no kernel
        reads an argument's old value after a kernel wrote it) and that no kernel writes an
        element another of its work-items reads; ``ScheduleError`` otherwise (a fusejit bug).
        ``aliases``: sets of parameters sharing memory. See ``passes/verify.py``."""
        verify_module(graph, plan, self, aliases)
