"""``GzipCodec``: gzip compression, with zarr-python 3's signature."""

from __future__ import annotations

from chunkstore.codecs._public import Codec, register


@register
class GzipCodec(Codec):
    codec_name = "gzip"
    kind = "bytes_bytes"
    _fields = ("level",)

    def __init__(self, *, level=5):
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 9:
            raise ValueError(f"GzipCodec level must be an integer 0..9, got {level!r}")
        self._set(level=level)

    def to_numcodecs(self):
        import numcodecs
        return numcodecs.GZip(level=self.level)


__all__ = ["GzipCodec"]
