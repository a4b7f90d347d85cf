"""LRUStoreCache: bounded by bytes, counters, listing cache, invalidation, threads."""

from __future__ import annotations

import pickle
import threading

import pytest

from chunkstore.errors import ReadOnlyError
from chunkstore.storage import DirectoryStore, LRUStoreCache, MemoryStore


class CountingStore(MemoryStore):
    """A MemoryStore counting the calls that reach it."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = {"get": 0, "getitems": 0, "iter": 0, "listdir": 0, "contains": 0}

    def __getitem__(self, k):
        self.calls["get"] += 1
        return super().__getitem__(k)

    def getitems(self, keys):
        self.calls["getitems"] += 1
        return super().getitems(keys)

    def __iter__(self):
        self.calls["iter"] += 1
        return super().__iter__()

    def listdir(self, prefix=""):
        self.calls["listdir"] += 1
        return super().listdir(prefix)

    def __contains__(self, k):
        self.calls["contains"] += 1
        return super().__contains__(k)


def test_hits_misses_and_bound():
    under = CountingStore({f"k{i}": bytes([i]) * 100 for i in range(10)})
    c = LRUStoreCache(under, max_size=350)
    assert c["k0"] == bytes(100)
    assert (c.hits, c.misses) == (0, 1)
    assert c["k0"] == bytes(100)
    assert (c.hits, c.misses) == (1, 1)
    assert under.calls["get"] == 1
    for i in range(1, 4):
        c[f"k{i}"]
    # 4 values of 100 bytes do not fit in 350: the least recently used (k0) was evicted
    assert c.current_size <= 350
    assert c.current_size == 300
    c["k0"]
    assert under.calls["get"] == 5
    # k0 was used last, so k1 is the next victim
    c["k4"]
    c["k0"]
    assert under.calls["get"] == 6


def test_values_larger_than_the_bound_are_not_cached():
    under = CountingStore({"big": b"x" * 1000, "small": b"y"})
    c = LRUStoreCache(under, max_size=100)
    assert c["big"] == b"x" * 1000
    assert c["big"] == b"x" * 1000
    assert under.calls["get"] == 2
    assert c.current_size == 0
    c["small"]
    assert c.current_size == 1


def test_unbounded_and_alias():
    c = LRUStoreCache(MemoryStore({"a": b"1" * 10_000}), max_size=None)
    c["a"]
    assert c.current_size == 10_000
    c2 = LRUStoreCache(MemoryStore(), max_size_bytes=123)
    assert c2.max_size == 123
    with pytest.raises(TypeError):
        LRUStoreCache(MemoryStore(), 1, max_size_bytes=2)
    with pytest.raises(ValueError):
        LRUStoreCache(MemoryStore(), -1)


def test_getitems_uses_cache_and_batches_misses():
    under = CountingStore({f"k{i}": bytes([i]) for i in range(5)})
    c = LRUStoreCache(under, max_size=1000)
    assert c.getitems(["k0", "k1", "nope"]) == {"k0": b"\x00", "k1": b"\x01"}
    assert under.calls["getitems"] == 1
    assert c.getitems(["k0", "k1"]) == {"k0": b"\x00", "k1": b"\x01"}
    assert under.calls["getitems"] == 1  # all hits
    assert c.hits == 2 and c.misses == 3
    c.getitems(["k0", "k2"])
    assert under.calls["getitems"] == 2


def test_listings_are_cached_and_invalidated_by_writes():
    under = CountingStore({"a/0": b"0", "a/1": b"1", "b": b"b"})
    c = LRUStoreCache(under, max_size=1000)
    assert sorted(c) == ["a/0", "a/1", "b"]
    assert sorted(c) == ["a/0", "a/1", "b"]
    assert len(c) == 3
    assert under.calls["iter"] == 1
    assert c.listdir("a") == ["0", "1"]
    assert c.listdir("a") == ["0", "1"]
    assert under.calls["listdir"] == 1
    assert "a/0" in c and "zz" not in c
    assert under.calls["contains"] == 0  # answered from the cached key list

    c["a/2"] = b"2"  # a write through the cache invalidates every listing
    assert c.listdir("a") == ["0", "1", "2"]
    assert sorted(c) == ["a/0", "a/1", "a/2", "b"]
    assert under.calls["listdir"] == 2 and under.calls["iter"] == 2
    del c["a/0"]
    assert c.listdir("a") == ["1", "2"]
    assert "a/0" not in c
    c.delitems(["a/1"])
    c.setitems({"c": b"c"})
    assert sorted(c) == ["a/2", "b", "c"]
    c.rmdir("a")
    assert sorted(c) == ["b", "c"]
    assert c.listdir() == ["b", "c"]


def test_values_invalidated_by_writes_and_explicitly():
    under = MemoryStore({"k": b"old"})
    c = LRUStoreCache(under, max_size=1000)
    assert c["k"] == b"old"
    c["k"] = b"new"
    assert c["k"] == b"new"
    under["k"] = b"changed behind the cache's back"
    assert c["k"] == b"new"  # not seen until invalidated
    c.invalidate_values()
    assert c["k"] == b"changed behind the cache's back"
    assert set(c) == {"k"}  # the key list is now cached
    under["other"] = b"1"
    assert "other" not in set(c)
    c.invalidate_keys()
    assert "other" in set(c)
    c.invalidate()
    assert c.current_size == 0
    del c["k"]
    with pytest.raises(KeyError):
        c["k"]


def test_read_only_and_pickle(tmp_path):
    d = DirectoryStore(tmp_path)
    d["a"] = b"1"
    c = LRUStoreCache(DirectoryStore(tmp_path, mode="r"), max_size=100)
    assert c.read_only
    assert c["a"] == b"1"
    with pytest.raises(ReadOnlyError, match="key 'a'"):  # the refused key is named
        c["a"] = b"2"
    with pytest.raises(ReadOnlyError):
        c.rmdir()
    c2 = pickle.loads(pickle.dumps(c))
    assert c2.current_size == 0 and c2.hits == 0
    assert c2["a"] == b"1" and c2.read_only
    assert "DirectoryStore" in repr(c2) and "max_size=100" in repr(c2)


def test_errors_are_not_cached_as_missing():
    class Broken(MemoryStore):
        fail = True

        def __getitem__(self, k):
            if self.fail:
                raise OSError(5, "I/O error")
            return super().__getitem__(k)

    under = Broken({"k": b"1"})
    c = LRUStoreCache(under, max_size=100)
    with pytest.raises(OSError):
        c["k"]
    under.fail = False
    assert c["k"] == b"1"


def test_plain_dict_underneath():
    d = {"a/b": b"1"}
    c = LRUStoreCache(d, max_size=10)
    assert c["a/b"] == b"1"
    assert c.listdir("a") == ["b"]
    c["a/c"] = b"2"
    assert d["a/c"] == b"2"
    assert c.getsize("a") == 2


def test_threads_keep_the_bound():
    under = MemoryStore({f"k{i}": bytes([i % 256]) * 64 for i in range(200)})
    c = LRUStoreCache(under, max_size=64 * 20)
    errors = []

    def work(t):
        try:
            for r in range(5):
                for i in range(t, 200, 3):
                    assert c[f"k{i}"] == bytes([i % 256]) * 64
                    if i % 17 == 0:
                        c[f"k{i}"] = bytes([i % 256]) * 64
                    assert c.current_size <= 64 * 20
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    ths = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not errors, errors
    assert c.current_size <= 64 * 20
    assert c.hits + c.misses == 5 * sum(len(range(t, 200, 3)) for t in range(4))


def test_cache_answers_for_the_separator_of_the_store_behind_it(tmp_path):
    """A .zarray naming no dimension_separator (zarr-python < 2.8 wrote nested arrays so) is
    read with its store's separator: through a cache in front of a NestedDirectoryStore too,
    not as an array of missing chunks (all fill value)."""
    import json

    import numpy as np

    import chunkstore as cs
    from chunkstore.storage import NestedDirectoryStore

    path = tmp_path / "a.zarr"
    nested = NestedDirectoryStore(path)
    a = cs.create(shape=(4, 4), chunks=(2, 2), dtype="i4", store=nested)
    a[:] = np.arange(16).reshape(4, 4)
    meta = json.loads(nested[".zarray"])
    del meta["dimension_separator"]
    nested[".zarray"] = json.dumps(meta).encode()
    cached = LRUStoreCache(NestedDirectoryStore(path), max_size=1 << 20)
    assert cached.dimension_separator == "/"
    np.testing.assert_array_equal(cs.open_array(cached, mode="r")[:],
                                  np.arange(16).reshape(4, 4))
    # a new v2 array through the cache gets the store's separator, as through the store
    other = NestedDirectoryStore(tmp_path / "b.zarr")
    b = cs.create(shape=(2, 2), chunks=(1, 1), dtype="i4",
                  store=LRUStoreCache(other, max_size=1 << 20))
    b[:] = 1
    assert "1/1" in other


def _stores(kind, tmp_path):
    """(the store a plain handle uses, a cache of the same data) of kind."""
    if kind == "memory":
        inner = MemoryStore()
        return inner, LRUStoreCache(inner, max_size=1 << 20)
    return DirectoryStore(tmp_path / "d"), LRUStoreCache(DirectoryStore(tmp_path / "d"),
                                                          max_size=1 << 20)


@pytest.mark.parametrize("kind", ["memory", "directory"])
@pytest.mark.parametrize("layout", ["v2", "v3", "sharded"])
def test_writes_through_a_cache_never_merge_another_handles_update_away(kind, layout,
                                                                        tmp_path):
    """A handle through an LRUStoreCache and one beside it, in turn: the cached handle's
    writes merge into the chunks (and check the metadata) as the store holds them now, and
    the two share in-process locks. A write through the cache merged into its cached copy
    of a chunk (the other's update lost, a deleted chunk's old values back), and kept its
    cached shape (an append's elements overwritten with fill values)."""
    import numpy as np

    import chunkstore as cs

    plain_store, cached_store = _stores(kind, tmp_path)
    kw = {"zarr_format": 2} if layout == "v2" else {"zarr_format": 3}
    if layout == "sharded":
        kw["shards"] = (4,)
    cs.create_array(plain_store, shape=(8,), chunks=(4,) if layout != "sharded" else (2,),
                    dtype="i4", fill_value=0, **kw)[...] = 9
    want = np.full(8, 9, dtype="i4")
    cached = cs.open_array(cached_store, mode="r+")
    plain = cs.open_array(plain_store, mode="r+")
    assert (cached[...] == want).all()  # the cache holds every chunk now
    plain[1] = 2
    cached[0] = 1
    want[:2] = [1, 2]
    np.testing.assert_array_equal(plain[...], want)
    plain[4:8] = 0      # the chunk (or the shard's chunks) all fill: deleted
    cached[3] = 5
    want[4:], want[3] = 0, 5
    np.testing.assert_array_equal(plain[...], want)
    plain.append(np.arange(11, 15, dtype="i4"))
    cached[7] = 99      # planned again with the appended shape
    want = np.concatenate([want, np.arange(11, 15, dtype="i4")])
    want[7] = 99
    np.testing.assert_array_equal(plain[...], want)
    assert cached.shape == (12,)
    plain.resize((4,))
    with pytest.raises(IndexError):
        cached[10] = 77
    plain.resize((12,))
    np.testing.assert_array_equal(plain[...], np.concatenate([want[:4], np.zeros(8, "i4")]))


@pytest.mark.parametrize("path", ["", "g/a"])
@pytest.mark.parametrize("change", ["recreate", "append", "shrink-grow"])
def test_a_cached_handle_that_sees_another_handles_change_reads_the_new_node(
        tmp_path, path, change):
    """A handle reading through an LRUStoreCache, after another handle of this process (on
    the directory itself) changed the array, read the new metadata but the old chunks still
    cached: f8 bytes as i8 (huge ints), appended rows as the fill value, values cut off by a
    shrink back after a growth. The cache's values of the node are now dropped when the
    handle finds the change, and it reads the array as it is (NumPy is the oracle)."""
    import numpy as np

    import chunkstore as cs
    d = str(tmp_path / "a.zarr")
    cs.open_array(d, path=path, mode="w", shape=(10,), chunks=(2,), dtype="f8",
                  fill_value=-1)[...] = np.arange(10) + 0.5
    cached = cs.open_array(LRUStoreCache(DirectoryStore(d), max_size=2**20), path=path)
    np.testing.assert_array_equal(cached[...], np.arange(10) + 0.5)  # (cached now)
    if change == "recreate":
        other = cs.open_array(d, path=path, mode="w", shape=(10,), chunks=(2,), dtype="i8",
                              fill_value=-1)
        other[...] = want = np.arange(100, 110)
    else:
        other = cs.open_array(d, path=path)
        if change == "append":
            other.append(np.array([10.5, 11.5]))
            want = np.arange(12) + 0.5
        else:
            other.resize(5)
            other.resize(10)
            want = np.concatenate([np.arange(5) + 0.5, np.full(5, -1.0)])
    np.testing.assert_array_equal(cached[...], want)
    assert cached.dtype == want.dtype
    cached[0] = 7
    want[0] = 7
    np.testing.assert_array_equal(cs.open_array(d, path=path, mode="r")[...], want)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("change", ["recreate", "shrink-grow", "delete"])
def test_a_handle_opened_through_a_cache_after_another_handles_change_reads_the_new_node(
        tmp_path, fmt, change):
    """The handle is opened through the cache only after the change (its cache had the old
    array's metadata and chunk 0; the handles that put them there are gone): it read the
    old fill value and chunk 0 with the new array's chunk 1, two arrays mixed. The cache
    keeps the count of this process's changes of the node it last saw, and drops what it
    holds of the node when a handle opens it at another count."""
    import gc

    import numpy as np

    import chunkstore as cs
    d = str(tmp_path / "t.zarr")
    cache = LRUStoreCache(DirectoryStore(d), max_size=2**24)
    g = cs.open_group(cache, mode="w", zarr_format=fmt)
    g.create_dataset("b", shape=(10,), chunks=5, dtype="i4")[:] = np.arange(10)
    np.testing.assert_array_equal(g["b"][:5], np.arange(5))  # (metadata, chunk 0 cached)
    gc.collect()
    other = cs.open_group(d, mode="r+")
    if change == "recreate":
        other.create_dataset("b", shape=(10,), chunks=5, dtype="i4", fill_value=-7,
                             overwrite=True)[5:] = 100
        want = np.array([-7] * 5 + [100] * 5)
    elif change == "shrink-grow":
        other["b"].resize(3)
        other["b"].resize(10)
        want = np.array([0, 1, 2] + [0] * 7)
    else:
        del other["b"]
        with pytest.raises(cs.errors.ArrayNotFoundError):
            g["b"]
        return
    np.testing.assert_array_equal(g["b"][:], want)
    # an unchanged node's cached values are kept by the next handle (a hit, not a miss)
    hits = cache.hits
    np.testing.assert_array_equal(g["b"][:], want)
    assert cache.hits > hits


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("change", ["resize", "re-create"])
def test_attributes_through_a_cache_stay_writable_after_another_handles_change(fmt, change):
    """A handle opened through an LRUStoreCache read its metadata behind the cache once
    another handle of the process changed the array, and then took its attributes as
    served by a snapshot: ReadOnlyError on `attrs[k] = v` (read_only still False). They are
    written through the cache, and read back fresh through it and beside it."""
    import numpy as np

    import chunkstore as cs
    store = MemoryStore()
    a = cs.create_array(store, name="a", shape=(4, 4), chunks=(2, 2), dtype="i4",
                        zarr_format=fmt)
    cache = LRUStoreCache(store, max_size=2**20)
    c = cs.open_array(cache, path="a", mode="r+")
    c.attrs["k"] = 0
    if change == "resize":
        a.resize((5, 5))
    else:
        cs.create_array(store, name="a", shape=(6,), chunks=(3,), dtype="f8",
                        zarr_format=fmt, overwrite=True)
    c.attrs["k"] = 1
    assert c.attrs.asdict() == {"k": 1}
    assert cs.open_array(cache, path="a", mode="r").attrs.asdict() == {"k": 1}
    assert cs.open_array(store, path="a", mode="r").attrs.asdict() == {"k": 1}
    assert c.shape == ((5, 5) if change == "resize" else (6,))
    c[...] = 2
    assert (cs.open_array(store, path="a", mode="r")[...] == 2).all()
    assert np.asarray(c[...]).dtype == (np.int32 if change == "resize" else np.float64)


def _another_writer_appends(path):
    """An append chunkstore's in-process counts do not see: another library's (as another
    process's would be)."""
    import warnings

    import numpy as np
    import zarr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.open_array(path, mode="r+").append(np.arange(10, 14, dtype="i4"))


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("op", ["attrs", "append", "fill_value", "resize"])
def test_metadata_changes_through_a_cache_start_from_the_stored_documents(tmp_path, fmt, op):
    """A handle reading through an LRUStoreCache made its metadata changes from the cache's
    copies: after another process appended, its append wrote over the appended rows (shape
    kept), a fill value change or (v3) an attribute update undid the append, and a shrink
    skipped the trim. Read as stored now, under the locks; the cache's stale copies are
    dropped."""
    import numpy as np

    import chunkstore as cs
    path = str(tmp_path / "a.zarr")
    cs.create(shape=(4,), chunks=(2,), dtype="i4", store=path, zarr_format=fmt)
    h = cs.open_array(LRUStoreCache(DirectoryStore(path), max_size=2**20), mode="r+")
    h[...] = 7
    dict(h.attrs)
    _another_writer_appends(path)
    want = [7] * 4 + list(range(10, 14))
    if op == "attrs":
        h.attrs["k"] = 1
    elif op == "append":
        h.append(np.arange(20, 24, dtype="i4"))
        want += list(range(20, 24))
    elif op == "fill_value":
        h.fill_value = 5
    else:
        h.resize(6)
        h.resize(8)
        want = want[:6] + [0, 0]
    got = cs.open_array(path, mode="r")
    np.testing.assert_array_equal(got[:], want)
    if op == "attrs":
        assert got.attrs["k"] == 1  # (h's reads may show its cache's copies until
        # invalidate(), as the README says: an attribute update reads no array metadata)
    else:
        np.testing.assert_array_equal(h[:], want)


@pytest.mark.parametrize("fmt", [2, 3])
def test_attribute_updates_and_consolidation_through_caches_keep_others_updates(tmp_path, fmt):
    """Two handles, each through its own LRUStoreCache over one directory: an attribute
    update wrote back its cache's copy of the document, dropping the other's update (in v3
    the group's consolidated metadata too); consolidate_metadata through a cache wrote the
    cache's old shapes and attributes."""
    import chunkstore as cs
    path = str(tmp_path / "g.zarr")
    cs.open_group(path, mode="w", zarr_format=fmt).attrs["a"] = 0

    def through_a_cache():
        return cs.open_group(LRUStoreCache(DirectoryStore(path), max_size=2**20), mode="r+")

    g1, g2 = through_a_cache(), through_a_cache()
    dict(g1.attrs)
    g2.attrs["b"] = 2
    cs.consolidate_metadata(g1.store)
    g1.attrs["c"] = 3
    assert dict(cs.open_group(path, mode="r").attrs) == {"a": 0, "b": 2, "c": 3}
    cs.open_group(path, mode="r+").create_array("x", shape=(4,), dtype="i4")
    cs.open_array(path, path="x", mode="r+").append([1, 2])
    cs.consolidate_metadata(g1.store)
    snap = cs.open_consolidated(path)
    assert snap["x"].shape == (6,) and dict(snap.attrs) == {"a": 0, "b": 2, "c": 3}
