"""zarr-python 3's view of an array's chunk encoding, for both formats: the codec tuples
(``filters``, ``serializer``, ``compressors``) an Array shows, and the creation arguments that
zarr-python 3's ``filters``/``serializer``/``compressors``/``codecs`` turn into. This is the
one place above the codecs that knows which format takes which spelling."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numcodecs
import numpy as np

from chunkstore.codecs.normalize import (as_public, chunk_encoding_v2, chunk_encoding_v3,
                                         codec_kind)
from chunkstore.metadata.extension_v3 import VLEN_BYTES
from chunkstore.metadata.v2 import ArrayMetadataV2
from chunkstore.metadata.v3 import normalize_chunk_key_encoding


def _v3_parts(meta) -> dict:
    """The JSON codecs by kind; the inner chunk's for a sharded array (as zarr-python 3)."""
    codecs = meta.inner_codecs if meta.sharding else meta.codecs
    parts: dict = {"array_array": [], "array_bytes": [], "bytes_bytes": []}
    for c in codecs:
        parts[codec_kind(c) or "bytes_bytes"].append(c)
    return parts


def _public(doc: Any) -> Any:
    return as_public(doc, "codec")


def with_attributes(meta, attributes: Mapping) -> Any:
    """zarr-python 3's ``Array.metadata``: a copy of the array metadata ``meta`` (either
    format) whose ``attributes`` (and ``to_dict()["attributes"]``) are ``attributes``. The
    copy is shallow (nothing is validated again); ``meta`` itself is left as it is."""
    out = copy.copy(meta)
    out.attributes = dict(attributes)
    if isinstance(out, ArrayMetadataV2):  # zarr-python 3's ArrayV2Metadata: a tuple or None
        out.filters = tuple(out.filters) if out.filters else None  # type: ignore[assignment]
    return out


def compressors(meta) -> tuple:
    """Zarr v2: (the numcodecs compressor,) or (); Zarr v3: the bytes -> bytes codecs."""
    if isinstance(meta, ArrayMetadataV2):
        return () if meta.compressor is None else (meta.compressor,)
    return tuple(_public(c) for c in _v3_parts(meta)["bytes_bytes"])


def serializer(meta) -> Any:
    """Zarr v3: the array -> bytes codec; Zarr v2: None."""
    if isinstance(meta, ArrayMetadataV2):
        return None
    return _public(_v3_parts(meta)["array_bytes"][0])


def filters(meta) -> Any:
    """Zarr v2: zarr-python 2's list of numcodecs filters (or None); Zarr v3: zarr-python 3's
    tuple of array -> array codecs."""
    if isinstance(meta, ArrayMetadataV2):
        return meta.filters
    return tuple(_public(c) for c in _v3_parts(meta)["array_array"])


def codecs(meta) -> Any:
    """Zarr v3: the whole codec chain as codec objects; Zarr v2: None."""
    if isinstance(meta, ArrayMetadataV2):
        return None
    return tuple(_public(c) for c in meta.codecs)


def creation_kwargs(zarr_format: int, dtype: np.dtype, ndim: int, *, codecs: Any = None,
                    filters: Any = "auto", serializer: Any = "auto", compressors: Any = "auto",
                    compressor: Any = "auto", order: str = "C", shards: Any = None,
                    chunk_key_encoding: Any = None, chunks: Any = None,
                    vlen_bytes: bool = False) -> tuple[np.dtype, dict]:
    """(dtype, keyword arguments for chunkstore.hierarchy.creation.create) for zarr-python 3's
    chunk-encoding arguments in ``zarr_format``.

    ``chunks`` (the chunk shape as given) is checked against ``shards`` (Zarr v3);
    ``vlen_bytes``: the data type is variable-length bytes (an object dtype stored with
    vlen-bytes)."""
    cke = parse_chunk_key_encoding(chunk_key_encoding, zarr_format)
    sep = None if cke is None else cke["configuration"]["separator"]
    if zarr_format == 2:
        for name, value in (("shards", shards), ("codecs", codecs),
                            ("serializer", None if serializer == "auto" else serializer)):
            if value is not None:
                raise ValueError(v2_refusal(name, value))
        comp, flt = chunk_encoding_v2(dtype, filters=filters, compressors=compressors,
                                      compressor=compressor)
        kw = dict(compressor=comp, filters=flt or None)
        if dtype.hasobject and flt:  # the first filter is the object codec (VLenUTF8...)
            kw["object_codec"], kw["filters"] = flt[0], flt[1:] or None
            if vlen_bytes and isinstance(filters, str) and filters == "auto":
                kw["object_codec"] = numcodecs.VLenBytes()  # ("auto" gives VLenUTF8)
        if sep is not None:
            kw["dimension_separator"] = sep
        return dtype, kw
    if compressor not in ("auto", None):
        raise ValueError("compressor= is for zarr_format=2; use compressors= for Zarr v3")
    check_shards(shards, chunks)
    if vlen_bytes:
        dtype = VLEN_BYTES  # v3 "variable_length_bytes"
    elif (dtype.kind == "U" and dtype.itemsize == 0) or dtype.hasobject:
        dtype = np.dtype(object)  # v3 "string": variable-length UTF-8 (U<n>: fixed_length_utf32)
    chain = chunk_encoding_v3(dtype, codecs=codecs, filters=filters, serializer=serializer,
                              compressors=compressors)
    if order == "F" and ndim > 1 and codecs is None:
        # chunks kept in F order: a transpose codec records it (zarr-python 3 keeps order
        # only in memory, so it reads such chunks back as C); first, before any filters (it
        # was left out where filters were given: the order was dropped without a word)
        chain.insert(0, {"name": "transpose", "configuration": {"order": list(range(ndim))[::-1]}})
    kw = dict(codecs=chain, shards=shards)
    if cke is not None:
        kw["dimension_separator"] = cke  # the whole encoding: the v3 metadata takes it as is
    return dtype, kw


#: zarr-python 3's messages refusing a v3-only argument for a Zarr v2 array
_V2_REFUSALS = {
    "shards": "Zarr format 2 arrays can only be created with `shard_shape` set to `None`. "
              "Got `shard_shape={value}` instead.",
    "dimension_names": "dimension_names cannot be used for arrays with zarr_format 2.",
    "codecs": "codecs cannot be used for arrays with zarr_format 2. Use filters and "
              "compressor instead.",
    "serializer": "Zarr format 2 arrays do not support `serializer`.",
}


def v2_refusal(name: str, value: Any) -> str:
    """The message refusing argument name (given value) for a Zarr v2 array: zarr-python 3's
    words first (code matches on them), then chunkstore's."""
    if name == "shards" and isinstance(value, Mapping):
        value = value.get("shape")
    return (f"{_V2_REFUSALS[name].format(value=value)} ({name}= needs zarr_format=3: a "
            f"Zarr v2 array has no {name})")


def shard_shape_error(shards: Any, chunks: Any) -> str:
    """The message for shards that are not a multiple of the chunks (zarr-python 3's
    words, then chunkstore's)."""
    return (f"The array's `chunk_shape` (got {shards}) needs to be divisible by the shard's "
            f"inner `chunk_shape` (got {chunks}). (shards {shards} must be a multiple of "
            f"chunks {chunks} in every dimension)")


def check_shards(shards: Any, chunks: Any) -> None:
    """ValueError unless the shard shape (a shape, or ``{"shape": ...}``) is a multiple of
    the chunk shape as given (before create() completes a short one); None: no check."""
    if isinstance(shards, Mapping):
        shards = shards.get("shape")
    if shards is None or chunks is None:
        return
    shards, chunks = tuple(shards), tuple(chunks)
    if len(shards) != len(chunks) or any(s % c for s, c in zip(shards, chunks) if c):
        raise ValueError(shard_shape_error(shards, chunks))


def parse_chunk_key_encoding(cke: Any, zarr_format: int | None = None) -> dict | None:
    """``{"name": ..., "configuration": {"separator": ...}}`` for a chunk key encoding in any
    of zarr-python 3's spellings: that dict (checked by the metadata's own normaliser,
    :func:`chunkstore.metadata.v3.normalize_chunk_key_encoding`), ``{"name": ...,
    "separator": ...}``, a name, a ``(name, separator)`` tuple (``create``'s), an encoding
    object (``to_dict()``, or ``name`` and ``separator``); and chunkstore's bare separator
    ``"."``/``"/"`` ("v2" in Zarr v2, else "default"). None stays None. ValueError for an
    unknown name or separator, and, with ``zarr_format=2``, for a name other than "v2" (in
    zarr-python 3's words)."""
    if cke is None:
        return None
    if isinstance(cke, str) and cke in (".", "/"):
        cke = {"name": "v2" if zarr_format == 2 else "default", "separator": cke}
    elif isinstance(cke, (tuple, list)) and len(cke) == 2:
        cke = {"name": cke[0], "separator": cke[1]}
    elif not isinstance(cke, (str, Mapping)):
        to_dict = getattr(cke, "to_dict", None)
        if callable(to_dict):
            cke = to_dict()
        elif hasattr(cke, "name") and hasattr(cke, "separator"):
            cke = {"name": cke.name, "separator": cke.separator}
        else:
            raise ValueError(f"chunk_key_encoding must be a dict, a name or a (name, "
                             f"separator) pair, got {cke!r}")
    if isinstance(cke, Mapping) and "separator" in cke:  # the flat spelling
        cke = {"name": cke.get("name"), "configuration": {"separator": cke["separator"]}}
    out = normalize_chunk_key_encoding(cke)
    if zarr_format == 2 and out["name"] != "v2":
        raise ValueError("Invalid chunk key encoding. For Zarr format 2 arrays, the `name` "
                         "field of the chunk key encoding must be 'v2'. Got `name` = "
                         f"{out['name']} instead.")
    return out


def kept_encoding(src, zarr_format: int) -> dict:
    """from_array's "keep": the source array's encoding arguments, where the target format
    can take them (same format); otherwise zarr-python 3's defaults."""
    meta = src.metadata
    same = isinstance(meta, ArrayMetadataV2) == (zarr_format == 2)
    if not same:
        return {}
    if isinstance(meta, ArrayMetadataV2):
        return dict(compressors=meta.compressor, filters=meta.filters,
                    chunk_key_encoding={"name": "v2", "separator": meta.dimension_separator},
                    order=meta.order)
    return dict(compressors=compressors(meta), filters=filters(meta),
                serializer=serializer(meta),
                shards=meta.chunks if meta.sharding else None,
                chunks=meta.inner_chunks or meta.chunks,
                chunk_key_encoding=meta.chunk_key_encoding)
