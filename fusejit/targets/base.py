"""The abstract Target: how a C-like kernel language spells types, literals, ops and idioms.

A Target never walks the graph. SourceModule decides order, names, lifetimes and index math and
asks the Target only for spellings, so another backend (CUDA C, Metal, GLSL compute) is a small
subclass that fills in the same table.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np

from fusejit.ir.ops import Op

# Marks an inline-asm statement that only an sm_90a build may hold (wgmma: codegen/gemm/ptx.py
# writes it behind this comment). OpenCL's build restores it in the PTX it rebuilds for sm_90a
# (runtime/opencl/build.py); the CUDA target, compiled for sm_90a directly, drops the mark.
SM90A_MARK = "// FJPTX "


class Target(abc.ABC):
    """Spellings for one kernel language."""

    name: str = "abstract"

    def __init__(self) -> None:
        self.helpers: dict[str, str] = {}  # helper functions the rendered code needs, by name

    # -- types ------------------------------------------------------------------------------------
    @abc.abstractmethod
    def storage_type(self, dtype: np.dtype) -> str:
        """The element type of a buffer holding ``dtype``."""

    @abc.abstractmethod
    def compute_type(self, dtype: np.dtype) -> str:
        """The type a value of ``dtype`` is held in while computing."""

    @abc.abstractmethod
    def index_type(self, wide: bool) -> str:
        """Integer type for index math (32-bit unless sizes need 64)."""

    # -- values -----------------------------------------------------------------------------------
    @abc.abstractmethod
    def literal(self, value: np.generic, dtype: np.dtype) -> str:
        """An exact literal of ``dtype`` in its compute type."""

    @abc.abstractmethod
    def render_op(self, op: Op, out: np.dtype, ins: Sequence[np.dtype],
                  operands: Sequence[str]) -> str:
        """Expression computing ``op`` in the compute type of ``out``."""

    @abc.abstractmethod
    def render_cast(self, src: np.dtype, dst: np.dtype, x: str) -> str:
        """Expression converting a value of ``src`` to ``dst`` as NumPy's astype does."""

    @abc.abstractmethod
    def round_to_storage(self, dtype: np.dtype, x: str, src: np.dtype | None = None) -> str:
        """Round a computed value to ``dtype``'s precision (float16 computes in float32)."""

    def clamp_index(self, x: str, dtype: np.dtype, hi: int, index_type: str) -> str:
        """An integer ``x`` of ``dtype`` clamped into ``[0, hi]``, in ``index_type`` (compared
        in ``dtype`` first, so a wide value cannot wrap into range). Conversions are spelled
        by ``cast``: a C cast is no GLSL (nor WGSL)."""
        t = self.compute_type(dtype)
        zero, top = self.cast(t, "0"), self.cast(t, str(hi))
        low = "" if dtype.kind == "u" else f"({x}) < {zero} ? 0 : "
        return self.cast(index_type, f"({low}({x}) > {top} ? {top} : ({x}))")

    def index_outside(self, x: str, dtype: np.dtype, n: int) -> str:
        """The condition that an integer ``x`` of ``dtype`` lies outside ``[0, n)``, compared in
        ``dtype`` (the check of a gather whose indices NumPy would refuse)."""
        hi = self.literal(dtype.type(n - 1) if n else dtype.type(0), dtype)
        above = f"({x}) > {hi}" if n else "true"
        if dtype.kind == "u":
            return above
        return f"({x}) < {self.literal(dtype.type(0), dtype)} || {above}"

    # -- memory -----------------------------------------------------------------------------------
    @abc.abstractmethod
    def load(self, ptr: str, index: str, dtype: np.dtype) -> str: ...

    @abc.abstractmethod
    def store(self, ptr: str, index: str, value: str, dtype: np.dtype) -> str: ...

    @abc.abstractmethod
    def vector_type(self, dtype: np.dtype, n: int) -> str:
        """Compute type of an ``n``-lane vector of ``dtype``."""

    @abc.abstractmethod
    def vector_load(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str:
        """Load vector number ``index`` (elements n*index .. n*index+n-1) of an aligned buffer."""

    @abc.abstractmethod
    def lane(self, dtype: np.dtype, lane: int) -> str:
        """Lane ``lane`` of a loaded vector ``{v}`` as a scalar of the compute type."""

    @abc.abstractmethod
    def render_op_vector(self, op: Op, out: np.dtype, ins: Sequence[np.dtype],
                         operands: Sequence[str], n: int) -> str | None:
        """The op over n-lane vectors, or None when there is no exact vector form."""

    @abc.abstractmethod
    def render_cast_vector(self, src: np.dtype, dst: np.dtype, x: str, n: int) -> str | None:
        """Vector form of render_cast, or None."""

    @abc.abstractmethod
    def round_to_storage_vector(self, dtype: np.dtype, x: str, n: int) -> str: ...

    @abc.abstractmethod
    def broadcast(self, dtype: np.dtype, n: int, x: str) -> str:
        """A scalar ``x`` as an n-lane vector."""

    @abc.abstractmethod
    def pack(self, dtype: np.dtype, n: int) -> str:
        """A vector built from operands {0}..{n-1}."""

    @abc.abstractmethod
    def vector_store(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str:
        """Statement storing operands ``{0}..{n-1}`` as vector number ``index``."""

    def vector_load_at(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str | None:
        """Elements ``index .. index+n-1`` at any alignment as one vector (rows of a runtime
        length, fusejit/ir/rows.py), or None where the target has no such load (lanes then load
        one by one)."""
        return None

    def vector_store_at(self, ptr: str, index: str, dtype: np.dtype, n: int) -> str | None:
        """Statement storing the vector operand {0} at elements ``index ..`` (any
        alignment), or None (see ``vector_load_at``)."""
        return None

    # -- kernels ----------------------------------------------------------------------------------
    @abc.abstractmethod
    def buffer_param(self, name: str, dtype: np.dtype, writable: bool, restrict: bool) -> str: ...

    @abc.abstractmethod
    def scalar_param(self, name: str, dtype: np.dtype) -> str: ...

    @abc.abstractmethod
    def kernel_header(self, name: str, params: Sequence[str],
                      local_size: tuple[int, ...] | None) -> str: ...

    @abc.abstractmethod
    def prelude(self, uses_fp64: bool) -> str:
        """Pragmas and helpers at the top of the module."""

    # thread-index idioms
    global_id: str
    local_id: str
    group_id: str
    barrier_local: str
    local_qualifier: str

    @property
    def barrier_global(self) -> str:
        """A work-group barrier that also orders global-memory accesses (a kernel's scratch
        buffer shared by its work-items)."""
        return self.barrier_local

    # -- idioms that C-like kernel languages share (OpenCL C spellings; GLSL overrides) ----------
    global_size: str = "get_global_size(0)"
    unroll_hint: str = "#pragma unroll\n    "  # before a loop the compiler should unroll
    vector_code: bool = True  # vector types for lanes of neighbouring elements (else scalar)
    max_lanes: int = 16  # the widest vector type the language has
    # CPUs: bytes of a vector of lanes where a kernel computes with the target's own heavy
    # vector math (wide_vector_op); the backend sets 64 where the device's SIMD is that wide
    wide_lane_bytes: int = 32
    lanes_by_bytes: bool = True  # lanes fill 16/32 bytes (else max_lanes whatever the dtype)
    fixed_local_size: bool = False  # the work-group shape is compiled in (never autotuned)
    # the target spells the tiled and tensor-core GEMM kernels (local tiles, vector types,
    # pointers); where not (GLSL), products run the direct kernel (codegen/gemm/dispatch.py)
    tiled_gemm: bool = True
    bool_accumulator: np.dtype | None = None  # what reductions of bools accumulate in (None: bool)
    # > 1: a row kept in registers gives each lane runs of this many adjacent elements (slot k
    # of lane l holds element (k // n * lanes + l) * n + k % n) instead of one element every
    # ``lanes``, so a compiler can merge a lane's n scalar accesses into one (see GLSLTarget)
    row_slot_run: int = 1

    def wide_vector_op(self, op: Op, dtype: np.dtype) -> bool:
        """Does ``op`` on ``dtype`` vectors run long straight-line code of the target's own
        (compute-bound), so that wider vectors pay (see wide_lane_bytes)?"""
        return False

    def packed_lanes(self, dtype: np.dtype) -> bool:
        """Are vectors of ``dtype`` held packed in their storage format (opencl_half2), so that
        ops on them take their vector forms even where other ops go lane by lane?"""
        return False

    def elementwise_target(self) -> Target:
        """The target elementwise kernels are spelled with (sharing this one's helpers)."""
        return self

    # an element's fallback flag: declared before its fast ops, tested before its exact ones
    speculation_begin: str = "int fj_bad = 0;"
    speculation_fallback: str = "if (fj_bad) {"

    def speculates(self) -> bool:
        """Does this target spell some ops as fast paths that raise a per-element fallback flag
        (opencl_fastdiv.py)? Then ``speculated`` gives their spellings."""
        return False

    def speculated(self, op: Op, out: np.dtype, ins: Sequence[np.dtype],
                   operands: Sequence[str]) -> str | None:
        """The fast spelling of ``op``, or None where it has none (``render_op``'s then)."""
        return None

    def divisor_prep(self, dtype: np.dtype, ins: Sequence[np.dtype]) -> tuple[str, str] | None:
        """``a / b`` in two steps where one ``b`` serves many quotients (a row's sum, say):
        (the template of a value prepared from the divisor ``{0}`` alone, computed once, and
        the quotient's, from ``{0}`` = a, ``{1}`` = b and ``{2}`` = that value), or None where
        the target divides in one step."""
        return None

    def cast(self, ctype: str, x: str) -> str:
        """``x`` converted to the type named ``ctype`` (index math, iota values)."""
        return f"(({ctype}){x})"

    def local_id_of(self, dim: int) -> str:
        """The work-item's index within its work-group along ``dim``."""
        return f"get_local_id({dim})"

    def group_id_of(self, dim: int) -> str:
        """The work-group's index along ``dim``."""
        return f"get_group_id({dim})"

    def local_array(self, ctype: str, name: str, n: int) -> str:
        """Declaration of an ``n``-element array shared by a work-group."""
        return f"{self.local_qualifier} {ctype} {name}[{n}];"

    def finish(self, kernels: str) -> str:
        """The module's kernels as the compiler gets them: writers that spell OpenCL C
        directly (the tensor-core GEMMs' inline PTX) are adapted here (CUDATarget)."""
        return kernels

    def kernel(self, header: str, shared: Sequence[str], body: Sequence[str]) -> str:
        """A whole kernel from its header, its shared-memory declarations and its body lines
        (already indented)."""
        return "\n".join([header, "{", *(f"    {d}" for d in shared), *body, "}"])
