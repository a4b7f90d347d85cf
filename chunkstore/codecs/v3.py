"""Zarr format 3 chunk encoding and decoding: the codec chain.

A v3 array lists its ``codecs`` in ``zarr.json``: zero or more *array -> array* codecs
(``transpose``), exactly one *array -> bytes* codec (``bytes``, ``vlen-utf8`` or
``sharding_indexed``), then zero or more *bytes -> bytes* codecs (``blosc``, ``gzip``,
``zstd``, ``crc32c``). Encoding runs the list forwards, decoding backwards.

:class:`ChunkCodecV3` has exactly the interface of
:class:`~chunkstore.codecs.v2.ChunkCodecV2` (``encode``, ``decode(data, out=None, *, key,
store, writable)``, ``nbytes``, ``nitems``, ``filters``, ``dtype``, ``chunk_shape``,
``order``), so the array layer can drive either.

Byte order: ``dtype`` is always native-endian. The ``bytes`` codec's ``endian`` says how
elements are stored; decoding swaps bytes in place when they differ, so decoded arrays (and
``ArrayMetadataV3.fill_bytes()``) are native-endian.

Layout: the chunk's elements are stored in C order of the array after the ``transpose``
codecs. ``order`` is ``"C"`` when the transposes compose to the identity, ``"F"`` when they
compose to a full reversal of the axes (then the stored bytes are the chunk in Fortran order
and decode can still go straight into the caller's buffer); for any other permutation
``order`` is ``"C"`` and ``filters`` is truthy, and decode transposes into a C-ordered chunk.

Every decoding failure (codec error, wrong size, crc32c ``checksum mismatch``, corrupt shard
index of a nested shard...) raises :class:`~chunkstore.errors.ChunkDecodeError` naming the
chunk key and the store. Invalid codec configuration raises ``ValueError`` (the metadata layer
turns it into a ``MetadataError`` naming the ``zarr.json`` key).
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any, Mapping, Sequence

import numcodecs
import numpy as np

from chunkstore.codecs.common import (ChunkCodecBase, blosc_decoded_size, decode_checked,
                                      zstd_decoded_size)

__all__ = [
    "ChunkCodecV3",
    "parse_codecs",
    "normalize_codecs",
    "codec_chain_info",
    "BytesCodec",
    "TransposeCodec",
    "VLenUTF8Codec",
    "BloscCodec",
    "GzipCodec",
    "ZstdCodec",
    "Crc32cCodec",
    "CODEC_NAMES",
]

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


def _as_u8(buf: Any) -> np.ndarray:
    """A flat uint8 view of the bytes of ``buf`` (bytes, bytearray, memoryview, ndarray)."""
    if isinstance(buf, np.ndarray):
        if buf.dtype.hasobject:
            raise TypeError("expected raw bytes, got an object array")
        if not (buf.flags.c_contiguous or buf.flags.f_contiguous):
            buf = np.ascontiguousarray(buf)
        flat = buf.reshape(-1, order="A")
        return flat if flat.dtype == np.uint8 else flat.view(np.uint8)
    return np.frombuffer(buf, dtype=np.uint8)


def _as_buffer(buf: Any) -> Any:
    """Something numcodecs / crc32c accept without copying (bytes or a contiguous array)."""
    if isinstance(buf, (bytes, bytearray)):
        return buf
    if isinstance(buf, np.ndarray):
        return _as_u8(buf)
    return np.frombuffer(buf, dtype=np.uint8)


def _to_bytes(buf: Any) -> bytes:
    if type(buf) is bytes:
        return buf
    if isinstance(buf, np.ndarray):
        return buf.tobytes(order="A")
    return bytes(memoryview(buf))


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


# --------------------------------------------------------------------------------------------
# decoded-size readers (frame headers), so decompression can go straight into ``out``
# --------------------------------------------------------------------------------------------


_blosc_size = blosc_decoded_size  # frame-header readers shared with the v2 chain
_zstd_size = zstd_decoded_size


# --------------------------------------------------------------------------------------------
# codecs
# --------------------------------------------------------------------------------------------


class _Codec:
    name = ""
    kind = ""  # "aa", "ab" or "bb"

    def to_dict(self) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        conf = self.to_dict().get("configuration")
        return f"{type(self).__name__}({conf!r})" if conf else f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_dict() == self.to_dict()

    __hash__ = None  # type: ignore[assignment]


class TransposeCodec(_Codec):
    """``transpose``: permute the axes; encoded[i] axis = input axis ``order[i]``."""

    name = "transpose"
    kind = "aa"

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


class BytesCodec(_Codec):
    """``bytes``: elements in C order as raw bytes, little- or big-endian."""

    name = "bytes"
    kind = "ab"

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


class VLenUTF8Codec(_Codec):
    """``vlen-utf8``: variable-length UTF-8 strings (the ``string`` data type)."""

    name = "vlen-utf8"
    kind = "ab"

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


class _BytesBytes(_Codec):
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


_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
_BLOSC_CNAMES = ("lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib")


class BloscCodec(_BytesBytes):
    name = "blosc"
    size_reader = staticmethod(_blosc_size)

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
            shuffle = {v: k for k, v in _BLOSC_SHUFFLE.items()}.get(int(shuffle), shuffle)
        if shuffle not in _BLOSC_SHUFFLE:
            raise ValueError(
                f"codec 'blosc': shuffle must be 'noshuffle', 'shuffle' or 'bitshuffle', "
                f"got {shuffle!r}"
            )
        blocksize = _int(conf.get("blocksize", 0), "codec 'blosc' blocksize", 0)
        self.cname, self.clevel, self.shuffle = cname, clevel, shuffle
        self.typesize, self.blocksize = typesize, blocksize
        self.numcodec = numcodecs.Blosc(
            cname=cname, clevel=clevel, shuffle=_BLOSC_SHUFFLE[shuffle], blocksize=blocksize,
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


class GzipCodec(_BytesBytes):
    name = "gzip"

    def __init__(self, conf: Mapping) -> None:
        _check_keys(conf, ("level",), "gzip")
        self.level = _int(conf.get("level", 5), "codec 'gzip' level", 0, 9)
        self.numcodec = numcodecs.GZip(level=self.level)

    def to_dict(self) -> dict:
        return {"name": "gzip", "configuration": {"level": self.level}}

    def decode_into(self, buf: Any, dest: np.ndarray) -> None:  # pragma: no cover - unused
        np.copyto(dest, _as_u8(self.decode(buf)))


class ZstdCodec(_BytesBytes):
    name = "zstd"
    size_reader = staticmethod(_zstd_size)

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


class Crc32cCodec(_BytesBytes):
    """``crc32c``: appends the CRC32C of the data as 4 little-endian bytes."""

    name = "crc32c"

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


class NumcodecsBytesCodec(_BytesBytes):
    """A numcodecs compressor or checksum named ``numcodecs.<id>`` (zarr-python 3's
    wrappers), run as a bytes -> bytes codec."""

    def __init__(self, name: str, conf: Mapping) -> None:
        from chunkstore.codecs.numcodecs import BYTES_BYTES
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


CODEC_NAMES = ("transpose", "bytes", "vlen-utf8", "sharding_indexed",
               "blosc", "gzip", "zstd", "crc32c")

#: bytes -> bytes codecs that compress (what ``.info`` shows as the compressor)
_COMPRESSORS = ("blosc", "gzip", "zstd")


# --------------------------------------------------------------------------------------------
# parsing a codec list
# --------------------------------------------------------------------------------------------


def _codec_name(obj: Any, where: str) -> tuple[str, dict]:
    if isinstance(obj, str):
        return obj, {"name": obj}
    if isinstance(obj, _Codec):
        return obj.name, obj.to_dict()
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where} must be a codec object, got {obj!r}")
    name = obj.get("name")
    if not isinstance(name, str):
        raise ValueError(f"{where} has no string 'name': {dict(obj)!r}")
    extra = sorted(set(obj) - {"name", "configuration", "must_understand"})
    if extra:
        raise ValueError(f"codec {name!r}: unknown field(s) {', '.join(map(repr, extra))}")
    return name, dict(obj)


def parse_codecs(
    codecs: Sequence[Any],
    dtype: Any,
    chunk_shape: Sequence[int],
    fill_value: Any = None,
) -> tuple[list, _Codec, list]:
    """Parse and validate a ``codecs`` list for chunks of ``chunk_shape`` and ``dtype``.

    Returns ``(array_to_array, array_to_bytes, bytes_to_bytes)`` lists of codec objects.
    Raises ``ValueError`` naming the codec on an unknown codec, a misplaced one (array ->
    array after the array -> bytes codec, a missing or second array -> bytes codec...) or an
    invalid configuration.
    """
    dtype = np.dtype(dtype)
    shape = tuple(int(c) for c in chunk_shape)
    if isinstance(codecs, (str, bytes, Mapping)) or not isinstance(codecs, Sequence):
        raise ValueError(f"codecs must be a list of codec objects, got {codecs!r}")
    aa: list = []
    ab: Any = None
    bb: list = []
    default_typesize = None
    for i, obj in enumerate(codecs):
        name, doc = _codec_name(obj, f"codecs[{i}]")
        conf = _config(doc, name)
        if name == "transpose":
            if ab is not None:
                raise ValueError(
                    f"codec 'transpose' (codecs[{i}]) is an array -> array codec and must come "
                    f"before the array -> bytes codec {ab.name!r}"
                )
            _check_keys(conf, ("order",), name)
            if "order" not in conf:
                raise ValueError("codec 'transpose': missing configuration field 'order'")
            c = TransposeCodec(conf["order"], len(shape))
            shape = c.encoded_shape(shape)
            aa.append(c)
            continue
        if name in ("bytes", "vlen-utf8", "sharding_indexed"):
            if ab is not None:
                raise ValueError(
                    f"codec {name!r} (codecs[{i}]) is a second array -> bytes codec after "
                    f"{ab.name!r}"
                )
            if name == "bytes":
                _check_keys(conf, ("endian",), name)
                ab = BytesCodec(conf.get("endian"), dtype)
                default_typesize = dtype.itemsize
            elif name == "vlen-utf8":
                _check_keys(conf, (), name)
                ab = VLenUTF8Codec(dtype)
                default_typesize = 1
            else:
                from chunkstore.codecs.sharding import ShardingCodec

                ab = ShardingCodec(conf, dtype, shape, fill_value)
                default_typesize = 1
            continue
        if name in ("blosc", "gzip", "zstd", "crc32c"):
            if ab is None:
                raise ValueError(
                    f"codec {name!r} (codecs[{i}]) is a bytes -> bytes codec and must come "
                    f"after the array -> bytes codec"
                )
            if name == "blosc":
                bb.append(BloscCodec(conf, default_typesize))
            elif name == "gzip":
                bb.append(GzipCodec(conf))
            elif name == "zstd":
                bb.append(ZstdCodec(conf))
            else:
                bb.append(Crc32cCodec(conf))
            continue
        if name.startswith("numcodecs.") and ab is not None:
            bb.append(NumcodecsBytesCodec(name, conf))  # zarr-python 3's numcodecs wrappers
            continue
        raise ValueError(f"unknown codec {name!r}")
    if ab is None:
        raise ValueError("codecs has no array -> bytes codec (e.g. 'bytes')")
    return aa, ab, bb


def normalize_codecs(
    codecs: Sequence[Any], dtype: Any, chunk_shape: Sequence[int], fill_value: Any = None
) -> list[dict]:
    """Validate ``codecs`` and return them as the JSON zarr-python 3 writes (defaults filled in,
    e.g. blosc ``typesize``, sharding ``index_location``)."""
    aa, ab, bb = parse_codecs(codecs, dtype, chunk_shape, fill_value)
    return [c.to_dict() for c in (*aa, ab, *bb)]


def _compose(aa: Sequence[TransposeCodec], ndim: int) -> tuple[int, ...]:
    """The permutation ``p`` with ``encoded = chunk.transpose(p)`` for the transposes ``aa``."""
    perm = tuple(range(ndim))
    for c in aa:
        perm = tuple(perm[o] for o in c.order)
    return perm


def _order_of(perm: tuple[int, ...]) -> tuple[str, bool]:
    """(order, general): "C" for the identity, "F" for a full reversal, else ("C", True)."""
    n = len(perm)
    if perm == tuple(range(n)):
        return "C", False
    if perm == tuple(range(n - 1, -1, -1)):
        return "F", False
    return "C", True


def codec_chain_info(
    codecs: Sequence[Any], dtype: Any, chunk_shape: Sequence[int], fill_value: Any = None
) -> dict:
    """Facts about a codec list the metadata layer exposes.

    Returns a dict with ``order`` (``"C"``/``"F"``, see the module docstring),
    ``compressor`` (a numcodecs codec: the first compressing bytes -> bytes codec, or None),
    ``sharding`` (the ShardingCodec, or None), ``permutation`` (the composed transpose).
    """
    aa, ab, bb = parse_codecs(codecs, dtype, chunk_shape, fill_value)
    perm = _compose(aa, len(tuple(chunk_shape)))
    order, _ = _order_of(perm)
    comp = next((c.numcodec for c in bb if c.name in _COMPRESSORS), None)
    sharding = ab if ab.name == "sharding_indexed" else None
    return {"order": order, "compressor": comp, "sharding": sharding, "permutation": perm,
            "array_to_array": aa, "array_to_bytes": ab, "bytes_to_bytes": bb}


# --------------------------------------------------------------------------------------------
# the chunk codec
# --------------------------------------------------------------------------------------------


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


class ChunkCodecV3(ChunkCodecBase):
    """Encode and decode the chunks of one Zarr v3 array.

    ``ChunkCodecV3(meta)`` with an :class:`~chunkstore.metadata.v3.ArrayMetadataV3` (anything
    with ``dtype``, ``chunks``, ``codecs``, ``fill_value``), or
    ``ChunkCodecV3(dtype, chunk_shape, codecs, fill_value=None)``. ``from_metadata(meta)`` is
    the same as the first form.

    The chunk shape is the codec chain's input shape: for an array whose codecs are
    ``[sharding_indexed]`` it is the shard shape and :meth:`decode` returns a whole shard. To
    read inner chunks one by one, build the codec from the *inner* codecs
    (``ArrayMetadataV3.inner_chunks`` / ``inner_codecs``) and read through
    :class:`~chunkstore.format.sharded_view.ShardedStoreView`.

    ``fill_value`` is only used by a ``sharding_indexed`` codec in the chain (missing inner
    chunks decode to it; inner chunks equal to it are not stored).
    """

    __slots__ = (
        "dtype", "chunk_shape", "order", "filters", "nitems", "nbytes", "fill_value", "codecs",
        "_aa", "_ab", "_bb", "_perm", "_inv", "_enc_shape", "_general", "_is_object",
        "_bytes", "_direct_reader", "fast_blosc", "fast_blosc_encode", "fast",
    )

    def __init__(
        self,
        dtype: Any,
        chunk_shape: Sequence[int] | None = None,
        codecs: Sequence[Any] | None = None,
        fill_value: Any = None,
    ) -> None:
        if chunk_shape is None and codecs is None and hasattr(dtype, "codecs"):
            meta = dtype
            dtype, chunk_shape, codecs, fill_value = (
                meta.dtype, meta.chunks, meta.codecs, meta.fill_value)
        if chunk_shape is None or codecs is None:
            raise TypeError("ChunkCodecV3 needs (meta) or (dtype, chunk_shape, codecs)")
        self.dtype = _native(dtype)
        self.chunk_shape = tuple(int(c) for c in chunk_shape)
        self.fill_value = fill_value
        self._is_object = self.dtype.hasobject
        self._aa, self._ab, self._bb = parse_codecs(codecs, self.dtype, self.chunk_shape,
                                                    fill_value)
        self.codecs = [c.to_dict() for c in (*self._aa, self._ab, *self._bb)]
        self._perm = _compose(self._aa, len(self.chunk_shape))
        self._inv = tuple(int(i) for i in np.argsort(self._perm)) if self._perm else ()
        self._enc_shape = tuple(self.chunk_shape[p] for p in self._perm)
        self.order, self._general = _order_of(self._perm)
        self._bytes = self._ab if isinstance(self._ab, BytesCodec) else None
        # "filters": why decode cannot go straight into the caller's buffer (empty: it can)
        why = []
        if self._general:
            why.append("transpose")
        if self._bytes is None:
            why.append(self._ab.name)
        self.filters = tuple(why)
        self.nitems = math.prod(self.chunk_shape)
        self.nbytes = self.nitems * self.dtype.itemsize
        # the innermost bytes -> bytes codec can decompress straight into a buffer if it says
        # its decoded size up front (blosc, zstd)
        self._direct_reader = (
            self._bb[0] if self._bytes is not None and self._bb
            and self._bb[0].size_reader is not None else None
        )
        # bytes (native endian) + blosc and nothing else: the stored bytes are a plain Blosc
        # frame of the chunk in order, which the Array's GIL-free batch kernel decodes.
        from chunkstore.codecs.v2 import blosc_encode_params, blosc_symbols
        self.fast_blosc = (
            blosc_symbols() if (self._bytes is not None and not self._bytes.swap
                                and not self._general and not self._is_object
                                and len(self._bb) == 1 and self._bb[0].name == "blosc"
                                and self.nbytes > 0) else None)
        blosc = self._bb[0] if self.fast_blosc is not None else None
        self.fast_blosc_encode = (
            blosc_encode_params(blosc.cname, blosc.clevel, _BLOSC_SHUFFLE[blosc.shuffle],
                                blosc.typesize, blosc.blocksize) if blosc is not None else None)
        # The GIL-free batch path (chunkstore.codecs.fastpath): bytes (native order), then
        # one of blosc, zstd or gzip, or nothing.
        from chunkstore.codecs import fastpath
        self.fast = (fastpath.for_v3(tuple(self._bb), self.nbytes, self.fast_blosc,
                                     self.fast_blosc_encode)
                     if (self._bytes is not None and not self._bytes.swap and not self._general
                         and not self._is_object) else None)

    @classmethod
    def from_metadata(cls, meta: Any) -> "ChunkCodecV3":
        """Build the codec for an ``ArrayMetadataV3`` (anything with the same attributes)."""
        return cls(meta.dtype, meta.chunks, meta.codecs, meta.fill_value)

    def __repr__(self) -> str:
        return (f"ChunkCodecV3(dtype={self.dtype.str!r}, chunk_shape={self.chunk_shape}, "
                f"codecs={self.codecs!r})")

    @property
    def compressor(self) -> Any:
        """The first compressing bytes -> bytes codec as a numcodecs codec (or None)."""
        return next((c.numcodec for c in self._bb if c.name in _COMPRESSORS), None)

    @property
    def sharding(self) -> Any:
        """The chain's ShardingCodec, or None."""
        return self._ab if self._ab.name == "sharding_indexed" else None

    # ---------------------------------------------------------------------------- encoding

    def encode(self, chunk: np.ndarray) -> bytes:
        """Encode a full chunk (shape ``chunk_shape``) to the bytes to store.

        A dtype other than the array's is cast (``same_kind``; any byte order is fine).
        """
        chunk = np.asarray(chunk)
        if chunk.shape != self.chunk_shape:
            raise ValueError(f"chunk has shape {chunk.shape}, expected {self.chunk_shape}")
        if chunk.dtype != self.dtype:
            if self._is_object:
                chunk = chunk.astype(object)
            else:
                chunk = chunk.astype(self.dtype, casting="same_kind")
        arr = chunk.transpose(self._perm) if self._aa else chunk
        buf = self._ab.encode(arr)
        for c in self._bb:
            buf = c.encode(buf)
        return _to_bytes(buf)

    # ---------------------------------------------------------------------------- decoding

    def _shaped(self, flat: np.ndarray) -> np.ndarray:
        """Chunk-shaped view of decoded elements (flat, native dtype, stored order)."""
        a = flat.reshape(self._enc_shape)
        return a.transpose(self._inv) if self._aa else a

    def _out_target(self, out: np.ndarray) -> np.ndarray | None:
        """Flat uint8 view of ``out``'s memory if the stored bytes can go straight in."""
        if self._general:
            return None
        if out.shape == self.chunk_shape and out.ndim > 1:
            ok = out.flags.c_contiguous if self.order == "C" else out.flags.f_contiguous
            if not ok:
                return None
        flat = out.reshape(-1, order="A")
        return flat.view(np.uint8) if self.dtype.itemsize else flat

    def _deliver(self, out: np.ndarray | None, chunk: np.ndarray, writable: bool) -> np.ndarray:
        """Return ``chunk`` (shape chunk_shape) via ``out`` as documented."""
        if out is None:
            if self._general and not self._is_object:
                return np.ascontiguousarray(chunk)  # a C-ordered chunk, always writable
            if writable and not chunk.flags.writeable:
                return chunk.copy(order="K")
            return chunk
        if out.shape == self.chunk_shape:
            out[...] = chunk
            return out
        # raw memory: the chunk in ``order`` layout
        flat = out.reshape(-1, order="A")
        view = flat.reshape(self.chunk_shape, order=self.order)
        view[...] = chunk
        return view

    def _declared_size(self, data: Any) -> int | None:
        if self._bytes is None or len(self._bb) > 1:
            return None
        if not self._bb:
            return _as_u8(_as_buffer(data)).size
        reader = self._bb[0].size_reader
        return None if reader is None else reader(_as_buffer(data))

    def _bb_decode_outer(self, data: Any) -> Any:
        buf = data
        for c in reversed(self._bb[1:]):
            buf = c.decode(buf)
        return buf

    def _decode(self, data: Any, out: np.ndarray | None, writable: bool) -> np.ndarray:
        if self._bytes is None:
            # vlen-utf8 or sharding: decode everything, then place
            buf = data
            for c in reversed(self._bb):
                buf = c.decode(buf)
            enc = self._ab.decode(buf, self._enc_shape, self.dtype)
            chunk = enc.transpose(self._inv) if self._aa else enc
            return self._deliver(out, chunk, writable)

        swap = self._bytes.swap
        buf = self._bb_decode_outer(data)
        target = self._out_target(out) if out is not None else None
        reader = self._direct_reader
        raw = None
        if reader is not None:
            size = reader.size_reader(buf)
            if size is not None:
                if size != self.nbytes:
                    raise ValueError(
                        f"decompressed chunk has {size} bytes, expected {self.nbytes}")
                dest = target if target is not None else np.empty(self.nbytes, np.uint8)
                reader.decode_into(buf, dest)
                raw = dest
        if raw is None:
            if self._bb:
                buf = self._bb[0].decode(buf)
            raw = _as_u8(buf)
            if raw.size != self.nbytes:
                stage = "decompressed chunk" if self._bb else "chunk data"
                raise ValueError(f"{stage} has {raw.size} bytes, expected {self.nbytes}")
            if target is not None:
                np.copyto(target, raw)
                raw = target
        elems = raw.view(self.dtype) if self.dtype.itemsize else raw
        if swap:
            if elems.flags.writeable:
                elems.byteswap(inplace=True)
            else:
                elems = elems.byteswap()
        if target is not None and raw is target:
            if out.shape == self.chunk_shape:
                return out
            return out.reshape(-1, order="A").reshape(self.chunk_shape, order=self.order)
        return self._deliver(out, self._shaped(elems), writable)
