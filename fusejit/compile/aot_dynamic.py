"""Bundle entries with dynamic (None) dimensions: launch metadata as functions of the extents.

**Variables.** The Nones of a signature at the same position counted from the last axis (the
way broadcasting aligns axes) are one extent: ``(ShapeDtype((None, 64)), ShapeDtype((None,
64)))`` takes two arrays of one batch size, ``ShapeDtype((None, None))`` a batch of rows of
any length, and ``x: (None, None), w: (None,)`` share the row length. A call whose arrays give
one variable two values matches no signature.

**Affine variables.** A kernel built for runtime extents (``@fuse(dynamic=...)``) serves
every extent whose lowering yields the same source; what changes is the launch metadata
(argument and output shapes, temporaries, extents passed to kernels, global sizes).
``export`` lowers the signature at a few points (``affine_points``: multiples of 1024, the
first ``2**k`` a grid that fits, the others verify) and ``template`` turns the entries into
one whose every changing integer is ``{"$x": c, "q": q}``: ``sum(c[mask] * prod(x_i for i in
mask)) / q``, multilinear in the variables (``m * n`` elements of an ``(m, n)`` array).

**Row lengths.** A None in the last axis of a function that reduces rows (softmax, layernorm,
``x.sum(-1)``) changes the source with its power-of-two bucket (fusejit/ir/rows.py). ``export``
then writes one entry per bucket up to ``max_row_length``, each lowered at lengths inside the
bucket (``bucket_points``) and built at export; on GPUs a bucket's own length has a program of
its own (no row checks) and so an entry of its own. A loaded bundle compiles nothing for any
row length up to the bound; a longer row, or one of length 0 or 1, is a named error.

``instantiate(template, xs)`` gives the entry at extents ``xs``; one for which a formula is not
a whole number (the kernels step over ``vec`` elements at a time and the extent leaves a
remainder) is refused with a BundleError naming the extent (global sizes round up instead:
the kernels' loops and guards bound the work). Extents 0 and 1 are refused too
(a size-0 or size-1 dimension lowers differently: empty ranges, broadcasting), and so is an
affine extent of an innermost axis that is not a multiple of the kernels' vector width (the
in-process path would pick narrower vectors for it). An extent whose arrays need 64-bit
indexing matches no signature (the argument's spec differs).

What is checked and what is assumed: the source and the constants are the same at every
point lowered, and the formulas are exact there (the points beyond the fitting grid verify
them). For other extents the bundle relies on what the code generator does with runtime
extents: the kernels read their bounds from launch arguments (the in-process dynamic path
reuses one program on the same grounds), and the metadata keeps the forms it gives them
(products of dimensions, quotients by the vector width, round-ups to the work-group size,
which ``instantiate`` reapplies to global sizes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from fusejit.compile.abstract import ShapeDtype
from fusejit.errors import FusejitError
from fusejit.ir.rows import MIN_BUCKET, bucket

_UNITS = (2, 4, 3, 1)  # times the base: one variable's extents lowered at export
_BASE = 1024  # the largest work-group size: global sizes rounded to it stay exact multiples
_NOT_COMPARED = frozenset({"graph"})  # the graph text names shapes; kept as at the first point
# launch sizes (work-items): where a formula is not whole, more than needed do nothing
_ROUNDED_UP = frozenset({"global_size", "items"})
LONGEST_ROW = 32768  # row kernels keep a row per work-group up to here (longer rows split)


class BundleError(FusejitError, ValueError):
    """A bundle that cannot be read, a call no exported signature matches, a dynamic
    signature that cannot be exported, or an extent a bundle cannot run."""


def extents_for(static_elements: int, k: int = 1) -> tuple[int, ...]:
    """One variable's extents for ``affine_points``: multiples of 1024 (so a global size
    rounded up to any work-group size is exact at every one of them, and the fit is exact),
    halved while the largest point would need 64-bit indexing (``static_elements``: the
    product of the other dimensions; ``k`` variables), since a bundle lowered with 64-bit
    indices would not match the usual 32-bit calls."""
    base = _BASE
    while base > 8 and (max(_UNITS) * base) ** k * max(static_elements, 1) > 2**30:
        base //= 2
    return tuple(u * base for u in _UNITS)


def variables(sig: tuple) -> list[list[tuple[int, int]]]:
    """The (argument, axis) of every None of a signature's ShapeDtypes, grouped by position
    from the last axis, outermost first (the row length, if any, last)."""
    by_pos: dict[int, list[tuple[int, int]]] = {}
    for i, a in enumerate(sig):
        if isinstance(a, ShapeDtype):
            for d, s in enumerate(a.shape):
                if s is None:
                    by_pos.setdefault(len(a.shape) - d, []).append((i, d))
    return [by_pos[p] for p in sorted(by_pos, reverse=True)]


def dynamic_dims(sig: tuple) -> list[tuple[int, int]]:
    """(argument, axis) of every None dimension of a signature's ShapeDtypes."""
    return [d for v in variables(sig) for d in v]


def is_row(sig: tuple, dims: list[tuple[int, int]]) -> bool:
    """Is this variable a row length (every one of its Nones in a last axis)?"""
    return all(axis == len(sig[arg].shape) - 1 for arg, axis in dims)


def affine_points(k: int, static_elements: int) -> list[tuple[int, ...]]:
    """Where a signature of ``k`` affine variables is lowered: a grid of two extents per
    variable (it fits the multilinear formulas), then points that verify them."""
    e = extents_for(static_elements, k)
    return _points([dict(zip(_UNITS, e))] * k)


def bucket_points(k: int, static_elements: int, b: int) -> tuple[list[tuple[int, ...]],
                                                                 list[tuple[int, ...]]]:
    """Where row bucket ``b`` is lowered (the row length last of ``k`` variables): the
    lengths below ``b`` (more than half of it), and ``b`` itself (its own program on GPUs)."""
    e = dict(zip(_UNITS, extents_for(static_elements * b, k - 1)))
    lo, hi = bucket_range(b)
    inside = _points([e] * (k - 1) + [{2: hi, 4: lo, 3: (lo + hi) // 2, 1: lo + 1}])
    return inside, _points([e] * (k - 1) + [dict.fromkeys(_UNITS, b)])


def bucket_range(b: int) -> tuple[int, int]:
    """The row lengths bucket ``b`` serves besides ``b`` itself."""
    return (2 if b <= MIN_BUCKET else b // 2 + 1), b - 1


def buckets(max_row_length: int) -> list[int]:
    """The buckets a bundle holds for rows up to ``max_row_length``."""
    if type(max_row_length) is not int or not 2 <= max_row_length <= LONGEST_ROW:
        raise BundleError(f"max_row_length={max_row_length!r}: pass a row length from 2 to "
                          f"{LONGEST_ROW} (longer rows are split over work-groups, with "
                          "kernels specialised on the length: export those concretely)")
    out, b = [], MIN_BUCKET
    while b <= bucket(max_row_length):
        out.append(b)
        b *= 2
    return out


def _points(values: list[dict[int, int]]) -> list[tuple[int, ...]]:
    k = len(values)
    grid = [tuple(values[i][2 if not (m >> i) & 1 else 4] for i in range(k))
            for m in range(2 ** k)]
    check = [tuple(v[3] for v in values)] + [tuple(v[1 if i == j else 3] for i, v in
                                                   enumerate(values)) for j in range(k)]
    return list(dict.fromkeys(grid + check))


def at_point(sig: tuple, xs: tuple[int, ...]) -> tuple:
    """The concrete signature of ``sig`` at extents ``xs`` (one per variable)."""
    at = {d: x for dims, x in zip(variables(sig), xs) for d in dims}
    return tuple(ShapeDtype(tuple(at.get((i, d), s) for d, s in enumerate(a.shape)), a.dtype,
                            a.device) if isinstance(a, ShapeDtype) else a
                 for i, a in enumerate(sig))


def export_dynamic(f: Any, sig: tuple, blobs: list[bytes], max_row_length: int,
                   export_one: Callable) -> list[tuple[dict[str, Any], Any, Any]]:
    """The entries of a signature with None dimensions (``export_one(f, sig, blob)`` ->
    (entry, executable, queue) exports a concrete one): lowered at points of its extents
    with runtime-extent kernels (the programs come out the same, so one is built), one
    entry whose launch metadata are formulas of the extents; where the row length changes
    the source, one such entry per row bucket (and on GPUs one per bucket length)."""
    if f._stats.dynamic is False:
        raise BundleError("a ShapeDtype with a None (dynamic) dimension needs "
                          "@fuse(dynamic=None or True); this function has dynamic=False")
    f._stats.dynamic_on = True  # kernels that take their extents at launch
    groups = variables(sig)
    k, row = len(groups), is_row(sig, groups[-1])
    f._stats.rows_on |= row  # ... and row reductions their row length (fusejit/ir/rows.py)
    static = max(math.prod(s for s in a.shape if s is not None) for a in sig
                 if isinstance(a, ShapeDtype))
    points = affine_points(k, static)

    def entry(points: list[tuple[int, ...]], rows: list[int] | None) -> tuple:
        return _entry(f, export_one, sig, points, [None] * (k - 1) + [rows], blobs)

    def sources(points: list[tuple[int, ...]]) -> list[str]:  # lowered, not built
        return [f.lower(*at_point(sig, xs)).source for xs in points]
    # (a row length that is no multiple of anything: elementwise kernels take any, source_rows)
    odd = [points[0][:-1] + (points[0][-1] + 1,)] if row else []
    if not row or len(set(sources(points + odd))) == 1:
        return [entry(points, [2, None] if row else None)]
    made = []
    for b in buckets(max_row_length):
        inside, full = bucket_points(k, static, b)
        lo, hi = bucket_range(b)
        texts = sources(inside)
        if len(set(texts)) > 1:
            other = inside[next(j for j, s in enumerate(texts) if s != texts[0])]
            raise BundleError(
                f"the kernel source of {getattr(f, '__qualname__', 'f')} changes with the "
                f"dynamic extents within one row bucket (lowered at {inside[0]} and {other}; "
                "the row length is the last): a kernel is specialised on them (an elementwise "
                "kernel whose iteration space holds the row, a scan or a reduction over a "
                "None axis), so this signature cannot be exported with these None "
                "dimensions; export the sizes it will see as concrete dimensions, e.g. "
                "ShapeDtype((None, 1000), ...)")
        if sources(full[:1]) == texts[:1]:  # b itself: the same program
            made.append(entry(inside + full, [lo, b]))
        else:  # (GPUs: a bucket's own length has no row checks, a program of its own)
            made += [entry(inside, [lo, hi]), entry(full, [b, b])]
    return made


def _entry(f: Any, export_one: Callable, sig: tuple, points: list[tuple[int, ...]],
           ranges: list, blobs: list[bytes]) -> tuple[dict[str, Any], Any, Any]:
    """One template entry from lowerings at ``points``; its captured constants (the same at
    every point, else BundleError) are stored once, at the indices every point's entry
    names."""
    start = len(blobs)
    entries, first, stored = [], None, None
    for xs in points:
        extra: list[bytes] = []
        e, exe, queue = export_one(f, at_point(sig, xs), lambda b: (
            extra.append(bytes(b)), start + len(extra) - 1)[1])
        if first is None:
            first, stored = (exe, queue), extra
        elif extra != stored:
            raise BundleError("a captured constant changes with the dynamic extent: export "
                              "concrete signatures")
        entries.append(e)
    blobs.extend(stored)
    out = template(entries, points, "signature")
    out["dynamic"] = {"vars": [[list(d) for d in dims] for dims in variables(sig)],
                      "ranges": ranges, "points": [list(p) for p in points]}
    return out, *first


def template(entries: list[dict[str, Any]], points: Any, where: str) -> dict[str, Any]:
    """One entry whose values that change with the extents are formulas; see the module
    docstring. ``entries[k]`` was lowered at ``points[k]`` (a tuple of extents, or one int)."""
    return _merge(entries, [_xs(p) for p in points], where)


def _xs(p: Any) -> tuple[int, ...]:
    return tuple(p) if isinstance(p, (tuple, list)) else (int(p),)


def _merge(values: list[Any], ps: list[tuple[int, ...]], path: str) -> Any:
    first = values[0]
    if all(v == first and type(v) is type(first) for v in values):
        return first
    if isinstance(first, dict) and all(isinstance(v, dict) and v.keys() == first.keys()
                                       for v in values):
        return {k: first[k] if k in _NOT_COMPARED else
                _merge([v[k] for v in values], ps, f"{path}.{k}") for k in first}
    if isinstance(first, list) and all(isinstance(v, list) and len(v) == len(first)
                                       for v in values):
        return [_merge([v[i] for v in values], ps, f"{path}[{i}]") for i in range(len(first))]
    if all(type(v) is int for v in values):
        return _fit(values, ps, path)
    if all(type(v) is float and v.is_integer() for v in values):  # a mean's divisor
        return {**_fit([int(v) for v in values], ps, path), "float": True}
    what = "the kernel source" if path.endswith(".source") else path
    raise BundleError(
        f"{what} changes with the dynamic extent (lowered at {_pt(ps[0])} and {_pt(ps[1])}): "
        "the kernels are specialised on it (for example a reduction over the dynamic axis "
        "bakes its length into the source), so this signature cannot be exported with a "
        "None dimension; export the sizes it will see as concrete signatures instead")


def _pt(p: tuple[int, ...]) -> str:
    return str(p[0]) if len(p) == 1 else str(p)


def _monomial(xs: tuple[int, ...], mask: int) -> int:
    return math.prod(x for i, x in enumerate(xs) if (mask >> i) & 1)


def _fit(values: list[int], ps: list[tuple[int, ...]], path: str) -> dict[str, Any]:
    """The multilinear formula through the first points (a grid over the variables that
    move), verified at the others."""
    k = len(ps[0])
    moving = [i for i in range(k) if len({p[i] for p in ps}) > 1]
    masks = [sum(1 << moving[j] for j in range(len(moving)) if (m >> j) & 1)
             for m in range(2 ** len(moving))]
    rows = [[Fraction(_monomial(p, m)) for m in masks] + [Fraction(v)]
            for p, v in zip(ps[:len(masks)], values)]
    coef = _solve(rows, path)
    full = [Fraction(0)] * 2 ** k
    for m, c in zip(masks, coef):
        full[m] = c
    for p, v in zip(ps, values):
        if sum(c * _monomial(p, m) for m, c in enumerate(full)) != v:
            raise BundleError(
                f"launch metadata {path} is not multilinear in the dynamic extents ({values} "
                f"at {[_pt(p) for p in ps]}): this signature cannot be exported with None "
                "dimensions; export the sizes it will see as concrete signatures instead")
    q = math.lcm(*(c.denominator for c in full))
    return {"$x": [int(c * q) for c in full], "q": q}


def _solve(rows: list[list[Fraction]], path: str) -> list[Fraction]:
    n = len(rows)
    for col in range(n):
        pivot = next((r for r in range(col, n) if rows[r][col] != 0), None)
        if pivot is None:
            raise BundleError(f"launch metadata {path}: the export points do not determine "
                              "it (internal: a singular grid)")
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                f = rows[r][col] / rows[col][col]
                rows[r] = [a - f * b for a, b in zip(rows[r], rows[col])]
    return [rows[i][n] / rows[i][i] for i in range(n)]


# -- loading ----------------------------------------------------------------------------------


def upgrade(entry: dict[str, Any]) -> dict[str, Any]:
    """A bundle entry of format 2 (one variable: ``dims``, ``$n`` formulas) as format 3."""
    dyn = entry.get("dynamic")
    if dyn is not None and "dims" in dyn:
        entry["dynamic"] = {"vars": [dyn["dims"]], "ranges": [None],
                            "points": [[e] for e in dyn["extents"]]}
    return entry


def in_range(tmpl: dict[str, Any], xs: tuple[int, ...]) -> bool:
    """Do extents ``xs`` fall in the row lengths this entry serves (always, where it has no
    range; ``[2, None]``: a row of any length)?"""
    return all(r is None or r[0] <= x <= (x if r[1] is None else r[1])
               for x, r in zip(xs, tmpl["dynamic"]["ranges"]))


def instantiate(tmpl: Any, xs: Any, name: str) -> Any:
    """The entry at extents ``xs`` (see the module docstring); BundleError when the
    bundle's kernels cannot run them."""
    xs = _xs(xs)
    dyn = tmpl["dynamic"]
    what = _what(xs)
    for x in xs:
        if x < 2:
            raise BundleError(
                f"{name}: a dynamic dimension of extent {x} cannot run from this bundle (it "
                "serves extents >= 2: sizes 0 and 1 lower differently); export a concrete "
                "signature for it")
    if not in_range(tmpl, xs):
        raise BundleError(f"{name}: {what} is not in this entry's row lengths {dyn['ranges']}")
    vec = max((k["vec"] for k in tmpl["kernels"]), default=1)
    for x, dims, rng in zip(xs, dyn["vars"], dyn["ranges"]):
        innermost = any(axis == len(tmpl["args"][arg]["shape"]) - 1 for arg, axis in dims)
        if rng is None and innermost and x % vec:
            # the innermost axis: a row of another length would split the kernels' vectors
            raise BundleError(
                f"{name}: extent {x} of the dynamic (innermost) dimension does not fit this "
                f"bundle's kernels, which step {vec} elements at a time along it; pass a "
                f"multiple of {vec}, or export a concrete signature for it")
    entry = _inst(tmpl, xs, what, name)
    for k in entry["kernels"]:  # the code generator rounds global sizes to the group size
        if k["vec"] > 1:  # (and launches a tail of up to vec - 1 elements one a work-item)
            k["global_size"][0] = max(k["global_size"][0], k["vec"])
        if k["local_size"] is not None:
            k["global_size"] = [-(-g // loc) * loc for g, loc in
                                zip(k["global_size"], k["local_size"])]
    return entry


def _what(xs: tuple[int, ...]) -> str:
    return f"extent {xs[0]}" if len(xs) == 1 else f"extents {xs}"


def instantiate_args(args: list[dict[str, Any]], xs: Any) -> list[dict[str, Any]]:
    """A template's argument specs at extents ``xs`` (BundleError when they do not fit)."""
    if xs is None:
        raise BundleError("no extent")
    xs = _xs(xs)
    return _inst(args, xs, _what(xs), "arguments")


def _inst(t: Any, xs: tuple[int, ...], what: str, name: str, up: bool = False) -> Any:
    if isinstance(t, dict):
        if "$x" in t or t.keys() == {"$n"}:
            if "$n" in t:  # format 2: (p*n + r) / q
                p, r, q = t["$n"]
                c = [r, p]
            else:
                c, q = t["$x"], t["q"]
            v, rem = divmod(sum(a * _monomial(xs, m) for m, a in enumerate(c)), q)
            if up and rem:  # (_ROUNDED_UP)
                v, rem = v + 1, 0
            if rem or v < 0:
                raise BundleError(
                    f"{name}: {what} of the dynamic dimension does not fit this bundle's "
                    f"kernels (they need {_formula(c)} to be a multiple of {q}, e.g. a "
                    "whole number of vector steps); pass an extent that does, or export a "
                    "concrete signature for it")
            return float(v) if t.get("float") else v
        return {k: _inst(v, xs, what, name, up or k in _ROUNDED_UP) for k, v in t.items()}
    if isinstance(t, list):
        return [_inst(v, xs, what, name, up) for v in t]
    return t


def _formula(c: list[int]) -> str:
    names = "nmrst"
    terms = [(a, "*".join(names[i] for i in range(8) if (m >> i) & 1)) for m, a in enumerate(c)
             if a]
    text = " ".join(f"{a:+d}" + (f"*{v}" if v else "") for a, v in terms) or "0"
    return f"({text.lstrip('+')})"


def extents_of(tmpl: dict[str, Any], args: tuple) -> tuple[int, ...] | None:
    """The extents a call's arguments give this template's variables (None: an argument is
    not an array of the template's rank, or one variable gets two values)."""
    xs = []
    for dims in tmpl["dynamic"]["vars"]:
        seen = set()
        for arg, axis in dims:
            shape = getattr(args[arg], "shape", None) if arg < len(args) else None
            if not isinstance(shape, tuple) or len(shape) != len(tmpl["args"][arg]["shape"]):
                return None
            seen.add(shape[axis])
        if len(seen) != 1:
            return None
        xs.append(seen.pop())
    return tuple(xs)
