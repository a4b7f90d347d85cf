"""Codecs. Each codec is one class in its own module (``blosc``, ``bytes``, ``crc32c_``, ``gzip``,
``sharding``, ``transpose``, ``vlen_utf8``, ``zstd``): zarr-python 3's public class (same name,
constructor signature, ``to_dict``/``from_dict``) and the codec a Zarr v3 chain runs. The
modules ``v2`` and ``v3`` hold the chunk codecs that run the chains, ``chain_codecs`` and
``common`` what those share, and ``registry`` the one table of codec names (v3 names,
numcodecs ids, command-line spellings), where every codec class registers itself."""

from chunkstore.codecs.blosc import BloscCname, BloscCodec, BloscShuffle
from chunkstore.codecs.bytes import BytesCodec, Endian
from chunkstore.codecs.crc32c_ import Crc32cCodec
from chunkstore.codecs.gzip import GzipCodec
from chunkstore.codecs.sharding_indexed import ShardingCodec, ShardingCodecIndexLocation
from chunkstore.codecs.transpose import TransposeCodec
from chunkstore.codecs.vlen_utf8 import VLenBytesCodec, VLenUTF8Codec
from chunkstore.codecs.zstd import ZstdCodec
from chunkstore.codecs import numcodecs  # noqa: E402 - zarr-python 3's codecs.numcodecs

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
