"""CUDA C++ spellings: the OpenCL target's op tables on CUDA's kernel syntax.

OpenCL C and CUDA C++ are both C: the same arithmetic, the same conversions, the same math
functions. So ``CUDATarget`` keeps every op template of ``OpenCLTarget`` (one table, and one
place where NumPy's semantics are spelled) and changes only what the languages spell
differently: kernel and parameter declarations, shared memory and barriers, and the few OpenCL
constructs C++ reads otherwise, rewritten in ``spell`` (``(float2)(re, im)``, a vector literal in
OpenCL C, is a comma expression in C++). The OpenCL builtins the templates call are defined in
CUDA C++ by the prelude (targets/cuda/prelude.py).

NumPy's semantics hold as on OpenCL: modules are compiled without FMA contraction
(``-fmad=false``), with correctly rounded division and square root and no flush to zero
(runtime/cuda/build.py's options); float16 is stored as its bits and computed in float, rounded
back after every op; signed integers wrap through their unsigned types.

Kernels take their NDRange (``fj_gs0..2``) as three trailing parameters: a kernel whose
work-group size the runtime chooses runs on a grid rounded up to whole blocks, and its surplus
threads return first; ``get_global_size`` reads them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from fusejit.errors import UnsupportedOperationError
from fusejit.ir import dtypes as dt
from fusejit.ir.ops import Op
from fusejit.targets.base import SM90A_MARK
from fusejit.targets.cuda.prelude import COMPLEX, PRELUDE
from fusejit.targets.opencl.target import _C as _OPENCL_TYPES
from fusejit.targets.opencl.target import OpenCLTarget

_TYPES = {**_OPENCL_TYPES, "int8": "schar", "complex64": "fj_c64", "complex128": "fj_c128"}
# the NDRange of the launch (see the module docstring)
NDRANGE_PARAMS = ("const size_t fj_gs0", "const size_t fj_gs1", "const size_t fj_gs2")
_GUARD = ("if (get_global_id(0) >= fj_gs0 || get_global_id(1) >= fj_gs1 || "
          "get_global_id(2) >= fj_gs2) return;")
_GUARD_MARK = "/* fj: surplus threads return */"

# OpenCL C constructs that C++ parses otherwise, and their CUDA C++ spelling
_REWRITES = [
    (re.compile(r"(?<![A-Za-z0-9_])float2(?![A-Za-z0-9_])"), "fj_c64"),
    (re.compile(r"(?<![A-Za-z0-9_])double2(?![A-Za-z0-9_])"), "fj_c128"),
    (re.compile(r"\((fj_c64|fj_c128)\)\("), r"\1("),  # vector literal -> constructor
    (_VECTOR_LITERAL := re.compile(r"\((u?char|u?short|u?int|u?long|float|double)([234])\)\("),
     r"make_\1\2("),
    (_LANES := re.compile(r"\.s([0-3])\b"), lambda m: "." + "xyzw"[int(m.group(1))]),
    (re.compile(r"__attribute__\(\(const\)\)\s*"), ""),
]


# OpenCL C's address spaces in kernels that writers spell directly (codegen/gemm): a __local
# array is __shared__, a __local pointer a generic one, and the shared-window address NVIDIA's
# OpenCL gives as a __local pointer's integer value, (uint)(ulong)p, is cvta.to.shared's
_SHARED_ARRAY = re.compile(r"__local(\s+(?:const\s+)?\w+\s+\w+\s*\[)")
_SHARED_ADDRESS = re.compile(r"\(uint\)\(ulong\)(\w+|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))")


# PTX the generated kernels may hold (the tensor-core GEMMs' inline asm) and the architectures
# that have it: (pattern, oldest compute capability, the only architectures, what it is)
_PTX_NEEDS = [
    (re.compile(r"\bwgmma\."), 90, ("sm_90a",), "Hopper's warpgroup MMA (wgmma)"),
    (re.compile(r"\bfence\.proxy\.async"), 90, (), "the async-proxy fence"),
    (re.compile(r"\bmma\.sync\.aligned\.m16n8k(?:8|16)\b"), 80, (),
     "tf32/float16 tensor-core MMA (mma.sync m16n8k8/k16)"),
    (re.compile(r"\bcp\.async\b"), 80, (), "asynchronous copies (cp.async)"),
    (re.compile(r"\bcvt\.rna\.tf32\.f32|\bcvt\.rn\.f16x2\.f32"), 80, (),
     "tf32/f16x2 conversions"),
    (re.compile(r"\bldmatrix\b"), 75, (), "ldmatrix"),
]


def compute_capability(arch: str) -> int:
    """90 for "sm_90a", 80 for "sm_80"."""
    return int(arch[3:].rstrip("af"))


def arch_refusal(kernels: str, arch: str) -> str | None:
    """Why ``arch`` cannot run ``kernels`` (an instruction it lacks), or None."""
    cc = compute_capability(arch)
    for pattern, oldest, only, what in _PTX_NEEDS:
        if pattern.search(kernels) and (cc < oldest or (only and arch not in only)):
            needs = " or ".join(only) if only else f"sm_{oldest} or newer"
            return (f"these kernels use {what}, which needs {needs}; the CUDA device is "
                    f"{arch}. Lower with FUSEJIT_CUDA_ARCH set to the GPU that will run them, "
                    "or matmul_precision='highest' (no tensor cores)")
    return None


def spell(text: str) -> str:
    """OpenCL C text (a template's expansion, a helper) as CUDA C++."""
    for pattern, repl in _REWRITES:
        text = pattern.sub(repl, text)
    return text


class CUDATarget(OpenCLTarget):
    """CUDA C++ for NVRTC, one module of ``extern "C"`` kernels."""

    name = "cuda"
    global_id = "get_global_id(0)"
    local_id = "((int)threadIdx.x)"
    group_id = "((int)blockIdx.x)"
    barrier_local = "__syncthreads();"
    barrier_global = "__syncthreads();"  # (orders global-memory accesses of the block too)
    local_qualifier = "__shared__"
    # elementwise kernels: one element a thread (a later step may give their loads and stores
    # 16-byte vectors); reductions and scans may still keep lanes (fj_v, computed lane by lane)
    vector_code = False
    fast_div = None  # / and sqrt are correctly rounded by the compiler options

    def __init__(self, arch: str = "sm_90a") -> None:
        super().__init__()
        self.arch = arch  # what the module is compiled for (finish refuses what it lacks)

    def storage_type(self, dtype: np.dtype) -> str:
        return _TYPES[dt.type_name(dtype)]

    def compute_type(self, dtype: np.dtype) -> str:
        return "float" if dtype == dt.FLOAT16 else _TYPES[dt.type_name(dtype)]

    def local_id_of(self, dim: int) -> str:
        return f"((int)threadIdx.{'xyz'[dim]})"

    def group_id_of(self, dim: int) -> str:
        return f"((int)blockIdx.{'xyz'[dim]})"

    # -- values: OpenCL's, rewritten where C++ reads them otherwise -------------------------------
    def literal(self, value: np.generic, dtype: np.dtype) -> str:
        return spell(super().literal(value, dtype))

    def render_op(self, op: Op, out: np.dtype, ins: Sequence[np.dtype],
                  operands: Sequence[str]) -> str:
        return spell(super().render_op(op, out, ins, operands))

    def render_cast(self, src: np.dtype, dst: np.dtype, x: str) -> str:
        return spell(super().render_cast(src, dst, x))

    def render_op_vector(self, op: Op, out: np.dtype, ins: Sequence[np.dtype],
                         operands: Sequence[str], n: int) -> str | None:
        return None

    def render_cast_vector(self, src: np.dtype, dst: np.dtype, x: str, n: int) -> str | None:
        return None

    # -- vectors (lanes of neighbouring elements, computed one by one) ---------------------------
    def vector_type(self, dtype: np.dtype, n: int) -> str:
        return f"fj_v<{self.compute_type(dtype)}, {n}>"

    def lane(self, dtype: np.dtype, lane: int) -> str:
        return "{v}.s[" + str(lane) + "]"

    def pack(self, dtype: np.dtype, n: int) -> str:
        return self.vector_type(dtype, n) + "{{" + ", ".join(f"{{{i}}}" for i in range(n)) + "}}"

    def broadcast(self, dtype: np.dtype, n: int, x: str) -> str:
        return f"fj_splat<{self.compute_type(dtype)}, {n}>({x})"

    def vector_load(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str:
        if dtype == dt.FLOAT16:
            return f"fj_ldh<{n}>({ptr}, {index})"
        if dtype.kind == "b":
            return f"fj_ldb<{n}>({ptr}, {index})"
        return f"((const {self.vector_type(dtype, n)} *){ptr})[{index}]"

    def vector_store(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str:
        if dtype == dt.FLOAT16:
            return f"fj_sth<{n}>({{0}}, {ptr}, {index});"
        return f"(({self.vector_type(dtype, n)} *){ptr})[{index}] = {{0}};"

    def vector_load_at(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str | None:
        return None

    def vector_store_at(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str | None:
        return None

    def round_to_storage_vector(self, dtype: np.dtype, x: str, n: int) -> str:
        return f"fj_rhv<{n}>({x})" if dtype == dt.FLOAT16 else x

    # -- kernels ----------------------------------------------------------------------------------
    def buffer_param(self, name: str, dtype: np.dtype, writable: bool, restrict: bool) -> str:
        const = "" if writable else "const "
        qual = " __restrict__" if restrict else ""
        return f"{const}{self.storage_type(dtype)} *{qual} {name}"

    def kernel_header(self, name: str, params: Sequence[str],
                      local_size: tuple[int, ...] | None) -> str:
        joined = ",\n    ".join([*params, *NDRANGE_PARAMS])
        if local_size:
            bounds = f"__launch_bounds__({int(np.prod(local_size))}) "
            return f'extern "C" __global__ void {bounds}{name}(\n    {joined})'
        return f'extern "C" __global__ void {name}(\n    {joined}) {_GUARD_MARK}'

    def kernel(self, header: str, shared: Sequence[str], body: Sequence[str]) -> str:
        if header.endswith(_GUARD_MARK):
            body = [f"    {_GUARD}", *body]
        return super().kernel(header, shared, body)

    def finish(self, kernels: str) -> str:
        # (the GEMMs' vectors: CUDA's float4 names its lanes x, y, z, w, and is made by
        # make_float4; complex values, spelled float2 in OpenCL, are fj_c64 by now: spell)
        kernels = _LANES.sub(lambda m: "." + "xyzw"[int(m.group(1))], kernels)
        kernels = _VECTOR_LITERAL.sub(r"make_\1\2(", kernels)
        # (wgmma, marked for OpenCL's PTX rebuild: NVRTC builds sm_90a directly)
        kernels = kernels.replace(SM90A_MARK, "")
        why = arch_refusal(kernels, self.arch)
        if why is not None:  # (at lowering, named: not an NVRTC error at the first call)
            raise UnsupportedOperationError(why)
        if "__local" not in kernels and "(uint)(ulong)" not in kernels:
            return kernels
        kernels = _SHARED_ARRAY.sub(r"__shared__\1", kernels)
        kernels = _SHARED_ADDRESS.sub(r"fj_saddr(\1)", kernels)
        return kernels.replace("__local ", "")

    def prelude(self, uses_fp64: bool) -> str:
        helpers = "".join(self.helpers[k] for k in sorted(self.helpers))
        return PRELUDE + COMPLEX + spell(helpers)
