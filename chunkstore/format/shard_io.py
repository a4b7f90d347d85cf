"""Small I/O helpers of the shard store view: per-shard in-process locks, byte-range reads,
and merging nearby byte ranges into one request."""

from __future__ import annotations

import threading

from chunkstore.forksafe import on_fork
from ..storage import protocol
from typing import Any

__all__ = ["coalesce", "read_if", "stripe"]

# (made anew in a forked child: a stripe a parent thread held at the fork hung the child)
_STRIPES = [threading.Lock() for _ in range(256)]
on_fork(lambda: _STRIPES.__setitem__(slice(None), [threading.Lock() for _ in _STRIPES]))


def stripe(store: Any, key: str) -> threading.Lock:
    """In-process lock for a shard's read-modify-write, shared by every view of a store and
    of the stores of its location (handles opened apart on one directory, or through
    stores of roots one inside the other: protocol.node_location), as the in-process
    locks of handles without a synchronizer are (chunkstore.sync)."""
    return _STRIPES[hash(protocol.node_location(store, key)) % len(_STRIPES)]


def read_if(store: Any, key: str, version: Any, ranges: list) -> list[bytes] | None:
    """Byte ranges of a stored value if it is still ``version`` (from the store's
    ``open_version``), else None; KeyError if absent. In one step where the store offers it
    (``read_if_version``: a local file's check and reads in one call)."""
    fn = protocol.version_reads(store)
    if fn is not None:  # (None also where a store subclass turned it off)
        return fn(key, version, ranges)
    with store.open_version(key) as reader:
        return reader.read_if(version, ranges)


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
