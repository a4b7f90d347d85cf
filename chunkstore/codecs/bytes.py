"""``BytesCodec``: the fixed-size serializer, with zarr-python 3's signature; in a Zarr v3
chain it writes the elements in C order as raw bytes, little- or big-endian."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkstore.codecs._public import Codec, named_configuration
from chunkstore.codecs.chain_codecs import _NATIVE_ENDIAN, ChainContext, _as_u8, _check_keys
from chunkstore.codecs.registry import register

if TYPE_CHECKING:
    from numpy.typing import DTypeLike


class Endian(str, Enum):
    """Byte orders (zarr-python 3's enum)."""
    big = "big"
    little = "little"


default_system_endian = sys.byteorder


@register
class BytesCodec(Codec):
    """``endian=None`` is for 1-byte data types only (zarr-python 3 writes no configuration
    for them, whatever endian was given). A codec of a chain (``from_config``) knows its
    data type: ``itemsize``, ``structured`` (fields in their own order, no endian written)
    and ``swap`` (stored bytes are in the other byte order)."""

    name = "bytes"
    kind = "array_bytes"
    _fields = ("endian",)
    # unbound: no data type yet
    itemsize: int | None = None
    structured = False
    swap = False

    def __init__(self, *, endian: Endian | str | None = default_system_endian) -> None:
        if isinstance(endian, Endian):
            endian = endian.value
        if endian not in ("big", "little", None):
            raise ValueError(f"BytesCodec endian must be 'big', 'little' or None, got {endian!r}")
        self.endian = endian

    @classmethod
    def from_dict(cls, data: Mapping) -> BytesCodec:
        """The codec of its JSON document (no configuration: ``endian=None``)."""
        conf = named_configuration(data, "bytes")
        return cls(endian=conf.get("endian"), **{k: v for k, v in conf.items() if k != "endian"})

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "BytesCodec":
        """The codec of a v3 chain for ``ctx.dtype``."""
        _check_keys(conf, ("endian",), cls.name)
        dtype = ctx.dtype
        if dtype.hasobject:
            raise ValueError(f"codec 'bytes' cannot encode data type {dtype} (use vlen-utf8)")
        endian = conf.get("endian")
        if endian is None:
            endian = "little"  # required by the spec for multi-byte types; be lenient
        if endian not in ("little", "big"):
            raise ValueError(f"codec 'bytes': endian must be 'little' or 'big', got {endian!r}")
        codec = cls(endian=endian)
        structured = dtype.fields is not None
        codec._set(itemsize=dtype.itemsize if multibyte(dtype) else 1, structured=structured,
                   swap=multibyte(dtype) and endian != _NATIVE_ENDIAN and not structured)
        return codec

    @property
    def typesize(self) -> int | None:
        """The item size of the bytes it writes (what Blosc shuffles by default)."""
        return self.itemsize

    def to_dict(self) -> dict:
        """The JSON document (no configuration for 1-byte and structured data types)."""
        if self.endian is None or self.itemsize == 1 or self.structured:
            return {"name": "bytes"}
        return {"name": "bytes", "configuration": {"endian": self.endian}}

    def spec(self, dtype: DTypeLike | None = None) -> dict:
        """The JSON document for arrays of ``dtype``."""
        if dtype is not None and (not multibyte(np.dtype(dtype)) or
                                  np.dtype(dtype).fields is not None):
            return {"name": "bytes"}
        if self.endian is None and dtype is not None:
            raise ValueError(f"BytesCodec needs endian= for the multi-byte data type "
                             f"{np.dtype(dtype)}")
        return self.to_dict()

    def encode(self, arr: np.ndarray) -> Any:
        """The elements' bytes in C order and the stored byte order."""
        a = np.ascontiguousarray(arr)
        if self.swap:
            a = a.byteswap()  # a copy in the other byte order
        return a.reshape(-1).view(np.uint8) if a.size else b""

    def decode(self, buf: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """The chunk of ``shape`` and (native) ``dtype`` from its bytes."""
        raw = _as_u8(buf)
        n = math.prod(shape) * dtype.itemsize
        if raw.size != n:
            raise ValueError(f"decoded chunk has {raw.size} bytes, expected {n}")
        a = raw.view(dtype).reshape(shape)
        if self.swap:
            a = a.byteswap()
        return a


def multibyte(dtype: np.dtype) -> bool:
    """Whether dtype's elements are multi-byte numbers (a byte order applies): not 1-byte
    types, nor fixed-width or raw bytes (``S``, ``V``), which are sequences of single bytes
    (but ml_dtypes' bfloat16, of kind V, is a number: tensorstore writes its endian)."""
    return dtype.itemsize > 1 and (dtype.kind not in "SV" or (
        dtype.fields is None and dtype.type.__module__.split(".")[0] == "ml_dtypes"))


__all__ = ["BytesCodec", "Endian"]
