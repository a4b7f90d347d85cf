"""What the codecs of a Zarr v3 chain share: the chain's state (:class:`ChainContext`), the
buffer and configuration helpers, the base of the bytes -> bytes codecs that run a numcodecs
codec (:class:`BytesBytesCodec`), and :class:`NumcodecsBytesCodec` (zarr-python 3's
``numcodecs.*`` compressors and checksums in a chain).

Each built-in codec is one class in its own module (``blosc``, ``bytes``, ``crc32c_``,
``gzip``, ``transpose``, ``vlen_utf8``, ``zstd``, ``sharding``), registered in
:mod:`chunkstore.codecs.registry` under its v3 name; :func:`chunkstore.codecs.v3.parse_codecs`
builds a chain from those classes alone, each with ``from_config(conf, ctx)``: its
``configuration`` and the :class:`ChainContext` (the data type, the shape it sees, the fill
value, the item size for Blosc).
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numcodecs
import numpy as np

from chunkstore.codecs._public import Codec
from chunkstore.codecs.common import as_u8 as _as_u8
from chunkstore.codecs.common import decode_checked, stampless
from chunkstore.codecs import registry

_NATIVE_ENDIAN = sys.byteorder  # "little" or "big"

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _as_buffer(buf: Any) -> Any:
    """Something numcodecs / crc32c accept without copying (bytes or a contiguous array)."""
    if isinstance(buf, (bytes, bytearray)):
        return buf
    if isinstance(buf, np.ndarray):
        return _as_u8(buf)
    return np.frombuffer(buf, dtype=np.uint8)


def _config(obj: Mapping, name: str) -> dict:
    conf = obj.get("configuration", {})
    if conf is None:
        conf = {}
    if not isinstance(conf, Mapping):
        raise ValueError(f"codec {name!r}: configuration must be an object, got {conf!r}")
    return dict(conf)


def _check_keys(conf: Mapping, allowed: Sequence[str], name: str) -> None:
    extra = sorted(set(conf) - set(allowed))
    if extra:
        raise ValueError(
            f"codec {name!r}: unknown configuration field(s) {', '.join(map(repr, extra))}"
        )


def _int(v: Any, what: str, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        raise ValueError(f"{what} must be an integer, got {v!r}")
    v = int(v)
    if lo is not None and v < lo:
        raise ValueError(f"{what} must be >= {lo}, got {v}")
    if hi is not None and v > hi:
        raise ValueError(f"{what} must be <= {hi}, got {v}")
    return v


def _native(dtype: Any) -> np.dtype:
    """Native-endian NumPy dtype; the v3 name ``"string"`` (or ``str``) means object."""
    if (isinstance(dtype, str) and dtype == "string") or dtype is str:
        return np.dtype(object)
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        return np.dtype(object)
    if dtype.byteorder not in ("=", "|"):
        dtype = dtype.newbyteorder("=")
    return dtype


class ChainContext:
    """What a codec of a chain is built for: the array's data type, the shape the
    codec sees (after the transposes before it), the fill value, and ``typesize``, the item
    size of the bytes the array -> bytes codec wrote (Blosc's default)."""

    __slots__ = ("dtype", "shape", "fill_value", "typesize")

    def __init__(self, dtype: np.dtype, shape: tuple[int, ...], fill_value: Any) -> None:
        self.dtype, self.shape, self.fill_value = dtype, shape, fill_value
        self.typesize: int | None = None


# --------------------------------------------------------------------------------------------
# base classes
# --------------------------------------------------------------------------------------------


class BytesBytesCodec(Codec):
    """Base of the bytes -> bytes codecs that run a numcodecs codec (``self.numcodec``)."""

    kind = "bytes_bytes"
    #: reads the decoded size from a frame header (None: size unknown before decoding)
    size_reader: Callable[[Any], int | None] | None = None
    numcodec: Any = None

    def encode(self, buf: Any) -> Any:
        """The encoded bytes of ``buf``."""
        return self.numcodec.encode(_as_buffer(buf))

    def decode(self, buf: Any) -> Any:
        """The decoded bytes of ``buf``."""
        return decode_checked(self.numcodec, _as_buffer(buf))

    def decode_into(self, buf: Any, dest: np.ndarray) -> None:
        """Decode ``buf`` into ``dest`` (the chunk's memory, flat uint8)."""
        if dest.size:
            decode_checked(self.numcodec, _as_buffer(buf), dest)


class NumcodecsBytesCodec(BytesBytesCodec):
    """A numcodecs compressor or checksum named ``numcodecs.<id>`` (zarr-python 3's
    wrappers), run as a bytes -> bytes codec. Not registered: the chain takes any such name
    (see chunkstore.codecs.v3.parse_codecs)."""

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext, name: str = "") -> "NumcodecsBytesCodec":
        """The codec named ``name`` (``numcodecs.<id>``) of a v3 chain. (A document without
        Shuffle's ``elementsize`` is read with numcodecs' default, 4, as chunkstore wrote
        such chains before it wrote the array's item size there: see
        chunkstore.hierarchy.creation.fill_codec_defaults.)"""
        return cls(name, conf)

    def __init__(self, name: str, conf: Mapping) -> None:
        cid = name[len("numcodecs."):]
        kind = registry.kind_of(name)
        if kind is None:
            raise ValueError(f"unknown codec {name!r}{registry.did_you_mean(name)}")
        if kind != "bytes_bytes":
            raise ValueError(f"codec {name!r} is not a bytes -> bytes codec; only numcodecs "
                             f"compressors and checksums come after the array -> bytes codec")
        try:
            # (a gzip stream with no time stamp: see stampless)
            self.numcodec = stampless(numcodecs.get_codec({"id": cid, **dict(conf)}))
        except Exception as e:
            raise ValueError(f"codec {name!r}: invalid configuration {dict(conf)!r}: {e}") \
                from None
        # (the name is per instance here: numcodecs.<id>)
        self.name, self.conf = name, dict(conf)  # type: ignore[misc]

    def to_dict(self) -> dict:
        """The JSON document (zarr-python 3's)."""
        return {"name": self.name, "configuration": dict(self.conf)}

    def decode_into(self, buf: Any, dest: np.ndarray) -> None:
        """Decode ``buf`` into ``dest`` (the chunk's memory)."""
        np.copyto(dest.reshape(-1).view(np.uint8), _as_u8(self.decode(buf)))


