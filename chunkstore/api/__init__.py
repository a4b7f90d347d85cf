"""zarr-python 3's ``zarr.api`` paths: ``chunkstore.api.asynchronous`` (the coroutines) and
``chunkstore.api.synchronous`` (the functions chunkstore's top level has)."""
