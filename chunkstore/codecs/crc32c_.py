"""``Crc32cCodec``: a CRC32C checksum after the data, with zarr-python 3's signature; in a
Zarr v3 chain it appends and checks the 4 little-endian bytes itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from chunkstore.codecs._public import named_configuration
from chunkstore.codecs.chain_codecs import (BytesBytesCodec, ChainContext, _as_buffer, _as_u8,
                                            _check_keys)
from chunkstore.codecs.common import to_bytes as _to_bytes
from chunkstore.codecs.registry import register

# crc32c: google-crc32c is a runtime dependency (numcodecs >= 0.16.4 prefers it and deprecates
# the older `crc32c` package, which is only a fallback here).
try:
    import google_crc32c as _google_crc32c

    def _crc32c(data: Any) -> int:
        # google_crc32c wants a contiguous read-only buffer; a u1 view accepts every bytes-like.
        return _google_crc32c.value(np.frombuffer(data, dtype=np.uint8))

except ImportError:  # pragma: no cover - only when the declared dependency is missing
    try:
        import crc32c as _crc32c_mod

        def _crc32c(data: Any) -> int:
            return _crc32c_mod.crc32c(data)

    except ImportError:

        def _crc32c(data: Any) -> int:
            raise ImportError("the crc32c codec needs the google-crc32c package "
                              "(pip install google-crc32c)")


@register
class Crc32cCodec(BytesBytesCodec):
    """``crc32c``: appends the CRC32C of the data as 4 little-endian bytes."""

    name = "crc32c"
    numcodecs_id = "crc32c"

    def __init__(self) -> None:
        pass

    @classmethod
    def from_dict(cls, data: Mapping) -> Crc32cCodec:
        """The codec of its JSON document (which has no configuration)."""
        conf = named_configuration(data, "crc32c")
        if conf:
            raise ValueError(f"codec 'crc32c' takes no configuration, got {conf!r}")
        return cls()

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "Crc32cCodec":
        """The codec of a v3 chain."""
        _check_keys(conf, (), "crc32c")
        return cls()

    @classmethod
    def from_numcodec(cls, codec: Any, typesize: int, auto_shuffle: str | None) -> dict:
        """The v3 document of a numcodecs CRC32C."""
        return {"name": "crc32c"}

    def to_dict(self) -> dict:
        """``{"name": "crc32c"}``."""
        return {"name": "crc32c"}

    def to_numcodecs(self) -> Any:
        """The numcodecs CRC32C for a Zarr v2 array."""
        import numcodecs
        return numcodecs.CRC32C()

    def encode(self, buf: Any) -> Any:
        """The data followed by its CRC32C."""
        data = _as_buffer(buf)
        return _to_bytes(data) + _crc32c(data).to_bytes(4, "little")

    def decode(self, buf: Any) -> Any:
        """The data without its CRC32C, which must match (else "checksum mismatch")."""
        raw = _as_u8(buf)
        if raw.size < 4:
            raise ValueError(f"checksum mismatch: {raw.size} bytes, too short for a crc32c")
        body = raw[:-4]
        stored = int.from_bytes(raw[-4:].tobytes(), "little")
        computed = _crc32c(body)
        if stored != computed:
            raise ValueError(
                f"checksum mismatch (crc32c stored 0x{stored:08x}, computed 0x{computed:08x})"
            )
        return body

    def decode_into(self, buf: Any, dest: np.ndarray) -> None:  # pragma: no cover - unused
        """Decode into ``dest`` (flat uint8)."""
        np.copyto(dest, self.decode(buf))


__all__ = ["Crc32cCodec"]
