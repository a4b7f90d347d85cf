"""``Crc32cCodec``: a CRC32C checksum after the data, with zarr-python 3's signature."""

from __future__ import annotations

from chunkstore.codecs._public import Codec, named_configuration, register


@register
class Crc32cCodec(Codec):
    codec_name = "crc32c"
    kind = "bytes_bytes"

    def __init__(self):
        pass

    @classmethod
    def from_dict(cls, data):
        conf = named_configuration(data, "crc32c")
        if conf:
            raise ValueError(f"codec 'crc32c' takes no configuration, got {conf!r}")
        return cls()

    def to_dict(self):
        return {"name": "crc32c"}

    def to_numcodecs(self):
        import numcodecs
        return numcodecs.CRC32C()


__all__ = ["Crc32cCodec"]
