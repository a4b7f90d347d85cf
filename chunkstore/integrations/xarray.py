"""chunkstore and xarray: the backend engine "chunkstore" and a Dataset writer.

    xr.open_dataset("data.zarr", engine="chunkstore", chunks={})   # dask, the store's chunks
    xr.open_datatree("data.zarr", engine="chunkstore")
    chunkstore.integrations.xarray.to_chunkstore(ds, "out.zarr", zarr_format=3)

The engine is registered as the `xarray.backends` entry point "chunkstore" when the package
is installed; from a source checkout, pass engine=ChunkstoreBackendEntrypoint or use
open_dataset/open_datatree below. Reading is in xarray_backend, writing in xarray_write.
"""

from __future__ import annotations

from chunkstore.integrations.xarray_backend import (ChunkstoreBackendArray, ChunkstoreBackendEntrypoint,
                                       ChunkstoreDataStore)
from chunkstore.integrations.xarray_write import ChunkstoreWritableDataStore, to_chunkstore

__all__ = ["ChunkstoreBackendEntrypoint", "ChunkstoreDataStore", "ChunkstoreWritableDataStore",
           "ChunkstoreBackendArray",
           "open_dataset", "open_datatree", "to_chunkstore"]


def open_dataset(store, *, chunks=None, **kwargs):
    """xr.open_dataset(store, engine="chunkstore", ...), working with or without the entry
    point installed. chunks={} gives dask arrays chunked like the store."""
    import xarray as xr
    return xr.open_dataset(store, engine=ChunkstoreBackendEntrypoint, chunks=chunks, **kwargs)


def open_datatree(store, *, chunks=None, **kwargs):
    """xr.open_datatree(store, engine="chunkstore", ...), as open_dataset."""
    import xarray as xr
    return xr.open_datatree(store, engine=ChunkstoreBackendEntrypoint, chunks=chunks, **kwargs)
