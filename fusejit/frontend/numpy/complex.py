"""NumPy's functions on the parts of complex values: np.real, np.imag (and the ``.real`` /
``.imag`` attributes), np.conj, np.angle, np.iscomplexobj / np.isrealobj.

On a real operand they behave as NumPy's do: ``real`` is the value itself (a view: writes reach
the array), ``imag`` a zero array of its dtype that is read-only, ``conj`` a copy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir import shapes
from fusejit.ir.graph import Node, const
from fusejit.ir.ops import Op
from fusejit.frontend.trace import TensorProxy, as_node, broadcast_to, cast, lift, to_operand
from fusejit.frontend.ufuncs import apply_ufunc


def _part(x: TensorProxy, op: Op) -> TensorProxy:
    # NumPy's z.real / z.imag are writable views of z; a traced part is a value, so a write
    # into it is refused rather than silently lost
    name = "real" if op is Op.REAL else "imag"
    why = (f"writing into z.{name} of a complex value is not supported inside @fuse; build "
           "the new value instead, e.g. z = new_re + 1j * z.imag or np.where(mask, ..., z)")
    return TensorProxy(Node.make(op, dt.real_of(x.dtype), x.shape, (x.node,)), readonly=why)


def real(val: Any) -> TensorProxy:
    """np.real(x) / x.real: the real part (of a real value, the value itself)."""
    x = lift(val)
    if x.dtype.kind != "c":
        return x
    return _part(x, Op.REAL)


def imag(val: Any) -> TensorProxy:
    """np.imag(x) / x.imag: the imaginary part (of a real value, zeros of its dtype)."""
    x = lift(val)
    if x.dtype.kind != "c":
        return TensorProxy(const(0, x.dtype, x.shape), readonly=True)
    return _part(x, Op.IMAG)


def conjugate(x: Any, *args: Any, **kwargs: Any) -> Any:
    """np.conj / x.conj() / x.conjugate(): the ufunc np.conjugate."""
    return apply_ufunc(np.conjugate, (x, *args), kwargs)


def angle(z: Any, deg: bool = False) -> TensorProxy:
    """np.angle: ``arctan2(imag, real)`` in the real dtype of ``z`` (float64 for integers, as
    NumPy's own, which converts integers to float first), in degrees with ``deg=True``."""
    x = lift(z)
    re, im = (real(x), imag(x)) if x.dtype.kind == "c" else (x, imag(x))
    a = apply_ufunc(np.arctan2, (im, re), {})
    return apply_ufunc(np.multiply, (a, 180 / np.pi), {}) if deg else a


def from_parts(re: TensorProxy, im: TensorProxy) -> TensorProxy:
    """The complex value with these real parts (of one float dtype), as NumPy builds results
    part by part (np.round, np.nan_to_num of complex arrays)."""
    shape = shapes.broadcast_shapes(re.shape, im.shape)
    part = np.result_type(re.dtype, im.dtype)
    nodes = tuple(broadcast_to(cast(p.node, part), shape) for p in (re, im))
    return TensorProxy(Node.make(Op.COMPLEX, dt.complex_of(part), shape, nodes))


def set_part(z: TensorProxy, part: str, value: Any) -> None:
    """``z.real = value`` / ``z.imag = value``: NumPy writes the part into ``z`` (cast
    unsafely, broadcast); a real ``z`` has no imaginary part to set."""
    if z.dtype.kind != "c":
        if part == "imag":
            raise TypeError("array does not have imaginary part to set")
        z.write(Ellipsis, value)
        return
    new = broadcast_to(cast(as_node(to_operand(value), dt.real_of(z.dtype)),
                            dt.real_of(z.dtype)), z.shape)
    re, im = (new, imag(z).node) if part == "real" else (real(z).node, new)
    z.write(Ellipsis, TensorProxy(Node.make(Op.COMPLEX, z.dtype, z.shape, (re, im))))


def squared_magnitude(dev: TensorProxy) -> TensorProxy:
    """``re * re + im * im`` in the real dtype: NumPy's ``_var`` on complex deviations (it
    squares the parts through a float view and adds them)."""
    re, im = real(dev), imag(dev)
    return apply_ufunc(np.add, (apply_ufunc(np.multiply, (re, re), {}),
                                apply_ufunc(np.multiply, (im, im), {})), {})


def iscomplex(x: Any) -> TensorProxy:
    """np.iscomplex: a nonzero imaginary part (all False for real dtypes)."""
    return apply_ufunc(np.not_equal, (imag(x), 0), {})


def isreal(x: Any) -> TensorProxy:
    """np.isreal: a zero imaginary part (all True for real dtypes)."""
    return apply_ufunc(np.equal, (imag(x), 0), {})


def iscomplexobj(x: Any) -> bool:
    return lift(x).dtype.kind == "c"


def isrealobj(x: Any) -> bool:
    return lift(x).dtype.kind != "c"


__all__ = ["angle", "conjugate", "from_parts", "imag", "iscomplex", "iscomplexobj", "isreal",
           "isrealobj", "real", "squared_magnitude"]
