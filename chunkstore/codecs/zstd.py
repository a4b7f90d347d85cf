"""``ZstdCodec``: Zstandard compression, with zarr-python 3's signature; in a Zarr v3 chain it
runs numcodecs' Zstd (and the GIL-free batch path, chunkstore.codecs.fastpath)."""

from __future__ import annotations

from typing import Any

import numcodecs

from chunkstore.codecs.chain_codecs import BytesBytesCodec, ChainContext, _check_keys, _int
from chunkstore.codecs.common import zstd_decoded_size
from chunkstore.codecs.registry import register


@register
class ZstdCodec(BytesBytesCodec):
    """Zstandard: ``level`` (-131072..22) and ``checksum`` (a content checksum in the frame)."""

    name = "zstd"
    numcodecs_id = "zstd"
    compresses = True
    size_reader = staticmethod(zstd_decoded_size)
    _fields = ("level", "checksum")

    def __init__(self, *, level: int = 0, checksum: bool = False) -> None:
        if isinstance(level, bool) or not isinstance(level, int) or not -131072 <= level <= 22:
            raise ValueError(f"ZstdCodec level must be an integer -131072..22, got {level!r}")
        if not isinstance(checksum, bool):
            raise ValueError(f"ZstdCodec checksum must be True or False, got {checksum!r}")
        self.level, self.checksum = level, checksum
        self.numcodec = numcodecs.Zstd(level=level, checksum=checksum)

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "ZstdCodec":
        """The codec of a v3 chain (errors name the codec as the chain's parser does)."""
        _check_keys(conf, ("level", "checksum"), "zstd")
        level = _int(conf.get("level", 0), "codec 'zstd' level", -131072, 22)
        checksum = conf.get("checksum", False)
        if not isinstance(checksum, bool):
            raise ValueError(f"codec 'zstd': checksum must be true or false, got {checksum!r}")
        return cls(level=level, checksum=checksum)

    @classmethod
    def from_numcodec(cls, codec: Any, typesize: int, auto_shuffle: str | None) -> dict:
        """The v3 document of a numcodecs Zstd."""
        return {"name": "zstd", "configuration": {
            "level": int(codec.level), "checksum": bool(getattr(codec, "checksum", False))}}

    def to_numcodecs(self) -> Any:
        """The numcodecs Zstd for a Zarr v2 array (written as zarr-python 3 writes it)."""
        return zstd_v2(self.level, self.checksum)


class _ZstdV2(numcodecs.Zstd):
    """numcodecs Zstd whose Zarr v2 document is zarr-python 3's (no ``"checksum": false``)."""

    codec_id = "zstd"

    def get_config(self) -> dict:
        conf = super().get_config()
        if not conf.get("checksum", False):
            conf.pop("checksum", None)
        return conf


def zstd_v2(level: int = 0, checksum: bool = False) -> Any:
    """A numcodecs Zstd for a Zarr v2 compressor, written as zarr-python 3 writes it."""
    return _ZstdV2(level=level, checksum=checksum)


__all__ = ["ZstdCodec"]
