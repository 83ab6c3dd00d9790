"""The safe file handling every fusejit cache (and ``fusejit.load``) uses: reads that cannot
block or exhaust, atomic writes, and directories that belong to this user alone.

* ``read_regular``: opens without blocking (a FIFO in an entry's place would otherwise hang
  every later process), refuses anything but a regular file (FIFOs, devices, directories,
  sockets; a symlink unless asked to follow), and reads at most ``limit`` bytes whatever the
  file claims (``/proc`` files say 0, ``/dev/zero`` never ends).
* ``atomic_write``: a unique temporary file (O_EXCL | O_NOFOLLOW), fsynced, then renamed.
* ``private_dir``: creates a directory and every missing parent 0700 whatever the umask, and
  refuses one another user owns.
* ``untrusted``/``unusable``: why a cache directory must not be used (another user owns it or
  a parent, others can write to it or a non-sticky parent, it is a symlink another user
  planted; its file system is read-only or nearly full), as ssh and pip refuse theirs.

A CUDA or Vulkan backend's caches use these too (one helper, one set of rules).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import importlib
import os
import shutil
import sqlite3
import stat
import sys
import tempfile
import threading
import warnings
from pathlib import Path

_MAX_READ = 1 << 30  # bytes; no fusejit file is larger
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# free bytes a cache's file system needs: PoCL aborts the process (SIGABRT, no message) when
# it cannot write its temporary files, so a nearly full disk is refused before it builds
MIN_FREE_BYTES = 64 << 20


class CacheWarning(UserWarning):
    """A fusejit disk cache held something unusable, or its directory cannot be used; it was
    ignored (and rewritten) or fusejit keeps that cache in memory."""


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(tag: str, message: str) -> None:
    with _warned_lock:
        if tag in _warned:
            return
        _warned.add(tag)
    warnings.warn(message, CacheWarning, stacklevel=3)


class NotRegularFile(ValueError):
    """A path that must be a regular file is something else, or too large to be ours."""


def kind_of(mode: int) -> str:
    """What a file is, in words (for errors)."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: Path | str, limit: int = _MAX_READ, follow: bool = False
                 ) -> bytes | None:
    """The bytes of the regular file ``path``, None when it does not exist. NotRegularFile
    (a ValueError) when it is anything else (a symlink too, unless ``follow``) or holds more
    than ``limit`` bytes; OSError when it cannot be read. Never blocks: the file is checked
    before it is opened, opened O_NONBLOCK and checked again on its descriptor."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):  # (devices are never opened: opening one can act)
        raise NotRegularFile(f"{kind_of(st.st_mode)}, not a regular file")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | \
        (0 if follow else _NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile("a symlink, not a regular file") from None
        raise
    try:
        st = os.fstat(fd)  # (what was opened, whatever was swapped in since the lstat)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"{kind_of(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise NotRegularFile(f"{st.st_size} bytes, more than {limit}")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise NotRegularFile(f"more than {limit} bytes")
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see all of it or none of it: a unique
    temporary file in the same directory (O_EXCL | O_NOFOLLOW: never through a planted
    symlink), fsynced, then ``os.replace``d; a writer killed mid-write leaves only a temporary
    file. Raises OSError; callers decide whether a failed write matters."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{threading.get_ident()}." \
                        f"{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
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


# -- directories ----------------------------------------------------------------------------------


class UntrustedDirectory(PermissionError):
    """A directory fusejit will not keep its caches in (the message says why)."""


def private_dir(path: Path) -> None:
    """Create ``path`` and every missing parent 0700 whatever the umask; tighten a
    directory this user owns that an older fusejit created 0755. UntrustedDirectory when
    another user owns it (nothing of theirs is chmodded, used or written into)."""
    try:  # (one lstat where it exists, as on every call after the first)
        st = os.lstat(path)
    except FileNotFoundError:
        missing = []
        p = Path(path)
        while not p.exists() and p != p.parent:
            missing.append(p)
            p = p.parent
        for p in reversed(missing):
            with contextlib.suppress(FileExistsError):
                os.mkdir(p, 0o700)
                os.chmod(p, 0o700)  # (mkdir's mode goes through the umask)
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        st = os.stat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise FileExistsError(errno.EEXIST, "exists and is not a directory", str(path))
    if not stat.S_ISDIR(st.st_mode):
        raise FileExistsError(errno.EEXIST, "exists and is not a directory", str(path))
    if st.st_uid != os.getuid():
        raise UntrustedDirectory(f"{path} is owned by uid {st.st_uid}, not by this user "
                                 f"(uid {os.getuid()})")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)


def _foreign(st: os.stat_result) -> bool:
    return st.st_uid not in (os.getuid(), 0)


def _others_can_write(st: os.stat_result) -> bool:
    """Whether users other than this one could rename or replace what a directory holds: it
    is world-writable, or group-writable by a group other than this user's private one (as
    ssh's StrictModes allows), without the sticky bit (/tmp)."""
    if st.st_mode & stat.S_ISVTX:
        return False
    if st.st_mode & 0o002:
        return True
    return bool(st.st_mode & 0o020) and not _private_group(st.st_gid)


def _private_group(gid: int) -> bool:
    try:
        import grp
        import pwd

        members = set(grp.getgrgid(gid).gr_mem)
        me = pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return False
    return gid == os.getgid() and members <= {me}


def untrusted(path: Path) -> str | None:
    """Why another user could plant files in the cache directory ``path`` (which exists),
    or None: it or a parent is owned by someone other than this user or root, a parent is
    writable by others without the sticky bit (/tmp itself is fine), or ``path`` is a
    symlink owned by another user. The directory itself is made 0700 by ``private_dir``."""
    # (parents writable by this user's private group are fine: umask 002 distributions)
    path = Path(os.path.abspath(path))
    try:
        link = os.lstat(path)
        if stat.S_ISLNK(link.st_mode) and _foreign(link):
            return f"{path} is a symlink owned by uid {link.st_uid}"
        real = Path(os.path.realpath(path))
        st = os.stat(real)
        if st.st_uid != os.getuid():
            return f"{real} is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
        for parent in real.parents:
            st = os.stat(parent)
            if _foreign(st):
                return f"its parent {parent} is owned by uid {st.st_uid}"
            if _others_can_write(st):
                return f"its parent {parent} is writable by others " \
                       f"(mode {stat.S_IMODE(st.st_mode):04o})"
    except OSError as exc:
        return f"cannot check who owns it ({exc})"
    return None


def unusable(path: Path) -> str | None:
    """Why a cache cannot be written in ``path`` now, or None: a read-only file system, or
    fewer than ``MIN_FREE_BYTES`` free (FUSEJIT_CACHE_MIN_FREE_BYTES overrides)."""
    try:
        vfs = os.statvfs(path)
    except OSError as exc:
        return f"cannot query its file system ({exc})"
    if vfs.f_flag & getattr(os, "ST_RDONLY", 1):
        return "its file system is read-only"
    if not os.access(path, os.W_OK):
        return "it is not writable"
    try:
        need = int(os.environ.get("FUSEJIT_CACHE_MIN_FREE_BYTES", MIN_FREE_BYTES))
    except ValueError:
        need = MIN_FREE_BYTES
    free = vfs.f_bavail * vfs.f_frsize
    if free < need:
        return f"its file system is full or nearly full ({free / 2**20:.1f} MiB free, " \
               f"{need / 2**20:.0f} MiB needed)"
    return None


def write_failed(exc: OSError) -> bool:
    """Whether a failed write says the disk cannot take more (full, quota, read-only), as
    opposed to a file fusejit should not have met."""
    return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def room_for_temporaries() -> Path:
    """A temporary directory on a file system with room (the system's, else /dev/shm)."""
    return next((Path(d) for d in (tempfile.gettempdir(), "/dev/shm")
                 if os.path.isdir(d) and unusable(Path(d)) is None),
                Path(tempfile.gettempdir()))


def import_with_cache_fallback(module: str, what: str) -> object:
    """Import ``module``, whose import opens a cache of a library (``what``) in the user cache
    directory; when that fails (SQLite's "database or disk is full", a read-only disk), one
    CacheWarning and the import again with ``XDG_CACHE_HOME`` pointed at a private temporary
    directory for its duration (the library keeps that cache there, in effect in memory)."""
    try:
        return importlib.import_module(module)
    except (sqlite3.Error, OSError) as exc:
        sys.modules.pop(module, None)
        where = os.environ.get("XDG_CACHE_HOME", "~/.cache")
        warn_once(f"import:{what}", f"the {what} cache under {where} is unusable ({exc}); "
                                    f"it is kept in a temporary directory instead")
    old = os.environ.get("XDG_CACHE_HOME")
    scratch = tempfile.mkdtemp(prefix=f"fusejit-{what}-", dir=room_for_temporaries())
    atexit.register(shutil.rmtree, scratch, True)
    os.environ["XDG_CACHE_HOME"] = scratch
    try:
        return importlib.import_module(module)
    finally:
        if old is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = old
