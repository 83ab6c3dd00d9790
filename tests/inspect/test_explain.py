"""f.explain(*args): the report, the memory-traffic estimate and the DAG picture."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from fusejit.inspect import explain as explain_module
from fusejit import fuse


def test_report_sections(rng):
    @fuse
    def softmax(x):
        unused = np.sin(x) * 3  # noqa: F841  (traced, never returned)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True), x.T + 1

    x = rng.standard_normal((4, 8)).astype(np.float32)
    e = softmax.explain(x)
    text = str(e)
    for section in ("== traced graph ==", "== passes ==", "== fusion groups ==",
                    "== memory traffic ==", "== kernel sources =="):
        assert section in text
    assert "3 never reach an output" in text  # sin, its constant, the product
    for name in ("fold", "simplify", "cse", "dce"):
        assert f"  {name} " in text
    assert "why: reduction over axes (1,)" in text
    assert "why: elementwise over (8, 4)" in text  # x.T + 1 has a kernel of its own
    assert text.count("      why: ") == len(e.lowered.module.kernels)
    assert e.lowered.source in text
    assert softmax.cache_info().currsize == 0  # nothing was built or launched


def test_memory_traffic_of_a_fused_chain():
    f = fuse(lambda x: np.exp(x) * 2 + 1)
    e = f.explain(np.zeros(1000, np.float32))
    # fused: read x, write the result; unfused: exp, mul and add each read and write 4000 B
    assert e.traffic.fused == 8000
    assert e.traffic.unfused == 24000
    assert "saved:   67%" in str(e)


def test_dot_has_one_cluster_per_kernel_and_every_edge(rng):
    f = fuse(lambda x: (x - x.mean(axis=0), x.T * 2))
    e = f.explain(rng.standard_normal((3, 5)).astype(np.float32))
    assert e.dot.startswith("digraph fused {") and e.dot.rstrip().endswith("}")
    for k in e.lowered.module.kernels:
        assert f"subgraph cluster_{k.name}" in e.dot
    edges = sum(len(n.srcs) for n in e.lowered.graph.toposort())
    assert e.dot.count(" -> n") == edges
    assert e.dot.count("peripheries=2") == 2  # the two outputs


def test_render_without_graphviz_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(explain_module.shutil, "which", lambda name: None)
    e = fuse(lambda x: x + 1).explain(np.zeros(3, np.float32))
    with pytest.raises(RuntimeError, match="Graphviz 'dot' executable"):
        e.render(tmp_path / "g.png")


def test_render_runs_dot(monkeypatch, tmp_path):
    fake = tmp_path / "dot"  # a stand-in for Graphviz: copies its input to the -o file
    fake.write_text('#!/bin/sh\nout="$3"\ncat > "$out"\necho "$1" >> "$out"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    e = fuse(lambda x: x + 1).explain(np.zeros(3, np.float32))
    out = e.render(tmp_path / "g.svg")
    assert out.read_text() == e.dot + "-Tsvg\n"


def test_explains_random_programs(queue):
    # scalar kernel arguments once crashed the traffic estimate: explain a spread of fuzz programs
    from fuzz.generator import RandomChooser, generate
    from fuzz.values import draw_inputs, place

    explained = 0
    for seed in range(60):
        program = generate(RandomChooser(seed))
        if program.raises:
            continue
        values = draw_inputs(program, seed)
        try:  # (a program NumPy itself rejects, e.g. a write into a NumPy scalar, is skipped)
            with np.errstate(all="ignore"):
                program.function()(*[np.copy(v) if isinstance(v, np.ndarray) else v
                                     for v in values])
        except Exception:  # noqa: BLE001 - NumPy's own verdict
            continue
        args = [place(v, a.layout, queue).value for v, a in zip(values, program.args)]
        e = fuse(program.function()).explain(*args)
        assert "== kernel sources ==" in str(e) and e.dot.startswith("digraph")
        assert e.traffic.fused >= 0 and e.traffic.unfused >= 0
        explained += 1
    assert explained > 40
