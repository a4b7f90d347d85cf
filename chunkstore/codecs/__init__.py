"""Codecs. The public classes are zarr-python 3's (same names, constructor signatures,
``to_dict``/``from_dict``); the modules ``v2``, ``v3``, ``chain_codecs``, ``sharding`` and
``common`` hold the internal chunk codecs that encode and decode, and ``registry`` the one
table of codec names (v3 names, numcodecs ids, command-line spellings)."""

from chunkstore.codecs.blosc import BloscCname, BloscCodec, BloscShuffle
from chunkstore.codecs.bytes import BytesCodec, Endian
from chunkstore.codecs.crc32c_ import Crc32cCodec
from chunkstore.codecs.gzip import GzipCodec
from chunkstore.codecs.sharding_indexed import ShardingCodec, ShardingCodecIndexLocation
from chunkstore.codecs.transpose import TransposeCodec
from chunkstore.codecs.vlen_utf8 import VLenBytesCodec, VLenUTF8Codec
from chunkstore.codecs.zstd import ZstdCodec
from chunkstore.codecs import numcodecs  # noqa: E402 - zarr-python 3's codecs.numcodecs
# the internal chain codecs register themselves in chunkstore.codecs.registry on import
from chunkstore.codecs import chain_codecs, sharding  # noqa: E402

_BUILTIN_CHAIN_CODECS = (chain_codecs, sharding)

__all__ = [
    "BloscCname",
    "BloscCodec",
    "BloscShuffle",
    "BytesCodec",
    "Crc32cCodec",
    "Endian",
    "GzipCodec",
    "ShardingCodec",
    "ShardingCodecIndexLocation",
    "TransposeCodec",
    "VLenBytesCodec",
    "VLenUTF8Codec",
    "ZstdCodec",
]
