"""zarr-python 3 public names its own test suite reaches for (ci/zarr_parity), each checked
against zarr-python 3 itself where it has the same thing."""

import asyncio
import json
import warnings

import numpy as np
import pytest

import chunkstore as cs
import chunkstore.errors as cerr
from chunkstore.abc.store import Store
from chunkstore.aio import AsyncArray, AsyncGroup
from chunkstore.storage import LocalStore, MemoryStore, ZipStore

zarr = pytest.importorskip("zarr", minversion="3")


@pytest.mark.parametrize("name, args", [
    ("GroupNotFoundError", ("store", "path")), ("ArrayNotFoundError", ("store", "path")),
    ("ContainsGroupError", ("store", "path")), ("ContainsArrayError", ("store", "path")),
    ("ContainsArrayAndGroupError", ("store", "path")),
    ("MetadataValidationError", ("a", "b", "c")), ("NodeTypeValidationError", ("a", "b", "c"))])
def test_errors_made_from_parts_read_as_zarrs(name, args):
    ours, theirs = getattr(cerr, name)(*args), getattr(zarr.errors, name)(*args)
    assert str(ours) == str(theirs)
    assert "Errno" not in str(ours)
    # chunkstore's own one-message form is kept as it is
    assert str(getattr(cerr, name)("no group at path 'x' in <dict of 3 keys>")) == \
        "no group at path 'x' in <dict of 3 keys>"


def test_errors_keep_their_builtin_bases():
    err = cerr.GroupNotFoundError("store", "path")
    assert isinstance(err, FileNotFoundError) and isinstance(err, ValueError)
    assert isinstance(cerr.ContainsArrayAndGroupError("s", "p"), cerr.ChunkstoreError)


def test_store_open_is_awaited_as_zarrs(tmp_path):
    async def main():
        return (await MemoryStore.open(), await LocalStore.open(str(tmp_path / "d")),
                await ZipStore.open(str(tmp_path / "x.zip"), mode="w"))
    mem, local, zipped = asyncio.run(main())
    for store in (mem, local, zipped):
        assert isinstance(store, Store)
        a = cs.create_array(store, shape=(4,), chunks=(2,), dtype="i2")
        a[...] = [1, 2, 3, 4]
        assert list(cs.open_array(store, mode="r")[...]) == [1, 2, 3, 4]
    zipped.close()


def test_sync_nodes_wrap_async_ones_as_zarrs():
    store = MemoryStore()
    agroup = asyncio.run(AsyncGroup.from_store(store, zarr_format=3))
    group = cs.Group(agroup)
    assert group == agroup.sync and group.store is store
    aarr = asyncio.run(AsyncArray.create(MemoryStore(), shape=(6,), chunks=(3,), dtype="f4"))
    arr = cs.Array(aarr)
    arr[...] = np.arange(6)
    np.testing.assert_array_equal(aarr.sync[...], np.arange(6))   # one array, two handles
    assert arr == aarr.sync


def test_group_nmembers_counts_as_members():
    g = cs.group(MemoryStore(), zarr_format=3)
    g.create_group("a").create_array("x", shape=(2,), dtype="i1")
    g.create_array("y", shape=(2,), dtype="i1")
    assert g.nmembers() == 2 and g.nmembers(max_depth=None) == 3
    assert asyncio.run(AsyncGroup(g).nmembers(max_depth=None)) == 3


def test_async_array_filters_are_zarr3s_tuple():
    v2 = cs.create_array(MemoryStore(), shape=(4,), dtype="u1", zarr_format=2)
    assert AsyncArray(v2).filters == () and AsyncArray(v2).compressors == v2.compressors
    import numcodecs
    v2f = cs.create_array(MemoryStore(), shape=(4,), dtype="u1", zarr_format=2,
                          filters=[numcodecs.Delta(dtype="u1")])
    assert AsyncArray(v2f).filters == (numcodecs.Delta(dtype="u1"),)
    assert v2f.filters == [numcodecs.Delta(dtype="u1")]     # zarr-python 2's list kept


@pytest.mark.parametrize("location", ["start", "end"])
def test_create_array_shards_dict_as_zarr(location):
    data = np.arange(100 * 60, dtype="i4").reshape(100, 60)
    kw = dict(shape=data.shape, chunks=(10, 10), dtype="i4",
              shards={"shape": (50, 30), "index_location": location})
    ours, theirs = MemoryStore(), zarr.storage.MemoryStore()
    a = cs.create_array(ours, **kw)
    a[...] = data
    z = zarr.create_array(theirs, **kw)
    z[...] = data
    assert json.loads(ours["zarr.json"]) == json.loads(
        asyncio.run(theirs.get("zarr.json", zarr.core.buffer.default_buffer_prototype()))
        .to_bytes())
    # zarr-python reads what chunkstore wrote, index at the start or the end of each shard
    back = zarr.open_array(zarr.storage.MemoryStore(
        {k: zarr.core.buffer.cpu.Buffer.from_bytes(v) for k, v in ours.items()}), mode="r")
    np.testing.assert_array_equal(back[...], data)
    assert a.shards == (50, 30) and a.chunks == (10, 10)


def test_create_array_auto_shards_as_zarr():
    for shape, dtype in [((1000, 1000), "f4"), ((30, 5000), "u2"), ((100,), "i8")]:
        with warnings.catch_warnings(record=True) as ours_w:
            warnings.simplefilter("always")
            a = cs.create_array(MemoryStore(), shape=shape, dtype=dtype, shards="auto")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z = zarr.create_array({}, shape=shape, dtype=dtype, shards="auto")
        assert (a.chunks, a.shards) == (z.chunks, z.shards)
        assert any(issubclass(w.category, zarr.errors.ZarrUserWarning) or
                   w.category.__name__ == "ZarrUserWarning" for w in ours_w)
    # chunks guessed for shards aim at 1 MiB, as zarr's
    a = cs.create_array(MemoryStore(), shape=(4000, 4000), dtype="f4", shards=(2000, 2000))
    z = zarr.create_array({}, shape=(4000, 4000), dtype="f4", shards=(2000, 2000))
    assert a.chunks == z.chunks


@pytest.mark.parametrize("bad", [{"shape": (4,), "index": "end"}, {"index_location": "end"},
                                 {"shape": (4,), "index_location": "middle"}, "everywhere"])
def test_create_array_bad_shards_named(bad):
    store = MemoryStore()
    with pytest.raises(ValueError, match="shards"):
        cs.create_array(store, shape=(8,), chunks=(2,), dtype="i1", shards=bad)
    assert len(store) == 0
