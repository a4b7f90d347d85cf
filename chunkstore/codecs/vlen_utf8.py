"""``VLenUTF8Codec`` and ``VLenBytesCodec``: variable-length serializers, with zarr-python 3's
signatures; ``VLenUTF8Codec`` is also the array -> bytes codec of a Zarr v3 chain for the
``string`` data type."""

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
    kind = "array_bytes"

    def __init__(self) -> None:
        pass

    @classmethod
    def from_dict(cls, data: Mapping) -> Self:
        conf = named_configuration(data, cls.name)
        if conf:
            raise ValueError(f"codec {cls.name!r} takes no configuration, got {conf!r}")
        return cls()

    def to_dict(self) -> dict:
        return {"name": self.name, "configuration": {}}


@register
class VLenUTF8Codec(_VLen):
    """``vlen-utf8``: variable-length UTF-8 strings (the ``string`` data type)."""

    name = "vlen-utf8"
    typesize = 1

    def __init__(self) -> None:
        self._codec = numcodecs.VLenUTF8()

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "VLenUTF8Codec":
        """The codec of a v3 chain (the data type must be ``string``)."""
        _check_keys(conf, (), cls.name)
        if not ctx.dtype.hasobject:
            raise ValueError(f"codec 'vlen-utf8' needs the string data type, not {ctx.dtype}")
        return cls()

    def to_numcodecs(self) -> Any:
        """The numcodecs VLenUTF8 for a Zarr v2 array (a filter)."""
        return numcodecs.VLenUTF8()

    def encode(self, arr: np.ndarray) -> Any:
        """The strings of ``arr`` in C order, numcodecs' VLenUTF8 format."""
        flat = np.ascontiguousarray(arr, dtype=object).reshape(-1)
        return self._codec.encode(flat)

    def decode(self, buf: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """The object array of ``shape`` from its encoded strings."""
        n = math.prod(shape)
        raw = _as_u8(buf)
        # check the header first: a corrupt count would make numcodecs allocate that many items
        if raw.size < 4:
            raise ValueError(f"vlen-utf8 data too short for a header ({raw.size} bytes)")
        count = int.from_bytes(raw[:4].tobytes(), "little")
        if count != n:
            raise ValueError(f"vlen-utf8 header says {count} items, expected {n}")
        if raw.size < 4 + 4 * n:
            raise ValueError(f"vlen-utf8 data has {raw.size} bytes, too short for {n} items")
        out = self._codec.decode(raw)
        out = np.asarray(out, dtype=object)
        if out.size != n:
            raise ValueError(f"decoded chunk has {out.size} items, expected {n}")
        return out.reshape(shape)


@register
class VLenBytesCodec(_VLen):
    """``vlen-bytes``: variable-length bytes (Zarr v2 arrays only here)."""

    name = "vlen-bytes"

    def to_numcodecs(self) -> Any:
        """The numcodecs VLenBytes for a Zarr v2 array (a filter)."""
        return numcodecs.VLenBytes()


__all__ = ["VLenUTF8Codec", "VLenBytesCodec"]
