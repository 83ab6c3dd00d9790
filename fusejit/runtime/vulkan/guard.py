"""The inline cache of a Vulkan call signature: one generated function that checks the call's
arguments still match the signature and runs it, so a repeated call skips the keyed lookup
(``fast_key``, two dict lookups and the launch's own dispatch: 1.5-2 us of a cached call's
4-6 us of Python). The checks are those ``compile.signature.fast_key`` keys on: per device
array its type, dtype, shape, strides, device and whether its offset is zero (and below
``BIG_OFFSET``), arrays on distinct buffers; per Python scalar its type (an int within int64).
Any other kind of argument (NumPy arrays, NumPy scalars, static values) keeps the keyed path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fusejit.runtime.memory import BIG_OFFSET
from fusejit.runtime.vulkan.array import Array


def guarded_launcher(parts: tuple, queue_arg: int, device: Any,
                     run: Callable[[Sequence[Any], Any], Sequence[Any]], treedef: Any,
                     unflatten: Any, miss: object) -> Any:
    """The function ``guarded(flat)`` for the signature of fast-key ``parts`` on ``device``:
    ``run(flat, device)``'s leaves as the call returns them, or ``miss``; None where
    ``parts`` holds an argument it does not check."""
    if queue_arg < 0:
        return None
    env: dict[str, Any] = {"MISS": miss, "Array": Array, "run": run, "unflatten": unflatten,
                           "treedef": treedef, "DEV": device}
    tests = [f"len(flat) != {len(parts)}"]  # (any true: a miss)
    arrays = []
    for i, part in enumerate(parts):
        x = f"flat[{i}]"
        if part in (float, int, bool):
            env[f"T{i}"] = part
            tests.append(f"type({x}) is not T{i}")
            if part is int:  # (fast_key keys a Python int beyond int64 otherwise)
                tests.append(f"not -{2**63} <= {x} < {2**63}")
            continue
        if not (isinstance(part, tuple) and len(part) == 5) or part[4] is not device:
            return None
        env[f"D{i}"], env[f"S{i}"], env[f"ST{i}"] = part[:3]
        tests += [f"type({x}) is not Array", f"{x}.dtype is not D{i}", f"{x}.shape != S{i}",
                  f"{x}.strides != ST{i}", f"{x}.device is not DEV",
                  f"({x}.offset == 0 or {x}.offset >= {BIG_OFFSET})" if part[3]
                  else f"{x}.offset != 0"]
        arrays.append(i)
    if queue_arg not in arrays:
        return None
    if len(arrays) > 1:  # (arrays sharing a buffer take the keyed path's aliasing analysis)
        ids = ", ".join(f"id(flat[{i}].base_data)" for i in arrays)
        tests.append(f"len({{{ids}}}) != {len(arrays)}")
    lines = ["def guarded(flat):", f"    if {' or '.join(tests)}:", "        return MISS"]
    lines.append("    leaves = run(flat, DEV)")
    lines.append("    return leaves[0]" if treedef == "*" else
                 "    return unflatten(treedef, leaves)")
    code = compile("\n".join(lines), f"<fusejit Vulkan guarded launcher {id(run):x}>", "exec")
    exec(code, env)  # noqa: S102 - generated from the templates above
    return env["guarded"]
