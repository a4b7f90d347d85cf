"""ArrayLayout: how one array lies in its store, the one thing above which no code asks
which Zarr format it holds.

A layout is built once from an array's metadata (again after every metadata change) and
answers everything format-specific the array, the CLI and the tools need: the chunk shape
reads and writes work in, the codec of one chunk, the mapping chunks are read from and
written to (the store, or a view that maps inner chunks into their shards), chunk keys
(encoded in C for many at once, and parsed), which chunks are stored, the metadata and lock
keys, the metadata after a resize, and the format's rows of ``Array.info``.

Two grids are involved. The *chunk grid* is that of the chunks the array reads and writes
(the inner chunks of a sharded array); ``chunk_key`` and ``chunk_keys`` give keys of
``chunk_store``. The *stored grid* is that of the objects in the store (the chunks, or the
shards of a sharded array); ``stored_key`` and ``parse_stored_key`` give and parse store
keys. Without sharding the two are the same.

Implementations: :class:`chunkstore.format.v2.V2Layout`,
:class:`chunkstore.format.v3.V3Layout`, :class:`chunkstore.format.sharded.ShardedLayout`;
:func:`chunkstore.format.layout_for` picks one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Any

from chunkstore.format.keys import GridKeys
from chunkstore.storage.base import getitems
from chunkstore.storage import protocol
from chunkstore.metadata._common import MAX_INDEX

__all__ = ["ArrayLayout"]


class ArrayLayout:
    """How one array (``metadata`` at ``path`` in ``store``) lies in its store.

    Attributes
    ----------
    zarr_format : 2 or 3.
    metadata : the array metadata the layout was built from.
    store, path : the store and the array's path in it ("" for the root).
    chunks : the chunk shape reads and writes work in (a sharded array's inner chunks).
    shards : the shard shape of a sharded array, else None.
    chunks_per_shard : inner chunks per shard along each dimension, else None.
    codec : encodes and decodes one chunk (``encode(ndarray)``, ``decode(bytes, key=...)``).
    chunk_store : the mapping whose keys are ``chunk_key``s: the store itself, or for a
        sharded array a ``ShardedStoreView`` over it.
    live_chunk_store : chunk_store as the store holds it now, past a cache or a consolidated
        view (protocol.live_store): what writes read.
    chunk_grid_shape : chunks along each dimension.
    stored_grid_shape : stored objects (chunks, or shards) along each dimension.
    metadata_key : the store key of the array's metadata document.
    lock_key : the key whose lock (``synchronizer[lock_key]``) a zarr-style synchronizer
        holds for array-wide changes (resize, append, metadata).
    metadata_lock_key : the key whose lock attribute updates hold when the attributes share
        the metadata document (Zarr v3), else None.
    array_shape : the array's shape as stored; a view's metadata may give another shape.
    """

    zarr_format: int = 0
    shards: tuple[int, ...] | None = None
    chunks_per_shard: tuple[int, ...] | None = None
    metadata_lock_key: str | None = None
    _stored_kind = "chunk"  # what a stored object is called in messages

    def __init__(self, store: MutableMapping, path: str, metadata: Any, *,
                 synchronizer: Any = None, cache_index: bool = True,
                 array_shape: Sequence[int] | None = None) -> None:
        self.store = store
        self.path = (path or "").strip("/")
        self.metadata = metadata
        # the array's shape as stored (a view's metadata may give another: see layout_for)
        self.array_shape: tuple[int, ...] = tuple(
            metadata.shape if array_shape is None else array_shape)
        self._prefix = self.path + "/" if self.path else ""
        self.chunk_store: MutableMapping = store
        # chunk_store as the store holds it now, past a cache (protocol.live_store): what a
        # write reads to merge into (a cached chunk would merge another handle's update away)
        self.live_chunk_store: MutableMapping = protocol.live_store(store)
        self.chunks: tuple[int, ...] = tuple(metadata.chunks)
        self.codec: Any = None
        self._keys: GridKeys  # the stored objects' keys, set by each implementation
        self._setup(synchronizer, cache_index)

    def _setup(self, synchronizer: Any, cache_index: bool) -> None:
        """(each format) The codec and the stored objects' keys, and whatever else the
        format's layout holds; synchronizer and cache_index are for a sharded array's shard
        view (shard locks; keeping decoded shard indexes across calls)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.path!r} shape={self.metadata.shape} "
                f"chunks={self.chunks} shards={self.shards}>")

    # ------------------------------------------------------------------ grids
    @property
    def chunk_grid_shape(self) -> tuple[int, ...]:
        """Chunks (inner chunks, if sharded) along each dimension."""
        return tuple(-(-s // c) for s, c in zip(self.metadata.shape, self.chunks))

    @property
    def stored_grid_shape(self) -> tuple[int, ...]:
        """Stored objects (chunks, or shards) along each dimension."""
        return tuple(-(-s // c) for s, c in zip(self.metadata.shape, self.write_chunks))

    @property
    def write_chunks(self) -> tuple[int, ...]:
        """The blocks a write stores whole: the shards of a sharded array, else the chunks."""
        return self.shards or self.chunks

    @property
    def metadata_key(self) -> str:
        """The store key of the array's metadata document (set by each format)."""
        raise NotImplementedError

    @property
    def lock_key(self) -> str:
        """The key of the array-wide lock of a zarr-style synchronizer (``.zarray``, for
        both formats: every writer of the array must agree on it)."""
        return self._prefix + ".zarray"

    # ------------------------------------------------------------------ chunk keys
    def chunk_key(self, coords: Sequence[int]) -> str:
        """The key in ``chunk_store`` of the chunk at chunk-grid coordinates ``coords``."""
        return self._keys.key(coords)

    def chunk_keys(self, coords: Any) -> list[str]:
        """``chunk_key`` of each row of an (n, ndim) integer array of chunk-grid
        coordinates (formatted in C: reads and writes ask for thousands at once)."""
        return self._keys.keys(coords)

    def parse_chunk_key(self, key: str) -> tuple[int, ...] | None:
        """Inverse of :meth:`chunk_key`: chunk-grid coordinates of a ``chunk_store`` key,
        None if it is not a chunk key; ValueError (saying why) for an invalid one."""
        return self.parse_stored_key(key)

    def stored_key(self, coords: Sequence[int]) -> str:
        """The store key of the stored object (chunk, or shard) at stored-grid
        coordinates ``coords``."""
        return self._keys.key(coords)

    def parse_stored_key(self, key: str) -> tuple[int, ...] | None:
        """Stored-grid coordinates of the object at store key ``key`` (the shard's
        coordinates for a sharded array).

        Returns None when ``key`` is not a chunk key at all (metadata, another path, any
        name not made of digits and separators: every Zarr reader ignores those). Raises
        ValueError, with the reason as its message, for a key that looks like a chunk key
        but cannot be one: the other separator, the wrong number of coordinates, or
        coordinates outside the grid.
        """
        coords = self._keys.parse(key)
        if coords is not None and not self._keys.inside(coords):
            what = self._stored_kind
            name = "/" + self.path if self.path else "/"
            raise ValueError(f"the {what} grid of {name!r} is {self.stored_grid_shape} "
                             f"(shape {self.metadata.shape}, {what}s "
                             f"{self.write_chunks})")
        return coords

    def stored_keys_for(self, coords: Any) -> tuple[Any, list[str]]:
        """(stored-grid coordinates, store keys) of the stored objects (chunks, or shards)
        that hold the chunks at the rows of chunk-grid coordinates ``coords``, each once."""
        if self.chunks_per_shard is not None:
            import numpy as np
            coords = np.unique(coords // np.asarray(self.chunks_per_shard, dtype=np.int64),
                               axis=0)
        return coords, self._keys.keys(coords)

    # ------------------------------------------------------------------ stored chunks
    def stored_chunks(self) -> Iterator[tuple[int, ...]]:
        """Chunk-grid coordinates of the chunks present in the store (inside the grid), as
        it lists them now (past a cache: a resize's trim deletes by this)."""
        return self._keys.stored(protocol.live_store(self.store))

    def count_stored(self) -> int:
        """How many chunks are present in the store (inside the grid), from one listing."""
        return len(self._keys.stored_coords(protocol.live_store(self.store)))

    def listed_extent(self) -> tuple[int, ...]:
        """The smallest shape, at least this one, whose stored grid holds every stored
        object (chunk, or shard) found under the array's path, inside the grid or past it
        (one listing of the array's keys)."""
        from chunkstore.storage.base import keys_under
        step = self.write_chunks
        extent = [-(-n // w) * w for n, w in zip(self.metadata.shape, step)]
        for key in keys_under(protocol.live_store(self.store), self.path):
            try:
                coords = self._keys.parse(key)
            except ValueError:
                continue  # (not one of this grid's keys: never read as a chunk)
            if coords is not None and len(coords) == len(extent):
                extent = [max(e, (c + 1) * w) for e, c, w in zip(extent, coords, step)]
        # (the largest extent at most: nothing past it is ever part of the array)
        return tuple(min(e, MAX_INDEX) for e in extent)

    def read_chunks(self, keys: Sequence[str]) -> dict[str, bytes]:
        """``{key: encoded chunk}`` of the chunk keys present in ``chunk_store`` (absent
        ones omitted). For a sharded array a shard whose index cannot be decoded raises
        ``chunkstore.errors.ChunkDecodeError`` naming the shard."""
        return getitems(self.chunk_store, list(keys))

    def check_whole(self, key: str, data: Any) -> None:
        """Raise (naming key) unless data, the bytes of the stored object at key, is a whole
        object of this array: a chunk decodes to the chunk's values (its codec checks the
        size). An append checks the bytes it would put back on failure: a body cut short by
        the network, put back, replaced a good chunk with bytes nothing could read."""
        self.codec.decode(data, key=key, store=self.store, writable=False)

    def stored_chunk_keys(self, coords: Sequence[int]) -> list[str]:
        """The chunk keys held by the stored object at stored-grid coordinates ``coords``:
        its own key, or (sharded) the keys of the shard's inner chunks inside the array."""
        return [self.chunk_key(coords)]

    # ------------------------------------------------------------------ metadata
    def encode_metadata(self, metadata: Any) -> bytes:
        """The metadata document (bytes) for ``metadata``."""
        raise NotImplementedError

    def decode_metadata(self, raw: Any) -> Any:
        """The array metadata of a document read from :attr:`metadata_key`."""
        raise NotImplementedError

    def write_metadata(self, metadata: Any) -> None:
        """Store ``metadata`` at :attr:`metadata_key` (this layout is then stale: build a
        new one with ``layout_for``)."""
        self.store[self.metadata_key] = self.encode_metadata(metadata)

    _verified: bytes | None = None  # (see is_current)

    def is_current(self, metadata: Any = None) -> bool:
        """Whether the array's metadata in the store still is this layout's (attributes
        aside, which live beside the layout), or ``metadata`` (a view's layout is of its
        changed metadata; the store holds its base's): one read of the metadata document. A
        write checks it under its locks (which exclude resizes and metadata changes), so a
        handle's cached metadata is never trusted for a write after another handle changed
        it."""
        metadata = self.metadata if metadata is None else metadata
        try:  # (the document as stored now, not a consolidated snapshot of it)
            raw = protocol.live_store(self.store)[self.metadata_key]
        except KeyError:
            return False
        if raw == self._verified:
            return True  # the bytes last found to be this layout's metadata: no parsing
        now = self.decode_metadata(raw)
        # (a v3 group's document parses to a dict: the array was replaced by a group)
        same = isinstance(now, type(metadata)) and _document(now) == _document(metadata)
        if same:
            self._verified = bytes(raw)
        return same

    def resized(self, shape: Sequence[int]) -> Any:
        """The array metadata with ``shape`` in place of the current one. Chunks of 0 stored
        for an empty dimension (as zarr-python 3 writes them) are kept while it stays empty;
        grown, it has the chunks of 1 the engine has used for it."""
        meta, shape = self.metadata, tuple(shape)
        stored = meta.document_chunks
        chunks = meta.chunks if stored is None else tuple(
            s if n == 0 else c for s, c, n in zip(stored, meta.chunks, shape))
        return dataclasses.replace(meta, shape=shape, chunks=chunks)

    # ------------------------------------------------------------------ info
    def grid_info_rows(self) -> list[tuple[str, str]]:
        """Rows of ``Array.info`` about the format and the grid: ``(name, text)``."""
        rows = [("Zarr format", str(self.zarr_format)), ("Chunk shape", str(self.chunks))]
        if self.shards is not None:
            rows.append(("Shard shape", str(self.shards)))
        return rows

    def codec_info_rows(self) -> list[tuple[str, str]]:
        """Rows of ``Array.info`` about the codecs beyond compressor and filters."""
        return []


def same_metadata(a: Any, b: Any) -> bool:
    """Whether array metadata a and b are one, attributes aside."""
    return isinstance(a, type(b)) and _document(a) == _document(b)


def _document(metadata: Any) -> str:
    """The metadata as comparable text, attributes aside (JSON: NaN fill values compare)."""
    import json
    doc = dict(metadata.to_dict())
    doc.pop("attributes", None)
    return json.dumps(doc, sort_keys=True, default=str)
