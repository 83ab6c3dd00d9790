"""The instructions and nested blocks lowering emits into (``lowering.Lowering``): a block
holds instructions and nested blocks in order, sees the values of its ancestors, and hoists
values that do not use its loop variables to its parent; references to values are immediates,
instructions, register-cache reads or lanes of a vector load.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from fusejit.ir.indexing import Index
from fusejit.ir.graph import Node


@dataclass(eq=False)
class Instr:
    """``ctype name = template(operands)`` (a value) or a statement (ctype None)."""

    ctype: str | None
    template: str
    operands: tuple[Ref, ...]
    block: Block
    cached: bool = False
    name: str = ""


@dataclass(frozen=True)
class Imm:
    """An immediate operand: a literal, a kernel argument or an index expression."""

    text: str


@dataclass(frozen=True, eq=False)
class CacheRead:
    """A value an earlier k-loop of a row kernel kept in a register array (``c_v3[k]``)."""

    instr: Instr


@dataclass(frozen=True, eq=False)
class LaneOf:
    """Lane ``lane`` of a vector load (``v3.s2``), spelled by ``template`` ({v} = the vector)."""

    instr: Instr
    lane: int
    template: str
    via_cache: bool = False  # read the register copy an earlier k-loop kept (c_v3[k].s2)


@dataclass(frozen=True, eq=False)
class Lanes:
    """A value that differs between the lanes of a vectorised work-item: one ref per lane."""

    refs: tuple[Ref, ...]


Ref = Instr | Imm | CacheRead | LaneOf

LANE = "l"  # the lane variable of vectorised lowering


@dataclass(eq=False)
class Nested:
    header: str
    block: Block
    footer: str = "}"
    operands: tuple[Ref, ...] = ()


class Values(Protocol):
    """What a block asks of the lowering it emits for (``lowering.Lowering``, which imports
    these blocks): the value of ``node`` at ``idx``, lowered where ``block`` sees it."""

    def value(self, block: Block, node: Node, idx: Index) -> Ref: ...


@dataclass(eq=False)
class Block:
    lowering: Values
    parent: Block | None = None
    loop_vars: frozenset[str] = frozenset()  # values not using these hoist to the parent
    items: list[Instr | Nested] = field(default_factory=list)
    cache_loop: bool = False  # a k-loop whose values later k-loops may read from registers
    anchor: Nested | None = None  # this block's item in its parent
    insert_at: int | None = None  # where new items go (None: at the end)

    def _add(self, item: Instr | Nested) -> None:
        if self.insert_at is None:
            self.items.append(item)
        else:
            self.items.insert(self.insert_at, item)
            self.insert_at += 1

    @contextmanager
    def before(self, anchor: Nested | None) -> Iterator[None]:
        """Items added meanwhile go just before ``anchor`` (one of this block's nested blocks:
        a value hoisted out of its loop), or where they would anyway (None)."""
        saved = self.insert_at
        if saved is None and anchor is not None:
            self.insert_at = self.items.index(anchor)
        try:
            yield
        finally:
            self.insert_at = saved

    def sees(self, other: Block) -> bool:
        b: Block | None = self
        while b is not None:
            if b is other:
                return True
            b = b.parent
        return False

    def emit(self, ctype: str | None, template: str, *operands: Ref) -> Instr:
        instr = Instr(ctype, template, tuple(operands), self)
        self._add(instr)
        return instr

    def value(self, node: Node, idx: Index) -> Ref:
        return self.lowering.value(self, node, idx)

    def nested(self, header: str, *operands: Ref, loop_vars: frozenset[str] = frozenset(),
               cache_loop: bool = False, footer: str = "}") -> Block:
        """A nested block. ``footer="} else {"`` followed by a sibling with header "" spells an
        if/else."""
        child = Block(self.lowering, self, loop_vars, cache_loop=cache_loop)
        child.anchor = Nested(header, child, footer, operands=operands)
        self._add(child.anchor)
        return child
