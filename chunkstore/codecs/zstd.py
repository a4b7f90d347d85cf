"""``ZstdCodec``: Zstandard compression, with zarr-python 3's signature."""

from __future__ import annotations

import numcodecs

from chunkstore.codecs._public import Codec, register


@register
class ZstdCodec(Codec):
    codec_name = "zstd"
    kind = "bytes_bytes"
    _fields = ("level", "checksum")

    def __init__(self, *, level=0, checksum=False):
        if isinstance(level, bool) or not isinstance(level, int) or not -131072 <= level <= 22:
            raise ValueError(f"ZstdCodec level must be an integer -131072..22, got {level!r}")
        if not isinstance(checksum, bool):
            raise ValueError(f"ZstdCodec checksum must be True or False, got {checksum!r}")
        self._set(level=level, checksum=checksum)

    def to_numcodecs(self):
        return zstd_v2(self.level, self.checksum)


class _ZstdV2(numcodecs.Zstd):
    """numcodecs Zstd whose Zarr v2 document is zarr-python 3's (no ``"checksum": false``)."""

    codec_id = "zstd"

    def get_config(self):
        conf = super().get_config()
        if not conf.get("checksum", False):
            conf.pop("checksum", None)
        return conf


def zstd_v2(level: int = 0, checksum: bool = False):
    """A numcodecs Zstd for a Zarr v2 compressor, written as zarr-python 3 writes it."""
    return _ZstdV2(level=level, checksum=checksum)


__all__ = ["ZstdCodec"]
