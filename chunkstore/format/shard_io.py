"""Small I/O helpers of the shard store view: per-shard in-process locks, byte-range reads,
and merging nearby byte ranges into one request."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["coalesce", "get_partial", "stripe"]

_STRIPES = [threading.Lock() for _ in range(256)]


def stripe(store: Any, key: str) -> threading.Lock:
    """In-process lock for a shard's read-modify-write (shared by every view of a store)."""
    return _STRIPES[hash((id(store), key)) % len(_STRIPES)]


def get_partial(store: Any, key: str, ranges: list) -> list[bytes] | None:
    fn = getattr(store, "get_partial", None)
    if fn is None:
        return None
    return fn(key, ranges)


def coalesce(ranges: list[tuple[int, int]], max_gap: int) -> list[tuple[int, int, list[int]]]:
    """Merge sorted ``(offset, nbytes)`` ranges whose gap is at most ``max_gap`` bytes.

    Returns ``[(offset, nbytes, [indices of the input ranges it covers])]``.
    """
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    merged: list[list] = []
    for i in order:
        off, n = ranges[i]
        if merged and off - (merged[-1][0] + merged[-1][1]) <= max_gap:
            m = merged[-1]
            m[1] = max(m[1], off + n - m[0])
            m[2].append(i)
        else:
            merged.append([off, n, [i]])
    return [(m[0], m[1], m[2]) for m in merged]
