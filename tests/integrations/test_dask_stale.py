"""from_chunkstore's dask arrays never read data that is not theirs: their names are never
reused (a name made of id()s was, once the handles were freed, and dask took one snapshot's
blocks for another's), and their tasks raise, naming the array, where it was shrunk or
re-created with another dtype or chunks after the graph was built (they read the new array
into the old graph's layout: a shape (10,) result for a (20,) graph, a sum of 0 for 5.0)."""

import gc

import dask.array as da
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ArrayMetadataChangedError, ArrayNotFoundError
from chunkstore.integrations.dask import StaleDaskArrayError, from_chunkstore


def test_a_persisted_snapshot_and_a_new_dask_array_of_one_handle_differ():
    """One handle, rewritten between two from_chunkstore calls: one name for both, and
    new - old (100 everywhere) read 0 (the persisted blocks stood for the new ones)."""
    z = cs.zeros((4,), chunks=(2,), dtype="i4", store=cs.MemoryStore())
    z[:] = 1
    old = from_chunkstore(z).persist()
    z[:] = 101
    new = from_chunkstore(z)
    assert new.name != old.name
    np.testing.assert_array_equal((new - old).compute(), np.full(4, 100))


def test_handles_at_reused_addresses_never_share_a_dask_name(tmp_path, monkeypatch):
    """Snapshots through handles opened one after another, each freed once persisted:
    CPython gives a later handle (and its store) the addresses of an earlier one, and the
    name made of those id()s made two snapshots one dask array (da.stack swapped them).
    Every address is reused here (id() answers one number), as it happens by chance."""
    import chunkstore.integrations.dask as module
    monkeypatch.setattr(module, "id", lambda obj: 1, raising=False)
    path = str(tmp_path / "a.zarr")
    cs.create_array(path, shape=(4,), chunks=(2,), dtype="i4", fill_value=0)
    snaps = []
    for k in range(5):
        h = cs.open_array(path, mode="r+")
        h[:] = k
        snaps.append(from_chunkstore(h).persist())
        del h
        gc.collect()
    assert len({s.name for s in snaps}) == len(snaps)
    got = da.stack(snaps).compute()[:, 0]
    np.testing.assert_array_equal(got, np.arange(len(snaps)))


def test_names_keep_the_chunking_apart_and_a_given_name_is_kept():
    z = cs.zeros((8,), chunks=(2,), dtype="i4", store=cs.MemoryStore())
    a, b = from_chunkstore(z), from_chunkstore(z, chunks=(4,))
    assert a.name != b.name and a.chunks != b.chunks
    assert from_chunkstore(z, name="mine").name == "mine"


def _setup(tmp_path):
    root = str(tmp_path / "r.zarr")
    g = cs.open_group(root, mode="w", zarr_format=3)
    x = g.create_array("x", shape=(20,), chunks=(4,), dtype="i4", fill_value=-1)
    x[:] = np.arange(20)
    return root, g, cs.open_array(root + "/x", mode="r+")


def _raises_naming_x(d, *, scheduler="threads"):
    with pytest.raises(ArrayMetadataChangedError, match=r"(?s)r\.zarr/x.*from_chunkstore"):
        d.compute(scheduler=scheduler)


def test_a_shrunk_array_raises_instead_of_filling_the_old_graph(tmp_path):
    """Another handle shrank the array to 10: d.compute() had shape (10,) for a (20,)
    graph, d[::-1][:3] was empty, d.sum() summed what was left."""
    root, _, a = _setup(tmp_path)
    d = from_chunkstore(a)
    cs.open_array(root + "/x", mode="r+").resize((10,))
    for expr in (d, d.sum(), d[::-1][:3], d[:4]):
        _raises_naming_x(expr)


def _recreate_as_f8(g):
    del g["x"]
    g.create_array("x", shape=(20,), chunks=(4,), dtype="f8", fill_value=0)[:] = 0.25


def test_an_array_recreated_with_another_dtype_raises(tmp_path):
    """Deleted and re-created as f8: the i4 graph read 0.25s and summed them to 0 as i4."""
    root, g, a = _setup(tmp_path)
    d = from_chunkstore(a)
    _recreate_as_f8(g)
    for expr in (d, d.sum(), d + da.ones(20, chunks=5, dtype="i4")):
        _raises_naming_x(expr)


def test_an_array_recreated_shorter_or_with_other_chunks_raises(tmp_path):
    root, g, a = _setup(tmp_path)
    d = from_chunkstore(a)
    g.create_array("x", shape=(10,), chunks=(4,), dtype="i4", overwrite=True)[:] = 7
    _raises_naming_x(d.sum())
    root, g, a = _setup(tmp_path)
    d = from_chunkstore(a)
    g.create_array("x", shape=(20,), chunks=(5,), dtype="i4", overwrite=True)[:] = 7
    _raises_naming_x(d)


def test_a_stale_graph_raises_under_the_processes_scheduler(tmp_path):
    """The workers unpickle the handle, which reads the metadata as it is now."""
    root, g, a = _setup(tmp_path)
    d = from_chunkstore(a)
    _recreate_as_f8(g)
    _raises_naming_x(d.sum(), scheduler="processes")


def test_a_grown_array_still_reads_the_graphs_region(tmp_path):
    """Appends and resizes that grow the array leave the graph's region as it was: it
    reads that region (the rows appended are not in the graph)."""
    root, _, a = _setup(tmp_path)
    d = from_chunkstore(a)
    cs.open_array(root + "/x", mode="r+").append(np.full(7, 5, dtype="i4"))
    np.testing.assert_array_equal(d.compute(), np.arange(20))
    assert int(d.sum().compute()) == sum(range(20))


def test_an_unchanged_array_reads_its_writes(tmp_path):
    """Writes are data, not a change of the graph's layout: the graph reads them."""
    root, _, a = _setup(tmp_path)
    d = from_chunkstore(a)
    cs.open_array(root + "/x", mode="r+")[:] = 3
    np.testing.assert_array_equal(d.compute(), np.full(20, 3))


def test_a_deleted_array_raises_not_found(tmp_path):
    root, g, a = _setup(tmp_path)
    d = from_chunkstore(a)
    del g["x"]
    with pytest.raises(ArrayNotFoundError, match="x"):
        d.compute()


def test_a_shrink_between_the_check_and_the_read_raises(tmp_path, monkeypatch):
    """The layout is checked before the read and the block read after it: a shrink by
    another thread in between clips the block, which raises too."""
    from chunkstore.engine.array import Array
    root, _, a = _setup(tmp_path)
    d = from_chunkstore(a)
    read = Array.__getitem__

    def shrink_then_read(self, key):
        monkeypatch.setattr(Array, "__getitem__", read)
        cs.open_array(root + "/x", mode="r+").resize((10,))
        return read(self, key)

    monkeypatch.setattr(Array, "__getitem__", shrink_then_read)
    with pytest.raises(ArrayMetadataChangedError, match=r"(?s)r\.zarr/x.*read as \(2,\)"):
        d[8:12].compute()


@pytest.mark.parametrize("scheduler", ["sync", "processes"])
def test_a_delayed_write_into_an_array_shrunk_since_says_so(tmp_path, scheduler):
    """to_chunkstore(compute=False), then the array shrunk, then compute: the write failed
    with "a selection of shape (0,) with a value of shape (10,)", which named the array but
    not the resize. It is now a StaleDaskArrayError naming both shapes; a grown array takes
    the write as before."""
    from chunkstore.dask import to_chunkstore
    p = str(tmp_path / "a.zarr")
    src = da.from_array(np.arange(1, 41, dtype="i4"), chunks=10)
    delayed = to_chunkstore(src, p, chunks=(10,), compute=False)
    cs.open_array(p, mode="r+").resize(25)
    with pytest.raises(StaleDaskArrayError, match=r"shape \(40,\) -> \(25,\).*build the write"):
        delayed.compute(scheduler=scheduler)
    q = str(tmp_path / "b.zarr")
    delayed = to_chunkstore(src, q, chunks=(10,), compute=False)
    cs.open_array(q, mode="r+").resize(50)
    delayed.compute(scheduler=scheduler)
    np.testing.assert_array_equal(cs.open_array(q, mode="r")[:40], np.arange(1, 41))


@pytest.mark.parametrize("scheduler", ["sync", "processes"])
@pytest.mark.parametrize("change", ["chunks", "dtype"])
def test_a_delayed_write_into_an_array_recreated_since_raises(tmp_path, scheduler, change):
    """to_chunkstore(compute=False), then the array re-created with other chunks (its
    blocks cut for the old grid: tasks sharing a new chunk on the processes scheduler lost
    each other's elements) or another dtype (1e6 stored wrapped into i2), then compute: it
    wrote without a word. Now a StaleDaskArrayError naming the change, nothing written."""
    from chunkstore.dask import to_chunkstore
    p = str(tmp_path / "a.zarr")
    src = da.from_array(np.arange(1, 41, dtype="i4"), chunks=10)
    delayed = to_chunkstore(src, p, chunks=(10,), compute=False)
    cs.open_array(p, mode="w", shape=(40,), chunks=(15,) if change == "chunks" else (10,),
                  dtype="i4" if change == "chunks" else "i2")
    with pytest.raises(StaleDaskArrayError, match=f"{change if change == 'dtype' else 'chunks'}"
                                                  r".*build the write again"):
        delayed.compute(scheduler=scheduler)
    assert not cs.open_array(p, mode="r")[...].any()


def test_a_delayed_write_into_a_memory_store_on_copies_says_why(tmp_path):
    """A compute=False write into a store whose copies do not share its data, computed on
    the processes scheduler: the tasks' copy of the array opened a store of its own, where
    the array was missing (ArrayNotFoundError), or did not pickle (obstore's MemoryStore).
    The tasks now raise the documented RuntimeError naming the array and the store."""
    from chunkstore.dask import to_chunkstore
    delayed = to_chunkstore(da.arange(40.0, chunks=10), "memory://dask-copies", path="c",
                            chunks=(10,), compute=False)
    with pytest.raises(RuntimeError, match=r"array 'c' of FSStore\('memory://dask-copies'\) "
                                           r"from a copy of the dask graph"):
        delayed.compute(scheduler="processes", num_workers=2)


@pytest.mark.parametrize("how", ["inline", "optimized", "optimized-rechunk"])
def test_an_overwrite_of_the_array_an_inlined_graph_reads_is_refused(tmp_path, how):
    """to_chunkstore(d, p, overwrite=True) where d reads the array at p with the array
    inside its tasks (from_array(inline_array=True), or a graph dask.optimize inlined):
    the check looked in from_array's own layers only, the array was replaced first and
    the tasks read the fill value (or raised StaleDaskArrayError, the data gone). Refused
    before anything is deleted, as for a plain graph."""
    import dask
    from chunkstore.dask import to_chunkstore
    p = str(tmp_path / "a.zarr")
    z = cs.open_array(p, mode="w", shape=(20,), chunks=(5,), dtype="i4")
    z[:] = np.arange(100, 120)
    if how == "inline":
        d = da.from_array(z, chunks=5, inline_array=True) + 1
    elif how == "optimized":
        d = dask.optimize(from_chunkstore(z) + 1)[0]
    else:
        d = dask.optimize((from_chunkstore(z) + 1).rechunk(7) * 1)[0]
    with pytest.raises(ValueError, match="cannot overwrite array '/'.*reads it"):
        to_chunkstore(d, p, overwrite=True)
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[...], np.arange(100, 120))
