"""The Zarr v3 ``sharding_indexed`` codec, ``ShardingCodec``: zarr-python 3's public class (also
importable from ``chunkstore.codecs.sharding_indexed``) and the codec that encodes and
decodes a whole shard's index and inner chunks.

A *shard* is one stored object holding a grid of *inner chunks* (``chunk_shape`` in the codec
configuration; the shard shape must be a multiple of it), each encoded with the inner
``codecs``, plus an *index*: a uint64 array of shape ``chunks_per_shard + [2]`` holding
``(offset, nbytes)`` per inner chunk in C order of the grid, encoded with ``index_codecs``
(``bytes`` + ``crc32c`` normally; they must give a fixed size), at the ``start`` or ``end``
(default) of the shard. An inner chunk whose offset and nbytes are both 2**64-1 is absent
(reads as the fill value). Shards at the array edge still have the full shard shape.

Built by its constructor (``ShardingCodec(chunk_shape=..., codecs=..., index_codecs=...,
index_location=...)``) it is a value; built by ``from_config`` for a chain (or, the older
internal form, ``ShardingCodec(conf, dtype, shard_shape, fill_value=None)``) it is the
array -> bytes codec inside a :class:`~chunkstore.codecs.v3.ChunkCodecV3` chain (it registers
itself in :mod:`chunkstore.codecs.registry`; the chain knows no codec by name): it encodes
or decodes a whole shard (this is also what makes nested sharding decode). Reading and
writing single inner chunks of stored shards is
:class:`chunkstore.format.sharded_view.ShardedStoreView`'s job.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkstore.codecs._public import Codec, named_configuration
from chunkstore.codecs.chain_codecs import ChainContext, _as_u8, _check_keys, _int, _native
from chunkstore.codecs.registry import register
from chunkstore.codecs.v3 import ChunkCodecV3
from chunkstore.errors import ChunkDecodeError

if TYPE_CHECKING:
    from chunkstore.codecs.bytes import BytesCodec
    from chunkstore.codecs.crc32c_ import Crc32cCodec

__all__ = ["ShardingCodec", "ShardingCodecIndexLocation", "MISSING"]

#: offset and nbytes of an absent inner chunk
MISSING = 2**64 - 1

_INDEX_CODECS_FIXED = ("bytes", "crc32c", "transpose")


class ShardingCodecIndexLocation(str, Enum):
    """Where a shard's index is: at its ``start`` or ``end``."""

    start = "start"
    end = "end"


def _default_codecs() -> tuple[BytesCodec]:
    from chunkstore.codecs.bytes import BytesCodec
    return (BytesCodec(),)


def _default_index_codecs() -> tuple[BytesCodec, Crc32cCodec]:
    from chunkstore.codecs.bytes import BytesCodec
    from chunkstore.codecs.crc32c_ import Crc32cCodec
    return (BytesCodec(), Crc32cCodec())


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{what} must be a list of integers, got {value!r}")
    return tuple(_int(v, f"{what} entry", 1) for v in value)


def _all_fill(a: np.ndarray, fill: Any) -> bool:
    """True if every element of ``a`` is the fill value (bytewise; any NaN matches NaN)."""
    if a.dtype.hasobject:
        return bool(np.all(a == fill)) if fill is not None else False
    f = np.asarray(fill if fill is not None else 0, dtype=a.dtype)
    if a.dtype.kind in "fc":
        parts_a = [a.real, a.imag] if a.dtype.kind == "c" else [a]
        parts_f = [f.real, f.imag] if a.dtype.kind == "c" else [f]
        for pa, pf in zip(parts_a, parts_f):
            if np.isnan(pf):
                if not np.isnan(pa).all():
                    return False
            else:
                ui = np.dtype(f"u{pa.dtype.itemsize}")
                pa_c = np.ascontiguousarray(pa)
                if not (pa_c.view(ui) == np.ascontiguousarray(pf).view(ui)).all():
                    return False
        return True
    ui = np.dtype(f"V{a.dtype.itemsize}") if a.dtype.kind not in "biu" else a.dtype
    return bool((np.ascontiguousarray(a).view(ui) == f.reshape(1).view(ui)[0]).all())


@register
class ShardingCodec(Codec):
    """``sharding_indexed``: an array -> bytes codec storing a grid of inner chunks.

    zarr-python 3's keyword arguments make the value users name; a codec of a chain also
    knows its data type, its shard shape (as the codec sees it, after any transpose codecs
    before it) and the fill value, and holds the inner chunks' and the index's chains.
    """

    name = "sharding_indexed"
    kind = "array_bytes"
    typesize = 1  # of the bytes it writes: a shard is not a run of items
    _fields = ("chunk_shape", "codecs", "index_codecs", "index_location")

    def __init__(self, *config: Any, chunk_shape: Iterable[int] | None = None,
                 codecs: Iterable[Any] | None = None, index_codecs: Iterable[Any] | None = None,
                 index_location: ShardingCodecIndexLocation | str = "end") -> None:
        if config:  # the internal form: (conf, dtype, shard_shape[, fill_value])
            self._bind(*config)
            return
        if chunk_shape is None:
            raise TypeError("ShardingCodec() missing required keyword argument: 'chunk_shape'")
        try:
            chunk_shape = tuple(int(c) for c in chunk_shape)
        except (TypeError, ValueError):
            raise ValueError(f"ShardingCodec chunk_shape must be a sequence of integers, "
                             f"got {chunk_shape!r}") from None
        if isinstance(index_location, ShardingCodecIndexLocation):
            index_location = index_location.value
        if index_location not in ("start", "end"):
            raise ValueError(f"ShardingCodec index_location must be 'start' or 'end', "
                             f"got {index_location!r}")
        self.chunk_shape = chunk_shape
        self.codecs = tuple(_default_codecs() if codecs is None else codecs)
        self.index_codecs = tuple(_default_index_codecs() if index_codecs is None
                                  else index_codecs)
        self.index_location = index_location

    @classmethod
    def from_dict(cls, data: Mapping) -> ShardingCodec:
        """The codec of its JSON document."""
        return cls(**named_configuration(data, "sharding_indexed"))

    @classmethod
    def from_config(cls, conf: dict, ctx: ChainContext) -> "ShardingCodec":
        """The codec of a v3 chain for shards of ``ctx.shape``."""
        return cls(conf, ctx.dtype, ctx.shape, ctx.fill_value)

    def _bind(self, conf: Mapping, dtype: Any, shard_shape: Sequence[int],
              fill_value: Any = None) -> None:
        _check_keys(conf, ("chunk_shape", "codecs", "index_codecs", "index_location"),
                    "sharding_indexed")
        if "chunk_shape" not in conf:
            raise ValueError("codec 'sharding_indexed': missing configuration field "
                             "'chunk_shape'")
        self.dtype = _native(dtype)
        self.shard_shape = tuple(int(s) for s in shard_shape)
        self.chunk_shape = _ints(conf["chunk_shape"], "codec 'sharding_indexed' chunk_shape")
        if len(self.chunk_shape) != len(self.shard_shape):
            raise ValueError(
                f"codec 'sharding_indexed': chunk_shape {list(self.chunk_shape)} has "
                f"{len(self.chunk_shape)} dimensions, the shard {list(self.shard_shape)} has "
                f"{len(self.shard_shape)}")
        for s, c in zip(self.shard_shape, self.chunk_shape):
            if s % c:
                raise ValueError(
                    f"codec 'sharding_indexed': the shard shape {list(self.shard_shape)} is "
                    f"not a multiple of the inner chunk_shape {list(self.chunk_shape)}")
        self.chunks_per_shard = tuple(s // c for s, c in zip(self.shard_shape, self.chunk_shape))
        self.nchunks = math.prod(self.chunks_per_shard)
        loc = conf.get("index_location", "end")
        if loc not in ("start", "end"):
            raise ValueError(f"codec 'sharding_indexed': index_location must be 'start' or "
                             f"'end', got {loc!r}")
        self.index_location = loc
        self.fill_value = fill_value
        codecs = conf.get("codecs")
        if codecs is None:
            codecs = [{"name": "bytes", "configuration": {"endian": "little"}}]
        self.inner = ChunkCodecV3(self.dtype, self.chunk_shape, codecs, fill_value)
        index_codecs = conf.get("index_codecs")
        if index_codecs is None:
            index_codecs = [{"name": "bytes", "configuration": {"endian": "little"}},
                            {"name": "crc32c"}]
        for i, c in enumerate(index_codecs if isinstance(index_codecs, list) else []):
            name = c.get("name") if isinstance(c, Mapping) else c
            if name not in _INDEX_CODECS_FIXED:
                raise ValueError(
                    f"codec 'sharding_indexed': index_codecs[{i}] {name!r} is not allowed "
                    f"(the index must have a fixed size: only bytes, crc32c, transpose)")
        self.index_codec = ChunkCodecV3(
            np.uint64, self.chunks_per_shard + (2,), index_codecs)
        # the public fields: the chains' JSON documents
        self.codecs = tuple(self.inner.codecs)
        self.index_codecs = tuple(self.index_codec.codecs)
        self.index_nbytes = 16 * self.nchunks + 4 * sum(
            1 for c in self.index_codec._bb if c.name == "crc32c")
        # The largest plausible encoded inner chunk (a corrupt index without a checksum must
        # not make a reader request terabytes): raw size doubled plus generous per-codec
        # overhead. Unbounded for strings and nested shards.
        inner = self.inner
        if inner.dtype.hasobject or inner.sharding is not None:
            self.max_chunk_nbytes = None
        else:
            self.max_chunk_nbytes = 2 * inner.nbytes + (1 << 16) * (1 + len(inner._bb))

    def to_dict(self) -> dict:
        """The JSON document (inner codecs that are JSON documents are written as given)."""
        def doc(c: Any) -> dict:
            return c.to_dict() if hasattr(c, "to_dict") else dict(c)
        return {"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(self.chunk_shape), "codecs": [doc(c) for c in self.codecs],
            "index_codecs": [doc(c) for c in self.index_codecs],
            "index_location": self.index_location}}

    # ------------------------------------------------------------------------ the index

    def empty_index(self) -> np.ndarray:
        """An index (``(nchunks, 2)`` uint64, C order of the grid) with every chunk absent."""
        return np.full((self.nchunks, 2), MISSING, dtype=np.uint64)

    def decode_index(self, index_bytes: Any, shard_nbytes: int | None = None) -> np.ndarray:
        """Decode the index bytes to ``(nchunks, 2)`` uint64 (offset, nbytes) rows.

        Raises ValueError for a wrong length, a checksum mismatch, an entry with only one of
        offset/nbytes missing, or (when ``shard_nbytes`` is known) a range outside the shard.
        """
        n = len(index_bytes)
        if n != self.index_nbytes:
            raise ValueError(f"shard index has {n} bytes, expected {self.index_nbytes} "
                             f"(truncated or corrupt shard)")
        try:
            idx = self.index_codec.decode(index_bytes, writable=True)
        except ChunkDecodeError as e:
            raise ValueError(str(e.__cause__ or e)) from e
        idx = np.ascontiguousarray(idx).reshape(self.nchunks, 2)
        off, nb = idx[:, 0], idx[:, 1]
        miss_o, miss_n = off == MISSING, nb == MISSING
        if (miss_o != miss_n).any():
            raise ValueError("corrupt shard index: an entry has only one of offset/nbytes "
                             "set to the missing marker")
        present = ~miss_o
        if present.any():
            big = int(nb[present].max())
            if big >= 2**62 or int(off[present].max()) >= 2**62:
                raise ValueError("corrupt shard index: offsets or sizes beyond 2**62")
            if self.max_chunk_nbytes is not None and big > self.max_chunk_nbytes:
                raise ValueError(
                    f"corrupt shard index: an inner chunk of {big} bytes, at most "
                    f"{self.max_chunk_nbytes} are possible")
        if shard_nbytes is not None and not present.any() and shard_nbytes != self.index_nbytes:
            # (no writer stores a shard of no chunks: chunkstore and zarr-python delete it; a
            # body cut short, unchecked, put chunk bytes where the index is read, all-0xFF
            # data read as "every chunk missing", and a partial write then stored the shard
            # with the fill value for the rest of its chunks)
            raise ValueError(f"corrupt shard index: no chunk is present, but the "
                             f"{shard_nbytes}-byte shard holds "
                             f"{shard_nbytes - self.index_nbytes} bytes besides the index")
        if shard_nbytes is not None and present.any():
            # chunks lie in the data region, never over the index (a shard that lost or
            # gained bytes in the middle shifts the index's chunks into it)
            lo, hi = ((0, shard_nbytes - self.index_nbytes) if self.index_location == "end"
                      else (self.index_nbytes, shard_nbytes))
            end = int((off[present] + nb[present]).max())  # both < 2**62: no overflow
            start = int(off[present].min())
            if end > hi or start < lo:
                raise ValueError(f"corrupt shard index: a chunk ends at byte {end} or starts "
                                 f"at byte {start}, outside the data (bytes {lo}..{hi}) of "
                                 f"the {shard_nbytes}-byte shard")
        return idx

    def encode_index(self, index: np.ndarray) -> bytes:
        """The stored bytes of an index (``(nchunks, 2)`` uint64 rows)."""
        return self.index_codec.encode(
            np.asarray(index, dtype=np.uint64).reshape(self.chunks_per_shard + (2,)))

    def split(self, shard: Any) -> tuple[np.ndarray, memoryview]:
        """(index, shard bytes as a memoryview) of a whole stored shard."""
        mv = memoryview(shard).cast("B") if not isinstance(shard, memoryview) else shard.cast("B")
        if len(mv) < self.index_nbytes:
            raise ValueError(f"shard has {len(mv)} bytes, less than its index "
                             f"({self.index_nbytes} bytes)")
        if self.index_location == "end":
            raw = mv[len(mv) - self.index_nbytes:]
        else:
            raw = mv[: self.index_nbytes]
        return self.decode_index(raw, len(mv)), mv

    def assemble(self, chunks: Sequence[Any]) -> bytes:
        """A shard from encoded inner chunks (C order of the grid; None = absent).

        Returns ``b""`` if every chunk is absent (the caller deletes the shard).
        """
        index = self.empty_index()
        parts = []
        pos = self.index_nbytes if self.index_location == "start" else 0
        for i, c in enumerate(chunks):
            if c is None:
                continue
            n = len(c)
            index[i] = (pos, n)
            parts.append(c)
            pos += n
        if not parts:
            return b""
        ib = self.encode_index(index)
        if self.index_location == "start":
            return b"".join([ib, *parts])
        return b"".join([*parts, ib])

    # ------------------------------------------------------------------------ as a codec

    def _slices(self, i: int) -> tuple[slice, ...]:
        pos = np.unravel_index(i, self.chunks_per_shard) if self.chunks_per_shard else ()
        return tuple(slice(int(p) * c, (int(p) + 1) * c) for p, c in zip(pos, self.chunk_shape))

    def encode(self, arr: np.ndarray) -> bytes:
        """Encode a whole shard; inner chunks all equal to the fill value are not stored."""
        chunks: list = []
        for i in range(self.nchunks):
            sub = arr[self._slices(i)]
            if _all_fill(sub, self.fill_value):
                chunks.append(None)
            else:
                chunks.append(self.inner.encode(sub))
        out = self.assemble(chunks)
        if not out:  # every inner chunk is fill: a shard with only an index
            ib = self.encode_index(self.empty_index())
            return ib
        return out

    def decode(self, buf: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Decode a whole shard to an array of the shard shape (absent chunks = fill)."""
        index, mv = self.split(_as_u8(buf).data if not isinstance(buf, bytes) else buf)
        out = np.empty(self.shard_shape, dtype=self.dtype)
        fill = self.fill_value
        for i in range(self.nchunks):
            off, nb = (int(x) for x in index[i])
            sl = self._slices(i)
            if off == MISSING:
                out[sl] = fill if fill is not None else 0
                continue
            try:
                out[sl] = self.inner.decode(mv[off: off + nb], writable=False)
            except ChunkDecodeError as e:
                raise ValueError(f"inner chunk {i} of the shard: {e.__cause__ or e}") from e
        return out
