"""Creation arguments as zarr-python 2 (and h5py) users spell them, turned into chunkstore's.

- dtype: ``str``/``bytes`` (the types or names) are object arrays with VLenUTF8/VLenBytes,
  ``"array:<dtype>"`` is an object array with VLenArray, as in zarr-python 2; data types
  that cannot be stored faithfully (zero-size strings, unit-less datetimes) are refused.
- compressor: ``None``, ``False``, ``""`` and ``"none"`` all mean no compressor.
- h5py keywords: ``compression=`` / ``compression_opts=`` and ``fillvalue=``.
- chunks taken from an input that has them (``.chunks`` of an h5py dataset, bcolz
  ``.chunklen``).
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numcodecs
import numpy as np

from chunkstore.metadata._common import leaf_dtypes, unitless_time
from chunkstore.metadata.extension_v3 import is_vlen_bytes

from chunkstore import config
from chunkstore.metadata.zarr3_view import creation_kwargs, parse_chunk_key_encoding

# zarr-python 2's object-array shortcuts: dtype name -> numcodecs codec id.
_OBJECT_SHORTCUTS = {"str": "vlen-utf8", "bytes": "vlen-bytes", "array": "vlen-array"}
_OBJECT_CODECS = {"vlen-utf8": numcodecs.VLenUTF8, "vlen-bytes": numcodecs.VLenBytes,
                  "vlen-array": numcodecs.VLenArray}


def normalize_dtype(dtype: Any, object_codec: Any = None) -> tuple[np.dtype, Any]:
    """(np.dtype, object_codec) for a user's dtype argument; ValueError if unusable."""
    if dtype is None:
        return np.dtype("f8"), object_codec
    dtype = zdtype_spelling(dtype)
    if isinstance(dtype, type) and dtype in (str, bytes):
        dtype = dtype.__name__
    if isinstance(dtype, str):
        key, _, arg = dtype.partition(":")
        codec_id = _OBJECT_SHORTCUTS.get(key)
        if codec_id is not None:
            if object_codec is None:
                cls = _OBJECT_CODECS[codec_id]
                try:
                    object_codec = cls(arg) if arg else cls()
                except TypeError as e:
                    raise ValueError(f"dtype {dtype!r}: {codec_id} needs an element dtype, "
                                     f"e.g. 'array:i4'") from e
            elif getattr(object_codec, "codec_id", None) != codec_id:
                raise ValueError(f"dtype {dtype!r} means an object array with the {codec_id} "
                                 f"codec, but object_codec={object_codec!r} was given")
            return np.dtype(object), object_codec
    try:
        dt = np.dtype(dtype)
    except TypeError as e:  # NumPy's error type, as zarr-python 2 lets it through
        raise TypeError(f"invalid dtype {dtype!r}: {e}") from e
    if dt.kind == "T":  # NumPy's StringDType ("T"): variable-length strings, as dtype=str
        return normalize_dtype("str", object_codec)
    dt = without_metadata(dt)
    _check_storable(dt, dt)
    return dt, object_codec


def without_metadata(dt: np.dtype) -> np.dtype:
    """dt without the metadata a library attaches to it or to a field's (h5py's string
    encoding on a compound dataset's fields): no Zarr document holds it, and a field's
    made the v2 dtype unreadable ("invalid structured dtype field '|S3'")."""
    if dt.names is not None:
        fields = dt.fields
        assert fields is not None
        return np.dtype({"names": list(dt.names),
                         "formats": [without_metadata(fields[n][0]) for n in dt.names],
                         "offsets": [fields[n][1] for n in dt.names],
                         "itemsize": dt.itemsize})
    if dt.subdtype is not None:
        return np.dtype((without_metadata(dt.subdtype[0]), dt.subdtype[1]))
    return np.dtype(dt.str) if dt.metadata and dt.kind != "O" else dt


#: zarr-python 3's variable-length data types (by class name) -> the dtype name meaning them
_VARIABLE_LENGTH = {"VariableLengthUTF8": "str", "VariableLengthBytes": "bytes"}


def zdtype_spelling(dtype: Any) -> Any:
    """dtype, with a zarr-python 3 data type object (zarr's own, or chunkstore.dtype's: one
    with ``to_native_dtype()``) as the dtype it stands for: the variable-length ones as
    "str"/"bytes" (an object array with its codec), others as their NumPy dtype; NumPy's
    variable-length StringDType as "str", a variable-length bytes array's dtype as "bytes"."""
    name = _VARIABLE_LENGTH.get(type(dtype).__name__)
    if name is not None:
        return name
    native = getattr(dtype, "to_native_dtype", None)
    if callable(native) and not isinstance(dtype, (type, np.dtype)):
        dtype = native()
    if isinstance(dtype, np.dtype) and dtype.kind == "T":
        return "str"
    if isinstance(dtype, np.dtype) and is_vlen_bytes(dtype):
        return "bytes"  # (a variable-length bytes array's own dtype)
    return dtype


def _check_storable(dt, whole):
    for leaf in leaf_dtypes(dt):
        if leaf.kind in "SUV" and leaf.itemsize == 0:
            raise ValueError(f"data type {whole} has a zero-size {leaf}: give a length (e.g. "
                             f"'S10', 'U10') or use dtype=str / dtype=bytes for "
                             f"variable-length values")
        if unitless_time(leaf):
            raise ValueError(f"data type {whole} has no time unit ({leaf.str}): each write "
                             f"would store values in its own unit; give one, e.g. 'M8[ns]' "
                             f"or 'm8[s]'")


def is_no_compressor(compressor):
    """None, False, "", "none" (any case) and an empty list or tuple ask for no compressor,
    as zarr-python 2 allows (it takes any falsy compressor as none)."""
    if compressor is None or compressor is False:
        return True
    if isinstance(compressor, (list, tuple)):
        return not compressor
    return isinstance(compressor, str) and compressor.strip().lower() in ("", "none")


def h5py_compat(compressor, fill_value, kwargs):
    """Apply zarr-python 2's h5py-compatible keywords, removing them from kwargs.

    compression (a numcodecs codec id, "none"/None, "default", or a codec) with
    compression_opts (one argument, a tuple of arguments or a dict), and fillvalue.
    An explicit compressor wins over compression (with a warning, as in zarr-python 2)."""
    if "compression" in kwargs or "compression_opts" in kwargs:
        compression = kwargs.pop("compression", "default")
        opts = kwargs.pop("compression_opts", None)
        if compressor != "default":
            from chunkstore.errors import ZarrUserWarning
            warnings.warn("'compression' and 'compression_opts' are overridden by "
                          "'compressor'", ZarrUserWarning, stacklevel=3)
        else:
            compressor = _compressor_from_h5py(compression, opts)
    if "fillvalue" in kwargs:
        fill_value = kwargs.pop("fillvalue")  # h5py's spelling wins, as in zarr-python 2
    return compressor, fill_value


def _compressor_from_h5py(compression, opts):
    if compression is None or (isinstance(compression, str) and is_no_compressor(compression)):
        return None
    if compression == "default":
        return "default"
    if hasattr(compression, "get_config"):
        return compression
    if not isinstance(compression, str):
        raise ValueError(f"bad value for compression: {compression!r}")
    try:
        cls = type(numcodecs.get_codec({"id": compression}))
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"unknown compression {compression!r}: not a numcodecs codec id "
                         f"(e.g. 'gzip', 'zstd', 'blosc', 'lz4')") from e
    try:
        if isinstance(opts, dict):
            return cls(**opts)
        if isinstance(opts, (list, tuple)):
            return cls(*opts)
        return cls() if opts is None else cls(opts)
    except (TypeError, ValueError) as e:
        raise ValueError(f"invalid compression_opts {opts!r} for {compression!r}: {e}") from e


def chunks_of(data):
    """The chunk shape an input carries (h5py's .chunks, bcolz's .chunklen), or None."""
    shape = getattr(data, "shape", None)
    if not isinstance(shape, tuple):
        return None
    chunks = getattr(data, "chunks", None)
    if isinstance(chunks, tuple) and len(chunks) == len(shape) and \
            all(isinstance(c, numbers.Integral) for c in chunks):
        return tuple(int(c) for c in chunks)
    chunklen = getattr(data, "chunklen", None)
    if isinstance(chunklen, numbers.Integral) and shape:
        return (int(chunklen),) + shape[1:]
    return None


#: zarr-python 3's array config keys (create_array(config=), create(config=))
_ARRAY_CONFIG = {"order", "write_empty_chunks"}


def array_config(config: Any) -> tuple[Any, Any]:
    """(order, write_empty_chunks) from zarr-python 3's ``config=`` over the global config;
    ValueError naming an unknown key."""
    from chunkstore import config as _config
    config = dict(config or {})
    unknown = set(config) - _ARRAY_CONFIG
    if unknown:
        raise ValueError(f"config: unknown key(s) {', '.join(sorted(unknown))}; known: "
                         f"{', '.join(sorted(_ARRAY_CONFIG))}")
    order = config.get("order", _config.get("array.order"))
    wec = config.get("write_empty_chunks", _config.get("array.write_empty_chunks"))
    return order, wec


def zarr3_create_args(kwargs: dict, chunks: Any, order: Any, write_empty_chunks: bool | None,
                      dimension_separator: Any) -> tuple[Any, str, bool, Any]:
    """create()'s chunks, order, write_empty_chunks and dimension_separator with zarr-python
    3's spellings taken out of kwargs: chunk_shape (chunks), chunk_key_encoding (a dict or
    "v2"/"default" name, or a separator), config ({"order", "write_empty_chunks"})."""
    chunk_shape = kwargs.pop("chunk_shape", None)
    if chunk_shape is not None:
        if chunks not in (True, None) and tuple(np.atleast_1d(chunks)) != tuple(
                np.atleast_1d(chunk_shape)):
            # zarr-python 3's words (it refuses both even where equal), then chunkstore's
            raise ValueError(f"Only one of chunk_shape or chunks can be provided. "
                             f"(chunks={chunks!r} and chunk_shape={chunk_shape!r} disagree)")
        chunks = chunk_shape
    cke = kwargs.pop("chunk_key_encoding", None)
    if cke is not None:
        if dimension_separator is not None:
            raise ValueError("give chunk_key_encoding or dimension_separator, not both")
        # a bare separator stays one (either format); any other spelling (a name, a dict, a
        # (name, separator) pair as zarr-python 3's create takes) becomes the whole encoding
        dimension_separator = cke if isinstance(cke, str) and cke in (".", "/") else \
            parse_chunk_key_encoding(cke)
    order, write_empty_chunks = take_config(kwargs, order, write_empty_chunks)
    return chunks, order, write_empty_chunks, dimension_separator


def peer_args(kwargs: dict, compressor: Any, fill_value: Any, chunks: Any, order: Any,
              write_empty_chunks: bool | None, dimension_separator: Any) -> tuple:
    """create()'s and open_array()'s zarr-python 2 h5py keywords (h5py_compat) and
    zarr-python 3 spellings (zarr3_create_args) taken out of kwargs: (compressor,
    fill_value, chunks, order, write_empty_chunks, dimension_separator)."""
    compressor, fill_value = h5py_compat(compressor, fill_value, kwargs)
    return (compressor, fill_value,
            *zarr3_create_args(kwargs, chunks, order, write_empty_chunks, dimension_separator))


def take_config(kwargs: dict, order: Any, write_empty_chunks: bool | None) -> tuple[str, bool]:
    """(order, write_empty_chunks) with zarr-python 3's config={"order",
    "write_empty_chunks"} taken out of kwargs. As zarr-python 3's, an explicit keyword
    wins over config=, and config= over the configured array.order and
    array.write_empty_chunks (None is "not given")."""
    cfg_order, cfg_wec = array_config(kwargs.pop("config", None))
    return (cfg_order or "C") if order is None else order, \
        bool(cfg_wec) if write_empty_chunks is None else write_empty_chunks


def zarr3_encoding_args(kwargs: dict, zarr_format: int, dtype: Any, shape: Any,
                        compressor: Any, filters: Any, codecs: Any,
                        object_codec: Any) -> tuple[Any, Any, Any, Any]:
    """create()'s (compressor, filters, codecs, object_codec) with zarr-python 3's
    create_array spellings taken out of kwargs: ``compressors`` and ``serializer`` (dask's
    to_zarr and ome-zarr-py pass them to whichever create they find)."""
    given = {k: kwargs.pop(k) for k in ("compressors", "serializer") if k in kwargs}
    if not given:
        return compressor, filters, codecs, object_codec
    if codecs is not None or not (isinstance(compressor, str) and compressor == "default"):
        raise ValueError(f"give {' and '.join(given)} (zarr-python 3's spelling) or "
                         "compressor=/codecs=, not both")
    ndim = len(shape) if isinstance(shape, (tuple, list)) else 1
    _, kw = creation_kwargs(zarr_format, np.dtype(dtype if dtype is not None else "f8"), ndim,
                            filters="auto" if filters is None else filters, **given)
    # v2: compressor and filters; v3: the whole chain in codecs (filters are in it)
    return (kw.get("compressor", compressor), kw.get("filters"), kw.get("codecs"),
            kw.get("object_codec", object_codec))
