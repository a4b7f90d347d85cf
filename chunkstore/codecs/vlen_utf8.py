"""``VLenUTF8Codec`` and ``VLenBytesCodec``: variable-length serializers, with zarr-python 3's
signatures."""

from __future__ import annotations

from chunkstore.codecs._public import Codec, named_configuration, register


class _VLen(Codec):
    kind = "array_bytes"

    def __init__(self):
        pass

    @classmethod
    def from_dict(cls, data):
        conf = named_configuration(data, cls.codec_name)
        if conf:
            raise ValueError(f"codec {cls.codec_name!r} takes no configuration, got {conf!r}")
        return cls()

    def to_dict(self):
        return {"name": self.codec_name, "configuration": {}}


@register
class VLenUTF8Codec(_VLen):
    codec_name = "vlen-utf8"

    def to_numcodecs(self):
        import numcodecs
        return numcodecs.VLenUTF8()


@register
class VLenBytesCodec(_VLen):
    codec_name = "vlen-bytes"

    def to_numcodecs(self):
        import numcodecs
        return numcodecs.VLenBytes()


__all__ = ["VLenUTF8Codec", "VLenBytesCodec"]
