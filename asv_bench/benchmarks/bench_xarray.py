"""xarray's everyday workload, chunkstore's engine and writer against xarray's zarr engine
(zarr-python 3) in one run: three float32 variables (time, lat, lon) in (30, 360, 360)
chunks written with ``to_chunkstore`` / ``Dataset.to_zarr``, then
``open_dataset(chunks={})`` and ``mean("time")`` of every variable.

The full size (365, 720, 1440) per variable is issue 27's workload (4.5 GB in all); asv
runs ``SHAPE`` (a 73-day, half-resolution cut of it, same chunks) so a run fits a laptop.
``asv_bench/compare_xarray.py`` runs the full size with alternating repeats and checks the
values. Each benchmark checks its result against the NumPy mean once (in setup).
"""

from __future__ import annotations

import os
import shutil
import warnings

import numpy as np

SHAPE = (73, 360, 720)
CHUNKS = (30, 360, 360)
VARIABLES = ("t2m", "u10", "v10")
ENGINES = ("chunkstore", "zarr")


def make_dataset(shape=SHAPE, seed=0):
    """The dataset: VARIABLES, float32, smooth fields plus noise at 0.01 precision (as
    packed climate products store them, and as bench_core rounds its data: it compresses
    as real data does, not as white noise)."""
    import pandas as pd
    import xarray as xr
    rng = np.random.default_rng(seed)
    t, y, x = shape
    base = (np.sin(np.linspace(0, 6, x))[None, :] * np.cos(np.linspace(0, 3, y))[:, None])
    data = {}
    for i, name in enumerate(VARIABLES):
        arr = np.empty(shape, dtype="f4")
        for k in range(t):
            arr[k] = np.round(base * (10 + i) + rng.normal(0, 0.5, (y, x)), 2)
        data[name] = (("time", "lat", "lon"), arr)
    coords = {"time": pd.date_range("2026-01-01", periods=t),
              "lat": np.linspace(-90, 90, y), "lon": np.linspace(0, 360, x, endpoint=False)}
    return xr.Dataset(data, coords=coords)


def write(ds, path, engine):
    """Write ds with engine's writer (chunkstore: to_chunkstore; zarr: Dataset.to_zarr),
    Zarr v3, the store's chunks CHUNKS, consolidated."""
    shutil.rmtree(path, ignore_errors=True)
    encoding = {n: {"chunks": CHUNKS} for n in VARIABLES}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if engine == "chunkstore":
            from chunkstore.xarray import to_chunkstore
            to_chunkstore(ds, path, zarr_format=3, encoding=encoding)
        else:
            ds.to_zarr(path, zarr_format=3, encoding=encoding)


def open_mean(path, engine):
    """open_dataset(chunks={}) with engine, then the time mean of every variable (NumPy)."""
    import xarray as xr
    if engine == "chunkstore":  # (the class: the entry point needs chunkstore installed)
        from chunkstore.xarray import ChunkstoreBackendEntrypoint
        engine = ChunkstoreBackendEntrypoint
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with xr.open_dataset(path, engine=engine, chunks={}) as ds:
            return ds.mean("time").compute()


def check(result, ds):
    """The means equal NumPy's mean of the source (float32 sums in dask's order: close)."""
    for n in VARIABLES:
        np.testing.assert_allclose(result[n].values, ds[n].values.mean(axis=0), rtol=1e-5,
                                   atol=1e-5)


def setup_cache():
    root = os.path.abspath("chunkstore-bench-xarray")
    os.makedirs(root, exist_ok=True)
    ds = make_dataset()
    for engine in ENGINES:
        path = os.path.join(root, f"{engine}.zarr")
        write(ds, path, engine)
        check(open_mean(path, engine), ds)
    return root


setup_cache.timeout = 900


class XarrayEverydayWorkload:
    """Write the dataset; open it and take the time mean (each engine reads what it wrote)."""

    params = list(ENGINES)
    param_names = ["engine"]
    timeout = 600

    def setup(self, root, engine):
        self.path = os.path.join(root, f"{engine}.zarr")
        self.out = os.path.join(root, f"{engine}-write.zarr")
        self.ds = make_dataset()

    def time_open_mean(self, root, engine):
        open_mean(self.path, engine)

    def time_write(self, root, engine):
        write(self.ds, self.out, engine)
