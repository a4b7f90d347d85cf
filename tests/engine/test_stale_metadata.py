"""A handle's cached metadata (cache_metadata=True, the default) is never trusted for a
synchronized write: under the write's locks the stored metadata is checked, and a write whose
handle missed another handle's resize is planned again with the new shape (issue 25)."""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np
import pytest

import chunkstore as cs
from faults import ReadCounting
from model_support import DictMapping, call_timeout


def syncs(tmp_path):
    return {"thread": cs.ThreadSynchronizer(),
            "process": cs.ProcessSynchronizer(str(tmp_path / "locks"))}


@pytest.mark.parametrize("kind", ["thread", "process"])
@pytest.mark.parametrize("fmt", ["v2", "v3", "sharded"])
def test_a_write_through_a_handle_that_missed_an_append(tmp_path, kind, fmt):
    sync = syncs(tmp_path)[kind]
    path = str(tmp_path / "a.zarr")
    kw = {"v2": dict(zarr_format=2), "v3": {}, "sharded": dict(shards=(8,))}[fmt]
    a = cs.create_array(path, shape=(6,), chunks=(4,), dtype="i4", synchronizer=sync, **kw)
    a[...] = 1
    b = cs.open_array(path, mode="r+", synchronizer=sync)
    b.append(np.array([7, 7], dtype="i4"))
    # a still knows shape (6,): its edge chunk 4..8 looks whole to it, and writing it whole
    # would clear b's appended 7s
    a[4:6] = 5
    np.testing.assert_array_equal(b[...], [1, 1, 1, 1, 5, 5, 7, 7])
    assert a.shape == (8,)  # a planned the write again with the new metadata
    a.oindex[[0, 7]] = 3
    a.vindex[[1]] = 4
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[...],
                                  [3, 4, 1, 1, 5, 5, 7, 3])


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_a_write_past_the_new_end_after_another_handle_shrank(tmp_path, kind):
    sync = syncs(tmp_path)[kind]
    path = str(tmp_path / "a.zarr")
    a = cs.create_array(path, shape=(12,), chunks=(4,), dtype="i4", synchronizer=sync)
    a[...] = 1
    cs.open_array(path, mode="r+", synchronizer=sync).resize((6,))
    with pytest.raises(IndexError):
        a[10] = 5  # outside the array now: refused, no chunk written past the end
    assert not os.path.exists(os.path.join(path, "c", "2"))
    a[5] = 5
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[...], [1, 1, 1, 1, 1, 5])


def test_attribute_updates_by_another_handle_do_not_replan(tmp_path, monkeypatch):
    from chunkstore.engine import chunk_io as array_chunks
    sync = cs.ThreadSynchronizer()
    path = str(tmp_path / "a.zarr")
    a = cs.create_array(path, shape=(4,), chunks=(2,), dtype="i4", synchronizer=sync)
    cs.open_array(path, mode="r+", synchronizer=sync).attrs["x"] = 1
    seen = []
    real = array_chunks.EngineState.check_metadata

    def check(self):
        try:
            real(self)
        except array_chunks.MetadataChanged:
            seen.append(1)
            raise

    monkeypatch.setattr(array_chunks.EngineState, "check_metadata", check)
    a[...] = 2
    assert not seen
    np.testing.assert_array_equal(a[...], 2)


@pytest.mark.parametrize("shards", [None, (4,)])
def test_threads_and_tasks_sharing_a_handle_that_reloads_its_metadata(shards):
    # cache_metadata=False: every operation reloads the metadata; a reload used to replace
    # the chunk store under the other threads' operations, one of which then "closed" the
    # (sharded) chunk store view it had not made: AttributeError. Found by
    # tests/storage/test_remote_shared_model.py.
    import asyncio
    import threading
    store = cs.MemoryStore()
    cs.create_array(store, shape=(8,), chunks=(2,), shards=shards, dtype="u1",
                    fill_value=0)[...] = 1
    h = cs.open_array(store, mode="r", cache_metadata=False)
    errors = []

    def reads():
        try:
            for _ in range(500):
                assert h[0] == 1 and (h[:] == 1).all()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=reads) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    a = cs.AsyncArray(h)

    async def main():
        for _ in range(100):
            got = await asyncio.gather(*(a.getitem(slice(None)) for _ in range(4)))
            assert all((g == 1).all() for g in got)
    asyncio.run(main())
    # a change is still seen: another handle's resize
    cs.open_array(store, mode="r+").resize((10,))
    assert h.shape == (10,) and (h[:8] == 1).all() and (h[8:] == 0).all()


# ------------------------------------------------------------- one metadata per operation
# Two documents for one array at path "a": A with (10, 10) chunks under "." keys, B with
# (5, 20) chunks under "/" keys, each with its own chunks holding the same values. Whichever
# an operation reads, it must plan, read and write with that one throughout: a read that
# normalizes its selection with A and decodes with B returns wrong values (it did, with
# cache_metadata=False: the shape was read, then the read reloaded the metadata).

VALUES = np.arange(20 * 20, dtype="i4").reshape(20, 20)


class _Served(cs.MemoryStore):
    """A MemoryStore whose "a/.zarray" reads as docs[0] the first time, docs[1] after
    (when docs is set); counts those reads."""

    def __init__(self):
        super().__init__()
        self.docs = None
        self.reads = 0

    def __getitem__(self, key):
        if self.docs is not None and key == "a/.zarray":
            self.reads += 1
            return self.docs[0] if self.reads == 1 else self.docs[1]
        return super().__getitem__(key)


def _two_layouts(store):
    """Write A at "a" and B's chunks beside them; returns (doc A, doc B)."""
    a = cs.open_array(store, path="a", mode="w", shape=(20, 20), chunks=(10, 10), dtype="i4",
                      dimension_separator=".", fill_value=-1)
    a[...] = VALUES
    b = cs.open_array(store, path="b", mode="w", shape=(20, 20), chunks=(5, 20), dtype="i4",
                      dimension_separator="/", fill_value=-1)
    b[...] = VALUES
    for k in [k for k in store if k.startswith("b/") and not k.endswith(".zarray")]:
        store["a/" + k[2:]] = store[k]
    return store["a/.zarray"], store["b/.zarray"]


@pytest.mark.parametrize("how", ["basic", "oindex", "vindex", "blocks", "get_basic", "iter"])
def test_a_read_uses_the_metadata_it_started_with(how):
    store = _Served()
    doc_a, doc_b = _two_layouts(store)
    h = cs.open_array(store, path="a", mode="r", cache_metadata=False)
    want = {"basic": VALUES[3:17, 2:19], "oindex": VALUES[np.ix_([1, 12, 18], [0, 7, 19])],
            "vindex": VALUES[[1, 12, 18], [0, 7, 19]], "blocks": VALUES[10:20, 0:10],
            "get_basic": VALUES[3:17, 2:19], "iter": VALUES[:10]}[how]
    for first, then in ((doc_a, doc_b), (doc_b, doc_a)):
        store.docs, store.reads = (first, then), 0
        got = {"basic": lambda: h[3:17, 2:19],
               "oindex": lambda: h.oindex[[1, 12, 18], [0, 7, 19]],
               "vindex": lambda: h.vindex[[1, 12, 18], [0, 7, 19]],
               "blocks": lambda: h.blocks[1, 0],
               "get_basic": lambda: h.get_basic_selection((slice(3, 17), slice(2, 19))),
               "iter": lambda: np.array(list(h)[:10])}[how]()
        if how == "blocks" and first is doc_b:
            want = VALUES[5:10, :]  # block (1, 0) of B's (5, 20) chunks
        np.testing.assert_array_equal(got, want)
    # one metadata request per read (it was two: a round trip more on S3)
    store.docs, store.reads = (doc_a, doc_a), 0
    h[0, 0]
    assert store.reads == 1


def test_a_write_uses_the_metadata_it_started_with():
    store = _Served()
    doc_a, doc_b = _two_layouts(store)
    h = cs.open_array(store, path="a", mode="r+", cache_metadata=False)
    store.docs, store.reads = (doc_a, doc_b), 0
    h[3:17, 2:19] = 7
    assert store.reads == 1
    want = VALUES.copy()
    want[3:17, 2:19] = 7
    # A's chunks hold the write whole; B's are as they were
    for doc, values in ((doc_a, want), (doc_b, VALUES)):
        store.docs, store.reads = (doc, doc), 0
        np.testing.assert_array_equal(cs.open_array(store, path="a", mode="r")[...], values)


def test_reads_while_another_writer_swaps_the_array_layout():
    # The document flips between A and B (as an array re-created with other chunks by
    # another process would, here with both layouts' chunks always present): every read
    # through a cache_metadata=False handle sees one of them whole, never a mix.
    import threading
    store = cs.MemoryStore()
    doc_a, doc_b = _two_layouts(store)
    h = cs.open_array(store, path="a", mode="r", cache_metadata=False)
    stop = threading.Event()
    errors = []

    def flip():
        while not stop.is_set():
            for doc in (doc_b, doc_a):
                store["a/.zarray"] = doc

    def reads():
        try:
            for i in range(300):
                y, x = i % 7, (3 * i) % 9
                np.testing.assert_array_equal(h[y:y + 11, x:x + 9],
                                              VALUES[y:y + 11, x:x + 9])
                np.testing.assert_array_equal(h.oindex[[y, 19], [x, 13]],
                                              VALUES[np.ix_([y, 19], [x, 13])])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    flipper = threading.Thread(target=flip)
    readers = [threading.Thread(target=reads) for _ in range(2)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads take turns often: the flips land mid-read
    try:
        flipper.start()
        for t in readers:
            t.start()
        for t in readers:
            t.join()
    finally:
        stop.set()
        flipper.join()
        sys.setswitchinterval(interval)
    assert errors == []


@pytest.mark.parametrize("kind", [None, "thread", "process"])
@pytest.mark.parametrize("fmt", ["v2", "v3", "sharded"])
def test_a_consolidated_handle_writes_by_the_stored_metadata_not_its_snapshot(tmp_path, kind,
                                                                              fmt):
    """A member opened through open_consolidated(mode="r+") holds the consolidated
    snapshot of its metadata. After another handle appended (without a synchronizer: one
    of this process, sharing its locks; with one: any), a write into the old edge chunk
    must not store that chunk "whole" by the old shape over the appended elements; after a
    shrink, a write past the new end is refused (it used to land there, and a later grow
    showed it). The snapshot was what the retry read again; the stored document is."""
    sync = None if kind is None else syncs(tmp_path)[kind]
    path = str(tmp_path / "c.zarr")
    kw = {"v2": dict(zarr_format=2), "v3": dict(zarr_format=3),
          "sharded": dict(zarr_format=3, shards=(8,))}[fmt]
    g = cs.open_group(path, mode="w", zarr_format=kw["zarr_format"])
    cs.create_array(g.store, name="a", shape=(10,), chunks=(4,), dtype="i4", fill_value=-1,
                    **kw)[...] = np.arange(10)
    cs.consolidate_metadata(path)
    stale = cs.open_consolidated(path, mode="r+", synchronizer=sync)["a"]
    other = cs.open_array(path, path="a", mode="r+", synchronizer=sync)
    other.append(np.array([100, 101], dtype="i4"))
    stale[8:10] = [55, 56]
    np.testing.assert_array_equal(other[...], np.r_[np.arange(8), 55, 56, 100, 101])
    other.resize((6,))
    with pytest.raises(ValueError):
        stale[8:10] = [7, 7]
    other.resize((12,))
    np.testing.assert_array_equal(other[...], np.r_[np.arange(6), [-1] * 6])


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("change", ["chunks", "dtype"])
def test_a_consolidated_handle_opened_after_a_recreation_writes_by_the_stored_array(
        tmp_path, fmt, change):
    """The consolidated snapshot is older than the array (re-created since, by a tool that
    did not consolidate again): a write through open_consolidated(mode="r+") stored chunks
    by the snapshot's layout, which the array could not decode (chunks (2,) into an array
    of (4,)) or read as other values (int32 bytes into a float32 array)."""
    path = str(tmp_path / "c.zarr")
    g = cs.open_group(path, mode="w", zarr_format=fmt)
    g.create_array("a", shape=(4,), chunks=(2,), dtype="i4")[:] = 1
    cs.consolidate_metadata(path)
    new = dict(chunks=(4,), dtype="i4") if change == "chunks" else dict(chunks=(2,),
                                                                         dtype="f4")
    cs.open_array(path, path="a", mode="w", shape=(4,), zarr_format=fmt, **new)[:] = 2
    root = cs.open_consolidated(path, mode="r+")
    root["a"][:2] = 3
    got = cs.open_array(path, path="a", mode="r")
    assert got.dtype == np.dtype(new["dtype"])
    np.testing.assert_array_equal(got[:], [3, 3, 2, 2])


@pytest.mark.parametrize("how", ["consolidated", "synchronizer"])
def test_views_write_where_their_array_checks_the_stored_document(tmp_path, how):
    """A view's metadata is changed in memory; the store holds its base's. The check of the
    stored document (a consolidated handle's first write, every synchronized write) compared
    it with the view's, failed each time and ended in ArrayMetadataChangedError."""
    from chunkstore.sync import ThreadSynchronizer
    path = str(tmp_path / "s.zarr")
    g = cs.group(path)
    g.create_dataset("a", shape=(8,), chunks=(4,), dtype="i4", fill_value=0)
    if how == "consolidated":
        cs.consolidate_metadata(path)
        a = cs.open_consolidated(path, mode="r+")["a"]
    else:
        a = cs.open_array(path, path="a", mode="r+", synchronizer=ThreadSynchronizer())
    for i, kw in enumerate(({"fill_value": 0}, {"shape": (6,)}, {"dtype": "u4"})):
        a.view(**kw)[2 * i:2 * i + 2] = i + 1
    np.testing.assert_array_equal(cs.open_array(path, path="a", mode="r")[:],
                                  [1, 1, 2, 2, 3, 3, 0, 0])


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_cached_handle_reads_by_the_metadata_another_handle_of_the_process_changed(
        tmp_path, zarr_format):
    """A handle with cached metadata, no synchronizer: an array re-created through another
    handle (another dtype and chunks) read as the old layout's values (i2 chunks decoded as
    i4: garbage, no error); an append by another handle was missing from its reads."""
    path = str(tmp_path / "g.zarr")
    g = cs.open_group(path, mode="w", zarr_format=zarr_format)
    g.create_array("x", shape=(8,), chunks=(2,), dtype="i4")[...] = np.arange(8)
    old = cs.open_array(path, path="x", mode="r")
    np.testing.assert_array_equal(old[...], np.arange(8))
    g.create_array("x", shape=(8,), chunks=(4,), dtype="i2",
                   overwrite=True)[...] = np.arange(1000, 1008)
    got = old[...]
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got, np.arange(1000, 1008))
    cs.open_array(path, path="x", mode="r+").append(np.arange(4, dtype="i2"))
    assert old.shape == (12,)
    np.testing.assert_array_equal(old[8:], np.arange(4))


def test_a_refused_delete_tells_no_handle():
    """A delete refused up front (through a consolidated view: ReadOnlyError) changes
    nothing, so the handles of the arrays below are not told to read their metadata again:
    a handle of the snapshot, on an array the live store no longer holds, goes on reading by
    the snapshot (the fill value) instead of failing with ArrayNotFoundError."""
    import warnings
    warnings.simplefilter("ignore")
    store = cs.MemoryStore()
    root = cs.open_group(store, mode="w", zarr_format=2)
    root.create_group("ab").create_array("a", shape=(2,), chunks=(3,), dtype="i4",
                                         fill_value=5)
    view = cs.consolidate_metadata(store)
    for k in [k for k in store if k.startswith("ab/a/")]:
        del store[k]                       # gone from the live store, behind chunkstore
    snap = view["ab/a"]
    np.testing.assert_array_equal(snap[...], [5, 5])
    with pytest.raises(cs.errors.ReadOnlyError):
        del view["ab"]["a"]
    with pytest.raises(cs.errors.ReadOnlyError):
        del view["ab"]
    assert snap.shape == (2,)
    np.testing.assert_array_equal(snap[...], [5, 5])


def test_an_astype_view_converts_the_values_of_an_array_recreated_with_another_dtype():
    # The AsType filter was made once, from the dtype and filters of the array when the view
    # was made: after re-creation with f8 (same item size as i8) the view decoded the new
    # chunks as i8 (values near 4.6e18, no error); with a Delta filter added, as undeltaed.
    import numcodecs
    store = cs.storage.MemoryStore()
    g = cs.open_group(store, mode="w", zarr_format=2)
    x = g.create_dataset("x", shape=(4,), chunks=(2,), dtype="i8", data=[1, 2, 3, 4])
    a, aa = x.astype("f4"), x.astype("f8").astype("f4")
    np.testing.assert_array_equal(a[:], [1, 2, 3, 4])
    g.create_dataset("x", shape=(4,), chunks=(2,), dtype="f8", overwrite=True,
                     data=[.5, .25, .75, 2.5])
    for v in (a, aa, a.view(fill_value=1.0)):
        assert v.dtype == np.float32
        np.testing.assert_array_equal(v[:], np.float32([.5, .25, .75, 2.5]))
    g.create_dataset("x", shape=(4,), chunks=(2,), dtype="i8", overwrite=True,
                     data=[1, 2, 3, 4], filters=[numcodecs.Delta("i8")])
    np.testing.assert_array_equal(a[:], np.float32([1, 2, 3, 4]))
    np.testing.assert_array_equal(aa[:], np.float32([1, 2, 3, 4]))


@pytest.mark.parametrize("cache", [True, False])
@pytest.mark.parametrize("fmt", ["v2", "v3", "sharded"])
def test_an_append_checks_the_data_against_the_shape_it_grows(tmp_path, cache, fmt):
    """An append through a handle whose cached shape another process (zarr-python here)
    widened along another axis: the data is checked against the
    stored shape under the append's lock. It was checked against the cached (4, 1) and then
    broadcast across the new columns: rows [9 9 9], [8 8 8] stored without an error. Data
    of the stored shape is appended, not refused by the cached one."""
    path = str(tmp_path / "a.zarr")
    kw = {"v2": dict(zarr_format=2), "v3": {}, "sharded": dict(shards=(4, 4))}[fmt]
    cs.create_array(path, shape=(4, 1), chunks=(2, 2), dtype="i4", fill_value=0, **kw)[:] = 1
    z = cs.open_array(path, mode="r+", cache_metadata=cache)
    zarr = pytest.importorskip("zarr")  # (another library: nothing shared in-process)
    other = zarr.open_array(path, mode="r+")
    other.resize((4, 3))
    other[:, 1:] = 5
    with pytest.raises(ValueError, match=r"shape \(2, 1\).*of shape \(4, 3\).*dimension 1"):
        z.append(np.array([[9], [8]], dtype="i4"))
    want = np.array([[1, 5, 5]] * 4, dtype="i4")
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[:], want)
    assert z.append(np.array([[9, 9, 9]], dtype="i4")) == (5, 3)
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[:],
                                  np.vstack([want, [[9, 9, 9]]]))


class _ZarrStyleSync:
    """zarr-python 2's kind of synchronizer: only ``sync[key]`` -> a lock."""

    def __init__(self) -> None:
        import collections
        import threading
        self.locks = collections.defaultdict(threading.Lock)

    def __getitem__(self, key):
        return self.locks[key]


def test_a_handle_with_a_zarr_style_synchronizer_follows_a_recreation(tmp_path):
    """Such a handle had no count of this process's metadata changes: after another
    handle re-created the array as i8 it read the new chunks by its old dtype (f8 bytes of
    ints: tiny floats)."""
    p = str(tmp_path / "a.zarr")
    cs.open_array(p, mode="w", shape=(4,), chunks=(2,), dtype="f8")[...] = [0.5, 1.5, 2.5, 3.5]
    a = cs.open_array(p, synchronizer=_ZarrStyleSync())
    a[...]
    cs.open_array(p, mode="w", shape=(4,), chunks=(2,), dtype="i8")[...] = [100, 101, 102, 103]
    np.testing.assert_array_equal(a[...], [100, 101, 102, 103])
    assert a.dtype == np.dtype("i8")
    a[0] = 7
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[...], [7, 101, 102, 103])


def test_a_handle_parses_keys_and_answers_by_the_array_recreated_with_more_dimensions(
        tmp_path):
    """After another handle re-created the array 1-d -> 2-d, the first read with None beside
    index arrays placed NumPy's new axes by the held ndim ((2, 1, 4), not (2, 4, 1)), the
    first such write raised a bare StopIteration, resize compared with the held ndim, and
    dtype/ndim/chunks described the old array until something read the shape."""
    p = str(tmp_path / "a.zarr")
    m = np.arange(12, dtype="i2").reshape(3, 4)
    a = cs.open_array(p, mode="w", shape=(6,), chunks=(3,), dtype="i4")
    b = cs.open_array(p)
    c = cs.open_array(p)
    d = cs.open_array(p)
    cs.open_array(p, mode="w", shape=(3, 4), chunks=(3, 2), dtype="i2")[...] = m
    assert (d.dtype, d.ndim, d.chunks) == (np.dtype("i2"), 2, (3, 2))
    got = a[[0, 1], ..., None]
    assert got.shape == m[[0, 1], ..., None].shape == (2, 4, 1)
    np.testing.assert_array_equal(got, m[[0, 1], ..., None])
    b[[0, 1], None] = np.array([[[7, 7, 7, 7]], [[8, 8, 8, 8]]])
    m[:2] = [[7] * 4, [8] * 4]
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[...], m)
    with pytest.raises(ValueError, match="has 2"):
        c.resize(7)
    c.resize(4, 4)
    assert c.shape == (4, 4)


def test_islice_names_the_array_another_handle_shrank(tmp_path):
    """It raised NumPy's bare IndexError (index 1 is out of bounds for axis 0 with size 1)."""
    p = str(tmp_path / "a.zarr")
    a = cs.open_array(p, mode="w", shape=(10,), chunks=(3,), dtype="f8")
    a[...] = np.arange(10.0)
    it = a.islice(0, 10)
    assert next(it) == 0.0
    cs.open_array(p).resize(4)
    assert [next(it) for _ in range(3)] == [1.0, 2.0, 3.0]
    with pytest.raises(IndexError, match="'/'.*4 rows.*row 4 is gone"):
        next(it)


def test_properties_of_an_array_another_handle_deleted_read_the_store_once():
    """They describe the array last held (its operations raise); each property read looked
    for the array again (one request a property on S3) until the count of changes moves."""
    s = ReadCounting()
    g = cs.group(store=s)
    a = g.create_array("x", shape=(8,), chunks=(4,), dtype="i4")
    del g["x"]
    s.reads = 0
    for _ in range(50):
        assert (a.dtype, a.chunks, a.ndim, a.fill_value) == (np.dtype("i4"), (4,), 1, 0)
    assert s.reads <= 3
    with pytest.raises(cs.errors.ArrayNotFoundError):
        a[...]
    g.create_array("x", shape=(3,), chunks=(3,), dtype="f8")  # the count moves: followed
    assert (a.dtype, a.shape) == (np.dtype("f8"), (3,))


def test_a_zarr_style_synchronized_handle_counts_its_own_changes(tmp_path):
    """Its own resize and appends were counted nowhere, so it read the metadata again after
    each and dropped what an LRUStoreCache held of the array; other handles of the process
    missed them."""
    cache = cs.LRUStoreCache(cs.MemoryStore(), max_size=2**20)
    a = cs.open_array(cache, mode="w", shape=(8,), chunks=(4,), dtype="i4",
                      synchronizer=_ZarrStyleSync())
    a[...] = np.arange(8)
    other = cs.open_array(cache.store)
    a[...]
    for _ in range(3):
        a.append(np.arange(2))
    assert cache.current_size > 0  # (its chunks still cached)
    assert other.shape == (14,)
    np.testing.assert_array_equal(other[...], np.concatenate([np.arange(8)] + [np.arange(2)] * 3))


@pytest.mark.parametrize("how", ["sync", "async", "thread-synchronized"])
def test_writes_through_an_old_handle_beside_a_loop_recreating_the_array(tmp_path, how):
    """create_array(overwrite=True) deleted the array, let go of its locks, then wrote the
    new document: a write through a handle opened before that looked in between raised
    ArrayNotFoundError (nearly every write, beside a loop re-creating it), though an array
    was there before and after. The locks are held from the delete to the new document,
    and a handle that finds the document missing waits for a change in flight."""
    import asyncio
    import threading
    store = cs.DirectoryStore(str(tmp_path / "d"))
    g = cs.open_group(store, mode="w", zarr_format=2)
    g.create_array("x", shape=(12,), chunks=(2,), dtype="i4", fill_value=0)
    a = cs.open_array(store, path="x", mode="r+", synchronizer=(
        cs.ThreadSynchronizer() if how == "thread-synchronized" else None))
    stop = threading.Event()

    def recreate():
        chunks = 2
        while not stop.is_set():
            chunks = 5 - chunks  # (2, 3: another layout each time)
            g.create_array("x", shape=(12,), chunks=(chunks,), dtype="i4", fill_value=0,
                           overwrite=True)

    errors = []
    thread = threading.Thread(target=recreate)
    thread.start()
    try:
        if how != "async":
            for _ in range(300):
                try:
                    a[0:8] = 5
                    a[0:8]
                except Exception as e:  # noqa: BLE001 (collected: asserted below)
                    errors.append(e)
        else:
            handle = cs.AsyncArray(a)

            async def writes():
                for _ in range(300):
                    try:
                        await handle.setitem(slice(0, 8), 5)
                        await handle.getitem(slice(0, 8))
                    except Exception as e:  # noqa: BLE001
                        errors.append(e)

            asyncio.run(writes())
    finally:
        stop.set()
        thread.join()
    assert not errors, errors[:3]
    a[0:8] = 7
    np.testing.assert_array_equal(cs.open_array(store, path="x", mode="r")[:], [7] * 8 + [0] * 4)


@pytest.mark.parametrize("sync", [None, "thread"])
def test_a_write_during_a_recreation_waits_for_it(monkeypatch, sync):
    """A write whose handle reads the metadata at each operation (cache_metadata=False),
    made while a re-creation is between its delete and its new document, found no document:
    ArrayNotFoundError. It waits for the re-creation now, with a ThreadSynchronizer too
    (whose handles' counts had no guard_busy: the wait was skipped)."""
    import threading
    import time

    from chunkstore.hierarchy import creation
    store = cs.MemoryStore()
    synchronizer = cs.ThreadSynchronizer() if sync else None
    cs.create((4,), chunks=(2,), dtype="i4", store=store, path="x")
    h = cs.open_array(store, path="x", mode="r+", synchronizer=synchronizer,
                      cache_metadata=False)
    real, deleted = creation._remove_held, threading.Event()

    def slow(*args, **kwargs):
        out = real(*args, **kwargs)
        deleted.set()
        time.sleep(0.3)  # (the window between the delete and the new document)
        return out

    monkeypatch.setattr(creation, "_remove_held", slow)
    t = threading.Thread(target=lambda: cs.create((4,), chunks=(2,), dtype="i4", store=store,
                                                  path="x", overwrite=True,
                                                  synchronizer=synchronizer))
    t.start()
    assert deleted.wait(10)
    h[0] = 1
    t.join(10)
    np.testing.assert_array_equal(cs.open_array(store, path="x", mode="r")[:], [1, 0, 0, 0])


def test_an_overwrite_creation_below_a_missing_group_beside_one_at_that_group(monkeypatch):
    """A re-creation holding its node's locks (and those of the groups above) through its
    new document took the creation lock of a missing group above after them, while an
    overwrite-creation at that group took them the other way: each waited for the other."""
    import threading
    import time

    from chunkstore.hierarchy import creation
    store = cs.MemoryStore()
    real = creation._remove_held

    def slow(s, path, *args, **kwargs):
        out = real(s, path, *args, **kwargs)
        if path == "a/b":
            time.sleep(0.3)  # (the other creation takes its locks meanwhile)
        return out

    monkeypatch.setattr(creation, "_remove_held", slow)
    errors = []

    def make(path, wait):
        time.sleep(wait)
        try:
            cs.create((4,), chunks=(2,), dtype="i4", store=store, path=path, overwrite=True)
        except cs.errors.ContainsArrayError as e:  # (the array at "a" came first)
            errors.append(e)

    threads = [threading.Thread(target=make, args=("a/b", 0), daemon=True),
               threading.Thread(target=make, args=("a", 0.1), daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert "a" in cs.open_group(store, mode="r")


@pytest.mark.parametrize("write", [
    lambda z: z.__setitem__((slice(1, 3), slice(12, 15)), 7),
    lambda z: z.oindex.__setitem__(([1, 2], slice(12, 15)), 7),
    lambda z: z.oindex.__setitem__((slice(1, 3), slice(12, 15)), np.full((2, 3), 7)),
    lambda z: z.set_orthogonal_selection((slice(1, 3), slice(12, 15)), np.full((2, 3), 7)),
])
def test_a_write_past_the_shape_a_stale_handle_knows_names_the_change(tmp_path, write):
    """A handle caching shape (10, 10), which another process grew to (10, 20): an
    orthogonal write of a (2, 3) array to columns 12:15 raised a broadcast ValueError (the
    columns clamped to none by the shape known), naming neither the dimension nor the
    change, where a basic write raises the BoundsCheckError that says another handle made
    it 20 long since. Nothing is written either way."""
    import subprocess
    import sys
    from chunkstore.errors import BoundsCheckError
    p, locks = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    # (with a synchronizer: the README's promise; without one a stale handle cannot know)
    z = cs.zeros((10, 10), chunks=(5, 5), dtype="i4", store=p,
                 synchronizer=cs.ProcessSynchronizer(locks))
    subprocess.run([sys.executable, "-c", "import chunkstore as cs; "
                    f"cs.open_array({p!r}, mode='r+', synchronizer="
                    f"cs.ProcessSynchronizer({locks!r})).resize(10, 20)"], check=True)
    with pytest.raises(BoundsCheckError, match="20 long since"):
        write(z)
    assert not cs.open_array(p, mode="r")[...].any()


def _racing_read(change, read):
    """read(handle) in a thread, paused at its first chunk fetch while change(other handle)
    runs (a second handle of this process); its result, or the error it raised."""
    import threading
    from chunkstore.storage import MemoryStore

    gate, entered, reader = threading.Event(), threading.Event(), {}

    class PausingStore(MemoryStore):
        def _pause(self, key):
            if threading.get_ident() == reader.get("id") and key[-1:].isdigit():
                entered.set()
                gate.wait(10)

        def __getitem__(self, key):
            self._pause(key)
            return super().__getitem__(key)

        def getitems(self, keys, *a, **k):
            for key in keys:
                self._pause(key)
            return super().getitems(keys, *a, **k)

    store = PausingStore()
    z = cs.create_array(store, shape=(8,), chunks=(4,), dtype="i4", fill_value=-1)
    z[:] = np.arange(8)
    r = cs.open_array(store, mode="r+")
    out = {}

    def run():
        reader["id"] = threading.get_ident()
        try:
            out["got"] = read(r)
        except Exception as e:  # noqa: BLE001 - the caller looks at it
            out["got"] = e

    t = threading.Thread(target=run)
    t.start()
    assert entered.wait(10)
    reader["id"] = None  # (the read's next attempts run on)
    change(z)
    gate.set()
    t.join(10)
    return out["got"]


def _shrink_then_append(z):
    z.resize(6)
    z.append(np.array([100], "i4"))


@pytest.mark.parametrize("read", [lambda r: r[...], lambda r: r.oindex[[0, 7]],
                                  lambda r: r.get_basic_selection(slice(None),
                                                                  out=np.zeros(8, "i4"))])
def test_a_read_racing_a_shrink_then_an_append_never_mixes_states(read):
    """A read through a second handle of the process, started at shape 8 ([0..7]) and
    finishing after a shrink to 6 and an append of [100] (shape 7), returned shape 8 with
    [0..5, 100, -1]: the old shape holding the appended value and the fill value where
    data was, a state the array never had. A read during which the process changed the
    array's metadata runs again on the array now, for the elements it selected in the
    shape it knew (as a write planned again): index 7 is gone, a BoundsCheckError."""
    from chunkstore.errors import BoundsCheckError
    got = _racing_read(_shrink_then_append, read)
    assert isinstance(got, BoundsCheckError), got


def test_a_read_racing_an_append_reads_what_it_selected():
    """A pure grow meanwhile: the read's elements are all there, read again (out= of the
    shape the read knew still fits)."""
    got = _racing_read(lambda z: z.append(np.array([8, 9], "i4")),
                       lambda r: r.get_basic_selection(slice(None), out=np.zeros(8, "i4")))
    assert got.tolist() == list(range(8))
    got = _racing_read(lambda z: z.append(np.array([8, 9], "i4")), lambda r: r[...])
    assert got.tolist() == list(range(8))


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_mask_of_the_shape_a_stale_handle_knows_writes_its_elements(tmp_path, fmt):
    """README: a stale synchronized handle's mask of the shape it knows selects its
    elements. h[m] = v (an n-d mask through __setitem__) was refused with
    ArrayMetadataChangedError after another process appended, while h.vindex[m] = v and
    set_mask_selection wrote the mask's element."""
    import subprocess
    import sys
    p, locks = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    z = cs.create(shape=(5, 4), chunks=(2, 2), dtype="i4", fill_value=1, store=p,
                  zarr_format=fmt, synchronizer=cs.ProcessSynchronizer(locks))
    z[...] = 1
    subprocess.run([sys.executable, "-c", "import numpy as np, chunkstore as cs; "
                    f"cs.open_array({p!r}, mode='r+', synchronizer="
                    f"cs.ProcessSynchronizer({locks!r})).append(np.full((3, 4), 5, 'i4'))"],
                   check=True)
    m = np.zeros((5, 4), dtype=bool)
    m[4, 1] = True
    z[m] = 8
    got = cs.open_array(p, mode="r")[...]
    want = np.ones((8, 4), "i4")
    want[5:] = 5
    want[4, 1] = 8
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sharded", [False, True])
def test_a_read_inside_a_shrink_in_flight_waits_for_it(sharded):
    """A read through a second handle that ran wholly while another thread's shrink was in
    flight (the new shape written and the chunks past it deleted, the shrink's locks not yet
    let go, so no change counted) returned the old shape with the fill value where data had
    been: a state the array never had. The read now sees the change in flight (another
    thread holds the metadata guard), waits for it, and runs again by the new metadata:
    the elements it selected past the new end are gone, a BoundsCheckError."""
    import threading
    from chunkstore.errors import BoundsCheckError
    from chunkstore.storage import MemoryStore

    deleted, gate, who = threading.Event(), threading.Event(), {}

    class PausingStore(MemoryStore):
        def _after_delete(self):
            if threading.get_ident() == who.get("resizer"):
                deleted.set()
                gate.wait(10)

        def __delitem__(self, key):
            super().__delitem__(key)
            self._after_delete()

        def delitems(self, keys, *a, **k):
            super().delitems(keys, *a, **k)
            self._after_delete()

    store = PausingStore()
    kw = {"shards": (4,)} if sharded else {}
    z = cs.create_array(store, shape=(8,), chunks=(2,), dtype="i4", fill_value=-1, **kw)
    z[:] = np.arange(8)
    r = cs.open_array(store, mode="r")
    out = {}

    def resize():
        who["resizer"] = threading.get_ident()
        z.resize(4)

    def read():
        who["reader"] = threading.get_ident()
        try:
            out["got"] = r[...]
        except Exception as e:  # noqa: BLE001 - looked at below
            out["got"] = e

    t = threading.Thread(target=resize)
    t.start()
    assert deleted.wait(10)
    u = threading.Thread(target=read)
    u.start()
    # (the read runs while the shrink is in flight: it ended there, with the fill value
    # where data was; now it waits for the shrink)
    u.join(1)
    gate.set()
    t.join(10)
    u.join(10)
    assert isinstance(out["got"], BoundsCheckError), out["got"]
    np.testing.assert_array_equal(r[...], np.arange(4))


def test_a_dask_value_that_reads_the_array_it_is_appended_or_written_to(tmp_path):
    """z.append(da.from_array(z) * 10): append took the array's whole lock space, then
    computed the dask value, whose worker threads' reads of z waited for a metadata change
    in flight, the append's: a deadlock. Likewise a write planned again (another writer had
    grown the array) computed its dask value under the metadata guard. Dask values are now
    computed before any lock is taken."""
    import json
    import dask.array as da
    z = cs.zeros((8,), chunks=(2,), dtype="i4")
    z[:] = np.arange(8)
    call_timeout(lambda: z.append(da.from_array(z, chunks=2) * 10), "append")
    assert z[:].tolist() == list(range(8)) + [10 * i for i in range(8)]
    d = str(tmp_path / "a.zarr")
    w = cs.open_array(d, mode="w", shape=(8,), chunks=(2,), dtype="i4",
                      synchronizer=cs.ThreadSynchronizer())
    w[:] = np.arange(8)
    src = cs.open_array(d, mode="r")
    meta = json.load(open(f"{d}/.zarray"))
    meta["shape"] = [10]  # (grown by a writer sharing no locks: w's write is planned again)
    json.dump(meta, open(f"{d}/.zarray", "w"))

    def write():
        w[:8] = da.from_array(src, chunks=2)[:8] * 10
    call_timeout(write, "write planned again")
    assert cs.open_array(d, mode="r")[:].tolist() == [10 * i for i in range(8)] + [0, 0]


def test_a_read_beside_an_attribute_update_neither_waits_nor_runs_twice(monkeypatch):
    """A read that ended while another thread's attribute update held the array's metadata
    guard waited for the update and read again: holding the guard changes no shape. Only a
    change of the whole lock space (resize, append, fill value, re-creation) is waited for."""
    import threading
    import time
    from chunkstore.engine.core import ChunkEngine
    entered, release = threading.Event(), threading.Event()

    class SlowAttrs(dict):
        def __setitem__(self, k, v):
            if k.endswith(".zattrs") and threading.current_thread().name == "attrs":
                entered.set()
                release.wait(10)
            super().__setitem__(k, v)

    z = cs.zeros((100,), chunks=(10,), dtype="f8", store=SlowAttrs())
    z[:] = 1
    reads = []
    original = ChunkEngine.read
    monkeypatch.setattr(ChunkEngine, "read", lambda self, *a, **k: (reads.append(1),
                                                                     original(self, *a, **k))[1])
    t = threading.Thread(name="attrs", target=lambda: z.attrs.update(step=1))
    t.start()
    assert entered.wait(10)
    try:
        assert call_timeout(lambda: z[:10], "read").tolist() == [1.0] * 10
        assert len(reads) == 1
    finally:
        release.set()
        t.join(10)


def test_a_reads_last_run_that_finds_its_array_deleted_raises():
    """A read run again three times (another thread appended during each run) holds the
    array's metadata guard through its last run; the array deleted just before it, the
    last run's look for the document waited for the guard its own thread held: the read
    hung, and every later change of that path with it. It raises ArrayNotFoundError."""
    import threading
    gates = [(threading.Event(), threading.Event()) for _ in range(3)]
    pending, hook = list(gates), []

    class Slow(dict):
        def __getitem__(self, k):
            v = dict.__getitem__(self, k)
            if threading.current_thread().name == "reader":
                if k == "a/0" and pending:
                    g = pending.pop(0)
                    g[0].set()
                    g[1].wait(10)
                if k == "a/.zarray" and hook:
                    hook.pop()()
            return v

    store = Slow()
    root = cs.open_group(store, mode="w")
    z = root.zeros("a", shape=(4,), chunks=(2,), dtype="i4")
    z[:] = 1
    r = root["a"]
    out = {}

    def reader():
        try:
            out["got"] = r[:]
        except Exception as e:  # noqa: BLE001 - looked at below
            out["got"] = e

    def delete():
        d = threading.Thread(target=root.__delitem__, args=("a",))
        d.start()
        d.join(10)

    t = threading.Thread(target=reader, name="reader", daemon=True)
    t.start()
    for step, (entered, go) in enumerate(gates):
        assert entered.wait(10)
        z.append(np.array([1], "i4"))
        if step == 2:
            hook.append(delete)
        go.set()
    t.join(10)
    assert not t.is_alive(), "the read hung"
    assert isinstance(out["got"], cs.errors.ArrayNotFoundError), out["got"]
    call_timeout(lambda: root.create_dataset("a", data=np.arange(3)), "re-creation")


class _RecreatedMidRead(cs.MemoryStore):
    """A store whose first chunk read (armed) runs ``armed`` on another thread first: the
    array re-created by this process in the middle of a read."""

    armed = None

    def __getitem__(self, key):
        fn = type(self).armed
        if fn is not None and key.startswith("a/") and not key.endswith(
                (".zarray", ".zattrs", "zarr.json")):
            type(self).armed = None
            call_timeout(fn, "re-creating the array in the middle of a read")
        return super().__getitem__(key)

    def getitems(self, keys, **kw):
        out = {}
        for k in keys:
            with contextlib.suppress(KeyError):  # (gone with the old array)
                out[k] = self[k]
        return out


def _recreating(old, new, old_dtype="i4", new_dtype="i4", chunks_new=None, fmt=2,
                compressors=None):
    store = _RecreatedMidRead()
    g = cs.open_group(store, mode="w", zarr_format=fmt)
    g.create_array("a", shape=old, chunks=(2,) * len(old), dtype=old_dtype, fill_value=0,
                   compressors=compressors)[...] = 1

    def recreate():
        b = cs.open_group(store, mode="r+").create_array(
            "a", shape=new, chunks=chunks_new or (2,) * len(new), dtype=new_dtype,
            fill_value=0, overwrite=True, compressors=compressors)
        b[...] = 2
    return store, recreate


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("compressors", [None, "auto"])
def test_a_read_whose_chunks_were_recreated_with_another_size_runs_again(fmt, compressors):
    """A chunk of the array re-created meanwhile (chunks of 4 where 2 were) failed to decode
    by the old metadata: ChunkDecodeError ('chunk data has 16 bytes, expected 8') on a
    healthy array, where a read whose chunks happened to decode ran again."""
    store, recreate = _recreating((8,), (8,), chunks_new=(4,), fmt=fmt,
                                  compressors=compressors)
    h = cs.open_array(store, path="a", mode="r")
    type(store).armed = recreate
    np.testing.assert_array_equal(h[...], np.full(8, 2))
    # a chunk that is corrupt, with no change of the metadata, is still an error
    store["a/0" if fmt == 2 else "a/c/0"] = b"\x00" * 3
    with pytest.raises(cs.errors.ChunkDecodeError):
        cs.open_array(store, path="a", mode="r")[...]


@pytest.mark.parametrize("old,new", [((6,), (8,)), ((4, 4), (16,)), ((16,), (4, 4))])
def test_a_read_during_a_recreation_with_another_dtype_or_rank_raises(old, new):
    """Run again on an array re-created meanwhile with another dtype or number of
    dimensions, a read returned the new array's elements, of the new type, in the shape it
    knew (a state the array never had; out= of the old dtype took them cast), or raised a
    bare IndexError ('tuple index out of range')."""
    store, recreate = _recreating(old, new, new_dtype="f4")
    h = cs.open_array(store, path="a", mode="r")
    type(store).armed = recreate
    with pytest.raises(cs.errors.ArrayMetadataChangedError, match="re-created"):
        h[...]
    np.testing.assert_array_equal(h[...], np.full(new, 2, dtype="f4"))  # (then: the new one)


@pytest.mark.parametrize("old,new,sel", [((4, 2), (8,), Ellipsis), ((4, 2), (8,), slice(0, 2)),
                                         ((8,), (4, 2), 1)])
def test_a_write_planned_again_after_a_recreation_with_another_rank_raises(tmp_path, old, new,
                                                                          sel):
    """A synchronized write whose array another process re-created with another number of
    dimensions: fewer raised a bare IndexError, more wrote h[1] = 5 over a whole row of the
    new array."""
    root, sdir = str(tmp_path / "d"), str(tmp_path / "sync")
    cs.open_group(root, mode="w").create_array("a", shape=old, chunks=(2,) * len(old),
                                               dtype="i4", fill_value=0)
    h = cs.open_array(root, path="a", mode="r+", synchronizer=cs.ProcessSynchronizer(sdir))
    h[...]  # (the metadata cached)
    import subprocess
    subprocess.run([sys.executable, "-c",
                    "import chunkstore as cs; s = cs.ProcessSynchronizer(%r); "
                    "cs.open_group(%r, mode='r+', synchronizer=s).create_array('a', shape=%r, "
                    "chunks=%r, dtype='i4', fill_value=0, overwrite=True)[...] = 9"
                    % (sdir, root, new, (2,) * len(new))], check=True)
    with pytest.raises(cs.errors.ArrayMetadataChangedError, match="number of dimensions"):
        h[sel] = 5
    np.testing.assert_array_equal(cs.open_array(root, path="a")[...], np.full(new, 9))


@pytest.mark.parametrize("sync", [False, True])
def test_a_read_racing_another_processs_shrink_raises_instead_of_reading_fill(tmp_path, sync):
    """A handle reading the metadata each time (or synchronized) whose read another process
    shrank the array under: the chunks past the new end, deleted, read as the fill value in
    the old shape (rows of -1 where data was), because only the document's existence was
    looked at again. Now its document is: the read runs again and raises, the rows gone."""
    import subprocess
    d = str(tmp_path / "a")
    locks = str(tmp_path / "locks")
    z = cs.open_array(d, mode="w", shape=(8, 3), chunks=(2, 3), dtype="i4", fill_value=-1)
    z[...] = np.arange(1, 25).reshape(8, 3)
    shrink = ("import chunkstore as cs; " + (
        f"s = cs.ProcessSynchronizer({locks!r}); " if sync else "s = None; ") +
        f"cs.open_array({d!r}, mode='r+', synchronizer=s).resize(3, 3)")

    class Hook(DictMapping):  # (another process shrinks once the read has begun)
        done = False

        def __getitem__(self, k):
            if not self.done and k.endswith("0.0"):
                self.done = True
                subprocess.run([sys.executable, "-c", shrink], check=True)
            return self.d[k]

    r = cs.open_array(Hook(cs.DirectoryStore(d)), mode="r", cache_metadata=sync,
                      synchronizer=cs.ProcessSynchronizer(locks) if sync else None)
    with pytest.raises(IndexError, match="changed its shape from \\(8, 3\\) to \\(3, 3\\)"):
        r[...]
    if sync:  # (a cached handle selects by the shape it knows: opened again)
        r = cs.open_array(d, mode="r", synchronizer=cs.ProcessSynchronizer(locks))
    np.testing.assert_array_equal(r[...], np.arange(1, 10).reshape(3, 3))
