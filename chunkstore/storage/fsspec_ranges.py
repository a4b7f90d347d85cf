"""Byte-range reads of FSStore (``get_partial``): ranged GETs in flight at once on an async
filesystem (no size lookup unless a range counts from the end with a length), ``cat_ranges``
elsewhere; an object store refuses a range starting past the end, so those are retried with
the object's size known. ``store`` is the FSStore."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import fsspec_io
from .base import byte_span
from chunkstore.errors import store_name


def get_partial(store: Any, key: str, path: str, ranges: list) -> list[bytes]:
    """FSStore.get_partial: each (offset, length) range of the value at key (path in the
    filesystem); a negative offset counts from the end, a None length reads to the end."""
    if not ranges:
        if key not in store:
            raise KeyError(key)
        return []
    size = None
    # A size (one more request) is only needed to place a range counted from the end
    # with a length; others go straight out as ranged GETs. An object store refuses a
    # range starting past the end; those are retried below with the size known.
    if any(off < 0 and n is not None for off, n in ranges) or (
        not store._async and any(off > 0 for off, n in ranges)
    ):
        try:
            size = store.fs.size(path)
        except store.missing_exceptions:
            raise KeyError(key) from None
        if size is None:  # pragma: no cover
            size = len(store[key])
    starts, ends, empty = [], [], []
    for off, n in ranges:
        if n is not None and n < 0:
            raise ValueError(f"negative length {n} in byte range")
        end: int | None
        if size is not None:
            start, end = byte_span(size, off, n)
            empty.append(start >= end)
        else:  # only (0, n) / (negative offset, None) ranges: no size needed
            start = off
            end = None if n is None else off + n
            empty.append(n == 0)
        starts.append(start)
        ends.append(end)
    want = [i for i, e in enumerate(empty) if not e]
    out = [b""] * len(ranges)
    if want and store._async:
        batch = fsspec_io.Batch(store.fs, [store._get_call(path, starts[i], ends[i])
                                           for i in want],
                                store.missing_exceptions)
        try:
            res = []
            for f in batch.futures:
                try:
                    res.append(f.result())
                except Exception as e:
                    # a range from 0 is refused too where the object is empty (416)
                    if size is None and any(starts[i] >= 0 for i in want):
                        return _get_partial_sized(store, key, path, ranges)
                    raise fsspec_io.with_key(e, key, store) from None
        finally:
            batch.cancel()
        if any(r is None for r in res):
            raise KeyError(key)
        if size is None and any(e is not None and s >= 0 and len(r) < e - s
                                for s, e, r in ((starts[i], ends[i], r)
                                                for i, r in zip(want, res))):
            # An answer shorter than its range: the object's end, or a body cut short on
            # the way (read as a short value): the size tells (one request more, for reads
            # that reach past the end only).
            try:
                store.fs.invalidate_cache(path)  # (a listing's size may be older than the GET)
                size = store.fs.size(path)
            except store.missing_exceptions:
                raise KeyError(key) from None
        for i, r in zip(want, res):
            out[i] = _as_asked(bytes(r), starts[i], ends[i], size, key, store)
        return out
    if want:
        got = _cat_ranges(store, key, path, [starts[i] for i in want], [ends[i] for i in want])
        for i, r in zip(want, got):
            out[i] = r if size is None else _as_asked(r, starts[i], ends[i], size, key, store)
    return out


def _get_partial_sized(store: Any, key: str, path: str,
                       ranges: list[tuple[int, int | None]]) -> list[bytes]:
    """get_partial with the object's size looked up first (ranges past the end)."""
    try:
        size = store.fs.size(path)
    except store.missing_exceptions:
        raise KeyError(key) from None
    fixed = []
    for off, n in ranges:
        start = max(size + off, 0) if off < 0 else min(off, size)
        end = size if n is None else min(size, start + n)
        fixed.append((start, max(0, end - start)))
    return _read_fixed(store, key, path, fixed)


def _read_fixed(store: Any, key: str, path: str, fixed: list[tuple[int, int]]) -> list[bytes]:
    out = [b""] * len(fixed)
    want = [i for i, (o, n) in enumerate(fixed) if n]
    if want:
        got = _cat_ranges(store, key, path, [fixed[i][0] for i in want],
                          [fixed[i][0] + fixed[i][1] for i in want])
        for i, r in zip(want, got):
            start, n = fixed[i]
            if len(r) != n:  # (ranges within the object, its size known: cut short)
                raise OSError(f"a byte range [{start}, {start + n}) of key {key!r} in "
                              f"{store_name(store)} was answered with {len(r)} bytes")
            out[i] = r
    return out


def _cat_ranges(store: Any, key: str, path: str, starts: Sequence[int],
                ends: Sequence[int | None]) -> list[bytes]:
    """The bytes of each [start, end) of path, in one cat_ranges call: a missing object is a
    KeyError, any other error names the key."""
    out = []
    for r in store.fs.cat_ranges([path] * len(starts), starts, ends, on_error="return"):
        if isinstance(r, BaseException):
            if isinstance(r, store.missing_exceptions):
                raise KeyError(key) from None
            raise fsspec_io.with_key(r, key, store)
        out.append(bytes(r))
    return out


def _as_asked(got: bytes, start: int, end: int | None, size: int | None, key: str,
              store: Any) -> bytes:
    """The bytes [start, end) of a ranged GET's answer (start < 0, end None: the last
    -start bytes). A server that ignores the Range header (Python's http.server, many
    static servers) answers 200 with the whole object, which fsspec hands on as the range:
    every range read as the whole value. Such an answer is cut to the range; an answer
    longer than the range that is not the whole object is refused, naming the key."""
    if start < 0 and end is None:
        return got[start:] if len(got) > -start else got
    if size is not None:
        # (an answer shorter than the part of the range inside the object was cut short on
        # the way, and read as a short value without an error)
        if len(got) == max(0, (size if end is None else min(end, size)) - start):
            return got
        if len(got) == size:
            return got[start:end]
    elif end is None or len(got) <= end - start:
        return got  # (shorter than asked: the object's end, as far as is known)
    elif len(got) >= end:
        return got[start:end]
    raise OSError(f"a byte range [{start}, {end}) of key {key!r} in {store_name(store)} was "
                  f"answered with {len(got)} bytes, neither the range nor the whole value")
