"""Reading through engine="chunkstore" as xarray's zarr engine reads: a group through the root's
consolidated metadata (not its own, which an append through the root leaves stale), group
paths with a leading "/", the dtype of a single element, and attribute order from a
consolidated Zarr v2 store. xarray's zarr engine (zarr-python 3) is the oracle."""

from __future__ import annotations

import asyncio
import warnings

import numpy as np
import pytest

import chunkstore as cs

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")
pytest.importorskip("dask")

from chunkstore.errors import ConsolidatedMetadataNotFoundError, GroupNotFoundError  # noqa: E402
from chunkstore.integrations.xarray import to_chunkstore  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore::DeprecationWarning")

NOT_CONSOLIDATED = "Failed to open Zarr store with consolidated metadata"


def first() -> xr.Dataset:
    return xr.Dataset({"v": ("t", np.arange(3.0), {"units": "K"})}, coords={"t": [0, 1, 2]})


def more() -> xr.Dataset:
    return xr.Dataset({"v": ("t", np.arange(3.0, 6.0), {"units": "K"})},
                      coords={"t": [3, 4, 5]})


def open_both(path, **kw) -> tuple[xr.Dataset, list[str], xr.Dataset]:
    """(engine="chunkstore"'s dataset, the RuntimeWarnings it gave, engine="zarr"'s)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        ours = xr.open_dataset(path, engine="chunkstore", **kw).load()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        theirs = xr.open_dataset(path, engine="zarr", **kw).load()
    runtime = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    return ours, runtime, theirs


# -- a group reads through the root's consolidated metadata ----------------------------------

def xarray_at_group_path(path, fmt):
    """The group written by to_zarr of its own path (so it has consolidated metadata of its
    own), then appended to through the root: xarray consolidates the root again only."""
    zarr.open_group(path, mode="w", zarr_format=fmt)
    first().to_zarr(f"{path}/g", zarr_format=fmt)
    more().to_zarr(path, group="g", append_dim="t")


def chunkstore_then_xarray(path, fmt):
    """to_chunkstore writes consolidated metadata at each level; xarray appends."""
    to_chunkstore(first(), path, group="g", zarr_format=fmt)
    more().to_zarr(path, group="g", append_dim="t")


def xarray_then_chunkstore(path, fmt):
    first().to_zarr(path, group="g", zarr_format=fmt)
    to_chunkstore(more(), path, group="g", append_dim="t")


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("write", [xarray_at_group_path, chunkstore_then_xarray,
                                   xarray_then_chunkstore])
@pytest.mark.parametrize("consolidated", [None, True, False])
def test_a_group_appended_through_the_root_reads_all_its_rows(tmp_path, fmt, write,
                                                              consolidated):
    path = str(tmp_path / "s.zarr")
    write(path, fmt)
    ours, runtime, theirs = open_both(path, group="g", consolidated=consolidated)
    np.testing.assert_array_equal(ours["t"].values, np.arange(6))
    np.testing.assert_array_equal(ours["v"].values, np.arange(6.0))
    xr.testing.assert_identical(ours, theirs)
    assert runtime == []  # the root is consolidated: nothing to warn about


@pytest.mark.parametrize("fmt", [2, 3])
def test_without_root_consolidated_metadata_none_reads_the_members_with_the_warning(
        tmp_path, fmt):
    """The root has no consolidated metadata and the group's own is stale (an append with
    consolidated=False): consolidated=None reads the members' own documents, warning as
    xarray's zarr engine does."""
    path = str(tmp_path / "s.zarr")
    zarr.open_group(path, mode="w", zarr_format=fmt)
    first().to_zarr(f"{path}/g", zarr_format=fmt)
    more().to_zarr(path, group="g", append_dim="t", consolidated=False)
    ours, runtime, theirs = open_both(path, group="g")
    np.testing.assert_array_equal(ours["t"].values, np.arange(6))
    xr.testing.assert_identical(ours, theirs)
    assert len(runtime) == 1 and runtime[0].startswith(NOT_CONSOLIDATED)


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_group_the_root_consolidated_metadata_does_not_list_is_read(tmp_path, fmt):
    """A group made after the root was consolidated (by another tool: zarr-python here):
    read from its members' documents (with the warning) rather than not found. Made by this
    process, the consolidated view itself shows it (README: nodes this process changed are
    read from the store through a snapshot)."""
    import zarr
    path = str(tmp_path / "s.zarr")
    to_chunkstore(first(), path, zarr_format=fmt)
    for tool, name in ((zarr, "late"), (cs, "ours")):
        root = tool.open_group(path, mode="a", zarr_format=fmt)
        late = root.create_group(name)
        w = late.create_array("w", shape=(2,), chunks=(2,), dtype="f8", fill_value=np.nan,
                              **({"dimension_names": ["k"]} if fmt == 3 else {}))
        if fmt == 2:
            w.attrs["_ARRAY_DIMENSIONS"] = ["k"]
        w[:] = [1.0, 2.0]
    with pytest.warns(RuntimeWarning, match=NOT_CONSOLIDATED):
        got = xr.open_dataset(path, engine="chunkstore", group="late")
    np.testing.assert_array_equal(got["w"].values, [1.0, 2.0])
    with pytest.raises(ConsolidatedMetadataNotFoundError, match="'late'"):
        xr.open_dataset(path, engine="chunkstore", group="late", consolidated=True)
    got = xr.open_dataset(path, engine="chunkstore", group="ours", consolidated=True)
    np.testing.assert_array_equal(got["w"].values, [1.0, 2.0])


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_true_needs_the_roots_metadata_as_xarray_does(tmp_path, fmt):
    # a group's own consolidated metadata is not read instead (xarray's appends through
    # the root leave it stale): an error, as xarray's zarr engine raises, not old rows
    path = str(tmp_path / "s.zarr")
    to_chunkstore(first(), path, group="sub/grp", zarr_format=fmt, consolidated=False)
    with pytest.raises(ConsolidatedMetadataNotFoundError, match="'sub/grp'"):
        xr.open_dataset(path, engine="chunkstore", group="sub/grp", consolidated=True)
    cs.consolidate_metadata(path, path="sub/grp")
    with pytest.raises(ConsolidatedMetadataNotFoundError, match="'sub/grp'"):
        xr.open_dataset(path, engine="chunkstore", group="/sub/grp", consolidated=True)
    cs.consolidate_metadata(path)
    got = xr.open_dataset(path, engine="chunkstore", group="/sub/grp", consolidated=True)
    xr.testing.assert_identical(got.load(), first())


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_group_path_that_holds_an_array_is_named(tmp_path, fmt):
    path = str(tmp_path / "s.zarr")
    first().to_zarr(path, zarr_format=fmt)
    with pytest.raises(GroupNotFoundError, match="'v'"):
        xr.open_dataset(path, engine="chunkstore", group="v")


# -- group paths as xarray takes them --------------------------------------------------------

@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("group", ["/g1/sub", "g1/sub/", "/", ""])
def test_group_paths_with_slashes_open_as_in_the_zarr_engine(tmp_path, fmt, group):
    path = str(tmp_path / "s.zarr")
    first().to_zarr(path, group="g1/sub", zarr_format=fmt)
    for consolidated in (None, True, False):
        ours, runtime, theirs = open_both(path, group=group, consolidated=consolidated)
        xr.testing.assert_identical(ours, theirs)
        assert runtime == []
    if group.strip("/"):
        assert "v" in ours


@pytest.mark.parametrize("fmt", [2, 3])
def test_open_datatree_takes_a_leading_slash(tmp_path, fmt):
    path = str(tmp_path / "s.zarr")
    child = more().rename(t="u")  # (a dimension of its own: aligned with its parent)
    first().to_zarr(path, group="g1", zarr_format=fmt)
    child.to_zarr(path, group="g1/sub", zarr_format=fmt)
    tree = xr.open_datatree(path, engine="chunkstore", group="/g1")
    assert sorted(n.path for n in tree.subtree) == ["/", "/sub"]
    xr.testing.assert_identical(tree["sub"].to_dataset(inherit=False).load(), child)
    xr.testing.assert_identical(tree.to_dataset().load(), first())
    # (a Group given as the store takes the group path as the engine does)
    g = cs.open_group(path, mode="r")
    got = xr.open_dataset(g, engine="chunkstore", group="/g1/sub")
    xr.testing.assert_identical(got.load(), child)


# -- one element keeps the variable's dtype --------------------------------------------------

def strings() -> xr.Dataset:
    return xr.Dataset({"u": ("x", np.array(["ab", "c", "def"], dtype="U3")),
                       "s": ("x", np.array([b"ab", b"c", b"def"], dtype="S3")),
                       "o": ("x", np.array(["ab", "c", "def"], dtype=object)),
                       "u2": (("x", "y"), np.array([["ab", "c"], ["def", "g"], ["h", "ij"]],
                                                   dtype="U3"))})


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("chunks", [None, {}])
def test_an_element_of_a_string_variable_keeps_its_dtype(tmp_path, fmt, chunks):
    path = str(tmp_path / "s.zarr")
    strings().to_zarr(path, zarr_format=fmt)
    ours = xr.open_dataset(path, engine="chunkstore", chunks=chunks)
    theirs = xr.open_dataset(path, engine="zarr", chunks=chunks)
    for name, sel in [("u", {"x": 1}), ("s", {"x": 1}), ("u2", {"x": 1, "y": 0})]:
        got = ours[name].isel(sel).load()
        assert got.dtype == ours[name].dtype == theirs[name].isel(sel).load().dtype, name
        assert got.values == theirs[name].isel(sel).values, name
    o = ours["o"].isel(x=1).load()
    assert o.dtype == np.dtype(object) and o.values[()] == "c"


@pytest.mark.parametrize("fmt", [2, 3])
def test_an_element_loaded_asynchronously_keeps_its_dtype(tmp_path, fmt):
    path = str(tmp_path / "s.zarr")
    strings().to_zarr(path, zarr_format=fmt)
    ds = xr.open_dataset(path, engine="chunkstore")
    got = asyncio.run(ds[["u", "s"]].isel(x=1).load_async())
    assert got["u"].dtype == np.dtype("U3") and got["u"].values == "c"
    assert got["s"].dtype == np.dtype("S3") and got["s"].values == b"c"


def test_an_element_of_an_array_read_directly_keeps_its_dtype(tmp_path):
    """The backend array itself (what xarray's indexing adapters call) answers an
    all-integer key with a 0-d array of the stored dtype, object included."""
    from xarray.core import indexing

    from chunkstore.integrations.xarray_backend import ChunkstoreBackendArray

    z = cs.array(np.array(["ab", "c", "def"], dtype="U3"), chunks=2)
    got = ChunkstoreBackendArray(z)[indexing.BasicIndexer((1,))]
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.dtype("U3")
    assert got[()] == "c"


# -- attribute order from consolidated Zarr v2 metadata --------------------------------------

def test_attribute_order_of_a_consolidated_v2_store_is_kept(tmp_path):
    path = str(tmp_path / "s.zarr")
    xr.Dataset({"v": ("x", np.arange(3.0), {"units": "K", "long_name": "t", "axis": "X"})},
               attrs={"title": "a", "history": "b"}).to_zarr(path, zarr_format=2,
                                                           consolidated=True)
    ours, _, theirs = open_both(path, consolidated=True)
    assert list(ours.attrs) == list(theirs.attrs) == ["title", "history"]
    assert list(ours["v"].attrs) == list(theirs["v"].attrs) == ["units", "long_name", "axis"]


@pytest.mark.parametrize("dims", ["xy", [1, 2], "x"])
def test_array_dimensions_that_are_not_a_list_of_names_are_refused(tmp_path, dims):
    # "xy" on a 2-d array was read letter by letter, as dimensions x and y
    from chunkstore.errors import MetadataError

    path = str(tmp_path / "d.zarr")
    g = cs.open_group(path, mode="w", zarr_format=2)
    shape = (1,) if dims == "x" else (2, 2)  # (as many dimensions as the value has items)
    a = g.zeros("v", shape=shape, chunks=shape)
    a.attrs["_ARRAY_DIMENSIONS"] = dims
    with pytest.raises(MetadataError, match="_ARRAY_DIMENSIONS"):
        xr.open_dataset(path, engine="chunkstore", consolidated=False).load()


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_lazy_variable_keeps_the_shape_it_was_opened_with(fmt):
    # The Array under a lazy variable follows this process's appends (its handle reloads
    # the metadata); xarray's full slices and negative indices must still select by the
    # variable's own shape (the zarr engine's answer), never rows appended since.
    store = cs.MemoryStore()
    to_chunkstore(first(), store, zarr_format=fmt)
    # (cache=False: every access reads, not the values an earlier one loaded)
    lazy = xr.open_dataset(store, engine="chunkstore", consolidated=True, cache=False)
    to_chunkstore(more(), store, append_dim="t")
    want = first().v
    assert lazy.v.shape == (3,)
    np.testing.assert_array_equal(lazy.v.values, want.values)
    np.testing.assert_array_equal(lazy.v.isel(t=-1).values, want.isel(t=-1).values)
    np.testing.assert_array_equal(lazy.v.isel(t=[-1, 0]).values, [2.0, 0.0])
    np.testing.assert_array_equal(lazy.v.isel(t=slice(None, None, -1)).values, [2.0, 1.0, 0.0])
    ix = xr.DataArray([-1, 1], dims="p")
    np.testing.assert_array_equal(lazy.v.isel(t=ix).values, [2.0, 1.0])
    # shrunk below the variable's end: an error naming the array, not fewer rows
    cs.open_array(store, path="v", mode="r+").resize(2)
    with pytest.raises(IndexError, match="'/v'"):
        lazy.v.values
    np.testing.assert_array_equal(lazy.v[:2].values, [0.0, 1.0])


@pytest.mark.parametrize("how", ["load", "load_async", "dask"])
@pytest.mark.parametrize("changed", ["scale", "units"])
def test_a_lazy_variable_of_an_array_replaced_since_is_refused(tmp_path, how, changed):
    """A dataset opened lazily, then the group rewritten by this process with
    to_chunkstore(mode="w") (same shape, another CF encoding): its variables read the new
    arrays' raw values and decoded them by the old attributes (packed int16 without the
    scale_factor, day counts as hours), without an error. They now raise, naming the
    array; an append since (the same arrays grown) still loads what was opened."""
    import asyncio
    import pandas as pd
    from chunkstore.errors import ArrayMetadataChangedError
    p = str(tmp_path / "s.zarr")
    ds = xr.Dataset({"v": (("x",), np.arange(8) * 1.5),
                     "when": (("x",), pd.date_range("2000-01-01", periods=8, freq="D"))})
    to_chunkstore(ds, p, encoding={"when": {"units": "hours since 2000-01-01",
                                            "dtype": "i8"}})
    lazy = xr.open_dataset(p, engine="chunkstore", chunks={} if how == "dask" else None)
    grown = xr.open_dataset(p, engine="chunkstore")
    to_chunkstore(ds.isel(x=slice(0, 2)), p, append_dim="x")
    np.testing.assert_array_equal(grown.load().v.values, ds.v.values)  # appended: fine
    encoding = ({"v": {"dtype": "i2", "scale_factor": 0.5}} if changed == "scale" else
                {"when": {"units": "days since 2000-01-01", "dtype": "i8"}})
    to_chunkstore(ds, p, mode="w", encoding=encoding)
    var = "v" if changed == "scale" else "when"
    with pytest.raises(ArrayMetadataChangedError, match=f"'/{var}'.*open the dataset again"):
        if how == "load_async":
            asyncio.run(lazy[var].load_async())
        else:
            lazy[var].load()


def test_a_lazy_variable_loads_after_an_append_and_a_non_decoding_attribute_change(tmp_path):
    """Only what decoding uses counts as a replacement: an attribute such as history, set
    after the consolidation (the snapshot lacks it), then an append in this process, raised
    "replaced" where the opened rows were there all along."""
    p = str(tmp_path / "s.zarr")
    ds = xr.Dataset({"v": (("t",), np.arange(4.0))})
    to_chunkstore(ds, p, mode="w")
    cs.open_group(p, mode="r+")["v"].attrs["history"] = "x"
    lazy = xr.open_dataset(p, engine="chunkstore")
    to_chunkstore(xr.Dataset({"v": (("t",), np.arange(4.0, 6.0))}), p, append_dim="t")
    np.testing.assert_array_equal(lazy.v.values, np.arange(4.0))
