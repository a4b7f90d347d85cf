"""zarr-python 3's creation functions: create_array, from_array, create_group,
create_hierarchy, and the chunk shape zarr-python 3 picks for chunks="auto".

Codec arguments in any spelling go through chunkstore.codecs.normalize; the arrays and groups
themselves are made by chunkstore.creation and chunkstore.group."""

from __future__ import annotations

import math

import numpy as np

from chunkstore import config as _config
from chunkstore import creation
from chunkstore.codecs.normalize import chunk_encoding_v2, chunk_encoding_v3


def guess_chunks(shape, itemsize):
    """zarr-python 3's chunks="auto": halve the axes in turn, starting with the first, until a
    chunk is near a target size that grows with the array (h5py's rule: 128 KiB .. 64 MiB)."""
    shape = tuple(int(s) for s in shape)
    if itemsize == 0:
        return shape
    chunks = [float(max(s, 1)) for s in shape]
    total = math.prod(chunks) * itemsize
    target = 256 * 1024 * 2 ** math.log10(total / 2 ** 20)
    target = min(max(target, 128 * 1024), 64 * 2 ** 20)
    axis = 0
    while True:
        nbytes = math.prod(chunks) * itemsize
        near = nbytes < target or abs(nbytes - target) / target < 0.5
        if (near and nbytes < 64 * 2 ** 20) or math.prod(chunks) == 1:
            break
        chunks[axis % len(chunks)] = math.ceil(chunks[axis % len(chunks)] / 2.0)
        axis += 1
    return tuple(int(c) for c in chunks)


_ARRAY_CONFIG = {"order", "write_empty_chunks"}


def _array_config(config):
    """(order, write_empty_chunks) from create_array(config=...) over the global config."""
    config = dict(config or {})
    unknown = set(config) - _ARRAY_CONFIG
    if unknown:
        raise ValueError(f"config: unknown key(s) {', '.join(sorted(unknown))}; known: "
                         f"{', '.join(sorted(_ARRAY_CONFIG))}")
    order = config.get("order", _config.get("array.order"))
    wec = config.get("write_empty_chunks", _config.get("array.write_empty_chunks"))
    return order, wec


def _separator(chunk_key_encoding):
    if chunk_key_encoding is None:
        return None
    if isinstance(chunk_key_encoding, dict):
        return chunk_key_encoding.get("separator", chunk_key_encoding.get(
            "configuration", {}).get("separator", "."))
    return chunk_key_encoding


def create_array(store, *, name=None, shape=None, dtype=None, data=None, chunks="auto",
                 shards=None, filters="auto", compressors="auto", serializer="auto",
                 compressor="auto", codecs=None, fill_value=None, order=None, zarr_format=3,
                 attributes=None, chunk_key_encoding=None, dimension_names=None,
                 storage_options=None, overwrite=False, config=None, write_data=True,
                 synchronizer=None, **kwargs):
    """zarr-python 3's ``create_array``: writes Zarr v3 by default, with zarr-python 3's
    defaults (chunks="auto" as it guesses them, Zstd level 0, bytes little-endian).

    Codecs may be given as a whole chain (``codecs=``) or as ``filters``, ``serializer`` and
    ``compressors`` (``compressor=`` for v2), each in any spelling chunkstore.codecs.normalize
    accepts. ``config={"order": ..., "write_empty_chunks": ...}`` overrides the global config.
    """
    creation._check_format(zarr_format)
    zarr_format = _config.default_zarr_format(zarr_format, 3)
    if data is not None:
        from chunkstore.array import Array
        data = data if isinstance(data, Array) else np.asanyarray(data)
        shape = data.shape if shape is None else shape
        dtype = data.dtype if dtype is None else dtype
    dt = np.dtype("f8" if dtype is None else dtype)
    if dtype is str or (dt.kind == "U" and dt.itemsize == 0):
        dt = np.dtype(object)  # zarr-python 3's dtype=str: variable-length UTF-8 strings
    cfg_order, wec = _array_config(config)
    order = order or cfg_order
    shape = creation._normalize_shape(shape)
    if isinstance(chunks, str) and chunks == "auto":
        chunks = guess_chunks(shape if shards is None else shards,
                              1 if dt.hasobject else dt.itemsize)
    if zarr_format == 2:
        if shards is not None or codecs is not None or serializer not in ("auto", None):
            given = "shards" if shards is not None else "codecs" if codecs is not None \
                else "serializer"
            raise ValueError(f"{given} needs zarr_format=3")
        comp, flt = chunk_encoding_v2(dt, filters=filters, compressors=compressors,
                                      compressor=compressor)
        enc = dict(compressor=comp, filters=flt or None)
        if dt.hasobject and flt:
            enc["object_codec"] = None
    else:
        if compressor not in ("auto", None):
            raise ValueError("compressor= is for zarr_format=2; use compressors= for Zarr v3")
        if dt.kind == "U" or dt.hasobject:
            dt = np.dtype(object)  # v3 "string": variable-length UTF-8
        chain = chunk_encoding_v3(dt, codecs=codecs, filters=filters, serializer=serializer,
                                  compressors=compressors)
        if order == "F" and len(shape) > 1 and codecs is None and filters in ("auto", None):
            # chunks kept in F order: a transpose codec records it (zarr-python 3 keeps
            # order only in memory, so it reads such chunks back as C)
            chain.insert(0, {"name": "transpose",
                             "configuration": {"order": list(range(len(shape)))[::-1]}})
        enc = dict(codecs=chain)
    sep = _separator(chunk_key_encoding)
    if sep is not None:
        if zarr_format == 3 and isinstance(chunk_key_encoding, dict):
            # the whole encoding ("default" or "v2"): the v3 metadata takes it as it is
            sep = {"name": chunk_key_encoding.get("name", "default"),
                   "configuration": {"separator": sep}}
        kwargs.setdefault("dimension_separator", sep)
    attrs = dict(attributes or {})
    if dimension_names is not None and zarr_format == 2:
        attrs["_ARRAY_DIMENSIONS"] = list(dimension_names)
        dimension_names = None
    if fill_value is None and not dt.hasobject:
        fill_value = 0  # zarr-python 3 writes the type's zero
    z = creation.create(shape=shape, chunks=chunks, dtype=dt,
                        fill_value="" if fill_value is None else fill_value,
                        order=order, store=store, path=name, overwrite=overwrite,
                        storage_options=storage_options, synchronizer=synchronizer,
                        zarr_format=zarr_format, shards=shards, write_empty_chunks=wec,
                        dimension_names=dimension_names,
                        attributes=attrs or None if zarr_format == 3 else None, **enc, **kwargs)
    if attrs and zarr_format == 2:
        z.attrs.update(attrs)
    if data is not None and write_data:
        z[...] = data[...] if not isinstance(data, np.ndarray) else data
    return z


def from_array(store, *, data, write_data=True, name=None, chunks="keep", shards="keep",
               filters="keep", compressors="keep", serializer="keep", fill_value=None,
               order=None, zarr_format=None, attributes=None, chunk_key_encoding=None,
               dimension_names=None, storage_options=None, overwrite=False, config=None):
    """zarr-python 3's ``from_array``: a new array holding data (a NumPy array or an Array).
    "keep" takes the setting from a source Array (and the default for a NumPy array)."""
    from chunkstore.array import Array
    src = data if isinstance(data, Array) else None
    if src is not None:
        zarr_format = zarr_format or src.zarr_format
        if chunks == "keep":
            chunks = src.metadata.inner_chunks or src.chunks if src.zarr_format == 3 \
                else src.chunks
        if shards == "keep":
            shards = src.shards if src.zarr_format == 3 and zarr_format == 3 else None
        if fill_value is None:
            fill_value = src.fill_value
        if attributes is None:
            attributes = src.attrs.asdict()
        if src.zarr_format == zarr_format == 3:
            compressors = src.compressors if compressors == "keep" else compressors
            filters = src.filters if filters == "keep" else filters
            serializer = src.serializer if serializer == "keep" else serializer
        elif src.zarr_format == zarr_format == 2:
            compressors = src.compressor if compressors == "keep" else compressors
            filters = src.filters if filters == "keep" else filters
    kept = {k: "auto" if v == "keep" else v for k, v in
            (("chunks", chunks), ("filters", filters), ("compressors", compressors),
             ("serializer", serializer))}
    if shards == "keep":
        shards = None
    return create_array(store, name=name, data=data, write_data=write_data, shards=shards,
                        fill_value=fill_value, order=order,
                        zarr_format=zarr_format if zarr_format is not None else 3,
                        attributes=attributes, chunk_key_encoding=chunk_key_encoding,
                        dimension_names=dimension_names, storage_options=storage_options,
                        overwrite=overwrite, config=config, **kept)


def create_group(store, *, path=None, zarr_format=None, overwrite=False, attributes=None,
                 storage_options=None):
    """zarr-python 3's ``create_group``: a new group (Zarr v3 unless zarr_format=2), with
    attributes; raises if something is there unless overwrite=True."""
    from chunkstore.group import Group, _init_group
    from chunkstore.storage.base import normalize_store
    creation._check_format(zarr_format)
    zarr_format = _config.default_zarr_format(zarr_format, 3)
    store = normalize_store(store, mode="w" if overwrite else "a",
                            storage_options=storage_options)
    path = creation.normalize_path(path)
    _init_group(store, path, overwrite=overwrite, zarr_format=zarr_format)
    g = Group(store, path)
    if attributes:
        g.attrs.update(attributes)
    return g


def create_hierarchy(*, store, nodes, overwrite=False):
    """zarr-python 3's ``create_hierarchy``: create the groups and arrays described by nodes
    (path -> group or array metadata: the objects ``.metadata`` returns, or their
    ``to_dict()`` documents); yields (path, node) as each is created."""
    from chunkstore.storage.base import normalize_store
    store = normalize_store(store, mode="a")
    for path in sorted(nodes, key=lambda p: (p.strip("/").count("/"), p)):
        meta = nodes[path]
        doc = meta.to_dict() if hasattr(meta, "to_dict") else dict(meta)
        fmt = doc.get("zarr_format", 3)
        kind = doc.get("node_type") or ("array" if "shape" in doc else "group")
        if kind == "group":
            yield path, create_group(store, path=path, zarr_format=fmt, overwrite=overwrite,
                                     attributes=doc.get("attributes"))
        else:
            yield path, _array_from_doc(store, path, doc, fmt, overwrite)


def _array_from_doc(store, path, doc, fmt, overwrite):
    if fmt == 3:
        from chunkstore.metadata.v3 import decode_fill_value_v3, decode_data_type_v3
        dtype = decode_data_type_v3(doc["data_type"])
        return create_array(
            store, name=path, shape=doc["shape"], dtype=dtype,
            chunks=doc["chunk_grid"]["configuration"]["chunk_shape"], codecs=doc["codecs"],
            fill_value=decode_fill_value_v3(doc.get("fill_value"), dtype),
            attributes=doc.get("attributes"), dimension_names=doc.get("dimension_names"),
            chunk_key_encoding=doc.get("chunk_key_encoding"), overwrite=overwrite)
    return create_array(store, name=path, shape=doc["shape"], dtype=doc["dtype"],
                        chunks=doc["chunks"], compressors=doc.get("compressor"),
                        filters=doc.get("filters"), fill_value=doc.get("fill_value"),
                        order=doc.get("order"), zarr_format=2,
                        attributes=doc.get("attributes"), overwrite=overwrite)
