"""Byte ranges of one version of a remote object (a ValueVersion, see storage.base) for the
stores whose GETs answer with an ETag and honour If-Match: ObjectStore (obstore; what s3://
URLs open). A sharded array reads a shard's index and then its chunks through one
of these, so the chunks are never taken from another version of the shard than its index."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from . import fsspec_io
from .base import ValueVersion, VersionChanged
from chunkstore.errors import store_name

#: get(start, end, if_match) -> awaitable of (bytes, etag, size), or False where the store
#: cannot serve that GET with an ETag (FileNotFoundError if absent; VersionChanged where
#: if_match is given and the object is another version). end None: the last -start bytes.
GetVersion = Callable[[int, "int | None", "str | None"], Any]


class RemoteVersion(ValueVersion):
    """One version of a remote object: ranged GETs, the first answer's ETag pinned and sent
    with every later GET as If-Match (another version answers 412: VersionChanged); GETs of
    one read go out at once and must agree on the ETag. Where the store does not serve a
    GET with an ETag, the object is read whole once (``store.getitems``) and served from
    memory, version None. Nothing is requested before the first read; an absent object is a
    KeyError then.

    ``loop_owner``: what fsspec_io.Batch runs the GETs on (an fsspec filesystem, or an
    object with a ``loop``); ``missing``: the errors that mean an absent object."""

    def __init__(self, store: Any, key: str, loop_owner: Any,
                 missing: tuple[type[BaseException], ...], get: GetVersion) -> None:
        self._store, self._key, self._loop_owner = store, key, loop_owner
        self._missing, self._get = missing, get
        self.version: str | None = None
        self._size: int | None = None
        self._whole: bytes | None = None

    @property
    def size(self) -> int:
        """The object's length in bytes (a one-byte tail read is made first if no read told it
        yet).
        """
        if self._size is None:
            self.read_tail(1)
        assert self._size is not None
        return self._size

    @property
    def known_size(self) -> int | None:
        """The length if a read's answer told it (no request made for it), else None."""
        return self._size

    def _gets(self, spans: list[tuple[int, int | None]]) -> list[bytes]:
        """The spans ([start, end), or the last n bytes: (-n, None)) of this version."""
        if self._whole is not None:
            return [self._slice(s, e) for s, e in spans]
        get, if_match = self._get, self.version
        calls = [(lambda s=s, e=e: get(s, e, if_match)) for s, e in spans]
        batch = fsspec_io.Batch(self._loop_owner, calls, self._missing)
        try:
            res = []
            for f in batch.futures:
                try:
                    res.append(fsspec_io.result(f))
                except VersionChanged:
                    raise
                except Exception as e:
                    raise fsspec_io.with_key(e, self._key, self._store) from None
        finally:
            batch.cancel()
        if any(r is None for r in res):
            raise KeyError(self._key)  # absent (deleted since an earlier read: absent now)
        if any(r is False for r in res):
            if self.version is not None:
                raise VersionChanged(f"{self._key!r} in {store_name(self._store)}: a GET answered "
                                     f"without its version")
            # no ETag to pin: the whole object, once, is this reader's only version
            got = self._store.getitems([self._key]).get(self._key)
            if got is None:
                raise KeyError(self._key)
            self._whole, self._size = got, len(got)
            return [self._slice(s, e) for s, e in spans]
        out = []
        for body, etag, size in res:
            if etag is not None:
                if self.version is None:
                    self.version = etag
                elif etag != self.version:  # (GETs sent together, before one was pinned)
                    raise VersionChanged(f"{self._key!r} in {store_name(self._store)} changed while "
                                         f"read")
            if size is not None:
                self._size = size
            out.append(bytes(body))
        return out

    def _slice(self, start: int, end: int | None) -> bytes:
        w = self._whole
        assert w is not None
        return w[max(0, len(w) + start):] if start < 0 else w[start:end]

    def read(self, ranges: Iterable[tuple[int, int]]) -> list[bytes]:
        """The ``(offset, nbytes)`` ranges of the pinned version, requested at once.

        Raises :class:`~chunkstore.storage.base.VersionChanged` if the object is rewritten
        meanwhile.
        """
        spans: list[tuple[int, int | None]] = [(int(o), int(o) + int(n)) for o, n in ranges]
        out = [b""] * len(spans)
        want = [i for i, (s, e) in enumerate(spans) if e is None or e > s]
        if want:
            for i, b in zip(want, self._gets([spans[i] for i in want])):
                out[i] = b
        return out

    def read_tail(self, n: int) -> bytes:
        """The last *n* bytes (fewer where the object is shorter).

        Raises ``ValueError`` if *n* is not positive.
        """
        if n <= 0:
            raise ValueError(f"read_tail needs n > 0, not {n}")
        return self._gets([(-n, None)])[0]

    def read_if(self, version: Any, ranges: Iterable[tuple[int, int]]) -> list[bytes] | None:
        """The *ranges* if the object is still *version*, else None (a changed version is not an
        error here).
        """
        if self.version is None and self._whole is None:
            self.version = version  # pinned: the GETs go with If-Match
        ranges = list(ranges)
        try:
            # nothing to read still asks (one byte, If-Match): the caller's index says its
            # chunks are absent only while the object is that version
            if ranges:
                got = self.read(ranges)
            else:
                self.read_tail(1)
                got = []
        except VersionChanged:
            return None
        return got if self.version == version else None
