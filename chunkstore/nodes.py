"""Which node (array or group) is at a path, in which Zarr format, and its metadata keys.

Zarr v2 keeps `.zarray` / `.zgroup` / `.zattrs` documents; Zarr v3 keeps one `zarr.json` per
node (attributes inside). Everything above the metadata modules asks here, so that arrays,
groups and creation work the same for both formats.
"""

from __future__ import annotations

from chunkstore.attrs import Attributes
from chunkstore.metadata.formats import FORMATS, format_of, node_at

# the document names of each format (metadata.formats holds them; kept here for callers)
V2_ARRAY, V2_GROUP, V2_ATTRS = FORMATS[2].array_key, FORMATS[2].group_key, FORMATS[2].attrs_key
V3_META = FORMATS[3].array_key


def prefix(path: str) -> str:
    return path + "/" if path else ""


def node_kind(store, path: str):
    """("array" | "group", 2 | 3) for the node at path, or (None, None) if there is none."""
    return node_at(store, path)


def creation_lock_key(path: str, kind: str) -> str:
    """The lock held while creating a node of kind at path. Named after the v2 metadata key
    whatever the format, so that creators of either format at one path exclude each other."""
    return prefix(path) + FORMATS[2].metadata_key(kind)


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
        return Attributes(self._store, attrs_key(self._path, self._format),
                          read_only=self._read_only, synchronizer=self._synchronizer,
                          zarr_format=self._format)
