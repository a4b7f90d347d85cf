"""``BytesCodec``: the fixed-size serializer, with zarr-python 3's signature."""

from __future__ import annotations

import sys
from enum import Enum

import numpy as np

from chunkstore.codecs._public import Codec, named_configuration, register


class Endian(str, Enum):
    big = "big"
    little = "little"


default_system_endian = sys.byteorder


@register
class BytesCodec(Codec):
    """``endian=None`` is for 1-byte data types only (zarr-python 3 writes no configuration
    for them, whatever endian was given)."""

    codec_name = "bytes"
    kind = "array_bytes"
    _fields = ("endian",)

    def __init__(self, *, endian=default_system_endian):
        if isinstance(endian, Endian):
            endian = endian.value
        if endian not in ("big", "little", None):
            raise ValueError(f"BytesCodec endian must be 'big', 'little' or None, got {endian!r}")
        self._set(endian=endian)

    @classmethod
    def from_dict(cls, data):
        conf = named_configuration(data, "bytes")
        return cls(endian=conf.get("endian"), **{k: v for k, v in conf.items() if k != "endian"})

    def to_dict(self):
        if self.endian is None:
            return {"name": "bytes"}
        return {"name": "bytes", "configuration": {"endian": self.endian}}

    def spec(self, dtype=None):
        if dtype is not None and (np.dtype(dtype).itemsize == 1 or
                                  np.dtype(dtype).fields is not None):
            return {"name": "bytes"}
        if self.endian is None and dtype is not None:
            raise ValueError(f"BytesCodec needs endian= for the multi-byte data type "
                             f"{np.dtype(dtype)}")
        return self.to_dict()


__all__ = ["BytesCodec", "Endian"]
