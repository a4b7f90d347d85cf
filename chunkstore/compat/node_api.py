"""zarr-python 3's attributes of arrays and groups, mixed into Array and Group.

Where zarr-python 2 and 3 give one name two kinds, one object serves both: ``nbytes_stored``
is an int that can be called (zarr-python 3's method), ``Group.members`` is a dict that can be
called (``members(max_depth=)``, zarr-python 3's method)."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import Any

from chunkstore.metadata import zarr3_view
from chunkstore.compat.dtype import parse_dtype


#: The asynchronous view class of each node class (chunkstore.aio registers AsyncArray for
#: Array and AsyncGroup for Group when it is imported, which ``import chunkstore`` does): the
#: nodes are below the asynchronous layer and do not import it.
ASYNC_VIEWS: dict[type, type] = {}


def register_async_view(node_cls: type, view_cls: type) -> None:
    """Record view_cls as the asynchronous view of node_cls's nodes."""
    ASYNC_VIEWS[node_cls] = view_cls


def async_view(node):
    """The asynchronous view (AsyncArray, AsyncGroup) of a node."""
    for node_cls, view_cls in ASYNC_VIEWS.items():
        if isinstance(node, node_cls):
            return view_cls(node)
    raise TypeError(f"no asynchronous view of {type(node).__name__} (import chunkstore.aio)")


class CallableInt(int):
    """An int that returns itself when called: ``a.nbytes_stored`` and ``a.nbytes_stored()``."""

    def __call__(self) -> int:
        return int(self)


class Members(dict):
    """name -> node of a group's direct members; calling it is zarr-python 3's
    ``members(max_depth=0)``: a tuple of (relative path, node) pairs, max_depth levels deeper
    (None: all)."""

    def __init__(self, group, items):
        super().__init__(items)
        self._group = group

    def __call__(self, max_depth=0, *, use_consolidated_for_children=True):
        if max_depth is not None and (not isinstance(max_depth, int) or max_depth < 0):
            raise ValueError(f"max_depth must be None or an integer >= 0, got {max_depth!r}")
        out = []

        def walk(group, prefix, depth):
            for name, node in group.items():
                out.append((prefix + name, node))
                if hasattr(node, "group_keys") and (max_depth is None or depth < max_depth):
                    walk(node, prefix + name + "/", depth + 1)

        walk(self._group, "", 0)
        return tuple(out)


class ArrayConfig:
    """zarr-python 3's ``Array.config``: the runtime settings of one array handle."""

    def __init__(self, order, write_empty_chunks):
        self.order = order
        self.write_empty_chunks = write_empty_chunks

    def __repr__(self):
        return (f"ArrayConfig(order={self.order!r}, "
                f"write_empty_chunks={self.write_empty_chunks!r})")

    def __eq__(self, other):
        return isinstance(other, ArrayConfig) and (self.order, self.write_empty_chunks) == (
            other.order, other.write_empty_chunks)


def _plain(obj):
    """obj's JSON form (tuples as lists, codec objects as their configuration): what two
    metadata documents are compared by, whichever library's objects they come from."""
    def default(o):
        for name in ("to_dict", "get_config"):
            if callable(getattr(o, name, None)):
                return getattr(o, name)()
        if hasattr(o, "item"):  # NumPy scalars
            return o.item()
        raise TypeError(f"not JSON: {type(o).__name__}")
    return json.loads(json.dumps(obj, default=default, allow_nan=True))


def _group_document(other) -> dict | None:
    """other's group metadata document (``to_dict()``, None's consolidated_metadata left
    out as zarr-python 3 leaves it) when other is group metadata of either library, else
    None."""
    if getattr(other, "node_type", None) != "group" or not callable(
            getattr(other, "to_dict", None)):
        return None
    try:
        doc = _plain(other.to_dict())
    except (TypeError, ValueError):
        return None
    if isinstance(doc, dict) and doc.get("consolidated_metadata", 0) is None:
        del doc["consolidated_metadata"]
    return doc


def _sort_key(path: str) -> tuple[int, str]:
    # zarr-python 3's order of the flattened members: parents first, then by name, caseless
    return path.count("/"), unicodedata.normalize("NFKC", path).casefold()


class ConsolidatedMetadata:
    """zarr-python 3's ``GroupMetadata.consolidated_metadata``: ``metadata``, the metadata
    of a group's direct members by name, taken from the consolidated document (a member
    group's own ``consolidated_metadata`` holds its members in turn); ``flattened_metadata``
    has every member below by relative path."""

    kind = "inline"
    must_understand = False

    def __init__(self, metadata: Mapping[str, Any], kind: str = "inline",
                 must_understand: bool = False) -> None:
        if kind != "inline" or must_understand is not False:
            raise ValueError(f"consolidated metadata is kind 'inline' with must_understand "
                             f"False, got kind={kind!r}, must_understand={must_understand!r}")
        self.metadata = dict(metadata)

    @property
    def flattened_metadata(self) -> dict[str, Any]:
        """Every member's metadata below the group by relative path ("a", "a/b", ...),
        parents before their children, as zarr-python 3's ``flattened_metadata``: a member
        group's entry has an empty consolidated_metadata (its members are entries of their
        own)."""
        out: dict[str, Any] = {}

        def flatten(prefix: str, members: Mapping[str, Any]) -> None:
            for name, meta in members.items():
                path = prefix + name
                cm = getattr(meta, "consolidated_metadata", None)
                if getattr(meta, "node_type", None) == "group" and cm is not None:
                    out[path] = GroupMetadata(meta.attributes, meta.zarr_format,
                                              ConsolidatedMetadata({}))
                    flatten(path + "/", cm.metadata)
                else:
                    out[path] = meta
        flatten("", self.metadata)
        return {k: out[k] for k in sorted(out, key=_sort_key)}

    def to_dict(self) -> dict[str, Any]:
        """As zarr-python 3's ``ConsolidatedMetadata.to_dict()``: the flattened members,
        parents first."""
        return {"kind": self.kind, "must_understand": self.must_understand,
                "metadata": {k: v.to_dict() for k, v in self.flattened_metadata.items()}}

    def __eq__(self, other: object) -> bool:
        if not callable(getattr(other, "to_dict", None)) or \
                getattr(other, "kind", None) != "inline":
            return NotImplemented
        try:
            return _plain(self.to_dict()) == _plain(other.to_dict())  # type: ignore[attr-defined]
        except (TypeError, ValueError):
            return False

    # mutable, compared by value: not hashable
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"ConsolidatedMetadata(metadata={self.metadata!r}, kind='inline', "
                f"must_understand=False)")


class GroupMetadata:
    """zarr-python 3's ``Group.metadata`` (and its ``zarr.core.group.GroupMetadata``, which
    ``create_hierarchy`` takes): attributes, zarr_format, node_type, consolidated_metadata
    (None unless the group was opened through consolidated metadata) and ``to_dict()``.
    Equal to group metadata of the same document, zarr-python 3's objects included."""

    node_type = "group"

    def __init__(self, attributes: Mapping[str, Any] | None = None, zarr_format: int = 3,
                 consolidated_metadata: ConsolidatedMetadata | None = None) -> None:
        self.attributes = dict(attributes or {})
        self.zarr_format = zarr_format
        self.consolidated_metadata = consolidated_metadata

    def to_dict(self) -> dict[str, Any]:
        """The group metadata as zarr-python 3's ``GroupMetadata.to_dict()`` gives it (no
        ``consolidated_metadata`` key when there is none)."""
        out: dict[str, Any] = {"attributes": self.attributes, "zarr_format": self.zarr_format}
        if self.consolidated_metadata is not None:
            out["consolidated_metadata"] = self.consolidated_metadata.to_dict()
        out["node_type"] = "group"
        return out

    def __eq__(self, other: object) -> bool:
        theirs = _group_document(other)
        if theirs is None:
            return NotImplemented
        return _group_document(self) == theirs

    # mutable, compared by value: not hashable
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"GroupMetadata(attributes={self.attributes!r}, zarr_format={self.zarr_format}"
                f", consolidated_metadata={self.consolidated_metadata!r}, node_type='group')")


class ArrayAPIv3:
    """Mixin: zarr-python 3's Array attributes (the metadata comes from ``_meta``)."""

    @property
    def compressors(self):
        """zarr-python 3's ``compressors``: a tuple of the bytes -> bytes codecs (Zarr v3; of
        the inner chunks if sharded) or of the numcodecs compressor (Zarr v2)."""
        return zarr3_view.compressors(self._meta)

    @property
    def async_array(self):
        """zarr-python 3's ``async_array``: an AsyncArray of this array (its coroutines run
        the same engine off the event loop)."""
        return async_view(self)

    #: (zarr-python 3 keeps it as ``_async_array``; code written against zarr reads it there)
    _async_array = async_array

    @property
    def _zdtype(self):
        """The array's data type as a zarr-python 3 data type object (zarr-python 3 keeps it
        as ``Array._zdtype``; code written against zarr reads it there)."""
        return parse_dtype(self.dtype if not self.dtype.hasobject else str,
                           zarr_format=self.zarr_format)

    @property
    def serializer(self):
        """zarr-python 3's ``serializer``: the array -> bytes codec (None for Zarr v2)."""
        return zarr3_view.serializer(self._meta)

    @property
    def codecs(self):
        """The whole Zarr v3 codec chain as codec objects (None for Zarr v2)."""
        return zarr3_view.codecs(self._meta)

    @property
    def config(self):
        """zarr-python 3's ``Array.config``: an :class:`ArrayConfig` of the array's order and
        write_empty_chunks.
        """
        return ArrayConfig(self.order, self.write_empty_chunks)

    def info_complete(self):
        """zarr-python 3's ``info_complete()``: ``info`` with the stored sizes (which ``info``
        here always has)."""
        return self.info

    def with_config(self, config):
        """zarr-python 3's ``with_config``: another handle on this array whose ``order``
        and ``write_empty_chunks`` are those of config (a dict or an ArrayConfig; what it
        leaves out stays as it is)."""
        given = config if isinstance(config, dict) else {
            "order": config.order, "write_empty_chunks": config.write_empty_chunks}
        unknown = set(given) - {"order", "write_empty_chunks"}
        if unknown:
            raise ValueError(f"with_config takes 'order' and 'write_empty_chunks', got "
                             f"{sorted(unknown)}")
        order = given.get("order", self.order)
        if order != self.order and self.ndim > 1:
            # (zarr-python 3 then returns arrays in that memory order; chunkstore returns
            # them in the stored order, and says so rather than ignore the request)
            raise ValueError(f"with_config: order {order!r} for array {self.path!r}, stored "
                             f"in {self.order!r} order: reads return the stored order here "
                             f"(np.asfortranarray / np.ascontiguousarray of the result "
                             f"give the other)")
        # (everything else as this handle's: the format found, missing_chunks,
        # cache_metadata, a view's overrides, the locks)
        state = self.__getstate__()
        state.update(write_empty_chunks=given.get("write_empty_chunks",
                                                  self.write_empty_chunks), order=order)
        return type(self)(**state, _locks=self._handle.options.locks)

    def update_attributes(self, new_attributes):
        """zarr-python 3's ``update_attributes``: merge new_attributes in; returns self."""
        self.attrs.update(new_attributes)
        return self
