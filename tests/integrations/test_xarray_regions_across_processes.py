"""Processes writing regions of one dataset that share stored chunks and shards, each with
to_chunkstore(region=...) and a ProcessSynchronizer (xarray's to_zarr(synchronizer=), or a
Group opened with one): the writer dropped a Group's synchronizer and had no keyword for
one, and such writers lost each other's rows (137 of 400), with no error."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
da = pytest.importorskip("dask.array")

from chunkstore.xarray import to_chunkstore  # noqa: E402
from xarray_region_worker import full, write_regions  # noqa: E402

T, X, ROWS = 120, 8, 7


@pytest.mark.parametrize("how", ["keyword", "group"])
@pytest.mark.parametrize("fmt", [2, 3])
def test_processes_writing_regions_that_share_chunks_lose_nothing(tmp_path, how, fmt):
    path, locks = str(tmp_path / "d.zarr"), str(tmp_path / "locks")
    template = xr.Dataset({"v": (("time", "x"), da.zeros((T, X), chunks=(40, X)))})
    enc = {"chunks": (10, X)} if fmt == 2 else {"chunks": (10, X), "shards": (40, X)}
    to_chunkstore(template, path, mode="w", zarr_format=fmt, compute=False,
                  encoding={"v": enc})
    starts = list(range(0, T, ROWS))
    parts = [starts[i::3] for i in range(3)]  # (interleaved: neighbours in other processes)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=write_regions, args=(path, locks, how, p, ROWS, T, X))
             for p in parts]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    for engine in ("chunkstore", "zarr"):
        got = xr.open_dataset(path, engine=engine).v.values
        np.testing.assert_array_equal(got, full(T, X))


def test_the_synchronizer_is_kept_and_lets_region_edges_cut_chunks(tmp_path):
    """The Group to_chunkstore returns carries the synchronizer (it came back without:
    writes through it were unsynchronized), and with a ProcessSynchronizer a dask region
    write whose edges cut stored chunks is not refused (its writers are serialized)."""
    import chunkstore as cs
    path = str(tmp_path / "s.zarr")
    sync = cs.ProcessSynchronizer(str(tmp_path / "locks"))
    ds = xr.Dataset({"v": (("x",), np.arange(12.0))}).chunk({"x": 6})
    g = to_chunkstore(ds, path, mode="w", encoding={"v": {"chunks": (3,)}}, synchronizer=sync)
    assert g.synchronizer is sync and g["v"].synchronizer is sync
    part = xr.Dataset({"v": (("x",), np.full(4, -1.0))}).chunk({"x": 2})
    with pytest.raises(ValueError, match="ProcessSynchronizer"):
        to_chunkstore(part, path, region={"x": slice(2, 6)})
    to_chunkstore(part, path, region={"x": slice(2, 6)}, synchronizer=sync)
    want = np.arange(12.0)
    want[2:6] = -1
    np.testing.assert_array_equal(xr.open_dataset(path, engine="chunkstore").v.values, want)
