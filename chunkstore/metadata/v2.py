"""Zarr format 2 metadata: ``.zarray``, ``.zgroup`` and ``.zattrs`` documents.

Everything here follows the Zarr v2 storage specification and the way zarr-python 2.x writes
documents, so that stores written by chunkstore are byte-for-byte what zarr-python 2 would write
(given the same codecs) and every store zarr-python 2 writes can be read.

Public API
----------
- :class:`ArrayMetadataV2` -- parsed, validated ``.zarray`` contents.
- :func:`parse_array_metadata` / :func:`encode_array_metadata`
- :func:`parse_group_metadata` / :func:`encode_group_metadata`
- :func:`parse_attrs` / :func:`encode_attrs`
- :func:`encode_dtype` / :func:`decode_dtype`
- :func:`encode_fill_value` / :func:`decode_fill_value`
- :func:`normalize_chunks`, :func:`default_compressor`

Every ``parse_*`` function raises :class:`~chunkstore.errors.MetadataError` on any problem, with a
message naming the key the document was read from.
"""

from __future__ import annotations

import json
import numbers
import dataclasses
from dataclasses import dataclass, field
from collections.abc import Mapping, Sequence
from typing import Any

import numcodecs
from chunkstore.metadata._common import (as_int_tuple, check_chunk_addressable, check_required,
                                         check_utf8_fill,
                                         chunk_grid,
                                         guess_chunks, json_default, leaf_dtypes,
                                         load_json_object, value_bytes,
                                         unitless_time)
from chunkstore.metadata.types_v2 import (_coerce_fill, decode_dtype, decode_fill_value,
                                          encode_dtype, encode_fill_value)
import numpy as np
from numcodecs.abc import Codec

from chunkstore.errors import IntegerArgumentError, MetadataError

__all__ = [
    "ArrayMetadataV2",
    "ZARR_FORMAT",
    "check_object_fill",
    "decode_dtype",
    "decode_fill_value",
    "default_compressor",
    "encode_array_metadata",
    "encode_attrs",
    "encode_dtype",
    "encode_fill_value",
    "encode_group_metadata",
    "normalize_chunks",
    "parse_array_metadata",
    "parse_attrs",
    "parse_group_metadata",
]

ZARR_FORMAT = 2

# --------------------------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------------------------


def _json_dumps(obj: Any) -> bytes:
    """Serialise exactly as zarr-python 2 does (4-space indent, sorted keys, ASCII only)."""
    return json.dumps(
        obj,
        indent=4,
        sort_keys=True,
        ensure_ascii=True,
        separators=(",", ": "),
        default=json_default,
    ).encode("ascii")


_load_json_object = load_json_object  # shared with the other format


# --------------------------------------------------------------------------------------------
# codecs
# --------------------------------------------------------------------------------------------


def default_compressor() -> Codec:
    """The compressor chunkstore uses when none is given: Blosc/LZ4, level 5, byte shuffle."""
    return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)


def _to_codec(obj: Any, what: str) -> Codec:
    if isinstance(obj, Codec):
        config = obj.get_config()
        if isinstance(config.get("id"), str):
            _check_parameters(config, what)
        return obj
    if not isinstance(obj, Mapping):
        raise ValueError(f"{what} must be a codec configuration object, got {obj!r}")
    if "id" not in obj or not isinstance(obj["id"], str):
        raise ValueError(f"{what} configuration has no string 'id': {dict(obj)!r}")
    _check_parameters(obj, what)
    try:
        codec = numcodecs.get_codec(dict(obj))
    except Exception as e:  # unknown id, bad parameters
        raise ValueError(f"cannot create {what} {dict(obj)!r}: {e}") from e
    if dict(obj) != codec.get_config():
        # Written back as it was read, not as numcodecs spells it: its configuration adds
        # the defaults the writer left out (zstd's "checksum": false, which tensorstore
        # refuses: an array tensorstore made could not be opened by it after a resize)
        try:
            codec._zarr_document = dict(obj)
        except AttributeError:  # (a codec without instance attributes: numcodecs' form)
            pass
    return codec


def codec_document(codec: Codec) -> dict:
    """A codec's JSON in a ``.zarray``: the document it was read from, where it was (see
    _to_codec), else its numcodecs configuration."""
    stored = getattr(codec, "_zarr_document", None)
    return dict(stored) if stored is not None else codec.get_config()


#: the parameters numcodecs takes at construction but refuses only when it encodes (a bad
#: level, an unknown Blosc compressor): id -> {parameter: (lowest, highest) or the values}
#: (what numcodecs encodes with is allowed: zstd and lz4 clamp any level, gzip and zlib
#: take -1 for the default, an lzma preset may carry PRESET_EXTREME)
_PARAMETERS: dict[str, dict[str, Any]] = {
    "blosc": {"clevel": (0, 9), "shuffle": (-1, 2), "blocksize": (0, None),
              "cname": ("blosclz", "lz4", "lz4hc", "zlib", "zstd")},
    "zstd": {"level": (None, None)},
    "gzip": {"level": (-1, 9)},
    "zlib": {"level": (-1, 9)},
    "bz2": {"level": (1, 9)},
    "lzma": {"preset": (0, 9)},
    "lz4": {"acceleration": (None, None)},
}
_PRESET_EXTREME = 0x80000000  # (lzma's flag, or-ed into a preset)


def _object_fill(codec: Any, value: Any) -> Any:
    """An object array's fill value as its elements are, by its object codec: a str of a
    vlen-bytes array is taken as UTF-8 text (it was stored as if it were the base64 of the
    bytes), bytes of a vlen-utf8 array are refused (stored as base64, they read back as
    that text); anything else as given (zarr-python 2 writes 0 for either)."""
    codec_id = getattr(codec, "codec_id", None)
    if isinstance(value, np.generic):
        value = value.item()
    if codec_id == "vlen-bytes" and isinstance(value, (str, bytearray)):
        return value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if codec_id == "vlen-utf8" and isinstance(value, (bytes, bytearray)):
        raise ValueError(f"fill_value {value!r} is bytes; the array holds strings "
                         f"(vlen-utf8): give a str")
    return value


class StoredFill:
    """A fill value as an existing Zarr v2 array stores it (a copy's): create() takes it as
    it is, without its conventions for a 0 given for an object array. An object array of
    strings that zarr-python 2 made stores 0 and reads 0 where no chunk is; its copy read
    ``""``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def check_object_fill(codec: Any, value: Any) -> None:
    """Refuse a fill value given for a new object array (or set on one) that its elements
    cannot be: a number where the array holds strings or bytes (vlen-utf8, vlen-bytes: it
    would read back as itself among them, where zarr-python 3 reads its text), or bytes
    where JSON (json2) holds the elements (stored as base64 text, it would read back as
    that). Documents already stored keep being read as zarr-python 2 reads them; None (null)
    is always a fill value."""
    if value is None:
        return
    codec_id = getattr(codec, "codec_id", None)
    if isinstance(value, np.generic):
        value = value.item()
    if codec_id in ("vlen-utf8", "vlen-bytes") and not isinstance(
            value, (str, bytes, bytearray)):
        kind, what = ("a str", "strings") if codec_id == "vlen-utf8" else ("bytes", "bytes")
        raise ValueError(f"fill_value {value!r} is not {kind}; the array holds {what} "
                         f"({codec_id})")
    if codec_id == "json2" and isinstance(value, (bytes, bytearray)):
        raise ValueError(f"fill_value {value!r} is bytes; JSON (json2) holds no bytes: "
                         f"give a str")
    if codec_id == "vlen-utf8" and isinstance(value, str):
        check_utf8_fill(value)



def _json_object_fill(doc: Mapping, dtype: np.dtype, fill: Any) -> Any:
    """The fill value of an object array as its .zarray document spells it: a vlen-bytes
    array's is the base64 of its bytes (as zarr-python 3 writes it; text that is not
    base64, as other writers may leave, is its UTF-8 bytes)."""
    filters = doc.get("filters")
    if (dtype.kind != "O" or not isinstance(fill, str) or not isinstance(filters, list)
            or not filters or not isinstance(filters[0], Mapping)
            or filters[0].get("id") != "vlen-bytes"):
        return fill
    import base64
    import binascii
    try:
        return base64.b64decode(fill.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return fill.encode("utf-8")


def _check_parameters(obj: Mapping, what: str) -> None:
    """ValueError naming the parameter of a codec configuration that numcodecs would take
    now and refuse at the first write (with an error naming neither array nor parameter)."""
    for name, allowed in _PARAMETERS.get(obj["id"], {}).items():
        if name not in obj or obj[name] is None:
            continue
        v = obj[name]
        if isinstance(allowed[0], str):
            if v not in allowed:
                raise ValueError(f"{what} {obj['id']!r}: {name} must be one of "
                                 f"{list(allowed)}, got {v!r}")
            continue
        lo, hi = allowed
        if obj["id"] == "lzma" and isinstance(v, int):
            v &= ~_PRESET_EXTREME
        if isinstance(v, bool) or not isinstance(v, int) or (lo is not None and v < lo) or (
                hi is not None and v > hi):
            bounds = "" if lo is None else f" from {lo}" + ("" if hi is None else f" to {hi}")
            raise ValueError(f"{what} {obj['id']!r}: {name} must be an integer{bounds}, "
                             f"got {obj[name]!r}")


# --------------------------------------------------------------------------------------------
# array metadata
# --------------------------------------------------------------------------------------------


_as_int_tuple = as_int_tuple


@dataclass(eq=False)
class ArrayMetadataV2:
    """Parsed and validated contents of a Zarr v2 ``.zarray`` document.

    The constructor validates and normalises its arguments (``shape``/``chunks`` to int tuples,
    ``dtype`` to ``np.dtype``, codec configuration dicts to codec objects, ``fill_value`` to a
    NumPy scalar of ``dtype``) and raises ``ValueError`` on invalid input.

    ``fill_value`` is ``None`` (JSON null), a NumPy scalar of ``dtype`` (``np.void`` for
    structured dtypes; note that scalars are always native-endian, use :meth:`fill_bytes` for the
    stored byte order), or, for object dtype, the raw JSON value.

    ``attributes`` is not part of ``.zarray`` (zarr-python 2 keeps them in ``.zattrs``): None
    for metadata as parsed or built, the array's attributes in what ``Array.metadata``
    returns (as zarr-python 3's ``ArrayV2Metadata``), where :meth:`to_dict` then shows them.
    Encoding the ``.zarray`` document leaves them out.

    Equality compares the encoded JSON documents, so NaN fill values compare equal.
    """

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype
    compressor: Codec | None = field(default_factory=default_compressor)
    fill_value: Any = 0
    order: str = "C"
    filters: list[Codec] | None = None
    dimension_separator: str = "."
    zarr_format: int = ZARR_FORMAT
    attributes: dict | None = None
    # the stored document this was read from (format.read_array_metadata): a reload that
    # finds the same bytes changes nothing (see engine.chunk_io's adopt)
    source_document: Any = field(default=None, init=False, repr=False, compare=False)
    # the document named no dimension_separator (zarr-python < 2.8): the store's was taken,
    # so the document alone does not describe the array (a copy writes it out whole)
    separator_from_store: bool = field(default=False, init=False, repr=False, compare=False)
    # the chunks as stored when one is 0 (an empty dimension's, as zarr-python 3 writes it;
    # ``chunks`` has 1 there, a grid the engine can address), written back as they were
    document_chunks: tuple[int, ...] | None = field(default=None, init=False, repr=False)

    @property
    def order_recorded(self) -> bool:
        """Does the document tell the memory order? Always (``.zarray``'s ``order``)."""
        return True

    def __post_init__(self) -> None:
        if self.zarr_format != ZARR_FORMAT or isinstance(self.zarr_format, bool):
            raise ValueError(f"zarr_format must be 2, got {self.zarr_format!r}")
        self.shape = _as_int_tuple(self.shape, "shape", 0)
        self.chunks, self.document_chunks = chunk_grid(self.shape, self.chunks, "chunks")
        self.dtype = np.dtype(self.dtype)
        if self.dtype.subdtype is not None:
            raise ValueError(f"sub-array dtype {self.dtype} is not a valid array dtype")
        check_chunk_addressable(self.chunks, self.dtype, "chunks")
        if self.order not in ("C", "F"):
            raise ValueError(f"order must be 'C' or 'F', got {self.order!r}")
        if self.dimension_separator not in (".", "/"):
            raise ValueError(
                f"dimension_separator must be '.' or '/', got {self.dimension_separator!r}"
            )
        if self.compressor is not None:
            self.compressor = _to_codec(self.compressor, "compressor")
        if self.filters is not None:
            if isinstance(self.filters, (str, bytes, Mapping)) or not isinstance(
                self.filters, Sequence
            ):
                raise ValueError(f"filters must be a list or null, got {self.filters!r}")
            self.filters = [_to_codec(f, f"filters[{i}]") for i, f in enumerate(self.filters)]
        self.fill_value = _coerce_fill(self.fill_value, self.dtype)
        if self.dtype.kind == "O" and self.fill_value is not None and self.filters:
            self.fill_value = _object_fill(self.filters[0], self.fill_value)
        if self.attributes is not None:
            if not isinstance(self.attributes, Mapping):
                raise ValueError(f"attributes must be an object, got {self.attributes!r}")
            self.attributes = dict(self.attributes)

    # -- derived properties ------------------------------------------------------------------

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def chunk_grid_shape(self) -> tuple[int, ...]:
        """Number of chunks along each dimension (``ceil(shape / chunks)``)."""
        return tuple(-(-s // c) for s, c in zip(self.shape, self.chunks))

    def chunk_key(self, coords: Sequence[int]) -> str:
        """Key of the chunk at grid coordinates ``coords``, relative to the array.

        Coordinates are joined by ``dimension_separator``; a 0-d array's single chunk is ``"0"``
        (as zarr-python 2 writes it).
        """
        if len(coords) != len(self.shape):
            raise ValueError(f"expected {len(self.shape)} chunk coordinates, got {len(coords)}")
        if not coords:
            return "0"
        return self.dimension_separator.join(str(int(c)) for c in coords)

    def fill_bytes(self) -> bytes | None:
        """The fill value as exactly ``dtype.itemsize`` raw bytes in the array's byte order.

        A ``None`` fill value gives all-zero bytes, except for datetime64/timedelta64: NaT
        (as zarr-python 3 reads them; zero would be the epoch, a real date). For object
        dtype there is no fixed-size representation and ``None`` is returned; the caller
        must fill object arrays itself (with :attr:`fill_value`, or ``None`` if that is
        null).
        """
        if self.dtype.hasobject:
            return None
        if self.fill_value is None:
            if self.dtype.kind in "mM":
                return np.array("NaT", dtype=self.dtype).tobytes()
            return bytes(self.dtype.itemsize)
        return value_bytes(self.fill_value, self.dtype)

    def to_dict(self) -> dict:
        """The JSON-ready ``.zarray`` document, with ``"attributes"`` when they are known
        (see the class)."""
        d = {
            "chunks": list(self.document_chunks or self.chunks),
            "compressor": None if self.compressor is None else codec_document(self.compressor),
            "dimension_separator": self.dimension_separator,
            "dtype": encode_dtype(self.dtype),
            "fill_value": encode_fill_value(self.fill_value, self.dtype),
            "filters": None if self.filters is None else [codec_document(f)
                                                          for f in self.filters],
            "order": self.order,
            "shape": list(self.shape),
            "zarr_format": self.zarr_format,
        }
        if self.attributes is not None:
            d["attributes"] = self.attributes
        return d

    def object_missing_value(self) -> Any:
        """What an object array's missing chunks read as: its fill value, but "" (b"") for
        a string (vlen-utf8) or bytes (vlen-bytes) array whose fill_value is null, as
        zarr-python 3 reads them. zarr-python 3 (xarray's to_zarr) writes string arrays so
        and leaves out their chunks that hold only empty strings: read as None, those were
        lost. (None is no element these codecs store: they write it as "".)"""
        if self.fill_value is None and self.filters:
            codec_id = getattr(self.filters[0], "codec_id", None)
            if codec_id == "vlen-utf8":
                return ""
            if codec_id == "vlen-bytes":
                return b""
        return self.fill_value

    def with_fill_value(self, value: Any) -> "ArrayMetadataV2":
        """This metadata with a new fill value given by a user (the ``fill_value`` setter):
        checked as at creation (check_object_fill); ValueError or TypeError if the value
        does not fit the dtype."""
        if self.dtype.kind == "O" and self.filters:
            check_object_fill(self.filters[0], value)
        meta = dataclasses.replace(self, fill_value=value)
        if self.filters and self.dtype.kind != "O":
            # (one its filters would store wrapped: FixedScaleOffset, AsType into a narrower
            # integer type; the setter rewrites the padding of edge chunks with it)
            from chunkstore.codecs.v2 import ChunkCodecV2
            problem = ChunkCodecV2.from_metadata(meta).fill_problem()
            if problem is not None:
                raise ValueError(f"its filters cannot store it: {problem}")
        return meta

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayMetadataV2):
            return NotImplemented
        return encode_array_metadata(self) == encode_array_metadata(other)

    __hash__ = None  # type: ignore[assignment]  # mutable


_REQUIRED_ARRAY_KEYS = ("zarr_format", "shape", "chunks", "dtype", "compressor", "fill_value",
                        "order", "filters")


def parse_array_metadata(
    raw: bytes | bytearray | memoryview | str | Mapping, key: str = ".zarray",
    default_separator: str | None = None,
) -> ArrayMetadataV2:
    """Parse and validate a ``.zarray`` document read from ``key``.

    ``raw`` may be the stored bytes, a str or an already-decoded dict. A missing
    ``dimension_separator`` (or null) means ``default_separator`` (the store's, as
    zarr-python 2 reads documents written before the key existed), else ``"."``. Unknown extra keys are ignored, as
    zarr-python 2 does. Raises :class:`MetadataError` naming ``key`` on any problem.
    """
    try:
        doc = _load_json_object(raw, "document")
        check_required(doc, _REQUIRED_ARRAY_KEYS, ZARR_FORMAT)
        try:
            dtype = decode_dtype(doc["dtype"])
        except Exception as e:
            raise ValueError(f"invalid dtype {doc['dtype']!r}: {e}") from e
        try:
            fill_value = _json_object_fill(doc, dtype,
                                           decode_fill_value(doc["fill_value"], dtype))
        except Exception as e:
            raise ValueError(f"invalid fill_value {doc['fill_value']!r} for dtype {dtype}: {e}") from e
        sep = doc.get("dimension_separator")
        if sep is None:
            sep = default_separator or "."
        shape = doc["shape"]
        chunks = doc["chunks"]
        if not isinstance(shape, list):
            raise ValueError(f"shape must be a list of integers, got {shape!r}")
        if not isinstance(chunks, list):
            raise ValueError(f"chunks must be a list of integers, got {chunks!r}")
        meta = ArrayMetadataV2(
            shape=tuple(shape),
            chunks=tuple(chunks),
            dtype=dtype,
            compressor=doc["compressor"],
            fill_value=fill_value,
            order=doc["order"],
            filters=doc["filters"],
            dimension_separator=sep,
            zarr_format=ZARR_FORMAT,
        )
        if any(unitless_time(d) for d in leaf_dtypes(meta.dtype)):
            raise ValueError(f"dtype {doc['dtype']!r} has no time unit: its values cannot be "
                             f"read as times (give one, e.g. '<M8[ns]')")
        if meta.dtype.hasobject and not meta.filters:
            raise ValueError(f"dtype {meta.dtype} needs an object codec (e.g. VLenUTF8) as "
                             f"its first filter; filters is {doc['filters']!r}")
        meta.separator_from_store = doc.get("dimension_separator") is None and sep != "."
        return meta
    except Exception as e:
        raise MetadataError(f"invalid array metadata at {key!r}: {e}") from e


def encode_array_metadata(meta: ArrayMetadataV2) -> bytes:
    """Serialise ``meta`` as zarr-python 2 writes ``.zarray`` (always with dimension_separator;
    never the attributes, which live in ``.zattrs``)."""
    doc = meta.to_dict()
    doc.pop("attributes", None)
    return _json_dumps(doc)


# --------------------------------------------------------------------------------------------
# groups and attributes
# --------------------------------------------------------------------------------------------


def parse_group_metadata(
    raw: bytes | bytearray | memoryview | str | Mapping, key: str = ".zgroup"
) -> dict:
    """Parse and validate a ``.zgroup`` document; returns ``{"zarr_format": 2}``."""
    try:
        doc = _load_json_object(raw, "document")
        if "zarr_format" not in doc:
            raise ValueError("missing required field: zarr_format")
        zf = doc["zarr_format"]
        if isinstance(zf, bool) or zf != ZARR_FORMAT:
            raise ValueError(f"zarr_format must be 2, got {zf!r}")
        return {"zarr_format": ZARR_FORMAT}
    except Exception as e:
        raise MetadataError(f"invalid group metadata at {key!r}: {e}") from e


def encode_group_metadata() -> bytes:
    """The ``.zgroup`` document: ``{"zarr_format": 2}`` in zarr-python 2's layout."""
    return _json_dumps({"zarr_format": ZARR_FORMAT})


def parse_attrs(raw: bytes | bytearray | memoryview | str | Mapping, key: str = ".zattrs") -> dict:
    """Parse a ``.zattrs`` document (a JSON object; ``NaN``/``Infinity`` tokens are accepted)."""
    try:
        return _load_json_object(raw, "document")
    except Exception as e:
        raise MetadataError(f"invalid attributes at {key!r}: {e}") from e


def encode_attrs(attrs: Mapping) -> bytes:
    """Serialise attributes as zarr-python 2 does.

    NumPy scalars/arrays are converted to Python values; non-finite floats are written as the
    ``NaN``/``Infinity``/``-Infinity`` tokens (as ``json.dumps`` and zarr-python 2 do), which
    ``json.loads`` and :func:`parse_attrs` read back.
    """
    if not isinstance(attrs, Mapping):
        raise TypeError(f"attributes must be a mapping, got {type(attrs).__name__}")
    for k in attrs:
        if not isinstance(k, str):
            raise TypeError(f"attribute names must be str, got {k!r}")
    return _json_dumps(dict(attrs))


# --------------------------------------------------------------------------------------------
# chunk shape normalisation
# --------------------------------------------------------------------------------------------

def normalize_chunks(chunks: Any, shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """Resolve a user ``chunks`` argument against the array ``shape``.

    - ``True``, ``"auto"`` or ``None``: zarr-python's guess (see ``_common.guess_chunks``).
    - ``False``: the whole array as one chunk.
    - an int: that size along every dimension (``-1`` = the whole dimension).
    - a tuple/list: one entry per dimension; ``None`` or ``-1`` = the whole dimension; a shorter
      sequence is completed with whole dimensions.

    "Whole dimension" of a 0-length dimension is 1; a size of 0 is accepted for a 0-length
    dimension only (Zarr v3 keeps it; Zarr v2 metadata refuses it). A 0-d shape gives
    ``()``. Raises ``ValueError`` (naming the dimension) for non-integer or non-positive
    sizes (IntegerArgumentError, a TypeError too, for a non-integer one).
    """
    shape = tuple(int(s) for s in shape)
    ndim = len(shape)
    full = tuple(max(s, 1) for s in shape)
    if ndim == 0:
        if isinstance(chunks, (list, tuple)) and len(chunks) > 0:
            raise ValueError(f"chunks {chunks!r} has {len(chunks)} dimensions, shape has 0")
        return ()
    if chunks is None or chunks is True or (isinstance(chunks, str) and chunks == "auto"):
        return guess_chunks(shape, itemsize)
    if chunks is False:
        return full
    if isinstance(chunks, str):
        raise ValueError(f"invalid chunks {chunks!r}: the only accepted string is 'auto'")
    if isinstance(chunks, (numbers.Integral,)) and not isinstance(chunks, (bool, np.bool_)):
        chunks = (int(chunks),) * ndim
    elif isinstance(chunks, (list, tuple)):
        if len(chunks) > ndim:
            raise ValueError(
                f"chunks {tuple(chunks)!r} has {len(chunks)} dimensions, shape has {ndim}"
            )
        chunks = tuple(chunks) + (None,) * (ndim - len(chunks))
    else:
        raise ValueError(f"invalid chunks {chunks!r}")
    out = []
    for dim, (c, f) in enumerate(zip(chunks, full)):
        if c is None or (
            isinstance(c, numbers.Integral) and not isinstance(c, (bool, np.bool_)) and c == -1
        ):
            out.append(f)
            continue
        if isinstance(c, (bool, np.bool_)) or not isinstance(c, numbers.Integral):
            raise IntegerArgumentError(f"non integer value in chunks: chunk size for "
                                       f"dimension {dim} must be an integer, got {c!r}")
        if c < 0 or (c == 0 and shape[dim] != 0):
            raise ValueError(f"chunk size for dimension {dim} must be positive, got {c}")
        out.append(int(c))  # (0 only for an empty dimension, as zarr-python 3 allows it)
    return tuple(out)
