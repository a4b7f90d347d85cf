"""zarr-python 3's defaults where the asynchronous API opens or creates nodes: the keywords
it hands the synchronous functions."""

from __future__ import annotations

from typing import Any

from chunkstore import config
from chunkstore.errors import ConsolidatedMetadataNotFoundError
from chunkstore.hierarchy.creation import normalize_path
from chunkstore.hierarchy.group import Group, open_group
from chunkstore.hierarchy.nodes import node_kind
from chunkstore.storage import protocol
from chunkstore.storage.normalize import normalize_store


def create_kwargs(kwargs: dict, default_format: int) -> dict:
    """zarr-python 3's create() keywords for chunkstore.create: zarr_format defaults to the
    configured default, else default_format (3 for AsyncArray.create, as zarr-python 3)."""
    kw = dict(kwargs)
    if kw.get("zarr_format") is None and kw.get("zarr_version") is None:
        kw["zarr_format"] = config.default_zarr_format(None, default_format)
    return kw


def v3_when_created(store: Any, path: str | None, mode: str, kwargs: dict) -> Any:
    """The store (normalized where a node may be created); kwargs given zarr_format 3 (or
    the configured default) where mode creates the node at path: "w", "w-", "x", or "a"
    with no node there. A node this call creates is Zarr v3, as zarr-python 3 creates it
    (open, open_array and array made v2 ones: the synchronous functions' zarr-python 2
    default); an existing node of either format is opened as it is."""
    if kwargs.get("zarr_format") is None and kwargs.get("zarr_version") is None and \
            mode in ("w", "w-", "x", "a"):
        store = normalize_store(store, mode="a", storage_options=kwargs.pop(
            "storage_options", None))
        if mode != "a" or node_kind(store, normalize_path(path))[0] is None:
            kwargs["zarr_format"] = config.default_zarr_format(None, 3)
    return store


def open_group_v3(store: Any, *, mode: str = "a", use_consolidated: Any = None,
                  path: str | None = None, **kwargs: Any) -> Group:
    """open_group with zarr-python 3's use_consolidated: None reads consolidated metadata
    where the group has it (modes r, r+), True needs it, False ignores it."""
    store = v3_when_created(store, path, mode, kwargs)
    if use_consolidated is None and mode in ("r", "r+") and \
            protocol.holds_consolidated_metadata(store):  # (a store may opt out)
        try:
            return open_group(store, mode=mode, path=path, use_consolidated=True, **kwargs)
        except ConsolidatedMetadataNotFoundError:
            pass
    return open_group(store, mode=mode, path=path, use_consolidated=bool(use_consolidated),
                      **kwargs)
