"""dask integration: chunkstore arrays as dask arrays, and dask arrays written to chunkstore.

Beyond one machine, dask.distributed schedules the work; chunkstore arrays, stores and
synchronizers pickle, so tasks on other processes or hosts open the same store.

Unaligned writes: when the dask chunks do not line up with the store's chunks, two tasks
would read-modify-write the same store chunk and one update could be lost. to_chunkstore
then rechunks the dask array to the store's chunk grid (so every store chunk is written by
exactly one task), unless a ProcessSynchronizer is given, in which case the locks make the
overlapping writes safe and no rechunk is done (a ThreadSynchronizer's locks do not reach
the processes of the processes scheduler or of dask.distributed).
"""

from __future__ import annotations

import dask.array as da

from chunkstore.engine.array import Array
from chunkstore.hierarchy.creation import create, open_array
from chunkstore.sync.synchronizers import ThreadSynchronizer

__all__ = ["from_chunkstore", "to_chunkstore", "aligned", "rechunk_to_grid"]


def from_chunkstore(store_or_array, path=None, chunks=None, name=None, **open_kwargs):
    """A dask array over a chunkstore array (or the array at path in a store), chunked like
    the stored objects unless chunks is given: the shards of a sharded array (one task reads
    a shard, as dask's own from_array sizes them), else the chunks. Its name includes the
    chunking, the handle and the metadata it reads by (a view's dtype or fill value
    included), so two views or handles of one array are different dask arrays (dask would
    take one's blocks for the other's)."""
    z = store_or_array if isinstance(store_or_array, Array) else \
        open_array(store_or_array, mode="r", path=path, **open_kwargs)
    chunks = chunks or z.layout.write_chunks  # (the shards of a sharded array)
    if name is None:
        from dask.base import tokenize
        blocks = da.core.normalize_chunks(chunks, z.shape, dtype=z.dtype)
        name = (f"chunkstore-{z.path or 'root'}-{id(z.store):x}-"
                f"{tokenize(blocks, str(z.dtype), repr(z.fill_value), id(z))}")
    return da.from_array(z, chunks=chunks, name=name, lock=False, fancy=False, asarray=False)


def aligned(dask_chunks, store_chunks, shape=None, offsets=None):
    """True when every boundary between dask chunks, shifted by offsets (where the dask
    array lands in the stored array, default 0), is a boundary of the stored blocks
    (store_chunks: the chunks, or a sharded array's shards): then no two tasks write one
    stored block. (shape: accepted for compatibility; the last chunk's end needs no check.)"""
    offsets = offsets or (0,) * len(store_chunks)
    for sizes, block, start in zip(dask_chunks, store_chunks, offsets):
        pos = start
        for size in sizes[:-1]:
            pos += size
            if pos % block:
                return False
    return True


def rechunk_to_grid(darr, store_chunks, offsets=None):
    """darr rechunked so that its chunk boundaries, shifted by offsets (default 0), fall on
    the stored blocks' boundaries: each stored block is then written by exactly one task."""
    offsets = offsets or (0,) * darr.ndim
    new = []
    for n, block, start in zip(darr.shape, store_chunks, offsets):
        first = min(n, (-start) % block or block)
        sizes = [first] if n else []
        left = n - first
        while left > 0:
            sizes.append(min(block, left))
            left -= sizes[-1]
        new.append(tuple(sizes) or (0,))
    return darr.rechunk(tuple(new))


def to_chunkstore(darr, store, path=None, synchronizer=None, overwrite=False, compute=True,
                  chunks=None, return_stored=False, **create_kwargs):
    """Write a dask array to a new chunkstore array with da.store; returns the Array.

    chunks: the store's chunk shape (default: the dask array's first chunk in each dim).
    Unaligned dask chunks are rechunked to the store's grid, unless a synchronizer that
    works across processes (ProcessSynchronizer) is given.
    compute=False returns the dask Delayed of the store operation instead of writing.
    """
    if chunks is None:
        chunks = tuple(c[0] if c else 1 for c in darr.chunks)
    z = create(shape=darr.shape, chunks=chunks, dtype=create_kwargs.pop("dtype", darr.dtype),
               store=store, path=path, synchronizer=synchronizer, overwrite=overwrite,
               **create_kwargs)
    # (the stored blocks are the shards of a sharded array: two tasks writing inner chunks
    # of one shard would both rewrite it, and processes share no in-process shard lock).
    # A ThreadSynchronizer does not cross processes (it pickles to a fresh one): under the
    # processes scheduler or dask.distributed, tasks sharing a block would lose updates.
    if ((synchronizer is None or isinstance(synchronizer, ThreadSynchronizer))
            and not aligned(darr.chunks, z.write_chunks)):
        darr = rechunk_to_grid(darr, z.write_chunks)
    result = da.store(darr, z, lock=False, compute=compute, return_stored=return_stored)
    return z if compute and not return_stored else result
