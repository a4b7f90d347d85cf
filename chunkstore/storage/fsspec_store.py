"""A store over any fsspec filesystem (local, memory, S3, GCS, chained URLs...)."""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any

from . import fsspec_io, fsspec_ranges, protocol
from .base import BaseStore, ensure_bytes, normalize_prefix, validate_key
from .directory import DirectoryStore
from .local_files import (atomic_write, check_inside, is_temp_name, remove_tree,
                          unlink_files)

__all__ = ["FSStore"]

#: exceptions meaning "no such key"; anything else propagates
DEFAULT_MISSING_EXCEPTIONS: tuple[type[BaseException], ...] = (
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
)


#: connections an S3 client may hold open: enough for io_concurrency's default (botocore's
#: own default, 10, would queue the requests of a 64-chunk read behind each other)
_S3_POOL = 64


def _fs_options(url: str, options: dict) -> dict:
    """The filesystem's options: the user's, plus a connection pool as large as the
    requests we put in flight (for S3, unless the user chose one)."""
    import fsspec.core

    protocol = fsspec.core.split_protocol(url)[0]
    if protocol not in ("s3", "s3a"):
        return options
    cfg = dict(options.get("config_kwargs") or {})
    if "max_pool_connections" in cfg:
        return options
    cfg["max_pool_connections"] = _S3_POOL
    return {**options, "config_kwargs": cfg}


class FSStore(BaseStore):
    """A store over an fsspec filesystem.

    ``FSStore(url, mode="a", storage_options=None, dimension_separator=None,
    missing_exceptions=None)``

    - *url* is anything ``fsspec.core.url_to_fs`` understands: ``file:///data/x.zarr``,
      ``memory://x``, ``s3://bucket/x.zarr``, ``gcs://...``, chained URLs such as
      ``zip::file:///data/x.zip``. *storage_options* are passed to the filesystem (e.g.
      ``{"anon": True}`` or ``{"client_kwargs": {"endpoint_url": ...}}`` for S3).
    - Key ``"a/.zarray"`` is the path ``<root>/a/.zarray``; keys are validated first.
    - Missing versus broken: only *missing_exceptions* (default ``FileNotFoundError``,
      ``IsADirectoryError``, ``NotADirectoryError``) mean "absent" (``KeyError`` from
      ``__getitem__``, omitted by ``getitems``). Every other error (``PermissionError`` for an
      S3 403, I/O and network errors) propagates. Note that S3 answers 403 rather than 404
      for a missing object when the credentials may not list the bucket; that is reported
      as ``PermissionError``, as the store cannot tell.
    - On async filesystems (S3, GCS, Azure, HTTP) every key is one request (a GET without
      the HEAD s3fs would send first), all of a batch in flight at once on fsspec's event
      loop up to ``config.get("io_concurrency")``, transient errors (throttling, 5xx,
      timeouts) retried ``config.get("io_retries")`` times with backoff (see fsspec_io);
      ``start_fetch``/``start_put`` hand out the per-key futures, for the array layer to
      decode chunks as they arrive (see pipelining). Other filesystems use ``fs.cat_ranges``
      and ``fs.pipe``. Errors other than a missing key are raised naming the key.
    - On the local filesystem, writes are atomic (the one atomic write of
      :class:`DirectoryStore`: a temporary file renamed over the target, fsynced with
      *fsync*; a write through a symlink leading outside the root is refused) and deleting the last key of a directory removes the empty
      directories up to the root. Object stores (S3/GCS) replace objects atomically anyway.
    - Listings invalidate fsspec's listing cache first, so keys written by others are seen.
    - Pickling records the URL and options; the copy opens a new filesystem instance (for
      ``memory://`` it only sees the same data within the same process).
    - *dimension_separator* is only recorded for the array layer.
    - *fs*: an fsspec filesystem instance to use (then *url* is a path on it and
      *storage_options* must be empty), as zarr-python 2's ``FSStore(url, fs=...)``.
    - *normalize_keys*: lower-case every key before use, as zarr-python 2 does.
    - ``s3://`` URLs given to the top-level functions (``open``, ``open_array``, ...) go to
      :class:`~chunkstore.storage.ObjectStore` (obstore's S3 client) instead; ``FSStore``
      itself always goes through the fsspec filesystem (s3fs on S3).
    """

    def __init__(
        self,
        url: str | os.PathLike,
        mode: str = "a",
        storage_options: dict | None = None,
        dimension_separator: str | None = None,
        missing_exceptions: tuple[type[BaseException], ...] | None = None,
        fs: Any = None,
        normalize_keys: bool = False,
        fsync: bool = False,
        check: bool = False,
        create: bool = False,
        exceptions: tuple[type[BaseException], ...] | None = None,
        key_separator: str | None = None,
        **storage_kwargs: Any,
    ) -> None:
        # zarr-python 2's FSStore keywords that are not fsspec options: check (a write and
        # delete probe, which the first real write does here), create (make the root: done
        # on the first write), key_separator (dimension_separator's old name), exceptions
        # (zarr 2 reads any of them, PermissionError and IOError by default, as a missing
        # key, i.e. as fill values: here only missing_exceptions are, and any other error
        # is raised, so exceptions is taken and not used)
        super().__init__(mode)
        import fsspec.core

        if key_separator is not None:
            if dimension_separator not in (None, key_separator):
                raise ValueError("give dimension_separator or key_separator, not both")
            dimension_separator = key_separator

        if dimension_separator not in (None, ".", "/"):
            raise ValueError(
                f"dimension_separator must be '.', '/' or None, not {dimension_separator!r}"
            )
        self.url = os.fspath(url)
        # zarr-python 2's FSStore(url, key=..., secret=...): extra keywords go to fsspec
        self.storage_options = {**dict(storage_options or {}), **storage_kwargs}
        self._dimension_separator = dimension_separator
        self.missing_exceptions = (
            tuple(missing_exceptions) if missing_exceptions else DEFAULT_MISSING_EXCEPTIONS
        )
        self.normalize_keys = bool(normalize_keys)
        self.fsync = bool(fsync)
        self._given_fs = fs
        if fs is None:
            self.fs, root = fsspec.core.url_to_fs(self.url, **_fs_options(self.url,
                                                                          self.storage_options))
        elif self.storage_options:
            raise ValueError("FSStore: pass either fs or storage_options, not both")
        else:
            self.fs, root = fs, fs._strip_protocol(self.url)
        if isinstance(root, list):  # pragma: no cover - globs are not store roots
            raise ValueError(f"FSStore URL must name one location, not a pattern: {self.url!r}")
        self.root = root.rstrip("/") if root not in ("/", "") else root
        from fsspec.implementations.local import LocalFileSystem

        from fsspec.implementations.memory import MemoryFileSystem

        self._local = isinstance(self.fs, LocalFileSystem)
        self._memory = type(self.fs) is MemoryFileSystem
        protocols = self.fs.protocol
        protocols = protocols if isinstance(protocols, (tuple, list)) else (protocols,)
        self._s3 = "s3" in protocols
        self._http = bool({"http", "https"} & set(protocols))
        if self._http:
            # read-only (HTTP has no listing, PUT or DELETE fsspec can rely on): writes are
            # refused naming the store, before any request (mode "w" raised a bare
            # NotImplementedError from fsspec; "a" sent PUTs to whatever server answered)
            self._mode = "r"
        if self._local:
            self.root = os.path.abspath(self.root)
        # Async filesystems (S3, GCS, Azure, HTTP) get every request of a batch in flight at
        # once on their event loop (see fsspec_io); the others are called one by one.
        self._async = bool(getattr(self.fs, "async_impl", False)) and not (
            self._local or self._memory)
        self._cat_kw = fsspec_io.cat_kwargs(self.fs) if self._async else {}

    @property
    def copies_share_data(self) -> bool:  # type: ignore[override]
        """Whether a pickled copy reaches the same files: not for fsspec's memory://
        filesystem, which lives in this process (protocol.copies_share_data)."""
        return not self._memory

    @property
    def dimension_separator(self) -> str | None:
        """The chunk key separator new v2 arrays in this store get by default (None: ".")."""
        return self._dimension_separator

    # -- identity / pickling ---------------------------------------------------------------

    def _where(self) -> str:
        return self.url

    def _identity(self) -> tuple[Any, ...]:
        """Where the data is, for in-process locks (protocol.location): the place (see
        _nesting) and the root in it."""
        place, root = self._nesting()
        return (root,) if place is None else place + (root,)

    def _nesting(self) -> tuple[Any, str]:
        """(place, root) for protocol.node_location and _identity: a directory's real path
        in the machine's directories (None: as a DirectoryStore of it, see _location_kind);
        on S3 the endpoint and bucket (protocol.s3_place: not the credentials or other s3fs
        options) and the prefix; elsewhere the filesystem's class, its arguments and options,
        and the root. Not the filesystem object: fsspec tells its instances apart by a token
        that holds, besides every option, the thread that made a synchronous one, so an
        FSStore of memory:// made on a worker thread and one made on the main thread took
        separate locks (a write of each to one chunk lost one)."""
        if self._local:
            return (None, self._real_path(self.root))
        if self._s3:
            bucket, _, prefix = self.root.partition("/")
            fs = self.fs
            endpoint = (getattr(fs, "endpoint_url", None)   # (s3fs: before client_kwargs')
                        or (getattr(fs, "client_kwargs", None) or {}).get("endpoint_url"))
            return (protocol.s3_place(endpoint, bucket), prefix.rstrip("/"))
        args = getattr(self.fs, "storage_args", None)
        options = getattr(self.fs, "storage_options", None)
        if args is None or options is None:     # (not made by fsspec's instance cache)
            return ((self.fs,), self.root)
        from fsspec.utils import tokenize
        return ((f"{type(self.fs).__module__}.{type(self.fs).__qualname__}",
                 tokenize(*args, **options)), self.root)

    def _location_kind(self) -> type:
        """FSStore (FsspecStore, zarr-python 3's name, is one); DirectoryStore for a local
        directory: its files are a DirectoryStore's (one file per key, written by rename), so
        handles through ``file://`` and through the path share in-process locks (with
        separate ones, writes of disjoint elements of one chunk lost each other's);
        protocol.S3Objects on S3, where an ObjectStore (obstore) reaches the same objects."""
        if self._local:
            return DirectoryStore
        return protocol.S3Objects if self._s3 else FSStore

    def _reopen_args(self) -> dict[str, Any] | None:
        return {"url": self.url, "storage_options": self.storage_options,
                "missing_exceptions": self.missing_exceptions, "fs": self._given_fs,
                "normalize_keys": self.normalize_keys, "fsync": self.fsync}

    # -- paths -----------------------------------------------------------------------------

    def _path(self, key: str) -> str:
        validate_key(key)
        if self.normalize_keys:
            key = key.lower()
        if not self.root:
            return key
        if self.root.endswith("/"):
            return self.root + key
        return f"{self.root}/{key}"

    def _dirpath(self, prefix: str) -> str:
        prefix = normalize_prefix(prefix)
        if not prefix:
            return self.root
        return self._path(prefix)

    def _rel(self, path: str) -> str | None:
        path = path.rstrip("/")
        base = self.root.rstrip("/")
        if self._local:
            path = os.path.abspath(path) if os.path.isabs(path) else path
        if base and not path.startswith(base + "/"):
            # fsspec may strip a leading "/" (memory fs) or add one; compare loosely
            p2, b2 = path.lstrip("/"), base.lstrip("/")
            if b2 and not p2.startswith(b2 + "/"):
                return None
            rel = p2[len(b2) + 1 :] if b2 else p2
        else:
            rel = path[len(base) + 1 :] if base else path.lstrip("/")
        if not rel or is_temp_name(rel.rsplit("/", 1)[-1]):
            return None
        try:
            validate_key(rel)
        except ValueError:
            return None
        return rel

    def _invalidate(self, path: str | None = None) -> None:
        try:
            self.fs.invalidate_cache(path)
        except Exception:  # pragma: no cover - filesystems without a cache
            pass

    # -- reads -----------------------------------------------------------------------------

    def __getitem__(self, key: str) -> bytes:
        path = self._path(key)
        if self._async:
            v = self._fetch([key], [path])[0]
            if v is None:
                raise KeyError(key)
            return v
        try:
            v = self.fs.cat_file(path)
        except self.missing_exceptions as e:
            fsspec_io.raise_if_no_bucket(e, self)
            raise KeyError(key) from None
        return v if type(v) is bytes else ensure_bytes(v)

    def _get_call(self, path: str, start: int | None = None,
                  end: int | None = None) -> Callable[[], Awaitable[Any]]:
        """A coroutine factory for one GET of path (bytes [start, end) if given)."""
        fs = self.fs
        if (start is not None or end is not None) and isinstance(fs, _http_fs()):
            return lambda: fsspec_io.http_range(fs, path, start, end)
        kw = self._cat_kw if start is None and end is None else {"start": start, "end": end}
        return lambda: fs._cat_file(path, **kw)

    @property
    def concurrent_io(self) -> bool:
        """True where start_fetch/start_put put requests in flight concurrently (an async
        filesystem: S3, GCS, Azure, HTTP); see chunkstore.storage.pipelining."""
        return self._async

    def start_put(self, keys: list[str], values: list) -> fsspec_io.Batch:
        """Start one PUT per key, all on the filesystem's event loop; errors are in the
        futures (turn one into the raised error with put_error)."""
        self._check_writable()
        fs = self.fs

        def call(p: str, v: Any) -> Callable[[], Awaitable[Any]]:
            v = ensure_bytes(v)
            return lambda: fs._pipe_file(p, v)

        return fsspec_io.Batch(fs, [call(self._path(k), v) for k, v in zip(keys, values)], ())

    def put_error(self, key: str, exc: BaseException) -> BaseException:
        """The error to raise for a failed write of *key*: *exc* rebuilt with a message naming the
        key and this store.

        An error whose type cannot be rebuilt becomes an ``OSError`` caused by it.
        """
        return fsspec_io.with_key(exc, key, self)

    def start_fetch(self, keys: list[str]) -> fsspec_io.Batch | None:
        """Start one GET per key, all on the filesystem's event loop (at most
        ``config.get("io_concurrency")`` at once); ``batch.futures[i]`` answers ``keys[i]``
        with its bytes, None for a missing key, or the error. None where the filesystem
        has no event loop (local, memory): read those with getitems."""
        if not self._async or not keys:
            return None
        calls = [self._get_call(self._path(k)) for k in keys]
        return fsspec_io.Batch(self.fs, calls, self.missing_exceptions)

    def fetched(self, key: str, future: concurrent.futures.Future) -> bytes | None:
        """The answer of start_fetch's future for key: bytes, None if missing; an error is
        raised naming the key."""
        try:
            v = future.result()
        except Exception as e:
            fsspec_io.raise_if_no_bucket(e, self)
            raise fsspec_io.with_key(e, key, self) from None
        return v if v is None or type(v) is bytes else ensure_bytes(v)

    def _fetch(self, keys: list[str], paths: list[str]) -> list[bytes | None]:
        batch = fsspec_io.Batch(self.fs, [self._get_call(p) for p in paths],
                                self.missing_exceptions)
        try:
            return [self.fetched(k, f) for k, f in zip(keys, batch.futures)]
        finally:
            batch.cancel()

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return ``{key: value}`` for the *keys* present, all requested at once; absent keys are
        omitted.

        Errors other than a missing object (permission denied, network errors) propagate, naming the
        key.
        """
        keys = list(keys)
        paths = [self._path(k) for k in keys]
        if not paths:
            return {}
        if self._async:
            return {k: v for k, v in zip(keys, self._fetch(keys, paths)) if v is not None}
        if len(paths) == 1:
            try:
                return {keys[0]: self[keys[0]]}
            except KeyError:
                return {}
        results = self.fs.cat_ranges(paths, None, None, on_error="return")
        out: dict[str, bytes] = {}
        error = None
        for k, r in zip(keys, results):
            if isinstance(r, BaseException):
                if isinstance(r, self.missing_exceptions):
                    continue
                if error is None:
                    error = fsspec_io.with_key(r, k, self)
                continue
            out[k] = r if type(r) is bytes else ensure_bytes(r)
        if error is not None:
            raise error
        return out

    def get_partial(self, key: str, ranges: Iterable[tuple[int, int | None]]) -> list[bytes]:
        """The bytes of each (offset, length) range of key's value (see fsspec_ranges)."""
        return fsspec_ranges.get_partial(self, key, self._path(key), list(ranges))

    def _isfile(self, path: str) -> bool:
        if self._memory:
            # MemoryFileSystem.info scans every path first; its store is a dict of files
            return self.fs._strip_protocol(path) in self.fs.store
        # (not from a listing cached earlier: s3fs answers info() out of its directory
        # cache, which misses what another handle or process wrote since; a delete of such
        # a key raised KeyError, a containment check said no. refresh=True asks past the
        # cache without dropping it: invalidating would drop every ancestor's listing too)
        try:
            # (HTTP's info() hands keywords to aiohttp, whose TypeError fsspec turns into
            # FileNotFoundError: every key was missing there; it has no cache to ask past)
            info = self.fs.info(path) if self._http else self.fs.info(path, refresh=True)
        except self.missing_exceptions as e:
            fsspec_io.raise_if_no_bucket(e, self)
            return False
        except TypeError:  # a filesystem whose info() takes no refresh
            self._invalidate(path)
            try:
                info = self.fs.info(path)
            except self.missing_exceptions:
                return False
        return info.get("type") == "file"

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return self._isfile(self._path(key))

    def _find(self, path: str, detail: bool = False) -> Any:
        self._invalidate(path)
        try:
            return self.fs.find(path, withdirs=False, detail=detail)
        except self.missing_exceptions as e:
            fsspec_io.raise_if_no_bucket(e, self)
            return {} if detail else []
        except OSError as e:  # (named: the client's message alone names neither)
            raise fsspec_io.with_key(e, path, self, what=f"listing {path!r}") from None

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        """Sorted iterator over every key at or under *prefix* (recursively)."""
        prefix = normalize_prefix(prefix)
        out = []
        for p in self._find(self._dirpath(prefix)):
            rel = self._rel(p)
            if rel is not None and (not prefix or rel == prefix or rel.startswith(prefix + "/")):
                out.append(rel)
        return iter(sorted(out))

    def __iter__(self) -> Iterator[str]:
        return self.keys_under("")

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def listdir(self, prefix: str = "") -> list[str]:
        """Sorted names of the entries under *prefix* (temporary files left out).

        Returns ``[]`` where nothing exists at *prefix*.
        """
        path = self._dirpath(prefix)
        self._invalidate(path)
        try:
            entries = self.fs.ls(path, detail=True)
        except self.missing_exceptions as e:
            fsspec_io.raise_if_no_bucket(e, self)
            return []
        except OSError as e:
            raise fsspec_io.with_key(e, path, self, what=f"listing {path!r}") from None
        me = path.rstrip("/").lstrip("/")
        names = set()
        for entry in entries:
            name = entry["name"].rstrip("/")
            if name.lstrip("/") == me:
                continue  # ls of a file lists the file itself
            base = name.rsplit("/", 1)[-1]
            # (temporary files only: a node directory so named is listed)
            if base and (not is_temp_name(base) or entry.get("type") == "directory"):
                names.add(base)
        return sorted(names)

    def getsize(self, prefix: str = "") -> int:
        """Total size in bytes of the object *prefix*, or of the objects under it; 0 where
        nothing exists.
        """
        prefix = normalize_prefix(prefix)
        path = self._dirpath(prefix)
        if prefix:
            try:
                info = self.fs.info(path)
            except self.missing_exceptions:
                return 0
            if info.get("type") == "file":
                return int(info.get("size") or 0)
        total = 0
        for p, info in self._find(path, detail=True).items():
            if self._rel(p) is not None:
                total += int(info.get("size") or 0)
        return total

    # -- writes ----------------------------------------------------------------------------

    def _write_local(self, path: str, data: bytes) -> None:
        name = os.path.basename(path)
        if is_temp_name(name):
            raise ValueError(f"invalid store key: {name!r} is reserved for temporary files")
        check_inside(self.root, (path,), (name,))
        atomic_write(path, data, fsync=self.fsync)

    def __setitem__(self, key: str, value: Any) -> None:
        path = self._path(key)
        self._check_writable(key)
        value = ensure_bytes(value)
        if self._local:
            self._write_local(path, value)
        elif self._async:
            self._put([key], [value])
        else:
            self.fs.pipe_file(path, value)

    def _put(self, keys: list[str], values: list[Any]) -> None:
        """One PUT per key, all in flight at once; the first error is raised naming its key,
        after every request has finished (none is left writing behind the caller's back)."""
        batch = self.start_put(keys, values)
        concurrent.futures.wait(batch.futures)
        for k, f in zip(keys, batch.futures):
            exc = f.exception()
            if exc is not None:
                raise self.put_error(k, exc)

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """Write every ``key: value`` of *mapping*, concurrently where the filesystem allows.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        items = {self._path(k): ensure_bytes(v) for k, v in mapping.items()}
        if not items:
            return
        if self._local:
            for p, v in items.items():
                self._write_local(p, v)
        elif self._async:
            self._put(list(mapping), list(items.values()))
        else:
            self.fs.pipe(items)

    def _prune_local(self, dirname: str) -> None:
        root = self.root
        d = dirname
        while len(d) > len(root) and d.startswith(root + os.sep):
            try:
                os.rmdir(d)
            except OSError:
                return
            d = os.path.dirname(d)

    def __delitem__(self, key: str) -> None:
        path = self._path(key)
        self._check_writable(key)
        if self._local:
            try:
                os.unlink(path)
            except self.missing_exceptions:
                raise KeyError(key) from None
            except PermissionError:
                if os.path.isdir(path):
                    raise KeyError(key) from None
                raise
            self._prune_local(os.path.dirname(path))
            return
        if not self._isfile(path):
            raise KeyError(key)
        try:
            fsspec_io.retrying_sync(lambda: self.fs.rm_file(path))
        except self.missing_exceptions:
            raise KeyError(key) from None
        except Exception as e:  # (the client's own message names neither key nor store)
            raise fsspec_io.with_key(e, key, self, what=f"deleting {key!r}") from None
        finally:
            self._invalidate(path)

    def delitems(self, keys: Iterable[str]) -> None:
        """Delete *keys*; absent keys are ignored.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        paths = [self._path(k) for k in keys]
        if not paths:
            return
        if self._local:
            dirs = unlink_files(paths, self.missing_exceptions)
            for d in sorted(dirs, key=len, reverse=True):
                self._prune_local(d)
            return
        # (one bulk request where the filesystem is asynchronous: S3's DeleteObjects, which
        # ignores absent keys; else a request a key)
        self._remove(paths, bulk=bool(getattr(self.fs, "async_impl", False)))

    def rmdir(self, prefix: str = "") -> None:
        """Delete everything under *prefix* (all contents if *prefix* is empty).

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        prefix = normalize_prefix(prefix)
        path = self._dirpath(prefix)
        if self._local:
            if not prefix:
                remove_tree(path, keep_root=True)
            elif os.path.isdir(path) and not os.path.islink(path):
                check_inside(self.root, (path,), (prefix,))
                remove_tree(path, keep_root=False)
                self._prune_local(os.path.dirname(path))
            return
        base = path.rstrip("/")
        files = [p for p in self._find(path) if p.rstrip("/").lstrip("/").startswith(
            base.lstrip("/") + "/") or not base]
        self._remove(files)

    def _remove(self, paths: list[str], bulk: bool = True) -> None:
        """Delete the files at paths, absent ones ignored (a missing bucket raises
        NoSuchBucketError), then forget the cached listings: with bulk, those without a glob
        character in one rm, else one by one with rm_file. fsspec's rm expands glob patterns
        (``*``, ``?``, ``[``: legal in keys and URLs): deleting an array named ``a*``
        deleted the chunks of ``a`` and ``ab`` as well, and a store at
        ``s3://b/run[1].zarr`` those of ``s3://b/run1.zarr``."""
        try:
            self._delete(paths, bulk)
        finally:
            self._invalidate()

    def _delete(self, paths: list[str], bulk: bool) -> None:
        """_remove's deletes (its listings forgotten by _remove, whatever happens). A delete
        is retried where its request failed in passing (a dropped connection, a 5xx: deleting
        again is harmless); any other error is raised naming the key (as the store's own
        keys, not the bucket's path) and the store, an OSError where the client's own type
        cannot carry that (botocore's)."""
        one_by_one = paths
        literal = [p for p in paths if not _has_magic(p)] if bulk else []
        if literal:
            try:
                fsspec_io.retrying_sync(lambda: self.fs.rm(literal))
                one_by_one = [p for p in paths if _has_magic(p)]
            except self.missing_exceptions as e:
                fsspec_io.raise_if_no_bucket(e, self)  # (else: each on its own, below)
            except Exception as e:
                first = self._rel(literal[0]) or literal[0]
                more = f" and {len(literal) - 1} more" if len(literal) > 1 else ""
                raise fsspec_io.with_key(e, first, self,
                                         what=f"deleting {first!r}{more}") from None
        for p in one_by_one:
            try:
                fsspec_io.retrying_sync(lambda: self.fs.rm_file(p))
            except self.missing_exceptions as e:
                fsspec_io.raise_if_no_bucket(e, self)
            except Exception as e:
                key = self._rel(p) or p
                raise fsspec_io.with_key(e, key, self, what=f"deleting {key!r}") from None

    def clear(self) -> None:
        """Delete every key (``rmdir("")``)."""
        self.rmdir("")


def _http_fs() -> type:
    """fsspec's HTTPFileSystem class (a class nothing is an instance of where aiohttp is not
    installed)."""
    try:
        from fsspec.implementations.http import HTTPFileSystem
    except ImportError:  # pragma: no cover - fsspec's http needs aiohttp
        return type("NoHTTP", (), {})
    return HTTPFileSystem


def _has_magic(path: str) -> bool:
    """Whether fsspec reads path as a glob pattern (it holds ``*``, ``?`` or ``[``)."""
    return "*" in path or "?" in path or "[" in path
