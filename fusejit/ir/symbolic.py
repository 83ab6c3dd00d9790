"""Integer index expressions with range-aware simplification.

Kernels are specialised on shapes, so index math is mostly constants: an address is a linear
combination of *atoms* (index variables, and floor-div / mod of expressions by constants) plus a
constant. Simplification uses value ranges and a few exact identities:

* ``(c*A + r) // c -> A + r // c`` and ``(c*A + r) % c -> r % c``   (any integers)
* ``r // c -> 0``, ``r % c -> r``                                     when ``0 <= r < c``
* ``(g*A + s) // c -> A // (c/g)``, ``(g*A + s) % c -> g*(A % (c/g)) + s``
                                                   when ``c % g == 0`` and ``0 <= s < g``
* ``(x // a) // b -> x // (a*b)``
* ``a*b*(x // b) + a*(x % b) -> a*x``                                   (recombination)

so a contiguous load of a reshaped, collapsed or broadcast view folds back to ``gid`` or
``gid % n`` instead of a chain of divisions.

Kernels for runtime row lengths (fusejit/ir/rows.py) also address rows through a launch-time
extent: ``Scaled(x, n)`` is ``x * n`` for a kernel argument ``n`` (``scaled``), an atom the
constant-divisor rules treat as opaque.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Var:
    name: str
    lo: int
    hi: int  # inclusive


@dataclass(frozen=True)
class Div:
    x: Expr
    c: int


@dataclass(frozen=True)
class Mod:
    x: Expr
    c: int


@dataclass(frozen=True)
class Scaled:
    """``x * n``: an index expression times a launch-time extent ``n`` (a kernel argument
    with the range ``n.lo..n.hi``), e.g. a row index times a runtime row length."""

    x: Expr
    n: Var


Atom = Var | Div | Mod | Scaled


@dataclass(frozen=True)
class Expr:
    """``const + sum(coef * atom)``; terms sorted for a canonical form."""

    const: int
    terms: tuple[tuple[Atom, int], ...] = ()

    # -- construction -----------------------------------------------------------------------------
    @staticmethod
    def of(value: int | Atom | Expr) -> Expr:
        if isinstance(value, Expr):
            return value
        if isinstance(value, int):
            return Expr(value)
        return Expr(0, ((value, 1),))

    @staticmethod
    def var(name: str, size: int) -> Expr:
        """An index in ``range(size)``; a length-1 range is the constant 0."""
        return Expr(0) if size <= 1 else Expr.of(Var(name, 0, size - 1))

    @staticmethod
    def _norm(const: int, terms: dict[Atom, int]) -> Expr:
        terms = {a: c for a, c in terms.items() if c}
        changed = True
        while changed:  # recombination: a*b*(x//b) + a*(x%b) -> a*x
            changed = False
            for atom, coef in list(terms.items()):
                if isinstance(atom, Mod) and atom in terms:
                    div = floordiv(atom.x, atom.c)
                    if div.const == 0 and len(div.terms) == 1 and div.terms[0][1] == 1:
                        d_atom = div.terms[0][0]
                        if terms.get(d_atom) == coef * atom.c:
                            del terms[atom], terms[d_atom]
                            for a2, c2 in atom.x.terms:
                                terms[a2] = terms.get(a2, 0) + coef * c2
                            const += coef * atom.x.const
                            terms = {a: c for a, c in terms.items() if c}
                            changed = True
                            break
        return Expr(const, tuple(sorted(terms.items(), key=lambda t: _key(t[0]))))

    # -- arithmetic -------------------------------------------------------------------------------
    def __add__(self, other: int | Expr) -> Expr:
        other = Expr.of(other)
        terms = dict(self.terms)
        for atom, coef in other.terms:
            terms[atom] = terms.get(atom, 0) + coef
        return Expr._norm(self.const + other.const, terms)

    __radd__ = __add__

    def __sub__(self, other: int | Expr) -> Expr:
        return self + Expr.of(other) * -1

    def __mul__(self, k: int) -> Expr:
        assert isinstance(k, int)
        if k == 0:
            return Expr(0)
        return Expr(self.const * k, tuple((a, c * k) for a, c in self.terms))

    __rmul__ = __mul__

    def __floordiv__(self, c: int) -> Expr:
        return floordiv(self, c)

    def __mod__(self, c: int) -> Expr:
        return mod(self, c)

    # -- ranges -----------------------------------------------------------------------------------
    # An Expr never changes, so its range and variables are computed once and kept in the
    # instance dict (not fields: equality, hashing and repr are unchanged). Simplification asks
    # for ranges again and again, recursively through nested floor-divs and mods.
    @property
    def lo(self) -> int:
        lo = self.__dict__.get("_lo")
        if lo is None:
            lo = self.const + sum(min(c * _lo(a), c * _hi(a)) for a, c in self.terms)
            object.__setattr__(self, "_lo", lo)
        return lo

    @property
    def hi(self) -> int:
        hi = self.__dict__.get("_hi")
        if hi is None:
            hi = self.const + sum(max(c * _lo(a), c * _hi(a)) for a, c in self.terms)
            object.__setattr__(self, "_hi", hi)
        return hi

    @property
    def is_const(self) -> bool:
        return not self.terms

    def affine(self) -> dict[str, int] | None:
        """Coefficients per variable name if the expression is affine in variables."""
        if any(not isinstance(a, Var) for a, _ in self.terms):
            return None
        return {a.name: c for a, c in self.terms}

    def subs(self, name: str, value: int) -> Expr:
        """The expression with variable ``name`` replaced by ``value`` (re-simplified)."""
        if name not in self.vars():
            return self
        out = Expr(self.const)
        for atom, coef in self.terms:
            if isinstance(atom, Var):
                part = Expr(value) if atom.name == name else Expr.of(atom)
            elif isinstance(atom, Div):
                part = floordiv(atom.x.subs(name, value), atom.c)
            elif isinstance(atom, Scaled):
                part = scaled(atom.x.subs(name, value), atom.n)
            else:
                part = mod(atom.x.subs(name, value), atom.c)
            out = out + part * coef
        return out

    def vars(self) -> frozenset[str]:
        names = self.__dict__.get("_vars")
        if names is None:
            out: set[str] = set()
            for atom, _ in self.terms:
                out |= {atom.name} if isinstance(atom, Var) else atom.x.vars() | (
                    {atom.n.name} if isinstance(atom, Scaled) else set())
            names = frozenset(out)
            object.__setattr__(self, "_vars", names)
        return names

    # -- rendering --------------------------------------------------------------------------------
    def render(self, names: dict[str, str] | None = None) -> str:
        names = names or {}
        parts = []
        for atom, coef in self.terms:
            s = _render_atom(atom, names)
            parts.append(s if coef == 1 else f"{coef}*{s}" if coef > 0 else f"-{-coef}*{s}"
                         if coef != -1 else f"-{s}")
        if self.const or not parts:
            parts.append(str(self.const))
        out = parts[0]
        for p in parts[1:]:
            out += f" - {p[1:]}" if p.startswith("-") else f" + {p}"
        return out if len(parts) == 1 else f"({out})"


def _key(atom: Atom) -> tuple:
    if isinstance(atom, Var):
        return (0, atom.name)
    if isinstance(atom, Scaled):
        return (3, atom.n.name, repr(atom.x))
    return (1 if isinstance(atom, Div) else 2, atom.c, repr(atom.x))


def _lo(atom: Atom) -> int:
    if isinstance(atom, Var):
        return atom.lo
    if isinstance(atom, Scaled):
        return min(a * b for a in (atom.x.lo, atom.x.hi) for b in (atom.n.lo, atom.n.hi))
    if isinstance(atom, Div):
        return atom.x.lo // atom.c
    return 0 if atom.x.lo < 0 or atom.x.hi >= atom.c else atom.x.lo


def _hi(atom: Atom) -> int:
    if isinstance(atom, Var):
        return atom.hi
    if isinstance(atom, Scaled):
        return max(a * b for a in (atom.x.lo, atom.x.hi) for b in (atom.n.lo, atom.n.hi))
    if isinstance(atom, Div):
        return atom.x.hi // atom.c
    return atom.c - 1 if atom.x.lo < 0 or atom.x.hi >= atom.c else atom.x.hi


def _render_atom(atom: Atom, names: dict[str, str]) -> str:
    if isinstance(atom, Var):
        return names.get(atom.name, atom.name)
    if isinstance(atom, Scaled):
        return f"({atom.x.render(names)} * {names.get(atom.n.name, atom.n.name)})"
    op = "/" if isinstance(atom, Div) else "%"
    # Index expressions inside Div/Mod are non-negative by construction, so C's truncating
    # division and remainder equal floor semantics there.
    assert atom.x.lo >= 0, atom
    inner = atom.x.render(names)
    return f"({inner} {op} {atom.c})"


def _split(e: Expr, c: int) -> tuple[Expr, Expr]:
    """e = c*q + r where q collects the terms (and constant part) divisible by c."""
    q_terms = {a: k // c for a, k in e.terms if k % c == 0}
    r_terms = {a: k for a, k in e.terms if k % c != 0}
    q_const, r_const = divmod(e.const, c)
    return Expr._norm(q_const, q_terms), Expr._norm(r_const, r_terms)


def _gcd_split(r: Expr, c: int) -> tuple[int, Expr, Expr] | None:
    """r = g*big + small with c % g == 0 and 0 <= small < g, for the largest such g among r's
    coefficients (then r // c = big // (c/g) and r % c = g*(big % (c/g)) + small)."""
    for g in sorted({abs(k) for _, k in r.terms}, reverse=True):
        if g > 1 and c % g == 0:
            big = Expr._norm(0, {a: k // g for a, k in r.terms if k % g == 0})
            small = Expr._norm(r.const, {a: k for a, k in r.terms if k % g != 0})
            if 0 <= small.lo and small.hi < g:
                return g, big, small
    return None


def floordiv(e: Expr, c: int) -> Expr:
    assert c > 0
    if c == 1:
        return e
    q, r = _split(e, c)
    if 0 <= r.lo and r.hi < c:
        return q
    split = _gcd_split(r, c)
    if split is not None:
        g, big, _ = split
        return q + floordiv(big, c // g)
    if r.lo < 0:
        return _floordiv_signed(q, r, c)
    if len(r.terms) == 1 and r.const == 0 and r.terms[0][1] == 1 and isinstance(
            r.terms[0][0], Div):
        inner = r.terms[0][0]
        return q + floordiv(inner.x, inner.c * c)
    return q + Expr.of(Div(r, c))


def _floordiv_signed(q: Expr, r: Expr, c: int) -> Expr:
    # shift into the non-negative range: (r + k*c)//c - k, with k*c >= -r.lo
    k = -(r.lo // c)
    return q + Expr.of(Div(r + k * c, c)) - k


def mod(e: Expr, c: int) -> Expr:
    assert c > 0
    if c == 1:
        return Expr(0)
    _, r = _split(e, c)
    if 0 <= r.lo and r.hi < c:
        return r
    split = _gcd_split(r, c)
    if split is not None:
        g, big, small = split
        return mod(big, c // g) * g + small
    if r.lo < 0:
        r = r + (-(r.lo // c)) * c
    return Expr.of(Mod(r, c))


def scaled(e: Expr, n: Var) -> Expr:
    """``e * n`` for a launch-time extent ``n``: the constant part as ``const * n``, and the
    common factor of the terms kept outside, so ``(8*o) * n`` is ``8 * Scaled(o, n)`` (the
    vector-index rules see the 8)."""
    out = Expr.of(n) * e.const if e.const else Expr(0)
    if not e.terms:
        return out
    g = 0
    for _, k in e.terms:
        g = math.gcd(g, k)
    inner = Expr._norm(0, {a: k // g for a, k in e.terms})
    return out + Expr.of(Scaled(inner, n)) * g
