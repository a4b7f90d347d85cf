"""The xarray engine "chunkstore" and chunkstore.integrations.xarray.to_chunkstore, checked against
xarray's own zarr backend (zarr-python) in both directions, Zarr v2 and v3, on CF-encoded
data: times, scale/offset packing, fill values, coordinates, strings."""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest

import chunkstore as cs

xr = pytest.importorskip("xarray")
pytest.importorskip("zarr")
pytest.importorskip("dask")
import pandas as pd  # noqa: E402  (xarray's dependency)

from chunkstore.engine.array import Array  # noqa: E402
from chunkstore.errors import ConsolidatedMetadataNotFoundError, ContainsGroupError  # noqa: E402
from chunkstore.integrations.xarray import (ChunkstoreBackendEntrypoint, open_dataset,  # noqa: E402
                               open_datatree, to_chunkstore)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore::DeprecationWarning", "ignore::RuntimeWarning")

ENGINE = ChunkstoreBackendEntrypoint  # engine="chunkstore" once installed (see the last test)


def make_dataset(strings=object):
    temp = np.arange(24, dtype="f8").reshape(6, 4) / 4
    temp[2, 1] = np.nan
    ds = xr.Dataset(
        {"temp": (("time", "x"), temp, {"units": "K", "long_name": "temperature"}),
         "count": (("x",), np.array([3, 0, 7, 1], dtype="i4")),
         "name": (("x",), np.array(["a", "bb", "ccc", ""], dtype=strings)),
         "packed": (("time",), np.array([0.0, 0.5, np.nan, 1.5, 2.0, 2.5]))},
        coords={"time": pd.date_range("2000-01-01", periods=6),
                "x": np.array([0.0, 1.0, 2.0, 3.0]),
                "label": ("x", np.array(["p", "q", "r", "s"], dtype=strings))},
        attrs={"title": "chunkstore ☃", "n": 3})
    ds["packed"].encoding = {"dtype": "i2", "scale_factor": 0.5, "add_offset": 0.0,
                             "_FillValue": -1}
    ds["count"].encoding = {"_FillValue": -9}
    return ds


def quiet(f, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*a, **kw)


def xr_open_zarr(path, **kw):
    return quiet(xr.open_zarr, path, **kw)


@pytest.mark.parametrize("fmt", [2, 3])
def test_written_by_chunkstore_reads_identically_in_xarray(tmp_path, fmt):
    ds = make_dataset()
    path = str(tmp_path / "cs.zarr")
    to_chunkstore(ds, path, zarr_format=fmt, encoding={"temp": {"chunks": (4, 3)}})
    theirs = xr_open_zarr(path).load()
    ours = open_dataset(path).load()
    xr.testing.assert_identical(theirs, ours)
    xr.testing.assert_identical(theirs, ds)
    # Really CF-encoded on disk: the packed variable is int16 with scale and fill.
    z = cs.open_group(path, mode="r")["packed"]
    assert z.dtype == np.dtype("i2")
    assert z[2] == -1 and z[1] == 1
    assert z.attrs["scale_factor"] == 0.5
    assert np.issubdtype(cs.open_group(path, mode="r")["time"].dtype, np.integer)


@pytest.mark.parametrize("fmt", [2, 3])
def test_written_by_xarray_reads_identically_through_engine(tmp_path, fmt):
    # zarr-python 3 writes numpy fixed-width unicode as fixed_length_utf32 in v3, which
    # chunkstore does not read; xarray's object strings (vlen-utf8) it does.
    ds = make_dataset(strings=object if fmt == 3 else "U")
    path = str(tmp_path / "xr.zarr")
    quiet(ds.to_zarr, path, zarr_format=fmt, encoding={"temp": {"chunks": (4, 3)}})
    theirs = xr_open_zarr(path)
    ours = open_dataset(path, chunks={})
    assert ours["temp"].chunks == ((4, 2), (3, 1))
    assert ours["temp"].encoding["preferred_chunks"] == {"time": 4, "x": 3}
    xr.testing.assert_identical(theirs.load(), ours.load())


def test_sharded_v3_round_trip(tmp_path):
    ds = make_dataset()
    path = str(tmp_path / "sh.zarr")
    to_chunkstore(ds, path, zarr_format=3,
                  encoding={"temp": {"chunks": (2, 2), "shards": (4, 4)}})
    z = cs.open_group(path, mode="r")["temp"]
    assert z.chunks == (2, 2) and z.shards == (4, 4)
    xr.testing.assert_identical(xr_open_zarr(path).load(), open_dataset(path).load())
    assert open_dataset(path)["temp"].encoding["shards"] == (4, 4)


def test_open_options(tmp_path):
    ds = make_dataset()
    path = str(tmp_path / "o.zarr")
    to_chunkstore(ds, path, group="sub/grp", consolidated=False,
                  encoding={"temp": {"chunks": (4, 3)}})
    with pytest.raises(ConsolidatedMetadataNotFoundError):
        open_dataset(path, group="sub/grp", consolidated=True)
    got = open_dataset(path, group="sub/grp", consolidated=False)
    xr.testing.assert_identical(got.load(), ds)
    # a group's own consolidated metadata is not the root's: True raises (as xarray's zarr
    # engine: a group is read through the root's), None reads the members' own documents
    cs.consolidate_metadata(path, path="sub/grp")
    with pytest.raises(ConsolidatedMetadataNotFoundError, match="root"):
        open_dataset(path, group="sub/grp", consolidated=True)
    with pytest.warns(RuntimeWarning, match="consolidated"):
        xr.testing.assert_identical(
            open_dataset(path, group="sub/grp", consolidated=None).load(), ds)
    cs.consolidate_metadata(path)
    for consolidated in (True, None):
        xr.testing.assert_identical(
            open_dataset(path, group="sub/grp", consolidated=consolidated).load(), ds)
    # chunks: None -> lazy numpy; {} -> the store's chunks; explicit dims override.
    assert open_dataset(path, group="sub/grp")["temp"].chunks is None
    assert open_dataset(path, group="sub/grp", chunks={"time": 2})["temp"].chunks == \
        ((2, 2, 2), (3, 1))
    # decode_times / mask_and_scale go through xarray's CF decoding.
    raw = open_dataset(path, group="sub/grp", decode_times=False, mask_and_scale=False)
    assert raw["time"].attrs["units"].startswith("days since 2000-01-01")
    np.testing.assert_array_equal(raw["time"].values, np.arange(6))
    assert raw["packed"].dtype == np.dtype("i2")
    np.testing.assert_array_equal(raw["packed"].values, [0, 1, -1, 3, 4, 5])
    ref = xr_open_zarr(path, group="sub/grp", decode_times=False, mask_and_scale=False)
    xr.testing.assert_identical(ref.load(), raw.load())


class CountingStore(cs.MemoryStore):
    """Records the chunk keys read."""

    def __init__(self):
        super().__init__()
        self.reads = []

    def _count(self, keys):
        self.reads += [k for k in keys if not k.rsplit("/", 1)[-1].startswith((".z", "zarr"))]

    def __getitem__(self, key):
        self._count([key])
        return super().__getitem__(key)

    def getitems(self, keys):
        keys = list(keys)
        self._count(keys)
        return super().getitems(keys)


def test_lazy_outer_and_vectorised_indexing(monkeypatch):
    store = CountingStore()
    data = np.arange(20 * 30, dtype="f4").reshape(20, 30)
    g = cs.group(store)
    g.create_array("v", data=data, chunks=(5, 10), fill_value=None,
                   dimension_names=["y", "x"], zarr_format=2)
    ds = open_dataset(store)
    assert store.reads == []  # opening reads metadata only
    calls = []
    for name in ("get_orthogonal_selection", "_get_vectorized"):
        orig = getattr(Array, name)
        monkeypatch.setattr(Array, name, lambda self, sel, *a, _o=orig, _n=name, **k:
                            (calls.append(_n), _o(self, sel, *a, **k))[1])
    out = ds["v"].isel(y=[1, 7], x=[2, 25]).values
    np.testing.assert_array_equal(out, data[np.ix_([1, 7], [2, 25])])
    assert calls == ["get_orthogonal_selection"]
    assert sorted(store.reads) == ["v/0.0", "v/0.2", "v/1.0", "v/1.2"]
    store.reads.clear()
    pts = ds["v"].isel(y=xr.DataArray([1, 19], dims="p"), x=xr.DataArray([0, 29], dims="p"))
    np.testing.assert_array_equal(pts.values, data[[1, 19], [0, 29]])
    assert calls[-1] == "_get_vectorized"
    assert sorted(store.reads) == ["v/0.0", "v/3.2"]
    # Vectorised with a slice in the key: xarray passes it through; we turn it into aranges.
    sub = ds["v"].isel(y=xr.DataArray([[0, 4]], dims=("a", "b")), x=slice(3, 6)).values
    np.testing.assert_array_equal(sub, data[[[0, 4]]][:, :, 3:6])


def test_v2_zero_fill_value_on_dimension_coordinate(tmp_path):
    """chunkstore's and zarr-python 2's default v2 fill_value is 0; xarray takes it as the
    missing-value marker, so a 0.0 coordinate reads as NaN through xr.open_zarr. The engine
    keeps dimension coordinates intact; data variables mask as xarray does."""
    path = str(tmp_path / "q.zarr")
    g = cs.group(path)
    g.array("x", np.array([0.0, 1.0, 2.0]), chunks=3).attrs["_ARRAY_DIMENSIONS"] = ["x"]
    g.array("v", np.array([0.0, 5.0, 6.0]), chunks=3).attrs["_ARRAY_DIMENSIONS"] = ["x"]
    assert g["x"].fill_value == 0
    theirs = xr_open_zarr(path, consolidated=False).load()
    assert np.isnan(theirs["x"].values[0])  # the quirk
    ours = open_dataset(path).load()
    np.testing.assert_array_equal(ours["x"].values, [0.0, 1.0, 2.0])
    xr.testing.assert_identical(ours["v"].variable, theirs["v"].variable)
    assert np.isnan(ours["v"].values[0])
    # xarray's exact rule on request, and no masking at all.
    strict = open_dataset(path, use_zarr_fill_value_as_mask=True).load()
    assert np.isnan(strict["x"].values[0])
    none = open_dataset(path, use_zarr_fill_value_as_mask=False).load()
    np.testing.assert_array_equal(none["v"].values, [0.0, 5.0, 6.0])
    # What to_chunkstore writes never has the quirk: the fill_value is the variable's
    # _FillValue (NaN for floats, as xarray's encoder sets it), never a default 0.
    to_chunkstore(xr.Dataset(coords={"x": [0.0, 1.0]}), str(tmp_path / "w.zarr"))
    assert np.isnan(cs.open_group(str(tmp_path / "w.zarr"))["x"].fill_value)
    assert xr_open_zarr(str(tmp_path / "w.zarr"))["x"].values[0] == 0.0


def test_open_datatree_matches_zarr_engine(tmp_path):
    path = str(tmp_path / "tree.zarr")
    ds = make_dataset()
    to_chunkstore(ds, path, consolidated=False)
    to_chunkstore(xr.Dataset({"t2": ("day", np.arange(2.0))}, coords={"day": [5, 6]}), path,
                  group="child", mode="a", consolidated=False)
    to_chunkstore(xr.Dataset({"z": ("k", np.arange(3))}), path, group="child/leaf", mode="a",
                  consolidated=False)
    ours = open_datatree(path)
    theirs = quiet(xr.open_datatree, path, engine="zarr", consolidated=False)
    assert sorted(n.path for n in ours.subtree) == ["/", "/child", "/child/leaf"]
    xr.testing.assert_identical(ours.load(), theirs.load())
    sub = open_datatree(path, group="child")
    xr.testing.assert_identical(sub["leaf"].to_dataset(inherit=False).load(),
                                theirs["child/leaf"].to_dataset(inherit=False).load())


@pytest.mark.parametrize("fmt", [2, 3])
def test_append_and_region_match_xarray(tmp_path, fmt):
    ds = make_dataset()
    first, second = ds.isel(time=slice(0, 4)), ds.isel(time=slice(4, 6))
    ours, theirs = str(tmp_path / "ours.zarr"), str(tmp_path / "theirs.zarr")
    to_chunkstore(first, ours, zarr_format=fmt)
    to_chunkstore(second, ours, append_dim="time")
    quiet(first.to_zarr, theirs, zarr_format=fmt)
    quiet(second.to_zarr, theirs, append_dim="time")
    a, b = xr_open_zarr(ours).load(), xr_open_zarr(theirs).load()
    xr.testing.assert_identical(a, b)
    xr.testing.assert_identical(a, ds)
    # A region write, from dask with chunks that do not match the store's (its edges cut
    # stored chunks: accepted with safe_chunks=False, as xarray accepts it)
    patch = (ds[["temp"]].isel(time=slice(1, 5)) + 100).chunk({"time": 3})
    to_chunkstore(patch.drop_vars(["x", "label"]), ours, region={"time": slice(1, 5)},
                  safe_chunks=False)
    got = open_dataset(ours).load()
    expected = ds["temp"].values.copy()
    expected[1:5] += 100
    np.testing.assert_array_equal(got["temp"].values, expected)
    xr.testing.assert_identical(got.drop_vars("temp"), ds.drop_vars("temp"))
    # mode "a" without append_dim/region writes a stored variable in place, as xarray: its
    # values change, its dimensions cannot (refused, the store unchanged)
    to_chunkstore(xr.Dataset({"temp": ds["temp"] * 2}), ours, mode="a")
    np.testing.assert_array_equal(xr_open_zarr(ours)["temp"].values, ds["temp"].values * 2)
    with pytest.raises(ValueError, match="different dimension names"):
        to_chunkstore(xr.Dataset({"count": ("time", np.arange(6.0))}), ours, mode="a")
    with pytest.raises(ValueError, match="different dimension names"):
        quiet(xr.Dataset({"count": ("time", np.arange(6.0))}).to_zarr, theirs, mode="a")
    xr.testing.assert_identical(xr_open_zarr(ours)["count"], xr_open_zarr(theirs)["count"])


def test_dask_write_unaligned(tmp_path):
    ds = make_dataset().chunk({"time": 4})
    path = str(tmp_path / "d.zarr")
    to_chunkstore(ds, path, encoding={"temp": {"chunks": (3, 4)}})
    assert cs.open_group(path)["temp"].chunks == (3, 4)
    xr.testing.assert_identical(open_dataset(path).load(), ds.load())


def test_rejected_writes_leave_store_as_it_was(tmp_path):
    ds = make_dataset()
    path = tmp_path / "r.zarr"
    to_chunkstore(ds, str(path))
    before = {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}
    bad = [
        (ContainsGroupError, dict()),  # mode w- on an existing group
        (ValueError, dict(mode="r+", ds=ds.assign(extra=("x", np.ones(4))))),
        (ValueError, dict(region={"time": slice(0, 3)})),  # 6 values into 3
        (ValueError, dict(region={"nope": slice(0, 6)})),
        (ValueError, dict(append_dim="nope")),
        (ValueError, dict(append_dim="time", ds=ds.assign(count=("time", np.ones(6, "i4"))))),
        (ValueError, dict(mode="a", append_dim="time", ds=ds.isel(x=slice(0, 2)))),
        (ValueError, dict(mode="w", encoding={"temp": {"bogus": 1}})),
        (ValueError, dict(mode="w", encoding={"missing": {"chunks": 2}})),
    ]
    for exc, kw in bad:
        d = kw.pop("ds", ds)
        if "region" in kw:
            d = d[["temp"]].drop_vars(["x", "label"])
        with pytest.raises(exc):
            to_chunkstore(d, str(path), **kw)
        after = {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}
        assert after == before, kw


def test_engine_name_resolves_through_entry_point(tmp_path, monkeypatch):
    """pip install registers [project.entry-points."xarray.backends"] chunkstore; here a
    dist-info directory on sys.path stands in for the installed metadata."""
    import tomllib
    from pathlib import Path
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    target = pyproject["project"]["entry-points"]["xarray.backends"]["chunkstore"]
    assert target == "chunkstore.integrations.xarray_backend:ChunkstoreBackendEntrypoint"
    dist = tmp_path / "site" / "chunkstore_ep_test-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: chunkstore-ep-test\n"
                                   "Version: 0.0\n")
    (dist / "entry_points.txt").write_text(f"[xarray.backends]\nchunkstore = {target}\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")] + sys.path)
    from xarray.backends import plugins
    plugins.list_engines.cache_clear()
    try:
        assert isinstance(plugins.list_engines()["chunkstore"], ChunkstoreBackendEntrypoint)
        path = str(tmp_path / "e.zarr")
        to_chunkstore(make_dataset(), path)
        ds = xr.open_dataset(path, engine="chunkstore", chunks={})
        xr.testing.assert_identical(ds.load(), make_dataset())
        tree = xr.open_datatree(path, engine="chunkstore")
        assert set(tree.to_dataset().data_vars) == {"temp", "count", "name", "packed"}
        # Installing chunkstore never takes over .zarr paths opened without an engine.
        assert not ChunkstoreBackendEntrypoint().guess_can_open(path)
    finally:
        monkeypatch.undo()
        plugins.list_engines.cache_clear()


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_scalar_variable_without_dimension_names_opens(tmp_path, fmt):
    """A 0-d array (a CF grid mapping such as crs) written by zarr-python has no
    dimension_names (v3) or no _ARRAY_DIMENSIONS (v2): it names no dimension, and the
    group opens as with xarray's zarr engine (issue 27 item 1: the whole group failed)."""
    import zarr
    path = str(tmp_path / "g.zarr")
    g = zarr.open_group(path, mode="w", zarr_format=fmt)
    kw = {"dimension_names": ["x"]} if fmt == 3 else {}
    t = g.create_array("t", shape=(3,), dtype="f4", **kw)
    t[:] = [1, 2, 3]
    if fmt == 2:
        t.attrs["_ARRAY_DIMENSIONS"] = ["x"]
    c = g.create_array("crs", shape=(), dtype="i4")
    c[()] = 7
    c.attrs["grid_mapping_name"] = "latitude_longitude"
    ds = xr.open_dataset(path, engine="chunkstore")
    assert ds["crs"].dims == () and int(ds["crs"].values) == 7
    assert ds["crs"].attrs["grid_mapping_name"] == "latitude_longitude"
    np.testing.assert_array_equal(ds["t"].values, [1, 2, 3])


def test_an_array_of_an_unknown_data_type_does_not_block_its_group(tmp_path):
    """A zarr-python 3 group holding one array chunkstore cannot read (a data type it does
    not know, as a newer writer could record) opens; that variable raises a MetadataError
    naming it when read, and drop_variables leaves it out (issue 27: the whole group failed
    to open)."""
    import json

    import zarr
    from chunkstore.errors import MetadataError
    path = str(tmp_path / "g.zarr")
    g = zarr.open_group(path, mode="w", zarr_format=3)
    t = g.create_array("t", shape=(3,), dtype="f4", dimension_names=["x"])
    t[:] = [1, 2, 3]
    g.create_array("b", shape=(3,), dtype="f4", dimension_names=["x"])
    doc_path = os.path.join(path, "b", "zarr.json")
    with open(doc_path) as f:
        doc = json.load(f)
    doc["data_type"] = "float7_e3m3"    # a type chunkstore does not read
    with open(doc_path, "w") as f:
        json.dump(doc, f)
    ds = xr.open_dataset(path, engine="chunkstore")
    assert set(ds.variables) == {"t", "b"} and ds["b"].dims == ("x",)
    np.testing.assert_array_equal(ds["t"].values, [1, 2, 3])
    with pytest.raises(MetadataError, match="'b'"):
        ds["b"].values
    kept = xr.open_dataset(path, engine="chunkstore", drop_variables=["b"])
    assert set(kept.variables) == {"t"}


def test_fixed_width_bytes_with_a_cf_fill_value_round_trip_in_v3(tmp_path):
    """A v3 |S variable with a CF _FillValue (xarray's writers store it base64-encoded, as
    to_chunkstore does) reads back with that fill masked; xarray's own reader refuses it
    ("Unsupported dtype"), and chunkstore refused the whole group, drop_variables or not."""
    path = str(tmp_path / "s.zarr")
    ds = xr.Dataset({"s": (("x",), np.array([b"ab", b"zz", b"cd"], dtype="S2")),
                     "v": (("x",), np.array([1.0, 2.0, 3.0], dtype="f4"))})
    ds["s"].encoding["_FillValue"] = b"zz"
    to_chunkstore(ds, path, mode="w", zarr_format=3)
    back = xr.open_dataset(path, engine="chunkstore")
    assert back["s"].encoding["_FillValue"] == b"zz"
    got = back["s"].values
    assert got[0] == b"ab" and got[2] == b"cd" and not isinstance(got[1], bytes)  # masked
    raw = xr.open_dataset(path, engine="chunkstore", mask_and_scale=False)
    np.testing.assert_array_equal(raw["s"].values, np.array([b"ab", b"zz", b"cd"]))


def test_drop_variables_never_opens_the_dropped_array(tmp_path):
    """drop_variables leaves an array out before it is opened, so one whose CF attributes
    cannot be decoded does not stop the rest of the group; kept, its error names it."""
    import zarr
    path = str(tmp_path / "g.zarr")
    g = zarr.open_group(path, mode="w", zarr_format=3)
    t = g.create_array("t", shape=(3,), dtype="f4", dimension_names=["x"])
    t[:] = [1, 2, 3]
    bad = g.create_array("bad", shape=(3,), dtype="i4", dimension_names=["x"])
    bad.attrs["_FillValue"] = "not a number"
    with pytest.raises(ValueError, match="'bad'.*_FillValue"):
        xr.open_dataset(path, engine="chunkstore")
    for drop in ("bad", ["bad"]):
        kept = xr.open_dataset(path, engine="chunkstore", drop_variables=drop)
        assert set(kept.variables) == {"t"}
        np.testing.assert_array_equal(kept["t"].values, [1, 2, 3])


def test_consolidated_none_without_consolidated_metadata_warns_as_xarray(tmp_path):
    """consolidated=None on a group without consolidated metadata: read, with xarray's zarr
    engine's RuntimeWarning; consolidated=False: no warning; True: an error."""
    import warnings

    import chunkstore as cs
    from chunkstore.errors import ConsolidatedMetadataNotFoundError

    for fmt in (2, 3):
        path = str(tmp_path / f"g{fmt}.zarr")
        g = cs.group(path, zarr_format=fmt)
        if fmt == 2:
            g.zeros("v", shape=(3,), chunks=(3,), dtype="f8").attrs["_ARRAY_DIMENSIONS"] = ["x"]
        else:
            g.create_array("v", shape=(3,), chunks=(3,), dtype="f8", dimension_names=["x"])
        with pytest.warns(RuntimeWarning, match="Failed to open Zarr store with consolidated"):
            ds = xr.open_dataset(path, engine="chunkstore")
        assert ds["v"].dims == ("x",)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            xr.open_dataset(path, engine="chunkstore", consolidated=False)
        with pytest.raises(ConsolidatedMetadataNotFoundError):
            xr.open_dataset(path, engine="chunkstore", consolidated=True)


@pytest.mark.parametrize("mode", ["a", "a-"])
def test_append_modes_treat_variables_off_the_append_dim_as_xarray(tmp_path, mode):
    """With append_dim, mode "a" replaces the stored variables that lack that dimension and
    "a-" keeps them; checked against xarray's own to_zarr on the same datasets."""
    import pandas as pd

    from chunkstore.xarray import to_chunkstore

    def dataset(start, level):
        t = pd.date_range("2026-01-01", periods=4) + pd.Timedelta(days=start)
        return xr.Dataset({"v": (("time", "x"), np.full((4, 3), float(start))),
                           "level": ("x", np.full(3, level))},
                          coords={"time": t, "x": [10, 20, 30]})

    first, more = dataset(0, 1.0), dataset(4, 2.0)
    ours, theirs = str(tmp_path / "ours.zarr"), str(tmp_path / "theirs.zarr")
    to_chunkstore(first, ours, zarr_format=2)
    first.to_zarr(theirs, zarr_format=2, consolidated=True)
    to_chunkstore(more, ours, mode=mode, append_dim="time")
    more.to_zarr(theirs, mode=mode, append_dim="time", consolidated=True)
    got = xr.open_dataset(ours, engine="chunkstore").load()
    want = xr.open_dataset(theirs, engine="zarr").load()
    xr.testing.assert_identical(got, want)
    assert float(got.level[0]) == (2.0 if mode == "a" else 1.0)
    assert got.sizes["time"] == 8
