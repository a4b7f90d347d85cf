"""chunkstore and dask (the documented path): dask arrays over chunkstore arrays and back,
from :mod:`chunkstore.integrations.dask`."""

from chunkstore.integrations.dask import *  # noqa: F401,F403
from chunkstore.integrations.dask import __all__  # noqa: F401
