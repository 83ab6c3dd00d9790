"""The persistent on-disk program cache.

One self-contained file per compiled program, named by the digest of its ``ProgramKey``::

    magic "FJCACHE1" | u64 payload length | SHA-256 of the payload | payload
    payload = u32 JSON length | JSON (the key, kernel names, binary length, extra files)
              | device binary | the extra files' bytes

No pickle: reading an entry parses JSON and slices bytes. Every read is validated (magic, length,
checksum, key, JSON schema); a bad entry is a miss, gives one warning and is rewritten by the
build that follows. Files are read and written as runtime/files.py says (never blocking, bounded,
atomic, never through a planted symlink). The directory is 0700 and files 0600. The size of the
whole cache is capped (``FUSEJIT_CACHE_MAX_BYTES``, default 1 GiB) with least-recently-used
eviction: a hit refreshes the entry's mtime. A program's binary is stored once, in its own entry
(trace-cache entries name it by key, compile/trace_cache.py).

Location: ``FUSEJIT_CACHE_DIR``, else the user cache directory (platformdirs);
``FUSEJIT_CACHE_DIR=0`` turns every fusejit disk cache off. A directory another user owns or
can write to (or whose parents they can), a symlink another user planted, a read-only or
nearly full file system: a CacheWarning that says which and why, and caches in memory only.

PoCL's kernel cache is never shared between processes: PoCL loads what it finds there without
a check (a flipped bit in a kernel ``.so`` gave wrong values or crashes in every later process),
so each process gets its own directory (runtime/pocl_cache.py), and what PoCL compiled there
that a later process would need (each work-group size's kernel object) is kept in the
program's checksummed entry as its *extra files*, written back before PoCL loads the binary.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import struct
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from fusejit.runtime.files import (
    CacheWarning,
    atomic_write,
    private_dir,
    read_regular,
    untrusted,
    unusable,
    warn_once,
    write_failed,
)

log = logging.getLogger("fusejit")

MAGIC = b"FJCACHE1"
FORMAT = 2  # 2: entries carry PoCL's extra files
_HEADER = struct.Struct("<8sQ32s")  # magic, payload length, sha256(payload)
_META_LEN = struct.Struct("<I")
_SUFFIX = ".fjc"
_MAX_ENTRY = 1 << 30  # bytes; a "length" beyond this is corruption, not a program
_STALE_TMP_S = 3600.0  # temporary files older than this belong to killed writers
DEFAULT_MAX_BYTES = 1 << 30


# -- location -------------------------------------------------------------------------------------


def cache_dir() -> Path | None:
    """fusejit's cache directory (created 0700), or None when ``FUSEJIT_CACHE_DIR=0`` or it
    cannot be trusted or written (everything then stays in memory; one CacheWarning says
    why)."""
    env = os.environ.get("FUSEJIT_CACHE_DIR", "")
    if env.strip().lower() in ("0", "off", "false", "none"):
        return None
    known = _known_dir
    if known and known[0] == env and (known[1] is None or os.path.isdir(known[1])):
        # (a first call asks 6 times; a directory removed since is made again)
        return known[1]
    if env:
        path = Path(env).expanduser()
    else:
        import platformdirs

        path = Path(platformdirs.user_cache_dir("fusejit"))
    try:
        why = untrusted(path) if os.path.lexists(path) else None
        if why is None:
            private_dir(path)
            why = untrusted(path) or unusable(path)
    except OSError as exc:
        why = str(exc)
    if why is not None:
        warn_once(f"dir:{path}", f"fusejit cache directory {path} is not used: {why}; "
                                  "caching in memory only (set FUSEJIT_CACHE_DIR to move it)")
        path = None
    _known_dir[:] = [env, path]
    return path


_known_dir: list[Any] = []  # [FUSEJIT_CACHE_DIR, the directory made for it or None]


def forget_dir() -> None:
    """Check the cache directory again at its next use (tests; a process that moved it)."""
    _known_dir.clear()


def disk_failed(where: Path, exc: OSError) -> None:
    """A write in a cache failed: a full or read-only disk is the disk's, named once in a
    CacheWarning (results stay in memory); anything else is logged."""
    if write_failed(exc):
        warn_once(f"write:{where}", f"fusejit could not write its cache in {where} ({exc}); "
                                    "keeping results in memory")
    else:
        log.debug("fusejit: could not write %s: %s", where, exc)


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
    """A cached program: its device binary, what the launcher needs to know about it, and
    the driver's own files made for it after the build (PoCL's kernel objects per work-group
    size: relative path and bytes), restored before the binary is loaded."""

    binary: bytes
    kernels: tuple[str, ...]
    extras: tuple[tuple[str, bytes], ...] = ()


class CorruptEntry(ValueError):
    """Why an entry file was rejected."""


def encode_entry(key: ProgramKey, entry: Entry) -> bytes:
    meta = json.dumps({"key": key.as_json(), "kernels": list(entry.kernels),
                       "binary_len": len(entry.binary),
                       "extras": [[name, len(data)] for name, data in entry.extras]},
                      sort_keys=True).encode()
    payload = b"".join([_META_LEN.pack(len(meta)), meta, entry.binary,
                        *(data for _, data in entry.extras)])
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
    if not isinstance(meta, dict) or meta.get("key") != key.as_json():
        raise CorruptEntry("entry is for a different program key")
    kernels, extras, blen = meta.get("kernels"), meta.get("extras"), meta.get("binary_len")
    at = _META_LEN.size + meta_len
    if not (isinstance(kernels, list) and all(isinstance(k, str) for k in kernels)) or \
            not isinstance(blen, int) or not 0 < blen <= len(payload) - at or \
            not isinstance(extras, list) or not all(
                isinstance(x, list) and len(x) == 2 and isinstance(x[0], str) and
                isinstance(x[1], int) and x[1] >= 0 for x in extras) or \
            at + blen + sum(x[1] for x in extras) != len(payload):
        raise CorruptEntry("malformed metadata")
    binary = bytes(payload[at:at + blen])
    at += blen
    files = []
    for name, n in extras:
        files.append((name, bytes(payload[at:at + n])))
        at += n
    return Entry(binary, tuple(kernels), tuple(files))


class ProgramCache:
    """Entries under ``<root>/programs``; thread- and process-safe (see module doc)."""

    def __init__(self, root: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.dir = root / "programs"
        private_dir(self.dir)
        self.max_bytes = max_bytes

    def path(self, key: ProgramKey) -> Path:
        return self.dir / (key.digest + _SUFFIX)

    def get(self, key: ProgramKey) -> Entry | None:
        path = self.path(key)
        try:
            data = read_regular(path, _MAX_ENTRY)
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
        """A bad entry: one warning; the rebuild's ``put`` replaces it (a directory, a
        symlink or a special file in its place is removed first, ``os.replace`` could not
        replace a directory)."""
        path = self.path(key)
        warn_once(f"entry:{path}", f"fusejit: ignoring a bad program-cache entry {path} "
                                   f"({why}); rebuilding it")
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif os.path.lexists(path):
                path.unlink()

    def put(self, key: ProgramKey, entry: Entry) -> None:
        path = self.path(key)
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            atomic_write(path, encode_entry(key, entry))
        except OSError as exc:
            disk_failed(self.dir, exc)
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
            except OSError as exc:
                warn_once(f"dir:{root}", f"fusejit cache directory {root} is not used: "
                                         f"{exc}; caching in memory only")
                return None
            _store_root = root
        return _store


__all__ = ["CacheWarning", "Entry", "ProgramCache", "ProgramKey", "atomic_write", "cache_dir",
           "decode_entry", "encode_entry", "program_cache", "read_regular", "warn_once"]
