"""dask and dask.distributed with chunkstore arrays."""

import dask.array as da
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.integrations.dask import aligned, from_chunkstore, to_chunkstore


def test_dask_from_array_reads_a_chunkstore_array():
    a = np.arange(600, dtype="f4").reshape(20, 30)
    z = cs.array(a, chunks=(7, 11), store={})
    d = da.from_array(z, chunks=z.chunks)
    np.testing.assert_array_equal(d.compute(), a)
    np.testing.assert_array_equal((d[::2, 3:] * 2).compute(), a[::2, 3:] * 2)


def test_from_chunkstore_matches_store_chunks(tmp_path):
    a = np.random.default_rng(0).integers(0, 100, (50, 40))
    cs.save(str(tmp_path / "a.zarr"), a)
    d = from_chunkstore(str(tmp_path / "a.zarr"))
    z = cs.open_array(str(tmp_path / "a.zarr"), mode="r")
    assert d.chunksize == z.chunks
    np.testing.assert_array_equal(d.compute(), a)


def test_aligned():
    assert aligned(((4, 4, 2),), (4,), (10,))
    assert aligned(((8, 2),), (4,), (10,))
    assert not aligned(((3, 3, 4),), (4,), (10,))


def test_to_chunkstore_rechunks_unaligned_without_synchronizer(tmp_path):
    a = np.arange(1000, dtype="i4").reshape(40, 25)
    d = da.from_array(a, chunks=(7, 9))          # does not line up with (10, 10)
    z = to_chunkstore(d, str(tmp_path / "a.zarr"), chunks=(10, 10))
    assert z.chunks == (10, 10)
    np.testing.assert_array_equal(z[...], a)


def test_to_chunkstore_unaligned_with_synchronizer(tmp_path):
    a = np.arange(1000, dtype="i4").reshape(40, 25)
    d = da.from_array(a, chunks=(7, 9))
    z = to_chunkstore(d, str(tmp_path / "a.zarr"), chunks=(10, 10),
                      synchronizer=cs.ProcessSynchronizer(str(tmp_path / "locks")))
    np.testing.assert_array_equal(z[...], a)


def test_to_chunkstore_thread_synchronizer_under_the_processes_scheduler(tmp_path):
    """A ThreadSynchronizer pickles to a fresh one in each worker process: its locks do not
    exclude the tasks of other processes, so unaligned dask chunks are rechunked as without a
    synchronizer (they were written as is, and tasks sharing a store chunk lost updates)."""
    import dask
    a = np.random.default_rng(0).integers(1, 1000, (64, 64)).astype("i4")
    d = da.from_array(a, chunks=(5, 7))
    with dask.config.set(scheduler="processes", num_workers=4):
        z = to_chunkstore(d, str(tmp_path / "a.zarr"), chunks=(16, 16),
                          synchronizer=cs.ThreadSynchronizer())
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "a.zarr"), mode="r")[...], a)
    assert z.chunks == (16, 16)
    # (whether the race loses an update is up to timing; the plan is not)
    stored = to_chunkstore(d, str(tmp_path / "b.zarr"), chunks=(16, 16), compute=False,
                           return_stored=True, synchronizer=cs.ThreadSynchronizer())
    assert aligned(stored.chunks, (16, 16))
    stored = to_chunkstore(d, str(tmp_path / "c.zarr"), chunks=(16, 16), compute=False,
                           return_stored=True,
                           synchronizer=cs.ProcessSynchronizer(str(tmp_path / "locks")))
    assert stored.chunks == d.chunks                  # the locks make unaligned writes safe


def test_distributed_local_cluster_write_and_read(tmp_path):
    """A real LocalCluster with two worker processes writes through a ProcessSynchronizer
    with deliberately unaligned chunks, then reads back; the result must match exactly."""
    from distributed import Client, LocalCluster

    a = np.random.default_rng(3).normal(size=(120, 90)).astype("f8")
    with LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster, \
            Client(cluster) as client:
        d = da.from_array(a, chunks=(17, 23))
        sync = cs.ProcessSynchronizer(str(tmp_path / "locks"))
        z = to_chunkstore(d, str(tmp_path / "a.zarr"), chunks=(20, 20), synchronizer=sync)
        back = from_chunkstore(str(tmp_path / "a.zarr")).compute()
        # Also a reduction computed on the workers.
        total = from_chunkstore(z).sum().compute()
        assert len(client.scheduler_info()["workers"]) == 2
    np.testing.assert_array_equal(back, a)
    np.testing.assert_allclose(total, a.sum())


def test_from_chunkstore_views_with_other_chunks_are_other_dask_arrays():
    """Two views of one array with different chunks= had one dask name: combining them
    raised IndexError (issue 29). A sharded array defaults to shard-sized dask chunks."""
    from chunkstore.dask import from_chunkstore
    z = cs.create_array({}, shape=(64, 64), chunks=(8, 8), shards=(32, 32), dtype="i4")
    data = np.arange(64 * 64, dtype="i4").reshape(64, 64)
    z[...] = data
    a = from_chunkstore(z)
    assert a.chunksize == (32, 32) and a.npartitions == 4
    b, c = from_chunkstore(z, chunks=(16, 16)), from_chunkstore(z, chunks=(8, 64))
    assert len({a.name, b.name, c.name}) == 3
    np.testing.assert_array_equal((b + c).compute(), 2 * data)
    # a new name at each call: the data may have changed in between (test_dask_stale)
    assert from_chunkstore(z, chunks=(16, 16)).name != b.name


def test_aligned_takes_offsets_and_rechunk_to_grid_lands_on_blocks():
    import dask.array as da
    from chunkstore.integrations.dask import aligned, rechunk_to_grid
    assert aligned(((10, 10, 5),), (10,)) and not aligned(((7, 7),), (10,))
    assert aligned(((7, 10, 3),), (10,), None, (3,)) and not aligned(((10, 10),), (10,), None, (3,))
    x = rechunk_to_grid(da.zeros(83, chunks=7), (10,), (13,))
    assert x.chunks == ((7, 10, 10, 10, 10, 10, 10, 10, 6),)
    assert aligned(x.chunks, (10,), None, (13,))


def test_a_sharded_destination_is_written_shard_by_shard(tmp_path):
    """Dask chunks on the inner chunks but not the shards: two tasks would both rewrite one
    shard (processes share no in-process shard lock); they are rechunked to the shards."""
    import dask
    import dask.array as da
    from chunkstore.integrations.dask import to_chunkstore
    src = np.random.default_rng(1).random((96, 96))
    with dask.config.set(scheduler="processes", num_workers=2):
        z = to_chunkstore(da.from_array(src, chunks=(8, 8)), str(tmp_path / "s.zarr"),
                          chunks=(8, 8), shards=(32, 32), zarr_format=3)
    np.testing.assert_array_equal(z[...], src)


def test_views_and_handles_of_one_array_are_different_dask_arrays():
    """from_chunkstore named a dask array by its chunking, its handle and the metadata it
    reads by: a view with another fill value or dtype (or a handle opened after the array
    was re-created) used to get the same name, and dask took one's blocks for the other's
    (a + view gave 18 where 9 was due). Each call now has a name of its own."""
    import dask.array as dsk

    from chunkstore.dask import from_chunkstore
    store = cs.MemoryStore()
    z = cs.zeros((4, 4), chunks=(2, 2), dtype="i4", store=store)
    z[:2, :2] = 1
    v = z.view(fill_value=9)
    a, b = from_chunkstore(z), from_chunkstore(v)
    assert a.name != b.name
    np.testing.assert_array_equal((a + b).compute(), z[...] + v[...])
    f = from_chunkstore(z.view(dtype="f4"))
    got = dsk.stack([a.astype("f8"), f.astype("f8")]).compute()
    np.testing.assert_array_equal(got, np.stack([z[...].astype("f8"),
                                                 z.view(dtype="f4")[...].astype("f8")]))
    # one handle, called again: another name (the data may have changed in between)
    assert from_chunkstore(z).name != a.name
    other = cs.open_array(store, mode="r")
    assert from_chunkstore(other).name != a.name


def test_stores_whose_copies_do_not_share_their_data_refuse_writes_from_copied_graphs(
        tmp_path):
    """A MemoryStore (its pickled copy holds a copy of the data) or a ZipStore (its copy
    keeps its writes until it is closed) written by to_chunkstore under the processes
    scheduler: the tasks raise, naming the store (the writes landed in copies and the
    write returned with nothing stored). The threaded scheduler writes them."""
    import dask
    import pytest
    a = np.arange(40, dtype="i4")
    d = da.from_array(a, chunks=10)
    for make in (cs.MemoryStore, lambda: cs.ZipStore(str(tmp_path / "z.zip"), mode="w")):
        with dask.config.set(scheduler="processes", num_workers=2):
            with pytest.raises(RuntimeError, match="copy of the dask graph"):
                to_chunkstore(d, make(), chunks=10)
        with dask.config.set(scheduler="threads"):
            z = to_chunkstore(d, make(), chunks=10)
        np.testing.assert_array_equal(z[...], a)
    with dask.config.set(scheduler="processes", num_workers=2):
        to_chunkstore(d, str(tmp_path / "dir.zarr"), chunks=10)
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "dir.zarr"))[...], a)


def test_only_a_process_synchronizer_spares_the_rechunk():
    """Any synchronizer but a ProcessSynchronizer (a zarr-python 2 style one with thread
    locks, say) may not reach the worker processes: unaligned chunks are rechunked (they
    were written as they were, and tasks sharing a chunk lost updates)."""
    import threading

    class ZarrStyleThreadSync:
        def __init__(self):
            self.locks = {}

        def __getitem__(self, key):
            return self.locks.setdefault(key, threading.Lock())

    d = da.from_array(np.arange(30, dtype="i4"), chunks=3)
    stored = to_chunkstore(d, cs.MemoryStore(), chunks=10, compute=False,
                           return_stored=True, synchronizer=ZarrStyleThreadSync())
    assert aligned(stored.chunks, (10,))


def test_default_chunks_skip_an_empty_leading_dask_chunk_and_unknown_sizes_are_named():
    import pytest
    d = da.from_array(np.arange(10, dtype="i4"), chunks=((0, 4, 6),))
    z = to_chunkstore(d, cs.MemoryStore())
    assert z.chunks == (4,)
    np.testing.assert_array_equal(z[...], np.arange(10))
    unknown = d[d > 5]
    with pytest.raises(ValueError, match="unknown chunk sizes.*compute_chunk_sizes"):
        to_chunkstore(unknown, cs.MemoryStore())



@pytest.mark.parametrize("where", ["same", "other chunks", "group above"])
def test_overwriting_the_array_the_dask_array_reads_is_refused_before_anything_is_deleted(
        tmp_path, where):
    """to_chunkstore(from_chunkstore(p) + 1, p, overwrite=True) re-created p empty, then its
    tasks read the fill value: with the same layout it stored fill + 1 without a word; with
    another, StaleDaskArrayError, the data gone all the same (zarr-python + dask store
    fill + 1 too)."""
    root = str(tmp_path / "g.zarr")
    g = cs.open_group(root, mode="w")
    g.array("sub/a", np.arange(10, dtype="i4"), chunks=10)
    d = from_chunkstore(root, path="sub/a") + 1
    target, kw = {"same": ("sub/a", {}), "other chunks": ("sub/a", {"chunks": 5}),
                  "group above": ("sub", {})}[where]
    with pytest.raises(ValueError, match=r"cannot overwrite .*'/?sub/a'.*reads it"):
        to_chunkstore(d, root, path=target, overwrite=True, **kw)
    np.testing.assert_array_equal(cs.open_array(root, path="sub/a", mode="r")[:],
                                  np.arange(10))
    # another path of the same store: written, the source kept
    out = to_chunkstore(d, root, path="sub/b", overwrite=True)
    np.testing.assert_array_equal(out[:], np.arange(10) + 1)
    np.testing.assert_array_equal(cs.open_array(root, path="sub/a", mode="r")[:],
                                  np.arange(10))


def test_a_memory_store_under_the_processes_scheduler_is_refused_before_the_overwrite():
    """The refusal of a store whose copies share no data came from the tasks, after
    create(overwrite=True) had replaced what the store held."""
    import dask
    store = cs.MemoryStore()
    cs.array(np.arange(8), store=store, chunks=4)
    with dask.config.set(scheduler="processes"):
        with pytest.raises(RuntimeError, match="copy of the dask graph"):
            to_chunkstore(da.ones(8, chunks=4), store, overwrite=True)
    np.testing.assert_array_equal(cs.open_array(store, mode="r")[:], np.arange(8))
    with dask.config.set(scheduler="threads"):
        to_chunkstore(da.ones(8, chunks=4), store, overwrite=True)
    np.testing.assert_array_equal(cs.open_array(store, mode="r")[:], np.ones(8))
