"""A store in an LMDB environment (needs the optional ``lmdb`` package).

The module is named ``lmdb_store`` so that it never shadows the ``lmdb`` package.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any, TypeVar

from chunkstore.forksafe import fork_safe
from chunkstore.storage.forkgate import ForkGate
from ..errors import StoreError
from .base import (BaseStore, byte_span, ensure_bytes, normalize_prefix, store_error,
                   validate_key)

__all__ = ["LMDBStore"]

_T = TypeVar("_T")

DEFAULT_MAP_SIZE = 64 * 2**20  # 64 MiB; grows by doubling when full
MAX_MAP_SIZE = 2**44  # 16 TiB: give up growing beyond this

# environments inherited by a forked child from its parent, by registry key. They must not
# be used in the child. They are not closed either (with old py-lmdb releases that would
# release the parent's reader slots), unless reopening the path fails because py-lmdb (>= 3,
# which handles closing inherited environments safely) still counts them as open.
_INHERITED: dict[str, list] = {}


class _SharedEnv:
    """One open LMDB environment, shared by every LMDBStore on the same path in this process
    (LMDB forbids opening an environment twice in one process)."""

    def __init__(self, env: Any, readonly: bool) -> None:
        self.env = env
        self.readonly = readonly
        # transactions (shared) and map resizes (exclusive); a fork waits for transactions
        # in flight (chunkstore.storage.forkgate.ForkGate)
        self.gate = ForkGate()
        self.refs = 0


_REGISTRY: dict[str, _SharedEnv] = {}
# (re-entrant: opening an environment under it may collect a dropped store, whose __del__
# closes it under this lock again: with a plain lock the thread waited for itself)
_REGISTRY_LOCK: threading.RLock = fork_safe(sys.modules[__name__], "_REGISTRY_LOCK",
                                            threading.RLock)
_REGISTRY_PID = [os.getpid()]


def _registry() -> dict[str, _SharedEnv]:
    if _REGISTRY_PID[0] != os.getpid():
        # forked: the parent's environments must not be used here
        for key, shared in _REGISTRY.items():
            _INHERITED.setdefault(key, []).append(shared)
        _REGISTRY.clear()
        _REGISTRY_PID[0] = os.getpid()
    return _REGISTRY


def _import_lmdb() -> ModuleType:
    try:
        import lmdb
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "LMDBStore needs the 'lmdb' package: pip install 'chunkstore[lmdb]' "
            "(or pip install lmdb)"
        ) from e
    return lmdb


class _Absent(Exception):
    """Internal: a read-only store whose environment does not exist (yet)."""


class _EmptyCursor:
    def first(self) -> bool:
        return False

    def set_range(self, key: bytes) -> bool:
        return False

    def set_key(self, key: bytes) -> bool:
        return False

    def iternext(self, keys: bool = True, values: bool = True) -> Iterator[Any]:
        return iter(())

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(())


class _EmptyTxn:
    """Stands in for a read transaction on an environment that does not exist."""

    def get(self, key: bytes) -> None:
        return None

    def cursor(self) -> _EmptyCursor:
        return _EmptyCursor()

    def stat(self, db: Any = None) -> dict[str, int]:
        return {"entries": 0}


class LMDBStore(BaseStore):
    """A store in an LMDB environment (memory-mapped B-tree, ACID transactions).

    ``LMDBStore(path, mode="a", map_size=None, lock=None, sync=True, subdir=None, **kwargs)``

    - *path* is the environment directory (``data.mdb`` + ``lock.mdb`` inside), or a single
      file when *subdir* is False (by default: False if *path* is an existing file).
    - The memory map starts at *map_size* (default 64 MiB, or the size already used by the
      file if larger) and doubles (``env.set_mapsize``) whenever a write fails with
      ``MapFullError``; the write is then retried. When another process has grown the map,
      ``MapResizedError`` is handled by adopting the new size. No huge fixed map is reserved.
    - Concurrency: safe for many reader threads/processes and one writer at a time (LMDB
      serialises writers with its own lock); ``lock=True`` (the default in writable modes)
      uses LMDB's lock file. In mode ``"r"``, ``lock=None`` means: use the lock file if it
      exists, else open without locking (``lock=False``) so that a read-only directory (or a
      fixture) is opened without creating anything in it; if opening with the lock fails
      for lack of permission, it falls back to ``lock=False``. In mode ``"r"`` a missing
      environment is an empty store (nothing is created).
    - Every write is a transaction: a killed writer leaves each value wholly old or new.
      ``setitems``/``delitems``/``rmdir`` are one transaction each; ``getitems`` one read
      transaction. *sync*=False trades durability against power loss for speed.
    - Keys longer than the environment's maximum key size (511 bytes of UTF-8 by default)
      are refused with ``ValueError``.
    - Extra keyword arguments go to ``lmdb.open`` (e.g. ``max_readers``, ``writemap``).
    - Pickling records the path and options; a store used after ``fork`` reopens the
      environment in the child.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        mode: str = "a",
        map_size: int | None = None,
        lock: bool | None = None,
        sync: bool = True,
        subdir: bool | None = None,
        dimension_separator: str | None = None,
        buffers: bool = True,
        **kwargs: Any,
    ) -> None:
        # buffers: zarr-python 2's switch for reading through lmdb's buffers; values are
        # copied out as bytes here either way, so it changes nothing (not an lmdb option)
        super().__init__(mode)
        self._set_dimension_separator(dimension_separator)
        self._lmdb = _import_lmdb()
        self.path = os.path.abspath(os.fspath(path))
        self.map_size = int(map_size) if map_size else DEFAULT_MAP_SIZE
        self._lock_opt = lock
        self.sync = bool(sync)
        self._subdir_opt = subdir
        self._kwargs = dict(kwargs)
        self._closed = False
        self._shared: _SharedEnv | None = None
        self._pid = os.getpid()
        self.subdir = (not os.path.isfile(self.path)) if subdir is None else bool(subdir)
        self._absent = mode == "r" and not os.path.exists(self.path)
        if not self._absent:
            self._acquire()

    def _acquire(self) -> None:
        regkey = os.path.realpath(self.path)
        with _REGISTRY_LOCK:
            reg = _registry()
            shared = reg.get(regkey)
            if shared is not None and shared.readonly and self._mode != "r":
                raise StoreError(
                    f"cannot open {self!r} for writing: the environment is already open "
                    f"read-only in this process (close the other store first)"
                )
            if shared is None:
                shared = _SharedEnv(self._open_env_after_fork(regkey), readonly=self._mode == "r")
                reg[regkey] = shared
            shared.refs += 1
        self._shared = shared
        self._regkey = regkey
        self._pid = os.getpid()

    def _open_env_after_fork(self, regkey: str) -> Any:
        inherited = _INHERITED.get(regkey)
        if not inherited:
            return self._open_env()
        try:
            return self._open_env()
        except StoreError as e:
            if "already open" not in str(e):
                raise
        # py-lmdb refuses to open files it still counts as open (inherited from the parent):
        # it closes inherited environments without touching the parent's state, so do that
        for shared in inherited:
            shared.env.close()
        del _INHERITED[regkey]
        return self._open_env()

    def _open_env(self) -> Any:
        lmdb = self._lmdb
        kw = dict(self._kwargs)
        # No spare read transactions: a spare one keeps its reader slot, and a forked child
        # closing the inherited environment (it must, to open its own: py-lmdb refuses a
        # second one) releases the parent's slots, whose next read then fails (MDB_BAD_RSLOT)
        # or, with a read in flight, loses LMDB's protection of the pages it reads. A read
        # transaction taking a free slot costs ~0.1 us more.
        kw.setdefault("max_spare_txns", 0)
        if self._mode == "r":
            if self._lock_opt is None:
                lockfile = (
                    os.path.join(self.path, "lock.mdb") if self.subdir else self.path + "-lock"
                )
                lock = os.path.exists(lockfile)
            else:
                lock = self._lock_opt
            try:
                return lmdb.open(
                    self.path, subdir=self.subdir, readonly=True, lock=lock, create=False, **kw
                )
            except lmdb.Error as e:
                if lock and _is_permission_problem(e):
                    return lmdb.open(
                        self.path, subdir=self.subdir, readonly=True, lock=False,
                        create=False, **kw,
                    )
                raise self._wrap_open_error(e) from e
        lock = True if self._lock_opt is None else self._lock_opt
        if self.subdir:
            os.makedirs(self.path, exist_ok=True)
        else:
            d = os.path.dirname(self.path)
            if d:
                os.makedirs(d, exist_ok=True)
        try:
            return lmdb.open(
                self.path, subdir=self.subdir, map_size=self.map_size, lock=lock,
                sync=self.sync, create=True, **kw,
            )
        except lmdb.Error as e:
            raise self._wrap_open_error(e) from e

    def _wrap_open_error(self, e: Exception) -> Exception:
        if isinstance(e, OSError):
            return e
        return store_error(f"cannot open LMDB environment {self.path!r}: {e}", e)

    def _sh(self) -> _SharedEnv:
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        if self._absent:
            if not os.path.exists(self.path):
                raise _Absent()
            self._absent = False  # the environment was created since: open it
            self._acquire()
        if self._pid != os.getpid():
            # forked child: reopen (the parent's environment is abandoned, never closed)
            self._acquire()
        assert self._shared is not None  # open: set by _acquire, cleared only by close
        return self._shared

    @property
    def env(self) -> Any:
        """The underlying ``lmdb.Environment``."""
        try:
            return self._sh().env
        except _Absent:
            raise FileNotFoundError(
                errno.ENOENT, "no LMDB environment (read-only store on a missing path)",
                self.path,
            ) from None

    # -- identity / pickling ---------------------------------------------------------------

    def _where(self) -> str:
        return self.path

    def _identity(self) -> tuple[Any, ...]:
        return (self._real_path(self.path),)  # (the file through any link: base.py)

    def _reopen_args(self) -> dict[str, Any]:
        return {"path": self.path, "map_size": self.map_size, "lock": self._lock_opt,
                "sync": self.sync, "subdir": self.subdir, **self._kwargs}

    def close(self) -> None:
        """Close the environment. Idempotent."""
        if self._closed:
            return
        self._closed = True
        shared, self._shared = self._shared, None
        if shared is None or self._pid != os.getpid():
            return
        with _REGISTRY_LOCK:
            shared.refs -= 1
            last = shared.refs <= 0
            if last and _registry().get(self._regkey) is shared:
                del _registry()[self._regkey]
        if last:
            with shared.gate.exclusive():
                shared.env.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass

    def flush(self) -> None:
        """Sync the LMDB environment to disk (nothing on a read-only, closed or not yet created
        store).
        """
        if not self._closed and self._mode != "r" and not self._absent:
            self.env.sync(True)

    # -- transactions ----------------------------------------------------------------------

    def _grow(self, seen: int) -> None:
        """Double the map size (unless another thread already grew it past *seen*)."""
        sh = self._sh()
        env = sh.env
        with sh.gate.exclusive():
            current = env.info()["map_size"]
            if current > seen:
                return
            new = current * 2
            if new > MAX_MAP_SIZE:
                raise StoreError(f"{self!r}: map size would exceed {MAX_MAP_SIZE} bytes")
            env.set_mapsize(new)

    def _adopt_size(self) -> None:
        sh = self._sh()
        with sh.gate.exclusive():
            sh.env.set_mapsize(0)  # adopt the size set by another process

    def _run(self, body: Callable[[Any], _T], write: bool, buffers: bool = False) -> _T:
        lmdb = self._lmdb
        while True:
            try:
                sh = self._sh()
            except _Absent:
                return body(_EmptyTxn())
            env = sh.env
            seen = None
            try:
                with sh.gate.shared():
                    seen = env.info()["map_size"] if write else None
                    with env.begin(write=write, buffers=buffers) as txn:
                        return body(txn)
            except lmdb.MapFullError:
                assert seen is not None  # only a write transaction fills the map
                self._grow(seen)
            except lmdb.MapResizedError:
                self._adopt_size()
            except lmdb.Error as e:  # a full disk, an I/O error: an OSError keeping errno
                raise store_error(f"LMDB store {self.path!r}: {e}", e) from e

    def _k(self, key: str) -> bytes:
        validate_key(key)
        b = key.encode("utf-8")
        if len(b) > 511:
            try:
                limit = self._sh().env.max_key_size()
            except _Absent:
                limit = 511
            if len(b) > limit:
                raise ValueError(
                    f"invalid store key {key!r}: longer than LMDB's maximum key size "
                    f"({limit} bytes)"
                )
        return b

    # -- reads -----------------------------------------------------------------------------

    def __getitem__(self, key: str) -> bytes:
        k = self._k(key)
        v = self._run(lambda txn: txn.get(k), write=False)
        if v is None:
            raise KeyError(key)
        return v

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return ``{key: value}`` for the *keys* present, read in one transaction; absent keys
        are omitted.
        """
        pairs = [(key, self._k(key)) for key in keys]

        def body(txn: Any) -> dict[str, bytes]:
            out = {}
            for key, k in pairs:
                v = txn.get(k)
                if v is not None:
                    out[key] = v
            return out

        return self._run(body, write=False)

    def get_partial(self, key: str, ranges: Iterable[tuple[int, int | None]]) -> list[bytes]:
        """Read byte ranges of one value, in one transaction, without copying the whole value.

        See :meth:`BaseStore.get_partial <chunkstore.storage.base.BaseStore.get_partial>` for
        *ranges*. Raises ``KeyError`` if the key is absent and ``ValueError`` for a negative length.
        """
        k = self._k(key)
        ranges = list(ranges)

        def body(txn: Any) -> list[bytes]:
            v = txn.get(k)  # memoryview into the map: slice without copying the value
            if v is None:
                raise KeyError(key)
            size = len(v)
            out = []
            for off, length in ranges:
                start, end = byte_span(size, off, length)
                out.append(bytes(v[start:end]) if start < end else b"")
            return out

        return self._run(body, write=False, buffers=True)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        k = self._k(key)
        return self._run(lambda txn: txn.get(k) is not None, write=False, buffers=True)

    def _keys(self, prefix: str) -> list[str]:
        p = (prefix + "/").encode("utf-8") if prefix else b""

        def body(txn: Any) -> list[str]:
            cur = txn.cursor()
            out = []
            if prefix:
                exact = prefix.encode("utf-8")
                if cur.set_key(exact):
                    out.append(prefix)
                if not cur.set_range(p):
                    return out
            elif not cur.first():
                return out
            for k in cur.iternext(keys=True, values=False):
                if p and not k.startswith(p):
                    break
                out.append(k.decode("utf-8"))
            return out

        return self._run(body, write=False, buffers=False)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys(""))

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        """Iterate over every key at or under *prefix* (recursively)."""
        return iter(self._keys(normalize_prefix(prefix)))

    def __len__(self) -> int:
        return self._run(lambda txn: txn.stat()["entries"], write=False)

    def listdir(self, prefix: str = "") -> list[str]:
        """Sorted names of the immediate children of *prefix*, found with a cursor over the key
        range.
        """
        prefix = normalize_prefix(prefix)
        p = (prefix + "/").encode("utf-8") if prefix else b""
        n = len(p)

        def body(txn: Any) -> list[str]:
            cur = txn.cursor()
            out = []
            ok = cur.set_range(p) if p else cur.first()
            while ok:
                k = cur.key()
                if not k.startswith(p):
                    break
                rest = k[n:]
                i = rest.find(b"/")
                if i < 0:
                    out.append(rest.decode("utf-8"))
                    ok = cur.next()
                else:
                    child = rest[:i]
                    out.append(child.decode("utf-8"))
                    # skip the child's subtree: jump to the first key after "child/"
                    ok = cur.set_range(p + child + b"0")
            return out

        return sorted(set(x for x in self._run(body, write=False, buffers=False) if x))

    def getsize(self, prefix: str = "") -> int:
        """Total size in bytes of the values at or under *prefix*."""
        prefix = normalize_prefix(prefix)
        p = (prefix + "/").encode("utf-8") if prefix else b""

        def body(txn: Any) -> int:
            cur = txn.cursor()
            total = 0
            if prefix:
                v = txn.get(prefix.encode("utf-8"))
                if v is not None:
                    total += len(v)
                if not cur.set_range(p):
                    return total
            elif not cur.first():
                return 0
            for k, v in cur:
                if p and not bytes(k).startswith(p):
                    break
                total += len(v)
            return total

        return self._run(body, write=False, buffers=True)

    # -- writes ----------------------------------------------------------------------------

    def __setitem__(self, key: str, value: Any) -> None:
        k = self._k(key)
        self._check_writable(key)
        value = ensure_bytes(value)
        self._run(lambda txn: txn.put(k, value), write=True)

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """Store every ``key: value`` of *mapping* in one write transaction.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        items = [(self._k(k), ensure_bytes(v)) for k, v in mapping.items()]

        def body(txn: Any) -> None:
            for k, v in items:
                txn.put(k, v)

        self._run(body, write=True)

    def __delitem__(self, key: str) -> None:
        k = self._k(key)
        self._check_writable(key)
        if not self._run(lambda txn: txn.delete(k), write=True):
            raise KeyError(key)

    def delitems(self, keys: Iterable[str]) -> None:
        """Delete *keys* in one write transaction; absent keys are ignored.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        ks = [self._k(k) for k in keys]

        def body(txn: Any) -> None:
            for k in ks:
                txn.delete(k)

        self._run(body, write=True)

    def rmdir(self, prefix: str = "") -> None:
        """Delete every key under *prefix* (all keys if *prefix* is empty) in one write transaction.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        prefix = normalize_prefix(prefix)
        p = (prefix + "/").encode("utf-8") if prefix else b""

        def body(txn: Any) -> None:
            cur = txn.cursor()
            ok = cur.set_range(p) if p else cur.first()
            while ok:
                if p and not cur.key().startswith(p):
                    break
                ok = cur.delete()  # moves to the next item
                if ok and not cur.key():
                    break

        self._run(body, write=True)

    def clear(self) -> None:
        """Delete every key (``rmdir("")``)."""
        self.rmdir("")


def _is_permission_problem(e: Exception) -> bool:
    msg = str(e).lower()
    return (
        "permission" in msg
        or "read-only" in msg
        or "readonly" in msg
        or getattr(e, "errno", None) in (errno.EACCES, errno.EROFS, errno.EPERM)
    )
