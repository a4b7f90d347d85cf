"""The sharded Zarr v3 layout: the array reads and writes inner chunks, through a
:class:`~chunkstore.format.sharded_view.ShardedStoreView` that maps each inner chunk key
(``<shard key>|<i>.<j>``) onto a byte range of its shard; the store holds shards, keyed as
the unsharded v3 layout keys chunks."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from chunkstore.format.v3 import V3Layout
from chunkstore.storage import protocol

__all__ = ["ShardedLayout"]


class ShardedLayout(V3Layout):
    """A sharded Zarr v3 array (see :class:`ArrayLayout`): ``chunks`` are the inner
    chunks, ``shards`` the shard shape, ``chunk_store`` (also ``view``) the
    ShardedStoreView that maps inner chunk keys into the shards."""

    _stored_kind = "shard"

    def _setup(self, synchronizer: Any, cache_index: bool) -> None:
        from chunkstore.format.sharded_view import ShardedStoreView
        view = ShardedStoreView(self.store, self.metadata, prefix=self.path,
                                synchronizer=synchronizer, cache_index=cache_index,
                                array_shape=self.array_shape)
        self.view = view
        self.chunk_store = view
        live = protocol.live_store(self.store)
        # (the shards as the store holds them now, past a cache: what writes read; its
        # decoded indexes are kept as the view's are, each checked against the version of
        # its shard the store has now)
        self.live_view = view if live is self.store else ShardedStoreView(
            live, self.metadata, prefix=self.path, synchronizer=synchronizer,
            cache_index=cache_index, array_shape=self.array_shape)
        self.live_chunk_store = self.live_view
        self.codec = view.codec
        self.chunks = tuple(view.inner_chunks)
        self.shards = tuple(view.shard_shape)
        self.chunks_per_shard: tuple[int, ...] = tuple(view.chunks_per_shard)
        # the view's inner keys, bound once (reads and writes ask for them per call)
        self.chunk_key = view.inner_key  # type: ignore[method-assign]
        self.chunk_keys = view.inner_keys  # type: ignore[method-assign]
        self._keys = view.shard_keys  # the store holds shards, keyed like v3 chunks

    def check_whole(self, key: str, data: Any) -> None:
        """(see ArrayLayout.check_whole) A shard: its index, read as reads read it, places
        every inner chunk inside the shard's bytes (one cut short or grown fails); the inner
        chunks are not decoded (a big shard's would cost an append far more than its
        write)."""
        view = self.view
        view._split(key, view._decode_post(data) if view._post else data)

    def parse_chunk_key(self, key: str) -> tuple[int, ...] | None:
        """Inner-chunk coordinates of an inner chunk key ``<shard key>|<i>.<j>``; None for
        a key without ``|`` (not an inner key), ValueError for an invalid one."""
        if "|" not in key:
            return None
        try:
            return self.view.inner_coords(key)
        except KeyError:
            raise ValueError(f"{key!r} is not an inner chunk key of the shards of array "
                             f"{self.path!r} (shards {self.shards}, "
                             f"inner chunks {self.chunks})") from None

    def stored_chunks(self) -> Iterator[tuple[int, ...]]:
        """Inner-grid coordinates of the inner chunks present in the stored shards (inside the
        grid), as the store holds them now (past a cache).
        """
        return self.live_view.stored_inner_chunks()

    def count_stored(self) -> int:
        """How many inner chunks are present in the stored shards (their indexes read)."""
        return sum(1 for _ in self.stored_chunks())

    def stored_chunk_keys(self, shard_coords: Sequence[int]) -> list[str]:
        """The keys of the inner chunks of the shard at shard-grid coordinates *shard_coords*
        that lie inside the array.
        """
        per, grid = self.chunks_per_shard, self.chunk_grid_shape
        keys = []
        for within in itertools.product(*[range(n) for n in per]):
            g = tuple(s * n + w for s, n, w in zip(shard_coords, per, within))
            if all(x < n for x, n in zip(g, grid)):
                keys.append(self.view.inner_key(g))
        return keys
