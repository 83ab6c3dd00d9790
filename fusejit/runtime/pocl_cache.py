"""PoCL's kernel cache: one private directory per process, its useful files kept in fusejit's
checksummed entries.

PoCL loads what it finds in its cache directory without any check: one flipped bit in a
kernel ``.so`` gave wrong values or SIGSEGV in every later process, a truncated one SIGBUS, a
garbage ``program.bc`` SIGABRT. So no process reads a file another process left there:
``place`` points ``POCL_CACHE_DIR`` (unless the user set it) at a fresh private directory of
this process, in memory where there is room (``/dev/shm``), else ``<cache>/pocl/run-*``,
locked while the process lives and deleted at its exit; a later process deletes those of
processes killed before (``sweep``), so PoCL's files never outlive the processes using them.

What PoCL compiles after a build, each kernel's object for each work-group size it is launched
with (~0.1 s apiece), would then be compiled again by every process. ``watch`` notes each
program the disk cache serves; at exit ``snapshot`` adds the files PoCL made for it since to
the program's entry (runtime/cache.py: relative path and bytes, under the entry's SHA-256), and
``restore`` writes them back into the new process's directory before PoCL loads the binary,
from bytes that passed that checksum.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from fusejit.runtime import cache
from fusejit.runtime.files import private_dir, room_for_temporaries, unusable

_ALIVE = ".alive"
_MARK = "FUSEJIT_POCL_RUN"  # the POCL_CACHE_DIR fusejit set (children inherit both)
_PREFIX = "run-"
_LEGACY = ("kcache", "inflight", "lock", "users")  # an older fusejit's shared PoCL cache
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_PROGRAM_DIR = re.compile(rb"([A-P]{2}/[A-P]{16,64})")  # in a PoCL binary's header
_MAX_EXTRAS = 64 << 20  # bytes of extra files one entry keeps
_SKIP = {"program.bc", "last_accessed"}
_run: list[Path] = []  # this process's PoCL cache directory, once placed
_lock = threading.Lock()
# program directory (relative) -> (store, key, entry, files present when it was loaded)
_watched: dict[str, tuple[cache.ProgramCache, cache.ProgramKey, cache.Entry, frozenset]] = {}


def place() -> None:
    """Give PoCL this process's own cache directory; before PoCL initialises (the first
    platform query). A user's ``POCL_CACHE_DIR`` is left alone (and not restored into); one
    inherited from a fusejit parent process (marked) is replaced: the parent's directory
    goes when the parent does."""
    given = os.environ.get("POCL_CACHE_DIR")
    if _run or (given is not None and given != os.environ.get(_MARK)):
        return
    root = cache.cache_dir()
    if root is not None and (root / "pocl").is_dir():
        with contextlib.suppress(OSError):
            sweep(root / "pocl")  # (killed processes' directories, an older shared cache)
    run = None
    for base, prefix in _bases(root):
        try:
            sweep(base, prefix)
            run = _new_run(base, prefix)
            break
        except OSError:
            continue
    if run is None:
        return  # nowhere to write: PoCL's own default
    os.environ["POCL_CACHE_DIR"] = os.environ[_MARK] = str(run)
    _run.append(run)
    atexit.register(_at_exit)


def _bases(root: Path | None) -> Iterator[tuple[Path, str]]:
    """Where this process's directory may go, best first: memory (PoCL fsyncs every file it
    writes, a program's binary unpacked cost 9-12 ms on a disk against 1.1 ms on tmpfs),
    then the cache directory (whose ``pocl/`` also holds an older fusejit's shared cache,
    swept), then the system's temporary directory."""
    private = f"fusejit-pocl-{os.getuid()}-{_PREFIX}"
    for d in (os.environ.get("XDG_RUNTIME_DIR"), "/dev/shm"):
        if d and os.path.isdir(d) and unusable(Path(d)) is None:
            yield Path(d), private
    if root is not None:
        with contextlib.suppress(OSError):
            private_dir(root / "pocl")
            yield root / "pocl", _PREFIX
    yield room_for_temporaries(), private


def _at_exit() -> None:
    """Keep what PoCL compiled (``snapshot``), then delete this process's directory (memory,
    when on tmpfs)."""
    snapshot()
    run = run_dir()
    if run is not None:
        shutil.rmtree(run, ignore_errors=True)


def _new_run(base: Path, prefix: str) -> Path:
    run = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))  # (0700)
    fd = os.open(run / _ALIVE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held (fd kept open) until the process ends
    return run


def sweep(base: Path, prefix: str = _PREFIX) -> None:
    """Delete the PoCL directories of processes that are gone (their lock is free), and an
    older fusejit's shared cache once no process of that version holds it."""
    now = time.time()
    for name in os.listdir(base):
        path = base / name
        if name.startswith(prefix) and _dead(path, now):
            shutil.rmtree(path, ignore_errors=True)
    if prefix == _PREFIX and (base / "kcache").exists() and _free(base / "users"):
        for name in _LEGACY:
            with contextlib.suppress(OSError):
                if (base / name).is_dir():
                    shutil.rmtree(base / name)
                else:
                    (base / name).unlink()


def _dead(path: Path, now: float) -> bool:
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return False
    except OSError:
        return False
    if not (path / _ALIVE).exists():  # (a process killed before it locked: give it a minute)
        return now - st.st_mtime > 60
    return _free(path / _ALIVE)


def _free(lockfile: Path) -> bool:
    """Whether no process holds ``lockfile``'s flock (taken and released again if free)."""
    try:
        fd = os.open(lockfile, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def run_dir() -> Path | None:
    """This process's PoCL cache directory, when fusejit placed it (else None)."""
    return _run[0] if _run and os.environ.get("POCL_CACHE_DIR") == str(_run[0]) else None


def program_dir(binary: bytes) -> str | None:
    """The relative directory PoCL keeps a program's files in, as its binary's header names
    it (``XX/YYYY...``), or None for a binary that is not PoCL's."""
    if not binary.startswith(b"poclbin\0"):
        return None
    found = _PROGRAM_DIR.search(binary[:256])
    return found.group(1).decode() if found else None


def restore(entry: cache.Entry) -> None:
    """Write ``entry``'s extra files (checksummed with it) into this process's PoCL
    directory, where PoCL will look for them once the binary is loaded. A name that is not
    a plain relative path is skipped (the entry was verified: only a foreign writer with
    the checksum could have put it there)."""
    run, rel = run_dir(), program_dir(entry.binary)
    if run is None or rel is None or not entry.extras:
        return
    for name, data in entry.extras:
        parts = name.split("/")
        if len(parts) > 4 or not all(_NAME.match(p) and p not in (".", "..") for p in parts):
            continue
        path = run.joinpath(rel, *parts)
        with contextlib.suppress(OSError):
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # (no fsync: a scratch directory of this process; O_EXCL: a file PoCL already
            # has is left as it is)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)


def discard(entry: cache.Entry) -> None:
    """Remove what ``restore`` wrote for an entry whose binary the driver then refused: the
    source build that follows may use the same directory."""
    run, rel = run_dir(), program_dir(entry.binary)
    if run is not None and rel is not None:
        shutil.rmtree(run / rel, ignore_errors=True)


def watch(store: cache.ProgramCache, key: cache.ProgramKey, entry: cache.Entry) -> None:
    """Note a program the disk cache just served or stored: ``snapshot`` keeps what PoCL
    compiles for it from now on."""
    run, rel = run_dir(), program_dir(entry.binary)
    if run is None or rel is None:
        return
    with _lock:
        _watched[rel] = (store, key, entry, frozenset(_files(run / rel)))


def _files(top: Path) -> dict[str, Path]:
    out = {}
    for dirpath, _, names in os.walk(top):
        for name in names:
            path = Path(dirpath, name)
            rel = path.relative_to(top).as_posix()
            if rel not in _SKIP and not name.startswith((".", "tempfile")) and path.is_file():
                out[rel] = path
    return out


def snapshot() -> None:
    """Add what PoCL compiled for each watched program since it was loaded to the program's
    entry (at exit; tests call it directly)."""
    run = run_dir()
    if run is None:
        return
    with _lock:
        watched = list(_watched.items())
        _watched.clear()
    for rel, (store, key, entry, before) in watched:
        have = dict(entry.extras)
        total = sum(len(d) for d in have.values())
        added = False
        for name, path in sorted(_files(run / rel).items()):
            if name in before or name in have:
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if total + len(data) > _MAX_EXTRAS:
                break
            have[name] = data
            total += len(data)
            added = True
        if added:
            store.put(key, cache.Entry(entry.binary, entry.kernels, tuple(sorted(have.items()))))
