"""The store protocol, written down: what every store is, and the optional capabilities a
store may have, each a ``typing.Protocol`` naming its methods.

Every store is a ``MutableMapping[str, bytes]`` (:class:`Store`); a plain ``dict`` is one.
Everything else is optional, and the layers above ask for a capability here, by name,
rather than probing stores with ``getattr`` wherever they happen to need one:

========================  ==================================================================
capability                 what a store offers (the accessor returns it, or None / False)
========================  ==================================================================
:func:`byte_ranges`        ``get_partial(key, ranges)``: byte ranges of one value
:func:`versions`           ``open_version(key)``: a :class:`~.base.ValueVersion`, ranges of
                           ONE version of a value (sharded reads take index and chunks from
                           it); stores without it get whole shards
:func:`version_reads`      ``read_if_version(key, version, ranges)``: ranges only if the value
                           is still that version (a cached shard index checked for free)
:func:`local_files`        ``file_paths(keys)``: the files holding the keys, for the kernels
                           that read files themselves
:func:`coalesces_ranges`   whether neighbouring byte ranges are worth merging into one read
                           (True unless the store says ``coalesce_ranges = False``)
:func:`concurrent_io`      ``concurrent_io`` True and ``start_fetch``/``fetched``/
                           ``start_put``/``put_error``: requests in flight at once
                           (``storage/pipelining.py``)
:func:`closer`             ``close()``: release files, connections or locks
:func:`renamer`            ``rename(src, dst)``: move a prefix in one step
:func:`flusher`            ``flush()``: write out what is buffered
:func:`stray_temporaries`  ``stray_temporaries()``: leftovers of killed writers (for verify)
:func:`location`           ``_identity()``: where the data is (a path, a URL): stores equal by
                           it share in-process locks
:func:`node_location`      ``_nesting()``: the place and root path of a store whose locations
                           nest (a directory, an S3 prefix): a node reached through stores of
                           two roots, one inside the other, is one node
:func:`key_separator`      ``dimension_separator``: the chunk key separator of Zarr v2 arrays
                           whose ``.zarray`` names none (as zarr-python 2 reads them)
========================  ==================================================================

The batch and listing capabilities (:class:`BatchReads`, :class:`RecursiveListing`, and
``setitems``, ``delitems``, ``listdir``, ``rmdir``, ``getsize``) are asked through the helpers
for any mapping in :mod:`.base` (``base.MAPPING_HELPERS``): a store's own method when it has
one, the mapping methods otherwise. :class:`~.base.BaseStore` gives every chunkstore store
the defaults; wrappers (``LRUStoreCache``, the consolidated stores) forward what the store
behind them offers.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from .base import ValueVersion

__all__ = [
    "Store", "BatchReads", "ByteRanges", "Versions", "VersionReads", "LocalFiles",
    "RecursiveListing", "ConcurrentIO",
    "byte_ranges", "versions", "version_reads", "local_files",
    "coalesces_ranges", "concurrent_io", "closer", "renamer", "flusher",
    "stray_temporaries", "key_separator", "location", "node_location", "node_below",
]

#: What every store is: a mutable mapping of string keys to bytes.
Store = MutableMapping[str, bytes]


@runtime_checkable
class BatchReads(Protocol):
    """``getitems(keys)``: ``{key: value}`` of the keys present (absent ones omitted)."""

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """The values of the keys present."""


@runtime_checkable
class ByteRanges(Protocol):
    """``get_partial(key, ranges)``: the bytes of each (offset, length) range of one value
    (a negative offset counts from the end; length None: to the end)."""

    def get_partial(self, key: str, ranges: Iterable[tuple[int, int | None]]) -> list[bytes]:
        """The bytes of each range; ``KeyError`` if the key is absent."""


@runtime_checkable
class Versions(Protocol):
    """``open_version(key)``: byte ranges of one version of a value."""

    def open_version(self, key: str) -> ValueVersion:
        """One version of key's value; ``KeyError`` if absent."""


@runtime_checkable
class VersionReads(Protocol):
    """``read_if_version(key, version, ranges)``: ranges of key's value only if it is still
    *version* (None where it is not)."""

    def read_if_version(self, key: str, version: Any,
                        ranges: list[tuple[int, int]]) -> list[bytes] | None:
        """The ranges, or None where the value is another version now."""


@runtime_checkable
class LocalFiles(Protocol):
    """``file_paths(keys)``: the local files holding the keys (None where the store cannot
    name them: a subclass with reads of its own)."""

    def file_paths(self, keys: list[str]) -> list[bytes] | None:
        """One path per key, or None."""


@runtime_checkable
class RecursiveListing(Protocol):
    """``keys_under(prefix)``: every key at or under a prefix, in one listing."""

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        """The keys at or under *prefix*."""


@runtime_checkable
class ConcurrentIO(Protocol):
    """Requests in flight at once (a remote store): ``start_fetch(keys)`` and
    ``fetched(key, future)`` for reads, ``start_put(keys, values)`` and
    ``put_error(key, exc)`` for writes (see ``storage/pipelining.py``)."""

    concurrent_io: bool

    def start_fetch(self, keys: list[str]) -> Any:
        """A batch whose ``futures[i]`` answers ``keys[i]``, or None."""

    def fetched(self, key: str, future: Any) -> bytes | None:
        """A fetched value, None if missing; an error names the key."""

    def start_put(self, keys: list[str], values: list[Any]) -> Any:
        """A batch of writes whose ``futures[i]`` settle ``keys[i]``."""

    def put_error(self, key: str, exc: BaseException) -> BaseException:
        """The error to raise for a failed write of *key*."""


# ------------------------------------------------------------------------------ accessors
def byte_ranges(store: object) -> Callable[..., list[bytes]] | None:
    """The store's ``get_partial(key, ranges)``, or None."""
    return getattr(store, "get_partial", None)


def versions(store: object) -> Callable[[str], ValueVersion] | None:
    """The store's ``open_version(key)``, or None (reads of a shard then take it whole)."""
    return getattr(store, "open_version", None)


def version_reads(store: object) -> Callable[..., list[bytes] | None] | None:
    """The store's ``read_if_version(key, version, ranges)``, or None."""
    return getattr(store, "read_if_version", None)


def local_files(store: object) -> Callable[[list[str]], list[bytes] | None] | None:
    """The store's ``file_paths(keys)``, or None."""
    return getattr(store, "file_paths", None)


def recursive_listing(store: object) -> Callable[[str], Iterator[str]] | None:
    """The store's ``keys_under(prefix)`` (every key below a prefix in one listing: a
    directory walk, an object store's prefix listing), or None."""
    return getattr(store, "keys_under", None)


def consolidated_documents(store: object) -> Callable[[str], dict | None] | None:
    """The store's ``consolidated_document(key)`` (a consolidated-metadata view: the JSON
    object of a metadata document it serves, parsed by the format layer without a bytes
    round trip), or None."""
    return getattr(store, "consolidated_document", None)


def coalesces_ranges(store: object) -> bool:
    """Whether neighbouring byte ranges of a value are worth one read (False where the store
    reads ranges with no cost per request: ``coalesce_ranges = False``)."""
    return bool(getattr(store, "coalesce_ranges", True))


def holds_consolidated_metadata(store: object) -> bool:
    """Whether consolidated metadata may be written to and read from the store (zarr-python
    3's ``supports_consolidated_metadata``; a store may opt out with False)."""
    return bool(getattr(store, "supports_consolidated_metadata", True))


def concurrent_io(store: object) -> bool:
    """Whether the store puts a batch's requests in flight at once (``concurrent_io`` True:
    a :class:`ConcurrentIO` store whose requests are round trips)."""
    return bool(getattr(store, "concurrent_io", False))


def copies_share_data(store: object) -> bool:
    """Whether a pickled copy of store reaches the same data, so that writes through it in
    another process land where store sees them (``copies_share_data``: True for stores at a
    location; False for one holding its data in this process, a MemoryStore or a dict, or
    buffering its writes until it is closed, a ZipStore). A view (a cache, a consolidated
    view) answers for the store behind it."""
    behind = live_store(store)
    if behind is not store:
        return copies_share_data(behind)
    return bool(getattr(store, "copies_share_data", False))


def closer(store: object) -> Callable[[], None] | None:
    """The store's ``close()``, or None."""
    return getattr(store, "close", None)


def renamer(store: object) -> Callable[[str, str], None] | None:
    """The store's ``rename(src, dst)``, or None."""
    return getattr(store, "rename", None)


def view_layers(store: object) -> Iterator[object]:
    """store, then each store it is a view of (``snapshot_of``, ``cache_of``) down to the
    live one: a cache may lie in front of a consolidated view or behind it."""
    for _ in range(16):  # (a bound: views of views are a few deep)
        yield store
        behind = getattr(store, "snapshot_of", None)
        if behind is None:
            behind = getattr(store, "cache_of", None)
        if behind is None:
            return
        store = behind


def forget_cached(store: object, path: str) -> None:
    """Have a view that caches values (LRUStoreCache: ``forget_under``) drop what it holds
    of the node at path, and its listings: called by a handle that found the node's
    metadata changed through another handle of this process, which then reads the new
    metadata from the live store; its chunks, read through the cache, were the old node's
    (decoded by the new dtype: wrong values; deleted by a shrink: back after a growth)."""
    for layer in view_layers(store):  # (a cache behind a consolidated view too)
        forget = getattr(layer, "forget_under", None)
        if forget is not None:
            forget(path)


def follow_cached(store: object, path: str, counter: object, generation: int) -> None:
    """Have a view that caches values (LRUStoreCache: ``follow_node``) drop what it holds
    of the node at path unless it was validated at this count (``generation`` of the
    in-process table ``counter``) of this process's changes of the node's metadata: called
    by an array handle before it reads the metadata, a new handle too (it had no count to
    find moved, and read another handle's re-created array by the old one's cached
    metadata and chunks)."""
    for layer in view_layers(store):
        follow = getattr(layer, "follow_node", None)
        if follow is not None:
            follow(path, counter, generation)


def changed_cached(store: object, path: str, counter: object, before: int,
                   after: int) -> None:
    """Tell a view that caches values (LRUStoreCache: ``changed_node``) that the node's
    metadata was changed through it, from count ``before`` to ``after`` (see
    follow_cached): a handle's own resize or append then keeps what it caches."""
    changed = getattr(store, "changed_node", None)
    if changed is not None:
        changed(path, counter, before, after)


def flusher(store: object) -> Callable[[], None] | None:
    """The store's ``flush()``, or None."""
    return getattr(store, "flush", None)


def stray_temporaries(store: object) -> Callable[[], list[str]] | None:
    """The store's ``stray_temporaries()``, or None."""
    return getattr(store, "stray_temporaries", None)


def key_separator(store: object) -> str | None:
    """The store's ``dimension_separator`` ("." or "/"), or None. zarr-python 2 reads a
    ``.zarray`` without one (written before 2.8, through NestedDirectoryStore say) with its
    store's; a consolidated view answers for the store behind it."""
    sep = getattr(live_store(store), "dimension_separator", None)
    return sep if sep in (".", "/") else None


def node_path(store: object, path: str) -> str:
    """path as the store's keys spell it: lower-cased where the store lower-cases every key
    (zarr-python 2's ``normalize_keys=True``). A node's keys are made from its path, and its
    listings come back lower-cased: a handle at "G/X" matched none of them (a resize left
    the chunks past the new shape, a copy took the documents alone, a move moved nothing)."""
    return path.lower() if getattr(live_store(store), "normalize_keys", False) else path


def live_store(store: object) -> Any:
    """The store itself, or, for a view that serves a snapshot of the metadata documents
    of the store behind it (consolidated metadata: ``snapshot_of``) or values it cached
    (LRUStoreCache: ``cache_of``), that store: the same data, as it is now. Handles through
    such a view and beside it share in-process locks (location), and what a write reads
    (the chunks it merges into, the metadata it checks) comes from there: read through a
    cache, another handle's update of a chunk was merged away."""
    for store in view_layers(store):  # (the last layer)
        pass
    return store


def is_snapshot(store: object) -> bool:
    """Whether store is a view serving a consolidated snapshot of the metadata documents
    (``snapshot_of``): no node is created through one."""
    return getattr(store, "snapshot_of", None) is not None


def location(store: object) -> Hashable:
    """What identifies the store's data in this process, for in-process locks: the store's
    kind (its ``_location_kind()``, else its class) and ``_identity()`` where it has one (two
    DirectoryStore objects of one directory give one key, and so do a DirectoryStore and a
    LocalStore of it: a LocalStore's writes and a path's lost each other's elements in one
    chunk while the key held the class itself), else the
    object itself (its id: a handle holding a lock table holds the store, so no other object
    can take the id meanwhile). A consolidated-metadata view is located at its store
    (live_store): handles through it and beside it share locks."""
    store = live_store(store)
    identity = getattr(store, "_identity", None)
    where = identity() if callable(identity) else None
    if where is None:
        return id(store)
    try:
        hash(where)
    except TypeError:   # (an identity that cannot key a dict: the object's own)
        return id(store)
    kind = getattr(store, "_location_kind", None)
    return (kind() if callable(kind) else type(store), where)


def node_location(store: object, path: str) -> tuple[Hashable, str]:
    """Where the node at path of store is, for this process's in-process locks: (the place,
    the node's path there). Stores whose locations nest (``_nesting()``: a directory, an S3
    or fsspec prefix) give their place and root path, and the node's path is the root's
    joined with path, so the array at ``sub/arr`` of a directory's store and the array of
    the store of ``dir/sub/arr`` itself are one node: their handles share in-process locks
    (keyed by each store and the path as given, writes of disjoint elements of one chunk
    through the two lost one). Other stores: (location(store), path)."""
    store = live_store(store)
    nesting = getattr(store, "_nesting", None)
    base = nesting() if callable(nesting) else None
    if base is None:
        return location(store), path.strip("/")
    place, root = base
    kind = getattr(store, "_location_kind", None)
    path = path.strip("/")
    root = root.strip("/")
    return ((kind() if callable(kind) else type(store), place),
            f"{root}/{path}" if root and path else root or path)


def ancestors(path: str) -> list[str]:
    """The paths of the groups above the node at path, the root ("") first."""
    parts = path.split("/") if path else []
    return ["/".join(parts[:i]) for i in range(len(parts))]


# This process's changes of node metadata, dated, for consolidated-metadata views (whose
# snapshot may be older: see snapshot_stale). Each change and each consolidation written here
# takes the next number; a node's last change is kept by its node_location, per place. A
# store located by its id (location) has its places' dates dropped when it goes (another
# object may take the id: a false date costs a live read, and made read counts vary). Past
# _KEPT entries the changes are forgotten, and a snapshot dated before that takes every node
# as changed (a read of the live document each: slower, never wrong). (Dicts changed under
# the GIL, one operation at a time: a reader sees the entry before or after, never a torn one.)
_dates = itertools.count(1)
_changed: dict[Hashable, dict[str, int]] = {}      # place -> node path -> date
# place -> group path -> date of the last change of a node below it (a member created or
# removed changes the group's listing)
_below: dict[Hashable, dict[str, int]] = {}
_latest = 0  # the date of the last change anywhere (a snapshot newer than it: nothing to look up)
_consolidated: dict[Hashable, dict[str, int]] = {}  # place -> document key -> date
_kept = 0  # entries in _changed and _below
_KEPT = 20_000
_forgot_before = 0  # snapshots dated before this may miss a forgotten change
_watched: set[int] = set()  # id places whose store's end drops their dates


def watch_place(store: object) -> None:
    """For a store located by its id (location): drop its nodes' dates when it goes. A store
    that cannot be weakly referenced (a plain dict) keeps them: a live read too many later."""
    place = location(store)
    if not isinstance(place, int) or place in _watched:
        return
    try:
        weakref.finalize(live_store(store), _forget_place, place)
    except TypeError:
        return
    _watched.add(place)


def _forget_place(place: int) -> None:
    global _kept
    _watched.discard(place)
    _kept -= len(_changed.pop(place, ())) + len(_below.pop(place, ()))
    _consolidated.pop(place, None)


def note_metadata_change(node: tuple[Hashable, str]) -> None:
    """Date a change of the metadata of the node (a node_location) made by this process: a
    creation, re-creation, delete, resize, append or fill value change."""
    global _forgot_before, _kept, _latest
    place, path = node
    paths = _changed.get(place)
    if (paths is None or path not in paths) and _kept >= _KEPT:
        _forgot_before = next(_dates)  # (first: a reader meanwhile finds it, not a gap)
        _changed.clear()
        _below.clear()
        _kept, paths = 0, None
    if paths is None:
        paths = _changed.setdefault(place, {})
    if path not in paths:
        _kept += 1
    date = paths[path] = _latest = next(_dates)
    above = _below.setdefault(place, {})
    for group in ancestors(path):
        if group not in above:
            _kept += 1
        above[group] = date


def consolidation_start() -> int:
    """The date of a consolidation about to read the members' documents (pass it to
    note_consolidated once written): a change from then on may be missing from it."""
    return next(_dates)


def note_consolidated(store: object, key: str, since: int) -> None:
    """Date the consolidated document at key of store, which this process wrote from
    members read from date since."""
    place, path = node_location(store, key)
    if place not in _consolidated and len(_consolidated) >= _KEPT:
        _consolidated.clear()  # (a document not dated: its view takes changes as newer)
    watch_place(store)
    _consolidated.setdefault(place, {})[path] = since


def snapshot_date(document: tuple[Hashable, str]) -> int:
    """The date of the last consolidation this process wrote into document, or 0 (written
    by another process or before this one: any change of this process may be missing).
    Taken before the document is read: one written meanwhile is newer than its date says,
    never older."""
    place, path = document
    return _consolidated.get(place, {}).get(path, 0)


def changed_after(node: tuple[Hashable, str], date: int) -> bool:
    """Whether this process changed the metadata of the node, or of a node above it (a
    group deleted, replaced or moved with everything below it), at or after date (or may
    have)."""
    date = max(date, 1)
    if date <= _forgot_before:
        return True
    if date > _latest:
        return False
    place, path = node
    paths = _changed.get(place)
    if not paths:
        return False
    return any(paths.get(p, 0) >= date for p in (*ancestors(path), path))


def place_changed_after(place: Hashable, date: int) -> bool:
    """Whether this process changed the metadata of any node at place (a node_location's
    first part) at or after date (or may have)."""
    date = max(date, 1)
    if date <= _forgot_before:
        return True
    return date <= _latest and any(d >= date for d in _changed.get(place, {}).values())


def changed_since(date: int) -> bool:
    """Whether this process changed any node's metadata at or after date (or may have): if
    not, changed_after and changed_around are False for every node (no lookup)."""
    date = max(date, 1)
    return date <= _forgot_before or date <= _latest


def changed_around(node: tuple[Hashable, str], date: int) -> bool:
    """changed_after, or a node below it changed at or after date: the listing of a group
    (its members) may have changed too."""
    if changed_after(node, date):
        return True
    place, path = node
    return max(date, 1) <= _latest and _below.get(place, {}).get(path, 0) >= max(date, 1)


def snapshot_stale(store: object, path: str) -> bool:
    """Whether store is a view serving a consolidated snapshot (is_snapshot) whose document
    of the node at path may be older than a change this process made to it: its metadata is
    then read from the store behind (live_store). (A member opened through the view after
    this process re-created the array with another dtype decoded its chunks as the old one:
    garbage values, no error.)"""
    for layer in view_layers(store):  # (a cache in front of the view too)
        stale = getattr(layer, "changed_since_snapshot", None)
        if stale is not None:
            return bool(stale(path))
    return False


def node_below(node: tuple[Hashable, str], top: tuple[Hashable, str]) -> bool:
    """Whether node (a node_location) is top or below it."""
    (place, path), (top_place, top_path) = node, top
    return place == top_place and (not top_path or path == top_path
                                   or path.startswith(top_path + "/"))


class S3Objects:
    """The location kind (``_location_kind()``) of objects in an S3 bucket, whichever client
    a store reaches them with (ObjectStore: obstore's; FSStore: s3fs), with s3_identity as
    the identity: handles through either client, with any credentials, region or client
    options, share in-process locks (keyed by the client's configuration and the store's
    class, writes of disjoint elements of one chunk through two such handles lost one)."""


def s3_identity(endpoint: object, bucket: str, prefix: str) -> tuple[Any, ...]:
    """Where an S3 store's objects are: its endpoint (None for AWS, whose bucket names are
    global; no trailing slash), bucket and key prefix (no slash at its end: the store's keys
    are ``prefix/key``)."""
    return s3_place(endpoint, bucket) + (prefix.rstrip("/"),)


def s3_place(endpoint: object, bucket: str) -> tuple[Any, ...]:
    """An S3 bucket as a place that stores' prefixes nest in (``_nesting()``): s3_identity
    without the prefix."""
    return ("s3", _endpoint_key(endpoint), bucket)


_LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]"}
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _endpoint_key(endpoint: object) -> str | None:
    """One spelling of an S3 endpoint URL (None: AWS, whose bucket names are global): scheme
    and host in lower case, the scheme's default port and a trailing slash dropped, the
    loopback names as one, and AWS's own endpoints as None. Handles of one bucket through
    two spellings (`localhost` and `127.0.0.1`) took each other for two locations and lost
    each other's updates of a chunk; merging two that differ only costs waits."""
    if not endpoint:
        return None
    from urllib.parse import urlsplit
    text = str(endpoint).strip().rstrip("/")
    try:
        parts = urlsplit(text if "://" in text else "https://" + text)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return text
    scheme = parts.scheme.lower()
    if host == "amazonaws.com" or host.endswith(".amazonaws.com") and host.startswith("s3"):
        return None
    if host in _LOOPBACK:
        host = "127.0.0.1"
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}{parts.path.rstrip('/')}"
    return f"{scheme}://{host}:{port}{parts.path.rstrip('/')}"


#: The event loop of the asynchronous API's caller, while an engine call it awaits runs on a
#: worker thread (set by chunkstore.aio.run): a store whose requests are coroutines that run
#: on any loop (ObjectStore) sends them to that loop, so a coroutine's chunk requests run
#: natively on the caller's own event loop; elsewhere, on the store's own I/O loop.
CALLER_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = \
    contextvars.ContextVar("chunkstore_caller_loop", default=None)

_T = TypeVar("_T")


def caller_loop() -> asyncio.AbstractEventLoop | None:
    """The running event loop of the asynchronous caller (see CALLER_LOOP), or None."""
    loop = CALLER_LOOP.get()
    return loop if loop is not None and loop.is_running() else None


def with_caller_loop(loop: asyncio.AbstractEventLoop | None, fn: Callable[..., _T],
                     *args: Any) -> _T:
    """fn(*args) with CALLER_LOOP set to loop in this thread (a pool thread carrying on a
    read its caller started: a prefetch's later batches, a helper's shard reads)."""
    if loop is None or CALLER_LOOP.get() is loop:
        return fn(*args)
    token = CALLER_LOOP.set(loop)
    try:
        return fn(*args)
    finally:
        CALLER_LOOP.reset(token)
