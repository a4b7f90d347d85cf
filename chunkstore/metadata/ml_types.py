"""The machine-learning number types of the ``ml_dtypes`` package (bfloat16, the float8,
float6 and float4 types, int4/uint4/int2/uint2) as Zarr data types: named as tensorstore and
zarrs write them, ``"bfloat16"`` both as a Zarr v2 ``dtype`` and as a v3 ``data_type``, one
element a byte (two for bfloat16, little-endian), fill values as JSON numbers (v2: null
too). NumPy knows these types only once ``ml_dtypes`` is imported: a document naming one
imports it, and says so where it is missing. Their NumPy kind is "V" (raw bytes) or, for
float8_e5m2, "f" with the unreadable spelling "<f1": without this module they were stored
as raw bytes ("<V2", v3 ``raw_bytes``) that no write could then cast to."""

from __future__ import annotations

import math
import string
from typing import Any

import numpy as np

from chunkstore.metadata._common import SPECIAL_FLOATS, special_float_name

#: the ml_dtypes types with a Zarr name (that of the type in ml_dtypes, NumPy, tensorstore and
#: zarrs alike)
NAMES = ("bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3fn", "float8_e4m3fnuz",
         "float8_e4m3b11fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
         "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "int4", "uint4", "int2", "uint2")
_INTEGERS = ("int4", "uint4", "int2", "uint2")


def lookup(name: Any) -> np.dtype | None:
    """The NumPy dtype of a Zarr name of an ml_dtypes type; None for any other name.
    ValueError where the ``ml_dtypes`` package is missing or lacks the type."""
    if not isinstance(name, str) or name not in NAMES:
        return None
    try:
        import ml_dtypes
    except ImportError:
        raise ValueError(f"data type {name!r} needs the ml_dtypes package "
                         f"(pip install ml-dtypes)") from None
    t = getattr(ml_dtypes, name, None)
    if t is None:
        raise ValueError(f"data type {name!r} is not in this ml_dtypes "
                         f"({getattr(ml_dtypes, '__version__', '?')}): a newer one has it")
    return np.dtype(t)


def name_of(dtype: np.dtype) -> str | None:
    """The Zarr name of dtype where it is an ml_dtypes type, else None."""
    if dtype.kind not in "Vf" or dtype.fields is not None:
        return None
    name = dtype.type.__name__
    if name in NAMES and dtype.type.__module__.split(".")[0] == "ml_dtypes":
        return name
    return None


def decode_fill(obj: Any, dtype: np.dtype) -> Any:
    """The fill value of JSON obj (a number, or "NaN"/"Infinity"/"-Infinity" for the float
    types) for ml_dtypes type dtype, a scalar of it. ValueError for anything else, or a
    value the type cannot hold."""
    name = name_of(dtype)
    if isinstance(obj, bool):
        raise ValueError(f"a number fill_value expected for {name}, got {obj!r}")
    if name in _INTEGERS:
        if isinstance(obj, float) and obj.is_integer():
            obj = int(obj)
        if not isinstance(obj, int):
            raise ValueError(f"an integer fill_value expected for {name}, got {obj!r}")
        value = np.array(obj).astype(dtype)
        if int(value) != obj:
            raise ValueError(f"fill_value {obj} is out of the range of {name}")
        return value[()]
    if isinstance(obj, str) and obj in SPECIAL_FLOATS:
        v = SPECIAL_FLOATS[obj]
    elif isinstance(obj, str) and obj.startswith("0x"):
        return _from_bits(obj, dtype, name)
    elif isinstance(obj, (int, float)):
        v = float(obj)
    else:
        raise ValueError(f"a number, 'NaN', 'Infinity', '-Infinity' or '0x' and the hex "
                         f"bits fill_value expected for {name}, got {obj!r}")
    value = np.array(v).astype(dtype)
    if math.isinf(v) != math.isinf(float(value)) or math.isnan(v) != math.isnan(float(value)):
        raise ValueError(f"fill_value {obj!r} cannot be held by {name}")
    return value[()]


def _from_bits(text: str, dtype: np.dtype, name: str | None) -> Any:
    """The value of "0x<hex digits>", the bits of a float type's value (a NaN's payload, as
    the Zarr v3 spec spells it and tensorstore writes it): 2 digits a byte."""
    digits = text[2:]
    if len(digits) != 2 * dtype.itemsize or not all(c in string.hexdigits for c in digits):
        raise ValueError(f"fill_value {text!r} of {name} must be '0x' and "
                         f"{2 * dtype.itemsize} hex digits")
    return np.array(int(digits, 16), dtype=f"<u{dtype.itemsize}").view(dtype)[()]


def coerce_fill(value: Any, dtype: np.dtype) -> Any:
    """A user's fill value (a number, a scalar of the type, a JSON spelling) as a scalar of
    ml_dtypes type dtype."""
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise ValueError(f"fill_value must be a single value, got an array of {value.size}")
        value = value.reshape(())[()]
    if isinstance(value, np.generic):
        if value.dtype == dtype:
            return value
        value = value.item() if value.dtype.kind in "biuf" else float(value)
    if isinstance(value, str) or isinstance(value, (int, float)):
        return decode_fill(value, dtype)
    raise ValueError(f"a number fill_value expected for {name_of(dtype)}, got {value!r}")


def encode_fill(value: Any, dtype: np.dtype) -> Any:
    """The JSON spelling of fill value value of ml_dtypes type dtype: an integer, a float,
    or "NaN"/"Infinity"/"-Infinity"."""
    v = coerce_fill(value, dtype)
    if name_of(dtype) in _INTEGERS:
        return int(v)
    f = float(v)
    if math.isnan(f):
        # (a NaN other than the type's own: its bits, payload kept, as tensorstore writes)
        bits = int(np.asarray(v).view(f"<u{dtype.itemsize}"))
        if bits != int(np.array(math.nan).astype(dtype).view(f"<u{dtype.itemsize}")):
            return "0x" + format(bits, f"0{2 * dtype.itemsize}x")
    name = special_float_name(f)
    return f if name is None else name
