"""crc32c checksums: a flipped bit in a stored chunk is an error naming the chunk key, for
Zarr v2 (numcodecs' CRC32C codec) and Zarr v3 (the crc32c codec)."""

import os

import numcodecs
import numpy as np
import pytest

import chunkstore as cs


def flip_a_bit(path):
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x10
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("where", ["compressor", "filters"])
def test_v2_crc32c_detects_corruption(tmp_path, where):
    a = np.arange(400, dtype="i4").reshape(20, 20)
    kw = {"compressor": numcodecs.CRC32C()} if where == "compressor" else \
        {"compressor": None, "filters": [numcodecs.CRC32C()]}
    z = cs.array(a, chunks=(10, 10), store=str(tmp_path / "a.zarr"), **kw)
    np.testing.assert_array_equal(z[...], a)
    flip_a_bit(tmp_path / "a.zarr" / "1.0")
    with pytest.raises(cs.ChunkDecodeError, match=r"'1\.0'"):
        z[15, 5]
    np.testing.assert_array_equal(z[:10, :], a[:10, :])  # the other chunks still read


@pytest.mark.parametrize("shards", [None, (20, 20)])
def test_v3_crc32c_detects_corruption(tmp_path, shards):
    a = np.arange(400, dtype="f8").reshape(20, 20)
    z = cs.create_array(str(tmp_path / "a.zarr"), data=a, chunks=(10, 10), shards=shards,
                        compressors=[numcodecs.Blosc(), numcodecs.CRC32C()])
    np.testing.assert_array_equal(z[...], a)
    if shards is None:
        key_file = tmp_path / "a.zarr" / "c" / "1" / "0"
        flip_a_bit(key_file)
        with pytest.raises(cs.ChunkDecodeError, match="c/1/0"):
            z[15, 5]
    else:
        # Flip a bit inside the first inner chunk's bytes (the shard starts with it).
        path = tmp_path / "a.zarr" / "c" / "0" / "0"
        data = bytearray(open(path, "rb").read())
        data[20] ^= 0x01
        open(path, "wb").write(bytes(data))
        with pytest.raises(cs.ChunkDecodeError, match=r"c/0/0\|"):  # the inner chunk's key
            z[...]
    assert os.path.exists(tmp_path / "a.zarr" / "zarr.json")
