"""zarr-python 3's data types (the documented path, ``chunkstore.dtype.parse_dtype``), from
:mod:`chunkstore.compat.dtype`."""

from chunkstore.compat.dtype import *  # noqa: F401,F403
from chunkstore.compat.dtype import __all__  # noqa: F401
