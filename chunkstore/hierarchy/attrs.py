"""User attributes persisted as JSON (`.zattrs` in Zarr v2, the `attributes` member of the
node's `zarr.json` in Zarr v3: metadata.formats knows which)."""

from __future__ import annotations

import contextlib
from collections.abc import MutableMapping
from typing import Any

from chunkstore.errors import (ArrayNotFoundError, GroupNotFoundError, ReadOnlyError, store_name,
                               with_context)
from chunkstore.metadata.formats import format_of, kind_of_document
from chunkstore.storage import protocol
from chunkstore.sync.locking import GUARD


class Attributes(MutableMapping):
    """A dict-like view of the JSON document at `key` in `store`.

    Every read goes to the store (other writers' updates are seen); every update rewrites the
    document once. `update()` applies many changes in one write. With a synchronizer (for
    an array without one: its in-process locks) the read-modify-write runs under the
    document's lock.

    node_key and kind (a node's attributes: the key of its metadata document, "array" or
    "group"): an update first checks that the node is still there and of that kind, and
    raises GroupNotFoundError / ArrayNotFoundError, writing nothing, where another handle
    removed or moved it (a v2 .zattrs written there would be an orphan that the next node
    created at the path inherits; a v3 zarr.json written there would bring the node back).
    """

    def __init__(self, store, key=".zattrs", read_only=False, cache=True, synchronizer=None,
                 zarr_format=2, node_key: str | None = None, kind: str | None = None):
        # cache: zarr-python 2's switch for keeping the attributes in memory; they are read
        # from the store on each access here (another writer's change is seen), so it has
        # no effect
        self.store = store
        self.key = key
        self.read_only = read_only
        self.synchronizer = synchronizer
        self.zarr_format = zarr_format
        self._format = format_of(zarr_format)
        self.node_key = node_key
        self.kind = kind

    def asdict(self) -> dict:
        """All attributes, read from the store as a new ``dict`` (``{}`` where the document is
        absent).
        """
        return self._read(self.store)

    def _read(self, store: Any) -> dict:
        """The attributes as store holds them ({} where the document is absent)."""
        try:
            raw = store[self.key]
        except KeyError:
            return {}
        return self._format.read_attributes(raw, self.key)

    def _node_document(self, store: Any) -> Any:
        """The node's metadata document as stored now in store where it also holds the
        attributes (v3's zarr.json), else None; raises where the node is gone or another
        kind of node is at its path. A v2 document's name tells its kind: it is only looked
        for, not read (a store that maps it from another format, zarr's N5Store, needs not
        parse)."""
        if self.node_key is None:
            return None
        if self.node_key != self.key:
            doc, there = None, self.node_key in store
        else:
            doc = store.get(self.node_key)
            there = doc is not None and kind_of_document(store, self.node_key,
                                                         doc) == self.kind
        if not there:
            path = self.node_key.rpartition("/")[0]
            error = GroupNotFoundError if self.kind == "group" else ArrayNotFoundError
            raise error(f"no {self.kind} at path {path!r} in {store_name(self.store)} any "
                        f"more (removed or moved since this handle was opened): its "
                        f"attributes were not written")
        return doc

    def _modify(self, fn) -> None:
        if self.read_only:
            raise ReadOnlyError(f"attributes at {self.key!r} are read-only")
        lock = (self.synchronizer[self.key] if self.synchronizer is not None
                else contextlib.nullcontext())
        # The node's metadata guard first, where the locks have a lock space (a delete,
        # move or replacement of the node holds all of it: sync.synchronizers.replacing):
        # the check that the node is still there and the write are then one step to them
        # (between the two, a delete made the update write the document back: the node
        # came back, or a v2 .zattrs was left for the next node at the path).
        # With a synchronizer, the guards of the groups above too (their delete or move in
        # another process holds them: synchronizers._Layered.guard_under_groups).
        node = self.node_key.rpartition("/")[0] if self.node_key is not None else None
        if node is None:
            guard: Any = contextlib.nullcontext()
        elif hasattr(self.synchronizer, "guard_under_groups"):
            guard = self.synchronizer.guard_under_groups(node)
        elif hasattr(self.synchronizer, "hold"):
            guard = self.synchronizer.hold(node, GUARD)
        else:
            guard = contextlib.nullcontext()
        with guard, lock:
            # (read as stored now, behind a cache (LRUStoreCache): written back from the
            # cache's copy, the update dropped another handle's attributes, and a v3 one
            # undid its resize or append; written through the cache, which keeps it)
            live = self.store if any(protocol.is_snapshot(layer) for layer in
                                     protocol.view_layers(self.store)) \
                else protocol.live_store(self.store)  # (a consolidated view refuses as before)
            doc = self._node_document(live)
            if doc is not None:  # v3: the attributes' own document, read once
                d = self._format.read_attributes(doc, self.key)
                current = lambda: doc  # noqa: E731 - read once, above
            else:
                d = self._read(live)
                current = lambda: live[self.key]  # noqa: E731
            fn(d)
            self.store[self.key] = self._encode(d, current)

    def _encode(self, d: dict, current: Any) -> bytes:
        """The document of attributes d; an error naming the attribute JSON cannot hold
        (json's own message names only the value's type) and the document."""
        encode = self._format.encode_attributes
        try:
            return encode(d, current, self.key)
        except (TypeError, ValueError) as e:
            def fails(k: Any) -> bool:
                try:
                    encode({k: d[k]}, current, self.key)
                    return False
                except (TypeError, ValueError):
                    return True
            bad = next((k for k in d if fails(k)), None)
            what = "the attributes" if bad is None else f"attribute {bad!r}"
            raise with_context(e, f"cannot store {what} in {self.key!r} of "
                                  f"{store_name(self.store)}: {e}") from e

    def __getitem__(self, k):
        return self.asdict()[k]

    def __setitem__(self, k, v):
        self._modify(lambda d: d.__setitem__(k, v))

    def __delitem__(self, k):
        def rm(d):
            del d[k]
        self._modify(rm)

    def update(self, *args, **kwargs):
        """Update the attributes like ``dict.update``, in one write of the document.

        Raises :class:`~chunkstore.errors.ReadOnlyError` if the attributes are read-only.
        """
        self._modify(lambda d: d.update(*args, **kwargs))

    def put(self, d: dict) -> None:
        """Replace all attributes with d."""
        self._modify(lambda cur: (cur.clear(), cur.update(d)))

    def __iter__(self):
        return iter(self.asdict())

    def __len__(self):
        return len(self.asdict())

    def __contains__(self, k):
        return k in self.asdict()

    def __repr__(self):
        return f"Attributes({self.asdict()!r})"

    def _ipython_key_completions_(self) -> list:
        """The attribute names, for IPython's completion of ``attrs["..."]`` (as
        zarr-python 2's)."""
        return sorted(self.asdict())
