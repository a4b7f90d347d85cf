"""zarr-python 3.1's extension data types in Zarr v3, as it writes them (their names are
registered in zarr-extensions' ``data-types``):

- ``{"name": "null_terminated_bytes", "configuration": {"length_bytes": n}}``: NumPy ``S<n>``;
  fill value the base64 of its bytes (trailing NULs dropped, as NumPy drops them).
- ``{"name": "fixed_length_utf32", "configuration": {"length_bytes": 4k}}``: NumPy ``U<k>``;
  fill value a JSON string.
- ``{"name": "raw_bytes", "configuration": {"length_bytes": n}}``: NumPy ``V<n>`` (opaque
  bytes, not structured); fill value the base64 of its n bytes.
- ``{"name": "numpy.datetime64" | "numpy.timedelta64", "configuration": {"unit": u,
  "scale_factor": s}}``: NumPy ``M8[<s><u>]`` / ``m8[<s><u>]``; fill value the int64 count
  (NaT is -2**63, the default).

- ``"variable_length_bytes"``: bytes of any length, an object array (NumPy marks its dtype
  as h5py's vlen dtypes are marked: :data:`VLEN_BYTES`); fill value the base64 of its bytes;
  chunks through the ``vlen-bytes`` codec.

The fixed-size ones' chunks go through the ``bytes`` codec: UTF-32 code units and the int64
counts in the codec's byte order, bytes as they are.
"""

from __future__ import annotations

import base64
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

_BYTES = "null_terminated_bytes"
_RAW = "raw_bytes"
_UTF32 = "fixed_length_utf32"
_TIMES = {"numpy.datetime64": "M", "numpy.timedelta64": "m"}
NAMES = frozenset((_BYTES, _RAW, _UTF32, *_TIMES))
VLEN = "variable_length_bytes"  # (a bare name in the document, as zarr-python 3 writes it)
#: the dtype of variable-length bytes: object, marked (it equals np.dtype(object); only
#: is_vlen_bytes tells them apart, and object alone is the ``string`` data type)
VLEN_BYTES = np.dtype("O", metadata={"vlen": bytes})
_UNITS = ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "as",
          "generic")
NAT = np.iinfo(np.int64).min


def is_extension(obj: Any) -> bool:
    """Whether obj is the ``data_type`` document of one of these types."""
    return isinstance(obj, Mapping) and obj.get("name") in NAMES


def is_vlen_bytes(dtype: np.dtype) -> bool:
    """Whether dtype is VLEN_BYTES (an object dtype marked as variable-length bytes)."""
    meta = dtype.metadata
    return dtype.kind == "O" and meta is not None and meta.get("vlen") is bytes


def handles(dtype: np.dtype) -> bool:
    """Whether a NumPy dtype is stored as one of these types (V: unstructured only)."""
    if dtype.kind == "O":
        return is_vlen_bytes(dtype)
    return dtype.kind in "SUMmV" and dtype.fields is None and dtype.subdtype is None


def _positive_int(conf: Mapping, key: str, obj: Any) -> int:
    n = conf.get(key)
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"unsupported data type {obj.get('name')!r}: configuration {key!r} "
                         f"must be a positive integer, in {obj!r}")
    return n


def decode(obj: Mapping) -> np.dtype:
    """The NumPy dtype (native byte order) of an extension ``data_type`` document."""
    name = obj["name"]
    conf = obj.get("configuration")
    if not isinstance(conf, Mapping):
        raise ValueError(f"unsupported data type {name!r}: it needs a configuration, got "
                         f"{obj!r}")
    if name == _BYTES:
        return np.dtype(f"S{_positive_int(conf, 'length_bytes', obj)}")
    if name == _RAW:
        return np.dtype(f"V{_positive_int(conf, 'length_bytes', obj)}")
    if name == _UTF32:
        n = _positive_int(conf, "length_bytes", obj)
        if n % 4:
            raise ValueError(f"unsupported data type {name!r}: length_bytes must be a "
                             f"multiple of 4, in {obj!r}")
        return np.dtype(f"U{n // 4}")
    unit = conf.get("unit")
    if unit not in _UNITS:
        raise ValueError(f"unsupported data type {name!r}: unit must be one of {_UNITS}, "
                         f"in {obj!r}")
    scale = _positive_int(conf, "scale_factor", obj)
    unit = "us" if unit == "μs" else unit
    return np.dtype(f"{_TIMES[name]}8[{scale if scale != 1 else ''}{unit}]")


def encode(dtype: np.dtype) -> dict | str:
    """The ``data_type`` document of a NumPy S, U, V, datetime64 or timedelta64 dtype, or
    of VLEN_BYTES (its bare name)."""
    if dtype.kind == "O":
        return VLEN
    if dtype.kind == "S":
        if dtype.itemsize == 0:
            raise ValueError("unsupported data type S0 for Zarr v3 (zero-length bytes)")
        return {"name": _BYTES, "configuration": {"length_bytes": dtype.itemsize}}
    if dtype.kind == "V":
        if dtype.itemsize == 0:
            raise ValueError("unsupported data type V0 for Zarr v3 (zero-length raw bytes)")
        return {"name": _RAW, "configuration": {"length_bytes": dtype.itemsize}}
    if dtype.kind == "U":
        if dtype.itemsize == 0:
            raise ValueError("unsupported data type U0 for Zarr v3 (zero-length strings)")
        return {"name": _UTF32, "configuration": {"length_bytes": dtype.itemsize}}
    unit, scale = np.datetime_data(dtype)
    name = next(n for n, k in _TIMES.items() if k == dtype.kind)
    return {"name": name, "configuration": {"unit": unit, "scale_factor": int(scale)}}


def native(dtype: np.dtype) -> np.dtype:
    """dtype in native byte order (VLEN_BYTES as it is: it has none)."""
    return dtype if dtype.kind == "O" else dtype.newbyteorder("=")


def default_fill(dtype: np.dtype) -> Any:
    """zarr-python 3's default fill value: empty bytes or string, NaT for times."""
    if dtype.kind == "O":
        return b""
    if dtype.kind in "Mm":
        return np.array(NAT, dtype=np.int64).view(dtype)[()]
    return np.zeros((), dtype=dtype)[()]


def decode_fill(obj: Any, dtype: np.dtype) -> Any:
    """The fill value of dtype from its JSON."""
    if dtype.kind in "SVO":
        if not isinstance(obj, str):
            raise ValueError(f"fill_value of {dtype} must be a base64 string, got {obj!r}")
        try:
            raw = base64.b64decode(obj.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            raise ValueError(f"fill_value {obj!r} of {dtype} is not valid base64") from None
        if dtype.kind == "O":
            return raw
        if len(raw) > dtype.itemsize:
            raise ValueError(f"fill_value {obj!r} holds {len(raw)} bytes, more than {dtype} "
                             f"holds")
        return np.array(raw, dtype=dtype)[()]
    if dtype.kind == "U":
        if not isinstance(obj, str):
            raise ValueError(f"fill_value of {dtype} must be a string, got {obj!r}")
        if len(obj) > dtype.itemsize // 4:
            raise ValueError(f"fill_value {obj!r} is longer than {dtype} holds")
        return np.array(obj, dtype=dtype)[()]
    if obj == "NaT":
        return default_fill(dtype)
    if isinstance(obj, bool) or not isinstance(obj, int):
        raise ValueError(f"fill_value of {dtype} must be an integer count, got {obj!r}")
    return np.array(obj, dtype=np.int64).view(dtype)[()]


def coerce_fill(value: Any, dtype: np.dtype) -> Any:
    """A user's fill value as a NumPy scalar of dtype (None: the default)."""
    if value is None:
        return default_fill(dtype)
    if dtype.kind == "O":
        if isinstance(value, str):
            return value.encode("utf-8")
        if not isinstance(value, (bytes, bytearray, np.bytes_)):
            raise ValueError(f"fill_value {value!r} is not bytes (variable-length bytes)")
        return bytes(value)
    if dtype.kind == "V":
        if isinstance(value, np.void):
            raw = value.tobytes()
        elif isinstance(value, (bytes, bytearray)):
            raw = bytes(value)
        else:
            raw = None
        if raw is None or len(raw) > dtype.itemsize:
            raise ValueError(f"fill_value {value!r} is not {dtype.itemsize} raw bytes ({dtype})")
        return np.array(raw, dtype=dtype)[()]
    if dtype.kind in "SU":
        if dtype.kind == "S" and isinstance(value, str):
            value = value.encode("utf-8")
        if dtype.kind == "U" and isinstance(value, bytes):
            raise ValueError(f"fill_value {value!r} is bytes; {dtype} holds strings")
        arr = np.array(value, dtype=dtype)
        # (NumPy drops trailing NULs: b"a\x00" in S4 reads back b"a", and is the same value)
        nul = b"\x00" if dtype.kind == "S" else "\x00"
        size = dtype.itemsize if dtype.kind == "S" else dtype.itemsize // 4
        if len(value) > size or arr.item() != value.rstrip(nul):
            raise ValueError(f"fill_value {value!r} does not fit {dtype}")
        return arr[()]
    if isinstance(value, (np.datetime64, np.timedelta64)):  # (timedelta64 is Integral)
        if value.dtype.kind != dtype.kind:
            raise ValueError(f"fill_value {value!r} is not a {dtype} value")
        return np.array(value).astype(dtype)[()]
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return np.array(int(value), dtype=np.int64).view(dtype)[()]
    if isinstance(value, str) and value == "NaT":
        return default_fill(dtype)
    try:
        return np.array(value, dtype=dtype)[()]
    except (TypeError, ValueError):
        raise ValueError(f"fill_value {value!r} is not a {dtype} value") from None


def encode_fill(value: Any, dtype: np.dtype) -> Any:
    """The JSON fill_value (as zarr-python 3 writes it)."""
    v = coerce_fill(value, dtype)
    if dtype.kind in "SVO":
        return base64.b64encode(bytes(v)).decode("ascii")
    if dtype.kind == "U":
        return str(v)
    return int(np.array(v, dtype=dtype).view(np.int64))
