"""Run one fuzz case (a program compiled once, run on several value draws), save reproducers,
and drive long campaigns.

    python -m tests.fuzz.runner --examples 5000 --seed 1     # a campaign; never stops early
    python -m tests.fuzz.runner --examples 500 --scalar-augment   # also `s += 1` on NumPy scalars
    python -m tests.fuzz.runner --examples 2000 --seed 7 --device vulkan   # the Vulkan slice's
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import sys
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl

import fusejit
from fusejit import fuse
from fusejit.testing import to_host

from .generator import Program, RandomChooser, generate
from .oracle import builtin_class, compare, evaluate
from .values import Placed, draw_inputs, place

FAILURE_DIR = Path(os.environ.get("FUSEJIT_FUZZ_FAILURES",
                                  Path(__file__).resolve().parents[2] / "fuzz-failures"))


@dataclass
class Outcome:
    status: str  # "ok" | "raises" (NumPy and fusejit raised alike) | "fail"
    message: str = ""
    path: Path | None = None
    masked: int = 0  # elements not compared (unverifiable or implementation-defined)
    compared: int = 0


def run_case(program: Program, seed: int, queue: cl.CommandQueue, draws: int = 3,
             validate: bool = False) -> Outcome:
    """Compile ``program`` once with ``@fuse`` and check it against NumPy on ``draws`` draws."""
    fused = fuse(program.function(), validate=validate)
    all_inputs: list[list[Any]] = []
    outcome = Outcome("ok")
    for k in range(draws):
        inputs = draw_inputs(program, seed + k)
        all_inputs.append(inputs)
        problem = _run_draw(program, fused, inputs, queue, outcome)
        if problem is not None:
            path = save_failure(program, all_inputs, problem, fused, queue, seed)
            return Outcome("fail", f"{problem}\nreproducer: {path}", path)
    return outcome


def _run_draw(program: Program, fused: Any, inputs: list[Any], queue: cl.CommandQueue,
              outcome: Outcome) -> str | None:
    ref = evaluate(program, inputs)
    if ref.dead:
        return None  # NumPy raised in dead code only (see oracle.evaluate)
    placed = [place(v, a.layout, queue) for v, a in zip(inputs, program.args)]
    before = [_snapshot(p) for p in placed]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = fused(*[p.value for p in placed])
    except Exception as exc:  # noqa: BLE001  (compared with what NumPy raised)
        if isinstance(exc, fusejit.UnsupportedDTypeError) and ref.exc is None and \
                fusejit.get_default_device() == "vulkan":
            outcome.status = "unsupported"  # a dtype the Vulkan target lacks (int64, float64)
            return None
        if ref.exc is None:
            return (f"fusejit raised {type(exc).__name__}: {exc}\nwhere NumPy returned values\n"
                    + "".join(traceback.format_exception(exc)[-6:]))
        want, have = builtin_class(ref.exc), builtin_class(exc)
        if not isinstance(exc, want):
            return (f"NumPy raised {type(ref.exc).__name__} ({want.__name__}): {ref.exc}\n"
                    f"fusejit raised {type(exc).__name__} ({have.__name__}): {exc}")
        changed = _changed(placed, before)
        if changed is not None:
            return f"fusejit raised {type(exc).__name__} but modified argument {changed}"
        outcome.status = "raises"
        return None
    if ref.exc is not None:
        return f"NumPy raised {type(ref.exc).__name__}: {ref.exc}\nfusejit returned a value"
    written = [i for i, a in enumerate(program.args)
               if a.name in program.written and a.kind == "array"]
    changed = _changed(placed, before, skip=set(written))
    if changed is not None:
        return f"argument {changed} was modified but the function does not write it"
    for i in written:  # NumPy's final value, and nothing outside the view touched
        problem = compare(to_host(placed[i].value), ref.values[program.args[i].name],
                          f"argument {i} ({program.args[i].name}) after the call")
        if problem is not None:
            return problem
        if _outside_changed(placed[i]):
            return f"argument {i}: the write changed its buffer outside the view"
    leaves = [got] if program.single else list(got)
    if len(leaves) != len(ref.outputs):
        return f"fusejit returned {len(leaves)} values, NumPy {len(ref.outputs)}"
    device = any(p.base_dev is not None for p in placed)
    for i, (g, want) in enumerate(zip(leaves, ref.outputs)):
        if device and isinstance(want.center, np.ndarray) and g is not None \
                and not _is_arg(g, placed) and not hasattr(g, "queue"):
            return f"output {i}: {type(g).__name__} returned for device inputs"
        problem = compare(to_host(g), want, f"output {i} ({program.outputs[i]})")
        if problem is not None:
            return problem
        err = np.broadcast_to(want.err, np.shape(want.center))
        outcome.masked += int(np.isinf(err).sum())
        outcome.compared += int(np.isfinite(err).sum())
    return None


def _is_arg(value: Any, placed: list[Placed]) -> bool:
    return any(value is p.value for p in placed)


def _snapshot(p: Placed) -> Any:
    if p.base_dev is not None:
        return None  # base_host already holds the buffer's contents
    return np.array(p.value, copy=True) if isinstance(p.value, np.ndarray) else None


def _outside_changed(p: Placed) -> bool:
    """Did a write into a device view change elements of its buffer outside the view?"""
    view = p.extra.get("view")
    if p.base_dev is None or view is None:
        return False
    now, then = p.base_dev.get(), p.base_host.copy()
    now[view] = 0
    then[view] = 0
    return now.tobytes() != then.tobytes()


def _changed(placed: list[Placed], before: list[Any], skip: set[int] = frozenset()
             ) -> int | None:
    for i, (p, b) in enumerate(zip(placed, before)):
        if i in skip:
            continue
        if p.base_dev is not None:
            now = p.base_dev.get()
            if now.tobytes() != p.base_host.tobytes():
                return i
        elif b is not None and np.asarray(p.value).tobytes() != b.tobytes():
            return i
    return None


# -- reproducers ------------------------------------------------------------------------------------


def _scalar_text(v: Any) -> str:
    if isinstance(v, (bool, np.bool_)):
        return repr(bool(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return "np.nan"
        if f in (float("inf"), float("-inf")):
            return "np.inf" if f > 0 else "-np.inf"
        return repr(f)
    return repr(int(v))


def value_literal(v: Any) -> str:
    """Python source rebuilding ``v`` exactly (arrays as ``np.array`` literals)."""
    if isinstance(v, np.ndarray):
        items = ", ".join(_scalar_text(x) for x in v.reshape(-1))
        return f"np.array([{items}], dtype=np.{v.dtype.name}).reshape({v.shape!r})"
    if isinstance(v, np.generic):
        return f"np.{v.dtype.name}({_scalar_text(v)})"
    if isinstance(v, float) and not math.isfinite(v):
        return f"float({str(v)!r})"
    return repr(v)


_REPRO = '''"""fusejit fuzz failure {ident} (program seed {seed}).

{message}

Run from the repository root: python {path}
"""
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout this file is in
import fusejit  # noqa: E402

{source}
LAYOUTS = {layouts!r}
DEVICE = {device!r}  # the default device the fuzzer ran on
DRAWS = [  # the arguments of each value draw
{draws}
]
KERNEL_SOURCE = r"""
{kernel}
"""


def to_device(queue, host):
    if DEVICE == "vulkan":
        import fusejit.vulkan

        return fusejit.vulkan.to_device(host)
    return cla.to_device(queue, host)


def place(value, layout, queue):
    """The argument as the fuzzer passed it (NumPy, strided NumPy, or a device view)."""
    v = np.asarray(value)
    if layout == "scalar":
        return value
    if layout == "numpy":
        return v.copy()
    if layout == "numpy-strided":
        base = np.zeros((2 * v.shape[0],) + v.shape[1:], v.dtype)
        base[::2] = v
        return base[::2]
    if layout == "numpy-broadcast":
        return np.broadcast_to(v[:1] if v.shape[0] > 1 else v, v.shape)
    if layout == "device-reversed":
        return to_device(queue, np.array(v[::-1], order="C"))[::-1]
    if layout == "device":
        return to_device(queue, np.array(v, order="C"))
    if layout == "device-T":
        return to_device(queue, np.array(v.T, order="C")).T
    if layout == "device-offset":
        return to_device(queue, np.concatenate([np.zeros((1,) + v.shape[1:], v.dtype),
                                                v]))[1:]
    base = np.ones((2 * v.shape[0],) + v.shape[1:], v.dtype)
    base[::2] = v
    return to_device(queue, base)[::2]


def host(x):
    if DEVICE == "vulkan" and hasattr(x, "get"):
        return x.get()
    if isinstance(x, cla.Array):
        if x.flags.forc:
            return x.get()
        whole = np.empty(x.base_data.size // x.dtype.itemsize, x.dtype)
        cl.enqueue_copy(x.queue, whole, x.base_data)
        return np.lib.stride_tricks.as_strided(whole[x.offset // x.dtype.itemsize:], x.shape,
                                               x.strides).copy()
    return x


def main():
    fusejit.set_default_device(DEVICE)
    queue = fusejit.default_queue() if DEVICE == "opencl" else None
    f = fusejit.fuse(fz)
    for k, args in enumerate(DRAWS):
        with np.errstate(all="ignore"):
            try:
                want = fz(*args)
            except Exception as exc:
                want = exc
        try:
            got = f(*[place(a, lay, queue) for a, lay in zip(args, LAYOUTS)])
        except Exception as exc:
            got = exc
        print(f"--- draw {{k}}")
        for name, value in (("NumPy", want), ("fusejit", got)):
            if isinstance(value, tuple):
                value = tuple(host(v) for v in value)
            print(f"{{name}}:", repr(host(value)))


if __name__ == "__main__":
    main()
'''


def save_failure(program: Program, draws: list[list[Any]], message: str, fused: Any,
                 queue: cl.CommandQueue, seed: int) -> Path:
    """Write a self-contained reproducer; returns its path."""
    source = program.source()
    ident = hashlib.sha1((source + repr(seed)).encode()).hexdigest()[:12]
    directory = FAILURE_DIR / ident
    directory.mkdir(parents=True, exist_ok=True)
    try:
        placed = [place(v, a.layout, queue).value for v, a in zip(draws[-1], program.args)]
        kernel = fused.lower(*placed).source
    except Exception as exc:  # noqa: BLE001  (the reproducer says why there is no kernel)
        kernel = f"(no kernel: lowering raised {type(exc).__name__}: {exc})"
    path = directory / "repro.py"
    text = _REPRO.format(
        ident=ident, seed=seed, message=message.replace('"""', "'''"), path=path,
        source=source, layouts=[a.layout for a in program.args],
        draws="\n".join("    [" + ", ".join(value_literal(v) for v in d) + "],"
                        for d in draws),
        kernel=kernel.replace('"""', "'''"), device=fusejit.get_default_device())
    path.write_text(text)
    return path


# -- campaigns --------------------------------------------------------------------------------------


def use_device(name: str) -> Any:
    """The queue of device ``name`` ("opencl" or "vulkan"), made the default; on Vulkan the
    generator draws from the dtypes its target computes, as the Vulkan slice of the suite does
    (promotions may still reach others: those calls count as unsupported)."""
    from fusejit.runtime.backend import default_queue

    from . import generator

    fusejit.set_default_device(name)
    queue = default_queue()
    if name == "vulkan":
        from fusejit.runtime.vulkan.array import supported_dtypes

        generator.DTYPES = tuple(d for d in generator.DTYPES if d in supported_dtypes(queue))
    return queue


def campaign(examples: int, seed: int, validate: bool, log: Any = sys.stdout,
             verbose: bool = False, scalar_augment: bool | None = None,
             device: str = "opencl") -> Counter:
    queue = use_device(device)
    stats: Counter = Counter()
    start = time.time()
    for i in range(examples):
        s = seed * 1_000_003 + i
        program = generate(RandomChooser(s), scalar_augment=scalar_augment)
        if verbose:
            print(f"[{i}] seed {s}\n{program.source()}", file=log, flush=True)
        try:
            out = run_case(program, s, queue, validate=validate)
        except Exception as exc:  # noqa: BLE001  (a harness crash: report it, go on)
            out = Outcome("fail", f"harness error {type(exc).__name__}: {exc}")
            traceback.print_exc()
        stats[out.status] += 1
        stats["masked"] += out.masked
        stats["compared"] += out.compared
        if out.status == "fail":
            print(f"[{i}] seed {s}: {out.message.splitlines()[0]}\n    {out.path}", file=log,
                  flush=True)
        if (i + 1) % 100 == 0:
            print(f"... {i + 1} programs, {dict(stats)}, {time.time() - start:.0f}s", file=log,
                  flush=True)
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--validate", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="print each program first")
    parser.add_argument("--program", type=int, help="run only the program of this seed")
    parser.add_argument("--device", choices=("opencl", "vulkan"), default="opencl")
    parser.add_argument("--scalar-augment", action="store_true", default=None,
                        help="also write NumPy scalars with augmented assignment (`s += 1`), "
                             "as FUSEJIT_FUZZ_SCALAR_AUGMENT=1 does")
    ns = parser.parse_args()
    if ns.program is not None:
        queue = use_device(ns.device)
        program = generate(RandomChooser(ns.program), scalar_augment=ns.scalar_augment)
        print(program.source())
        out = run_case(program, ns.program, queue, validate=ns.validate)
        print(out.status, out.message)
        return
    stats = campaign(ns.examples, ns.seed, ns.validate, verbose=ns.verbose,
                     scalar_augment=ns.scalar_augment, device=ns.device)
    print("done:", dict(stats))


if __name__ == "__main__":
    main()
