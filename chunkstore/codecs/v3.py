"""Zarr format 3 chunk encoding and decoding: the codec chain.

A v3 array lists its ``codecs`` in ``zarr.json``: zero or more *array -> array* codecs
(``transpose``), exactly one *array -> bytes* codec (``bytes``, ``vlen-utf8`` or
``sharding_indexed``), then zero or more *bytes -> bytes* codecs (``blosc``, ``gzip``,
``zstd``, ``crc32c``). Encoding runs the list forwards, decoding backwards. The codecs are
looked up by name in :mod:`chunkstore.codecs.registry`; each class lives in its codec's own
module (:mod:`chunkstore.codecs.blosc`, ...), on the base and helpers of
:mod:`chunkstore.codecs.chain_codecs`.

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

import json
import math
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from chunkstore.codecs import registry
from chunkstore.forksafe import fork_safe
from chunkstore.codecs._public import Codec
# The codec classes, each in its own module, re-exported here, where they always were; and
# the helpers other modules reach through this module.
from chunkstore.codecs.blosc import SHUFFLES, BloscCodec, blosc_encode_params, blosc_symbols
from chunkstore.codecs.bytes import BytesCodec
from chunkstore.codecs.chain_codecs import (  # noqa: F401
    ChainContext, NumcodecsBytesCodec, _as_buffer, _as_u8, _config, _native)
from chunkstore.codecs.common import ChunkCodecBase, out_target
from chunkstore.codecs.common import to_bytes as _to_bytes
from chunkstore.codecs.crc32c_ import Crc32cCodec
from chunkstore.codecs.gzip import GzipCodec
from chunkstore.codecs.transpose import TransposeCodec
from chunkstore.codecs.vlen_utf8 import VLenUTF8Codec
from chunkstore.codecs.zstd import ZstdCodec

__all__ = [
    "ChunkCodecV3",
    "parse_codecs",
    "normalize_codecs",
    "codec_chain_info",
    "normalize_codecs_with_info",
    "BytesCodec",
    "TransposeCodec",
    "VLenUTF8Codec",
    "BloscCodec",
    "GzipCodec",
    "ZstdCodec",
    "Crc32cCodec",
    "CODEC_NAMES",
]


CODEC_NAMES: tuple[str, ...]  # the registry's v3 names, looked up when asked (below)


def __getattr__(name: str) -> Any:
    if name == "CODEC_NAMES":  # (kept for old callers) the registry's v3 names
        return registry.v3_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------------------------
# parsing a codec list
# --------------------------------------------------------------------------------------------


def _codec_name(obj: Any, where: str) -> tuple[str, dict]:
    if isinstance(obj, str):
        return obj, {"name": obj}
    if isinstance(obj, Codec):
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
) -> tuple[list, Any, list]:  # (array -> bytes codecs share no base declaring encode/decode)
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
    ctx = ChainContext(dtype, shape, fill_value)
    for i, obj in enumerate(codecs):
        name, doc = _codec_name(obj, f"codecs[{i}]")
        conf = _config(doc, name)
        cls = registry.chain_codec(name)
        if cls is None:
            if name.startswith("numcodecs.") and ab is not None:
                # zarr-python 3's numcodecs wrappers
                bb.append(NumcodecsBytesCodec.from_config(conf, ctx, name))
                continue
            kind = registry.kind_of(name)
            if kind == "bytes_bytes":
                raise ValueError(f"codec {name!r} (codecs[{i}]) is a bytes -> bytes codec and "
                                 f"must come after the array -> bytes codec")
            if kind is not None:
                raise ValueError(f"codec {name!r} (codecs[{i}]) is not supported by "
                                 f"chunkstore (a numcodecs {kind.replace('_', ' -> ')} codec)")
            raise ValueError(f"unknown codec {name!r}{registry.did_you_mean(name)}")
        if cls.kind == "array_array":
            if ab is not None:
                raise ValueError(
                    f"codec {name!r} (codecs[{i}]) is an array -> array codec and must come "
                    f"before the array -> bytes codec {ab.name!r}"
                )
            c: Any = cls.from_config(conf, ctx)  # an array -> array codec
            ctx.shape, ctx.dtype = c.encoded_shape(ctx.shape), c.encoded_dtype(ctx.dtype)
            aa.append(c)
        elif cls.kind == "array_bytes":
            if ab is not None:
                raise ValueError(
                    f"codec {name!r} (codecs[{i}]) is a second array -> bytes codec after "
                    f"{ab.name!r}"
                )
            ab = cls.from_config(conf, ctx)
            ctx.typesize = ab.typesize
        else:
            if ab is None:
                raise ValueError(
                    f"codec {name!r} (codecs[{i}]) is a bytes -> bytes codec and must come "
                    f"after the array -> bytes codec"
                )
            bb.append(cls.from_config(conf, ctx))
    if ab is None:
        raise ValueError("codecs has no array -> bytes codec (e.g. 'bytes')")
    filters = [c.name for c in aa if not isinstance(c, TransposeCodec)]
    if filters and ab.name == "sharding_indexed":
        # (its inner chunks are read one by one through the inner chain, which a filter of
        # the whole shard, Delta's running difference say, is not part of)
        raise ValueError(f"codec {filters[0]!r} before 'sharding_indexed' is not supported: "
                         f"put it in the sharding codec's own codecs (as zarr-python 3's "
                         f"create_array(filters=..., shards=...) does)")
    return aa, ab, bb


def normalize_codecs(
    codecs: Sequence[Any], dtype: Any, chunk_shape: Sequence[int], fill_value: Any = None
) -> list[dict]:
    """Validate ``codecs`` and return them as the JSON zarr-python 3 writes (defaults filled in,
    e.g. blosc ``typesize``, sharding ``index_location``)."""
    aa, ab, bb = parse_codecs(codecs, dtype, chunk_shape, fill_value)
    return [c.to_dict() for c in (*aa, ab, *bb)]


def _compose(aa: Sequence[Any], ndim: int) -> tuple[int, ...]:
    """The permutation ``p`` with ``encoded = chunk.transpose(p)`` for the transposes among
    ``aa`` (a chain with numcodecs filters is run codec by codec: ChunkCodecV3)."""
    perm = tuple(range(ndim))
    for c in aa:
        if isinstance(c, TransposeCodec):
            perm = tuple(perm[o] for o in c.order)
    return perm


def _order_of(perm: tuple[int, ...]) -> tuple[Literal["C", "F"], bool]:
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
    return _chain_info(aa, ab, bb, len(tuple(chunk_shape)))


def normalize_codecs_with_info(
    codecs: Sequence[Any], dtype: Any, chunk_shape: Sequence[int], fill_value: Any = None
) -> tuple[list[dict], dict]:
    """:func:`normalize_codecs` and :func:`codec_chain_info` from one parse of the chain
    (an array's metadata needs both; the parse is most of the cost of reading it).

    Parses are remembered by content (the chain's JSON, the dtype, chunk shape and fill
    value): the arrays of a hierarchy mostly share one chain, and opening thousands of them
    from consolidated metadata then parses it once. The info and its codec objects are
    shared (immutable); the normalized list is the caller's own."""
    try:
        key = (json.dumps(codecs, sort_keys=True), np.dtype(dtype).str,
               tuple(chunk_shape), _fill_key(fill_value), type(fill_value))
    except (TypeError, ValueError):
        key = None   # not plain JSON (codec objects given by a caller): parsed each time
    hit = _PARSED.get(key) if key is not None else None
    if hit is None:
        aa, ab, bb = parse_codecs(codecs, dtype, chunk_shape, fill_value)
        hit = ([c.to_dict() for c in (*aa, ab, *bb)],
               _chain_info(aa, ab, bb, len(tuple(chunk_shape))))
        if key is not None:
            with _PARSED_LOCK:   # (iterating for the oldest key while another thread inserts)
                if len(_PARSED) >= _PARSED_MAX:
                    _PARSED.pop(next(iter(_PARSED)))
                _PARSED[key] = hit
    return _json_copy(hit[0]), hit[1]


def _fill_key(fill_value: Any) -> Any:
    """The fill value for a cache key: floats by their bytes (NaN payloads and -0.0 kept
    apart, as chunkstore compares fill values bytewise), the rest by repr."""
    if isinstance(fill_value, (float, complex, np.floating, np.complexfloating)):
        return np.asarray(fill_value).tobytes()
    return repr(fill_value)


def _json_copy(obj: Any) -> Any:
    """A copy of a JSON value (dicts and lists copied, the rest immutable)."""
    if isinstance(obj, dict):
        return {k: _json_copy(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_json_copy(v) for v in obj]
    return obj


# content key -> (normalized chain, chain info): see normalize_codecs_with_info
_PARSED: dict = {}
_PARSED_MAX = 256
_PARSED_LOCK: threading.Lock = fork_safe(sys.modules[__name__], "_PARSED_LOCK")


def _chain_info(aa: Sequence[Any], ab: Any, bb: Sequence[Any], ndim: int) -> dict:
    perm = _compose(aa, ndim)
    order, _ = _order_of(perm)
    comp = next((c.numcodec for c in bb if c.compresses), None)
    sharding = ab if ab.name == "sharding_indexed" else None
    return {"order": order, "compressor": comp, "sharding": sharding, "permutation": perm,
            "array_to_array": aa, "array_to_bytes": ab, "bytes_to_bytes": bb}


# --------------------------------------------------------------------------------------------
# the chunk codec
# --------------------------------------------------------------------------------------------



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
        "_steps",
        "_bytes", "_direct_reader", "fast_blosc", "fast_blosc_encode", "fast",
    )

    def __init__(
        self,
        dtype: Any,
        chunk_shape: Sequence[int] | None = None,
        codecs: Sequence[Any] | None = None,
        fill_value: Any = None,
        parsed: tuple | None = None,
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
        # parsed: the chain's codec objects as the metadata's own parse of these same codecs
        # made them (bound to this dtype, chunk shape and fill value; immutable): an array
        # opened parses its chain once, not twice
        self._aa, self._ab, self._bb = parsed if parsed is not None else parse_codecs(
            codecs, self.dtype, self.chunk_shape, fill_value)
        self.codecs = [c.to_dict() for c in (*self._aa, self._ab, *self._bb)]
        self._perm = _compose(self._aa, len(self.chunk_shape))
        self._inv = tuple(int(i) for i in np.argsort(self._perm)) if self._perm else ()
        self._enc_shape = tuple(self.chunk_shape[p] for p in self._perm)
        self.order, self._general = _order_of(self._perm)
        # numcodecs filters in the chain (Delta, FixedScaleOffset, ...): the chain is run
        # codec by codec (_steps: the data type and shape the array -> bytes codec gets),
        # none of the paths that take the stored bytes as the chunk's own
        self._steps: tuple[np.dtype, tuple[int, ...]] | None = None
        if any(not isinstance(c, TransposeCodec) for c in self._aa):
            dtype, shape = self.dtype, self.chunk_shape
            for c in self._aa:
                dtype, shape = c.encoded_dtype(dtype), c.encoded_shape(shape)
            self._steps = (dtype, shape)
            self._general = True
        self._bytes = self._ab if isinstance(self._ab, BytesCodec) else None
        # "filters": why decode cannot go straight into the caller's buffer (empty: it can)
        why = []
        if self._steps is not None:
            why.append("numcodecs filters")
        elif self._general:
            why.append("transpose")
        if self._bytes is None:
            why.append(self._ab.name)
        self.filters = tuple(why)
        self.nitems = math.prod(self.chunk_shape)
        self.nbytes = self.nitems * self.dtype.itemsize
        # the innermost bytes -> bytes codec can decompress straight into a buffer if it says
        # its decoded size up front (blosc, zstd)
        self._direct_reader = (
            self._bb[0] if self._bytes is not None and self._bb and self._steps is None
            and self._bb[0].size_reader is not None else None
        )
        # bytes (native endian) + blosc and nothing else: the stored bytes are a plain Blosc
        # frame of the chunk in order, which the Array's GIL-free batch kernel decodes.
        self.fast_blosc = (
            blosc_symbols() if (self._bytes is not None and not self._bytes.swap
                                and not self._general and not self._is_object
                                and len(self._bb) == 1 and self._bb[0].name == "blosc"
                                and self.nbytes > 0) else None)
        blosc = self._bb[0] if self.fast_blosc is not None else None
        self.fast_blosc_encode = (
            blosc_encode_params(blosc.cname, blosc.clevel, SHUFFLES[blosc.shuffle],
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
        """Build the codec for an ``ArrayMetadataV3`` (anything with the same attributes),
        from the codec objects its parse made where it kept them."""
        info = getattr(meta, "chain_info", None)
        parsed = None if not info else (list(info["array_to_array"]), info["array_to_bytes"],
                                        list(info["bytes_to_bytes"]))
        return cls(meta.dtype, meta.chunks, meta.codecs, meta.fill_value, parsed=parsed)

    def __repr__(self) -> str:
        return (f"ChunkCodecV3(dtype={self.dtype.str!r}, chunk_shape={self.chunk_shape}, "
                f"codecs={self.codecs!r})")

    @property
    def compressor(self) -> Any:
        """The first compressing bytes -> bytes codec as a numcodecs codec (or None)."""
        return next((c.numcodec for c in self._bb if c.compresses), None)

    @property
    def sharding(self) -> Any:
        """The chain's ShardingCodec, or None."""
        return self._ab if self._ab.name == "sharding_indexed" else None

    # ---------------------------------------------------------------------------- encoding

    def encode(self, chunk: np.ndarray) -> bytes:
        """Encode a full chunk (shape ``chunk_shape``) to the bytes to store.

        A dtype other than the array's is cast (``same_kind``; any byte order is fine).
        """
        chunk = self._as_chunk(chunk)
        if self._steps is not None:
            arr = chunk
            for c in self._aa:
                arr = c.encode_array(arr)
        else:
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
        return out_target(out, self.chunk_shape, self.order, self.dtype.itemsize)

    def _deliver(self, out: np.ndarray | None, chunk: np.ndarray, writable: bool) -> np.ndarray:
        """Return ``chunk`` (shape chunk_shape) via ``out`` as documented."""
        if out is None:
            if self._general and not self._is_object:
                # a C-ordered chunk; a copy where the stored bytes' view already is one (a
                # transpose that moves only dimensions of length 1) and is read-only
                chunk = np.ascontiguousarray(chunk)
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
        if self._bytes is None or len(self._bb) > 1 or self._steps is not None:
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
        if self._steps is not None:
            # numcodecs filters: each codec of the chain in turn, back to the chunk
            enc_dtype, enc_shape = self._steps
            buf = data
            for c in reversed(self._bb):
                buf = c.decode(buf)
            arr = self._ab.decode(buf, enc_shape, enc_dtype)
            for c in reversed(self._aa):
                arr = c.decode_array(arr)
            return self._deliver(out, arr, writable)
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
            assert out is not None  # target is a view of out
            if out.shape == self.chunk_shape:
                return out
            return out.reshape(-1, order="A").reshape(self.chunk_shape, order=self.order)
        return self._deliver(out, self._shaped(elems), writable)
