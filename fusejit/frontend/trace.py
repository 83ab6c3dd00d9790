"""Tracing: run the user's numpy-style function once over symbolic ``TensorProxy`` values.

NumPy calls on proxies arrive through ``__array_ufunc__`` / ``__array_function__`` (and the Python
operators); each one appends hash-consed nodes to the graph. The proxy looks the implementation
up in the tracer's dispatch table (``frontend.dispatch``), which the modules of
``frontend.numpy`` fill when imported; this module never imports them. Dtypes follow NumPy
exactly: every ufunc asks NumPy which loop it would run (``ufunc.resolve_dtypes``) with Python
scalars passed as weak types (NEP 50), and explicit CAST nodes are inserted so each op sees its
loop's dtypes (``frontend.ufuncs``; ``frontend.operators`` installs the Python operators on the
proxy when imported).

A proxy is either a *root* (owns its value; parameters and op results) or a *view* of a root
(``x[1:]``, ``x.T``): a view reads through an affine map of its root's *current* value, and a
write into a view rewrites the root with a SETITEM node, which is how in-place NumPy code
(``x[1:] += y``) keeps NumPy's semantics.
"""

from __future__ import annotations

import contextvars
import functools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Self

import numpy as np

from fusejit.frontend import dispatch, random_guard
from fusejit.ir import dtypes as dt
from fusejit.ir import shapes
from fusejit.errors import (
    BroadcastError,
    ReadOnlyError,
    TracerBoolConversionError,
    TracerConversionError,
    UnsupportedAttributeError,
    UnsupportedOperationError,
)
from fusejit.ir.graph import Graph, Node, Param, const
from fusejit.ir.ops import Op

_current: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar("fusejit_tracer",
                                                                        default=None)


def current_tracer() -> Tracer | None:
    return _current.get()


def _is_tracing() -> bool:
    return _current.get() is not None


class Tracer:
    """State of one trace: the parameters seen so far and the arrays written in place."""

    def __init__(self) -> None:
        self.params: list[Param] = []
        self.param_proxies: dict[int, TensorProxy] = {}
        self.constants: dict[int, np.ndarray] = {}  # param index -> captured constant array
        self.values: list[Node] = []  # every value the function computed (explain: unused)
        # id -> (array, proxy): arrays read from outside the arguments, read fresh on each call
        self.captured: dict[int, tuple[Any, TensorProxy]] = {}
        self.concrete: set[int] = set()  # Python int arguments needed as ints: their sources
        # the values the function can reach from outside its arguments (None: not known), to
        # tell NumPy arrays it made itself from those (frontend/numpy/local.py)
        self.outside: Callable[[], list[Any]] | None = None

    def __enter__(self) -> Self:
        if _current.get() is not None:
            raise RuntimeError("nested traces are inlined, not started")  # pragma: no cover
        self._token = _current.set(self)
        random_guard.enter(_is_tracing)  # np.random raises while tracing (fusejit.random)
        return self

    def __exit__(self, *exc: object) -> None:
        random_guard.exit()
        _current.reset(self._token)

    # -- parameters -------------------------------------------------------------------------------
    def array_param(self, dtype: np.dtype, shape: tuple[int, ...], strides: tuple[int, ...],
                    name: str, source: int, writable: bool = True, has_offset: bool = False,
                    wide: bool = False) -> TensorProxy:
        index = len(self.params)
        self.params.append(Param("array", dtype, shape, name, source, strides, has_offset, wide))
        proxy = TensorProxy(Node.make(Op.INPUT, dtype, shape, (), index), readonly=not writable)
        proxy._param = index
        self.param_proxies[index] = proxy
        return proxy

    def scalar_param(self, value: Any, name: str, source: int) -> TensorProxy:
        """A dynamic scalar: weak if it is a Python scalar (its dtype is decided by each use)."""
        t = dt.scalar_type(value)
        index = len(self.params)
        self.params.append(Param("scalar", dt.default_dtype(t), (), name, source))
        if isinstance(t, np.dtype):
            proxy = TensorProxy(Node.make(Op.SCALAR, t, (), (), (index,)))
            proxy._pybool = type(value) is bool  # promotes as np.bool_, computes as Python's
            return proxy
        proxy = TensorProxy(None, weak=(index, t))
        proxy._int_range = dt.int_range(value) if t is int else None
        proxy._value = value
        return proxy

    def constant_array(self, value: np.ndarray) -> Node:
        """A NumPy array used inside the function: a literal if uniform, else a captured buffer."""
        value = np.asarray(value)
        dtype = dt.check_supported(value.dtype, "array constant")
        value = value.astype(dtype, copy=False)
        if value.size == 0 or value.ndim == 0:
            return const(value.reshape(-1)[0] if value.size else 0, dtype, value.shape)
        flat = value.reshape(-1)
        if np.all(flat.view(np.uint8).reshape(flat.size, -1) == flat[:1].view(np.uint8)):
            return const(flat[0], dtype, value.shape)
        index = len(self.params)
        contiguous = np.ascontiguousarray(value)
        self.params.append(Param("const", dtype, value.shape, f"const{index}", -1,
                                 shapes.row_major_strides(value.shape)))
        self.constants[index] = contiguous
        return Node.make(Op.INPUT, dtype, value.shape, (), index)

    # -- result -----------------------------------------------------------------------------------
    def graph(self, outputs: Sequence[Node]) -> Graph:
        writes = []
        for index, proxy in self.param_proxies.items():
            if proxy._node is not Node.make(Op.INPUT, proxy.dtype, proxy.shape, (), index):
                writes.append((index, proxy._node))
        return Graph(tuple(self.params), tuple(outputs), tuple(writes))


# -- operands -------------------------------------------------------------------------------------

PyScalar = bool | int | float | complex


def _ptype(x: Any) -> np.dtype | type:
    """Promotion type of an operand: a dtype (strong) or a Python type (weak)."""
    if isinstance(x, TensorProxy):
        return x._weak[1] if x._weak is not None else x.dtype
    # NumPy scalars first: np.float64 subclasses float but is strong
    if isinstance(x, (np.ndarray, np.generic)):
        return dt.check_supported(x.dtype, "operand")
    if isinstance(x, (bool, int, float, complex)):
        return dt.scalar_type(x)
    raise TypeError(f"unsupported operand type for a fused function: {type(x).__name__}")


def _shape(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, (TensorProxy, np.ndarray)) else ()


def as_node(x: Any, dtype: np.dtype) -> Node:
    """The operand as a node of ``dtype`` (a CAST when a strong operand has another dtype)."""
    if isinstance(x, TensorProxy):
        if x._weak is not None:
            if x._node is not None:  # a weak value computed from weak operands: _operator
                return checked_cast(x._node, dtype)  # (a Python int: 1000 raises for int8)
            if x._value is not None:  # NumPy's OverflowError (int8 + 1000) where NumPy
                dt.convert_scalar(x._value, dtype)  # converts it: in order, even in dead code
            return Node.make(Op.SCALAR, dtype, (), (), (x._weak[0],))  # (launches check again)
        return cast(x.node, dtype)
    if isinstance(x, np.ndarray):
        tracer = current_tracer()
        assert tracer is not None
        if (seen := tracer.captured.get(id(x))) is not None and seen[0] is x:
            return as_node(seen[1], dtype)  # an implicit input (fusejit.frontend.captured)
        return cast(tracer.constant_array(x), dtype)
    if isinstance(x, np.generic):
        return cast(const(x, x.dtype), dtype)
    return const(dt.convert_scalar(x, dtype), dtype)


def as_array_node(x: Any, dtype: np.dtype) -> Node:
    """The operand as NumPy's array-converting functions (np.where, np.full_like) see it: a
    Python scalar first becomes an array of its default dtype (int64, float64), which is then
    cast unsafely, so ``np.where(c, int8_array, 300)`` wraps 300 to 44 as NumPy does."""
    t = _ptype(x)
    if not isinstance(t, np.dtype) and not (t is int and dtype.kind == "f"):
        return cast(as_node(x, array_dtype(x, t)), dtype)
    return as_node(x, dtype)  # (an int for a float result converts directly: 2**64 fits)


def array_dtype(x: Any, t: type) -> np.dtype:
    """The dtype ``np.asarray`` gives a Python scalar operand of weak type ``t``: its default
    (int64, float64), but uint64 for an int of [2**63, 2**64) (a dynamic one's range is part
    of the cache key)."""
    if t is int:
        if isinstance(x, TensorProxy):
            cls = x._int_range if x._node is None else None
        else:
            cls = dt.int_range(x) if type(x) is int else None
        if cls == "uint64":
            return dt.UINT64
    return dt.default_dtype(t)


MASKED = ("masked arrays (numpy.ma) are not supported by fusejit: their mask would be ignored. "
          "Pass np.ma.getdata(x) and the mask (np.ma.getmaskarray(x)) as arrays and combine "
          "them with np.where, or x.filled(value)")


def to_operand(x: Any) -> Any:
    """Normalise what NumPy would accept as an array (lists, tuples) into an ndarray."""
    if isinstance(x, (list, tuple)):
        return np.asarray(x)
    if dt.is_masked(x):
        raise TypeError(MASKED)
    tracer = _current.get()
    if tracer is not None and tracer.captured and (seen := tracer.captured.get(id(x))) \
            is not None and seen[0] is x:
        return seen[1]  # an array read from outside the arguments (fusejit.frontend.captured)
    return x


def cast(node: Node, dtype: np.dtype) -> Node:
    if node.dtype == dtype:
        return node
    if node.dtype.kind == "c" and dtype.kind not in "cb":
        # as NumPy's astype and setitem: the imaginary part is dropped, with NumPy's warning
        # (raised while tracing: once per specialisation, not on every call)
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=3)
    return Node.make(Op.CAST, dtype, node.shape, (node,))


def checked_cast(node: Node, dtype: np.dtype, side: int = dt.RAISE) -> Node:
    """A Python int computed from dynamic scalars (an int64 node) as ``dtype``: converted as
    NumPy converts a Python int operand, so a value out of ``dtype``'s range raises
    OverflowError on the host before the launch (or saturates on ``side``, see dtypes.RAISE),
    where a plain CAST would wrap it."""
    if node.dtype == dtype or node.dtype.kind not in "iu" or dtype.kind not in "iu":
        return cast(node, dtype)
    return Node.make(Op.CAST, dtype, node.shape, (node,), (side,))


# -- structural builders --------------------------------------------------------------------------


def view(node: Node, m: shapes.AffineMap, shape: tuple[int, ...]) -> Node:
    """VIEW with map composition: a view of a view is one view; identity views vanish."""
    if node.op is Op.VIEW:
        m = shapes.compose(node.arg, m)
        node = node.srcs[0]
    if shapes.is_identity(m, node.shape, shape):
        return node
    return Node.make(Op.VIEW, node.dtype, shape, (node,), m)


def reshape(node: Node, shape: tuple[int, ...]) -> Node:
    if node.shape == shape:
        return node
    # a reshape that only adds or removes length-1 axes is affine: keep it a VIEW
    if [d for d in node.shape if d != 1] == [d for d in shape if d != 1]:
        src_dims = [k for k, d in enumerate(node.shape) if d != 1]
        out_dims = [j for j, d in enumerate(shape) if d != 1]
        pos = dict(zip(src_dims, out_dims))
        m = tuple((0, tuple(int(pos.get(k) == j) for j in range(len(shape))))
                  for k in range(node.ndim))
        return view(node, m, shape)
    if node.op is Op.RESHAPE:
        node = node.srcs[0]
    return Node.make(Op.RESHAPE, node.dtype, shape, (node,))


def broadcast_to(node: Node, shape: tuple[int, ...]) -> Node:
    if node.shape == shape:
        return node
    if len(node.shape) > len(shape):
        raise BroadcastError("input operand has more dimensions than allowed by the axis "
                             "remapping")
    if not shapes.broadcasts_to(node.shape, shape):
        raise BroadcastError(f"operands could not be broadcast together with remapped shapes "
                             f"[original->remapped]: {shapes.format_shape(node.shape)}  and "
                             f"requested shape {shapes.format_shape(shape)}")
    return view(node, shapes.broadcast_map(node.shape, shape), shape)


def where(cond: Any, a: Any, b: Any) -> TensorProxy:
    cond, a, b = (to_operand(v) for v in (cond, a, b))
    out_dtype = dt.result_type(_ptype(a), _ptype(b))
    shape = shapes.broadcast_shapes(_shape(cond), _shape(a), _shape(b))
    c = as_node(cond, dt.BOOL)
    convert = as_node if _where_scalars_are_weak() else as_array_node
    return TensorProxy(Node.make(Op.WHERE, out_dtype, shape,
                                 (c, convert(a, out_dtype), convert(b, out_dtype))))


@functools.cache
def _where_scalars_are_weak() -> bool:
    """Does the installed NumPy convert np.where's Python scalars like an operator's (NEP 50:
    ``np.where(c, uint8_array, -7)`` raises OverflowError, NumPy >= 2.5), or as arrays cast
    unsafely (-7 becomes 249)?"""
    try:
        np.where(np.True_, np.zeros(1, np.uint8), -7)
    except OverflowError:
        return True
    return False


def lift(x: Any) -> TensorProxy:
    """Any array-like operand as a (strong) proxy."""
    x = to_operand(x)
    if isinstance(x, TensorProxy):
        if x._weak is not None:
            return TensorProxy(as_node(x, array_dtype(x, x._weak[1])))
        return x
    t = _ptype(x)
    return TensorProxy(as_node(x, t if isinstance(t, np.dtype) else array_dtype(x, t)))


# -- the proxy ------------------------------------------------------------------------------------


class TensorProxy:
    """A symbolic array standing for a value of the traced function."""

    __array_priority__ = 1000

    def __init__(self, node: Node | None, *, weak: tuple[int, type] | None = None,
                 base: TensorProxy | None = None, vmap: shapes.AffineMap | None = None,
                 shape: tuple[int, ...] | None = None, readonly: bool | str = False) -> None:
        self._node = node
        # (param index, python type) for a weak dynamic scalar argument; (None, python type)
        # with a node for a value Python arithmetic computed from weak operands only
        self._weak = weak
        if node is not None and (tracer := _current.get()) is not None:
            tracer.values.append(node)  # every value computed (explain: the unused ones)
        self._base = base  # root proxy this one is a view of
        self._vmap = vmap  # affine map from this view's index to the root's index
        self._vshape = shape
        self._readonly = readonly  # or why it is read-only (a captured array)
        self._param: int | None = None
        self._pybool = False  # a Python bool (argument or operator result): see _operator
        self._array0d = False  # a 0-d array a constructor made (zeros_like): see is_numpy_scalar
        self._int_range: str | None = None  # a dynamic Python int beyond int64: dt.int_range
        self._value: Any = None  # a weak scalar argument's value in the call being traced

    # -- value ------------------------------------------------------------------------------------
    @property
    def node(self) -> Node:
        if self._base is not None:
            assert self._vmap is not None and self._vshape is not None
            return view(self._base.node, self._vmap, self._vshape)
        if self._weak is not None and self._node is None:
            return as_node(self, array_dtype(self, self._weak[1]))
        assert self._node is not None
        return self._node

    @property
    def shape(self) -> tuple[int, ...]:
        if self._vshape is not None:
            return self._vshape
        return () if self._node is None else self._node.shape

    @property
    def dtype(self) -> np.dtype:
        if self._weak is not None:
            return dt.default_dtype(self._weak[1])
        return self._base.dtype if self._base is not None else self._node.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}] traced value"

    def __repr__(self) -> str:
        return f"TensorProxy({self.dtype.name}[{','.join(map(str, self.shape))}])"

    # -- writes -----------------------------------------------------------------------------------
    def _root(self) -> tuple[TensorProxy, shapes.AffineMap | None]:
        return (self._base, self._vmap) if self._base is not None else (self, None)

    def write(self, key: Any, value: Any, *, as_output: bool = False) -> None:
        """``self[key] = value`` (values cast unsafely, as NumPy's setitem does)."""
        why = self._readonly or (self._base is not None and self._base._readonly)
        if why:
            raise ReadOnlyError(why if isinstance(why, str) else "output array is read-only"
                                if as_output else "assignment destination is read-only")
        if self._weak is not None:  # a Python scalar, as Python says it
            raise TypeError(f"'{self._weak[1].__name__}' object does not support item "
                            "assignment")
        if is_numpy_scalar(self):  # immutable, as in NumPy
            raise TypeError("return arrays must be of ArrayType" if as_output else
                            f"'numpy.{self.dtype.type.__name__}' object does not support item "
                            f"assignment ({self.describe()}, a NumPy scalar)")
        region_shape, m, _ = shapes.index_map(self.shape, key)
        root, vmap = self._root()
        full = m if vmap is None else shapes.compose(vmap, m)
        value = to_operand(value)
        vnode = as_node(value, self.dtype)
        if not as_output and len(vnode.shape) > len(region_shape) and \
                all(d == 1 for d in vnode.shape[:len(vnode.shape) - len(region_shape)]):
            vnode = reshape(vnode, vnode.shape[len(vnode.shape) - len(region_shape):])
        if vnode.shape != region_shape:
            try:
                vnode = broadcast_to(vnode, region_shape)
            except BroadcastError:
                raise ValueError(f"could not broadcast input array from shape {vnode.shape} "
                                 f"into shape {region_shape}") from None
        region = shapes.write_region(full, root.shape, region_shape)
        root._node = Node.make(Op.SETITEM, root.dtype, root.shape, (root.node, vnode), region)

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, TensorProxy) and key.dtype == dt.BOOL and key.shape == self.shape:
            # x[mask] = v with a scalar v is a select; NumPy's array v would be a scatter
            if _shape(to_operand(value)) not in ((), (1,)):
                raise UnsupportedOperationError(
                    "x[mask] = array is a scatter; only a scalar value can be assigned "
                    "through a boolean mask inside @fuse (or use np.where)")
            self.write(Ellipsis, where(key, value, self))
            return
        parts = key if isinstance(key, tuple) else (key,)
        if any(_is_array_index(k) and getattr(k, "dtype", None) != dt.BOOL for k in parts):
            raise UnsupportedOperationError(
                "x[idx] = v with an integer index array is a scatter (a write at positions "
                "only known when it runs), which is not supported inside @fuse; reading x[idx] "
                "(a gather) is. Compute the scatter outside the fused function, or write "
                "np.where(mask, v, x) with a boolean mask")
        if _selects_one_element(key, self.ndim) and _shape(to_operand(value)) != ():
            # x[-1] = array([5.]): NumPy stores into one element only a scalar (x[...] of a
            # 0-d array, or x[0] of a 2-d one, broadcast instead), except that a bool element
            # takes the truth value of any one-element array
            if self.dtype != dt.BOOL or math.prod(_shape(to_operand(value))) != 1:
                raise ValueError("setting an array element with a sequence.")
            value = value.reshape(()) if hasattr(value, "reshape") else \
                np.asarray(value).reshape(())
        self.write(key, value)

    def __getitem__(self, key: Any) -> TensorProxy:
        if is_advanced(key):  # integer-array indexing: a gather (frontend.numpy.gather)
            return dispatch.HOOKS["gather"](self, key)
        out_shape, m, _ = shapes.index_map(self.shape, key)
        result = self._view(m, out_shape)
        keys = key if isinstance(key, tuple) else (key,)
        if not out_shape and self.shape and not any(k is Ellipsis or k is None for k in keys):
            # x[0] of a 1-d array is a NumPy scalar: a copy of the element, not a view
            return TensorProxy(result.node)
        return result

    def _view(self, m: shapes.AffineMap, shape: tuple[int, ...],
              readonly: bool = False) -> TensorProxy:
        if self._weak is not None:
            return TensorProxy(view(self.node, m, shape))
        root, vmap = self._root()
        full = m if vmap is None else shapes.compose(vmap, m)
        return TensorProxy(None, base=root, vmap=full, shape=shape,
                           readonly=readonly or self._readonly)

    # -- NumPy protocols --------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return dispatch.ufunc_method(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Callable, types: Any, args: Any, kwargs: Any) -> Any:
        return dispatch.array_function(func, args, kwargs)

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TracerConversionError(self.describe(), "array")

    def __bool__(self) -> bool:
        self._concrete()
        raise TracerBoolConversionError(self.describe())

    def __float__(self) -> float:
        raise TracerConversionError(self.describe(), "float")

    def __complex__(self) -> complex:
        raise TracerConversionError(self.describe(), "float")

    def __int__(self) -> int:
        self._concrete()
        raise TracerConversionError(self.describe(), "int")

    def _concrete(self) -> None:
        """A Python int (or bool) argument used as one (a size, an axis, a loop count, an
        ``if``): noted, so that the call specialises on its value (trace_call.py)."""
        if self._weak is not None and self._weak[0] is not None and \
                self._weak[1] in (int, bool) and (tracer := _current.get()) is not None:
            tracer.concrete.add(tracer.params[self._weak[0]].source)

    __index__ = __int__

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    __hash__ = None  # type: ignore[assignment]  # == builds a traced comparison

    def __getattr__(self, name: str) -> Any:
        method = dispatch.METHODS.get(name)
        if method is None:
            if hasattr(np.ndarray, name) and not name.startswith("_"):
                raise UnsupportedAttributeError(
                    f"ndarray.{name} is not supported inside @fuse ({self.describe()}); call "
                    "it outside the fused function")
            raise AttributeError(
                f"'{type(self).__name__}' ({self.describe()}) has no attribute {name!r}")
        return lambda *a, **k: method(self, *a, **k)

    # the attributes NumPy computes (x.T is x.transpose(), x.real is np.real(x)), through the
    # dispatch table like the calls above
    @property
    def T(self) -> TensorProxy:
        return dispatch.METHODS["transpose"](self)

    @property
    def mT(self) -> TensorProxy:
        return dispatch.METHODS["swapaxes"](self, -1, -2)

    @property
    def real(self) -> TensorProxy:
        return dispatch.FUNCTIONS[np.real](self)

    @real.setter
    def real(self, value: Any) -> None:
        dispatch.HOOKS["set_real"](self, value)

    @property
    def imag(self) -> TensorProxy:
        return dispatch.FUNCTIONS[np.imag](self)

    @imag.setter
    def imag(self, value: Any) -> None:
        dispatch.HOOKS["set_imag"](self, value)


def _selects_one_element(key: Any, ndim: int) -> bool:
    """An index of one integer per axis (``x[-1]`` of a 1-d array, ``y[0, 1]``)."""
    parts = key if isinstance(key, tuple) else (key,)
    return ndim > 0 and len(parts) == ndim and all(
        isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)) for k in parts)


# Whether ``x[key]`` is a view or a gather is the proxy's own indexing, decided here; the gather
# itself is frontend.numpy.gather's, reached through dispatch.HOOKS.
_MASK_REFUSED = ("boolean-mask indexing gives a data-dependent shape and cannot be fused; use "
                 "np.where(mask, x, fill) to select values instead")


def _is_array_index(k: Any) -> bool:
    return isinstance(k, (TensorProxy, np.ndarray, list))


def is_advanced(key: Any) -> bool:
    """Does ``x[key]`` need a gather (an integer array in the key)? A boolean mask raises."""
    parts = key if isinstance(key, tuple) else (key,)
    advanced = False
    for k in parts:
        if not _is_array_index(k):
            continue
        dtype = k.dtype if isinstance(k, (TensorProxy, np.ndarray)) else _list_index(k).dtype
        if dtype == dt.BOOL:
            raise UnsupportedOperationError(_MASK_REFUSED)
        if dtype.kind not in "iu":
            raise IndexError("arrays used as indices must be of integer (or boolean) type")
        advanced = True
    return advanced


def _list_index(k: Any) -> np.ndarray:
    """A list as NumPy indexes with it: an empty list is an empty intp array, not float64."""
    arr = np.asarray(k)
    return arr.astype(np.intp) if arr.size == 0 else arr


def is_numpy_scalar(x: Any) -> bool:
    """A 0-d value NumPy holds as an immutable scalar (``s += 1`` rebinds ``s``): a NumPy
    scalar argument, a 0-d result of a ufunc, a reduction or integer indexing; not a 0-d array
    argument, a view (``x[...]``) or a 0-d array a constructor made."""
    return (isinstance(x, TensorProxy) and x._weak is None and x._base is None
            and x._param is None and not x._array0d and not x.shape)
