"""Proof of a lowered module's kernel order and race freedom (``Module.verify``).

The checks read what each kernel really touches from its signature (the buffers the runtime
binds, in launch order), and the index analysis of its group for the race rule:

* a temporary or partial-result buffer is read only after an earlier kernel wrote it;
* no kernel reads an argument's old value after a kernel wrote that argument (or memory it
  shares), and a kernel that writes an argument reads it only at the elements each work-item
  writes itself (same layout, same index, no broadcast store).

Any violation is a fusejit bug and raises ``ScheduleError`` naming the kernels and the buffer.

The proof checks the schedule's rules (passes/schedule.py), so it lives with them; what it reads
of the lowered module is named by the protocols below, which codegen's records
(codegen/kernels.py: Module, Kernel, BufferArg) fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from fusejit.errors import ScheduleError
from fusejit.ir.graph import Graph
from fusejit.passes.plan import Group, Plan
from fusejit.passes.schedule import families, loaded, params_read, race


class BoundBuffer(Protocol):
    """A buffer a kernel binds: its role (param | output | temp | partial), which one, and
    whether the kernel writes it."""

    @property
    def role(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def writable(self) -> bool: ...


class LoweredKernel(Protocol):
    """A generated kernel: its name, the group it computes, its role (main | partial |
    combine | host) and the buffers it binds, in launch order."""

    @property
    def name(self) -> str: ...
    @property
    def group(self) -> Group: ...
    @property
    def role(self) -> str: ...
    @property
    def buffers(self) -> Sequence[BoundBuffer]: ...


class LoweredModule(Protocol):
    """The kernels of a lowered module, in launch order."""

    @property
    def kernels(self) -> Sequence[LoweredKernel]: ...


def verify_module(graph: Graph, plan: Plan, module: LoweredModule,
                  aliases: Sequence[frozenset[int]] = ()) -> None:
    """Raise ``ScheduleError`` unless ``module`` keeps the order and no-race rules."""
    fam = families(aliases)
    written: dict[tuple[str, int], str] = {}  # buffer -> the first kernel that wrote it
    # parameter -> the first kernel that wrote its memory (its position: kernels that share a
    # function share its name)
    param_written: dict[int, tuple[int, str]] = {}
    for position, kernel in enumerate(module.kernels):
        name = kernel.name
        group = kernel.group
        stop = set(loaded(plan.temps, plan.staged, group))
        buffers = kernel.buffers
        reads = params_read(group, stop) if any(a.role == "param" and a.writable
                                                for a in buffers) else set()
        for a in buffers:
            key = (a.role, a.index)
            if a.role in ("temp", "partial") and not a.writable and key not in written:
                raise ScheduleError(f"kernel {name} reads {a.role} {a.index} before any kernel "
                                    "writes it")
            if a.role != "param":
                continue
            family = fam.get(a.index, frozenset({a.index}))
            reading = not a.writable or bool(reads & family)
            earlier = next((param_written[q] for q in sorted(family) if q in param_written),
                           None)
            if reading and earlier is not None and earlier[0] != position:
                raise ScheduleError(f"kernel {name} reads the old value of argument {a.index} "
                                    f"after kernel {earlier[1]} wrote it")
        for kind, stores in (("stores", group.stores), ("rows", group.row_stores)):
            for st in stores:
                if st.dest.kind != "param" or kernel.role == "partial":
                    continue
                p = st.dest.index
                why = race(graph, group, st, fam.get(p, frozenset({p})), kind, stop)
                if why is not None:
                    raise ScheduleError(f"kernel {name} writes argument {p} in place while "
                                        f"its own work-items read it: {why}")
        for a in buffers:
            if a.writable:
                written.setdefault((a.role, a.index), name)
                if a.role == "param":
                    param_written.setdefault(a.index, (position, name))
