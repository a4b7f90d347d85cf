"""The format layer's ArrayLayout: chunk keys encoded and parsed (round trips, invalid keys
with their reasons), stored chunks, shard contents, metadata and lock keys, resized
metadata. zarr-python writes the stores the keys are checked against."""

import itertools

import numpy as np
import pytest
import zarr

import chunkstore as cs
from chunkstore.errors import ChunkDecodeError
from chunkstore.format import layout_for, read_array_metadata
from chunkstore.format.layout import ArrayLayout

SHAPE = (7, 10)
CHUNKS = (2, 3)

# name -> (zarr_format, separator, key encoding, sharded)
CASES = {
    "v2.": (2, ".", None, False),
    "v2/": (2, "/", None, False),
    "v3default/": (3, "/", "default", False),
    "v3default.": (3, ".", "default", False),
    "v3v2.": (3, ".", "v2", False),
    "v3v2/": (3, "/", "v2", False),
    "sharded/": (3, "/", "default", True),
    "sharded.": (3, ".", "default", True),
    "shardedv2.": (3, ".", "v2", True),
}


def make(case, shape=SHAPE, path="a/b"):
    """A chunkstore array written by zarr-python (every chunk stored), and its store."""
    fmt, sep, enc, sharded = CASES[case]
    store = {}
    chunks = tuple(min(c, max(s, 1)) for c, s in zip(CHUNKS, shape))
    # (zarr-python cannot write a 0-d sharded array: chunkstore writes that one)
    lib = cs if sharded and not shape else zarr
    if fmt == 2:
        z = zarr.create_array(store, name=path, shape=shape, chunks=chunks, dtype="i4",
                              zarr_format=2, chunk_key_encoding={"name": "v2", "separator": sep},
                              fill_value=0)
    else:
        z = lib.create_array(store, name=path, shape=shape, chunks=chunks, dtype="i4",
                              shards=tuple(2 * c for c in chunks) if sharded else None,
                              chunk_key_encoding={"name": enc, "separator": sep},
                              fill_value=0)
    z[...] = np.arange(1, 1 + int(np.prod(shape)), dtype="i4").reshape(shape)
    store = {k: v if isinstance(v, bytes) else v.to_bytes() for k, v in store.items()}
    return cs.open_array(store, path=path, mode="r+"), store


def grid(shape):
    return list(itertools.product(*[range(n) for n in shape]))


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("shape", [SHAPE, ()], ids=["2d", "0d"])
def test_keys_round_trip(case, shape):
    z, store = make(case, shape)
    lay = z.layout
    fmt, sep, enc, sharded = CASES[case]
    assert isinstance(lay, ArrayLayout) and lay.zarr_format == fmt
    assert (lay.shards is not None) == sharded and lay.chunks == z.chunks
    # every stored object's key parses to its coordinates, and encodes back to the key
    objects = {k: lay.parse_stored_key(k) for k in store}
    chunk_keys = {k: c for k, c in objects.items() if c is not None}
    assert sorted(chunk_keys.values()) == grid(lay.stored_grid_shape)
    for k, c in chunk_keys.items():
        assert lay.stored_key(c) == k
    # chunk keys (inner keys when sharded): one at a time, many at once, parsed back
    coords = grid(lay.chunk_grid_shape)
    table = np.array(coords, dtype=np.int64).reshape(len(coords), len(shape))
    keys = lay.chunk_keys(table)
    assert keys == [lay.chunk_key(c) for c in coords]
    assert [lay.parse_chunk_key(k) for k in keys] == coords
    assert sorted(lay.stored_chunks()) == coords
    assert all(k in lay.chunk_store for k in keys)
    if not sharded:
        assert set(keys) == set(chunk_keys)
        assert lay.codec.decode(store[keys[-1]], key=keys[-1]).shape == lay.chunks
    else:
        assert all("|" in k for k in keys) and not set(keys) & set(store)


@pytest.mark.parametrize("case", list(CASES))
def test_non_chunk_keys_are_none(case):
    z, store = make(case)
    lay = z.layout
    for key in [".zarray", "a/b/.zarray", "a/b/.zattrs", "a/b/zarr.json", "a/zarr.json",
                "a/b/foo", "a/b/c", "x/0.0", "a/bc/0.0", "a/b/1.x", "a/b/-1.0", "a/b/"]:
        assert lay.parse_stored_key(key) is None, key
    assert lay.metadata_key in store
    assert lay.metadata_key.startswith("a/b/")


def _reason(lay, key):
    with pytest.raises(ValueError) as e:
        lay.parse_stored_key(key)
    return str(e.value)


def test_invalid_keys_v2():
    z, _ = make("v2.")
    lay = z.layout
    assert _reason(lay, "a/b/1/2") == ("uses separator '/' but the array's dimension "
                                       "separator is '.'")
    assert _reason(lay, "a/b/1.2.0") == "3 coordinates for an array of 2 dimensions"
    assert _reason(lay, "a/b/1") == "1 coordinate for an array of 2 dimensions"
    assert _reason(lay, "a/b/4.0") == ("the chunk grid of '/a/b' is (4, 4) (shape (7, 10), "
                                       "chunks (2, 3))")
    z, _ = make("v2/")
    assert _reason(z.layout, "a/b/1.2") == ("uses separator '.' but the array's dimension "
                                            "separator is '/'")
    z, _ = make("v2.", shape=())
    assert _reason(z.layout, "a/b/0.0") == "a 0-d array has a single chunk '0'"
    assert z.layout.parse_stored_key("a/b/0") == ()


def test_invalid_keys_v3_and_sharded():
    z, _ = make("v3default/")
    lay = z.layout
    assert _reason(lay, "a/b/c.1.2") == ("uses separator '.' but the array's chunk key "
                                         "separator is '/'")
    assert _reason(lay, "a/b/c/1.2") == ("uses separator '.' but the array's dimension "
                                         "separator is '/'")
    assert _reason(lay, "a/b/c/1/2/3") == "3 coordinates for an array of 2 dimensions"
    assert lay.parse_stored_key("a/b/1/2") is None  # no "c" head: not a v3 chunk key
    z, _ = make("v3default/", shape=())
    assert _reason(z.layout, "a/b/c/0") == "a 0-d array has a single chunk 'c'"
    assert z.layout.parse_stored_key("a/b/c") == ()
    z, _ = make("sharded/")
    assert _reason(z.layout, "a/b/c/2/0") == ("the shard grid of '/a/b' is (2, 2) (shape "
                                              "(7, 10), shards (4, 6))")
    with pytest.raises(ValueError, match="not an inner chunk key"):
        z.layout.parse_chunk_key("a/b/c/0/0|9.9")
    assert z.layout.parse_chunk_key("a/b/c/0/0") is None


def test_stored_chunk_keys_and_reads():
    z, store = make("sharded/")
    lay = z.layout
    assert lay.chunks_per_shard == (2, 2) and lay.stored_grid_shape == (2, 2)
    # the edge shard (1, 1) covers inner chunks (2..3, 2..3) of an inner grid (4, 4)
    keys = lay.stored_chunk_keys((1, 1))
    assert [lay.parse_chunk_key(k) for k in keys] == [(2, 2), (2, 3), (3, 2), (3, 3)]
    got = lay.read_chunks(keys)
    assert set(got) == set(keys)
    whole = z[...]
    for k in keys:
        i, j = lay.parse_chunk_key(k)
        chunk = lay.codec.decode(got[k], key=k)
        part = whole[i * 2:(i + 1) * 2, j * 3:(j + 1) * 3]
        np.testing.assert_array_equal(chunk[:part.shape[0], :part.shape[1]], part)
    edge = make("sharded/", shape=(5, 10))[0].layout  # shard row 1 holds one inner row
    assert [edge.parse_chunk_key(k) for k in edge.stored_chunk_keys((1, 0))] == [(2, 0), (2, 1)]
    skey = lay.stored_key((1, 1))
    store[skey] = store[skey][:-3]  # the shard index (at the end) is cut short
    fresh = cs.open_array(store, path="a/b", mode="r").layout
    with pytest.raises(ChunkDecodeError, match="a/b/c/1/1"):
        fresh.read_chunks(fresh.stored_chunk_keys((1, 1)))
    plain = make("v3default/")[0].layout  # unsharded: the stored object is the chunk
    assert plain.stored_chunk_keys((1, 0)) == [plain.chunk_key((1, 0))] == ["a/b/c/1/0"]


@pytest.mark.parametrize("case", ["v2.", "v3default/", "sharded/"])
def test_metadata_lock_keys_and_resize(case):
    z, store = make(case)
    lay = z.layout
    fmt = CASES[case][0]
    assert lay.metadata_key == ("a/b/.zarray" if fmt == 2 else "a/b/zarr.json")
    assert lay.lock_key == "a/b/.zarray"
    assert lay.metadata_lock_key == (None if fmt == 2 else "a/b/zarr.json")
    meta, key = read_array_metadata(store, "a/b", format_hint=fmt)
    assert key == lay.metadata_key and meta.shape == SHAPE
    new = lay.resized((3, 4))
    assert new.shape == (3, 4) and lay.metadata.shape == SHAPE
    lay.write_metadata(new)
    assert read_array_metadata(store, "a/b")[0].shape == (3, 4)
    again = layout_for(new, store, "a/b")
    assert type(again) is type(lay) and again.chunk_grid_shape == (2, 2)
    z.resize(2, 2)  # the array builds a new layout for its new metadata
    assert z.layout.metadata.shape == (2, 2) and z.layout is not lay
    with pytest.raises(AttributeError):
        z.layout = lay


def test_info_rows():
    rows = dict(make("sharded/")[0].layout.grid_info_rows())
    assert rows == {"Zarr format": "3", "Chunk shape": "(2, 3)", "Shard shape": "(4, 6)"}
    assert dict(make("v2.")[0].layout.codec_info_rows()) == {}
    codecs = dict(make("sharded/")[0].layout.codec_info_rows())["Codecs"]
    assert codecs.startswith("sharding_indexed[bytes")
