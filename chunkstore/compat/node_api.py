"""zarr-python 3's attributes of arrays and groups, mixed into Array and Group.

Where zarr-python 2 and 3 give one name two kinds, one object serves both: ``nbytes_stored``
is an int that can be called (zarr-python 3's method), ``Group.members`` is a dict that can be
called (``members(max_depth=)``, zarr-python 3's method)."""

from __future__ import annotations

from chunkstore import config as _config
from chunkstore.metadata import zarr3_view
from chunkstore.compat.dtype import parse_dtype


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


class GroupMetadata:
    """zarr-python 3's ``Group.metadata``: attributes, zarr_format, node_type and
    ``to_dict()``."""

    node_type = "group"

    def __init__(self, attributes, zarr_format):
        self.attributes = dict(attributes)
        self.zarr_format = zarr_format

    def to_dict(self):
        """The group metadata as zarr-python 3's ``GroupMetadata.to_dict()`` gives it (no
        consolidated metadata).
        """
        return {"attributes": self.attributes, "zarr_format": self.zarr_format,
                "node_type": "group", "consolidated_metadata": None}

    def __repr__(self):
        return f"GroupMetadata(attributes={self.attributes!r}, zarr_format={self.zarr_format})"


class ArrayAPIv3:
    """Mixin: zarr-python 3's Array attributes (the metadata comes from ``_meta``)."""

    @property
    def compressors(self):
        """zarr-python 3's ``compressors``: a tuple of the bytes -> bytes codecs (Zarr v3; of
        the inner chunks if sharded) or of the numcodecs compressor (Zarr v2)."""
        return zarr3_view.compressors(self._meta)

    @property
    def _zdtype(self):
        """The array's data type as a zarr-python 3 data type object (zarr-python 3 keeps it
        as ``Array._zdtype``; code written against zarr reads it there)."""
        return parse_dtype(self.dtype if not self.dtype.hasobject else str,
                           zarr_format=self.metadata.zarr_format)

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

    def update_attributes(self, new_attributes):
        """zarr-python 3's ``update_attributes``: merge new_attributes in; returns self."""
        self.attrs.update(new_attributes)
        return self


def family_format(zarr_format, family_default=2):
    """zarr_format, else the config's default_zarr_format, else the family's default."""
    return _config.default_zarr_format(zarr_format, family_default)
