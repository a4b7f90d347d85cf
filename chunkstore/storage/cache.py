"""A bounded least-recently-used cache in front of another store."""

from __future__ import annotations

from chunkstore.forksafe import fork_safe
from . import protocol
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, cast

from . import base as _base
from .base import BaseStore, _slice, ensure_bytes, normalize_prefix, validate_key
from .normalize import normalize_store
from chunkstore.errors import store_name

if TYPE_CHECKING:
    from .base import ValueVersion

__all__ = ["LRUStoreCache"]

_MAX_CONTAINS = 100_000  # cached membership answers kept at most


class LRUStoreCache(BaseStore):
    """Cache values (and key listings) of another store in memory.

    ``LRUStoreCache(store, max_size)`` (``max_size_bytes=`` is accepted as an alias)

    - Values are kept in least-recently-used order; the total size of cached values never
      exceeds *max_size* bytes (``None`` = unbounded). A value larger than *max_size* is
      passed through without being cached.
    - The list of keys, ``listdir`` results and membership answers are cached too.
    - Writes and deletes through the cache go to the underlying store first, then
      invalidate the affected cached value and every cached listing. Changes made to the
      underlying store by others are not seen by reads until :meth:`invalidate`; but an
      array handle's writes through the cache read what they merge into (chunks, shards,
      the metadata they check, the listing a resize trims by) from the underlying store
      (``cache_of``, see ``protocol.live_store``), and share in-process locks with handles
      beside it, so they never undo another handle's update.
    - ``hits`` and ``misses`` count value lookups served from / not from the cache.
    - Thread-safe. Read-only when the underlying store is.
    - Pickling pickles the underlying store and the bound; the copy starts empty.
    """

    def __init__(
        self,
        store: MutableMapping[str, bytes] | Any,
        max_size: int | None = None,
        *,
        max_size_bytes: int | None = None,
    ):
        if max_size is not None and max_size_bytes is not None:
            raise TypeError("give max_size or max_size_bytes, not both")
        if max_size is None:
            max_size = max_size_bytes
        if max_size is not None:
            max_size = int(max_size)
            if max_size < 0:
                raise ValueError(f"max_size must be >= 0, not {max_size}")
        if not isinstance(store, Mapping):
            store = normalize_store(store)
        ro = bool(getattr(store, "read_only", False))
        super().__init__("r" if ro else "a")
        # a read-only store makes this one read-only: it is then never written
        self._store = cast(MutableMapping[str, bytes], store)
        self._max_size = max_size
        self._init_cache()

    def _init_cache(self) -> None:
        self._lock = fork_safe(self, "_lock", threading.RLock)
        self._values: OrderedDict[str, bytes] = OrderedDict()
        self._current_size = 0
        self._keys_cache: list[str] | None = None
        self._keys_set: set[str] = set()
        self._listdir_cache: dict[str, list[str]] = {}
        self._contains_cache: dict[str, bool] = {}
        self._gen = 0  # bumped by every write: results read before a write are not cached
        # node path -> (the in-process table counting the node's metadata changes, its count)
        # when a handle last opened or followed the node through this cache (follow_node)
        self._followed: dict[str, tuple[object, int]] = {}
        self.hits = 0
        self.misses = 0

    # -- introspection ---------------------------------------------------------------------

    @property
    def store(self) -> MutableMapping[str, bytes]:
        """The underlying store."""
        return self._store

    @property
    def cache_of(self) -> MutableMapping[str, bytes]:
        """The store this caches (protocol.live_store): handles through the cache and beside
        it share in-process locks, and writes read what they merge into from there."""
        return self._store

    @property
    def max_size(self) -> int | None:
        """The most bytes of values the cache holds (None: no limit)."""
        return self._max_size

    @property
    def current_size(self) -> int:
        """Total bytes of the cached values."""
        return self._current_size

    @property
    def dimension_separator(self) -> str | None:
        """The wrapped store's (see BaseStore.dimension_separator): a cache in front of a
        NestedDirectoryStore reads a ``.zarray`` naming no separator with "/", as the store
        itself does, and new v2 arrays get its separator."""
        return protocol.key_separator(self._store)

    @property
    def read_only(self) -> bool:
        """Whether the wrapped store is read-only."""
        return bool(getattr(self._store, "read_only", False))

    def __repr__(self) -> str:
        return f"LRUStoreCache({store_name(self._store)}, max_size={self._max_size!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self._store, "max_size": self._max_size, "mode": self._mode}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._store = state["store"]
        self._max_size = state["max_size"]
        self._mode = state["mode"]
        self._init_cache()

    # -- invalidation ----------------------------------------------------------------------

    def invalidate(self) -> None:
        """Forget every cached value and listing."""
        with self._lock:
            self.invalidate_values()
            self._invalidate_listings()

    def invalidate_values(self) -> None:
        """Drop every cached value (the key listings are kept)."""
        with self._lock:
            self._gen += 1
            self._values.clear()
            self._current_size = 0

    def forget_under(self, path: str) -> None:
        """Drop the cached values of the node at path (every key at or below it; the root's
        "": every value) and every cached listing (protocol.forget_cached)."""
        prefix = f"{path.strip('/')}/" if path.strip("/") else ""
        with self._lock:
            self._gen += 1
            for key in [k for k in self._values if k.startswith(prefix)]:
                self._forget(key)
            self._invalidate_listings()

    def follow_node(self, path: str, counter: object, generation: int) -> None:
        """(an array handle, before it reads the node's metadata through this cache) Drop
        what is cached of the node at path (forget_under) unless this cache's values of it
        were validated at the same count of this process's metadata changes of the node
        (``generation`` of the in-process table ``counter``, which this cache then keeps
        alive so the count goes on): a handle opened after another handle, through another
        store object of the same location, re-created or resized the array read the old
        array's cached metadata and chunks mixed with the new one's."""
        key = path.strip("/")
        with self._lock:
            seen = self._followed.get(key)
            if seen is not None and seen[0] is counter and seen[1] == generation:
                return
            self.forget_under(key)
            self._followed[key] = (counter, generation)

    def changed_node(self, path: str, counter: object, before: int, after: int) -> None:
        """(an array handle that changed the node's metadata through this cache, under its
        locks) The cache's values of the node, valid at count ``before``, are valid at
        ``after``: the change went through the cache, which dropped what it replaced. (At
        another count they were not validated: the next handle drops them.)"""
        key = path.strip("/")
        with self._lock:
            if self._followed.get(key) == (counter, before):
                self._followed[key] = (counter, after)

    def invalidate_keys(self) -> None:
        """Drop the cached key listings (the cached values are kept)."""
        with self._lock:
            self._gen += 1
            self._invalidate_listings()

    def _invalidate_listings(self) -> None:
        self._keys_cache = None
        self._listdir_cache.clear()
        self._contains_cache.clear()

    def _forget(self, key: str) -> None:
        v = self._values.pop(key, None)
        if v is not None:
            self._current_size -= len(v)

    def _after_write(self, keys: Iterable[str] | None) -> None:
        with self._lock:
            self._gen += 1
            if keys is None:
                self._values.clear()
                self._current_size = 0
            else:
                for k in keys:
                    self._forget(k)
            self._invalidate_listings()

    def _cache_value(self, key: str, value: bytes, gen: int) -> None:
        n = len(value)
        with self._lock:
            if gen != self._gen:
                return  # a write happened while we were reading: the value may be stale
            if self._max_size is not None and n > self._max_size:
                return
            self._forget(key)
            if self._max_size is not None:
                while self._values and self._current_size + n > self._max_size:
                    _, old = self._values.popitem(last=False)
                    self._current_size -= len(old)
            self._values[key] = value
            self._current_size += n

    # -- reads -----------------------------------------------------------------------------

    def __getitem__(self, key: str) -> bytes:
        validate_key(key)
        with self._lock:
            v = self._values.get(key)
            if v is not None:
                self._values.move_to_end(key)
                self.hits += 1
                return v
            self.misses += 1
            gen = self._gen
        v = self._store[key]
        if type(v) is not bytes:
            v = ensure_bytes(v)
        self._cache_value(key, v, gen)
        return v

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return ``{key: value}`` for the *keys* present, cached values first.

        The keys not cached are read from the wrapped store in one
        :func:`~chunkstore.storage.base.getitems` call; absent keys are omitted.
        """
        keys = [validate_key(k) for k in keys]
        out: dict[str, bytes] = {}
        missing = []
        with self._lock:
            for k in keys:
                v = self._values.get(k)
                if v is not None:
                    self._values.move_to_end(k)
                    self.hits += 1
                    out[k] = v
                else:
                    self.misses += 1
                    missing.append(k)
            gen = self._gen
        if missing:
            got = _base.getitems(self._store, missing)
            for k, v in got.items():
                if type(v) is not bytes:
                    v = ensure_bytes(v)
                out[k] = v
                self._cache_value(k, v, gen)
        return out

    @property
    def open_version(self) -> Callable[[str], ValueVersion] | None:
        """The inner store's versioned reads (see storage.base.ValueVersion), or None: a
        sharded array's index and chunks then come from one version of the shard as the
        inner store holds it now, never from a cached value of another version."""
        return protocol.versions(self._store)

    @property
    def read_if_version(self) -> Callable[..., list[bytes] | None] | None:
        """The inner store's one-step read through a cached shard index, if it has one."""
        return protocol.version_reads(self._store)

    def get_partial(self, key: str, ranges: Iterable[tuple[int, int | None]]) -> list[bytes]:
        """Read byte ranges of one value: from the cached value if there is one, else from the
        wrapped store.

        See :meth:`BaseStore.get_partial <chunkstore.storage.base.BaseStore.get_partial>` for
        *ranges*. Raises ``KeyError`` if the key is absent.
        """
        validate_key(key)
        ranges = list(ranges)
        with self._lock:
            v = self._values.get(key)
            if v is not None:
                self._values.move_to_end(key)
                self.hits += 1
        if v is None:
            fn = protocol.byte_ranges(self._store)
            if fn is not None:
                return fn(key, ranges)
            v = self[key]
        return [_slice(v, o, n) for o, n in ranges]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        validate_key(key)
        with self._lock:
            if key in self._values:
                return True
            if self._keys_cache is not None:
                return key in self._keys_set
            c = self._contains_cache.get(key)
            if c is not None:
                return c
            gen = self._gen
        result = key in self._store
        with self._lock:
            if gen == self._gen:
                if len(self._contains_cache) >= _MAX_CONTAINS:
                    self._contains_cache.clear()
                self._contains_cache[key] = result
        return result

    def _keys(self) -> list[str]:
        with self._lock:
            if self._keys_cache is not None:
                return self._keys_cache
            gen = self._gen
        keys = list(self._store)
        with self._lock:
            if gen == self._gen:
                self._keys_cache = keys
                self._keys_set = set(keys)
        return keys

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._keys()))

    def __len__(self) -> int:
        return len(self._keys())

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        """Iterate over every key at or under *prefix* (from the cached key list)."""
        prefix = normalize_prefix(prefix)
        return iter([k for k in self._keys() if _base._under(k, prefix)])

    def listdir(self, prefix: str = "") -> list[str]:
        """Sorted names of the immediate children of *prefix*, cached per prefix."""
        prefix = normalize_prefix(prefix)
        with self._lock:
            c = self._listdir_cache.get(prefix)
            if c is not None:
                return list(c)
            gen = self._gen
        names = _base.listdir(self._store, prefix)
        with self._lock:
            if gen == self._gen:
                self._listdir_cache[prefix] = list(names)
        return names

    def getsize(self, prefix: str = "") -> int:
        """Total size in bytes of the values at or under *prefix*, asked of the wrapped store."""
        return _base.getsize(self._store, prefix)

    # -- writes ----------------------------------------------------------------------------

    def __setitem__(self, key: str, value: Any) -> None:
        self.setitems({key: value})

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """Write *mapping* to the wrapped store and invalidate what it changes in the cache.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._write_through([validate_key(k) for k in mapping],
                            lambda: _base.setitems(self._store, mapping))

    def __delitem__(self, key: str) -> None:
        validate_key(key)
        self._check_writable(key)
        try:
            del self._store[key]
        finally:
            self._after_write([key])

    def delitems(self, keys: Iterable[str]) -> None:
        """Delete *keys* from the wrapped store and from the cache.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        keys = [validate_key(k) for k in keys]
        self._write_through(keys, lambda: _base.delitems(self._store, keys))

    def _write_through(self, keys: list[str], write: Callable[[], None]) -> None:
        """write() to the wrapped store, then drop what it changed from the cache (also
        after a failure: some keys may be written)."""
        self._check_writable(keys[0] if len(keys) == 1 else None)  # one key: named
        try:
            write()
        finally:
            self._after_write(keys)

    def rmdir(self, prefix: str = "") -> None:
        """Delete every key under *prefix* in the wrapped store and invalidate the cache.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store.
        """
        self._check_writable()
        try:
            _base.rmdir(self._store, prefix)
        finally:
            self._after_write(None)

    def clear(self) -> None:
        """Delete every key of the wrapped store (``rmdir("")``)."""
        self.rmdir("")

    # -- lifecycle -------------------------------------------------------------------------

    def flush(self) -> None:
        """Flush the wrapped store, if it has a ``flush`` method."""
        fn = protocol.flusher(self._store)
        if fn is not None:
            fn()

    def close(self) -> None:
        """Close the wrapped store, if it has a ``close`` method."""
        fn = protocol.closer(self._store)
        if fn is not None:
            fn()
