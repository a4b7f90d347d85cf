"""zarr-python 3's ``zarr.abc`` path: the base classes code written against zarr imports
(``from zarr.abc.store import Store``)."""
