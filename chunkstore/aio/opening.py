"""zarr-python 3's defaults where the asynchronous API opens or creates nodes: the keywords
it hands the synchronous functions."""

from __future__ import annotations

from typing import Any

from chunkstore import config
from chunkstore.errors import ConsolidatedMetadataNotFoundError
from chunkstore.hierarchy.creation import contains_group, normalize_path
from chunkstore.hierarchy.group import Group, open_group
from chunkstore.storage import protocol
from chunkstore.storage.normalize import normalize_store


def create_kwargs(kwargs: dict, default_format: int) -> dict:
    """zarr-python 3's create() keywords for chunkstore.create: zarr_format defaults to the
    configured default, else default_format (3 for AsyncArray.create, as zarr-python 3)."""
    kw = dict(kwargs)
    if kw.get("zarr_format") is None and kw.get("zarr_version") is None:
        kw["zarr_format"] = config.default_zarr_format(None, default_format)
    return kw


def open_group_v3(store: Any, *, mode: str = "a", use_consolidated: Any = None,
                  path: str | None = None, **kwargs: Any) -> Group:
    """open_group with zarr-python 3's use_consolidated: None reads consolidated metadata
    where the group has it (modes r, r+), True needs it, False ignores it."""
    if kwargs.get("zarr_format") is None and kwargs.get("zarr_version") is None and \
            mode in ("w", "w-", "x", "a"):
        # a group this call creates is Zarr v3 (or the configured default), as zarr-python
        # 3 creates it; an existing group of either format is opened as it is
        store = normalize_store(store, mode="a", storage_options=kwargs.pop(
            "storage_options", None))
        if mode != "a" or not contains_group(store, normalize_path(path)):
            kwargs["zarr_format"] = config.default_zarr_format(None, 3)
    if use_consolidated is None and mode in ("r", "r+") and \
            protocol.holds_consolidated_metadata(store):  # (a store may opt out)
        try:
            return open_group(store, mode=mode, path=path, use_consolidated=True, **kwargs)
        except ConsolidatedMetadataNotFoundError:
            pass
    return open_group(store, mode=mode, path=path, use_consolidated=bool(use_consolidated),
                      **kwargs)
