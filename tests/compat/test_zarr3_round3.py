"""zarr-python 3 behaviours found by triaging its own test suite against chunkstore (each
failed, silently did something else, before): group()'s keywords, create_hierarchy's
checks, AsyncGroup.members' depth check, explicit keywords over config=, block slices
starting outside the grid. zarr-python 3 itself is the oracle where it runs the same call."""

import asyncio
import warnings

import numpy as np
import pytest
import zarr

import chunkstore as cs
import chunkstore.api.asynchronous
from chunkstore import errors
from chunkstore.core.group import GroupMetadata


def test_group_keeps_attributes_of_a_new_group_and_refuses_unknown_keywords():
    s = {}
    g = cs.group(s, attributes={"foo": "bar"})
    assert dict(g.attrs) == {"foo": "bar"}
    assert dict(cs.open_group(s, mode="r").attrs) == {"foo": "bar"}
    # an existing group keeps its own attributes (as zarr-python 3's group() opens it)
    assert dict(cs.group(s, attributes={"x": 1}).attrs) == {"foo": "bar"}
    assert dict(cs.group(s, attributes={"x": 1}, overwrite=True).attrs) == {"x": 1}
    zs = zarr.storage.MemoryStore()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert dict(zarr.group(zs, attributes={"foo": "bar"}).attrs) == {"foo": "bar"}
        assert dict(zarr.group(zs, attributes={"x": 1}).attrs) == {"foo": "bar"}
    with pytest.raises(TypeError, match="no_such_keyword"):
        cs.group({}, no_such_keyword=1)
    assert cs.group({}, zarr_version=3).metadata.zarr_format == 3
    cs.group({}, cache_attrs=False, chunk_store=None, meta_array=None)  # zarr-python 2's


@pytest.mark.parametrize("lib", [cs, zarr])
def test_create_hierarchy_refuses_mixed_formats_and_a_root_node(lib):
    meta = lib.core.group.GroupMetadata
    store = {} if lib is cs else zarr.storage.MemoryStore()
    with pytest.raises(ValueError, match="both Zarr v2 and Zarr v3"):
        list(lib.create_hierarchy(store=store, nodes={"v2": meta(zarr_format=2),
                                                      "v3": meta(zarr_format=3)}))
    assert not list(store.keys() if lib is cs else store._store_dict)  # nothing made
    for fmt in (2, 3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = lib.Group.from_store({} if lib is cs else zarr.storage.MemoryStore(),
                                     zarr_format=fmt)
        with pytest.raises(ValueError, match="root node"):
            list(g.create_hierarchy({"": meta(zarr_format=fmt, attributes={"n": 1})}))
        with pytest.raises(ValueError, match="same as the parent group"):
            list(g.create_hierarchy({"a": meta(zarr_format=5 - fmt)}))
        made = dict(g.create_hierarchy({"a/b": meta(zarr_format=fmt, attributes={"n": 2})}))
        assert sorted(made) == ["a", "a/b"] and dict(g["a/b"].attrs) == {"n": 2}
    assert GroupMetadata is cs.core.group.GroupMetadata


def test_async_members_checks_its_depth_as_the_group_does():
    g = cs.Group.from_store({}, zarr_format=3)
    g.create_group("a").create_group("b")

    async def members(depth):
        ag = await cs.api.asynchronous.open_group(store=g.store)
        return [name async for name, _ in ag.members(max_depth=depth)]

    with pytest.raises(ValueError, match="max_depth"):
        g.members(max_depth=-1)
    with pytest.raises(ValueError, match="max_depth"):
        asyncio.run(members(-1))
    assert asyncio.run(members(None)) == ["a", "a/b"] == [n for n, _ in g.members(None)]


@pytest.mark.parametrize("lib", [cs, zarr])
def test_explicit_keywords_win_over_config(lib):
    def store():
        return {} if lib is cs else zarr.storage.MemoryStore()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert lib.ones((2, 2), order="C", zarr_format=2, config={"order": "F"},
                        store=store()).metadata.order == "C"
        assert lib.ones((2, 2), order="F", zarr_format=2, config={"order": "C"},
                        store=store()).metadata.order == "F"
        assert lib.ones((2, 2), zarr_format=2, config={"order": "F"},
                        store=store()).metadata.order == "F"
        for fmt in (2, 3):
            s = store()
            a = lib.create(shape=(4,), chunks=(2,), dtype="i4", fill_value=0, store=s,
                           zarr_format=fmt, write_empty_chunks=True,
                           config={"write_empty_chunks": False})
            a[:] = 0
            assert a.nchunks_initialized == 2
            s = store()
            a = lib.create(shape=(4,), chunks=(2,), dtype="i4", fill_value=0, store=s,
                           zarr_format=fmt, config={"write_empty_chunks": True})
            a[:] = 0
            assert a.nchunks_initialized == 2


def test_configured_order_and_write_empty_chunks_are_creates_defaults():
    with cs.config.set({"array.order": "F", "array.write_empty_chunks": True}):
        a = cs.create((4, 4), chunks=(2, 2), dtype="i4", zarr_format=2, store={})
        a[:] = 0
        assert a.metadata.order == "F" and a.nchunks_initialized == 4


def test_cache_attrs_is_accepted_as_zarr_python_does():
    for fn in (cs.create, cs.open_array):
        kw = {"mode": "w"} if fn is cs.open_array else {}
        assert fn(store={}, shape=(1,), cache_attrs=False, **kw).shape == (1,)


@pytest.mark.parametrize("lib", [cs, zarr])
def test_block_slices_starting_outside_the_grid_are_errors(lib):
    a = np.arange(10000).reshape(1000, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = lib.create_array({} if lib is cs else zarr.storage.MemoryStore(), shape=a.shape,
                             chunks=(300, 3), dtype=a.dtype, zarr_format=3)
    z[:] = a
    for sel in [(slice(15, 20), slice(None)), (slice(4, 5),), (slice(None), slice(4, 9)),
                (slice(-9, None),)]:
        with pytest.raises(IndexError):
            z.get_block_selection(sel)
        with pytest.raises(IndexError):
            z.blocks[sel]
        with pytest.raises(IndexError):
            z.set_block_selection(sel, 1)
    # a stop past the end is cut; an empty slice inside the grid is empty
    np.testing.assert_array_equal(z.blocks[3:9], a[900:])
    assert z.blocks[1:1].shape == (0, 10)
    assert issubclass(errors.BoundsCheckError, IndexError)


@pytest.mark.parametrize("shape, chunks, target", [
    ((256, 256), (32, 32), 129 * 129), ((256, 256), (32, 32), 64 * 64),
    ((256, 256), (64, 32), 128 * 128), ((256,), (2,), 255), ((256,), (2,), 256),
    ((256,), (2,), 16), ((256,), (2,), 2), ((256,), (2,), 1), ((256,), (2,), None),
    ((4,), (2,), None), ((1000, 30, 7), (10, 3, 7), 10**5)])
def test_auto_shards_follow_the_target_shard_size_as_zarr_picks_them(shape, chunks, target):
    from zarr.core.chunk_grids import _auto_partition

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zarr.config.set({"array.target_shard_size_bytes": target}):
            want, _ = _auto_partition(array_shape=shape, chunk_shape=chunks,
                                      shard_shape="auto", item_size=2)
        with cs.config.set({"array.target_shard_size_bytes": target}):
            a = cs.create_array({}, shape=shape, chunks=chunks, shards="auto", dtype="i2")
    assert a.shards == want and a.chunks == chunks
    with pytest.raises(ValueError, match="target_shard_size_bytes"):
        cs.config.set({"array.target_shard_size_bytes": 0})


@pytest.mark.parametrize("dtype", ["M8[ns]", "m8[us]", "M8[D]", "S3", "U2", "i4", "f8"])
def test_create_array_v2_default_fill_is_zarrs(dtype):
    # datetime/timedelta arrays got 0 (unwritten elements read as 1970-01-01, a real date)
    import json

    s = {}
    z = cs.create_array(s, shape=(2,), dtype=dtype, zarr_format=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = zarr.create_array(zarr.storage.MemoryStore(), shape=(2,), dtype=dtype,
                                zarr_format=2)
    assert json.loads(s[".zarray"])["fill_value"] == ref.metadata.to_dict()["fill_value"]
    np.testing.assert_array_equal(z[:], ref[:])


@pytest.mark.parametrize("fmt", [2, 3])
def test_group_update_attributes_async_replaces_them_as_zarr_does(fmt):
    for lib in (cs, zarr):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = lib.Group.from_store({} if lib is cs else zarr.storage.MemoryStore(),
                                     zarr_format=fmt, attributes={"foo": 100})
        new = asyncio.run(g.update_attributes_async({"bar": 100}))
        assert dict(new.attrs) == {"bar": 100}
        assert dict(new.update_attributes({"baz": 1}).attrs) == {"bar": 100, "baz": 1}
