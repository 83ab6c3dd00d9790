"""Presenting a results document: the stdout table and the two-panel PNG."""

from __future__ import annotations

import math
from typing import Any

from fusejit.bench.backends import ALL


def _ms(cell: dict[str, Any] | None, key: str = "ms") -> str:
    if cell is None:
        return "-"
    status = cell["status"]
    if status != "ok":
        return "fail" if status.startswith("failed") else "n/a"
    ms = cell[key]
    text = f"{ms:.3g}" if ms < 1000 else f"{ms:.0f}"
    return text + ("" if cell["matches"] else "!")


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _shape(rec: dict[str, Any]) -> str:
    """The case's size with its unit: elements (a power of two as 2^k), or the shape."""
    shape = rec["shape"]
    if len(shape) == 1 and shape[0] & (shape[0] - 1) == 0:
        return f"2^{int(math.log2(shape[0]))} el"
    return "x".join(map(str, shape)) + " el"


def _bytes(n: float) -> str:
    """A byte count with its unit (decimal: kB, MB, GB, as bandwidths in GB/s are)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _pct_copy(gbs: float | None, copy: float | None) -> str:
    """% of the copy bandwidth; above 100 % the data stayed in a cache (marked '*')."""
    if not gbs or not copy:
        return "-"
    pct = 100 * gbs / copy
    return f"{pct:.0f}%" + ("*" if pct > 100 else "")


def table(doc: dict[str, Any]) -> str:
    """The human-readable summary: device facts, then one row per case."""
    lines: list[str] = []
    dev = doc["device"]
    lines.append(f"fusejit {doc['fusejit_version']} benchmark, scale {doc['scale']}: "
                 f"{dev['name']} ({dev['platform']}, {dev['type']}, {dev['compute_units']} CUs)")
    load = doc["machine"].get("loadavg_at_start")
    if load:
        lines.append(f"host: {doc['machine']['cpus']} CPUs, load average at start "
                     f"{load[0]:.2f} (other processes distort CPU timings)")
    sysm = doc.get("system", {})
    copy = sysm.get("copy")
    if copy:
        lines.append(f"copy bandwidth (enqueue_copy {copy['bytes'] >> 20} MiB, read+write): "
                     f"{copy['gbs']:.1f} GB/s (best {copy['best_gbs']:.1f})")
    ov = sysm.get("overhead")
    if ov:
        f, u, r = ov["fused"], ov["unfused_4_launches"], ov["raw_pyopencl_launch"]
        lines.append(
            f"host overhead, {ov['elements']}-element {ov['ops']}-op chain, per call incl. "
            f"finish (batched): fused {f['us_per_call']:.1f} us ({f['us_per_call_batched']:.1f}) "
            f"| unfused {u['us_per_call']:.1f} us ({u['us_per_call_batched']:.1f}) "
            f"| raw pyopencl launch {r['us_per_call']:.1f} us ({r['us_per_call_batched']:.1f})")
    cold = sysm.get("cold_gelu")
    if cold:
        if cold["status"] == "ok":
            lines.append(
                f"cold GELU first call (2^{int(math.log2(cold['size']))}, caches off): "
                f"{cold['first_call_s'] * 1e3:.0f} ms = trace+passes+emit "
                f"{cold['python_side_s'] * 1e3:.1f} ms + build+launch "
                f"{cold['build_and_launch_s'] * 1e3:.0f} ms; second call (autotunes) "
                f"{cold['second_call_s'] * 1e3:.1f} ms, warm {cold['warm_call_s'] * 1e3:.1f} ms")
        else:
            lines.append(f"cold GELU first call: {cold['status']}")

    impls = doc["implementations"]
    cols = [n for n in ALL if impls.get(n, {}).get("status") == "ok"]
    lines.append("implementations: " + "; ".join(
        f"{n} {impls[n]['version']} on {impls[n]['device']}" for n in cols))
    lines.append("")
    lines += _cases(doc, cols, "ms")
    if all("batched_ms" in c for rec in doc["results"] for c in rec["impls"].values()
           if c["status"] == "ok"):
        lines += ["", _THROUGHPUT, ""]
        lines += _cases(doc, cols, "batched_ms")
    notes = [f"{n}: {v['status']}" for n, v in impls.items() if v["status"] != "ok"]
    failures = sorted({f"{n}: {c['status']}" for rec in doc["results"]
                       for n, c in rec["impls"].items() if c["status"] != "ok"})
    lines.append("")
    lines.append("ms = median of synchronized calls; '!' = disagrees with NumPy; "
                 "vs X = X time / fused time; GB/s = minimal bytes (inputs read once, outputs "
                 "written once) / fused time; % copy = of the copy bandwidth above, '*' = "
                 "above 100 %: cache-resident (the data fits in a cache, faster than a copy "
                 "through memory)")
    if notes:
        lines.append("not run: " + "; ".join(notes))
    lines += [f"  {f}" for f in failures]
    return "\n".join(lines)


_THROUGHPUT = ("throughput: ms per call with calls enqueued back to back and one wait at the "
               "end (the launch latency hides behind the previous call):")


def _cases(doc: dict[str, Any], cols: list[str], key: str) -> list[str]:
    """One row per case: each implementation's ``key`` time, ratios and fused bandwidth."""
    copy = doc.get("system", {}).get("copy", {}).get("gbs")
    vk = ["vulkan GB/s", "vulkan/fused"] if "vulkan" in cols else []
    head = ["case", "size", "moved"] + [f"{c} ms" for c in cols] + [
        "vs unfused", "vs numpy", "fused GB/s", "% copy"] + vk
    rows = [head]
    for rec in doc["results"]:
        cells = rec["impls"]
        times = {n: c[key] for n, c in cells.items() if c["status"] == "ok"}
        fused = times.get("fused")
        gbs = rec["bytes"] / fused / 1e6 if fused else None
        rows.append([rec["name"].split("/")[0], _shape(rec), _bytes(rec["bytes"])]
                    + [_ms(cells.get(c), key) for c in cols]
                    + [_x(times[o] / fused if fused and o in times else None)
                       for o in ("unfused", "numpy")]
                    + [f"{gbs:.1f}" if gbs else "-", _pct_copy(gbs, copy)]
                    + ([_vulkan_cell(rec, times)[k] for k in (0, 1)] if vk else []))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = []
    for j, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def _vulkan_cell(rec: dict[str, Any], times: dict[str, float]) -> tuple[str, str]:
    """The Vulkan target's bandwidth, and its time over the OpenCL target's (fused)."""
    vk, fused = times.get("vulkan"), times.get("fused")
    return (f"{rec['bytes'] / vk / 1e6:.1f}" if vk else "-",
            f"{vk / fused:.2f}x" if vk and fused else "-")


def plot(doc: dict[str, Any], path: str) -> str | None:
    """Write the two-panel PNG; returns why it was skipped, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, NullFormatter
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib); no PNG written"

    results = doc["results"]
    chains = [r for r in results if r["family"] == "chain"]
    others = [r for r in results if r["family"] != "chain"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 6.2))
    dev = doc["device"]
    fig.suptitle(f"fusejit {doc['fusejit_version']} on {dev['name']} ({dev['platform']}), "
                 f"scale {doc['scale']}", fontsize=11)

    def ms(rec: dict[str, Any], impl: str) -> float | None:
        cell = rec["impls"].get(impl, {})
        return cell.get("ms") if cell.get("status") == "ok" else None

    # left: speedup of fused over unfused vs chain length, one line per size
    sizes = sorted({r["size"] for r in chains})
    cmap = plt.get_cmap("viridis")
    for i, size in enumerate(sizes):
        pts = sorted((r["chain"], ms(r, "unfused") / ms(r, "fused")) for r in chains
                     if r["size"] == size and ms(r, "fused") and ms(r, "unfused"))
        if pts:
            ax1.plot(*zip(*pts), "o-", color=cmap(i / max(1, len(sizes) - 1)),
                     label=f"2^{int(math.log2(size))} elements")
    ax1.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax1.yaxis.set_minor_formatter(NullFormatter())
    ax1.set_xlabel("ops in the chain")
    ax1.set_ylabel("speedup: unfused time / fused time")
    ax1.set_title("fused vs unfused (same OpenCL device)", fontsize=10)
    lengths = sorted({r["chain"] for r in chains})
    if lengths:
        ax1.set_xticks(lengths, [str(n) for n in lengths])
    ax1.grid(True, which="both", alpha=0.3)
    if sizes:
        ax1.legend(fontsize=8)

    # right: achieved GB/s (minimal bytes / time) against the copy roofline
    copy = doc.get("system", {}).get("copy", {}).get("gbs")
    if copy:
        ax2.axhline(copy, color="black", ls="--", lw=1)
        ax2.text(0.99, copy, f"copy bandwidth (enqueue_copy) {copy:.1f} GB/s ",
                 transform=ax2.get_yaxis_transform(), ha="right", va="bottom", fontsize=8)
    shown = lengths if len(lengths) <= 4 else [n for n in lengths if n in (1, 4, 16, 32)]
    for i, n in enumerate(lengths):
        if n not in shown:
            continue
        color = plt.get_cmap("plasma")(0.85 * i / max(1, len(lengths) - 1))
        for impl, style in (("fused", "o-"), ("unfused", "x:")):
            pts = sorted((r["bytes"], r["bytes"] / ms(r, impl) / 1e6) for r in chains
                         if r["chain"] == n and ms(r, impl))
            if pts:
                ax2.plot(*zip(*pts), style, color=color, ms=4,
                         label=f"chain {n} {impl}")
    # every workload marker is named by the legend (one colour per workload), not by text
    # next to it, which overlapped where workloads move similar byte counts
    palette = plt.get_cmap("tab10")
    for k, r in enumerate(others):
        color = palette(k % 10)
        for impl, marker in (("fused", "*"), ("unfused", "P"), ("numpy", "s")):
            t = ms(r, impl)
            if t:
                ax2.plot(r["bytes"], r["bytes"] / t / 1e6, marker, color=color,
                         ms=9 if impl == "fused" else 6,
                         label=f"{r['family']} {impl}" if impl == "fused" else None)
    if others:
        for impl, marker in (("fused", "*"), ("unfused", "P"), ("numpy", "s")):
            ax2.plot([], [], marker, color="black", label=f"marker: {impl}")
    ax2.set_xscale("log")
    ax2.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _bytes(v)))  # (after set_xscale)
    ax2.set_yscale("log")
    ax2.set_xlabel("minimal bytes moved per call (inputs read once, outputs written once)")
    ax2.set_ylabel("achieved GB/s")
    ax2.set_title("achieved bandwidth vs copy roofline", fontsize=10)
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.13))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
