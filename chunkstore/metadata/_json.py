"""JSON helpers shared by the v2 and v3 metadata modules."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


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
    if not isinstance(obj, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(obj).__name__}")
    return obj
