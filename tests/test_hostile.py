"""Hostile input and faults (issue 16): never wrong data, never a crash, nothing lost."""

from __future__ import annotations

import errno
import json
import re

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import MetadataError
from chunkstore.storage.memory import MemoryStore
from faults import FaultyStore, is_chunk


def _array(shape=(10, 12), chunks=(3, 4), store=None, **kw):
    z = cs.zeros(shape, chunks=chunks, dtype="i4", store=store if store is not None
                 else MemoryStore(), **kw)
    z[:] = np.arange(np.prod(shape)).reshape(shape)
    return z


# ---------------------------------------------------------------- 2. float indices
@pytest.mark.parametrize("sel", [1.5, 1.0, np.float64(2), (1.5, slice(0, 2)),
                                 (slice(None), 2.0), np.array(1.5), [1.0, 2.0],
                                 (Ellipsis, np.float32(1))])
def test_float_index_refused_like_numpy(sel):
    z = _array()
    with pytest.raises(IndexError):
        np.zeros((10, 12))[sel]  # the oracle
    with pytest.raises(IndexError, match="dimension"):
        z[sel]
    before = z[:]
    with pytest.raises(IndexError):
        z[sel] = 7
    np.testing.assert_array_equal(z[:], before)


def test_float_index_refused_in_oindex_and_vindex():
    z = _array()
    with pytest.raises(IndexError):
        z.oindex[1.5]
    with pytest.raises(IndexError):
        z.vindex[[1.5], [0]]
    with pytest.raises(IndexError):
        z.blocks[1.0]


def test_empty_list_index_still_works():
    z = _array()
    assert z[[]].shape == np.zeros((10, 12))[[]].shape


# ---------------------------------------------------------------- 3. non-integer resize
@pytest.mark.parametrize("bad", [5.5, np.float64(3.0), "5", 5.0, None])
def test_resize_non_integer_refused_before_anything_changes(bad):
    z = _array()
    before = z[:]
    keys = sorted(z.store)
    with pytest.raises(TypeError, match="integers"):
        z.resize(bad, 12)
    assert z.shape == (10, 12)
    assert sorted(z.store) == keys
    np.testing.assert_array_equal(z[:], before)


def test_resize_numpy_integers_accepted():
    z = _array()
    z.resize(np.int64(4), np.int32(12))
    assert z.shape == (4, 12)


# ---------------------------------------------------------------- 11. failed append rolls back
@pytest.mark.parametrize("zarr_format", [2, 3, "sharded"])
@pytest.mark.parametrize("fault", ["disk_full", "eio", "persistent"])
def test_failed_append_rolls_back_to_old_shape(zarr_format, fault):
    store = FaultyStore(MemoryStore())
    if zarr_format == "sharded":
        # shards of 2x3 inner chunks: the roll-back deleted the inner chunks it created,
        # a shard rewrite that fails as the append did, and then never restored the shape
        z = cs.create_array(store, shape=(10, 12), chunks=(3, 4), shards=(6, 12),
                            dtype="i4", compressors=None, fill_value=0)
        z[:] = np.arange(120).reshape(10, 12)
    else:
        z = _array(store=store, zarr_format=zarr_format, compressor=None)
    before = z[:]
    before_chunks = {k: store.inner[k] for k in store.inner if is_chunk(k)}
    # the append touches 4 row-chunks x 3 column-chunks: let a few land, then fail
    if fault == "disk_full":
        store.capacity = store.used() + 5 * 3 * 4 * 4
        err = errno.ENOSPC
    elif fault == "eio":
        store.fail_write(is_chunk, errno.EIO, after=1 if zarr_format == "sharded" else 4,
                         times=1)
        err = errno.EIO
    else:  # one chunk (or shard) write lands, then every write fails; deletes work
        store.fail_write(is_chunk, errno.ENOSPC, after=1, times=None)
        err = errno.ENOSPC
    with pytest.raises(OSError) as info:
        z.append(np.ones((9, 12), dtype="i4"))
    assert info.value.errno == err
    store.capacity = None
    store.heal()
    assert z.shape == (10, 12)
    z2 = cs.open_array(store.inner, mode="r")
    assert z2.shape == (10, 12)
    np.testing.assert_array_equal(z2[:], before)
    if fault == "persistent":
        # the boundary chunks' old bytes could not be put back: said so, the new ones gone,
        # and the trim of what lies past the old end recorded (chunkstore.engine.trim)
        assert any("putting back" in n for n in info.value.__notes__)
        assert set(k for k in store.inner if is_chunk(k)) == set(before_chunks)
        assert any(k.endswith(".chunkstore-trim") for k in store.inner)
    else:
        assert {k: store.inner[k] for k in store.inner if is_chunk(k)} == before_chunks
    # growing again shows the fill value, not the half-written append (where the
    # boundary chunks could not be put back, the grow trims them first)
    z.resize(19, 12)
    np.testing.assert_array_equal(z[10:], 0)
    np.testing.assert_array_equal(z[:10], before)
    assert not any(k.endswith(".chunkstore-trim") for k in store.inner)
    # and a retried append lands whole
    z.resize(10, 12)
    z.append(np.full((9, 12), 5, dtype="i4"))
    np.testing.assert_array_equal(z[10:], 5)


# ---------------------------------------------------------------- 1. truncated Blosc frames
def _blosc_cases():
    import numcodecs
    yield "delta", dict(dtype="i4", filters=[numcodecs.Delta("i4")],
                        compressor=numcodecs.Blosc(cname="lz4", shuffle=0)), np.arange(40) * 3
    yield "vlen-utf8", dict(dtype=object, object_codec=numcodecs.VLenUTF8(),
                            compressor=numcodecs.Blosc()), \
        np.array([f"string number {i}" for i in range(40)], dtype=object)
    yield "vlen-bytes", dict(dtype=object, object_codec=numcodecs.VLenBytes(),
                             compressor=numcodecs.Blosc(cname="blosclz")), \
        np.array([b"bytes %d" % i for i in range(40)], dtype=object)
    yield "plain", dict(dtype="i4", compressor=numcodecs.Blosc(cname="lz4", shuffle=0)), \
        np.arange(40)
    yield "v3-string", dict(dtype=str, zarr_format=3,
                            compressors=[numcodecs.Blosc(cname="lz4", shuffle=0)]), \
        np.array([f"s{i}" for i in range(40)])
    yield "v3-int", dict(dtype="i4", zarr_format=3,
                         compressors=[numcodecs.Blosc(cname="blosclz", shuffle=0)]), \
        np.arange(40)


@pytest.mark.parametrize("cut", [1, 2, 4, 8, -1, -4])
@pytest.mark.parametrize("case", list(_blosc_cases()), ids=lambda c: c[0])
def test_truncated_or_padded_blosc_frame_raises_naming_the_key(tmp_path, case, cut):
    name, kw, values = case
    path = str(tmp_path / "a.zarr")
    if kw.get("zarr_format") == 3:
        z = cs.create_array(path, shape=values.shape, chunks=(40,), **{
            k: v for k, v in kw.items() if k != "zarr_format"})
    else:
        z = cs.open(path, mode="w", shape=values.shape, chunks=(40,), **kw)
    z[:] = values
    key = "c/0" if kw.get("zarr_format") == 3 else "0"
    f = tmp_path / "a.zarr" / key
    raw = f.read_bytes()
    f.write_bytes(raw[:-cut] if cut > 0 else raw + b"\0" * -cut)
    z = cs.open(path, mode="r")
    with pytest.raises(cs.errors.ChunkDecodeError, match=repr(key)):
        z[:]
    for i in (0, 39):
        with pytest.raises(cs.errors.ChunkDecodeError):
            z[i]
    from chunkstore.cli import main
    assert main(["verify", path]) != 0


# ---------------------------------------------------------------- 4-8. hostile metadata
DEEP = b"[" * 100_000 + b"]" * 100_000


def _v2_array(store, **kw):
    z = cs.zeros((10, 10), chunks=(5, 5), dtype="i1", store=store, **kw)
    z[:] = 1
    return z


def _v3_array(store, **kw):
    z = cs.create_array(store, shape=(10, 10), chunks=(5, 5), dtype="i1", **kw)
    z[:] = 1
    return z


def _edit(store, key, fn):
    doc = json.loads(store[key])
    fn(doc)
    store[key] = json.dumps(doc).encode()


def test_deeply_nested_zarr_json_is_metadata_error_naming_the_key():
    s = MemoryStore()
    s["zarr.json"] = DEEP
    with pytest.raises(MetadataError, match="zarr.json"):
        cs.open(s, mode="r")
    s = MemoryStore()
    g = cs.group(store=s, zarr_format=3)
    g.zeros("a", shape=(3,))
    s["a/zarr.json"] = DEEP
    with pytest.raises(MetadataError, match="a/zarr.json"):
        cs.open_array(s, path="a", mode="r")
    with pytest.raises(MetadataError, match="a/zarr.json"):
        g["a"]


def test_deeply_nested_attributes_in_zarr_json():
    s = MemoryStore()
    _v3_array(s)
    raw = s["zarr.json"].replace(b'"attributes": {}', b'"attributes": {"x": ' + DEEP + b"}")
    assert raw != s["zarr.json"]
    s["zarr.json"] = raw
    with pytest.raises(MetadataError, match="zarr.json"):
        cs.open(s, mode="r").attrs.asdict()


def test_deeply_nested_zmetadata_is_metadata_error_naming_the_key():
    s = MemoryStore()
    cs.group(store=s).zeros("a", shape=(3,))
    cs.consolidate_metadata(s)
    s[".zmetadata"] = DEEP
    with pytest.raises(MetadataError, match=".zmetadata"):
        cs.open_consolidated(s)


def test_deeply_nested_v3_consolidated_is_metadata_error():
    s = MemoryStore()
    cs.group(store=s, zarr_format=3).zeros("a", shape=(3,))
    cs.consolidate_metadata(s)
    raw = s["zarr.json"].decode()
    i = raw.index('"consolidated_metadata"')
    s["zarr.json"] = (raw[:i] + '"consolidated_metadata": ' + DEEP.decode() + ", "
                      + raw[i:]).encode()
    with pytest.raises(MetadataError, match="zarr.json"):
        cs.open_consolidated(s)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("compressor", ["none", "blosc", "zstd", "gzip"])
def test_hostile_chunk_shape_does_not_allocate(fmt, compressor):
    import numcodecs
    comp = {"none": None, "blosc": numcodecs.Blosc(), "zstd": numcodecs.Zstd(),
            "gzip": numcodecs.GZip()}[compressor]
    s = MemoryStore()
    if fmt == 2:
        _v2_array(s, compressor=comp)
        _edit(s, ".zarray", lambda d: d.update(chunks=[10**18 // 8, 8]))
        key = "0.0"
    else:
        _v3_array(s, compressors=comp)
        _edit(s, "zarr.json", lambda d: d["chunk_grid"]["configuration"].update(
            chunk_shape=[10**18 // 8, 8]))
        key = "c/0/0"
    z = cs.open(s, mode="r")
    for sel in [(0, 0), (slice(None), 0), (slice(None), slice(None))]:
        with pytest.raises(cs.errors.ChunkDecodeError, match=repr(key)):
            z[sel]
    with pytest.raises(cs.errors.ChunkDecodeError, match=repr(key)):
        z.vindex[[0, 1], [0, 1]]


@pytest.mark.parametrize("fmt", [2, 3])
def test_unaddressable_chunk_refused_at_open(fmt):
    s = MemoryStore()
    if fmt == 2:
        _v2_array(s)
        _edit(s, ".zarray", lambda d: d.update(chunks=[2**40, 2**40]))
        key = ".zarray"
    else:
        _v3_array(s)
        _edit(s, "zarr.json", lambda d: d["chunk_grid"]["configuration"].update(
            chunk_shape=[2**40, 2**40]))
        key = "zarr.json"
    with pytest.raises(MetadataError, match=key):
        cs.open(s, mode="r")


@pytest.mark.parametrize("fmt", [2, 3])
def test_shape_beyond_int64_is_metadata_error(fmt):
    s = MemoryStore()
    if fmt == 2:
        _v2_array(s)
        _edit(s, ".zarray", lambda d: d.update(shape=[10**30, 10]))
        key = ".zarray"
    else:
        _v3_array(s)
        _edit(s, "zarr.json", lambda d: d.update(shape=[10**30, 10]))
        key = "zarr.json"
    with pytest.raises(MetadataError, match=key):
        cs.open(s, mode="r")[0, 0]


@pytest.mark.parametrize("fmt", [2, 3])
def test_huge_but_valid_shape_reads_fill(fmt):
    s = MemoryStore()
    big = 2**62
    if fmt == 2:
        z = cs.create(shape=(big, 10), chunks=(5, 5), dtype="i1", store=s, fill_value=3)
    else:
        z = cs.create_array(s, shape=(big, 10), chunks=(5, 5), dtype="i1", fill_value=3)
    z[0, 0] = 7
    z = cs.open(s, mode="r")
    assert z[0, 0] == 7
    assert z[big - 1, 9] == 3
    np.testing.assert_array_equal(z[big - 2:, 8:], 3)


def test_object_dtype_without_object_codec_is_metadata_error():
    s = MemoryStore()
    _v2_array(s)
    _edit(s, ".zarray", lambda d: d.update(dtype="|O"))
    with pytest.raises(MetadataError, match=".zarray"):
        cs.open(s, mode="r")


@pytest.mark.parametrize("member", ["../../evil", "a/../../evil", "/abs", "a//b", "."])
def test_v3_consolidated_member_escaping_the_hierarchy_refused(member):
    s = MemoryStore()
    cs.group(store=s, zarr_format=3).zeros("a", shape=(3,))
    cs.consolidate_metadata(s)

    def rename(d):
        cm = d["consolidated_metadata"]["metadata"]
        cm[member] = cm.pop("a")
    _edit(s, "zarr.json", rename)
    with pytest.raises(MetadataError, match=re.escape(repr(member))):
        cs.open_consolidated(s)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_failed_shrink_loses_no_data_inside_the_new_shape(zarr_format):
    store = FaultyStore(MemoryStore())
    z = _array(store=store, zarr_format=zarr_format)
    before = z[:]
    store.fail_write(is_chunk, errno.EIO)  # the boundary chunks cannot be rewritten
    with pytest.raises(OSError):
        z.resize(5, 12)
    store.heal()
    z2 = cs.open_array(store.inner, mode="r")
    # the shrink is committed: the new shape, with every value inside it
    assert z2.shape == (5, 12)
    np.testing.assert_array_equal(z2[:], before[:5])


def test_a_chunk_too_big_for_memory_names_the_array_and_its_chunks():
    # a document written elsewhere may give chunks far larger than the array: a bare
    # MemoryError named nothing
    import json

    store = {}
    cs.zeros((4, 4), chunks=(2, 2), dtype="i4", store=store, path="big")
    doc = json.loads(store["big/.zarray"])
    doc["chunks"] = [2 ** 22, 2 ** 22]
    store["big/.zarray"] = json.dumps(doc).encode()
    z = cs.open_array(store, path="big", mode="r+")
    with pytest.raises(MemoryError) as e:
        z[0, 0] = 1
    assert "'/big'" in "".join(e.value.__notes__) and "64.0 TiB" in "".join(e.value.__notes__)
