"""Which node (array or group) is at a path, in which Zarr format, and its metadata keys.

Zarr v2 keeps `.zarray` / `.zgroup` / `.zattrs` documents; Zarr v3 keeps one `zarr.json` per
node (attributes inside). Everything above the metadata modules asks here, so that arrays,
groups and creation work the same for both formats.
"""

from __future__ import annotations

from chunkstore import config
from chunkstore.hierarchy.attrs import Attributes
from chunkstore.errors import (ArrayFormatMismatchError, ArrayNotFoundError, ChunkstoreError,
                               GroupFormatMismatchError, GroupNotFoundError,
                               PathNotFoundError)
from chunkstore.metadata._common import load_json_object
from chunkstore.metadata.formats import FORMATS, format_of, node_at
from chunkstore.errors import MetadataError, store_name
from chunkstore.storage import protocol

# the document names of each format (metadata.formats holds them; kept here for callers)
V2_ARRAY, V2_GROUP, V2_ATTRS = FORMATS[2].array_key, FORMATS[2].group_key, FORMATS[2].attrs_key
V3_META = FORMATS[3].array_key


def array_summary(store, path: str, zarr_format: int) -> tuple:
    """(shape, dtype) of the array at path from its metadata document alone (a consolidated
    view's JSON object where there is one): what a listing such as tree() shows, without
    opening the array (no codec chain is built). MetadataError naming the key if the document
    does not say."""
    import numpy as np
    key = metadata_key(path, zarr_format, "array")
    docs = protocol.consolidated_documents(store)
    doc = docs(key) if docs is not None else None
    if doc is None:
        try:
            raw = store[key]
        except KeyError:
            # gone since it was listed (another handle deleted it): not invalid metadata
            raise ArrayNotFoundError(store_name(store), path) from None
    try:
        if doc is None:
            doc = load_json_object(raw)
        args = format_of(zarr_format).array_arguments(doc)
        dt = args["dtype"]
        dtype = np.dtype([tuple(f) for f in dt] if isinstance(dt, list) else dt)
        return tuple(int(n) for n in args["shape"]), dtype
    except (KeyError, TypeError, ValueError) as e:
        raise MetadataError(f"invalid array metadata at {key!r} in {store_name(store)}: "
                            f"{e}") from e


def location_store(store):
    """The store that holds a node's data: a consolidated-metadata view's underlying store,
    any other store itself. Two handles on one path of one location are the same node,
    whether or not either reads its metadata through the consolidated document."""
    if protocol.consolidated_documents(store) is not None:
        inner = getattr(store, "store", None)
        if inner is not None:
            return inner
    return store


def same_location(a, b) -> bool:
    """Whether stores a and b are one location (see :func:`location_store`)."""
    a, b = location_store(a), location_store(b)
    return a is b or a == b


def holds(store, path: str, other_store, other_path: str) -> bool:
    """Whether the node at path of store is, or is a group above, the node at other_path of
    other_store, wherever each store object was opened (replacing the one deletes the
    other)."""
    here, node = protocol.node_location(store, path)
    there, other = protocol.node_location(other_store, other_path)
    return there == here and (node == "" or other == node or other.startswith(node + "/"))


def prefix(path: str) -> str:
    """*path* followed by ``"/"``, or ``""`` for the root path: what a key below the node starts
    with.
    """
    return path + "/" if path else ""


def node_kind(store, path: str, zarr_format: int | None = None, *, want: str = "node",
              creating: bool = False, warn: bool = True):
    """("array" | "group", 2 | 3) for the node at path, or (None, None) if there is none.

    zarr_format is the format a caller asked for explicitly (None: either). It binds: a node
    of the other format at path raises :func:`format_mismatch`'s error (want and creating
    choose it) instead of being opened as if it were of the asked format, or taken for
    absent and created over or beside. (Where both formats' documents lie at path, the
    asked format's node is the one found; with none asked, the v3 node, with a warning
    unless warn=False: see :func:`~chunkstore.metadata.formats.node_at`.)"""
    kind, fmt = node_at(store, path, zarr_format, warn=warn)
    check_format(store, path, kind, fmt, zarr_format, want=want, creating=creating)
    return kind, fmt


ancestors = protocol.ancestors  # (the paths of the groups above a node path)


def overlapping(a: str, b: str) -> bool:
    """Whether the nodes at paths a and b (normalized) overlap: one is the other or holds it
    (the root holds every node)."""
    return a == b or not a or not b or b.startswith(a + "/") or a.startswith(b + "/")


def new_node_format(store, path: str, zarr_format: int | None, family_default: int) -> int:
    """The Zarr format of a node about to be created at path: zarr_format if given, else
    the configured ``default_zarr_format`` if set, else the format of the nearest group above
    path, else family_default. One hierarchy, one format: a v2 node under a v3 group (or the
    reverse) is invisible to zarr-python's and xarray's traversal from the root (a v3 group
    lists v3 members only), and its consolidated metadata leaves it out."""
    if zarr_format is not None:
        return zarr_format
    configured = config.default_zarr_format(None, 0)
    if configured:
        return configured
    above = group_above(store, path)
    return family_default if above is None else above[1]


def group_above(store, path: str) -> tuple[str, int] | None:
    """(path, Zarr format) of the nearest group above the node at path, or None where there
    is none, or an array is nearer (a creation there is refused, naming the array)."""
    for above in reversed(ancestors(path)):  # (the nearest first)
        kind, fmt = node_at(store, above, None, warn=False)
        if kind == "group" and fmt is not None:
            return above, fmt
        if kind is not None:
            return None
    return None


def check_format(store, path: str, kind: str | None, found: int | None,
                 zarr_format: int | None, *, want: str = "node",
                 creating: bool = False) -> None:
    """Raise :func:`format_mismatch`'s error if the node of kind in Zarr format found at
    path is not of the explicitly asked zarr_format (nothing when either is None, nor when
    creating where a node of another kind than want is: the caller's Contains*Error)."""
    if creating and kind != want:
        return
    if zarr_format is not None and kind is not None and found is not None \
            and found != zarr_format:
        raise format_mismatch(store, path, kind, found, zarr_format, want=want,
                              creating=creating)


def format_mismatch(store, path: str, kind: str, found: int, asked: int, *,
                    want: str = "node", creating: bool = False) -> ChunkstoreError:
    """The error for asking for a node of Zarr format asked where a kind ("array" or
    "group") of format found is; want is what was asked for ("array", "group" or "node").

    Reading (modes "r", "r+") it is the not-found error of want, as zarr-python 3 raises:
    ArrayNotFoundError, GroupNotFoundError or PathNotFoundError (all FileNotFoundError and
    ValueError). Creating (mode "a"; "w-"/"x" refuse any existing node and "w" replaces it)
    a node of the kind asked for it is Array/GroupFormatMismatchError, both that not-found
    error and the contains error (FileExistsError) of what is there: the existing node is
    neither converted nor shadowed by one of the asked format written beside it. (A node of
    the other kind is the caller's Contains*Error, whatever its format.) The message names
    the path, the store and both formats."""
    where = f"at path {path!r} in {store_name(store)}"
    cls: type[ChunkstoreError]
    if creating and want == kind:
        cls = ArrayFormatMismatchError if kind == "array" else GroupFormatMismatchError
        return cls(f"no Zarr format {asked} {kind} {where} (zarr_format={asked} was asked "
                   f"for): it holds a Zarr format {found} {kind}, which is not converted, and "
                   f"no Zarr format {asked} {kind} is created beside it (open it with "
                   f"zarr_format={found} or None, or use mode='w' to replace it)")
    cls = (ArrayNotFoundError if want == "array" else
           GroupNotFoundError if want == "group" else PathNotFoundError)
    what = want if want in ("array", "group") else "array or group"
    return cls(f"no Zarr format {asked} {what} {where} (zarr_format={asked} was asked for): "
               f"it holds a Zarr format {found} {kind}")


def creation_lock_key(path: str, kind: str) -> str:
    """The lock held while creating a node at path: one key whatever the kind and format
    (the v2 array document's name, the lock a zarr-style synchronizer's resize holds), so
    that creators of an array, a group, or a parent group on the way to a node below, of
    either format, at one path exclude each other (a group's creator and an array's at one
    path took different locks, and a parent group was written over an array made at once)."""
    return prefix(path) + FORMATS[2].metadata_key("array")


def metadata_key(path: str, zarr_format: int, kind: str) -> str:
    """The store key of the metadata document of the *kind* node (``"array"`` or ``"group"``) at
    *path* in Zarr format *zarr_format*.
    """
    return prefix(path) + format_of(zarr_format).metadata_key(kind)


def attrs_key(path: str, zarr_format: int) -> str:
    """The store key holding the user attributes of the node at *path* in Zarr format
    *zarr_format*.
    """
    return prefix(path) + format_of(zarr_format).attrs_key


class Node:
    """What arrays and groups share: where they are, how they are opened, their attributes.
    Subclasses set _store, _path, _read_only, _synchronizer and _format, and say which kind
    they are (_kind)."""

    _kind: str  # "array" or "group"

    @property
    def store(self):
        """The store holding the node."""
        return self._store

    @property
    def path(self):
        """The node's path in the store (``""`` for the root)."""
        return self._path

    @property
    def name(self):
        """The node's absolute name: its path with a leading ``"/"``."""
        return "/" + self._path if self._path else "/"

    @property
    def store_path(self):
        """zarr-python 3's ``store_path``: a StorePath of this node's store and path."""
        from chunkstore.storage.store_path import StorePath
        return StorePath(self.store, self.path)

    @property
    def basename(self):
        """The last component of the node's path (``""`` for the root)."""
        return self._path.rsplit("/", 1)[-1] if self._path else ""

    @property
    def read_only(self):
        """Whether the node was opened read-only."""
        return self._read_only

    @property
    def synchronizer(self):
        """The synchronizer that locks writes to the node, or None."""
        return self._synchronizer

    @property
    def zarr_format(self):
        """The node's Zarr format version (2 or 3)."""
        return self._format

    @property
    def _attrs_locks(self):
        # what an attribute update locks: the in-process locks of this process's handles on
        # the node, then the synchronizer's when it has one (an array overrides this with
        # its own: the ones its metadata changes take), so that threads or asyncio tasks
        # updating a group's attributes at once (a read-modify-write of its document)
        # never lose each other's keys, whatever synchronizer each handle was opened with
        from chunkstore.sync.synchronizers import handle_locks, layered_locks
        if self._synchronizer is not None:
            return layered_locks(self._store, self._path, self._synchronizer)
        return handle_locks(self._store, self._path)

    @property
    def _attributes_store(self):
        # where the attributes are read: the node's store (an array overrides this: where it
        # reads its metadata now)
        return self._store

    @property
    def attrs(self):
        """The node's user attributes, an :class:`~chunkstore.hierarchy.attrs.Attributes` read
        from and written to the store (through a consolidated snapshot: read only).
        """
        store = self._attributes_store
        return Attributes(store, attrs_key(self._path, self._format),
                          read_only=self._read_only or store is not self._store,
                          synchronizer=self._attrs_locks,
                          zarr_format=self._format,
                          node_key=metadata_key(self._path, self._format, self._kind),
                          kind=self._kind)
