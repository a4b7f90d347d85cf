"""The format layer: everything that knows how a Zarr v2, v3 or sharded v3 array is laid out
in a store (metadata keys, chunk keys, the chunk store view). Upper layers ask a layout."""
