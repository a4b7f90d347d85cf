"""A store inside one SQLite database file."""

from __future__ import annotations

import contextlib
import errno
import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from chunkstore.forksafe import fork_safe
from chunkstore.storage.forkgate import ForkGate
from ..errors import StoreError
from .base import (BaseStore, ensure_bytes, normalize_prefix, read_spans, store_error,
                   validate_key)

__all__ = ["SQLiteStore"]

_T = TypeVar("_T")

_BATCH = 500  # keys per "IN (...)" query, well under SQLITE_MAX_VARIABLE_NUMBER
# Every statement and transaction of this process's stores holds it shared, so that a fork
# waits for them: SQLite keeps a process's file locks in its memory, and a child forked
# while another thread was inside a write transaction believed the lock held by a thread
# it does not have (its every write failed, "database is locked", for good).
_TXNS = ForkGate()


def _is_busy(e: sqlite3.OperationalError) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    msg = str(e).lower()
    return "locked" in msg or "busy" in msg


class _Placeholder(sqlite3.Connection):
    """An empty in-memory stand-in for a database file that does not exist (yet)."""


def _upper(prefix: str) -> str:
    # every key starting with "prefix/" sorts in [prefix + "/", prefix + "0")
    return prefix + "0"


class SQLiteStore(BaseStore):
    """A store in one SQLite database file: table ``zarr(k TEXT PRIMARY KEY, v BLOB)``.

    ``SQLiteStore(path, mode="a", timeout=60.0, synchronous="NORMAL")``

    - Writable modes create the file and table if missing and put the database in WAL mode
      (many readers alongside one writer); mode ``"r"`` opens the file read-only
      (``?mode=ro``) without changing anything in it, so it can read databases in any journal
      mode. In mode ``"r"`` a missing file is an empty store (nothing is created).
    - Thread-safe: each thread uses its own connection (closed when a later connection is
      opened after its thread has finished, or by :meth:`close`). Process-safe: many processes can read
      and write the same file at once; write transactions are ``BEGIN IMMEDIATE`` with a busy
      timeout, and ``SQLITE_BUSY``/``SQLITE_LOCKED`` are retried with back-off until *timeout*
      seconds have passed. A store used after ``fork`` opens fresh connections in the child.
    - Every write is a transaction, so a killed writer leaves each value wholly old or new.
      ``synchronous`` (``"OFF"``, ``"NORMAL"``, ``"FULL"``) trades durability against power
      loss for speed; with WAL, ``"NORMAL"`` never corrupts the database.
    - ``getitems``/``setitems``/``delitems`` run in one transaction; ``listdir``, ``getsize``
      and ``rmdir`` are single SQL statements over a key range.
    - ``SQLiteStore(":memory:")`` is a private in-memory database: not a file, not shared
      with any other store, gone when the store is closed or garbage-collected. It cannot be
      pickled or used in a forked child (TypeError / StoreError say so).
    - A file that is not an SQLite database, or has no ``zarr`` table in mode ``"r"``, raises
      :class:`~chunkstore.errors.StoreError` naming the path; so does any SQLite error during
      an operation (corrupt pages, I/O error, still locked after *timeout*), chained to the
      original ``sqlite3`` exception.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        mode: str = "a",
        timeout: float = 60.0,
        synchronous: str = "NORMAL",
        dimension_separator: str | None = None,
    ):
        super().__init__(mode)
        self._set_dimension_separator(dimension_separator)
        # ":memory:" would otherwise name a file in the working directory, shared by every
        # such store: a uniquely named shared-cache database is private to this store and
        # reachable from each of its per-thread connections.
        self._memory_uri = None
        if isinstance(path, str) and path == ":memory:":
            self._memory_uri = f"file:chunkstore-{uuid.uuid4().hex}?mode=memory&cache=shared"
            self.path = path
        else:
            self.path = os.path.abspath(os.fspath(path))
        self.timeout = float(timeout)
        if str(synchronous).upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"invalid synchronous setting {synchronous!r}")
        self.synchronous = str(synchronous).upper()
        if self._memory_uri is None and os.path.isdir(self.path):
            raise IsADirectoryError(errno.EISDIR, "SQLiteStore path is a directory", self.path)
        self._init_state()
        # open once now so that a bad file is reported at construction
        self._conn()
        if self._memory_uri is not None:  # the database lives while one connection is open
            self._keeper: sqlite3.Connection | None = self._connect()

    def _init_state(self) -> None:
        self._local = threading.local()
        # (owning thread, connection); connections of finished threads are closed lazily
        self._all_conns: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._conns_lock: threading.Lock = fork_safe(self, "_conns_lock")
        self._pid = os.getpid()
        self._closed = False
        self._setup_done = False

    # -- connections -----------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._memory_uri is not None:
            conn = sqlite3.connect(self._memory_uri, uri=True, timeout=self.timeout,
                                   isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            conn.execute("CREATE TABLE IF NOT EXISTS zarr (k TEXT PRIMARY KEY, v BLOB)")
            return conn
        if self._mode == "r" and not os.path.exists(self.path):
            # a read-only store on a missing file is empty (and creates nothing): serve it
            # from an empty in-memory table until the file appears
            conn = sqlite3.connect(
                ":memory:", isolation_level=None, check_same_thread=False, factory=_Placeholder
            )
            conn.execute("CREATE TABLE zarr (k TEXT PRIMARY KEY, v BLOB)")
            return conn
        try:
            if self._mode == "r":
                uri = "file:" + _quote_path(self.path) + "?mode=ro"
                conn = sqlite3.connect(
                    uri, uri=True, timeout=self.timeout, isolation_level=None,
                    check_same_thread=False,
                )
            else:
                d = os.path.dirname(self.path)
                if d:
                    os.makedirs(d, exist_ok=True)
                conn = sqlite3.connect(
                    self.path, timeout=self.timeout, isolation_level=None,
                    check_same_thread=False,
                )
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            if self._mode != "r":
                if not self._setup_done:
                    self._retry(lambda: self._setup(conn))
                    self._setup_done = True
                conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            else:
                row = conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type='table' AND name='zarr'"
                ).fetchone()
                if row is None:
                    conn.close()
                    raise StoreError(f"{self.path!r} has no 'zarr' table: not an SQLiteStore")
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError) and _is_busy(e):
                raise
            raise store_error(f"cannot open SQLite store {self.path!r}: {e}", e) from e
        return conn

    def _setup(self, conn: sqlite3.Connection) -> None:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS zarr (k TEXT PRIMARY KEY, v BLOB)"
        )

    def _conn(self) -> sqlite3.Connection:
        if self._pid != os.getpid():
            if self._memory_uri is not None:
                raise StoreError("an in-memory SQLiteStore(':memory:') belongs to the process "
                                 "that made it; a forked child cannot use it")
            # forked: never touch the parent's connections (not even to close them)
            self._init_state()
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is not None and isinstance(conn, _Placeholder):
            if os.path.exists(self.path):  # the database was created since: use it
                conn.close()
                conn = None
        if conn is None:
            conn = self._connect()
            with self._conns_lock:
                closed = self._closed  # (closed meanwhile: its connections are gone)
                dead = [c for t, c in self._all_conns if not t.is_alive()]
                self._all_conns = [(t, c) for t, c in self._all_conns if t.is_alive()]
                if not closed:
                    self._all_conns.append((threading.current_thread(), conn))
            if closed:
                dead.append(conn)
            else:
                self._local.conn = conn
            for c in dead:  # their threads are gone: nobody else uses them
                try:
                    c.close()
                except sqlite3.Error:  # pragma: no cover
                    pass
            if closed:
                raise StoreError(f"{self!r} is closed")
        return conn

    def _check_not_closed(self) -> None:
        """(in a statement's hold of _TXNS) StoreError if the store was closed: its
        connections are."""
        if self._closed:
            raise StoreError(f"{self!r} is closed")

    def _retry(self, fn: Callable[[], _T]) -> _T:
        """Run *fn* (a whole transaction), retrying on SQLITE_BUSY/LOCKED until timeout."""
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        while True:
            try:
                return fn()
            except sqlite3.Error as e:
                retry = isinstance(e, sqlite3.OperationalError) and _is_busy(e)
                if not retry or time.monotonic() > deadline:
                    # a broken, locked or unreadable database: never "missing"
                    raise store_error(f"SQLite store {self.path!r}: {e}", e) from e
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.1)

    def _write_txn(self, body: Callable[[sqlite3.Connection], Any]) -> Any:
        conn = self._conn()

        def run() -> Any:
            with _TXNS.shared():  # (a fork waits for it: see _TXNS)
                self._check_not_closed()
                conn.execute("BEGIN IMMEDIATE")
                try:  # the body and its COMMIT, or nothing
                    result = body(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
                return result

        return self._retry(run)

    def _read(self, sql: str, params: tuple = ()) -> list:
        conn = self._conn()

        def run() -> list:
            with _TXNS.shared():
                self._check_not_closed()
                return conn.execute(sql, params).fetchall()

        return self._retry(run)

    def _read_txn(self, body: Callable[[sqlite3.Connection], Any]) -> Any:
        conn = self._conn()

        def run() -> Any:
            with _TXNS.shared():
                self._check_not_closed()
                conn.execute("BEGIN")
                try:
                    return body(conn)
                finally:
                    conn.execute("COMMIT")

        return self._retry(run)

    def close(self) -> None:
        """Close every connection this store opened in this process. Idempotent. Other
        threads' statements in flight end first; their later ones raise StoreError."""
        if self._pid != os.getpid():
            self._init_state()
        # (no statement of this process's SQLite stores runs meanwhile: a connection closed
        # under another thread's statement crashed the interpreter)
        with _TXNS.exclusive():
            with self._conns_lock:
                self._closed = True
                conns, self._all_conns = self._all_conns, []
            for _, c in conns:
                try:
                    c.close()
                except sqlite3.Error:  # pragma: no cover
                    pass
        self._local = threading.local()
        keeper = getattr(self, "_keeper", None)
        if keeper is not None and self._pid == os.getpid():
            self._keeper = None
            keeper.close()

    def __del__(self) -> None:  # pragma: no cover
        try:
            if self._pid == os.getpid():
                for _, c in self._all_conns:
                    c.close()
        except Exception:
            pass

    # -- identity / pickling ---------------------------------------------------------------

    def _where(self) -> str:
        return self.path

    def _identity(self) -> tuple[Any, ...]:
        path = self.path if self._memory_uri is not None else self._real_path(self.path)
        return (path, self._memory_uri)

    def _reopen_args(self) -> dict[str, Any]:
        if self._memory_uri is not None:
            raise TypeError("SQLiteStore(':memory:') is private to this process and cannot be "
                            "pickled; give a file path to share a store between processes")
        return {"path": self.path, "timeout": self.timeout, "synchronous": self.synchronous}

    # -- reads -----------------------------------------------------------------------------

    def __getitem__(self, key: str) -> bytes:
        validate_key(key)
        rows = self._read("SELECT v FROM zarr WHERE k = ?", (key,))
        if not rows:
            raise KeyError(key)
        v = rows[0][0]
        return v if type(v) is bytes else (b"" if v is None else bytes(v))

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return ``{key: value}`` for the *keys* present, read in one transaction; absent keys
        are omitted.
        """
        keys = [validate_key(k) for k in keys]
        if not keys:
            return {}

        def body(conn: sqlite3.Connection) -> dict[str, bytes]:
            out = {}
            for i in range(0, len(keys), _BATCH):
                part = keys[i : i + _BATCH]
                q = "SELECT k, v FROM zarr WHERE k IN (%s)" % ",".join("?" * len(part))
                for k, v in conn.execute(q, part):
                    out[k] = v if type(v) is bytes else (b"" if v is None else bytes(v))
            return out

        return self._read_txn(body)

    def get_partial(self, key: str, ranges: Iterable[tuple[int, int | None]]) -> list[bytes]:
        """Read byte ranges of one value (with SQL ``substr``, not the whole value).

        See :meth:`BaseStore.get_partial <chunkstore.storage.base.BaseStore.get_partial>` for
        *ranges*. Raises ``KeyError`` if the key is absent and ``ValueError`` for a negative length.
        """
        validate_key(key)
        ranges = list(ranges)

        def body(conn: sqlite3.Connection) -> list[bytes]:
            row = conn.execute("SELECT length(v) FROM zarr WHERE k = ?", (key,)).fetchone()
            if row is None:
                raise KeyError(key)
            return read_spans(_Blob(conn, key), row[0] or 0, ranges)

        return self._read_txn(body)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        validate_key(key)
        return bool(self._read("SELECT 1 FROM zarr WHERE k = ?", (key,)))

    def __iter__(self) -> Iterator[str]:
        rows = self._read("SELECT k FROM zarr ORDER BY k")
        return (r[0] for r in rows)

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        """Iterate over every key at or under *prefix* (recursively)."""
        prefix = normalize_prefix(prefix)
        if not prefix:
            return iter(self)
        rows = self._read(
            "SELECT k FROM zarr WHERE k = ? OR (k >= ? AND k < ?) ORDER BY k",
            (prefix, prefix + "/", _upper(prefix)),
        )
        return (r[0] for r in rows)

    def __len__(self) -> int:
        return self._read("SELECT COUNT(*) FROM zarr")[0][0]

    def listdir(self, prefix: str = "") -> list[str]:
        """Sorted names of the immediate children of *prefix*, computed in one SQL query."""
        prefix = normalize_prefix(prefix)
        if prefix:
            n = len(prefix) + 2  # 1-based start of the part after "prefix/"
            rows = self._read(
                "SELECT DISTINCT CASE WHEN instr(substr(k, ?), '/') = 0 THEN substr(k, ?) "
                "ELSE substr(k, ?, instr(substr(k, ?), '/') - 1) END "
                "FROM zarr WHERE k >= ? AND k < ?",
                (n, n, n, n, prefix + "/", _upper(prefix)),
            )
        else:
            rows = self._read(
                "SELECT DISTINCT CASE WHEN instr(k, '/') = 0 THEN k "
                "ELSE substr(k, 1, instr(k, '/') - 1) END FROM zarr"
            )
        return sorted(r[0] for r in rows if r[0])

    def getsize(self, prefix: str = "") -> int:
        """Total size in bytes of the values at or under *prefix*."""
        prefix = normalize_prefix(prefix)
        if not prefix:
            rows = self._read("SELECT COALESCE(SUM(length(v)), 0) FROM zarr")
        else:
            rows = self._read(
                "SELECT COALESCE(SUM(length(v)), 0) FROM zarr "
                "WHERE k = ? OR (k >= ? AND k < ?)",
                (prefix, prefix + "/", _upper(prefix)),
            )
        return int(rows[0][0])

    # -- writes ----------------------------------------------------------------------------

    def __setitem__(self, key: str, value: Any) -> None:
        validate_key(key)
        self._check_writable(key)
        value = ensure_bytes(value)
        self._write_txn(
            lambda c: c.execute("INSERT OR REPLACE INTO zarr (k, v) VALUES (?, ?)", (key, value))
        )

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """Insert or replace every ``key: value`` of *mapping* in one transaction.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        items = [(validate_key(k), ensure_bytes(v)) for k, v in mapping.items()]
        if not items:
            return
        self._write_txn(
            lambda c: c.executemany("INSERT OR REPLACE INTO zarr (k, v) VALUES (?, ?)", items)
        )

    def __delitem__(self, key: str) -> None:
        validate_key(key)
        self._check_writable(key)
        n = self._write_txn(lambda c: c.execute("DELETE FROM zarr WHERE k = ?", (key,)).rowcount)
        if n == 0:
            raise KeyError(key)

    def delitems(self, keys: Iterable[str]) -> None:
        """Delete *keys* in one transaction; absent keys are ignored.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        rows = [(validate_key(k),) for k in keys]
        if not rows:
            return
        self._write_txn(lambda c: c.executemany("DELETE FROM zarr WHERE k = ?", rows))

    def rmdir(self, prefix: str = "") -> None:
        """Delete every key under *prefix* (all keys if *prefix* is empty) in one transaction.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        prefix = normalize_prefix(prefix)
        if not prefix:
            self._write_txn(lambda c: c.execute("DELETE FROM zarr"))
        else:
            self._write_txn(
                lambda c: c.execute(
                    "DELETE FROM zarr WHERE k >= ? AND k < ?", (prefix + "/", _upper(prefix))
                )
            )

    def clear(self) -> None:
        """Delete every key (``rmdir("")``)."""
        self.rmdir("")


def _quote_path(path: str) -> str:
    from urllib.parse import quote

    return quote(path, safe="/:")



class _Blob:
    """One value of the table as a seekable file, for read_spans: each read one substr()."""

    def __init__(self, conn: sqlite3.Connection, key: str) -> None:
        self._conn, self._key, self._pos = conn, key, 0

    def seek(self, pos: int) -> None:
        self._pos = pos

    def read(self, n: int) -> bytes:
        (v,) = self._conn.execute("SELECT substr(v, ?, ?) FROM zarr WHERE k = ?",
                                  (self._pos + 1, n, self._key)).fetchone()
        self._pos += n
        return bytes(v)
