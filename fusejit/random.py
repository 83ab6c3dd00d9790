"""Random numbers with explicit keys, fused into the kernels that use them.

Counter-based: the value at flat (row-major) index ``i`` of a result is a pure function of the
key and ``i``, computed where it is used, so a fused dropout is one kernel and results do not
depend on the launch configuration, vector width, work-group size or device. The generator is
**Philox4x64-10**, the one NumPy ships as ``np.random.Philox`` (the issue asked for the 4x32
variant; bit-exactness with NumPy needs NumPy's 4x64, which needs 64-bit ``mul_hi``: core
OpenCL C). A key is a ``uint64`` array of shape ``(2,)``, exactly NumPy's Philox key, so::

    k = fusejit.random.key(7)
    fusejit.random.uniform(k, (3, 5), np.float32)
    # == np.random.Generator(np.random.Philox(key=k)).random((3, 5), dtype=np.float32)

bit for bit (float32 and float64). Element ``i`` of the float64 stream is NumPy's ``i``-th
64-bit output: word ``i % 4`` of the Philox block of counter ``(i // 4 + 1, 0, 0, 0)`` (NumPy
increments its counter, from 0, before each block); element ``i`` of the float32 stream is the
low (``i`` even) or high 32 bits of 64-bit output ``i // 2``. A result's flat prefix does not
depend on its shape: ``uniform(k, (2, 3))`` is ``uniform(k, 6)`` reshaped and
``uniform(k, 4)`` is its first four elements. As in JAX, the same key gives the same numbers
(two ``uniform(k, n)`` calls are one value); draw independent ones from ``split`` keys.

Inside a fused function (the key an argument: a new key is a new argument value, never a new
compile) every sampler is a few elementwise graph nodes fused with the work around it.
Outside one, a sampler runs as its own fused function on the default device: a NumPy key gives
a NumPy result, a pyopencl key a pyopencl array on its queue. The key helpers (``key``,
``split``, ``fold_in``) compute on the host outside a fused function (integer math, equal to
the device's bit for bit) and as graph nodes inside one.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.api import fuse
from fusejit.ir.graph import Node, broadcast_view, const
from fusejit.ir.ops import Op
from fusejit.ir.philox import philox as _philox_host
from fusejit.frontend.trace import TensorProxy, as_node, current_tracer, lift, reshape

__all__ = ["bernoulli", "fold_in", "integers", "key", "normal", "split", "uniform"]

_U64 = dt.UINT64
_MASK64 = (1 << 64) - 1
# counter word 3 tags derived keys: the NumPy stream from counter 0 reaches it only after
# 2**192 blocks, so a derived key's block is never one of its parent's stream blocks
_FOLD_TAG, _SPLIT_TAG = 1, 2
_FLOATS = (dt.FLOAT32, dt.FLOAT64)


# -- arguments ------------------------------------------------------------------------------------

def _shape(shape: Any) -> tuple[int, ...]:
    try:
        dims = (operator.index(shape),) if not isinstance(shape, (tuple, list)) else tuple(
            operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"shape must be an int or a tuple of ints known at trace time, not "
                        f"{shape!r} (use x.shape)") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dimensions are not allowed (shape {dims})")
    return dims


def _float_dtype(dtype: Any, what: str) -> np.dtype:
    d = np.dtype(dtype)
    if d not in _FLOATS:
        raise TypeError(f"fusejit.random.{what} makes float32 or float64 (as NumPy's Generator "
                        f"does), not {d}")
    return d


def _key_error(k: Any) -> TypeError:
    desc = k.describe() if isinstance(k, TensorProxy) else (
        f"{type(k).__name__} {getattr(k, 'dtype', '')}{list(getattr(k, 'shape', ()))}")
    return TypeError(f"a fusejit.random key is a uint64 array of shape (2,), not {desc}; make "
                     "one with fusejit.random.key(seed) (or split/fold_in of another key)")


def _host_key(k: Any) -> Any:
    """A key outside a fused function: checked, NumPy keys as arrays (pyopencl ones kept)."""
    if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
        raise _key_error(k)
    arr = k if hasattr(k, "queue") else np.asarray(k)
    if getattr(arr, "dtype", None) != _U64 or tuple(arr.shape) != (2,):
        raise _key_error(k)
    return arr


def _traced_key(k: Any) -> tuple[Node, Node]:
    """The two key words of a key inside a fused function, as 0-d uint64 nodes."""
    if isinstance(k, (bool, int, float, np.generic)):
        raise _key_error(k)
    proxy = lift(k)
    if proxy.dtype != _U64 or proxy.shape != (2,):
        raise _key_error(k)
    return proxy[0].node, proxy[1].node


def _as_u64(x: Any, shape: tuple[int, ...]) -> Node:
    """An operand as a uint64 node broadcast to ``shape`` (signed values wrap modulo 2**64)."""
    if isinstance(x, TensorProxy) and x._weak is not None:  # a Python int argument: int64
        node = as_node(x, dt.INT64 if x._weak[1] is int else dt.default_dtype(x._weak[1]))
    elif isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        node = const(int(x) & _MASK64, _U64)
    elif isinstance(x, Node):
        node = x
    else:
        node = lift(x).node
    if node.dtype != _U64:
        node = Node.make(Op.CAST, _U64, node.shape, (node,))
    return broadcast_view(node, shape)


def _philox(words: tuple[Node, Node], counter: tuple[Any, Any, Any, Any], w: Any,
            shape: tuple[int, ...]) -> TensorProxy:
    """Word ``w % 4`` of the Philox4x64-10 block of ``counter`` under the key, elementwise."""
    srcs = tuple(_as_u64(v, shape) for v in (*words, *counter, w))
    return TensorProxy(Node.make(Op.PHILOX, _U64, shape, srcs))


class _Blocks:
    """A stream laid out as (blocks, per_block): element ``i`` of the result is column
    ``i % per_block`` of row ``i // per_block``, whose Philox counter is ``(row + 1, 0, 0, 0)``.

    Built this way (not from the flat index) the counter is an index expression of the row
    alone, so the vector lanes of a work-item that fall in one block share the counter value
    and the block is computed once for them (the helper is a pure call on equal operands).
    """

    def __init__(self, shape: tuple[int, ...], per_block: int) -> None:
        self.shape, self.n = shape, math.prod(shape)
        self.space = (-(-self.n // per_block), per_block)
        self.counter = Node.make(Op.IOTA, _U64, self.space, (), (0, 1, 1))
        self.col = TensorProxy(Node.make(Op.IOTA, _U64, self.space, (), (1, 0, 1)))

    def word(self, words: tuple[Node, Node], w: Any) -> TensorProxy:
        return _philox(words, (self.counter, 0, 0, 0), w, self.space)

    def result(self, value: TensorProxy) -> TensorProxy:
        flat = TensorProxy(reshape(value.node, (self.space[0] * self.space[1],)))
        return TensorProxy(reshape(flat[:self.n].node, self.shape))


# -- the streams, on traced values ----------------------------------------------------------------

def _bits64(words: tuple[Node, Node], shape: tuple[int, ...]) -> TensorProxy:
    """NumPy's 64-bit outputs: output i is word i % 4 of the block of counter i // 4 + 1."""
    blocks = _Blocks(shape, 4)
    return blocks.result(blocks.word(words, blocks.col))


def _unit(bits: TensorProxy, dtype: np.dtype) -> TensorProxy:
    """NumPy's floats in [0, 1) from uint64 bits: float64 (b >> 11) * 2**-53, float32 of the
    24 top bits of a 32-bit value (already shifted into the low 24 bits here) * 2**-24."""
    if dtype == dt.FLOAT64:
        return (bits >> 11).astype(np.float64) * 2.0 ** -53
    return bits.astype(np.float32) * np.float32(2.0 ** -24)


def _uniform(words: tuple[Node, Node], shape: tuple[int, ...], dtype: np.dtype) -> TensorProxy:
    if dtype == dt.FLOAT64:
        return _unit(_bits64(words, shape), dtype)
    # 32-bit output i: the low (i even) or high half of 64-bit output i // 2, 8 to a block
    blocks = _Blocks(shape, 8)
    col = blocks.col
    word = blocks.word(words, col >> 1)
    return blocks.result(_unit((word >> ((col & 1) * 32 + 8)) & 0xFFFFFF, dtype))


def _normal(words: tuple[Node, Node], shape: tuple[int, ...], dtype: np.dtype) -> TensorProxy:
    if dtype == dt.FLOAT64:  # uniform elements 2i and 2i+1: words 2(i % 2), +1 of block i // 2
        blocks = _Blocks(shape, 2)
        a = _unit(blocks.word(words, blocks.col * 2), dtype)
        b = _unit(blocks.word(words, blocks.col * 2 + 1), dtype)
    else:  # float32 uniform elements 2i and 2i+1: both halves of word i % 4 of block i // 4
        blocks = _Blocks(shape, 4)
        word = blocks.word(words, blocks.col)
        a = _unit((word >> 8) & 0xFFFFFF, dtype)
        b = _unit((word >> 40) & 0xFFFFFF, dtype)
    return blocks.result(np.sqrt(-2.0 * np.log(1.0 - a)) * np.cos(2.0 * np.pi * b))


# -- public samplers ------------------------------------------------------------------------------

def _uniform_eager(k: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    return _uniform(_traced_key(k), shape, dtype)


def _normal_eager(k: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    return _normal(_traced_key(k), shape, dtype)


def _bernoulli_eager(k: Any, p: Any, shape: tuple[int, ...]) -> Any:
    return _bernoulli(_traced_key(k), p, shape)


def _integers_eager(k: Any, low: Any, span: Any, full: bool, shape: tuple[int, ...],
                    dtype: np.dtype) -> Any:
    return _integers(_traced_key(k), low, None if full else span, shape, dtype)


_EAGER = {
    "uniform": fuse(_uniform_eager, static_argnums=(1, 2)),
    "normal": fuse(_normal_eager, static_argnums=(1, 2)),
    "bernoulli": fuse(_bernoulli_eager, static_argnums=(2,)),
    "integers": fuse(_integers_eager, static_argnums=(3, 4, 5)),
}


def uniform(key: Any, shape: Any = (), dtype: Any = np.float64) -> Any:
    """Floats uniform in [0, 1), of ``shape`` and ``dtype`` (float32 or float64).

    Bit for bit ``np.random.Generator(np.random.Philox(key=key)).random(shape, dtype)``:
    float64 ``(b >> 11) * 2**-53`` of 64-bit outputs ``b``, float32 ``(b >> 8) * 2**-24`` of
    32-bit outputs (each 64-bit output split low half first). Element ``i`` (row-major) uses
    output ``i`` only, so it depends on the key and ``i`` alone.
    """
    shape, dtype = _shape(shape), _float_dtype(dtype, "uniform")
    if current_tracer() is None:
        return _EAGER["uniform"](_host_key(key), shape, dtype)
    return _uniform(_traced_key(key), shape, dtype)


def normal(key: Any, shape: Any = (), dtype: Any = np.float64) -> Any:
    """Standard normal floats (mean 0, deviation 1) by the Box-Muller transform.

    Element ``i`` is ``sqrt(-2 * log(1 - u[2i])) * cos(2 * pi * u[2i + 1])``, computed in
    ``dtype``, where ``u = uniform(key, (2 * n,), dtype)``; the sine half is not used, so
    element ``i`` depends on the key and ``i`` alone. Not NumPy's ziggurat: the values differ
    from ``Generator.standard_normal``; ``log`` and ``cos`` are the device's (within the
    OpenCL ULP bounds). The tails are cut where ``1 - u`` is smallest: at 8.57 (float64) and
    5.77 (float32) deviations, beyond which the normal has mass 1e-17 and 8e-9.
    """
    shape, dtype = _shape(shape), _float_dtype(dtype, "normal")
    if current_tracer() is None:
        return _EAGER["normal"](_host_key(key), shape, dtype)
    return _normal(_traced_key(key), shape, dtype)


def _bernoulli(words: tuple[Node, Node], p: Any, shape: tuple[int, ...]) -> TensorProxy:
    if isinstance(p, TensorProxy) and p._weak is None or isinstance(p, (np.ndarray,
                                                                        np.generic)):
        if not dt.is_float(p.dtype) and not dt.is_int(p.dtype):
            raise TypeError(f"bernoulli's p must be a real number, not {p.dtype}")
        p = p.astype(np.float32)  # (a weak Python float converts to float32 in the compare)
    if np.broadcast_shapes(np.shape(p), shape) != shape:
        raise ValueError(f"bernoulli's p of shape {np.shape(p)} does not broadcast to the "
                         f"result shape {shape}")
    return _uniform(words, shape, dt.FLOAT32) < p


def bernoulli(key: Any, p: Any = 0.5, shape: Any = ()) -> Any:
    """Booleans that are True with probability ``p``: ``uniform(key, shape, float32) < p``.

    ``p`` (a number, or an array broadcasting to ``shape``; traced inside a fused function, so
    a new ``p`` does not recompile) is compared in float32, so probabilities are multiples of
    2**-24 (``p`` rounded to float32, then up to the next multiple): exact against
    ``Generator(Philox(key=key)).random(shape, np.float32) < np.float32(p)``.
    Dropout: ``np.where(bernoulli(key, 0.9, x.shape), x / 0.9, 0)``.
    """
    shape = _shape(shape)
    if isinstance(p, (int, float)) and not isinstance(p, bool) and not 0 <= p <= 1:
        raise ValueError(f"bernoulli's p must be in [0, 1], not {p!r}")
    if current_tracer() is None:
        if isinstance(p, np.floating):  # compared in float32 anyway: no fp64 kernel argument
            p = np.float32(p)
        return _EAGER["bernoulli"](_host_key(key), p, shape)
    return _bernoulli(_traced_key(key), p, shape)


def _integers(words: tuple[Node, Node], low: Any, span: Any, shape: tuple[int, ...],
              dtype: np.dtype) -> TensorProxy:
    """``low + (bits * span) >> 64`` in uint64 (``span`` None: 2**64, the bits themselves),
    wrapped into ``dtype``; low and span are ints or uint64 values (kernel arguments)."""
    bits = _bits64(words, shape)
    if span is not None:  # Lemire's multiply-shift: floor(bits * span / 2**64)
        bits = TensorProxy(Node.make(Op.MULHI, _U64, shape, (bits.node, _as_u64(span, shape))))
    return TensorProxy(Node.make(Op.ADD, _U64, shape, (bits.node, _as_u64(low, shape)))
                       ).astype(dtype)


def integers(key: Any, low: int, high: int | None = None, shape: Any = (),
             dtype: Any = np.int64) -> Any:
    """Integers uniform in ``[low, high)`` (``[0, low)`` when ``high`` is None), as NumPy's
    ``Generator.integers`` is called, of an integer ``dtype``.

    ``low`` and ``high`` are Python ints (known at trace time inside a fused function; outside
    one they are kernel arguments, so new bounds do not recompile). Element ``i`` is
    ``low + (b * (high - low)) >> 64`` of 64-bit output ``b = `` NumPy's Philox output ``i``
    (Lemire's multiply-shift without rejection, so every element is one output): each value
    has probability within 2**-64 of ``1 / (high - low)`` (each is hit by floor or ceil of
    ``2**64 / (high - low)`` outputs). Not NumPy's masked rejection, so the values differ from
    ``Generator.integers``.
    """
    if high is None:
        low, high = 0, low
    try:
        low, high = operator.index(low), operator.index(high)
    except TypeError:
        raise TypeError("integers' low and high must be Python ints known at trace time (pass "
                        "them as static arguments)") from None
    shape, dtype = _shape(shape), np.dtype(dtype)
    if not dt.is_int(dtype):
        raise TypeError(f"fusejit.random.integers makes an integer dtype, not {dtype}")
    info = np.iinfo(dtype)
    if low >= high:
        raise ValueError(f"low >= high ({low} >= {high})")
    if low < info.min or high - 1 > info.max:
        raise ValueError(f"[{low}, {high}) is out of bounds for {dtype}")
    span = high - low
    if current_tracer() is None:  # low and span are kernel arguments: new bounds, same kernel
        return _EAGER["integers"](_host_key(key), np.uint64(low & _MASK64),
                                  np.uint64(span & _MASK64), span == 1 << 64, shape, dtype)
    return _integers(_traced_key(key), low, None if span == 1 << 64 else span, shape, dtype)


# -- keys -----------------------------------------------------------------------------------------

def key(seed: int) -> np.ndarray:
    """The key for ``seed`` (an int in [0, 2**128)): ``[seed % 2**64, seed >> 64]`` as uint64,
    which is how ``np.random.Philox(key=seed)`` sets its key."""
    if isinstance(seed, TensorProxy):
        raise TypeError("fusejit.random.key(seed) needs a Python int known at trace time; for a "
                        "seed passed to the fused function write fold_in(key(0), seed)")
    seed = operator.index(seed)
    if not 0 <= seed < 1 << 128:
        raise ValueError(f"a key seed is an int in [0, 2**128), not {seed}")
    return np.array([seed & _MASK64, seed >> 64], dtype=np.uint64)


def _derived(k: Any, c0: Any, tag: int, shape: tuple[int, ...], c0_axis: int | None) -> Any:
    """Keys from Philox blocks of counter (c0, 0, 0, tag): words 0 and 1 of each block."""
    if current_tracer() is None:
        k = _host_key(k)
        k = k.get() if hasattr(k, "queue") else k
        if c0_axis is not None:
            c0 = np.arange(shape[0], dtype=np.uint64)[:, None]
        return _philox_host(k[0], k[1], c0, 0, 0, tag, np.arange(2, dtype=np.uint64))
    words = _traced_key(k)
    w = Node.make(Op.IOTA, _U64, shape, (), (len(shape) - 1, 0, 1))
    if c0_axis is not None:
        c0 = Node.make(Op.IOTA, _U64, shape, (), (c0_axis, 0, 1))
    return _philox(words, (c0, 0, 0, tag), w, shape)


def fold_in(key: Any, data: Any) -> Any:
    """A new key from ``key`` and an integer ``data`` (a step, a layer index), taken modulo
    2**64; inside a fused function ``data`` may be a traced int (a new value does not
    recompile). Words 0 and 1 of the Philox block of counter ``(data, 0, 0, 1)``."""
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        data = int(data) & _MASK64
    elif current_tracer() is None:
        raise TypeError(f"fold_in's data must be an int, not {type(data).__name__}")
    elif not dt.is_int(lift(data).dtype) and lift(data).dtype != dt.BOOL:
        raise TypeError(f"fold_in's data must be an integer, not {lift(data).dtype}")
    if current_tracer() is None:
        return _derived(key, np.uint64(data), _FOLD_TAG, (2,), None)
    return _derived(key, data, _FOLD_TAG, (2,), None)


def split(key: Any, num: int = 2) -> Any:
    """``num`` new keys, shape ``(num, 2)`` (unpack them: ``k1, k2 = split(k)``): row ``j`` is
    words 0 and 1 of the Philox block of counter ``(j, 0, 0, 2)``. Independent of each other,
    of ``key``'s own stream and of ``fold_in`` keys (other counters of the same key)."""
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"split's num must be >= 0, not {num}")
    return _derived(key, None, _SPLIT_TAG, (num, 2), 0)
