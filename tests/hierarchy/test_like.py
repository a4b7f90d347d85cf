"""zeros_like/ones_like/full_like/empty_like keep the source's Zarr format, shards and codec
chain unless the call says otherwise."""

import numcodecs
import numpy as np
import pytest

import chunkstore as cs

LIKES = [(cs.zeros_like, {}, 0), (cs.ones_like, {}, 1), (cs.full_like, {"fill_value": 7}, 7),
         (cs.empty_like, {}, None)]


def sharded(store):
    return cs.create_array(store, name="src", shape=(8, 6), chunks=(2, 3), shards=(4, 6),
                           dtype="i2", fill_value=5,
                           compressors=[numcodecs.Zstd(level=3), numcodecs.CRC32C()],
                           dimension_names=["y", "x"])


@pytest.mark.parametrize("like,kw,fill", LIKES, ids=[f.__name__ for f, _, _ in LIKES])
def test_v3_sharded_source(like, kw, fill):
    s = cs.MemoryStore()
    a = sharded(s)
    b = like(a, store=s, path="out", **kw)
    assert b.metadata.zarr_format == 3
    assert (b.shape, b.chunks, b.shards, b.dtype) == (a.shape, a.chunks, a.shards, a.dtype)
    assert b.metadata.codecs == a.metadata.codecs
    assert "zarr.json" in s.listdir("out") and ".zarray" not in s.listdir("out")
    if fill is not None:
        np.testing.assert_array_equal(b[...], np.full(a.shape, fill, "i2"))
    b[1:3, :] = 9
    assert b[2, 0] == 9


def test_v3_unsharded_source_and_zarr_reads_it(tmp_path):
    zarr = pytest.importorskip("zarr")
    path = str(tmp_path / "s.zarr")
    a = cs.create_array(path, name="src", shape=(10,), chunks=(4,), dtype="f4",
                        compressors=[numcodecs.GZip(level=2)], fill_value=0)
    b = cs.zeros_like(a, store=path, path="out")
    assert b.metadata.zarr_format == 3 and b.shards is None
    assert b.metadata.codecs == a.metadata.codecs
    b[:] = np.arange(10, dtype="f4")
    z = zarr.open_array(path + "/out", mode="r")
    assert z.metadata.zarr_format == 3
    assert [type(c).__name__ for c in z.compressors] == ["GzipCodec"]
    np.testing.assert_array_equal(z[:], np.arange(10, dtype="f4"))


def test_told_otherwise():
    s = cs.MemoryStore()
    a = sharded(s)
    v2 = cs.zeros_like(a, store=s, path="v2", zarr_format=2)
    assert v2.metadata.zarr_format == 2 and v2.shards is None and ".zarray" in s.listdir("v2")
    plain = cs.zeros_like(a, store=s, path="plain", compressor=None)
    assert plain.metadata.zarr_format == 3 and plain.shards == (4, 6)
    inner = plain.metadata.codecs[0]["configuration"]["codecs"]
    assert [c["name"] for c in inner] == ["bytes"]
    reshard = cs.zeros_like(a, store=s, path="re", shards=(8, 6))
    assert reshard.shards == (8, 6) and reshard.chunks == (2, 3)
    wider = cs.zeros_like(a, store=s, path="wide", dtype="i4")
    assert wider.dtype == np.dtype("i4") and wider.metadata.zarr_format == 3


def test_v2_source_stays_v2():
    s = cs.MemoryStore()
    a = cs.zeros((5, 5), chunks=(2, 2), store=s, path="src", compressor=numcodecs.Zstd(1))
    b = cs.ones_like(a, store=s, path="out")
    assert b.metadata.zarr_format == 2 and b.compressor == a.compressor
    assert b.chunks == (2, 2)
