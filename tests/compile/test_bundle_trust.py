"""The bundle trust model (fusejit/compile/bundle_trust.py) against crafted bundles: a swapped
native binary, a rewritten source, a rewritten output shape, an object dtype. Each crafted
bundle has a valid checksum (anyone can compute one). Untrusted by default: the binary is never
loaded, inconsistent metadata are a BundleError; a signed bundle changed after signing is
refused. Loads run in a subprocess where a crash would otherwise take pytest down."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl
import pytest

import fusejit
from fusejit.compile import aot

ROOT = Path(__file__).resolve().parents[2]
CHILD_PATH = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
X = np.linspace(-1, 1, 1024, dtype=np.float32)
KEY = b"team secret"


def double_plus_one(x):
    return x * 2 + 1


def _export(path: Path, key: bytes | None = None) -> Path:
    return aot.export(fusejit.fuse(double_plus_one), [(X,)], path, key=key)


def _open(path: Path) -> tuple[dict, list[bytes]]:
    data = path.read_bytes()
    payload = data[aot._HEADER.size:]
    (n,) = struct.unpack_from("<I", payload)
    manifest = json.loads(payload[4:4 + n])
    blobs, at = [], 4 + n
    for size in manifest["blobs"]:
        blobs.append(payload[at:at + size])
        at += size
    return manifest, blobs


def _write(path: Path, manifest: dict, blobs: list[bytes]) -> None:
    """A bundle with a valid checksum (what an attacker writes)."""
    manifest["blobs"] = [len(b) for b in blobs]
    meta = json.dumps(manifest).encode()
    payload = struct.pack("<I", len(meta)) + meta + b"".join(blobs)
    path.write_bytes(aot._HEADER.pack(aot.MAGIC, len(payload), hashlib.sha256(payload).digest())
                     + payload)


def _other_binary(queue) -> bytes:
    """A PoCL binary of a kernel of the same name and arguments that writes 1024 x 7."""
    source = ("__kernel void fj_k0(__global const float * restrict p0, "
              "__global float * restrict out0) { out0[get_global_id(0)] = 7.0f; }")
    return bytes(cl.Program(queue.context, source).build().get_info(
        cl.program_info.BINARIES)[0])


def _craft(tmp_path: Path, how: str, queue) -> Path:
    path = _export(tmp_path / f"{how}.fjb")
    manifest, blobs = _open(path)
    e = manifest["entries"][0]
    if how == "native_swap":
        for b in e["binaries"]:
            blobs[b["blob"]] = _other_binary(queue)
    elif how == "source_args":  # a kernel that takes what the metadata do not give it
        e["source"] = e["source"].replace("__global float * restrict out0)",
                                          "__global float * restrict out0, __global int *x)")
    elif how == "source_types":  # elements of another size than the buffers'
        e["source"] = e["source"].replace("__global float * restrict out0",
                                          "__global double * restrict out0")
    elif how == "source_values":  # same arguments, other values: only its digest tells
        assert "(v0 * 0x1p+1f)" in e["source"]
        e["source"] = e["source"].replace("(v0 * 0x1p+1f)", "(v0 * 0x1.8p+1f)")
    elif how == "shape":
        e["graph_outputs"][0]["shape"] = [1]
    elif how == "dtype":
        e["graph_outputs"][0]["dtype"] = "|O"
    elif how == "param_shape":  # a parameter larger than the argument it reads
        e["params"][0]["shape"] = [4096]
    _write(path, manifest, blobs)
    return path


_LOAD = """
import sys, numpy as np, fusejit
x = np.linspace(-1, 1, 1024, dtype=np.float32)
try:
    f = fusejit.load(sys.argv[1], **eval(sys.argv[2]))
    out = f(x)
except fusejit.BundleError as exc:
    print("BundleError", exc)
else:
    print("RESULT", "right" if np.array_equal(out, x * 2 + 1) else "wrong",
          f.builds, f.binary_loads)
"""


def _load_in_child(path: Path, **kwargs) -> str:
    env = dict(os.environ, PYTHONPATH=CHILD_PATH)
    p = subprocess.run([sys.executable, "-c", _LOAD, str(path), repr(kwargs)], env=env,
                       capture_output=True, text=True, timeout=240, check=False)
    assert p.returncode == 0, (p.returncode, p.stderr[-3000:])
    return p.stdout.strip()


def test_a_bundle_loads_untrusted_from_its_source(tmp_path):
    path = _export(tmp_path / "f.fjb")
    f = fusejit.load(path)
    np.testing.assert_array_equal(f(X), X * 2 + 1)
    assert f.binary_loads == 0 or f.builds == 0  # (no stored binary was loaded: the disk
    # cache may hold the program the export built)
    assert not f.trusted


def test_native_binary_swap_never_runs_by_default(tmp_path, queue):
    path = _craft(tmp_path, "native_swap", queue)
    assert _load_in_child(path).startswith("RESULT right")
    # trust=True is the opt-in that runs the stored binary: what was swapped in runs
    assert _load_in_child(path, trust=True).startswith("RESULT wrong 0 1")


@pytest.mark.parametrize("how", ["source_args", "source_types", "source_values", "shape",
                                 "dtype", "param_shape"])
def test_inconsistent_bundle_is_a_bundle_error(tmp_path, queue, how):
    out = _load_in_child(_craft(tmp_path, how, queue))
    assert out.startswith("BundleError"), out


@pytest.mark.parametrize("how", ["native_swap", "source_values", "shape", "dtype"])
def test_signed_bundle_changed_after_signing_is_refused(tmp_path, queue, how):
    path = _export(tmp_path / "signed.fjb", key=KEY)
    mac = path.read_bytes()[-32:]
    crafted = _craft(tmp_path, how, queue)  # (the same function, then changed)
    crafted.write_bytes(crafted.read_bytes() + b"FJHMAC01" + mac)
    with pytest.raises(fusejit.BundleError, match="not signed with this key"):
        fusejit.load(crafted, key=KEY)


def test_signed_bundle_loads_its_binary_with_the_key(tmp_path):
    path = _export(tmp_path / "signed.fjb", key=KEY)
    assert _load_in_child(path, key=KEY).startswith("RESULT right 0 1")
    assert _load_in_child(path).startswith("RESULT right")  # (untrusted: from its source)
    with pytest.raises(fusejit.BundleError, match="not signed with this key"):
        fusejit.load(path, key=b"another key")
    unsigned = _export(tmp_path / "unsigned.fjb")
    with pytest.raises(fusejit.BundleError, match="not signed"):
        fusejit.load(unsigned, key=KEY)


@pytest.mark.parametrize("damage", ["truncated", "trailing", "not_json", "bad_blobs"])
def test_damaged_bundle_is_a_bundle_error_naming_the_path(tmp_path, damage):
    path = _export(tmp_path / "f.fjb")
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif damage == "trailing":
        path.write_bytes(data + b"x" * 7)
    elif damage == "not_json":
        payload = struct.pack("<I", 5) + b"{nope"
        path.write_bytes(aot._HEADER.pack(aot.MAGIC, len(payload),
                                          hashlib.sha256(payload).digest()) + payload)
    else:
        manifest, blobs = _open(path)
        _write(path, manifest, blobs)
        manifest["blobs"] = [-5]
        meta = json.dumps(manifest).encode()
        payload = struct.pack("<I", len(meta)) + meta
        path.write_bytes(aot._HEADER.pack(aot.MAGIC, len(payload),
                                          hashlib.sha256(payload).digest()) + payload)
    with pytest.raises(fusejit.BundleError, match=str(path)):
        fusejit.load(path)
