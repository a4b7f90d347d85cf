"""Consolidated metadata (Zarr v2 ``.zmetadata``): every metadata document of a hierarchy in
one key, so that opening a hierarchy on a slow store costs one read."""

from __future__ import annotations

from . import protocol
import json
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any, cast

from ..errors import ConsolidatedMetadataNotFoundError, MetadataError, ReadOnlyError
from . import base as _base
from .normalize import normalize_store
from .base import BaseStore, normalize_prefix, validate_key
from .pipelining import FetchThrough
from chunkstore.errors import store_name

__all__ = [
    "consolidate_metadata",
    "ConsolidatedMetadataStore",
    "METADATA_NAMES",
    "is_metadata_key",
]

#: names of the v2 metadata documents gathered in ``.zmetadata``
METADATA_NAMES = (".zarray", ".zgroup", ".zattrs")


def is_metadata_key(key: str) -> bool:
    """True if the last segment of *key* is ``.zarray``, ``.zgroup`` or ``.zattrs``."""
    return key.rsplit("/", 1)[-1] in METADATA_NAMES


def _join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def _dumps(obj: Any, sort_keys: bool = True) -> bytes:
    return json.dumps(
        obj, indent=4, sort_keys=sort_keys, ensure_ascii=True, separators=(",", ": ")
    ).encode("ascii")


def consolidate_metadata(
    store: MutableMapping[str, bytes], path: str = "", metadata_key: str = ".zmetadata"
) -> "ConsolidatedMetadataStore":
    """Gather every ``.zarray``/``.zgroup``/``.zattrs`` at or under *path* into one document.

    Writes ``<path>/<metadata_key>`` (``.zmetadata`` at the root for ``path=""``) in the
    zarr-python 2 format: ``{"metadata": {key: parsed JSON}, "zarr_consolidated_format": 1}``,
    JSON with indent 4 and sorted keys. The keys in ``"metadata"`` are relative to *path*,
    so the document at the root holds plain store keys (``"a/.zarray"``) exactly as
    zarr-python 2 writes them, and a document written for a sub-group is self-contained.

    Returns a :class:`ConsolidatedMetadataStore` over *store* using the new document.
    Raises :class:`~chunkstore.errors.MetadataError` naming the key if a metadata document
    is not valid JSON.
    """
    prefix = normalize_prefix(path)
    mkey = _join(prefix, validate_key(metadata_key))
    since = protocol.consolidation_start()
    live = protocol.live_store(store)  # (as stored now, behind a cache: not its old copies)
    keys = sorted(k for k in _base.keys_under(live, prefix) if is_metadata_key(k))
    values = _base.getitems(live, keys)
    meta: dict[str, Any] = {}
    for k in keys:
        if k not in values:  # deleted concurrently
            continue
        try:
            doc = json.loads(values[k])
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise MetadataError(f"metadata document {k!r} in {store_name(store)} is not valid JSON: {e}")
        rel = k[len(prefix) + 1 :] if prefix else k
        meta[rel] = doc
    store[mkey] = _dumps({"metadata": meta, "zarr_consolidated_format": 1})
    protocol.note_consolidated(store, mkey, since)
    return ConsolidatedMetadataStore(store, metadata_key=mkey)


class ConsolidatedMetadataStore(FetchThrough, BaseStore):
    """A read-only view of a store that serves metadata from its consolidated document.

    ``ConsolidatedMetadataStore(store, metadata_key=".zmetadata")``

    The document at *metadata_key* is read once, at construction. Its directory (``""`` for
    ``.zmetadata`` at the root) is the *base* of the consolidated hierarchy: a metadata key
    (``.zarray``/``.zgroup``/``.zattrs``) at or under the base is answered from the document
    only (absent from the document => ``KeyError``, no read of the store). Every other key
    (chunks, metadata outside the base) is read from the underlying store.

    A node this process changed (created, re-created, deleted, resized...) after the snapshot
    was consolidated (FetchThrough) has its documents read from the underlying store, and a
    group with such a node at, above or below it is listed there.

    Listing: ``listdir`` of a group (or any path that is not an array in the document) lists
    the nodes in the document only; ``listdir`` of an array merges in the underlying store's
    listing, so its chunk keys appear. ``__iter__`` yields the document's keys plus the
    underlying store's non-metadata keys. ``getsize`` measures the underlying store.

    Mode ``"r"`` (the default): every write raises :class:`~chunkstore.errors.ReadOnlyError`.
    Mode ``"r+"``: writes and deletes of non-metadata keys (chunks) pass through to the
    underlying store; writing or deleting a metadata key served from the document, and
    ``rmdir``, still raise ``ReadOnlyError`` (change metadata in the underlying store and
    consolidate again). A missing document raises
    :class:`~chunkstore.errors.ConsolidatedMetadataNotFoundError`; an invalid one
    :class:`~chunkstore.errors.MetadataError`.
    """

    def __init__(
        self, store: Mapping[str, bytes], metadata_key: str = ".zmetadata", mode: str = "r"
    ):
        if mode not in ("r", "r+"):
            raise ValueError(f"ConsolidatedMetadataStore mode must be 'r' or 'r+', not {mode!r}")
        super().__init__(mode)
        if not isinstance(store, Mapping):
            store = normalize_store(store, mode="r")
        validate_key(metadata_key)
        # written through only with mode "r+" (a writable store behind)
        self._store = cast(MutableMapping[str, bytes], store)
        self.metadata_key = metadata_key
        self._base = metadata_key.rsplit("/", 1)[0] if "/" in metadata_key else ""
        self._load()

    def _load(self) -> None:
        store, mkey = self._store, self.metadata_key
        self._date_snapshot(mkey)  # (before the read: see _date_snapshot)
        try:
            raw = store[mkey]
        except KeyError:
            raise ConsolidatedMetadataNotFoundError(
                f"no consolidated metadata {mkey!r} in {store_name(store)}"
            ) from None
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise MetadataError(
                f"consolidated metadata {mkey!r} in {store_name(store)} is not valid JSON: {e}"
            ) from None
        if (
            not isinstance(doc, dict)
            or not isinstance(doc.get("metadata"), dict)
            or doc.get("zarr_consolidated_format") != 1
        ):
            raise MetadataError(
                f"consolidated metadata {mkey!r} in {store_name(store)} is not a zarr_consolidated_format "
                f"1 document"
            )
        # the members' documents as JSON objects; their bytes are made when a key is read
        # (an array opened through the format layer parses the object itself)
        meta: dict[str, Any] = {}
        for k, v in doc["metadata"].items():
            if not isinstance(k, str):
                continue
            try:
                validate_key(k)
            except ValueError:
                raise MetadataError(
                    f"consolidated metadata {mkey!r} in {store_name(store)} has an invalid key {k!r}"
                ) from None
            meta[_join(self._base, k)] = v
        self._raw = bytes(raw)
        self._meta = meta
        self._docs: dict[str, bytes] = {}
        self.consolidated = doc

    def consolidated_document(self, key: str) -> Any:
        """The JSON object of the metadata document at key as the consolidated metadata holds
        it, or None for a key it does not serve (see protocol.consolidated_documents).
        Shared: callers must not change it."""
        return self._meta.get(key) if self._from_snapshot(key) else None

    def _document(self, key: str) -> bytes:
        raw = self._docs.get(key)
        if raw is None:
            # in the document's own key order: a member's attributes keep the order they
            # were written in (zarr-python reads them so from .zmetadata)
            raw = self._docs[key] = _dumps(self._meta[key], sort_keys=False)
        return raw


    @property
    def metadata(self) -> dict[str, Any]:
        """The ``"metadata"`` mapping of the consolidated document (keys relative to base)."""
        return self.consolidated["metadata"]

    def __repr__(self) -> str:
        return f"ConsolidatedMetadataStore({store_name(self._store)}, metadata_key={self.metadata_key!r})"

    def _served(self, key: str) -> bool:
        """True if *key* is answered from the consolidated document. That includes v3
        ``zarr.json`` keys: a v2 hierarchy has none, and asking the store for each one (as
        format detection does) would cost a request per node."""
        return (is_metadata_key(key) or key.rsplit("/", 1)[-1] == "zarr.json") and \
            _base._under(key, self._base)

    # -- reads -----------------------------------------------------------------------------

    def __getitem__(self, key: str) -> bytes:
        validate_key(key)
        if key == self.metadata_key:
            return self._raw
        if self._from_snapshot(key):
            return self._document(key)
        return self._store[key]

    def getitems(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return ``{key: value}`` for the *keys* present; absent keys are omitted.

        Metadata keys of the consolidated hierarchy come from the consolidated document, others from
        the underlying store.
        """
        out: dict[str, bytes] = {}
        rest = []
        for k in keys:
            validate_key(k)
            if k == self.metadata_key:
                out[k] = self._raw
            elif self._from_snapshot(k):
                if k in self._meta:
                    out[k] = self._document(k)
            else:
                rest.append(k)
        if rest:
            out.update(_base.getitems(self._store, rest))
        return out

    def _serves(self, key: str) -> bool:
        return key == self.metadata_key or self._served(key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        validate_key(key)
        if key == self.metadata_key:
            return True
        if self._from_snapshot(key):
            return key in self._meta
        return key in self._store

    def __iter__(self) -> Iterator[str]:
        keys = set(self._meta)
        keys.add(self.metadata_key)
        for k in list(self._store):
            if not self._served(k):
                keys.add(k)
        return iter(sorted(keys))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def listdir(self, prefix: str = "") -> list[str]:
        """Sorted names of the immediate children of *prefix*: nodes from the consolidated
        document, chunks from the underlying store.
        """
        prefix = normalize_prefix(prefix)
        if not _base._under(prefix, self._base) and not _base._under(self._base, prefix):
            return _base.listdir(self._store, prefix)  # outside the consolidated hierarchy
        if self._stale_listing(prefix):
            return _base.listdir(self._store, prefix)
        names = set(_base._listdir_keys(self._meta, prefix))
        if not _base._under(prefix, self._base):
            # a parent of the base: its own entries come from the store
            names.update(_base.listdir(self._store, prefix))
        elif _join(prefix, ".zarray") in self._meta:
            # an array: its chunks live in the store, its metadata in the document
            names.update(n for n in _base.listdir(self._store, prefix) if n not in METADATA_NAMES)
        if prefix == self._base or (not prefix and not self._base):
            names.add(self.metadata_key.rsplit("/", 1)[-1])
        return sorted(names)

    def getsize(self, prefix: str = "") -> int:
        """Total size in bytes of the values at or under *prefix* in the underlying store."""
        return _base.getsize(self._store, prefix)

    # -- writes ----------------------------------------------------------------------------

    def _check_key(self, key: str) -> None:
        validate_key(key)
        self._check_writable(key)
        if key == self.metadata_key or self._served(key):
            raise ReadOnlyError(
                f"{self!r}: metadata key {key!r} is served from the consolidated document and "
                f"cannot be changed here; change it in the underlying store and consolidate "
                f"again"
            )

    def rmdir(self, prefix: str = "") -> None:
        """Always raises :class:`~chunkstore.errors.ReadOnlyError`: removing nodes would change
        the consolidated hierarchy.
        """
        self._check_writable()
        raise ReadOnlyError(
            f"{self!r}: rmdir would change the consolidated hierarchy; remove nodes in the "
            f"underlying store and consolidate again"
        )

    def close(self) -> None:
        """Close the underlying store, if it has a ``close`` method."""
        fn = protocol.closer(self._store)
        if fn is not None:
            fn()
