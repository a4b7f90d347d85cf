"""The codec registry (chunkstore.codecs.registry): v3 names, numcodecs ids, command-line
spellings, and that a new codec is one class plus one registration."""

import argparse

import numcodecs
import numpy as np
import pytest

from chunkstore.codecs import blosc, registry
from chunkstore.codecs.chain_codecs import BytesBytesCodec, _as_u8, _check_keys
from chunkstore.codecs.v3 import ChunkCodecV3, codec_chain_info, parse_codecs
from chunkstore.hierarchy.creation import v3_codec

BYTES = {"name": "bytes", "configuration": {"endian": "little"}}


# ------------------------------------------------------------------------ spellings

@pytest.mark.parametrize("spec, expected", [
    ("none", None),
    ("zstd", numcodecs.Zstd(level=3)),
    ("zstd:5", numcodecs.Zstd(level=5)),
    ("  ZSTD:-7 ", numcodecs.Zstd(level=-7)),
    ("blosc", numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)),
    ("blosc:zstd", numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)),
    ("blosc:LZ4:9:bitshuffle", numcodecs.Blosc(cname="lz4", clevel=9,
                                               shuffle=numcodecs.Blosc.BITSHUFFLE)),
    ("blosc:lz4:5:bit", numcodecs.Blosc(cname="lz4", clevel=5,
                                        shuffle=numcodecs.Blosc.BITSHUFFLE)),
    ("blosc:lz4:1:none", numcodecs.Blosc(cname="lz4", clevel=1,
                                         shuffle=numcodecs.Blosc.NOSHUFFLE)),
    ("blosc:zlib:0:0", numcodecs.Blosc(cname="zlib", clevel=0,
                                       shuffle=numcodecs.Blosc.NOSHUFFLE)),
    ("blosc:lz4:5:byte", numcodecs.Blosc(cname="lz4", clevel=5,
                                         shuffle=numcodecs.Blosc.SHUFFLE)),
    ("gzip", numcodecs.GZip(level=5)),
    ("gzip:6", numcodecs.GZip(level=6)),
    ("zlib:1", numcodecs.Zlib(level=1)),
    ("zlib", numcodecs.Zlib(level=5)),
    ("bz2", numcodecs.BZ2(level=9)),
    ("bz2:1", numcodecs.BZ2(level=1)),
    ("lzma", numcodecs.LZMA(preset=None)),
    ("lzma:2", numcodecs.LZMA(preset=2)),
    ("lz4", numcodecs.LZ4(acceleration=1)),
    ("lz4:65536", numcodecs.LZ4(acceleration=65536)),
])
def test_parse_spelling(spec, expected):
    got = registry.parse_spelling(spec)
    if expected is None:
        assert got is None
    else:
        assert type(got) is type(expected) and got.get_config() == expected.get_config()


@pytest.mark.parametrize("spec, message", [
    ("snappy:1", "unknown compressor 'snappy' in 'snappy:1'; choose from none, zstd, blosc, "
                 "gzip, zlib, bz2, lzma, lz4 (e.g. zstd:5, blosc:lz4:5:shuffle, gzip:6, none)"),
    ("zstd:1:2", "too many fields in compressor 'zstd:1:2': zstd takes at most 1"),
    ("none:1", "too many fields in compressor 'none:1': none takes at most 0"),
    ("blosc:lz4::shuffle", "empty field in compressor 'blosc:lz4::shuffle'"),
    ("zstd:fast", "zstd level must be an integer, got 'fast'"),
    ("zstd:23", "zstd level must be in -131072..22, got 23"),
    ("gzip:10", "gzip level must be in 0..9, got 10"),
    ("bz2:0", "bz2 level must be in 1..9, got 0"),
    ("lzma:x", "lzma preset must be an integer, got 'x'"),
    ("lz4:0", "lz4 acceleration must be in 1..65536, got 0"),
    ("blosc:lz4:10", "blosc level must be in 0..9, got 10"),
    ("blosc:nope", "unknown blosc compressor 'nope' in 'blosc:nope'; choose from "
                   + ", ".join(numcodecs.blosc.list_compressors())),
    ("blosc:lz4:5:Sideways", "unknown blosc shuffle 'Sideways' in 'blosc:lz4:5:Sideways'; "
                             "choose from noshuffle, shuffle, bitshuffle"),
])
def test_parse_spelling_errors(spec, message):
    with pytest.raises(registry.SpellingError) as info:
        registry.parse_spelling(spec)
    assert str(info.value) == message
    # argparse shows it as a bad argument; library callers can catch ValueError
    assert isinstance(info.value, argparse.ArgumentTypeError)
    assert isinstance(info.value, ValueError)


def test_a_registered_spelling_is_parsed_and_listed():
    registry.register_spelling("tiny", 1, lambda args, spec: numcodecs.Zlib(
        level=registry.spelling_int(args[0], "tiny level", 1, 2) if args else 1))
    try:
        assert registry.parse_spelling("tiny:2").get_config() == {"id": "zlib", "level": 2}
        with pytest.raises(registry.SpellingError, match=r"choose from .*lz4, tiny"):
            registry.parse_spelling("other")
    finally:
        del registry._SPELLINGS["tiny"]


# ------------------------------------------------------------------------ the shuffle table

def test_shuffle_table_is_numcodecs():
    assert blosc.SHUFFLES == {"noshuffle": numcodecs.Blosc.NOSHUFFLE,
                              "shuffle": numcodecs.Blosc.SHUFFLE,
                              "bitshuffle": numcodecs.Blosc.BITSHUFFLE}
    assert blosc.AUTOSHUFFLE == numcodecs.Blosc.AUTOSHUFFLE
    assert set(blosc.CNAMES) >= set(numcodecs.blosc.list_compressors())


@pytest.mark.parametrize("typesize, expected", [(1, 2), (2, 1), (8, 1)])
def test_autoshuffle_resolves_as_numcodecs(typesize, expected):
    assert blosc.shuffle_name(blosc.AUTOSHUFFLE, typesize) == blosc.SHUFFLE_NAMES[expected]
    params = blosc.blosc_encode_params("lz4", 5, blosc.AUTOSHUFFLE, typesize, 0)
    if params is not None:
        assert params[2] == expected
    # the frame numcodecs writes says which shuffle it used (flags bit 0: byte, bit 2: bit)
    data = np.arange(64, dtype=f"u{typesize}").tobytes()
    frame = numcodecs.Blosc("lz4", 5, numcodecs.Blosc.AUTOSHUFFLE).encode(
        np.frombuffer(data, f"u{typesize}"))
    flags = frame[2]
    assert (bool(flags & 0x1), bool(flags & 0x4)) == (expected == 1, expected == 2)


# ------------------------------------------------------------------------ v3 names

def test_builtin_v3_names_and_kinds():
    names = registry.v3_names()
    assert set(names) == {"transpose", "bytes", "vlen-utf8", "vlen-bytes", "sharding_indexed",
                          "blosc", "gzip", "zstd", "crc32c",
                          # zarr-python 3's numcodecs filters (array -> array)
                          *(f"numcodecs.{n}" for n in ("delta", "fixedscaleoffset",
                                                       "quantize", "bitround", "packbits",
                                                       "astype"))}
    assert [registry.kind_of(n) for n in ("transpose", "bytes", "sharding_indexed", "zstd")] \
        == ["array_array", "array_bytes", "array_bytes", "bytes_bytes"]
    assert registry.kind_of("lz4") is None
    import chunkstore.codecs.v3 as v3
    assert set(v3.CODEC_NAMES) == set(names)


def test_registering_a_name_twice_is_an_error():
    class Other(BytesBytesCodec):
        name = "zstd"

    with pytest.raises(ValueError, match="'zstd' is registered twice"):
        registry.register(Other)
    assert registry.chain_codec("zstd").__name__ == "ZstdCodec"


def test_a_new_codec_is_one_class_and_one_registration():
    @registry.register
    class XorCodec(BytesBytesCodec):
        """Test codec: every byte xor ``key``."""
        name = "test.xor"

        def __init__(self, conf):
            _check_keys(conf, ("key",), self.name)
            self.key = int(conf.get("key", 0x5A))

        @classmethod
        def from_config(cls, conf, ctx):
            return cls(conf)

        def to_dict(self):
            return {"name": self.name, "configuration": {"key": self.key}}

        def encode(self, buf):
            return (_as_u8(buf) ^ np.uint8(self.key)).tobytes()

        def decode(self, buf):
            return _as_u8(buf) ^ np.uint8(self.key)

    try:
        chain = [BYTES, {"name": "test.xor", "configuration": {"key": 7}},
                 {"name": "zstd", "configuration": {"level": 1}}]
        codec = ChunkCodecV3("<i4", (4, 5), chain)
        chunk = np.arange(20, dtype="<i4").reshape(4, 5)
        stored = codec.encode(chunk)
        raw = np.frombuffer(numcodecs.Zstd().decode(stored), np.uint8)
        assert raw.tobytes() == (chunk.view(np.uint8).reshape(-1) ^ 7).tobytes()
        np.testing.assert_array_equal(codec.decode(stored), chunk)
        assert codec.codecs[1] == {"name": "test.xor", "configuration": {"key": 7}}
        # a bytes -> bytes codec, placed as one: not before the array -> bytes codec
        with pytest.raises(ValueError, match="'test.xor' .* must come after"):
            parse_codecs([{"name": "test.xor"}, BYTES], "<i4", (4, 5))
        # not a compressor: .info shows zstd
        info = codec_chain_info(chain, "<i4", (4, 5))
        assert info["compressor"].codec_id == "zstd"
        # inside a shard too
        sharded = ChunkCodecV3("<i4", (8, 5), [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [4, 5], "codecs": chain[:2]}}])
        big = np.arange(40, dtype="<i4").reshape(8, 5)
        np.testing.assert_array_equal(sharded.decode(sharded.encode(big)), big)
    finally:
        del registry._CODECS["test.xor"]
    with pytest.raises(ValueError, match="unknown codec 'test.xor'"):
        parse_codecs([BYTES, {"name": "test.xor"}], "<i4", (4, 5))


# ------------------------------------------------------------------------ numcodecs ids

def test_v3_of_numcodec():
    b = numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE,
                        blocksize=256)
    assert registry.v3_of_numcodec(b, 4) == {"name": "blosc", "configuration": {
        "typesize": 4, "cname": "zstd", "clevel": 3, "shuffle": "bitshuffle",
        "blocksize": 256}}
    auto = numcodecs.Blosc(shuffle=numcodecs.Blosc.AUTOSHUFFLE)
    assert registry.v3_of_numcodec(auto, 1)["configuration"]["shuffle"] == "bitshuffle"
    assert registry.v3_of_numcodec(auto, 4)["configuration"]["shuffle"] == "shuffle"
    assert registry.v3_of_numcodec(auto, 1, auto_shuffle="shuffle")[
        "configuration"]["shuffle"] == "shuffle"
    assert registry.v3_of_numcodec(numcodecs.Zstd(level=4, checksum=True), 2) == {
        "name": "zstd", "configuration": {"level": 4, "checksum": True}}
    assert registry.v3_of_numcodec(numcodecs.GZip(level=2), 2) == {
        "name": "gzip", "configuration": {"level": 2}}
    assert registry.v3_of_numcodec(numcodecs.CRC32C(), 2) == {"name": "crc32c"}
    for other in (numcodecs.LZ4(), numcodecs.Zlib(), numcodecs.VLenUTF8(), object()):
        assert registry.v3_of_numcodec(other, 2) is None


def test_v3_codec_of_creation_keeps_its_choices():
    # chunkstore's v3 creation writes byte shuffle for AUTOSHUFFLE, even for 1-byte items
    auto = numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.AUTOSHUFFLE)
    assert v3_codec(auto, 1)["configuration"]["shuffle"] == "shuffle"
    assert v3_codec(numcodecs.Zstd(level=2), 8) == {
        "name": "zstd", "configuration": {"level": 2, "checksum": False}}
    # a compressor with no native v3 codec is zarr-python 3's numcodecs.<id> (README: the
    # numcodecs codecs are accepted in v3 chains; create() refused them)
    assert v3_codec(numcodecs.Zlib(), 8) == {"name": "numcodecs.zlib",
                                             "configuration": {"level": 1}}
    with pytest.raises(ValueError, match="no compressor of a Zarr v3 chain"):
        v3_codec(numcodecs.Delta(dtype="i4"), 8)


def test_numcodec_and_v3_blosc_frames_agree():
    """A numcodecs Blosc and the v3 codec the registry makes of it write the same frames."""
    comp = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE)
    doc = registry.v3_of_numcodec(comp, 4)
    codec = ChunkCodecV3("<f4", (32,), [BYTES, doc])
    chunk = np.linspace(0, 1, 32, dtype="<f4")
    assert codec.encode(chunk) == comp.encode(chunk)
