"""Groups as zarr-python 3 has them (ci/zarr_parity's test_group, test_consolidated, test_tree,
test_array repr): require_array/require_group, creating over a node, consolidated metadata
objects, equality of handles and their reprs; each checked against zarr-python 3 where it has
the same thing."""

import asyncio
import json
import warnings

import numpy as np
import pytest

import chunkstore as cs
import chunkstore.errors as cerr
from chunkstore.compat.node_api import ConsolidatedMetadata, GroupMetadata
from chunkstore.aio import AsyncGroup
from chunkstore.storage import MemoryStore

zarr = pytest.importorskip("zarr", minversion="3")


@pytest.fixture(params=[2, 3])
def root(request):
    return cs.create_group(MemoryStore(), zarr_format=request.param)


# ------------------------------------------------------------------ require_array / _group
def test_require_array_casts_stored_to_asked_as_zarr3(root):
    a = root.require_array("foo", shape=(10,), dtype="i8", attributes={"k": 1})
    assert a.attrs.asdict() == {"k": 1}
    assert root.require_array("foo", shape=10, dtype="i8") == a
    # the stored int64 reads as float64 without loss: the existing array is returned
    assert root.require_array("foo", shape=(10,), dtype="f8").dtype == np.int64
    with pytest.raises(TypeError, match=r"Incompatible dtype \(int64 vs float64\)"):
        root.require_array("foo", shape=(10,), dtype="f8", exact=True)
    with pytest.raises(TypeError, match="Incompatible dtype"):
        root.require_array("foo", shape=(10,), dtype="f4")
    with pytest.raises(TypeError, match=r"Incompatible shape \(\(10,\) vs \(100, 100\)\)"):
        root.require_array("foo", shape=(100, 100), dtype="i8")


def test_require_array_where_a_group_is(root):
    root.create_group("bar")
    with pytest.raises(TypeError, match=r"Incompatible object \(Group\)") as ei:
        root.require_array("bar", shape=(10,), dtype="int8")
    assert isinstance(ei.value, cerr.ContainsGroupError)


def test_require_dataset_keeps_zarr2s_cast_direction(root):
    root.require_dataset("r", shape=(4,), dtype="i4")
    # asked int16 casts safely to the stored int32 (zarr-python 2's check)
    assert root.require_dataset("r", shape=(4,), dtype="i2").dtype == np.int32
    with pytest.raises(TypeError, match="Incompatible dtype"):
        root.require_dataset("r", shape=(4,), dtype="f8")


def test_require_group_where_an_array_is(root):
    g = root.create_group("g", attributes={"x": 1})
    assert root.require_group("g").attrs.asdict() == {"x": 1}
    assert root.require_group("g", overwrite=True).attrs.asdict() == {}
    g.create_array("bar", shape=(10,), dtype="uint8")
    with pytest.raises(TypeError, match=r"Incompatible object \(Array\)") as ei:
        g.require_group("bar")
    assert isinstance(ei.value, cerr.ContainsArrayError)  # as zarr-python 2 raises


def test_async_require_array_takes_exact(root):
    async def main():
        g = AsyncGroup(root)
        await g.require_array("a", shape=(3,), dtype="i8")
        with pytest.raises(TypeError, match="Incompatible dtype"):
            await g.require_array("a", shape=(3,), dtype="f8", exact=True)
    asyncio.run(main())


# ------------------------------------------------------------------ creating over a node
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_new_group_over_an_array_is_contains_array_error(zarr_format):
    store = MemoryStore()
    cs.create_array(store, name="extant", shape=(3,), dtype="u1", zarr_format=zarr_format)
    cs.create_group(store, path="grp", zarr_format=zarr_format)
    with pytest.raises(cerr.ContainsArrayError):
        cs.Group.from_store(cs.storage.StorePath(store, "extant"), zarr_format=zarr_format)
    with pytest.raises(cerr.ContainsArrayError):
        cs.open_group(store, path="extant", mode="w-")
    with pytest.raises(cerr.ContainsGroupError) as ei:
        cs.open_group(store, path="grp", mode="w-")
    assert not isinstance(ei.value, cerr.ContainsArrayError)


# ------------------------------------------------------------------ consolidated metadata
def test_open_consolidated_refuses_use_consolidated_false():
    store = MemoryStore()
    with pytest.raises(TypeError, match="use_consolidated"):
        cs.open_consolidated(store, use_consolidated=False)


def test_group_metadata_equals_zarrs():
    from zarr.core.group import GroupMetadata as ZGroupMetadata
    ours = GroupMetadata({"foo": 100}, 2)
    assert ours == ZGroupMetadata(zarr_format=2, attributes={"foo": 100})
    assert ZGroupMetadata(zarr_format=2, attributes={"foo": 100}) == ours
    assert ours != ZGroupMetadata(zarr_format=3, attributes={"foo": 100})
    assert ours != GroupMetadata({"foo": 101}, 2)
    # zarr-python 3's document: no consolidated_metadata key where there is none
    assert ours.to_dict() == ZGroupMetadata(zarr_format=2, attributes={"foo": 100}).to_dict()
    assert repr(ours) == repr(ZGroupMetadata(zarr_format=2, attributes={"foo": 100}))
    g = cs.create_group(MemoryStore(), zarr_format=3, attributes={"a": 1})
    assert g.metadata == ZGroupMetadata(attributes={"a": 1})


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_consolidated_metadata_flattened_and_ordered_as_zarrs(zarr_format):
    def build(lib, store):
        g = lib.create_group(store, zarr_format=zarr_format, attributes={"key": "root"})
        g.create_array("b", shape=(1,), dtype="f4")
        c = g.create_group("c", attributes={"key": "child"})
        g.create_array("a", shape=(1,), dtype="f4")
        c.create_array("e", shape=(1,), dtype="f4")
        c.create_array("d", shape=(1,), dtype="f4")
        c.create_group("G")
        with warnings.catch_warnings():  # zarr-python 3: v3 consolidation is not in the spec
            warnings.simplefilter("ignore")
            lib.consolidate_metadata(store)
        return lib.open_group(store, use_consolidated=True).metadata

    ours = build(cs, MemoryStore())
    theirs = build(zarr, zarr.storage.MemoryStore())
    assert list(ours.consolidated_metadata.metadata) == ["a", "b", "c"]
    assert list(ours.consolidated_metadata.flattened_metadata) == \
        list(theirs.consolidated_metadata.flattened_metadata) == \
        ["a", "b", "c", "c/d", "c/e", "c/G"]
    flat = ours.consolidated_metadata.flattened_metadata
    assert flat["c"].consolidated_metadata == ConsolidatedMetadata({})
    assert list(ours.to_dict()["consolidated_metadata"]["metadata"]) == \
        list(theirs.to_dict()["consolidated_metadata"]["metadata"])
    assert ours == theirs  # the same documents, zarr-python 3's objects or chunkstore's


def test_group_create_array_v2_compresses_with_blosc_as_zarr3():
    ours = cs.create_group(MemoryStore(), zarr_format=2)
    theirs = zarr.create_group(zarr.storage.MemoryStore(), zarr_format=2)
    a = ours.create_array("a", shape=(4,), dtype="u1")
    b = theirs.create_array("a", shape=(4,), dtype="u1")
    doc = json.loads(a.store["a/.zarray"])
    assert doc["compressor"] == b.metadata.compressor.get_config()
    # an explicit choice is kept
    assert ours.create_array("n", shape=(4,), dtype="u1", compressors=None).compressors == ()
    z = ours.create_array("z", shape=(4,), dtype="u1", compressors="zstd")
    assert z.compressors[0].codec_id == "zstd"


# ------------------------------------------------------------------ equality and repr
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_handles_through_consolidated_metadata_equal_direct_ones(zarr_format):
    store = MemoryStore()
    g = cs.create_group(store, zarr_format=zarr_format)
    sub = g.create_group("sub")
    arr = g.create_array("arr", shape=(3,), dtype="u1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cons = cs.consolidate_metadata(store)
    assert cons["sub"] == sub and cons["arr"] == arr and cons == g
    assert hash(cons["sub"]) == hash(sub) and hash(cons["arr"]) == hash(arr)
    assert cons["sub"] != arr and cons["arr"] != g["sub"]
    other = cs.create_group(MemoryStore(), zarr_format=zarr_format)
    other.create_group("sub", attributes={"different": True})
    assert other["sub"] != sub


def test_reprs_are_zarr3s():
    store = MemoryStore()
    g = cs.create_group(store)
    a = g.create_array("x/arr", shape=(2, 3, 4), dtype="uint8")
    root = cs.create_array(MemoryStore(), shape=(2,), dtype="f8")
    assert repr(a) == f"<Array {store}/x/arr shape=(2, 3, 4) dtype=uint8>"
    assert str(root) == f"<Array {root.store} shape=(2,) dtype=float64>"
    # the root group's ends in its name "/" (zarr-python 2's tests look for the name)
    assert repr(g) == f"<Group {store}/>" and repr(g["x"]) == f"<Group {store}/x>"
    assert g.name in repr(g) and g["x"].name in repr(g["x"])


def test_tree_mimebundle_escapes_html():
    g = cs.group()
    g.create_group("<img onerror=alert(1) src=x>")
    bundle = g.tree()._repr_mimebundle_()
    assert "&lt;img" in bundle["text/html"] and "<img" not in bundle["text/html"]
    assert "<img onerror=alert(1) src=x>" in bundle["text/plain"]
    assert bundle["text/plain"] == repr(g.tree())


# ------------------------------------------------------------------ consolidation caveats
def test_v3_consolidation_warns_as_zarr3_and_v2_does_not():
    for fmt, members, warns in ((3, True, True), (3, False, False), (2, True, False)):
        g = cs.create_group(MemoryStore(), zarr_format=fmt)
        if members:   # (zarr-python 3 warns only where v3 members are consolidated)
            g.create_group("a")
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            cs.consolidate_metadata(g.store)
        ours = [w for w in seen if issubclass(w.category, cerr.ZarrUserWarning)]
        assert bool(ours) == warns
        if warns:
            assert str(ours[0].message).startswith(
                "Consolidated metadata is currently not part in the Zarr format 3")
            assert ours[0].filename == __file__   # points at the caller's line


class _NoConsolidation(MemoryStore):
    supports_consolidated_metadata = False


def test_a_store_without_consolidated_metadata_opts_out():
    store = _NoConsolidation()
    cs.create_group(store, zarr_format=3).create_group("a/b")
    before = dict(store)
    with pytest.raises(TypeError, match="doesn't support consolidated metadata"):
        cs.consolidate_metadata(store)
    assert dict(store) == before                       # nothing written
    with pytest.raises(ValueError, match="doesn't support consolidated metadata"):
        cs.open_group(store, mode="r", use_consolidated=True)
    for use in (None, False):
        assert "a" in cs.open_group(store, mode="r", use_consolidated=use)

    async def aio():
        g = await AsyncGroup.open(store, use_consolidated=None)
        return await g.contains("a")
    assert asyncio.run(aio())


def test_use_consolidated_without_it_names_the_request():
    store = MemoryStore()
    cs.create_group(store, zarr_format=3)
    with pytest.raises(cerr.ConsolidatedMetadataNotFoundError,
                       match="Consolidated metadata requested") as e:
        cs.open_group(store, mode="r", use_consolidated=True)
    assert isinstance(e.value, ValueError)


def test_create_hierarchy_refuses_nodes_below_an_array_before_writing():
    from chunkstore.compat.node_api import GroupMetadata as GM
    src = cs.create_array(MemoryStore(), shape=(3,), dtype="i2")
    for child in ({"zarr_format": 3, "node_type": "group", "attributes": {}},
                  src.metadata.to_dict()):
        store = MemoryStore()
        nodes = {"g": GM(), "g/arr": src.metadata, "g/arr/under": child}
        with pytest.raises(ValueError, match="Only Zarr groups can contain other nodes"):
            list(cs.create_hierarchy(store=store, nodes=nodes))
        assert len(store) == 0


def test_a_value_that_does_not_broadcast_names_both_shapes():
    z = cs.create_array(MemoryStore(), shape=(4, 4), chunks=(2, 2), dtype="i2")
    with pytest.raises(ValueError, match=r"Attempting to set .* \(2,\) .* \(2, 2\)"):
        z[np.array([1, 2]), np.array([1, 2])] = np.array([[-1, -2], [-3, -4]])
    assert not z[...].any() and z.nchunks_initialized == 0


def test_reprs_of_nodes_in_a_plain_dict_name_it_without_its_contents():
    """An Array's or Group's repr on a plain dict store showed the dict's repr: every key
    and value (a document's bytes, every chunk's). It names the dict as errors do."""
    store: dict = {}
    z = cs.create_array(store, name="a", shape=(3,), dtype="i4")
    z[:] = 1
    for node in (z, cs.open_group(store, mode="r")):
        text = repr(node)
        assert "zarr.json" not in text and "<dict of " in text, text
    assert repr(z).startswith("<Array <dict of ") and "/a shape=(3,)" in repr(z)
