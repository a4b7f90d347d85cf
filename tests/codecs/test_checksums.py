"""crc32c checksums: a flipped bit in a stored chunk is an error naming the chunk key, for
Zarr v2 (numcodecs' CRC32C codec) and Zarr v3 (the crc32c codec)."""

import os
import re

import numcodecs
import numpy as np
import pytest

import chunkstore as cs


def flip_a_bit(path):
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x10
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("where", ["compressor", "filters", "with_blosc"])
def test_crc32c_detects_corruption(tmp_path, where, layout):
    """v2: numcodecs' CRC32C as compressor or filter; v3: the crc32c codec at the end of the
    chain (sharded: of each inner chunk's chain; the shard index has its own crc32c)."""
    a = np.arange(400, dtype="f8").reshape(20, 20)
    kw = {"compressor": {"compressor": numcodecs.CRC32C()},
          "filters": {"compressor": None, "filters": [numcodecs.CRC32C()]},
          "with_blosc": {"compressor": numcodecs.Blosc(), "filters": [numcodecs.CRC32C()]},
          }[where]
    p = tmp_path / "a.zarr"
    z = cs.array(a, chunks=(10, 10), store=str(p), **layout.format_kwargs((10, 10), **kw))
    np.testing.assert_array_equal(z[...], a)
    assert z.zarr_format == layout.zarr_format and z.shards == layout.shards_for((10, 10))
    if not layout.sharded:
        key = layout.stored_key((1, 0))
        flip_a_bit(p / key)
        with pytest.raises(cs.ChunkDecodeError, match=re.escape(f"'{key}'")):
            z[15, 5]
        np.testing.assert_array_equal(z[:10, :], a[:10, :])  # the other chunks still read
    else:
        # one shard holds all four chunks: flip a bit inside the first inner chunk's bytes
        # (the shard starts with it)
        path = p / layout.stored_key((0, 0))
        data = bytearray(open(path, "rb").read())
        data[20] ^= 0x01
        open(path, "wb").write(bytes(data))
        with pytest.raises(cs.ChunkDecodeError, match=re.escape(layout.stored_key((0, 0)) + "|")):
            z[...]     # named by the inner chunk's key
        np.testing.assert_array_equal(z[10:, :], a[10:, :])  # the other inner chunks read
    assert os.path.exists(p / layout.metadata_name)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("split", [0, 60, 119])
def test_a_chunk_of_several_zstd_frames_reads_as_numcodecs_reads_it(tmp_path, fmt, split):
    """A chunk of two concatenated Zstandard frames (valid zstd: numcodecs and zarr-python 3
    read it whole) was refused: the first frame's content size was taken for the chunk's
    ("decompressed chunk has 60 bytes, expected 120"). Trailing bytes that are no frame
    are still refused."""
    import zstandard
    data = np.arange(30, dtype="<i4").reshape(6, 5)
    raw = data.tobytes()
    frames = zstandard.ZstdCompressor().compress(raw[:split]) + \
        zstandard.ZstdCompressor().compress(raw[split:])
    assert bytes(numcodecs.Zstd().decode(frames)) == raw
    p = str(tmp_path / "a")
    comp = dict(compressor=numcodecs.Zstd()) if fmt == 2 else \
        dict(compressors=[cs.codecs.ZstdCodec()])
    cs.create_array(p, shape=(6, 5), chunks=(6, 5), dtype="<i4", zarr_format=fmt,
                    fill_value=0, **comp)[...] = 1
    key = os.path.join(p, "0.0" if fmt == 2 else "c/0/0")
    with open(key, "wb") as f:
        f.write(frames)
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[...], data)
    with open(key, "wb") as f:
        f.write(zstandard.ZstdCompressor().compress(raw) + b"garbage!")
    with pytest.raises(cs.errors.ChunkDecodeError):
        cs.open_array(p, mode="r")[...]
