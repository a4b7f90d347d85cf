"""Zarr format 3's data types (``data_type`` names, NumPy dtypes always native: the ``bytes``
codec records the byte order) and fill values (JSON spelling, and how a user's fill value
becomes a NumPy scalar of the data type)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from chunkstore.metadata import extension_v3 as _extension
from chunkstore.metadata import ml_types
from chunkstore.metadata import structured_v3 as _structured
from chunkstore.metadata._common import (SPECIAL_FLOATS, decode_bool_fill, decode_int_fill,
                                         special_float_name)


# --------------------------------------------------------------------------------------------
# data types
# --------------------------------------------------------------------------------------------

_NUMERIC = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64", "complex64", "complex128")
_DATA_TYPES = {name: np.dtype(name) for name in _NUMERIC}
_DATA_TYPES["string"] = np.dtype(object)
_DATA_TYPES[_extension.VLEN] = _extension.VLEN_BYTES
_NAMES = {np.dtype(name): name for name in _NUMERIC}  # native dtype -> its v3 name


def decode_data_type_v3(obj: Any) -> np.dtype:
    """NumPy dtype of a v3 ``data_type`` (a name, or ``{"name": ...}`` without configuration).

    Raises ValueError ``unsupported data type '<name>'`` for anything else.
    """
    name = obj
    if _structured.is_structured(obj):
        return _structured.decode(obj)
    if _extension.is_extension(obj):
        return _extension.decode(obj)
    if isinstance(obj, Mapping):
        name = obj.get("name")
        conf = obj.get("configuration")
        if conf not in (None, {}):
            raise ValueError(f"unsupported data type {obj!r}")
    ml = ml_types.lookup(name)
    if ml is not None:
        return ml
    if not isinstance(name, str) or name not in _DATA_TYPES:
        shown = name if isinstance(name, str) else obj
        raise ValueError(f"unsupported data type {shown!r}")
    return _DATA_TYPES[name]


def encode_data_type_v3(dtype: Any) -> str | dict:
    """The v3 ``data_type`` name of a NumPy dtype (or of a v3 name: returned as is).

    Byte order is ignored (the ``bytes`` codec records it); ``object`` means ``string``.
    """
    if isinstance(dtype, str) and dtype in _DATA_TYPES:
        return dtype
    if dtype is str:
        return "string"
    d = np.dtype(dtype)
    if d.hasobject:
        if _extension.is_vlen_bytes(d):
            return _extension.VLEN
        if d != np.dtype(object):
            raise ValueError(f"unsupported data type {d} for Zarr v3")
        return "string"
    if d.fields is not None and d.subdtype is None:
        return _structured.encode(d)
    ml = ml_types.name_of(d)
    if ml is not None:  # (before the extension types: its kind is "V", as raw bytes')
        return ml
    if _extension.handles(d):
        return _extension.encode(d)
    if d.fields is not None or d.subdtype is not None:
        raise ValueError(f"unsupported data type {d} for Zarr v3")
    name = _NAMES.get(d.newbyteorder("="))  # (dtype.name is slow: NumPy works it out)
    if name is None:
        raise ValueError(f"unsupported data type {d} for Zarr v3")
    return name


def _to_dtype(dtype: Any) -> np.dtype:
    """Normalise a dtype-like (NumPy dtype, v3 name, ``str``) to the native NumPy dtype."""
    name = encode_data_type_v3(dtype)
    if isinstance(name, dict):  # structured, or an extension type
        if _structured.is_structured(name):
            return _structured.native(np.dtype(dtype))
        return _extension.native(_extension.decode(name))
    return ml_types.lookup(name) or _DATA_TYPES[name]


# --------------------------------------------------------------------------------------------
# fill values
# --------------------------------------------------------------------------------------------

_CANONICAL_NAN = {2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000}
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _decode_float(v: Any, dtype: np.dtype) -> Any:
    """A float fill component: a number, "NaN", "Infinity", "-Infinity" or "0x<hex bits>"."""
    if isinstance(v, str):
        if v in SPECIAL_FLOATS:
            return np.array(SPECIAL_FLOATS[v], dtype=dtype)[()]
        if v.startswith("0x"):
            size = dtype.itemsize
            digits = v[2:]
            if len(digits) != 2 * size:
                raise ValueError(f"hex fill value {v!r} must have {2 * size} hex digits for "
                                 f"{dtype}")
            bits = int(digits, 16)
            return np.array(bits, dtype=_UINT[size]).view(dtype)[()]
        raise ValueError(f"invalid float fill value {v!r}")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"expected a number, 'NaN', 'Infinity', '-Infinity' or a hex string, "
                         f"got {v!r}")
    return np.array(v, dtype=dtype)[()]


def _encode_float(v: Any) -> Any:
    """A float fill component as JSON: number, special string, or hex for unusual NaNs."""
    v = np.asarray(v)
    f = float(v)
    if math.isnan(f):
        size = v.dtype.itemsize
        bits = int(v.view(_UINT[size]))
        if bits == _CANONICAL_NAN[size]:
            return "NaN"
        return "0x" + format(bits, f"0{2 * size}x")
    name = special_float_name(f)
    return f if name is None else name


def decode_fill_value_v3(obj: Any, dtype: Any) -> Any:
    """The fill value for ``dtype`` (native) from its JSON: a NumPy scalar, or a ``str`` for
    ``string``. Raises ValueError if it does not fit the type."""
    dtype = _to_dtype(dtype)
    kind = dtype.kind
    if obj is None:
        raise ValueError("fill_value must not be null in Zarr v3")
    family = _family(dtype)
    if family is not None:
        return family.decode_fill(obj, dtype)
    if kind == "O":
        if not isinstance(obj, str):
            raise ValueError(f"string fill_value expected, got {obj!r}")
        return obj
    if kind == "b":
        # the spec says true/false; 0 and 1 are accepted from lenient writers
        return decode_bool_fill(obj, "boolean fill_value expected (true/false)")
    if kind in "iu":
        return decode_int_fill(obj, dtype, dtype.name)
    if kind == "f":
        return _decode_float(obj, dtype)
    if kind == "c":
        if not isinstance(obj, (list, tuple)) or len(obj) != 2:
            raise ValueError(f"complex fill_value must be [real, imag], got {obj!r}")
        part = np.dtype(f"f{dtype.itemsize // 2}")
        re_, im_ = _decode_float(obj[0], part), _decode_float(obj[1], part)
        out = np.zeros((), dtype=dtype)
        out.real, out.imag = re_, im_
        return out[()]
    raise ValueError(f"unsupported data type {dtype}")  # pragma: no cover


def encode_fill_value_v3(value: Any, dtype: Any) -> Any:
    """The JSON ``fill_value`` of ``value`` for ``dtype`` (as zarr-python 3 writes it)."""
    dtype = _to_dtype(dtype)
    v = _coerce_fill(value, dtype)
    kind = dtype.kind
    family = _family(dtype)
    if family is not None:
        return family.encode_fill(v, dtype)
    if kind == "O":
        return v
    if kind == "b":
        return bool(v)
    if kind in "iu":
        return int(v)
    if kind == "f":
        return _encode_float(v)
    arr = np.asarray(v)
    return [_encode_float(arr.real), _encode_float(arr.imag)]


def _family(dtype: np.dtype) -> Any:
    """The module that spells dtype's fill values when it is neither a number, a boolean nor
    ``string``: structured_v3 or extension_v3 (None otherwise)."""
    if dtype.fields is not None:
        return _structured
    if ml_types.name_of(dtype) is not None:
        return ml_types
    return _extension if _extension.handles(dtype) else None


def _default_fill(dtype: np.dtype) -> Any:
    if _extension.handles(dtype) and ml_types.name_of(dtype) is None:
        return _extension.default_fill(dtype)
    if dtype.hasobject:
        return ""
    return np.zeros((), dtype=dtype)[()]


def _coerce_fill(value: Any, dtype: np.dtype) -> Any:
    """A user or parsed fill value as a NumPy scalar of ``dtype`` (``str`` for ``string``)."""
    if value is None:
        return _default_fill(dtype)
    kind = dtype.kind
    family = _family(dtype)
    if family is not None:
        return family.coerce_fill(value, dtype)
    if kind == "O":
        if isinstance(value, np.str_):
            value = str(value)
        if not isinstance(value, str):
            raise ValueError(f"string fill_value expected for the string data type, "
                             f"got {value!r}")
        return value
    if isinstance(value, (str, list)) and not isinstance(value, np.str_):
        return decode_fill_value_v3(value, dtype)  # JSON forms: "NaN", "0x...", [re, im]
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise ValueError(f"fill_value must be a single value, got an array of {value.size}")
        value = value.reshape(())
        value = value.item() if value.dtype.kind != dtype.kind else value[()]
    if kind == "b":
        if not isinstance(value, (bool, np.bool_)) and not (
                isinstance(value, numbers.Integral) and value in (0, 1)):
            raise ValueError(f"boolean fill_value expected, got {value!r}")
        return np.bool_(bool(value))
    if kind in "iu":
        if isinstance(value, (bool, np.bool_)):
            raise ValueError(f"integer fill_value expected, got {value!r}")
        if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
            if not float(value).is_integer():
                raise ValueError(f"fill_value {value!r} is not an integer")
            # typeshed's int() takes no numbers.Real (Real.__trunc__ returns a protocol)
            value = int(value)  # type: ignore[call-overload]
        if not isinstance(value, numbers.Integral):
            raise ValueError(f"integer fill_value expected, got {value!r}")
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise ValueError(f"fill_value {value} out of range for {dtype.name}")
        return np.array(int(value), dtype=dtype)[()]
    if kind == "f":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ValueError(f"float fill_value expected, got {value!r}")
        return np.array(value, dtype=dtype)[()]
    if kind == "c":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Number):
            raise ValueError(f"complex fill_value expected, got {value!r}")
        return np.array(value, dtype=dtype)[()]
    raise ValueError(f"unsupported data type {dtype}")  # pragma: no cover
