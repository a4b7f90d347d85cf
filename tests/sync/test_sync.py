"""Synchronizers under real concurrency: processes and threads writing one array."""

import multiprocessing as mp
import os
import pickle
import threading

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage.base import getitems as _getitems
from faults import FaultyStore

CTX = mp.get_context("spawn")  # children start clean: pickling and re-import are exercised


# ----------------------------------------------------------------------------- workers
def _disjoint_points_worker(store_path, sync_path, wid, nworkers, barrier):
    z = cs.open_array(store_path, mode="r+",
                      synchronizer=cs.ProcessSynchronizer(sync_path) if sync_path else None)
    n = z.shape[0]
    mine = np.arange(wid, n * n, nworkers)  # element ids owned by this worker
    rng = np.random.default_rng(wid)
    rng.shuffle(mine)
    barrier.wait()
    for lo in range(0, len(mine), 3):  # a few points at a time, all over the array
        ids = mine[lo:lo + 3]
        z.vindex[ids // n, ids % n] = wid + 1


def _region_worker(store_path, sync_path, wid, barrier, rounds, region):
    z = cs.open_array(store_path, mode="r+", synchronizer=cs.ProcessSynchronizer(sync_path))
    for r in range(rounds):
        barrier.wait()
        z[region] = wid + 1 + 10 * r
        barrier.wait()


def _append_worker(store_path, sync_path, wid, nrows, barrier):
    z = cs.open_array(store_path, mode="r+", synchronizer=cs.ProcessSynchronizer(sync_path))
    barrier.wait()
    for i in range(nrows):
        z.append(np.array([[wid, i, wid * 1000 + i]], dtype="i4"))


def _alternate_elements_worker(store_path, sync_path, wid, how, barrier):
    """Write elements wid, wid + 2, ... of one chunk, one at a time, through a handle with a
    ProcessSynchronizer got the way `how` says."""
    ps = cs.ProcessSynchronizer(sync_path)
    if how == "view":
        z = cs.open_array(store_path, path="x", mode="r+").view(synchronizer=ps)
    elif how == "require_dataset":
        z = cs.open_group(store_path, mode="r+").require_dataset(
            "x", shape=(N_ALTERNATE,), dtype="i4", synchronizer=ps)
    else:
        z = cs.open_array(store_path, path="x", mode="r+", synchronizer=ps)
    barrier.wait()
    for i in range(wid, N_ALTERNATE, 2):
        z[i] = i + 1


N_ALTERNATE = 400


def _run(target, args_list):
    procs = [CTX.Process(target=target, args=a) for a in args_list]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]


# ----------------------------------------------------------------------------- processes
def test_interleaved_disjoint_point_writes_lose_nothing(tmp_path):
    n, nw = 24, 4
    store = str(tmp_path / "a.zarr")
    cs.zeros((n, n), chunks=(8, 8), dtype="i2", store=store)
    barrier = CTX.Barrier(nw)
    _run(_disjoint_points_worker,
         [(store, str(tmp_path / "locks"), w, nw, barrier) for w in range(nw)])
    got = cs.open_array(store, mode="r")[...]
    expected = (np.arange(n * n) % nw + 1).reshape(n, n)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("how", ["open_array", "view", "require_dataset"])
def test_every_handle_given_a_synchronizer_takes_its_locks(tmp_path, how):
    """Processes writing alternate elements of one chunk through handles given a
    ProcessSynchronizer lose nothing, however the handle was got: a view given one wrote
    under its array's in-process locks alone, and require_dataset of an existing array
    dropped it (each lost about a third of the elements)."""
    store = str(tmp_path / "g.zarr")
    cs.open_group(store, mode="w").zeros("x", shape=(N_ALTERNATE,), chunks=(N_ALTERNATE,),
                                         dtype="i4")
    barrier = CTX.Barrier(2)
    _run(_alternate_elements_worker,
         [(store, str(tmp_path / "locks"), w, how, barrier) for w in range(2)])
    got = cs.open_array(store, path="x", mode="r")[...]
    np.testing.assert_array_equal(got, np.arange(1, N_ALTERNATE + 1))


def test_require_dataset_of_an_existing_array_keeps_the_handle_options(tmp_path):
    g = cs.open_group(str(tmp_path / "g.zarr"), mode="w")
    ts = cs.ThreadSynchronizer()
    kw = dict(shape=(4,), chunks=(2,), dtype="i4", synchronizer=ts, cache_metadata=False,
              write_empty_chunks=True, missing_chunks="error")
    for _ in ("new", "existing"):
        a = g.require_dataset("x", **kw)
        o = a._handle.options
        assert a.synchronizer is ts and o.cache_metadata is False
        assert a.write_empty_chunks is True and o.missing_chunks == "error"
    assert g.require_array("x", **kw).synchronizer is ts


def test_overlapping_region_writes_leave_one_writers_value(tmp_path):
    store = str(tmp_path / "a.zarr")
    cs.zeros((60, 60), chunks=(7, 7), dtype="i4", store=store)
    region = (slice(3, 57), slice(5, 50))  # spans many chunks, partial at the edges
    nw, rounds = 4, 4
    barrier = CTX.Barrier(nw)
    _run(_region_worker, [(store, str(tmp_path / "locks"), w, barrier, rounds, region)
                          for w in range(nw)])
    z = cs.open_array(store, mode="r")
    values = np.unique(z[region])
    assert len(values) == 1, values
    assert values[0] in {w + 1 + 10 * (rounds - 1) for w in range(nw)}
    # Outside the region nothing was touched.
    outside = z[...].copy()
    outside[region] = 0
    assert not outside.any()


def test_parallel_append_every_row_exactly_once(tmp_path):
    store = str(tmp_path / "a.zarr")
    cs.zeros((0, 3), chunks=(4, 3), dtype="i4", store=store)
    nw, nrows = 3, 15
    barrier = CTX.Barrier(nw)
    _run(_append_worker, [(store, str(tmp_path / "locks"), w, nrows, barrier)
                          for w in range(nw)])
    rows = cs.open_array(store, mode="r")[...]
    assert rows.shape == (nw * nrows, 3)
    got = sorted(map(tuple, rows.tolist()))
    assert got == sorted((w, i, w * 1000 + i) for w in range(nw) for i in range(nrows))


# ----------------------------------------------------------------------------- threads
class _ReadBarrierStore(dict):
    """A dict store whose first chunk read by each writer waits until both have read.

    Without locks this forces the classic lost update: both writers read the old chunk,
    then both write their version. With a synchronizer, the second writer cannot read
    until the first has finished, so the barrier times out and is ignored.
    """

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.barrier = threading.Barrier(2, timeout=1.0)
        self.armed = False

    def getitems(self, keys):
        got = _getitems(dict(self), keys)
        if self.armed and any(not k.endswith((".zarray", ".zattrs", "zarr.json")) for k in keys):
            try:
                self.barrier.wait()
            except threading.BrokenBarrierError:
                pass
        return got


class _Alias(FaultyStore):
    """Another store object on the data of a store, with its batched reads (handles on it
    do not share the in-process locks of handles on the store)."""

    def getitems(self, keys):
        return self.inner.getitems(keys)


def _two_writers_same_chunk(sync, layout, handles=1):
    """Two threads write elements 0 and 1 of one chunk, through one handle or through one
    handle each (opened on one store object)."""
    store = _ReadBarrierStore()
    z = cs.zeros((4,), chunks=(4,), dtype="i4", store=store, synchronizer=sync,
                 **layout.format_kwargs((4,)))
    z[...] = 0
    zs = [z] + [cs.open_array(_Alias(store), mode="r+", synchronizer=sync)
                for _ in range(handles - 1)]
    store.armed = True
    cs.config.set(threads=1)
    try:
        ts = [threading.Thread(target=zs[i % handles].__setitem__, args=(i, i + 1))
              for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        cs.config.set(threads=None)
        store.armed = False
    return z[:2]


def test_control_without_synchronizer_updates_are_lost(layout):
    # Documented control: two handles without a synchronizer on two store objects of
    # one data without a location (so with in-process locks of their own, as handles in
    # two processes have), writing disjoint elements of one chunk, forced to interleave:
    # one update is lost, every time.
    got = _two_writers_same_chunk(None, layout, handles=2)
    assert got.tolist() in ([1, 0], [0, 2])


def test_one_handle_without_synchronizer_keeps_both_updates(layout):
    # Threads sharing a handle write under its in-process locks: the second writer's
    # read waits for the first's write (the barrier times out), nothing is lost.
    got = _two_writers_same_chunk(None, layout)
    np.testing.assert_array_equal(got, [1, 2])


def test_thread_synchronizer_keeps_both_updates(layout):
    got = _two_writers_same_chunk(cs.ThreadSynchronizer(), layout)
    np.testing.assert_array_equal(got, [1, 2])


def test_process_synchronizer_keeps_both_updates_between_threads(tmp_path, layout):
    got = _two_writers_same_chunk(cs.ProcessSynchronizer(str(tmp_path / "locks")), layout)
    np.testing.assert_array_equal(got, [1, 2])


def test_eight_threads_disjoint_points_and_overlapping_regions(layout):
    z = cs.zeros((40, 40), chunks=(6, 6), dtype="i4", store={},
                 synchronizer=cs.ThreadSynchronizer(), **layout.format_kwargs((6, 6)))
    n, nt = 40, 8

    def points(wid):
        ids = np.arange(wid, n * n, nt)
        for lo in range(0, len(ids), 5):
            part = ids[lo:lo + 5]
            z.vindex[part // n, part % n] = wid + 1

    ts = [threading.Thread(target=points, args=(w,)) for w in range(nt)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    np.testing.assert_array_equal(z[...], (np.arange(n * n) % nt + 1).reshape(n, n))

    region = (slice(2, 37), slice(1, 33))
    barrier = threading.Barrier(nt)

    def regions(wid):
        for r in range(5):
            barrier.wait()
            z[region] = 100 * r + wid

    ts = [threading.Thread(target=regions, args=(w,)) for w in range(nt)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert len(np.unique(z[region])) == 1


def test_eight_threads_append(layout):
    z = cs.zeros((0, 2), chunks=(3, 2), dtype="i4", store={},
                 synchronizer=cs.ThreadSynchronizer(), **layout.format_kwargs((3, 2)))

    def app(wid):
        for i in range(10):
            z.append(np.array([[wid, i]], dtype="i4"))

    ts = [threading.Thread(target=app, args=(w,)) for w in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert sorted(map(tuple, z[...].tolist())) == [(w, i) for w in range(8) for i in range(10)]


# ----------------------------------------------------------------------------- lock files
def test_lock_files_live_outside_the_store_and_are_reused(tmp_path):
    sync = cs.ProcessSynchronizer(str(tmp_path / "locks"))
    z = cs.zeros((20,), chunks=(5,), dtype="i4", store=str(tmp_path / "a.zarr"),
                 synchronizer=sync)
    z[:] = 1
    before = sorted(os.listdir(tmp_path / "locks"))
    z[:] = 2
    z[3:7] = 3
    assert sorted(os.listdir(tmp_path / "locks")) == before
    assert not [f for f in os.listdir(tmp_path / "a.zarr") if f.endswith(".lock")]
    sync.clear()
    assert not [f for f in os.listdir(tmp_path / "locks") if f.endswith(".lock")]


def test_store_path_as_lock_path_is_refused(tmp_path):
    store = str(tmp_path / "a.zarr")
    cs.zeros((4,), store=store)
    with pytest.raises(ValueError, match="inside the store"):
        cs.open_array(store, mode="r+", synchronizer=cs.ProcessSynchronizer(store))


def test_synchronizers_pickle(tmp_path):
    p = pickle.loads(pickle.dumps(cs.ProcessSynchronizer(str(tmp_path / "l"))))
    assert p.path == str(tmp_path / "l")
    t = pickle.loads(pickle.dumps(cs.ThreadSynchronizer()))
    with t["k"]:
        pass


def test_large_write_takes_array_lock_exclusively(tmp_path):
    # Beyond max_chunk_locks a write holds one array-wide lock instead of N chunk locks.
    sync = cs.ProcessSynchronizer(str(tmp_path / "locks"), max_chunk_locks=4)
    z = cs.zeros((100,), chunks=(5,), dtype="i4", store=str(tmp_path / "a.zarr"),
                 synchronizer=sync)
    z[:] = 7
    names = os.listdir(tmp_path / "locks")
    assert not [n for n in names if n[0].isdigit()]  # no per-chunk lock files
    np.testing.assert_array_equal(z[...], 7)


def test_concurrent_group_creation_both_succeed(tmp_path):
    store = str(tmp_path / "g.zarr")
    sync = cs.ProcessSynchronizer(str(tmp_path / "locks"))
    root = cs.group(store, synchronizer=sync)
    results, errors = [], []

    def make():
        try:
            results.append(root.require_group("a/b").path)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=make) for _ in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errors and results == ["a/b"] * 8
    assert cs.open_group(store, mode="r")["a/b"].path == "a/b"


def test_separate_process_synchronizer_instances_exclude_each_other(tmp_path):
    """dask and multiprocessing unpickle a synchronizer per task, so one process can hold
    several instances for the same lock directory; their locks must still exclude each
    other between threads (POSIX file locks alone do not: they belong to the process)."""
    store = _ReadBarrierStore()
    locks = str(tmp_path / "locks")
    z = cs.zeros((4,), chunks=(4,), dtype="i4", store=store)
    writers = [cs.Array(store, synchronizer=pickle.loads(pickle.dumps(
        cs.ProcessSynchronizer(locks)))) for _ in range(2)]
    store.armed = True
    cs.config.set(threads=1)
    try:
        ts = [threading.Thread(target=w.__setitem__, args=(i, i + 1))
              for i, w in enumerate(writers)]
        [t.start() for t in ts]
        [t.join() for t in ts]
    finally:
        cs.config.set(threads=None)
        store.armed = False
    np.testing.assert_array_equal(z[:2], [1, 2])


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_v3_resize_excludes_an_attribute_update_of_the_same_document(tmp_path, kind):
    # A v3 array's attributes live in its zarr.json, next to its shape: an attribute update
    # (read the document, change, write it back under the document's lock) running while a
    # resize rewrote the shape would put the old shape back. The resize must wait for it.
    sync = (cs.ThreadSynchronizer() if kind == "thread"
            else cs.ProcessSynchronizer(str(tmp_path / "locks")))
    z = cs.create_array(str(tmp_path / "a.zarr"), shape=(10,), chunks=(5,), dtype="i4",
                        synchronizer=sync)
    store = z.store
    done = threading.Event()
    with sync["zarr.json"]:             # an attribute update in progress ...
        doc = store["zarr.json"]        # ... has read the document
        t = threading.Thread(target=lambda: (z.resize(20), done.set()))
        t.start()
        done.wait(1.0)                  # (a resize not excluded is done by now)
        store["zarr.json"] = doc        # ... and writes it back (with its change)
    t.join(30)
    assert done.is_set()
    r = cs.open_array(str(tmp_path / "a.zarr"), mode="r")
    assert r.shape == (20,)


def _write_every_other(path, locks, parity, n, ready):
    z = cs.open_array(path, mode="r+", synchronizer=cs.ProcessSynchronizer(locks))
    ready.put(True)
    for i in range(parity, n, 2):
        z[i] = i + 1


def test_a_lock_directory_removed_and_made_again_still_excludes(tmp_path):
    """`rm -r` of a ProcessSynchronizer's directory while no writer runs (README: as clear()
    does): a process that had used it kept its region file open and locked the removed
    file, excluding nobody; its writes and another process's to one chunk lost about 120
    of 400 elements. A removed lock file is opened anew."""
    import gc
    import shutil
    n = 400
    path, locks = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    cs.create(shape=(n,), chunks=(n,), dtype="i4", fill_value=0, store=path)
    z = cs.open_array(path, mode="r+", synchronizer=cs.ProcessSynchronizer(locks))
    z[0] = 1  # (this process has used the lock files)
    del z
    gc.collect()
    shutil.rmtree(locks)
    ready = CTX.Queue()
    p = CTX.Process(target=_write_every_other, args=(path, locks, 1, n, ready))
    p.start()
    try:
        assert ready.get(timeout=60)
        _write_every_other(path, locks, 0, n, mp.Queue())
    finally:
        p.join(120)
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[...], np.arange(n) + 1)
