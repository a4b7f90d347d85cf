"""zarr-python 3's ``zarr.api.asynchronous`` (the documented path): chunkstore.aio.api's
coroutines, and AsyncArray / AsyncGroup."""

from chunkstore.aio import AsyncArray, AsyncGroup  # noqa: F401
from chunkstore.aio.api import *  # noqa: F401,F403
from chunkstore.aio.api import __all__ as _functions

__all__ = ["AsyncArray", "AsyncGroup", *_functions]
