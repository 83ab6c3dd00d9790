"""Elementwise NumPy functions built from the op table's ops: the multi-output ufuncs
``np.modf`` and ``np.frexp``, ``np.copyto``, ``np.sinc``, ``np.i0``, ``np.isclose``,
``np.allclose``, ``np.interp``, ``np.searchsorted`` and ``np.choose``; and the ufunc calls
(``ufunc(...)``, ``ufunc.outer``) that the tracer's ``__array_ufunc__`` dispatches here.

Each follows NumPy's own definition (``lib/_function_base_impl.py``, ``_core/numeric.py``,
``compiled_base.c`` for interp), with NumPy's dtypes, and fuses with the work around it.
``searchsorted`` (and ``interp``, which uses it) is a branch-free binary search: log2(n) steps,
each one GATHER of the sorted array, so the sorted array may be host-known (captured once) or
computed on the device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib import _function_base_impl as _fb

from fusejit.ir import dtypes as dt
from fusejit.ir import shapes
from fusejit.ir.graph import Node, const
from fusejit.frontend.dispatch import (
    FUNCTIONS,
    UFUNC_METHODS,
    implements,
    unsupported_ufunc_method,
)
from fusejit.frontend.numpy.build import gather
from fusejit.frontend.numpy.build import _write_out as _write_out_one
from fusejit.frontend.numpy.reductions import _mask
from fusejit.frontend.trace import (
    TensorProxy,
    _ptype,
    as_node,
    broadcast_to,
    cast,
    lift,
    reshape,
    to_operand,
)
from fusejit.frontend.trace import where as select
from fusejit.frontend.ufuncs import _write_out, apply_ufunc, resolve


def _u(ufunc: np.ufunc, *args: Any) -> TensorProxy:
    return apply_ufunc(ufunc, args, {})


def _literal(value: Any, dtype: np.dtype) -> TensorProxy:
    return TensorProxy(const(value, dtype))


# -- multi-output ufuncs --------------------------------------------------------------------------


def _loop_input(ufunc: np.ufunc, x: Any, kwargs: dict[str, Any]) -> tuple[TensorProxy, tuple]:
    """x cast to the ufunc's loop input dtype (NumPy's resolution), and the loop's dtypes."""
    extra = set(kwargs) - {"out", "casting", "dtype", "where"}
    if extra:
        raise TypeError(f"{ufunc.__name__}() got an unexpected keyword argument "
                        f"'{next(iter(extra))}'")
    if kwargs.get("where", True) is not True:
        from fusejit.errors import UnsupportedOperationError

        raise UnsupportedOperationError(f"np.{ufunc.__name__}(..., where=...) is not supported "
                                        "inside @fuse")
    x = to_operand(x)
    loop = resolve(ufunc, [_ptype(x)], kwargs.get("dtype"))
    return TensorProxy(cast(lift(x).node, loop[0])), loop


def modf(inputs: tuple, kwargs: dict[str, Any]) -> tuple[TensorProxy, TensorProxy]:
    """C's modf: (fractional part with x's sign, integral part); modf(inf) = (0, inf)."""
    x, _ = _loop_input(np.modf, inputs[0], kwargs)
    whole = _u(np.trunc, x)
    frac = select(_u(np.isinf, x), _literal(0, x.dtype), _u(np.subtract, x, whole))
    results = (_u(np.copysign, frac, x), whole)
    return _outputs(results, kwargs, "modf")


def frexp(inputs: tuple, kwargs: dict[str, Any]) -> tuple[TensorProxy, TensorProxy]:
    """C's frexp: x = m * 2**e with 0.5 <= |m| < 1 (x itself and e = 0 for 0, inf, NaN).
    The exponent's first guess, floor(log2|x|) + 1, is within one of the answer (log2 is
    accurate to a few ULP); one exact ldexp and one correction step on each side make it
    exact."""
    x, loop = _loop_input(np.frexp, inputs[0], kwargs)
    i32 = loop[-1]
    ax = _u(np.absolute, x)
    special = _u(np.logical_or, _u(np.equal, x, 0), _u(np.logical_not, _u(np.isfinite, x)))
    safe = select(special, _literal(1, x.dtype), ax)
    e = _u(np.add, TensorProxy(cast(_u(np.floor, _u(np.log2, safe)).node, i32)), 1)
    m = _u(np.ldexp, safe, _u(np.negative, e))
    big = _u(np.greater_equal, m, 1)
    e = select(big, _u(np.add, e, 1), e)
    m = select(big, _u(np.ldexp, safe, _u(np.negative, e)), m)
    small = _u(np.less, m, 0.5)
    e = select(small, _u(np.subtract, e, 1), e)
    m = select(small, _u(np.ldexp, safe, _u(np.negative, e)), m)
    mant = select(special, x, _u(np.copysign, m, x))
    exp = select(special, TensorProxy(const(0, i32)), e)
    return _outputs((mant, TensorProxy(cast(exp.node, i32))), kwargs, "frexp")


def _outputs(results: tuple, kwargs: dict[str, Any], name: str) -> tuple:
    out = kwargs.get("out")
    if out is None:
        return results
    return _write_out(results, out, kwargs.get("casting", "same_kind"), name)


MULTI_OUTPUT = {np.modf: modf, np.frexp: frexp}


# -- ufunc calls ----------------------------------------------------------------------------------


def _ufunc_call(ufunc: np.ufunc, inputs: Any, kwargs: dict[str, Any]) -> Any:
    """``ufunc(*inputs)`` on traced values: the multi-output ufuncs above, every other one
    through ``apply_ufunc``."""
    if ufunc in MULTI_OUTPUT:
        return MULTI_OUTPUT[ufunc](inputs, kwargs)
    return apply_ufunc(ufunc, inputs, kwargs)


def _ufunc_outer(ufunc: np.ufunc, inputs: Any, kwargs: dict[str, Any]) -> TensorProxy:
    """``ufunc.outer(a, b)``: ``a`` given ``b.ndim`` trailing axes of length 1, then broadcast."""
    if ufunc.nin != 2:
        raise unsupported_ufunc_method(ufunc, "outer")
    a, b = (lift(v) for v in inputs)
    a2 = TensorProxy(reshape(a.node, a.shape + (1,) * b.ndim))
    return apply_ufunc(ufunc, (a2, b), kwargs)


UFUNC_METHODS["__call__"] = _ufunc_call
UFUNC_METHODS["outer"] = _ufunc_outer


# -- copyto, sinc, i0 -----------------------------------------------------------------------------


@implements(np.copyto)
def copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    if isinstance(dst, np.ndarray):  # np.full(shape, traced, dtype) copies into np.empty
        from fusejit.errors import UnsupportedOperationError

        raise UnsupportedOperationError(
            "copying a traced value into a NumPy array made inside the fused function "
            "(np.copyto, or np.full(shape, value, dtype) with a traced value) is not supported: "
            "that array is a constant of the trace; write np.full_like(x, value) of a traced "
            "x, or np.broadcast_to(value, shape).astype(dtype)")
    if not isinstance(dst, TensorProxy):
        raise TypeError(f"copyto() argument 1 must be numpy.ndarray, not {type(dst).__name__} "
                        "(inside @fuse: an argument of the fused function or a view of one)")
    src = to_operand(src)
    t = _ptype(src)
    from_dtype = t if isinstance(t, np.dtype) else dt.default_dtype(t)
    if not np.can_cast(from_dtype, dst.dtype, casting=casting):
        what = "array data" if isinstance(t, np.dtype) and np.ndim(src) else "scalar"
        raise TypeError(f"Cannot cast {what} from {from_dtype!r} to {dst.dtype!r} according "
                        f"to the rule '{casting}'")
    value = lift(src) if isinstance(t, np.dtype) else src
    if where is not True:
        value = select(_mask(dst, where), value, dst)
    dst.write(Ellipsis, value)


@implements(np.sinc)
def sinc(x: Any) -> TensorProxy:
    x = _u(np.multiply, np.pi, lift(x))
    eps = np.finfo(x.dtype).eps if x.dtype.kind == "f" else 1e-20
    y = select(TensorProxy(cast(x.node, dt.BOOL)), x, eps)
    return _u(np.true_divide, _u(np.sin, y), y)


@implements(np.i0)
def i0(x: Any) -> TensorProxy:
    """NumPy's i0: Chebyshev series on |x| <= 8 and beyond (Cephes), NumPy's coefficients."""
    x = lift(x)
    if x.dtype.kind != "f":
        x = TensorProxy(cast(x.node, dt.FLOAT64))
    x = _u(np.absolute, x)
    near = _fb._i0_1(x)
    far = _fb._i0_2(select(_u(np.less_equal, x, 8.0), _literal(9, x.dtype), x))
    return select(_u(np.less_equal, x, 8.0), near, far)


# -- isclose, allclose ----------------------------------------------------------------------------


@implements(np.isclose)
def isclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08,
            equal_nan: bool = False) -> TensorProxy:
    x, y = to_operand(a), to_operand(b)
    t = _ptype(y)
    if isinstance(t, np.dtype):
        y = TensorProxy(cast(lift(y).node, dt.result_type(t, float)))
    elif t is int:  # as NumPy: an int64 (uint64) array, then float64 like any integer y
        y = TensorProxy(cast(lift(y).node, dt.FLOAT64)) if isinstance(y, TensorProxy) \
            else float(y)
    close = _u(np.less_equal, _u(np.absolute, _u(np.subtract, x, y)),
               _u(np.add, atol, _u(np.multiply, rtol, _u(np.absolute, y))))
    result = _u(np.logical_or, _u(np.logical_and, close, _u(np.isfinite, y)), _u(np.equal, x, y))
    if equal_nan:
        both = _u(np.logical_and, _u(np.isnan, x), _u(np.isnan, y))
        result = _u(np.logical_or, result, both)
    return result


@implements(np.allclose)
def allclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08,
             equal_nan: bool = False) -> TensorProxy:
    """A traced 0-d bool (NumPy returns a Python bool, which is only known after the run)."""
    return FUNCTIONS[np.all](isclose(a, b, rtol, atol, equal_nan))


# -- searchsorted, interp --------------------------------------------------------------------------


def _precedes(a: TensorProxy, v: TensorProxy) -> TensorProxy:
    """a < v in NumPy's sort order, where NaN sorts after every number."""
    return _u(np.logical_or, _u(np.less, a, v),
              _u(np.logical_and, _u(np.isnan, v), _u(np.logical_not, _u(np.isnan, a))))


def search(a: Node, v: TensorProxy, side: str) -> TensorProxy:
    """The insertion index of each ``v`` in the sorted 1-D ``a`` (branch-free binary search:
    after the step of size s, ``lo`` elements are known to precede v)."""
    n = a.shape[0]
    lo = TensorProxy(const(0, np.dtype(np.intp), v.shape))
    step = 1 << max(n.bit_length() - 1, 0)
    while n and step:
        probe = _u(np.add, lo, step)
        item = _gather_flat(a, _u(np.subtract, _u(np.minimum, probe, n), 1))
        before = _precedes(item, v) if side == "left" else \
            _u(np.logical_not, _precedes(v, item))
        lo = select(_u(np.logical_and, _u(np.less_equal, probe, n), before), probe, lo)
        step >>= 1
    return lo


def _gather_flat(a: Node, k: TensorProxy) -> TensorProxy:
    """The 1-D ``a`` at the indices ``k`` (any shape), clamped into it."""
    flat = reshape(k.node, (max(k.size, 1),))
    return TensorProxy(reshape(gather(a, 0, flat), k.shape))


@implements(np.searchsorted, method="searchsorted")
def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> TensorProxy:
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right' (got {side!r})")
    arr = lift(a)
    if arr.ndim != 1:
        raise ValueError("object too deep for desired array" if arr.ndim > 1 else
                         "object of too small depth for desired array")
    if sorter is not None:
        arr = arr[sorter]
    values = lift(v)
    common = dt.result_type(arr.dtype, _ptype(to_operand(v)))
    return search(cast(arr.node, common), TensorProxy(cast(values.node, common)), side)


@implements(np.interp)
def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None,
           period: Any = None) -> TensorProxy:
    """NumPy's arr_interp (compiled_base.c) in float64, the sorted ``xp`` searched per x."""
    if period is not None:
        from fusejit.errors import UnsupportedOperationError

        raise UnsupportedOperationError("np.interp(..., period=...) is not supported inside "
                                        "@fuse")
    f64 = dt.FLOAT64
    xs = TensorProxy(cast(lift(x).node, f64))
    xq, yq = (TensorProxy(cast(lift(p).node, f64)) for p in (xp, fp))
    if xq.ndim != 1 or yq.ndim != 1:
        raise ValueError("object too deep for desired array")
    if xq.shape != yq.shape:
        raise ValueError("fp and xp are not of the same length.")
    n = xq.shape[0]
    if n == 0:
        raise ValueError("array of sample points is empty")
    lval = yq[0] if left is None else left
    rval = yq[n - 1] if right is None else right
    j = _u(np.subtract, search(xq.node, xs, "right"), 1)  # xp[j] <= x < xp[j+1]

    x0, y0 = _gather_flat(xq.node, j), _gather_flat(yq.node, j)
    j1 = _u(np.minimum, _u(np.add, j, 1), n - 1)
    x1, y1 = _gather_flat(xq.node, j1), _gather_flat(yq.node, j1)
    slope = _u(np.true_divide, _u(np.subtract, y1, y0), _u(np.subtract, x1, x0))
    res = _u(np.add, _u(np.multiply, slope, _u(np.subtract, xs, x0)), y0)
    # "if we get nan in one direction, try the other"
    other = _u(np.add, _u(np.multiply, slope, _u(np.subtract, xs, x1)), y1)
    other = select(_u(np.logical_and, _u(np.isnan, other), _u(np.equal, y0, y1)), y0, other)
    res = select(_u(np.isnan, res), other, res)
    res = select(_u(np.logical_or, _u(np.equal, j, n - 1), _u(np.equal, x0, xs)), y0, res)
    res = select(_u(np.less, j, 0), TensorProxy(cast(lift(lval).node, f64)), res)
    res = select(_u(np.greater, xs, xq[n - 1]), TensorProxy(cast(lift(rval).node, f64)), res)
    return select(_u(np.isnan, xs), xs, res)


# -- select, choose -------------------------------------------------------------------------------


@implements(np.select)
def select_(condlist: Any, choicelist: Any, default: Any = 0) -> TensorProxy:
    """np.select: the first true condition's choice, else ``default`` (NumPy's dtype rules:
    Python scalars weak)."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    raw = [to_operand(c) for c in (*choicelist, default)]
    dtype = dt.result_type(*(_ptype(c) for c in raw))
    conds = [lift(to_operand(c)) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != dt.BOOL:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    options = [TensorProxy(as_node(c, dtype)) for c in raw]
    result = options[-1]
    for cond, choice in zip(conds[::-1], options[-2::-1]):
        result = select(cond, choice, result)
    return TensorProxy(cast(result.node, dtype))


# -- choose ---------------------------------------------------------------------------------------


@implements(np.choose, method="choose")
def choose(a: Any, choices: Any, out: Any = None, mode: str = "raise") -> TensorProxy:
    """choices[a[i]][i], as a chain of selects (the kernel reads only what it needs)."""
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    index = to_operand(a)
    raw = [to_operand(c) for c in choices]  # (a traced array: its rows)
    n = len(raw)
    if n == 0:
        raise ValueError("0-length sequence.")
    idx = lift(index)
    if idx.dtype.kind not in "iub":
        raise TypeError(f"Cannot cast array data from {idx.dtype!r} to dtype('int64') "
                        "according to the rule 'safe'")
    if not isinstance(index, TensorProxy) and mode == "raise":
        static = np.asarray(index)
        if np.any((static < 0) | (static >= n)):
            raise ValueError("invalid entry in choice array")
    if mode == "wrap":
        idx = _u(np.remainder, idx, n)
    # NumPy converts the choices to a common type with Python scalars weak (NEP 50)
    dtype = dt.result_type(*(_ptype(c) for c in raw))
    options = [as_node(c, dtype) for c in raw]
    shape = shapes.broadcast_shapes(idx.shape, *(c.shape for c in options))
    result = TensorProxy(broadcast_to(options[-1], shape))
    for k in range(n - 2, -1, -1):  # clip (and an index the device cannot check): nearest
        pick = _u(np.less_equal, idx, k) if k == 0 else _u(np.equal, idx, k)
        result = select(pick, TensorProxy(options[k]), result)
    return _write_out_one(result, out)
