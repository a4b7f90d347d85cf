"""ObjectStore: a store over obstore (``pip install chunkstore[obstore]``), zarr-python 3's
``ObjectStore(store, read_only=)``: S3, GCS, Azure, HTTP, local and memory through obstore's
Rust client.

On a remote object store it takes part in chunkstore's request pipelining (see
``storage/pipelining.py``) like FSStore: ``start_fetch``/``start_put`` put every request of a
selection in flight at once (up to ``config.get("io_concurrency")``) on one event loop thread
of this module, with the same retries of transient errors; batch reads, writes and deletes
are concurrent (deletes: one bulk request)."""

from __future__ import annotations

import errno

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any, Literal

from chunkstore.forksafe import fork_safe
from . import fsspec_io, protocol
from .directory import DirectoryStore
from .base import (BaseStore, ValueVersion, VersionChanged, byte_span, ensure_bytes,
                   normalize_prefix, validate_key)
from .remote_version import RemoteVersion
from chunkstore.errors import NoSuchBucketError, store_name  # noqa: F401 (re-exported)

#: obstore store classes that talk to a server (each request a round trip)
_REMOTE = frozenset({"S3Store", "GCSStore", "AzureStore", "HTTPStore"})


class _Loop:
    """One event loop on a daemon thread for every ObjectStore of the process (created on
    first use; a forked child makes its own): fsspec_io.Batch runs its requests there."""

    _lock = threading.Lock()
    _pid: int | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if _Loop._loop is None or _Loop._pid != os.getpid():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="chunkstore-obstore",
                                          daemon=True)
                thread.start()
                _Loop._loop, _Loop._pid, _Loop._thread = loop, os.getpid(), thread
            return _Loop._loop

    @staticmethod
    def stopped() -> bool:
        """Whether this process's loop was stopped (stop_at_exit ran): a request sent to it
        would never be answered."""
        loop = _Loop._loop
        return (loop is not None and _Loop._pid == os.getpid()
                and (loop.is_closed() or not loop.is_running()))

    @staticmethod
    def stop_at_exit() -> None:
        """Stop the loop and wait for its thread (atexit): obstore's runtime threads hand
        each result to it through a Python callback, and one still doing so while the
        interpreter finalized aborted the process (SIGABRT after a script's last write, 2
        to 4 exits in 40, its data written)."""
        loop, thread = _Loop._loop, _Loop._thread
        if loop is None or thread is None or _Loop._pid != os.getpid() or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        # (the GIL let go a moment longer: a runtime thread past its hand-off returns)
        time.sleep(0.05)


atexit.register(_Loop.stop_at_exit)


_LOOP = _Loop()


class _RequestLoop:
    """Where a batch's requests run: the asynchronous API caller's own event loop while an
    engine call it awaits is running (protocol.CALLER_LOOP: obstore's coroutines run on any
    loop), else the stores' shared I/O loop."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        caller = protocol.caller_loop()
        return caller if caller is not None else _LOOP.loop


_REQUESTS = _RequestLoop()

def _below_a_file(e: BaseException) -> bool:
    """Whether an obstore error says the key lies below a file (a LocalStore's "Not a
    directory"): no such key can exist, so it is absent (a format probe asks for
    ``a/zarr.json/zarr.json``), not an I/O error."""
    return "Not a directory (os error 20)" in str(e)


def _no_such_object(e: BaseException) -> bool:
    """Whether an obstore error deleting a key says no object can be there: the key lies
    below a file, or names a directory (a LocalStore's "Is a directory": a prefix of other
    keys, which holds no value of its own)."""
    return _below_a_file(e) or "Is a directory (os error 21)" in str(e)


def _raise_if_no_bucket(exc: BaseException, where: object) -> None:
    """Raise NoSuchBucketError where an S3 "not found" answer says the bucket is missing."""
    fsspec_io.raise_if_no_bucket(exc, where)


#: obstore S3 clients made by ObjectStore.from_url, by (pid, URL, options)
_CLIENTS: dict[tuple[int, str, str], Any] = {}
_CLIENTS_LOCK: threading.Lock = fork_safe(sys.modules[__name__], "_CLIENTS_LOCK")


def _obstore() -> ModuleType:
    try:
        import obstore
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError("ObjectStore needs obstore: pip install chunkstore[obstore]") \
            from None
    return obstore


#: The configuration keys that name where an obstore store's objects are (the rest are
#: credentials and client options), per store class; classes not named: all of them.
_PLACE_KEYS = {
    "GCSStore": frozenset({"bucket", "base_url"}),
    "AzureStore": frozenset({"account_name", "container_name", "endpoint", "use_emulator",
                             "use_fabric_endpoint"}),
}


class ObjectStore(BaseStore):
    """A chunkstore store over an obstore store (zarr-python 3's ``ObjectStore``).

    Keys are object paths relative to the obstore store's root (its prefix).

    Parameters
    ----------
    store : obstore store
        For example ``obstore.store.S3Store("bucket", prefix="data.zarr")``.
    read_only : bool
        Refuse writes (:class:`~chunkstore.errors.ReadOnlyError`).

    See :meth:`from_url` for an ``s3://`` URL with s3fs-style ``storage_options``, which is
    what the top-level functions do with such a URL.
    """

    def __init__(self, store: Any, *, read_only: bool = False):
        self._obs = _obstore()
        super().__init__("r" if read_only else "a")
        self.store = store
        self._url: tuple[str, dict[str, Any]] | None = None  # set by from_url, for pickling
        # (_located, made once)
        self._where_key: tuple[type, tuple[Any, ...], tuple[Any, str] | None] | None = None

    @classmethod
    def from_url(cls, url: str, storage_options: dict[str, Any] | None = None, *,
                 read_only: bool = False) -> ObjectStore:
        """An ObjectStore on ``s3://bucket/prefix`` (or ``s3a://``), configured from s3fs-style
        *storage_options*, so that code written for s3fs keeps its options.

        Parameters
        ----------
        url : str
            ``s3://bucket[/prefix]``.
        storage_options : dict, optional
            s3fs's names, translated (see :func:`s3_config`): ``key``/``secret``/``token``,
            ``anon``, ``endpoint_url``, ``region_name``, ``requester_pays``, ``profile``,
            ``client_kwargs`` and ``config_kwargs`` (retries, timeouts, addressing style).
        read_only : bool
            Refuse writes.

        Raises
        ------
        ValueError
            For an option obstore cannot honour (use ``FSStore(url, storage_options=...)``
            for s3fs itself).
        """
        from obstore.store import S3Store

        _obstore()
        opts = dict(storage_options or {})
        # One client (connection pool) per URL and options in a process, as fsspec keeps
        # one filesystem: opening an array again costs no new connections.
        ident = (os.getpid(), url, json.dumps(opts, sort_keys=True, default=repr))
        with _CLIENTS_LOCK:
            inner = _CLIENTS.get(ident)
        if inner is None:
            kw = s3_config(url, opts)
            try:
                inner = S3Store.from_url(url, **kw)
            except Exception as e:
                raise ValueError(f"cannot open {url!r} with obstore's S3 client: {e}") from None
            with _CLIENTS_LOCK:
                inner = _CLIENTS.setdefault(ident, inner)
        self = cls(inner, read_only=read_only)
        self._url = (url, opts)
        return self

    def __repr__(self) -> str:
        if self._url is not None:
            return f"ObjectStore({self._url[0]!r})"
        return f"ObjectStore({store_name(self.store)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectStore) and other.store is self.store

    def _located(self) -> tuple[type, tuple[Any, ...], tuple[Any, str] | None]:
        """(location kind, identity, nesting) of the obstore store behind, for in-process
        locks (protocol.location, protocol.node_location). Made once: every shard write asks
        (its stripe lock).

        - S3: the endpoint, bucket and prefix (protocol.s3_identity; not the credentials,
          region or client options, which reach the same objects), of kind
          protocol.S3Objects (the objects an FSStore over s3fs reaches too);
        - LocalStore: the directory's real path, as a DirectoryStore of it (one file per
          key, as a DirectoryStore's: their handles share locks);
        - in memory: the object itself (its id; the wrapper that a lock table holds keeps
          it alive), nesting in nothing;
        - another: its kind, configuration (for GCS and Azure only the keys naming the
          place, not credentials or client options), URL and prefix, so that wrappers made
          apart on one location (``from_url`` twice on one URL) share their handles'
          locks."""
        if self._where_key is None:
            inner = self.store
            kind = type(inner).__name__
            config = dict(getattr(inner, "config", None) or {})
            prefix = str(getattr(inner, "prefix", None) or "")
            located: tuple[type, tuple[Any, ...], tuple[Any, str] | None]
            if kind == "MemoryStore":
                located = (ObjectStore, (kind, id(inner)), None)
            elif kind == "LocalStore" and prefix:
                real = self._real_path(prefix)
                located = (DirectoryStore, (real,), (None, real))
            elif kind == "S3Store" and config.get("bucket"):
                place = protocol.s3_place(config.get("endpoint"), str(config["bucket"]))
                located = (protocol.S3Objects, protocol.s3_identity(
                    config.get("endpoint"), str(config["bucket"]), prefix), (place, prefix))
            else:
                named = _PLACE_KEYS.get(kind)
                if named is not None:
                    config = {k: v for k, v in config.items() if k in named}
                place = (kind, repr(sorted((str(k), str(v)) for k, v in config.items())),
                         str(getattr(inner, "url", None)))
                located = (ObjectStore, place + (prefix,), (place, prefix))
            self._where_key = located
        return self._where_key

    def _identity(self) -> tuple[Any, ...] | None:
        """Where the data is, for in-process locks (see _located)."""
        return self._located()[1]

    def _nesting(self) -> tuple[Any, str] | None:
        """(place, root) for protocol.node_location (see _located)."""
        return self._located()[2]

    def _location_kind(self) -> type:
        """The class whose stores of one identity hold the same data (see _located)."""
        return self._located()[0]

    def __hash__(self) -> int:
        return hash(("ObjectStore", id(self.store)))

    def __getstate__(self) -> dict[str, Any]:
        if self._url is not None:  # rebuilt from the URL (a credential provider may not pickle)
            return {"url": self._url, "read_only": self.read_only}
        return {"store": self.store, "read_only": self.read_only}

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "url" in state:
            url, opts = state["url"]
            new = ObjectStore.from_url(url, opts, read_only=state["read_only"])
            self.__dict__.update(new.__dict__)
            return
        self.__init__(state["store"], read_only=state["read_only"])  # type: ignore[misc]

    def __getitem__(self, key: str) -> bytes:
        validate_key(key)
        if self.concurrent_io:  # remote: with the retries of transient errors of every GET
            batch = self.start_fetch([key])
            assert batch is not None
            v = self.fetched(key, batch.futures[0])
            if v is None:
                raise KeyError(key)
            return v
        try:
            return bytes(self._obs.get(self.store, key).bytes())
        except FileNotFoundError as e:
            _raise_if_no_bucket(e, self)
            raise KeyError(key) from None
        except Exception as e:
            if _below_a_file(e):
                raise KeyError(key) from None
            raise fsspec_io.with_key(e, key, self) from None

    def _request(self, name: str, *args: Any) -> Any:
        """obstore's ``name`` (put, delete, head) on this store with args: on a remote store
        through the stores' loop with ``io_retries`` retries of transient errors, as every
        batched request (a lone PUT of a shard or of zarr.json failed on one 500), else
        called here."""
        if not self.concurrent_io or _Loop.stopped():  # (at exit: called here, unretried)
            return getattr(self._obs, name)(self.store, *args)
        call = getattr(self._obs, name + "_async")
        store = self.store
        batch = fsspec_io.Batch(_LOOP, [lambda: call(store, *args)], ())
        return fsspec_io.result(batch.futures[0])

    def __setitem__(self, key: str, value: Any) -> None:
        validate_key(key)
        self._check_writable(key)
        try:
            self._request("put", key, bytes(ensure_bytes(value)))
        except Exception as e:
            raise fsspec_io.with_key(e, key, self) from None

    @property
    def copies_share_data(self) -> bool:  # type: ignore[override]
        """Whether a pickled copy reaches the same objects: not for obstore's MemoryStore,
        whose objects live in this process (protocol.copies_share_data)."""
        return type(self.store).__name__ != "MemoryStore"

    # ------------------------------------------------------------------ pipelining
    @property
    def concurrent_io(self) -> bool:
        """True on a remote object store: requests then go out concurrently (see
        chunkstore.storage.pipelining); local and in-memory stores are read in place."""
        return type(self.store).__name__ in _REMOTE

    def _get_call(self, key: str) -> Callable[[], Awaitable[bytes]]:
        obs, store = self._obs, self.store

        async def get() -> bytes:
            try:
                res = await obs.get_async(store, key)
            except FileNotFoundError as e:
                _raise_if_no_bucket(e, self)
                raise
            return bytes(await res.bytes_async())
        return get

    def start_fetch(self, keys: list[str]) -> fsspec_io.Batch | None:
        """One GET per key, all in flight at once; ``batch.futures[i]`` answers ``keys[i]``
        with its bytes, None for a missing key, or the error."""
        if not keys:
            return None
        for k in keys:
            validate_key(k)
        return fsspec_io.Batch(_REQUESTS, [self._get_call(k) for k in keys],
                               (FileNotFoundError,))

    def fetched(self, key: str, future: concurrent.futures.Future) -> bytes | None:
        """start_fetch's answer for key: bytes, None if missing; an error names the key."""
        try:
            return fsspec_io.result(future)
        except Exception as e:
            if _below_a_file(e):  # (as __getitem__: no such key can exist)
                return None
            raise fsspec_io.with_key(e, key, self) from None

    def start_put(self, keys: list[str], values: list) -> fsspec_io.Batch:
        """One PUT per key, all in flight at once; errors are in the futures."""
        self._check_writable()
        obs, store = self._obs, self.store

        def call(k: str, v: bytes) -> Callable[[], Awaitable[Any]]:
            return lambda: obs.put_async(store, k, v)
        # (on the stores' own loop, never an asynchronous caller's: a write waits for its
        # PUTs under chunk locks that a blocked caller's loop could be waiting for)
        return fsspec_io.Batch(_LOOP, [call(validate_key(k), bytes(ensure_bytes(v)))
                                       for k, v in zip(keys, values)], ())

    def put_error(self, key: str, exc: BaseException) -> BaseException:
        """The error to raise for a failed write of *key*: *exc* rebuilt with a message naming the
        key and this store.

        An error whose type cannot be rebuilt becomes an ``OSError`` caused by it.
        """
        return fsspec_io.with_key(exc, key, self)

    def __delitem__(self, key: str) -> None:
        validate_key(key)
        self._check_writable(key)
        if key not in self:  # deleting a missing object is no error on S3: make it one
            raise KeyError(key)
        try:
            self._request("delete", key)
        except FileNotFoundError:
            raise KeyError(key) from None
        except Exception as e:
            raise fsspec_io.with_key(e, key, self, what=f"deleting {key!r}") from None
        self._prune_local([key])

    def _prune_local(self, keys: Iterable[str]) -> None:
        """On a LocalStore, remove the directories that deletes of keys left empty (as
        DirectoryStore does, and LocalStore itself with automatic_cleanup=True): an empty
        directory would stop a later key of its name (a v2 chunk "a/0" where a group
        "a/0" was) from being written ("Is a directory")."""
        if type(self.store).__name__ != "LocalStore":
            return
        root = os.fspath(getattr(self.store, "prefix", "") or "")
        if not root:
            return
        dirs = {os.path.dirname(k) for k in keys} - {""}
        for d in sorted(dirs, key=len, reverse=True):
            while d:
                try:
                    os.rmdir(os.path.join(root, d))
                except OSError:  # not empty (or gone, or not a directory): stop here
                    break
                d = os.path.dirname(d)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        validate_key(key)
        try:
            self._request("head", key)
        except FileNotFoundError:
            return False
        except Exception as e:
            if _below_a_file(e):
                return False
            raise fsspec_io.with_key(e, key, self) from None
        return True

    def __iter__(self) -> Iterator[str]:
        return self.keys_under("")

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """Upload every ``key: value`` of *mapping*, concurrently; all keys are checked first.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store; after every upload
        has settled, the first failure is raised, naming its key.
        """
        self._check_writable()
        items = {validate_key(k): bytes(ensure_bytes(v)) for k, v in mapping.items()}
        if len(items) < 2:  # every key checked before anything is written
            for k, v in items.items():
                try:
                    self._request("put", k, v)
                except Exception as e:
                    raise fsspec_io.with_key(e, k, self) from None
            return
        batch = self.start_put(list(items), list(items.values()))
        errors = []
        for k, f in zip(items, batch.futures):
            try:
                f.result()
            except Exception as e:  # noqa: BLE001 - the first one is raised, after all settle
                errors.append(self.put_error(k, e))
        if errors:
            raise errors[0]

    def delitems(self, keys: Iterable[str]) -> None:
        """Delete keys (absent ones are no error), in one bulk request where the store
        has one."""
        self._check_writable()
        keys = [validate_key(k) for k in keys]
        if not keys:
            return
        try:
            self._request("delete", keys)
        except Exception as e:
            # a local store stops at an absent key (or one below a file, which cannot
            # exist either): go one by one
            if not (isinstance(e, FileNotFoundError) or _no_such_object(e)):
                _raise_if_no_bucket(e, self)
                more = f" and {len(keys) - 1} more" if len(keys) > 1 else ""
                raise fsspec_io.with_key(e, keys[0], self,
                                         what=f"deleting {keys[0]!r}{more}") from None
            for k in keys:
                try:
                    self._obs.delete(self.store, k)
                except FileNotFoundError:
                    pass
                except Exception as e:
                    if not _no_such_object(e):
                        raise fsspec_io.with_key(e, k, self) from None
        self._prune_local(keys)

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        """Iterate over every key at or under *prefix* (recursively)."""
        prefix = normalize_prefix(prefix)
        if prefix and prefix.rstrip("/") in self:  # a value at the prefix itself
            yield prefix.rstrip("/")
        try:
            for batch in self._obs.list(self.store, prefix=prefix.rstrip("/") or None):
                for meta in batch:
                    yield meta["path"]
        except Exception as e:
            if not _below_a_file(e):  # (a prefix below a file: nothing is under it)
                _raise_if_no_bucket(e, self)
                raise fsspec_io.with_key(e, prefix, self,
                                         what=f"listing {prefix or '/'!r}") from None

    def listdir(self, prefix: str = "") -> list[str]:
        """Sorted names of the immediate children of *prefix* (objects and common prefixes)."""
        prefix = normalize_prefix(prefix).rstrip("/")
        try:
            res = self._obs.list_with_delimiter(self.store, prefix or None)
        except Exception as e:
            if _below_a_file(e):  # (a prefix below a file: nothing is under it)
                return []
            _raise_if_no_bucket(e, self)
            raise fsspec_io.with_key(e, prefix, self,
                                     what=f"listing {prefix or '/'!r}") from None
        cut = len(prefix) + 1 if prefix else 0
        prefixes = res["common_prefixes"]
        if type(self.store).__name__ == "LocalStore":
            # a local directory emptied by deletes is still listed: keep non-empty ones only
            prefixes = [p for p in prefixes if any(
                batch for batch in self._obs.list(self.store, prefix=p.rstrip("/")))]
        names = {p.rstrip("/")[cut:] for p in prefixes}
        names |= {m["path"][cut:] for m in res["objects"]}
        return sorted(n for n in names if n)

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return ``{key: value}`` for the *keys* present, all requested at once; absent keys are
        omitted.
        """
        keys = list(keys)
        if len(keys) <= 1 and protocol.caller_loop() is None:
            return super().getitems(keys)   # (for an aio read, even one GET goes on its loop)
        if not keys:
            return {}
        batch = self.start_fetch(keys)
        assert batch is not None  # keys is not empty
        try:
            got = [(k, self.fetched(k, f)) for k, f in zip(keys, batch.futures)]
        finally:
            batch.cancel()
        return {k: v for k, v in got if v is not None}

    def open_version(self, key: str) -> ValueVersion:
        """Byte ranges of one version of key's object (see storage.base.ValueVersion),
        versioned by its ETag: later GETs go with If-Match (obstore's PreconditionError:
        another version)."""
        validate_key(key)
        obs, store = self._obs, self.store

        async def get(start: int, end: int | None, if_match: str | None
                      ) -> tuple[bytes, str, int | None] | Literal[False]:
            opts: dict = {"range": {"suffix": -start} if end is None else (start, end)}
            if if_match is not None:
                opts["if_match"] = if_match
            try:
                r = await obs.get_async(store, key, options=opts)
            except Exception as e:
                if type(e).__name__ == "PreconditionError":
                    raise VersionChanged(f"{key!r} in {self!r}: not the version {if_match} "
                                         f"any more") from None
                _raise_if_no_bucket(e, self)
                raise
            etag = r.meta.get("e_tag")
            if not etag:
                return False
            return bytes(await r.bytes_async()), etag, r.meta.get("size")

        return RemoteVersion(self, key, _REQUESTS, (FileNotFoundError,), get)

    def get_partial(self, key: str, ranges: Iterable[tuple[int, int | None]]) -> list[bytes]:
        """Read byte ranges of one object with ranged GETs.

        See :meth:`BaseStore.get_partial <chunkstore.storage.base.BaseStore.get_partial>` for
        *ranges* (suffix or open-ended ranges read the whole object). Raises ``KeyError`` if the key
        is absent.
        """
        ranges = list(ranges)
        if any(off < 0 or length is None for off, length in ranges):
            return super().get_partial(key, ranges)  # suffix/open ranges: whole value
        validate_key(key)
        if not ranges:
            return []
        try:
            size = self._obs.head(self.store, key)["size"]
            # (every length is an int: open ranges were served above; byte_span refuses a
            # negative one, which read as b"" here)
            spans = [byte_span(size, off, length) for off, length in ranges]
            wanted = [(s, e) for s, e in spans if e > s]
            got = iter(self._obs.get_ranges(self.store, key, starts=[s for s, _ in wanted],
                                            ends=[e for _, e in wanted]) if wanted else [])
        except FileNotFoundError as e:
            _raise_if_no_bucket(e, self)
            raise KeyError(key) from None
        out = []
        for lo, hi in spans:
            part = bytes(next(got)) if hi > lo else b""
            if len(part) != hi - lo:
                # (a body cut short on the way, its length honest: taken as the object's end,
                # it read as a short value without an error)
                raise OSError(errno.EIO, f"{key!r} in {self!r}: bytes {lo}-{hi} of the "
                              f"{size}-byte object came back as {len(part)} bytes")
            out.append(part)
        return out


#: s3fs options that only tune s3fs's own caches, buffers and event loop: without s3fs they
#: have nothing to tune, so they are accepted and ignored (options that change what is read
#: or written, such as version_aware, are refused instead)
_S3FS_ONLY = frozenset({
    "skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths",
    "default_block_size", "default_fill_cache", "default_cache_type", "cache_regions",
    "asynchronous", "loop", "fixed_upload_size",
})
_KEY_NAMES = {"key": "access_key_id", "aws_access_key_id": "access_key_id",
              "secret": "secret_access_key", "aws_secret_access_key": "secret_access_key",
              "token": "session_token", "aws_session_token": "session_token"}


def s3_config(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """obstore's ``S3Store.from_url`` keywords for s3fs-style *options* on *url*.

    Translated: ``key``/``secret``/``token`` (also as ``aws_*`` names, at the top or in
    ``client_kwargs``), ``anon`` (unsigned requests), ``endpoint_url`` and ``region_name``
    (at the top or in ``client_kwargs``; an ``http://`` endpoint is allowed), ``verify``
    (False: certificates not checked; a path: that CA bundle), ``use_ssl=False`` (plain
    http allowed), ``requester_pays``,
    ``profile`` (credentials of that boto3 profile), and in ``config_kwargs``:
    ``retries.max_attempts``, ``connect_timeout``, ``read_timeout``,
    ``s3.addressing_style``. s3fs's cache settings are ignored. Without explicit
    credentials, obstore reads the ``AWS_*`` environment (and instance metadata); where
    boto3 is installed and finds credentials (``~/.aws``, SSO), those are used instead.

    Raises ``ValueError`` naming any other option.
    """
    opts = dict(options)
    client = dict(opts.pop("client_kwargs", None) or {})
    botocfg = dict(opts.pop("config_kwargs", None) or {})
    config: dict[str, Any] = {}
    client_options: dict[str, Any] = {}
    retry: dict[str, Any] = {}
    for src in (client, opts):
        for name in list(src):
            if name in _KEY_NAMES:
                config[_KEY_NAMES[name]] = src.pop(name)
        if "endpoint_url" in src:
            config["endpoint"] = src.pop("endpoint_url")
        for name in ("region_name", "region"):
            if name in src:
                config["region"] = src.pop(name)
    verify = client.pop("verify", None)
    if verify is False:
        client_options["allow_invalid_certificates"] = True
    elif isinstance(verify, str):
        client_options["root_certificate"] = verify
    if opts.pop("anon", False):
        config["skip_signature"] = True
    if opts.pop("requester_pays", False):
        config["request_payer"] = True
    if opts.pop("use_ssl", True) is False:
        client_options["allow_http"] = True
    profile = opts.pop("profile", None)
    # (copies: the caller's options are read, never changed: the same dict opened a second
    # store without its retries)
    retries = dict(botocfg.pop("retries", None) or {})
    if "max_attempts" in retries:
        retry["max_retries"] = max(int(retries.pop("max_attempts")) - 1, 0)
    retries.pop("mode", None)
    for ours, theirs in (("connect_timeout", "connect_timeout"), ("read_timeout", "timeout")):
        if ours in botocfg:
            client_options[theirs] = f"{float(botocfg.pop(ours))}s"
    style = dict(botocfg.pop("s3", None) or {}).pop("addressing_style", None)
    if style == "virtual":
        config["virtual_hosted_style_request"] = True
    botocfg.pop("max_pool_connections", None)  # obstore's pool grows as needed
    if botocfg.get("signature_version") == "s3v4":  # what obstore signs with anyway
        del botocfg["signature_version"]
    left = [f"client_kwargs[{k!r}]" for k in client] + \
        [f"config_kwargs[{k!r}]" for k in botocfg] + \
        [f"config_kwargs['retries'][{k!r}]" for k in retries] + \
        [repr(k) for k in opts if k not in _S3FS_ONLY]
    if left:
        raise ValueError(
            f"storage_options for {url!r}: {', '.join(left)} cannot be passed on to obstore's "
            f"S3 client (chunkstore's client for s3:// URLs); use "
            f"chunkstore.storage.FSStore({url!r}, storage_options=...) to go through s3fs")
    if str(config.get("endpoint", "")).startswith("http://"):
        client_options["allow_http"] = True
    kw: dict[str, Any] = {"config": config}
    if client_options:
        kw["client_options"] = client_options
    if retry:
        kw["retry_config"] = retry
    if "access_key_id" not in config and not config.get("skip_signature"):
        provider = _boto3_credentials(profile)
        if provider is not None:
            kw["credential_provider"] = provider
    elif profile is not None:
        raise ValueError(f"storage_options for {url!r}: 'profile' and explicit credentials "
                         f"(or anon) exclude each other")
    return kw


def _boto3_credentials(profile: str | None) -> Any:
    """A credential provider from boto3's chain (profile, ~/.aws, SSO), or None where boto3
    is absent or finds nothing (obstore then uses the environment and instance metadata)."""
    if profile is None and ("AWS_ACCESS_KEY_ID" in os.environ or not (
            "AWS_PROFILE" in os.environ or any(os.path.exists(os.path.expanduser(p)) for p in (
                "~/.aws/credentials", "~/.aws/config")))):
        return None  # nothing boto3 would add to what obstore reads (no slow metadata probe)
    try:
        import boto3
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError:
        if profile is not None:
            raise ValueError("storage_options 'profile' needs boto3: pip install boto3") \
                from None
        return None
    session = boto3.Session(profile_name=profile)
    if session.get_credentials() is None:
        if profile is not None:
            raise ValueError(f"boto3 profile {profile!r} has no credentials")
        return None
    return Boto3CredentialProvider(session)
