"""``GzipCodec``: gzip compression, with zarr-python 3's signature; in a Zarr v3 chain it runs
numcodecs' GZip (and the GIL-free batch path, chunkstore.codecs.fastpath)."""

from __future__ import annotations

from typing import Any

import numcodecs
import numpy as np

from chunkstore.codecs.chain_codecs import (BytesBytesCodec, ChainContext, _as_u8, _check_keys,
                                            _int)
from chunkstore.codecs.common import StamplessGZip
from chunkstore.codecs.registry import register


@register
class GzipCodec(BytesBytesCodec):
    """gzip at ``level`` 0..9."""

    name = "gzip"
    numcodecs_id = "gzip"
    compresses = True
    _fields = ("level",)

    def __init__(self, *, level: int = 5) -> None:
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 9:
            raise ValueError(f"GzipCodec level must be an integer 0..9, got {level!r}")
        self.level = level
        self.numcodec = StamplessGZip(level=level)

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "GzipCodec":
        """The codec of a v3 chain (errors name the codec as the chain's parser does)."""
        _check_keys(conf, ("level",), "gzip")
        return cls(level=_int(conf.get("level", 5), "codec 'gzip' level", 0, 9))

    @classmethod
    def from_numcodec(cls, codec: Any, typesize: int, auto_shuffle: str | None) -> dict:
        """The v3 document of a numcodecs GZip."""
        return {"name": "gzip", "configuration": {"level": int(codec.level)}}

    def to_numcodecs(self) -> Any:
        """The numcodecs GZip for a Zarr v2 array."""
        return numcodecs.GZip(level=self.level)

    def decode_into(self, buf: Any, dest: np.ndarray) -> None:  # pragma: no cover - unused
        """Decode into ``dest`` (flat uint8)."""
        np.copyto(dest, _as_u8(self.decode(buf)))


__all__ = ["GzipCodec"]
