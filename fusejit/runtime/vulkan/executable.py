"""A compiled call signature on Vulkan: one compute pipeline per kernel, bind groups cached by
the buffers they bind (binds.py), one command buffer per call.

Launch geometry: a kernel's work-groups are numbered linearly and the dispatch folds them over
(x, y) with x <= 65,535 (Vulkan's guaranteed per-dimension limit); each shader recovers its
group number from ``gl_WorkGroupID`` and the uniform block's group counts (targets/glsl/target.py),
and whole work-groups past the last one return at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from fusejit.errors import ContextMismatchError, UnsupportedOperationError
from fusejit.codegen.kernels import BufferArg, Kernel, Module, ScalarArg
from fusejit.runtime import status
from fusejit.runtime.executable import OutSpec, deriver, kernel_arg_scalar, results
from fusejit.runtime.vulkan.array import Array, _row_major, new_owned, storage_dtype
from fusejit.runtime.vulkan.binds import BindGroups
from fusejit.runtime.vulkan.device import MAX_GROUPS, VulkanDevice
from fusejit.runtime.vulkan.guard import guarded_launcher
from fusejit.runtime.vulkan.pipelines import pipeline

ELEMENTWISE_GROUPS = 65536  # work-groups an elementwise (grid-stride) kernel launches at most
_UNIFORMS = 8  # uniform blocks per kernel with scalars, for calls recorded together


def dispatch_shape(groups: int) -> tuple[int, int]:
    """(x, y) work-groups covering ``groups`` with x within Vulkan's per-dimension limit."""
    if groups <= MAX_GROUPS:
        return groups, 1
    y = math.ceil(groups / MAX_GROUPS)
    return math.ceil(groups / y), y


def _record(n: int) -> None:
    """Called once per dispatch: a hook the tests count launches with (tests/conftest.py);
    nothing in production (it had appended to a list that grew with every call)."""


class _Pipeline:
    """One kernel: its pipeline, bind-group layout, uniform buffer and bind groups."""

    def __init__(self, device: VulkanDevice, prelude: str, kernel: Kernel, name: str) -> None:
        wgpu = device.wgpu
        dev = device.device
        self.kernel = kernel
        self.wgpu = wgpu
        self.source = prelude + "\n" + kernel.source + "\n"
        self.buffers = [a for a in kernel.signature.args if isinstance(a, BufferArg)]
        most = device.limits["max-storage-buffers-per-shader-stage"]
        if len(self.buffers) > most:
            raise UnsupportedOperationError(
                f"{name}: kernel {kernel.name} binds {len(self.buffers)} arrays, more than the "
                f"{most} storage buffers this Vulkan adapter allows a shader; return fewer "
                "arrays from one fused reduction (or split the function)")
        # in the uniform block's order (targets/glsl.kernel_header: 8-byte scalars first)
        self.scalars = sorted((a for a in kernel.signature.args if isinstance(a, ScalarArg)),
                              key=lambda a: np.dtype(a.dtype).itemsize != 8)
        entries = []
        for i, a in enumerate(self.buffers):
            kind = wgpu.BufferBindingType.storage if (a.writable or not a.restrict) else \
                wgpu.BufferBindingType.read_only_storage
            entries.append({"binding": i, "visibility": wgpu.ShaderStage.COMPUTE,
                            "buffer": {"type": kind}})
        entries.append({"binding": len(self.buffers), "visibility": wgpu.ShaderStage.COMPUTE,
                        "buffer": {"type": wgpu.BufferBindingType.uniform}})
        # shared by source: a signature traced again for new extents builds nothing
        self.layout, self.pipeline, self.built = pipeline(device, self.source, kernel.name,
                                                          entries, name)
        local = kernel.local_size or (1,)
        per_dim = [g // max(lo, 1) for g, lo in zip(kernel.global_size, local)]
        self.groups = math.prod(per_dim)
        if kernel.group.kind == "elementwise":
            # grid-stride loops only past 65,536 groups: with 4 elements a work-item (vector
            # code) an H200 runs chain8 2^26 (65,536 groups of 256) at 3.38 TB/s kernel time
            # uncapped or capped at 33,792 groups, 2.85 at 8,192 and 2.71 at 2,112 (timestamp
            # queries); with one element a work-item 262,144 groups were slower than 8,448
            self.groups = min(self.groups, ELEMENTWISE_GROUPS)
        self.dispatch = dispatch_shape(self.groups)
        head = np.array([per_dim[0], self.groups, 0, 0x3F800000], np.uint32)  # fj_zero, fj_one
        size = 16 + sum(8 if np.dtype(a.dtype).itemsize == 8 else 4 for a in self.scalars)
        self.uniform_size = max(16, (size + 15) // 16 * 16)
        self.head = head
        self.uniforms = [self._new_uniform(dev)]
        self.marks = [-1]  # the command buffer (Recorder.serial) each uniform was last used in
        if not self.scalars:
            device.upload(self.uniforms[0], head)
        self.bind_groups = BindGroups(dev, self.layout, len(self.buffers), self.uniform_size)
        self.keys = [(a.role, a.index) for a in self.buffers]
        # the buffers it binds, from a call's table (set by VulkanExecutable, which orders it)
        self.pick: Callable[[list[Any]], tuple[Any, ...]] = _picker([])
        self.device = device

    def _new_uniform(self, dev: Any) -> Any:
        usage = self.wgpu.BufferUsage
        return dev.create_buffer(size=self.uniform_size, usage=usage.UNIFORM | usage.COPY_DST)

    def take_uniform(self, device: VulkanDevice) -> int:
        """A uniform block for this call's scalars that no recorded, unsubmitted call reads
        (a write lands before the whole command buffer runs, so calls recorded together need
        blocks of their own): one last used in an earlier command buffer, a new one, or, with
        _UNIFORMS in the open one, the first once that is submitted. Call it holding the
        recorder's lock until the call is submitted."""
        serial = device.recorder.serial
        for i, mark in enumerate(self.marks):
            if mark != serial:
                self.marks[i] = serial
                return i
        if len(self.uniforms) < _UNIFORMS:
            self.uniforms.append(self._new_uniform(device.device))
            self.marks.append(serial)
            return len(self.uniforms) - 1
        device.flush()
        self.marks[0] = device.recorder.serial
        return 0

    def bind_group(self, bufs: tuple, slot: int = 0) -> Any:
        return self.bind_groups.get(bufs, self.uniforms[slot])


def _scalar_word(value: np.generic) -> np.ndarray:
    """A kernel scalar as its 4-byte std140 word (bool as a 32-bit 0/1)."""
    v = np.asarray(value)
    if v.dtype == np.float16:  # (computed as float32)
        v = v.astype(np.float32)
    elif v.dtype.itemsize < 4:
        v = v.astype(np.uint32)
    return v.reshape(1).view(np.uint32)


class VulkanExecutable:
    """Everything needed to run one specialised call signature on a Vulkan device."""

    def __init__(self, lowered: Any, outputs: Sequence[OutSpec], treedef: Any,
                 constants: dict[int, np.ndarray], device: VulkanDevice, host_mode: bool,
                 name: str) -> None:
        module: Module = lowered.module
        self.graph = graph = lowered.graph
        self.module = module
        self.device = device
        self.outputs = tuple(outputs)
        self.treedef = treedef
        self.host_mode = host_mode
        self.queue_arg = -1  # set by the caller: the first device-array argument
        self.constants = constants  # (validate mode re-evaluates the graph with them)
        prelude = module.prelude
        self.pipelines = [_Pipeline(device, prelude, k, name) for k in module.kernels
                          if math.prod(k.global_size) > 0]
        # cache_info()'s counters: "compiled" only where a pipeline was built for this one
        self.built_how = "compiled" if any(p.built for p in self.pipelines) else "memory"
        self.params = graph.params
        # a hoisted scalar's host evaluation, built once (all of them share one evaluation)
        shared: list = []
        self._derive = {i: deriver(self.params, i, shared) for i, p in enumerate(self.params)
                        if p.kind == "derived"}
        self._arrays = [(p, prm.source) for p, prm in enumerate(graph.params)
                        if prm.kind == "array"]
        self._consts: dict[int, Any] = {}
        for p, prm in enumerate(graph.params):
            if prm.kind == "const":
                value = np.asarray(constants[p], dtype=prm.dtype)
                self._consts[p] = _upload_new(device, value)
        # a call's buffers, in one list ("the table"): the array parameters (in _arrays'
        # order), the constants, the outputs, the temporaries and partial results, the status
        # buffer; each pipeline binds its own from it (``_Pipeline.pick``)
        self._out_new = [(tuple(n.shape), n.dtype, _row_major(tuple(n.shape), n.dtype.itemsize),
                          device.buffer_size(math.prod(n.shape)
                                             * storage_dtype(n.dtype).itemsize))
                         for n in graph.outputs]
        self._scratch = [device.buffer_size(math.prod(shape) * storage_dtype(dtype).itemsize)
                         for shape, dtype in [*((n.shape, n.dtype) for n in lowered.plan.temps),
                                              *(((p.size,), p.dtype) for p in module.partials)]]
        self._host_writes = [p for p, _ in graph.writes if graph.params[p].kind == "array"]
        # a kernel reports errors: the status buffer, zero between calls (runtime/status.py)
        self._status = _upload_new(device, status.ZERO) if any(
            key[0] == "status" for pipe in self.pipelines for key in pipe.keys) else None
        at: dict[tuple[str, int], int] = {}
        for p, _ in self._arrays:
            at["param", p] = len(at)
        for p in self._consts:
            at["param", p] = len(at)
        for i in range(len(self._out_new)):
            at["output", i] = len(at)
        for role, n in (("temp", len(lowered.plan.temps)), ("partial", len(module.partials))):
            for i in range(n):
                at[role, i] = len(at)
        at["status", 0] = len(at)
        self._fixed = [*self._consts.values()]  # (the table's entries after the arrays')
        for pipe in self.pipelines:
            pipe.pick = _picker([at[k] for k in pipe.keys])
        # the offsets of array arguments only where a kernel takes one
        self._offsets = any(a.role == "offset" for pipe in self.pipelines for a in pipe.scalars)
        self.launch = self.run

    def guarded(self, parts: tuple, treedef: Any, unflatten: Any, miss: object,
                same: dict[int, Any] | None = None) -> Any:
        """A monomorphic inline cache for calls on device arrays (guard.py), or None.
        ``same`` (the static arguments a test tells unchanged, OpenCL's ``guarded``) is not
        used: a signature with static arguments takes the keyed path."""
        return guarded_launcher(parts, self.queue_arg, self.device, self.run, treedef,
                                unflatten, miss)

    def needs_run(self) -> bool:
        """Nothing is pending on Vulkan (no launch-shape tuning): ``guarded``'s None is final."""
        return False

    def run(self, flat: Sequence[Any], device: VulkanDevice) -> tuple[Any, ...]:
        dev = self.device
        if device is not dev:
            raise ContextMismatchError("this call's arrays live on another Vulkan device")
        table: list[Any] = []
        offs: dict[int, int] = {}
        uploaded: dict[int, tuple[Any, np.ndarray]] = {}
        for p, src in self._arrays:
            value = flat[src]
            if isinstance(value, Array):
                if value.device is not dev:
                    raise ContextMismatchError(
                        f"argument {src} lives on another Vulkan device than this call's")
                table.append(value.base_data)
                if self._offsets:
                    offs[p] = value.offset // value.dtype.itemsize
                continue
            table.append(self._upload(p, src, value, flat, uploaded))
            offs[p] = 0
        table += self._fixed
        outs = [new_owned(dev, *spec) for spec in self._out_new]
        for o in outs:
            table.append(o.base_data)
        scratch = [dev.take(size) for size in self._scratch]
        table += scratch
        table.append(self._status)
        if uploaded:  # (an array passed as several parameters is uploaded once)
            scratch += {id(buf): buf for buf, _ in uploaded.values()}.values()
        steps = []
        with dev.recorder.lock:  # (from the uniform writes to the submit: see take_uniform)
            for pipe in self.pipelines:
                slot = 0
                if pipe.scalars:
                    slot = pipe.take_uniform(dev)
                    dev.write_uniform(pipe.uniforms[slot], self._uniform(pipe, flat, offs))
                steps.append((pipe.pipeline, pipe.bind_group(pipe.pick(table), slot),
                              *pipe.dispatch))
                _record(1)
            dev.recorder.submit(steps)
        if self._status is not None:  # before any argument is written (a call that raises
            # writes none): the read waits for the kernels (runtime/status.py)
            flag = int(dev.download(self._status, 0, 4).view(status.STATUS_DTYPE)[0])
            if flag:
                for buf in scratch:
                    dev.release(buf)
                dev.upload(self._status, status.ZERO)
                status.raise_for(flag)
        for p in self._host_writes:  # NumPy arguments written in place get the result
            if p in uploaded:
                buf, target = uploaded[p]
                prm = self.params[p]
                sd = storage_dtype(prm.dtype)
                n = math.prod(prm.shape)
                raw = dev.download(buf, 0, n * sd.itemsize).view(sd)
                np.copyto(target, raw.reshape(prm.shape).astype(prm.dtype), casting="unsafe")
        for buf in scratch:
            dev.release(buf)
        return results(self.outputs, self.host_mode, flat, outs)  # (as on OpenCL)

    def _upload(self, p: int, src: int, value: Any, flat: Sequence[Any],
                uploaded: dict[int, tuple[Any, np.ndarray]]) -> Any:
        """The buffer array parameter ``p`` binds for NumPy argument ``value``, uploaded once
        per call however many parameters it is (noted in ``uploaded``)."""
        if not isinstance(value, np.ndarray):
            raise TypeError(f"argument {src}: pass NumPy or fusejit.vulkan arrays to a call "
                            "that runs on Vulkan (pyopencl arrays run on OpenCL)")
        dev = self.device
        same = next((q for q in uploaded if flat[self.params[q].source] is value), None)
        if same is not None:
            buf = uploaded[same][0]
            uploaded[p] = (buf, value)
            return buf
        host = np.ascontiguousarray(value, dtype=self.params[p].dtype)
        buf = dev.allocate(host.size * storage_dtype(host.dtype).itemsize)
        dev.upload(buf, host.astype(storage_dtype(host.dtype), copy=False))
        uploaded[p] = (buf, value)
        return buf

    def _uniform(self, pipe: _Pipeline, flat: Sequence[Any], offs: dict[int, int]
                 ) -> np.ndarray:
        """The uniform block of ``pipe`` for this call: its head, then its scalars."""
        words = [pipe.head]
        for a in pipe.scalars:
            if a.role == "offset":
                words.append(np.array([offs[a.index]], np.int32).view(np.uint32))
            elif a.role == "extent":  # a runtime extent: this signature's value
                words.append(_scalar_word(a.dtype.type(a.value)))
            else:
                derive = self._derive.get(a.index)  # (a hoisted scalar)
                value = flat[self.params[a.index].source] if derive is None \
                    else derive(flat)
                words.append(_scalar_word(kernel_arg_scalar(value, a.dtype)))
        return np.concatenate(words)


def _picker(positions: list[int]) -> Callable[[list[Any]], tuple[Any, ...]]:
    """A function giving a call table's entries at ``positions``, as a tuple."""
    if len(positions) < 2:  # (itemgetter gives a tuple for two or more)
        return lambda table: tuple(table[i] for i in positions)
    return itemgetter(*positions)


def _upload_new(device: VulkanDevice, host: np.ndarray) -> Any:
    sd = storage_dtype(host.dtype)
    buf = device.device.create_buffer(size=max(16, (host.size * sd.itemsize + 3) // 4 * 4),
                                      usage=device.usage)
    device.upload(buf, host.astype(sd))
    return buf
