"""The Python operators of traced values (``x + 1``, ``x ** 2``, ``b1 -= 1``), installed on
``TensorProxy`` when this module is imported (``fusejit/__init__.py`` imports it, with the
NumPy functions of ``frontend.numpy``): ``trace`` defines the proxy without them, so it need
not import the ufunc layer they are built on.

Between Python scalars only they are Python arithmetic (weak results, NEP 50); otherwise
the ufunc NumPy's ndarray operator calls, with ndarray's own fast paths for ``**``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.errors import IntRangeError
from fusejit.ir.ops import Op
from fusejit.frontend.trace import TensorProxy, cast, is_numpy_scalar
from fusejit.frontend.ufuncs import apply_ufunc


def _is_python_scalar(x: Any) -> bool:
    """A Python scalar literal or a weak value (not np.float64, which subclasses float)."""
    if isinstance(x, TensorProxy):
        return x._weak is not None or x._pybool
    return type(x) in (bool, int, float, complex)


def _is_python_bool(x: Any) -> bool:
    return x._pybool if isinstance(x, TensorProxy) else type(x) is bool


def _python_int(x: Any) -> Any:
    """A Python bool in Python arithmetic: an int (``True + True`` is 2, ``-True`` is -1)."""
    if isinstance(x, TensorProxy):
        return TensorProxy(cast(x.node, dt.INT64), weak=(None, int))
    return int(x)


_BOOL_OPERATORS = frozenset({np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.less,
                             np.less_equal, np.greater, np.greater_equal, np.equal,
                             np.not_equal})


def _operator(ufunc: np.ufunc, operands: tuple[Any, ...], inplace: bool = False) -> Any:
    """A Python operator on proxies. Between Python scalars only (dynamic scalar arguments and
    literals) it is Python arithmetic: ``1 - b1`` is a Python float, weak under NEP 50 (not
    NumPy's strong float64), and ``b1 -= 1`` rebinds the name as it does for a float. A weak
    int computed this way is computed in int64 and converted to an integer array's dtype with
    NumPy's range check (checked_cast)."""
    if any(isinstance(x, (list, tuple)) for x in operands) and _sequence_operation(
            ufunc, operands):
        raise TypeError(_SEQUENCE_WITH_SCALAR.format(
            kind=next(type(x).__name__ for x in operands if isinstance(x, (list, tuple))),
            op=ufunc.__name__))
    if all(_is_python_scalar(x) for x in operands):
        _check_int64_arithmetic(ufunc, operands)
        if not (ufunc in _BOOL_OPERATORS and all(map(_is_python_bool, operands))):
            operands = tuple(_python_int(x) if _is_python_bool(x) else x for x in operands)
        result = apply_ufunc(ufunc, operands, {})
        kind = result.dtype.kind
        if kind == "b":
            result._pybool = True  # a Python bool promotes as np.bool_
            return result
        return TensorProxy(result.node, weak=(None, {"f": float, "c": complex}.get(kind, int)))
    if inplace and not _is_python_scalar(operands[0]) and not is_numpy_scalar(operands[0]):
        # (b1 += x rebinds b1, like a float; so does s += x for a NumPy scalar s)
        apply_ufunc(ufunc, operands, {"out": operands[0]})
        return operands[0]
    return apply_ufunc(ufunc, operands, {})


_SEQUENCE_WITH_SCALAR = (
    "a {kind} and a dynamic scalar argument in one operator ({op}): Python computes it as a "
    "{kind} operation, not elementwise (a {kind} times an integer repeats it, by a count only "
    "known per call; times a float, and a Python scalar's other operators, raise "
    "TypeError). Convert the {kind} with np.asarray(...) for NumPy's elementwise result, "
    "or mark the scalar static (static_argnums=...)")


def _sequence_operation(ufunc: np.ufunc, operands: tuple[Any, ...]) -> bool:
    """Would Python, not NumPy, answer this operator between a list/tuple and a scalar? With a
    Python scalar always (``[1, 2] * n`` repeats, ``[1, 2] - n`` raises); with a NumPy scalar
    for ``*`` (NumPy scalars defer to the sequence: an integer repeats it, a float raises);
    any other pairing (a 0-d array, an array, a NumPy scalar's other operators) is NumPy's
    elementwise operation."""
    scalars = [x for x in operands if isinstance(x, TensorProxy)]
    if any(_is_python_scalar(x) for x in scalars):
        return True
    return ufunc is np.multiply and any(is_numpy_scalar(x) for x in scalars)


def _check_int64_arithmetic(ufunc: np.ufunc, operands: tuple[Any, ...]) -> None:
    """Python arithmetic on dynamic ints is computed in int64: refuse an int beyond it (its
    range is part of the cache key), which would otherwise raise OverflowError at launch."""
    for x in operands:
        if isinstance(x, TensorProxy) and x._weak is not None and x._node is None \
                and getattr(x, "_int_range", None) is not None:
            raise IntRangeError(
                f"Python arithmetic ({ufunc.__name__}) on a dynamic int argument beyond the "
                "int64 range is not supported inside @fuse (fusejit computes it in int64); "
                "mark that argument static (static_argnums=...) or compute it outside the "
                "fused function")


def _binary(ufunc: np.ufunc, reflected: bool = False) -> Callable[..., Any]:
    if reflected:
        return lambda self, other: _operator(ufunc, (other, self))
    return lambda self, other: _operator(ufunc, (self, other))


def _inplace(ufunc: np.ufunc) -> Callable[..., Any]:
    return lambda self, other: _operator(ufunc, (self, other), inplace=True)


for _name, _ufunc in {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "and": np.bitwise_and,
    "or": np.bitwise_or, "xor": np.bitwise_xor, "lshift": np.left_shift,
    "rshift": np.right_shift,
}.items():
    setattr(TensorProxy, f"__{_name}__", _binary(_ufunc))
    setattr(TensorProxy, f"__r{_name}__", _binary(_ufunc, reflected=True))
    setattr(TensorProxy, f"__i{_name}__", _inplace(_ufunc))
for _name, _ufunc in {"lt": np.less, "le": np.less_equal, "gt": np.greater,
                      "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}.items():
    setattr(TensorProxy, f"__{_name}__", _binary(_ufunc))
for _name, _ufunc in {"neg": np.negative, "pos": np.positive, "abs": np.absolute,
                      "invert": np.invert}.items():
    setattr(TensorProxy, f"__{_name}__", lambda self, _u=_ufunc: _operator(_u, (self,)))
TensorProxy.__divmod__ = lambda self, o: apply_ufunc(np.divmod, (self, o), {})  # type: ignore
TensorProxy.__rdivmod__ = lambda self, o: apply_ufunc(np.divmod, (o, self), {})  # type: ignore


# NumPy's ``array ** exponent`` (number.c, fast_scalar_power) calls np.square for the Python int
# 2 on any array (so ``bool_array ** 2`` is int8), and np.reciprocal / np.sqrt for the Python int
# -1 / float 0.5 on float arrays, float16 included (whose power loop has no fast path).
_OPERATOR_POWER = {(int, 2): np.square, (int, -1): np.reciprocal, (float, 0.5): np.sqrt}


def _power(self: TensorProxy, exponent: Any, inplace: bool = False) -> Any:
    # ndarray.__pow__'s fast path; a NumPy scalar (a 0-d ufunc result or reduction, a NumPy
    # scalar argument) has none: np.True_ ** 2 is int64 where np.array(True) ** 2 is int8
    ndarray = bool(self.shape) or self.node.op is Op.INPUT
    if type(exponent) in (int, float) and self._weak is None and ndarray:
        fast = _OPERATOR_POWER.get((type(exponent), exponent))
        if fast is np.square or (fast is not None and self.dtype.kind in "fc"):
            return _operator(fast, (self,), inplace)
    return _operator(np.power, (self, exponent), inplace)


TensorProxy.__pow__ = lambda self, o: _power(self, o)  # type: ignore[attr-defined]
TensorProxy.__ipow__ = lambda self, o: _power(self, o, inplace=True)  # type: ignore
