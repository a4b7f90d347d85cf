"""``ShardingCodec``: the public zarr-python 3 class (``sharding_indexed``).

The internal codec that reads and writes shards is ``chunkstore.codecs.sharding``; this module
is only the value users name in a codec chain (zarr-python 3 keeps both in one module)."""

from __future__ import annotations

from enum import Enum

from chunkstore.codecs._public import Codec, named_configuration, register


class ShardingCodecIndexLocation(str, Enum):
    start = "start"
    end = "end"


def _default_codecs():
    from chunkstore.codecs.bytes import BytesCodec
    return (BytesCodec(),)


def _default_index_codecs():
    from chunkstore.codecs.bytes import BytesCodec
    from chunkstore.codecs.crc32c_ import Crc32cCodec
    return (BytesCodec(), Crc32cCodec())


@register
class ShardingCodec(Codec):
    codec_name = "sharding_indexed"
    kind = "array_bytes"
    _fields = ("chunk_shape", "codecs", "index_codecs", "index_location")

    def __init__(self, *, chunk_shape, codecs=None, index_codecs=None, index_location="end"):
        try:
            chunk_shape = tuple(int(c) for c in chunk_shape)
        except (TypeError, ValueError):
            raise ValueError(f"ShardingCodec chunk_shape must be a sequence of integers, "
                             f"got {chunk_shape!r}") from None
        if isinstance(index_location, ShardingCodecIndexLocation):
            index_location = index_location.value
        if index_location not in ("start", "end"):
            raise ValueError(f"ShardingCodec index_location must be 'start' or 'end', "
                             f"got {index_location!r}")
        self._set(chunk_shape=chunk_shape,
                  codecs=tuple(_default_codecs() if codecs is None else codecs),
                  index_codecs=tuple(_default_index_codecs() if index_codecs is None
                                     else index_codecs),
                  index_location=index_location)

    @classmethod
    def from_dict(cls, data):
        return cls(**named_configuration(data, "sharding_indexed"))

    def to_dict(self):
        # inner codecs that are not codec objects (JSON dicts) are written as given
        def doc(c):
            return c.to_dict() if hasattr(c, "to_dict") else dict(c)
        return {"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(self.chunk_shape), "codecs": [doc(c) for c in self.codecs],
            "index_codecs": [doc(c) for c in self.index_codecs],
            "index_location": self.index_location}}


__all__ = ["ShardingCodec", "ShardingCodecIndexLocation"]
