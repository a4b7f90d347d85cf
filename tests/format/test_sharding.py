"""The sharding_indexed codec and ShardedStoreView (chunkstore.codecs.sharding, chunkstore.format.sharded_view).

- I/O pattern, counted with a wrapper store: byte-range reads (one for the index, one for the
  coalesced chunk ranges), the index read once and cached, a whole-shard write is one store
  write and no read, a partial write is one read and one write.
- Shards the view writes are read by zarr-python 3 and tensorstore (index at start and end,
  transpose before sharding, bytes -> bytes codecs after it, nested sharding), and the view
  reads what they write.
- A corrupt or truncated shard index raises ChunkDecodeError naming the shard key and store.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import MutableMapping

import numpy as np
import pytest

from chunkstore.codecs.sharding import MISSING, ShardingCodec
from chunkstore.format.sharded_view import ShardedStoreView
from chunkstore.codecs.v3 import ChunkCodecV3
from chunkstore.errors import ChunkDecodeError
from chunkstore.metadata.v3 import ArrayMetadataV3, encode_array_metadata_v3
from chunkstore.storage.directory import DirectoryStore
from chunkstore.storage.memory import MemoryStore
from chunkstore.sync.synchronizers import ThreadSynchronizer
from v3_fixtures import assert_array_same, grid_coords, read_v3, write_v3

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.filterwarnings("ignore:Combining a `sharding_indexed` codec")

BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
ZSTD = {"name": "zstd", "configuration": {"level": 1, "checksum": False}}
CRC = {"name": "crc32c"}


def sharded(shape=(40, 40), shard=(20, 20), inner=(5, 5), dtype="int32", fill=0,
            codecs=(BYTES, ZSTD), index_location="end", index_codecs=(BYTES, CRC),
            before=(), after=(), cke=None):
    conf = {"chunk_shape": list(inner), "codecs": list(codecs),
            "index_codecs": list(index_codecs), "index_location": index_location}
    return ArrayMetadataV3(shape=shape, chunks=shard, dtype=dtype, fill_value=fill,
                           codecs=[*before, {"name": "sharding_indexed", "configuration": conf},
                                   *after], chunk_key_encoding=cke)


class Counting(MutableMapping):
    """A store wrapper counting every call; ``partial=False`` hides get_partial."""

    def __init__(self, inner=None, partial=True):
        self.inner = MemoryStore() if inner is None else inner
        self.calls = []
        if partial:
            self.get_partial = self._get_partial
            self.open_version = self._open_version

    def reset(self):
        self.calls = []

    def count(self, name):
        return sum(1 for c in self.calls if c[0] == name)

    def __getitem__(self, k):
        self.calls.append(("get", k))
        return self.inner[k]

    def getitems(self, keys):
        keys = list(keys)
        self.calls.append(("getitems", tuple(keys)))
        return self.inner.getitems(keys)

    def _get_partial(self, k, ranges):
        ranges = list(ranges)
        self.calls.append(("get_partial", k, tuple(ranges)))
        return self.inner.get_partial(k, ranges)

    def _open_version(self, k):
        """The inner store's version reader, each read counted as one get_partial."""
        inner, calls = self.inner.open_version(k), self.calls

        class Counted(type(inner)):
            def read(self, ranges):
                ranges = list(ranges)
                calls.append(("get_partial", k, tuple(ranges)))
                return super().read(ranges)

        inner.__class__ = Counted
        return inner

    def __setitem__(self, k, v):
        self.calls.append(("set", k))
        self.inner[k] = v

    def __delitem__(self, k):
        self.calls.append(("del", k))
        del self.inner[k]

    def __contains__(self, k):
        return k in self.inner

    def __iter__(self):
        return iter(self.inner)

    def __len__(self):
        return len(self.inner)

    def listdir(self, prefix=""):
        return self.inner.listdir(prefix)

    def __repr__(self):
        return "Counting()"

    @property
    def reads(self):
        return [c for c in self.calls if c[0] in ("get", "getitems", "get_partial")]

    @property
    def writes(self):
        return [c for c in self.calls if c[0] in ("set", "del")]


def zarr_open(store):
    """zarr-python reading a chunkstore store's contents (it only takes its own store types)."""
    from zarr.core.buffer import cpu

    inner = getattr(store, "inner", store)
    d = {k: cpu.Buffer.from_bytes(inner[k]) for k in inner}
    return zarr.open_array(zarr.storage.MemoryStore(store_dict=d), mode="r")


def data_for(meta, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(1, 1000, size=meta.shape).astype(meta.dtype)


def filled(meta, seed=0, inner=None):
    """A Counting store holding the whole array written through the view."""
    store = Counting(inner)
    data = data_for(meta, seed)
    write_v3(store, meta, data)
    store.reset()
    return store, data


def encoded_inner(view, data, coords):
    reg = tuple(slice(c * n, (c + 1) * n) for c, n in zip(coords, view.inner_chunks))
    chunk = np.full(view.inner_chunks, view.meta.fill_value, dtype=view.meta.dtype)
    part = data[reg]
    chunk[tuple(slice(0, s) for s in part.shape)] = part
    return view.codec.encode(chunk)


# ------------------------------------------------------------------------------ reads


def test_partial_reads_coalesced_and_index_cached(tmp_path, settled_files):
    # (a directory: its versions have an identity, so indexes are cached)
    meta = sharded()
    store, data = filled(meta, inner=DirectoryStore(str(tmp_path)))
    view = ShardedStoreView(store, meta)
    keys = [view.inner_key(c) for c in [(0, 0), (0, 1), (0, 2)]]
    got = view.getitems(keys)
    assert set(got) == set(keys)
    parts = [c for c in store.calls if c[0] == "get_partial"]
    assert len(store.reads) == 2 and len(parts) == 2  # the index, then the chunks
    size = len(store.inner["c/0/0"])
    nb = view.sharding.index_nbytes
    assert parts[0][2] == ((size - nb, nb),)  # the index at the end of that version
    assert len(parts[1][2]) == 1  # three neighbouring chunks: one coalesced range
    for c, k in zip([(0, 0), (0, 1), (0, 2)], keys):
        assert got[k] == encoded_inner(view, data, c)
        assert (view.codec.decode(got[k]) == data[0:5, 5 * c[1]:5 * c[1] + 5]).all()
    store.reset()
    again = view.getitems(keys)
    assert again == got
    assert [c[0] for c in store.calls] == ["get_partial"]  # index cached: one read
    # two shards: one index read + one data read each
    store.reset()
    view2 = ShardedStoreView(store, meta)
    view2.getitems([view2.inner_key((0, 0)), view2.inner_key((7, 7))])
    assert store.count("get_partial") == 4 and len(store.reads) == 4


def test_distant_ranges_not_coalesced_with_small_gap():
    meta = sharded()
    store, data = filled(meta)
    view = ShardedStoreView(store, meta, max_gap=0)
    view.getitems([view.inner_key((0, 0)), view.inner_key((3, 3))])  # far apart in the shard
    data_call = [c for c in store.calls if c[0] == "get_partial"][1]
    assert len(data_call[2]) == 2
    store.reset()
    wide = ShardedStoreView(store, meta, max_gap=1 << 20)
    got = wide.getitems([wide.inner_key((0, 0)), wide.inner_key((3, 3))])
    assert len([c for c in store.calls if c[0] == "get_partial"][1][2]) == 1
    assert got[wide.inner_key((3, 3))] == encoded_inner(wide, data, (3, 3))


def test_index_at_start_read_as_prefix():
    meta = sharded(index_location="start")
    store, data = filled(meta)
    view = ShardedStoreView(store, meta)
    got = view.getitems([view.inner_key((5, 6))])
    first = store.calls[0]
    assert first[0] == "get_partial" and first[2] == ((0, view.sharding.index_nbytes),)
    assert got[view.inner_key((5, 6))] == encoded_inner(view, data, (5, 6))
    assert_array_same(read_v3(store.inner, meta), data)


def test_store_without_get_partial_reads_whole_shards_once():
    meta = sharded()
    store, data = filled(meta)
    store = Counting(store.inner, partial=False)
    view = ShardedStoreView(store, meta)
    keys = [view.inner_key(c) for c in [(0, 0), (1, 1), (2, 3), (5, 5)]]  # 2 shards
    got = view.getitems(keys)
    assert store.calls == [("getitems", (view.shard_key((0, 0)), view.shard_key((1, 1))))]
    for k, c in zip(keys, [(0, 0), (1, 1), (2, 3), (5, 5)]):
        assert got[k] == encoded_inner(view, data, c)
    # and plain dicts work too
    plain = dict(store.inner.items())
    assert ShardedStoreView(plain, meta).getitems(keys) == got


def test_missing_shard_and_missing_inner_chunk_are_absent():
    meta = sharded(fill=-1)
    data = np.full(meta.shape, -1, dtype="i4")
    data[0, 0] = 5  # one inner chunk in shard (0, 0); the other shards all fill
    store = Counting()
    write_v3(store, meta, data)
    assert sorted(store.inner) == ["c/0/0", "zarr.json"]
    view = ShardedStoreView(store, meta)
    got = view.getitems([view.inner_key((0, 0)), view.inner_key((0, 1)), view.inner_key((7, 7))])
    assert list(got) == [view.inner_key((0, 0))]
    assert view.inner_key((0, 1)) not in view and view.inner_key((0, 0)) in view
    with pytest.raises(KeyError):
        view[view.inner_key((7, 7))]
    index, _ = view.sharding.split(store.inner["c/0/0"])
    assert (index[1:] == MISSING).all() and index[0, 1] > 0
    assert_array_same(read_v3(store, meta), data)
    assert_array_same(zarr_open(store)[...], data)


# ------------------------------------------------------------------------------ writes


def test_whole_shard_write_is_one_store_write():
    meta = sharded()
    store = Counting()
    view = ShardedStoreView(store, meta)
    data = data_for(meta)
    view.setitems({view.inner_key((i, j)): encoded_inner(view, data, (i, j))
                   for i in range(4) for j in range(4)})
    assert store.calls == [("set", "c/0/0")]
    assert store.reads == []


def test_edge_shard_whole_write_covers_only_chunks_inside_the_array():
    meta = sharded(shape=(33, 40))  # shard row 1 holds inner rows 4..6 inside the array
    store = Counting()
    view = ShardedStoreView(store, meta)
    data = data_for(meta)
    items = {view.inner_key((i, j)): encoded_inner(view, data, (i, j))
             for i in range(4, 7) for j in range(4)}
    view.setitems(items)
    assert store.calls == [("set", "c/1/0")]
    store.inner["zarr.json"] = encode_array_metadata_v3(meta)
    z = zarr_open(store)
    assert_array_same(z[20:33, 0:20], data[20:33, 0:20])


def test_partial_write_read_modify_write():
    meta = sharded()
    store, data = filled(meta)
    view = ShardedStoreView(store, meta)
    before = view.getitems([view.inner_key(c) for c in grid_coords((4, 4))])
    store.reset()
    new = data.copy()
    new[5:10, 0:5] = -7
    new[15:20, 15:20] = -8
    view.setitems({view.inner_key((1, 0)): encoded_inner(view, new, (1, 0)),
                   view.inner_key((3, 3)): encoded_inner(view, new, (3, 3))})
    assert [c[0] for c in store.calls] == ["get", "set"]  # one read of the shard, one write
    after = view.getitems([view.inner_key(c) for c in grid_coords((4, 4))])
    for c in grid_coords((4, 4)):
        k = view.inner_key(c)
        if c in ((1, 0), (3, 3)):
            assert after[k] == encoded_inner(view, new, c)
        else:
            assert after[k] == before[k]
    assert_array_same(read_v3(store, meta), new)
    assert_array_same(zarr_open(store)[...], new)


def test_write_into_absent_shard():
    meta = sharded()
    store = Counting()
    view = ShardedStoreView(store, meta)
    data = data_for(meta)
    view[view.inner_key((6, 2))] = encoded_inner(view, data, (6, 2))
    assert [c[0] for c in store.calls] == ["get", "set"] and store.calls[1][1] == "c/1/0"
    assert list(view) == [view.inner_key((6, 2))] and len(view) == 1


def test_writes_drop_the_cached_index(tmp_path, settled_files):
    meta = sharded()
    store, data = filled(meta, inner=DirectoryStore(str(tmp_path)))
    view = ShardedStoreView(store, meta)
    k = view.inner_key((2, 2))
    view.getitems([k])  # caches the index
    new = encoded_inner(view, np.zeros_like(data) + 3, (2, 2))
    view[k] = new
    store.reset()
    assert view[k] == new
    # the new shard's index is read with the version it is of (a write cannot know the
    # version the store gave the new shard without racing the next writer)
    assert [c[0] for c in store.calls] == ["get_partial", "get_partial"]
    store.reset()
    assert view[k] == new
    assert [c[0] for c in store.calls] == ["get_partial"]  # then cached again


def test_delitems():
    meta = sharded()
    store, data = filled(meta)
    view = ShardedStoreView(store, meta)
    k = view.inner_key((1, 1))
    del view[k]
    assert [c[0] for c in store.calls[-2:]] == ["get", "set"]
    assert k not in view and view.inner_key((1, 2)) in view
    with pytest.raises(KeyError):
        del view[k]
    store.reset()
    view.delitems([k])  # already absent: nothing written
    assert store.writes == []
    # every chunk of a shard: the shard is deleted without being read
    store.reset()
    view.delitems([view.inner_key(c) for c in grid_coords((4, 4))])
    assert store.calls == [("del", "c/0/0")]
    assert "c/0/0" not in store.inner and not view.getitems([view.inner_key((0, 0))])
    # deleting the last remaining chunks one by one removes the shard too
    keys = [view.inner_key((4 + i, j)) for i in range(4) for j in range(4)]
    view.delitems(keys[:-1])
    assert "c/1/0" in store.inner
    view.delitems(keys[-1:])
    assert "c/1/0" not in store.inner
    expect = data.copy()
    expect[0:20, 0:20] = 0
    expect[20:40, 0:20] = 0
    assert_array_same(read_v3(store, meta), expect)


def test_listing_and_keys():
    meta = sharded(shape=(43, 40))
    data = data_for(meta)
    data[:25, :25] = 0  # inner chunks (0..4, 0..4) all fill: not stored
    store = Counting()
    write_v3(store, meta, data)
    view = ShardedStoreView(store, meta)
    present = set(view.stored_inner_chunks())
    expected = {c for c in grid_coords(view.inner_grid_shape) if not (c[0] < 5 and c[1] < 5)}
    assert present == expected
    assert set(view) == {view.inner_key(c) for c in expected} and len(view) == len(expected)
    # shard (0, 0) is all fill (rows and columns 0..19): never stored
    assert set(view.stored_shards()) == {(0, 1), (1, 0), (1, 1), (2, 0), (2, 1)}
    for c in grid_coords(view.inner_grid_shape):
        assert view.inner_coords(view.inner_key(c)) == c
    assert view.inner_key((1, 7)) == "c/0/1|1.3" and view.inner_key((5, 7)) == "c/1/1|1.3"
    assert view.shard_key_of("c/0/1|1.3") == "c/0/1"
    assert view.getsize() == sum(len(v) for v in store.inner.values())
    for bad in ("c/0/1", "c/0/1|1", "c/0/1|4.0", "c/0/1|a.b", "x|0.0", 5):
        assert bad not in view
        with pytest.raises((KeyError, TypeError)):
            view[bad]


@pytest.mark.parametrize("cke,shard_key", [(None, "arr/c/1/0"), (".", "arr/c.1.0"),
                                           ({"name": "v2"}, "arr/1.0"),
                                           ({"name": "v2", "configuration": {"separator": "/"}},
                                            "arr/1/0")])
def test_chunk_key_encodings_and_prefix(tmp_path, cke, shard_key):
    meta = sharded(shape=(30, 25), cke=cke)
    store = DirectoryStore(str(tmp_path))
    data = data_for(meta)
    write_v3(store, meta, data, prefix="arr")
    view = ShardedStoreView(store, meta, "arr/")
    assert view.shard_key((1, 0)) == shard_key and shard_key in store
    assert view.inner_key((4, 1)) == shard_key + "|0.1"
    assert set(view.stored_shards()) == set(grid_coords(view.shard_grid_shape))
    assert len(list(view.stored_inner_chunks())) == 6 * 5
    assert_array_same(read_v3(store, meta, "arr"), data)
    assert_array_same(zarr.open_array(str(tmp_path / "arr"), mode="r")[...], data)


def test_zero_dim_sharded(tmp_path):
    meta = ArrayMetadataV3(shape=(), chunks=(), dtype="float64", fill_value=0, codecs=[
        {"name": "sharding_indexed", "configuration": {"chunk_shape": [], "codecs": [BYTES]}}])
    store = DirectoryStore(str(tmp_path))
    write_v3(store, meta, np.array(4.25))
    view = ShardedStoreView(store, meta)
    assert view.inner_key(()) == "c|0" and view.inner_coords("c|0") == ()
    assert list(view.stored_inner_chunks()) == [()]
    assert zarr.open_array(str(tmp_path), mode="r")[()] == 4.25


# ------------------------------------------------------------------------------ locking


class RecordingSync:
    def __init__(self):
        self.keys = []
        self._locks = {}

    def __getitem__(self, key):
        self.keys.append(key)
        return self._locks.setdefault(key, threading.Lock())


def test_synchronizer_locks_the_shard_key():
    meta = sharded()
    store, data = filled(meta)
    sync = RecordingSync()
    view = ShardedStoreView(store, meta, "", synchronizer=sync)
    view.setitems({view.inner_key((0, 0)): b"x", view.inner_key((5, 5)): b"y"})
    view.delitems([view.inner_key((0, 0))])
    assert sync.keys == ["c/0/0", "c/1/1", "c/0/0"]


@pytest.mark.parametrize("with_sync", [False, True])
def test_concurrent_writes_to_one_shard_lose_nothing(with_sync):
    meta = sharded(shape=(20, 20))
    store = MemoryStore()
    sync = ThreadSynchronizer() if with_sync else None
    data = data_for(meta)
    views = [ShardedStoreView(store, meta, synchronizer=sync) for _ in range(4)]
    barrier = threading.Barrier(16)

    def work(i, j):
        v = views[(i * 4 + j) % 4]
        barrier.wait()
        with (sync[v.inner_key((i, j))] if sync else contextlib.nullcontext()):  # as the Array
            v.setitems({v.inner_key((i, j)): encoded_inner(v, data, (i, j))})

    threads = [threading.Thread(target=work, args=c) for c in grid_coords((4, 4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ShardedStoreView(store, meta)) == 16
    assert_array_same(read_v3(store, meta), data)


# ------------------------------------------------------------------------------ corruption


@pytest.mark.parametrize("location", ["start", "end"])
@pytest.mark.parametrize("partial", [True, False])
def test_corrupt_index_names_the_shard(location, partial):
    meta = sharded(index_location=location)
    store, data = filled(meta)
    raw = bytearray(store.inner["c/1/0"])
    n = ShardedStoreView(store, meta).sharding.index_nbytes
    pos = 3 if location == "start" else len(raw) - n + 3
    raw[pos] ^= 0xFF
    store.inner["c/1/0"] = bytes(raw)
    s = store if partial else Counting(store.inner, partial=False)
    view = ShardedStoreView(s, meta)
    with pytest.raises(ChunkDecodeError) as ei:
        view.getitems([view.inner_key((4, 0))])
    msg = str(ei.value)
    assert "'c/1/0'" in msg and repr(s) in msg and "checksum mismatch" in msg
    with pytest.raises(ChunkDecodeError, match="'c/1/0'"):
        view.inner_key((4, 0)) in view  # noqa: B015
    with pytest.raises(ChunkDecodeError, match="'c/1/0'"):
        view.setitems({view.inner_key((4, 0)): b"x"})  # a partial write reads the shard
    # other shards still read
    assert view.getitems([view.inner_key((0, 0))])
    # the whole-shard codec path names the shard key too
    with pytest.raises(ChunkDecodeError, match="'c/1/0'"):
        ChunkCodecV3(meta).decode(store.inner["c/1/0"], key="c/1/0", store=store)


@pytest.mark.parametrize("location", ["start", "end"])
def test_truncated_shard(location):
    meta = sharded(index_location=location)
    store, data = filled(meta)
    raw = store.inner["c/0/1"]
    store.inner["c/0/1"] = raw[:-10] if location == "start" else raw[:40]
    view = ShardedStoreView(store, meta)
    with pytest.raises(ChunkDecodeError, match="'c/0/1'") as ei:
        view.getitems([view.inner_key((c, 7)) for c in range(4)])
    # (the index's checksum, the shard's size against the index, or a short chunk)
    assert any(w in str(ei.value) for w in ("truncated", "checksum", "outside the data"))
    store.inner["c/0/1"] = b"tiny"
    view.invalidate()
    with pytest.raises(ChunkDecodeError, match="'c/0/1'.*(bytes|truncated)"):
        ShardedStoreView(Counting(store.inner, partial=False), meta).getitems(
            [view.inner_key((0, 4))])
    with pytest.raises(ChunkDecodeError, match="'c/0/1'"):
        view.getitems([view.inner_key((0, 4))])


def test_index_pointing_outside_the_shard():
    meta = sharded(index_codecs=(BYTES,))  # no checksum on the index
    store, data = filled(meta)
    sh = ShardedStoreView(store, meta).sharding
    raw = store.inner["c/0/0"]
    index, _ = sh.split(raw)
    index[2] = (len(raw) + 100, 50)
    store.inner["c/0/0"] = raw[:-sh.index_nbytes] + sh.encode_index(index)
    with pytest.raises(ChunkDecodeError, match="'c/0/0'.*(past the end|ends at byte)"):
        ShardedStoreView(store, meta).getitems([ShardedStoreView(store, meta).inner_key((0, 2))])
    whole = Counting(store.inner, partial=False)
    with pytest.raises(ChunkDecodeError, match="'c/0/0'.*ends at byte"):
        ShardedStoreView(whole, meta).getitems([ShardedStoreView(whole, meta).inner_key((0, 2))])
    for bad in [(10, 2**40), (2**63, 10)]:  # refused before any read of that size
        index[2] = bad
        store.inner["c/0/0"] = raw[:-sh.index_nbytes] + sh.encode_index(index)
        with pytest.raises(ChunkDecodeError, match="'c/0/0'.*corrupt shard index"):
            v = ShardedStoreView(store, meta)
            v.getitems([v.inner_key((0, 2))])
    index[2] = (MISSING, 5)
    store.inner["c/0/0"] = raw[:-sh.index_nbytes] + sh.encode_index(index)
    with pytest.raises(ChunkDecodeError, match="missing marker"):
        ShardedStoreView(store, meta).getitems([ShardedStoreView(store, meta).inner_key((0, 2))])


def test_inner_chunk_checksum_names_the_inner_key():
    meta = sharded(codecs=(BYTES, CRC), index_codecs=(BYTES,))
    store, data = filled(meta)
    view = ShardedStoreView(store, meta)
    index, _ = view.sharding.split(store.inner["c/0/0"])
    off = int(index[view._slot((1, 2)), 0])
    raw = bytearray(store.inner["c/0/0"])
    raw[off] ^= 1
    store.inner["c/0/0"] = bytes(raw)
    k = view.inner_key((1, 2))
    with pytest.raises(ChunkDecodeError, match="'c/0/0\\|1.2'.*checksum mismatch"):
        view.codec.decode(view[k], key=k, store=store)


def test_stale_index_cache():
    meta = sharded()
    store, data = filled(meta)
    reader = ShardedStoreView(store, meta)
    k = reader.inner_key((0, 0))
    reader.getitems([k])  # caches shard c/0/0's index
    writer = ShardedStoreView(store, meta)
    # another writer replaces the shard with a much smaller one
    small = encoded_inner(writer, np.ones_like(data), (0, 0))
    writer.delitems([writer.inner_key(c) for c in grid_coords((4, 4)) if c != (0, 0)])
    writer[k] = small
    # the cached ranges now run past the end: the reader notices, re-reads the index
    assert reader.getitems([reader.inner_key((0, 3))]) == {}
    assert reader[k] == small
    # without the cache every call sees the current index
    nocache = ShardedStoreView(store, meta, cache_index=False)
    nocache.getitems([k])
    store.reset()
    nocache.getitems([k])
    assert store.count("get_partial") == 2


# ------------------------------------------------------------------------------ interop


LAYOUTS = {
    "end": dict(),
    "start": dict(index_location="start"),
    "inner_crc32c_gzip": dict(codecs=(BYTES, {"name": "gzip", "configuration": {"level": 1}},
                                      CRC)),
    "big_endian_blosc": dict(codecs=({"name": "bytes", "configuration": {"endian": "big"}},
                                     {"name": "blosc", "configuration": {
                                         "cname": "lz4", "clevel": 5, "shuffle": "shuffle"}})),
    "inner_transpose": dict(codecs=({"name": "transpose", "configuration": {"order": [1, 0]}},
                                    BYTES, ZSTD)),
    "transpose_before": dict(before=({"name": "transpose", "configuration": {"order": [1, 0]}},),
                             inner=(5, 10)),
    "crc32c_after": dict(after=(CRC,)),
    "index_no_crc": dict(index_codecs=(BYTES,), index_location="start"),
    "nested": dict(inner=(10, 10), codecs=({"name": "sharding_indexed", "configuration": {
        "chunk_shape": [5, 5], "codecs": [BYTES, ZSTD], "index_codecs": [BYTES, CRC],
        "index_location": "end"}},)),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", ["int32", "float32", "uint8"])
def test_view_writes_zarr_python_reads(tmp_path, layout, dtype):
    meta = sharded(shape=(37, 45), dtype=dtype, fill=1, **LAYOUTS[layout])
    data = data_for(meta)
    data[0:20, 0:20] = 1  # a whole shard of fill: not stored
    data[20:25, 20:25] = 1  # one inner chunk of fill: absent from its shard
    store = DirectoryStore(str(tmp_path))
    write_v3(store, meta, data)
    assert meta.chunk_key((0, 0)) not in store
    assert_array_same(zarr.open_array(str(tmp_path), mode="r")[...], data)
    assert_array_same(read_v3(DirectoryStore(str(tmp_path), mode="r"), meta), data)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_zarr_python_writes_view_reads(tmp_path, layout):
    meta = sharded(shape=(37, 45), dtype="int16", fill=-1, **LAYOUTS[layout])
    (tmp_path / "zarr.json").write_bytes(encode_array_metadata_v3(meta))
    data = data_for(meta).astype("i2")
    data[20:25, 20:25] = -1
    z = zarr.open_array(str(tmp_path), mode="r+")
    z[...] = data
    z[3:9, 30:41] = 77  # a partial update: zarr-python rewrites those shards
    data[3:9, 30:41] = 77
    assert_array_same(read_v3(DirectoryStore(str(tmp_path), mode="r"), meta), data)


# (tensorstore refuses bytes -> bytes codecs after sharding_indexed: crc32c_after is
# covered by zarr-python above)
@pytest.mark.parametrize("layout", ["end", "start", "inner_transpose", "nested",
                                    "transpose_before", "index_no_crc"])
def test_tensorstore_reads_view_shards(tmp_path, layout):
    ts = pytest.importorskip("tensorstore")
    meta = sharded(shape=(37, 45), dtype="float64", fill=0.5, **LAYOUTS[layout])
    data = data_for(meta).astype("f8") / 7
    data[20:25, 20:25] = 0.5
    write_v3(DirectoryStore(str(tmp_path)), meta, data)
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path)}}).result()
    assert_array_same(t.read().result(), data)


def test_tensorstore_writes_view_reads(tmp_path):
    ts = pytest.importorskip("tensorstore")
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path)},
                 "metadata": {"shape": [30, 41], "data_type": "uint16",
                              "chunk_grid": {"name": "regular",
                                             "configuration": {"chunk_shape": [10, 20]}},
                              "codecs": [{"name": "sharding_indexed", "configuration": {
                                  "chunk_shape": [5, 5], "index_location": "start",
                                  "codecs": [BYTES, ZSTD]}}]},
                 "create": True}).result()
    data = np.arange(30 * 41, dtype="u2").reshape(30, 41)
    t[5:30, :] = data[5:30, :]
    store = DirectoryStore(str(tmp_path), mode="r")
    from chunkstore.metadata.v3 import parse_array_metadata_v3
    meta = parse_array_metadata_v3(store["zarr.json"])
    expect = data.copy()
    expect[:5] = 0
    assert_array_same(read_v3(store, meta), expect)


# ------------------------------------------------------------------------------ the codec


def test_sharding_codec_whole_shard_roundtrip_and_empty_chunks():
    meta = sharded(shape=(20, 20), fill=9)
    codec = ChunkCodecV3(meta)
    x = np.full((20, 20), 9, dtype="i4")
    x[0:5, 5:10] = np.arange(25).reshape(5, 5)
    enc = codec.encode(x)
    sh = codec.sharding
    index, _ = sh.split(enc)
    assert (index[:, 0] != MISSING).sum() == 1  # only the non-fill inner chunk is stored
    assert_array_same(codec.decode(enc), x)
    all_fill = codec.encode(np.full((20, 20), 9, dtype="i4"))
    assert len(all_fill) == sh.index_nbytes
    assert_array_same(codec.decode(all_fill), np.full((20, 20), 9, dtype="i4"))


def test_sharding_codec_nan_fill_skips_nan_chunks():
    meta = sharded(shape=(10, 10), shard=(10, 10), dtype="float32", fill=np.nan)
    codec = ChunkCodecV3(meta)
    x = np.full((10, 10), np.nan, dtype="f4")
    x[9, 9] = -0.0
    index, _ = codec.sharding.split(codec.encode(x))
    assert (index[:, 0] != MISSING).tolist() == [False, False, False, True]


@pytest.mark.parametrize("conf,match", [
    ({"chunk_shape": [3, 3]}, "multiple"),
    ({"chunk_shape": [5]}, "dimensions"),
    ({"chunk_shape": [5, 5], "index_location": "middle"}, "index_location"),
    ({"chunk_shape": [5, 5], "index_codecs": [BYTES, ZSTD]}, "fixed size"),
    ({"chunk_shape": [5, 5], "extra": 1}, "extra"),
    ({}, "chunk_shape"),
])
def test_sharding_configuration_errors(conf, match):
    with pytest.raises(ValueError, match=match):
        ShardingCodec(conf, "int32", (10, 10))


def test_view_needs_sharding():
    meta = ArrayMetadataV3(shape=(4,), chunks=(2,), dtype="i4")
    with pytest.raises(ValueError, match="sharding"):
        ShardedStoreView(MemoryStore(), meta)


def test_transpose_before_sharding_maps_axes():
    meta = sharded(shape=(40, 40), shard=(20, 20), inner=(5, 10),
                   before=({"name": "transpose", "configuration": {"order": [1, 0]}},))
    view = ShardedStoreView(MemoryStore(), meta)
    assert view.inner_chunks == (10, 5) == meta.inner_chunks
    assert view.chunks_per_shard == (2, 4)
    # in-shard (row 1, col 2) is encoded-grid (2, 1): index row 2 * 2 + 1
    assert view._slot((1, 2)) == 5 and view._within_of_slot(5) == (1, 2)
    assert view.codec.order == "F"  # inner chunks stored transposed


def test_slots_roundtrip_with_3d_transpose():
    # inner chunk_shape is in the transposed axes: the shard (12, 6, 10) arrives as (10, 12, 6)
    # (zarr-python also checks it against the untransposed shard shape, so both divide)
    meta = sharded(shape=(24, 18, 20), shard=(12, 6, 10), inner=(2, 6, 2),
                   before=({"name": "transpose", "configuration": {"order": [2, 0, 1]}},))
    view = ShardedStoreView(MemoryStore(), meta)
    assert view.inner_chunks == (6, 2, 2) and view.chunks_per_shard == (2, 3, 5)
    slots = [view._slot(w) for w in grid_coords(view.chunks_per_shard)]
    assert sorted(slots) == list(range(30))
    for w in grid_coords(view.chunks_per_shard):
        assert view._within_of_slot(view._slot(w)) == w
    data = data_for(meta)
    store = MemoryStore()
    write_v3(store, meta, data)
    assert set(ShardedStoreView(store, meta).stored_inner_chunks()) == set(
        grid_coords(view.inner_grid_shape))
    assert_array_same(zarr_open(store)[...], data)


def test_index_cache_is_bounded_by_bytes(tmp_path, settled_files):
    meta = sharded()
    store, data = filled(meta, inner=DirectoryStore(str(tmp_path)))
    one = ShardedStoreView(store, meta).sharding.nchunks * 16
    view = ShardedStoreView(store, meta, max_cache_bytes=2 * one)
    for c in [(0, 0), (0, 4), (4, 0), (4, 4)]:  # four shards
        view.getitems([view.inner_key(c)])
    assert len(view._cache) == 2 and view._cache_bytes == 2 * one
    store.reset()
    view.getitems([view.inner_key((4, 4))])  # most recent: still cached
    assert store.count("get_partial") == 1
    view.getitems([view.inner_key((0, 0))])  # evicted: index read again
    assert store.count("get_partial") == 3


def test_view_pickles():
    import pickle

    meta = sharded()
    store, data = filled(meta)
    view = ShardedStoreView(store.inner, meta, "", cache_index=False, max_gap=7)
    again = pickle.loads(pickle.dumps(view))
    k = view.inner_key((3, 5))
    assert again[k] == view[k] and again._max_gap == 7 and not again._cache_enabled


# ------------------------------------------------------------------------------ model test

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_OPS = st.lists(st.tuples(st.sampled_from(["set", "del", "get"]),
                          st.lists(st.tuples(st.integers(0, 6), st.integers(0, 5)),
                                   min_size=1, max_size=12),
                          st.binary(min_size=0, max_size=40)),
                max_size=25)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS, location=st.sampled_from(["start", "end"]), partial=st.booleans(),
       cache=st.booleans())
def test_view_behaves_like_a_dict(ops, location, partial, cache):
    """Random writes, deletes and reads through the view match a plain dict of inner chunks;
    a second, independent view over the same store always agrees."""
    meta = sharded(shape=(33, 28), shard=(15, 10), inner=(5, 5), index_location=location)
    store = Counting(partial=partial)
    view = ShardedStoreView(store, meta, cache_index=cache)
    model: dict = {}
    for op, coords, payload in ops:
        keys = [view.inner_key(c) for c in coords]
        if op == "set":
            items = {k: payload + k.encode() for k in keys}
            view.setitems(items)
            model.update(items)
        elif op == "del":
            view.delitems(keys)
            for k in keys:
                model.pop(k, None)
        else:
            assert view.getitems(keys) == {k: model[k] for k in keys if k in model}
    fresh = ShardedStoreView(store, meta)
    assert dict(fresh.items()) == model
    assert set(fresh) == set(model)
    # no empty shard is left behind
    for skey in [fresh.shard_key(c) for c in fresh.stored_shards()]:
        index, _ = fresh.sharding.split(store.inner[skey])
        assert (index[:, 0] != MISSING).any()


@pytest.mark.parametrize("location", ["end", "start"])
def test_index_pointing_into_the_index_is_corruption_on_ranged_reads(tmp_path, location):
    # a ranged read (the shard's index, then its chunks) took an entry pointing into the
    # index region as data and returned the index's bytes; a whole-shard read refused it
    import json

    import chunkstore as cs

    p = str(tmp_path / "s.zarr")
    cs.create_array(p, shape=(4, 4), chunks=(2, 2), shards={"shape": (4, 4),
                    "index_location": location}, dtype="i4", compressors=None)
    doc = json.load(open(p + "/zarr.json"))
    doc["codecs"][0]["configuration"]["index_codecs"] = [
        {"name": "bytes", "configuration": {"endian": "little"}}]
    json.dump(doc, open(p + "/zarr.json", "w"))
    cs.open_array(p, mode="r+")[:] = np.arange(16).reshape(4, 4)
    f = p + "/c/0/0"
    raw = bytearray(open(f, "rb").read())
    n = 64  # 4 entries of two uint64
    index = np.frombuffer(bytes(raw[-n:] if location == "end" else raw[:n]),
                          "<u8").reshape(4, 2).copy()
    index[0, 0] = len(raw) - n if location == "end" else 0  # chunk 0 now starts in the index
    new = bytes(raw[:-n]) + index.tobytes() if location == "end" else \
        index.tobytes() + bytes(raw[n:])
    open(f, "wb").write(new)
    with pytest.raises(ChunkDecodeError, match="'c/0/0'.*outside the data"):
        cs.open_array(p, mode="r")[:2, :2]


def test_a_shard_with_data_but_an_index_of_no_chunks_is_corrupt():
    """A shard body cut short and unchecked (s3fs without an S3 checksum) put chunk bytes
    where the index is read; data of all 0xFF bytes read as "every chunk missing": the fill
    value was returned, and a partial write stored the shard with the fill value for the
    rest of its chunks. An index of no chunks in a shard holding more than the index is
    refused as corrupt: reads and writes raise, the stored shard is left as it is."""
    import zarr.codecs as zc
    import chunkstore as cs
    from chunkstore.errors import ChunkDecodeError
    store = cs.MemoryStore()
    z = cs.create_array(store, shape=(64,), chunks=(64,), dtype="i4", fill_value=0,
                        serializer=zc.ShardingCodec(chunk_shape=(16,),
                                                    codecs=[zc.BytesCodec()],
                                                    index_codecs=[zc.BytesCodec()]),
                        compressors=None)
    z[:] = -1
    assert len(store["c/0"]) == 256 + 64
    store["c/0"] = cut = store["c/0"][:128]  # (its last 64 bytes: data, all 0xFF)
    with pytest.raises(ChunkDecodeError, match="no chunk is present"):
        z[:]
    with pytest.raises(ChunkDecodeError):
        z[0] = 5
    assert store["c/0"] == cut
