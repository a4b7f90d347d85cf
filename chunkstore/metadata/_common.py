"""Helpers shared by the v2 and v3 metadata modules: JSON objects and integer tuples."""

from __future__ import annotations

import json
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


def check_chunk_addressable(chunks: Sequence[int], dtype: np.dtype, what: str) -> None:
    """ValueError if one chunk of this shape and dtype has more bytes than can be addressed."""
    nbytes = max(np.dtype(dtype).itemsize, 1)
    for c in chunks:
        nbytes *= c
    if nbytes > MAX_INDEX:
        raise ValueError(f"a single chunk of {what} {list(chunks)} and dtype {dtype} would "
                         f"hold {nbytes} bytes, more than can be addressed (2**63 - 1)")


def as_int_tuple(value: Any, what: str, minimum: int) -> tuple[int, ...]:
    """value as a tuple of ints >= minimum; ValueError naming what (and the index) if not."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise ValueError(f"{what} must be a list of integers, got {value!r}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
            raise ValueError(f"{what}[{i}] must be an integer, got {v!r}")
        if v < minimum:
            raise ValueError(f"{what}[{i}] must be >= {minimum}, got {v}")
        if v > MAX_INDEX:
            raise ValueError(f"{what}[{i}] = {v} is larger than the largest supported "
                             f"extent 2**63 - 1")
        out.append(int(v))
    return tuple(out)
