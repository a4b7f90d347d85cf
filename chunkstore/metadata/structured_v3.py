"""Structured data types in Zarr v3, as zarr-python 3.1 writes them:
``{"name": "structured", "configuration": {"fields": [["a", "int32"], ...]}}`` with the fill
value as base64 of its bytes. Fields are stored little-endian (the ``bytes`` codec has no
endian for them)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import numpy as np

_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128")


def is_structured(obj: Any) -> bool:
    """Whether *obj* is a Zarr v3 structured data type document (a mapping named
    ``"structured"``).
    """
    return isinstance(obj, Mapping) and obj.get("name") == "structured"


def _field_type(obj: Any) -> np.dtype:
    if isinstance(obj, str) and obj in _NAMES:
        return np.dtype(obj).newbyteorder("<")
    if isinstance(obj, Mapping) and obj.get("name") == "null_terminated_bytes":
        n = (obj.get("configuration") or {}).get("length_bytes")
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return np.dtype(f"S{n}")
    if is_structured(obj):
        return decode(obj)
    raise ValueError(f"unsupported data type {obj!r} (a structured field)")


def decode(obj: Mapping) -> np.dtype:
    """The NumPy dtype (fields little-endian) of a structured ``data_type``."""
    fields = (obj.get("configuration") or {}).get("fields")
    if not isinstance(fields, list) or not fields:
        raise ValueError(f"structured data type needs a non-empty list of fields, got {obj!r}")
    out = []
    for f in fields:
        if not isinstance(f, (list, tuple)) or len(f) != 2 or not isinstance(f[0], str):
            raise ValueError(f"structured data type field must be [name, type], got {f!r}")
        out.append((f[0], _field_type(f[1])))
    try:
        return np.dtype(out)
    except (TypeError, ValueError) as e:
        raise ValueError(f"invalid structured data type {obj!r}: {e}") from None


def _field_json(d: np.dtype) -> Any:
    if d.fields is not None:
        return encode(d)
    if d.kind == "S":
        return {"name": "null_terminated_bytes", "configuration": {"length_bytes": d.itemsize}}
    name = d.newbyteorder("=").name
    if d.subdtype is not None or name not in _NAMES:
        raise ValueError(f"unsupported data type {d} (a structured field) for Zarr v3")
    return name


def encode(dtype: np.dtype) -> dict:
    """The ``data_type`` document of a structured NumPy dtype."""
    fields, names = dtype.fields, dtype.names
    assert fields is not None and names is not None  # callers pass a structured dtype
    if any(fields[n][1] != off for n, off in zip(names, _packed_offsets(dtype))):
        raise ValueError(f"structured data type {dtype} has padding; Zarr v3 needs packed fields")
    return {"name": "structured", "configuration": {
        "fields": [[n, _field_json(fields[n][0])] for n in names]}}


def _packed_offsets(dtype):
    off = 0
    for n in dtype.names:
        yield off
        off += dtype.fields[n][0].itemsize


def native(dtype: np.dtype) -> np.dtype:
    """The dtype decoded chunks hold: fields little-endian, as stored."""
    return decode(encode(dtype))


def encode_fill(value: Any, dtype: np.dtype) -> str:
    """The fill value *value* of structured dtype *dtype* as base64 text of its bytes."""
    return base64.standard_b64encode(np.asarray(value, dtype=dtype).tobytes()).decode("ascii")


def decode_fill(obj: Any, dtype: np.dtype) -> Any:
    """The scalar of structured dtype *dtype* encoded as base64 text in *obj*.

    Raises ``ValueError`` if *obj* is not base64 text of exactly ``dtype.itemsize`` bytes.
    """
    if not isinstance(obj, str):
        raise ValueError(f"structured fill_value must be base64 text, got {obj!r}")
    try:
        raw = base64.standard_b64decode(obj.encode("ascii"))
    except (ValueError, UnicodeEncodeError) as e:
        raise ValueError(f"structured fill_value is not base64: {e}") from None
    if len(raw) != dtype.itemsize:
        raise ValueError(f"structured fill_value has {len(raw)} bytes, the data type "
                         f"{dtype.itemsize}")
    return np.frombuffer(raw, dtype=dtype)[0]


def coerce_fill(value: Any, dtype: np.dtype) -> Any:
    """*value* as a scalar of structured dtype *dtype*.

    None and 0 give zeros; a string is decoded as base64 (see :func:`decode_fill`); bytes are taken
    as the raw value; anything else goes through NumPy (a list as a tuple). Raises ``ValueError``
    where the value does not fit the dtype.
    """
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                         and value == 0):
        return np.zeros((), dtype=dtype)[()]
    if isinstance(value, str):
        return decode_fill(value, dtype)
    if isinstance(value, bytes):
        # the raw record: shorter bytes are padded with zeros (b"" is all zeros, as in v2)
        if len(value) > dtype.itemsize:
            raise ValueError(f"fill_value {value!r} is {len(value)} bytes; {dtype} records "
                             f"are {dtype.itemsize}")
        return np.frombuffer(value.ljust(dtype.itemsize, b"\x00"), dtype=dtype)[0]
    try:
        return np.array(value if not isinstance(value, list) else tuple(value),
                        dtype=dtype)[()]
    except (TypeError, ValueError) as e:
        raise ValueError(f"fill_value {value!r} does not fit {dtype}: {e}") from None
