"""zarr-python 3's ``zarr.core.dtype``: its data type classes and ``parse_dtype`` (the same
as ``chunkstore.dtype``)."""

from chunkstore.compat.dtype import *  # noqa: F401,F403
from chunkstore.compat.dtype import __all__  # noqa: F401
