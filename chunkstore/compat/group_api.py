"""zarr-python 3's Group methods, mixed into Group."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chunkstore.compat.creation import create_array, create_array_signature
from chunkstore.hierarchy.creation import contains_group
from chunkstore.errors import IncompatibleGroupError, store_name
from chunkstore.compat.node_api import ConsolidatedMetadata, GroupMetadata, async_view
from chunkstore.metadata.formats import array_document_format
from chunkstore.storage import protocol


def hierarchy_plan(nodes, has_group):
    """create_hierarchy's work, in order: (path, document, kind) of each node, parents
    first, with a group (of the format of the node under it) for each missing ancestor
    (``has_group(path)``: whether one is there already), as zarr-python 3 completes the
    hierarchy. nodes: path -> a metadata object (``to_dict()``) or its document."""
    docs = {p.strip("/"): _node_document(m) for p, m in nodes.items()}
    formats: dict[int, list[str]] = {2: [], 3: []}
    for path, doc in docs.items():
        formats.setdefault(doc.get("zarr_format", 3), []).append(path)
    if formats[2] and formats[3]:  # (zarr-python 3's words; nothing is made yet)
        raise ValueError(f"Got data with both Zarr v2 and Zarr v3 nodes, which is invalid. "
                         f"The following keys map to Zarr v2 nodes: {formats[2]}. The "
                         f"following keys map to Zarr v3 nodes: {formats[3]}. Ensure that "
                         f"all nodes have the same Zarr format.")
    arrays = {p for p, d in docs.items() if _kind(d) == "array"}
    for path, doc in list(docs.items()):
        parts = path.split("/") if path else []
        for i in range(len(parts)):
            parent = "/".join(parts[:i])
            if parent in arrays:  # (zarr-python 3's words first; nothing is made yet)
                raise ValueError(f"Only Zarr groups can contain other nodes. The node at "
                                 f"{path!r} is below the array at {parent!r}")
            if parent not in docs and not has_group(parent):
                docs[parent] = {"zarr_format": doc.get("zarr_format", 3),
                                "node_type": "group", "attributes": {}}
    for path in sorted(docs, key=lambda p: (p.count("/") if p else -1, p)):
        doc = docs[path]
        yield path, doc, _kind(doc)


def _node_document(node):
    """A node's document: a metadata object's to_dict(), or the document as given."""
    return node.to_dict() if hasattr(node, "to_dict") else dict(node)


def _kind(doc):
    """A node document's kind: "array" or "group"."""
    return doc.get("node_type") or ("array" if "shape" in doc else "group")


def array_from_document(store, path, doc, overwrite):
    """A new array at path made from its metadata document (create_hierarchy's arrays)."""
    return create_array(store, name=path, attributes=doc.get("attributes"),
                        overwrite=overwrite, **array_document_format(doc).array_arguments(doc))


class GroupAPIv3:
    """Mixin: zarr-python 3's Group attributes and create_array."""

    @property
    def metadata(self):
        """zarr-python 3's ``Group.metadata``: attributes, zarr_format, to_dict(), and for a
        group opened through consolidated metadata its members' metadata
        (``consolidated_metadata``, read from the consolidated document, not the store)."""
        return self.metadata_with(self.attrs.asdict())

    def metadata_with(self: Any, attributes: Mapping[str, Any]) -> GroupMetadata:
        """``metadata`` with these attributes (an AsyncGroup's, held: no read of them)."""
        consolidated = None
        if protocol.consolidated_documents(self.store) is not None:
            consolidated = ConsolidatedMetadata(
                {name: node.metadata for name, node in sorted(self.items())})
        return GroupMetadata(attributes, self.zarr_format, consolidated)

    def create_hierarchy(self, nodes, *, overwrite=False):
        """zarr-python 3's ``Group.create_hierarchy``: create the groups and arrays of nodes
        (paths relative to this group -> metadata objects or documents), parents first and
        with the missing groups between, yielding (path, node) as each is made."""
        prefix = self.path.strip("/") + "/" if self.path.strip("/") else ""
        for key, node in nodes.items():  # (checked before anything is made, as zarr's)
            fmt = _node_document(node).get("zarr_format", 3)
            if fmt != self.zarr_format:
                raise ValueError(f"The zarr_format of the nodes must be the same as the "
                                 f"parent group. The node at {key} has zarr_format {fmt}, "
                                 f"but the parent group has zarr_format {self.zarr_format}.")
            if key.strip("/") == "":
                raise ValueError("The input defines a root node, but a root node already "
                                 "exists, namely this Group instance. It is an error to use "
                                 "this method to create a root node.")
        for path, doc, kind in hierarchy_plan(
                nodes, lambda p: p == "" or contains_group(self.store, prefix + p)):
            if kind == "group":
                if path == "":
                    continue  # this group (completing the plan: nodes has no root)
                yield path, self.create_group(path, overwrite=overwrite,
                                              attributes=doc.get("attributes"))
            else:
                yield path, array_from_document(self.store, prefix + path, doc, overwrite)

    @property
    def _async_group(self):
        """zarr-python 3's ``Group._async_group``: an AsyncGroup of this group (code written
        against zarr reads it there)."""
        return async_view(self)

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

    async def update_attributes_async(self, new_attributes):
        """zarr-python 3's ``Group.update_attributes_async``: the group's attributes become
        new_attributes (replaced, as zarr-python 3.1 does here, where update_attributes
        merges), written off the event loop; returns the group."""
        from chunkstore.aio.run import off_loop
        await off_loop(self.attrs.put, dict(new_attributes))
        return self

    def require_array(self, name, *, shape, dtype=None, exact=False, **kwargs):
        """zarr-python 3's ``require_array``: the array at name, else a new one made by
        create_array (with kwargs). An existing array's shape must be shape and, with a
        dtype, its data type dtype (exact=True) or one that casts safely to dtype; a group
        at name, or an array that does not fit, is a TypeError ("Incompatible ...")."""
        path = self._child(name)
        kind, fmt = self._member(path)  # (the group's format preferred: see Group._member)
        if kind == "array":
            return self._existing_array(name, path, fmt, shape, dtype, exact,
                                        stored_to_asked=True, options=kwargs)
        if kind == "group":
            raise IncompatibleGroupError(
                f"Incompatible object (Group) already exists at path {path!r} in "
                f"{store_name(self._store)}: an array was required there")
        return self.create_array(name, shape=shape, dtype=dtype, **kwargs)

    def create_array(self, name, **kwargs):
        """zarr-python 3's ``Group.create_array``; the array gets the group's Zarr format
        unless zarr_format= says otherwise."""
        self._check_writable()
        if kwargs.get("zarr_format") is None:
            kwargs["zarr_format"] = self.zarr_format
        kwargs.setdefault("synchronizer", self._synchronizer)
        if kwargs["zarr_format"] == 2 and kwargs.get("compressor", "auto") == "auto" \
                and kwargs.get("compressors", "auto") == "auto":
            # zarr-python 3's Group.create_array compresses a Zarr v2 array with numcodecs'
            # default Blosc unless told otherwise (its create_array function: Zstd)
            kwargs.pop("compressor", None)
            kwargs["compressors"] = ({"id": "blosc"},)
        return create_array(self._store, name=self._child(name), **kwargs)

    create_array.__signature__ = create_array_signature(  # type: ignore[attr-defined]
        "self", "name", zarr_format=None)
