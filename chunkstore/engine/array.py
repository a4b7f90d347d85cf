"""Array: a chunked N-d array in a store: its metadata (through its format layout,
chunkstore.format), properties, the public selection methods, resize and append.

The read path is chunkstore.engine.read, the write path chunkstore.engine.write, the chunk
plumbing both share (keys, batches, locks) chunkstore.engine.chunk_io. A read turns the selection into a plan (chunkstore.engine.indexing -> Cython projection), fetches
the touched chunks in batches on the shared thread pool, decodes each (straight into the
output when it lands there whole and contiguous) and merges it into the output with the
Cython kernels. A write runs the plan backwards: each touched chunk is built whole from the
value, or read-modified-written, and is deleted instead of stored when it is all fill value.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from typing import Any, cast

import numpy as np

from chunkstore.engine import indexing as ix
from chunkstore.hierarchy import nodes
from chunkstore.engine._text import human_bytes
from chunkstore.engine.chunk_io import MetadataChanged, metadata_generation
from chunkstore.engine.core import ChunkEngine, EngineHandle
from chunkstore.engine.read import FieldNames
from chunkstore.errors import (ArrayMetadataChangedError, ArrayNotFoundError,
                               ChunkDecodeError)
from chunkstore.format import ArrayLayout
from chunkstore.metadata.formats import format_alias
from chunkstore.metadata._common import MAX_INDEX
from chunkstore.storage import protocol
from chunkstore.storage.base import getitems, getsize
from chunkstore.storage.normalize import normalize_store
from chunkstore.storage.store_path import split_store_path
from chunkstore.storage.memory import MemoryStore  # (its == compares every value)
from chunkstore.sync.synchronizers import check_synchronizer_path
from chunkstore.engine import trim, views
from chunkstore.metadata import zarr3_view
from chunkstore.compat.node_api import ArrayAPIv3, CallableInt
from chunkstore.errors import store_name


# a field name, or several, of a structured dtype
Fields = str | Sequence[str] | None
# a chunkstore.engine.indexing function: (selection, shape, chunks, array name) -> Selection
Normalizer = Callable[[Any, Sequence[int], Sequence[int], str], ix.Selection]


class Array(nodes.Node, ArrayAPIv3):
    """A Zarr v2 or v3 (optionally sharded) array in a store.

    Usually made by `chunkstore.create`/`open_array` and friends, not directly.
    """

    _kind = "array"

    _store: MutableMapping
    _path: str
    _prefix: str
    _handle: EngineHandle

    def __init__(self, store: MutableMapping, path: str = "", read_only: bool = False,
                 synchronizer: Any = None, write_empty_chunks: bool = False,
                 missing_chunks: str = "fill", cache_metadata: bool = True,
                 zarr_format: int | None = None, order: str | None = None,
                 _overrides: dict | None = None, *, _locks: Any = None,
                 chunk_store: Any = None,
                 cache_attrs: bool = True, partial_decompress: bool = False,
                 zarr_version: int | None = None, meta_array: Any = None) -> None:
        wrapped = getattr(store, "sync", None)
        if isinstance(wrapped, Array):
            # zarr-python 3's Array(async_array): this handle shares that array's engine,
            # options and all (others given are refused, as zarr-python 3 refuses them: a
            # read_only=True dropped left a writable handle)
            given = (path, read_only, synchronizer, write_empty_chunks, missing_chunks,
                     cache_metadata, zarr_format, order, _overrides, _locks, chunk_store,
                     cache_attrs, partial_decompress, zarr_version, meta_array)
            init = type(self).__init__
            if given != (init.__defaults__ or ()) + tuple((init.__kwdefaults__ or {}).values()):
                raise TypeError("Array(async_array) takes no other arguments: the handle "
                                "shares the AsyncArray's options (with_config, or "
                                "open_array(..., read_only=...), give others)")
            self._store, self._path, self._prefix = wrapped._store, wrapped._path, wrapped._prefix
            self._handle = wrapped._handle
            return
        # zarr-python 2's keywords: cache_attrs and partial_decompress change nothing here
        # (attributes are read on each access; reads fetch only the bytes they need),
        # meta_array None is NumPy, zarr_version is zarr_format's old name; a separate chunk
        # store is refused, not ignored (the chunks would be looked for in the wrong place)
        check_zarr2_keywords(chunk_store, meta_array)
        zarr_format = format_alias(zarr_format, zarr_version)
        if missing_chunks not in ("fill", "error"):
            raise ValueError(f"missing_chunks must be 'fill' or 'error', got {missing_chunks!r}")
        if order not in (None, "C", "F"):
            raise ValueError(f"order must be 'C', 'F' or None, got {order!r}")
        self._store = store
        self._path = protocol.node_path(store, (path or "").strip("/"))
        self._prefix = self._path + "/" if self._path else ""
        if synchronizer is not None:
            check_synchronizer_path(synchronizer, store)
        # Every chunk read and write, the metadata and the locks: the handle's engine (one
        # per version of the metadata, see chunkstore.engine.core), whose state is declared
        # in chunkstore.engine.chunk_io.EngineState.
        self._handle = EngineHandle(store, self._path, read_only=read_only,
                                    synchronizer=synchronizer,
                                    write_empty_chunks=write_empty_chunks,
                                    missing_chunks=missing_chunks, cache_metadata=cache_metadata,
                                    zarr_format=zarr_format, order=order, overrides=_overrides,
                                    locks=_locks)
        # an explicit zarr_format binds (as open_array's and zarr-python 3's Array.open): the
        # array of the other format, alone at the path, is not opened in its place
        nodes.check_format(store, self._path, "array", self._handle.options.format_hint,
                           zarr_format, want="array")

    @property
    def chunk_store(self) -> MutableMapping:
        """zarr-python 2's ``chunk_store``: the store holding the chunks (the array's store:
        chunkstore keeps chunks and metadata in one)."""
        return self._store

    @classmethod
    def open(cls, store: Any, *, path: str | None = None, mode: str = "r+",
             storage_options: dict | None = None, zarr_format: int | None = None,
             **kwargs: Any) -> "Array":
        """zarr-python 3's ``Array.open``: the existing array in store (a store, a path or
        URL, a StorePath) at path: ArrayNotFoundError if there is none. mode "r" opens it
        read-only; the other keywords are the constructor's (synchronizer=, ...)."""
        if mode not in ("r", "r+"):
            raise ValueError(f"Array.open opens an existing array: mode 'r' or 'r+', got "
                             f"{mode!r} (create_array or open_array(mode=...) create one)")
        store, path = split_store_path(store, path)
        store = normalize_store(store, mode=mode, storage_options=storage_options)
        return cls(cast(MutableMapping, store), path=path or "", read_only=mode == "r",
                   zarr_format=zarr_format, **kwargs)

    # ------------------------------------------------------------------ engine state
    @property
    def _engine(self) -> ChunkEngine:
        # the engine of the metadata held now, read again only where another handle of this
        # process changed it (EngineHandle.described): for what the handle's properties
        # answer; an operation takes self._handle.current() once instead
        return self._handle.described()

    # (what hierarchy.nodes.Node reads of every node)
    @property
    def _attributes_store(self) -> MutableMapping:
        # the attributes where the metadata is read: through a consolidated snapshot, the
        # live store once this process changed the array (its new metadata with the old
        # attributes: a re-created variable's values scaled by the old scale_factor); through
        # caches only, the cache still (whose values of the node the reload dropped, and
        # which a write updates: attributes written behind it were refused as read-only)
        self._handle.described()
        source = self._handle.source
        if source is not self._store and not any(
                protocol.is_snapshot(layer) for layer in protocol.view_layers(self._store)):
            return self._store
        return source

    @property
    def _read_only(self) -> bool:
        return self._handle.options.read_only

    @property
    def _synchronizer(self) -> Any:
        return self._handle.options.synchronizer

    @property
    def _attrs_locks(self) -> Any:
        # (Zarr v3 keeps the attributes in zarr.json with the shape: an update must not
        # write back a shape read before a resize or append of this process)
        return self._handle.options.locks

    @property
    def _format(self) -> int:
        return self._engine.zarr_format

    @property
    def _meta(self) -> Any:
        return self._engine.meta

    @property
    def layout(self) -> ArrayLayout:
        """The array's :class:`chunkstore.format.layout.ArrayLayout` (read-only): how it lies
        in its store (Zarr format, chunk and shard shape, codec, chunk keys, stored chunks).
        Rebuilt whenever the metadata changes: do not keep it across a resize."""
        return self._engine.layout

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape (read again from the store first when ``cache_metadata`` is False)."""
        return self._handle.current().shape

    @shape.setter
    def shape(self, value: Sequence[int]) -> None:
        self.resize(value)

    @property
    def chunks(self) -> tuple[int, ...]:
        """The chunk shape reads and writes work in (the inner chunks of a sharded array)."""
        return self._engine.chunks

    @property
    def shards(self) -> tuple[int, ...] | None:
        """The shard shape of a sharded (Zarr v3) array, else None."""
        return self._engine.layout.shards

    @property
    def write_chunks(self) -> tuple[int, ...]:
        """The blocks a write stores whole: the shards of a sharded array, else the chunks."""
        return self._engine.layout.write_chunks

    @property
    def dtype(self) -> np.dtype:
        """The NumPy data type of the elements."""
        return self._engine.dtype

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return self._engine.ndim

    @property
    def size(self) -> int:
        """The number of elements."""
        return self._handle.current().size

    @property
    def itemsize(self) -> int:
        """The size of one element in bytes."""
        return self.dtype.itemsize

    @property
    def order(self) -> str:
        """The memory order of the array: of its chunks as the metadata records it (Zarr v2's
        ``order``; Zarr v3's transposes, ``"F"`` when they reverse the axes). A Zarr v3 array
        of fewer than 2 dimensions has no transpose to record it (there both orders are one
        layout): its order is the one the handle was created or opened with, as zarr-python
        3 keeps it in the array's ``config`` (``"C"`` when none was given)."""
        return self._engine.order

    @property
    def fill_value(self) -> Any:
        """The value missing chunks read as (object arrays: as their elements are)."""
        return self._engine.fill_value

    @fill_value.setter
    def fill_value(self, value: Any) -> None:
        """Change the fill value and store it in the metadata (as zarr-python 2 does).
        Stored chunks keep their values; missing chunks read as the new fill value (chunks
        written all old fill value with write_empty_chunks=False are missing too). The
        part of stored edge chunks past the array's end is set to the new fill value too,
        so that growing the array later shows the fill value there, as it does for an
        array whose fill value never changed (zarr-python 2 leaves the old one there)."""
        self._engine.check_writable()
        self._handle.check_metadata_writable()
        with self._engine.exclusive():
            engine = self._handle.reload(fresh=True)
            try:
                meta = engine.meta.with_fill_value(value)
            except (TypeError, ValueError) as e:
                raise ValueError(f"invalid fill_value {value!r} for array {self.name!r}: "
                                 f"{e}") from e
            self._finish_pending_trim(engine)
            shape, chunks = engine.shape, engine.chunks
            # (as the trim after a shrink from the chunk grid's extent to the shape)
            extent = tuple(min(-(-n // c) * c, MAX_INDEX) for n, c in zip(shape, chunks))
            plan = engine.trim_plan(extent, shape, chunks) if extent != shape else None
            if plan is not None and (plan[0] or plan[1]):
                # (before the new fill value: edge chunks left with the old one past the end
                # are then always recorded, and reset by the next change)
                trim.begin(engine, extent, shape)
            else:
                plan = None
            # (a failure keeps the marker: the write may have reached the store with its
            # answer lost, an S3 reply dropped, and the new fill value stand; removed, the
            # edge chunks kept the old one past the end, which a grow then showed. Over an
            # unchanged fill value the next change's completion of it resets nothing new)
            engine = self._handle.write_metadata(meta)
            if plan is not None:
                try:
                    engine.trim_chunks(extent, shape, chunks, plan, keep=True)
                    trim.end(engine)
                except BaseException as e:
                    e.add_note(f"array {self.name!r} has its new fill value {value!r}, but "
                               f"some edge chunks may keep the old one past the array's end "
                               f"until its next resize, append or fill value change, which "
                               f"resets them first ({trim.marker_key(engine)!r} records it)")
                    raise

    @property
    def compressor(self) -> Any:
        """The compressor as a numcodecs codec (Zarr v2's; for v3 the chain's first compressing
        codec), or None."""
        return self._meta.compressor

    @property
    def filters(self) -> Any:
        # Zarr v2: zarr-python 2's list of numcodecs filters (or None); Zarr v3: zarr-python
        # 3's tuple of array -> array codecs.
        """Zarr v2: the list of numcodecs filters (or None); Zarr v3: zarr-python 3's tuple of
        array -> array codecs."""
        return zarr3_view.filters(self._meta)

    @property
    def dimension_separator(self) -> str:
        """The chunk key separator, ``"."`` or ``"/"``."""
        return self._meta.dimension_separator

    @property
    def cdata_shape(self) -> tuple[int, ...]:
        """The shape of the chunk grid: chunks per dimension."""
        return self._handle.current().cdata_shape

    @property
    def nchunks(self) -> int:
        """The number of chunks in the grid."""
        return self._handle.current().nchunks

    @property
    def nbytes(self) -> int:
        """The size of the whole array in bytes, uncompressed."""
        return self._handle.current().nbytes

    @property
    def nbytes_stored(self) -> int:
        # an int (zarr-python 2's property) that can be called (zarr-python 3's method)
        """The bytes stored under the array's path (metadata included); an int that can also be
        called, as zarr-python 3's method."""
        return CallableInt(getsize(self._store, self._path))

    @property
    def nchunks_initialized(self) -> int:
        """The number of chunks present in the store (from one listing of the array's keys)."""
        return self._handle.current().count_stored()

    def _stored_chunk_coords(self) -> Iterator[tuple[int, ...]]:
        """Chunk-grid coordinates of the chunks present in the store (inner chunks of a
        sharded array): what a copy must write; elsewhere the copy reads its fill value."""
        return self._handle.current().stored_chunks()

    # mypy cannot add a setter to a property inherited from the base class
    @nodes.Node.read_only.setter  # type: ignore[attr-defined]
    def read_only(self, value: bool) -> None:
        self._handle.options.read_only = bool(value)

    @property
    def write_empty_chunks(self) -> bool:
        """Whether chunks that are all fill value are stored (else they are deleted)."""
        return self._handle.options.write_empty_chunks

    @property
    def metadata(self) -> Any:
        """The array's metadata (:class:`~chunkstore.metadata.v2.ArrayMetadataV2` or
        :class:`~chunkstore.metadata.v3.ArrayMetadataV3`) with its current attributes, as
        zarr-python 3's ``Array.metadata``. The attributes are read from the store, as
        ``attrs`` reads them (and ``Group.metadata``): updates through ``attrs`` or
        ``update_attributes``, by this handle or another, show in ``attributes`` and
        ``to_dict()``. A copy: changing it changes nothing stored."""
        meta = self._handle.current().meta
        return zarr3_view.with_attributes(meta, self.attrs.asdict())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        # One chunk row at a time, not one read per element.
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        step = self.chunks[0]
        for start in range(0, self.shape[0], step):
            yield from self[start:start + step]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        a = self[...]
        return a if dtype is None else a.astype(dtype, copy=False)

    @property
    def view_overrides(self) -> dict[str, Any] | None:
        """What a view changes of the stored metadata in memory (``shape``, ``chunks``,
        ``dtype``, ``fill_value``, ``filters`` of :meth:`view`, ``astype`` of :meth:`astype`), or None
        where the array is no view: its stored bytes are then what it reads."""
        overrides = self._handle.options.overrides
        return None if overrides is None else dict(overrides)

    def __repr__(self) -> str:
        # zarr-python 3's: the store and path, shape and dtype (a view says so)
        view = " (view)" if self._handle.options.overrides is not None else ""
        return f"<Array {self.store_path} shape={self.shape} dtype={self.dtype}{view}>"

    def __eq__(self, other: object) -> bool:
        # two handles on the same path of equal stores (a pickled copy too, one reading
        # through consolidated metadata too), as zarr-python 3
        return (isinstance(other, Array) and self._path == other._path
                and nodes.same_location(self._store, other._store))

    def __hash__(self) -> int:
        return hash((type(nodes.location_store(self._store)).__name__, self._path))

    def __getstate__(self) -> dict[str, Any]:
        e = self._handle.options
        state = {"store": self._store, "path": self._path, "read_only": e.read_only,
                 "synchronizer": e.synchronizer, "write_empty_chunks": e.write_empty_chunks,
                 "missing_chunks": e.missing_chunks, "cache_metadata": e.cache_metadata,
                 "order": e.handle_order,
                 # the format found: where both formats' documents lie at the path, a copy
                 # (unpickled on a dask worker, a view, with_config) must not open the other
                 # array there
                 "zarr_format": e.format_hint}
        if e.overrides is not None:
            state["_overrides"] = e.overrides
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # (mypy: a subclass's __init__ could differ; unpickling rebuilds this class's state)
        self.__init__(**state)  # type: ignore[misc]

    @property
    def info(self) -> Info:
        """A report of the array's properties (text, and HTML in Jupyter), as zarr-python's
        ``info``."""
        return Info(self._info_items(), zarr_format=self._format)

    def info_items(self) -> list[tuple[str, str]]:
        """The rows of `.info` as (name, value) pairs."""
        return self._info_items()

    def _info_items(self, stored: bool = True) -> list[tuple[str, str]]:
        """The rows of ``info``, from one engine; stored=False: from the metadata held alone,
        without the stored sizes (no I/O: AsyncArray.info, as zarr-python 3's ``info``)."""
        e = self._handle.current() if stored else self._handle.engine
        nbytes = e.nbytes
        fill = e.fill_value
        filters = zarr3_view.filters(e.meta)
        items = [
            ("Type", "chunkstore.Array"),
            ("Name", self.name),
            ("Data type", str(e.dtype)),
            ("Shape", str(e.shape)),
        ] + e.layout.grid_info_rows() + [
            ("Order", e.order),
            ("Read-only", str(self.read_only)),
            ("Fill value", repr(fill.item() if isinstance(fill, np.generic) else fill)),
            ("Compressor", repr(e.meta.compressor)),
            ("Filters", ", ".join(repr(f) for f in filters) if filters else "None"),
        ] + e.layout.codec_info_rows() + [
            ("Store type", type(self._store).__module__.split(".")[0] + "."
             + type(self._store).__name__),
            ("No. bytes", f"{nbytes} ({human_bytes(nbytes, compact=True)})"),
        ]
        if stored:
            size = getsize(self._store, self._path)
            items += [
                ("No. bytes stored", f"{size} ({human_bytes(size, compact=True)})"),
                ("Storage ratio", f"{nbytes / size:.1f}" if size else "-"),
                ("Chunks initialized", f"{e.count_stored()}/{e.nchunks}"),
            ]
        return items

    # ------------------------------------------------------------------ public get/set
    def __getitem__(self, selection: Any) -> Any:
        fields, selection = ix.split_fields(selection)
        # (the key is parsed by the metadata the read works with: a held ndim of an array
        # re-created meanwhile with another placed NumPy's new axes wrongly)
        engine = self._handle.current()
        nx = ix.newaxes_with_advanced(selection, engine.ndim)
        if nx is not None:  # None beside index arrays: read without, then NumPy's axes
            got = self._read(ix.basic_or_fancy, nx.key, None, fields, engine)
            # (a sub-array field's own axes trail the selection's, where they stay)
            perm = tuple(nx.perm) + tuple(range(len(nx.perm), got.ndim))
            return np.expand_dims(np.transpose(got, perm), nx.axes)
        return self._read(ix.basic_or_fancy, selection, None, fields, engine)

    def __setitem__(self, selection: Any, value: Any) -> None:
        if isinstance(value, Array) and self._stream_from(selection, value):
            return
        fields, selection = ix.split_fields(selection)
        nx = ix.newaxes_with_advanced(selection, self.ndim)
        if nx is not None:
            if np.ndim(value):
                # the value in the layout of the key without its Nones: broadcast to
                # NumPy's result shape, unit axes out, axes back
                engine = self._handle.current()
                shape = ix.basic_or_fancy(nx.key, engine.shape, engine.chunks,
                                          self.name).shape
                rest = iter([shape[k] for k in nx.perm])
                want = [1 if k in nx.axes else next(rest)
                        for k in range(len(shape) + len(nx.axes))]
                # a sub-array field's own axes trail the selection's
                sub = engine.dtype[fields].shape if isinstance(fields, str) else ()
                try:
                    v = np.broadcast_to(engine.value_array(value, fields), want + list(sub))
                except ValueError as e:
                    if "broadcast" not in str(e):
                        raise
                    raise ValueError(f"could not broadcast a value of shape "
                                     f"{np.shape(value)} to the selection of shape "
                                     f"{tuple(want)} in array {self.name!r}") from e
                perm = tuple(np.argsort(nx.perm)) + tuple(range(len(shape),
                                                                len(shape) + len(sub)))
                value = np.transpose(np.squeeze(v, nx.axes), perm)
            selection = nx.key
        self._write(ix.basic_or_fancy, selection, value, fields)

    def _read(self, normalize: Normalizer, selection: Any, out: np.ndarray | None,
              fields: FieldNames, engine: ChunkEngine | None = None,
              again: int = 3) -> Any:
        """self[selection], the selection normalized by ``normalize`` (a
        chunkstore.engine.indexing function) against the metadata of the engine the read
        works with throughout (see chunkstore.engine.core; given, or the current one).
        again: how many more times the read may run where it found its array re-created
        by this process meanwhile (the last run holds this process's metadata changes off)."""
        if engine is None:
            engine = self._handle.current()
        # (the engine's own date: a change that ended between its making and here counts)
        changes = engine.generation
        if changes is None:
            changes = metadata_generation(self._handle.options)
        last = contextlib.nullcontext() if again else self._handle.changes_held()
        with last:
            if not again:  # (changes held off from here: the engine of the array now)
                now = self._handle.current()
                normalize, selection = self._repinned(normalize, selection, engine, now)
                engine = now
            sel = normalize(selection, engine.shape, engine.chunks, self.name)
            missing = engine.missing_seen
            try:
                result = engine.read(sel, out=out, fields=fields)
            except MemoryError as e:
                _note_chunk_size(e, self.name, engine)
                raise
            except ChunkDecodeError:
                # (a chunk of the array this process re-created meanwhile with other chunks
                # or another dtype, decoded by the old metadata: its size is wrong. Read
                # again below where the metadata changed; a corrupt chunk else)
                if not (again and self._handle.changed_since(changes)):
                    raise
                result = None
        if again and self._handle.changed_since(changes):
            # This process changed the array's metadata during the read, or is changing
            # it (a shrink deleting the chunks past its new end, then an append...): the
            # chunks read may be of a later version than the shape it filled (the old
            # shape, with values appended since and the fill value where data was: a
            # state the array never had). Read again from the array now (the change in
            # flight waited for), the elements the selection selected in the shape it
            # knew (as a write planned again: the same result shape, out= fits; gone past
            # a new end, an error).
            now = self._handle.current()
            normalize, selection = self._repinned(normalize, selection, engine, now)
            return self._read(normalize, selection, out, fields, now, again=again - 1)
        if engine.missing_seen != missing and (not engine.cache_metadata or
                                               engine.synchronizer is not None):
            # Chunks found missing, read as the fill value: the array may have been moved
            # or deleted (by another process) since its metadata was read, its documents
            # going first, or shrunk (its chunks past the new end deleted). Its document
            # read again (by a handle that reads the metadata each time, or one
            # synchronized with other processes; one read, where the existence of the key
            # was looked for before): ArrayNotFoundError where it is gone; where it changed,
            # the read runs again by it (the elements selected in the shape it knew: gone
            # past a new end, an error), not a plausible array of fill values (the old
            # shape, with the fill value where rows another process's shrink had deleted).
            if not engine.layout.is_current(engine.stored_meta):
                try:
                    self._handle.check_there()
                except ArrayNotFoundError:
                    # (a re-creation by this process between its delete and its new
                    # document: waited for, the read runs again on the array there now)
                    if not (again and self._handle.there_after_change()):
                        raise
                    return self._read(normalize, selection, out, fields, again=again - 1)
                if again:
                    now = self._handle.stored_engine()
                    normalize, selection = self._repinned(normalize, selection, engine, now)
                    return self._read(normalize, selection, out, fields, now,
                                      again=again - 1)
        return result

    def _write(self, normalize: Normalizer, selection: Any, value: Any,
               fields: FieldNames) -> None:
        """self[selection] = value, the selection normalized by ``normalize`` (a
        chunkstore.engine.indexing function) against the shape this handle knows; planned again
        with the new metadata where a synchronized write finds, under its locks, that
        another handle changed it meanwhile (see EngineState.check_metadata). Planned again,
        a write holds the metadata guard (EngineState.metadata_guard) from its read of the
        metadata to its end, so a steady appender cannot change the metadata between the
        two again and again (on 16 cores, a writer racing one gave up after 8 plans)."""
        engine = self._handle.current()
        known, grid = engine.shape, engine.chunks
        # (computed before any lock is taken: see _computed)
        value = _computed(value)
        guard: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        for attempt in range(8):
            with guard:
                if attempt:
                    engine = self._handle.reload(stale=True)
                    if engine.shape != known or engine.chunks != grid:
                        # The elements the caller selected by the shape (and chunk grid)
                        # it knows (h[-1]: the last row it knows; h[...]: those rows;
                        # h.blocks[1]: that grid's block), where the new shape still holds
                        # them: resolved against the new one, h[-1] overwrote a row another
                        # process appended, while h[25] was refused
                        normalize, selection = self._pinned(normalize, selection, known,
                                                            grid, engine.shape)
                sel = normalize(selection, engine.shape, engine.chunks, self.name)
                try:
                    return engine.write(sel, value, fields=fields)
                except MetadataChanged:
                    # (changed by a handle outside these locks: one without the synchronizer,
                    # or in another process without one; the guard cannot hold those off)
                    guard = engine.metadata_guard()
                except ValueError as e:
                    # A value that does not fit the selection as the shape known sizes it
                    # (12:15 of 10 columns: none): where another handle grew the array
                    # meanwhile, planned again, which refuses it naming the change (it was
                    # a broadcast error naming neither)
                    if attempt or "broadcast" not in str(e):
                        raise
                    try:
                        grown = self._handle.reload(stale=True).shape != known
                    except Exception:  # noqa: BLE001 - (gone meanwhile...): the write's error
                        grown = False
                    if not grown:
                        raise
                except MemoryError as e:
                    _note_chunk_size(e, self.name, engine)
                    raise
        raise ArrayMetadataChangedError(
            f"array {self.name!r} in {store_name(self._store)}: its metadata changed during each of 8 "
            f"attempts to write {selection!r}")

    def _repinned(self, normalize: Normalizer, selection: Any, engine: ChunkEngine,
                  now: ChunkEngine) -> tuple[Normalizer, Any]:
        """(normalizer, selection) for a read run again on the array now, whose metadata may
        differ from engine's: as they were where shape and chunks are the same, else
        _pinned. One re-created meanwhile with another dtype raises
        ArrayMetadataChangedError (its elements in the old selection, of another type, were
        a state the array never had, and ``out=`` of the old dtype took them cast); with
        another rank, _pinned raises it."""
        if now.dtype != engine.dtype:
            raise ArrayMetadataChangedError(
                f"array {self.name!r} in {store_name(self._store)} was re-created during the "
                f"read of {_brief(selection)} (dtype {engine.dtype}, shape {engine.shape} -> "
                f"dtype {now.dtype}, shape {now.shape}): nothing returned; read it again")
        if now.shape == engine.shape and now.chunks == engine.chunks:
            return normalize, selection
        return self._pinned(normalize, selection, engine.shape, engine.chunks, now.shape)

    def _pinned(self, normalize: Normalizer, selection: Any, known: tuple[int, ...],
                grid: tuple[int, ...], now: tuple[int, ...]) -> tuple[Normalizer, Any]:
        """(normalizer, selection) selecting the elements that selection selected in the
        shape known (chunks grid), made explicit (indexing.pinned), for a write planned
        again after another handle changed the shape to now: blocks as the element slices
        they were, a mask of the shape known as its coordinates. One that cannot be pinned
        raises ArrayMetadataChangedError rather than select other elements (as does a
        change of rank: a re-creation)."""
        if len(now) != len(known):
            raise ArrayMetadataChangedError(
                f"array {self.name!r} in {store_name(self._store)}: re-created by another "
                f"handle with another number of dimensions (shape {known} -> {now}) during "
                f"the write or read of {_brief(selection)}: nothing done; open the array "
                f"again and retry")
        if normalize is ix.block:
            normalize = ix.orthogonal
            selection = ix.block_elements(selection, known, grid, self.name)
        elif normalize in (ix.mask, ix.vectorized, ix.basic_or_fancy):
            # (h[m] = v with an n-d mask of the shape known too: it was refused while
            # h.vindex[m] and set_mask_selection wrote the mask's elements)
            m = selection[0] if isinstance(selection, tuple) and len(selection) == 1 \
                else selection
            if isinstance(m, np.ndarray) and m.dtype == bool and m.shape == known:
                normalize, selection = ix.coordinate, tuple(np.nonzero(m))
        if normalize in (ix.basic_or_fancy, ix.orthogonal, ix.coordinate, ix.vectorized):
            explicit = ix.pinned(selection, known, now, self.name)
            if explicit is not None:
                return normalize, explicit
        raise ArrayMetadataChangedError(
            f"array {self.name!r} in {store_name(self._store)}: another handle changed its "
            f"shape or chunks (shape {known} -> {now}) during the write of {_brief(selection)}, "
            f"which selects by them: nothing written; open the array again and retry")

    def _stream_from(self, selection: Any, src: Array) -> bool:
        """self[selection] = src (an Array) block by block, in bounded memory, when the
        selection is a box of step-1 slices of src's shape (chunkstore.engine.streaming). False
        when it is not: the caller then reads src whole."""
        from chunkstore.engine import streaming
        self._engine.check_writable()
        box = streaming.slice_box(selection, self.shape)
        if box is None or tuple(b - a for a, b in box) != tuple(src.shape):
            return False
        if (src._path == self._path and (src._store is self._store or (
                not isinstance(self._store, MemoryStore) and src._store == self._store))) \
                or nodes.holds(self._store, self._path, src._store, src._path) \
                or nodes.holds(src._store, src._path, self._store, self._path):
            # src reads the chunks this write stores (a view of this array, say
            # z[10:] = z.view(shape=...), through this store object or another of the same
            # location: a parent's, a cache's): block by block, later blocks would read
            # values already overwritten. Read it whole first, as NumPy does for
            # overlapping copies.
            return False
        if not np.can_cast(src.dtype, self.dtype, casting="safe") and not (
                src.dtype.kind in "biuf" and self.dtype.kind in "biufc"):
            # a value of src may not convert (a string that is no number, an object): raised
            # at a later block, the write had stored the blocks before it. Read whole and
            # converted first, nothing is stored when one does not. (Numbers into numbers
            # convert as NumPy's assignment does, never raising: streamed.)
            return False
        streaming.assign(self, box, src)
        return True

    def get_basic_selection(self, selection: Any = Ellipsis, out: np.ndarray | None = None,
                            fields: Fields = None) -> Any:
        """``self[selection]`` for ints, slices and Ellipsis (zarr-python 2's
        ``get_basic_selection``); ``out``: an array of the selection's shape to read into;
        ``fields``: structured fields to take."""
        return self._read(ix.basic_or_fancy, selection, out, _fields(fields))

    def set_basic_selection(self, selection: Any, value: Any, fields: Fields = None) -> None:
        """``self[selection] = value`` for ints, slices and Ellipsis (zarr-python 2's
        ``set_basic_selection``); the value broadcasts as in NumPy."""
        if isinstance(value, Array) and fields is None and self._stream_from(selection, value):
            return
        self._write(ix.basic_or_fancy, selection, value, _fields(fields))

    def get_orthogonal_selection(self, selection: Any, out: np.ndarray | None = None,
                                 fields: Fields = None) -> Any:
        """Orthogonal (outer) indexing, ``z.oindex[...]``: per dimension an int, a slice, an int
        array or a boolean array."""
        return self._read(ix.orthogonal, selection, out, _fields(fields))

    def set_orthogonal_selection(self, selection: Any, value: Any,
                                 fields: Fields = None) -> None:
        """``z.oindex[selection] = value``: orthogonal indexing for writes."""
        self._write(ix.orthogonal, selection, value, _fields(fields))

    def get_coordinate_selection(self, selection: Any, out: np.ndarray | None = None,
                                 fields: Fields = None) -> Any:
        """Coordinate (vectorized) indexing, ``z.vindex[ints...]``: one integer array per
        dimension, broadcast together; the result has their broadcast shape."""
        return self._read(ix.coordinate, selection, out, _fields(fields))

    def set_coordinate_selection(self, selection: Any, value: Any,
                                 fields: Fields = None) -> None:
        """``z.vindex[ints...] = value``: coordinate indexing for writes."""
        self._write(ix.coordinate, selection, value, _fields(fields))

    def get_mask_selection(self, selection: Any, out: np.ndarray | None = None,
                           fields: Fields = None) -> Any:
        """Mask indexing, ``z.vindex[mask]``: a boolean array of the array's shape; the result
        is 1-d, in C order."""
        return self._read(ix.mask, selection, out, _fields(fields))

    def set_mask_selection(self, selection: Any, value: Any,
                           fields: Fields = None) -> None:
        """``z.vindex[mask] = value``: mask indexing for writes."""
        self._write(ix.mask, selection, value, _fields(fields))

    def get_block_selection(self, selection: Any, out: np.ndarray | None = None,
                            fields: Fields = None) -> Any:
        """Block indexing, ``z.blocks[...]``: ints and step-1 slices in units of chunks."""
        return self._read(ix.block, selection, out, _fields(fields))

    def set_block_selection(self, selection: Any, value: Any,
                            fields: Fields = None) -> None:
        """``z.blocks[...] = value``: block indexing for writes."""
        self._write(ix.block, selection, value, _fields(fields))

    @property
    def oindex(self) -> _Indexer:
        """Orthogonal indexing: ``z.oindex[...]`` and ``z.oindex[...] = value``."""
        return _Indexer(self, self.get_orthogonal_selection, self.set_orthogonal_selection)

    @property
    def vindex(self) -> _Indexer:
        """Vectorized indexing: coordinates or a mask, ``z.vindex[...]`` (and assignment)."""
        return _Indexer(self, self._get_vectorized, self._set_vectorized)

    @property
    def blocks(self) -> _Indexer:
        """Block indexing in units of chunks: ``z.blocks[...]`` (and assignment)."""
        return _Indexer(self, self.get_block_selection, self.set_block_selection)

    def _get_vectorized(self, selection: Any, fields: Fields = None) -> Any:
        return self._read(ix.vectorized, selection, None, _fields(fields))

    def _set_vectorized(self, selection: Any, value: Any, fields: Fields = None) -> None:
        self._write(ix.vectorized, selection, value, _fields(fields))

    # ------------------------------------------------------------------ zarr-python 2 extras
    def view(self, shape: Any = None, chunks: Any = None, dtype: Any = None,
             fill_value: Any = None, filters: Any = None, read_only: bool | None = None,
             synchronizer: Any = None) -> "Array":
        """A lazy view of the stored chunks with other metadata (zarr-python 2's
        ``Array.view``). Nothing is read or written until the view is indexed; resize,
        append and setting the fill value of a view raise PermissionError. A view with a
        fill value or dtype of its own stores every chunk it writes, even one all its fill
        value (deleted, it would read as the array's fill value through the array)."""
        return Array(**views.view_state(self, shape, chunks, dtype, fill_value, filters,
                                        read_only, synchronizer))

    def astype(self, dtype: Any) -> "Array":
        """A read-only view converting the stored values to ``dtype`` as chunks are decoded
        (zarr-python 2's ``Array.astype``)."""
        return Array(**views.view_state(self, read_only=True, astype=dtype))

    def islice(self, start: int | None = None, end: int | None = None) -> Iterator[Any]:
        """Iterate over ``self[start:end]`` along the first dimension, decoding each chunk
        row once (zarr-python 2's ``Array.islice``)."""
        return views.islice(self, start, end)

    def digest(self, hashname: str = "sha1") -> bytes:
        """The hash of the stored content as zarr-python 2 defines it (see
        :func:`chunkstore.engine.views.digest`)."""
        return views.digest(self, hashname)

    def hexdigest(self, hashname: str = "sha1") -> str:
        """:meth:`digest` as a hexadecimal string."""
        import binascii
        return binascii.hexlify(self.digest(hashname)).decode("ascii")

    # ------------------------------------------------------------------ shape changes
    def resize(self, *shape: Any) -> None:
        """Change the shape. Chunks wholly outside the new shape are deleted, and the cut-off
        part of boundary chunks is reset to the fill value, so growing again shows fill. A
        trim that fails midway is recorded in the store (:mod:`chunkstore.engine.trim`) and
        completed by the next resize, append or fill value change, before it changes
        anything (README "Shape changes")."""
        self._handle.check_metadata_writable()
        self._engine.check_writable()
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        bad = [s for s in shape if not ix._is_int(s)]
        if bad:  # int(5.5) would truncate and delete the chunks past it
            raise TypeError(f"new shape {tuple(shape)} of array {self.name!r} must be "
                            f"integers, got {bad[0]!r} ({type(bad[0]).__name__})")
        new = tuple(int(s) for s in shape)
        if any(s < 0 for s in new):
            raise ValueError(f"new shape {new} has a negative dimension")
        with self._engine.exclusive():
            engine = self._handle.reload(fresh=True)
            # (by the metadata as stored now: another process may have re-created the array
            # with another number of dimensions)
            if len(new) != engine.ndim:
                raise ValueError(f"new shape {new} has {len(new)} dimensions; array "
                                 f"{self.name!r} has {engine.ndim}")
            # an earlier shrink's trim that failed: completed before the shape changes (a
            # grow would show its stale chunks)
            self._finish_pending_trim(engine)
            old = engine.shape
            chunks = engine.chunks
            # The new shape first: a trim that fails halfway then leaves stale chunks past
            # the end (invisible), never an old shape whose chunks are partly deleted. The
            # stored chunks are listed before, while the grid still covers them; the marker
            # is stored before the shape, so that no grow can miss what a failed trim left.
            shrink = any(n < o for n, o in zip(new, old))
            plan = engine.trim_plan(old, new, chunks) if shrink else None
            if plan is not None and not (plan[0] or plan[1]):
                plan = None  # nothing stored past the new end: nothing to trim
            if plan is not None:
                trim.begin(engine, old, new)
            # (a failure keeps the marker: the write may have reached the store with its
            # answer lost, an S3 reply dropped, and the new shape stand; removed, the old
            # values past it showed again at the next grow. Over an unchanged shape the next
            # change's completion of it trims nothing)
            engine = self._handle.write_metadata(engine.layout.resized(new))
            if plan is not None:
                try:
                    engine.trim_chunks(old, new, chunks, plan)
                    trim.end(engine)
                except BaseException as e:
                    e.add_note(f"array {self.name!r} has its new shape {new}; chunks past it "
                               f"may remain until its next resize, append or fill value "
                               f"change, which deletes them first "
                               f"({trim.marker_key(engine)!r} records the trim)")
                    raise

    def _finish_pending_trim(self, engine: ChunkEngine, raw: Any = None) -> None:
        """Complete the trim an earlier shrink left pending (its marker, chunkstore.engine.trim;
        ``raw``: its bytes already read, else it is looked for: one read), under the array's
        exclusive lock, with ``engine`` of the metadata as stored now. Raises what the store
        raises, nothing changed but chunks past the array's end."""
        raw = trim.read_marker(engine) if raw is None else raw
        if raw is None:
            return
        try:
            trim.complete(engine, raw, lambda extent: ChunkEngine(
                engine.options, engine.layout.resized(extent)))
        except BaseException as e:
            e.add_note(f"completing the trim an earlier interrupted shrink, append or fill "
                       f"value change of array {self.name!r} left pending "
                       f"({trim.marker_key(engine)!r}) failed: the array keeps its shape "
                       f"{engine.shape} and everything in it")
            raise

    def append(self, data: Any, axis: int = 0) -> tuple[int, ...]:
        """Append data along axis; returns the new shape."""
        self._handle.check_metadata_writable()
        self._engine.check_writable()
        given = _computed(data)
        # Hold the array's exclusive lock across resize and write: parallel appends never
        # interleave, and each sees the shape the previous one left. The data is checked
        # against that shape, read under the lock: checked against a cached one that another
        # handle had since widened, it was broadcast across the new columns.
        with self._engine.exclusive():
            engine = self._handle.reload(fresh=True)
            shape = engine.shape
            ndim = len(shape)
            # (a list converted with the array's dtype, as z[...] = list is: converted as it
            # is first, [300] into i1 stored 44, [2**64 - 1] into u8 stored 0)
            data = engine.value_array(given)
            if data.ndim != ndim:
                raise ValueError(f"cannot append data with {data.ndim} dimensions to array "
                                 f"{self.name!r} with {ndim}")
            axis = axis + ndim if axis < 0 else axis
            if not 0 <= axis < ndim:
                raise ValueError(f"axis {axis} is out of range for array {self.name!r} with "
                                 f"{ndim} dimensions")
            for d in range(ndim):
                if d != axis and data.shape[d] != shape[d]:
                    raise ValueError(f"cannot append data of shape {data.shape} to array "
                                     f"{self.name!r} of shape {shape} along axis {axis}: "
                                     f"dimension {d} differs")
            if not engine.is_object:
                data = np.asarray(data, dtype=engine.dtype)
            new = tuple(s + data.shape[d] if d == axis else s for d, s in enumerate(shape))
            if new[axis] > MAX_INDEX:  # (as resize refuses it; it came as NumPy's OverflowError)
                raise ValueError(f"cannot append {data.shape[axis]} along axis {axis} to "
                                 f"array {self.name!r} of shape {shape}: its length would be "
                                 f"{new[axis]}, larger than the largest supported extent "
                                 f"2**63 - 1")
            old_meta = engine.meta
            chunks = engine.chunks
            region = tuple(slice(shape[d], new[d]) if d == axis else slice(None)
                           for d in range(len(new)))
            sel = ix.basic_or_fancy(region, new, chunks, self.name)
            # An append lands whole or not at all: keep the stored objects (chunks, or
            # shards) it shares with the old shape (the boundary layer), their bytes as
            # stored, to put back if the write fails; the others it creates are deleted
            # (whole: deleting a shard's inner chunks would be a rewrite of the shard,
            # which fails as the append did on a full disk). They are read before the new
            # shape is written (the keys do not depend on the shape): a read that fails
            # then leaves the array as it was, not grown by fill values.
            layout = engine.layout
            stored, touched = layout.stored_keys_for(sel.plan.chunk_coords())
            edge = stored[:, axis] * layout.write_chunks[axis] < shape[axis]
            keep = [k for k, e in zip(touched, edge) if e]
            # (an earlier shrink's pending trim looked for in the same batch: no round trip
            # more; completed before the grow, which would show its stale chunks)
            marker = trim.marker_key(engine)
            saved = getitems(layout.store, keep + [marker])
            if marker in saved:
                self._finish_pending_trim(engine, saved[marker])
                saved = getitems(layout.store, keep)  # (the trim may have rewritten them)
            saved = self._checked_boundary(layout, saved, keep)
            # The data first, the new shape last: a reader never sees the new shape before
            # its rows are stored (written first, then the network lost, the roll-back
            # could not restore the old shape: readers got the appended rows as the fill
            # value, with no error). Until the new shape is stored, what the write put past
            # the old end is recorded as a pending trim (written first: its failure appends
            # nothing), which the roll-back, or else the next resize or append, removes.
            grown = layout.resized(new)
            trim.begin(engine, new, shape)
            shape_sent = False
            try:
                staged = ChunkEngine(engine.options, grown)
                staged._set_prepared(sel, staged._prepare_value(data, sel.shape), locked=True)
                # (inside: a remote store may take the new document and lose its answer)
                shape_sent = True
                engine = self._handle.write_metadata(grown)
            except BaseException as e:
                self._handle.roll_back_append(old_meta, new, touched, saved, e, shape_sent)
                raise
            with contextlib.suppress(Exception):  # (left: the next change completes it)
                trim.end(engine)
        return new

    def _checked_boundary(self, layout: Any, saved: dict[str, Any],
                          keep: list[str]) -> dict[str, Any]:
        """saved (the boundary objects' bytes an append puts back if it fails), read again
        once where one is not a whole object (layout.check_whole); still not, its error
        (ChunkDecodeError...) is raised, nothing of the append done. A body cut short by
        the network, taken as stored and put back by a failed append, replaced good chunks
        with bytes nothing could read."""
        for attempt in (0, 1):
            if attempt:
                saved = getitems(layout.store, keep)  # (its error: nothing appended)
            try:
                for key in keep:
                    if key in saved:
                        layout.check_whole(key, saved[key])
                return saved
            except (ValueError, OSError) as e:  # (ChunkDecodeError is a ValueError)
                if attempt:
                    e.add_note(f"appending to array {self.name!r}: its stored "
                               f"{layout._stored_kind} at the old end, put back if the append "
                               f"failed, does not read back (read twice); nothing appended")
                    raise
        return saved


def _brief(selection: Any) -> str:
    """A selection's repr for an error message, cut to 80 characters (an index array's
    whole repr could be megabytes)."""
    r = repr(selection)
    return r if len(r) <= 80 else r[:77] + "..."


def _note_chunk_size(error: MemoryError, name: str, engine: ChunkEngine) -> None:
    """Say on a MemoryError which array's chunks it was (a read or write holds whole chunks,
    and a chunk shape from a document written elsewhere may be far larger than the array)."""
    size = int(np.prod(engine.chunks, dtype=np.float64)) * engine.dtype.itemsize
    # (worded as a fact, not the cause: the result, or a shard's index, may be what did
    # not fit, and a note blaming 1 B chunks misled)
    error.add_note(f"in array {name!r}, whose chunks are of shape {engine.chunks} "
                   f"({engine.dtype}, {human_bytes(size)} each; a read or write holds the "
                   f"chunks it touches whole, besides its result)")


def _computed(value: Any) -> Any:
    """value, a lazy collection (a dask array) computed into memory: a write or append
    takes the array's locks first, and a dask value that reads the array (``z.append(
    da.from_array(z) * 10)``) had its worker threads wait for those locks' holder, which
    waited for them (a change in flight is waited for by reads: Array._read)."""
    if hasattr(value, "__dask_graph__") and hasattr(value, "__array__"):
        return np.asarray(value)
    return value


def _fields(fields: Fields) -> FieldNames:
    """fields= of a selection method: one name as it is, a sequence as a list (an empty one
    is every field, None, as zarr-python 2 takes it)."""
    if fields is None or isinstance(fields, str):
        return fields
    return list(fields) or None


def check_zarr2_keywords(chunk_store: Any, meta_array: Any) -> None:
    """Refuse the zarr-python 2 constructor keywords chunkstore cannot honour."""
    if chunk_store is not None:
        raise ValueError("a separate chunk_store is not supported: chunks and metadata live "
                         "in one store here")
    if meta_array is not None and type(meta_array) is not np.ndarray:
        raise ValueError(f"meta_array must be a NumPy array (or None), got "
                         f"{type(meta_array).__name__}: chunkstore returns NumPy arrays")


class _Indexer:
    __slots__ = ("_array", "_get", "_set")

    def __init__(self, array: Array, get: Callable[..., Any], set_: Callable[..., None]) -> None:
        self._array, self._get, self._set = array, get, set_

    def __getitem__(self, selection: Any) -> Any:
        fields, selection = ix.split_fields(selection)
        return self._get(selection, fields=fields)

    def __setitem__(self, selection: Any, value: Any) -> None:
        fields, selection = ix.split_fields(selection)
        self._set(selection, value, fields=fields)


class Info:
    """The `.info` report: a table of name/value rows (text, and HTML in Jupyter).

    ``_zarr_format`` is the node's Zarr format (2 or 3), as on zarr-python 3's ``GroupInfo``
    and ``ArrayInfo``: ome-zarr-py reads ``group.info._zarr_format``."""

    def __init__(self, items: list[tuple[str, str]], zarr_format: int | None = None) -> None:
        self.items = items
        self._zarr_format = zarr_format

    def __repr__(self) -> str:
        w = max(len(k) for k, _ in self.items)
        return "\n".join(f"{k:<{w}} : {v}" for k, v in self.items)

    def _repr_html_(self) -> str:
        import html
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                       for k, v in self.items)
        return f"<table class='chunkstore-info'><tbody>{rows}</tbody></table>"

