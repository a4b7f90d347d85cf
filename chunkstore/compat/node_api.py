"""zarr-python 3's attributes of arrays and groups, mixed into Array and Group.

Where zarr-python 2 and 3 give one name two kinds, one object serves both: ``nbytes_stored``
is an int that can be called (zarr-python 3's method), ``Group.members`` is a dict that can be
called (``members(max_depth=)``, zarr-python 3's method)."""

from __future__ import annotations

from chunkstore import config as _config
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


class ConsolidatedMetadata:
    """zarr-python 3's ``GroupMetadata.consolidated_metadata``: ``metadata``, the metadata
    of a group's direct members by name, taken from the consolidated document (a member
    group's own ``consolidated_metadata`` holds its members in turn)."""

    kind = "inline"
    must_understand = False

    def __init__(self, metadata):
        self.metadata = dict(metadata)

    def to_dict(self):
        """As zarr-python 3's ``ConsolidatedMetadata.to_dict()``."""
        return {"kind": self.kind, "must_understand": self.must_understand,
                "metadata": {k: v.to_dict() for k, v in self.metadata.items()}}

    def __eq__(self, other):
        return isinstance(other, ConsolidatedMetadata) and self.metadata == other.metadata

    def __repr__(self):
        return f"ConsolidatedMetadata(kind='inline', metadata={self.metadata!r})"


class GroupMetadata:
    """zarr-python 3's ``Group.metadata`` (and its ``zarr.core.group.GroupMetadata``, which
    ``create_hierarchy`` takes): attributes, zarr_format, node_type, consolidated_metadata
    (None unless the group was opened through consolidated metadata) and ``to_dict()``."""

    node_type = "group"

    def __init__(self, attributes=None, zarr_format=3, consolidated_metadata=None):
        self.attributes = dict(attributes or {})
        self.zarr_format = zarr_format
        self.consolidated_metadata = consolidated_metadata

    def to_dict(self):
        """The group metadata as zarr-python 3's ``GroupMetadata.to_dict()`` gives it."""
        cm = self.consolidated_metadata
        return {"attributes": self.attributes, "zarr_format": self.zarr_format,
                "node_type": "group",
                "consolidated_metadata": None if cm is None else cm.to_dict()}

    def __eq__(self, other):
        return isinstance(other, GroupMetadata) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return (f"GroupMetadata(attributes={self.attributes!r}, zarr_format={self.zarr_format}"
                f", consolidated_metadata={self.consolidated_metadata!r})")


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
        return type(self)(self.store, path=self.path, read_only=self.read_only,
                          synchronizer=self.synchronizer,
                          write_empty_chunks=given.get("write_empty_chunks",
                                                       self.write_empty_chunks),
                          order=order)

    def update_attributes(self, new_attributes):
        """zarr-python 3's ``update_attributes``: merge new_attributes in; returns self."""
        self.attrs.update(new_attributes)
        return self


def family_format(zarr_format, family_default=2):
    """zarr_format, else the config's default_zarr_format, else the family's default."""
    return _config.default_zarr_format(zarr_format, family_default)
