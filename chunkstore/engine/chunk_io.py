"""The chunk plumbing an Array's read path and write path share: chunk keys (through the
array's layout), scheduling chunks in batches on the thread pool, the locks a write holds,
decoding one chunk, a chunk of fill value.

Mixed into :class:`chunkstore.engine.array.Array` (through ArrayReader and ArrayWriter); it works on
the attributes the Array sets when it adopts metadata (``_layout``, ``_codec``, ``_chunks``,
``_chunk_store``, ``_fill_item``, ...).
"""

from __future__ import annotations

import contextlib

import numpy as np

from chunkstore import config
from chunkstore.engine import scheduling
from chunkstore.errors import ChunkNotFoundError, ReadOnlyError
from chunkstore.sync.locking import selection_box

# A synchronized write covering at least this many chunks whole, and some in part, locks
# those only around their read-modify-write (see ChunkIO._split_locks).
_SPLIT_MIN_CHUNKS = 16


class MetadataChanged(Exception):
    """Raised under a write's locks when the array's metadata in the store is no longer
    the handle's (another handle resized the array): the write is planned again."""


class ChunkIO:
    """Chunk keys, batches, locks and the chunk codec of an Array (a mixin)."""

    def _chunk_key(self, coords):
        return self._layout.chunk_key(coords)

    def _chunk_keys(self, coords):
        """Keys of the chunks at each row of an (n, ndim) grid coordinate array."""
        return self._layout.chunk_keys(coords)

    def _touched_keys(self, sel):
        return self._chunk_keys(sel.plan.chunk_coords())

    def _stored_chunks(self):
        """Grid coordinates of the chunks present in the store (within the current grid)."""
        self._refresh()  # the current grid: another handle may have resized the array
        return self._layout.stored_chunks()

    def _schedule(self, plan, keys=None, inline_bytes=scheduling.INLINE_BYTES):
        """(keys, order, groups): the touched chunks' keys, the order to process them in, and
        where shard groups start in that order (None when unsharded).

        Inner chunks of one shard are processed together, so that a write covering a whole
        shard stores it in one go and a read fetches its byte ranges in one batch."""
        coords = plan.chunk_coords()
        if keys is None:
            keys = self._chunk_keys(coords)
        per = self._layout.chunks_per_shard
        if (per is None or len(keys) < 2
                or scheduling.one_batch(len(keys), self._codec.nbytes, inline_bytes)):
            return keys, range(len(keys)), None  # (in one batch the order does not matter)
        per = np.array(per, dtype=np.int64)
        sid = coords // per
        order = np.lexsort(sid.T[::-1]) if sid.shape[1] else np.arange(len(keys))
        sorted_sid = sid[order]
        starts = np.flatnonzero(np.any(np.diff(sorted_sid, axis=0) != 0, axis=1)) + 1
        return keys, order.tolist(), [0] + starts.tolist()

    def _read_groups(self, groups):
        """The groups a read must keep whole. Reading a shard in one batch saves requests,
        but when a read touches fewer shards than there are threads (one shard: a tile, a
        chunk-by-chunk reader) that leaves threads idle; on a local store, where a request
        is cheap, the inner chunks are then split between the threads instead (the shard's
        index is cached, and its chunks stay in order, so each batch still reads one run)."""
        if (groups is None or len(groups) >= config.get("threads")
                or getattr(self._store, "concurrent_io", False)):
            return groups
        return None

    def _run(self, n, work, groups=None, inline_bytes=scheduling.INLINE_BYTES):
        """Run work(lo, hi) over [0, n) in batches (see chunkstore.engine.scheduling). With groups
        (sorted start positions), batch ends are moved to group boundaries. inline_bytes:
        the same as given to _schedule."""
        scheduling.run(n, work, self._codec.nbytes, groups, serial=self._is_object,
                       inline_bytes=inline_bytes)

    def _run_io(self, n, work, groups, src, sink=None, flush=True,
                inline_bytes=scheduling.INLINE_BYTES):
        """_run, then the requests a prefetching src or write-behind sink still holds are
        dropped (after an error) or waited for (writes; flush=False leaves them in flight
        for the caller to wait for)."""
        try:
            self._run(n, work, groups, inline_bytes)
        except BaseException:
            if sink is not None:  # no write may land after the call returned
                with contextlib.suppress(Exception):
                    sink.flush()
            raise
        finally:
            if src is not self._chunk_store:
                src.close()
        if flush and sink is not None:
            sink.flush()

    def _locked(self, sel, keys=None):
        """What a write of the selection sel must hold for all of it (see chunkstore.sync.synchronizers
        and chunkstore.sync.locking): the chunks it touches; or, for a zarr-style synchronizer,
        the locks of all their keys in sorted order."""
        sync = self._synchronizer
        if sync is None:
            return contextlib.nullcontext()
        if hasattr(sync, "hold"):
            return sync.hold(self._path, sync.chunk_ranges(sel.plan.chunk_coords(),
                                                           self._grid()))
        return _generic_locks(sync, self._touched_keys(sel) if keys is None else keys)

    def _split_locks(self, sel):
        """For a write covering many chunks whole and some in part, with a region-locking
        synchronizer: (what to hold for all of it, a function giving the locks for the
        read-modify-write of the partial chunks at given coordinates); else None.
        Neighbouring slabs sharing a row of chunks then only take turns on that row."""
        sync = self._synchronizer
        if (not hasattr(sync, "hold") or sel.kind != "ortho"
                or self._layout.chunks_per_shard is not None
                or self._is_object or sel.plan.nchunks < _SPLIT_MIN_CHUNKS):
            return None
        full = sel.plan.full_mask()
        nfull = int(full.sum())
        if nfull < _SPLIT_MIN_CHUNKS or nfull == len(full):
            return None
        coords = sel.plan.chunk_coords()
        return sync.split_locks(self._path, *selection_box(sel.plan, self._chunks, coords),
                                self._meta.shape, coords[full], coords[~full], self._grid())

    def _check_metadata(self):
        """Under a synchronized write's locks, which exclude resizes and metadata changes:
        MetadataChanged if the stored metadata is not this handle's any more (its cached
        shape would place the write wrongly: an edge chunk written whole would clear
        elements another handle appended). Without a synchronizer nothing excludes a
        concurrent resize, and nothing is checked (see README, "What is safe")."""
        if self._synchronizer is not None and not self._layout.is_current():
            raise MetadataChanged(self.name)

    def _grid(self):
        return tuple(-(-s // c) for s, c in zip(self._meta.shape, self._chunks))

    def _exclusive(self):
        """The array-wide lock: resize, append and metadata changes."""
        sync = self._synchronizer
        if sync is None:
            return contextlib.nullcontext()
        layout = self._layout
        lock = (sync.exclusive(self._path) if hasattr(sync, "exclusive")
                else sync[layout.lock_key])
        if layout.metadata_lock_key is None:
            return lock
        # The attributes share the metadata document with the shape (v3): an attribute
        # update (under that document's lock) must not write back a shape read before this.
        return _both(lock, sync[layout.metadata_lock_key])

    def _check_writable(self):
        if self._read_only:
            raise ReadOnlyError(f"array {self.name!r} in {self._store!r} is read-only")

    def _missing(self, key):
        if self._missing_chunks == "error":
            raise ChunkNotFoundError(f"chunk {key!r} of array {self.name!r} is missing from "
                                     f"{self._store!r}")

    def _decode(self, data, key, out=None, writable=False):
        return self._codec.decode(data, out=out, key=key, store=self._store, writable=writable)

    def _new_chunk(self):
        """A chunk buffer filled with the fill value (in the chunk's order)."""
        chunk = np.empty(self._chunks, dtype=self.dtype, order=self.order)
        if self._is_object:
            chunk.fill(self.fill_value)
        else:
            chunk[...] = self._fill_item.reshape(())
        return chunk


@contextlib.contextmanager
def _both(first, second):
    with first, second:
        yield


@contextlib.contextmanager
def _generic_locks(sync, keys):
    # Any zarr-style synchronizer: sync[key] is a lock.
    with contextlib.ExitStack() as stack:
        for k in sorted(set(keys)):
            stack.enter_context(sync[k])
        yield
