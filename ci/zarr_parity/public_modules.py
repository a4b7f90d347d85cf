"""zarr-python 3's public modules and chunkstore's module of the same role: what the parity
runs (ci/zarr_parity, ci/dask_parity, ci/zarr_parity/user_guide.py) put in zarr's place.
Importing this module changes nothing."""

PUBLIC = {
    "zarr.storage": "chunkstore.storage",
    "zarr.codecs": "chunkstore.codecs",
    "zarr.errors": "chunkstore.errors",
    "zarr.dtype": "chunkstore.dtype",
    "zarr.api": "chunkstore.api",
    "zarr.api.asynchronous": "chunkstore.api.asynchronous",
    "zarr.api.synchronous": "chunkstore.api.synchronous",
    "zarr.abc.store": "chunkstore.abc.store",
}
