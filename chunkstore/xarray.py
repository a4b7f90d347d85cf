"""chunkstore and xarray (the documented path): the backend engine "chunkstore" and the
Dataset writer, from :mod:`chunkstore.integrations.xarray`.

    xr.open_dataset("data.zarr", engine="chunkstore", chunks={})
    chunkstore.xarray.to_chunkstore(ds, "out.zarr", zarr_format=3)
"""

from chunkstore.integrations.xarray import *  # noqa: F401,F403
from chunkstore.integrations.xarray import __all__  # noqa: F401
