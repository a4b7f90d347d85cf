"""Consolidated metadata for Zarr v3 hierarchies: member zarr.json documents served from the
root group's `consolidated_metadata`, so opening a hierarchy costs one metadata read."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import ConsolidatedMetadataNotFoundError, MetadataError, ReadOnlyError
from .base import BaseStore, getitems, getsize, listdir, validate_key
from .pipelining import FetchThrough
from chunkstore.errors import store_name

META = "zarr.json"


class ConsolidatedV3Store(FetchThrough, BaseStore):
    """A view of store whose `zarr.json` keys at or below `path` come from the consolidated
    metadata in `path/zarr.json`; chunk keys go to the store (writes too, with mode "r+").
    Metadata writes are refused: change the store and consolidate again. A node this process
    changed after the snapshot was consolidated (FetchThrough) has its zarr.json read from the
    store, and a group with such a node at, above or below it is listed there."""

    def __init__(self, store: Mapping[str, bytes], path: str = "", mode: str = "r") -> None:
        if mode not in ("r", "r+"):
            raise ValueError(f"ConsolidatedV3Store mode must be 'r' or 'r+', not {mode!r}")
        super().__init__(mode)
        # written through only with mode "r+" (a writable store behind)
        self._store = store  # type: ignore[assignment]
        self._base = path.strip("/")
        root_key = self._root_key = (self._base + "/" if self._base else "") + META
        self._date_snapshot(root_key)  # (before the read: see _date_snapshot)
        try:
            raw = store[root_key]
        except KeyError:
            raise ConsolidatedMetadataNotFoundError(
                f"no group metadata {root_key!r} in {store_name(store)}") from None
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise MetadataError(f"invalid metadata at {root_key!r} in {store_name(store)}: {e}") from None
        cm = doc.get("consolidated_metadata") if isinstance(doc, dict) else None
        if not isinstance(cm, dict) or not isinstance(cm.get("metadata"), dict):
            raise ConsolidatedMetadataNotFoundError(
                f"{root_key!r} in {store_name(store)} has no consolidated metadata")
        pre = self._base + "/" if self._base else ""
        # Each document kept as the JSON object it is in the root document: encoded to bytes
        # only when read as bytes (then kept), parsed by the format layer from the object
        # (consolidated_document), so opening the hierarchy parses nothing twice.
        self._docs: dict[str, bytes] = {root_key: raw}
        self._objects: dict[str, dict] = {root_key: doc}
        for rel, member in cm["metadata"].items():
            try:  # a member named "../../evil" must not reach outside the hierarchy
                validate_key(rel)
            except (TypeError, ValueError) as e:
                raise MetadataError(f"invalid consolidated metadata at {root_key!r} in "
                                    f"{store_name(store)}: member {rel!r}: {e}") from None
            if not isinstance(member, dict):
                raise MetadataError(f"invalid consolidated metadata at {root_key!r} in "
                                    f"{store_name(store)}: member {rel!r} is not an object")
            self._objects[pre + rel + "/" + META] = member

    def consolidated_document(self, key: str) -> dict | None:
        """The JSON object of the metadata document at key as the consolidated metadata holds
        it (the root group's without its ``consolidated_metadata``), or None for a key it
        does not serve. Shared: callers must not change it."""
        if not self._from_snapshot(key):
            return None
        doc = self._objects.get(key)
        if doc is not None and key == self._root_key:
            return {k: v for k, v in doc.items() if k != "consolidated_metadata"}
        return doc

    def _document(self, key: str) -> bytes:
        raw = self._docs.get(key)
        if raw is None:
            raw = self._docs[key] = json.dumps(self._objects[key], indent=2).encode()
        return raw


    def __repr__(self) -> str:
        return f"ConsolidatedV3Store({store_name(self._store)})"

    def _served(self, key: str) -> bool:
        if not key.endswith(META):
            return False
        return not self._base or key == self._base + "/" + META or \
            key.startswith(self._base + "/")

    def __getitem__(self, key: str) -> bytes:
        if self._from_snapshot(key):
            return self._document(key)
        return self._store[key]

    def getitems(self, keys: Iterable[str]) -> dict:
        """Return ``{key: value}`` for the *keys* present: node metadata from the consolidated
        documents, other keys from the underlying store.
        """
        keys = list(keys)
        served = {k: self._from_snapshot(k) for k in keys}
        out = {k: self._document(k) for k in keys if served[k] and k in self._objects}
        out.update(getitems(self._store, [k for k in keys if not served[k]]))
        return out

    def _serves(self, key: str) -> bool:
        return self._served(key)

    def __contains__(self, key: Any) -> bool:
        return key in self._objects if self._from_snapshot(key) else key in self._store

    def __iter__(self) -> Iterator[str]:
        yield from self._objects
        for k in self._store:
            if not self._served(k):
                yield k

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def listdir(self, prefix: str = "") -> list:
        """Sorted names of the immediate children of *prefix*: consolidated nodes plus the
        underlying store's entries.
        """
        if self._stale_listing(prefix):
            return sorted(n for n in listdir(self._store, prefix) if n != META)
        pre = prefix.strip("/")
        pre = pre + "/" if pre else ""
        names = {k[len(pre):].split("/", 1)[0] for k in self._objects if k.startswith(pre)}
        names.discard(META)
        # the store's other entries: chunk directories, not nodes the consolidated metadata
        # does not know (a node it knows is not probed again: no stat per member)
        names.update(n for n in listdir(self._store, prefix) if n != META and n not in names
                     and not (pre + n + "/" + META) in self._store)
        return sorted(names)

    def getsize(self, prefix: str = "") -> int:
        """Total size in bytes of the values at or under *prefix* in the underlying store."""
        return getsize(self._store, prefix)

    def _check_key(self, key: str) -> None:
        if self._served(key):
            raise ReadOnlyError(f"{self!r}: metadata key {key!r} is served from the "
                                f"consolidated metadata; change it in the store and "
                                f"consolidate again")
        self._check_writable(key)

    def rmdir(self, prefix: str = "") -> None:
        """Always raises :class:`~chunkstore.errors.ReadOnlyError`: nodes cannot be removed
        through consolidated metadata.
        """
        raise ReadOnlyError(f"{self!r}: cannot remove {prefix!r} through consolidated metadata")
