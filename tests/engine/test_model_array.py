"""Model-based test (issue 25): chunkstore arrays and a NumPy model, driven side by side.

A hypothesis RuleBasedStateMachine draws, once per run, a format (Zarr v2, v3, sharded v3),
a store (memory, directory, zip, SQLite, LMDB, LRUStoreCache over a directory, FSStore on a
unique memory:// root), a dtype (bool, i1, u2, i4, i8, f4, f8, c8, and for v2 S3, U2; str,
an object array, in both), a fill value (zero, non-zero, NaN for floats), an order, a
compressor (or none), write_empty_chunks, a synchronizer (none, ThreadSynchronizer,
ProcessSynchronizer), a path inside the store, a small shape (1-3 dims of 0-12) with small
chunks (and shards that are multiples of them). It keeps 1-3 open handles on the array (some
with cache_metadata=True, some False; handle 0 always False) and runs random steps:

- writes of random selections (basic ints/slices with any step, oindex with int and bool
  arrays, vindex coordinates, masks, NumPy fancy indexing mixing index arrays with slices)
  with full values, scalars and broadcastable values;
- reads of random selections through any handle, compared with the model;
- resize (grow and shrink: cut-off data is gone, a new region is the fill value, README
  "Shape changes") and append along an axis, through any handle;
- on the memory store, a resize whose n-th chunk write or delete fails (a shrink's trim,
  or the completion of a trim an earlier failure left pending): the shape it sets or the
  old one stands, and the later grows and reads show the model's data, never old values;
- reads through lazy views of handle 0 (``view()``, ``view(fill_value=...)``: missing
  chunks read as the view's fill value; ``astype("f8")`` of a numeric Zarr v2 array), and
  writes through its views of a smaller shape (the rest of the array is kept);
- a new fill value set through any handle (zarr-python 2's ``fill_value`` setter): stored
  chunks keep their values, elements of missing chunks read as the new fill value from
  then on (through handles that read the metadata again; the other cached-metadata handles
  are opened again, as what they read is their old fill there);
- opening, closing and reopening handles (from the same store object, or from the store's
  path/URL where that makes a second store object on the same data, or from the path/URL
  of a directory below it that holds the array; with or without the zarr_format hint), and
  opening with the other zarr_format (refused).

What a handle whose cached metadata another handle changed must do (README "What is safe",
cache_metadata): reads keep its old shape, and must give the model's data where that shape
and the array's overlap and the fill value beyond (a shrink deletes or resets what it cut
off), or raise: never other data. Writes: with a synchronizer, or without one when every
metadata change since the handle was opened went through handles sharing its in-process
locks (one store object or location), its write is planned again with the array's shape, so
it must do exactly what NumPy does to the model (including refusing a selection that no
longer fits); other stale handles are not written through (nothing promises where their
writes land). Append through it: data shaped for the array as it is now is appended; data
of its old shape (another dimension differs) is a ValueError that changes nothing.

Invariants after every step: every handle's full read is as above. The stored chunks are
exactly the chunks holding a non-fill element (write_empty_chunks=False, bytewise, NaN
matching a NaN fill), or the chunks ever written and still inside the shape
(write_empty_chunks=True); nchunks_initialized counts them. While a failed trim is pending
(its marker, chunkstore.engine.trim, is stored) boundary chunks may be stored besides; with
no marker, nothing is stored past the chunk grid.

CI cost: 40 programs of up to 25 steps per format (about 10 s on a 2-core machine). Soak mode runs
new examples until a time budget is spent:

    CHUNKSTORE_SOAK=600 .venv/bin/python -m pytest tests/test_model_array.py -x -q

(CHUNKSTORE_SOAK=<seconds>, split between the three formats; each round runs more, longer
programs than CI does, and failures are shrunk. CHUNKSTORE_SHRINK=1 shrinks in CI mode too.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import weakref

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import chunkstore as cs
from faults import NthChunk, faulty_memory_store
from model_support import (assert_exact, close_quietly, draw_basic, draw_ortho, draw_slice,
                           grid, is_fill, model_settings, ortho_ix, random_values,
                           run_machine)

CI_SETTINGS = model_settings(40, 25)
SOAK_SETTINGS = model_settings(200, 50)

FORMATS = ["v2", "v3", "v3-sharded"]
STORES = ["memory", "directory", "zip", "sqlite", "lmdb", "lru", "fsspec_memory"]
# dtype -> candidate fill values (the first is the format's default-like zero)
DTYPES = {
    "|b1": [False, True],
    "|i1": [0, -3],
    "<u2": [0, 7],
    "<i4": [0, -5],
    "<i8": [0, 2**40],
    "<f4": [0.0, 1.5, np.nan],
    "<f8": [0.0, -2.25, np.nan],
    "<c8": [0, complex(1, -1)],
    "|S3": [b"", b"ab"],
    "<U2": ["", "q"],
    "str": ["", "ab"],   # variable-length strings: an object array (VLenUTF8 / v3 string)
}
# Zarr v3 has no fixed-width strings here (a "U" dtype becomes the variable-length string
# type, an object array): strings are drawn for v2 only.
V3_DTYPES = [d for d in DTYPES if d not in ("|S3", "<U2")]
MAX_DIM = 12


# ---------------------------------------------------------------------------- helpers
def chunk_coords_of(points, chunks):
    """Set of chunk coordinates holding the given element coordinates ((n, ndim) array)."""
    if len(points) == 0:
        return set()
    cc = points // np.asarray(chunks, dtype=np.int64)
    return set(map(tuple, np.unique(cc, axis=0).tolist()))


# ---------------------------------------------------------------------------- selections
def ortho_shape(sel, shape):
    ix, drop = ortho_ix(sel, shape)
    target = np.empty(shape, dtype=bool)[ix].shape
    return target, tuple(n for d, n in enumerate(target) if d not in drop)


def draw_coords(draw, shape, unique=False):
    if not all(shape):
        return None
    k = draw(st.integers(0, 10))
    pts = [tuple(draw(st.integers(-n, n - 1)) for n in shape) for _ in range(k)]
    if unique:
        seen, out = set(), []
        for p in pts:
            q = tuple(x % n for x, n in zip(p, shape))
            if q not in seen:
                seen.add(q)
                out.append(p)
        pts = out
    arrs = [np.array([p[d] for p in pts], dtype=np.int64) for d in range(len(shape))]
    if len(pts) == 6 and draw(st.booleans()):
        arrs = [a.reshape(2, 3) for a in arrs]   # a 2-d coordinate selection
    return tuple(arrs)


def draw_fancy(draw, shape, unique):
    """NumPy advanced indexing through z[...]: index arrays (same length) and ints in some
    dimensions, slices in the others; None when not possible."""
    if not all(shape) or len(shape) < 1:
        return None
    k = draw(st.integers(1, 4))
    kinds = [draw(st.sampled_from(["array", "slice", "int"])) for _ in shape]
    if "array" not in kinds:
        kinds[draw(st.integers(0, len(shape) - 1))] = "array"
    arr_dims = [d for d, t in enumerate(kinds) if t == "array"]
    cols = {}
    for d in arr_dims:
        n = shape[d]
        cols[d] = [draw(st.integers(-n, n - 1)) for _ in range(k)]
    if unique:
        seen, keep = set(), []
        for i in range(k):
            q = tuple(cols[d][i] % shape[d] for d in arr_dims)
            if q not in seen:
                seen.add(q)
                keep.append(i)
        cols = {d: [c[i] for i in keep] for d, c in cols.items()}
    sel = []
    for d, (n, t) in enumerate(zip(shape, kinds)):
        if t == "array":
            sel.append(np.array(cols[d], dtype=np.int64))
        elif t == "int":
            sel.append(draw(st.integers(-n, n - 1)))
        else:
            sel.append(draw_slice(draw, n))
    return tuple(sel)


# ---------------------------------------------------------------------------- stores
class StoreMaker:
    """Makes the run's store, and (where that is a second object on the same data) another
    store object on it, as a reopen from the path or URL would."""

    def __init__(self, kind, tmpdir):
        self.kind = kind
        self.tmpdir = tmpdir
        self.url = None
        self.extra = []
        if kind == "memory":
            # (a MemoryStore that fails the writes or deletes store.fail picks, when asked)
            self.store = faulty_memory_store()
        elif kind == "directory":
            self.url = os.path.join(tmpdir, "d.zarr")
            self.store = cs.DirectoryStore(self.url)
        elif kind == "zip":
            self.store = cs.ZipStore(os.path.join(tmpdir, "s.zip"), mode="a")
        elif kind == "sqlite":
            self.url = os.path.join(tmpdir, "s.sqlite")
            self.store = cs.SQLiteStore(self.url)
        elif kind == "lmdb":
            self.store = cs.LMDBStore(os.path.join(tmpdir, "s.lmdb"))
        elif kind == "lru":
            # small: entries are evicted during a run; handles share the one cache object
            # (a second cache over the same directory is not kept coherent, by design)
            self.store = cs.LRUStoreCache(cs.DirectoryStore(os.path.join(tmpdir, "l.zarr")),
                                          max_size=2048)
        elif kind == "fsspec_memory":
            self.url = f"memory://chunkstore-model-{uuid.uuid4().hex}"
            self.store = cs.FSStore(self.url)
        else:
            raise ValueError(kind)

    def source(self, fresh):
        """What to pass to open_array: the run's store object, or its path/URL (a new store
        object on the same data) when fresh is asked for and the kind allows it."""
        if fresh and self.url is not None:
            return self.url
        return self.store

    def close(self):
        close_quietly([self.store] + self.extra)
        if self.kind == "fsspec_memory":
            import fsspec
            fs = fsspec.filesystem("memory")
            root = self.url[len("memory://"):]
            try:
                if fs.exists(root):
                    fs.rm(root, recursive=True)
            except Exception:
                pass


# ---------------------------------------------------------------------------- machine
class ArrayMachine(RuleBasedStateMachine):
    formats = FORMATS
    dtypes = list(DTYPES)

    def __init__(self):
        super().__init__()
        self.ready = False
        self.tmpdir = None
        self.maker = None
        self.handles = []   # [(Array, cache_metadata)]

    # ------------------------------------------------------------------ set-up
    @initialize(data=st.data())
    def setup(self, data):
        draw = data.draw
        fmt = draw(st.sampled_from(self.formats), label="format")
        dname = draw(st.sampled_from(self.dtypes if fmt == "v2" else
                                     [d for d in self.dtypes if d in V3_DTYPES]),
                     label="dtype")
        dtype = np.dtype(object if dname == "str" else dname)
        fill = draw(st.sampled_from(DTYPES[dname]), label="fill")
        order = draw(st.sampled_from("CF"), label="order")
        kind = draw(st.sampled_from(STORES), label="store")
        compress = draw(st.booleans(), label="compressor")
        wec = draw(st.booleans(), label="write_empty_chunks")
        path = draw(st.sampled_from(["", "a", "g/arr"]), label="path")
        ndim = draw(st.integers(1, 3), label="ndim")
        shape = tuple(draw(st.integers(0, MAX_DIM)) for _ in range(ndim))
        chunks = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
        shards = None
        if fmt == "v3-sharded":
            shards = tuple(c * draw(st.integers(1, 3)) for c in chunks)
        sync_kind = draw(st.sampled_from([None, "thread", "process"]), label="synchronizer")
        threads = draw(st.sampled_from([1, 2]), label="threads")
        self.seed = draw(st.integers(0, 2**32 - 1), label="seed")
        self.rng = np.random.default_rng(self.seed)
        cs.config.set(threads=threads)

        self.tmpdir = tempfile.mkdtemp(prefix="cs-model-")
        self.maker = StoreMaker(kind, self.tmpdir)
        self.sync = {None: None, "thread": cs.ThreadSynchronizer(),
                     "process": cs.ProcessSynchronizer(os.path.join(self.tmpdir, "locks"))
                     }[sync_kind]
        self.fmt, self.dtype, self.fill, self.wec = fmt, dtype, fill, wec
        self.path, self.chunks, self.shards = path, chunks, shards
        self.zarr_format = 2 if fmt == "v2" else 3
        self.config_text = (f"format={fmt} dtype={dname} fill={fill!r} order={order} "
                            f"store={kind} "
                            f"compressor={compress} write_empty_chunks={wec} path={path!r} "
                            f"shape={shape} chunks={chunks} shards={shards} "
                            f"synchronizer={sync_kind}")
        z = cs.create(shape, chunks=chunks, dtype=str if dname == "str" else dtype,
                      fill_value=fill, order=order,
                      compressor="default" if compress else None, store=self.maker.store,
                      path=path, zarr_format=self.zarr_format, shards=shards,
                      write_empty_chunks=wec, cache_metadata=False, synchronizer=self.sync)
        self.handles = [(z, False)]
        # more handles on the array from the start (cached metadata or not): the runs that
        # matter most resize through one while another holds the old shape
        for _ in range(draw(st.integers(0, 2), label="extra handles")):
            cache = draw(st.booleans(), label="cache_metadata")
            self.handles.append((self._open(cache, draw(st.booleans(), label="fresh"),
                                            nested=draw(st.integers(0, 2), label="nested")),
                                 cache))
        self.model = np.full(shape, fill, dtype=dtype)
        self.fill_arr = np.full((), fill, dtype=dtype)
        self.touched = set()           # chunks written (write_empty_chunks=True)
        # chunks stored when the fill value last changed and not rewritten since: they may
        # hold nothing but the new fill value (write_empty_chunks=False keeps them)
        self.legacy = set()
        self.dname = dname
        self.history = {shape}         # every shape the array has had
        # the in-process locks of the handle behind each metadata change (resize, append,
        # fill value), and how many changes there were when each handle was opened
        self.changes = []
        self.born = {id(h): 0 for h, _ in self.handles}
        # handles opened through consolidated metadata (weak references, compared by
        # identity: an id may be reused by a later handle, and Array == compares locations)
        self.snapshots = []
        self.ready = True

    def teardown(self):
        self.handles = []
        if self.maker is not None:
            self.maker.close()
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        cs.config.set(threads=None)

    # ------------------------------------------------------------------ handles
    def _open(self, cache, fresh, hint=False, nested=0):
        src, path = self.maker.source(fresh), self.path
        if nested and self.path and self.maker.kind in ("directory", "fsspec_memory"):
            # from the store of a directory (prefix) below the store's root: the array at
            # "g/arr" opened as "arr" of "<root>/g", or as the root of "<root>/g/arr" (one
            # array, whose handles share their in-process locks: protocol.node_location)
            parts = self.path.split("/")
            k = min(nested, len(parts))
            src, path = self.maker.url + "/" + "/".join(parts[:k]), "/".join(parts[k:])
        h = cs.open_array(src, mode="r+", path=path, cache_metadata=cache,
                          write_empty_chunks=self.wec, synchronizer=self.sync,
                          zarr_format=self.zarr_format if hint else None)
        if not isinstance(src, str) or h.store is not self.maker.store:
            self.maker.extra.append(h.store)
        if getattr(self, "ready", False):
            self.born[id(h)] = len(self.changes)
        return h

    def _knows_every_change(self, h):
        """Without a synchronizer: were all metadata changes since h was opened made through
        handles sharing h's in-process locks? Then a write through h, stale or not, finds
        them under its locks and plans again (README "What is safe")."""
        mine = h._handle.options.locks
        return all(c is mine for c in self.changes[self.born.get(id(h), 0):])

    def _changed_through(self, h):
        self.changes.append(h._handle.options.locks)

    def _current(self):
        """Handles whose shape is the array's shape (writes go through these)."""
        return [i for i, (h, _) in enumerate(self.handles) if h.shape == self.model.shape]

    @precondition(lambda self: self.ready and len(self.handles) < 3)
    @rule(cache=st.booleans(), fresh=st.booleans(), hint=st.booleans(),
          nested=st.integers(0, 2))
    def open_handle(self, cache, fresh, hint, nested):
        self.handles.append((self._open(cache, fresh, hint, nested), cache))

    @precondition(lambda self: self.ready and len(self.handles) > 1)
    @rule(data=st.data())
    def close_handle(self, data):
        i = data.draw(st.integers(1, len(self.handles) - 1))
        del self.handles[i]

    @precondition(lambda self: self.ready)
    @rule(data=st.data(), cache=st.booleans(), fresh=st.booleans(), hint=st.booleans(),
          nested=st.integers(0, 2))
    def reopen(self, data, cache, fresh, hint, nested):
        i = data.draw(st.integers(0, len(self.handles) - 1))
        if i == 0:
            cache = False   # handle 0 always sees the current shape
        self.handles[i] = (self._open(cache, fresh, hint, nested), cache)

    @precondition(lambda self: self.ready and len(self.handles) < 3 and self.path
                  and self.maker.kind in ("memory", "directory", "sqlite", "lmdb"))
    @rule(fresh=st.booleans())
    def open_through_consolidated_metadata(self, fresh):
        """A handle from open_consolidated(mode="r+"): the consolidated snapshot of the
        metadata is its cached metadata, and writes through it after a change made beside it
        must go by the stored metadata as any stale handle's (README "What is safe")."""
        src = self.maker.source(fresh)
        cs.consolidate_metadata(src)
        view = cs.open_consolidated(src, mode="r+", synchronizer=self.sync).store
        h = cs.Array(view, path=self.path, synchronizer=self.sync,
                     write_empty_chunks=self.wec)
        self.born[id(h)] = len(self.changes)
        self.snapshots.append(weakref.ref(h))
        self.handles.append((h, True))

    @precondition(lambda self: self.ready)
    @rule(fresh=st.booleans())
    def open_with_the_other_format_is_refused(self, fresh):
        """zarr_format binds when opening: the array is not found as the other format."""
        other = 3 if self.zarr_format == 2 else 2
        with pytest.raises((FileNotFoundError, ValueError)):
            cs.open_array(self.maker.source(fresh), mode="r", path=self.path,
                          zarr_format=other)

    def _pick(self, data, current_only, changes_metadata=False):
        choices = self._current() if current_only else list(range(len(self.handles)))
        if changes_metadata:  # (a consolidated snapshot's handle refuses metadata changes)
            choices = [i for i in choices
                       if not any(r() is self.handles[i][0] for r in self.snapshots)]
        if not choices:
            choices = [0]
        return self.handles[data.draw(st.sampled_from(choices), label="handle")][0]

    # ------------------------------------------------------------------ writes
    def _value(self, data, sel_shape):
        form = data.draw(st.sampled_from(["full", "full", "scalar", "broadcast"]),
                         label="value form")
        if form == "scalar" or (self.dtype.kind == "O" and sel_shape == ()):
            # (an object array element is any object: for one element, a Python str)
            v = random_values(self.rng, self.dtype, ())
            return v[()] if self.dtype.kind == "O" else v
        if form == "broadcast" and sel_shape:
            k = data.draw(st.integers(0, len(sel_shape)))    # drop k leading dims
            vshape = list(sel_shape[k:])
            for d in range(len(vshape)):
                if data.draw(st.booleans()):
                    vshape[d] = 1
            return random_values(self.rng, self.dtype, tuple(vshape))
        return random_values(self.rng, self.dtype, sel_shape)

    def _mark_touched(self, np_index):
        """Record the chunks holding the elements that np_index selects from the model."""
        shape = self.model.shape
        ids = np.arange(self.model.size, dtype=np.int64).reshape(shape)[np_index]
        ids = np.unique(np.asarray(ids).reshape(-1))
        pts = np.stack(np.unravel_index(ids, shape), axis=1) if ids.size else \
            np.zeros((0, len(shape)), np.int64)
        coords = chunk_coords_of(pts, self.chunks)
        self.touched |= coords
        self.legacy -= coords

    def _draw_write(self, data, how, shape):
        """(selection, value) of a write of kind how, drawn for an array of shape; None
        when there is no such selection."""
        if how == "basic":
            sel = draw_basic(data.draw, shape)
            sel_shape = np.shape(np.empty(shape, dtype=bool)[sel])
        elif how == "oindex":
            sel = draw_ortho(data.draw, shape)
            sel_shape = ortho_shape(sel, shape)[1]
        elif how == "vindex":
            sel = draw_coords(data.draw, shape)
            if sel is None:
                return None
            sel_shape = sel[0].shape
        elif how == "mask":
            size = int(np.prod(shape))
            sel = np.array(data.draw(st.lists(st.booleans(), min_size=size, max_size=size)),
                           dtype=bool).reshape(shape)
            sel_shape = (int(sel.sum()),)
        else:
            sel = draw_fancy(data.draw, shape, unique=True)
            if sel is None:
                return None
            sel_shape = np.empty(shape, dtype=bool)[sel].shape
        return sel, self._value(data, sel_shape)

    @staticmethod
    def _apply(model, how, sel, value):
        """model[selection] = value as NumPy does it (IndexError/ValueError where the
        selection does not fit model's shape or the value does not broadcast). Returns the
        NumPy index of the elements written."""
        if how == "oindex":
            ix, drop = ortho_ix(sel, model.shape)
            target = model[ix].shape
            sel_shape = tuple(n for d, n in enumerate(target) if d not in drop)
            model[ix] = np.broadcast_to(value, sel_shape).reshape(target)
            return ix
        if how == "mask" and sel.shape != model.shape:
            # a mask selection is a mask of the array's shape (NumPy alone lets an empty
            # boolean index through for any length)
            raise IndexError(f"mask of shape {sel.shape} for an array of {model.shape}")
        model[sel] = value
        return sel

    @staticmethod
    def _library_write(h, how, sel, value):
        if how in ("basic", "fancy"):
            h[sel] = value
        elif how == "oindex":
            h.oindex[sel] = value
        else:
            h.vindex[sel] = value

    @precondition(lambda self: self.ready)
    @rule(data=st.data(), how=st.sampled_from(["basic", "oindex", "vindex", "mask", "fancy"]))
    def write(self, data, how):
        # With a synchronizer any handle may write: one that missed another handle's resize
        # plans the write again with the array's shape (README "What is safe"), i.e. the
        # selection means what NumPy makes of it on the array as it is now, and a selection
        # that no longer fits raises. Without one, handles that know the shape write, and
        # stale ones that share in-process locks with the handles behind every change since
        # they were opened (they plan again as synchronized ones do).
        if self.sync is None:
            choices = [i for i, (h, _) in enumerate(self.handles)
                       if h.shape == self.model.shape or self._knows_every_change(h)] or [0]
            h = self.handles[data.draw(st.sampled_from(choices), label="handle")][0]
        else:
            h = self._pick(data, current_only=False)
        hshape = h.shape
        stale = hshape != self.model.shape
        drawn = self._draw_write(data, how, hshape)
        if drawn is None:
            return
        sel, value = drawn
        new = self.model.copy()
        try:
            np_index = self._apply(new, how, sel, value)
            numpy_error = None
        except (IndexError, ValueError) as e:
            numpy_error = e
            assert stale, ("a selection drawn for the array's shape", e)
        try:
            self._library_write(h, how, sel, value)
        except Exception:
            if numpy_error is None:
                raise
            return      # refused, as NumPy refuses it on the array's shape; nothing written
        assert numpy_error is None, (f"a write through a handle of shape {hshape} succeeded "
                                     f"though its selection does not fit the array's shape "
                                     f"{self.model.shape}: {numpy_error}; {self.config_text}")
        self.model = new
        self._mark_touched(np_index)

    @precondition(lambda self: self.ready and 0 not in self.model.shape)
    @rule(data=st.data(), how=st.sampled_from(["basic", "oindex", "vindex", "mask", "fancy"]))
    def write_through_a_smaller_view(self, data, how):
        """A write through handle 0's view(shape=...) no larger than the array: what it
        selects in the view's region changes as NumPy changes it, every other element of the
        array keeps its value (a view whose grid ends inside a chunk or a shard keeps the
        array's data past its end: a sharded array's shards were rebuilt without it)."""
        h = self.handles[0][0]
        vshape = tuple(data.draw(st.integers(1, n), label="view dim")
                       for n in self.model.shape)
        drawn = self._draw_write(data, how, vshape)
        if drawn is None:
            return
        sel, value = drawn
        region = tuple(slice(0, n) for n in vshape)
        sub = self.model[region].copy()
        np_index = self._apply(sub, how, sel, value)
        self._library_write(h.view(shape=vshape), how, sel, value)
        self.model[region] = sub
        ids = np.arange(self.model.size, dtype=np.int64).reshape(self.model.shape)[region]
        self._mark_touched(np.unravel_index(np.unique(np.asarray(ids[np_index]).ravel()),
                                            self.model.shape))

    # ------------------------------------------------------------------ reads
    def _view(self, shape):
        """What a handle that knows the array as shape must read: the model where shape and
        the array's shape overlap, the fill value beyond (a shrink deletes or resets what it
        cut off, README "Shape changes"; a stale handle's reads are not planned again)."""
        if shape == self.model.shape:
            return self.model
        expected = np.full(shape, self.fill, dtype=self.dtype)
        common = tuple(slice(0, min(a, b)) for a, b in zip(shape, self.model.shape))
        expected[common] = self.model[common]
        return expected

    @precondition(lambda self: self.ready)
    @rule(data=st.data(), how=st.sampled_from(["basic", "oindex", "vindex", "mask", "fancy"]))
    def read(self, data, how):
        i = data.draw(st.integers(0, len(self.handles) - 1), label="handle")
        h, cache = self.handles[i]
        shape = h.shape
        stale = shape != self.model.shape
        assert cache or not stale, (i, shape, self.model.shape)
        view = self._view(shape)
        if how == "basic":
            sel = draw_basic(data.draw, shape)
            read, expected = (lambda: h[sel]), (lambda: view[sel])
        elif how == "oindex":
            sel = draw_ortho(data.draw, shape)

            def expected():
                ix, drop = ortho_ix(sel, shape)
                exp = view[ix]
                return exp.reshape([n for d, n in enumerate(exp.shape) if d not in drop])
            read = lambda: h.oindex[sel]  # noqa: E731
        elif how in ("vindex", "mask"):
            if how == "vindex":
                sel = draw_coords(data.draw, shape)
                if sel is None:
                    return
            else:
                size = int(np.prod(shape))
                sel = np.array(data.draw(st.lists(st.booleans(), min_size=size,
                                                  max_size=size)), dtype=bool).reshape(shape)
            read, expected = (lambda: h.vindex[sel]), (lambda: view[sel])
        else:
            sel = draw_fancy(data.draw, shape, unique=False)
            if sel is None:
                return
            read, expected = (lambda: h[sel]), (lambda: view[sel])
        exp = expected()
        try:
            got = read()
        except Exception:
            if stale:
                return      # a stale handle may raise instead (never return other data)
            raise
        assert_exact(got, exp, f"{how} read {sel!r} through handle {i} (shape {shape}, "
                               f"array {self.model.shape}); {self.config_text}")

    @precondition(lambda self: self.ready)
    @rule(data=st.data(), kind=st.sampled_from(["view", "fill", "astype"]))
    def read_through_a_view(self, data, kind):
        h = self.handles[0][0]          # (cache_metadata=False: the array's shape)
        shape = self.model.shape
        if kind == "view":
            v, expected = h.view(), self.model
        elif kind == "fill":
            choices = [f for f in DTYPES[self.dname]
                       if not is_fill(np.full((), f, dtype=self.dtype), self.fill_arr)]
            if not choices or self.dtype.kind == "O":
                return
            vfill = data.draw(st.sampled_from(choices), label="view fill")
            v = h.view(fill_value=vfill)
            stored = set(map(tuple, h.layout.stored_chunks()))
            expected = self.model.copy()
            if expected.size:
                idx = np.indices(shape).reshape(len(shape), -1).T
                missing = np.array([tuple(c) not in stored for c in
                                    (idx // np.asarray(self.chunks)).tolist()]
                                   ).reshape(shape)
                expected[missing] = np.full((), vfill, dtype=self.dtype)
        else:
            if self.fmt != "v2" or self.dtype.kind not in "iuf":
                return
            v, expected = h.astype("f8"), self.model.astype("f8")
        sel = draw_basic(data.draw, shape)
        assert_exact(v[sel], expected[sel], f"{kind} view read {sel!r}; {self.config_text}")
        assert_exact(v[...], expected, f"{kind} view full read; {self.config_text}")

    # ------------------------------------------------------------------ shape changes
    @precondition(lambda self: self.ready)
    @rule(data=st.data())
    def resize(self, data):
        # (resize reads the current shape itself)
        h = self._pick(data, current_only=False, changes_metadata=True)
        new = tuple(data.draw(st.integers(0, MAX_DIM)) for _ in self.model.shape)
        h.resize(*new)
        self._changed_through(h)
        self._resized(new)

    @precondition(lambda self: self.ready and self.maker.kind == "memory")
    @rule(data=st.data(), op=st.sampled_from(["set", "del"]), n=st.integers(1, 3))
    def resize_under_a_fault(self, data, op, n):
        # The n-th chunk write or delete of a resize fails: of a shrink's trim (after the
        # new shape is written: it stands, stale values may lie past it) or of completing
        # one an earlier failure left (before: nothing changes). Either way the invariants
        # and every later grow must show the model's data (README "Shape changes").
        h = self._pick(data, current_only=False, changes_metadata=True)
        new = tuple(data.draw(st.integers(0, MAX_DIM)) for _ in self.model.shape)
        store = self.maker.store
        store.fail = NthChunk(op, n)
        try:
            h.resize(*new)
        except OSError:
            pass
        finally:
            store.fail = lambda op, key: False
        self._changed_through(h)
        now = self.handles[0][0].shape      # (cache_metadata=False: as stored)
        assert now in (self.model.shape, new), (now, self.model.shape, new)
        if now == new:
            self._resized(new)

    def _resized(self, new):
        old = self.model
        self.model = np.full(new, self.fill, dtype=self.dtype)
        common = tuple(slice(0, min(a, b)) for a, b in zip(old.shape, new))
        self.model[common] = old[common]
        self.touched = {c for c in self.touched
                        if all(ci * ch < n for ci, ch, n in zip(c, self.chunks, new))}
        # (a chunk the new shape cuts is rewritten: it is legacy no more)
        self.legacy = {c for c in self.legacy
                       if all((ci + 1) * ch <= n for ci, ch, n in zip(c, self.chunks, new))}
        self.history.add(new)

    @precondition(lambda self: self.ready)
    @rule(data=st.data())
    def set_fill_value(self, data):
        # Through any handle (the setter reads the metadata again under the array's lock)
        # but one of consolidated metadata's (it refuses metadata changes)
        h = self._pick(data, current_only=False, changes_metadata=True)
        choices = [f for f in DTYPES[self.dname]
                   if not is_fill(np.full((), f, dtype=self.dtype), self.fill_arr)]
        if not choices:
            return
        new = data.draw(st.sampled_from(choices), label="new fill")
        h.fill_value = new
        self._changed_through(h)
        stored = set(map(tuple, self.handles[0][0].layout.stored_chunks()))
        # elements of chunks not stored read as the new fill value; stored ones keep theirs
        if self.model.size:
            idx = np.indices(self.model.shape).reshape(len(self.model.shape), -1).T
            missing = np.array([tuple(c) not in stored for c in
                                (idx // np.asarray(self.chunks)).tolist()]
                               ).reshape(self.model.shape)
            self.model[missing] = np.full((), new, dtype=self.dtype)
        self.fill = new
        self.fill_arr = np.full((), new, dtype=self.dtype)
        self.legacy = stored
        # cached-metadata handles other than h know the old fill value: opened again
        for j, (other, cache) in enumerate(self.handles):
            if cache and other is not h:
                self.handles[j] = (self._open(True, False), True)

    @precondition(lambda self: self.ready)
    @rule(data=st.data())
    def append(self, data):
        # append reads the shape again (under the array's lock) and checks the data against
        # it: through any handle, data shaped for the array as it is now goes at its end,
        # and data shaped for a handle's stale shape (another dimension differs) is a
        # ValueError that changes nothing (it was broadcast into the new columns).
        h = self._pick(data, current_only=False, changes_metadata=True)
        hshape = h.shape
        shape = self.model.shape
        axis = data.draw(st.integers(0, len(shape) - 1))
        k = data.draw(st.integers(1, 4))
        if shape[axis] + k > MAX_DIM + 4:
            return
        neg = data.draw(st.booleans())
        if any(a != b for d, (a, b) in enumerate(zip(hshape, shape)) if d != axis) and \
                data.draw(st.booleans(), label="data of the handle's stale shape"):
            stale = tuple(k if d == axis else n for d, n in enumerate(hshape))
            with pytest.raises(ValueError, match="differs"):
                h.append(random_values(self.rng, self.dtype, stale),
                         axis=axis - len(shape) if neg else axis)
            return
        vshape = tuple(k if d == axis else n for d, n in enumerate(shape))
        value = random_values(self.rng, self.dtype, vshape)
        got = h.append(value, axis=axis - len(shape) if neg else axis)
        self._changed_through(h)
        self.model = np.concatenate([self.model, value], axis=axis)
        assert tuple(got) == self.model.shape
        region = tuple(slice(shape[d], None) if d == axis else slice(None)
                       for d in range(len(shape)))
        self._mark_touched(region)
        self.history.add(self.model.shape)

    # ------------------------------------------------------------------ invariants
    @invariant()
    def every_handle_reads_the_model(self):
        if not self.ready:
            return
        for i, (h, cache) in enumerate(self.handles):
            hs = h.shape
            if hs == self.model.shape:
                assert_exact(h[...], self.model, f"handle {i} (cache_metadata={cache}) "
                                                 f"full read; {self.config_text}")
                continue
            # Only a cached-metadata handle may have a shape that is no longer the array's,
            # and only one the array had.
            assert cache, (i, hs, self.model.shape, self.config_text)
            assert hs in self.history, (i, hs, self.history)
            try:
                got = h[...]
            except Exception:
                continue        # the documented alternative to the model's data
            expected = np.full(hs, self.fill, dtype=self.dtype)
            common = tuple(slice(0, min(a, b)) for a, b in zip(hs, self.model.shape))
            expected[common] = self.model[common]
            assert_exact(got, expected, f"stale handle {i} shape {hs} (array "
                                        f"{self.model.shape}); {self.config_text}")

    @invariant()
    def stored_chunks_match(self):
        if not self.ready:
            return
        h = self.handles[0][0]
        shape = self.model.shape
        g = grid(shape, self.chunks)
        nonfill = set()
        if self.model.size:
            notfill = ~is_fill(self.model, self.fill_arr)
            pts = np.argwhere(notfill)
            nonfill = chunk_coords_of(pts, self.chunks)
        stored = set(map(tuple, h.layout.stored_chunks()))
        if self.wec:
            expected = set(self.touched)
            # non-fill chunks are always among the written ones
            assert nonfill <= expected, (nonfill - expected, self.config_text)
        else:
            expected = nonfill
        expected = {c for c in expected if all(x < n for x, n in zip(c, g))}
        if not self.wec:
            # chunks stored before the fill value changed may hold only the new one
            expected |= stored & self.legacy
        if (h.path + "/" if h.path else "") + ".chunkstore-trim" in h.store:
            # a failed trim pending: boundary chunks it did not reset may be stored too
            expected |= {c for c in stored
                         if any((x + 1) * ch > n for x, ch, n in zip(c, self.chunks, shape))}
        else:
            # no marker: nothing is stored past the grid (a grow would show it)
            step = h.write_chunks
            assert h.layout.listed_extent() == tuple(-(-n // w) * w for n, w in
                                                     zip(shape, step)), self.config_text
        assert stored == expected, (f"stored extra {sorted(stored - expected)}, missing "
                                    f"{sorted(expected - stored)}; {self.config_text}")
        assert h.nchunks_initialized == len(expected)


def _machine(fmt):
    return type(f"ArrayMachine_{fmt.replace('-', '_')}", (ArrayMachine,), {"formats": [fmt]})


@pytest.mark.parametrize("fmt", FORMATS)
def test_array_model(fmt):
    """One format per test (so each gets its examples); soak: all, until the time is spent."""
    run_machine(_machine(fmt), CI_SETTINGS, SOAK_SETTINGS, len(FORMATS))


@pytest.fixture(autouse=True)
def _restore_threads():
    yield
    cs.config.set(threads=None)


# ---------------------------------------------------------------------------- found by it
@pytest.mark.parametrize("kind", ["memory", "directory", "fsspec_memory"])
def test_cached_index_of_a_shard_deleted_since(tmp_path, kind):
    """A handle caches a shard's index, in which the inner chunk it reads is absent; another
    handle then deletes the shard (its last stored chunk goes back to the fill value). The
    next read through the first handle must give the fill value, not KeyError (found by the
    machine above: DirectoryStore)."""
    store = {"memory": cs.MemoryStore(), "directory": str(tmp_path / "a.zarr"),
             "fsspec_memory": f"memory://chunkstore-model-{uuid.uuid4().hex}"}[kind]
    a = cs.create_array(store, shape=(4,), chunks=(1,), shards=(2,), dtype="i2",
                        compressors=None)
    a[3] = 7                        # shard c/1 holds inner chunk 3 only
    b = cs.open_array(store, mode="r+")
    assert b[2] == 0                # b caches c/1's index: chunk 2 absent
    a[3] = 0                        # chunk 3 back to fill: shard c/1 is deleted
    assert b[2] == 0
    np.testing.assert_array_equal(b[...], [0, 0, 0, 0])
