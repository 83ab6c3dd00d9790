"""The benchmark workloads, each written once against an array namespace ``xp``.

The same function body runs as fusejit (``xp`` is NumPy, traced by ``@fuse``), unfused
pyopencl (``xp`` is :class:`~fusejit.bench.clshim.ClNamespace`), NumPy, torch, cupy and jax.
numexpr cannot run Python code, so each workload also carries a numexpr spelling.

Sizes per scale live in :data:`SCALES`; ``tiny`` is for CI smoke runs, ``small`` is the CPU
default (a couple of minutes on two cores) and ``full`` is the GPU size set of the issue.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ArrayFn = Callable[..., Any]
NumexprEval = Callable[..., np.ndarray]  # ev(expression, **arrays), float32 in -> float32 out


@dataclass(frozen=True)
class InputSpec:
    """A float32 input drawn uniformly from [low, high)."""

    name: str
    shape: tuple[int, ...]
    low: float
    high: float


@dataclass(frozen=True)
class Workload:
    """One benchmark case: a function of ``(xp, *arrays)`` and the arrays it takes."""

    name: str  # unique per case, e.g. "chain8/2^20" or "gelu"
    family: str  # "chain", "gelu", "haversine", "black_scholes", "adam", "softmax", "layernorm"
    fn: ArrayFn
    inputs: tuple[InputSpec, ...]
    outputs: tuple[tuple[int, ...], ...]  # output shapes (all float32)
    numexpr: ArrayFn | None = None  # fn(ev, *host_arrays): numexpr's spelling (see NumexprEval)
    chain: int | None = None  # number of ops, for chain workloads
    params: dict[str, Any] = field(default_factory=dict)
    rtol: float = 1e-3  # agreement with NumPy (Monte Carlo estimates: their statistical error)

    @property
    def size(self) -> int:
        """Elements of the main (first) input."""
        return math.prod(self.inputs[0].shape)

    @property
    def bytes(self) -> int:
        """The minimal memory traffic: every input read once, every output written once."""
        shapes = [s.shape for s in self.inputs] + list(self.outputs)
        return sum(math.prod(s) for s in shapes) * 4

    def make_inputs(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [rng.uniform(s.low, s.high, s.shape).astype(np.float32) for s in self.inputs]


# -- elementwise chains ----------------------------------------------------------------------------

# Cheap ops, cycled: the values stay bounded (|x| grows at most 1.5x per 4 ops) and no two
# neighbours can be folded into one by an algebraic simplifier.
_CHAIN_OPS: tuple[Callable[[Any, Any], Any], ...] = (
    lambda xp, x: x * 1.5,
    lambda xp, x: x - 0.25,
    lambda xp, x: xp.abs(x),
    lambda xp, x: xp.maximum(x, 0.1),
)
_CHAIN_NE = ("({} * 1.5)", "({} - 0.25)", "abs({})", "maximum({}, 0.1)")


def chain_fn(n: int) -> ArrayFn:
    def chain(xp: Any, x: Any) -> Any:
        for i in range(n):
            x = _CHAIN_OPS[i % len(_CHAIN_OPS)](xp, x)
        return x
    chain.__name__ = f"chain{n}"
    return chain


def chain_numexpr(n: int) -> ArrayFn:
    expr = "x"
    for i in range(n):
        expr = _CHAIN_NE[i % len(_CHAIN_NE)].format(expr)

    def run(ev: NumexprEval, x: np.ndarray) -> np.ndarray:
        return ev(expr, x=x)
    return run


def chain(n: int, size: int) -> Workload:
    return Workload(f"chain{n}/2^{int(math.log2(size))}", "chain", chain_fn(n),
                    (InputSpec("x", (size,), -2.0, 2.0),), ((size,),), chain_numexpr(n), chain=n)


# -- GELU (tanh approximation) ---------------------------------------------------------------------

def gelu(xp: Any, x: Any) -> Any:
    return 0.5 * x * (1.0 + xp.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def gelu_ne(ev: NumexprEval, x: np.ndarray) -> np.ndarray:
    return ev("0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x ** 3)))", x=x)


# -- haversine: great-circle distances (trigonometry-bound) -----------------------------------------

_EARTH_KM, _RAD = 6371.0088, math.pi / 180


def haversine(xp: Any, lat1: Any, lon1: Any, lat2: Any, lon2: Any) -> Any:
    lat1, lon1, lat2, lon2 = (v * _RAD for v in (lat1, lon1, lat2, lon2))
    s_lat, s_lon = xp.sin((lat2 - lat1) * 0.5), xp.sin((lon2 - lon1) * 0.5)
    a = s_lat * s_lat + xp.cos(lat1) * xp.cos(lat2) * (s_lon * s_lon)
    return (2.0 * _EARTH_KM) * xp.arcsin(xp.sqrt(a))


def haversine_ne(ev: NumexprEval, lat1: np.ndarray, lon1: np.ndarray, lat2: np.ndarray,
                 lon2: np.ndarray) -> np.ndarray:
    return ev(f"{2.0 * _EARTH_KM} * arcsin(sqrt(sin((lat2 - lat1) * {_RAD / 2}) ** 2 + "
              f"cos(lat1 * {_RAD}) * cos(lat2 * {_RAD}) * sin((lon2 - lon1) * {_RAD / 2}) ** 2))",
              lat1=lat1, lon1=lon1, lat2=lat2, lon2=lon2)


# -- trigonometry-bound: sin and cos of one argument and its multiples, and tan -----------------

def trig(xp: Any, x: Any) -> Any:
    return xp.sin(x) * xp.cos(1.5 * x) + xp.sin(3.0 * x) - xp.cos(x) * xp.tan(0.1 * x)


def trig_ne(ev: NumexprEval, x: np.ndarray) -> np.ndarray:
    return ev("sin(x) * cos(1.5 * x) + sin(3.0 * x) - cos(x) * tan(0.1 * x)", x=x)


# -- one libm function each (sin, cos, tan, exp, log, x ** 2.2): the per-function ratios ---------

LIBM: dict[str, tuple[ArrayFn, float, float]] = {  # name: (fn, low, high of its input)
    "sin": (lambda xp, x: xp.sin(x), -100.0, 100.0),
    "cos": (lambda xp, x: xp.cos(x), -100.0, 100.0),
    "tan": (lambda xp, x: xp.tan(x), -1.5, 1.5),
    "exp": (lambda xp, x: xp.exp(x), -80.0, 80.0),
    "log": (lambda xp, x: xp.log(x), 1e-3, 1e3),
    "pow2.2": (lambda xp, x: x ** 2.2, 0.0, 100.0),
}


# -- a Sobel filter's gradient magnitude (np.hypot: PoCL's hypot is a call per lane) ------------

def sobel(xp: Any, img: Any) -> Any:
    gx = (img[:-2, 2:] + 2 * img[1:-1, 2:] + img[2:, 2:]) - \
        (img[:-2, :-2] + 2 * img[1:-1, :-2] + img[2:, :-2])
    gy = (img[2:, :-2] + 2 * img[2:, 1:-1] + img[2:, 2:]) - \
        (img[:-2, :-2] + 2 * img[:-2, 1:-1] + img[:-2, 2:])
    return xp.hypot(gx, gy)


# -- a complex64 pointwise filter (complex arithmetic, exp of an imaginary phase, modulus) --------

def complex_filter(xp: Any, re: Any, im: Any, phase: Any) -> Any:
    z = re + 1j * im  # complex64 (a Python complex is weak)
    y = z * xp.exp(1j * phase) + 0.5 * xp.conj(z) * z
    return xp.abs(y)


# -- an Asian option by Monte Carlo (fusejit.random: normals drawn where the paths use them) ------

_MC_SEED, _MC_R, _MC_SIGMA, _MC_T, _MC_STRIKE = 2024, 0.03, 0.25, 1.0, 100.0


def asian_option_fn(steps: int) -> ArrayFn:
    """The price of an arithmetic-average Asian call over ``steps`` fixing dates: geometric
    Brownian paths from each spot, the payoff averaged over paths and discounted. Traced, the
    normals are ``fusejit.random.normal`` (Philox4x64, Box-Muller); NumPy draws its own
    ``standard_normal`` from the same Philox generator, so the two prices agree to Monte Carlo
    error only (the workload's rtol)."""
    dt_ = _MC_T / steps
    drift, vol = (_MC_R - 0.5 * _MC_SIGMA ** 2) * dt_, _MC_SIGMA * math.sqrt(dt_)

    def asian_option(xp: Any, spot: Any) -> Any:
        shape = (spot.shape[0], steps)
        if isinstance(spot, np.ndarray):
            gen = np.random.Generator(np.random.Philox(key=_MC_SEED))
            z = gen.standard_normal(shape, dtype=np.float32)
        else:
            from fusejit import random as fr

            z = fr.normal(fr.key(_MC_SEED), shape, np.float32)
        path = spot[:, None] * xp.exp(xp.cumsum(drift + vol * z, axis=1))
        payoff = xp.maximum(path.mean(axis=1) - _MC_STRIKE, 0)
        return payoff.mean() * math.exp(-_MC_R * _MC_T)
    return asian_option


# -- Black-Scholes (call and put; polynomial normal CDF as in the CUDA/OpenCL SDK samples) ---------

_R, _SIGMA = 0.02, 0.30
_A = (0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429)
_CND = ("(0.3989422804 * exp(-0.5 * {d} * {d}) * ({k} * ({a0} + {k} * ({a1} + {k} * ({a2} + {k}"
        " * ({a3} + {k} * {a4}))))))")


def _cnd(xp: Any, d: Any) -> Any:
    k = 1.0 / (1.0 + 0.2316419 * xp.abs(d))
    poly = k * (_A[0] + k * (_A[1] + k * (_A[2] + k * (_A[3] + k * _A[4]))))
    w = 0.3989422804 * xp.exp(-0.5 * d * d) * poly
    return xp.where(d > 0, 1.0 - w, w)


def black_scholes(xp: Any, s: Any, k: Any, t: Any) -> tuple[Any, Any]:
    sqrt_t = xp.sqrt(t)
    d1 = (xp.log(s / k) + (_R + 0.5 * _SIGMA * _SIGMA) * t) / (_SIGMA * sqrt_t)
    d2 = d1 - _SIGMA * sqrt_t
    cnd1, cnd2 = _cnd(xp, d1), _cnd(xp, d2)
    k_disc = k * xp.exp(-_R * t)
    return s * cnd1 - k_disc * cnd2, k_disc * (1.0 - cnd2) - s * (1.0 - cnd1)


def black_scholes_ne(ev: NumexprEval, s: np.ndarray, k: np.ndarray, t: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    d1 = ev(f"(log(s / k) + {_R + 0.5 * _SIGMA * _SIGMA} * t) / ({_SIGMA} * sqrt(t))",
            s=s, k=k, t=t)
    d2 = ev(f"d1 - {_SIGMA} * sqrt(t)", d1=d1, t=t)
    w = _CND.format(d="d", k="kk", a0=_A[0], a1=_A[1], a2=_A[2], a3=_A[3], a4=_A[4])
    c1, c2 = (ev(f"where(d > 0, 1 - {w}, {w})", d=d, kk=ev("1 / (1 + 0.2316419 * abs(d))", d=d))
              for d in (d1, d2))
    call = ev(f"s * c1 - k * exp({-_R} * t) * c2", s=s, k=k, t=t, c1=c1, c2=c2)
    put = ev(f"k * exp({-_R} * t) * (1 - c2) - s * (1 - c1)", s=s, k=k, t=t, c1=c1, c2=c2)
    return call, put


# -- Adam update (step 10; hyperparameters are compile-time constants) -----------------------------

_LR, _B1, _B2, _EPS, _STEP = 1e-3, 0.9, 0.999, 1e-8, 10
_C1, _C2 = 1.0 / (1.0 - _B1 ** _STEP), 1.0 / (1.0 - _B2 ** _STEP)


def adam(xp: Any, p: Any, g: Any, m: Any, v: Any) -> tuple[Any, Any, Any]:
    m = _B1 * m + (1.0 - _B1) * g
    v = _B2 * v + (1.0 - _B2) * (g * g)
    p = p - _LR * (m * _C1) / (xp.sqrt(v * _C2) + _EPS)
    return p, m, v


def adam_ne(ev: NumexprEval, p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = ev(f"{_B1} * m + {1.0 - _B1} * g", m=m, g=g)
    v = ev(f"{_B2} * v + {1.0 - _B2} * (g * g)", v=v, g=g)
    p = ev(f"p - {_LR} * (m * {_C1}) / (sqrt(v * {_C2}) + {_EPS})", p=p, m=m, v=v)
    return p, m, v


# -- row-wise softmax and layernorm ----------------------------------------------------------------

def softmax(xp: Any, x: Any) -> Any:
    e = xp.exp(x - xp.max(x, axis=-1, keepdims=True))
    return e / xp.sum(e, axis=-1, keepdims=True)


def softmax_ne(ev: NumexprEval, x: np.ndarray) -> np.ndarray:
    m = x.max(axis=-1, keepdims=True)  # numexpr has sum/prod reductions only
    total = ev("sum(exp(x - m), axis=1)", x=x, m=m)[:, None]
    return ev("exp(x - m) / total", x=x, m=m, total=total)


def layernorm(xp: Any, x: Any, w: Any, b: Any) -> Any:
    mu = xp.mean(x, axis=-1, keepdims=True)
    d = x - mu
    var = xp.mean(d * d, axis=-1, keepdims=True)
    return d / xp.sqrt(var + 1e-5) * w + b


def layernorm_ne(ev: NumexprEval, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    n = x.shape[-1]
    mu = ev("sum(x, axis=1)", x=x)[:, None] / np.float32(n)
    var = ev("sum((x - mu) ** 2, axis=1)", x=x, mu=mu)[:, None] / np.float32(n)
    return ev("(x - mu) / sqrt(var + 1e-5) * w + b", x=x, mu=mu, var=var, w=w, b=b)


# -- sizes -----------------------------------------------------------------------------------------


# -- matrix products ---------------------------------------------------------------------------------


def dense_relu(xp: Any, x: Any, w: Any, b: Any) -> Any:
    return xp.maximum(x @ w + b, 0)


def dense_gelu(xp: Any, x: Any, w: Any, b: Any) -> Any:
    """One MLP layer: x @ w + b, then GELU (tanh form)."""
    return gelu(xp, x @ w + b)


def mlp_narrow(xp: Any, x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    """A small classifier head: many rows, a narrow input, ReLU, ten logits."""
    return xp.maximum(x @ w1 + b1, 0) @ w2 + b2


def mlp_block(xp: Any, x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    """A transformer MLP block: x + gelu(x @ w1 + b1) @ w2 + b2."""
    return x + gelu(xp, x @ w1 + b1) @ w2 + b2


# -- convolution and pooling, as NumPy code writes them: windows are views ------------------------


def conv3x3_relu(xp: Any, x: Any, w: Any, b: Any) -> Any:
    """ResNet's 3x3 layer (NHWC, stride 1, pad 1) + bias + ReLU: a window view contracted by
    einsum (fusejit: one implicit-GEMM kernel)."""
    xp_ = xp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    p = xp.lib.stride_tricks.sliding_window_view(xp_, (3, 3), axis=(1, 2))  # n h w c i j
    return xp.maximum(xp.einsum("nhwcij,ijck->nhwk", p, w, optimize=True) + b, 0)


def maxpool2x2(xp: Any, x: Any) -> Any:
    """2x2 max pooling, stride 2 (NHWC): the maximum over each window of a strided view."""
    p = xp.lib.stride_tricks.sliding_window_view(x, (2, 2), axis=(1, 2))[:, ::2, ::2]
    return p.max(axis=(-2, -1))


def _weights(name: str, k: int, n: int) -> InputSpec:
    return InputSpec(name, (k, n), -1.7 / math.sqrt(k), 1.7 / math.sqrt(k))


@dataclass(frozen=True)
class Scale:
    """Problem sizes of one scale."""

    chain_sizes: tuple[int, ...]
    chain_lengths: tuple[int, ...]
    gelu: int
    black_scholes: int
    adam: int
    softmax: tuple[int, int]
    layernorm: tuple[int, int]
    gemm: int = 128  # n of the n^3 dense layers
    mlp: tuple[int, int] = (128, 128)  # (tokens, width) of the MLP block
    scan: int = 2**24  # elements of the 1-d cumsum (a few long rows: reduce-then-scan)
    scan_rows: tuple[int, int] = (16384, 1024)  # (rows, length) of the row-wise cumsum
    conv: tuple[int, int, int] = (4, 56, 64)  # (batch, height = width, channels) of the layer
    asian: tuple[int, int] = (2**16, 64)  # (paths, steps) of the Asian option


CHAIN_LENGTHS = (1, 2, 4, 8, 16, 32)
SCALES: dict[str, Scale] = {
    "tiny": Scale((2**10, 2**14), (1, 8), 2**14, 2**14, 2**14, (64, 256), (64, 256), 64,
                  (64, 64), 2**14, (64, 256), (1, 16, 16), (2**12, 16)),
    "small": Scale((2**10, 2**14, 2**18, 2**22), CHAIN_LENGTHS, 2**22, 2**20, 2**21,
                   (1024, 1024), (512, 4096), 1024, (1024, 1024), 2**22, (4096, 1024)),
    "full": Scale((2**10, 2**14, 2**18, 2**22, 2**26), CHAIN_LENGTHS, 2**26, 2**24, 2**25,
                  (16384, 1024), (8192, 4096), 4096, (8192, 4096), conv=(32, 56, 64),
                  asian=(2**20, 64)),
}
FAMILIES = ("chain", "gelu", "haversine", "trig", "libm", "sobel", "complex", "black_scholes",
            "random", "adam", "softmax", "layernorm", "gemm", "mlp", "scan", "conv", "pool")
# families written with NumPy functions other array namespaces lack (sliding_window_view,
# np.random.Generator)
NUMPY_ONLY = frozenset({"conv", "pool", "random"})


def workloads(scale: Scale, families: Sequence[str] = FAMILIES) -> list[Workload]:
    """Every case of ``scale`` for the requested families, chains first."""
    out: list[Workload] = []
    if "chain" in families:
        out += [chain(n, size) for size in scale.chain_sizes for n in scale.chain_lengths]
    n = scale.gelu
    if "gelu" in families:
        out.append(Workload("gelu", "gelu", gelu, (InputSpec("x", (n,), -4.0, 4.0),),
                            ((n,),), gelu_ne))
    if "haversine" in families:  # (the GELU size: both are one-input-per-element elementwise)
        points = [InputSpec(name, (n,), lo, hi) for name, lo, hi in (
            ("lat1", -60.0, 60.0), ("lon1", -180.0, 180.0), ("lat2", -61.0, 61.0),
            ("lon2", -181.0, 181.0))]
        out.append(Workload("haversine", "haversine", haversine, tuple(points), ((n,),),
                            haversine_ne))
    if "trig" in families:
        out.append(Workload("trig", "trig", trig, (InputSpec("x", (n,), -10.0, 10.0),), ((n,),),
                            trig_ne))
    if "libm" in families:
        out += [Workload(name, "libm", fn, (InputSpec("x", (n,), lo, hi),), ((n,),))
                for name, (fn, lo, hi) in LIBM.items()]
    if "sobel" in families:  # (a square image of about the GELU size)
        side = max(8, math.isqrt(n))
        out.append(Workload(f"sobel/{side}^2", "sobel", sobel,
                            (InputSpec("img", (side, side), 0.0, 1.0),),
                            ((side - 2, side - 2),)))
    if "complex" in families:
        out.append(Workload("complex_filter", "complex", complex_filter, (
            InputSpec("re", (n,), -1.0, 1.0), InputSpec("im", (n,), -1.0, 1.0),
            InputSpec("phase", (n,), -3.2, 3.2)), ((n,),)))
    n = scale.black_scholes
    if "black_scholes" in families:
        out.append(Workload("black_scholes", "black_scholes", black_scholes,
                            (InputSpec("S", (n,), 5.0, 30.0), InputSpec("K", (n,), 1.0, 100.0),
                             InputSpec("T", (n,), 0.25, 10.0)), ((n,), (n,)), black_scholes_ne))
    if "random" in families:
        paths, steps = scale.asian
        out.append(Workload(f"asian_option/{paths}x{steps}", "random", asian_option_fn(steps),
                            (InputSpec("spot", (paths,), 95.0, 105.0),), ((),), rtol=0.05))
    n = scale.adam
    if "adam" in families:
        out.append(Workload("adam", "adam", adam,
                            (InputSpec("param", (n,), -1.0, 1.0),
                             InputSpec("grad", (n,), -1.0, 1.0),
                             InputSpec("m", (n,), -0.1, 0.1), InputSpec("v", (n,), 0.0, 0.01)),
                            ((n,),) * 3, adam_ne))
    if "softmax" in families:
        shape = scale.softmax
        out.append(Workload("softmax", "softmax", softmax, (InputSpec("x", shape, -4.0, 4.0),),
                            (shape,), softmax_ne))
    if "layernorm" in families:
        shape = scale.layernorm
        cols = shape[1]
        out.append(Workload("layernorm", "layernorm", layernorm,
                            (InputSpec("x", shape, -4.0, 4.0), InputSpec("w", (cols,), 0.5, 1.5),
                             InputSpec("b", (cols,), -0.5, 0.5)), (shape,), layernorm_ne))
    if "gemm" in families:
        n = scale.gemm
        ins = (InputSpec("x", (n, n), -1.0, 1.0), _weights("w", n, n),
               InputSpec("b", (n,), -0.5, 0.5))
        out.append(Workload(f"dense_relu/{n}^3", "gemm", dense_relu, ins, ((n, n),),
                            params={"flops": 2 * n ** 3}))
        out.append(Workload(f"dense_gelu/{n}^3", "gemm", dense_gelu, ins, ((n, n),),
                            params={"flops": 2 * n ** 3}))
    if "mlp" in families:
        t, d = scale.mlp
        out.append(Workload(f"mlp_block/{t}x{d}", "mlp", mlp_block,
                            (InputSpec("x", (t, d), -1.0, 1.0), _weights("w1", d, d),
                             InputSpec("b1", (d,), -0.5, 0.5), _weights("w2", d, d),
                             InputSpec("b2", (d,), -0.5, 0.5)), ((t, d),),
                            params={"flops": 4 * t * d * d}))
        rows, width, hidden, classes = max(64, 16 * t), 64, 128, 10
        out.append(Workload(f"mlp_narrow/{rows}x{width}-{hidden}-{classes}", "mlp", mlp_narrow,
                            (InputSpec("x", (rows, width), -1.0, 1.0),
                             _weights("w1", width, hidden), InputSpec("b1", (hidden,), -0.5, 0.5),
                             _weights("w2", hidden, classes),
                             InputSpec("b2", (classes,), -0.5, 0.5)), ((rows, classes),),
                            params={"flops": 2 * rows * (width * hidden + hidden * classes)}))
    if "scan" in families:
        n, shape = scale.scan, scale.scan_rows
        out.append(Workload(f"cumsum/2^{int(math.log2(n))}", "scan", cumsum,
                            (InputSpec("x", (n,), -1.0, 1.0),), ((n,),)))
        out.append(Workload(f"row_cumsum/{shape[0]}x{shape[1]}", "scan", cumsum,
                            (InputSpec("x", shape, -1.0, 1.0),), (shape,)))
    if "conv" in families or "pool" in families:
        n, hw, c = scale.conv
        image = InputSpec("x", (n, hw, hw, c), -1.0, 1.0)
        if "conv" in families:
            out.append(Workload(f"conv3x3_relu/{n}x{hw}x{hw}x{c}", "conv", conv3x3_relu,
                                (image, InputSpec("w", (3, 3, c, c), -1.7 / math.sqrt(9 * c),
                                                  1.7 / math.sqrt(9 * c)),
                                 InputSpec("b", (c,), -0.5, 0.5)), ((n, hw, hw, c),),
                                params={"flops": 2 * n * hw * hw * c * c * 9}))
        if "pool" in families:
            out.append(Workload(f"maxpool2x2/{n}x{hw}x{hw}x{c}", "pool", maxpool2x2, (image,),
                                ((n, hw // 2, hw // 2, c),)))
    return out


def cumsum(xp: Any, x: Any) -> Any:
    """A scan along the last axis (the whole array when 1-d): one read and one write."""
    return xp.cumsum(x, axis=-1)


def with_elements(scale: Scale, n: int) -> Scale:
    """``scale`` with every elementwise, row-wise and scan workload at ``n`` elements (rows of
    the scale's length); chains, matrix products and the MLP block keep their sizes."""
    def rows(shape: tuple[int, int]) -> tuple[int, int]:
        return max(1, n // shape[1]), shape[1]
    return Scale(**{**scale.__dict__, "gelu": n, "black_scholes": n, "adam": n,
                    "softmax": rows(scale.softmax), "layernorm": rows(scale.layernorm),
                    "scan": n, "scan_rows": rows(scale.scan_rows)})


SCALE_ENV = "FUSEJIT_BENCH_SCALE"


def parse_scale(name: str | None, default: str = "full") -> Scale:
    """A scale by name (``tiny``, ``small``, ``full``); ``None`` or empty gives ``default``."""
    key = (name or default).strip().lower()
    if key not in SCALES:
        raise ValueError(f"unknown benchmark scale {name!r}; choose one of {sorted(SCALES)}")
    return SCALES[key]


def scale_from_env(default: str = "full") -> Scale:
    """The scale named by ``$FUSEJIT_BENCH_SCALE`` (the pytest-benchmark suites' size knob)."""
    return parse_scale(os.environ.get(SCALE_ENV), default)
