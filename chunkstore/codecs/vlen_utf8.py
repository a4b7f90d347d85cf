"""``VLenUTF8Codec`` and ``VLenBytesCodec``: variable-length serializers, with zarr-python 3's
signatures; also the array -> bytes codecs of Zarr v3 chains for the ``string`` and
``variable_length_bytes`` data types."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numcodecs
import numpy as np

from chunkstore.codecs._public import Codec, named_configuration
from chunkstore.codecs.chain_codecs import ChainContext, _as_u8, _check_keys
from chunkstore.codecs.registry import register

if TYPE_CHECKING:
    from typing import Self


class _VLen(Codec):
    """A variable-length serializer: numcodecs' format (a count, then each item's length and
    bytes), of the data type the subclass names."""

    kind = "array_bytes"
    typesize = 1  # (of the bytes it makes, for a Blosc after it)
    data_type = ""  # the v3 data type its chain must have (for messages)
    _numcodec: Any = None  # the numcodecs class of the subclass's format

    def __init__(self) -> None:
        self._codec = self._numcodec()

    @classmethod
    def from_dict(cls, data: Mapping) -> Self:
        conf = named_configuration(data, cls.name)
        if conf:
            raise ValueError(f"codec {cls.name!r} takes no configuration, got {conf!r}")
        return cls()

    def to_dict(self) -> dict:
        return {"name": self.name, "configuration": {}}

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> Self:
        """The codec of a v3 chain (the data type must be variable-length: an object one)."""
        _check_keys(conf, (), cls.name)
        if not ctx.dtype.hasobject:
            raise ValueError(f"codec {cls.name!r} needs the {cls.data_type} data type, not "
                             f"{ctx.dtype}")
        return cls()

    def to_numcodecs(self) -> Any:
        """The numcodecs codec for a Zarr v2 array (a filter)."""
        return self._numcodec()

    def encode(self, arr: np.ndarray) -> Any:
        """The items of ``arr`` in C order, numcodecs' format."""
        flat = np.ascontiguousarray(arr, dtype=object).reshape(-1)
        return self._codec.encode(flat)

    def decode(self, buf: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """The object array of ``shape`` from its encoded items."""
        n = math.prod(shape)
        raw = _as_u8(buf)
        # check the header first: a corrupt count would make numcodecs allocate that many items
        if raw.size < 4:
            raise ValueError(f"{self.name} data too short for a header ({raw.size} bytes)")
        count = int.from_bytes(raw[:4].tobytes(), "little")
        if count != n:
            raise ValueError(f"{self.name} header says {count} items, expected {n}")
        if raw.size < 4 + 4 * n:
            raise ValueError(f"{self.name} data has {raw.size} bytes, too short for {n} items")
        out = self._codec.decode(raw)
        out = np.asarray(out, dtype=object)
        if out.size != n:
            raise ValueError(f"decoded chunk has {out.size} items, expected {n}")
        return out.reshape(shape)


@register
class VLenUTF8Codec(_VLen):
    """``vlen-utf8``: variable-length UTF-8 strings (the ``string`` data type)."""

    name, data_type, _numcodec = "vlen-utf8", "string", numcodecs.VLenUTF8


@register
class VLenBytesCodec(_VLen):
    """``vlen-bytes``: variable-length bytes (the ``variable_length_bytes`` data type)."""

    name, data_type, _numcodec = "vlen-bytes", "variable_length_bytes", numcodecs.VLenBytes


__all__ = ["VLenUTF8Codec", "VLenBytesCodec"]
