"""The fault matrix of fusejit's caches: special files in an entry's place, stored GEMM
configurations that cannot run the product, directories of another user or writable by
others, full and read-only file systems. Every case ends in a right result or a named error
(with a CacheWarning naming the directory and the cause), never a hang, crash or wrong value.
Cases that could hang or crash run in a subprocess with a timeout. (PoCL's own files:
tests/runtime/test_disk_cache.py; bundles: tests/compile/test_bundle_trust.py.)"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import fusejit
from fusejit.codegen.gemm import simt
from fusejit.passes.host_gemm import kept_in_kernels
from fusejit.runtime import autotune, cache, files
from fusejit.runtime.opencl import build, gemm_bench

ROOT = Path(__file__).resolve().parents[2]
CHILD_PATH = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
OTHER_UID = 54321


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(d))
    monkeypatch.setattr(files, "_warned", set())
    cache.forget_dir()
    yield d
    cache.forget_dir()


def _ours(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, files.CacheWarning)]


# -- reads that cannot block or exhaust -------------------------------------------------------------


def test_read_regular_refuses_what_is_not_a_regular_file(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "big")
    (tmp_path / "big").write_bytes(b"x" * 100)
    for path, words in ((fifo, "FIFO"), (tmp_path / "dir", "directory"),
                        (Path("/dev/zero"), "character device"), (tmp_path / "link", "symlink")):
        with pytest.raises(files.NotRegularFile, match=words):
            files.read_regular(path)
    with pytest.raises(files.NotRegularFile, match="more than 10"):
        files.read_regular(tmp_path / "big", limit=10)
    assert files.read_regular(tmp_path / "link", follow=True) == b"x" * 100
    assert files.read_regular(tmp_path / "absent") is None


_CHILD = textwrap.dedent("""
    import os, sys, warnings
    import numpy as np
    import fusejit
    from fusejit.passes.host_gemm import kept_in_kernels
    warnings.simplefilter("always")
    x = np.linspace(-2, 2, int(os.environ.get("FJ_N", 3001)), dtype=np.float32)
    f = fusejit.fuse(lambda x: np.tanh(x) * 2 + 1)
    out = f(x)
    out = f(x)  # (a large launch tunes at its second call, reading autotune.json)
    np.testing.assert_allclose(out, np.tanh(x) * 2 + 1, rtol=2e-6, atol=2e-6)
    a = np.linspace(-1, 1, 37 * 29, dtype=np.float32).reshape(37, 29)
    b = np.linspace(-1, 1, 29 * 41, dtype=np.float32).reshape(29, 41)
    with kept_in_kernels():
        p = fusejit.fuse(lambda a, b: a @ b)(a, b)
    np.testing.assert_allclose(p, a @ b, rtol=1e-5, atol=1e-5)
    print("OK", flush=True)
""")


def _run_child(env: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def _env(root: Path, **more: str) -> dict:
    env = dict(os.environ, FUSEJIT_CACHE_DIR=str(root), PYTHONPATH=CHILD_PATH,
               FUSEJIT_TRACE_CACHE="1", **more)
    env.pop("POCL_CACHE_DIR", None)
    return env


@pytest.mark.parametrize("where", ["entry", "autotune.json", "gemm.json", "gemm.json->zero"])
def test_special_file_in_a_cache_file_s_place_never_hangs(tmp_path, where):
    """A FIFO (or a link to /dev/zero) where a cache file belongs: the process neither blocks
    nor reads without bound; it warns, computes the right values, and replaces the file."""
    env = _env(tmp_path, FJ_N=str(autotune.MIN_ITEMS * 16 if where == "autotune.json" else 3001))
    first = _run_child(env)
    assert first.returncode == 0 and "OK" in first.stdout, first.stderr[-3000:]
    if where == "entry":
        victims = sorted((tmp_path / "programs").glob("*.fjc"))
    else:
        victims = [tmp_path / where.split("->")[0]]
    for v in victims:
        with contextlib.suppress(FileNotFoundError):
            v.unlink()
        if where.endswith("zero"):
            v.symlink_to("/dev/zero")
        else:
            os.mkfifo(v)
    again = _run_child(env, timeout=120)  # (a hang is a TimeoutExpired: the test fails)
    assert again.returncode == 0 and "OK" in again.stdout, again.stderr[-3000:]
    assert "CacheWarning" in again.stderr and "not a regular file" in again.stderr


def test_load_of_a_fifo_raises_instead_of_blocking(tmp_path):
    fifo = tmp_path / "bundle.fjb"
    os.mkfifo(fifo)
    code = ("import fusejit, sys\ntry:\n    fusejit.load(sys.argv[1])\n"
            "except fusejit.BundleError as e:\n    print('BundleError', e)\n")
    p = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=CHILD_PATH), check=False)
    assert p.stdout.startswith("BundleError") and str(fifo) in p.stdout, p.stderr[-2000:]


@pytest.mark.parametrize("path", ["/etc", "/dev/zero", "/nonexistent/bundle.fjb"])
def test_load_of_what_is_not_a_bundle_names_the_path(path):
    with pytest.raises(fusejit.BundleError, match=path):
        fusejit.load(path)


# -- stored GEMM configurations ---------------------------------------------------------------------


A = np.linspace(-1, 1, 37 * 29, dtype=np.float32).reshape(37, 29)
B = np.linspace(-1, 1, 29 * 41, dtype=np.float32).reshape(29, 41)


@pytest.fixture
def gemm_file(root, monkeypatch):
    monkeypatch.setattr(gemm_bench, "_memory", {})
    monkeypatch.setattr(gemm_bench, "_loaded", False)
    keys: list[str] = []
    real = gemm_bench.lookup
    monkeypatch.setattr(gemm_bench, "lookup", lambda key: keys.append(key) or real(key))
    return keys


def _product(a=A, b=B) -> np.ndarray:
    with build._memo_lock:
        build._memo.clear()
    with kept_in_kernels():
        return fusejit.fuse(lambda a, b: a @ b)(a, b)


def _store_config(root: Path, key: str, cfg: dict, monkeypatch) -> None:
    (root / "gemm.json").write_text(json.dumps({key: cfg}))
    monkeypatch.setattr(gemm_bench, "_memory", {})
    monkeypatch.setattr(gemm_bench, "_loaded", False)


_SIMD = {"mwg": 48, "nwg": 8, "kwg": 1, "mdimc": 8, "ndimc": 2, "vw": 2, "group_m": 1,
         "local": False}


@pytest.mark.parametrize("cfg", [
    _SIMD,                                      # N = 41 is no whole number of float2
    {**_SIMD, "nwg": 12, "vw": 3},              # no float3 kernel
    {**_SIMD, "nwg": 64, "vw": 16},             # N % 16
    {"mwg": 32, "nwg": 32, "kwg": 8, "mdimc": 8, "ndimc": 8, "vw": 1, "split": 3},  # K split
    {"mwg": 4096, "nwg": 64, "kwg": 1, "mdimc": 1, "ndimc": 1, "local": False},     # runaway
    {"mwg": 16, "nwg": 16, "kwg": 1, "mdimc": 8, "ndimc": 8, "mma": "tf32"},      # not SIMT
], ids=["vw2", "vw3", "vw16", "split3", "huge", "mma"])
def test_stored_gemm_configuration_is_checked_for_the_shape(root, gemm_file, monkeypatch, cfg):
    _product()
    key = gemm_file[-1]
    _store_config(root, key, cfg, monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = _product()
    np.testing.assert_allclose(out, A @ B, rtol=1e-5, atol=1e-5)
    msgs = _ours(caught)
    assert len(msgs) == 1 and "gemm.json" in msgs[0] and key in msgs[0], msgs


def test_stored_gemm_configuration_that_fits_is_used(root, gemm_file, monkeypatch):
    _product()
    good = {"mwg": 16, "nwg": 16, "kwg": 1, "mdimc": 4, "ndimc": 4, "vw": 1, "local": False}
    _store_config(root, gemm_file[-1], good, monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kept_in_kernels():
            low = fusejit.fuse(lambda a, b: a @ b).lower(A, B)
    assert not _ours(caught) and "reqd_work_group_size(16, 1, 1)" in low.source  # (4 x 4)


def test_random_stored_gemm_configurations_never_give_wrong_values(root, gemm_file,
                                                                   monkeypatch):
    """Random well-formed configurations (what ``_well_formed`` lets through) for odd shapes:
    each is used only when it passes the generated configurations' check."""
    rng = random.Random(7)
    shapes = [((37, 29), (29, 41)), ((64, 48), (48, 96))]
    for (ma, mb) in shapes:
        a = np.linspace(-1, 1, np.prod(ma), dtype=np.float32).reshape(ma)
        b = np.linspace(-1, 1, np.prod(mb), dtype=np.float32).reshape(mb)
        _product(a, b)
        key = gemm_file[-1]
        for _ in range(5):
            mdimc, ndimc = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4, 8])
            cfg = {"mwg": mdimc * rng.choice([1, 2, 4, 6]), "nwg": ndimc * rng.choice([1, 2, 4]),
                   "kwg": rng.choice([1, 4, 8]), "mdimc": mdimc, "ndimc": ndimc,
                   "vw": rng.choice([1, 2, 3, 4, 8, 16]), "group_m": rng.choice([1, 8]),
                   "local": rng.random() < 0.4, "split": rng.choice([1, 1, 2, 3])}
            assert gemm_bench._well_formed(cfg)
            _store_config(root, key, cfg, monkeypatch)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", files.CacheWarning)
                out = _product(a, b)
            np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5, err_msg=str(cfg))


def test_generated_gemm_configurations_pass_the_same_check():
    from fusejit.passes.plan import DeviceLimits

    for limits in (DeviceLimits(is_gpu=False, max_work_group=4096),
                   DeviceLimits(is_gpu=True, max_work_group=1024, local_mem=48 << 10,
                                compute_units=80)):
        for m, n, k in ((37, 41, 29), (1024, 1024, 1024), (4096, 40, 4096), (7, 4096, 64)):
            for acc in (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)):
                cfg = simt.heuristic(m, n, k, 1, limits, acc)
                assert simt.unfit(cfg, m, n, k, 1, limits, acc) is None, (cfg, m, n, k)
        for cfg in simt.space(limits, np.dtype(np.float32)):
            assert simt.unfit(cfg, 1024, 1024, 1024, 1, limits, np.dtype(np.float32)) is None


def test_tuning_files_stay_bounded(root):
    cache.cache_dir()
    path = root / "autotune.json"
    data = {f"k{i}": [1, None] for i in range(autotune.MAX_ENTRIES + 50)}
    autotune.write_json(path, data)
    stored = json.loads(path.read_text())
    assert len(stored) == autotune.MAX_ENTRIES and "k0" not in stored and f"k{50}" in stored


# -- launch tuning keyed on the program ---------------------------------------------------------------


def test_launch_tuning_key_names_the_program_even_when_loaded_from_disk(root, monkeypatch):
    """Kernels loaded from the disk cache carry no source of their own: the key is the
    program's, so two functions loaded that way never share one entry."""
    monkeypatch.setenv("FUSEJIT_TRACE_CACHE", "1")
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", False)
    keys: list[str] = []
    real = autotune.tune
    monkeypatch.setattr(autotune, "tune", lambda q, k, tkey, *a: keys.append(tkey) or
                        real(q, k, tkey, *a))
    x = np.linspace(-1, 1, autotune.MIN_ITEMS * 8, dtype=np.float32)
    fns = [lambda x: x * 3 + 1, lambda x: np.abs(x) - 2]
    for _ in range(2):  # compiled, then loaded from the disk (no trace, no kernel source)
        for fn in fns:
            with build._memo_lock:
                build._memo.clear()
            f = fusejit.fuse(fn, autotune=True)
            for _ in range(2):  # (tuning runs at a signature's second call)
                np.testing.assert_allclose(f(x), fn(x), rtol=1e-6)
    assert len(keys) == 4 and keys[0] == keys[2] and keys[1] == keys[3] and keys[0] != keys[1]
    import hashlib

    assert hashlib.sha256(b"").hexdigest()[:24] not in "".join(keys)


# -- whose directory ----------------------------------------------------------------------------


def _refused(path_env: str, match: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.cache_dir() is None
    msgs = _ours(caught)
    assert len(msgs) == 1 and path_env in msgs[0] and match in msgs[0], msgs


needs_root = pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")


@needs_root
def test_directory_of_another_user_is_refused(root):
    root.mkdir(mode=0o777)
    os.chown(root, OTHER_UID, OTHER_UID)
    _refused(str(root), f"owned by uid {OTHER_UID}")
    x = np.linspace(0, 1, 100, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", files.CacheWarning)
        np.testing.assert_allclose(fusejit.fuse(lambda x: x + 1)(x), x + 1)
    assert not any(root.iterdir())  # nothing written into it


@needs_root
def test_parent_of_another_user_is_refused(root):
    root.parent.chmod(0o755)
    os.chown(root.parent, OTHER_UID, OTHER_UID)
    try:
        _refused(str(root), f"owned by uid {OTHER_UID}")
    finally:
        os.chown(root.parent, 0, 0)


def test_parent_writable_by_others_is_refused_unless_sticky(root):
    root.parent.chmod(0o777)
    _refused(str(root), "writable by others")
    root.parent.chmod(0o1777)  # (as /tmp: others cannot move our directory)
    cache.forget_dir()
    assert cache.cache_dir() == root


@needs_root
def test_parent_writable_by_a_shared_group_is_refused_by_a_private_one_not(root):
    import grp

    root.parent.chmod(0o775)
    shared = next((g.gr_gid for g in grp.getgrall() if g.gr_gid != os.getgid()), None)
    if shared is None:
        pytest.skip("no group other than this user's")
    os.chown(root.parent, os.getuid(), shared)
    _refused(str(root), "writable by others")
    os.chown(root.parent, os.getuid(), os.getgid())  # (root's own group: a private one)
    cache.forget_dir()
    assert cache.cache_dir() == root


def test_own_directory_writable_by_others_is_made_private(root):
    root.mkdir(mode=0o777)
    root.chmod(0o777)
    assert cache.cache_dir() == root
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


@needs_root
def test_symlink_planted_by_another_user_is_not_followed(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_warned", set())
    target = tmp_path / "theirs"
    target.mkdir(mode=0o700)
    link = tmp_path / "cache"
    link.symlink_to(target)
    os.lchown(link, OTHER_UID, OTHER_UID)
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(link))
    cache.forget_dir()
    try:
        _refused(str(link), "symlink owned by uid")
    finally:
        cache.forget_dir()


def test_parents_are_created_private_whatever_the_umask(tmp_path, monkeypatch):
    deep = tmp_path / "a" / "b" / "c"
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(deep))
    cache.forget_dir()
    old = os.umask(0)
    try:
        assert cache.cache_dir() == deep
    finally:
        os.umask(old)
        cache.forget_dir()
    for d in (tmp_path / "a", tmp_path / "a" / "b", deep):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


# -- full and read-only file systems ----------------------------------------------------------------


def _statvfs(monkeypatch, free_blocks: int, read_only: bool = False) -> None:
    """Every file system reports ``free_blocks`` of 4 KiB free (and read-only if asked)."""
    real = os.statvfs

    class Vfs:
        def __init__(self, st):
            self.f_flag = os.ST_RDONLY if read_only else st.f_flag
            self.f_frsize, self.f_bavail = 4096, free_blocks

    monkeypatch.setattr(os, "statvfs", lambda p: Vfs(real(p)))


def test_nearly_full_file_system_falls_back_to_memory(root, monkeypatch):
    """Simulated (always runs): statvfs reports 1 MiB free."""
    _statvfs(monkeypatch, 256)
    _refused(str(root), "full")


def test_read_only_file_system_falls_back_to_memory(root, monkeypatch):
    root.mkdir()
    _statvfs(monkeypatch, 1 << 20, read_only=True)
    _refused(str(root), "read-only")


def test_write_failing_with_enospc_warns_and_keeps_results(root, monkeypatch):
    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(cache, "atomic_write", full)
    x = np.linspace(0, 1, 100, dtype=np.float32)
    with build._memo_lock:
        build._memo.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fusejit.fuse(lambda x: x * 5 - 1)(x)
    np.testing.assert_allclose(out, x * 5 - 1, rtol=1e-6)
    msgs = _ours(caught)
    assert msgs and all("No space left" in m and str(root) in m for m in msgs), msgs


def test_build_failure_on_a_full_disk_is_not_called_a_fusejit_bug(monkeypatch, queue):
    import pyopencl as cl

    _statvfs(monkeypatch, 0)
    err = build._build_error(queue.context, "fj_k0", "bad source",
                             cl.RuntimeError("clBuildProgram failed"))
    assert isinstance(err, fusejit.DeviceUnavailableError) and "full" in str(err)


@contextlib.contextmanager
def _tmpfs(path: Path, size: str):
    path.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                        str(path)], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({p.stderr.strip()})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def test_full_tmpfs_as_xdg_cache_home(tmp_path):
    """XDG_CACHE_HOME on a full file system: import, first build and results work (PoCL and
    pytools' caches go elsewhere), one CacheWarning per cache names the directory."""
    with _tmpfs(tmp_path / "full", "1m") as mnt:
        with contextlib.suppress(OSError), open(mnt / "fill", "wb") as f:
            while True:
                f.write(b"\0" * 65536)
        env = dict(os.environ, XDG_CACHE_HOME=str(mnt), PYTHONPATH=CHILD_PATH)
        for k in ("FUSEJIT_CACHE_DIR", "POCL_CACHE_DIR"):
            env.pop(k, None)
        p = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=240, check=False)
    assert p.returncode == 0 and "OK" in p.stdout, p.stderr[-3000:]
    assert "CacheWarning" in p.stderr and str(mnt) in p.stderr and "full" in p.stderr
    assert "This is a fusejit bug" not in p.stderr and "OperationalError" not in p.stderr


def test_read_only_populated_tmpfs_cache(tmp_path):
    with _tmpfs(tmp_path / "ro", "64m") as mnt:
        env = _env(mnt / "fusejit", FUSEJIT_CACHE_MIN_FREE_BYTES="1048576")
        first = _run_child(env)
        assert first.returncode == 0, first.stderr[-3000:]
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        p = subprocess.run([sys.executable, "-c", _CHILD.replace(
            "np.tanh(x) * 2 + 1", "np.tanh(x) * 3 - 1")], env=env, capture_output=True,
            text=True, timeout=240, check=False)
    assert p.returncode == 0 and "OK" in p.stdout, p.stderr[-3000:]
    assert "read-only" in p.stderr and "This is a fusejit bug" not in p.stderr
