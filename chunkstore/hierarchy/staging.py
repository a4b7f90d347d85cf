"""Node documents held back until a copy is whole: what keeps a killed copy from leaving an
array that reads as complete.

A recoding copy (``chunkstore cp`` with options, ``convert``, ``copy()`` with new encodings)
must create the destination array before it writes its chunks: the engine plans, encodes and
checks its writes against the array's metadata. Written to the store first, that metadata
makes a node of the keys that follow, and a copy killed half-way (SIGKILL, the machine lost:
nothing runs to undo it) left an array whose missing chunks read as the fill value, for
chunkstore, zarr-python and every other reader alike, with nothing to tell it from a
complete one. Through :class:`HeldDocuments` the copy writes its chunks to the store and its
node documents (``.zarray``, ``.zgroup``, ``.zattrs``, ``zarr.json``) to memory, where the
copy's own handles read them; :meth:`HeldDocuments.publish` writes them once the data is
all stored. Killed before that, the copy is no node at all: its chunks are keys of no node,
which a later copy or creation at that path refuses (or removes, when told to replace).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any

from chunkstore.metadata.formats import document_rank, is_consolidated_document
from chunkstore.storage import base as _base
from chunkstore.storage.base import normalize_prefix

__all__ = ["HeldDocuments"]


def _under(key: str, prefix: str) -> bool:
    return not prefix or key == prefix or key.startswith(prefix + "/")


class HeldDocuments(MutableMapping):
    """A view of ``store`` whose node documents at or below ``path`` are held in memory, not
    written, until :meth:`publish`; every other key, and every other operation (the store's
    fast paths, its location for locks), is the store's own.

    Reads through the view see the held documents (an array made through it opens and writes
    through it as through the store); reads of the store itself do not see them. Chunks go
    to the store as they are written. A document deleted through the view is dropped if held,
    and deleted in the store."""

    # The view is where its documents live now, not a cache of the store behind it
    # (protocol.live_store), or a write's metadata check would read past it. A store that
    # is a consolidated snapshot stays one seen through the view: no node is created
    # through it (creation refuses before anything is written).
    cache_of = None

    @property
    def snapshot_of(self) -> Any:
        """The store behind the view's store where that is a consolidated snapshot."""
        return getattr(self._store, "snapshot_of", None)

    def __init__(self, store: MutableMapping, path: str = "") -> None:
        self._store = store
        self._root = normalize_prefix(path)
        self._held: dict[str, bytes] = {}
        self._lock = threading.Lock()

    @property
    def store(self) -> MutableMapping:
        """The store behind the view."""
        return self._store

    @property
    def held(self) -> dict[str, bytes]:
        """A copy of the documents held: {key: bytes}."""
        with self._lock:
            return dict(self._held)

    def __getattr__(self, name: str) -> Any:
        # (only for names not found on the view: the store's hooks, fast paths and options)
        if name.startswith("__") or name in ("_store", "_root", "_held", "_lock"):
            raise AttributeError(name)
        return getattr(self._store, name)

    def __repr__(self) -> str:
        # (errors name the store the user gave: the view is an implementation detail)
        from chunkstore.errors import store_name
        return store_name(self._store)

    def holds(self, key: str) -> bool:
        """Whether a write of key is held (a node document at or below the view's path, or
        a Zarr v2 consolidated-metadata document there, which shows the nodes it lists)."""
        return _under(key, self._root) and (document_rank(key) < 2
                                            or is_consolidated_document(key))

    # ------------------------------------------------------------------ mapping
    def __getitem__(self, key: str) -> bytes:
        with self._lock:
            if key in self._held:
                return self._held[key]
        return self._store[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if self.holds(key):
            with self._lock:
                self._held[key] = _base.ensure_bytes(value)
        else:
            self._store[key] = value

    def __delitem__(self, key: str) -> None:
        # (from the store too: an older document there, one the held one was to replace,
        # would else show once the view is published)
        with self._lock:
            held = self._held.pop(key, None)
        try:
            del self._store[key]
        except KeyError:
            if held is None:
                raise

    def __contains__(self, key: object) -> bool:
        with self._lock:
            if key in self._held:
                return True
        return key in self._store

    def __iter__(self) -> Iterator[str]:
        held = self.held
        yield from held
        for k in self._store:
            if k not in held:
                yield k

    def __len__(self) -> int:
        return sum(1 for _ in self)

    # ------------------------------------------------------------------ batches, listings
    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """The values of those of keys that exist (held documents, then the store's)."""
        keys = list(keys)
        with self._lock:  # (a chunk batch's every read comes here: no copy of the held)
            out = {k: self._held[k] for k in keys if k in self._held}
        rest = [k for k in keys if k not in out]
        if rest:
            out.update(_base.getitems(self._store, rest))
        return out

    def setitems(self, mapping: Mapping[str, Any]) -> None:
        """Hold the documents of mapping, write the rest to the store."""
        rest = {}
        for k, v in mapping.items():
            if self.holds(k):
                self[k] = v
            else:
                rest[k] = v
        if rest:
            _base.setitems(self._store, rest)

    def delitems(self, keys: Iterable[str]) -> None:
        """Drop the held documents among keys, delete the rest in the store."""
        keys = list(keys)
        with self._lock:
            for k in keys:
                self._held.pop(k, None)
        if keys:  # (from the store too, as __delitem__; absent ones are ignored)
            _base.delitems(self._store, keys)

    def keys_under(self, prefix: str = "") -> Iterator[str]:
        """The keys at or below prefix: held documents and the store's."""
        prefix = normalize_prefix(prefix)
        held = [k for k in self.held if _under(k, prefix)]
        stored = [k for k in _base.keys_under(self._store, prefix) if k not in held]
        return iter(held + stored)

    def listdir(self, prefix: str = "") -> list[str]:
        """The names directly below prefix: the store's and those of held documents."""
        prefix = normalize_prefix(prefix)
        pre = prefix + "/" if prefix else ""
        names = set(_base.listdir(self._store, prefix))
        for k in self.held:
            if k.startswith(pre):
                names.add(k[len(pre):].split("/", 1)[0])
        return sorted(names)

    def rmdir(self, prefix: str = "") -> None:
        """Drop the held documents at or below prefix and remove the store's keys there."""
        prefix = normalize_prefix(prefix)
        with self._lock:
            for k in [k for k in self._held if _under(k, prefix)]:
                del self._held[k]
        _base.rmdir(self._store, prefix)

    def getsize(self, prefix: str = "") -> int:
        """The bytes stored at or below prefix, held documents counted."""
        prefix = normalize_prefix(prefix)
        held = sum(len(v) for k, v in self.held.items() if _under(k, prefix))
        return held + _base.getsize(self._store, prefix)

    # ------------------------------------------------------------------ publishing
    def publish(self) -> None:
        """Write the held documents to the store: the deepest nodes first, and each node's
        attribute document before the one that makes it a node, so that a publish cut short
        leaves only nodes whose data is whole (and parents later, never members missing
        below a parent shown); consolidated metadata last of all. The view then holds
        nothing; it may go on being used."""
        with self._lock:
            held = dict(self._held)
        order = sorted(held, key=lambda k: (is_consolidated_document(k), -k.count("/"),
                                            -document_rank(k), k))
        for k in order:
            self._store[k] = held[k]
            with self._lock:
                if self._held.get(k) is held[k]:
                    del self._held[k]
