"""pytest plugin: run xarray's own Zarr backend tests against chunkstore, as a user's code
would switch: ``engine="zarr"`` (open_dataset, open_zarr, open_datatree) opens with the
"chunkstore" engine, ``Dataset.to_zarr``/``DataArray.to_zarr`` write with
``chunkstore.xarray.to_chunkstore``, and xarray's ``ZarrStore.open_group`` (the writable
data store its tests drive directly) opens chunkstore's data store. The dictionary-store
test class writes into a plain dict (zarr-python reads dicts too, so its checks of what
is on disk still hold).

Used by ci/xarray_parity/run.sh; without ``CHUNKSTORE_ROUTE=1`` the plugin changes nothing
(the baseline run: xarray's zarr engine on the same tests).
"""

from __future__ import annotations

import contextlib
import os

import pytest

ROUTE = os.environ.get("CHUNKSTORE_ROUTE") == "1"


def _zarr_default_format():
    import zarr
    return zarr.config.get("default_zarr_format")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """Plain stores: the dict-store class writes into a dict (both runs)."""
    import xarray.tests.test_backends as tb

    @contextlib.contextmanager
    def dict_target(self):
        yield {}

    tb.TestZarrDictStore.create_zarr_target = dict_target


@pytest.fixture(autouse=True)
def _route_to_chunkstore(monkeypatch):
    if not ROUTE:
        yield
        return
    import xarray as xr
    from xarray.backends import plugins, zarr as xzarr

    from chunkstore.integrations.xarray import (ChunkstoreBackendEntrypoint,
                                                ChunkstoreWritableDataStore, to_chunkstore)

    get_backend = plugins.get_backend

    def routed_get_backend(engine):
        if engine == "zarr" or (isinstance(engine, type) and
                                issubclass(engine, xzarr.ZarrBackendEntrypoint)):
            return ChunkstoreBackendEntrypoint()
        return get_backend(engine)

    def ds_to_zarr(self, store=None, mode=None, group=None, encoding=None, **kw):
        if kw.get("zarr_format") is None:
            kw["zarr_format"] = _zarr_default_format()
        return to_chunkstore(self, store, mode=mode, group=group, encoding=encoding, **kw)

    def da_to_zarr(self, store=None, *args, **kw):
        from xarray.core.dataarray import _THIS_ARRAY
        if self.name is None:
            ds = self._to_dataset_whole(name=_THIS_ARRAY, shallow_copy=False)
        else:
            ds = self._to_dataset_whole(shallow_copy=False)
        return ds_to_zarr(ds, store, *args, **kw)

    def open_group(store, *args, **kw):
        if kw.get("zarr_format") is None and kw.get("zarr_version") is None:
            kw["zarr_format"] = _zarr_default_format()
        return ChunkstoreWritableDataStore.open_group(store, *args, **kw)

    monkeypatch.setattr(plugins, "get_backend", routed_get_backend)
    monkeypatch.setattr(xr.Dataset, "to_zarr", ds_to_zarr)
    monkeypatch.setattr(xr.DataArray, "to_zarr", da_to_zarr)
    monkeypatch.setattr(xzarr.ZarrStore, "open_group", staticmethod(open_group))
    yield
