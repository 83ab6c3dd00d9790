"""Printing blocks as C: names for values, reusing a dead value's name for a later value of the
same type within a block (values read from nested blocks or register arrays stay pinned)."""

from __future__ import annotations

from fusejit.codegen.blocks import Block, CacheRead, Imm, Instr, LaneOf, Nested, Ref

# -- rendering with name reuse --------------------------------------------------------------------


class Renderer:
    """Assigns names (reusing dead ones of the same type) and prints blocks."""

    def __init__(self) -> None:
        self.counter = 0
        self.cache_decls: list[str] = []
        # per nested block, the ids of everything it and its own nested blocks read (asked by
        # every enclosing block: computed once, not once per nesting level)
        self._reads: dict[int, set[int]] = {}

    def render(self, block: Block, indent: int) -> list[str]:
        items = block.items
        last_use: dict[int, int] = {}
        pinned: set[int] = set()
        reads = [self._refs(item) for item in items]
        for pos, refs in enumerate(reads):
            for ref in refs:
                if ref.block is block:
                    last_use[id(ref)] = pos
        # values read from nested blocks or other blocks stay alive for the whole block
        for item in items:
            if isinstance(item, Nested):
                pinned |= self._all_reads(item.block)
        free: dict[str, list[str]] = {}
        lines: list[str] = []
        pad = "    " * indent
        for pos, item in enumerate(items):
            if isinstance(item, Nested):
                header = item.header.format(*map(self._text, item.operands)) \
                    if item.operands else item.header
                if header:
                    lines.append(pad + header)
                lines += self.render(item.block, indent + 1)
                lines.append(pad + item.footer)
                continue
            text = item.template.format(*map(self._text, item.operands)) \
                if item.operands else item.template
            for ref in reads[pos]:
                if ref.block is block and last_use.get(id(ref)) == pos and id(ref) not in \
                        pinned and not ref.cached and ref.ctype is not None and ref.name:
                    free.setdefault(ref.ctype, []).append(ref.name)
            if item.ctype is None:
                lines.append(pad + text)
                continue
            reusable = free.get(item.ctype)
            if item.name.startswith("g"):  # a gathered position: index math names it
                lines.append(f"{pad}const {item.ctype} {item.name} = {text};")
                continue
            if reusable and id(item) not in pinned and not item.cached and \
                    id(item) in last_use:
                item.name = reusable.pop()
                lines.append(f"{pad}{item.name} = {text};")
            else:
                item.name = f"v{self.counter}"
                self.counter += 1
                lines.append(f"{pad}{item.ctype} {item.name} = {text};")
            if item.cached:
                self.cache_decls.append(f"{item.ctype} c_{item.name}[CACHE];")
                lines.append(f"{pad}c_{item.name}[k] = {item.name};")
        return lines

    @staticmethod
    def _refs(item: Instr | Nested) -> list[Instr]:
        """The distinct instructions ``item`` reads: ``v0 * v0`` reads v0 once, so a dying
        operand frees its name once (freeing it twice hands one name to two live values)."""
        out: dict[int, Instr] = {}
        for r in item.operands:
            if isinstance(r, Instr):
                out[id(r)] = r
            elif isinstance(r, LaneOf):
                out[id(r.instr)] = r.instr
        return list(out.values())

    def _all_reads(self, block: Block) -> set[int]:
        """Ids of the instructions ``block`` and the blocks nested in it read."""
        out = self._reads.get(id(block))
        if out is None:
            out = set()
            for item in block.items:
                out.update(id(r) for r in self._refs(item))
                if isinstance(item, Nested):
                    out |= self._all_reads(item.block)
            self._reads[id(block)] = out
        return out

    @staticmethod
    def _text(ref: Ref) -> str:
        if isinstance(ref, CacheRead):
            return f"c_{ref.instr.name}[k]"
        if isinstance(ref, Imm):
            return ref.text
        if isinstance(ref, LaneOf):
            vec = f"c_{ref.instr.name}[k]" if ref.via_cache else ref.instr.name
            return ref.template.format(v=vec)
        assert ref.name, "operand rendered before its definition"
        return ref.name
