"""Helpers shared by the v2 and v3 metadata modules: JSON objects, integer tuples, the JSON
spelling of NumPy values, non-finite floats and integer/boolean fill values."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def load_json_object(raw: Any, what: str = "document") -> dict:
    """Decode raw (bytes, str or an already-decoded mapping) into a JSON object (dict);
    raise ValueError describing the problem."""
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, (bytearray, memoryview)):
        raw = bytes(raw)
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{what} is not valid UTF-8: {e}") from None
    if not isinstance(raw, str):
        raise ValueError(f"expected bytes, str or dict, got {type(raw).__name__}")
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} is not valid JSON: {e}") from None
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply to parse") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(obj).__name__}")
    return obj


#: the largest extent (and chunk size in bytes) an array can have: indices are int64
MAX_INDEX = 2**63 - 1


def check_required(doc: Mapping[str, Any], required: Sequence[str], zarr_format: int) -> None:
    """ValueError unless *doc* has every *required* field and its ``zarr_format`` is
    *zarr_format* (an int, not a bool)."""
    missing = [k for k in required if k not in doc]
    if missing:
        raise ValueError(f"missing required field(s): {', '.join(missing)}")
    zf = doc["zarr_format"]
    if isinstance(zf, bool) or zf != zarr_format:
        raise ValueError(f"zarr_format must be {zarr_format}, got {zf!r}")


def check_chunk_addressable(chunks: Sequence[int], dtype: np.dtype, what: str) -> None:
    """ValueError if one chunk of this shape and dtype has more bytes than can be addressed."""
    nbytes = max(np.dtype(dtype).itemsize, 1)
    for c in chunks:
        nbytes *= c
    if nbytes > MAX_INDEX:
        raise ValueError(f"a single chunk of {what} {list(chunks)} and dtype {dtype} would "
                         f"hold {nbytes} bytes, more than can be addressed (2**63 - 1)")


def chunk_grid(shape: tuple[int, ...], value: Any, what: str
               ) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """(the chunks the engine works with, the chunks as the document states them where one
    is 0, else None) of a document's chunks value for shape: ints >= 0, as many as shape's,
    0 only for an empty dimension (zarr-python 3 writes chunks of 0 there, in both formats;
    the engine has 1 there: an empty dimension has no chunks either way, and the grid needs
    no division by 0). ValueError naming what, and the dimension, if not."""
    chunks = as_int_tuple(value, what, 0)
    if len(shape) != len(chunks):
        raise ValueError(f"shape {list(shape)} and {what} {list(chunks)} have different "
                         f"lengths")
    for d, (n, c) in enumerate(zip(shape, chunks)):
        if c == 0 and n != 0:
            raise ValueError(f"{what}[{d}] must be >= 1, got 0 (only an empty dimension may "
                             f"have chunks of 0; this one has length {n})")
    return tuple(c or 1 for c in chunks), (chunks if 0 in chunks else None)


def as_int_tuple(value: Any, what: str, minimum: int) -> tuple[int, ...]:
    """value as a tuple of ints >= minimum; ValueError naming what (and the index) if not."""
    # (exact list/tuple and int first: the ABC checks cost a microsecond each, and every
    # array's metadata parse comes here for its shape and chunks)
    if type(value) not in (list, tuple) and (
            isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray))):
        raise ValueError(f"{what} must be a list of integers, got {value!r}")
    out = []
    for i, v in enumerate(value):
        if type(v) is not int and (isinstance(v, (bool, np.bool_)) or
                                   not isinstance(v, numbers.Integral)):
            raise ValueError(f"{what}[{i}] must be an integer, got {v!r}")
        if v < minimum:
            raise ValueError(f"{what}[{i}] must be >= {minimum}, got {v}")
        if int(v) > MAX_INDEX:
            raise ValueError(f"{what}[{i}] = {v} is larger than the largest supported "
                             f"extent 2**63 - 1")
        out.append(int(v))
    return tuple(out)


# --------------------------------------------------------------------------------------------
# JSON values both formats write the same way
# --------------------------------------------------------------------------------------------


def json_default(obj: Any) -> Any:
    """Make NumPy values JSON-serialisable (as zarr-python 2 and 3 both do for attributes)."""
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"object of type {type(obj).__name__} is not JSON serializable")


#: the JSON strings of the non-finite floats, in both formats
SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def special_float_name(v: float) -> str | None:
    """"NaN", "Infinity" or "-Infinity" for a non-finite float, None for a finite one."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return None


def decode_int_fill(obj: Any, dtype: np.dtype, label: str) -> Any:
    """An integer fill value's JSON (an int, or a float with an integral value) as a NumPy
    scalar of dtype; ValueError (naming the type as label) if it is not one or out of range."""
    if isinstance(obj, float) and obj.is_integer():
        obj = int(obj)
    if isinstance(obj, bool) or not isinstance(obj, int):
        raise ValueError(f"integer fill_value expected, got {obj!r}")
    info = np.iinfo(dtype)
    if not info.min <= obj <= info.max:
        raise ValueError(f"fill_value {obj} out of range for {label}")
    return np.array(obj, dtype=dtype)[()]


def decode_bool_fill(obj: Any, expected: str = "boolean fill_value expected") -> np.bool_:
    """A boolean fill value's JSON (true/false; 0 and 1 from lenient writers)."""
    if isinstance(obj, bool) or (isinstance(obj, int) and obj in (0, 1)):
        return np.bool_(bool(obj))
    raise ValueError(f"{expected}, got {obj!r}")


def guess_chunks(shape: Any, itemsize: int, max_bytes: int = 64 * 2 ** 20) -> tuple[int, ...]:
    """The chunk shape zarr-python 2 and 3 choose for ``chunks=True`` / ``"auto"`` (h5py's
    rule): halve the axes in turn, starting with the first, until a chunk is near a target
    size that grows with the array (128 KiB up to max_bytes, 64 MiB unless given;
    zarr-python 3 gives 1 MiB for the chunks of shards). Zero-length axes count as 1."""
    shape = tuple(int(s) for s in shape)
    if itemsize == 0:
        return shape
    chunks = [float(max(s, 1)) for s in shape]
    if not chunks:
        return ()
    total = math.prod(chunks) * itemsize
    target = 256 * 1024 * 2 ** math.log10(total / 2 ** 20)
    target = min(max(target, 128 * 1024), max_bytes)
    axis = 0
    while True:
        nbytes = math.prod(chunks) * itemsize
        near = nbytes < target or abs(nbytes - target) / target < 0.5
        if (near and nbytes < max_bytes) or math.prod(chunks) == 1:
            break
        chunks[axis % len(chunks)] = math.ceil(chunks[axis % len(chunks)] / 2.0)
        axis += 1
    return tuple(int(c) for c in chunks)


def structured_array(value: Any, dtype: np.dtype) -> np.ndarray:
    """value (a tuple, a list of them, a void scalar, an array) as an array of the
    structured dtype whose padding bytes are zero. NumPy builds a structured array from
    anything but an array of its own dtype field by field into uninitialised memory, so its
    padding held heap bytes: written into .zarray fill values (read back as the padding's
    field by zarr-python 2's spelling of the dtype) and into chunks."""
    if isinstance(value, np.ndarray) and value.dtype == dtype:
        return value
    shape = np.asarray(value, dtype=dtype).shape  # (NumPy's conversion checks it)
    out = np.zeros(shape, dtype=dtype)
    out[...] = value  # (into zeros: the padding stays zero)
    return out


def value_bytes(value: Any, dtype: np.dtype) -> bytes:
    """The raw bytes of one value of dtype (a structured one's padding zero: see
    structured_array)."""
    if dtype.names:
        return structured_array(value, dtype).tobytes()
    return np.array(value, dtype=dtype).tobytes()


def leaf_dtypes(dtype: np.dtype) -> list[np.dtype]:
    """The dtypes of a dtype's fields and sub-arrays, down to the plain ones (the dtype
    itself where it has neither)."""
    if dtype.names:
        return [d for n in dtype.names for d in leaf_dtypes(dtype[n])]
    if dtype.subdtype is not None:
        return leaf_dtypes(dtype.subdtype[0])
    return [dtype]


def unitless_time(dtype: np.dtype) -> bool:
    """Whether dtype is a datetime64/timedelta64 without a unit (generic): its values have
    no meaning as stored times."""
    return dtype.kind in "mM" and np.datetime_data(dtype)[0] == "generic"


def check_utf8_fill(value: str) -> None:
    """Refuse a string fill value UTF-8 cannot encode (a lone surrogate): a chunk padded
    with it could never be written (every later write of part of a chunk failed)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"fill_value {value!r} cannot be stored as UTF-8 ({e.reason} at "
                         f"{e.start}): the array's strings are") from None
