"""zarr-python 3's ``zarr.core`` paths that its user guide and users' code import from
(``zarr.core.group``, ``zarr.core.array``, ``zarr.core.dtype``): the same objects as
chunkstore's own names. (chunkstore's compiled kernels are ``chunkstore._core``.)"""
