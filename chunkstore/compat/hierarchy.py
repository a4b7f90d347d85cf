"""zarr-python 3's group creation: create_group and create_hierarchy."""

from __future__ import annotations

from chunkstore.storage.store_path import split_store_path
from chunkstore import config as _config
from chunkstore.hierarchy import creation
from chunkstore.hierarchy.creation import contains_group
from chunkstore.compat.creation import create_array
from chunkstore.hierarchy.group import Group, _init_group
from chunkstore.metadata.formats import array_document_format
from chunkstore.storage.normalize import normalize_store


def create_group(store, *, path=None, zarr_format=None, overwrite=False, attributes=None,
                 storage_options=None):
    """zarr-python 3's ``create_group``: a new group (Zarr v3 unless zarr_format=2 or the
    config's default_zarr_format), with attributes; raises if something is there unless
    overwrite=True."""
    store, path = split_store_path(store, path)
    creation._check_format(zarr_format)
    zarr_format = _config.default_zarr_format(zarr_format, 3)
    store = normalize_store(store, mode="a", storage_options=storage_options)
    path = creation.normalize_path(path)
    _init_group(store, path, overwrite=overwrite, zarr_format=zarr_format)
    g = Group(store, path)
    if attributes:
        g.attrs.update(attributes)
    return g


def create_hierarchy(*, store, nodes, overwrite=False):
    """zarr-python 3's ``create_hierarchy``: create the groups and arrays described by nodes
    (path -> the metadata objects ``.metadata`` returns, or their ``to_dict()`` documents),
    parents first, with the missing groups between them and the root; yields (path, node)
    as each is made."""
    store = normalize_store(store, mode="a")
    nodes = dict(nodes)
    # as zarr-python 3: the hierarchy is completed, each missing ancestor (the root too) a
    # group of the format of the node under it, made and yielded before it
    for path in list(nodes):
        meta = nodes[path]
        fmt = (meta.to_dict() if hasattr(meta, "to_dict") else dict(meta)).get("zarr_format", 3)
        parts = path.strip("/").split("/") if path.strip("/") else []
        for i in range(len(parts)):
            parent = "/".join(parts[:i])
            if parent not in nodes and not contains_group(store, parent):
                nodes[parent] = {"zarr_format": fmt, "node_type": "group", "attributes": {}}
    for path in sorted(nodes, key=lambda p: (p.strip("/").count("/") if p.strip("/") else -1,
                                             p)):
        meta = nodes[path]
        doc = meta.to_dict() if hasattr(meta, "to_dict") else dict(meta)
        fmt = doc.get("zarr_format", 3)
        kind = doc.get("node_type") or ("array" if "shape" in doc else "group")
        if kind == "group":
            yield path, create_group(store, path=path, zarr_format=fmt, overwrite=overwrite,
                                     attributes=doc.get("attributes"))
        else:
            yield path, _array_from_doc(store, path, doc, overwrite)


def _array_from_doc(store, path, doc, overwrite):
    return create_array(store, name=path, attributes=doc.get("attributes"), overwrite=overwrite,
                        **array_document_format(doc).array_arguments(doc))
