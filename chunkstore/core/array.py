"""zarr-python 3's ``zarr.core.array``: Array and AsyncArray."""

from chunkstore.aio.array import AsyncArray
from chunkstore.engine.array import Array

__all__ = ["Array", "AsyncArray"]
