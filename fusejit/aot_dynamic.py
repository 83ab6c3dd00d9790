"""Bundle entries with dynamic (None) dimensions: launch metadata as functions of the extent.

Every None of one signature stands for the same extent ``n`` (a batch size shared by the
arguments: ``(ShapeDtype((None, 64)), ShapeDtype((None, 64)))`` takes two arrays of equal
batch); a call whose arrays give different extents matches no signature.

A kernel built for runtime extents (``@fuse(dynamic=...)``) serves every extent whose lowering
yields the same source; what changes with the extent is the launch metadata (argument and
output shapes, temporaries, extents passed to kernels, global sizes). ``export`` lowers the
signature at ``extents_for(...)`` (the first two fit, the others verify) and ``template``
turns the entries into one whose every changing integer is ``{"$n": [p, r, q]}``: ``(p*n + r) / q``.
Anything else that changes (the kernel source, a captured constant) is refused: the kernels
are specialised on the extent, so the signature cannot be exported dynamic.

``instantiate(template, n)`` gives the entry for extent ``n``; an extent for which a formula
is not a whole number (the kernels step over ``vec`` elements at a time and this extent
leaves a remainder) or is negative is refused with a BundleError naming the extent. Extents
0 and 1 are refused too (a size-0 or size-1 dimension lowers differently: empty ranges,
broadcasting), and so is an extent of a dynamic innermost axis that is not a multiple of the
kernels' vector width (the in-process path would pick narrower vectors for it). An extent
whose arrays need 64-bit indexing matches no signature (the argument's spec differs).

What is checked and what is assumed: the source and the constants are the same at the four
representative extents (multiples of 1024, smaller for long rows, so every formula fits them
exactly), and the formulas are exact there. For other extents the bundle relies on what the
code generator does with runtime extents: the kernels read their bounds from launch
arguments (the in-process dynamic path reuses one program on the same grounds), and the
metadata keeps the forms it gives them (products of dimensions, quotients by the vector
width, round-ups to the work-group size, which ``instantiate`` reapplies to global sizes).
"""

from __future__ import annotations

from fractions import Fraction
from math import gcd
from typing import Any

from .errors import FusejitError

_UNITS = (2, 4, 3, 1)  # times the base: the extents lowered at export (two fit, two verify)
_BASE = 1024  # the largest work-group size: global sizes rounded to it stay exact multiples


def extents_for(static_elements: int) -> tuple[int, ...]:
    """The extents a dynamic signature is lowered at: multiples of 1024 (so a global size
    rounded up to any work-group size is exact at every one of them, and the fit is exact),
    halved while the largest would need 64-bit indexing (``static_elements``: the product of
    the argument's other dimensions), since a bundle lowered with 64-bit indices would not
    match the usual 32-bit calls."""
    base = _BASE
    while base > 8 and max(_UNITS) * base * max(static_elements, 1) > 2**30:
        base //= 2
    return tuple(u * base for u in _UNITS)
_NOT_COMPARED = frozenset({"graph"})  # the graph text names shapes; kept as at the first extent


class BundleError(FusejitError, ValueError):
    """A bundle that cannot be read, a call no exported signature matches, a dynamic
    signature that cannot be exported, or an extent a bundle cannot run."""


def dynamic_dims(sig: tuple) -> list[tuple[int, int]]:
    """(argument, axis) of every None dimension of a signature's ShapeDtypes."""
    from .aot import ShapeDtype

    return [(i, d) for i, a in enumerate(sig) if isinstance(a, ShapeDtype)
            for d, s in enumerate(a.shape) if s is None]


def template(entries: list[dict[str, Any]], extents: tuple[int, ...], where: str
             ) -> dict[str, Any]:
    """One entry whose integers that change with the extent are affine formulas; see the
    module docstring. ``entries[k]`` was lowered at ``extents[k]``."""
    return _merge(entries, extents, where)


def _merge(values: list[Any], ns: tuple[int, ...], path: str) -> Any:
    first = values[0]
    if all(v == first and type(v) is type(first) for v in values):
        return first
    if isinstance(first, dict) and all(isinstance(v, dict) and v.keys() == first.keys()
                                       for v in values):
        return {k: first[k] if k in _NOT_COMPARED else
                _merge([v[k] for v in values], ns, f"{path}.{k}") for k in first}
    if isinstance(first, list) and all(isinstance(v, list) and len(v) == len(first)
                                       for v in values):
        return [_merge([v[i] for v in values], ns, f"{path}[{i}]") for i in range(len(first))]
    if all(type(v) is int for v in values):
        return _fit(values, ns, path)
    what = "the kernel source" if path.endswith(".source") else path
    raise BundleError(
        f"{what} changes with the dynamic extent (lowered at {ns[0]} and {ns[1]}): the "
        "kernels are specialised on it (for example a reduction over the dynamic axis "
        "bakes its length into the source), so this signature cannot be exported with a "
        "None dimension; export the sizes it will see as concrete signatures instead")


def _fit(values: list[int], ns: tuple[int, ...], path: str) -> dict[str, list[int]]:
    a = Fraction(values[1] - values[0], ns[1] - ns[0])
    b = values[0] - a * ns[0]
    for n, v in zip(ns[2:], values[2:]):
        if a * n + b != v:
            raise BundleError(
                f"launch metadata {path} is not affine in the dynamic extent ({values} at "
                f"extents {list(ns)}; every None of a signature is the same extent, so a "
                "(None, None) array has n*n elements): this signature cannot be exported with "
                "None dimensions; export the sizes it will see as concrete signatures instead")
    q = a.denominator * b.denominator // gcd(a.denominator, b.denominator)
    return {"$n": [int(a * q), int(b * q), q]}


def instantiate(tmpl: Any, n: int, name: str) -> Any:
    """The entry of extent ``n`` (see the module docstring); BundleError when the
    bundle's kernels cannot run it."""
    if n < 2:
        raise BundleError(
            f"{name}: a dynamic dimension of extent {n} cannot run from this bundle (it "
            "serves extents >= 2: sizes 0 and 1 lower differently); export a concrete "
            "signature for it")
    vec = max((k["vec"] for k in tmpl["kernels"]), default=1)
    innermost = any(axis == len(tmpl["args"][arg]["shape"]) - 1
                    for arg, axis in tmpl["dynamic"]["dims"])
    if innermost and n % vec:
        # the innermost axis: a row of another length would split the kernels' vectors
        raise BundleError(
            f"{name}: extent {n} of the dynamic (innermost) dimension does not fit this "
            f"bundle's kernels, which step {vec} elements at a time along it; pass a "
            f"multiple of {vec}, or export a concrete signature for it")
    entry = _inst(tmpl, n, name)
    for k in entry["kernels"]:  # the code generator rounds global sizes to the group size
        if k["local_size"] is not None:
            k["global_size"] = [-(-g // loc) * loc for g, loc in
                                zip(k["global_size"], k["local_size"])]
    return entry


def instantiate_args(args: list[dict[str, Any]], n: int | None) -> list[dict[str, Any]]:
    """A template's argument specs at extent ``n`` (BundleError when it does not fit)."""
    if n is None:
        raise BundleError("no extent")
    return _inst(args, n, "arguments")


def _inst(t: Any, n: int, name: str) -> Any:
    if isinstance(t, dict):
        if t.keys() == {"$n"}:
            p, r, q = t["$n"]
            v, rem = divmod(p * n + r, q)
            if rem or v < 0:
                raise BundleError(
                    f"{name}: extent {n} of the dynamic dimension does not fit this bundle's "
                    f"kernels (they need ({p}*n {r:+d}) to be a multiple of {q}, e.g. a "
                    "whole number of vector steps); pass an extent that does, or export a "
                    "concrete signature for it")
            return v
        return {k: _inst(v, n, name) for k, v in t.items()}
    if isinstance(t, list):
        return [_inst(v, n, name) for v in t]
    return t


def extent_of(tmpl: dict[str, Any], args: tuple) -> int | None:
    """The dynamic extent a call's arguments give this template: read back from the first
    argument dimension that is a formula (None: no such argument, or not an array there)."""
    for i, a in enumerate(tmpl["args"]):
        for d, s in enumerate(a.get("shape", ())):
            if isinstance(s, dict):
                shape = getattr(args[i], "shape", None) if i < len(args) else None
                if not isinstance(shape, tuple) or len(shape) != len(a["shape"]):
                    return None
                p, r, q = s["$n"]
                if not p:  # (a formula that does not depend on n: not an exported one)
                    return None
                n, rem = divmod(shape[d] * q - r, p)
                return None if rem else n
    return None
