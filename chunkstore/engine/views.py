"""zarr-python 2's Array extras: lazy views (`view`, `astype`), `islice`, and the content
digest (`digest`, `hexdigest`).

A view is an Array over the same stored chunks whose engine overrides the metadata in memory
only (shape, chunks, dtype, fill value, filters): chunks are decoded and encoded with the
view's metadata, and nothing it changes is ever written back as metadata (resize, append and
setting the fill value raise PermissionError, as on zarr-python 2's views).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkstore.engine.chunk_io import astype_filters
from chunkstore.hierarchy import nodes
from chunkstore.storage.base import getitems

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

# Chunk keys fetched per batch while hashing: bounded memory, few round trips.
_DIGEST_BATCH = 256

# (`array` below is an Array, typed Any: chunkstore.engine.array imports this module, and
# tests/test_import_cycles.py counts type-checking imports too)


def view_state(array: Any, shape: int | np.integer | Sequence[int] | None = None,
               chunks: Any = None, dtype: DTypeLike | None = None, fill_value: Any = None,
               filters: Any = None, read_only: bool | None = None,
               synchronizer: Any = None, astype: DTypeLike | None = None) -> dict[str, Any]:
    """``Array.view``'s arguments for a new Array: array's state with the view's metadata
    overrides (its engine applies them in memory).

    astype: ``Array.astype``'s dtype. Over the stored metadata (no dtype or filters of a view
    under it) it is kept as a dtype (the ``"astype"`` override, one per astype of astype),
    whose AsType filter the engine makes from the metadata it reads: an astype view of an
    array that another handle re-creates with another dtype or filters converts the new
    array's values (a filter made once would decode its chunks as the old dtype's)."""
    overrides: dict[str, Any] = {}
    if shape is not None:
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
        overrides["shape"] = shape
    if chunks is not None:
        overrides["chunks"] = chunks
    try:
        if dtype is not None:
            overrides["dtype"] = np.dtype(dtype)
        if astype is not None:
            astype = np.dtype(astype)
    except TypeError as e:
        raise TypeError(f"invalid dtype for a view of array {array.name!r}: {e}") from e
    if fill_value is not None:
        overrides["fill_value"] = fill_value
    if filters is not None:
        overrides["filters"] = list(filters) or None
    state = array.__getstate__()
    inherited = state.pop("_overrides", None) or {}
    if "astype" in inherited and (dtype is not None or filters is not None):
        # a view with a dtype or filters of its own over an astype view: the filters that
        # the astype view works with now, fixed (as views over views of overrides are)
        inherited = {k: v for k, v in inherited.items() if k != "astype"}
        inherited.update(dtype=array.dtype, filters=list(array.filters or []) or None)
    if astype is not None:
        if "dtype" in inherited or "filters" in inherited:
            overrides.update(dtype=np.dtype(astype),
                             filters=astype_filters(array.dtype, array.filters, [astype]))
        else:
            overrides["astype"] = tuple(inherited.get("astype", ())) + (np.dtype(astype),)
    # (the array's cache_metadata: a view of a handle that reads the metadata before every
    # operation does too; cached, another process's append was written over by the view's
    # old edge chunk, and a re-creation's chunks decoded as the old dtype)
    state.update(read_only=array.read_only if read_only is None else read_only,
                 synchronizer=array.synchronizer if synchronizer is None else synchronizer)
    out = {**state, "_overrides": {**inherited, **overrides}}
    if synchronizer is None:
        # the view writes under its array's locks (its in-process ones, and its
        # synchronizer's); a synchronizer given to the view makes its own over the same
        # in-process ones (given the array's, the view took none of the synchronizer's:
        # processes writing through such views lost each other's elements)
        out["_locks"] = array._handle.options.locks
    return out


def islice(array: Any, start: int | None = None, end: int | None = None) -> Iterator[Any]:
    """``Array.islice``: array[start:end] along the first dimension, one element at a time,
    each chunk row decoded once."""
    if array.ndim == 0:
        raise TypeError("iteration over a 0-d array")
    n = array.shape[0]
    start = 0 if start is None else start
    end = n if end is None else end
    for what, v in (("start", start), ("end", end)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{what} must be a nonnegative integer, got {v!r}")
    end = min(int(end), n)
    step = array.chunks[0]
    block, block_start = None, None
    for j in range(int(start), end):
        if block is None or j >= block_start + step:
            block_start = j - j % step
            block = array[block_start:min(block_start + step, n)]
        # (mypy: block_start is an int once block is not None)
        k = j - block_start  # type: ignore[operator]
        if k >= len(block):
            # (another handle shrank the array meanwhile: NumPy's bare IndexError named
            # neither the array nor the cause)
            raise IndexError(f"array {array.name!r} has {array.shape[0]} rows along dimension "
                             f"0 now, fewer than when islice({start}, {end}) began: row {j} "
                             f"is gone (resized by another handle?)")
        yield block[k]


def digest(array: Any, hashname: str = "sha1") -> bytes:
    """``Array.digest``: the hash (bytes) of the array's stored content as zarr-python 2
    defines it: every chunk's stored bytes in C order of the chunk grid (b"" for a missing
    chunk), then the stored metadata document, then the stored attributes document.

    For a sharded (v3) array the stored chunks are the shards; v3 attributes are part of the
    metadata document."""
    h = hashlib.new(hashname)
    meta, store, path, layout = array.metadata, array.store, array.path, array.layout
    coords = itertools.product(*[range(n) for n in layout.stored_grid_shape])
    while True:
        batch = [layout.stored_key(c) for c in itertools.islice(coords, _DIGEST_BATCH)]
        if not batch:
            break
        got = getitems(store, batch)
        for k in batch:
            h.update(got.get(k, b""))
    fmt = meta.zarr_format
    # (v3 attributes live in the metadata document: one key then.)
    for key in dict.fromkeys([nodes.metadata_key(path, fmt, "array"),
                              nodes.attrs_key(path, fmt)]):
        try:
            h.update(store[key])
        except KeyError:
            pass
    return h.digest()
