"""The pending-trim marker: what makes a failed shrink safe to grow again.

A shrink writes the new shape first, then deletes the chunks wholly past it and resets the
cut-off part of boundary chunks to the fill value (:meth:`WritePath.trim_chunks`). If that
trim fails midway (a full disk, an S3 5xx, a permission error) the old values stay past the
new end: invisible while the array keeps its shape, but a later grow (``resize``,
``append``; through any handle, in any process) would show them where the fill value
belongs. So before trimming, the shrink stores a small JSON document, the *marker*, at
``<array path>/.chunkstore-trim``, recording the shape trimmed from (``from``: the extent
of what may be stored) and to (``to``); the trim removes it once complete. Every later
metadata change (resize either way, append, a new fill value) looks for it first (one read,
under the array's exclusive lock; an append reads it in the batch it already reads) and,
if it is there, completes the trim to the array's current shape before changing anything.

Trimming to the current shape, not to the recorded ``to``, is what makes completing safe
whatever happened since: it never touches an element inside the array, and removes every
stale one the marker's ``from`` covers (if writing the new shape failed, the shape is still
the old one and there is nothing to trim). A marker that cannot be parsed is completed from
a listing of the array's keys (every stored chunk past the end is deleted).

The name begins with a dot and is not made of digits: no Zarr reader takes it for a chunk
(zarr-python 2 and 3, tensorstore ignore unknown keys in an array's directory), nor does
chunkstore (chunk listings, ``stray_chunk_keys``). It lies under the array's path, so it is
removed with the array and copied with it by raw copies (``copy_store``), whose next grow
then completes the trim.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from chunkstore.storage import protocol
from chunkstore.storage.base import getitems
from chunkstore.metadata._common import MAX_INDEX

if TYPE_CHECKING:
    from chunkstore.format.layout import ArrayLayout


class EngineLike(Protocol):
    """What this module uses of a chunkstore.engine.core.ChunkEngine (not imported: core
    imports this module, for the rollback of a failed append)."""

    @property
    def layout(self) -> ArrayLayout:
        """The array's layout (its store, path and chunk keys)."""

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape in the engine's metadata."""

    @property
    def ndim(self) -> int:
        """The number of dimensions."""

    @property
    def chunks(self) -> tuple[int, ...]:
        """The chunk shape."""

    def trim_chunks(self, old: Sequence[int], new: Sequence[int], chunks: Sequence[int],
                    plan: Any = None, keep: bool = False) -> None:
        """Delete the chunks past new within old; reset boundary chunks past new (keep:
        stored even where then all fill value)."""

__all__ = ["MARKER_NAME", "marker_key", "read_marker", "begin", "end", "complete"]

#: the marker's name below the array's path
MARKER_NAME = ".chunkstore-trim"


def marker_key(engine: EngineLike) -> str:
    """The store key of the array's pending-trim marker."""
    path = engine.layout.path
    return f"{path}/{MARKER_NAME}" if path else MARKER_NAME


def _store(engine: EngineLike) -> Any:
    # (the store itself behind a consolidated-metadata view, as the metadata is written; a
    # cache is written through, which keeps its listings exact)
    store: Any = engine.layout.store
    while protocol.is_snapshot(store):
        store = store.snapshot_of
    return store


def read_marker(engine: EngineLike) -> bytes | None:
    """The marker's bytes, or None where no trim is pending (one read)."""
    key = marker_key(engine)
    return getitems(_store(engine), [key]).get(key)


def begin(engine: EngineLike, extent: Sequence[int], target: Sequence[int]) -> None:
    """Store the marker before a trim from ``extent`` to ``target``: until :func:`end`
    removes it, the chunks past ``target`` (within ``extent``) may hold old values."""
    doc = {"chunkstore_pending_trim": {"from": [int(n) for n in extent],
                                       "to": [int(n) for n in target]}}
    _store(engine)[marker_key(engine)] = json.dumps(doc).encode()


def end(engine: EngineLike) -> None:
    """Remove the marker: the trim it recorded is complete."""
    try:
        del _store(engine)[marker_key(engine)]
    except KeyError:
        pass


def _extent(raw: Any, ndim: int) -> tuple[int, ...] | None:
    """The ``from`` shape a marker records, or None where it is unreadable."""
    try:
        doc = json.loads(bytes(raw))["chunkstore_pending_trim"]["from"]
    except (ValueError, TypeError, KeyError):
        return None
    if (not isinstance(doc, list) or len(doc) != ndim
            or not all(type(n) is int and n >= 0 for n in doc)):
        return None
    return tuple(doc)


def complete(engine: EngineLike, raw: Any,
             widened: Callable[[tuple[int, ...]], EngineLike]) -> None:
    """Complete the trim a marker (its bytes: ``raw``) records, under the array's exclusive
    lock: delete the stored chunks past the current shape within the recorded extent and
    reset the part of boundary chunks past it to the fill value; then remove the marker.
    ``engine`` must be of the metadata as stored now (read under that lock); ``widened``
    makes an engine of that metadata with another shape. Raises what the store raises, the
    marker left in place."""
    shape, layout = engine.shape, engine.layout
    recorded = _extent(raw, engine.ndim)
    if recorded is None:  # (not ours, or torn): whatever the listing finds past the end
        recorded = layout.listed_extent()
    # (at most the largest extent: nothing past it is ever part of the array; a grid
    # rounded up past it was refused by widened(), and the array could never change again)
    extent = tuple(min(max(e, n), MAX_INDEX) for e, n in zip(recorded, shape))
    if extent != shape:
        # The stored chunks are listed in the extent's grid (the current one lists only
        # those inside the shape); nothing but the listing depends on the shape.
        # (kept: the marker may be a fill value change's, whose edge chunks hold data)
        widened(extent).trim_chunks(extent, shape, engine.chunks, keep=True)
    end(engine)
