"""zarr-python 3's group creation: create_group and create_hierarchy."""

from __future__ import annotations

from chunkstore.storage.store_path import split_store_path
from chunkstore import config as _config
from chunkstore.hierarchy import creation
from chunkstore.hierarchy.creation import contains_group
from chunkstore.hierarchy.group import Group, _init_group
from chunkstore.compat.group_api import array_from_document, hierarchy_plan
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
    _init_group(store, path, overwrite=overwrite, zarr_format=zarr_format,
                attributes=attributes)
    return Group(store, path)


def create_hierarchy(*, store, nodes, overwrite=False):
    """zarr-python 3's ``create_hierarchy``: create the groups and arrays described by nodes
    (path -> the metadata objects ``.metadata`` returns, or their ``to_dict()`` documents),
    parents first, with the missing groups between them and the root; yields (path, node)
    as each is made."""
    store = normalize_store(store, mode="a")
    for path, doc, kind in hierarchy_plan(nodes, lambda p: contains_group(store, p)):
        if kind == "group":
            yield path, create_group(store, path=path, zarr_format=doc.get("zarr_format", 3),
                                     overwrite=overwrite, attributes=doc.get("attributes"))
        else:
            yield path, array_from_document(store, path, doc, overwrite)
