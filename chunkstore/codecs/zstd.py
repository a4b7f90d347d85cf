"""``ZstdCodec``: Zstandard compression, with zarr-python 3's signature."""

from __future__ import annotations

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
        from chunkstore.codecs.normalize import zstd_v2
        return zstd_v2(self.level, self.checksum)


__all__ = ["ZstdCodec"]
