"""float16 lanes held packed, two to a 32-bit word, with NVIDIA's native float16 arithmetic.

OpenCLTarget computes float16 in float and rounds back to half after every op (two conversions
per op and element). In elementwise kernels on devices with native float16 arithmetic
(``runtime/opencl/half2_probe.py``: NVIDIA, compute capability 8.0+, checked by a kernel) the lanes of a
float16 vector stay in their storage format instead (``ushort8``: the bits, as loaded) and:

* + - * of two float16 values are ``add/sub/mul.rn.f16x2`` (inline PTX, two lanes an
  instruction). They equal the float32 op rounded to float16, which is what NumPy's float16
  loops compute: the float32 product of two float16 is exact, and a sum or difference rounded
  to float32 (24 bits >= 2*11 + 2) and then to float16 rounds as the exact one does (double
  rounding is innocuous). The ``.rn`` suffix keeps the compiler from contracting into fma;
* negative and absolute flip or clear the sign bit (what NumPy's float16 loops do, NaN too);
* every other op unpacks its lanes to float, applies OpenCLTarget's scalar template (the same
  code the lanes ran before) and packs the results with ``cvt.rn.f16x2.f32`` (round to nearest
  even: what ``vstore_half_rte`` does), two lanes an instruction;
* where(c, a, b) selects the bits.

``emulated()`` spells the same four PTX helpers as portable OpenCL C, so the packed code runs
(and is tested against NumPy) on PoCL; without it PoCL keeps OpenCLTarget's code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.ir.ops import OPS, Op
from fusejit.targets.scoped import Scoped
from fusejit.targets.opencl.target import OpenCLTarget

_NATIVE = """
inline uint fj_hadd2(uint a, uint b) {
    uint r; asm("add.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
inline uint fj_hsub2(uint a, uint b) {
    uint r; asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
inline uint fj_hmul2(uint a, uint b) {
    uint r; asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
inline uint fj_f2h2(float lo, float hi) {  /* (cvt.rn.f16x2.f32 d, a, b puts a in the high half) */
    uint r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
}
inline float fj_h2f(ushort h) { return vload_half(0, (const half *)&h); }
"""
_EMULATED = """
inline float fj_h2f(ushort h) { return vload_half(0, (const half *)&h); }
inline uint fj_f2h2(float lo, float hi) {
    ushort2 u;
    vstore_half_rte(lo, 0, (half *)&u);
    vstore_half_rte(hi, 1, (half *)&u);
    return as_uint(u);
}
inline uint fj_hadd2(uint a, uint b) {
    ushort2 x = as_ushort2(a), y = as_ushort2(b);
    return fj_f2h2(fj_h2f(x.s0) + fj_h2f(y.s0), fj_h2f(x.s1) + fj_h2f(y.s1));
}
inline uint fj_hsub2(uint a, uint b) {
    ushort2 x = as_ushort2(a), y = as_ushort2(b);
    return fj_f2h2(fj_h2f(x.s0) - fj_h2f(y.s0), fj_h2f(x.s1) - fj_h2f(y.s1));
}
inline uint fj_hmul2(uint a, uint b) {
    ushort2 x = as_ushort2(a), y = as_ushort2(b);
    return fj_f2h2(fj_h2f(x.s0) * fj_h2f(y.s0), fj_h2f(x.s1) * fj_h2f(y.s1));
}
"""
_NATIVE_OPS = {Op.ADD: "fj_hadd", Op.SUB: "fj_hsub", Op.MUL: "fj_hmul"}
_BITS = {Op.NEG: "({a} ^ (ushort{n})(0x8000))", Op.ABS: "({a} & (ushort{n})(0x7fff))",
         Op.POS: "{a}"}

_mode = Scoped(None)  # "emulated" or "unpacked" inside the blocks below


def emulated() -> contextlib.AbstractContextManager[None]:
    """Functions compiled inside the block hold float16 lanes packed on any OpenCL device, the
    PTX helpers spelled as OpenCL C (tests on PoCL)."""
    return _mode.set("emulated")


def unpacked() -> contextlib.AbstractContextManager[None]:
    """Functions compiled inside the block compute float16 in float, rounded after every op, on
    every device (OpenCLTarget's spelling: what packed results are compared with)."""
    return _mode.set("unpacked")


def spelling(native: bool) -> str | None:
    """"native", "emulated" or None (OpenCLTarget's) for a device with or without native packed
    float16 arithmetic, as the blocks above ask."""
    mode = _mode.value
    if mode is None:
        return "native" if native else None
    return None if mode == "unpacked" else mode


def _words(n: int) -> str:
    """The unsigned type of n/2 32-bit words (n lanes of float16)."""
    return "uint" if n == 2 else f"uint{n // 2}"


class PackedHalfTarget(OpenCLTarget):
    """OpenCLTarget for elementwise kernels, with float16 vectors packed (module docstring).
    Shares its helpers with the target it was made from, so one prelude holds both."""

    def __init__(self, helpers: dict[str, str], native: bool) -> None:
        super().__init__()
        self.helpers = helpers
        self.native = native

    def packed_lanes(self, dtype: np.dtype) -> bool:
        return dtype == dt.FLOAT16

    def _base(self) -> None:
        # (helpers print sorted by key: these after the scalar ones their templates call, the
        # base ones first, then packing, then the ops)
        self.helpers["xhalf2"] = _NATIVE if self.native else _EMULATED

    def _vec_helper(self, name: str, n: int, params: Sequence[tuple[str, str]], body: str,
                    order: str = "b") -> str:
        sig = ", ".join(f"{t} {p}" for t, p in params)
        self.helpers[f"xhalf2_{order}_{name}{n}"] = \
            f"inline ushort{n} {name}{n}({sig}) {{\n    {body}\n}}\n"
        return f"{name}{n}"

    def _pack_floats(self, n: int) -> str:
        """fj_f2hv{n}(float{n}): round each lane to float16, packed."""
        self._base()
        words = [f"fj_f2h2(v.s{2 * i:x}, v.s{2 * i + 1:x})" for i in range(n // 2)]
        ctor = words[0] if n == 2 else f"({_words(n)})(" + ", ".join(words) + ")"
        return self._vec_helper("fj_f2hv", n, [(f"float{n}", "v")],
                                f"return as_ushort{n}({ctor});", order="a")

    def _unpack(self, n: int) -> str:
        """fj_h2fv{n}(ushort{n}): the lanes as floats (exact)."""
        self._base()
        lanes = ", ".join(f"fj_h2f(h.s{i:x})" for i in range(n))
        self.helpers[f"xhalf2_a_unpack{n}"] = \
            f"inline float{n} fj_h2fv{n}(ushort{n} h) {{ return (float{n})({lanes}); }}\n"
        return f"fj_h2fv{n}"

    # -- types and memory -------------------------------------------------------------------------
    def vector_type(self, dtype: np.dtype, n: int) -> str:
        return f"ushort{n}" if dtype == dt.FLOAT16 else super().vector_type(dtype, n)

    def vector_load(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str:
        if dtype != dt.FLOAT16:
            return super().vector_load(ptr, index, dtype, n)
        return f"((const __global ushort{n} *){ptr})[{index}]"

    def vector_store(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str:
        if dtype != dt.FLOAT16:
            return super().vector_store(ptr, index, dtype, n)
        return f"((__global ushort{n} *){ptr})[{index}] = {{0}};"

    def vector_load_at(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str | None:
        """(rows of a runtime length, source_rows: the bits at any alignment, as loaded)"""
        if dtype != dt.FLOAT16:
            return super().vector_load_at(ptr, index, dtype, n)
        return f"vload{n}(0, (const __global ushort *){ptr} + {index})"

    def vector_store_at(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str | None:
        if dtype != dt.FLOAT16:
            return super().vector_store_at(ptr, index, dtype, n)
        return f"vstore{n}({{0}}, 0, (__global ushort *){ptr} + {index});"

    def lane(self, dtype: np.dtype, lane: int) -> str:
        if dtype != dt.FLOAT16:
            return super().lane(dtype, lane)
        self._base()
        return "fj_h2f({v}.s" + format(lane, "x") + ")"

    def pack(self, dtype: np.dtype, n: int) -> str:
        if dtype != dt.FLOAT16:
            return super().pack(dtype, n)
        self._base()  # (the lanes are float16 values already: packing them is exact)
        words = [f"fj_f2h2({{{2 * i}}}, {{{2 * i + 1}}})" for i in range(n // 2)]
        ctor = words[0] if n == 2 else f"({_words(n)})(" + ", ".join(words) + ")"
        return f"as_ushort{n}({ctor})"

    def broadcast(self, dtype: np.dtype, n: int, x: str) -> str:
        if dtype != dt.FLOAT16:
            return super().broadcast(dtype, n, x)
        bits = _literal_bits(x)
        if bits is not None:
            return f"((ushort{n})(0x{bits:04x}))"
        self._base()
        return f"as_ushort{n}(({_words(n)})(fj_f2h2({x}, {x})))"

    def round_to_storage_vector(self, dtype: np.dtype, x: str, n: int) -> str:
        # packed float16 results are rounded by the op that made them; only elementwise kernels
        # use this target, whose vector values of float16 are all packed
        return x if dtype == dt.FLOAT16 else super().round_to_storage_vector(dtype, x, n)

    # -- ops --------------------------------------------------------------------------------------
    def render_op_vector(self, op: Op, out: np.dtype, ins: Sequence[np.dtype],
                         operands: Sequence[str], n: int) -> str | None:
        half_in = any(d == dt.FLOAT16 for d in (ins[1:] if op is Op.WHERE else ins))
        if out != dt.FLOAT16 and not half_in:
            return super().render_op_vector(op, out, ins, operands, n)
        if out != dt.FLOAT16 or any(d != dt.FLOAT16 for d in
                                    (ins[1:] if op is Op.WHERE else ins)):
            return None  # float16 operands of other results, mixed operands: lane by lane
        names = dict(zip("abc", operands))
        if op is Op.WHERE:
            return (f"select({operands[2]}, {operands[1]}, "
                    f"convert_short{n}({operands[0]}) != (short{n})(0))")
        if op in _BITS:
            return _BITS[op].format(**names, n=n)
        if op is Op.SQUARE:
            op, operands = Op.MUL, [operands[0], operands[0]]
        if op in _NATIVE_OPS:
            return f"{self._native(op, n)}({operands[0]}, {operands[1]})"
        if len(operands) > 2:
            return None
        return f"{self._through_float(op, ins, n)}({', '.join(operands)})"

    def _native(self, op: Op, n: int) -> str:
        self._base()
        fn = _NATIVE_OPS[op]
        if n == 2:
            body = f"return as_ushort2({fn}2(as_uint(a), as_uint(b)));"
        else:
            w = _words(n)
            words = ", ".join(f"{fn}2(x.s{i:x}, y.s{i:x})" for i in range(n // 2))
            body = f"{w} x = as_{w}(a), y = as_{w}(b);\n    return as_ushort{n}(({w})({words}));"
        return self._vec_helper(fn, n, [(f"ushort{n}", "a"), (f"ushort{n}", "b")], body)

    def _through_float(self, op: Op, ins: Sequence[np.dtype], n: int) -> str:
        """fj_h{n}_<op>: the lanes unpacked, OpenCLTarget's scalar float16 template on each,
        the results packed."""
        unpack, pack = self._unpack(n), self._pack_floats(n)
        args = "ab"[:len(ins)]
        lanes = []
        for i in range(n):
            lanes.append(self.render_op(op, dt.FLOAT16, ins, [f"{v}.s{i:x}" for v in
                                                              ("x", "y")[:len(ins)]]))
        unpacked = " ".join(f"float{n} {v} = {unpack}({a});" for v, a in zip("xy", args))
        body = f"{unpacked}\n    return {pack}((float{n})({', '.join(lanes)}));"
        name = f"fj_h_{OPS[op].name}_"
        return self._vec_helper(name, n, [(f"ushort{n}", a) for a in args], body)

    def render_cast_vector(self, src: np.dtype, dst: np.dtype, x: str, n: int) -> str | None:
        if src == dt.FLOAT16 and dst == dt.FLOAT16:
            return x
        if src == dt.FLOAT16:
            return super().render_cast_vector(dt.FLOAT32, dst, f"{self._unpack(n)}({x})", n)
        if dst == dt.FLOAT16:
            if "c" in (src.kind, dst.kind) or src == dt.FLOAT64:
                return None
            value = x if src == dt.FLOAT32 else f"convert_float{n}({x})"
            return f"{self._pack_floats(n)}({value})"
        return super().render_cast_vector(src, dst, x, n)


def _literal_bits(text: str) -> int | None:
    """The float16 bits of a float literal as OpenCLTarget spells one (``0x1.988p-1f``,
    ``(-0x1p+0f)``, ``INFINITY``, ``(-NAN)``: NumPy's float16 NaN, its sign kept), or None for
    anything else (a variable)."""
    t = text.strip()
    while t.startswith("(") and t.endswith(")"):
        t = t[1:-1].strip()
    sign = -1.0 if t.startswith("-") else 1.0
    t = t.lstrip("-")
    try:
        if t == "NAN":
            return 0xfe00 if sign < 0 else 0x7e00
        if t == "INFINITY":
            value = sign * np.inf
        elif t.endswith("f") and t.startswith("0x"):
            value = sign * float.fromhex(t[:-1])
        else:
            return None
    except ValueError:
        return None
    h = np.float16(value)
    if float(h) != value:  # not a float16 value: not ours to fold
        return None
    return int(np.array(h).view(np.uint16))




class Half2OpenCLTarget(OpenCLTarget):
    """OpenCLTarget whose elementwise kernels hold float16 lanes packed (PackedHalfTarget):
    ``native`` spells the helpers as PTX, else as portable OpenCL C (``emulated()``)."""

    def __init__(self, native: bool) -> None:
        super().__init__()
        self.native = native

    def elementwise_target(self) -> OpenCLTarget:
        packed = PackedHalfTarget(self.helpers, self.native)
        packed.fast_div = self.fast_div
        return packed


def helpers(native: bool) -> str:
    """The four helpers (fj_hadd2, fj_hsub2, fj_hmul2, fj_f2h2) and fj_h2f, as PTX or C."""
    return _NATIVE if native else _EMULATED


__all__ = ["Half2OpenCLTarget", "PackedHalfTarget", "emulated", "helpers", "spelling", "unpacked"]
