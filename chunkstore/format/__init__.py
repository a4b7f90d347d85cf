"""The format layer: everything that knows how a Zarr v2, v3 or sharded v3 array is laid out
in a store (metadata keys, chunk keys, the chunk store view). Upper layers ask a layout.

- :func:`read_array_metadata`: find and parse an array's metadata document.
- :func:`layout_for`: the :class:`~chunkstore.format.layout.ArrayLayout` of metadata.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from chunkstore.errors import ArrayNotFoundError
from chunkstore.format.layout import ArrayLayout
from chunkstore.errors import store_name
from chunkstore.storage import protocol
from chunkstore.storage.base import getitems

__all__ = ["ArrayLayout", "layout_for", "read_array_metadata"]


def layout_for(metadata: Any, store: MutableMapping, path: str = "", *,
               synchronizer: Any = None, cache_index: bool = True) -> ArrayLayout:
    """The layout of the array with ``metadata`` at ``path`` in ``store``: v2, v3, or
    sharded v3. ``synchronizer`` and ``cache_index`` go to a sharded array's shard view
    (shard locks; keeping decoded shard indexes across calls)."""
    if metadata.zarr_format == 2:
        from chunkstore.format.v2 import V2Layout
        cls: type[ArrayLayout] = V2Layout
    elif metadata.inner_chunks is None:
        from chunkstore.format.v3 import V3Layout
        cls = V3Layout
    else:
        from chunkstore.format.sharded import ShardedLayout
        cls = ShardedLayout
    return cls(store, path, metadata, synchronizer=synchronizer, cache_index=cache_index)


def read_array_metadata(store: MutableMapping, path: str = "",
                        format_hint: int | None = None) -> tuple[Any, str]:
    """(metadata, its store key) of the array at ``path``: ``zarr.json`` (v3) else
    ``.zarray`` (v2); the v2 document first when ``format_hint`` is 2. Where both lie at path
    and no format is hinted, the v3 document is used, with zarr-python 3's ZarrUserWarning
    (as :func:`~chunkstore.metadata.formats.node_at` finds nodes). Without a hint a store
    whose requests are round trips gets both documents in one batch (one round trip, as
    with a right hint). ArrayNotFoundError when there is neither, or the v3 document is a
    group's; MetadataError when the document is invalid."""
    from chunkstore.format.v2 import METADATA_KEY as V2_KEY
    from chunkstore.format.v3 import METADATA_KEY as V3_KEY
    from chunkstore.metadata.formats import warn_both_formats
    path = (path or "").strip("/")
    prefix = path + "/" if path else ""
    v2_key, key = prefix + V2_KEY, prefix + V3_KEY
    raw: Any = None
    v3_raw: Any = None
    v2_present: bool | None = None  # (known from a batch read; None: not looked at)
    docs = protocol.consolidated_documents(store)
    served = docs(key) if docs is not None else None
    if served is not None:
        # a consolidated v3 view: the document parsed from its JSON object, once, and no
        # probe of the store behind for a v2 document
        v3_raw = served
        format_hint = 3
    elif docs is not None and format_hint != 3:
        served = docs(v2_key)
        if isinstance(served, dict):
            # a consolidated v2 view: likewise from the JSON object (no bytes round trip)
            from chunkstore.metadata.v2 import parse_array_metadata
            return parse_array_metadata(served, v2_key), v2_key
    batch = v3_raw is None and format_hint is None and protocol.concurrent_io(store)
    if batch:
        got = getitems(store, [key, v2_key])
        v3_raw, raw = got.get(key), got.get(v2_key)
        v2_present = raw is not None
        if v3_raw is not None:
            raw = None  # (the v3 document is used)
    elif v3_raw is None and format_hint != 2:
        try:
            v3_raw = store[key]
        except KeyError:
            pass
    if v3_raw is None and raw is None and not batch:
        try:
            raw = store[v2_key]
        except KeyError:
            raw = None
    if raw is not None:
        from chunkstore.metadata.v2 import parse_array_metadata
        return parse_array_metadata(raw, v2_key), v2_key
    from chunkstore.metadata.v3 import parse_node_metadata_v3
    if v3_raw is None:
        try:
            if format_hint != 2 or batch:
                raise KeyError(key)  # (read above)
            v3_raw = store[key]
        except KeyError:
            raise ArrayNotFoundError(f"no array at path {path!r} in {store_name(store)}") from None
    meta = parse_node_metadata_v3(v3_raw, key)
    if getattr(meta, "node_type", None) != "array":
        raise ArrayNotFoundError(f"path {path!r} in {store_name(store)} holds a group, not an array")
    if format_hint is None:
        warn_both_formats(store, path, "array", present=v2_present)
    return meta, key
