"""A compiled call signature on OpenCL: built kernels, how each argument is bound, what is
returned.

The hot path (``Executable.run``) does only: convert scalars, allocate outputs from the memory
pool, set arguments on kernels created once at build time, enqueue. What is not OpenCL's (the
argument binding plan, scalar conversion, derived scalars, the returned leaves) is
runtime/executable.py's ``LaunchPlan``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pyopencl.tools as cltools

from fusejit.codegen.kernels import BufferArg, Module
from fusejit.ir.graph import Graph
from fusejit.runtime import autotune
from fusejit.runtime.backend import DeviceInfo, default_queue
from fusejit.runtime.executable import (
    BY_VALUE,
    EXTENT,
    OFFSET,
    OUT,
    PARAM,
    PART,
    SCALAR,
    STATUS,
    TEMP,
    LaunchPlan,
    OutSpec,
    kernel_arg_scalar,
)
from fusejit.runtime import status
from fusejit.runtime.memory import BIG_OFFSET, compact, zero_axes
from fusejit.runtime.opencl import hostmem, scalar_args
from fusejit.runtime.opencl.arrays import (
    array_template,
    scratch_buffer,
    from_template,
    new_array,
    object_new,
    templated,
    memory_pool,
)
from fusejit.runtime.opencl.cl_kernels import new_kernel
from fusejit.runtime.opencl.host_steps import HostStep

NO_QUEUE = ("the first pyopencl array argument has no queue (it was made with queue=None or "
            ".with_queue(None)); a fused call runs on that array's queue: pass "
            "x.with_queue(queue)")

_enqueue = cl.enqueue_nd_range_kernel


_UNBOUND = (object(),)  # an Executable's binding before its first call: matches no queue


def _launch(queue: cl.CommandQueue, knl: Any, gsize: tuple[int, ...] | None,
            lsize: tuple[int, ...] | None, plan: Sequence[tuple[int, int]], tables: tuple) -> None:
    """One entry of an executable's plan: a kernel, or a host step (global size None: it takes
    its arguments from the same tables, runtime/opencl/host_steps.py)."""
    if gsize is None:
        knl(queue, [tables[kind][index] for kind, index in plan])
    else:
        _set_args(knl, plan, tables)
        _enqueue(queue, knl, gsize, lsize)


def _set_args(knl: cl.Kernel, plan: Sequence[tuple[int, int]], tables: tuple) -> None:
    """Bind one kernel's arguments from the call's tables (by-value ones as packed bytes,
    see scalar_args: ``set_arg`` of a NumPy scalar costs 15-20 us)."""
    for i, (kind, index) in enumerate(plan):
        value = tables[kind][index]
        if kind in BY_VALUE:
            scalar_args.bind(knl, i, scalar_args.packer(value.dtype)(value))
        else:
            knl.set_arg(i, value)


def _same_guard(i: int, part: Any, same: dict[int, Any], env: dict[str, Any]
                ) -> list[str] | None:
    """A guarded launcher's test of static argument ``i`` (``part``: its fast-key part),
    where ``same`` holds the object it must be; None: not such an argument."""
    if not (isinstance(part, tuple) and part[:1] == ("static",) and i in same):
        return None
    value = env[f"K{i}"] = same[i]
    test = f"flat[{i}] is not K{i}"
    if type(value) in (int, bool, str, bytes) or type(value) is float and value != 0 and \
            not math.isnan(value):  # (equal values of these types key alike: made anew, pass)
        env[f"T{i}"] = type(value)
        test += f" and (type(flat[{i}]) is not T{i} or flat[{i}] != K{i})"
    return [f"    if {test}:", "        return MISS"]


class Executable(LaunchPlan):
    """Everything needed to run one specialised call signature on OpenCL."""

    def __init__(self, graph: Graph, module: Module, program: cl.Program, info: DeviceInfo,
                 outputs: Sequence[OutSpec], temps: Sequence[tuple[tuple[int, ...], np.dtype]],
                 host_mode: bool, index_dtype: np.dtype, treedef: Any,
                 constants: dict[int, np.ndarray], autotune: bool = True) -> None:
        super().__init__(graph, module, outputs, temps, host_mode, index_dtype, treedef,
                         constants)
        self.info = info
        self.autotune = autotune
        self._calls = 0
        self.program = program  # (AOT export reads its binary)
        # a new kernel, not getattr: one program can serve several signatures (runtime
        # extents); without PyOpenCL's invoker, which fusejit never calls (cl_kernels.py)
        self.kernels = [(HostStep(k) if k.role == "host" else new_kernel(program, k.name), k)
                        for k in module.kernels if math.prod(k.global_size) > 0]
        # steps the host runs between kernels (runtime/opencl/host_steps.py): calls go
        # through run
        self._host_steps = any(k.role == "host" for k in module.kernels)
        self._launch_lock = threading.Lock()  # set_arg + enqueue on a shared cl.Kernel
        self._const_buffers: dict[cl.Context, list[Any]] = {}
        self._status: dict[cl.Context, cl.Buffer] = {}  # (runtime/status.py)
        written = {p for p, _ in graph.writes}
        self._host_writes = [p for p in written if graph.params[p].kind == "array"]
        self._host_plan: hostmem.HostPlan | None = None  # (host-memory devices, first call)
        self._compile_plan()

    def _compile_plan(self) -> None:
        """The argument binding plan (LaunchPlan), the kernels to tune, the first launcher."""
        self._plan_arguments(self.kernels)
        # large, idempotent elementwise kernels get their launch shape tuned on first use;
        # tuning reruns the kernels before it, so none of those may write an argument
        writes = [any(a.role == "param" and a.writable for a in record.signature.args
                      if isinstance(a, BufferArg)) for _, record in self.kernels]
        self._to_tune = [
            i for i, (_, record) in enumerate(self.kernels)
            if self.autotune and record.items >= autotune.MIN_ITEMS
            and record.group.kind == "elementwise" and not any(writes[:i + 1])]
        # (queue, its pool, per output its result template): see _bind
        self._binding: list[tuple] = [_UNBOUND]
        self.launch = self._first_launch

    def _first_launch(self, flat: Sequence[Any], queue: cl.CommandQueue) -> tuple[Any, ...]:
        """The first fast-path launch generates the straight-line launcher (not the build:
        a process's first call runs through ``run``, and compiling it costs ~0.3-1 ms)."""
        self.launch = self._build_launcher()
        return self.launch(flat, queue)

    def needs_run(self) -> bool:
        """Whether calls must go through ``run``: tuning is pending, a NumPy argument is
        written in place, or a host step runs between kernels. (Not ``self.launch is self.run``:
        each attribute read makes a new bound method, so that test was always false and
        device-array calls never tuned.) A kernel reporting errors does not: the launchers read
        its status flag themselves (``_status_check``)."""
        return bool(self._to_tune or self._host_writes or self._host_steps)

    def _bind(self, queue: cl.CommandQueue) -> tuple:
        """What a launch needs of its queue, as one tuple: (queue, its memory pool, then per
        output the attributes of its result array, see ``array_template``, then its context:
        ``queue.context`` costs ~0.5 us a read). The last one is
        kept in ``_binding[0]`` and replaced whole when the queue changes, so a thread never
        combines one queue's pool or templates with another's."""
        if queue is None:
            raise ValueError(NO_QUEUE)
        pool = memory_pool(queue)
        binding = (queue, pool, *(array_template(queue, pool, spec)
                                  for spec in self._out_specs), queue.context)
        self._binding[0] = binding
        return binding

    def _build_launcher(self) -> Any:
        """Generate a straight-line launcher for calls whose array arguments are all device
        arrays: no loops, no tables, just the attribute reads, allocations, ``set_arg`` calls
        and enqueues this signature needs. Anything else (NumPy inputs, pending autotuning, a
        NumPy argument written in place) goes through ``run``. Generated from our own
        templates only: no user string reaches the generated code."""
        if self.needs_run():
            return self.run
        env, body = self._launch_body(checked=False)
        lines = ["def launch(flat, queue):", *body]
        # generated from our own templates above; no user string reaches it
        exec(compile("\n".join(lines), f"<fusejit launcher {id(self):x}>", "exec"), env)  # noqa: S102
        return env["launch"]

    def _launch_body(self, checked: bool, host: hostmem.HostPlan | None = None
                     ) -> tuple[dict[str, Any], list[str]]:
        """The launch itself, for ``flat`` and ``queue``; ``checked`` when a guard has already
        made sure every array argument is a device array, or (``host``) a NumPy array on a
        host-memory device (hostmem.py; ``ctx`` names the queue's context)."""
        env: dict[str, Any] = {"Array": cla.Array, "run": self.run, "enqueue": _enqueue,
                               "new_array": new_array, "binding": self._binding,
                               "bind": self._bind, "acquire": self._launch_lock.acquire,
                               "release": self._launch_lock.release,
                               "index_type": self.index_dtype.type, "conv": kernel_arg_scalar,
                               "consts_of": self._const, "new": object_new}
        body = ["    b = binding[0]",
                "    if b[0] is not queue:",
                "        b = bind(queue)",
                "    pool = b[1]"]
        arg_expr: dict[tuple[int, int], str] = {}
        packed: dict[tuple[int, int], str] = {}  # by-value arguments as bytes (scalar_args)
        env["pack_index"] = scalar_args.packer(self.index_dtype)
        if host is not None:
            arg_expr.update({(PARAM, p): name for p, name in
                             host.emit_arguments(env, body).items()})
        for p, src, itemsize in self._arrays if host is None else ():
            body.append(f"    a{p} = flat[{src}]")
            if not checked:
                body += [f"    if type(a{p}) is not Array:", "        return run(flat, queue)"]
            arg_expr[(PARAM, p)] = f"a{p}.base_data"
            if p in self._offset_params:
                arg_expr[(OFFSET, p)] = f"index_type(a{p}.offset // {itemsize})"
                packed[(OFFSET, p)] = f"pack_index(index_type(a{p}.offset // {itemsize}))"
        if self._checks and host is None:
            body += self._status_flag(env)
            arg_expr[(STATUS, 0)] = "flag"
        if self._consts:
            body.append("    consts = consts_of(queue)")
            for p in self._consts:
                arg_expr[(PARAM, p)] = f"consts[{p}]"
        if host is not None:
            arg_expr.update({(OUT, i): name for i, name in
                             enumerate(host.emit_outputs(env, body))})
        for i, spec in enumerate(self._out_specs if host is None else ()):
            nbytes = spec[4]
            if not templated(spec):  # the public constructor
                env[f"ospec{i}"] = spec
                body.append(f"    o{i} = new_array(queue, pool, ospec{i})")
                arg_expr[(OUT, i)] = f"o{i}.base_data"
                continue
            # from_template, inlined
            body += [f"    o{i}buf = pool.allocate({nbytes})",
                     f"    o{i} = new(Array)",
                     f"    o{i}.__dict__ = attrs = b[{2 + i}].copy()",
                     "    attrs['events'] = []",
                     f"    attrs['base_data'] = o{i}buf"]
            arg_expr[(OUT, i)] = f"o{i}buf"
        for kind, specs, prefix in ((TEMP, self._temp_specs, "t"), (PART, self._part_specs, "q")):
            for i, spec in enumerate(specs):  # kernels only need their buffers
                body.append(f"    {prefix}{i} = pool.allocate({spec[4]})" if spec[2] else
                            f"    {prefix}{i} = None")
                arg_expr[(kind, i)] = f"{prefix}{i}"
        for j, value in enumerate(self._extents):
            env[f"e{j}"] = value
            env[f"e{j}b"] = scalar_args.packer(value.dtype)(value)
            arg_expr[(EXTENT, j)] = f"e{j}"
            packed[(EXTENT, j)] = f"e{j}b"
        convert = []
        for j, (src, dtype, derive) in enumerate(self._scalars):
            env[f"dtype{j}"] = dtype
            env[f"pack{j}"] = scalar_args.packer(dtype)
            env[f"conv{j}"] = scalar_args.converter(dtype, kernel_arg_scalar)
            if derive is None:
                convert.append(f"    s{j} = conv{j}(flat[{src}])")
            else:
                env[f"derive{j}"] = derive
                convert.append(f"    s{j} = conv{j}(derive{j}(flat))")
            arg_expr[(SCALAR, j)] = f"s{j}"
            packed[(SCALAR, j)] = f"pack{j}(s{j})"
        if scalar_args.FAST and self._scalars:  # the last call's bytes, for the same objects
            sources = {src for src, _, derive in self._scalars if derive is None}
            sources |= set(self._derived[0].sources if self._derived else ())
            convert = scalar_args.cached(sorted(sources), len(self._scalars), convert, env)
            packed.update({(SCALAR, j): f"b{j}" for j in range(len(self._scalars))})
        body += convert
        # acquire/release rather than `with lock:`, which costs twice as much per call
        body += ["    acquire()", "    try:"]
        if not self._plans:
            body.append("        pass  # every kernel has an empty range")
        for n, (knl, gsize, lsize, plan) in enumerate(self._plans):
            env[f"k{n}"], env[f"g{n}"], env[f"l{n}"] = knl, gsize, lsize
            for i, (kind, index) in enumerate(plan):
                if scalar_args.FAST and (kind, index) in packed:
                    body.append(f"        k{n}._set_arg_buf({i}, {packed[(kind, index)]})")
                else:
                    body.append(f"        k{n}.set_arg({i}, {arg_expr[(kind, index)]})")
            body.append(f"        enqueue(queue, k{n}, g{n}, l{n})")
        body += ["    finally:", "        release()"]
        if host is not None:  # (finished before the arrays are read or the slot reused)
            body.append("        queue.finish()")
            host.emit_return(body, self.outputs)
            return env, body
        if self._checks:
            body += self._status_check(env)
        outs = "[" + "".join(f"o{i}, " for i in range(len(self._out_specs))) + "]"
        if self._simple_out:
            body.append(f"    return {outs}")
        else:
            env["results"] = self._results
            body.append(f"    return results(flat, {outs})")
        return env, body

    def _status_flag(self, env: dict[str, Any]) -> list[str]:
        """Launcher lines binding ``flag``, the status buffer of the queue's context (``b[-1]``,
        see ``_bind``)."""
        env.update(status_of=self._status.get, new_status=self._status_buffer)
        return ["    flag = status_of(b[-1])", "    if flag is None:",
                "        flag = new_status(queue)"]

    def _status_check(self, env: dict[str, Any]) -> list[str]:
        """Launcher lines reading the status flag after the kernels: one blocking 4-byte read
        (it waits for them: runtime/status.py says why the check is not deferred), then
        ``DeviceIndexError`` if a kernel set it."""
        env.update(read=cl._cl._enqueue_read_buffer, new_host=status.new_host,
                   failed=self._check_status)
        return ["    checked = new_host()",
                "    done = read(queue, flag, checked)",
                "    if checked[0]:",
                "        failed(queue, flag, done, checked)"]

    def guarded(self, parts: tuple, treedef: Any, unflatten: Any, miss: object,
                same: dict[int, Any] | None = None) -> Any:
        """A monomorphic inline cache: one generated function that checks the arguments still
        match this signature (identity and equality tests on the attributes the fast cache key
        is made of) and launches; ``miss`` when they do not. None when the signature has a
        kind of argument the guard does not cover. ``same``: by position, the static
        arguments a test tells unchanged (a bound method's ``self`` and immutable values by
        identity; ints, strings, bytes and nonzero floats also by type and value); other
        static arguments take the keyed path."""
        same = same or {}
        if self.host_mode and self.queue_arg < 0 and any(
                isinstance(p, tuple) and p[:1] == ("host",) for p in parts):
            # (not while tuning is pending: asked again at the next call)
            return None if self._to_tune else self._guarded_host(parts, treedef, unflatten,
                                                                 miss, same)
        if self.needs_run() or self.queue_arg < 0:
            return None
        env, body = self._launch_body(checked=True)
        env.update({"MISS": miss, "unflatten": unflatten, "treedef": treedef})
        guard = [f"    if len(flat) != {len(parts)}:", "        return MISS"]
        arrays = []
        for i, part in enumerate(parts):
            if (lines := _same_guard(i, part, same, env)) is not None:
                guard += lines
                continue
            if not (isinstance(part, tuple) and len(part) == 5):
                if part in (float, int, bool):
                    env[f"T{i}"] = part
                    within = f" or not -{2**63} <= flat[{i}] < {2**63}" if part is int else ""
                    guard += [f"    if type(flat[{i}]) is not T{i}{within}:",
                              "        return MISS"]
                    continue
                return None  # host arrays, NumPy scalars, static values: the keyed path
            dtype, shape, strides, has_offset, context = part
            env[f"D{i}"], env[f"S{i}"], env[f"ST{i}"], env[f"C{i}"] = dtype, shape, strides, \
                context
            # a miss: the offset class changed (or the offset is too large for fast_key)
            offset_test = (f"x{i}.offset == 0 or x{i}.offset >= {BIG_OFFSET}" if has_offset
                           else f"x{i}.offset != 0")
            guard += [f"    x{i} = flat[{i}]",
                      (f"    if type(x{i}) is not Array or x{i}.dtype is not D{i} or "
                       f"x{i}.shape != S{i} or x{i}.strides != ST{i} or "
                       f"x{i}.context is not C{i} or {offset_test} or "
                       f"x{i}.base_data is None:"),
                      "        return MISS"]
            arrays.append(i)
        if len(arrays) > 1:  # arrays sharing a buffer need the aliasing analysis
            ptrs = ", ".join(f"x{i}.base_data.int_ptr" for i in arrays)
            guard += [f"    if len({{{ptrs}}}) != {len(arrays)}:", "        return MISS"]
        guard.append(f"    queue = x{self.queue_arg}.queue")
        ret = body[-1]
        if treedef == "*":
            body[-1] = ret.replace("return [o0, ]", "return o0") if self._simple_out and \
                len(self._out_specs) == 1 else ret.replace("return ", "return (") + ")[0]"
        else:
            body[-1] = ret.replace("return ", "return unflatten(treedef, ") + ")"
        lines = ["def guarded(flat):", *guard, *body]
        code = compile("\n".join(lines), f"<fusejit guarded launcher {id(self):x}>", "exec")
        exec(code, env)  # noqa: S102 - generated from our own templates
        return env["guarded"]

    def _guarded_host(self, parts: tuple, treedef: Any, unflatten: Any, miss: object,
                      same: dict[int, Any]) -> Any:
        """``guarded`` for NumPy arrays (and Python scalars) on the default queue, as it was
        when the guard was made (``set_default_device`` since: a miss): the tests of
        ``fast_key``'s host parts, then ``run``."""
        queue = default_queue()
        env: dict[str, Any] = {"MISS": miss, "unflatten": unflatten, "treedef": treedef,
                               "ndarray": np.ndarray, "zero_axes": zero_axes,
                               "share": np.may_share_memory, "default_queue": default_queue,
                               "Q": queue, "run": self.run}
        guard = [f"    if len(flat) != {len(parts)}:", "        return MISS"]
        arrays = []
        for i, part in enumerate(parts):
            if part in (float, int, bool):
                env[f"T{i}"] = part
                within = f" or not -{2**63} <= flat[{i}] < {2**63}" if part is int else ""
                guard += [f"    if type(flat[{i}]) is not T{i}{within}:", "        return MISS"]
                continue
            if (lines := _same_guard(i, part, same, env)) is not None:
                guard += lines
                continue
            if not (isinstance(part, tuple) and len(part) == 4 and part[0] == "host"):
                return None  # NumPy scalars, static values: the keyed path
            _, dtype, shape, flag = part
            env[f"D{i}"], env[f"S{i}"], env[f"W{i}"] = dtype, shape, flag
            guard += [f"    x{i} = flat[{i}]",
                      (f"    if type(x{i}) is not ndarray or x{i}.dtype is not D{i} or "
                       f"x{i}.shape != S{i} or (x{i}.flags.writeable or zero_axes(x{i})) != "
                       f"W{i}:"),
                      "        return MISS"]
            arrays.append(i)
        for k, i in enumerate(arrays):  # (fast_key leaves arrays sharing memory to the full path)
            for j in arrays[k + 1:]:
                guard += [f"    if share(x{i}, x{j}):", "        return MISS"]
        guard += ["    queue = default_queue()", "    if queue is not Q:", "        return MISS"]
        align = hostmem.alignment(queue, queue.context)
        if align and not (self._host_steps or self._checks):  # the launch inlined
            # (hostmem.HostPlan's emitters; a status read-back goes through run)
            plan = self._host_plan
            if plan is None or plan.align != align:
                plan = self._host_plan = self._new_host_plan(align)
            launch_env, body = self._launch_body(checked=True, host=plan)
            env.update(launch_env, ctx=queue.context)
            guard += body[:-1]
            ret = body[-1]
        else:
            guard.append("    leaves = run(flat, queue)")
            ret = "    return leaves"
        guard.append(ret.replace("return ", "return (") + ")[0]" if treedef == "*" else
                     ret.replace("return ", "return unflatten(treedef, ") + ")")
        code = compile("\n".join(["def guarded(flat):", *guard]),
                       f"<fusejit guarded host launcher {id(self):x}>", "exec")
        exec(code, env)  # noqa: S102 - generated from our own templates
        return env["guarded"]

    # -- per call ---------------------------------------------------------------------------------
    def run(self, flat: Sequence[Any], queue: cl.CommandQueue) -> tuple[Any, ...]:
        binding = self._binding[0]
        if binding[0] is not queue:
            binding = self._bind(queue)
        pool = binding[1]
        if self.host_mode:
            ctx = binding[-1]
            align = hostmem.alignment(queue, ctx)
            if align:
                return self._run_in_place(flat, queue, ctx, pool, align)
        bufs: list[Any] = [None] * self._n_params
        offs: list[Any] = [None] * self._n_params
        uploaded: dict[int, cla.Array] | None = None
        index_type = self.index_dtype.type
        for p, src, itemsize in self._arrays:
            value = flat[src]
            if type(value) is cla.Array or isinstance(value, cla.Array):
                bufs[p] = value.base_data
                offs[p] = index_type(value.offset // itemsize)
            else:
                if uploaded is None:
                    uploaded = {}
                # the same NumPy array passed twice is one device buffer, as in NumPy
                dev = next((uploaded[q] for q in uploaded
                            if flat[self.graph.params[q].source] is value), None)
                if dev is None:
                    prm = self.graph.params[p]
                    host = compact(value, prm.strides, prm.dtype)  # broadcast: un-broadcast
                    dev = cla.to_device(queue, host, allocator=pool)
                uploaded[p] = dev
                bufs[p] = dev.base_data
                offs[p] = index_type(0)
        outs = [new_array(queue, pool, spec) if template is None else
                from_template(template, pool.allocate(spec[4]))
                for spec, template in zip(self._out_specs, binding[2:])]
        status_read = self._launch_all(flat, queue, pool, bufs, offs,
                                       [a.base_data for a in outs])
        if uploaded is not None:
            copies = [(flat[self.graph.params[p].source], uploaded[p].get(queue))
                      for p in self._host_writes if p in uploaded]
            if status_read is not None and copies:  # (a call that raises writes no argument)
                self._check_status(queue, *status_read)
            for target, result in copies:
                np.copyto(target, result, casting="unsafe")
        leaves = outs if self._simple_out else self._results(flat, outs)
        if status_read is not None:
            self._check_status(queue, *status_read)
        return leaves

    def _status_buffer(self, queue: cl.CommandQueue) -> cl.Buffer:
        """The status buffer of ``queue``'s context, zero (runtime/status.py)."""
        buf = self._status.get(queue.context)
        if buf is None:
            buf = self._status[queue.context] = cl.Buffer(
                queue.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                hostbuf=status.ZERO)
        return buf

    @staticmethod
    def _check_status(queue: cl.CommandQueue, flag: cl.Buffer, read: cl.Event,
                      checked: np.ndarray) -> None:
        """Raise the error a kernel reported (clearing the buffer for the next call)."""
        read.wait()  # (done already where a result was read back after it)
        if checked[0]:
            cl.enqueue_copy(queue, flag, status.ZERO, is_blocking=True)
            status.raise_for(int(checked[0]))

    def _run_in_place(self, flat: Sequence[Any], queue: cl.CommandQueue, ctx: cl.Context,
                      pool: cltools.MemoryPool, align: int) -> tuple[Any, ...]:
        """A call with NumPy arrays only, on a device whose memory is host memory
        (runtime/opencl/hostmem.py): arguments used where they lie or copied into aligned
        host arrays, results written by the kernels into NumPy arrays, one ``finish``;
        finished results, as the upload path returns."""
        plan = self._host_plan
        if plan is None or plan.align != align:
            plan = self._host_plan = self._new_host_plan(align)
        bufs: list[Any] = [None] * self._n_params
        zero = self.index_dtype.type(0)
        offs = [zero] * self._n_params
        slot, back, results, out_bufs = plan.bind(ctx, flat, bufs, offs)
        try:
            try:
                status_read = self._launch_all(flat, queue, pool, bufs, offs, out_bufs)
            finally:
                queue.finish()  # (what the kernels read and write lives at least until here)
            if status_read is not None:  # (a call that raises writes no argument)
                self._check_status(queue, *status_read)
            for target, host in back:
                np.copyto(target, host, casting="unsafe")
            return tuple(flat[spec.index] if spec.kind == "arg" else
                         plan.result(spec.index, results[spec.index]) for spec in self.outputs)
        finally:
            plan.release(ctx, slot)  # (after the results are copied out of it)

    def _new_host_plan(self, align: int) -> hostmem.HostPlan:
        params = []
        for p, src, _ in self._arrays:
            prm = self.graph.params[p]
            strides = prm.strides
            shape = tuple(1 if strides is not None and s == 0 else d
                          for d, s in zip(prm.shape, strides or (1,) * len(prm.shape)))
            params.append(hostmem.HostParam(p, src, shape, prm.dtype, strides,
                                            p in self._host_writes))
        return hostmem.HostPlan(params, self._out_specs, align)

    def _launch_all(self, flat: Sequence[Any], queue: cl.CommandQueue, pool: Any,
                    bufs: list[Any], offs: list[Any], outs: list[Any]) -> tuple | None:
        """Enqueue the plan's kernels (tuning them first where pending) with these arrays,
        offsets and result buffers; temporaries and partial results from ``pool``. Where a
        kernel reports errors, also the status buffer's read-back: (buffer, its read's event,
        the host array it lands in), for ``_check_status``; else None."""
        if self._consts:
            consts = self._const(queue)
            for p in self._consts:
                bufs[p] = consts[p]
        temps = [scratch_buffer(pool, spec) for spec in self._temp_specs]
        parts = [scratch_buffer(pool, spec) for spec in self._part_specs]
        scalars = [kernel_arg_scalar(flat[src] if derive is None else derive(flat), dtype)
                   for src, dtype, derive in self._scalars] if self._scalars else ()
        flag = self._status_buffer(queue) if self._checks else None
        tables = (bufs, offs, outs, temps, parts, scalars, self._extents, (flag,))
        with self._launch_lock:
            if self._to_tune and self._calls:
                self._tune(queue, tables)  # from the second call on: a one-shot call never tunes
            self._calls += 1
            for knl, gsize, lsize, plan in self._plans:
                _launch(queue, knl, gsize, lsize, plan, tables)
            if flag is None:
                return None
            checked = status.new_host()  # queued before any result's read: no wait of its own
            return flag, cl.enqueue_copy(queue, checked, flag, is_blocking=False), checked

    def _tune(self, queue: cl.CommandQueue, tables: tuple) -> None:
        """Run kernels in order, tuning the launch shape of the marked ones on the way (each
        tuned kernel reads what earlier kernels wrote, so it times on real data)."""
        limits = self.info.limits
        for i, (knl, _, _, plan) in enumerate(self._plans):
            if i not in self._to_tune:
                continue
            for j in range(i):  # what the tuned kernel reads must exist
                _launch(queue, *self._plans[j], tables)
            _set_args(knl, plan, tables)
            record = self.kernels[i][1]
            # keyed on the program (whose source every executable keeps: kernels loaded from
            # the disk cache or a bundle carry none of their own) and the kernel's name
            cfg = autotune.tune(queue, knl, autotune.key(self.info.key, self.module.source,
                                                         record.name, record.items),
                                record.items, limits.max_work_group, limits.is_gpu)
            self._plans[i][1], self._plans[i][2] = cfg.global_size, cfg.local_size
        self._to_tune = []
        self.launch = self._build_launcher()

    def _const(self, queue: cl.CommandQueue) -> list[Any]:
        """Captured constant arrays, uploaded once per context."""
        per_ctx = self._const_buffers.get(queue.context)
        if per_ctx is None:
            per_ctx = [None] * self._n_params
            for p in self._consts:
                per_ctx[p] = cla.to_device(queue, self.constants[p]).base_data
            self._const_buffers[queue.context] = per_ctx
        return per_ctx
