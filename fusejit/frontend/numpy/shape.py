"""NumPy's shape functions inside @fuse: transpose, swapaxes, moveaxis, reshape, ravel,
expand_dims, squeeze, broadcast_to/broadcast_arrays, atleast_Nd and flip. Each is a view of
its operand (no kernel of its own), registered into numpy_api's FUNCTIONS / METHODS on import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fusejit.ir import shapes
from fusejit.errors import UnsupportedOperationError
from fusejit.frontend.dispatch import FUNCTIONS, METHODS, implements
from fusejit.frontend.trace import TensorProxy, broadcast_to, lift, reshape, to_operand


def _as_view_source(x: Any) -> TensorProxy:
    x = to_operand(x)
    return x if isinstance(x, TensorProxy) and x._weak is None else lift(x)


@implements(np.transpose, method="transpose")
def transpose(x: Any, *axes: Any) -> TensorProxy:
    x = _as_view_source(x)
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    if axes is None or axes == ():
        axes = tuple(range(x.ndim))[::-1]
    if len(axes) != x.ndim:
        raise ValueError("axes don't match array")
    axes = tuple(shapes.normalize_axis(a, x.ndim) for a in axes)
    if len(set(axes)) != x.ndim:
        raise ValueError("repeated axis in transpose")
    return x._view(shapes.permute_map(axes), tuple(x.shape[a] for a in axes))


@implements(np.permute_dims if hasattr(np, "permute_dims") else np.transpose)
def _permute_dims(x: Any, axes: Any = None) -> TensorProxy:
    return transpose(x, axes)


@implements(np.swapaxes, method="swapaxes")
def swapaxes(x: Any, a: int, b: int) -> TensorProxy:
    x = _as_view_source(x)
    axes = list(range(x.ndim))
    a, b = shapes.normalize_axis(a, x.ndim, "axis1"), shapes.normalize_axis(b, x.ndim, "axis2")
    axes[a], axes[b] = axes[b], axes[a]
    return transpose(x, tuple(axes))


@implements(np.moveaxis)
def _moveaxis(x: Any, source: Any, destination: Any) -> TensorProxy:
    x = _as_view_source(x)
    src = [shapes.normalize_axis(a, x.ndim, "source") for a in np.atleast_1d(source)]
    dst = [shapes.normalize_axis(a, x.ndim, "destination") for a in np.atleast_1d(destination)]
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number of "
                         "elements")
    order = [n for n in range(x.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, tuple(order))


@implements(np.reshape, method="reshape")
def _reshape(x: Any, *shape: Any, order: str = "C", newshape: Any = None,
             copy: Any = None) -> TensorProxy:
    x = _as_view_source(x)
    if newshape is not None:
        shape = (newshape,)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if order != "C":
        raise UnsupportedOperationError("only order='C' reshapes are supported inside @fuse")
    target = shapes.reshape_target(x.size, shape, x.shape)
    return TensorProxy(reshape(x.node, target))


@implements(np.ravel, method="ravel")
def _ravel(x: Any, order: str = "C") -> TensorProxy:
    return _reshape(x, (-1,), order=order)


METHODS["flatten"] = _ravel


@implements(np.expand_dims)
def _expand_dims(x: Any, axis: Any) -> TensorProxy:
    x = _as_view_source(x)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    nd = x.ndim + len(axes)
    axes = {shapes.normalize_axis(a, nd) for a in axes}
    key = tuple(None if i in axes else slice(None) for i in range(nd))
    return x[key]


@implements(np.squeeze, method="squeeze")
def _squeeze(x: Any, axis: Any = None) -> TensorProxy:
    x = _as_view_source(x)
    if axis is None:
        axes = {i for i, d in enumerate(x.shape) if d == 1}
    else:
        axes = set(shapes.normalize_axes(axis, x.ndim))
        if any(x.shape[a] != 1 for a in axes):
            raise ValueError("cannot select an axis to squeeze out which has size not equal to "
                             "one")
    key = tuple(0 if i in axes else slice(None) for i in range(x.ndim))
    return x[key]


@implements(np.broadcast_to)
def _broadcast_to(x: Any, shape: Any, subok: bool = False) -> TensorProxy:
    x = lift(x)
    shape = tuple(np.atleast_1d(shape).tolist()) if not isinstance(shape, int) else (shape,)
    node = broadcast_to(x.node, tuple(int(d) for d in shape))
    return TensorProxy(None, base=TensorProxy(node), vmap=shapes.identity_map(len(shape)),
                       shape=node.shape, readonly=True)


@implements(np.broadcast_arrays)
def _broadcast_arrays(*args: Any, subok: bool = False) -> tuple[TensorProxy, ...]:
    xs = [lift(a) for a in args]
    shape = shapes.broadcast_shapes(*(x.shape for x in xs))
    return tuple(_broadcast_to(x, shape) for x in xs)


def _atleast_nd(n: int) -> Callable[..., Any]:
    def impl(*arys: Any) -> Any:
        out = []
        for a in arys:
            x = _as_view_source(a)
            if x.ndim < n:
                pad = n - x.ndim
                if n == 3 and x.ndim == 1:
                    key = (None, slice(None), None)
                elif n == 3 and x.ndim == 2:
                    key = (slice(None), slice(None), None)
                else:
                    key = (None,) * pad + (slice(None),) * x.ndim
                x = x[key]
            out.append(x)
        return out[0] if len(out) == 1 else tuple(out)
    return impl


FUNCTIONS[np.atleast_1d] = _atleast_nd(1)
FUNCTIONS[np.atleast_2d] = _atleast_nd(2)
FUNCTIONS[np.atleast_3d] = _atleast_nd(3)


@implements(np.flip)
def _flip(x: Any, axis: Any = None) -> TensorProxy:
    x = _as_view_source(x)
    axes = set(shapes.normalize_axes(axis, x.ndim))
    return x[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))]


FUNCTIONS[np.fliplr] = lambda x: _flip(x, 1)
FUNCTIONS[np.flipud] = lambda x: _flip(x, 0)
