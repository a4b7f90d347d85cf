"""chunkstore: chunked, compressed N-dimensional arrays in the Zarr format."""

__version__ = "0.1.0"
