"""What the chunk codecs of both formats share: decode with error translation, `out` checks,
buffer helpers and frame-header readers."""

from __future__ import annotations

from typing import Any, Callable

import numcodecs
import numpy as np

from chunkstore.errors import ChunkDecodeError, store_name

#: Blosc's shuffle names and numbers (numcodecs.Blosc takes the number, Zarr v3 the name);
#: the one table, re-exported by chunkstore.codecs.blosc
SHUFFLES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
SHUFFLE_NAMES = {v: k for k, v in SHUFFLES.items()}


# --------------------------------------------------------------------------------------------
# gzip without a time stamp
# --------------------------------------------------------------------------------------------


class StamplessGZip(numcodecs.GZip):
    """numcodecs' GZip writing no time stamp into the gzip header (mtime 0), so that equal
    chunks encode to equal bytes whenever they are written (numcodecs stamps the current
    second: copies of one array made a second apart differed byte for byte)."""

    def encode(self, buf: Any) -> bytes:
        import gzip
        import io
        # (GzipFile, as numcodecs and the GIL-free kernels write it: gzip.compress with
        # mtime 0 writes another OS byte in the header)
        out = io.BytesIO()
        with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=self.level, mtime=0) as g:
            g.write(memoryview(numcodecs.compat.ensure_contiguous_ndarray(buf)))
        return out.getvalue()


def filter_io(codec_id: str | None, conf: Any) -> tuple[np.dtype, np.dtype] | None:
    """(the data type a numcodecs filter reads its input as, its output's) from its
    configuration (Delta, FixedScaleOffset, Quantize: ``dtype``, then ``astype`` or
    ``dtype``; AsType: ``decode_dtype``, ``encode_dtype``); None for one declaring
    neither."""
    if codec_id in ("delta", "fixedscaleoffset", "quantize"):
        reads = np.dtype(conf["dtype"])
        return reads, np.dtype(conf.get("astype") or reads)
    if codec_id == "astype":
        return np.dtype(conf["decode_dtype"]), np.dtype(conf["encode_dtype"])
    return None


def filter_misreads(reads: np.dtype, gets: np.dtype) -> bool:
    """Whether a numcodecs filter declaring that it reads ``reads`` (Delta's, FixedScaleOffset's,
    Quantize's ``dtype``; AsType's ``decode_dtype``), handed chunks of ``gets`` as their
    bytes (as numcodecs views them), would take them for other values: another item size;
    or another kind, but for integers over integer-like or raw items (Delta('i8') over
    datetime64 or uint64 reads the same bits back, zarr-python's usual setup; Delta('u4')
    over a 4-byte record too; int32 bits taken for float32 are rounded)."""
    if reads.hasobject or reads.itemsize != gets.itemsize:
        return True
    if reads.kind == gets.kind:
        return False
    # integer arithmetic on the bits of integer-like or raw items (structured, void, bool)
    # gives the bits back; on floats' bits, or float arithmetic on integers', it does not
    return not (reads.kind in "iu" and gets.kind in "iumMVb" or
                reads.kind in "mM" and gets.kind in "iumM")


class CastRange:
    """The values a numcodecs filter casting into an integer type would store wrapped around
    (numcodecs casts with ``astype``, which wraps; zarr-python stores them so, and they read
    back as other, plausible values): FixedScaleOffset's ``round((x - offset) * scale)``
    outside its ``astype``'s range; AsType's values outside its ``encode_dtype``'s where
    that cannot hold every ``decode_dtype`` value; NaN and infinities into an integer.
    Made by :func:`cast_range`; :meth:`problem` looks at a chunk's extremes only (the
    filter's arithmetic is monotone), one min/max pass."""

    __slots__ = ("codec_id", "reads", "target", "offset", "scale", "low", "high")

    def __init__(self, codec_id: str, reads: np.dtype, target: np.dtype, offset: Any = 0,
                 scale: Any = 1) -> None:
        self.codec_id, self.reads, self.target = codec_id, reads, target
        self.offset, self.scale = offset, scale
        info = np.iinfo(target)
        self.low, self.high = int(info.min), int(info.max)

    def _cast(self, x: np.generic) -> tuple[Any, bool]:
        """(what the filter casts for input x, as numcodecs computes it: the same operations
        on x in the same data type, or None where it raises its own error; whether its
        integer arithmetic wrapped on the way, then the exact value)."""
        if self.codec_id == "astype":
            return x, False
        one = np.array([x], dtype=self.reads)
        try:
            with np.errstate(all="ignore"):
                enc = np.around((one - self.offset) * self.scale)[0]
            if self.reads.kind in "iu":
                # (arithmetic in an integer data type wraps too: the value computed exactly,
                # which it must equal; in floats where numcodecs' is in float64)
                exact = (int(x) - self.offset) * self.scale
                if isinstance(exact, int):
                    if enc != exact:
                        return exact, True
                elif float(enc) != float(np.around(np.float64(exact))):
                    return float(np.around(np.float64(exact))), True
        except (OverflowError, TypeError, ValueError):
            return None, False
        return enc, False

    def _fits(self, v: Any) -> bool:
        if isinstance(v, (float, np.floating)):
            if not np.isfinite(v):
                return False
            v = int(v)  # (a cast to an integer type truncates toward zero)
        return self.low <= int(v) <= self.high

    def refuse(self, buf: Any, skip: Any, who: str) -> None:
        """ValueError naming who (the filter) where problem(buf, skip) finds a value."""
        found = self.problem(buf, skip)
        if found is not None:
            raise ValueError(f"{who}: {found}; chunkstore refuses what zarr-python would "
                             f"store wrapped")

    def problem(self, buf: Any, skip: Any = None) -> str | None:
        """Why the filter would store a value of buf (its input, viewed as the data type it
        reads, as numcodecs views it) wrapped, naming the first such extreme; None when
        every value fits. skip: a value let through (an array's fill value that it cannot
        store, see ChunkCodecV2), an extra pass over the chunk."""
        arr = np.asarray(buf)
        if arr.dtype != self.reads:
            arr = np.ascontiguousarray(arr).reshape(-1).view(self.reads)
        if skip is not None:
            arr = arr[~np.isnan(arr)] if skip != skip else arr[arr != skip]
        if arr.size == 0:
            return None
        for x in (arr.min(), arr.max()):  # (NaN propagates into both)
            v, wrapped = self._cast(x)
            if v is None or (not wrapped and self._fits(v)):
                continue
            shown = x.item() if isinstance(x, np.generic) else x
            held = self.reads if wrapped else \
                f"{self.target} ({self.low}..{self.high})"
            if self.codec_id == "fixedscaleoffset":
                v = v.item() if isinstance(v, np.generic) else v
                what = (f"it encodes to round(({shown!r} - {self.offset!r}) * "
                        f"{self.scale!r}) = {v!r}, which {held} cannot hold")
            else:
                what = f"{held} cannot hold it"
            where = "computed in it" if wrapped else "cast into it"
            return (f"the value {shown!r} cannot be stored: {what}; {where}, it wraps around "
                    f"(and reads back as another value)")
        return None


def cast_range(codec_id: str | None, conf: Any) -> CastRange | None:
    """The range check (:class:`CastRange`) for a numcodecs filter that casts its values
    into an integer type that may not hold them: FixedScaleOffset with an integer
    ``astype``; AsType whose integer ``encode_dtype`` cannot hold every ``decode_dtype``
    value (narrower, of the other sign, or floats). None for any other filter, or a
    configuration it cannot tell (numcodecs then does as it does)."""
    if codec_id not in ("fixedscaleoffset", "astype"):
        return None
    try:
        io = filter_io(codec_id, conf)
        if io is None:
            return None
        reads, target = io
        if target.kind not in "iu" or reads.kind not in "iuf":
            return None
        if codec_id == "astype":
            if np.can_cast(reads, target, "safe"):
                return None
            return CastRange(codec_id, reads, target)
        return CastRange(codec_id, reads, target, conf.get("offset", 0) or 0,
                         conf.get("scale", 1))
    except (KeyError, TypeError, ValueError):
        return None


def stampless(codec: Any) -> Any:
    """The codec to encode with in place of ``codec``: numcodecs' own GZip becomes one that
    writes mtime 0 (same stream, decoded alike); any other codec (a subclass too: it may
    change the format) is itself."""
    return StamplessGZip(level=codec.level) if type(codec) is numcodecs.GZip else codec


#: ids of the codecs that encode object arrays (variable-length strings, bytes and arrays,
#: JSON, MsgPack, Pickle): Zarr v2's object codecs, and v3's vlen serializers
OBJECT_CODEC_IDS = frozenset({"vlen-utf8", "vlen-bytes", "vlen-array", "json2", "msgpack2",
                              "pickle"})


def object_codec_id(codec: Any) -> str | None:
    """The id of codec where it encodes object arrays (OBJECT_CODEC_IDS), in any of its
    forms: a numcodecs codec, chunkstore's or zarr-python 3's v3 codec, a JSON dict; else
    None."""
    name = getattr(codec, "codec_id", None)
    if name is None:
        doc = codec if isinstance(codec, dict) else (
            codec.to_dict() if callable(getattr(codec, "to_dict", None)) else {})
        name = doc.get("name") or doc.get("id") if isinstance(doc, dict) else None
    return name if name in OBJECT_CODEC_IDS else None


# --------------------------------------------------------------------------------------------
# buffer helpers
# --------------------------------------------------------------------------------------------


def as_u8(buf: Any) -> np.ndarray:
    """A flat uint8 view of the bytes of ``buf`` (bytes, bytearray, memoryview, ndarray)."""
    if isinstance(buf, np.ndarray):
        if buf.dtype.hasobject:
            raise TypeError("expected raw bytes, got an object array (is an object codec "
                            "missing?)")
        if not (buf.flags.c_contiguous or buf.flags.f_contiguous):
            buf = np.ascontiguousarray(buf)
        flat = buf.reshape(-1, order="A")
        return flat if flat.dtype == np.uint8 else flat.view(np.uint8)
    return np.frombuffer(buf, dtype=np.uint8)


def to_bytes(buf: Any) -> bytes:
    """``buf`` as bytes (no copy when it already is)."""
    if type(buf) is bytes:
        return buf
    if isinstance(buf, np.ndarray):
        if buf.dtype.hasobject:
            raise TypeError("encoding produced an object array; is an object codec missing?")
        return buf.tobytes(order="A")
    return bytes(memoryview(buf))


def out_target(out: np.ndarray, chunk_shape: tuple, order: str,
               itemsize: int) -> np.ndarray | None:
    """Flat uint8 view of ``out``'s memory if a chunk's bytes in ``order`` can go straight
    in: None when ``out`` has the chunk's shape (value semantics) but not its layout."""
    if out.shape == chunk_shape and out.ndim > 1:
        ok = out.flags.c_contiguous if order == "C" else out.flags.f_contiguous
        if not ok:
            return None  # value semantics need a transposing copy
    flat = out.reshape(-1, order="A")
    return flat.view(np.uint8) if itemsize else flat


class ChunkCodecBase:
    """Base of ChunkCodecV2 and ChunkCodecV3 (which set dtype and nitems)."""

    __slots__ = ()

    # set (and _decode defined) by the subclasses
    dtype: np.dtype
    nitems: int
    nbytes: int
    _decode: Callable[[Any, np.ndarray | None, bool], np.ndarray]

    chunk_shape: tuple[int, ...]
    _is_object: bool

    def _as_chunk(self, chunk: Any) -> np.ndarray:
        """*chunk* as an array of the chunk shape and the array's dtype: ValueError for another
        shape; another dtype cast (``same_kind``, so any byte order is fine)."""
        chunk = np.asarray(chunk)
        if chunk.shape != self.chunk_shape:
            raise ValueError(f"chunk has shape {chunk.shape}, expected {self.chunk_shape}")
        if chunk.dtype != self.dtype:
            if self._is_object:
                chunk = chunk.astype(object)
            else:
                chunk = chunk.astype(self.dtype, casting="same_kind")
        return chunk

    def decode(self, data: Any, out: np.ndarray | None = None, *, key: str | None = None,
               store: Any = None, writable: bool = True) -> np.ndarray:
        """Decode stored chunk bytes to an array of shape ``chunk_shape`` and the array dtype.

        Parameters
        ----------
        data : the stored bytes (bytes, bytearray, memoryview, or a uint8/any ndarray).
        out : optional destination, a writable C- or F-contiguous ndarray with the array dtype
            and ``nitems`` elements. If ``out.shape == chunk_shape`` it receives the chunk
            values (``out[...] == chunk``) and is returned. Any other shape with the same number
            of elements is treated as raw memory: it receives the chunk's bytes in ``order``
            layout and a view of it shaped ``chunk_shape`` (in ``order``) is returned. With no
            filters and a Blosc/Zstd/LZ4 compressor (or none) the data is decompressed straight
            into ``out`` when its layout matches ``order``; otherwise it is decoded and copied.
            If decoding fails, the contents of ``out`` are unspecified.
        key, store : used only in error messages:
            ``failed to decode chunk 'foo/0.1' in DirectoryStore('/x/y'): <cause>``.
            ``store`` may be a str (used as is) or any object (its ``repr`` is used).
        writable : without ``out``, the result is always writable when True (the default);
            with False a read-only view of ``data`` (or of the decompressor's bytes) may be
            returned, saving a copy for uncompressed chunks and compressors that return bytes.

        Raises
        ------
        ChunkDecodeError : on any decoding failure, including a decoded size that is not
            exactly the chunk's size; the original exception is chained.
        ValueError, TypeError : if ``out`` is unsuitable (a caller error, not a decode error).
        """

        if out is not None:
            self._check_out(out)
        try:
            return self._decode(data, out, writable)
        except Exception as e:
            raise ChunkDecodeError(self._error_message(e, key, store)) from e

    #: chunks up to this many bytes get a decode buffer without a look at the stored bytes
    SMALL_CHUNK = 1 << 26

    def check_stored(self, data: Any, key: str | None = None, store: Any = None) -> bool:
        """Whether a buffer of the chunk's size may be allocated to decode ``data`` into.

        A hostile chunk shape (10**18 elements) with a small stored chunk must not make a
        read allocate exabytes: for a large chunk, the size the stored bytes declare
        (uncompressed length, Blosc/Zstd/LZ4 header) must be the chunk's, else
        ChunkDecodeError naming the key. False: the size is unknown before decoding, so
        decode without a preallocated buffer (the decoder checks the size it produced)."""
        if self.nbytes <= self.SMALL_CHUNK:
            return True
        try:
            size = self._declared_size(data)
            if size is not None and size != self.nbytes:
                raise ValueError(f"stored bytes declare {size} decoded bytes, the chunk "
                                 f"has {self.nbytes}")
        except Exception as e:
            raise ChunkDecodeError(self._error_message(e, key, store)) from e
        return size is not None

    def _declared_size(self, data: Any) -> int | None:  # overridden per format
        return None

    def _error_message(self, e: Exception, key: str | None, store: Any) -> str:
        where = "failed to decode chunk"
        if key is not None:
            where += f" {key!r}"
        if store is not None:
            where += f" in {store if isinstance(store, str) else store_name(store)}"
        cause = str(e) or type(e).__name__
        return f"{where}: {cause}"

    def _check_out(self, out: Any) -> None:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
        if out.dtype != self.dtype:
            raise ValueError(f"out has dtype {out.dtype}, expected {self.dtype}")
        if out.size != self.nitems:
            raise ValueError(f"out has {out.size} elements, expected {self.nitems}")
        if not out.flags.writeable:
            raise ValueError("out is read-only")
        if not (out.flags.c_contiguous or out.flags.f_contiguous):
            raise ValueError("out must be C- or F-contiguous")


# Frame-header readers: the decoded size a compressed frame declares (None if it does not),
# so data can be decompressed straight into a caller's buffer of exactly that size.
def blosc_decoded_size(data: Any) -> int | None:
    """The decoded size a Blosc frame's header gives (ValueError for a bad header)."""
    mv = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    if len(mv) < 16:
        raise ValueError(f"blosc data too short for a header ({len(mv)} bytes)")
    nbytes = int.from_bytes(mv[4:8], "little")
    cbytes = int.from_bytes(mv[12:16], "little")
    if cbytes != len(mv):
        # c-blosc trusts the header and reads past a short buffer: wrong values, no error
        raise ValueError(f"blosc frame truncated or padded: its header says {cbytes} "
                         f"compressed bytes, {len(mv)} present")
    return nbytes


def check_frame(codec: Any, data: Any) -> None:
    """Raise ValueError if ``data`` is not a whole frame of a numcodecs ``codec`` whose frames
    carry their length (Blosc: header cbytes == buffer length). Call before every decode."""
    if getattr(codec, "codec_id", None) == "blosc":
        blosc_decoded_size(data if isinstance(data, bytes) else _flat_bytes(data))


def check_vlen_header(codec: Any, data: Any, nitems: int) -> None:
    """ValueError unless a vlen-* frame declares ``nitems`` items and has room for their
    lengths: numcodecs allocates as many items as the header says before checking."""
    name = getattr(codec, "codec_id", None)
    if name not in ("vlen-utf8", "vlen-bytes", "vlen-array"):
        return
    mv = data if isinstance(data, bytes) else _flat_bytes(data)
    if len(mv) < 4:
        raise ValueError(f"{name} data too short for a header ({len(mv)} bytes)")
    count = int.from_bytes(mv[0:4], "little")
    if count != nitems:
        raise ValueError(f"{name} header says {count} items, expected {nitems}")
    if len(mv) < 4 + 4 * nitems:
        raise ValueError(f"{name} data has {len(mv)} bytes, too short for {nitems} items")


def decode_checked(codec: Any, data: Any, out: Any = None) -> Any:
    """``codec.decode(data[, out])`` after :func:`check_frame`; for zstd, the decoded size
    is checked against the frame's declared content size."""
    check_frame(codec, data)
    res = codec.decode(data) if out is None else codec.decode(data, out=out)
    if getattr(codec, "codec_id", None) == "zstd" and out is None:
        size = zstd_decoded_size(data if isinstance(data, bytes) else _flat_bytes(data))
        n = memoryview(res).nbytes
        if size is not None and size != n:
            raise ValueError(f"zstd frame declares {size} bytes, decoded {n}")
    return res


def _flat_bytes(data: Any) -> memoryview:
    if isinstance(data, np.ndarray):
        data = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return memoryview(data).cast("B")


def zstd_decoded_size(data: Any) -> int | None:
    """The decoded size a Zstandard frame's header gives, or None when it has none."""
    mv = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    if len(mv) < 5:
        raise ValueError(f"zstd data too short for a frame header ({len(mv)} bytes)")
    if int.from_bytes(mv[0:4], "little") != 0xFD2FB528:
        return None
    fhd = mv[4]
    fcs_flag = fhd >> 6
    single = (fhd >> 5) & 1
    did = (0, 1, 2, 4)[fhd & 3]
    fcs = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if fcs == 0:
        return None
    pos = 5 + (0 if single else 1) + did
    if len(mv) < pos + fcs:
        raise ValueError("zstd frame header truncated")
    size = int.from_bytes(mv[pos : pos + fcs], "little")
    if fcs == 2:
        size += 256
    if _zstd_frame_end(mv, pos + fcs, fhd) != len(mv):
        # (more after the first frame, another frame say, as zarr-python's numcodecs
        # decodes whole: the first frame's size is not the chunk's, which refused it)
        return None
    return size


def _zstd_frame_end(mv: Any, pos: int, fhd: int) -> int:
    """Where the Zstandard frame whose blocks start at pos ends (its block headers walked:
    a few per megabyte), or len(mv) where it runs past the data (the decoder says more)."""
    n = len(mv)
    while pos + 3 <= n:
        header = mv[pos] | (mv[pos + 1] << 8) | (mv[pos + 2] << 16)
        kind, size = (header >> 1) & 3, header >> 3
        pos += 3 + (1 if kind == 1 else size)
        if header & 1:  # the last block; then the content checksum, where flagged
            return pos + (4 if fhd & 4 else 0)
    return n
