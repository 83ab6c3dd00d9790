"""The "supported NumPy API" table of the docs, generated from the dispatch tables.

Everything ``@fuse`` can trace is a key of one of the tables the tracer dispatches through (the
op table's ``OP_OF_UFUNC``, ``numpy_api.FUNCTIONS`` and ``METHODS``, the ufunc-method tables),
so the table is read from them and cannot drift from the code. Entries registered only to refuse
with advice are listed as refused, with that advice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusejit.frontend.numpy import api as numpy_api
from fusejit.frontend.numpy.elementwise import MULTI_OUTPUT
from fusejit.frontend.numpy.reduce import EXTRA_REDUCE
from fusejit.ir.ops import CLIP_UFUNC, COMPLEX_OPS, OP_OF_UFUNC, REDUCE_OF_UFUNC, SCAN_COMBINE, Op


@dataclass(frozen=True)
class Entry:
    name: str  # as a user writes it: np.concatenate, ndarray.sum, np.add.reduce
    kind: str  # "ufunc" | "function" | "method" | "ufunc method"
    note: str = ""  # for refused entries: why, and what to do instead
    supported: bool = True


def _qualified(f: object) -> str:
    module = getattr(f, "__module__", "numpy") or "numpy"
    sub = next((s for s in ("linalg", "fft", "random") if f"numpy.{s}" in module), None)
    if "stride_tricks" in module:
        sub = "lib.stride_tricks"
    return f"np.{sub + '.' if sub else ''}{getattr(f, '__name__', repr(f))}"


def supported_api() -> list[Entry]:
    """Every NumPy name ``@fuse`` dispatches on, sorted by kind and name."""
    ufuncs = set(OP_OF_UFUNC) | set(MULTI_OUTPUT) | {CLIP_UFUNC, np.power, np.divmod,
                                                       np.conjugate}
    rows = [Entry(f"np.{u.__name__}", "ufunc") for u in ufuncs]
    rows += [Entry(f"np.{u.__name__}.reduce", "ufunc method")
             for u in set(REDUCE_OF_UFUNC) | set(EXTRA_REDUCE)]
    rows += [Entry(f"np.{u.__name__}.outer", "ufunc method") for u in ufuncs if u.nin == 2]
    rows += [Entry(f"np.{u.__name__}.accumulate", "ufunc method")
             for u, op in OP_OF_UFUNC.items() if op in SCAN_COMBINE or op is Op.SUB]
    for f, impl in numpy_api.FUNCTIONS.items():
        refused = getattr(impl, "refused", None)
        rows.append(Entry(_qualified(f), "function", refused or "", refused is None))
    rows += [Entry(f"ndarray.{m}", "method") for m in numpy_api.METHODS]
    order = {"ufunc": 0, "ufunc method": 1, "function": 2, "method": 3}
    unique = {(e.name, e.kind): e for e in rows}
    return sorted(unique.values(), key=lambda e: (order[e.kind], e.name))


def complex_support() -> tuple[list[str], list[str]]:
    """(computed, refused): the traced ufuncs and ufunc reductions that NumPy defines on
    complex64/complex128, split by whether fusejit computes them (the op table's
    ``COMPLEX_OPS``)."""
    computed, refused = [], []
    for u, op in sorted(OP_OF_UFUNC.items(), key=lambda item: item[0].__name__):
        if any(c in t for t in u.types for c in "FD"):
            (computed if op in COMPLEX_OPS else refused).append(f"np.{u.__name__}")
    for u, op in sorted(REDUCE_OF_UFUNC.items(), key=lambda item: item[0].__name__):
        if any(c in t for t in u.types for c in "FD"):
            (computed if op in COMPLEX_OPS else refused).append(f"np.{u.__name__}.reduce")
    return computed, refused


def render_rst() -> str:
    """The table as reStructuredText (the docs build includes it)."""
    lines = ["Supported NumPy API", "===================", "",
             "Generated from fusejit's dispatch tables when the docs are built. Anything not "
             "listed raises ``UnsupportedOperationError`` naming the function.", ""]
    entries = supported_api()
    titles = {"ufunc": "Ufuncs", "ufunc method": "Ufunc methods", "function": "Functions",
              "method": "ndarray methods"}
    for kind, title in titles.items():
        group = [e for e in entries if e.kind == kind and e.supported]
        lines += [title, "-" * len(title), "", ", ".join(f"``{e.name}``" for e in group), ""]
    computed, refused_c = complex_support()
    lines += ["Complex numbers", "---------------", "",
              "On complex64 and complex128 values (the OpenCL target; the Vulkan target refuses "
              "them): " + ", ".join(f"``{n}``" for n in computed) + ", with "
              "``np.real``, ``np.imag``, ``np.angle``, ``np.conj`` and the reductions sum, "
              "prod, mean, var, std, max, min, argmax, argmin, any and all (not yet: matrix "
              "products).", ""]
    if refused_c:
        lines += ["Refused on complex values: " + ", ".join(f"``{n}``" for n in refused_c), ""]
    refused = [e for e in entries if not e.supported]
    lines += ["Refused with advice", "-------------------", "", ".. list-table::",
              "   :header-rows: 1", "", "   * - Name", "     - Why, and what to do instead"]
    for e in refused:
        lines += [f"   * - ``{e.name}``", f"     - {e.note}"]
    return "\n".join(lines) + "\n"
