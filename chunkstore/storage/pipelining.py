"""Chunk requests ahead of (reads) and behind (writes) the threads that decode and encode.

On a remote store a request costs a round trip, so the chunks of a selection are all asked
for at once, and the batches decoding them only wait for their own chunks; writes are sent
as soon as a batch is encoded and waited for once, at the end. A store takes part by having
``start_fetch(keys)`` / ``start_put(keys, values)`` returning a batch of futures (see
FSStore); a store that does says so with a true ``concurrent_io`` attribute. For any other store these
helpers hand the store back unchanged.
"""

from __future__ import annotations

from . import protocol
import concurrent.futures
import threading
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from . import base as _base
from .base import getitems, setitems

if TYPE_CHECKING:
    from .base import ValueVersion

#: encoded bytes a read may have requested ahead of the batches consuming them
_AHEAD_BYTES = 256 << 20


class Prefetch:
    """A read view of *store* whose chunks (*keys*, in the order they will be consumed) are
    requested ahead, at most *ahead* not yet consumed at any time."""

    def __init__(self, store: Any, keys: list[str], ahead: int) -> None:
        self.store = store
        self._keys = keys
        self._index = {k: i for i, k in enumerate(keys)}
        self._ahead = max(1, ahead)
        self._futures: dict[str, concurrent.futures.Future] = {}
        self._batches: list[Any] = []  # the store's start_fetch batches, oldest first
        self._started = 0
        self._consumed = 0
        self._lock = threading.Lock()
        # later batches are started by the pool threads consuming these: they send them
        # where the caller's first one went (its event loop, for the asynchronous API)
        self._caller = protocol.caller_loop()
        self._top_up()

    def _top_up(self, upto: int = 0) -> None:
        with self._lock:
            # in steps of at least ahead/2 keys, not one small batch per consumed chunk
            if self._started >= len(self._keys) or (
                    self._started - self._consumed > self._ahead // 2 and upto <= self._started):
                return
            end = min(len(self._keys), max(upto, self._consumed + self._ahead))
            new = self._keys[self._started:end]
            self._started = end
            batch = protocol.with_caller_loop(self._caller, self.store.start_fetch, new)
            self._batches.append(batch)
            self._futures.update(zip(new, batch.futures))

    def getitems(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Return ``{key: value}`` for the *keys* present, waiting only for their own requests.

        Keys not in the prefetch list are read from the store directly; absent keys are omitted.
        """
        out, other = {}, []
        # a batch ahead of the window (the pool took it early): start up to its last key
        last = max((self._index.get(k, -1) for k in keys), default=-1)
        if last >= self._started:
            self._top_up(last + 1)
        for k in keys:
            f = self._futures.pop(k, None)
            if f is None:
                other.append(k)
                continue
            v = self.store.fetched(k, f)
            if v is not None:
                out[k] = v
        with self._lock:
            self._consumed += len(keys) - len(other)
        if self._started < len(self._keys):
            self._top_up()
        if other:
            out.update(getitems(self.store, other))
        return out

    def close(self) -> None:
        """Drop the requests nobody consumed (after an error in a batch)."""
        for b in self._batches:
            b.cancel()


def prefetch(store: MutableMapping[str, bytes], keys: list[str], chunk_nbytes: int) -> Any:
    """A Prefetch over store, or store itself where it cannot fetch ahead (or for one key)."""
    if len(keys) < 2 or not protocol.concurrent_io(store):
        return store
    from chunkstore import config

    ahead = max(2 * config.get("io_concurrency"), _AHEAD_BYTES // max(1, chunk_nbytes))
    return Prefetch(store, keys, ahead)


class WriteBehind:
    """A write view of *store*: ``setitems`` sends the values and returns; ``flush`` waits for
    all and raises the first error (naming its key) once every request has finished."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._pending: list[tuple[list[str], object, int]] = []
        self._bytes = 0
        self._error = None
        self._lock = threading.Lock()

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """Start uploading *mapping* and return without waiting, unless too many bytes are in
        flight.

        Past the in-flight byte limit, the oldest uploads are waited for first.
        """
        keys = list(mapping)
        values = [mapping[k] for k in keys]
        nbytes = sum(len(v) for v in values)
        batch = self.store.start_put(keys, values)
        with self._lock:
            self._pending.append((keys, batch, nbytes))
            self._bytes += nbytes
        # Bounded memory: past _AHEAD_BYTES in flight, the encoding threads wait for the
        # oldest uploads instead of queueing the whole array.
        while True:
            with self._lock:
                if self._bytes <= _AHEAD_BYTES or len(self._pending) < 2:
                    return
                oldest = self._pending.pop(0)
                self._bytes -= oldest[2]
            self._settle(oldest)

    def _settle(self, entry: tuple[list[str], Any, int]) -> None:
        keys, batch, _ = entry
        for k, f in zip(keys, batch.futures):
            # result(), not wait(): wait() never returns for a future cancelled outside an
            # executor. A cancelled PUT did not land: an error, never a silent success.
            exc: BaseException
            try:
                f.result()
                continue
            except concurrent.futures.CancelledError:
                exc = concurrent.futures.CancelledError("the request was cancelled")
            except BaseException as e:  # noqa: BLE001 - reported by flush, naming the key
                exc = e
            if exc is not None:
                with self._lock:
                    if self._error is None:
                        self._error = self.store.put_error(k, exc)

    def flush(self) -> None:
        """Wait for every upload still in flight and raise the first error any of them met."""
        with self._lock:
            pending, self._pending, self._bytes = self._pending, [], 0
        for entry in pending:
            self._settle(entry)
        with self._lock:
            error, self._error = self._error, None
        if error is not None:
            raise error


def write_behind(store: MutableMapping[str, bytes]) -> WriteBehind | None:
    """A WriteBehind over store, or None where the store writes synchronously."""
    if not protocol.concurrent_io(store) or not isinstance(store, protocol.ConcurrentIO):
        return None
    return WriteBehind(store)


def store_items(store: MutableMapping[str, bytes], sink: WriteBehind | None,
                mapping: Mapping[str, Any]) -> None:
    """setitems through the write-behind sink when there is one."""
    if sink is not None:
        sink.setitems(mapping)
    else:
        setitems(store, mapping)


class FetchThrough:
    """For stores in front of another (consolidated metadata): chunk reads are fetched ahead
    by the store behind, and writes and deletes go to it once the front store's
    ``_check_key(key)`` lets them (it refuses the keys it serves itself). Metadata keys are
    never prefetched (the array layer only asks for chunks), so those served by the front
    store are not concerned."""

    _store: MutableMapping[str, bytes]  # the store behind (set by the subclass)
    # how recent the snapshot is (_date_snapshot, by the subclass before it reads it)
    _snapshot_date: int = 0
    # every document and listing read from the store behind: a copy unpickled from a process
    # that had changed nodes here since the snapshot (see __getstate__)
    _stale_all: bool = False

    def __getstate__(self) -> dict[str, Any]:
        """The view as pickled (a dask task, multiprocessing). The changes this process made
        since the snapshot are known here only (protocol's dated changes): the copy takes
        its whole snapshot as stale where there were any (its documents read from the store
        behind: slower, never wrong), and dates it 0 in its own process. A copy pickled
        before an array's fill value change, re-creation or resize here read the old
        document elsewhere: the old fill value, the old dtype's decoding of new chunks."""
        state = dict(self.__dict__)
        state["_stale_all"] = self._stale_all or (
            protocol.changed_since(self._snapshot_date) and protocol.place_changed_after(
                protocol.node_location(self._store, "")[0], self._snapshot_date))
        state["_snapshot_date"] = 0
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def store(self) -> MutableMapping[str, bytes]:
        """The underlying store (chunks and everything else the view does not serve)."""
        return self._store

    @property
    def snapshot_of(self) -> MutableMapping[str, bytes]:
        """The store whose metadata this view serves a snapshot of (protocol.live_store):
        a handle that learns of a metadata change made beside it reads the documents there."""
        return self._store

    def _date_snapshot(self, document_key: str) -> None:
        """Note how recent the snapshot about to be read from document_key is: as of the
        consolidation this process last wrote there, or (0) older than anything this process
        changed. Called before the document is read (one consolidated meanwhile is then
        taken as older than it is: a live read too many, never a stale one); read through
        a cache (which may hold an older document), 0."""
        through_cache = any(getattr(layer, "cache_of", None) is not None
                            for layer in protocol.view_layers(self._store))
        self._snapshot_date = 0 if through_cache else protocol.snapshot_date(
            protocol.node_location(self._store, document_key))

    def changed_since_snapshot(self, path: str) -> bool:
        """Whether this process changed the node at path since the snapshot was consolidated
        (or may have): its documents here may be stale (protocol.snapshot_stale)."""
        return self._stale_all or protocol.changed_after(
            protocol.node_location(self._store, path), self._snapshot_date)

    def _served(self, key: str) -> bool:
        """Whether key is a metadata document of the snapshot's hierarchy (the subclass's)."""
        raise NotImplementedError

    def _from_snapshot(self, key: str) -> bool:
        """Whether key is read from the snapshot: a document it serves, whose node this
        process changed no later than the snapshot (_stale_document)."""
        return self._served(key) and not self._stale_document(key)

    def _stale_document(self, key: str) -> bool:
        """Whether the snapshot's metadata document at key may be older than a change this
        process made to its node (or above it): it is then read from the store behind. (A
        node re-created as another kind since was opened as the old one; one created since
        was not found.)"""
        return self._stale_all or protocol.changed_since(self._snapshot_date) and \
            self.changed_since_snapshot(key.rsplit("/", 1)[0] if "/" in key else "")

    def _stale_listing(self, prefix: str) -> bool:
        """Whether the snapshot's listing of the group at prefix may be older than a change
        this process made to it, above it or below it (a member created or removed since):
        it is then listed from the store behind."""
        return self._stale_all or protocol.changed_since(self._snapshot_date) and \
            protocol.changed_around(protocol.node_location(self._store, prefix.strip("/")),
                                    self._snapshot_date)

    def _check_key(self, key: str) -> None:
        """Raise ReadOnlyError where *key* may not be written or deleted through this store."""
        raise NotImplementedError

    def _serves(self, key: str) -> bool:
        """Whether the front store answers *key* itself (from its document)."""
        raise NotImplementedError

    def get_partial(self, key: str, ranges: Iterable[tuple[int, int | None]]) -> list[bytes]:
        """Byte ranges of one value: of a value the front store serves, from it; of others,
        from the store behind (in ranges where it reads ranges). ``KeyError`` if absent."""
        _base.validate_key(key)
        if self._serves(key):
            value = cast(Mapping[str, bytes], self)[key]
            return [_base._slice(value, o, n) for o, n in ranges]
        fn = protocol.byte_ranges(self._store)
        if fn is not None:
            return fn(key, ranges)
        value = self._store[key]
        return [_base._slice(value, o, n) for o, n in ranges]

    def __setitem__(self, key: str, value: Any) -> None:
        self._check_key(key)
        self._store[key] = value

    def __delitem__(self, key: str) -> None:
        self._check_key(key)
        del self._store[key]

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """Write *mapping* to the store behind, every key checked first.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store or for a key
        the front store serves.
        """
        for k in mapping:
            self._check_key(k)
        _base.setitems(self._store, mapping)

    def delitems(self, keys: Iterable[str]) -> None:
        """Delete *keys* from the store behind, every key checked first.

        Raises :class:`~chunkstore.errors.ReadOnlyError` on a read-only store or for a key
        the front store serves.
        """
        keys = list(keys)
        for k in keys:
            self._check_key(k)
        _base.delitems(self._store, keys)

    @property
    def concurrent_io(self) -> bool:
        """Whether the store behind can have many requests in flight (see the module docstring)."""
        return protocol.concurrent_io(self._store)

    @property
    def open_version(self) -> Callable[[str], ValueVersion] | None:
        """The store behind's versioned reads (see storage.base.ValueVersion), for shards:
        metadata keys, served in front, are never read in ranges."""
        return protocol.versions(self._store)

    @property
    def read_if_version(self) -> Callable[..., list[bytes] | None] | None:
        """The store behind's one-step read through a cached shard index, if it has one."""
        return protocol.version_reads(self._store)

    # The store behind's local-file reads (DirectoryStore's): chunk and shard keys are never
    # keys the front store serves, so the decode kernels read their files directly, as they
    # do without consolidated metadata (without these, arrays opened through it fell back to
    # reading every chunk into a bytes object first).
    @property
    def chunk_files(self) -> Callable[..., Any] | None:
        """The store behind's ``chunk_files(keys, maxlen)``, or None."""
        return getattr(self._store, "chunk_files", None)

    @property
    def file_paths(self) -> Callable[[list[str]], list[bytes] | None] | None:
        """The store behind's ``file_paths(keys)`` (protocol.local_files), or None."""
        return protocol.local_files(self._store)

    @property
    def read_into(self) -> Callable[[list[str], list], list[int]] | None:
        """The store behind's ``read_into(keys, buffers)``, or None."""
        return getattr(self._store, "read_into", None)

    def start_fetch(self, keys: list[str]) -> Any:
        """Start fetching *keys* through the store behind; see ``start_fetch`` of FSStore."""
        # called only where concurrent_io is true: the store behind is a ConcurrentIO
        return self._store.start_fetch(keys)  # type: ignore[attr-defined]

    def fetched(self, key: str, future: concurrent.futures.Future) -> bytes | None:
        """The store behind's answer for *key* from *future*: bytes, or None if missing."""
        # called only where concurrent_io is true: the store behind is a ConcurrentIO
        return self._store.fetched(key, future)  # type: ignore[attr-defined]
