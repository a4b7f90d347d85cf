"""The codecs of a Zarr v3 chain: their base class, the buffer and configuration helpers they
share, and the built-in ones (``transpose``, ``bytes``, ``vlen-utf8``, ``blosc``, ``gzip``,
``zstd``, ``crc32c`` and zarr-python 3's ``numcodecs.*`` compressors and checksums).

Each codec class registers itself in :mod:`chunkstore.codecs.registry` under its v3 name;
:func:`chunkstore.codecs.v3.parse_codecs` builds a chain from those classes alone
(``sharding_indexed`` lives in :mod:`chunkstore.codecs.sharding`). A codec is built with
``from_config(conf, ctx)``: its ``configuration`` and the :class:`ChainContext` (the data
type, the shape it sees, the fill value, the item size for Blosc).
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any, Mapping, Sequence

import numcodecs
import numpy as np

from chunkstore.codecs.blosc import CNAMES as _BLOSC_CNAMES
from chunkstore.codecs.blosc import SHUFFLE_NAMES, SHUFFLES, shuffle_name
from chunkstore.codecs.common import as_u8 as _as_u8
from chunkstore.codecs.common import blosc_decoded_size, decode_checked, zstd_decoded_size
from chunkstore.codecs.common import to_bytes as _to_bytes
from chunkstore.codecs.numcodecs import BYTES_BYTES
from chunkstore.codecs.registry import register

_NATIVE_ENDIAN = sys.byteorder  # "little" or "big"

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
# codecs
# --------------------------------------------------------------------------------------------


class _Codec:
    """Base of the chain codecs; each one registers itself (chunkstore.codecs.registry)."""

    name = ""
    kind = ""  # "aa", "ab" or "bb"
    #: ``.info`` shows the first bytes -> bytes codec that compresses as the compressor
    compresses = False

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "_Codec":  # pragma: no cover
        raise NotImplementedError

    def to_dict(self) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        conf = self.to_dict().get("configuration")
        return f"{type(self).__name__}({conf!r})" if conf else f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_dict() == self.to_dict()

    __hash__ = None  # type: ignore[assignment]


@register
class TransposeCodec(_Codec):
    """``transpose``: permute the axes; encoded[i] axis = input axis ``order[i]``."""

    name = "transpose"
    kind = "aa"

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "TransposeCodec":
        _check_keys(conf, ("order",), cls.name)
        if "order" not in conf:
            raise ValueError("codec 'transpose': missing configuration field 'order'")
        return cls(conf["order"], len(ctx.shape))

    def __init__(self, order: Sequence[int], ndim: int) -> None:
        if isinstance(order, str):
            # early drafts (and some writers) used "C"/"F"
            if order == "C":
                order = list(range(ndim))
            elif order == "F":
                order = list(range(ndim))[::-1]
            else:
                raise ValueError(f"codec 'transpose': invalid order {order!r}")
        if not isinstance(order, (list, tuple)):
            raise ValueError(f"codec 'transpose': order must be a list of integers, got {order!r}")
        order = tuple(_int(o, "codec 'transpose' order entry", 0) for o in order)
        if sorted(order) != list(range(ndim)):
            raise ValueError(
                f"codec 'transpose': order {list(order)} is not a permutation of "
                f"{list(range(ndim))} (the chunk has {ndim} dimensions)"
            )
        self.order = order

    def encoded_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape[o] for o in self.order)

    def to_dict(self) -> dict:
        return {"name": "transpose", "configuration": {"order": list(self.order)}}


@register
class BytesCodec(_Codec):
    """``bytes``: elements in C order as raw bytes, little- or big-endian."""

    name = "bytes"
    kind = "ab"

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "BytesCodec":
        _check_keys(conf, ("endian",), cls.name)
        return cls(conf.get("endian"), ctx.dtype)

    @property
    def typesize(self) -> int:
        """The item size of the bytes it writes (what Blosc shuffles by default)."""
        return self.itemsize

    def __init__(self, endian: str | None, dtype: np.dtype) -> None:
        if dtype.hasobject:
            raise ValueError(f"codec 'bytes' cannot encode data type {dtype} (use vlen-utf8)")
        if endian is None:
            endian = "little"  # required by the spec for multi-byte types; be lenient
        if endian not in ("little", "big"):
            raise ValueError(f"codec 'bytes': endian must be 'little' or 'big', got {endian!r}")
        self.endian = endian
        self.itemsize = dtype.itemsize
        # structured types: fields in their own (little-endian) order, no endian written
        self.structured = dtype.fields is not None
        self.swap = dtype.itemsize > 1 and endian != _NATIVE_ENDIAN and not self.structured

    def to_dict(self) -> dict:
        if self.itemsize == 1 or self.structured:
            return {"name": "bytes"}
        return {"name": "bytes", "configuration": {"endian": self.endian}}

    def encode(self, arr: np.ndarray) -> Any:
        a = np.ascontiguousarray(arr)
        if self.swap:
            a = a.byteswap()  # a copy in the other byte order
        return a.reshape(-1).view(np.uint8) if a.size else b""

    def decode(self, buf: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        raw = _as_u8(buf)
        n = math.prod(shape) * dtype.itemsize
        if raw.size != n:
            raise ValueError(f"decoded chunk has {raw.size} bytes, expected {n}")
        a = raw.view(dtype).reshape(shape)
        if self.swap:
            a = a.byteswap()
        return a


@register
class VLenUTF8Codec(_Codec):
    """``vlen-utf8``: variable-length UTF-8 strings (the ``string`` data type)."""

    name = "vlen-utf8"
    kind = "ab"
    typesize = 1

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "VLenUTF8Codec":
        _check_keys(conf, (), cls.name)
        return cls(ctx.dtype)

    def __init__(self, dtype: np.dtype) -> None:
        if not dtype.hasobject:
            raise ValueError(f"codec 'vlen-utf8' needs the string data type, not {dtype}")
        self._codec = numcodecs.VLenUTF8()

    def to_dict(self) -> dict:
        return {"name": "vlen-utf8", "configuration": {}}

    def encode(self, arr: np.ndarray) -> Any:
        flat = np.ascontiguousarray(arr, dtype=object).reshape(-1)
        return self._codec.encode(flat)

    def decode(self, buf: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
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


class BytesBytesCodec(_Codec):
    """Base of the bytes -> bytes codecs that run a numcodecs codec (``self.numcodec``)."""

    kind = "bb"
    #: reads the decoded size from a frame header (None: size unknown before decoding)
    size_reader = None
    numcodec: Any = None

    def encode(self, buf: Any) -> Any:
        return self.numcodec.encode(_as_buffer(buf))

    def decode(self, buf: Any) -> Any:
        return decode_checked(self.numcodec, _as_buffer(buf))

    def decode_into(self, buf: Any, dest: np.ndarray) -> None:
        if dest.size:
            decode_checked(self.numcodec, _as_buffer(buf), dest)


@register
class BloscCodec(BytesBytesCodec):
    name = "blosc"
    numcodecs_id = "blosc"
    compresses = True
    size_reader = staticmethod(blosc_decoded_size)

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "BloscCodec":
        return cls(conf, ctx.typesize)

    @classmethod
    def from_numcodec(cls, codec: Any, typesize: int, auto_shuffle: str | None) -> dict:
        shuffle = shuffle_name(codec.shuffle, typesize)
        if auto_shuffle is not None and codec.shuffle not in SHUFFLE_NAMES:
            shuffle = auto_shuffle
        cname = codec.cname.decode() if isinstance(codec.cname, bytes) else codec.cname
        return {"name": "blosc", "configuration": {
            "typesize": typesize, "cname": cname, "clevel": int(codec.clevel),
            "shuffle": shuffle, "blocksize": int(codec.blocksize)}}

    def __init__(self, conf: Mapping, default_typesize: int | None) -> None:
        _check_keys(conf, ("cname", "clevel", "shuffle", "typesize", "blocksize"), "blosc")
        cname = conf.get("cname", "zstd")
        if cname not in _BLOSC_CNAMES:
            raise ValueError(f"codec 'blosc': unknown cname {cname!r}")
        clevel = _int(conf.get("clevel", 5), "codec 'blosc' clevel", 0, 9)
        shuffle = conf.get("shuffle")
        typesize = conf.get("typesize")
        if typesize is None:
            typesize = default_typesize if default_typesize is not None else 1
        typesize = _int(typesize, "codec 'blosc' typesize", 1, 255)
        if shuffle is None:
            shuffle = "shuffle" if typesize > 1 else "bitshuffle"
        if isinstance(shuffle, numbers.Integral) and not isinstance(shuffle, bool):
            shuffle = SHUFFLE_NAMES.get(int(shuffle), shuffle)
        if shuffle not in SHUFFLES:
            raise ValueError(
                f"codec 'blosc': shuffle must be 'noshuffle', 'shuffle' or 'bitshuffle', "
                f"got {shuffle!r}"
            )
        blocksize = _int(conf.get("blocksize", 0), "codec 'blosc' blocksize", 0)
        self.cname, self.clevel, self.shuffle = cname, clevel, shuffle
        self.typesize, self.blocksize = typesize, blocksize
        self.numcodec = numcodecs.Blosc(
            cname=cname, clevel=clevel, shuffle=SHUFFLES[shuffle], blocksize=blocksize,
            typesize=typesize,
        )

    def to_dict(self) -> dict:
        return {
            "name": "blosc",
            "configuration": {
                "typesize": self.typesize,
                "cname": self.cname,
                "clevel": self.clevel,
                "shuffle": self.shuffle,
                "blocksize": self.blocksize,
            },
        }


@register
class GzipCodec(BytesBytesCodec):
    name = "gzip"
    numcodecs_id = "gzip"
    compresses = True

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "GzipCodec":
        return cls(conf)

    @classmethod
    def from_numcodec(cls, codec: Any, typesize: int, auto_shuffle: str | None) -> dict:
        return {"name": "gzip", "configuration": {"level": int(codec.level)}}

    def __init__(self, conf: Mapping) -> None:
        _check_keys(conf, ("level",), "gzip")
        self.level = _int(conf.get("level", 5), "codec 'gzip' level", 0, 9)
        self.numcodec = numcodecs.GZip(level=self.level)

    def to_dict(self) -> dict:
        return {"name": "gzip", "configuration": {"level": self.level}}

    def decode_into(self, buf: Any, dest: np.ndarray) -> None:  # pragma: no cover - unused
        np.copyto(dest, _as_u8(self.decode(buf)))


@register
class ZstdCodec(BytesBytesCodec):
    name = "zstd"
    numcodecs_id = "zstd"
    compresses = True
    size_reader = staticmethod(zstd_decoded_size)

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "ZstdCodec":
        return cls(conf)

    @classmethod
    def from_numcodec(cls, codec: Any, typesize: int, auto_shuffle: str | None) -> dict:
        return {"name": "zstd", "configuration": {
            "level": int(codec.level), "checksum": bool(getattr(codec, "checksum", False))}}

    def __init__(self, conf: Mapping) -> None:
        _check_keys(conf, ("level", "checksum"), "zstd")
        self.level = _int(conf.get("level", 0), "codec 'zstd' level", -131072, 22)
        checksum = conf.get("checksum", False)
        if not isinstance(checksum, bool):
            raise ValueError(f"codec 'zstd': checksum must be true or false, got {checksum!r}")
        self.checksum = checksum
        self.numcodec = numcodecs.Zstd(level=self.level, checksum=checksum)

    def to_dict(self) -> dict:
        return {"name": "zstd", "configuration": {"level": self.level, "checksum": self.checksum}}


@register
class Crc32cCodec(BytesBytesCodec):
    """``crc32c``: appends the CRC32C of the data as 4 little-endian bytes."""

    name = "crc32c"
    numcodecs_id = "crc32c"

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "Crc32cCodec":
        return cls(conf)

    @classmethod
    def from_numcodec(cls, codec: Any, typesize: int, auto_shuffle: str | None) -> dict:
        return {"name": "crc32c"}

    def __init__(self, conf: Mapping) -> None:
        _check_keys(conf, (), "crc32c")

    def to_dict(self) -> dict:
        return {"name": "crc32c"}

    def encode(self, buf: Any) -> Any:
        data = _as_buffer(buf)
        return _to_bytes(data) + _crc32c(data).to_bytes(4, "little")

    def decode(self, buf: Any) -> Any:
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
        np.copyto(dest, self.decode(buf))


class NumcodecsBytesCodec(BytesBytesCodec):
    """A numcodecs compressor or checksum named ``numcodecs.<id>`` (zarr-python 3's
    wrappers), run as a bytes -> bytes codec. Not registered: the chain takes any such name
    (see chunkstore.codecs.v3.parse_codecs)."""

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext, name: str = "") -> "NumcodecsBytesCodec":
        return cls(name, conf)

    def __init__(self, name: str, conf: Mapping) -> None:
        cid = name[len("numcodecs."):]
        if cid not in BYTES_BYTES:
            raise ValueError(f"codec {name!r} is not a bytes -> bytes codec; only numcodecs "
                             f"compressors and checksums work in a Zarr v3 chain here")
        try:
            self.numcodec = numcodecs.get_codec({"id": cid, **dict(conf)})
        except Exception as e:
            raise ValueError(f"codec {name!r}: invalid configuration {dict(conf)!r}: {e}") \
                from None
        self.name, self.conf = name, dict(conf)

    def to_dict(self) -> dict:
        return {"name": self.name, "configuration": dict(self.conf)}

    def decode_into(self, buf: Any, dest: np.ndarray) -> None:
        np.copyto(dest.reshape(-1).view(np.uint8), _as_u8(self.decode(buf)))


