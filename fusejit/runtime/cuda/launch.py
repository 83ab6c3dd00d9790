"""The fast path of cached CUDA calls: one generated launcher per call signature, as OpenCL's
``Executable.guarded``, for torch tensors and CuPy arrays.

The full path (``CUDAExecutable.run``, reached through ``Fused._call``) adopts every argument
through cuda-core's ``StridedMemoryView``, asks the library for its current stream, allocates
through ``library_empty`` and packs each argument through cuda-core's ``launch``: ~0.1 ms of
Python a call. A signature's second call instead generates a straight-line function that
reads each tensor's own attributes (torch: ``dtype``, ``shape``, ``stride()``,
``get_device()``, ``data_ptr()``; CuPy: ``dtype``, ``shape``, ``strides``, ``data``), checks
them against the signature, allocates the results with the library's allocator on its current
stream, patches the pointers into argument slots packed once (extents and the NDRange never
change) and calls ``cuLaunchKernel`` on the caller's current stream. Anything that does not
match (another dtype, shape, layout, device, offset class, a tensor that requires grad, a
value seen twice) answers ``miss``, and the call takes the full path, which raises the named
errors. ``FUSEJIT_CUDA_FAST=0`` turns the fast path off (benchmarks/cuda_dispatch.py).

A key ``part`` (``part_torch``, ``part_cupy``) is what ``compile/signature.fast_key`` keys such
an array by: everything its compiled signature depends on (``DeviceArraySpec``: dtype, shape,
strides, whether the view starts off the 256-byte alignment, the device; the 64-bit index
choice is left to the full path near 2**31 elements), and the guard checks exactly those.
"""

from __future__ import annotations

import array
import ctypes
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fusejit.codegen.kernels import BufferArg, ScalarArg
from fusejit.runtime.backend import FAST_PARTS, register_fast_part
from fusejit.runtime.executable import kernel_arg_scalar

ALIGN = 256  # (runtime/cuda/array.py's: kernels take the aligned pointer and an offset)
_NEAR_WIDE = 2**31 - 1 - ALIGN  # elements a view may span and keep 32-bit index math surely


def enabled() -> bool:
    return os.environ.get("FUSEJIT_CUDA_FAST", "1") != "0"


def _span(shape: Sequence[int], strides: Sequence[int]) -> int:
    return sum((d - 1) * abs(s) for d, s in zip(shape, strides)) + 1


def part_torch(t: Any) -> tuple | None:
    """A torch tensor's fast-key part, or None where only the full path can say (it requires
    grad, has the conjugate or negative bit, is not on a GPU, not strided, too large)."""
    try:
        if t.requires_grad or t.is_neg() or t.is_conj():
            return None
        ordinal = t.get_device()
        shape, strides = tuple(t.shape), t.stride()
        if ordinal < 0 or _span(shape, strides) > _NEAR_WIDE:
            return None
        return ("torch", t.dtype, shape, strides, t.data_ptr() % ALIGN != 0, ordinal)
    except Exception:  # noqa: BLE001 - sparse and other tensors without strides
        return None


def part_cupy(a: Any) -> tuple | None:
    """A CuPy array's fast-key part (None: negative strides, too large)."""
    try:
        shape, strides, item = a.shape, a.strides, a.dtype.itemsize
        if any(s < 0 or s % item for s in strides) or \
                _span(shape, [s // item for s in strides]) > _NEAR_WIDE:
            return None
        mem = a.data
        return ("cupy", a.dtype, shape, strides, mem.ptr % ALIGN != 0, mem.device_id)
    except Exception:  # noqa: BLE001
        return None


def register_type(value: Any, library: str) -> None:
    """Give ``value``'s exact type a fast-key part, once the full path adopted one (only
    torch.Tensor and cupy.ndarray themselves: subclasses may override what is read)."""
    cls = type(value)
    if cls in FAST_PARTS:
        return
    if library == "torch":
        import torch

        if cls is torch.Tensor:
            register_fast_part(cls, part_torch)
    elif library == "cupy":
        import cupy

        if cls is cupy.ndarray:
            register_fast_part(cls, part_cupy)


# -- what each library's arrays need in a launcher ---------------------------------------------------


class Library:
    """How a launcher reads one library's arrays, finds its current stream and allocates."""

    name = ""

    def guard(self, i: int, part: tuple, env: dict[str, Any]) -> list[str]:
        """Lines that check ``x{i}`` (bound) against ``part`` (``return MISS`` where it does
        not match) and bind its data pointer to ``p{i}``."""
        _, dtype, shape, strides, has_offset, ordinal = part
        env[f"T{i}"], env[f"D{i}"], env[f"S{i}"], env[f"ST{i}"] = \
            self.array_type(), dtype, shape, strides
        # the offset class is part of the signature: a view off the alignment takes an offset
        return [f"    if type(x{i}) is not T{i} or {self.mismatch(i, dtype, ordinal)}:",
                "        return MISS", *self.pointer(i, ordinal),
                f"    if p{i} % {ALIGN} {'==' if has_offset else '!='} 0:", "        return MISS"]

    def array_type(self) -> type:
        raise NotImplementedError

    def mismatch(self, i: int, dtype: Any, ordinal: int) -> str:
        """The condition under which ``x{i}``, of the array type, does not match its part
        (``D{i}``, ``S{i}``, ``ST{i}``: its dtype, shape and strides; ``ordinal``)."""
        raise NotImplementedError

    def pointer(self, i: int, ordinal: int) -> list[str]:
        """Lines binding ``p{i}``, ``x{i}``'s data pointer (a miss on another device)."""
        raise NotImplementedError

    def itemsize(self, part: tuple) -> int:
        raise NotImplementedError

    def stream(self, ordinal: int) -> Callable[[], int]:
        """A function giving the library's current stream handle on GPU ``ordinal``."""
        raise NotImplementedError

    def empty(self, ordinal: int) -> Callable[[tuple[int, ...], np.dtype], tuple[Any, int]]:
        """``empty(shape, dtype) -> (array, pointer)``: the library's allocator on its
        current stream of GPU ``ordinal`` (runtime/cuda/array.library_empty)."""
        from fusejit.runtime.cuda.array import library_empty
        from fusejit.runtime.cuda.device import device

        return library_empty(self.name, device(ordinal))


class Torch(Library):
    name = "torch"

    def array_type(self) -> type:
        import torch

        return torch.Tensor

    def mismatch(self, i: int, dtype: Any, ordinal: int) -> str:
        conj = f" or x{i}.is_conj()" if dtype.is_complex else ""
        return (f"x{i}.dtype is not D{i} or x{i}.shape != S{i} or x{i}.stride() != ST{i} or "
                f"x{i}.get_device() != {ordinal} or x{i}.requires_grad or x{i}.is_neg(){conj}")

    def pointer(self, i: int, ordinal: int) -> list[str]:
        return [f"    p{i} = x{i}.data_ptr()"]

    def itemsize(self, part: tuple) -> int:
        import torch

        return torch.empty(0, dtype=part[1]).element_size()

    def stream(self, ordinal: int) -> Callable[[], int]:
        import torch

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # (what inductor calls)
        if raw is not None:
            return lambda: raw(ordinal)
        return lambda: int(torch.cuda.current_stream(ordinal).cuda_stream)

    def empty(self, ordinal: int) -> Callable[[tuple[int, ...], np.dtype], tuple[Any, int]]:
        import torch

        from fusejit.runtime.cuda.array import torch_dtype

        where = torch.device("cuda", ordinal)
        new = torch.empty

        def empty(shape: tuple[int, ...], dtype: np.dtype) -> tuple[Any, int]:
            t = new(shape, dtype=torch_dtype(dtype), device=where)
            return t, t.data_ptr()
        return empty


class CuPy(Library):
    name = "cupy"

    def array_type(self) -> type:
        import cupy

        return cupy.ndarray

    def mismatch(self, i: int, dtype: Any, ordinal: int) -> str:
        return f"x{i}.dtype != D{i} or x{i}.shape != S{i} or x{i}.strides != ST{i}"

    def pointer(self, i: int, ordinal: int) -> list[str]:
        return [f"    m{i} = x{i}.data", f"    if m{i}.device_id != {ordinal}:",
                "        return MISS", f"    p{i} = m{i}.ptr"]

    def itemsize(self, part: tuple) -> int:
        return part[1].itemsize

    def stream(self, ordinal: int) -> Callable[[], int]:
        import cupy

        get = cupy.cuda.get_current_stream
        try:
            get(ordinal)
        except TypeError:  # (CuPy before 10: the current device's only)
            def current() -> int:
                with cupy.cuda.Device(ordinal):
                    return int(get().ptr)
            return current
        return lambda: get(ordinal).ptr


LIBRARIES: dict[str, Library] = {"torch": Torch(), "cupy": CuPy()}


# -- argument slots ------------------------------------------------------------------------------


def slot(value: Any) -> int:
    """A by-value kernel argument as the integer whose 8 little-endian bytes hold it (the
    driver copies as many bytes as the kernel's parameter has from the slot's start)."""
    raw = np.asarray(value).tobytes()
    if len(raw) > 8:
        raise ValueError("a by-value argument wider than 8 bytes")
    return int.from_bytes(raw.ljust(8, b"\0"), "little")


class Slots:
    """One kernel's arguments, 8 bytes each, and the array of pointers to them that
    ``cuLaunchKernel`` reads (``address``); ``values[i] = x`` patches argument ``i``."""

    def __init__(self, initial: Sequence[int]) -> None:
        self.values = array.array("Q", initial)
        base, n = self.values.buffer_info()
        self.pointers = (ctypes.c_void_p * max(n, 1))(*(base + 8 * i for i in range(n)))
        self.address = ctypes.addressof(self.pointers)


# -- the launcher ---------------------------------------------------------------------------------


class Kernel:
    """One launch of a signature: the driver's function handle, grid, block, the kernel's
    arguments (codegen's BufferArg/ScalarArg) and its NDRange (the last three arguments)."""

    def __init__(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                 args: Sequence[Any], ndrange: Sequence[int]) -> None:
        self.function, self.grid, self.block = function, grid, block
        self.args, self.ndrange = tuple(args), tuple(int(g) for g in ndrange)


_BUFFER_ROLES = ("param", "output", "temp", "partial")


def launcher(parts: tuple, kernels: Sequence[Kernel], params: Sequence[Any],
             derive: dict[int, Any], consts: dict[int, int],
             specs: dict[str, Sequence[tuple[tuple[int, ...], np.dtype]]],
             outputs: Sequence[Any], treedef: Any, unflatten: Any, miss: object,
             context: Any, drv: Any, record: Callable[[int], None], name: str = "") -> Any:
    """``guarded(flat)`` for one signature: its arguments checked against ``parts`` (what
    ``fast_key`` gave), its kernels launched on the first array's library's current stream,
    its leaves returned; ``miss`` when an argument does not match. None when the signature
    has a kind of argument the fast path does not cover (the keyed full path serves it).

    ``consts``: the device pointers of captured constant arrays (uploaded by the first call);
    ``specs``: the (shape, dtype) of "output", "temp" and "partial" buffers; ``context``: the
    device's primary context; ``drv``: cuda.bindings.driver (or a test double of its
    cuLaunchKernel, cuCtxGetCurrent, cuCtxPushCurrent and cuCtxPopCurrent)."""
    arrays = [i for i, p in enumerate(parts) if isinstance(p, tuple) and len(p) == 6
              and p[0] in LIBRARIES]
    if not arrays or any(i not in arrays and p not in (float, int, bool)
                         for i, p in enumerate(parts)):
        return None  # NumPy arrays, fusejit's own, static values: the keyed path
    ordinals = {parts[i][5] for i in arrays}
    if len(ordinals) != 1:
        return None  # (the full path names the mismatch)
    ordinal = ordinals.pop()
    env: dict[str, Any] = {"MISS": miss, "unflatten": unflatten, "treedef": treedef,
                           "launch": drv.cuLaunchKernel, "ctx_get": drv.cuCtxGetCurrent,
                           "ctx_push": drv.cuCtxPushCurrent, "ctx_pop": drv.cuCtxPopCurrent,
                           "CTX": context,
                           "CTX_INT": int(context), "record": record, "failed": _failed}
    guard = [f"    if len(flat) != {len(parts)}:", "        return MISS"]
    checks: list[str] = []
    for i, part in enumerate(parts):
        checks.append(f"    x{i} = flat[{i}]")
        if i in arrays:
            checks += LIBRARIES[part[0]].guard(i, part, env)
        else:
            env[f"T{i}"] = part
            within = f" or not -{2**63} <= x{i} < {2**63}" if part is int else ""
            checks += [f"    if type(x{i}) is not T{i}{within}:", "        return MISS"]
    # (a tensor without strides, a value whose attributes raise: the full path says why)
    guard += ["    try:", *("    " + line for line in checks), "    except Exception:",
              "        return MISS"]
    for k, i in enumerate(arrays):  # the same array twice: the full path's aliasing analysis
        guard += [f"    if x{i} is x{j}:\n        return MISS" for j in arrays[k + 1:]]
    lib = LIBRARIES[parts[arrays[0]][0]]  # results: the first array's library, on its stream
    env["stream_of"], env["empty"] = lib.stream(ordinal), lib.empty(ordinal)
    body = ["    stream = stream_of()"]
    expr: dict[tuple[str, int], str] = {}  # (role, index) -> the expression of a buffer
    offsets: dict[int, str] = {}
    for p, prm in enumerate(params):
        if prm.kind == "const":
            if p not in consts:
                return None
            expr[("param", p)] = str(int(consts[p]))
        elif prm.kind == "array":
            src = prm.source
            if src not in arrays:
                return None
            item = LIBRARIES[parts[src][0]].itemsize(parts[src])
            expr[("param", p)] = f"(p{src} - p{src} % {ALIGN})"
            offsets[p] = f"(p{src} % {ALIGN} // {item})"
    for role, prefix in (("output", "o"), ("temp", "t"), ("partial", "q")):
        for n, (shape, dtype) in enumerate(specs[role]):
            env[f"{prefix}{n}spec"] = (tuple(shape), np.dtype(dtype))
            body.append(f"    {prefix}{n}, {prefix}{n}ptr = empty(*{prefix}{n}spec)")
            expr[(role, n)] = f"{prefix}{n}ptr"
    launches: list[str] = []
    converts: list[str] = []  # (scalars converted before anything is allocated: NumPy's errors)
    for n, k in enumerate(kernels):
        fixed, patch = [], []
        for j, a in enumerate(k.args):
            if isinstance(a, BufferArg):
                if a.role not in _BUFFER_ROLES or (a.role, a.index) not in expr:
                    return None  # (a status buffer: kernels that report errors, the full path)
                fixed.append(0)
                patch.append(f"v{n}[{j}] = {expr[(a.role, a.index)]}")
            elif a.role == "offset":
                if a.index not in offsets or np.dtype(a.dtype).itemsize > 8:
                    return None
                fixed.append(0)
                patch.append(f"v{n}[{j}] = {offsets[a.index]}")
            elif a.role == "extent":
                fixed.append(slot(np.dtype(a.dtype).type(a.value)))
            else:  # a scalar: an argument's value, or derived from the arguments
                if np.asarray(kernel_arg_scalar(0, np.dtype(a.dtype))).nbytes > 8:
                    return None  # (complex128 by value: the full path)
                env[f"conv{n}_{j}"] = _converter(a, params, derive)
                fixed.append(0)
                converts.append(f"    s{n}_{j} = conv{n}_{j}(flat)")
                patch.append(f"v{n}[{j}] = s{n}_{j}")
        fixed += [slot(np.uint64(g)) for g in k.ndrange]
        slots = Slots(fixed)
        env[f"S{n}slots"], env[f"v{n}"], env[f"A{n}"], env[f"F{n}"] = \
            slots, slots.values, slots.address, k.function
        (gx, gy, gz), (bx, by, bz) = k.grid, k.block
        launches += [*(f"            {line}" for line in patch),
                     (f"            r = launch(F{n}, {gx}, {gy}, {gz}, {bx}, {by}, {bz}, 0, "
                     f"stream, A{n}, 0)"),
                     "            if r[0]:", "                failed(r)",  # (CUresult: an int)
                     "            record(1)"]
    env["lock"] = lock = threading.Lock()
    env["acquire"], env["release"] = lock.acquire, lock.release
    # the slots are shared: patched and launched under the lock (the driver copies them);
    # the device's context made current for the launches only where another one is
    body = converts + body
    body += ["    acquire()", "    try:",
             "        pushed = int(ctx_get()[1]) != CTX_INT",
             "        if pushed:", "            ctx_push(CTX)", "        try:",
             *(launches or ["            pass"]),
             "        finally:", "            if pushed:", "                ctx_pop()",
             "    finally:", "        release()"]
    leaves = [f"o{spec.index}" if spec.kind == "node" else f"x{spec.index}"
              for spec in outputs]
    if treedef == "*":
        body.append(f"    return {leaves[0]}")
    else:
        body.append(f"    return unflatten(treedef, ({''.join(v + ', ' for v in leaves)}))")
    source = "\n".join(["def guarded(flat):", *guard, *body])
    code = compile(source, f"<fusejit CUDA launcher {name}>", "exec")
    exec(code, env)  # noqa: S102 - generated from our own templates
    guarded = env["guarded"]
    guarded.source = source  # (for reading; tests/runtime/test_cuda_launch.py)
    return guarded


def _converter(arg: ScalarArg, params: Sequence[Any], derive: dict[int, Any]
               ) -> Callable[[Sequence[Any]], int]:
    """flat -> the slot of a scalar argument, converted as the full path converts it."""
    dtype = np.dtype(arg.dtype)
    get = derive.get(arg.index)
    if get is None:
        source = params[arg.index].source
        return lambda flat: slot(kernel_arg_scalar(flat[source], dtype))
    return lambda flat: slot(kernel_arg_scalar(get(flat), dtype))


def _failed(result: tuple) -> None:
    raise RuntimeError(f"cuLaunchKernel failed: {result[0]!r}")
