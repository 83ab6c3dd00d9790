"""Command line: ``python -m fusejit.bench [--scale tiny|small|full] [--json P] [--png P]``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from fusejit.bench.backends import ALL
from fusejit.bench.workloads import FAMILIES, SCALES


def _list(text: str, allowed: Sequence[str], what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in allowed]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown {what} {bad}; choose from {list(allowed)}")
    return items


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",") if t.strip()]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m fusejit.bench",
        description="Benchmark fusejit fused kernels against unfused pyopencl, NumPy, numexpr "
                    "and (when importable) torch, torch.compile, cupy, cupy.fuse, jax.jit.")
    p.add_argument("--scale", choices=[*SCALES, "auto"], default="auto",
                   help="problem sizes; auto = full on a GPU OpenCL device, else small")
    p.add_argument("--impls", type=lambda s: _list(s, ALL, "implementation"), default=list(ALL),
                   help=f"comma-separated subset of {','.join(ALL)}")
    p.add_argument("--workloads", type=lambda s: _list(s, FAMILIES, "workload"),
                   default=list(FAMILIES), help=f"comma-separated subset of {','.join(FAMILIES)}")
    p.add_argument("--sizes", type=_ints, default=None,
                   help="chain sizes as powers of two, e.g. 10,14,18,22,26")
    p.add_argument("--elements", type=int, default=None, metavar="LOG2",
                   help="every elementwise, row-wise and scan workload at 2^LOG2 elements")
    p.add_argument("--chains", type=_ints, default=None,
                   help="chain lengths, e.g. 1,2,4,8,16,32")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds of timed samples per measurement (default per scale)")
    p.add_argument("--min-reps", type=int, default=5, help="fewest timed samples")
    p.add_argument("--no-system", action="store_true",
                   help="skip copy bandwidth, host overhead and cold compile measurements")
    p.add_argument("--json", metavar="PATH", help="write all numbers as JSON")
    p.add_argument("--png", metavar="PATH", help="write the two-panel plot (needs matplotlib)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import pyopencl as cl

    import fusejit

    from fusejit.bench import report
    from fusejit.bench.runner import Options, run

    scale = args.scale
    if scale == "auto":
        scale = "full" if fusejit.default_queue().device.type & cl.device_type.GPU else "small"
    opts = Options(scale=scale, impls=args.impls, families=args.workloads,
                   chain_sizes=[2**e for e in args.sizes] if args.sizes else None,
                   chain_lengths=args.chains,
                   elements=2**args.elements if args.elements else None,
                   budget_s=args.budget, min_reps=args.min_reps,
                   system=not args.no_system)
    doc = run(opts)
    print(report.table(doc))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1)
        print(f"\nwrote {args.json}")
    if args.png:
        skipped = report.plot(doc, args.png)
        print(f"note: {skipped}" if skipped else f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
