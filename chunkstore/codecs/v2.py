"""Zarr format 2 chunk encoding and decoding.

A v2 chunk is the chunk's elements laid out in the array's ``order`` (C or F) as raw bytes in
the array's dtype (byte order as stored), passed through the ``filters`` in order and then the
``compressor``. Object arrays need an object codec (VLenUTF8, VLenBytes, VLenArray, JSON,
Pickle, MsgPack...) as their first filter; it receives the object array itself.

:class:`ChunkCodecV2` implements both directions. Decoding failures of any kind (codec error,
wrong decoded size, filter failure) raise :class:`~chunkstore.errors.ChunkDecodeError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal, cast

import numpy as np
from numcodecs.abc import Codec

from chunkstore.codecs.blosc import blosc_encode_params, blosc_symbols
from chunkstore.codecs.common import (CastRange, ChunkCodecBase, as_u8,
                                      blosc_decoded_size, cast_range,
                                      check_vlen_header, decode_checked, filter_io,
                                      filter_misreads, out_target, stampless, to_bytes,
                                      zstd_decoded_size)

__all__ = ["ChunkCodecV2", "unstorable_fill"]

try:  # the codecs whose decode(buf, out=...) writes straight into ``out``
    from numcodecs.blosc import Blosc as _Blosc
except ImportError:  # pragma: no cover - numcodecs without Blosc
    _Blosc = None
try:
    from numcodecs.zstd import Zstd as _Zstd
except ImportError:  # pragma: no cover
    _Zstd = None
try:
    from numcodecs.lz4 import LZ4 as _LZ4
except ImportError:  # pragma: no cover
    _LZ4 = None


# --------------------------------------------------------------------------------------------
# Decoded-size checks for the codecs that decode straight into ``out``.
#
# numcodecs' Blosc, Zstd and LZ4 accept an ``out`` buffer *larger* than the decoded data and
# leave the rest untouched, so before decoding into the caller's buffer we read the decoded
# size from the frame header and insist it is exactly the chunk's size. Each function returns
# the decoded size, or None if the header does not say (the caller then decodes into a fresh
# buffer and checks the size afterwards). Raise ValueError for a malformed header.
# --------------------------------------------------------------------------------------------


_blosc_decoded_size = blosc_decoded_size
_zstd_decoded_size = zstd_decoded_size


def _lz4_decoded_size(data: memoryview) -> int | None:
    # numcodecs' LZ4 prefixes the block with the decoded size as a little-endian int32.
    if len(data) < 4:
        raise ValueError(f"lz4 data too short for a header ({len(data)} bytes)")
    return int.from_bytes(data[0:4], "little")


_SIZE_READERS: list[tuple[type, Any]] = [
    (cls, fn)
    for cls, fn in ((_Blosc, _blosc_decoded_size), (_Zstd, _zstd_decoded_size),
                    (_LZ4, _lz4_decoded_size))
    if cls is not None
]


def _size_reader(compressor: Codec | None) -> Callable[[Any], int | None] | None:
    if compressor is None:
        return None
    for cls, fn in _SIZE_READERS:
        if type(compressor) is cls:  # exact type: subclasses may change the format
            return fn
    return None


def misread_filter(filters: Sequence[Any], dtype: np.dtype) -> str | None:
    """Why filters would read chunks of dtype as other values (None: they would not): a
    numcodecs filter declaring the data type it reads (common.filter_io) views the chunk's
    bytes as it, so one of another byte order, size or kind than what it gets (the array's
    dtype, or the filter before's output) turns the values into others
    (FixedScaleOffset('>f8') over '<f8' data stored zeros; zarr-python 2 does the same);
    one of another integer kind of the same size and byte order reads the same bits back
    (common.filter_misreads). Checked up to the first filter whose output it cannot tell."""
    current = np.dtype(dtype)
    for i, f in enumerate(filters):
        io = filter_io(getattr(f, "codec_id", None), f.get_config()) \
            if hasattr(f, "get_config") else None
        if io is None:
            return None
        reads, out = io
        if filter_misreads(reads, current) or (reads.str[0] in "<>" and current.str[0] in "<>"
                                               and reads.str[0] != current.str[0]):
            return (f"filters[{i}] {f!r} reads the chunks as {reads.str}, but they are "
                    f"{current.str} (it would take their bytes for other values): give it "
                    f"a data type of {current.itemsize} bytes in the chunks' byte order "
                    f"({current.str[0]})")
        current = out
    return None


def misplaced_object_filter(filters: Sequence[Codec]) -> str | None:
    """Why an object array's filter chain cannot store its values, or None: a filter that
    takes objects (Categorize with dtype object) after the object codec (the first filter),
    which has made the objects bytes by then. zarr-python 2 writes such a chain without a
    word (``object_codec=VLenUTF8(), filters=[Categorize(...)]``): every chunk is stored as
    zeros, the values lost, and reads fail."""
    for f in list(filters)[1:]:
        dt = getattr(f, "dtype", None)
        try:
            takes_objects = dt is not None and np.dtype(dt).hasobject
        except TypeError:
            takes_objects = False
        if takes_objects:
            return (f"filter {f!r} takes objects, but comes after the object codec "
                    f"{list(filters)[0]!r}, which turns them into bytes first (every chunk "
                    f"would be stored as zeros): give it as the object codec "
                    f"(object_codec={f!r}) instead")
    return None


def unstorable_fill(meta: Any, name: str) -> str | None:
    """Why the fill value of Zarr v2 metadata meta (an array to create, or a new fill value)
    cannot be stored through its filters (FixedScaleOffset, AsType casting into an integer
    type that does not hold it: common.CastRange), naming the array name; None where it
    can. Every chunk not written whole holds the fill value, so such an array could take
    no such chunk (zarr-python stores the fill value wrapped, and reads it back as another
    value)."""
    if not getattr(meta, "filters", None):
        return None
    problem = ChunkCodecV2.from_metadata(meta).fill_problem()
    if problem is None:
        return None
    fill = meta.fill_value
    shown = fill.item() if isinstance(fill, np.generic) else fill
    return (f"the fill value {shown!r} of array {name!r} cannot be stored through its "
            f"filters: {problem}")


class ChunkCodecV2(ChunkCodecBase):
    """Encode and decode the chunks of one Zarr v2 array.

    Parameters
    ----------
    dtype : the array's dtype (byte order as stored; it is kept, never normalised).
    chunk_shape : the chunk shape (``meta.chunks``).
    order : ``"C"`` or ``"F"``, the memory layout of a chunk's elements.
    compressor : a numcodecs codec or None.
    filters : a list of numcodecs codecs or None. For object dtype the first filter must be an
        object codec.

    ``ChunkCodecV2.from_metadata(meta)`` builds one from an
    :class:`~chunkstore.metadata.v2.ArrayMetadataV2`.
    """

    __slots__ = (
        "dtype", "chunk_shape", "order", "compressor", "filters", "nitems", "nbytes",
        "_is_object", "_unwritable", "_size_reader", "_encoder", "fast_blosc", "fast_blosc_encode",
        "fast", "fill_value", "_casts", "_fill_cast", "_cast_skips",
    )

    def __init__(
        self,
        dtype: Any,
        chunk_shape: Sequence[int],
        order: str = "C",
        compressor: Codec | None = None,
        filters: Sequence[Codec] | None = None,
        fill_value: Any = None,
    ) -> None:
        self.dtype = np.dtype(dtype)
        self.fill_value = fill_value  # (see _fill_cast)
        self.chunk_shape = tuple(int(c) for c in chunk_shape)
        if order not in ("C", "F"):
            raise ValueError(f"order must be 'C' or 'F', got {order!r}")
        self.order = cast(Literal["C", "F"], order)  # checked above
        self.compressor = compressor
        # (equal chunks encode to equal bytes whenever written: numcodecs' GZip stamps the
        # current second into the header; copies made a second apart differed)
        self._encoder = stampless(compressor)
        self.filters = tuple(filters) if filters else ()
        self.nitems = math.prod(self.chunk_shape)
        self.nbytes = self.nitems * self.dtype.itemsize
        self._is_object = self.dtype.hasobject
        if self._is_object and not self.filters:
            raise ValueError(
                f"dtype {self.dtype} needs an object codec (e.g. VLenUTF8) as its first filter"
            )
        # (an array stored so, by zarr-python 2, is read as it decodes; writes are refused)
        self._unwritable = misplaced_object_filter(self.filters) if self._is_object else None
        # the range checks of the filters that cast into an integer type (None for others)
        self._casts: tuple[CastRange | None, ...] = tuple(
            cast_range(getattr(f, "codec_id", None), f.get_config())
            if hasattr(f, "get_config") else None for f in self.filters)
        # A fill value such a filter cannot store (an array made elsewhere; unstorable_fill
        # tells it for an array to create, or a new fill value) is let through as that
        # filter stores it, as zarr-python does: refused, every resize and fill value change
        # of the array failed for good (each rewrites the padding of its edge chunks first).
        self._fill_cast = self._unstorable_fill()
        # (the value each filter's check lets through: that fill value, at its filter)
        self._cast_skips = tuple(self._fill_cast[1] if self._fill_cast is not None
                                 and self._fill_cast[0] == i else None
                                 for i in range(len(self.filters)))
        self._size_reader = None if self.filters else _size_reader(compressor)
        # The GIL-free batch decode applies to plain Blosc with no filters.
        self.fast_blosc = (blosc_symbols() if (_Blosc is not None and type(compressor) is _Blosc
                                               and not self.filters and not self._is_object
                                               and self.nbytes > 0) else None)
        self.fast_blosc_encode = (
            blosc_encode_params(compressor.cname, compressor.clevel, compressor.shuffle,
                                self.dtype.itemsize, compressor.blocksize)
            if self.fast_blosc is not None and compressor is not None
            and compressor.get_config().get("typesize") is None
            else None)
        # The GIL-free batch path (chunkstore.codecs.fastpath): Blosc, zstd, gzip, zlib or
        # raw chunks with no filters.
        from chunkstore.codecs import fastpath
        self.fast = (fastpath.for_v2(compressor, self.nbytes, self.fast_blosc,
                                     self.fast_blosc_encode)
                     if not self.filters and not self._is_object else None)

    @classmethod
    def from_metadata(cls, meta: Any) -> "ChunkCodecV2":
        """Build the codec for an ``ArrayMetadataV2`` (anything with the same attributes)."""
        return cls(meta.dtype, meta.chunks, meta.order, meta.compressor, meta.filters,
                   getattr(meta, "fill_value", None))

    def __repr__(self) -> str:
        return (
            f"ChunkCodecV2(dtype={self.dtype.str!r}, chunk_shape={self.chunk_shape}, "
            f"order={self.order!r}, compressor={self.compressor!r}, "
            f"filters={list(self.filters) or None!r})"
        )

    # ---------------------------------------------------------------------------- encoding

    def encode(self, chunk: np.ndarray) -> bytes:
        """Encode a full chunk (shape ``chunk_shape``) to the bytes to store.

        ``chunk`` must have the chunk shape; if its dtype differs from the array dtype it is
        cast (``same_kind`` casting, so e.g. native-endian data for a big-endian array is fine).
        """
        if self._unwritable is not None:
            raise ValueError(f"cannot encode a chunk: {self._unwritable}")
        chunk = self._as_chunk(chunk)
        # The chunk laid out in storage order (copies only if not already laid out so): in
        # its shape, as zarr-python 2 hands it to the filters and compressor (codecs that
        # use the shape, N5's chunk header or ZFPY, need it; the others flatten it in that
        # order); an object chunk flat, in storage order (an object codec that records the
        # shape, JSON say, would make zarr-python 2 read an F-ordered chunk transposed).
        buf: Any = (np.ascontiguousarray(chunk) if self.order == "C"
                    else np.asfortranarray(chunk))
        if self._is_object:
            buf = buf.ravel(order=self.order)
        for i, f in enumerate(self.filters):
            if self._casts[i] is not None:
                self._check_cast(i, buf)
            buf = f.encode(buf)
            if isinstance(buf, np.ndarray) and buf.ndim > 1 and self.order == "F" and \
                    not buf.flags.f_contiguous:
                # (a filter that hands back the chunk in its shape but C-ordered, BitRound's
                # copy say: the codecs after it take its memory as it lies)
                buf = np.asfortranarray(buf)
        if self.compressor is not None:
            if isinstance(buf, np.ndarray) and buf.dtype.hasobject:
                raise TypeError("cannot compress an object array; is an object codec missing?")
            if isinstance(buf, np.ndarray) and buf.dtype.names is not None:
                # a structured chunk as raw records of its item size (the same bytes, and
                # Blosc's shuffle by the same type size): one with a datetime field exports
                # no buffer ("cannot include dtype 'M' in a buffer")
                buf = buf.view(np.dtype(("V", buf.dtype.itemsize)))
            buf = self._encoder.encode(buf)
        return to_bytes(buf)

    def _check_cast(self, i: int, buf: Any) -> None:
        """ValueError where filters[i] would store a value of its input buf wrapped around
        (common.CastRange): refused before anything is stored, where zarr-python stores the
        wrapped value."""
        # (mypy: called only where the check is not None)
        self._casts[i].refuse(buf, self._cast_skips[i],  # type: ignore[union-attr]
                              f"filters[{i}] {self.filters[i]!r}")

    def fill_problem(self) -> str | None:
        """Why the array's fill value cannot pass through its filters (a filter would store
        it wrapped around, common.CastRange), or None (see unstorable_fill)."""
        if self._fill_cast is None or self.fill_value is None:
            return None
        return self._fill_cast[2]

    def _unstorable_fill(self) -> tuple[int, Any, str] | None:
        """(the index of the filter that would store the fill value wrapped, the fill value
        as it gets it, why), or None. A null fill value (v2's None) is taken as the zeros
        the padding of a partial edge chunk then holds: refused, a write touching the last
        chunk of an array whose length is no multiple of its chunks failed."""
        if self._is_object or not any(self._casts):
            return None
        chunk = np.zeros((1,), dtype=self.dtype)
        try:
            if self.fill_value is not None:
                chunk[0] = self.fill_value
            buf: Any = chunk
            for i, f in enumerate(self.filters):
                cast = self._casts[i]
                found = cast.problem(buf) if cast is not None else None
                if cast is not None and found is not None:
                    return (i, np.asarray(buf).reshape(-1).view(cast.reads)[0],
                            f"filters[{i}] {f!r}: {found}")
                buf = f.encode(buf)
        except Exception:  # (a filter refusing one element: nothing to let through)
            return None
        return None

    # ---------------------------------------------------------------------------- decoding

    def _declared_size(self, data: Any) -> int | None:
        if self._is_object or self.filters:
            return None
        if self.compressor is None:
            return as_u8(data).size
        if self._size_reader is None:
            return None
        # (numpy's stubs give ndarray the buffer protocol only for Python >= 3.12)
        return self._size_reader(data if isinstance(data, bytes)
                                 else memoryview(as_u8(data)))  # type: ignore[arg-type]

    def _decode(self, data: Any, out: np.ndarray | None, writable: bool) -> np.ndarray:
        if self._is_object:
            return self._decode_object(data, out)
        return self._decode_raw(data, out, writable)

    def _shaped(self, flat_bytes: np.ndarray) -> np.ndarray:
        return flat_bytes.view(self.dtype).reshape(self.chunk_shape, order=self.order)

    def _out_target(self, out: np.ndarray) -> np.ndarray | None:
        """Flat uint8 view of ``out``'s memory if raw bytes in ``order`` can go straight in."""
        return out_target(out, self.chunk_shape, self.order, self.dtype.itemsize)

    def _finish_out(self, out: np.ndarray, decoded_bytes: np.ndarray) -> np.ndarray:
        """Copy fully decoded bytes into ``out``; return the result as documented."""
        target = self._out_target(out)
        if target is not None:
            np.copyto(target, decoded_bytes)
            return out if out.shape == self.chunk_shape else self._shaped(target)
        out[...] = self._shaped(decoded_bytes)
        return out

    def _check_size(self, n: int, stage: str) -> None:
        if n != self.nbytes:
            raise ValueError(f"{stage} has {n} bytes, expected {self.nbytes}")

    def _decode_raw(self, data: Any, out: np.ndarray | None, writable: bool) -> np.ndarray:
        comp = self.compressor
        if not self.filters:
            if comp is None:
                src = as_u8(data)
                self._check_size(src.size, "chunk data")
                if out is not None:
                    return self._finish_out(out, src)
                if writable and not src.flags.writeable:
                    src = src.copy()
                return self._shaped(src)
            reader = self._size_reader
            if reader is not None:
                # bytes slice directly (the common case); other buffers via a uint8 view
                # (numpy's stubs give ndarray the buffer protocol only for Python >= 3.12)
                size = reader(data if isinstance(data, bytes)
                              else memoryview(as_u8(data)))  # type: ignore[arg-type]
                if size is not None:
                    # Header says the size: decompress straight into the destination.
                    self._check_size(size, "decompressed chunk")
                    target = self._out_target(out) if out is not None else None
                    if out is None:
                        dest = np.empty(self.nbytes, dtype=np.uint8)
                        self._decompress_into(data, dest)
                        return self._shaped(dest)
                    if target is not None:
                        self._decompress_into(data, target)
                        return out if out.shape == self.chunk_shape else self._shaped(target)
                    dest = np.empty(self.nbytes, dtype=np.uint8)
                    self._decompress_into(data, dest)
                    out[...] = self._shaped(dest)
                    return out
            decoded = as_u8(decode_checked(comp, data))
            self._check_size(decoded.size, "decompressed chunk")
        else:
            buf = decode_checked(comp, data) if comp is not None else data
            for f in reversed(self.filters):
                buf = decode_checked(f, buf)
            decoded = as_u8(self._in_storage_order(buf))
            self._check_size(decoded.size, "decoded chunk")
        if out is not None:
            return self._finish_out(out, decoded)
        if writable and not decoded.flags.writeable:
            decoded = decoded.copy()
        return self._shaped(decoded)

    def _in_storage_order(self, buf: Any) -> Any:
        """A codec's decoded output as a flat sequence in the chunk's storage order: a codec
        that gives the chunk back in its shape (JSON, N5's chunk wrapper, ZFPY: as zarr-python
        2 hands chunks to codecs) gives its elements by their indices, in whatever memory
        layout; a flat one is in storage order already."""
        if isinstance(buf, np.ndarray) and buf.ndim > 1:
            return buf.ravel(order=self.order)
        return buf.reshape(-1, order="A") if isinstance(buf, np.ndarray) else buf

    def _decompress_into(self, data: Any, dest: np.ndarray) -> None:
        if self.nbytes == 0:
            return
        decode_checked(self.compressor, data, dest)

    def _decode_object(self, data: Any, out: np.ndarray | None) -> np.ndarray:
        buf = (decode_checked(self.compressor, data) if self.compressor is not None
               else data)
        for f in reversed(self.filters):
            if f is self.filters[0]:
                check_vlen_header(f, buf, self.nitems)
            buf = decode_checked(f, buf)
        if not isinstance(buf, np.ndarray):
            buf = np.asarray(buf, dtype=object)
        if buf.size != self.nitems:
            raise ValueError(f"decoded chunk has {buf.size} items, expected {self.nitems}")
        if buf.dtype != self.dtype:
            buf = buf.astype(self.dtype)
        arr = self._in_storage_order(buf).reshape(self.chunk_shape, order=self.order)
        if out is not None:
            if out.shape == self.chunk_shape:
                out[...] = arr
                return out
            target = out.reshape(-1, order="A")
            target[...] = arr.reshape(-1, order=self.order)
            return target.reshape(self.chunk_shape, order=self.order)
        if not arr.flags.writeable:
            arr = arr.copy(order=self.order)
        return arr
