"""ChunkEngine: the engine of one array handle for one version of its metadata; EngineHandle:
the handle's options and the engine it works with now.

A read goes plan -> fetch -> decode/merge (:mod:`chunkstore.engine.read`), a write plan ->
build or read-modify-write -> encode -> store (:mod:`chunkstore.engine.write`); both work on
the state :class:`~chunkstore.engine.chunk_io.EngineState` declares, set once when the
engine is made. An :class:`~chunkstore.engine.array.Array` holds one EngineHandle
(``Array._handle``); each operation takes the handle's engine once, at its start
(:meth:`EngineHandle.current`), and works with it to the end. A handle whose metadata changes
(it reads it again, ``cache_metadata=False``; it resizes the array) puts a new engine in
place in one assignment, and operations already running keep theirs: none plans with one
chunk grid and decodes with another. A view is an Array whose handle has metadata overrides.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, MutableMapping
from typing import Any

from chunkstore.engine.chunk_io import EngineOptions, _overridden, metadata_generation
from chunkstore.engine.write import WritePath
from chunkstore.errors import (ArrayNotFoundError, ChunkstoreError, MetadataError,
                               ReadOnlyError, store_name)
from chunkstore.format import read_array_metadata
from chunkstore.format.layout import same_metadata
from chunkstore.storage.base import delitems, setitems
from chunkstore.storage import protocol
from chunkstore.sync.locking import GUARD

__all__ = ["ChunkEngine", "EngineHandle"]


class ChunkEngine(WritePath):
    """The engine of one array handle for one version of its metadata: :meth:`read` and
    :meth:`write` of selections (normalized by :mod:`chunkstore.engine.indexing` against
    this engine's shape and chunks), the locks (:meth:`locked`, :meth:`exclusive`) and what
    resize and append need (:meth:`trim_plan`, :meth:`trim_chunks`). Its state is
    :class:`~chunkstore.engine.chunk_io.EngineState`'s (same constructor), never changed."""


#: how many times an operation that found its array's document missing looks again, each
#: time after a change of the array by this process (back-to-back re-creations)
_READS_AFTER_CHANGES = 16


class EngineHandle:
    """One array handle: what it was opened with (``options``) and the engine of the
    metadata it holds now (``engine``, replaced whole, never changed: see the module
    docstring). Reloading or writing the metadata goes through here."""

    __slots__ = ("options", "_now", "_source", "_gone_at")

    def __init__(self, store: MutableMapping, path: str = "", **options: Any) -> None:
        self.options = EngineOptions(store, path, **options)
        # where the metadata is read: the store, until a handle sharing this one's locks
        # changes it, from then on the live store behind a consolidated-metadata view
        # (whose snapshot of the document is then stale; see reload)
        self._source: MutableMapping = store
        # (the count of metadata changes when the array was last found gone: see described)
        self._gone_at: int | None = None
        # (the metadata last read, before a view's overrides, or None; the engine in place):
        # one tuple, replaced in one assignment, so that no thread sees one's metadata with
        # another's engine
        self._now: tuple[Any, ChunkEngine | None] = (None, None)
        self.reload()

    @property
    def source(self) -> MutableMapping:
        """Where the metadata (and attributes) are read: the store, or the live store behind
        a consolidated snapshot once the snapshot was found stale (see reload)."""
        return self._source

    @property
    def engine(self) -> ChunkEngine:
        """The engine of the metadata this handle holds now (nothing read)."""
        # (mypy: None only until __init__'s reload returns)
        return self._now[1]  # type: ignore[return-value]

    def current(self) -> ChunkEngine:
        """The engine an operation works with from its start to its end: that of the
        metadata read again now unless it is cached (``cache_metadata``) and no handle
        sharing this one's in-process locks has changed the metadata since it was read (a
        count compared, no I/O: a read by cached metadata of an array re-created with
        another dtype or chunks through such a handle returned its chunks decoded as the
        old ones, garbage values without an error)."""
        if self.options.cache_metadata:
            return self.followed()
        return self._read_again()

    def followed(self) -> ChunkEngine:
        """The engine of the metadata held, read again first where a handle sharing this
        one's in-process locks changed the metadata since it was read (a count compared, no
        I/O otherwise): what a handle's properties answer (``dtype``, ``ndim``, ``chunks``
        described the array a handle opened before a re-creation through another handle, while
        its reads worked with the new one)."""
        engine = self.engine
        if engine.generation == metadata_generation(self.options):
            return engine
        return self._read_again()

    def _read_again(self) -> ChunkEngine:
        """reload() at the start of an operation (no lock of the array held); where the
        document is missing, once more after any change of the array in flight through a
        handle sharing these in-process locks: a re-creation (``overwrite=True``) holds the
        array's whole lock space, its guard first, from its delete to its new document, and
        a write or read that looked in between raised ArrayNotFoundError, though an array
        was there before and after (most writes of a handle beside a loop re-creating it)."""
        counts, path = self.options.counts, self.options.path
        for _ in range(_READS_AFTER_CHANGES):
            before = metadata_generation(self.options)
            try:
                return self.reload()
            except ArrayNotFoundError:
                if not hasattr(counts, "guard_busy"):
                    raise  # (a zarr-style synchronizer's: no lock space)
                if counts.guard_busy(path):  # (a change in flight: waited for)
                    with counts.hold(path, GUARD):
                        pass
                elif metadata_generation(self.options) == before:
                    raise  # (nothing changed since: gone; one read, as a property's look)
                # (else a change ended meanwhile: looked again; another may have begun)
        return self.reload()

    def changed_since(self, generation: int) -> bool:
        """Whether this process changed the array's metadata since ``generation`` was read
        (metadata_generation), or is changing it now through another thread (the array's
        whole lock space held: a resize deleting the chunks past its new end, an append...),
        that one waited for first (it counts the change before it lets go). A read that saw
        part of a change (the old shape, chunks the shrink had deleted read as the fill
        value) runs again by the metadata after it."""
        counter = self.options.counts.counter
        if counter.changing_elsewhere(self.options.path):
            with counter.hold(self.options.path, GUARD):
                pass
        return metadata_generation(self.options) != generation

    def changes_held(self) -> contextlib.AbstractContextManager[Any]:
        """This process's changes of the array's metadata held off for a with block (its
        in-process metadata guard; writes go on): a read that ran while changes kept coming
        runs a last time so, by one version of the metadata throughout."""
        counter = self.options.counts.counter
        return counter.hold(self.options.path, GUARD)

    def described(self) -> ChunkEngine:
        """What the handle's properties answer by: ``followed()``, or where the array is
        gone, the engine held (its properties still describe it, as zarr-python's do,
        while its operations raise); a gone array is looked for again only once the count
        of this process's changes moves (each property of a deleted array read the store:
        one request a property on S3)."""
        generation = metadata_generation(self.options)
        if self._gone_at == generation:
            return self.engine
        try:
            return self.followed()
        except ArrayNotFoundError:
            self._gone_at = generation
            return self.engine

    def stored_engine(self) -> ChunkEngine:
        """An engine of the array's metadata as stored now (the live store, behind a
        snapshot or a cache), not put in place: a read run again by it leaves what the
        handle knows (its shape, for one) as it was, as a read leaves it otherwise."""
        o = self.options
        meta, _ = read_array_metadata(protocol.live_store(o.store), o.path, o.format_hint)
        used = meta if o.overrides is None else _overridden(meta, o.overrides, o.name)
        return ChunkEngine(o, used, metadata_generation(o), stored=meta)

    def check_there(self) -> None:
        """ArrayNotFoundError where the array's metadata document is gone from the store now
        (moved or deleted since it was read); the handle's metadata is left as it is. (Its
        key looked for, not read: a read and compare of the document cost a synchronized
        sparse read of a local array 11 us more, this 1-2.)"""
        store = protocol.live_store(self._source)
        if self.engine.layout.metadata_key not in store:
            raise ArrayNotFoundError(f"no array at path {self.options.path!r} in "
                                     f"{store_name(store)}")

    def there_after_change(self) -> bool:
        """Whether the array's document, found missing, is there once a change of the
        array in flight in this process (a re-creation between its delete and its new
        document) has ended, or where one ended since the engine held was made: the
        operation that found it missing may run again by the new metadata."""
        counts, path = self.options.counts, self.options.path
        seen = self.engine.generation
        for _ in range(_READS_AFTER_CHANGES):
            if hasattr(counts, "guard_busy") and counts.guard_busy(path):
                with counts.hold(path, GUARD):
                    pass
            elif metadata_generation(self.options) == seen:
                return False
            seen = metadata_generation(self.options)
            try:
                self.check_there()
            except ArrayNotFoundError:
                continue  # (another change may have begun: looked at again)
            return True
        return False

    def reload(self, stale: bool = False, fresh: bool = False) -> ChunkEngine:
        """Read the array's metadata from the store; a new engine for it (a view's overrides
        applied), or the engine in place where the document is the one it was made from.
        stale: the engine in place was found stale (a write's check_metadata), so the
        metadata is read from the live store behind a consolidated-metadata view. fresh:
        read under the array's exclusive lock, to change the metadata (resize, append, fill
        value): the document as stored now, behind a cache too (another process's change is
        counted nowhere: made from the cache's copy, an append wrote over the rows another
        process had appended, a fill value change undid them), and where it is not the
        document held, the cache's values of the node are dropped."""
        o = self.options
        known, engine = self._now
        # (counted before the read: a change made after it makes this engine stale)
        generation = metadata_generation(o)
        if stale or (engine is not None and engine.generation != generation) or (
                engine is None and protocol.snapshot_stale(o.store, o.path)):
            # (the last: opened through a consolidated snapshot older than a change of this
            # process to the array, which handles opened before it followed)
            # changed through a handle sharing the locks: a snapshot (consolidated metadata)
            # would hand the old document back, and writes by it lose data; and a cache's
            # chunks of the node are the old node's (read by the new metadata: wrong values)
            self._source = protocol.live_store(o.store)
            if stale:  # (another process's change, counted nowhere: follow_cached misses it)
                protocol.forget_cached(o.store, o.path)
        # a cache's values of the node from another count of this process's changes dropped
        protocol.follow_cached(o.store, o.path, o.counts.counter, generation)
        source = protocol.live_store(o.store) if fresh else self._source
        meta, key = read_array_metadata(source, o.path, o.format_hint, known=known)
        if source is not self._source and meta is not known and (
                engine is None or not same_metadata(meta, engine.stored_meta)):
            # (another process changed it: the cache's copies of the node are stale; the
            # handle's own changes went through the cache, which holds them)
            protocol.forget_cached(o.store, o.path)
        if meta is known and engine is not None and engine.generation == generation:
            return engine
        # a reload reads the document this handle opened first (where both formats' lie at
        # the path, a handle never switches between them)
        o.format_hint = meta.zarr_format
        used = meta if o.overrides is None else _overridden(meta, o.overrides, o.name)
        try:
            engine = ChunkEngine(o, used, generation, stored=meta)
        except ChunkstoreError:
            raise
        except (TypeError, ValueError, OverflowError, AttributeError, LookupError) as e:
            if o.overrides is not None and used is not meta:
                # (the view's own metadata at fault, not the stored document)
                raise ValueError(f"invalid view of array {o.name!r}: {e}") from e
            # a codec that parses but cannot be built (say Blosc with blocksize null)
            raise MetadataError(f"invalid array metadata at {key!r}: {e}") from e
        self._now = (meta, engine)
        return engine

    def check_metadata_writable(self) -> None:
        """What write_metadata refuses before it stores anything, refused now: a view
        (PermissionError: it would write the view's metadata over its base's), a handle of a
        consolidated snapshot, through a cache in front of one too (ReadOnlyError). A shape
        or fill value change asks first, before its trim marker or an append's data is
        written (they were written, then the document refused)."""
        o = self.options
        if o.overrides is not None:
            raise PermissionError(f"operation not permitted for views (array {o.name!r}): "
                                  f"it would change the stored metadata")
        for layer in protocol.view_layers(self.engine.layout.store):
            if protocol.is_snapshot(layer):
                raise ReadOnlyError(f"array {o.name!r}: its metadata is served from the "
                                    f"consolidated metadata of {store_name(layer)} and cannot "
                                    f"be changed there; change it in the underlying store and "
                                    f"consolidate again")

    def write_metadata(self, meta: Any) -> ChunkEngine:
        """Store new metadata; the engine for it, now in place (see
        check_metadata_writable for what is refused)."""
        o = self.options
        self.check_metadata_writable()
        try:
            self.engine.layout.write_metadata(meta)
        except BaseException:
            # (the document may be stored though its write raised: a lost answer. The
            # engine in place may then be of metadata no longer stored, which the count at
            # the lock's end would keep for current: a roll-back's lost write of the old
            # shape left the handle on the grown one. Dated before every count, it is read
            # again by the next operation.)
            known, engine = self._now
            if engine is not None:
                self._now = (None, ChunkEngine(o, engine.meta, -1, stored=engine.stored_meta))
            raise
        # Under the array's exclusive lock (resize, append, fill value), whose end counts
        # this change: the engine is of the count after it. (Made elsewhere, its count would
        # be ahead: its next write would read the metadata again, one read.) A zarr-style
        # synchronizer's lock counts nothing: the change is counted here (else this handle
        # read the metadata again after each of its own changes, and dropped what a cache
        # held of the array; and this process's other handles missed the change).
        generation = metadata_generation(o)
        if o.counts is not o.locks:
            o.counts.count_change(o.path)
        protocol.changed_cached(o.store, o.path, o.counts.counter, generation, generation + 1)
        engine = ChunkEngine(o, meta, generation + 1)
        # (no document known: the next reload parses the one just written)
        self._now = (None, engine)
        return engine

    def roll_back_append(self, old_meta: Any, new_shape: tuple[int, ...], touched: list[str],
                         saved: dict[str, bytes], error: BaseException,
                         shape_sent: bool = True) -> None:
        """Undo a failed append to ``new_shape``: delete the stored objects (chunks, or
        shards) it created (first, as that frees space on a full disk; store keys in
        ``touched``, those not in ``saved``), restore the old shape where the new one was
        sent (``shape_sent``: the new document may be stored though its write raised, a
        remote store's answer lost after the store took it), then put back the boundary objects' old bytes (``saved``); each step
        whatever became of the one before. A step that fails is noted on ``error``, and the
        trim marker the append stored before its data (chunkstore.engine.trim) is left for
        the next resize or append, which trims what the failed steps left past the old end
        before it grows the array; all done, the marker is removed."""
        from chunkstore.engine import trim
        grown = self.engine
        store = grown.layout.store
        name, shape = self.options.name, old_meta.shape
        failed = False

        def step(what: str, fn: Callable[[], Any]) -> None:
            nonlocal failed
            try:
                fn()
            except Exception as e2:
                failed = True
                error.add_note(f"rolling back the append of array {name!r} to shape {shape}: "
                               f"{what} also failed: {e2!r}")

        # (the append stored its trim marker before anything else: what a step that fails
        # leaves past the old end, created chunks or appended values in boundary chunks, is
        # trimmed by the next resize or append before it grows the array)
        step("deleting the chunks it created",
             lambda: delitems(store, [k for k in touched if k not in saved]))
        if shape_sent:
            step("restoring the old shape", lambda: self.write_metadata(old_meta))
        if saved:
            step("putting back the old bytes of its boundary chunks (past the old end they "
                 "may hold appended values, which a later resize that grows the array "
                 "deletes first: the trim is recorded)", lambda: setitems(store, saved))
        if not failed:
            with contextlib.suppress(Exception):  # (left: the next change completes it)
                trim.end(grown)
