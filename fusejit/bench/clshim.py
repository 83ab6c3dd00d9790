"""A NumPy-like namespace over ``pyopencl.array``: the unfused baseline.

Every operation is one kernel launch over device arrays, as in any eager array library (torch
eager, cupy): this is what a workload costs without fusion on the same OpenCL device.
``pyopencl.array`` has no broadcasting and no reductions along an axis, so this module adds the
two that the workloads need — a broadcasting binary op for rank <= 2 and a row reduction
(one work-group per row) — each still a single kernel.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pyopencl.tools as cltools
from pyopencl import clmath
from pyopencl.elementwise import ElementwiseKernel

_C_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_kernels: dict[tuple, Any] = {}
_kernels_lock = threading.Lock()


def _cached(key: tuple, make: Any) -> Any:
    with _kernels_lock:
        if key not in _kernels:
            _kernels[key] = make()
        return _kernels[key]


class BroadcastArray(cla.Array):
    """``pyopencl.array.Array`` with NumPy broadcasting of rank <= 2 operands.

    Same-shape operations go to pyopencl unchanged; results of pyopencl operations keep this
    class (pyopencl allocates results with ``self.__class__``).
    """

    def _binop(self, other: Any, op: str, reflected: bool) -> Any:
        a, b = (other, self) if reflected else (self, other)
        return _broadcast_binop(a, b, op)

    def _needs_broadcast(self, other: Any) -> bool:
        return isinstance(other, cla.Array) and other.shape != self.shape \
            and other.shape != () and self.shape != ()

    def __add__(self, other: Any) -> Any:
        if self._needs_broadcast(other):
            return self._binop(other, "+", False)
        return super().__add__(other)

    def __radd__(self, other: Any) -> Any:
        if self._needs_broadcast(other):
            return self._binop(other, "+", True)
        return super().__radd__(other)

    def __sub__(self, other: Any) -> Any:
        if self._needs_broadcast(other):
            return self._binop(other, "-", False)
        return super().__sub__(other)

    def __rsub__(self, other: Any) -> Any:
        if self._needs_broadcast(other):
            return self._binop(other, "-", True)
        return super().__rsub__(other)

    def __mul__(self, other: Any) -> Any:
        if self._needs_broadcast(other):
            return self._binop(other, "*", False)
        return super().__mul__(other)

    def __rmul__(self, other: Any) -> Any:
        if self._needs_broadcast(other):
            return self._binop(other, "*", True)
        return super().__rmul__(other)

    def __truediv__(self, other: Any) -> Any:
        if self._needs_broadcast(other):
            return self._binop(other, "/", False)
        return super().__truediv__(other)

    def __rtruediv__(self, other: Any) -> Any:
        if self._needs_broadcast(other):
            return self._binop(other, "/", True)
        return super().__rtruediv__(other)


_OP_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "div"}


def _strides_2d(shape: tuple[int, ...], out: tuple[int, int]) -> tuple[int, int]:
    """Element strides of a C-contiguous operand broadcast to the 2-D ``out`` shape."""
    full = (1,) * (2 - len(shape)) + tuple(shape)
    rows, cols = full
    return (cols if rows > 1 else 0), (1 if cols > 1 else 0)


def _broadcast_binop(a: cla.Array, b: cla.Array, op: str) -> BroadcastArray:
    shape = np.broadcast_shapes(a.shape, b.shape)
    if len(shape) > 2 or not (a.flags.c_contiguous and b.flags.c_contiguous):
        raise NotImplementedError(f"broadcasting {a.shape} {op} {b.shape}: only contiguous "
                                  "operands of rank <= 2")
    if a.dtype != b.dtype:
        raise NotImplementedError(f"broadcasting mixed dtypes {a.dtype}, {b.dtype}")
    out2 = (1,) * (2 - len(shape)) + tuple(shape)
    ctype = _C_TYPES[a.dtype]
    knl = _cached(("bcast", a.context, ctype, op), lambda: ElementwiseKernel(
        a.context,
        f"{ctype} *out, const {ctype} *a, const {ctype} *b, int ncols, "
        "int sa0, int sa1, int sb0, int sb1",
        f"int r = i / ncols, c = i - r * ncols; "
        f"out[i] = a[r * sa0 + c * sa1] {op} b[r * sb0 + c * sb1]",
        f"bcast_{_OP_NAMES[op]}"))
    base = a if a.shape == shape else b
    out = BroadcastArray(a.queue, shape, a.dtype, allocator=base.allocator)
    sa, sb = _strides_2d(a.shape, out2), _strides_2d(b.shape, out2)
    knl(out, a, b, np.int32(out2[1]), *map(np.int32, sa + sb), queue=a.queue)
    return out


_REDUCE = {  # name -> (identity, combine(acc, x))
    "sum": ("0", "{a} + {b}"),
    "max": ("-INFINITY", "fmax({a}, {b})"),
}


def _row_reduce_kernel(ctx: cl.Context, ctype: str, kind: str, group: int) -> cl.Kernel:
    init, combine = _REDUCE[kind]
    src = f"""
__kernel __attribute__((reqd_work_group_size({group}, 1, 1)))
void row_{kind}(__global const {ctype} *x, __global {ctype} *out, int ncols, {ctype} scale)
{{
    __local {ctype} part[{group}];
    const int lid = get_local_id(0);
    const __global {ctype} *row = x + (long)get_group_id(0) * ncols;
    {ctype} acc = {init};
    for (int j = lid; j < ncols; j += {group})
        acc = {combine.format(a="acc", b="row[j]")};
    part[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = {group} / 2; s > 0; s >>= 1) {{
        if (lid < s)
            part[lid] = {combine.format(a="part[lid]", b="part[lid + s]")};
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
    if (lid == 0)
        out[get_group_id(0)] = part[0] * scale;
}}
"""
    return getattr(cl.Program(ctx, src).build(), f"row_{kind}")


class ClNamespace:
    """The NumPy functions the workloads call, each one pyopencl kernel on device arrays."""

    def __init__(self, queue: cl.CommandQueue, allocator: Any | None = None) -> None:
        self.queue = queue
        self.allocator = allocator or cltools.MemoryPool(cltools.ImmediateAllocator(queue))
        self.group = 1 << (min(256, queue.device.max_work_group_size).bit_length() - 1)

    def asarray(self, host: np.ndarray) -> BroadcastArray:
        out = BroadcastArray(self.queue, host.shape, host.dtype, allocator=self.allocator)
        out.set(np.ascontiguousarray(host))
        return out

    # -- elementwise ------------------------------------------------------------------------------
    def abs(self, x: cla.Array) -> cla.Array:
        return abs(x)

    def maximum(self, a: Any, b: Any) -> cla.Array:
        # pyopencl passes a Python float as double, which fmax(float, double) cannot resolve
        if np.isscalar(b):
            b = a.dtype.type(b)
        elif np.isscalar(a):
            a = b.dtype.type(a)
        return cla.maximum(a, b)

    def where(self, cond: cla.Array, a: Any, b: Any) -> cla.Array:
        like = a if isinstance(a, cla.Array) else b
        a, b = (self._full(like, v) if np.isscalar(v) else v for v in (a, b))
        return cla.if_positive(cond, a, b)

    # NumPy's names for pyopencl's elementwise math (one kernel each)
    exp, log, sqrt, tanh = (staticmethod(clmath.exp), staticmethod(clmath.log),
                            staticmethod(clmath.sqrt), staticmethod(clmath.tanh))
    sin, cos, arcsin = staticmethod(clmath.sin), staticmethod(clmath.cos), staticmethod(clmath.asin)

    def _full(self, like: cla.Array, value: Any) -> cla.Array:
        out = like._new_like_me()
        out.fill(like.dtype.type(value))
        return out

    # -- reductions over the last axis ------------------------------------------------------------
    def sum(self, x: cla.Array, axis: int | None = None, keepdims: bool = False) -> cla.Array:
        return self._rows(x, "sum", axis, keepdims, 1.0)

    def max(self, x: cla.Array, axis: int | None = None, keepdims: bool = False) -> cla.Array:
        return self._rows(x, "max", axis, keepdims, 1.0)

    def mean(self, x: cla.Array, axis: int | None = None, keepdims: bool = False) -> cla.Array:
        return self._rows(x, "sum", axis, keepdims, 1.0 / x.shape[-1])

    def _rows(self, x: cla.Array, kind: str, axis: int | None, keepdims: bool,
              scale: float) -> cla.Array:
        if x.ndim != 2 or axis not in (-1, 1) or not x.flags.c_contiguous or x.offset:
            raise NotImplementedError("the unfused baseline reduces contiguous 2-D arrays "
                                      "along the last axis only")
        rows, cols = x.shape
        ctype = _C_TYPES[x.dtype]
        knl = _cached(("rows", x.context, ctype, kind, self.group),
                      lambda: _row_reduce_kernel(x.context, ctype, kind, self.group))
        out = BroadcastArray(self.queue, (rows, 1) if keepdims else (rows,), x.dtype,
                             allocator=self.allocator)
        with _kernels_lock:  # set_args + enqueue on a shared cl.Kernel
            knl.set_args(x.base_data, out.base_data, np.int32(cols), x.dtype.type(scale))
            cl.enqueue_nd_range_kernel(self.queue, knl, (rows * self.group,), (self.group,))
        return out
