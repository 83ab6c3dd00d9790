"""NumPy arguments and results without copies, on OpenCL devices whose memory is host memory.

PoCL's CPU device keeps a buffer made with ``CL_MEM_USE_HOST_PTR`` in the very host memory it
is given (``pocl_driver_alloc_mem_obj``: the device pointer is the host pointer). A call whose
array arguments are all NumPy arrays then needs no transfers: each input is wrapped where it
lies, each result is a fresh NumPy array the kernels write into, and one ``finish`` replaces a
blocking write per input and a blocking read per result (each a round trip through PoCL's
scheduler, ~20 us at 1024 elements).

A large NumPy array (over ``SMALL`` bytes) is wrapped as it is when the device can take it:
C-contiguous, in the dtype the kernel reads, and aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN
(PoCL: 128 bytes); else it is copied once into an aligned array (a ``memcpy``, still no
enqueued transfer). Large results are allocated aligned, so a result passed to the next call is
wrapped as it is. Small arguments and results go through aligned arrays wrapped once per
executable (``HostPlan``'s slots): a ``memcpy`` of a few KiB costs less than allocating an
aligned array and a buffer for it (NumPy's allocations are only 16-byte aligned, so small
arrays would mostly be copied anyway).

Used only where a probe on the context shows it (``alignment``): every device a CPU with
CL_DEVICE_HOST_UNIFIED_MEMORY, and a fill through a wrapped buffer lands in the host array and
a host write is what a device copy reads. ``FUSEJIT_ZERO_COPY=0`` turns it off. GPUs keep
the upload path: their buffers are not host memory.
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyopencl as cl

_mf = cl.mem_flags
_READ = _mf.READ_ONLY | _mf.USE_HOST_PTR
_READ_WRITE = _mf.READ_WRITE | _mf.USE_HOST_PTR

SMALL = 64 * 1024  # bytes: arguments and results up to this size are copied through slots

_alignments: dict[cl.Context, int] = {}
_lock = threading.Lock()


def alignment(queue: cl.CommandQueue, ctx: cl.Context) -> int:
    """The host-pointer alignment (bytes) the devices of ``queue``'s context ``ctx`` need to
    use NumPy memory in place, or 0 where calls must copy (not host memory, or turned off)."""
    align = _alignments.get(ctx)
    if align is None:
        with _lock:
            align = _alignments.get(ctx)
            if align is None:
                align = _alignments[ctx] = _probe(queue)
    return align


def _probe(queue: cl.CommandQueue) -> int:
    if os.environ.get("FUSEJIT_ZERO_COPY", "1") in ("0", "false", ""):
        return 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (HOST_UNIFIED_MEMORY is deprecated in 2.0)
            devices = queue.context.devices
            if not all(d.type & cl.device_type.CPU and d.host_unified_memory for d in devices):
                return 0
            align = max(max(d.mem_base_addr_align // 8 for d in devices), 16)
        return align if _in_place(queue, align) else 0
    except cl.Error:
        return 0


def _in_place(queue: cl.CommandQueue, align: int) -> bool:
    """Whether a device write to a wrapped array shows in the array without a map, and a host
    write to it is what the device reads: the behaviour the zero-copy calls rely on."""
    a, b = empty((64,), np.dtype(np.float32), align), empty((64,), np.dtype(np.float32), align)
    a[:] = 0
    b[:] = 0
    ba, bb = wrap(queue.context, a, True), wrap(queue.context, b, True)
    cl.enqueue_fill_buffer(queue, ba, np.float32(7), 0, a.nbytes)
    queue.finish()
    filled = bool((a == 7).all())
    a[:] = 3
    cl.enqueue_copy(queue, bb, ba)
    queue.finish()
    return filled and bool((b == 3).all())


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def empty(shape: tuple[int, ...], dtype: np.dtype, align: int) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ``align``-byte boundary
    (a view into a slightly larger byte array)."""
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    return np.ndarray(shape, dtype, raw, -address(raw) % align)


def usable(value: np.ndarray, dtype: np.dtype, align: int) -> bool:
    """Whether the device can read ``value`` where it lies, as a ``dtype`` array."""
    return (value.dtype == dtype and value.flags.c_contiguous and value.size > 0
            and address(value) % align == 0)


def stage(value: np.ndarray, strides: Sequence[int] | None, dtype: np.dtype, align: int
          ) -> tuple[np.ndarray, bool]:
    """The host array the kernel reads for a parameter specialised with ``strides`` (stride-0
    axes: one copy of each repeated element, as ``memory.compact``): ``value`` itself when the
    device can use it in place, else an aligned copy in ``dtype``; and whether it is a copy."""
    if strides is not None and 0 in strides:
        value = value[tuple(slice(0, 1) if s == 0 else slice(None) for s in strides)]
    if usable(value, dtype, align):
        return value, False
    out = empty(value.shape, dtype, align)
    np.copyto(out, value, casting="unsafe")
    return out, True


def wrap(context: cl.Context, host: np.ndarray, writable: bool) -> cl.Buffer | None:
    """A buffer over ``host``'s memory (it keeps ``host`` alive); None for no elements, as
    a zero-size device array has no buffer."""
    if host.size == 0:
        return None
    return cl.Buffer(context, _READ_WRITE if writable else _READ, hostbuf=host)


class HostParam(NamedTuple):
    """An array parameter of a host-mode call: where it comes from and what the kernel reads."""

    param: int  # graph parameter
    source: int  # flattened argument
    shape: tuple[int, ...]  # as uploaded: stride-0 (broadcast) axes of length one
    dtype: np.dtype
    strides: tuple[int, ...] | None  # the parameter's specialised element strides
    written: bool  # the function writes into it: copied back when staged


class HostPlan:
    """How one executable's NumPy arguments and results meet a host-memory device.

    A call takes a slot (aligned arrays, each wrapped once, for the small arguments and
    results), fills the buffer tables, launches, finishes, and gives the slot back; a slot is
    held by one call at a time, so calls from several threads never share one. (The same
    NumPy array passed twice is one parameter: compile/signature.py's ``alias_classes``.)"""

    def __init__(self, params: Sequence[HostParam], outputs: Sequence[tuple], align: int) -> None:
        self.params = tuple(params)
        self.outputs = tuple(outputs)  # runtime.executable.alloc_spec tuples
        self.align = align
        # per parameter: (slot index, argument, graph parameter, the slices that drop its
        # broadcast axes or None, written, small, dtype)
        self._rows = [
            (i, prm.source, prm.param,
             tuple(slice(0, 1) if s == 0 else slice(None) for s in prm.strides)
             if prm.strides is not None and 0 in prm.strides else None,
             prm.written, math.prod(prm.shape) * prm.dtype.itemsize <= SMALL, prm.dtype)
            for i, prm in enumerate(self.params)]
        self._small_outs = [spec[4] <= SMALL for spec in self.outputs]
        self._free: dict[cl.Context, list[list[Any]]] = {}

    def _slot(self, context: cl.Context) -> list[Any]:
        free = self._free.get(context)
        if free:
            try:
                return free.pop()
            except IndexError:  # (another thread took the last one)
                pass
        shapes = [(prm.shape, prm.dtype) if row[5] else None
                  for prm, row in zip(self.params, self._rows)]
        shapes += [(spec[0], spec[1]) if small else None
                   for spec, small in zip(self.outputs, self._small_outs)]
        slot: list[Any] = []
        for shape in shapes:
            host = None if shape is None else empty(shape[0], shape[1], self.align)
            slot.append(None if host is None else (host, wrap(context, host, True)))
        return slot

    def release(self, context: cl.Context, slot: list[Any]) -> None:
        self._free.setdefault(context, []).append(slot)

    def bind(self, context: cl.Context, flat: Sequence[Any], bufs: list[Any],
             offs: list[Any]) -> tuple[list[Any], list[tuple[np.ndarray, np.ndarray]],
                                       list[np.ndarray], list[Any]]:
        """Fill ``bufs`` and ``offs`` (per graph parameter) for the call's arguments ``flat``;
        return the slot, the (argument, staged copy) pairs to copy back after the launch, the
        result arrays and their buffers. (A device array among them, one the function reads
        from outside its arguments, is bound as it is.)"""
        slot = self._slot(context)
        back = []
        for i, src, param, cut, written, small, dtype in self._rows:
            value = flat[src]
            if type(value) is not np.ndarray and hasattr(value, "base_data"):
                bufs[param] = value.base_data
                offs[param] = type(offs[param])(value.offset // dtype.itemsize)
                continue
            if cut is not None:  # one copy of each repeated element
                value = value[cut]
            if small:
                host, buf = slot[i]
                np.copyto(host, value, casting="unsafe")
                copy = True
            else:
                host, copy = stage(value, None, dtype, self.align)
                buf = wrap(context, host, written)
            if written and copy:
                back.append((flat[src], host))
            bufs[param] = buf
        results, out_bufs = [], []
        n = len(self._rows)
        for i, small in enumerate(self._small_outs):
            if small:
                host, buf = slot[n + i]
            else:
                spec = self.outputs[i]
                host = empty(spec[0], spec[1], self.align)
                buf = wrap(context, host, True)
            results.append(host)
            out_bufs.append(buf)
        return slot, back, results, out_bufs

    # -- the same, as lines of a generated launcher (runtime/opencl/executable.py) ------------
    def emit_arguments(self, env: dict[str, Any], body: list[str]) -> dict[int, str]:
        """``bind``'s argument half for a launcher whose guard has checked that every array
        argument is a NumPy array (names ``flat`` and ``ctx``); per graph parameter, the name
        of its buffer."""
        env.update(take=self._slot, give=self.release, copyto=np.copyto, stage=stage, wrap=wrap,
                   empty=empty, ALIGN=self.align)
        body.append("    slot = take(ctx)")
        names = {}
        for i, src, param, cut, written, small, dtype in self._rows:
            body.append(f"    x{i} = flat[{src}]")
            if cut is not None:
                env[f"CUT{i}"] = cut
                body.append(f"    x{i} = x{i}[CUT{i}]")
            if small:
                body += [f"    h{i}, B{i} = slot[{i}]", f"    copyto(h{i}, x{i}, casting='unsafe')"]
            else:
                env[f"DT{i}"] = dtype
                body += [f"    h{i}, c{i} = stage(x{i}, None, DT{i}, ALIGN)",
                         f"    B{i} = wrap(ctx, h{i}, {written})"]
            names[param] = f"B{i}"
        return names

    def emit_outputs(self, env: dict[str, Any], body: list[str]) -> list[str]:
        """``bind``'s result half: per result the name of its buffer (its array: ``r{j}``)."""
        n = len(self._rows)
        for j, small in enumerate(self._small_outs):
            if small:
                body.append(f"    r{j}, O{j} = slot[{n + j}]")
            else:
                env[f"OS{j}"], env[f"OD{j}"] = self.outputs[j][0], self.outputs[j][1]
                body += [f"    r{j} = empty(OS{j}, OD{j}, ALIGN)", f"    O{j} = wrap(ctx, r{j}, True)"]
        return [f"O{j}" for j in range(len(self.outputs))]

    def emit_return(self, body: list[str], outputs: Sequence[Any]) -> None:
        """After the kernels finished: staged written arguments copied back, the results (see
        ``result``) taken out of the slot before it is given back, and returned as a list of
        the call's leaves (``outputs``: runtime.executable.OutSpec)."""
        for i, src, _, _, written, small, _ in self._rows:
            if written:
                copy = f"    copyto(flat[{src}], h{i}, casting='unsafe')"
                body += [copy] if small else [f"    if c{i}:", "    " + copy]
        for j, spec in enumerate(self.outputs):
            fetch = "[()]" if not spec[0] else (".copy()" if self._small_outs[j] else "")
            body.append(f"    res{j} = r{j}{fetch}")
        body.append("    give(ctx, slot)")
        leaves = [f"flat[{o.index}]" if o.kind == "arg" else f"res{o.index}" for o in outputs]
        body.append("    return [" + "".join(f"{leaf}, " for leaf in leaves) + "]")

    def result(self, index: int, host: np.ndarray) -> Any:
        """A returned result: a copy of a slot's array, a large result as it is; a 0-d result as
        its scalar."""
        if host.ndim == 0:
            return host[()]
        return host.copy() if self._small_outs[index] else host


__all__ = ["HostParam", "HostPlan", "address", "alignment", "empty", "stage", "usable", "wrap"]
