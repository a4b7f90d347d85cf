"""zarr-python 3 public names its own test suite reaches for (ci/zarr_parity), each checked
against zarr-python 3 itself where it has the same thing."""

import asyncio
import json
import os
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


def test_config_pprint_lists_the_settings():
    import io
    out = io.StringIO()
    cs.config.pprint(stream=out, width=60)
    text = out.getvalue()
    assert "'threads'" in text and "'array.order'" in text
    with cs.config.set({"array.order": "F"}):
        out = io.StringIO()
        cs.config.pprint(stream=out)
        assert "'array.order': 'F'" in out.getvalue()


def test_with_config_is_another_handle_with_that_config():
    a = cs.create_array(MemoryStore(), shape=(4, 4), chunks=(2, 2), dtype="i4")
    w = a.with_config({"write_empty_chunks": True})
    assert w.config.write_empty_chunks is True and a.config.write_empty_chunks is False
    w[...] = np.arange(16).reshape(4, 4)
    np.testing.assert_array_equal(a[...], np.arange(16).reshape(4, 4))  # one array
    assert a.with_config(w.config).config == w.config
    with pytest.raises(ValueError, match="with_config takes"):
        a.with_config({"orderr": "F"})
    # a memory order other than the stored one is refused, not ignored
    with pytest.raises(ValueError, match="order 'F' for array .* stored in 'C' order"):
        a.with_config({"order": "F"})
    one_d = cs.create_array(MemoryStore(), shape=(4,), dtype="i4")
    assert one_d.with_config({"order": "F"}).config.order == "F"  # one layout for 1-D



def test_with_config_keeps_the_handles_other_options():
    """missing_chunks, cache_metadata and read_only stay as the handle's (with_config opened
    a fresh handle with the defaults: a missing chunk read as fill where it was an error)."""
    store = MemoryStore()
    cs.create_array(store, shape=(4,), chunks=(2,), dtype="i4")[:2] = [1, 2]
    a = cs.open_array(store, mode="r", missing_chunks="error", cache_metadata=False)
    w = a.with_config({"write_empty_chunks": True})
    with pytest.raises(cs.errors.ChunkNotFoundError):
        w[:]
    np.testing.assert_array_equal(w[:2], [1, 2])
    assert w.__getstate__()["cache_metadata"] is False and w.read_only


def test_group_metadata_holds_the_consolidated_members():
    store = MemoryStore()
    g = cs.create_group(store=store)
    g.create_array(name="a", shape=(1,), dtype="f8")
    child = g.create_group("child", attributes={"kind": "child"})
    child.create_group("child", attributes={"kind": "grandchild"})
    assert g.metadata.consolidated_metadata is None       # not opened through it
    cs.consolidate_metadata(store)
    for opened in (cs.open_group(store, use_consolidated=True),  # mode "a" too, as zarr's
                   cs.open_group(store, mode="r", use_consolidated=True),
                   cs.open_consolidated(store)):
        cm = opened.metadata.consolidated_metadata
        assert sorted(cm.metadata) == ["a", "child"]
        assert cm.metadata["a"].shape == (1,)
        assert cm.metadata["child"].attributes == {"kind": "child"}
        inner = opened["child"].metadata.consolidated_metadata
        assert inner.metadata["child"].attributes == {"kind": "grandchild"}
        d = opened.metadata.to_dict()["consolidated_metadata"]
        # zarr-python 3's document: every member below, flattened by relative path
        assert d["kind"] == "inline" and sorted(d["metadata"]) == ["a", "child", "child/child"]
    # use_consolidated=True on a group without it is an error naming what is missing;
    # where nothing is there yet, mode "a" creates the group
    with pytest.raises(cerr.ConsolidatedMetadataNotFoundError):
        cs.open_group(cs.group(MemoryStore(), zarr_format=3).store, use_consolidated=True)
    assert cs.open_group(MemoryStore(), use_consolidated=True).metadata.attributes == {}


def test_zarr_core_paths_hold_chunkstores_objects():
    from chunkstore.core.array import Array, AsyncArray as CoreAsyncArray
    from chunkstore.core.dtype import Int8
    from chunkstore.core.group import GroupMetadata

    assert Array is cs.Array and CoreAsyncArray is AsyncArray
    assert Int8.from_native_dtype(np.dtype("int8")).to_native_dtype() == np.dtype("int8")
    nodes = dict(cs.create_hierarchy(store=MemoryStore(), nodes={"a/b/c": GroupMetadata()}))
    assert {"", "a", "a/b", "a/b/c"} <= set(nodes)
    # (no consolidated_metadata key when there is none, as zarr-python 3's)
    assert GroupMetadata().to_dict() == {"attributes": {}, "zarr_format": 3,
                                         "node_type": "group"}


def test_store_capabilities_as_zarrs(tmp_path):
    for store in (MemoryStore(), LocalStore(str(tmp_path)), cs.storage.DirectoryStore(
            str(tmp_path / "d"))):
        assert store.supports_writes and store.supports_deletes and store.supports_listing
        assert store.supports_partial_writes is False


def test_async_empty_like_keeps_the_fill_value_as_zarr3():
    from chunkstore.api import asynchronous as aapi
    for fmt in (2, 3):
        ref = cs.create_array({}, shape=(3, 4), dtype="u1", zarr_format=fmt, fill_value=100)
        new = asyncio.run(aapi.empty_like(ref, path="x", zarr_format=fmt))
        assert new.fill_value == 100 and (cs.Array(new)[...] == 100).all()
        new = asyncio.run(aapi.empty_like(ref, path="x", zarr_format=fmt, fill_value=4))
        assert new.fill_value == 4
        theirs = zarr.create_array({}, shape=(3, 4), dtype="u1", zarr_format=fmt,
                                   fill_value=100)
        assert asyncio.run(zarr.api.asynchronous.empty_like(
            theirs, path="x", zarr_format=fmt)).metadata.fill_value == 100


def test_group_create_hierarchy_relative_to_the_group():
    from chunkstore.core.group import GroupMetadata
    g = cs.create_group(MemoryStore()).create_group("base")
    arr_meta = cs.create_array({}, shape=(3,), dtype="i2", attributes={"x": 1}).metadata
    made = dict(g.create_hierarchy({"a/b": GroupMetadata(attributes={"k": 1}),
                                    "a/c/arr": arr_meta}))
    assert sorted(made) == ["a", "a/b", "a/c", "a/c/arr"]
    assert g["a/b"].attrs.asdict() == {"k": 1} and made["a/b"] == g["a/b"]
    assert g["a/c/arr"].shape == (3,) and g["a/c/arr"].attrs.asdict() == {"x": 1}
    assert g.store["base/a/c/arr/zarr.json"]              # under the group, not the root

    async def made_async():
        return [p async for p, _ in AsyncGroup(g).create_hierarchy({"z/y": GroupMetadata()})]
    assert asyncio.run(made_async()) == ["z", "z/y"]
    # theirs completes the same hierarchy
    zg = zarr.create_group({}).create_group("base")
    assert sorted(dict(zg.create_hierarchy({
        "a/b": zarr.core.group.GroupMetadata(), "a/c/arr": zarr.create_array(
            {}, shape=(3,), dtype="i2").metadata}))) == ["a", "a/b", "a/c", "a/c/arr"]


def test_array_open_as_zarr(tmp_path):
    store = MemoryStore()
    with pytest.raises(cerr.ArrayNotFoundError):
        cs.Array.open(store)
    with pytest.raises(zarr.errors.ArrayNotFoundError):
        zarr.Array.open(zarr.storage.MemoryStore())
    a = cs.create_array(store, shape=(3,), dtype="i2")
    a[...] = [1, 2, 3]
    assert list(cs.Array.open(store)[...]) == [1, 2, 3]
    assert cs.Array.open(cs.storage.StorePath(store)) == a
    assert cs.Array.open(store, mode="r").read_only
    with pytest.raises(ValueError, match="mode 'r' or 'r\\+'"):
        cs.Array.open(store, mode="w")
    assert list(cs.Array.open(store)[...]) == [1, 2, 3]    # nothing replaced
    path = str(tmp_path / "nope.zarr")
    with pytest.raises(cerr.ArrayNotFoundError):
        cs.Array.open(path)
    assert not os.path.exists(path)                         # opening creates nothing


def test_async_nodes_have_a_store_path():
    g = cs.group(MemoryStore(), zarr_format=3)
    a = g.create_array("x", shape=(2,), dtype="i1")
    assert AsyncGroup(g).store_path == g.store_path
    assert AsyncArray(a).store_path == a.store_path and a.store_path.path == "x"


def test_array_async_array_and_group_async_group():
    a = cs.create_array(MemoryStore(), shape=(3,), dtype="i2")
    aa = a.async_array
    assert isinstance(aa, AsyncArray) and aa.sync is a and a._async_array == aa
    asyncio.run(aa.setitem(slice(None), np.array([1, 2, 3], dtype="i2")))
    assert list(a[...]) == [1, 2, 3]
    assert cs.Array(aa) == a                              # and back
    g = cs.group(MemoryStore(), zarr_format=3)
    assert isinstance(g._async_group, AsyncGroup) and g._async_group.sync is g


def test_memory_store_takes_zarr3s_store_dict_keyword():
    """MemoryStore(store_dict=..., read_only=...) as zarr-python 3 spells it; the dict's items
    are what the store holds (as zarr's, whose signature is checked to have that name)."""
    import inspect
    assert "store_dict" in inspect.signature(zarr.storage.MemoryStore).parameters
    s = MemoryStore(store_dict={"a": b"1"}, read_only=True)
    assert s.read_only and dict(s) == {"a": b"1"}
    assert dict(MemoryStore({"b": b"2"})) == {"b": b"2"}  # zarr-python 2's positional data
    with pytest.raises(TypeError, match="not both"):
        MemoryStore({"a": b"1"}, store_dict={"a": b"1"})
    z = cs.create_array(MemoryStore(store_dict={}), shape=(3,), dtype="i4")
    z[:] = [1, 2, 3]
    assert z[:].tolist() == [1, 2, 3]


def test_forwarding_create_array_methods_show_create_arrays_keywords():
    """Group.create_array, AsyncGroup.create_array and the asynchronous create_array take
    **kwargs through to create_array; their signatures show its keywords (as zarr-python 3's
    do), a group's zarr_format defaulting to the group's own."""
    import inspect

    from chunkstore.api import asynchronous as aio
    g = cs.group(MemoryStore(), zarr_format=2)
    for fn, first in ((g.create_array, ["name"]), (AsyncGroup.create_array, ["self", "name"]),
                      (aio.create_array, ["store"])):
        params = inspect.signature(fn).parameters
        assert list(params)[:len(first)] == first
        for kw in ("shape", "dtype", "chunks", "shards", "compressors", "fill_value"):
            assert params[kw].kind is inspect.Parameter.KEYWORD_ONLY, (fn, kw)
    assert inspect.signature(g.create_array).parameters["zarr_format"].default is None
    assert "name" in inspect.signature(aio.create_array).parameters
    assert g.create_array("a", shape=(2,), dtype="i4", zarr_format=None).metadata \
        .zarr_format == 2
    for name in ("shape", "chunks", "shards", "compressors", "fill_value"):
        assert name in inspect.signature(zarr.Group.create_array).parameters
