"""Local files shared by the stores that keep one file per key (DirectoryStore, FSStore on
the local filesystem, ZipStore's temporaries): the temporary-name scheme, the one atomic
write (temporary file + rename, optionally fsynced), directory fsync, and the check that a
write does not leave the store root through a symlink."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
import threading
import uuid
from collections.abc import Iterable
from typing import TypedDict

from chunkstore.forksafe import fork_safe
from ..errors import StoreError

__all__ = ["TEMP_SUFFIX", "atomic_write", "check_inside", "discard", "fsync_dir",
           "is_temp_name", "makedirs", "remove_tree", "reserve_tokens", "temp_token",
           "unlink_files"]

TEMP_SUFFIX = ".partial"
_TEMP_RE = re.compile(r"^\..*\.[0-9a-f]{32}\.partial$", re.DOTALL)


def is_temp_name(name: str) -> bool:
    """True for the names of the temporary files of atomic writes
    (``.<name>.<32 hex digits>.partial``)."""
    return name.endswith(TEMP_SUFFIX) and _TEMP_RE.match(name) is not None


class _TokenState(TypedDict):
    pid: int | None
    prefix: str
    n: int


_token_state: _TokenState = {"pid": None, "prefix": "", "n": 0}
_token_lock: threading.Lock = fork_safe(sys.modules[__name__], "_token_lock")


def reserve_tokens(n: int) -> tuple[bytes, int]:
    """Temp-file tags for n writes without a syscall per write: a random 16-hex-digit prefix
    drawn once per process (redrawn after fork) and the first of n counter values, each
    written as 16 more hex digits. O_EXCL catches any clash."""
    with _token_lock:
        st = _token_state
        if st["pid"] != os.getpid():
            st["pid"], st["prefix"], st["n"] = os.getpid(), uuid.uuid4().hex[:16], 0
        first = st["n"] + 1
        st["n"] += n
        return st["prefix"].encode("ascii"), first


def temp_token() -> str:
    """One temp-file tag: 32 hex digits, as is_temp_name expects."""
    prefix, n = reserve_tokens(1)
    return f"{prefix.decode('ascii')}{n:016x}"


def fsync_dir(path: str) -> None:
    """fsync a directory (its entries made durable); a no-op where directories cannot be
    opened."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def makedirs(dirname: str, fsync: bool = False) -> None:
    """``os.makedirs(dirname, exist_ok=True)``; with *fsync*, every directory it created is
    made durable in its parent."""
    created = []
    d = dirname
    while not os.path.isdir(d):
        created.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    os.makedirs(dirname, exist_ok=True)
    if fsync:
        for c in reversed(created):
            fsync_dir(os.path.dirname(c))


def atomic_write(path: str, data: bytes | memoryview, fsync: bool = False) -> None:
    """Write *data* to *path* atomically: a temporary file beside it (created exclusively,
    named ``.<name>.<token>.partial``) renamed over it, so readers see the old value or the
    new one, never a part. Missing directories are created. With *fsync* the file and its
    directory are fsynced before returning. The temporary file is removed on any error."""
    dirname, name = os.path.split(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    for attempt in range(10):
        tmp = os.path.join(dirname, f".{name}.{temp_token()}{TEMP_SUFFIX}")
        try:
            fd = os.open(tmp, flags, 0o666)
            break
        except FileExistsError:  # a name clash (another host's process): pick again
            if attempt == 9:
                raise
        except FileNotFoundError:
            # the directory is missing, or was just removed by a concurrent delete of
            # its last key: (re)create it and retry
            if attempt == 9:
                raise
            try:
                makedirs(dirname, fsync)
            except FileNotFoundError:  # a parent vanished concurrently: retry
                pass
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise
    if fsync:
        fsync_dir(dirname)


def discard(path: str) -> None:
    """Remove a file if it is there (a temporary file after a failed write)."""
    with contextlib.suppress(OSError):
        os.unlink(path)


def unlink_files(paths: Iterable[str],
                 missing: tuple[type[BaseException], ...]) -> set[str]:
    """Delete the files at *paths* (a *missing* error: already gone; a directory where a
    file was expected: left alone); the directories of the files deleted."""
    dirs = set()
    for p in paths:
        try:
            os.unlink(p)
        except missing:
            continue
        except PermissionError:
            if os.path.isdir(p):
                continue
            raise
        dirs.add(os.path.dirname(p))
    return dirs


#: how many times remove_tree walks a tree that others keep writing into
_REMOVE_TRIES = 5


def _rmtree(path: str) -> None:
    """shutil.rmtree of a tree other writers may touch meanwhile (another process's
    temporary file renamed away, a file written into a directory just emptied): what
    vanished is no error, and a directory found not empty is walked again, a few times."""
    def gone(_fn: object, _path: str, exc: BaseException) -> None:
        if not isinstance(exc, FileNotFoundError):
            raise exc
    for attempt in range(_REMOVE_TRIES):
        try:
            if sys.version_info >= (3, 12):
                shutil.rmtree(path, onexc=gone)
            else:
                shutil.rmtree(path, onerror=lambda f, p, info: gone(f, p, info[1]))
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno.ENOTEMPTY or attempt == _REMOVE_TRIES - 1:
                raise


def remove_tree(path: str, keep_root: bool) -> None:
    """Remove the directory *path* and everything under it (symlinks removed, never
    followed); with *keep_root* only its contents. A missing *path* is no error, nor a file
    that another writer removes meanwhile (see _rmtree)."""
    if not keep_root:
        if os.path.isdir(path) and not os.path.islink(path):
            _rmtree(path)
        return
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return
    for n in names:
        p = os.path.join(path, n)
        if os.path.isdir(p) and not os.path.islink(p):
            _rmtree(p)
        else:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def _ancestors(d: str, root: str) -> list[str]:
    """The directories from just below ``root`` down to ``d``."""
    out = []
    while len(d) > len(root):
        out.append(d)
        d = os.path.dirname(d)
    return out[::-1]


def check_inside(root: str, paths: Iterable[str], keys: Iterable[str]) -> None:
    """Refuse (StoreError, EPERM) a write or delete whose directory leads outside *root*
    through a symlink (reads may follow such links). ``paths``: the keys' absolute file
    paths, ``keys``: the keys, for the message."""
    real_root = None
    for d, key in dict(zip((os.path.dirname(p) for p in paths), keys)).items():
        if d == root:
            continue
        if real_root is None:
            real_root = os.path.realpath(root)
        real = os.path.realpath(d)
        if real != real_root and not real.startswith(real_root + os.sep):
            link = next((p for p in _ancestors(d, root) if os.path.islink(p)), d)
            raise StoreError(errno.EPERM, f"refusing to write {key!r} through the "
                             f"symlink {link!r}, which leads outside the store root "
                             f"{root!r} (to {real!r})")
