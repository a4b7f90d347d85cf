"""zarr-python 3's array creation: create_array, from_array, and the chunk shape zarr-python 3
picks for chunks="auto".

Codec arguments in any spelling go through chunkstore.codecs.normalize (via
chunkstore.metadata.zarr3_view); the arrays themselves are made by chunkstore.hierarchy.creation."""

from __future__ import annotations

import contextlib
import inspect
import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from chunkstore.storage.store_path import split_store_path
from chunkstore import config as _config
from chunkstore.metadata.formats import format_of
from chunkstore.hierarchy import creation, creation_args
from chunkstore.engine.array import Array
from chunkstore.errors import ZarrUserWarning
from chunkstore.metadata.zarr3_view import creation_kwargs, kept_encoding
from chunkstore.storage.normalize import normalize_store
from chunkstore.metadata._common import guess_chunks


#: create_array's default fill_value: the data type's default (distinct from an explicit None,
#: which Zarr v2 keeps as "no fill value", as zarr-python 3 does)
DEFAULT_FILL: Any = type("DefaultFill", (), {"__repr__": lambda self: "<default>"})()


def create_array(store, *, name=None, shape=None, dtype=None, data=None, chunks="auto",
                 shards=None, filters="auto", compressors="auto", serializer="auto",
                 compressor="auto", codecs=None, fill_value=DEFAULT_FILL, order=None,
                 zarr_format=3,
                 attributes=None, chunk_key_encoding=None, dimension_names=None,
                 storage_options=None, overwrite=False, config=None, write_data=True,
                 synchronizer=None, **kwargs):
    """zarr-python 3's ``create_array``: writes Zarr v3 by default, with zarr-python 3's
    defaults (chunks="auto" as it guesses them, Zstd level 0, bytes little-endian).

    Codecs may be given as a whole chain (``codecs=``) or as ``filters``, ``serializer`` and
    ``compressors`` (``compressor=`` for v2), each in any spelling chunkstore.codecs.normalize
    accepts. ``config={"order": ..., "write_empty_chunks": ...}`` overrides the global config.
    """
    for key, instead in (("write_empty_chunks", "config={'write_empty_chunks': ...}"),
                         ("path", "name=")):
        if key in kwargs:  # (create() takes both: they would clash with what is passed)
            raise TypeError(f"create_array() got an unexpected keyword argument {key!r}: "
                            f"zarr-python 3's create_array takes {instead}")
    store, name = split_store_path(store, name)
    creation._check_format(zarr_format)
    zarr_format = _config.default_zarr_format(zarr_format, 3)
    if data is not None:
        for given, value in (("shape", shape), ("dtype", dtype)):
            if value is not None:  # (zarr-python 3's check and words: data says both)
                raise ValueError(f"The data parameter was used, but the {given} parameter "
                                 f"was also used. This is an error. Either use the data "
                                 f"parameter, or the {given} parameter, but not both.")
        data = data if isinstance(data, Array) else np.asanyarray(data)
        shape, dtype = data.shape, data.dtype
    if data is None and shape is None:  # (zarr-python 3's words)
        raise ValueError("The data parameter was set to None, but shape was not specified. "
                         "Either provide a value for data, or specify shape.")
    if data is None and dtype is None:
        raise ValueError("The data parameter was set to None, but dtype was not specified. "
                         "Either provide an array-like value for data, or specify dtype.")
    # a data type object (chunkstore.compat.dtype's, or zarr-python 3's) as its dtype
    spelled = creation_args.zdtype_spelling(dtype)
    # (VariableLengthBytes or its dtype, or "bytes" as zarr-python 3 spells it: not S0)
    vlen_bytes = spelled is bytes or (isinstance(spelled, str) and spelled == "bytes")
    dt = np.dtype(object) if vlen_bytes else np.dtype(spelled)
    if (dt.kind == "U" and dt.itemsize == 0) or dt.kind == "T":
        # zarr-python 3's dtype=str (and NumPy's StringDType): variable-length UTF-8 strings
        dt = np.dtype(object)
    cfg_order, wec = creation_args.array_config(config)
    order = order or cfg_order
    shape = creation._normalize_shape(shape)
    itemsize = 1 if dt.hasobject else dt.itemsize
    if isinstance(chunks, str) and chunks == "auto":
        # (as zarr-python 3: the chunks of shards aim at 1 MiB)
        chunks = guess_chunks(shape, itemsize) if shards is None else \
            guess_chunks(shape, itemsize, max_bytes=2 ** 20)
    chunk_shape = creation._normalize_shape(chunks, "chunks")
    dt, enc = creation_kwargs(zarr_format, dt, len(shape), codecs=codecs, filters=filters,
                              serializer=serializer, compressors=compressors,
                              compressor=compressor, order=order,
                              shards=_shards(shards, shape, chunk_shape, itemsize), chunks=chunk_shape,
                              chunk_key_encoding=chunk_key_encoding, vlen_bytes=vlen_bytes)
    kwargs.update(enc)
    attrs = dict(attributes or {})
    if dimension_names is not None and "codecs" not in enc:  # v2: xarray's convention
        names = [dimension_names] if isinstance(dimension_names, str) else \
            list(dimension_names)
        if len(names) != len(shape):  # (v3's metadata refuses it so; xarray could not open it)
            raise ValueError(f"dimension_names has {len(names)} entries, the array has "
                             f"{len(shape)} dimensions")
        attrs["_ARRAY_DIMENSIONS"] = names
        dimension_names = None
    # As zarr-python 3: no fill_value given is the data type's default (zero, "", NaT); in
    # Zarr v2 an explicit None is kept (no fill value: missing chunks read as uninitialised),
    # in v3 it is the default too.
    if fill_value is DEFAULT_FILL:
        fill_value = b"" if vlen_bytes else format_of(zarr_format).default_fill(dt)
    store = normalize_store(store, mode="a", storage_options=storage_options)
    writing = data is not None and write_data
    # (data a codec refuses leaves no empty array behind; without data the creation is
    # whole or nothing already, and needs no probe of the groups above for the clean-up)
    create_kwargs = dict(shape=shape, chunks=chunks, dtype=dt, fill_value=fill_value,
                         order=order, store=store, path=name, overwrite=overwrite,
                         synchronizer=synchronizer, zarr_format=zarr_format,
                         write_empty_chunks=wec, dimension_names=dimension_names,
                         attributes=attrs or None, **kwargs)
    if writing and overwrite:
        creation.check_replacing(data, store, creation.normalize_path(name), create_kwargs)
    with creation.removed_on_failure(store, creation.normalize_path(name), synchronizer) \
            if writing \
            else contextlib.nullcontext([]) as made:
        z = creation.create(**create_kwargs)
        made.append(z)
        if writing:
            z[...] = data  # (an Array streams block by block, in bounded memory)
    return z


def create_array_signature(*leading: str, **defaults: Any) -> inspect.Signature:
    """create_array's keywords behind the positional parameters ``leading`` (``"self",
    "name"`` for ``Group.create_array``), with other ``defaults``: the signature of a
    function that forwards them, so that ``inspect.signature`` and editors show them (its
    own is ``**kwargs``)."""
    params = [p.replace(default=defaults[p.name]) if p.name in defaults else p
              for p in inspect.signature(create_array).parameters.values()
              if p.name != "store" and p.name not in leading]
    first = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in leading]
    return inspect.Signature(first + params)


def _shards(shards, shape, chunks, itemsize):
    """create_array's shards= in zarr-python 3's forms -- a shape, {"shape": ...,
    "index_location": "start" | "end"}, "auto" (with zarr's ZarrUserWarning that the rule
    may change: see _auto_shards) -- as hierarchy.creation takes it: a shape, or that dict
    with a shape."""
    if shards is None:
        return None
    if isinstance(shards, Mapping):
        unknown = set(shards) - {"shape", "index_location"}
        if "shape" not in shards or unknown:
            raise ValueError(f"shards as a dict takes 'shape' and 'index_location', got "
                             f"{dict(shards)!r}")
        if shards.get("index_location", "end") not in ("start", "end"):
            raise ValueError(f"shards: index_location must be 'start' or 'end', got "
                             f"{shards['index_location']!r}")
        inner = _shards(shards["shape"], shape, chunks, itemsize)
        return {"shape": inner, "index_location": shards.get("index_location", "end")}
    if isinstance(shards, str):
        if shards != "auto":
            raise ValueError(f"shards must be a shard shape, a dict with one, 'auto' or None; "
                             f"got {shards!r}")
        warnings.warn("Automatic shard shape inference is experimental and may change "
                      "without notice.", ZarrUserWarning, stacklevel=3)
        return _auto_shards(shape, chunks, itemsize)
    return creation._normalize_shape(shards, "shards")


def _auto_shards(shape, chunks, itemsize):
    """shards="auto", as zarr-python 3.1 picks them: n chunks a shard along every axis,
    the largest n whose shard stays within the configured array.target_shard_size_bytes
    and the array (at least 1); without that setting, 2 along each axis of more than 8
    chunks."""
    target = _config.get("array.target_shard_size_bytes")
    if target is None:
        return tuple(c * 2 if s // c > 8 else c for s, c in zip(shape, chunks))
    per_chunk = math.prod(chunks) * itemsize
    n = 1
    while per_chunk * (n + 1) ** len(chunks) <= target and all(
            c * (n + 1) <= s for c, s in zip(chunks, shape)):
        n += 1
    return tuple(c * n for c in chunks)


def from_array(store, *, data, write_data=True, name=None, chunks="keep", shards="keep",
               filters="keep", compressors="keep", serializer="keep", fill_value=DEFAULT_FILL,
               order=None, zarr_format=None, attributes=None, chunk_key_encoding=None,
               dimension_names=None, storage_options=None, overwrite=False, config=None):
    """zarr-python 3's ``from_array``: a new array holding data (a NumPy array or an Array).
    "keep" takes the setting from a source Array (and the default for a NumPy array)."""
    store, name = split_store_path(store, name)
    src = data if isinstance(data, Array) else None
    if src is not None:
        zarr_format = zarr_format or src.zarr_format
        keep = kept_encoding(src, zarr_format)
        keep.setdefault("chunks", src.chunks)
        chunks, shards, filters, compressors, serializer = (
            keep.get(key, "auto") if value == "keep" else value
            for key, value in (("chunks", chunks), ("shards", shards), ("filters", filters),
                                ("compressors", compressors), ("serializer", serializer)))
        if fill_value is DEFAULT_FILL:
            fill_value = src.fill_value
        if attributes is None:
            attributes = src.attrs.asdict()
        if dimension_names is None:  # (as zarr-python 3 keeps them)
            dimension_names = getattr(src.metadata, "dimension_names", None) or None
        if order is None:  # (a v2 source's order, as zarr-python 3 keeps it)
            order = keep.get("order")
        if chunk_key_encoding is None:  # (the source's, in the same format)
            chunk_key_encoding = keep.get("chunk_key_encoding")
    kept = {k: "auto" if v == "keep" else v for k, v in
            (("chunks", chunks), ("filters", filters), ("compressors", compressors),
             ("serializer", serializer))}
    if shards in ("keep", "auto"):
        shards = None
    return create_array(store, name=name, data=data, write_data=write_data, shards=shards,
                        fill_value=fill_value, order=order,
                        zarr_format=zarr_format if zarr_format is not None else 3,
                        attributes=attributes, chunk_key_encoding=chunk_key_encoding,
                        dimension_names=dimension_names, storage_options=storage_options,
                        overwrite=overwrite, config=config, **kept)
