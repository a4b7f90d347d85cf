"""The state of one array handle's engine, declared in one place, and the chunk plumbing its
read path (:mod:`chunkstore.engine.read`) and write path (:mod:`chunkstore.engine.write`)
share: adopting metadata (the layout, codec, chunk grid and fill value it implies), chunk
keys, scheduling chunks in batches on the thread pool, the locks a write holds, decoding one
chunk, a chunk of fill value.

:class:`chunkstore.engine.core.ChunkEngine` is this state with both paths; an
:class:`~chunkstore.engine.array.Array` holds one and asks it for every chunk it reads or
writes.
"""

from __future__ import annotations

from ..storage import protocol
import contextlib
import dataclasses
import functools
import math

import numpy as np

from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from chunkstore import config
from chunkstore.engine import scheduling
from chunkstore.errors import ChunkNotFoundError, ReadOnlyError
from chunkstore.format import ArrayLayout, layout_for
from chunkstore.storage.pipelining import Prefetch
from chunkstore.sync.locking import GUARD, selection_box
from chunkstore.sync.synchronizers import handle_locks, layered_locks, register_synchronizer
from chunkstore.errors import store_name

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from chunkstore._core.projection import OrthoPlan, PointsPlan
    from chunkstore.engine.indexing import Selection
    from chunkstore.storage.pipelining import WriteBehind

    # what a split write holds around the read-modify-write of its partial chunks at some
    # grid coordinates (see EngineState._split_locks)
    PartialLocks = Callable[[np.ndarray], AbstractContextManager[Any]]

# A synchronized write covering at least this many chunks whole, and some in part, locks
# those only around their read-modify-write (see EngineState._split_locks).
_SPLIT_MIN_CHUNKS = 16


class MetadataChanged(Exception):
    """Raised under a write's locks when the array's metadata in the store is no longer
    the handle's (another handle resized the array): the write is planned again."""


class EngineOptions:
    """What an array handle was opened with: shared by the handle and each engine it makes
    (one per version of the metadata, see chunkstore.engine.core.EngineHandle).

    Parameters
    ----------
    store, path : where the array is.
    read_only : refuse writes (``ReadOnlyError``); the one option that may change later
        (``Array.read_only = ...``), for the handle and its engine at once.
    synchronizer : None, or a Thread/ProcessSynchronizer (or any zarr-style one).
    locks : what writes hold around the chunks they touch: in-process locks shared by this
        process's handles on the array (given by a view, so it shares its array's; else
        :func:`chunkstore.sync.synchronizers.handle_locks`), so that threads and tasks
        writing through them never lose each other's elements in one chunk; with a
        synchronizer, those and then the synchronizer's (``layered_locks``: handles opened
        with different synchronizers, or one with and one without, exclude each other in
        this process). Only a synchronizer also checks the metadata under the locks (it
        excludes other processes' resizes).
    write_empty_chunks : store chunks that are all fill value (else delete them).
    missing_chunks : ``"fill"`` (a missing chunk reads as the fill value) or ``"error"``.
    cache_metadata : keep the metadata read at open (else read it before every operation).
    zarr_format : the format to look for first (one request on a remote store when right);
        the format found once the metadata is read (a handle never switches formats).
    order : the handle's memory order where the metadata records none (fewer than 2 dims).
    overrides : a view's metadata changes, applied in memory only (see engine.views).
    """

    __slots__ = ("store", "path", "name", "read_only", "synchronizer", "locks", "counts",
                 "write_empty_chunks", "missing_chunks", "cache_metadata", "format_hint",
                 "handle_order", "overrides")

    store: MutableMapping
    path: str
    name: str
    read_only: bool
    synchronizer: Any
    locks: Any
    counts: Any
    write_empty_chunks: bool
    missing_chunks: str
    cache_metadata: bool
    format_hint: int | None
    handle_order: Literal["C", "F"] | None
    overrides: dict | None

    def __init__(self, store: MutableMapping, path: str = "", *, read_only: bool = False,
                 synchronizer: Any = None, write_empty_chunks: bool = False,
                 missing_chunks: str = "fill", cache_metadata: bool = True,
                 zarr_format: int | None = None, order: str | None = None,
                 overrides: dict | None = None, locks: Any = None) -> None:
        self.store = store
        self.path = (path or "").strip("/")
        self.name = "/" + self.path if self.path else "/"
        self.read_only = bool(read_only)
        self.synchronizer = synchronizer
        self.locks = (locks if locks is not None else handle_locks(store, self.path)
                      if synchronizer is None else layered_locks(store, self.path, synchronizer))
        # What counts this process's metadata changes of the node (metadata_generation):
        # the locks, or where they have no count (a zarr-style synchronizer's), the
        # in-process locks every other handle's change counts in (a handle opened with one
        # missed a re-creation through another handle: new chunks decoded by the old dtype).
        self.counts = self.locks if hasattr(self.locks, "generation") else \
            handle_locks(store, self.path)
        if synchronizer is not None:
            register_synchronizer(store, self.path, synchronizer)
        self.write_empty_chunks = bool(write_empty_chunks)
        self.missing_chunks = missing_chunks
        self.cache_metadata = cache_metadata
        self.format_hint = zarr_format
        # (mypy: a str; Array, the only caller, allows only "C", "F" or None)
        self.handle_order = order  # type: ignore[assignment]
        self.overrides = overrides


def metadata_generation(options: EngineOptions) -> int:
    """How many metadata changes (resize, append, fill value, re-creation, delete) the
    handles sharing options' in-process locks have made so far (with a Thread/
    ProcessSynchronizer too: its locks are taken under those, see layered_locks; a handle
    with a zarr-style synchronizer reads the in-process count, and its own changes are
    counted there by EngineHandle.write_metadata). Read before the metadata, it dates
    what was read: an engine made from it is stale once the count moves on
    (EngineHandle.current, check_metadata; a synchronizer's writes also read the stored
    metadata again under their locks, which sees other processes' changes)."""
    return options.counts.generation(options.path)


class EngineState:
    """The state of one engine: the handle's options, and what one version of the array's
    metadata implies (its layout, codec, chunk grid, order and fill value), all set when the
    engine is made and never changed. New metadata (another handle resized the array, this
    one wrote it) makes a new engine (chunkstore.engine.core.EngineHandle), so an operation
    that took an engine at its start plans, reads, decodes and writes with one version of
    the metadata throughout, whatever other threads reload meanwhile.

    Raises what :func:`chunkstore.format.layout_for` and the codec raise for metadata that
    parses but cannot be used (the handle words them as MetadataError)."""

    # what the handle was opened with (options.read_only may change: see read_only)
    options: EngineOptions
    store: MutableMapping
    path: str
    name: str
    synchronizer: Any
    locks: Any
    write_empty_chunks: bool
    missing_chunks: str
    cache_metadata: bool
    overrides: dict | None
    # without a synchronizer: the generation of the in-process locks' metadata changes
    # when the metadata was read (metadata_generation, check_metadata)
    generation: int | None
    # what the metadata implies
    meta: Any
    stored_meta: Any
    layout: ArrayLayout
    zarr_format: int
    chunk_store: MutableMapping
    codec: Any
    chunks: tuple[int, ...]
    order: Literal["C", "F"]
    is_object: bool
    fill_item: np.ndarray | None
    object_fill: Any
    object_missing: Any  # what missing chunks of an object array read as
    object_missing_copied = False  # (whether each element read is a copy of it)
    # a view's: the array's own fill value where the view's differs (see _new_chunk)
    pad_fill: np.ndarray | None = None
    # (with pad_fill) the shape past which a new chunk is padded with it
    _pad_from: tuple[int, ...] = ()
    # a view's: why it cannot write (its chunks' bytes are not the stored chunks')
    view_unwritable: str | None = None
    _files_for: tuple | None = None  # (the read's Files maker,): worked out once, read.py
    missing_seen: int = 0  # chunks reads found missing (see _missing)
    # False for a handle on a snapshot of the metadata (consolidated) until its first write
    # has checked the stored document (check_metadata)
    snapshot_checked: bool

    def __init__(self, options: EngineOptions, meta: Any, generation: int | None = None,
                 stored: Any = None) -> None:
        self.options = options
        self.store = options.store
        self.path = options.path
        self.name = options.name
        self.synchronizer = options.synchronizer
        self.locks = options.locks
        self.write_empty_chunks = options.write_empty_chunks
        self.missing_chunks = options.missing_chunks
        self.cache_metadata = options.cache_metadata
        self.overrides = options.overrides
        # (what check_metadata compares with the in-process locks' count)
        self.generation = generation
        # The layout: chunk grid, codec, chunk keys, and the mapping chunks are read from
        # and written to (a sharded array works on its inner chunks, through a view that
        # maps them into their shards).
        # (a view's: the array's own shape beside the view's, whose grid may end before)
        whole = None if stored is None or stored is meta else stored.shape
        layout = layout_for(meta, self.store, self.path, synchronizer=self.synchronizer,
                            cache_index=self.cache_metadata, array_shape=whole)
        self.meta = meta
        # the metadata as stored: a view's meta is changed in memory (options.overrides)
        self.stored_meta = meta if stored is None else stored
        self.snapshot_checked = protocol.live_store(options.store) is options.store
        self.layout = layout
        self.zarr_format = layout.zarr_format
        self.chunk_store = layout.chunk_store
        self.codec = layout.codec
        self.chunks = layout.chunks
        # Where the metadata cannot tell the order (v3, fewer than 2 dimensions: one layout
        # for both) the handle's own order stands; a v2 document's order always does.
        handle_order = options.handle_order
        self.order = (handle_order if handle_order is not None
                      and not meta.order_recorded else meta.order)
        self.is_object = meta.dtype.hasobject
        fb = meta.fill_bytes()
        self.fill_item = None if fb is None else np.frombuffer(fb, dtype=meta.dtype).copy()
        self.object_fill = _object_fill(meta) if self.is_object else None
        self.object_missing = meta.object_missing_value() if self.is_object else None
        if self.object_missing is None and self.dtype.names is not None:
            # a structured dtype with object fields (its fill value can only be None): None
            # fits no field; NumPy's empty element does (None in object fields, zeros)
            self.object_missing = np.empty((), self.dtype)
        elif self.is_object:
            # (a fill value that can be changed in place, a list: each element read is a
            # copy of it, or changing one read changed every other and the array's fill)
            self.object_missing_copied = not isinstance(
                self.object_missing, (str, bytes, int, float, complex, type(None), np.generic))
            self.object_missing = object_element(self.object_missing)
        if self.stored_meta.fill_value is None:
            # No fill value (Zarr v2's null): a chunk left out is undefined, and zarr-python
            # 2 reads uninitialised memory there (chunkstore and zarr-python 3 read zeros,
            # NaT, ""): every chunk is stored, as zarr-python 2 stores them.
            self.write_empty_chunks = True
        elif (self.stored_meta is not meta and not self.write_empty_chunks
                and (meta.dtype != self.stored_meta.dtype
                     or fb != self.stored_meta.fill_bytes()
                     # (object fill values have no bytes: fb is None for both)
                     or (self.is_object and not _same_object(meta.fill_value,
                                                             self.stored_meta.fill_value))
                     or not _same_filters(meta, self.stored_meta))):
            # A view with a fill value (or dtype, or filters) of its own stores the chunks
            # it writes that are all its fill value: deleted, they would read as the array's
            # own fill value through the array and every other handle (the values written
            # lost; through filters of the view's, its fill value is other stored values).
            self.write_empty_chunks = True
        stored_fb = self.stored_meta.fill_bytes()
        if (self.stored_meta is not meta and not self.is_object and fb != stored_fb
                and stored_fb is not None):
            self.pad_fill = _as_view_reads(stored_fb, self.stored_meta, meta)
        elif (self.stored_meta is not meta and self.is_object and self.dtype.names is None
                and not _same_object(meta.fill_value, self.stored_meta.fill_value)):
            self.pad_fill = np.empty((), dtype=object)
            self.pad_fill[()] = _object_fill(self.stored_meta)
        if self.pad_fill is not None:
            # where the padding starts: past the view's end, and past the array's (a view
            # reaching past it padded only past its own, and the array, grown, showed the
            # view's fill value where nobody wrote); elements of another size than the
            # array's do not tell where its end falls in the view's
            self._pad_from = meta.shape
            if (len(meta.shape) == len(self.stored_meta.shape)
                    and meta.dtype.itemsize == self.stored_meta.dtype.itemsize):
                self._pad_from = tuple(min(a, b) for a, b in zip(meta.shape,
                                                                 self.stored_meta.shape))
        if self.stored_meta is not meta:
            self.view_unwritable = _unwritable_view(self.stored_meta, meta, self.name)

    @property
    def read_only(self) -> bool:
        """Whether the handle refuses writes (now: it may be switched)."""
        return self.options.read_only

    def encoding_form(self) -> tuple | None:
        """How this array's stored chunk bytes map to chunk values, for copying them between
        arrays unchanged: two arrays of equal forms decode the same stored chunk to the same
        values (the compressor's family, not its level; the stored dtype with its byte order,
        the chunk's memory order and shape). None where chunks take more than one plain
        compressor over the raw bytes (filters, transposes, objects): those are re-encoded."""
        fast = getattr(self.codec, "fast", None)
        if fast is None or self.is_object:
            return None
        return (fast.family, self.codec.dtype, self.codec.order, tuple(self.codec.chunk_shape))

    @property
    def dtype(self) -> np.dtype:
        """The NumPy data type of the elements."""
        return self.meta.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, in this engine's metadata."""
        return self.meta.shape

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.meta.shape)

    @property
    def fill_value(self) -> Any:
        """The fill value as the array's elements are (object arrays: decoded)."""
        return self.object_fill if self.is_object else self.meta.fill_value

    # ------------------------------------------------------------------ chunks

    def _chunk_key(self, coords: Sequence[int]) -> str:
        return self.layout.chunk_key(coords)

    def _chunk_keys(self, coords: np.ndarray) -> list[str]:
        """Keys of the chunks at each row of an (n, ndim) grid coordinate array."""
        return self.layout.chunk_keys(coords)

    def _touched_keys(self, sel: Selection) -> list[str]:
        return self._chunk_keys(sel.plan.chunk_coords())

    def stored_chunks(self) -> Iterator[tuple[int, ...]]:
        """Grid coordinates of the chunks present in the store (within this engine's grid:
        take a current engine, EngineHandle.current, for the array's grid now)."""
        return self.layout.stored_chunks()

    def count_stored(self) -> int:
        """How many chunks are present in the store (within this engine's grid)."""
        return self.layout.count_stored()

    def _schedule(self, plan: OrthoPlan | PointsPlan, keys: list[str] | None = None,
                  inline_bytes: int = scheduling.INLINE_BYTES
                  ) -> tuple[list[str], Sequence[int], list[int] | None]:
        """(keys, order, groups): the touched chunks' keys, the order to process them in, and
        where shard groups start in that order (None when unsharded).

        Inner chunks of one shard are processed together, so that a write covering a whole
        shard stores it in one go and a read fetches its byte ranges in one batch."""
        coords = plan.chunk_coords()
        if keys is None:
            keys = self._chunk_keys(coords)
        per: tuple[int, ...] | np.ndarray | None = self.layout.chunks_per_shard
        if (per is None or len(keys) < 2
                or scheduling.one_batch(len(keys), self.codec.nbytes, inline_bytes)):
            return keys, range(len(keys)), None  # (in one batch the order does not matter)
        per = np.array(per, dtype=np.int64)
        sid = coords // per
        order = np.lexsort(sid.T[::-1]) if sid.shape[1] else np.arange(len(keys))
        sorted_sid = sid[order]
        starts = np.flatnonzero(np.any(np.diff(sorted_sid, axis=0) != 0, axis=1)) + 1
        return keys, order.tolist(), [0] + starts.tolist()

    def _read_groups(self, groups: list[int] | None) -> list[int] | None:
        """The groups a read must keep whole. Reading a shard in one batch saves requests,
        but when a read touches fewer shards than there are threads (one shard: a tile, a
        chunk-by-chunk reader) that leaves threads idle; on a local store, where a request
        is cheap, the inner chunks are then split between the threads instead (the shard's
        index is cached, and its chunks stay in order, so each batch still reads one run)."""
        if (groups is None or len(groups) >= config.get("threads")
                or protocol.concurrent_io(self.store)):
            return groups
        return None

    def _run(self, n: int, work: Callable[[int, int], object], groups: list[int] | None = None,
             inline_bytes: int = scheduling.INLINE_BYTES) -> None:
        """Run work(lo, hi) over [0, n) in batches (see chunkstore.engine.scheduling). With groups
        (sorted start positions), batch ends are moved to group boundaries. inline_bytes:
        the same as given to _schedule."""
        scheduling.run(n, work, self.codec.nbytes, groups, serial=self.is_object,
                       inline_bytes=inline_bytes)

    def _run_io(self, n: int, work: Callable[[int, int], object], groups: list[int] | None,
                src: Any, sink: WriteBehind | None = None, flush: bool = True,
                inline_bytes: int = scheduling.INLINE_BYTES) -> None:
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
            # (the prefetching view this operation made, never the engine's chunk store,
            # which other operations on this engine are reading through)
            if isinstance(src, Prefetch):
                src.close()
        if flush and sink is not None:
            sink.flush()

    def locked(self, sel: Selection, keys: list[str] | None = None
               ) -> AbstractContextManager[Any]:
        """What a write of the selection sel must hold for all of it (see chunkstore.sync.synchronizers
        and chunkstore.sync.locking): the chunks it touches (in this handle's locks, the
        synchronizer's or, without one, the in-process ones); or, for a zarr-style
        synchronizer, the locks of all their keys in sorted order."""
        sync = self.locks
        if hasattr(sync, "hold"):
            return sync.hold(self.path, sync.chunk_ranges(sel.plan.chunk_coords(),
                                                           self.cdata_shape))
        return _generic_locks(sync, self._touched_keys(sel) if keys is None else keys)

    def _split_locks(self, sel: Selection
                     ) -> tuple[AbstractContextManager[Any], PartialLocks] | None:
        """For a write covering many chunks whole and some in part, with a region-locking
        synchronizer: (what to hold for all of it, a function giving the locks for the
        read-modify-write of the partial chunks at given coordinates); else None.
        Neighbouring slabs sharing a row of chunks then only take turns on that row."""
        sync = self.locks
        if (not hasattr(sync, "hold") or sel.kind != "ortho"
                or self.layout.chunks_per_shard is not None
                or self.is_object or sel.plan.nchunks < _SPLIT_MIN_CHUNKS):
            return None
        full = self.covered(sel.plan)
        nfull = int(full.sum())
        if nfull < _SPLIT_MIN_CHUNKS or nfull == len(full):
            return None
        coords = sel.plan.chunk_coords()
        return sync.split_locks(self.path, *selection_box(sel.plan, self.chunks, coords),
                                self.meta.shape, coords[full], coords[~full], self.cdata_shape)

    def _edges(self, coords: np.ndarray) -> np.ndarray:
        """For each row of chunk grid coordinates: does the chunk reach past the array's end
        (so its part outside the array must hold the fill value)?"""
        if coords.shape[1] == 0:
            return np.zeros(len(coords), dtype=np.uint8)
        # (c + 1) * L > n, as c > (n - L) // L: the product wrapped past int64 in the last
        # chunks of a dimension near 2**63, which then started from uninitialized memory
        chunks = np.asarray(self.chunks, dtype=np.int64)
        over = coords > (np.asarray(self.shape, dtype=np.int64) - chunks) // chunks
        # (mypy: NumPy's stubs type any(axis=1) as a scalar or an array; here an array)
        return over.any(axis=1).view(np.uint8)  # type: ignore[return-value]

    def covered(self, plan: OrthoPlan) -> np.ndarray:
        """For each chunk of plan: does a write replace it whole (the selection covers every
        element of the chunk inside the array)? Not the edge chunks of a view whose shape=
        cuts the stored array: past the view's end they hold the array's elements (the view
        cannot tell how many), so those chunks are read, changed and written back."""
        full = plan.full_mask()
        if self.overrides is not None and "shape" in self.overrides:
            full = full & ~self._edges(plan.chunk_coords()).astype(bool)
        return full

    def check_metadata(self) -> None:
        """Under a write's locks, which exclude resizes and metadata changes:
        MetadataChanged if the metadata is not this engine's any more (its shape would place
        the write wrongly: an edge chunk written whole would clear elements another handle
        appended). With a synchronizer the stored metadata is read again; without one, the
        in-process locks count the metadata changes made through the handles sharing them,
        and an engine made before the last is stale (nothing read). Handles in other
        processes, or on other store objects without a location, need a synchronizer
        (README, "What is safe").

        A handle opened through consolidated metadata checks the stored document at its
        first write too (one read): the snapshot may be older than the array (re-created
        with other chunks or another dtype since it was consolidated), and a write planned
        by it would store chunks the array cannot decode."""
        if self.synchronizer is not None:
            if not self.layout.is_current(self.stored_meta):
                raise MetadataChanged(self.name)
            return
        if not self.snapshot_checked:
            if not self.layout.is_current(self.stored_meta):
                raise MetadataChanged(self.name)
            self.snapshot_checked = True
        if metadata_generation(self.options) != self.generation:
            raise MetadataChanged(self.name)

    # (the shape and what follows from it, in this engine's metadata: Array answers with
    # a current engine's, AsyncArray with the one held)
    @functools.cached_property
    def cdata_shape(self) -> tuple[int, ...]:
        """The shape of the chunk grid (chunks per dimension)."""
        return tuple(-(-s // c) for s, c in zip(self.meta.shape, self.chunks))

    @property
    def nchunks(self) -> int:
        """The number of chunks in the grid."""
        return math.prod(self.cdata_shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return math.prod(self.meta.shape)

    @property
    def nbytes(self) -> int:
        """The size of the whole array in bytes, uncompressed."""
        return self.size * self.meta.dtype.itemsize

    def exclusive(self) -> AbstractContextManager[Any]:
        """The array-wide lock: resize, append and metadata changes (without a synchronizer,
        the in-process locks' whole space, counting a metadata change when left)."""
        sync = self.locks   # (the synchronizer, or the in-process locks)
        layout = self.layout
        lock = (sync.exclusive(self.path) if hasattr(sync, "exclusive")
                else sync[layout.lock_key])
        if layout.metadata_lock_key is None:
            return lock
        # The attributes share the metadata document with the shape (v3): an attribute
        # update (under that document's lock) must not write back a shape read before this.
        return _both(lock, sync[layout.metadata_lock_key])

    def metadata_guard(self) -> AbstractContextManager[Any]:
        """What a write planned again (Array._write) holds from its read of the metadata to
        its end: the guard byte of the array's lock space (chunkstore.sync.locking.GUARD),
        which every metadata change (exclusive(): all of the space) needs and no write's
        chunk locks touch. No resize, append or metadata change of a handle sharing these
        locks comes between that read and the write's check_metadata, and other writes go on
        meanwhile. Locks without a lock space (a zarr-style synchronizer): nothing."""
        sync = self.locks
        if hasattr(sync, "hold"):
            return sync.hold(self.path, GUARD)
        return contextlib.nullcontext()

    def check_writable(self) -> None:
        """ReadOnlyError naming the array and store when the handle is read-only."""
        if self.read_only:
            raise ReadOnlyError(f"array {self.name!r} in {store_name(self.store)} is read-only")

    def check_data_writable(self) -> None:
        """check_writable, and for a view, ValueError where its chunks cannot be written
        (see _unwritable_view)."""
        self.check_writable()
        if self.view_unwritable is not None:
            raise ValueError(self.view_unwritable)

    def _missing(self, key: str) -> None:
        # (counted: a read with cache_metadata=False that found a chunk missing checks the
        # array is still there once done; concurrent reads may count for each other, which
        # costs a check, never one left out)
        self.missing_seen += 1
        if self.missing_chunks == "error":
            raise ChunkNotFoundError(f"chunk {key!r} of array {self.name!r} is missing from "
                                     f"{store_name(self.store)}")

    def _decode(self, data: bytes, key: str, out: np.ndarray | None = None,
                writable: bool = False) -> np.ndarray:
        return self.codec.decode(data, out=out, key=key, store=self.store, writable=writable)

    def _new_chunk(self, coords: Sequence[int] | None = None) -> np.ndarray:
        """A chunk buffer filled with the fill value (in the chunk's order). A view with a
        fill value of its own (pad_fill) fills the part of chunk coords past the array's end
        (or its own) with the array's fill value: that padding shows once the array grows,
        which must show the array's fill value there, not a view's that was never
        written."""
        chunk = np.empty(self.chunks, dtype=self.dtype, order=self.order)
        if self.is_object:
            chunk[...] = self.object_missing if self.dtype.names is not None else \
                object_element(self.fill_value)
        else:
            # (mypy: fill_item is None only for object arrays)
            chunk[...] = self.fill_item.reshape(())  # type: ignore[union-attr]
        if self.pad_fill is not None and coords is not None:
            for d, (c, n, size) in enumerate(zip(coords, self.chunks, self._pad_from)):
                inside = size - int(c) * n
                if inside < n:
                    chunk[(slice(None),) * d + (slice(max(inside, 0), None),)] = \
                        self.pad_fill.reshape(())
        return chunk


def object_element(value: Any) -> np.ndarray:
    """value as one element of an object array (a 0-d one holding it): assigned to a part
    of an object array, each element is value itself (a list fill value was broadcast,
    its items read as the elements: [1, "x"] read as 1, "x", 1, "x")."""
    element = np.empty((), dtype=object)
    element[()] = value
    return element


def _unwritable_view(stored: Any, meta: Any, name: str) -> str | None:
    """Why a view of metadata meta over stored metadata cannot write chunks (None: it can):
    with the array's filters and codecs, a chunk of the view's holding another number of
    bytes than a stored chunk (another item size, other chunks). Its reads fail on such
    chunks (ChunkDecodeError), but a write covering a chunk whole replaced it unread, by one
    that the array cannot decode (its elements lost). (zarr-python 2 makes such views,
    which read the chunks as other values; a view of its own filters may convert.)"""
    if not _same_filters(meta, stored):
        return _narrowing_astype(stored, meta, name)
    if meta.dtype.hasobject or stored.dtype.hasobject:
        return None
    # (a sharded array's chunks are its inner chunks)
    view_chunks = getattr(meta, "inner_chunks", None) or meta.chunks
    stored_chunks = getattr(stored, "inner_chunks", None) or stored.chunks
    view_bytes = int(np.prod(view_chunks, dtype=object)) * meta.dtype.itemsize
    stored_bytes = int(np.prod(stored_chunks, dtype=object)) * stored.dtype.itemsize
    if view_bytes == stored_bytes:
        return None
    return (f"cannot write through this view of array {name!r}: a chunk of the view "
            f"({meta.dtype}, chunks {view_chunks}) holds {view_bytes} bytes, a stored chunk "
            f"({stored.dtype}, chunks {stored_chunks}) {stored_bytes}: what it wrote would "
            f"replace stored chunks by ones the array cannot read (give view() chunks of "
            f"{stored_bytes} bytes, or filters that convert)")


def _narrowing_astype(stored: Any, meta: Any, name: str) -> str | None:
    """Why a view with AsType filters of its own cannot write (None: it can): one reads the
    stored values into a dtype that does not hold them all (f8 -> f4, i8 -> i2). A write
    rewrites each chunk it touches from those reads: writing one element through an f4
    view of an f8 array rounded every other element of its chunk (zarr-python 2 does)."""
    kept = list(getattr(stored, "filters", None) or [])
    for f in getattr(meta, "filters", None) or []:
        if getattr(f, "codec_id", None) != "astype" or f in kept:
            continue
        if not np.can_cast(f.encode_dtype, f.decode_dtype, "safe"):
            return (f"cannot write through this view of array {name!r}: it reads the stored "
                    f"{f.encode_dtype} values as {f.decode_dtype}, which does not hold them "
                    f"all, and a write would store the other elements of each chunk it "
                    f"touches as read (rounded, or wrapped); write through the array, or "
                    f"an astype view to a dtype that holds {f.encode_dtype}")
    return None


def _same_object(a: Any, b: Any) -> bool:
    """Whether two object fill values are one value (of one type: "V" is not b"V")."""
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):  # (arrays compare element-wise)
        return a is b


def _same_filters(meta: Any, stored: Any) -> bool:
    """Whether a view's metadata has the array's filters (v3: none of either)."""
    return getattr(meta, "filters", None) == getattr(stored, "filters", None)


def _as_view_reads(stored_fill: bytes, stored: Any, meta: Any) -> np.ndarray | None:
    """The array's fill value (its bytes, stored_fill) as a view of metadata meta reads an
    element holding it: through the view's own filters where it has them (an AsType
    converting values), else its bytes in the view's data type; None where that cannot be
    worked out (the view then pads with its own fill value)."""
    stored_filters = list(getattr(stored, "filters", None) or [])
    view_filters = list(getattr(meta, "filters", None) or [])
    try:
        if view_filters == stored_filters:
            if len(stored_fill) != meta.dtype.itemsize:
                return None
            return np.frombuffer(stored_fill, dtype=meta.dtype).copy()
        # the element as stored (the array's filters), read back by the view's filters
        buf: Any = np.frombuffer(stored_fill, dtype=stored.dtype).copy()
        for f in stored_filters:
            buf = f.encode(buf)
        buf = np.frombuffer(bytes(np.ascontiguousarray(buf).view(np.uint8)), np.uint8)
        for f in reversed(view_filters):
            buf = f.decode(buf)
        out = np.asarray(buf).reshape(-1)
        if out.dtype != meta.dtype:
            if out.nbytes != meta.dtype.itemsize:
                return None
            out = out.view(meta.dtype)
        return out.copy() if out.size == 1 else None
    except (TypeError, ValueError):
        return None


def astype_filters(stored: np.dtype, filters: Any, dtypes: Sequence[Any]) -> list[Any]:
    """The filters of an astype view (``Array.astype``, astype of astype for each further
    dtype): one AsType filter per step, the last step's outermost, in front of filters."""
    from numcodecs import AsType
    source, chain = np.dtype(stored), list(filters or [])
    for dtype in dtypes:
        # (dtypes, not their .str: a structured dtype's is '|V12', bfloat16's '<V2', and the
        # cast became a copy of raw bytes: (1, 0.5) read as (16777216, 2.8e-319))
        chain.insert(0, AsType(encode_dtype=source, decode_dtype=np.dtype(dtype)))
        source = np.dtype(dtype)
    return chain


def _overridden(meta: Any, overrides: dict, name: str) -> Any:
    """meta with the view's overrides applied (and validated as new metadata would be)."""
    changes = dict(overrides)
    known = {f.name for f in dataclasses.fields(meta)}
    chain = changes.pop("astype", None)
    if chain and "filters" in known:
        # astype views: AsType filters from the stored dtype, in front of the stored filters
        # (made from the metadata read now: see chunkstore.engine.views.view_state)
        changes.update(filters=astype_filters(meta.dtype, meta.filters, chain),
                       dtype=np.dtype(chain[-1]))
    elif chain:
        changes["filters"] = None  # (refused below: Zarr v3 has no filters)
    if "dtype" in changes and np.dtype(changes["dtype"]) == meta.dtype:
        # (the array's own dtype, as equal dtypes are: object is also variable-length
        # bytes' dtype, whose mark np.dtype(object) has not)
        changes["dtype"] = meta.dtype
    if "filters" in changes and "filters" not in known:
        raise TypeError(f"array {name!r} has a codec chain, not filters (Zarr v3): "
                        f"astype() and view(filters=) need a Zarr v2 array")
    if "chunks" in changes and getattr(meta, "inner_chunks", None) is not None:
        raise TypeError(f"array {name!r} is sharded: view(chunks=) cannot change its chunk "
                        f"and shard layout")
    if "dtype" in changes and "fill_value" not in changes and meta.fill_value is not None:
        # The base's fill value, taken into the view's dtype where it fits (as a value,
        # not as bytes); one that does not fit needs an explicit fill_value.
        try:
            with np.errstate(invalid="raise", over="raise"):
                changes["fill_value"] = np.array(meta.fill_value).astype(changes["dtype"])[()]
        except (TypeError, ValueError, FloatingPointError) as e:
            raise ValueError(f"the fill value {meta.fill_value!r} of array {name!r} does not "
                             f"convert to {changes['dtype']}; pass fill_value") from e
    try:
        if "chunks" in changes or "shape" in changes:
            from chunkstore.metadata.v2 import normalize_chunks
            shape = changes.get("shape", meta.shape)
            changes["chunks"] = normalize_chunks(
                changes.get("chunks", meta.chunks), shape,
                np.dtype(changes.get("dtype", meta.dtype)).itemsize)
        return dataclasses.replace(meta, **changes)
    except (TypeError, ValueError) as e:
        raise ValueError(f"invalid view of array {name!r}: {e}") from e


def _object_fill(meta: Any) -> Any:
    """The fill value of an object array as its elements are (the metadata holds it so: a
    vlen-bytes array's as bytes, decoded from the document's base64)."""
    return meta.fill_value


@contextlib.contextmanager
def _both(first: AbstractContextManager[Any], second: AbstractContextManager[Any]
          ) -> Iterator[None]:
    with first, second:
        yield


@contextlib.contextmanager
def _generic_locks(sync: Any, keys: Iterable[str]) -> Iterator[None]:
    # Any zarr-style synchronizer: sync[key] is a lock.
    with contextlib.ExitStack() as stack:
        for k in sorted(set(keys)):
            stack.enter_context(sync[k])
        yield
