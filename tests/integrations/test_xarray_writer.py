"""The xarray writer's behaviours that follow xarray's zarr backend (issue 27): delayed writes,
write_empty_chunks, the writable data store, region="auto", align_chunks, asynchronous
loading, variables named None, zarr-python 3.1's v3 data types through xarray, and a
model-based test of sequences of writes (appends, region writes with misaligned dask
chunks, in-place rewrites) checked against NumPy and against xarray's zarr engine."""

import asyncio
import os
import warnings

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
da = pytest.importorskip("dask.array")

from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant,  # noqa: E402
                                 rule)

import chunkstore as cs  # noqa: E402
from chunkstore.xarray import (ChunkstoreWritableDataStore, open_dataset,  # noqa: E402
                               to_chunkstore)


def _files(path):
    return sorted(os.path.relpath(os.path.join(r, f), path)
                  for r, _, fs in os.walk(path) for f in fs)


@pytest.mark.parametrize("fmt", [2, 3])
def test_compute_false_writes_metadata_now_and_data_when_computed(tmp_path, fmt):
    from dask.delayed import Delayed
    path = str(tmp_path / "d.zarr")
    ds = xr.Dataset({"v": (("t", "x"), da.arange(24.0, chunks=6).reshape(4, 6))},
                    coords={"t": np.arange(4)})
    delayed = to_chunkstore(ds, path, zarr_format=fmt, compute=False)
    assert isinstance(delayed, Delayed)
    before = open_dataset(path).load()
    assert before["v"].shape == (4, 6) and np.isnan(before["v"].values).all()
    np.testing.assert_array_equal(before["t"].values, np.arange(4))  # not dask: written now
    delayed.compute()
    xr.testing.assert_identical(open_dataset(path).load(), ds.load())
    # appending lazily too
    more = xr.Dataset({"v": (("t", "x"), da.ones((2, 6), chunks=(1, 6)))},
                      coords={"t": [4, 5]})
    to_chunkstore(more, path, append_dim="t", compute=False).compute()
    got = open_dataset(path).load()
    np.testing.assert_array_equal(got["v"].values[4:], np.ones((2, 6)))
    np.testing.assert_array_equal(got["t"].values, np.arange(6))


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("write_empty", [True, False, None])
def test_write_empty_chunks_decides_whether_fill_only_chunks_are_stored(tmp_path, fmt,
                                                                       write_empty):
    path = str(tmp_path / "e.zarr")
    data = np.array([np.nan, np.nan, 1.0, np.nan]).reshape(1, 2, 2)
    ds = xr.Dataset({"v": (("z", "y", "x"), data)})
    to_chunkstore(ds, path, zarr_format=fmt, encoding={"v": {"chunks": (1, 1, 1)}},
                  write_empty_chunks=write_empty)
    sep = "/" if fmt == 3 else "."
    prefix = os.path.join("v", "c") if fmt == 3 else "v"
    chunks = [f for f in _files(os.path.join(path, "v")) if f not in
              (".zarray", ".zattrs", "zarr.json")]
    want = ["0.0.0", "0.0.1", "0.1.0", "0.1.1"] if write_empty else ["0.1.0"]
    assert sorted(chunks) == [os.path.join("c", *w.split(".")) if fmt == 3 else w
                              for w in want], (prefix, sep)
    xr.testing.assert_identical(open_dataset(path).load(), ds)
    with pytest.raises(ValueError, match="write_empty_chunks"):
        to_chunkstore(ds, str(tmp_path / "x.zarr"), write_empty_chunks=True,
                      encoding={"v": {"write_empty_chunks": False}})


@pytest.mark.parametrize("fmt", [2, 3])
def test_dump_to_store_and_reading_it_back(tmp_path, fmt):
    ds = xr.Dataset({"v": (("x",), np.arange(5.0), {"units": "m"})},
                    coords={"x": np.arange(5) * 2}, attrs={"title": "t"})
    store = ChunkstoreWritableDataStore.open_group(str(tmp_path / "s.zarr"), mode="w",
                                                   zarr_format=fmt)
    ds.dump_to_store(store)
    assert store.ds is store.group and store.group.zarr_format == fmt
    with xr.decode_cf(store) as got:
        xr.testing.assert_identical(got, ds)
    with xr.open_dataset(store=store, filename_or_obj=None, engine="chunkstore") as got:
        xr.testing.assert_identical(got.load(), ds)
    with pytest.raises(Exception, match="read-only"):
        ChunkstoreWritableDataStore.open_group(str(tmp_path / "s.zarr"),
                                               mode="r").store({}, {})


def test_mode_w_over_a_group_replaces_it_only_once_the_write_is_checked(tmp_path):
    path = str(tmp_path / "w.zarr")
    to_chunkstore(xr.Dataset({"keep": ("x", np.arange(3))}), path)
    bad = xr.Dataset({"v": ("x", np.arange(3))}, attrs={"bad": xr.DataArray()})
    with pytest.raises(TypeError, match="Invalid attribute in Dataset.attrs"):
        to_chunkstore(bad, path, mode="w")
    np.testing.assert_array_equal(open_dataset(path)["keep"].values, np.arange(3))
    to_chunkstore(xr.Dataset({"v": ("x", np.arange(3))}), path, mode="w")
    assert set(open_dataset(path).variables) == {"v"}


@pytest.mark.parametrize("fmt", [2, 3])
def test_region_auto_finds_the_slice_from_the_coordinates(tmp_path, fmt):
    path = str(tmp_path / "r.zarr")
    t = pd.date_range("2026-01-01", periods=10)
    ds = xr.Dataset({"v": ("time", np.zeros(10))}, coords={"time": t})
    to_chunkstore(ds, path, zarr_format=fmt)
    part = xr.Dataset({"v": ("time", np.arange(3.0) + 1)}, coords={"time": t[4:7]})
    to_chunkstore(part, path, region="auto")
    want = np.zeros(10)
    want[4:7] = [1, 2, 3]
    np.testing.assert_array_equal(open_dataset(path)["v"].values, want)
    outside = xr.Dataset({"v": ("time", [1.0])}, coords={"time": [pd.Timestamp("2030-01-01")]})
    with pytest.raises(KeyError, match="time"):
        to_chunkstore(outside, path, region="auto")
    gaps = xr.Dataset({"v": ("time", [1.0, 2.0])}, coords={"time": t[[1, 3]]})
    with pytest.raises(ValueError, match="contiguous"):
        to_chunkstore(gaps, path, region="auto")
    with pytest.raises(ValueError, match="region='auto' needs mode"):
        to_chunkstore(part, path, region="auto", mode="a-")
    np.testing.assert_array_equal(open_dataset(path)["v"].values, want)



@pytest.mark.parametrize("fmt", [2, 3])
def test_region_refuses_an_index_coordinate_outside_its_dimensions(tmp_path, fmt):
    """An explicit region over t with an index coordinate x in ds (no t in its dims) is
    refused, as xarray's zarr engine refuses it: written, x's values (here different from the
    stored ones) would be dropped without a word. Dropping x first writes the region."""
    path = str(tmp_path / "r.zarr")
    ds = xr.Dataset({"a": (("t", "x"), np.zeros((4, 3)))},
                    coords={"t": np.arange(4), "x": np.arange(3)})
    to_chunkstore(ds, path, zarr_format=fmt)
    part = (ds.isel(t=slice(0, 2)) + 1).drop_vars("t").assign_coords(x=[10, 11, 12])
    with pytest.raises(ValueError, match=r"\['x'\] have none"):
        to_chunkstore(part, path, region={"t": slice(0, 2)})
    back = open_dataset(path)
    np.testing.assert_array_equal(back["a"].values, np.zeros((4, 3)))
    np.testing.assert_array_equal(back["x"].values, np.arange(3))
    to_chunkstore(part.drop_vars("x"), path, region={"t": slice(0, 2)})
    want = np.zeros((4, 3))
    want[:2] = 1
    np.testing.assert_array_equal(open_dataset(path)["a"].values, want)


@pytest.mark.parametrize("fmt", [2, 3])
def test_region_auto_with_a_coordinate_the_store_lacks_is_refused(tmp_path, fmt):
    """ds's coordinate t=[3, 4] cannot be found in a group that stores no t: the write is
    refused (xarray raises KeyError), not put at t=0..1."""
    path = str(tmp_path / "r.zarr")
    to_chunkstore(xr.Dataset({"v": ("t", np.zeros(6))}), path, zarr_format=fmt)
    part = xr.Dataset({"v": ("t", [1.0, 2.0])}, coords={"t": [3, 4]})
    with pytest.raises(KeyError, match="'t'"):
        to_chunkstore(part, path, region="auto")
    with pytest.raises(KeyError, match="'t'"):
        to_chunkstore(part, path, region={"t": "auto"}, mode="a")
    np.testing.assert_array_equal(open_dataset(path)["v"].values, np.zeros(6))
    # a dimension ds has no coordinate for is still its whole length
    to_chunkstore(part.drop_vars("t"), path, region="auto")
    np.testing.assert_array_equal(open_dataset(path)["v"].values, [1, 2, 0, 0, 0, 0])

def test_align_chunks_rechunks_dask_to_the_stored_chunks(tmp_path):
    path = str(tmp_path / "a.zarr")
    to_chunkstore(xr.Dataset({"v": ("x", np.zeros(20))}), path,
                  encoding={"v": {"chunks": (5,)}})
    part = xr.Dataset({"v": ("x", da.arange(12.0, chunks=7))})
    to_chunkstore(part, path, region={"x": slice(3, 15)}, align_chunks=True)
    want = np.zeros(20)
    want[3:15] = np.arange(12.0)
    np.testing.assert_array_equal(open_dataset(path)["v"].values, want)


def test_dask_data_into_a_memory_store_from_a_copied_graph_raises(tmp_path):
    """Under the processes scheduler the tasks wrote into pickled copies of a MemoryStore:
    the write returned, and the variable read as its fill value (NaN) everywhere. They now
    raise, naming the array and store, as chunkstore.dask.to_chunkstore's do; the threaded
    scheduler writes them, and a directory takes the processes' writes."""
    import dask
    ds = xr.Dataset({"v": ("t", np.arange(12.0))}).chunk({"t": 4})
    with dask.config.set(scheduler="processes", num_workers=2):
        with pytest.raises(RuntimeError, match="'v' of MemoryStore.*copy of the dask graph"):
            to_chunkstore(ds, cs.MemoryStore())
        to_chunkstore(ds, str(tmp_path / "d.zarr"))
    np.testing.assert_array_equal(open_dataset(str(tmp_path / "d.zarr"))["v"].values,
                                  np.arange(12.0))
    store = cs.MemoryStore()
    with dask.config.set(scheduler="threads"):
        to_chunkstore(ds, store)
    np.testing.assert_array_equal(cs.open_array(store, path="v")[...], np.arange(12.0))


_TV = xr.Dataset({"v": ("t", np.arange(6.0)), "w": ("t", np.arange(6.0) * 2)},
                 coords={"t": np.arange(6)})
_UNOPENABLE = {  # writes that xarray's zarr engine accepts, leaving dimensions that disagree
    "append without a stored variable of the dimension": (
        lambda: xr.Dataset({"v": ("t", np.arange(6.0, 9.0))}, coords={"t": np.arange(6, 9)}),
        dict(append_dim="t"), "9 in variable 'v'.*6 in the stored variable 'w'"),
    "a new variable of a region write": (
        lambda: _TV.isel(t=slice(1, 3)).assign(z=("t", np.ones(2))).drop_vars("t"),
        dict(mode="a", region={"t": slice(1, 3)}), "2 in variable 'z', 6 in variable 'v'"),
    "a new variable of an append": (
        lambda: xr.Dataset({"v": ("t", np.arange(6.0, 9.0)), "w": ("t", np.zeros(3)),
                            "new": ("t", np.ones(3))}, coords={"t": np.arange(6, 9)}),
        dict(append_dim="t"), "3 in variable 'new', 9 in variable 'v'"),
}


@pytest.mark.parametrize("case", sorted(_UNOPENABLE))
def test_mode_a_writes_leaving_dimensions_that_disagree_are_refused(tmp_path, case):
    """Each left a group that neither engine opens ("conflicting sizes for dimension 't'");
    now refused before anything is written, the stored dataset unchanged."""
    make, kwargs, match = _UNOPENABLE[case]
    p = str(tmp_path / "s.zarr")
    to_chunkstore(_TV, p)
    before = _files(p)
    with pytest.raises(ValueError, match="conflicting sizes for dimension 't': " + match):
        to_chunkstore(make(), p, **kwargs)
    assert _files(p) == before
    xr.testing.assert_identical(open_dataset(p).load(), _TV)


def test_mode_a_appends_and_region_writes_that_keep_dimensions_agreeing_still_work(tmp_path):
    p = str(tmp_path / "s.zarr")
    to_chunkstore(_TV, p)
    more = xr.Dataset({"v": ("t", np.arange(6.0, 9.0)), "w": ("t", np.zeros(3))},
                      coords={"t": np.arange(6, 9)})
    to_chunkstore(more, p, append_dim="t")
    to_chunkstore(_TV.isel(t=slice(1, 3))[["v"]].drop_vars("t") * 0, p, mode="a",
                  region={"t": slice(1, 3)})
    to_chunkstore(xr.Dataset({"q": ("x", np.ones(3))}), p, mode="a")
    want = xr.concat([_TV, more], dim="t")
    want["v"][1:3] = 0
    want["q"] = ("x", np.ones(3))
    xr.testing.assert_identical(open_dataset(p).load(), want)


def test_a_region_write_opens_only_the_variables_it_writes(tmp_path):
    """The check of dimension lengths opened every other variable of the group for a region
    write, which changes no length (region writes come many at a time)."""
    class Reads(cs.MemoryStore):
        def __init__(self):
            super().__init__()
            self.keys_read = []

        def __getitem__(self, key):
            self.keys_read.append(key)
            return super().__getitem__(key)

        def getitems(self, keys, **kwargs):
            keys = list(keys)
            self.keys_read.extend(keys)
            return super().getitems(keys, **kwargs)

    store = Reads()
    ds = xr.Dataset({f"v{i}": ("t", np.arange(6.0)) for i in range(5)})
    to_chunkstore(ds, store)
    reads = {}
    for mode in ("r+", "a"):  # (r+ checks no lengths: what listing the group costs)
        store.keys_read.clear()
        # (not consolidated: mode "r+" never consolidates, whose reads would count for "a")
        to_chunkstore(ds[["v0"]].isel(t=slice(0, 3)) * 0, store, mode=mode,
                      region={"t": slice(0, 3)}, consolidated=False)
        reads[mode] = len([k for k in store.keys_read if k.split("/")[0] != "v0"])
    assert reads["a"] <= reads["r+"] + 2, reads  # (mode "a" writes the group attributes)
    np.testing.assert_array_equal(open_dataset(store)["v0"].values, [0, 0, 0, 3, 4, 5])


def test_load_async_reads_every_variable_off_the_event_loop(tmp_path):
    path = str(tmp_path / "l.zarr")
    ds = xr.Dataset({n: (("x", "y"), np.random.default_rng(i).random((40, 30)))
                     for i, n in enumerate("abc")})
    to_chunkstore(ds, path, encoding={n: {"chunks": (10, 10)} for n in "abc"})
    lazy = open_dataset(path, chunks=None)

    async def main():
        loop = asyncio.get_running_loop()
        ticks = 0

        async def tick():  # the loop keeps running while the reads are under way
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        t = loop.create_task(tick())
        out = await lazy.isel(x=slice(5, 35), y=[1, 7, 20]).load_async()
        t.cancel()
        return out, ticks

    got, ticks = asyncio.run(main())
    xr.testing.assert_identical(got, ds.isel(x=slice(5, 35), y=[1, 7, 20]))
    assert ticks > 0


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_variable_named_none_is_stored_as_xarray_stores_it(tmp_path, fmt):
    path = str(tmp_path / "n.zarr")
    to_chunkstore(xr.Dataset({"keep": ("x", np.arange(2))}), path, zarr_format=fmt)
    to_chunkstore(xr.Dataset({None: ("x", [5, 6])}), path, mode="a")
    assert "__values__" in cs.open_group(path, mode="r")
    got = open_dataset(path).load()
    assert set(got.variables) == {"keep", None}
    np.testing.assert_array_equal(got["keep"].values, np.arange(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = xr.open_zarr(path).load()
    xr.testing.assert_identical(got, theirs)


@pytest.mark.parametrize("direction", ["chunkstore writes", "zarr-python writes"])
def test_v3_fixed_width_strings_and_times_match_xarrays_zarr_engine(tmp_path, direction):
    ds = xr.Dataset({"s": ("x", np.array([b"ab", b"cdef", b""], dtype="S4")),
                     "u": ("x", np.array(["a", "\u00e9t\u00e9", "z"], dtype="U3")),
                     "dt": ("x", np.array([1, 2, 3], dtype="M8[s]")),
                     "td": ("x", np.array([1, -2, 3], dtype="m8[ms]"))})
    enc = {"dt": {"units": "seconds since 1970-01-01", "dtype": "M8[s]"}}
    path = str(tmp_path / "s.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if direction == "chunkstore writes":
            to_chunkstore(ds, path, zarr_format=3)
        else:
            ds.to_zarr(path, zarr_format=3)
        theirs = xr.open_zarr(path).load()
    ours = open_dataset(path).load()
    xr.testing.assert_identical(ours, theirs)
    xr.testing.assert_identical(ours, ds)
    del enc


@pytest.mark.parametrize("fmt", [2, 3])
def test_xarrays_error_words(tmp_path, fmt):
    path = str(tmp_path / "e.zarr")
    ds = xr.Dataset({"v": ("x", np.arange(3.0))})
    to_chunkstore(ds, path, zarr_format=fmt)
    cases = [
        (dict(mode="r+", ds=ds.assign(w=("x", np.ones(3)))),
         "non-pre-existing variables"),
        (dict(mode="a", append_dim="nope"), "does not match any existing dataset dimensions"),
        (dict(mode="w", append_dim="x"), "cannot set append_dim unless"),
        (dict(mode="w", region={"x": slice(0, 1)}), "cannot set region unless"),
        (dict(mode="a", ds=xr.Dataset({"v": ("y", np.arange(3.0))})),
         "different dimension names"),
        (dict(mode="a", ds=xr.Dataset({"v": ("x", np.arange(4.0))})),
         "different dimension sizes"),
        (dict(mode="a", ds=xr.Dataset({"w": ("x", np.arange(3.0))}),
              encoding={"w": {"bogus": 1}}), "unexpected encoding"),
        (dict(mode="a", ds=xr.Dataset({"w": ("x", np.arange(3.0))}),
              encoding={"w": "zstd"}), "castable to a dictionary"),
    ]
    before = {f: open(os.path.join(path, f), "rb").read() for f in _files(path)}
    for kw, words in cases:
        kw = dict(kw)
        data = kw.pop("ds", ds)
        with pytest.raises(ValueError, match=words):
            to_chunkstore(data, path, **kw)
    assert {f: open(os.path.join(path, f), "rb").read() for f in _files(path)} == before
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_dataset(str(tmp_path / "missing.zarr"))


class XarrayWrites(RuleBasedStateMachine):
    """Appends (numpy or dask), region writes with dask chunks that straddle the store's
    chunks (and shards), in-place rewrites in mode "a", rejected writes, of a 1-d and a 2-d
    variable in Zarr v2, v3 or sharded v3: after each step the store reads back
    (chunkstore's engine and xarray's zarr engine) as the NumPy model says."""

    def __init__(self):
        super().__init__()
        import tempfile
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "m.zarr")

    @initialize(layout=st.sampled_from(["v2", "v3", "v3-sharded"]))
    def create(self, layout):
        self.fmt = 2 if layout == "v2" else 3
        self.model = np.arange(6.0)
        self.model2 = np.arange(18.0).reshape(6, 3)
        enc = {"v": {"chunks": (4,)}, "w": {"chunks": (2, 2)}}
        if layout == "v3-sharded":   # a dask task's block straddles shards, not just chunks
            enc = {"v": {"chunks": (2,), "shards": (4,)}, "w": {"chunks": (1, 2), "shards": (2, 4)}}
        to_chunkstore(xr.Dataset({"v": ("t", self.model), "w": (("t", "y"), self.model2),
                                  "k": ("y", np.arange(3))},
                                 coords={"t": np.arange(6)}), self.path,
                      zarr_format=self.fmt, encoding=enc)

    def teardown(self):
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(n=st.integers(1, 7), chunk=st.integers(1, 5), lazy=st.booleans())
    def append(self, n, chunk, lazy):
        values = np.random.default_rng(n * 7 + chunk).random(n)
        values2 = np.random.default_rng(n * 11 + chunk).random((n, 3))
        data = da.from_array(values, chunks=chunk) if lazy else values
        data2 = da.from_array(values2, chunks=(chunk, 2)) if lazy else values2
        t0 = len(self.model)
        to_chunkstore(xr.Dataset({"v": ("t", data), "w": (("t", "y"), data2)},
                                 coords={"t": np.arange(t0, t0 + n)}),
                      self.path, append_dim="t")
        self.model = np.concatenate([self.model, values])
        self.model2 = np.concatenate([self.model2, values2])

    @rule(data=st.data(), chunk=st.integers(1, 5),
          edges=st.sampled_from([{}, {"safe_chunks": False}, {"align_chunks": True}]))
    def region(self, data, chunk, edges):
        n = len(self.model)
        start = data.draw(st.integers(0, n - 1))
        stop = data.draw(st.integers(start + 1, n))
        values = -np.arange(start, stop, dtype=float) - 0.5
        values2 = values[:, None] * np.array([1.0, 2.0, 3.0])
        write = xr.Dataset({"v": ("t", da.from_array(values, chunks=chunk)),
                            "w": (("t", "y"), da.from_array(values2, chunks=(chunk, 1)))})
        # the blocks a write stores whole along t: v's 4 (chunks or shards), w's 2
        cut = any(start % g or (stop % g and stop != n) for g in (4, 2))
        if cut and not edges:  # safe_chunks: refused, as xarray refuses it; nothing written
            with pytest.raises(ValueError, match="would overlap multiple Dask chunks"):
                to_chunkstore(write, self.path, region={"t": slice(start, stop)})
            return
        to_chunkstore(write, self.path, region={"t": slice(start, stop)}, **edges)
        self.model[start:stop] = values
        self.model2[start:stop] = values2

    @rule(scale=st.floats(-3, 3, allow_nan=False))
    def rewrite_in_place(self, scale):
        to_chunkstore(xr.Dataset({"v": ("t", self.model * scale),
                                  "w": (("t", "y"), self.model2 * scale)},
                                 coords={"t": np.arange(len(self.model))}),
                      self.path, mode="a")
        self.model = self.model * scale
        self.model2 = self.model2 * scale

    @rule(extra=st.integers(1, 3))
    def rejected_resize(self, extra):
        with pytest.raises(ValueError, match="different dimension sizes"):
            to_chunkstore(xr.Dataset({"v": ("t", np.zeros(len(self.model) + extra))}),
                          self.path, mode="a")

    @invariant()
    def reads_back_as_the_model(self):
        got = open_dataset(self.path, consolidated=False).load()
        np.testing.assert_array_equal(got["v"].values, self.model)
        np.testing.assert_array_equal(got["w"].values, self.model2)
        np.testing.assert_array_equal(got["t"].values, np.arange(len(self.model)))
        np.testing.assert_array_equal(got["k"].values, np.arange(3))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = xr.open_zarr(self.path, consolidated=True).load()
        xr.testing.assert_identical(got, theirs)


TestXarrayWrites = XarrayWrites.TestCase
TestXarrayWrites.settings = settings(max_examples=25, stateful_step_count=8, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])


def test_cache_members_snapshots_the_arrays_as_xarrays_zarrstore(tmp_path):
    path = str(tmp_path / "c.zarr")
    live = ChunkstoreWritableDataStore.open_group(path, mode="w", cache_members=False)
    live.zarr_group.create("a", shape=(1,), dtype="u1")
    snap = ChunkstoreWritableDataStore.open_group(path, mode="r", cache_members=True)
    live.zarr_group.create("b", shape=(1,), dtype="u1")
    assert sorted(snap.array_keys()) == ["a"]
    assert sorted(live.array_keys()) == ["a", "b"]
    assert sorted(ChunkstoreWritableDataStore.open_group(path, mode="r").array_keys()) == \
        ["a", "b"]


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_misaligned_dask_chunks_lose_nothing_on_any_scheduler(tmp_path, scheduler):
    """Dask chunks of 7 against stored chunks of 10 (and a region starting mid-chunk, which
    align_chunks=True accepts): each stored chunk would be read-modified-written by two
    tasks; they are rechunked to the stored grid first, so even tasks in separate processes
    never share a chunk."""
    import dask
    path = str(tmp_path / "m.zarr")
    to_chunkstore(xr.Dataset({"v": ("x", np.zeros(100))}), path,
                  encoding={"v": {"chunks": (10,)}})
    values = np.arange(1.0, 84.0)
    part = xr.Dataset({"v": ("x", da.from_array(values, chunks=7))})
    with dask.config.set(scheduler=scheduler):
        to_chunkstore(part, path, region={"x": slice(13, 96)}, align_chunks=True)
        whole = xr.Dataset({"v": ("x", da.from_array(np.arange(100.0) * 2, chunks=7))})
        to_chunkstore(whole, str(tmp_path / "n.zarr"), encoding={"v": {"chunks": (10,)}})
    want = np.zeros(100)
    want[13:96] = values
    np.testing.assert_array_equal(open_dataset(path)["v"].values, want)
    np.testing.assert_array_equal(open_dataset(str(tmp_path / "n.zarr"))["v"].values,
                                  np.arange(100.0) * 2)


@pytest.mark.parametrize("layout", ["v2", "v3-sharded"])
def test_region_edges_inside_stored_chunks_are_refused_as_xarray_refuses_them(tmp_path,
                                                                               layout):
    """A dask region write (mode "r+") whose region starts or ends inside a stored chunk
    (a shard, where sharded) is refused with safe_chunks=True, and nothing is written:
    the rest of that chunk belongs to a neighbouring region, which another process may be
    writing at the same time (a lost update where no lock reaches: rows were lost this way
    with 4 processes writing 2-row pieces of 16-row shards)."""
    path = str(tmp_path / "e.zarr")
    enc = {"chunks": (4, 8)} if layout == "v2" else {"chunks": (2, 8), "shards": (4, 8)}
    to_chunkstore(xr.Dataset({"a": (("t", "x"), np.zeros((10, 8)))}), path,
                  zarr_format=2 if layout == "v2" else 3, encoding={"a": enc})

    def piece(start, stop, lazy=True, **kw):
        values = np.full((stop - start, 8), float(start + 1))
        data = da.from_array(values, chunks=(1, 8)) if lazy else values
        to_chunkstore(xr.Dataset({"a": (("t", "x"), data)}), path,
                      region={"t": slice(start, stop)}, **kw)
        return values

    want = np.zeros((10, 8))
    for start, stop in [(2, 4), (1, 8), (4, 6), (0, 3)]:
        with pytest.raises(ValueError, match="would overlap multiple Dask chunks.*'t'"):
            piece(start, stop)
        np.testing.assert_array_equal(open_dataset(path)["a"].values, want)
    for start, stop, kw in [(4, 8, {}), (8, 10, {}), (0, 10, {}),      # whole blocks, or
                            (2, 4, {"lazy": False}),                   # up to the end; NumPy
                            (5, 7, {"safe_chunks": False}),            # (as xarray); the
                            (1, 3, {"align_chunks": True})]:           # opt-outs
        want[start:stop] = piece(start, stop, **kw)
        np.testing.assert_array_equal(open_dataset(path)["a"].values, want)


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_false_removes_the_groups_stale_consolidated_metadata(tmp_path, fmt):
    """Writing with consolidated=False into a consolidated group removes its consolidated
    metadata (zarr-python 3 drops a v3 group's as xarray writes it; chunkstore a v2 group's
    .zmetadata too): kept, it would show every reader the old shapes and members, the
    appended rows and the added variable missing."""
    path = str(tmp_path / "c.zarr")
    to_chunkstore(xr.Dataset({"a": ("t", np.arange(6.0))}, coords={"t": np.arange(6)}), path,
                  zarr_format=fmt, consolidated=True)
    assert cs.open_consolidated(path, mode="r")["a"].shape == (6,)
    to_chunkstore(xr.Dataset({"a": ("t", [60.0, 70.0])}, coords={"t": [6, 7]}), path,
                  append_dim="t", consolidated=False)
    to_chunkstore(xr.Dataset({"b": ("y", [1, 2])}), path, mode="a", consolidated=False)
    want = np.concatenate([np.arange(6.0), [60, 70]])
    ours = open_dataset(path)
    np.testing.assert_array_equal(ours["a"].values, want)
    assert set(ours.data_vars) == {"a", "b"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (no consolidated metadata: xarray warns)
        theirs = xr.open_zarr(path)
    np.testing.assert_array_equal(theirs["a"].values, want)
    assert set(theirs.data_vars) == {"a", "b"}
    with pytest.raises(Exception):
        cs.open_consolidated(path, mode="r")
    # consolidated=None (the default) consolidates again, with the new shapes
    to_chunkstore(xr.Dataset({"c": ("y", [3, 4])}), path, mode="a")
    g = cs.open_consolidated(path, mode="r")
    assert g["a"].shape == (8,) and sorted(g.array_keys()) == ["a", "b", "c", "t"]


def test_a_new_subgroup_is_written_in_the_format_of_the_group_above(tmp_path):
    """to_chunkstore(group="g1", mode="a") into a Zarr v3 store writes a v3 group (as
    to_zarr does): a v2 group there is invisible to zarr-python 3 and xarray's zarr engine."""
    path = str(tmp_path / "s.zarr")
    to_chunkstore(xr.Dataset({"a": ("t", np.arange(3.0))}), path, zarr_format=3)
    to_chunkstore(xr.Dataset({"a": ("t", np.full(3, 2.0))}), path, group="g1", mode="a")
    assert os.path.exists(os.path.join(path, "g1", "zarr.json"))
    assert not os.path.exists(os.path.join(path, "g1", ".zgroup"))
    np.testing.assert_array_equal(xr.open_zarr(path, group="g1")["a"].values, [2.0] * 3)
    assert sorted(xr.open_datatree(path, engine="zarr").groups) == ["/", "/g1"]


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_metadata_of_groups_between_root_and_the_group_written_is_refreshed(
        tmp_path, fmt):
    """g1 consolidated by a write to it, then g1/g2 appended to (and g1/g3 created): a reader
    opening g1's path as the store read g1's consolidated metadata, stale (g2 with its old
    length, no g3), through either engine."""
    path = str(tmp_path / "n.zarr")
    ds = xr.Dataset({"a": ("t", np.arange(4.0))}, coords={"t": [1, 2, 3, 4]})
    more = xr.Dataset({"a": ("t", [10.0, 11.0])}, coords={"t": [5, 6]})
    to_chunkstore(ds, path, group="g1/g2", zarr_format=fmt)
    to_chunkstore(ds, path, group="g1", mode="a")
    to_chunkstore(more, path, group="g1/g2", append_dim="t")
    to_chunkstore(ds, path, group="g1/g3")
    want = [0, 1, 2, 3, 10, 11]
    for engine in ("chunkstore", "zarr"):
        for consolidated in (None, True):
            got = xr.open_dataset(path + "/g1", engine=engine, group="g2",
                                  consolidated=consolidated)
            np.testing.assert_array_equal(got["a"].values, want)
            got = xr.open_dataset(path + "/g1", engine=engine, group="g3",
                                  consolidated=consolidated)
            np.testing.assert_array_equal(got["a"].values, np.arange(4.0))


# ------------------------------------- variable-length strings and bytes read back, rewritten
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("engine", ["zarr", "chunkstore"])
def test_vlen_strings_and_bytes_read_back_are_rewritten_readably(tmp_path, fmt, engine):
    # A v2 variable of variable-length strings or bytes keeps its VLenUTF8/VLenBytes filter
    # in .encoding while xarray encodes its data as fixed-width: to_chunkstore stored <U2 or
    # |S2 with that filter, an array no engine could read (xarray's to_zarr refuses it)
    import zarr
    from zarr.core.dtype import VariableLengthBytes
    from chunkstore.xarray import ChunkstoreBackendEntrypoint
    eng = ChunkstoreBackendEntrypoint if engine == "chunkstore" else "zarr"
    src = str(tmp_path / "src.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        xr.Dataset({"s": ("x", np.array(["ab", "c", "de"], dtype=object))}).to_zarr(
            src, zarr_format=2)
        g = zarr.open_group(src, mode="a", zarr_format=2)
        b = g.create_array("b", shape=(3,), dtype=VariableLengthBytes())
        b[:] = np.array([b"q", b"rs", b"\x00z"], dtype=object)
        b.attrs["_ARRAY_DIMENSIONS"] = ["x"]
        zarr.consolidate_metadata(src)
        ds = xr.open_dataset(src, engine=eng)
        assert ds["b"].encoding.get("filters")  # (the source's object codec)
        out = str(tmp_path / "out.zarr")
        # (v3: the bytes' CF _FillValue b"" would be an attribute that xarray cannot decode
        # for |S2 data, whoever wrote it; xarray's to_zarr refuses the VLenBytes filter)
        to_chunkstore(ds if fmt == 2 else ds.drop_vars("b"), out, zarr_format=fmt)
        for reader in (ChunkstoreBackendEntrypoint, "zarr"):
            back = xr.open_dataset(out, engine=reader)
            assert [str(v) for v in back["s"].values] == ["ab", "c", "de"]
            if fmt == 2:
                assert [bytes(v) for v in back["b"].values] == [b"q", b"rs", b"\x00z"]


def test_an_object_codec_as_a_filter_of_fixed_width_data_is_refused():
    import numcodecs
    with pytest.raises(ValueError, match="encodes object arrays"):
        cs.create_array({}, shape=(3,), dtype="<U2", filters=[numcodecs.VLenUTF8()],
                        zarr_format=2)
    with pytest.raises(ValueError, match="encodes object arrays"):
        cs.create(shape=(3,), dtype="S2", filters=[numcodecs.VLenBytes()], store={})


def test_v3_variable_length_bytes_are_bytes_to_xarray(tmp_path):
    # the engine typed them as variable-length str (it looked for vlen-bytes among the
    # filters; in v3 it is the serializer): xarray's writers then decoded them as UTF-8
    import zarr
    from xarray.coding.strings import check_vlen_dtype
    from chunkstore.xarray import ChunkstoreBackendEntrypoint
    src = str(tmp_path / "src.zarr")
    g = zarr.open_group(src, mode="w", zarr_format=3)
    g.create_array("b", shape=(3,), dtype=zarr.core.dtype.VariableLengthBytes(),
                   dimension_names=["x"])[:] = np.array([b"q", b"\xff\xfe", b"z"], dtype=object)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = xr.open_dataset(src, engine=ChunkstoreBackendEntrypoint, chunks={})
        assert check_vlen_dtype(ds["b"].dtype) is bytes
        out = str(tmp_path / "out.zarr")
        to_chunkstore(ds, out, zarr_format=3)
        back = xr.open_dataset(out, engine=ChunkstoreBackendEntrypoint)
    # (2 bytes at most: |S2; 1 would be |S1, which xarray reads as characters to join)
    assert [bytes(v) for v in back["b"].values] == [b"q", b"\xff\xfe", b"z"]


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_region_with_negative_bounds_counts_from_the_stored_end(tmp_path, fmt):
    path = str(tmp_path / "r.zarr")
    to_chunkstore(xr.Dataset({"v": ("t", np.arange(6.0))}), path, zarr_format=fmt)
    to_chunkstore(xr.Dataset({"v": ("t", -np.arange(1.0, 4.0))}), path, mode="r+",
                  region={"t": slice(-3, None)})
    np.testing.assert_array_equal(open_dataset(path)["v"].values, [0, 1, 2, -1, -2, -3])


@pytest.mark.parametrize("how", ["region", "append"])
def test_writes_with_zarr_format_2_go_to_the_v2_arrays_where_v3_documents_lie_beside(tmp_path,
                                                                                     how):
    """Another tool left a v3 array beside each v2 variable (both formats' documents at one
    path). to_chunkstore(zarr_format=2, write_empty_chunks=True) wrote the region into the v3
    array, and an append grew the v2 array but wrote its rows into the v3 one (they read as
    NaN): the handles reopened for write_empty_chunks opened the v3 array there."""
    from chunkstore.storage import DirectoryStore
    root, scratch = str(tmp_path / "r.zarr"), str(tmp_path / "s.zarr")
    to_chunkstore(xr.Dataset({"v": ("t", np.arange(4.0))}), root, mode="w", zarr_format=2,
                  encoding={"v": {"chunks": (2,)}})
    to_chunkstore(xr.Dataset({"v": ("t", np.full(4, 9.0))}), scratch, mode="w",
                  zarr_format=3, encoding={"v": {"chunks": (2,)}})
    src, dst = DirectoryStore(scratch), DirectoryStore(root)
    dst.setitems({k: src[k] for k in src if "/" in k})  # the v3 variables, not the root
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if how == "region":
            to_chunkstore(xr.Dataset({"v": ("t", np.array([7.0, 8.0]))}), root,
                          region={"t": slice(0, 2)}, zarr_format=2, write_empty_chunks=True,
                          consolidated=False)
            want = [7.0, 8.0, 2.0, 3.0]
        else:
            to_chunkstore(xr.Dataset({"v": ("t", np.array([4.0, 5.0]))}), root,
                          append_dim="t", zarr_format=2, write_empty_chunks=True,
                          consolidated=False)
            want = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert cs.open_array(root, path="v", zarr_format=2)[:].tolist() == want
    assert cs.open_array(root, path="v", zarr_format=3)[:].tolist() == [9.0] * 4


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("consolidated", [None, True, False])
def test_a_region_write_in_mode_r_plus_changes_no_metadata(tmp_path, zarr_format,
                                                          consolidated):
    """Mode "r+" writes values only, as xarray's to_zarr (which never consolidates there):
    consolidating at its end rewrote every document as read before another process's append
    or attribute update (readers of the consolidated metadata lost the appended rows; v3: the
    group's attributes were reverted in its zarr.json)."""
    path = str(tmp_path / "d.zarr")
    ds = xr.Dataset({"v": (("time", "y"), np.arange(40.0).reshape(10, 4))},
                    coords={"time": np.arange(10)})
    to_chunkstore(ds, path, encoding={"v": {"chunks": (5, 4)}}, zarr_format=zarr_format,
                  consolidated=consolidated is not False)
    # another process's change of the metadata after this writer read it (here: before)
    g = cs.open_group(path, mode="r+", use_consolidated=False)
    g.attrs["title"] = "set meanwhile"
    g["v"].resize((15, 4))
    g["time"].resize((15,))
    docs = {k: v for k, v in cs.DirectoryStore(path).items()
            if k.rsplit("/", 1)[-1] in (".zmetadata", "zarr.json", ".zattrs", ".zarray")}
    region = ds.isel(time=slice(0, 5)).drop_vars("time") + 100
    to_chunkstore(region, path, region={"time": slice(0, 5)}, consolidated=consolidated)
    after = {k: v for k, v in cs.DirectoryStore(path).items()
             if k.rsplit("/", 1)[-1] in (".zmetadata", "zarr.json", ".zattrs", ".zarray")}
    assert after == docs
    np.testing.assert_array_equal(cs.open_group(path, mode="r")["v"][:5], region["v"].values)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_to_chunkstore_into_a_group_writes_below_it(tmp_path, zarr_format):
    """A chunkstore Group as the target (as the engine reads one): the dataset goes into
    that group of its store. Taken for a mapping, the writer wrote ".zgroup" into it as a
    member, destroying the group."""
    p = str(tmp_path / "d.zarr")
    root = cs.open_group(p, mode="w", zarr_format=zarr_format)
    root.attrs["title"] = "keep me"
    g = root.create_group("sub")
    ds = xr.Dataset({"w": ("t", np.arange(3.0))})
    to_chunkstore(ds, g, mode="a")
    to_chunkstore(ds, root, group="other", mode="w")
    assert dict(cs.open_group(p, mode="r").attrs) == {"title": "keep me"}
    xr.testing.assert_identical(open_dataset(p, group="sub").load(), ds)
    xr.testing.assert_identical(open_dataset(p, group="other").load(), ds)
    with pytest.raises(cs.errors.ReadOnlyError):
        to_chunkstore(ds, cs.open_group(p, mode="r")["sub"], mode="a")


@pytest.mark.parametrize("scaled", [False, True])
@pytest.mark.parametrize("group", [None, "run"])
def test_mode_w_over_the_group_its_dask_data_reads_is_refused_and_keeps_it(tmp_path, group,
                                                                           scaled):
    """ds opened with chunks={} (dask), then written with mode "w" over its own group: the
    group was replaced first and the tasks read the fill value (NaN stored for every value;
    xarray's zarr engine does the same). Refused now, naming the variable, before anything
    is written; a dataset loaded first is written."""
    path = str(tmp_path / "s.zarr")
    ds = xr.Dataset({"a": ("t", np.arange(10.0)), "b": ("t", np.arange(10.0) * 3)})
    enc = {"b": {"scale_factor": 0.5, "dtype": "i2"}} if scaled else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        to_chunkstore(ds, path, group=group, encoding=enc)
        src = open_dataset(path, group=group, chunks={})
        with pytest.raises(ValueError, match=r"cannot replace the group .*variable '[ab]' "
                                             r"reads array"):
            to_chunkstore(src[["b"]] + 1 if scaled else src + 1, path, group=group, mode="w")
        back = open_dataset(path, group=group).load()
        xr.testing.assert_equal(back, ds)
        to_chunkstore((src + 1).load(), path, group=group, mode="w")
        xr.testing.assert_equal(open_dataset(path, group=group).load(), ds + 1)
