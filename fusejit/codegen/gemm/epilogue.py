"""The end of a generated GEMM kernel (codegen/gemm/source.py's ``_Gen``, and codegen/gemm/mma.py's
``MmaGen`` through it): the accumulators' rows and columns, and the epilogue that finishes each
accumulator (``final``) and stores it through the group's fused stores, unguarded on full
tiles (vector stores where the layout allows) and guarded at the edges."""

from __future__ import annotations

from fusejit.codegen.lowering import LANE, Block, Lanes
from fusejit.ir.symbolic import Expr, Var


def _var(name: str, hi: int) -> Expr:
    return Expr(0) if hi <= 0 else Expr.of(Var(name, 0, hi))


class Epilogue:
    """The epilogue methods of a GEMM generator (its state: cfg, it, low, top, M, N, m, bidx,
    group, dynamic, and ``final`` / ``store`` / ``extent``)."""

    def row_of(self, i: int) -> str:
        cfg = self.cfg
        if not cfg.local:
            return f"m0 + tm + {i * cfg.mdimc}"
        return f"m0 + tm * {cfg.vw} + {(i // cfg.vw) * cfg.mdimc * cfg.vw + i % cfg.vw}"

    def col_of(self, j: int) -> str:
        cfg = self.cfg
        if not cfg.local:
            return f"n0 + tn + {j * cfg.ndimc}"
        return f"n0 + tn * {cfg.vw} + {(j // cfg.vw) * cfg.ndimc * cfg.vw + j % cfg.vw}"

    # -- epilogue ---------------------------------------------------------------------------------
    def epilogue(self) -> None:
        cfg, it = self.cfg, self.it
        M, N = self.M, self.N
        edge = M % cfg.mwg != 0 or N % cfg.nwg != 0 or self.dynamic  # (M: any at launch)
        fast_ok = cfg.local
        top = self.top
        if fast_ok and edge:
            fast = top.nested(f"if (m0 + {cfg.mwg} <= {self.extent('m', M)} && "
                              f"n0 + {cfg.nwg} <= {N}) {{",
                              footer="} else {")
            slow = top.nested("")
        elif fast_ok:
            fast, slow = top, None
        else:
            fast, slow = None, top
        if fast is not None:
            self.fast_epilogue(fast)
        if slow is not None:
            self.guarded_epilogue(slow)

    def fast_epilogue(self, block: Block) -> None:
        """Full tiles: no guards, vector stores of VW columns where the layout allows."""
        cfg, it, low = self.cfg, self.it, self.low
        vw = cfg.vw if self.N % cfg.vw == 0 else 1
        for i in range(cfg.mwi):
            block.emit(None, f"const {it} er{i} = {self.row_of(i)};")
        for jb in range(cfg.nwi // vw):
            block.emit(None, f"const {it} ec{jb} = ({self.col_of(jb * vw)}) / {vw};")
        low.lanes = vw
        try:
            for i in range(cfg.mwi):
                row = _var(f"er{i}", self.M - 1)
                for jb in range(cfg.nwi // vw):
                    col = _var(f"ec{jb}", self.N // vw - 1) * vw + (
                        Expr.var(LANE, vw) if vw > 1 else Expr(0))
                    idx = (*self.bidx, row, col)
                    vals = tuple(self.final(block, f"acc{i}_{jb * vw + l}") for l in range(vw))
                    low.bound[(self.m, idx)] = Lanes(vals) if vw > 1 else vals[0]
                    for st in self.group.stores:
                        self.store(block, st, idx)
        finally:
            low.lanes = 1

    def guarded_epilogue(self, block: Block) -> None:
        cfg, it, low = self.cfg, self.it, self.low
        for i in range(cfg.mwi):
            block.emit(None, f"const {it} gr{i} = {self.row_of(i)};")
        for j in range(cfg.nwi):
            block.emit(None, f"const {it} gc{j} = {self.col_of(j)};")
        # (a length-1 axis is indexed by 0, as broadcasting does; inside the guards a row is
        # below M and a column below N, which lets a store into a reshape of the product, an
        # image of its rows, simplify its index back to the row)
        for i in range(cfg.mwi):
            row = _var(f"gr{i}", self.M - 1) if self.M > 1 else Expr(0)
            inside_row = block.nested(f"if (gr{i} < {self.extent('m', self.M)}) {{")
            for j in range(cfg.nwi):
                col = _var(f"gc{j}", self.N - 1) if self.N > 1 else Expr(0)
                inner = inside_row.nested(f"if (gc{j} < {self.N}) {{")
                idx = (*self.bidx, row, col)
                low.bound[(self.m, idx)] = self.final(inner, f"acc{i}_{j}")
                for st in self.group.stores:
                    self.store(inner, st, idx)
