"""Which node (array or group) is at a path, in which Zarr format, and its metadata keys.

Zarr v2 keeps `.zarray` / `.zgroup` / `.zattrs` documents; Zarr v3 keeps one `zarr.json` per
node (attributes inside). Everything above the metadata modules asks here, so that arrays,
groups and creation work the same for both formats.
"""

from __future__ import annotations

import json

from chunkstore.errors import MetadataError
from chunkstore.metadata.formats import format_of

V2_ARRAY, V2_GROUP, V2_ATTRS, V3_META = ".zarray", ".zgroup", ".zattrs", "zarr.json"


def prefix(path: str) -> str:
    return path + "/" if path else ""


def node_kind(store, path: str):
    """("array" | "group", 2 | 3) for the node at path, or (None, None) if there is none."""
    p = prefix(path)
    if p + V2_ARRAY in store:
        return "array", 2
    if p + V2_GROUP in store:
        return "group", 2
    key = p + V3_META
    try:
        raw = store[key]
    except KeyError:
        return None, None
    try:
        kind = json.loads(raw).get("node_type")
    except (ValueError, AttributeError, UnicodeDecodeError, RecursionError) as e:
        raise MetadataError(f"invalid metadata at {key!r} in {store!r}: {e}") from None
    if kind not in ("array", "group"):
        raise MetadataError(f"invalid metadata at {key!r} in {store!r}: node_type must be "
                            f"'array' or 'group', got {kind!r}")
    return kind, 3


def metadata_key(path: str, zarr_format: int, kind: str) -> str:
    return prefix(path) + format_of(zarr_format).metadata_key(kind)


def attrs_key(path: str, zarr_format: int) -> str:
    return prefix(path) + format_of(zarr_format).attrs_key


class Node:
    """What arrays and groups share: where they are, how they are opened, their attributes.
    Subclasses set _store, _path, _read_only, _synchronizer and _format."""

    @property
    def store(self):
        return self._store

    @property
    def path(self):
        return self._path

    @property
    def name(self):
        return "/" + self._path if self._path else "/"

    @property
    def basename(self):
        return self._path.rsplit("/", 1)[-1] if self._path else ""

    @property
    def read_only(self):
        return self._read_only

    @property
    def synchronizer(self):
        return self._synchronizer

    @property
    def zarr_format(self):
        return self._format

    @property
    def attrs(self):
        from chunkstore.attrs import Attributes
        return Attributes(self._store, attrs_key(self._path, self._format),
                          read_only=self._read_only, synchronizer=self._synchronizer,
                          zarr_format=self._format)
