"""Zarr format 2's JSON spelling of data types (``.zarray`` ``dtype``) and fill values, and
how a user's fill value becomes a NumPy scalar of the array's dtype."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from chunkstore.metadata import ml_types
from chunkstore.metadata._common import (SPECIAL_FLOATS, decode_bool_fill, decode_int_fill,
                                         special_float_name, structured_array,
                                         value_bytes)

_INT64_MIN = int(np.iinfo(np.int64).min)


# --------------------------------------------------------------------------------------------
# dtype
# --------------------------------------------------------------------------------------------


def encode_dtype(dtype: Any) -> str | list:
    """Return the ``.zarray`` ``dtype`` value for ``dtype``.

    Simple dtypes become their ``dtype.str`` (``"<f8"``, ``"|b1"``, ``"|S5"``, ``"<U4"``,
    ``"<M8[ns]"``, ``"|O"``...); structured dtypes become the list-of-lists form of
    ``dtype.descr`` (``[["x", "<i4"], ["y", "<f8", [2]], ["inner", [["a", "|u1"]]]]``).
    """
    dtype = np.dtype(dtype)
    name = ml_types.name_of(dtype)
    if name is not None:  # ("bfloat16", as tensorstore writes it: its .str is "<V2")
        return name
    if dtype.fields is not None:
        return _descr_to_json(dtype.descr)
    if dtype.subdtype is not None:
        raise ValueError(f"sub-array dtype {dtype} cannot be an array dtype; use a larger shape")
    return dtype.str


def _descr_to_json(descr: list) -> list:
    out = []
    for entry in descr:
        name, fmt = entry[0], entry[1]
        if isinstance(name, tuple):  # (title, name) pairs
            raise ValueError("structured dtypes with field titles are not supported")
        item: list = [name, _descr_to_json(fmt) if isinstance(fmt, list) else fmt]
        if len(entry) > 2:
            item.append(list(entry[2]))
        out.append(item)
    return out


def decode_dtype(obj: Any) -> np.dtype:
    """Inverse of :func:`encode_dtype`; raises ValueError/TypeError for invalid input."""
    if isinstance(obj, str):
        return ml_types.lookup(obj) or np.dtype(obj)
    if isinstance(obj, (list, tuple)):
        return np.dtype(_json_to_descr(obj))
    raise TypeError(f"dtype must be a string or a list of fields, got {type(obj).__name__}")


def _json_to_descr(fields: Sequence) -> list:
    if len(fields) == 0:
        raise ValueError("a structured dtype needs at least one field")
    out: list[tuple] = []
    for f in fields:
        if not isinstance(f, (list, tuple)) or len(f) not in (2, 3):
            raise ValueError(f"invalid structured dtype field {f!r}")
        name, fmt = f[0], f[1]
        if not isinstance(name, str):
            raise ValueError(f"invalid structured dtype field name {name!r}")
        if isinstance(fmt, (list, tuple)):
            fmt = _json_to_descr(fmt)
        elif not isinstance(fmt, str):
            raise ValueError(f"invalid structured dtype field type {fmt!r}")
        if len(f) == 3:
            shape = f[2]
            if isinstance(shape, bool) or not isinstance(shape, (list, tuple, int)):
                raise ValueError(f"invalid structured dtype field shape {shape!r}")
            shape = (shape,) if isinstance(shape, int) else tuple(shape)
            if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
                raise ValueError(f"invalid structured dtype field shape {f[2]!r}")
            out.append((name, fmt, shape))
        else:
            out.append((name, fmt))
    return out


# --------------------------------------------------------------------------------------------
# fill value
# --------------------------------------------------------------------------------------------


def _encode_float(v: Any) -> Any:
    v = float(v)
    name = special_float_name(v)
    return v if name is None else name


def _decode_float(v: Any) -> float:
    if isinstance(v, str):
        if v in SPECIAL_FLOATS:
            return SPECIAL_FLOATS[v]
        return float(v)  # zarr-python 2 tolerates numeric strings; so do we
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"expected a number or 'NaN'/'Infinity'/'-Infinity', got {v!r}")
    return float(v)


def encode_fill_value(value: Any, dtype: Any) -> Any:
    """Return the JSON value for ``value`` as the ``fill_value`` of an array of ``dtype``.

    ``None`` stays ``None`` (JSON null). Floats use ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
    for non-finite values; complex values are ``[re, im]``; ``S`` values and structured/void
    values are base64 of their raw bytes; ``U`` values are the string; datetime64/timedelta64
    are their int64 count (NaT = int64 minimum); bools and ints are themselves. For object
    dtype the value must already be JSON-serialisable and is returned unchanged.
    """
    dtype = np.dtype(dtype)
    if value is None:
        return None
    kind = dtype.kind
    if kind == "O":
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, (bytes, bytearray)):
            # vlen-bytes fill values are base64 in JSON, as zarr-python 3 writes them.
            return base64.standard_b64encode(bytes(value)).decode("ascii")
        # Validate that it serialises.
        json.dumps(value, allow_nan=True)
        return value
    if ml_types.name_of(dtype) is not None:
        return ml_types.encode_fill(value, dtype)
    v = _coerce_fill(value, dtype)
    if kind == "f":
        return _encode_float(v)
    if kind == "c":
        return [_encode_float(v.real), _encode_float(v.imag)]
    if kind in "iu":
        return int(v)
    if kind == "b":
        return bool(v)
    if kind == "S":
        return base64.standard_b64encode(bytes(v)).decode("ascii")
    if kind == "V":
        return base64.standard_b64encode(value_bytes(v, dtype)).decode("ascii")
    if kind == "U":
        return str(v)
    if kind in "mM":
        return int(np.array(v, dtype=dtype.newbyteorder("=")).view(np.int64)[()])
    raise ValueError(f"unsupported dtype {dtype}")


def decode_fill_value(obj: Any, dtype: Any) -> Any:
    """Inverse of :func:`encode_fill_value`.

    Returns ``None`` for JSON null; otherwise a NumPy scalar of ``dtype`` (``np.void`` for
    structured/void dtypes). For object dtype, the JSON value is returned unchanged (e.g. ``""``
    for a vlen-utf8 array, or ``0``, which zarr-python 2 writes by default).
    Raises ValueError/TypeError for values that do not fit the dtype.
    """
    dtype = np.dtype(dtype)
    if obj is None:
        return None
    kind = dtype.kind
    if kind == "O":
        return obj
    if ml_types.name_of(dtype) is not None:
        return ml_types.decode_fill(obj, dtype)
    if kind == "f":
        return np.array(_decode_float(obj), dtype=dtype)[()]
    if kind == "c":
        if isinstance(obj, (list, tuple)):
            if len(obj) != 2:
                raise ValueError(f"complex fill_value must be [real, imag], got {obj!r}")
            re, im = _decode_float(obj[0]), _decode_float(obj[1])
        else:
            re, im = _decode_float(obj), 0.0
        return np.array(complex(re, im), dtype=dtype)[()]
    if kind in "iu":
        return decode_int_fill(obj, dtype, str(dtype))
    if kind == "b":
        return decode_bool_fill(obj)
    if kind == "S":
        if not isinstance(obj, str):
            raise ValueError(f"base64 string fill_value expected for {dtype}, got {obj!r}")
        raw = base64.b64decode(obj.encode("ascii"), validate=True)
        if len(raw) > dtype.itemsize:
            raise ValueError(f"fill_value has {len(raw)} bytes, more than {dtype} holds")
        return np.array(raw, dtype=dtype)[()]
    if kind == "V":
        if isinstance(obj, str):
            raw = base64.b64decode(obj.encode("ascii"), validate=True)
            if len(raw) != dtype.itemsize:
                raise ValueError(
                    f"fill_value has {len(raw)} bytes, expected {dtype.itemsize} for {dtype}"
                )
            return np.frombuffer(bytearray(raw), dtype=dtype)[0]
        if isinstance(obj, (list, tuple)) and dtype.fields is not None:
            # Not written by zarr-python 2, but unambiguous: one value per field.
            return np.array(_to_tuples(obj), dtype=dtype)[()]
        raise ValueError(f"base64 string fill_value expected for {dtype}, got {obj!r}")
    if kind == "U":
        if not isinstance(obj, str):
            raise ValueError(f"string fill_value expected for {dtype}, got {obj!r}")
        if len(obj) > dtype.itemsize // 4:
            raise ValueError(f"fill_value {obj!r} is longer than {dtype} holds")
        return np.array(obj, dtype=dtype)[()]
    if kind in "mM":
        if isinstance(obj, float) and obj.is_integer():
            obj = int(obj)
        if isinstance(obj, bool):
            raise ValueError(f"integer fill_value expected for {dtype}, got {obj!r}")
        if isinstance(obj, int):
            if not _INT64_MIN <= obj <= np.iinfo(np.int64).max:
                raise ValueError(f"fill_value {obj} out of int64 range")
            return np.array(obj, dtype=np.int64).view(dtype.newbyteorder("="))[()]
        if isinstance(obj, str):  # e.g. "NaT" or an ISO date; lenient
            return np.array(obj, dtype=dtype)[()]
        raise ValueError(f"integer fill_value expected for {dtype}, got {obj!r}")
    raise ValueError(f"unsupported dtype {dtype}")


def _to_tuples(obj: Any) -> Any:
    if isinstance(obj, list):
        return tuple(_to_tuples(o) for o in obj)
    return obj


def _coerce_fill(value: Any, dtype: np.dtype) -> Any:
    """Turn a user-supplied fill value into a NumPy scalar of ``dtype`` (None stays None)."""
    if value is None:
        return None
    if dtype.kind == "O":
        return value
    if ml_types.name_of(dtype) is not None:
        return ml_types.coerce_fill(value, dtype)
    if dtype.hasobject:
        # Its bytes would hold this process's object addresses: never written, never read.
        raise ValueError(f"a fill value for {dtype} (object fields) cannot be stored; use "
                         f"fill_value=None")
    try:
        result = _coerce_fill_scalar(value, dtype)
    except (TypeError, OverflowError) as e:
        raise ValueError(f"invalid fill_value {value!r} for {dtype}: {e}") from e
    if not isinstance(result, np.generic) or result.dtype.kind != dtype.kind:
        raise ValueError(f"fill_value {value!r} is not a single {dtype} value")
    return result


def _coerce_fill_scalar(value: Any, dtype: np.dtype) -> Any:
    kind = dtype.kind
    if isinstance(value, (np.datetime64, np.timedelta64)) and kind in "iufcb":
        # (NumPy takes a date's count in its unit: 1970-01-01T00:00:01 became 1.0; v3 and
        # zarr-python 3 refuse it)
        raise ValueError(f"fill_value {value!r} is a "
                         f"{'date' if isinstance(value, np.datetime64) else 'duration'}; "
                         f"{dtype} holds numbers")
    if kind in "SUV" and type(value) is int and value == 0:
        # zarr-python 2's default fill_value=0 means "empty" for string and void dtypes.
        return np.zeros((), dtype=dtype)[()]
    if kind == "V":
        if isinstance(value, (bytes, bytearray, memoryview)):
            # Fewer bytes are zero-padded, as NumPy and zarr-python 2 take them (b"" is
            # the all-zero value).
            raw = bytes(value).ljust(dtype.itemsize, b"\x00")
            if len(raw) != dtype.itemsize:
                raise ValueError(f"fill_value has {len(raw)} bytes, expected {dtype.itemsize}")
            return np.frombuffer(bytearray(raw), dtype=dtype)[0]
        if isinstance(value, np.ndarray) and value.dtype == dtype and value.size == 1:
            return value.reshape(()).copy()[()]
        if isinstance(value, list):
            value = _to_tuples(value)
        return structured_array(value, dtype)[()]
    if kind == "S":
        if isinstance(value, str):
            value = value.encode("ascii")
        if isinstance(value, (bytes, bytearray, memoryview, np.bytes_)):
            raw = bytes(value)
            if len(raw.rstrip(b"\x00")) > dtype.itemsize:
                raise ValueError(f"fill_value {raw!r} is longer than {dtype} holds")
            return np.array(raw, dtype=dtype)[()]
        raise ValueError(f"bytes fill_value expected for {dtype}, got {value!r}")
    if kind == "U":
        if not isinstance(value, str):
            raise ValueError(f"str fill_value expected for {dtype}, got {value!r}")
        if len(value.rstrip("\x00")) > dtype.itemsize // 4:
            raise ValueError(f"fill_value {value!r} is longer than {dtype} holds")
        return np.array(value, dtype=dtype)[()]
    if kind in "iu":
        if isinstance(value, (float, np.floating)) and not float(value).is_integer():
            raise ValueError(f"fill_value {value!r} is not an integer")
        if isinstance(value, (float, np.floating)):
            value = int(value)
        ivalue = int(value)
        info = np.iinfo(dtype)
        if not info.min <= ivalue <= info.max:
            raise ValueError(f"fill_value {value!r} out of range for {dtype}")
        return np.array(ivalue, dtype=dtype)[()]
    if kind in "mM":
        if isinstance(value, (np.datetime64, np.timedelta64)):  # timedelta64 is an np.integer
            if value.dtype.kind != kind:
                # (NumPy takes a date's count for a duration's: 2020 (50 years) as 50 s)
                raise ValueError(f"fill_value {value!r} is a "
                                 f"{'date' if value.dtype.kind == 'M' else 'duration'}; "
                                 f"{dtype} holds {'dates' if kind == 'M' else 'durations'}")
            return np.array(value, dtype=dtype)[()]
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            return decode_fill_value(int(value), dtype)
        return np.array(value, dtype=dtype)[()]
    if kind == "c" and isinstance(value, (list, tuple)):
        return decode_fill_value(list(value), dtype)
    if kind in "fcb":
        if isinstance(value, str):
            if kind == "f":
                value = _decode_float(value)
            else:
                raise ValueError(f"invalid fill_value {value!r} for {dtype}")
        return np.array(value, dtype=dtype)[()]
    raise ValueError(f"unsupported dtype {dtype}")
