"""The persistent on-disk program cache, and the safe file handling every fusejit cache uses.

One self-contained file per compiled program, named by the digest of its ``ProgramKey``::

    magic "FJCACHE1" | u64 payload length | SHA-256 of the payload | payload
    payload = u32 JSON length | JSON (the key, kernel names, binary length) | device binary

No pickle: reading an entry parses JSON and slices bytes. Every read is validated (magic, length,
checksum, key, JSON schema); a bad entry is a miss, gives one warning and is rewritten by the
build that follows. Writes go to a unique temporary file in the same directory, opened with
O_EXCL | O_NOFOLLOW (never through a planted symlink), are fsynced and then ``os.replace``d, so a
reader sees a whole old entry or a whole new one, and a writer killed mid-write leaves only a
temporary file (swept later). The directory is 0700 and files 0600. The size is capped
(``FUSEJIT_CACHE_MAX_BYTES``, default 1 GiB) with least-recently-used eviction: a hit refreshes
the entry's mtime.

Location: ``FUSEJIT_CACHE_DIR``, else the user cache directory (platformdirs);
``FUSEJIT_CACHE_DIR=0`` turns every fusejit disk cache off.

PoCL keeps its own kernel cache; fusejit points it (``POCL_CACHE_DIR``, unless the user set it)
at ``<cache>/pocl`` so it can recover it: a PoCL build runs with an in-flight marker file, and a
marker left by a dead process means PoCL may have died on (or left behind) a corrupt file there,
so the next process clears that directory before building (see ``PoclGuard``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import stat
import struct
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

log = logging.getLogger("fusejit")

MAGIC = b"FJCACHE1"
FORMAT = 1
_HEADER = struct.Struct("<8sQ32s")  # magic, payload length, sha256(payload)
_META_LEN = struct.Struct("<I")
_SUFFIX = ".fjc"
_MAX_ENTRY = 1 << 30  # bytes; a "length" beyond this is corruption, not a program
_STALE_TMP_S = 3600.0  # temporary files older than this belong to killed writers
DEFAULT_MAX_BYTES = 1 << 30


class CacheWarning(UserWarning):
    """A fusejit disk cache held something unusable; it was ignored and will be rewritten."""


# -- location -------------------------------------------------------------------------------------


def cache_dir() -> Path | None:
    """fusejit's cache directory (created 0700), or None when ``FUSEJIT_CACHE_DIR=0`` or it
    cannot be created (a read-only home: everything then stays in memory)."""
    env = os.environ.get("FUSEJIT_CACHE_DIR", "")
    if env.strip().lower() in ("0", "off", "false", "none"):
        return None
    known = _known_dir
    if known and known[0] == env and os.path.isdir(known[1]):  # (a first call asks 6 times)
        return known[1]
    if env:
        path = Path(env).expanduser()
    else:
        import platformdirs

        path = Path(platformdirs.user_cache_dir("fusejit"))
    try:
        _private_dir(path)
    except OSError as exc:
        warn_once(f"dir:{path}", f"fusejit cache directory {path} is unusable ({exc}); "
                                  "caching in memory only (set FUSEJIT_CACHE_DIR to move it)")
        return None
    _known_dir[:] = [env, path]
    return path


_known_dir: list[Any] = []  # [FUSEJIT_CACHE_DIR, the directory made for it]


def _private_dir(path: Path) -> None:
    """Create ``path`` (and parents) for this user only; tighten a directory we own that an
    older fusejit created 0755."""
    try:  # (one stat where it exists, as on every call after the first: no mkdir, no raise)
        st = os.stat(path)
    except FileNotFoundError:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise FileExistsError(errno.EEXIST, "exists and is not a directory", str(path))
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        os.chmod(path, 0o700)


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(tag: str, message: str) -> None:
    with _warned_lock:
        if tag in _warned:
            return
        _warned.add(tag)
    warnings.warn(message, CacheWarning, stacklevel=3)


# -- safe files -----------------------------------------------------------------------------------


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see all of it or none of it (see module doc).
    Raises OSError; callers decide whether a failed write matters."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{threading.get_ident()}." \
                        f"{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_regular(path: Path, limit: int = _MAX_ENTRY) -> bytes | None:
    """The bytes of a regular file (never through a symlink), None when absent; OSError or
    ValueError when it cannot be an entry (not a regular file, larger than ``limit``)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not (st.st_mode & 0o170000 == 0o100000):
            raise ValueError("not a regular file")
        if st.st_size > limit:
            raise ValueError(f"{st.st_size} bytes, more than any entry")
        return f.read()


# -- entries --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProgramKey:
    """Everything that can make a device binary stale (DESIGN rule 7). Never the Python
    function: two functions that generate the same source share one entry."""

    source_sha256: str
    options: tuple[str, ...]
    platform: str  # platform name and version
    device: str
    driver: str  # driver version and OpenCL version of the device
    fusejit: str
    format: int = FORMAT

    def as_json(self) -> dict[str, Any]:
        # (not dataclasses.asdict: it deep-copies, ~10x slower on a first call's path)
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in fields(self)}

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.as_json(), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Entry:
    """A cached program: its device binary and what the launcher needs to know about it."""

    binary: bytes
    kernels: tuple[str, ...]


class CorruptEntry(ValueError):
    """Why an entry file was rejected."""


def encode_entry(key: ProgramKey, entry: Entry) -> bytes:
    meta = json.dumps({"key": key.as_json(), "kernels": list(entry.kernels),
                       "binary_len": len(entry.binary)}, sort_keys=True).encode()
    payload = _META_LEN.pack(len(meta)) + meta + entry.binary
    return _HEADER.pack(MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload


def decode_entry(data: bytes, key: ProgramKey) -> Entry:
    """The entry in ``data`` if it is whole, uncorrupted and for ``key``; else CorruptEntry."""
    if len(data) < _HEADER.size:
        raise CorruptEntry(f"truncated header ({len(data)} bytes)")
    magic, length, digest = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptEntry("bad magic (not a fusejit cache entry, or another format version)")
    payload = data[_HEADER.size:]
    if len(payload) != length:
        raise CorruptEntry(f"payload is {len(payload)} bytes, the header says {length}")
    if hashlib.sha256(payload).digest() != digest:
        raise CorruptEntry("checksum mismatch")
    if len(payload) < _META_LEN.size:
        raise CorruptEntry("no metadata")
    (meta_len,) = _META_LEN.unpack_from(payload)
    if meta_len > len(payload) - _META_LEN.size:
        raise CorruptEntry("metadata length beyond the payload")
    try:
        meta = json.loads(payload[_META_LEN.size:_META_LEN.size + meta_len])
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptEntry(f"metadata is not JSON ({exc})") from None
    binary = payload[_META_LEN.size + meta_len:]
    if not isinstance(meta, dict) or meta.get("key") != key.as_json():
        raise CorruptEntry("entry is for a different program key")
    kernels = meta.get("kernels")
    if not (isinstance(kernels, list) and all(isinstance(k, str) for k in kernels)) or \
            meta.get("binary_len") != len(binary) or not binary:
        raise CorruptEntry("malformed metadata")
    return Entry(bytes(binary), tuple(kernels))


class ProgramCache:
    """Entries under ``<root>/programs``; thread- and process-safe (see module doc)."""

    def __init__(self, root: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.dir = root / "programs"
        _private_dir(self.dir)
        self.max_bytes = max_bytes

    def path(self, key: ProgramKey) -> Path:
        return self.dir / (key.digest + _SUFFIX)

    def get(self, key: ProgramKey) -> Entry | None:
        path = self.path(key)
        try:
            data = read_regular(path)
            if data is None:
                return None
            entry = decode_entry(data, key)
        except (OSError, ValueError) as exc:
            self.reject(key, str(exc))
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # least-recently-used order for eviction
        return entry

    def reject(self, key: ProgramKey, why: str) -> None:
        """A bad entry: one warning; the rebuild's ``put`` replaces it (a directory or a
        symlink in its place is removed first, ``os.replace`` could not)."""
        path = self.path(key)
        warn_once(f"entry:{path}", f"fusejit: ignoring a bad program-cache entry {path} "
                                   f"({why}); rebuilding it")
        with contextlib.suppress(OSError):
            if path.is_symlink():
                path.unlink()
            elif path.is_dir():
                shutil.rmtree(path)

    def put(self, key: ProgramKey, entry: Entry) -> None:
        path = self.path(key)
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            atomic_write(path, encode_entry(key, entry))
        except OSError as exc:
            log.debug("fusejit: could not write %s: %s", path, exc)
            return
        self.evict()

    def evict(self) -> None:
        """Remove least-recently-used entries until the total is under the cap, and temporary
        files left by killed writers."""
        now = time.time()
        entries = []
        total = 0
        try:
            names = os.listdir(self.dir)
        except OSError:
            return
        for name in names:
            p = self.dir / name
            try:
                st = p.lstat()
            except OSError:
                continue
            if name.endswith(".tmp"):
                if now - st.st_mtime > _STALE_TMP_S:
                    with contextlib.suppress(OSError):
                        p.unlink()
                continue
            if name.endswith(_SUFFIX):
                entries.append((st.st_mtime, st.st_size, p))
                total += st.st_size
        if total <= self.max_bytes:
            return
        for _, size, p in sorted(entries):
            with contextlib.suppress(OSError):
                p.unlink()
                total -= size
            if total <= self.max_bytes * 0.9:
                break


_store: ProgramCache | None = None
_store_root: Path | None = None
_store_lock = threading.Lock()


def program_cache() -> ProgramCache | None:
    """The process's program cache for the current ``FUSEJIT_CACHE_DIR``, or None when off."""
    global _store, _store_root
    root = cache_dir()
    if root is None:
        return None
    with _store_lock:
        if _store is None or _store_root != root:
            try:
                max_bytes = int(os.environ.get("FUSEJIT_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES))
            except ValueError:
                max_bytes = DEFAULT_MAX_BYTES
            try:
                _store = ProgramCache(root, max_bytes)
            except OSError:
                return None
            _store_root = root
        return _store


# -- PoCL's kernel cache --------------------------------------------------------------------------


def place_pocl_cache() -> None:
    """Point PoCL's kernel cache into fusejit's directory, unless the user chose one or the
    cache is off. Must run before PoCL initialises (the first platform query)."""
    if "POCL_CACHE_DIR" in os.environ:
        return
    root = cache_dir()
    if root is None:
        return
    kcache = root / "pocl" / "kcache"
    with contextlib.suppress(OSError):
        _private_dir(kcache.parent)
        _private_dir(kcache)
        os.environ["POCL_CACHE_DIR"] = str(kcache)
        _hold_users_lock(kcache.parent)


# A process that uses the PoCL cache fusejit placed holds a shared lock on ``pocl/users`` for
# its whole life: PoCL keeps reading and writing a built program's cache directory after the
# build (it compiles each work-group size at its first launch), so moving the cache away
# under a live process makes PoCL abort it later. Recovery after a dead builder therefore
# clears only when it can take that lock exclusively (see PoclGuard.recover).
_users_fd: list[int] = []


def _hold_users_lock(pocl_dir: Path) -> None:
    if _users_fd:
        return
    fd = os.open(pocl_dir / "users", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    _users_fd.append(fd)


def _alone(pocl_dir: Path) -> bool:
    """Whether no other live process uses the PoCL cache in ``pocl_dir``: our own shared
    lock is given up for an exclusive try (flock locks of one process conflict across open
    files), then taken back either way."""
    mine = _users_fd[0] if _users_fd else None
    try:
        fd = os.open(pocl_dir / "users", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        if mine is not None:
            fcntl.flock(mine, fcntl.LOCK_UN)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)
        if mine is not None:
            fcntl.flock(mine, fcntl.LOCK_SH)


class PoclGuard:
    """In-flight markers around PoCL builds, and recovery after a process died in one.

    PoCL aborts the process (SIGABRT) when it meets a corrupt file in its kernel cache, and
    nothing in the process can catch that. Each build therefore runs with a marker file
    naming the pid; a marker whose process is gone means a build never finished, so the next
    process moves PoCL's cache directory aside and deletes it before it builds anything (a
    recompile, never a wrong binary), once no other live process uses the cache (``_alone``:
    two xdist workers died after another process cleared the cache under them). Only the
    directory fusejit placed is ever cleared.
    """

    def __init__(self, kcache: Path) -> None:
        self.kcache = kcache
        self.markers = kcache.parent / "inflight"
        self._checked = False
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """Around one PoCL build: a marker, and a shared lock on the cache that ``clear`` waits
        for, so a cache is never moved away under a build in another process or thread (the
        kernel lock dies with its process, so a killed builder holds nobody up). Never call
        ``recover``/``clear`` inside this block: they wait for every shared holder."""
        self.recover()
        marker = self.markers / f"{os.getpid()}.{threading.get_ident()}"
        try:
            _private_dir(self.markers)
            marker.touch(mode=0o600)
        except OSError:
            marker = None
        try:
            with self._flock(fcntl.LOCK_SH):
                yield
        finally:
            if marker is not None:
                with contextlib.suppress(OSError):
                    marker.unlink()

    @contextlib.contextmanager
    def _flock(self, mode: int) -> Iterator[None]:
        try:
            _private_dir(self.kcache.parent)
            fd = os.open(self.kcache.parent / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:  # no lock file possible: build unlocked (as before)
            yield
            return
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)  # (releases the lock)

    def recover(self, force: bool = False) -> bool:
        """Clear PoCL's cache when a dead process left a marker (or ``force``); once per
        process unless forced. True when it cleared."""
        with self._lock:
            if self._checked and not force:
                return False
            self._checked = True
            dead = [m for m in self._marker_files() if not _alive(m.name.split(".")[0])]
            if not dead and not force:
                return False
            if not force and not _alone(self.kcache.parent):
                # other live processes use the cache: clearing it would make PoCL abort them
                # (their built programs' directories vanish); the first process that starts
                # alone clears it, and a corrupt file met before then forces the clear
                log.debug("fusejit: PoCL cache recovery deferred: other processes use it")
                return False
            self.clear()
            for m in dead:
                with contextlib.suppress(OSError):
                    m.unlink()
        if dead:
            warn_once("pocl", "fusejit: a previous process died while PoCL was building; "
                               f"cleared PoCL's kernel cache {self.kcache} in case it was "
                               "left corrupt (its kernels are rebuilt)")
        return True

    def clear(self) -> None:
        if not self.kcache.is_dir():
            return
        aside = self.kcache.with_name(f"kcache.stale.{os.getpid()}.{os.urandom(4).hex()}")
        try:
            with self._flock(fcntl.LOCK_EX):  # no build in flight anywhere
                os.replace(self.kcache, aside)  # atomic: nobody sees half a cache
        except OSError:
            return
        shutil.rmtree(aside, ignore_errors=True)
        with contextlib.suppress(OSError):
            _private_dir(self.kcache)

    def _marker_files(self) -> list[Path]:
        try:
            return [p for p in self.markers.iterdir() if p.name.split(".")[0].isdigit()]
        except OSError:
            return []


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (OSError, ValueError):
        return True  # exists but not ours, or unparsable: leave it alone
    return True


def pocl_guard() -> PoclGuard | None:
    """The guard for the PoCL cache fusejit placed, or None (the user placed it, or off)."""
    kcache = os.environ.get("POCL_CACHE_DIR")
    root = cache_dir()
    if root is None or kcache != str(root / "pocl" / "kcache"):
        return None
    return _guards.setdefault(kcache, PoclGuard(Path(kcache)))


_guards: dict[str, PoclGuard] = {}
