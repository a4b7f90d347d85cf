"""chunkstore with xarray (engine and writer) and dask."""
