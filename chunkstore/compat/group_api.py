"""zarr-python 3's Group methods, mixed into Group."""

from __future__ import annotations

from chunkstore.compat.creation import create_array
from chunkstore.compat.node_api import ConsolidatedMetadata, GroupMetadata
from chunkstore.storage import protocol


class GroupAPIv3:
    """Mixin: zarr-python 3's Group attributes and create_array."""

    @property
    def metadata(self):
        """zarr-python 3's ``Group.metadata``: attributes, zarr_format, to_dict(), and for a
        group opened through consolidated metadata its members' metadata
        (``consolidated_metadata``, read from the consolidated document, not the store)."""
        consolidated = None
        if protocol.consolidated_documents(self.store) is not None:
            consolidated = ConsolidatedMetadata(
                {name: node.metadata for name, node in sorted(self.items())})
        return GroupMetadata(self.attrs.asdict(), self.zarr_format, consolidated)

    def array_values(self):
        """zarr-python 3's ``Group.array_values()``: the member arrays, by name order."""
        return (a for _, a in self.arrays())

    def group_values(self):
        """zarr-python 3's ``Group.group_values()``: the member groups, by name order."""
        return (g for _, g in self.groups())

    def info_complete(self):
        """zarr-python 3's ``Group.info_complete()``: the same report as :attr:`info`."""
        return self.info

    def update_attributes(self, new_attributes):
        """Merge new_attributes into the group's attributes; returns the group."""
        self.attrs.update(new_attributes)
        return self

    def require_array(self, name, *, shape, dtype=None, **kwargs):
        """zarr-python 3's ``require_array``: the array at name (its shape must match and
        dtype be castable), else a new one made by create_array."""
        if name in self.array_keys():
            return self.require_dataset(name, shape=shape, dtype=dtype)
        return self.create_array(name, shape=shape, dtype=dtype, **kwargs)

    def create_array(self, name, **kwargs):
        """zarr-python 3's ``Group.create_array``; the array gets the group's Zarr format
        unless zarr_format= says otherwise."""
        self._check_writable()
        kwargs.setdefault("zarr_format", self.zarr_format)
        kwargs.setdefault("synchronizer", self._synchronizer)
        return create_array(self._store, name=self._child(name), **kwargs)
