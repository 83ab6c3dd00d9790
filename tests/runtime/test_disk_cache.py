"""The persistent program cache and the autotune file: every corruption is a miss, one warning
and a rewrite, never a crash or a wrong result; concurrent processes (one killed mid-write)
all compute the right answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pyopencl as cl
import pytest

import fusejit
from fusejit.runtime import autotune, cache, files, pocl_cache
from fusejit.runtime.opencl import build
from fusejit.runtime.opencl.build import build_options, program_key
from fusejit.runtime.opencl.devices import device_info

ROOT = Path(__file__).resolve().parents[2]
# children import this checkout first, then whatever the parent could import
CHILD_PATH = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])


def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


X = np.linspace(-3, 3, 3000, dtype=np.float32)


@pytest.fixture
def cache_root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(files, "_warned", set())
    return tmp_path


def _call(fn=gelu) -> tuple[np.ndarray, fusejit.CacheInfo]:
    """A first call of a new fused function, as in a new process: the process's memo of
    built programs is emptied, so the program comes from the disk cache or the compiler."""
    with build._memo_lock:
        build._memo.clear()
    f = fusejit.fuse(fn)
    out = f(X)
    np.testing.assert_allclose(out, fn(X), rtol=2e-6, atol=1e-6)
    return out, f.cache_info()


def _entry(root: Path) -> Path:
    (path,) = (root / "programs").glob("*.fjc")
    return path


def _key(queue) -> cache.ProgramKey:
    source = fusejit.fuse(gelu).lower(X).source
    return program_key(queue.device, source, build_options(device_info(queue.device)))


def test_entry_roundtrip_and_disk_hit(cache_root):
    _, info = _call()
    assert (info.traces, info.compiles, info.disk_hits) == (1, 1, 0)
    path = _entry(cache_root)
    assert path.stat().st_mode & 0o777 == 0o600
    assert (cache_root / "programs").stat().st_mode & 0o777 == 0o700
    assert path.read_bytes().startswith(cache.MAGIC)
    _, info = _call()
    assert (info.traces, info.compiles, info.disk_hits) == (1, 0, 1)


def test_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", "0")
    _, info = _call()
    assert info.disk_hits == 0 and cache.program_cache() is None


def _flip(d: bytes) -> bytes:
    return d[:-1] + bytes([d[-1] ^ 0xFF])


def _reencode(d: bytes, meta: bytes, binary: bytes) -> bytes:
    import hashlib
    import struct

    payload = struct.pack("<I", len(meta)) + meta + binary
    return cache.MAGIC + struct.pack("<Q", len(payload)) + hashlib.sha256(payload).digest() + \
        payload


def _other_program_binary(queue) -> bytes:
    prg = cl.Program(queue.context, "__kernel void other(__global float *x) { x[0] = 1; }")
    return prg.build().get_info(cl.program_info.BINARIES)[0]


# each mode: (entry bytes, key, queue) -> new bytes, or None when it changes the path itself
CORRUPTIONS = {
    "empty": lambda d, k, q: b"",
    "truncated_header": lambda d, k, q: d[:20],
    "truncated_payload": lambda d, k, q: d[: len(d) // 2],
    "bad_magic": lambda d, k, q: b"NOTMAGIC" + d[8:],
    "flipped_byte": lambda d, k, q: _flip(d),
    "appended_garbage": lambda d, k, q: d + b"garbage",
    "random_bytes": lambda d, k, q: os.urandom(4096),
    "metadata_not_json": lambda d, k, q: _reencode(d, b"{not json", b"\0" * 64),
    "metadata_not_object": lambda d, k, q: _reencode(d, b"[1, 2]", b"\0" * 64),
    "entry_for_other_key": lambda d, k, q: cache.encode_entry(
        cache.ProgramKey("0" * 64, (), "p", "d", "v", "0"), cache.Entry(b"x" * 64, ())),
    "binary_len_lies": lambda d, k, q: _reencode(d, json.dumps(
        {"key": k.as_json(), "kernels": ["fj_k0"], "binary_len": 5}).encode(), b"\0" * 64),
    "garbage_binary": lambda d, k, q: cache.encode_entry(
        k, cache.Entry(b"poclbin\0" + os.urandom(2000), ("fj_k0",))),
    "binary_of_other_program": lambda d, k, q: cache.encode_entry(
        k, cache.Entry(_other_program_binary(q), ("fj_k0",))),
}


@pytest.mark.parametrize("mode", sorted(CORRUPTIONS) + ["directory", "symlink"])
def test_bad_entry_is_a_miss_one_warning_and_rewritten(cache_root, queue, mode):
    _call()
    path = _entry(cache_root)
    good = path.read_bytes()
    if mode == "directory":
        path.unlink()
        (path / "sub").mkdir(parents=True)
    elif mode == "symlink":
        elsewhere = cache_root / "elsewhere.fjc"
        elsewhere.write_bytes(good)
        path.unlink()
        path.symlink_to(elsewhere)
    else:
        path.write_bytes(CORRUPTIONS[mode](good, _key(queue), queue))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, info = _call()
    ours = [w for w in caught if issubclass(w.category, cache.CacheWarning)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert (info.compiles, info.disk_hits) == (1, 0)
    assert path.is_file() and not path.is_symlink()
    cache.decode_entry(path.read_bytes(), _key(queue))  # rewritten whole
    if mode == "symlink":
        assert (cache_root / "elsewhere.fjc").read_bytes() == good  # target untouched
    _, info = _call()
    assert (info.compiles, info.disk_hits) == (0, 1)


def test_eviction_keeps_the_cap(cache_root, monkeypatch):
    monkeypatch.setenv("FUSEJIT_CACHE_MAX_BYTES", "1")
    _call()
    _call(lambda x: x * 3 + 1)
    assert len(list((cache_root / "programs").glob("*.fjc"))) <= 1


def test_stale_temp_files_are_swept(cache_root):
    _call()
    stale = cache_root / "programs" / ".x.fjc.1.1.dead.tmp"
    stale.write_bytes(b"half")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    cache.program_cache().evict()
    assert not stale.exists()


# -- autotune.json ----------------------------------------------------------------------------------


@pytest.fixture
def fresh_autotune(cache_root, monkeypatch):
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", False)
    return cache_root / "autotune.json"


@pytest.mark.parametrize("contents", [b"[]", b"null", b"[0, null]", b"[1, 100000]",
                                      b'{"k": [0, null]}', b'{"k": [1, 100000, 3]}',
                                      b'{"k": "x"}', b'{"a": [1,', b"\xff\xfe\x00",
                                      b'{"k": [true, null]}'])
def test_autotune_file_validated(fresh_autotune, contents):
    fresh_autotune.write_bytes(contents)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        autotune._load()
    assert len([w for w in caught if issubclass(w.category, cache.CacheWarning)]) == 1
    assert all(autotune._valid(list(v)) for v in autotune._memory.values())
    assert "k" not in autotune._memory


def test_autotune_entry_unfit_for_the_device_is_retuned(fresh_autotune, queue):
    items = autotune.MIN_ITEMS
    source = "__kernel void k(__global float *x) { x[get_global_id(0)] = 2.0f; }"
    knl = cl.Program(queue.context, source).build().k
    buf = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, items * 4)
    knl.set_arg(0, buf)
    tkey = autotune.key("dev", source, "k", items)
    fresh_autotune.write_text(json.dumps({tkey: [3, 64]}))  # not a candidate
    limits = device_info(queue.device).limits
    cfg = autotune.tune(queue, knl, tkey, items, limits.max_work_group, limits.is_gpu)
    assert cfg.local_size is None or cfg.local_size[0] <= limits.max_work_group
    saved = json.loads(fresh_autotune.read_text())
    assert saved[tkey] != [3, 64] and fresh_autotune.stat().st_mode & 0o777 == 0o600


def test_autotune_write_does_not_follow_a_symlink(fresh_autotune):
    target = fresh_autotune.parent / "victim"
    target.write_text("precious")
    fresh_autotune.symlink_to(target)
    autotune._memory["k"] = (1, None)
    autotune._save()
    assert target.read_text() == "precious" and not fresh_autotune.is_symlink()


# -- PoCL's kernel cache ----------------------------------------------------------------------------


_POCL_CHILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import numpy as np
    import fusejit
    from fusejit.runtime import pocl_cache
    restored = []
    real_restore = pocl_cache.restore
    pocl_cache.restore = lambda e: restored.append(len(e.extras)) or real_restore(e)
    x = np.linspace(-2, 2, 4099, dtype=np.float32)
    m = np.linspace(-1, 1, 33 * 65, dtype=np.float32).reshape(33, 65)
    out = fusejit.fuse(lambda x: np.sin(x) * 2 + 1)(x)
    np.testing.assert_allclose(out, np.sin(x) * 2 + 1, rtol=2e-6, atol=2e-6)
    s = fusejit.fuse(lambda m: m - m.max(axis=1, keepdims=True))(m)
    np.testing.assert_array_equal(s, m - m.max(axis=1, keepdims=True))
    run = os.environ["POCL_CACHE_DIR"]
    print("OK", run, sum(restored), flush=True)
    if os.environ.get("FJ_KILLED"):
        os._exit(0)  # (as a killed process: no exit handlers)
""")


def _pocl_child(env: dict) -> tuple[Path, int]:
    """(the child's PoCL directory, how many extra files it restored from entries)"""
    p = subprocess.run([sys.executable, "-c", _POCL_CHILD], env=env, capture_output=True,
                       text=True, timeout=240, check=False)
    assert p.returncode == 0 and p.stdout.startswith("OK"), (p.returncode, p.stderr[-3000:])
    _, run, sos = p.stdout.split()
    return Path(run), int(sos)


def _pocl_env(root: Path, **more: str) -> dict:
    env = dict(os.environ, FUSEJIT_CACHE_DIR=str(root), PYTHONPATH=CHILD_PATH, **more)
    env.pop("POCL_CACHE_DIR", None)
    return env


@pytest.mark.parametrize("damage", ["flip_bit", "random", "empty", "truncated", "garbage_bc"])
def test_pocl_files_of_earlier_processes_are_never_loaded(tmp_path, damage):
    """Every PoCL file a killed process left behind is damaged: later processes never load
    them (each has its own directory, filled only from checksummed entries), compute the
    right values, and delete the dead process's directory."""
    first, _ = _pocl_child(_pocl_env(tmp_path, FJ_KILLED="1"))
    sos = sorted(first.rglob("*.so"))
    assert sos  # (left behind: no exit handler ran)
    for so in sos:
        data = so.read_bytes()
        if damage == "flip_bit":
            so.write_bytes(data[:len(data) // 2] + bytes([data[len(data) // 2] ^ 0x10]) +
                           data[len(data) // 2 + 1:])
        elif damage == "random":
            so.write_bytes(os.urandom(len(data)))
        elif damage == "empty":
            so.write_bytes(b"")
        elif damage == "truncated":
            so.write_bytes(data[:len(data) // 3])
    for bc in first.rglob("program.bc"):
        if damage == "garbage_bc":
            bc.write_bytes(os.urandom(4000))
    second, _ = _pocl_child(_pocl_env(tmp_path))
    assert second != first and not first.exists() and not second.exists()


def test_pocl_kernel_objects_come_back_from_the_entries(tmp_path):
    """What PoCL compiled at first launch (a kernel object per work-group size) is kept in the
    program's entry and restored in the next process: no recompile, same values."""
    env = _pocl_env(tmp_path)
    _pocl_child(env)
    assert any(b".so" in p.read_bytes() for p in (tmp_path / "programs").glob("*.fjc"))
    _, restored = _pocl_child(env)
    assert restored >= 2  # (kernel objects written back from the two programs' entries)


def test_pocl_directories_end_with_their_processes(tmp_path):
    env = _pocl_env(tmp_path)
    runs = [_pocl_child(env)[0] for _ in range(2)]
    assert runs[0] != runs[1] and not any(r.exists() for r in runs)


def test_pocl_restore_skips_names_outside_the_program_directory(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setattr(pocl_cache, "_run", [run])
    monkeypatch.setenv("POCL_CACHE_DIR", str(run))
    binary = b"poclbin\0" + b"\0" * 20 + b"AB/" + b"C" * 37 + b"\0" * 40
    entry = cache.Entry(binary, (), (("../../escape.so", b"x"), ("/abs.so", b"x"),
                                     ("k/8-1-1/k.so", b"ok")))
    pocl_cache.restore(entry)
    assert (run / "AB" / ("C" * 37) / "k/8-1-1/k.so").read_bytes() == b"ok"
    assert not (tmp_path / "escape.so").exists() and not Path("/abs.so").exists()
    assert sorted(p.name for p in run.rglob("*.so")) == ["k.so"]


# -- processes racing on one cache ------------------------------------------------------------------

_CHILD = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import fusejit
    from fusejit.runtime import cache
    if sys.argv[1] == "die":  # stop half-way through the first entry write
        real = cache.atomic_write
        def stuck(path, data):
            if path.suffix == ".fjc":
                tmp = path.parent / f".{path.name}.{os.getpid()}.0.dead.tmp"
                with open(tmp, "wb") as f:
                    f.write(data[: len(data) // 2]); f.flush()
                print("WRITING", flush=True)
                time.sleep(600)
            return real(path, data)
        cache.atomic_write = stuck
    x = np.linspace(-2, 2, 5000, dtype=np.float32)
    fns = [lambda x: np.tanh(x) * 2 + 1, lambda x: np.exp(-x * x) - x]
    for fn in fns:
        out = fusejit.fuse(fn)(x)
        np.testing.assert_allclose(out, fn(x), rtol=2e-6, atol=2e-6)
    print("OK", flush=True)
""")


def test_four_processes_one_killed_mid_write(tmp_path):
    env = dict(os.environ, FUSEJIT_CACHE_DIR=str(tmp_path), PYTHONPATH=CHILD_PATH)
    env.pop("POCL_CACHE_DIR", None)
    cmd = [sys.executable, "-c", _CHILD]
    victim = subprocess.Popen(cmd + ["die"], env=env, stdout=subprocess.PIPE, text=True)
    others: list[subprocess.Popen] = []
    try:
        # the others start once the victim is stuck in its write (started together, a fast
        # device let another process store the entry first, and the victim never wrote); all
        # four then compile the same functions while the victim's half entry is on disk
        assert victim.stdout.readline().strip() == "WRITING"
        others += [subprocess.Popen(cmd + ["run"], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for _ in range(3)]
        time.sleep(0.5)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        for p in others:
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0 and out.strip() == "OK", err
    finally:
        for p in (victim, *others):
            if p.poll() is None:
                p.kill()
            p.communicate()
    assert list((tmp_path / "programs").glob(".*.tmp"))  # the victim's half entry, ignored
    after = subprocess.run(cmd + ["run"], env=env, capture_output=True, text=True, timeout=240, check=False)
    assert after.returncode == 0 and after.stdout.strip() == "OK", after.stderr


def test_child_process_gets_its_own_pocl_directory(tmp_path):
    """A child inherits the parent's POCL_CACHE_DIR in its environment; fusejit gives it its
    own directory (the parent's is deleted once the parent ends, under a live child)."""
    env = _pocl_env(tmp_path)
    code = ("import os, subprocess, sys; import fusejit; fusejit.default_queue(); "
            "mine = os.environ['POCL_CACHE_DIR']; "
            "child = subprocess.run([sys.executable, '-c', 'import os, fusejit; "
            "fusejit.default_queue(); print(os.environ[\"POCL_CACHE_DIR\"])'], "
            "capture_output=True, text=True, check=True).stdout.strip(); "
            "print(mine != child and os.path.isdir(mine), flush=True)")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=240, check=False)
    assert p.stdout.strip() == "True", p.stderr[-3000:]
    user = dict(env, POCL_CACHE_DIR=str(tmp_path / "mine"))  # a user's choice is kept
    p = subprocess.run([sys.executable, "-c", "import os, fusejit; fusejit.default_queue(); "
                        "print(os.environ['POCL_CACHE_DIR'])"], env=user, capture_output=True,
                       text=True, timeout=240, check=False)
    assert p.stdout.strip() == str(tmp_path / "mine"), p.stderr[-3000:]
