"""zarr-python 3's asynchronous API on chunkstore's engine: AsyncArray, AsyncGroup and the
functions of ``zarr.api.asynchronous`` (documented import path: ``chunkstore.api.asynchronous``).

Every coroutine runs the synchronous engine's call in a worker thread (``asyncio.to_thread``):
one engine, whose reads and decodes release the GIL, so the event loop is never blocked by
file I/O or decoding, and many tasks' reads run at once. Remote stores do their requests on
those worker threads too (their own pools keep every request of a selection in flight), not
natively on the caller's event loop.
"""

from chunkstore.aio.array import AsyncArray, AsyncOIndex, AsyncVIndex
from chunkstore.aio.group import AsyncGroup

__all__ = ["AsyncArray", "AsyncGroup", "AsyncOIndex", "AsyncVIndex"]
