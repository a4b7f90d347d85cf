"""Array: a chunked N-d array in a store. Metadata, the read path and the write path.

A read turns the selection into a plan (chunkstore.indexing -> Cython projection), fetches
the touched chunks in batches on the shared thread pool, decodes each (straight into the
output when it lands there whole and contiguous) and merges it into the output with the
Cython kernels. A write runs the plan backwards: each touched chunk is built whole from the
value, or read-modified-written, and is deleted instead of stored when it is all fill value.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from chunkstore import indexing as ix
from chunkstore._core import merge
from chunkstore import nodes
from chunkstore import scheduling
from chunkstore.errors import ChunkNotFoundError, ChunkstoreError, MetadataError, ReadOnlyError
from chunkstore.format import layout_for, read_array_metadata
from chunkstore.storage.base import delitems, getitems, getsize, setitems
from chunkstore.storage.memory import MemoryStore  # (its == compares every value)
from chunkstore.locking import selection_box
from chunkstore.storage.pipelining import prefetch, store_items, write_behind
from chunkstore.sync import check_synchronizer_path
from chunkstore.views import ArrayExtras
from chunkstore.metadata import zarr3_view
from chunkstore.node_api_v3 import ArrayAPIv3, CallableInt

# A synchronized write covering at least this many chunks whole, and some in part, locks
# those only around their read-modify-write (see Array._split_locks).
_SPLIT_MIN_CHUNKS = 16


def _human(n):
    for unit in ("", "K", "M", "G", "T", "P"):
        if abs(n) < 1024 or unit == "P":
            return f"{n:.1f}{unit}" if unit else f"{n}"
        n /= 1024


class Array(nodes.Node, ArrayExtras, ArrayAPIv3):
    """A Zarr v2 array in a store.

    Usually made by `chunkstore.create`/`open_array` and friends, not directly.
    """

    def __init__(self, store, path="", read_only=False, synchronizer=None,
                 write_empty_chunks=False, missing_chunks="fill", cache_metadata=True,
                 zarr_format=None):
        if missing_chunks not in ("fill", "error"):
            raise ValueError(f"missing_chunks must be 'fill' or 'error', got {missing_chunks!r}")
        self._store = store
        self._path = (path or "").strip("/")
        self._prefix = self._path + "/" if self._path else ""
        self._read_only = bool(read_only)
        self._synchronizer = synchronizer
        self._write_empty_chunks = bool(write_empty_chunks)
        self._missing_chunks = missing_chunks
        self._cache_metadata = cache_metadata
        if synchronizer is not None:
            check_synchronizer_path(synchronizer, store)
        # which metadata key to read first (one request on a remote store when right)
        self._format_hint = zarr_format
        self._load_metadata()

    # ------------------------------------------------------------------ metadata
    def _load_metadata(self):
        meta, key = read_array_metadata(self._store, self._path, self._format_hint)
        self._adopt_meta(meta, key)

    def _adopt_meta(self, meta, key):
        """_set_meta for metadata read from ``key``: a codec that parses but cannot be built
        (say Blosc with blocksize null) is a MetadataError naming the key."""
        try:
            self._set_meta(meta)
        except ChunkstoreError:
            raise
        except (TypeError, ValueError, OverflowError, AttributeError, LookupError) as e:
            raise MetadataError(f"invalid array metadata at {key!r}: {e}") from e

    def _set_meta(self, meta):
        """Adopt metadata: its layout (chunk grid, codec, chunk keys, and the mapping chunks
        are read from and written to; a sharded array works on its inner chunks, through a
        view that maps them into their shards)."""
        layout = layout_for(meta, self._store, self._path, synchronizer=self._synchronizer,
                            cache_index=self._cache_metadata)
        self._meta = meta
        self._layout = layout
        self._format = layout.zarr_format
        self._chunk_store = layout.chunk_store
        self._codec = layout.codec
        self._chunks = layout.chunks
        self._shards = layout.shards
        self._is_object = meta.dtype.hasobject
        fb = meta.fill_bytes()
        self._fill_item = None if fb is None else np.frombuffer(fb, dtype=meta.dtype).copy()
        self._object_fill = _object_fill(meta) if self._is_object else None

    def _refresh(self):
        if not self._cache_metadata:
            self._load_metadata()

    def _write_metadata(self, meta):
        self._layout.write_metadata(meta)
        self._set_meta(meta)

    @property
    def layout(self):
        """The array's :class:`chunkstore.format.layout.ArrayLayout` (read-only): how it lies
        in its store (Zarr format, chunk and shard shape, codec, chunk keys, stored chunks).
        Rebuilt whenever the metadata changes: do not keep it across a resize."""
        return self._layout

    @property
    def shape(self):
        self._refresh()
        return self._meta.shape

    @shape.setter
    def shape(self, value):
        self.resize(value)

    @property
    def chunks(self):
        """The chunk shape reads and writes work in (the inner chunks of a sharded array)."""
        return self._chunks

    @property
    def shards(self):
        """The shard shape of a sharded (Zarr v3) array, else None."""
        return self._shards

    @property
    def write_chunks(self):
        """The blocks a write stores whole: the shards of a sharded array, else the chunks."""
        return self._layout.write_chunks

    @property
    def dtype(self):
        return self._meta.dtype

    @property
    def ndim(self):
        return len(self._meta.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def order(self):
        return self._meta.order

    @property
    def fill_value(self):
        return self._object_fill if self._is_object else self._meta.fill_value

    @fill_value.setter
    def fill_value(self, value):
        """Change the fill value and store it in the metadata (as zarr-python 2 does).
        Stored chunks keep their values; missing chunks read as the new fill value."""
        self._check_writable()
        with self._exclusive():
            self._load_metadata()
            try:
                meta = _replace_meta(self._meta, fill_value=value)
            except (TypeError, ValueError) as e:
                raise ValueError(f"invalid fill_value {value!r} for array {self.name!r}: "
                                 f"{e}") from e
            self._write_metadata(meta)

    @property
    def compressor(self):
        return self._meta.compressor

    @property
    def filters(self):
        # Zarr v2: zarr-python 2's list of numcodecs filters (or None); Zarr v3: zarr-python
        # 3's tuple of array -> array codecs.
        return zarr3_view.filters(self._meta)

    @property
    def dimension_separator(self):
        return self._meta.dimension_separator

    @property
    def cdata_shape(self):
        return tuple(-(-s // c) for s, c in zip(self.shape, self.chunks))

    @property
    def nchunks(self):
        return math.prod(self.cdata_shape)

    @property
    def nbytes(self):
        return self.size * self.itemsize

    @property
    def nbytes_stored(self):
        # an int (zarr-python 2's property) that can be called (zarr-python 3's method)
        return CallableInt(getsize(self._store, self._path))

    @property
    def nchunks_initialized(self):
        return sum(1 for _ in self._stored_chunks())

    @nodes.Node.read_only.setter
    def read_only(self, value):
        self._read_only = bool(value)

    @property
    def write_empty_chunks(self):
        return self._write_empty_chunks

    @property
    def metadata(self):
        return self._meta

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        # One chunk row at a time, not one read per element.
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        step = self.chunks[0]
        for start in range(0, self.shape[0], step):
            yield from self[start:start + step]

    def __array__(self, dtype=None, copy=None):
        a = self[...]
        return a if dtype is None else a.astype(dtype, copy=False)

    def __repr__(self):
        return f"<chunkstore.Array {self.name!r} {self.shape} {self.dtype}>"

    def __eq__(self, other):
        # two handles on the same path of equal stores (a pickled copy too), as zarr-python 3
        return (isinstance(other, Array) and self._path == other._path
                and (self._store is other._store or self._store == other._store))

    def __hash__(self):
        return hash((type(self._store).__name__, self._path))

    def __getstate__(self):
        return {"store": self._store, "path": self._path, "read_only": self._read_only,
                "synchronizer": self._synchronizer,
                "write_empty_chunks": self._write_empty_chunks,
                "missing_chunks": self._missing_chunks, "cache_metadata": self._cache_metadata}

    def __setstate__(self, state):
        self.__init__(**state)

    @property
    def info(self):
        return Info(self._info_items())

    def info_items(self):
        """The rows of `.info` as (name, value) pairs."""
        return self._info_items()

    def _info_items(self):
        nbytes, stored = self.nbytes, self.nbytes_stored
        items = [
            ("Type", "chunkstore.Array"),
            ("Name", self.name),
            ("Data type", str(self.dtype)),
            ("Shape", str(self.shape)),
        ] + self._layout.grid_info_rows() + [
            ("Order", self.order),
            ("Read-only", str(self.read_only)),
            ("Fill value", repr(self.fill_value.item() if isinstance(self.fill_value, np.generic) else self.fill_value)),
            ("Compressor", repr(self.compressor)),
            ("Filters", ", ".join(repr(f) for f in self.filters) if self.filters else "None"),
        ] + self._layout.codec_info_rows() + [
            ("Store type", type(self._store).__module__.split(".")[0] + "."
             + type(self._store).__name__),
            ("No. bytes", f"{nbytes} ({_human(nbytes)})"),
            ("No. bytes stored", f"{stored} ({_human(stored)})"),
            ("Storage ratio", f"{nbytes / stored:.1f}" if stored else "-"),
            ("Chunks initialized", f"{self.nchunks_initialized}/{self.nchunks}"),
        ]
        return items

    # ------------------------------------------------------------------ chunk keys
    def _chunk_key(self, coords):
        return self._layout.chunk_key(coords)

    def _chunk_keys(self, coords):
        """Keys of the chunks at each row of an (n, ndim) grid coordinate array."""
        return self._layout.chunk_keys(coords)

    def _stored_chunks(self):
        """Grid coordinates of the chunks present in the store (within the current grid)."""
        return self._layout.stored_chunks()

    # ------------------------------------------------------------------ task running
    def _schedule(self, plan, keys=None):
        """(keys, order, groups): the touched chunks' keys, the order to process them in, and
        where shard groups start in that order (None when unsharded).

        Inner chunks of one shard are processed together, so that a write covering a whole
        shard stores it in one go and a read fetches its byte ranges in one batch."""
        coords = plan.chunk_coords()
        if keys is None:
            keys = self._chunk_keys(coords)
        per = self._layout.chunks_per_shard
        if (per is None or len(keys) < 2
                or scheduling.one_batch(len(keys), self._codec.nbytes)):
            return keys, range(len(keys)), None  # (in one batch the order does not matter)
        per = np.array(per, dtype=np.int64)
        sid = coords // per
        order = np.lexsort(sid.T[::-1]) if sid.shape[1] else np.arange(len(keys))
        sorted_sid = sid[order]
        starts = np.flatnonzero(np.any(np.diff(sorted_sid, axis=0) != 0, axis=1)) + 1
        return keys, order.tolist(), [0] + starts.tolist()

    def _run(self, n, work, groups=None):
        """Run work(lo, hi) over [0, n) in batches (see chunkstore.scheduling). With groups
        (sorted start positions), batch ends are moved to group boundaries."""
        scheduling.run(n, work, self._codec.nbytes, groups, serial=self._is_object)

    def _locked(self, sel, keys=None):
        """What a write of the selection sel must hold for all of it (see chunkstore.sync
        and chunkstore.locking): the chunks it touches; or, for a zarr-style synchronizer,
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

    # ------------------------------------------------------------------ read path
    def _read_ortho(self, plan, dest):
        """Fill dest (shape plan.sel_shape, array dtype) with the selection."""
        n = plan.nchunks
        if n == 0:
            return
        keys, seq, groups = self._schedule(plan)
        chunks, order, codec = self._chunks, self.order, self._codec
        direct = not self._is_object and not codec.filters
        obj = self._is_object

        fast = getattr(codec, "fast", None)
        # Uncompressed chunks that land whole in dest go from the file straight into it.
        read_into = (getattr(self._chunk_store, "read_into", None)
                     if fast is not None and fast.raw else None)
        src = prefetch(self._chunk_store, [keys[i] for i in seq], codec.nbytes)

        def work(lo, hi):
            idx = seq[lo:hi]
            if read_into is not None:
                idx = self._read_into(plan, idx, keys, dest, read_into)
            got = getitems(src, [keys[i] for i in idx])
            buf = None  # one decode buffer per batch, reused chunk after chunk
            todo_i, todo_d = [], []
            for i in idx:
                k = keys[i]
                data = got.pop(k, None)  # drop encoded bytes as soon as they are used
                if data is None:
                    self._missing(k)
                    if obj:
                        dest[plan.selections(i)[1]] = self.fill_value
                    else:
                        merge.fill(plan, i, dest, self._fill_item)
                    continue
                if fast is not None:
                    todo_i.append(i)
                    todo_d.append(data)
                    continue
                view = merge.out_block(plan, i, dest, chunks, order) if direct else None
                if view is not None:
                    self._decode(data, k, out=view)
                    continue
                if obj:
                    chunk = self._decode(data, k)
                    csel, osel = plan.selections(i)
                    dest[osel] = chunk[csel]
                    continue
                if buf is None and not codec.check_stored(data, k, self._store):
                    chunk = self._decode(data, k)  # size unknown until decoded: no buffer
                else:
                    if buf is None:
                        buf = scheduling.take_scratch(chunks, self.dtype, order)
                    chunk = self._decode(data, k, out=buf)
                merge.gather(plan, i, chunk, dest)
            if buf is not None:
                scheduling.give_scratch(buf)
            if todo_i:
                self._fast_decode(plan, todo_i, todo_d, dest, keys)
        self._run_io(n, work, groups, src)

    def _run_io(self, n, work, groups, src, sink=None, flush=True):
        """_run, then the requests a prefetching src or write-behind sink still holds are
        dropped (after an error) or waited for (writes; flush=False leaves them in flight
        for the caller to wait for)."""
        try:
            self._run(n, work, groups)
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

    def _read_into(self, plan, idx, keys, dest, read_into):
        """Read the chunks of idx that the selection takes whole straight from their files
        into dest (store.read_into: preadv into the strided region); the rest, and any the
        store did not take, are returned for the ordinary path."""
        from chunkstore._core.zcodecs import whole_block
        rest, views, took = [], [], []
        for i in idx:
            v = whole_block(plan, i, dest, self._chunks)
            if v is not None and self.order == "F":
                v = v.T         # the file holds the chunk in F order: C order of the transpose
            if v is None:
                rest.append(i)
            else:
                views.append(v)
                took.append(i)
        if took:
            for i, status in zip(took, read_into([keys[i] for i in took], views)):
                if status != 0:
                    rest.append(i)
        return rest

    def _fast_decode(self, plan, idx, datas, dest, keys, points=False):
        """The chunks of a batch decoded and merged in one GIL-free call (the codec's batch
        path, chunkstore.codecs.fastpath). A chunk the kernel does not take goes through the
        codec, which decodes it or raises the proper error for it."""
        for data, i in zip(datas, idx):  # a no-op for chunks of ordinary size
            self._codec.check_stored(data, keys[i], self._store)
        scratch = scheduling.take_scratch(self._chunks, self.dtype, self.order)
        fast = self._codec.fast
        kernel = fast.decode_points if points else fast.decode
        gather = merge.gather_points if points else merge.gather
        pos = 0
        while pos < len(idx):
            failed = kernel(plan, idx[pos:], datas[pos:], dest, scratch)
            if failed < 0:
                break
            k = pos + failed
            chunk = self._decode(datas[k], keys[idx[k]], out=scratch)
            gather(plan, idx[k], chunk, dest)
            pos = k + 1
        scheduling.give_scratch(scratch)  # (not on error: the buffer is simply dropped)

    def _read_points(self, plan, flat):
        n = plan.nchunks
        keys, seq, groups = self._schedule(plan)

        fast = getattr(self._codec, "fast", None)
        src = prefetch(self._chunk_store, [keys[g] for g in seq], self._codec.nbytes)

        def work(lo, hi):
            idx = seq[lo:hi]
            got = getitems(src, [keys[g] for g in idx])
            todo_i, todo_d = [], []
            for g in idx:
                data = got.pop(keys[g], None)
                if data is None:
                    self._missing(keys[g])
                    if self._is_object:
                        flat[plan.selections(g)[1]] = self.fill_value
                    else:
                        merge.fill_points(plan, g, flat, self._fill_item)
                    continue
                if fast is not None:
                    todo_i.append(g)
                    todo_d.append(data)
                    continue
                chunk = self._decode(data, keys[g])
                if self._is_object:
                    csel, pts = plan.selections(g)
                    flat[pts] = chunk[csel]
                else:
                    merge.gather_points(plan, g, chunk, flat)
            if todo_i:
                self._fast_decode(plan, todo_i, todo_d, flat, keys, points=True)
        self._run_io(n, work, groups, src)

    def _get(self, sel, out=None, fields=None):
        self._refresh()
        dtype = self.dtype
        rdtype = dtype if fields is None else _field_dtype(dtype, fields)
        direct_out = (out is not None and fields is None and sel.post is None)
        if out is not None:
            if not isinstance(out, np.ndarray):
                raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
            if out.shape != sel.shape:
                raise ValueError(f"out has shape {out.shape}, but the selection has shape "
                                 f"{sel.shape}")
            if out.dtype != rdtype:
                raise ValueError(f"out has dtype {out.dtype}, expected {rdtype}")
            if not out.flags.writeable:
                raise ValueError("out is read-only")
        if sel.kind == "ortho":
            if direct_out:
                buf = np.expand_dims(out, sel.drop) if sel.drop else out
            else:
                # F-ordered arrays read back F-ordered, as in zarr-python 2.
                buf = np.empty(sel.plan.sel_shape, dtype=dtype, order=self.order)
            self._read_ortho(sel.plan, buf)
            # (Ellipsis keeps a 0-d array, not a scalar, when every axis is dropped.)
            result = buf[tuple(0 if d in sel.drop else slice(None)
                               for d in range(self.ndim)) + (Ellipsis,)] if sel.drop else buf
            result = _apply_post(result, sel.post)
        else:
            if direct_out and out.flags.c_contiguous:
                flat = out.reshape(-1)
            else:
                flat = np.empty(sel.plan.npoints, dtype=dtype)
                direct_out = False
            self._read_points(sel.plan, flat)
            result = flat.reshape(sel.shape)
        if fields is not None:
            result = _select_fields(result, fields)
        if out is not None:
            if not direct_out:
                out[...] = result
            return out
        if sel.scalar:
            return result[()]
        return result

    # ------------------------------------------------------------------ write path
    def _prepare_value(self, value, shape, fields=None):
        """Convert value to the array dtype and check it broadcasts, before any I/O."""
        dtype = self.dtype if fields is None else _field_dtype(self.dtype, fields)
        if isinstance(value, Array):
            value = value[...]
        shape = tuple(shape)
        if dtype.subdtype is not None:
            # A sub-array field: values carry the field's own trailing dimensions.
            dtype, sub = dtype.subdtype
            shape = shape + sub
        if dtype.kind == "O" and not shape and not (isinstance(value, np.ndarray) and
                                                   value.ndim == 0):
            # One element of an object array: the value itself (a list, an ndarray) is the
            # element, as in NumPy.
            v = np.empty((), dtype=object)
            v[()] = value
            return v
        try:
            v = np.asarray(value, dtype=dtype)
        except (ValueError, TypeError) as e:
            if dtype.kind == "O":
                return self._object_elements(value, shape)
            raise type(e)(f"cannot store value in array {self.name!r} of dtype {dtype}: {e}") \
                from e
        while v.ndim > len(shape) and v.shape[0] == 1:
            v = v[0]
        if v.ndim:
            try:
                ok = np.broadcast_shapes(v.shape, shape) == shape
            except ValueError:
                ok = False
            if not ok:
                if dtype.kind == "O":
                    return self._object_elements(value, shape)
                raise ValueError(f"could not broadcast value of shape {v.shape} to selection "
                                 f"of shape {shape} in array {self.name!r}")
        return v

    def _object_elements(self, value, shape):
        """value as an object array of the selection's shape by NumPy's own assignment rule
        (sequences that do not broadcast become elements, e.g. one list per element)."""
        v = np.empty(shape, dtype=object)
        try:
            v[...] = value
        except (ValueError, TypeError) as e:
            raise ValueError(f"could not store value in selection of shape {shape} in array "
                             f"{self.name!r}: {e}") from e
        return v

    def _set(self, sel, value, fields=None):
        self._check_writable()
        self._refresh()
        v = self._prepare_value(value, sel.shape, fields)
        if fields is not None:
            # Structured field write: read the selection, update the fields, write back.
            with self._locked(sel):
                cur = np.array(self._get(sel), dtype=self.dtype, copy=True)
                if len(fields) == 1:
                    cur[fields[0]] = v
                else:
                    for f in fields:
                        cur[f] = v[f]
                self._set_prepared(sel, cur, locked=True)
            return
        self._set_prepared(sel, v)

    def _touched_keys(self, sel):
        return self._chunk_keys(sel.plan.chunk_coords())

    def _set_prepared(self, sel, v, locked=False):
        post = sel.post
        if post is not None and post[0] == "index":
            # Mixed fancy assignment: read the orthogonal box, assign in memory, write it.
            box = ix.Selection("ortho", sel.plan, tuple(
                n for d, n in enumerate(sel.plan.sel_shape) if d not in sel.drop), sel.drop)
            with (contextlib.nullcontext() if locked else self._locked(sel)):
                cur = np.array(self._get(box), copy=True)
                cur[post[1]] = v
                self._set_prepared(box, cur, locked=True)
            return
        if post is not None and post[0] == "transpose":
            v = np.broadcast_to(v, sel.shape).transpose(np.argsort(post[1]))
        elif post is not None and post[0] == "newaxis":
            v = np.broadcast_to(v, sel.shape).reshape(
                tuple(n for d, n in enumerate(sel.plan.sel_shape) if d not in sel.drop))
        keys = self._touched_keys(sel)
        split = None if locked else self._split_locks(sel)
        with (contextlib.nullcontext() if locked else split[0] if split
              else self._locked(sel, keys)):
            if sel.kind == "ortho":
                self._write_ortho(sel.plan, keys, v, sel.drop, split and split[1])
            else:
                self._write_points(sel.plan, keys, v, sel.shape)

    def _store_chunks(self, to_set, to_del, sink=None):
        if to_set:
            store_items(self._chunk_store, sink, to_set)
        if to_del:
            delitems(self._chunk_store, to_del)

    def _finish_chunk(self, key, chunk, to_set, to_del):
        if (not self._write_empty_chunks and not self._is_object
                and merge.is_all_fill(chunk, self._fill_item)):
            to_del.append(key)
        else:
            to_set[key] = self._codec.encode(chunk)

    def _edges(self, coords):
        """For each row of chunk grid coordinates: does the chunk reach past the array's end
        (so its part outside the array must hold the fill value)?"""
        if coords.shape[1] == 0:
            return np.zeros(len(coords), dtype=np.uint8)
        over = (coords + 1) * np.asarray(self._chunks, dtype=np.int64) > np.asarray(
            self.shape, dtype=np.int64)
        return over.any(axis=1).view(np.uint8)

    def _write_ortho(self, plan, keys, v, drop, partial_locks=None):
        n = plan.nchunks
        if n == 0:
            return
        full = plan.full_mask()
        edge = self._edges(plan.chunk_coords())
        # chunks that start as fill when nothing is stored: partly covered or at the edge
        prefill = (edge.astype(bool) | ~full).view(np.uint8)
        scalar = v.ndim == 0
        value = np.broadcast_to(np.expand_dims(v, drop) if drop and v.ndim else v,
                                plan.sel_shape)
        # A scalar covering interior chunks: every such chunk encodes to the same bytes.
        shared = None
        if scalar and not self._is_object and full.any():
            if not self._write_empty_chunks and merge.is_all_fill(v.reshape(1), self._fill_item):
                shared = None
            else:
                c = np.empty(self._chunks, dtype=self.dtype, order=self.order)
                c[...] = v
                shared = self._codec.encode(c)
        scalar_is_fill = scalar and not self._is_object and shared is None and full.any()
        errors_first = self._is_object  # object encoders may fail on values: encode all first
        # The chunks of an array with a batch path (Blosc, zstd, gzip, zlib, raw) are decoded
        # (if partly covered and stored), merged with the value and encoded in one GIL-free
        # call a batch.
        fast = None if self._is_object else getattr(self._codec, "fast", None)
        if fast is not None and not fast.can_encode:
            fast = None

        _, seq, groups = self._schedule(plan, keys)
        split = partial_locks is not None and groups is None and not errors_first
        # (a split write reads each partial chunk only once it holds that chunk's lock)
        src = self._chunk_store if split else prefetch(
            self._chunk_store, [keys[i] for i in seq if not full[i]], self._codec.nbytes)
        sink = None if errors_first else write_behind(self._chunk_store)

        def work(lo, hi):
            idx = seq[lo:hi]
            need = [keys[i] for i in idx if not full[i]]
            existing = getitems(src, need) if need else {}
            to_set, to_del = {}, []
            todo, olds = [], []
            for i in idx:
                k = keys[i]
                if full[i] and scalar and not edge[i] and not self._is_object:
                    if scalar_is_fill:
                        to_del.append(k)
                    else:
                        to_set[k] = shared
                    continue
                if fast is not None:
                    todo.append(i)
                    olds.append(None if full[i] else existing.get(k))
                    continue
                if full[i]:
                    chunk = self._new_chunk() if edge[i] else np.empty(
                        self._chunks, dtype=self.dtype, order=self.order)
                else:
                    data = existing.get(k)
                    chunk = (self._new_chunk() if data is None
                             else self._decode(data, k, writable=True))
                if self._is_object:
                    csel, osel = plan.selections(i)
                    chunk[csel] = value[osel]
                else:
                    merge.scatter(plan, i, value, chunk)
                self._finish_chunk(k, chunk, to_set, to_del)
            if todo:
                self._fast_encode(plan, todo, olds, value, keys, prefill, to_set, to_del)
            if errors_first:
                return to_set, to_del
            self._store_chunks(to_set, to_del, sink)

        if split:
            # The partly covered chunks under their chunk locks, around the whole ones:
            # those of the first chunk row before, the rest after, so that slabs of rows
            # sharing an edge row of chunks do not need it at the same time. (Only when
            # all partial chunks are in the first or last of at least three rows: another
            # write touching both groups then also touches a whole chunk, held throughout.)
            coords = plan.chunk_coords()
            part = ~full
            rows = coords[:, 0] if coords.shape[1] else np.zeros(n, np.int64)
            first = part & (rows == rows.min())
            if not (rows.max() - rows.min() >= 2
                    and np.all(first | ~part | (rows == rows.max()))):
                first[:] = False

            def step(locked):
                # Partial chunks are fetched only now (under their locks), and every PUT of
                # a locked step lands (or raises) before its locks are released.
                nonlocal src
                src = prefetch(self._chunk_store, [keys[i] for i in seq if not full[i]],
                               self._codec.nbytes)
                self._run_io(len(seq), work, None, src, sink, flush=locked)

            try:
                for sub in (first, None, part & ~first):
                    seq = np.flatnonzero(full if sub is None else sub).tolist()
                    if seq and sub is None:
                        step(False)
                    elif seq:
                        with partial_locks(coords[seq]):
                            step(True)
            except BaseException:
                if sink is not None:  # no write may land after the call returned
                    with contextlib.suppress(Exception):
                        sink.flush()
                raise
            if sink is not None:
                sink.flush()
            return
        if errors_first:
            try:
                results = [work(lo, min(n, lo + scheduling.MAX_BATCH))
                           for lo in range(0, n, scheduling.MAX_BATCH)]
            finally:
                if src is not self._chunk_store:
                    src.close()
            for to_set, to_del in results:
                self._store_chunks(to_set, to_del)
        else:
            self._run_io(n, work, groups, src, sink)

    def _fast_encode(self, plan, idx, olds, value, keys, prefill, to_set, to_del):
        """Chunks idx (olds: their stored bytes where partly covered, else None) merged with
        value and encoded in one GIL-free call (the codec's batch path). A chunk the kernel
        cannot decode or encode goes through the codec, which raises the proper error for
        it (or takes data the kernel does not)."""
        scratch = scheduling.take_scratch(self._chunks, self.dtype, self.order)
        drop = not self._write_empty_chunks
        fast = self._codec.fast
        pos = 0
        while pos < len(idx):
            out = []
            failed = fast.encode(plan, idx[pos:], value, scratch, prefill, olds[pos:],
                                 self._fill_item, drop, out)
            for i, data in zip(idx[pos:], out):
                if data is None:
                    to_del.append(keys[i])
                else:
                    to_set[keys[i]] = data
            if failed < 0:
                break
            i, old = idx[pos + failed], olds[pos + failed]
            chunk = (self._new_chunk() if old is None
                     else self._decode(old, keys[i], writable=True))
            merge.scatter(plan, i, value, chunk)
            self._finish_chunk(keys[i], chunk, to_set, to_del)
            pos += failed + 1
        scheduling.give_scratch(scratch)

    def _write_points(self, plan, keys, v, shape):
        flat = np.ascontiguousarray(np.broadcast_to(v, shape)).reshape(-1)
        n = plan.nchunks
        results = []

        _, seq, groups = self._schedule(plan)

        src = prefetch(self._chunk_store, [keys[g] for g in seq], self._codec.nbytes)

        def work(lo, hi):
            idx = seq[lo:hi]
            existing = getitems(src, [keys[g] for g in idx])
            to_set, to_del = {}, []
            for g in idx:
                k = keys[g]
                data = existing.get(k)
                chunk = self._new_chunk() if data is None else self._decode(data, k, writable=True)
                if self._is_object:
                    csel, pts = plan.selections(g)
                    chunk[csel] = flat[pts]
                else:
                    merge.scatter_points(plan, g, flat, chunk)
                self._finish_chunk(k, chunk, to_set, to_del)
            if self._is_object:
                results.append((to_set, to_del))
            else:
                self._store_chunks(to_set, to_del)
        self._run_io(n, work, groups, src)
        for to_set, to_del in results:
            self._store_chunks(to_set, to_del)

    # ------------------------------------------------------------------ public get/set
    def __getitem__(self, selection):
        fields, selection = ix.split_fields(selection)
        sel = ix.basic_or_fancy(selection, self.shape, self.chunks, self.name)
        return self._get(sel, fields=fields)

    def __setitem__(self, selection, value):
        if isinstance(value, Array) and self._stream_from(selection, value):
            return
        fields, selection = ix.split_fields(selection)
        sel = ix.basic_or_fancy(selection, self.shape, self.chunks, self.name)
        self._set(sel, value, fields=fields)

    def _stream_from(self, selection, src):
        """self[selection] = src (an Array) block by block, in bounded memory, when the
        selection is a box of step-1 slices of src's shape (chunkstore.streaming). False
        when it is not: the caller then reads src whole."""
        from chunkstore import streaming
        self._check_writable()
        box = streaming.slice_box(selection, self.shape)
        if box is None or tuple(b - a for a, b in box) != tuple(src.shape):
            return False
        if src._path == self._path and (src._store is self._store or (
                not isinstance(self._store, MemoryStore) and src._store == self._store)):
            # src reads the chunks this write stores (a view of this array, say
            # z[10:] = z.view(shape=...)): block by block, later blocks would read values
            # already overwritten. Read it whole first, as NumPy does for overlapping copies.
            return False
        streaming.assign(self, box, src)
        return True

    def get_basic_selection(self, selection=Ellipsis, out=None, fields=None):
        sel = ix.basic_or_fancy(selection, self.shape, self.chunks, self.name)
        return self._get(sel, out=out, fields=_fields(fields))

    def set_basic_selection(self, selection, value, fields=None):
        if isinstance(value, Array) and fields is None and self._stream_from(selection, value):
            return
        sel = ix.basic_or_fancy(selection, self.shape, self.chunks, self.name)
        self._set(sel, value, fields=_fields(fields))

    def get_orthogonal_selection(self, selection, out=None, fields=None):
        sel = ix.orthogonal(selection, self.shape, self.chunks, self.name)
        return self._get(sel, out=out, fields=_fields(fields))

    def set_orthogonal_selection(self, selection, value, fields=None):
        sel = ix.orthogonal(selection, self.shape, self.chunks, self.name)
        self._set(sel, value, fields=_fields(fields))

    def get_coordinate_selection(self, selection, out=None, fields=None):
        sel = ix.coordinate(selection, self.shape, self.chunks, self.name)
        return self._get(sel, out=out, fields=_fields(fields))

    def set_coordinate_selection(self, selection, value, fields=None):
        sel = ix.coordinate(selection, self.shape, self.chunks, self.name)
        self._set(sel, value, fields=_fields(fields))

    def get_mask_selection(self, selection, out=None, fields=None):
        sel = ix.mask(selection, self.shape, self.chunks, self.name)
        return self._get(sel, out=out, fields=_fields(fields))

    def set_mask_selection(self, selection, value, fields=None):
        sel = ix.mask(selection, self.shape, self.chunks, self.name)
        self._set(sel, value, fields=_fields(fields))

    def get_block_selection(self, selection, out=None, fields=None):
        sel = ix.block(selection, self.shape, self.chunks, self.name)
        return self._get(sel, out=out, fields=_fields(fields))

    def set_block_selection(self, selection, value, fields=None):
        sel = ix.block(selection, self.shape, self.chunks, self.name)
        self._set(sel, value, fields=_fields(fields))

    @property
    def oindex(self):
        return _Indexer(self, self.get_orthogonal_selection, self.set_orthogonal_selection)

    @property
    def vindex(self):
        return _Indexer(self, self._get_vectorized, self._set_vectorized)

    @property
    def blocks(self):
        return _Indexer(self, self.get_block_selection, self.set_block_selection)

    def _get_vectorized(self, selection, fields=None):
        sel = ix.vectorized(selection, self.shape, self.chunks, self.name)
        return self._get(sel, fields=_fields(fields))

    def _set_vectorized(self, selection, value, fields=None):
        sel = ix.vectorized(selection, self.shape, self.chunks, self.name)
        self._set(sel, value, fields=_fields(fields))

    # ------------------------------------------------------------------ shape changes
    def resize(self, *shape):
        """Change the shape. Chunks wholly outside the new shape are deleted, and the cut-off
        part of boundary chunks is reset to the fill value, so growing again shows fill."""
        self._check_writable()
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        bad = [s for s in shape if not ix._is_int(s)]
        if bad:  # int(5.5) would truncate and delete the chunks past it
            raise TypeError(f"new shape {tuple(shape)} of array {self.name!r} must be "
                            f"integers, got {bad[0]!r} ({type(bad[0]).__name__})")
        new = tuple(int(s) for s in shape)
        if len(new) != self.ndim:
            raise ValueError(f"new shape {new} has {len(new)} dimensions; array {self.name!r} "
                             f"has {self.ndim}")
        if any(s < 0 for s in new):
            raise ValueError(f"new shape {new} has a negative dimension")
        with self._exclusive():
            self._load_metadata()
            old = self.shape
            chunks = self.chunks
            # The new shape first: a trim that fails halfway then leaves stale chunks past
            # the end (invisible), never an old shape whose chunks are partly deleted. The
            # stored chunks are listed before, while the grid still covers them.
            shrink = any(n < o for n, o in zip(new, old))
            plan = self._trim_plan(old, new, chunks) if shrink else None
            self._write_metadata(self._layout.resized(new))
            if shrink:
                try:
                    self._trim_chunks(old, new, chunks, plan)
                except BaseException as e:
                    e.add_note(f"array {self.name!r} has its new shape {new}, but chunks past "
                               f"it may remain: growing it again could show their old values")
                    raise

    def _trim_plan(self, old, new, chunks):
        """(keys of the stored chunks wholly past ``new``, coords of those it cuts)."""
        stale, cut = [], []
        for c in self._stored_chunks():
            starts = [ci * L for ci, L in zip(c, chunks)]
            if any(s >= n for s, n in zip(starts, new)):
                stale.append(self._chunk_key(c))
            elif any(s + L > n and n < o for s, L, n, o in zip(starts, chunks, new, old)):
                cut.append(c)
        return stale, cut

    def _trim_chunks(self, old, new, chunks, plan=None):
        stale, cut = plan if plan is not None else self._trim_plan(old, new, chunks)
        delitems(self._chunk_store, stale)
        for c in cut:  # the caller holds the array's exclusive lock
            k = self._chunk_key(c)
            try:
                data = self._chunk_store[k]
            except KeyError:
                continue
            chunk = self._decode(data, k, writable=True)
            for d, (ci, L, n) in enumerate(zip(c, chunks, new)):
                if ci * L + L > n:
                    idx = [slice(None)] * self.ndim
                    idx[d] = slice(n - ci * L, None)
                    chunk[tuple(idx)] = (self.fill_value if self._is_object
                                         else self._fill_item.reshape(()))
            to_set, to_del = {}, []
            self._finish_chunk(k, chunk, to_set, to_del)
            self._store_chunks(to_set, to_del)

    def append(self, data, axis=0):
        """Append data along axis; returns the new shape."""
        self._check_writable()
        data = np.asanyarray(data)
        shape = self.shape
        if data.ndim != self.ndim:
            raise ValueError(f"cannot append data with {data.ndim} dimensions to array "
                             f"{self.name!r} with {self.ndim}")
        axis = axis + self.ndim if axis < 0 else axis
        if not 0 <= axis < self.ndim:
            raise ValueError(f"axis {axis} is out of range for array {self.name!r} with "
                             f"{self.ndim} dimensions")
        for d in range(self.ndim):
            if d != axis and data.shape[d] != shape[d]:
                raise ValueError(f"cannot append data of shape {data.shape} to array of shape "
                                 f"{shape} along axis {axis}: dimension {d} differs")
        data = np.asarray(data, dtype=self.dtype) if not self._is_object else data
        # Hold the array's exclusive lock across resize and write: parallel appends never
        # interleave, and each sees the shape the previous one left.
        with self._exclusive():
            self._load_metadata()
            shape = self.shape
            new = tuple(s + data.shape[d] if d == axis else s for d, s in enumerate(shape))
            old_meta = self._meta
            self._write_metadata(self._layout.resized(new))
            region = tuple(slice(shape[d], new[d]) if d == axis else slice(None)
                           for d in range(self.ndim))
            sel = ix.basic_or_fancy(region, new, self.chunks, self.name)
            # An append lands whole or not at all: keep the chunks it shares with the old
            # shape (the boundary layer) as stored, to put back if the write fails.
            coords = sel.plan.chunk_coords()
            touched = self._chunk_keys(coords)
            saved = getitems(self._chunk_store, self._chunk_keys(
                coords[coords[:, axis] * self.chunks[axis] < shape[axis]]))
            try:
                self._set_prepared(sel, self._prepare_value(data, sel.shape), locked=True)
            except BaseException as e:
                self._roll_back_append(old_meta, touched, saved, e)
                raise
        return new

    def _roll_back_append(self, old_meta, touched, saved, error):
        """Undo a failed append: delete the chunks it created (first, as that frees space on
        a full disk), restore the old shape, then the boundary chunks' old bytes."""
        try:
            delitems(self._chunk_store, [k for k in touched if k not in saved])
            self._write_metadata(old_meta)
            if saved:
                setitems(self._chunk_store, saved)
        except Exception as e2:
            error.add_note(f"rolling back the append of array {self.name!r} to shape "
                           f"{old_meta.shape} also failed: {e2!r}")


def _object_fill(meta):
    """The fill value of an object array as its elements are: for vlen-bytes the JSON
    string is base64 (zarr-python 3 writes it so); anything else is the JSON value."""
    fill = meta.fill_value
    codec_id = getattr(meta.filters[0], "codec_id", None) if meta.filters else None
    if codec_id == "vlen-bytes" and isinstance(fill, str):
        import base64
        import binascii
        try:
            return base64.standard_b64decode(fill.encode("ascii"))
        except (binascii.Error, UnicodeEncodeError):
            return fill.encode("utf-8")
    return fill


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


def _replace_meta(meta, **changes):
    import dataclasses
    return dataclasses.replace(meta, **changes)


def _fields(fields):
    if fields is None:
        return None
    return [fields] if isinstance(fields, str) else list(fields)


def _field_dtype(dtype, fields):
    if dtype.names is None:
        raise IndexError(f"field selection {fields!r} needs a structured dtype, not {dtype}")
    for f in fields:
        if f not in dtype.names:
            raise IndexError(f"no field {f!r} in dtype {dtype}; fields are {dtype.names}")
    if len(fields) == 1:
        return dtype[fields[0]]
    return np.dtype([(f, dtype[f]) for f in fields])


def _select_fields(a, fields):
    if len(fields) == 1:
        return a[fields[0]]
    out = np.empty(a.shape, dtype=_field_dtype(a.dtype, fields))
    for f in fields:
        out[f] = a[f]
    return out


def _apply_post(a, post):
    if post is None:
        return a
    kind, arg = post
    if kind == "newaxis":
        return a.reshape(arg)
    if kind == "transpose":
        return a.transpose(arg)
    return a[arg]


class _Indexer:
    __slots__ = ("_array", "_get", "_set")

    def __init__(self, array, get, set_):
        self._array, self._get, self._set = array, get, set_

    def __getitem__(self, selection):
        fields, selection = ix.split_fields(selection)
        return self._get(selection, fields=fields)

    def __setitem__(self, selection, value):
        fields, selection = ix.split_fields(selection)
        self._set(selection, value, fields=fields)


class Info:
    """The `.info` report: a table of name/value rows (text, and HTML in Jupyter)."""

    def __init__(self, items):
        self.items = items

    def __repr__(self):
        w = max(len(k) for k, _ in self.items)
        return "\n".join(f"{k:<{w}} : {v}" for k, v in self.items)

    def _repr_html_(self):
        import html
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                       for k, v in self.items)
        return f"<table class='chunkstore-info'><tbody>{rows}</tbody></table>"
