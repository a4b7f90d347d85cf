"""The format layer: everything that knows how a Zarr v2, v3 or sharded v3 array is laid out
in a store (metadata keys, chunk keys, the chunk store view). Upper layers ask a layout.

- :func:`read_array_metadata`: find and parse an array's metadata document.
- :func:`layout_for`: the :class:`~chunkstore.format.layout.ArrayLayout` of metadata.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Any

from chunkstore.errors import ArrayNotFoundError, MetadataError
from chunkstore.format.layout import ArrayLayout
from chunkstore.errors import store_name
from chunkstore.storage import protocol
from chunkstore.storage.base import getitems

__all__ = ["ArrayLayout", "layout_for", "read_array_metadata"]


def layout_for(metadata: Any, store: MutableMapping, path: str = "", *,
               synchronizer: Any = None, cache_index: bool = True,
               array_shape: Sequence[int] | None = None) -> ArrayLayout:
    """The layout of the array with ``metadata`` at ``path`` in ``store``: v2, v3, or
    sharded v3. ``synchronizer`` and ``cache_index`` go to a sharded array's shard view
    (shard locks; keeping decoded shard indexes across calls). ``array_shape``: the shape
    of the array as stored, where ``metadata`` is a view's with another (a write keeps the
    array's chunks past the view's end; default: metadata's)."""
    if metadata.zarr_format == 2:
        from chunkstore.format.v2 import V2Layout
        cls: type[ArrayLayout] = V2Layout
    elif metadata.inner_chunks is None:
        from chunkstore.format.v3 import V3Layout
        cls = V3Layout
    else:
        from chunkstore.format.sharded import ShardedLayout
        cls = ShardedLayout
    return cls(store, path, metadata, synchronizer=synchronizer, cache_index=cache_index,
               array_shape=array_shape)


@contextlib.contextmanager
def _naming_the_store(store: MutableMapping, key: str) -> Iterator[None]:
    """A MetadataError of the document at key says which store holds it (a parse names
    only the key: 'invalid metadata at zarr.json' left the array to be guessed)."""
    try:
        yield
    except MetadataError as e:
        where = repr(key)
        msg = str(e)
        if where in msg and store_name(store) not in msg:
            raise type(e)(msg.replace(where, f"{where} in {store_name(store)}", 1)) from e
        raise


def read_array_metadata(store: MutableMapping, path: str = "",
                        format_hint: int | None = None, known: Any = None) -> tuple[Any, str]:
    """(metadata, its store key) of the array at ``path``: ``zarr.json`` (v3) else
    ``.zarray`` (v2); the v2 document first when ``format_hint`` is 2. Where both lie at path
    and no format is hinted, the v3 document is used, with zarr-python 3's ZarrUserWarning
    (as :func:`~chunkstore.metadata.formats.node_at` finds nodes). Without a hint a store
    whose requests are round trips gets both documents in one batch (one round trip, as
    with a right hint). ArrayNotFoundError when there is neither, or the v3 document is a
    group's; MetadataError when the document is invalid.

    The metadata keeps the document it was parsed from (``source_document``). known:
    metadata this function returned before (a handle's, reading it again): returned as it
    is, not parsed again, where the document read is the one it came from."""
    from chunkstore.format.v2 import METADATA_KEY as V2_KEY
    from chunkstore.format.v3 import METADATA_KEY as V3_KEY
    from chunkstore.metadata.formats import warn_both_formats
    path = (path or "").strip("/")
    prefix = path + "/" if path else ""
    v2_key, key = prefix + V2_KEY, prefix + V3_KEY
    docs = protocol.consolidated_documents(store)
    served = docs(key) if docs is not None else None
    # found: {key: document} of what was read; batched: both keys looked at
    found: dict[str, Any] = {}
    batched = False
    if served is not None:
        # a consolidated v3 view: the document parsed from its JSON object, once, and no
        # probe of the store behind for a v2 document
        found, format_hint = {key: served}, 3
    elif docs is not None and format_hint != 3 and isinstance(v2_doc := docs(v2_key), dict):
        # a consolidated v2 view: likewise from the JSON object (no bytes round trip)
        found = {v2_key: v2_doc}
    elif format_hint is None and protocol.concurrent_io(store):
        found, batched = getitems(store, [key, v2_key]), True  # one round trip
    else:
        for k in ((v2_key, key) if format_hint == 2 else (key, v2_key)):
            try:
                found[k] = store[k]
                break
            except KeyError:
                pass
    if key not in found:  # (both are found only by the batch, which takes the v3 one)
        if v2_key not in found:
            raise ArrayNotFoundError(f"no array at path {path!r} in {store_name(store)}")
        doc = found[v2_key]
        if known is not None and doc == known.source_document:
            return known, v2_key
        from chunkstore.metadata.v2 import parse_array_metadata
        with _naming_the_store(store, v2_key):
            meta = parse_array_metadata(doc, v2_key, protocol.key_separator(store))
        meta.source_document = doc
        return meta, v2_key
    doc = found[key]
    if known is not None and doc == known.source_document:
        meta = known
    else:
        from chunkstore.metadata.v3 import parse_node_metadata_v3
        with _naming_the_store(store, key):
            meta = parse_node_metadata_v3(doc, key)
        if getattr(meta, "node_type", None) != "array":
            raise ArrayNotFoundError(f"path {path!r} in {store_name(store)} holds a group, "
                                     f"not an array")
        meta.source_document = doc
    if format_hint is None:
        warn_both_formats(store, path, "array", present=(v2_key in found) if batched else None)
    return meta, key
