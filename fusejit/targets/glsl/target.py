"""GLSL 450 compute spellings (Vulkan through wgpu/naga), with NumPy's results where Vulkan
allows them.

Conventions the templates rely on:
* operands are variable names or literals, so a template may repeat them;
* GLSL has no implicit conversions worth trusting and no C casts: every template is typed
  exactly, and bool computes as GLSL ``bool`` (stored as one ``uint`` per element: naga's GLSL
  frontend has no 8-bit types);
* Vulkan lets a driver assume there is no NaN or Inf and leaves NaN comparisons and builtins
  such as ``max``/``floor`` undefined for them, so NaN and Inf are recognised by their bit
  patterns (``fj_isnan``) and every NaN-sensitive template branches on those;
* int and uint arithmetic wraps in SPIR-V (no C undefined behaviour), so int32 templates are
  the plain operators; division, remainder and shifts guard the cases SPIR-V leaves undefined.

Where Vulkan's precision rules cannot keep NumPy's results, ``TOLERANCES`` says by how much
(the README's per-target table is built from the same numbers).

Dtypes: float32, int32, uint32, bool always; float16 where the adapter has ``shader-f16``
(``float16_t`` buffers, computed in float32 and rounded to half after every op, as NumPy's
float16 loops and the OpenCL target do); float64 where it has ``shader-f64``, its exact ops
only (``glsl_double``: naga's ``double`` has no 64-bit literals, no bit access and no
transcendental builtins); 8/16-bit integers packed in 32-bit words, written only as whole
words (``glsl_narrow``); int64 and uint64 where the adapter has ``shader-int64``, spelled
``int64_t`` with the 32-bit templates widened (``wide``): naga's GLSL frontend has no 64-bit
integers, so kernels that hold them compile as WGSL (targets/wgsl/translate.py), which has.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence

import numpy as np

from fusejit.ir import dtypes as dt
from fusejit.errors import UnsupportedDTypeError
from fusejit.ir.ops import OPS, Op
from fusejit.targets.base import Target
from fusejit.targets.glsl import double as glsl_double, narrow as glsl_narrow, f64 as glsl_f64
from fusejit.targets.glsl.ops import T as _T
from fusejit.targets.glsl.ops import exponent as _exponent
from fusejit.targets.glsl.ops import wide
from fusejit.targets.glsl.helpers import DERIVED as _DERIVED
from fusejit.targets.glsl.helpers import HALF as _HALF
from fusejit.targets.glsl.helpers import HELPERS as _HELPERS
from fusejit.targets.glsl.helpers import ISNAN as _ISNAN
from fusejit.targets.glsl.helpers import SPECIAL as _SPECIAL
from fusejit.targets.glsl.helpers import special as _special
from fusejit.targets.glsl.helpers import float_literal
from fusejit.targets.glsl.helpers import truth as _truth

_GL = {"bool": "bool", "int32": "int", "uint32": "uint", "float32": "float", "float16": "float",
       "float64": "double", "int64": "int64_t", "uint64": "uint64_t"}
_STORAGE = {"bool": "uint", "int32": "int", "uint32": "uint", "float32": "float",
            "float16": "float16_t", "float64": "double", "int64": "int64_t", "uint64": "uint64_t"}
_VEC = {"bool": "bvec", "int32": "ivec", "uint32": "uvec", "float32": "vec", "float16": "vec",
        "float64": "dvec", "int64": "i64vec", "uint64": "u64vec"}
for _name in glsl_narrow.BITS:  # (8/16-bit integers: packed in uint words, see glsl_narrow)
    _GL[_name], _STORAGE[_name] = glsl_narrow.compute_type(_name), "uint"
    _VEC[_name] = _VEC["uint32" if _name.startswith("u") else "int32"]
# dtypes that need an optional adapter feature (wgpu's name for it)
FEATURE_OF = {"float16": "shader-f16", "float64": "shader-f64", "int64": "fj-wgsl-int64",
              "uint64": "fj-wgsl-int64"}
_F16_EXT = "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : enable\n"
_MISSING = {
    "int64": "64-bit integers, which need the adapter's shader-int64 feature and WGSL kernels "
             "(naga's GLSL frontend has no int64_t; FUSEJIT_VULKAN_WGSL=0 keeps GLSL only)",
    "uint64": "64-bit integers, which need the adapter's shader-int64 feature and WGSL kernels "
              "(naga's GLSL frontend has no uint64_t; FUSEJIT_VULKAN_WGSL=0 keeps GLSL only)",
    "float16": "float16, which needs the adapter's shader-f16 feature (this adapter lacks it)",
    "float64": "float64, which needs the adapter's shader-f64 feature (this adapter lacks it)",
    "complex64": "complex numbers (the Vulkan target has no vec2 complex templates yet)",
    "complex128": "complex numbers (the Vulkan target has no dvec2 complex templates yet)",
}

# Documented tolerance of the Vulkan target per op, in float32 ULPs, where it differs from
# OpenCL's (exact or op_ulp). Vulkan's precision table gives exp/log/pow "3 + 2|x| ULP" and
# sin/cos an absolute 2^-11 error; the helpers built on them inherit it.
TOLERANCES: dict[Op, int] = {
    **{op: 4096 for op in (Op.ARCSIN, Op.ARCCOS, Op.ARCTAN,
                           Op.ARCTAN2, Op.SINH, Op.COSH, Op.TANH, Op.ARCSINH, Op.ARCCOSH,
                           Op.ARCTANH, Op.POW, Op.EXPM1, Op.LOG1P, Op.LOGADDEXP, Op.LOGADDEXP2,
                           Op.CBRT, Op.HYPOT)},
    # exp's 3 + 2|x| ULP reaches 180 ULP at |x| = 88
    **{op: 256 for op in (Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.LOG10)},
    Op.TRUEDIV: 3, Op.SQRT: 3, Op.RECIPROCAL: 3,
}

# Where those bounds hold: the transcendental builtins may flush subnormal inputs and results
# (no shaderDenormPreserve requirement), so those are outside the promise, except the inputs
# of SUBNORMAL_INPUTS, which read a subnormal by its bits (targets/glsl/helpers.py). float32
# sin, cos and tan are fusejit's own where the adapter has shader-f64 (targets/glsl_f64: the
# OpenCL bound, for |x| < 2^20); elsewhere they are the builtins, whose Vulkan bound (2^-11
# absolute, here BUILTIN_TRIG_ULP) holds for |x| <= pi only.
BUILTIN_TRIG_ULP = 4096
SUBNORMAL_INPUTS = frozenset({Op.LOG, Op.LOG2, Op.LOG10, Op.CBRT, Op.POW})


def tolerance(op: Op, features: frozenset[str], dtype: np.dtype = dt.FLOAT32
              ) -> tuple[int, float]:
    """(ULP allowed beyond the OpenCL bound, |x| domain of the promise) of ``op`` with ``dtype``
    results on an adapter with ``features``: the float32 and float16 ops computed through
    double (glsl_f64.T) keep OpenCL's bound."""
    if "shader-f64" in features and op in glsl_f64.T and dtype != dt.FLOAT64:
        return (0, glsl_f64.TRIG_DOMAIN if op in TRIG_OPS else math.inf)
    if op in TRIG_OPS:
        return (BUILTIN_TRIG_ULP, math.pi)
    return (TOLERANCES.get(op, 0), math.inf)


TRIG_OPS = frozenset({Op.SIN, Op.COS, Op.TAN})

# float results the driver must not see through: SPIR-V lets a Vulkan driver reassociate and
# contract float arithmetic (lavapipe turns (x + b) - x into b, NVIDIA fuses a * b + c), and
# naga cannot mark an op precise (NoContraction). A product with the uniform block's fj_one
# (1.0, unknown to the compiler) keeps each sum as NumPy rounds it: exact, and nothing folds
# across it. (It replaced an XOR of the bits with fj_z = 0, which kept the results too but
# stopped NVIDIA merging a work-item's four adjacent accesses into 16-byte ones: an H200 ran
# chain8 over 2^26 float32 in 254 us with the XOR, 129 us with the product, 156 us with neither.)
# A product takes the other kind of op, a difference with fj_zero (as exact: x - 0.0 is x, -0.0
# too): a product with fj_one did not stop lavapipe moving constants across it, turning
# deg2rad(deg2rad(x)) into x * (c * c), an ulp off.
_OPAQUE = frozenset({Op.ADD, Op.SUB})
_OPAQUE_PRODUCTS = frozenset({Op.MUL, Op.SQUARE, Op.DEG2RAD, Op.RAD2DEG})
# Operands the driver must not see as one value: lavapipe folds x - x and x + (-x) to 0 (NIR's
# inexact "a + -a -> 0", wrong for inf and NaN) whatever multiplies the result. So the second
# operand of a float + or - is multiplied by fj_one too: an exact copy the driver cannot prove
# equal to the first (literals, which cannot be, stay bare).
_CANCELS = frozenset({Op.ADD, Op.SUB})
_LITERAL = re.compile(r"\(?-?(\d[\w.+-]*|fj_zero|double\(fj_zero\)|double\([\d.e+-]+\))\)?")
_UNROLL = "/*fj_unroll*/"
_UNROLL_LOOP = re.compile(r"^(\s*)/\*fj_unroll\*/for \(int k = 0; k < (\d+); k\+\+\) \{$")


def unroll(lines: list[str]) -> list[str]:
    """The loops marked with the unroll hint (rows kept in registers: ``c[k]`` arrays),
    unrolled in the text. naga's GLSL frontend has no unroll pragma, and a row cache indexed by
    a loop counter stays an array in memory, its loads one after another (an H200 ran softmax
    16384x1024 at half the OpenCL target's speed). Each copy is a block with its own constant
    ``k``, all inside ``do { } while (false)`` so the loop's ``break`` still leaves it."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = _UNROLL_LOOP.match(lines[i])
        end, depth = i + 1, 1
        while m and end < len(lines):
            depth += lines[end].count("{") - lines[end].count("}")
            if depth == 0:
                break
            end += 1
        n = int(m.group(2)) if m else 0
        if not m or end == len(lines) or lines[end].strip() != "}" or n > 256 or \
                any("continue" in line for line in lines[i + 1:end]):
            out.append(lines[i].replace(_UNROLL, ""))
            i += 1
            continue
        pad, inner = m.group(1), unroll(lines[i + 1:end])
        out.append(pad + "do {")
        for k in range(n):
            out += [f"{pad}{{ const int k = {k};", *inner, pad + "}"]
        out.append(pad + "} while (false);")
        i = end + 1
    return out


class GLSLTarget(Target):
    """GLSL 450 compute shaders, one shader per kernel, compiled by naga (wgpu)."""

    name = "glsl"
    max_lanes = 4  # GLSL vectors have 2-4 components
    # 4 lanes for every dtype: GPUs scalarise the ops anyway, and 8/16-bit results are written
    # as whole 32-bit words only (glsl_narrow), which 4 lanes of int8 make
    lanes_by_bytes = False
    fixed_local_size = True  # local_size_x is part of the shader
    tiled_gemm = False  # (matrix products: the direct kernel, registers and global loads only)
    # any/all/max/min of bools accumulate as 0/1 uint: on an H200, bool accumulators (bool
    # registers and shared arrays) gave wrong any() results where uint ones are plain
    bool_accumulator = dt.UINT32
    # the work-group number is a linear index folded over (x, y) when a dimension would pass
    # 65,535 groups; the launch passes the groups in dimension 0 and in all (fj_g0, fj_groups)
    global_id = "(fj_lin * gl_WorkGroupSize.x + gl_LocalInvocationID.x)"
    global_size = "(fj_groups * gl_WorkGroupSize.x)"
    local_id = "int(gl_LocalInvocationID.x)"
    group_id = "int(fj_lin % fj_g0)"
    barrier_local = "barrier();"
    local_qualifier = "shared"
    unroll_hint = _UNROLL  # (naga's GLSL has no unroll pragma: kernel() unrolls these loops)

    def __init__(self, features: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.features = features
        # FUSEJIT_VULKAN_VECTOR=0: one element per work-item and access (see vector_load)
        self.vector_code = os.environ.get("FUSEJIT_VULKAN_VECTOR", "1") != "0"
        # rows kept in registers, where a row is one 32-lane subgroup (runtime/vulkan/
        # device.py): one element every 32 a lane; FUSEJIT_VULKAN_ROW_RUN=4 gives each lane
        # runs of 4 adjacent elements (16 bytes a compiler may merge into one access), which
        # an H200 ran slower: softmax 16384x1024's kernel 112 us against 94 with the strided
        # slots (76 against 50 without the division's rounding correction), in one run
        self.row_slot_run = int(os.environ.get("FUSEJIT_VULKAN_ROW_RUN", "1"))

    def _check(self, dtype: np.dtype) -> str:
        name = dt.type_name(dtype)
        if name not in _GL or FEATURE_OF.get(name, "") not in self.features | {""}:
            raise UnsupportedDTypeError(
                f"{name} is not supported by the Vulkan target: it needs "
                f"{_MISSING.get(name, name)}; "
                "use float32/int32/uint32/bool arrays, or the OpenCL device "
                "(fusejit.set_default_device('opencl'))")
        return name

    def storage_type(self, dtype: np.dtype) -> str:
        name = self._check(dtype)
        if name == "float16":
            self.helpers.setdefault("00_f16", _F16_EXT)
        return _STORAGE[name]

    def compute_type(self, dtype: np.dtype) -> str:
        return _GL[self._check(dtype)]

    def index_type(self, wide: bool) -> str:
        if wide:
            raise UnsupportedDTypeError(
                "this call addresses more than 2**31 elements, which needs 64-bit index math; "
                "the Vulkan target has no 64-bit integers (naga's GLSL frontend)")
        return "int"

    def cast(self, ctype: str, x: str) -> str:
        return f"{ctype}({x})"

    def local_id_of(self, dim: int) -> str:
        return f"int(gl_LocalInvocationID.{'xyz'[dim]})"

    def group_id_of(self, dim: int) -> str:
        return "int(fj_lin % fj_g0)" if dim == 0 else "int(fj_lin / fj_g0)"

    def local_array(self, ctype: str, name: str, n: int) -> str:
        return f"shared {ctype} {name}[{n}];"

    def kernel(self, header: str, shared: Sequence[str], body: Sequence[str]) -> str:
        # GLSL declares shared memory at module scope; whole work-groups past the last
        # (2-D folding rounds the count up) leave at once, before any barrier
        return "\n".join([*shared, header, "{",
                          "    const uint fj_lin = gl_WorkGroupID.x + gl_WorkGroupID.y * "
                          "gl_NumWorkGroups.x;",
                          "    if (fj_lin >= fj_groups) return;",
                          *unroll("\n".join(body).split("\n")), "}"])

    # -- values -----------------------------------------------------------------------------------
    def literal(self, value: np.generic, dtype: np.dtype) -> str:
        name = self._check(dtype)
        if name in ("float32", "float16", "float64") and float(value) == 0.0:
            # a zero the driver cannot see: lavapipe folds 0.0 / x and 0.0 * x to 0 (as if x
            # were never NaN or infinite), where NumPy gives NaN
            zero = "fj_zero" if name != "float64" else "double(fj_zero)"
            return f"(-{zero})" if np.signbit(value) else zero
        if name in ("float32", "float16"):  # (float16 computes in float32)
            return float_literal(float(value))
        if name == "float64":
            return glsl_double.literal(float(value))
        if name == "bool":
            return "true" if bool(value) else "false"
        v = int(value)
        if name in ("int64", "uint64"):
            if dtype.kind == "u":
                return f"{v}ul"
            return "(-9223372036854775807l - 1l)" if v == -2**63 else (
                f"({v}l)" if v < 0 else f"{v}l")
        if dtype.kind == "u":
            return f"{v}u"
        return "(-2147483647 - 1)" if v == -2**31 else (f"({v})" if v < 0 else str(v))

    def _zero(self, dtype: np.dtype) -> str:
        return {"float32": "0.0", "float16": "0.0", "float64": "double(0.0)", "bool": "false",
                "int64": "0l", "uint64": "0ul"
                }.get(self._check(dtype), "0u" if dtype.kind == "u" else "0")

    def render_op(self, op: Op, out: np.dtype, ins: Sequence[np.dtype],
                  operands: Sequence[str]) -> str:
        src = ins[1] if op is Op.WHERE else (ins[0] if ins else out)
        self._check(out)
        for d in ins:
            self._check(d)
        if src == dt.FLOAT64:
            template = glsl_double.T.get(op, _T.get((op, "*")))  # (logic: by truth)
            if template is None:
                raise UnsupportedDTypeError(
                    f"float64 {OPS[op].name} is not supported by the Vulkan target: naga's GLSL "
                    "double has no transcendental builtins and no bit access, so only exact "
                    "ops are spelled for it; compute it in float32, or use the OpenCL device")
        else:
            kinds = [src.name, src.kind, "*"]
            if len(ins) == 2 and ins[0] != ins[1] and {ins[0].kind, ins[1].kind} == {"i", "u"}:
                kinds.insert(0, ins[0].kind + ins[1].kind)
            template = next((_T[(op, k)] for k in kinds if (op, k) in _T), None)
            if template is not None and src.name in ("int64", "uint64"):
                template = wide(template)
        if template is None and op is Op.PHILOX:
            raise UnsupportedDTypeError(
                "fusejit.random's Philox4x64-10 (64-bit multiply-highs of uint64 keys and "
                "counters) has no Vulkan spelling yet, so random numbers run on OpenCL only "
                "(fusejit.set_default_device('opencl'))")
        if template is None:
            raise UnsupportedDTypeError(f"no Vulkan (GLSL) template for {OPS[op].name} on "
                                        f"{src.name}")
        if src.kind == "f" and src != dt.FLOAT64 and "shader-f64" in self.features:
            template = glsl_f64.T.get(op, template)  # (float32 through double: see glsl_f64)
        if op in _CANCELS and src.kind == "f" and not _LITERAL.fullmatch(operands[1]):
            one = "double(fj_one)" if src == dt.FLOAT64 else "fj_one"
            operands = [operands[0], f"({operands[1]} * {one})"]
        fields = {"Z": self._zero(src)}
        if "{A}" in template:
            fields["A"] = _truth(ins[0], operands[0])
            fields["B"] = _truth(ins[-1], operands[-1])
        if "{DEG2RAD}" in template or "{RAD2DEG}" in template:
            ft = np.dtype(np.float64 if src == dt.FLOAT64 else np.float32)
            with np.errstate(all="ignore"):
                fields["DEG2RAD"] = self.literal(np.deg2rad(ft.type(1)), ft)
                fields["RAD2DEG"] = self.literal(np.rad2deg(ft.type(1)), ft)
        if "{E}" in template:
            fields["E"] = _exponent(ins[1], operands[1])
        text = template.format(**dict(zip("abc", operands)), **fields)
        self._require(text)
        if dt.type_name(out) in glsl_narrow.BITS and "predicate" not in OPS[op].flags:
            return glsl_narrow.wrap(dt.type_name(out), text)
        if op in _OPAQUE and out in (dt.FLOAT32, dt.FLOAT64):
            return f"({text} * {'fj_one' if out == dt.FLOAT32 else 'double(fj_one)'})"
        if op in _OPAQUE_PRODUCTS and out in (dt.FLOAT32, dt.FLOAT64):
            return f"({text} - {'fj_zero' if out == dt.FLOAT32 else 'double(fj_zero)'})"
        return text

    def divisor_prep(self, dtype: np.dtype, ins: Sequence[np.dtype]) -> tuple[str, str] | None:
        """float32 ``a / b`` from ``y = RN(1/b)``, computed once (glsl_f64's ``fj_div_by``:
        three flops where ``fj_div_rn`` costs a loop), where fma rounds once;
        ``FUSEJIT_VULKAN_DIV_BY=0`` divides in one step."""
        if dtype != dt.FLOAT32 or any(d != dt.FLOAT32 for d in ins) or \
                glsl_f64.FUSED_FMA not in self.features or "shader-f64" not in self.features or \
                os.environ.get("FUSEJIT_VULKAN_DIV_BY", "1") == "0":
            return None
        self._require("fj_div_rn({0}, {1})")
        return "fj_div_rn(1.0, {0})", "fj_div_by({0}, {1}, {2})"

    def _require(self, template: str) -> None:
        """Register the helpers a template calls (and the ones those call)."""
        if "fj_" not in template:
            return
        self.helpers.setdefault("0_isnan", _ISNAN)
        if "_rn(" in template or "fj_trig(" in template:
            self.helpers.setdefault(
                "1_f64", glsl_f64.helpers(glsl_f64.FUSED_FMA in self.features))
        if "fj_rh(" in template or "fj_nextafter_h(" in template or "fj_rh_d(" in template:
            self.helpers.setdefault("1_half", _HALF)
        if "_d(" in template:  # (fj_rh_d rounds through fj_rh)
            self.helpers.setdefault("1_half", _HALF)
            self.helpers.setdefault("1_xdouble", glsl_double.helpers())
        if "fj_special_" in template or "fj_logaddexp" in template or "fj_pow_f" in template:
            self.helpers.setdefault("1_derived", _DERIVED)
            for fn in _SPECIAL:
                if f"fj_special_{fn}(" in template or (
                        "fj_logaddexp" in template and fn == "fj_log1p"):
                    self.helpers.setdefault(f"2_special_{fn}", _special(fn))
        for name, text in _HELPERS.items():
            if "64(" in template and any(f"{fn}64(" in template
                                         for fn in re.findall(r"\b(fj_\w+)\(", text)):
                self.helpers.setdefault(f"5_{name}64", wide(text))  # (the 64-bit twins)
            if name in template or (name == "fj_floordiv_f" and "fj_remainder_f" in template) \
                    or (name == "fj_floordiv_i" and "fj_remainder_i" in template) \
                    or (name == "fj_pow_i" and "fj_pow_u" in template) \
                    or (name == "fj_gcd_i" and ("fj_gcd_u" in template or "fj_lcm_" in template)):
                if name == "fj_floordiv_f":
                    self.helpers.setdefault("3_fj_fmod", _HELPERS["fj_fmod"])
                self.helpers.setdefault(("3_" if name == "fj_fmod" else "4_") + name, text)

    def render_cast(self, src: np.dtype, dst: np.dtype, x: str) -> str:
        s, d = self._check(src), self._check(dst)
        if s == d:
            return x
        if d in glsl_narrow.BITS:  # through int32 (floats saturate as OpenCL's), then wrapped
            return glsl_narrow.wrap(d, self.render_cast(src, dt.INT32, x))
        if s in glsl_narrow.BITS:  # its value fits int32 / uint32 unchanged
            return self.render_cast(dt.UINT32 if src.kind == "u" else dt.INT32, dst, x)
        if d in ("int64", "uint64") and src.kind == "f":
            return self._float_to_int64(src, dst, x)
        if src.kind != "f" and dst.kind == "f" and d != "float16":
            # a zero is the uniform fj_zero (see literal), not float(0): where the driver folds
            # the integer or bool to 0 (i - i, x < x), it would fold 0.0 * y to 0.0 and
            # 0.0 + y to y, wrong for y = -0.0, inf or NaN (lavapipe did)
            zero = self.literal(dst.type(0.0), dst)
            if s == "bool":
                return f"({x} ? {self.literal(dst.type(1.0), dst)} : {zero})"
            return f"({x} == {self._zero(src)} ? {zero} : {_GL[d]}({x}))"
        wide = glsl_double.cast(src, dst, x)
        if wide is not None:
            self._require(wide)
            return wide
        if d == "float16":  # (exact through float32: int32 values that fit a half fit float32)
            return self.round_to_storage(dst, self.render_cast(src, dt.FLOAT32, x))
        if s == "float16":  # computed as float32 already
            return self.render_cast(dt.FLOAT32, dst, x)
        if d == "bool":
            return _truth(src, x)
        if s == "float32" and d == "int32":
            # saturating, NaN -> 0, as OpenCL's convert_int_sat_rtz (GLSL's int() is undefined
            # out of range)
            self.helpers.setdefault("0_isnan", _ISNAN)
            return (f"(fj_isnan({x}) ? 0 : ({x} >= 2147483648.0 ? 2147483647 : "
                    f"({x} <= -2147483648.0 ? (-2147483647 - 1) : int({x}))))")
        if s == "float32" and d == "uint32":
            # as OpenCL's (uint)convert_long_sat_rtz: negatives wrap, beyond 2^32 keep the low bits
            self.helpers.setdefault("0_isnan", _ISNAN)
            return (f"(fj_isnan({x}) ? 0u : ({x} < 0.0 ? uint(int(max({x}, -2147483648.0))) : "
                    f"({x} < 4294967296.0 ? uint({x}) : "
                    f"uint({x} - 4294967296.0 * floor({x} / 4294967296.0)))))")
        return f"{_GL[d]}({x})"

    def _float_to_int64(self, src: np.dtype, dst: np.dtype, x: str) -> str:
        """A float as int64 (saturating, NaN -> 0, as OpenCL's convert_long_sat_rtz) or uint64
        (negatives through int64, as OpenCL's: NumPy leaves both undefined out of range)."""
        if src == dt.FLOAT64:
            self._require("fj_isnan_d(")
            nan, top, zero = f"fj_isnan_d({x})", glsl_double.literal(2.0 ** 63), "double(0.0)"
            word = glsl_double.literal(2.0 ** 64)
        else:
            self.helpers.setdefault("0_isnan", _ISNAN)
            nan, top, zero, word = f"fj_isnan({x})", "9223372036854775808.0", "0.0", \
                "18446744073709551616.0"
        signed = (f"({nan} ? 0l : ({x} >= {top} ? 9223372036854775807l : "
                  f"({x} <= -{top} ? (-9223372036854775807l - 1l) : int64_t({x}))))")
        if dst == dt.INT64:
            return signed
        return (f"({x} < {zero} ? uint64_t({signed}) : ({nan} ? 0ul : ({x} >= {word} ? "
                f"18446744073709551615ul : uint64_t({x}))))")

    def round_to_storage(self, dtype: np.dtype, x: str, src: np.dtype | None = None) -> str:
        if self._check(dtype) != "float16":
            return x
        self._require("fj_rh(")
        return f"fj_rh({x})"

    # -- memory -----------------------------------------------------------------------------------
    def load(self, ptr: str, index: str, dtype: np.dtype) -> str:
        name = self._check(dtype)
        if name == "bool":
            return f"({ptr}[{index}] != 0u)"
        if name == "float16":  # (exact)
            return f"float({ptr}[{index}])"
        if name in glsl_narrow.BITS:
            return glsl_narrow.load(ptr, index, name)
        return f"{ptr}[{index}]"

    def store(self, ptr: str, index: str, value: str, dtype: np.dtype) -> str:
        name = self._check(dtype)
        if name == "bool":
            return f"{ptr}[{index}] = uint({value});"
        if name == "float16":  # (the value is a half already: the conversion is exact)
            return f"{ptr}[{index}] = float16_t({value});"
        if name in glsl_narrow.BITS:
            raise glsl_narrow.store_error(name)
        return f"{ptr}[{index}] = {value};"

    # vectors: contiguous elementwise kernels give each work-item 4 neighbouring elements, read
    # and written as 4 adjacent scalar accesses of one 16-byte-aligned vector, which GPU
    # compilers merge into one 16-byte access (a buffer has one element type in GLSL, so no
    # vector-typed loads); the ops themselves run lane by lane (render_op_vector is None)
    def vector_type(self, dtype: np.dtype, n: int) -> str:
        return _VEC[self._check(dtype)] + str(n)

    def vector_load(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str:
        if dt.type_name(dtype) in glsl_narrow.BITS:
            return glsl_narrow.vector_load(ptr, index, dt.type_name(dtype), n,
                                           self.vector_type(dtype, n))
        lanes = ", ".join(self.load(ptr, f"({index}) * {n} + {i}", dtype) for i in range(n))
        return f"{self.vector_type(dtype, n)}({lanes})"

    def vector_store(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str:
        if self._check(dtype) in glsl_narrow.BITS:
            return glsl_narrow.vector_store(ptr, index, dt.type_name(dtype), n)
        return " ".join(self.store(ptr, f"({index}) * {n} + {i}", "{0}." + "xyzw"[i], dtype)
                        for i in range(n))

    def lane(self, dtype: np.dtype, lane: int) -> str:
        return "{v}." + "xyzw"[lane]

    def pack(self, dtype: np.dtype, n: int) -> str:
        return f"{self.vector_type(dtype, n)}(" + ", ".join(f"{{{i}}}" for i in range(n)) + ")"

    def broadcast(self, dtype: np.dtype, n: int, x: str) -> str:
        return f"{self.vector_type(dtype, n)}({x})"

    def render_op_vector(self, op: Op, out: np.dtype, ins: Sequence[np.dtype],
                         operands: Sequence[str], n: int) -> str | None:
        return None

    def render_cast_vector(self, src: np.dtype, dst: np.dtype, x: str, n: int) -> str | None:
        return None

    def round_to_storage_vector(self, dtype: np.dtype, x: str, n: int) -> str:
        return x

    # -- kernels ----------------------------------------------------------------------------------
    def buffer_param(self, name: str, dtype: np.dtype, writable: bool, restrict: bool) -> str:
        # a buffer that may alias another binds read-write: WebGPU rejects one buffer bound
        # both read-only and writable in a dispatch
        access = "" if writable or not restrict else "readonly "
        qual = "restrict " if restrict else ""
        return (f"layout(std430, set = 0, binding = {{binding}}) {access}{qual}buffer "
                f"B_{name} {{ {self.storage_type(dtype)} {name}[]; }};")

    def scalar_param(self, name: str, dtype: np.dtype) -> str:
        if self._check(dtype) == "bool":
            # bool is not host-shareable: a uint word, read through a macro of the same name
            return f"uint {name}_word; #define {name} ({name}_word != 0u)"
        return f"{self.compute_type(dtype)} {name};"

    def kernel_header(self, name: str, params: Sequence[str],
                      local_size: tuple[int, ...] | None) -> str:
        """Buffers bind in signature order (0, 1, ...); the uniform block after them holds
        the launch's group counts, ``fj_zero`` = 0.0 (see literal) and ``fj_one`` = 1.0 (see
        _OPAQUE), then the scalars, doubles first (std140: each at the next offset of its
        size)."""
        dims = (*(local_size or (1,)), 1, 1)[:3]
        lines = [f"// {name}",
                 f"layout(local_size_x = {dims[0]}, local_size_y = {dims[1]}, "
                 f"local_size_z = {dims[2]}) in;"]
        buffers = [p for p in params if p.startswith("layout(")]
        # (std140 aligns a double to 8 bytes: doubles first, right after the two head words;
        # the executable packs them in the same order, see scalar_order)
        scalars = sorted((p.split(" #define ")[0] for p in params if not p.startswith("layout(")),
                         key=lambda p: not p.startswith(("double ", "int64_t ", "uint64_t ")))
        macros = ["#define " + p.split(" #define ")[1] for p in params if " #define " in p]
        lines += [b.replace("{binding}", str(i)) for i, b in enumerate(buffers)]
        members = " ".join(["uint fj_g0; uint fj_groups; float fj_zero; float fj_one;", *scalars])
        lines.append(f"layout(std140, set = 0, binding = {len(buffers)}) uniform FjArgs "
                     f"{{ {members} }};")
        lines += macros
        return "\n".join(lines) + "\nvoid main()"

    def prelude(self, uses_fp64: bool) -> str:
        return "#version 450\n" + "".join(self.helpers[k] for k in sorted(self.helpers))
