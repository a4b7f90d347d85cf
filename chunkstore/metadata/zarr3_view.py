"""zarr-python 3's view of an array's chunk encoding, for both formats: the codec tuples
(``filters``, ``serializer``, ``compressors``) an Array shows, and the creation arguments that
zarr-python 3's ``filters``/``serializer``/``compressors``/``codecs`` turn into. This is the
one place above the codecs that knows which format takes which spelling."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np

from chunkstore.codecs.normalize import (as_public, chunk_encoding_v2, chunk_encoding_v3,
                                         codec_kind)
from chunkstore.metadata.v2 import ArrayMetadataV2


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
                    chunk_key_encoding: Any = None) -> tuple[np.dtype, dict]:
    """(dtype, keyword arguments for chunkstore.hierarchy.creation.create) for zarr-python 3's
    chunk-encoding arguments in ``zarr_format``."""
    sep = _separator(chunk_key_encoding)
    if zarr_format == 2:
        if shards is not None or codecs is not None or serializer not in ("auto", None):
            given = "shards" if shards is not None else "codecs" if codecs is not None \
                else "serializer"
            raise ValueError(f"{given} needs zarr_format=3")
        comp, flt = chunk_encoding_v2(dtype, filters=filters, compressors=compressors,
                                      compressor=compressor)
        kw = dict(compressor=comp, filters=flt or None)
        if dtype.hasobject and flt:  # the first filter is the object codec (VLenUTF8...)
            kw["object_codec"], kw["filters"] = flt[0], flt[1:] or None
        if sep is not None:
            kw["dimension_separator"] = sep
        return dtype, kw
    if compressor not in ("auto", None):
        raise ValueError("compressor= is for zarr_format=2; use compressors= for Zarr v3")
    if (dtype.kind == "U" and dtype.itemsize == 0) or dtype.hasobject:
        dtype = np.dtype(object)  # v3 "string": variable-length UTF-8 (U<n>: fixed_length_utf32)
    chain = chunk_encoding_v3(dtype, codecs=codecs, filters=filters, serializer=serializer,
                              compressors=compressors)
    if order == "F" and ndim > 1 and codecs is None and filters in ("auto", None):
        # chunks kept in F order: a transpose codec records it (zarr-python 3 keeps order
        # only in memory, so it reads such chunks back as C)
        chain.insert(0, {"name": "transpose", "configuration": {"order": list(range(ndim))[::-1]}})
    kw = dict(codecs=chain, shards=shards)
    if sep is not None:
        # the whole encoding ("default" or "v2"): the v3 metadata takes it as it is
        kw["dimension_separator"] = {
            "name": chunk_key_encoding.get("name", "default"),
            "configuration": {"separator": sep}} if isinstance(chunk_key_encoding, dict) else sep
    return dtype, kw


def _separator(chunk_key_encoding):
    if chunk_key_encoding is None:
        return None
    if isinstance(chunk_key_encoding, dict):
        return chunk_key_encoding.get("separator", chunk_key_encoding.get(
            "configuration", {}).get("separator", "."))
    return chunk_key_encoding


def kept_encoding(src, zarr_format: int) -> dict:
    """from_array's "keep": the source array's encoding arguments, where the target format
    can take them (same format); otherwise zarr-python 3's defaults."""
    meta = src.metadata
    same = isinstance(meta, ArrayMetadataV2) == (zarr_format == 2)
    if not same:
        return {}
    if isinstance(meta, ArrayMetadataV2):
        return dict(compressors=meta.compressor, filters=meta.filters)
    return dict(compressors=compressors(meta), filters=filters(meta),
                serializer=serializer(meta),
                shards=meta.chunks if meta.sharding else None,
                chunks=meta.inner_chunks or meta.chunks)
