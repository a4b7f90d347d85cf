"""Writes without a synchronizer: the threads and asyncio tasks of one process that write
through one handle, its views, handles on one store object or on stores of one location
never lose each other's elements in a chunk (README "What is safe"); zarr-python loses them.
The control, two store objects on one dict's data whose handles do not share locks, is in
test_sync.py."""

from __future__ import annotations

import asyncio
import gc
import threading

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.sync.synchronizers import ThreadSynchronizer, handle_locks
from faults import gated_store, is_chunk, second_waits, second_write_waits

LAYOUTS = {"v2": dict(zarr_format=2), "v3": dict(zarr_format=3),
           "sharded": dict(zarr_format=3, shards=(64,))}


def _create(store, layout, n=64):
    return cs.create_array(store, shape=(n,), chunks=(16,), dtype="i4", fill_value=0,
                           **LAYOUTS[layout])


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_asyncio_tasks_writing_elements_of_one_chunk_lose_nothing(layout):
    # 64 concurrent single-element writes, 16 to each chunk (all in one shard when
    # sharded), through one AsyncArray; five rounds
    for round_ in range(5):
        a = _create(cs.MemoryStore(), layout)
        aa = cs.AsyncArray(a)

        async def main():
            await asyncio.gather(*[aa.setitem(slice(i, i + 1), np.array([i + 1], "i4"))
                                   for i in range(64)])

        asyncio.run(main())
        np.testing.assert_array_equal(a[:], np.arange(1, 65), err_msg=f"round {round_}")


def _hammer(writers, n, rounds=31):
    """Thread k of len(writers) writes elements k, k + len(writers), ... with writers[k],
    round after round (value round * 1000 + element; every other round the fill value 0, so
    that chunks, and shards, that become all fill are deleted and made again meanwhile):
    each element ends as the last round's value unless an update was lost."""
    start = threading.Barrier(len(writers))
    errors = []

    def work(k, z):
        try:
            start.wait()
            for r in range(rounds):
                for i in range(k, n, len(writers)):
                    z[i] = 0 if r % 2 else r * 1000 + i + 1
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k, z)) for k, z in enumerate(writers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert rounds % 2, "the last round writes values"
    return (rounds - 1) * 1000 + np.arange(n) + 1


@pytest.mark.parametrize("where", ["directory", "memory"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_threads_through_handles_opened_apart(tmp_path, layout, where):
    # each thread opens the array itself, as dask tasks and thread pools do: from a path
    # (its own DirectoryStore object of one directory), or from one MemoryStore object
    store = str(tmp_path / "a.zarr") if where == "directory" else cs.MemoryStore()
    _create(store, layout, n=32)
    writers = [cs.open_array(store, mode="r+") for _ in range(4)]
    want = _hammer(writers, 32)
    np.testing.assert_array_equal(cs.open_array(store, mode="r")[:], want)


@pytest.mark.parametrize("layout", ["v2", "sharded"])
def test_threads_through_an_array_and_its_views(layout):
    a = _create(cs.MemoryStore(), layout, n=32)
    writers = [a, a.view(), a, a.view()]
    want = _hammer(writers, 32)
    np.testing.assert_array_equal(a[:], want)


def test_handles_share_locks_by_store_location_and_array(tmp_path):
    d = str(tmp_path / "s")
    one = handle_locks(cs.DirectoryStore(d), "a")
    assert handle_locks(cs.DirectoryStore(d), "a") is one
    assert handle_locks(cs.DirectoryStore(d), "b") is not one
    assert handle_locks(cs.DirectoryStore(str(tmp_path / "t")), "a") is not one
    # stores without a location: one table per store object
    store = {}
    mine = handle_locks(store, "a")
    assert handle_locks(store, "a") is mine
    assert handle_locks({}, "a") is not mine
    m = cs.MemoryStore()
    assert handle_locks(m, "a") is handle_locks(m, "a")
    assert handle_locks(cs.MemoryStore(), "a") is not handle_locks(m, "a")
    assert isinstance(one, ThreadSynchronizer)


# chunk writes wait for the gate; under "x/" only and once armed
_GatedDirectoryStore = gated_store(cs.DirectoryStore, is_chunk, armed=True)
_GatedMemoryStore = gated_store(cs.MemoryStore, lambda k: k.startswith("x/") and is_chunk(k),
                                armed=False)


def test_stores_renaming_a_store_class_share_its_locations_locks(tmp_path):
    d = str(tmp_path / "s")
    one = handle_locks(cs.DirectoryStore(d), "a")
    for other in (cs.storage.LocalStore(d), cs.storage.NestedDirectoryStore(d),
                  _GatedDirectoryStore(d), cs.storage.FSStore("file://" + d),
                  cs.storage.FsspecStore.from_url(d)):
        assert handle_locks(other, "a") is one, type(other).__name__
    # a remote filesystem's store keeps its own kind: no directory of this machine
    assert handle_locks(cs.storage.FSStore("memory://" + d), "a") is not one
    assert handle_locks(cs.storage.LocalStore(str(tmp_path / "t")), "a") is not one
    (tmp_path / "link").symlink_to(d)  # one directory through a symbolic link
    assert handle_locks(cs.DirectoryStore(str(tmp_path / "link")), "a") is one


@pytest.mark.parametrize("kind", ["SQLiteStore", "LMDBStore", "ZipStore"])
def test_file_stores_through_a_symbolic_link_share_their_locations_locks(tmp_path, kind):
    """A database or archive opened through a symbolic link and through its path is one
    store: its handles share one table of in-process locks (the path as given made two, and
    writes of disjoint elements of one chunk through them could lose each other's)."""
    if kind == "LMDBStore":
        pytest.importorskip("lmdb")
    make = getattr(cs.storage, kind)
    path = str(tmp_path / ("s.zip" if kind == "ZipStore" else "s.db"))
    one = make(path, mode="a") if kind == "ZipStore" else make(path)
    try:
        locks = handle_locks(one, "a")
        (tmp_path / "link").symlink_to(path)
        other = make(str(tmp_path / "link"), mode="r") if kind == "ZipStore" else make(
            str(tmp_path / "link"))
        try:
            assert handle_locks(other, "a") is locks
        finally:
            other.close()
    finally:
        one.close()


@pytest.mark.parametrize("other", ["LocalStore", "symlink", "FSStore"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_handles_of_one_directory_opened_apart_lose_no_element(tmp_path, layout, other):
    """A handle opened on LocalStore(path) (zarr-python 3's name for a DirectoryStore), or on
    a symbolic link to the directory, and one opened on the path (a DirectoryStore of it, a
    subclass here) used to take two tables of in-process locks (the location key held the
    store's own class, and the path as given): a write of element 1 went through while a
    write of element 0 of the same chunk was between its read and its store, which then
    stored element 1's old value ([1, 0])."""
    path = str(tmp_path / "a.zarr")
    cs.create_array(path, shape=(16,), chunks=(8,), dtype="i4", fill_value=0,
                    **{**LAYOUTS[layout], **({"shards": (16,)} if layout == "sharded" else {})})
    held = _GatedDirectoryStore(path)
    a = cs.open_array(held, mode="r+")
    if other == "symlink":
        link = tmp_path / "link.zarr"
        link.symlink_to(path)
        b = cs.open_array(str(link), mode="r+")
    elif other == "FSStore":  # fsspec's file:// (was its own kind: FSStore)
        b = cs.open_array(cs.storage.FSStore("file://" + path), mode="r+")
    else:
        b = cs.open_array(cs.storage.LocalStore(path), mode="r+")
    assert second_write_waits(held, a, b), "the second write did not wait for the first's"
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[:2], [1, 2])


def test_locks_go_with_the_last_handle(tmp_path):
    from chunkstore.sync import synchronizers
    path = str(tmp_path / "a.zarr")
    _create(path, "v2")
    gc.collect()
    before = len(synchronizers._handle_locks)
    a = cs.open_array(path, mode="r+")
    b = cs.open_array(path, mode="r+")
    assert b._handle.options.locks is a._handle.options.locks
    assert len(synchronizers._handle_locks) == before + 1
    del a, b
    gc.collect()
    # nothing keeps the locks of arrays no handle is open on
    assert len(synchronizers._handle_locks) == before


def test_a_synchronizer_is_taken_under_the_in_process_locks(tmp_path):
    sync = cs.ThreadSynchronizer()
    a = _create(cs.MemoryStore(), "v3")
    b = cs.open_array(a.store, mode="r+", synchronizer=sync)
    locks = b._handle.options.locks
    assert locks.outer is sync and locks.inner is a._handle.options.locks
    assert b.synchronizer is sync
    # without one, the handle reports none (the in-process locks are not a synchronizer)
    assert a.synchronizer is None


def _sync(kind, tmp_path, n):
    if kind == "none":
        return None
    if kind == "thread":
        return cs.ThreadSynchronizer()
    return cs.ProcessSynchronizer(str(tmp_path / f"locks{n}"))


# pairs of synchronizers two handles of one array are opened with (each its own object)
_MIXED = [("none", "thread"), ("thread", "none"), ("thread", "thread"), ("none", "process"),
          ("process", "thread"), ("process", "process")]


@pytest.mark.parametrize("kinds", _MIXED, ids=["-".join(k) for k in _MIXED])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_handles_with_different_synchronizers_lose_no_element(tmp_path, layout, kinds):
    """Two handles of one array in one process, opened with different synchronizers (or
    one with and one without): a write of element 1 waits for a write of element 0 of the
    same chunk that is between its read and its store. Each handle used to lock only in its
    own synchronizer (or only in-process), so the second write went through and the first
    then stored element 1's old value ([1, 0]) (two ProcessSynchronizers of different
    directories shared nothing at all)."""
    path = str(tmp_path / "a.zarr")
    _create(path, layout, n=16)
    held = _GatedDirectoryStore(path)
    a = cs.open_array(held, mode="r+", synchronizer=_sync(kinds[0], tmp_path, 0))
    b = cs.open_array(path, mode="r+", synchronizer=_sync(kinds[1], tmp_path, 1))
    assert second_write_waits(held, a, b), "the second write did not wait for the first's"
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[:2], [1, 2])


@pytest.mark.parametrize("kinds", _MIXED, ids=["-".join(k) for k in _MIXED])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_group_attribute_updates_with_different_synchronizers_lose_no_key(
        tmp_path, zarr_format, kinds):
    """Attribute updates of one group through handles opened with different synchronizers
    (a read-modify-write of its document each) take turns: neither loses the other's key."""
    path = str(tmp_path / "g.zarr")
    cs.open_group(path, mode="w", zarr_format=zarr_format)
    doc = ".zattrs" if zarr_format == 2 else "zarr.json"
    store = gated_store(cs.DirectoryStore, lambda k: k == doc, armed=True)(path)
    g1 = cs.open_group(store, mode="r+", synchronizer=_sync(kinds[0], tmp_path, 0))
    g2 = cs.open_group(path, mode="r+", synchronizer=_sync(kinds[1], tmp_path, 1))
    assert second_waits(store, lambda: g1.attrs.__setitem__("one", 1),
                        lambda: g2.attrs.__setitem__("two", 2)), "the update did not wait"
    assert dict(cs.open_group(path, mode="r").attrs) == {"one": 1, "two": 2}


# --------------------------------------------- metadata changes next to writes, in-process
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_thread_appends_race_writers_with_stale_shapes(tmp_path, layout):
    # One thread appends rows (its own handle) while two write the first rows through
    # handles opened before (cached shape (6, 24), which the appends make stale), all on
    # one directory, no synchronizer. The edge chunk (rows 4..8) is partial past row 6 in
    # the stale shape: written "whole" by it, it would clear rows appended meanwhile. Under
    # the in-process locks a stale write sees the metadata changed and plans again.
    path = str(tmp_path / "a.zarr")
    kw = dict(LAYOUTS[layout])
    if "shards" in kw:
        kw["shards"] = (8, 24)
    cs.create_array(path, shape=(6, 24), chunks=(4, 12), dtype="i4", fill_value=-1, **kw)
    appender = cs.open_array(path, mode="r+")
    writers = [cs.open_array(path, mode="r+") for _ in range(2)]
    appends, rows = 12, 2
    stop = threading.Event()
    last = [0, 0]
    errors = []

    def append():
        try:
            for k in range(appends):
                start = 6 + k * rows
                block = np.arange(start, start + rows, dtype="i4")[:, None] + 10_000
                appender.append(np.broadcast_to(block, (rows, 24)).copy())
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        finally:
            stop.set()

    def write(w):
        try:
            tag = 0
            while tag < 3 or not stop.is_set():
                tag += 1
                writers[w][0:6, w * 12:(w + 1) * 12] = (w + 1) * 100 + tag
            last[w] = tag
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=append)] + [threading.Thread(target=write, args=(w,))
                                              for w in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    n = 6 + appends * rows
    want = np.empty((n, 24), dtype="i4")
    want[:6, :12] = 100 + last[0]
    want[:6, 12:] = 200 + last[1]
    want[6:] = np.arange(6, n, dtype="i4")[:, None] + 10_000
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[...], want)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_stale_handle_writes_by_the_shape_another_handle_left(tmp_path, layout):
    # handle b shrinks the array; handle a (cached shape) then writes where the old shape
    # reached: planned again with the new shape, the write does what NumPy does on it (a
    # slice past the end selects nothing, an index past it is refused) instead of storing
    # chunks past the end that a later grow would show
    path = str(tmp_path / "a.zarr")
    _create(path, layout, n=64)
    a = cs.open_array(path, mode="r+")
    b = cs.open_array(path, mode="r+")
    b.resize((20,))
    a[40:50] = 7
    with pytest.raises(IndexError):
        a[45] = 7
    a[10:20] = 5            # what fits is written
    assert a.shape == (20,)
    b.resize((64,))
    want = np.zeros(64, "i4")
    want[10:20] = 5
    np.testing.assert_array_equal(b[:], want)
    # a fill value set through one handle is what the next write of the other pads a new
    # chunk with (a stale engine would pad it with the old fill value 0)
    a = cs.open_array(path, mode="r+")
    b.fill_value = 9
    a[40] = 1               # (chunk 32..48 is not stored)
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[32:48],
                                  [9] * 8 + [1] + [9] * 7)


@pytest.mark.parametrize("handles", [1, 2])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_attribute_updates_race_appends(tmp_path, zarr_format, handles):
    # Zarr v3 keeps the attributes in zarr.json with the shape: an attribute update that
    # read the document before an append and wrote it after put the old shape back, and the
    # rows appended in between were gone (about a third of them, no synchronizer).
    path = str(tmp_path / "a.zarr")
    cs.create_array(path, shape=(0, 4), chunks=(8, 4), dtype="i4", fill_value=-1,
                    zarr_format=zarr_format)
    a = cs.open_array(path, mode="r+")
    b = a if handles == 1 else cs.open_array(path, mode="r+")
    rows = 60
    stop = threading.Event()
    errors = []

    def append():
        try:
            for k in range(rows):
                a.append(np.full((1, 4), k, "i4"))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        finally:
            stop.set()

    def annotate():
        try:
            i = 0
            while not stop.is_set() or i < 3:
                b.attrs["n"] = i
                i += 1
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=append), threading.Thread(target=annotate)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    got = cs.open_array(path, mode="r")
    np.testing.assert_array_equal(got[...], np.repeat(np.arange(rows, dtype="i4"), 4
                                                      ).reshape(rows, 4))
    assert isinstance(got.attrs["n"], int)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_asyncio_appends_attribute_updates_and_writes_through_one_async_array(layout):
    # one AsyncArray, one gather: appends of rows, writes of elements of the first rows
    # (in the chunk the appends extend), attribute updates; all land
    kw = dict(LAYOUTS[layout])
    if "shards" in kw:
        kw["shards"] = (16, 4)
    a = cs.create_array(cs.MemoryStore(), shape=(6, 4), chunks=(8, 4), dtype="i4",
                        fill_value=-1, **kw)
    aa = cs.AsyncArray(a)

    async def main():
        ops = [aa.append(np.full((1, 4), 100 + k, "i4")) for k in range(20)]
        ops += [aa.setitem((slice(r, r + 1), slice(c, c + 1)), np.array([[r * 4 + c]], "i4"))
                for r in range(6) for c in range(4)]
        ops += [aa.update_attributes({f"k{i}": i}) for i in range(10)]
        await asyncio.gather(*ops)

    asyncio.run(main())
    got = a[...]
    assert got.shape == (26, 4)
    np.testing.assert_array_equal(got[:6], np.arange(24, dtype="i4").reshape(6, 4))
    # the appends' order is the tasks' order of taking the array's lock: each row whole
    rows = got[6:, 0]
    assert sorted(rows.tolist()) == list(range(100, 120))
    assert (got[6:] == rows[:, None]).all()
    assert dict(a.attrs) == {f"k{i}": i for i in range(10)}


@pytest.mark.parametrize("same_synchronizer", [False, True])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_recreating_an_array_waits_for_a_synchronized_write(zarr_format, same_synchronizer):
    """Re-creating an array (overwrite=True) through the hierarchy while a handle opened
    with a ThreadSynchronizer is writing it: the re-creation waits for the write, which
    then cannot store chunks of the old layout into the new array. It used to hold only the
    in-process locks of handles without a synchronizer: the synchronized write, past its
    metadata check, stored an int32 chunk of 8 into the new float64 array of chunks of 16
    (ChunkDecodeError on every read of it; same-sized chunks read as garbage values)."""
    store = _GatedMemoryStore()
    sync = cs.ThreadSynchronizer()
    g = cs.open_group(store, mode="w", zarr_format=zarr_format)
    g.create_array("x", shape=(16,), chunks=(8,), dtype="i4", fill_value=0)
    w = cs.open_array(store, path="x", mode="r+", synchronizer=sync)
    creator = cs.open_group(store, mode="r+", synchronizer=sync if same_synchronizer else None)
    store.armed = True
    writer = threading.Thread(target=w.__setitem__, args=(slice(0, 8), 7))
    writer.start()
    done = threading.Event()

    def recreate():
        creator.create_array("x", shape=(16,), chunks=(16,), dtype="f8", fill_value=-1.0,
                             overwrite=True)
        done.set()

    try:
        assert store.entered.wait(10)
        remaker = threading.Thread(target=recreate)
        remaker.start()
        assert not done.wait(0.2), "the re-creation did not wait for the write in flight"
    finally:
        store.gate.set()
        writer.join(30)
    remaker.join(30)
    assert done.is_set()
    new = cs.open_array(store, path="x", mode="r")
    np.testing.assert_array_equal(new[...], np.full(16, -1.0))
    w[8:] = 5  # the old handle writes by the new array's metadata
    np.testing.assert_array_equal(new[...], [-1.0] * 8 + [5.0] * 8)


@pytest.mark.parametrize("kind", ["thread", "process"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_synchronized_handle_reads_what_another_handle_of_the_process_changed(
        tmp_path, layout, kind):
    """A handle opened with a synchronizer (metadata cached) reads by the metadata another
    handle of the process left: an append, then the array re-created with another dtype and
    chunks. It used to keep the metadata it opened with until reopened: the old shape, then
    the new array's chunks decoded as the old dtype (garbage, no error)."""
    path = str(tmp_path / "a.zarr")
    _create(path, layout, n=16)[:] = np.arange(16)
    a = cs.open_array(path, mode="r+", synchronizer=_sync(kind, tmp_path, 0))
    np.testing.assert_array_equal(a[:], np.arange(16))
    b = cs.open_array(path, mode="r+")
    b.append(np.arange(16, 20))
    np.testing.assert_array_equal(a[:], np.arange(20))
    fresh = cs.create_array(path, shape=(8,), chunks=(4,), dtype="f8", fill_value=0.5,
                            overwrite=True, **{k: v for k, v in LAYOUTS[layout].items()
                                               if k != "shards"})
    fresh[:3] = [1.5, 2.5, 3.5]
    got = a[:]
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [1.5, 2.5, 3.5] + [0.5] * 5)


@pytest.mark.parametrize("opened", ["array path", "group member", "parent store"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_handles_opened_through_nested_roots_lose_no_element(tmp_path, layout, opened):
    """One array opened from the store of its root directory with its path ("sub/arr") and
    from the store of its own directory (or of its parent) with the rest: one node, so one
    table of in-process locks. Keyed by the store's directory and the path as given, they
    took two, and a write of element 1 through one went through while a write of element 0
    of the same chunk through the other was between its read and its store ([1, 0])."""
    root = str(tmp_path / "root.zarr")
    cs.open_group(root, mode="w")
    cs.create_array(root, name="sub/arr", shape=(16,), chunks=(8,), dtype="i4",
                    fill_value=0,
                    **{**LAYOUTS[layout], **({"shards": (16,)} if layout == "sharded" else {})})
    held = _GatedDirectoryStore(root)
    a = cs.open_array(held, path="sub/arr", mode="r+")
    if opened == "array path":
        b = cs.open_array(str(tmp_path / "root.zarr" / "sub" / "arr"), mode="r+")
    elif opened == "group member":
        b = cs.open_group(str(tmp_path / "root.zarr" / "sub"), mode="r+")["arr"]
    else:
        b = cs.open_array(cs.DirectoryStore(str(tmp_path / "root.zarr" / "sub")), path="arr",
                          mode="r+")
    assert second_write_waits(held, a, b), "the second write did not wait for the first's"
    np.testing.assert_array_equal(cs.open_array(root, path="sub/arr", mode="r")[:2], [1, 2])


def test_threads_through_nested_roots_lose_nothing(tmp_path):
    root = str(tmp_path / "root.zarr")
    cs.open_group(root, mode="w")
    cs.create_array(root, name="sub/arr", shape=(32,), chunks=(16,), dtype="i4", fill_value=0)
    writers = [cs.open_array(root, path="sub/arr", mode="r+"),
               cs.open_array(str(tmp_path / "root.zarr" / "sub" / "arr"), mode="r+"),
               cs.open_group(str(tmp_path / "root.zarr" / "sub"), mode="r+")["arr"],
               cs.open_group(root, mode="r+")["sub/arr"]]
    want = _hammer(writers, 32)
    np.testing.assert_array_equal(cs.open_array(root, path="sub/arr", mode="r")[:], want)


def test_nodes_share_locks_through_stores_of_nested_locations(tmp_path):
    """handle_locks is keyed by the node wherever its store's root is: a directory's store
    and a path below it, a store of the node's own directory (a DirectoryStore, obstore's
    LocalStore, fsspec's file://), fsspec's memory:// prefixes one inside the other; not
    by a sibling, nor by a node of another directory of the same name."""
    obstore = pytest.importorskip("obstore")
    import uuid
    root = tmp_path / "root.zarr"
    (root / "sub" / "arr").mkdir(parents=True)
    one = handle_locks(cs.DirectoryStore(str(root)), "sub/arr")
    assert handle_locks(cs.DirectoryStore(str(root / "sub")), "arr") is one
    assert handle_locks(cs.DirectoryStore(str(root / "sub" / "arr")), "") is one
    assert handle_locks(cs.storage.FSStore("file://" + str(root / "sub")), "/arr/") is one
    assert handle_locks(cs.storage.ObjectStore(obstore.store.LocalStore(str(root / "sub"))),
                        "arr") is one
    assert handle_locks(cs.DirectoryStore(str(root)), "sub/arr2") is not one
    assert handle_locks(cs.DirectoryStore(str(root)), "sub") is not one
    assert handle_locks(cs.DirectoryStore(str(tmp_path / "other" / "sub")), "arr") is not one
    url = f"memory://nest-{uuid.uuid4().hex}"
    mem = handle_locks(cs.storage.FSStore(url), "a/b")
    assert handle_locks(cs.storage.FSStore(url + "/a"), "b") is mem
    assert handle_locks(cs.storage.FSStore(url + "/a/b"), "") is mem
    assert handle_locks(cs.storage.FSStore(url + "/a"), "c") is not mem


def test_deleting_a_group_waits_for_writes_through_a_store_of_a_directory_below(tmp_path):
    """Deleting sub from the root's store holds the locks of the array below it opened from
    the store of the array's own directory: its handle, writing next, finds the array gone
    instead of writing its chunks as orphans that a later array at that path would show."""
    root = str(tmp_path / "root.zarr")
    g = cs.open_group(root, mode="w")
    cs.create_array(root, name="sub/arr", shape=(8,), chunks=(4,), dtype="i4", fill_value=0)
    a = cs.open_array(str(tmp_path / "root.zarr" / "sub" / "arr"), mode="r+")
    a[:] = 1
    del g["sub"]
    with pytest.raises(cs.errors.ArrayNotFoundError):
        a[0:2] = 5
    assert not (tmp_path / "root.zarr" / "sub").exists()  # (no orphan chunk written)
    again = cs.create_array(root, name="sub/arr", shape=(8,), chunks=(4,), dtype="i4",
                            fill_value=0)
    np.testing.assert_array_equal(again[:], np.zeros(8, "i4"))


def test_gcs_and_azure_stores_share_locks_by_bucket_not_credentials():
    """obstore's GCS and Azure stores of one bucket (container) and prefix, made with other
    credentials or client options, reach the same objects: their handles share one table of
    in-process locks (keyed by the whole configuration, they took two), and so do stores of
    prefixes one inside the other; another bucket does not."""
    store = pytest.importorskip("obstore.store")
    from chunkstore.storage import ObjectStore

    def gcs(bucket="b", prefix="p", **kw):
        return ObjectStore(store.GCSStore(bucket, prefix=prefix, **kw))

    one = handle_locks(gcs(skip_signature=True), "g/a")
    assert handle_locks(gcs(bearer_token="t"), "g/a") is one
    assert handle_locks(gcs(prefix="p/g", skip_signature=True), "a") is one
    assert handle_locks(gcs(bucket="c", skip_signature=True), "g/a") is not one

    def azure(container="c", prefix="p", **kw):
        return ObjectStore(store.AzureStore(container, prefix=prefix, account_name="acct",
                                            **kw))

    two = handle_locks(azure(skip_signature=True), "a")
    assert handle_locks(azure(sas_key="k=v"), "a") is two
    assert handle_locks(azure(prefix="", skip_signature=True), "p/a") is two
    assert handle_locks(azure(container="d", skip_signature=True), "a") is not two


def test_s3_stores_of_one_endpoint_spelled_two_ways_share_locks():
    """An S3 endpoint reached as localhost and as 127.0.0.1 (or with its default port, or
    in other letter case) is one place: handles through the two spellings took two tables
    and lost 11-17 of 32-64 elements written to one chunk by 6 threads. AWS's own
    endpoints are AWS (None: bucket names are global there)."""
    pytest.importorskip("obstore")
    from chunkstore.storage import ObjectStore

    def s3(endpoint, prefix="p"):
        options = {"anon": True, "region_name": "us-east-1"}
        if endpoint is not None:
            options["endpoint_url"] = endpoint
        return ObjectStore.from_url(f"s3://bkt/{prefix}", storage_options=options)

    one = handle_locks(s3("http://127.0.0.1:9000"), "a")
    assert handle_locks(s3("http://localhost:9000/"), "a") is one
    assert handle_locks(s3("HTTP://LocalHost:9000"), "a") is one
    assert handle_locks(s3("http://127.0.0.1:9001"), "a") is not one
    aws = handle_locks(s3("https://s3.us-east-1.amazonaws.com"), "a")
    assert handle_locks(s3(None), "a") is aws
    assert handle_locks(s3("https://minio.example.com:443"), "a") is \
        handle_locks(s3("https://minio.example.com"), "a")


@pytest.mark.parametrize("fmt", [2, 3])
def test_group_attribute_updates_through_nested_roots_take_one_lock(tmp_path, fmt):
    """A group's attributes updated through the root's store (path sub) and through the
    store of its own directory: one document, so one lock (keyed by the key as each store
    names it, sub/.zattrs and .zattrs, two threads' updates each read the document before
    the other wrote it, and one's keys were lost)."""
    root = str(tmp_path / "root.zarr")
    cs.open_group(root, mode="w", zarr_format=fmt).create_group("sub")
    a = cs.open_group(root, mode="r+")["sub"]
    b = cs.open_group(str(tmp_path / "root.zarr" / "sub"), mode="r+")
    doc = ".zattrs" if fmt == 2 else "zarr.json"
    la, lb = a._attrs_locks, b._attrs_locks  # (held: a table lives while it is used)
    assert la is lb and la["sub/" + doc] is lb[doc]
    start = threading.Barrier(2)

    def update(g, k):
        start.wait()
        for i in range(20):
            g.attrs[f"{k}{i}"] = i

    ts = [threading.Thread(target=update, args=(g, k)) for g, k in ((a, "a"), (b, "b"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    got = dict(cs.open_group(root, mode="r")["sub"].attrs)
    assert got == {f"{k}{i}": i for k in "ab" for i in range(20)}


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("kind", ["group", "array"])
@pytest.mark.parametrize("change", ["delete", "move"])
def test_an_attribute_update_and_a_delete_or_move_of_its_node_are_one_step_each(
        tmp_path, monkeypatch, fmt, kind, change):
    """An attribute update checks that its node is still there, then writes the document: a
    delete or move of the node between the two made the update write it back (a v3 node
    came back; a v2 .zattrs was left for the next node at the path). The update now holds
    the node's guard, which the delete or move waits for: the node ends up gone (the
    update landed before it) and nothing is left at its path."""
    from chunkstore.hierarchy import attrs as attrs_mod

    path = str(tmp_path / "h.zarr")
    g = cs.open_group(path, mode="w", zarr_format=fmt)
    if kind == "group":
        g.create_group("a")
    else:
        g.create_array("a", shape=(4,), chunks=(2,), dtype="i4")
    node = cs.open_group(path, mode="r+")["a"]
    checked, real = threading.Event(), attrs_mod.Attributes._node_document

    def slow_check(self, *args):
        doc = real(self, *args)
        checked.set()
        threading.Event().wait(0.3)  # the window a delete fell into
        return doc

    monkeypatch.setattr(attrs_mod.Attributes, "_node_document", slow_check)
    errors = []

    def update():
        try:
            node.attrs["k"] = 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=update)
    t.start()
    assert checked.wait(10)
    if change == "delete":
        del g["a"]
    else:
        g.move("a", "b")
    t.join()
    assert not errors
    assert "a" not in cs.open_group(path, mode="r")
    assert not (tmp_path / "h.zarr" / "a").exists() or not any(
        (tmp_path / "h.zarr" / "a").rglob("*"))
    if change == "move":
        assert cs.open_group(path, mode="r")["b"].attrs.asdict() == {"k": 1}


def _slow_attribute_update(path, sync_dir, checked, member="a"):
    """(a forked child) Update the attributes of node member (default a) through a
    ProcessSynchronizer, pausing between the check that the node is there and the write."""
    import time

    from chunkstore.hierarchy import attrs as attrs_mod
    real = attrs_mod.Attributes._node_document

    def slow(self, *args):
        doc = real(self, *args)
        checked.set()
        time.sleep(0.5)
        return doc

    attrs_mod.Attributes._node_document = slow
    g = cs.open_group(path, mode="r+", synchronizer=cs.ProcessSynchronizer(sync_dir))
    try:
        g[member].attrs["k"] = 1
    except Exception:  # noqa: BLE001 - the node may be gone: refused, as it should be
        pass


def test_an_overwrite_with_a_synchronizer_waits_for_another_process_attribute_update(
        tmp_path):
    """create(..., overwrite=True, synchronizer=S) holds S's lock space of the node while it
    removes the old one, as a delete does: another process's attribute update between its
    check and its write wrote the old array's zarr.json back over the new array."""
    import multiprocessing as mp
    path, sync_dir = str(tmp_path / "h.zarr"), str(tmp_path / "locks")
    g = cs.open_group(path, mode="w", zarr_format=3)
    g.create_array("a", shape=(8,), chunks=(2,), dtype="i4")
    ctx = mp.get_context("fork")
    checked = ctx.Event()
    child = ctx.Process(target=_slow_attribute_update, args=(path, sync_dir, checked))
    child.start()
    assert checked.wait(20)
    cs.create(shape=(4,), chunks=(2,), dtype="f8", store=path, path="a", overwrite=True,
              zarr_format=3, synchronizer=cs.ProcessSynchronizer(sync_dir))
    child.join(20)
    a = cs.open_array(path, path="a", mode="r")
    assert a.shape == (4,) and a.dtype == np.dtype("f8")
    assert a.attrs.asdict() == {}


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("change", ["delete", "move"])
def test_a_group_delete_or_move_with_a_synchronizer_waits_for_a_members_attribute_update(
        tmp_path, fmt, change):
    """An attribute update of member g/a through synchronizer S holds S's guards of the
    groups above it (the root's, g's) and a delete or move of g holds g's whole space: an
    update in another process, between its check and its write, wrote g/a's document back
    after the delete (v3: the deleted array came back with its chunks gone, reading fill
    values; v2: a .zattrs left for the next node there)."""
    import multiprocessing as mp
    path, sync_dir = str(tmp_path / "h.zarr"), str(tmp_path / "locks")
    root = cs.open_group(path, mode="w", zarr_format=fmt)
    root.create_group("g").zeros("a", shape=(8,), chunks=(2,), dtype="i4")
    root["g/a"][:] = 5
    ctx = mp.get_context("fork")
    checked = ctx.Event()
    child = ctx.Process(target=_slow_attribute_update, args=(path, sync_dir, checked, "g/a"))
    child.start()
    assert checked.wait(20)
    g = cs.open_group(path, mode="r+", synchronizer=cs.ProcessSynchronizer(sync_dir))
    if change == "delete":
        del g["g"]
    else:
        g.move("g", "h")
    child.join(20)
    left = sorted(str(p.relative_to(path)) for p in (tmp_path / "h.zarr").rglob("*")
                  if p.is_file())
    assert not [k for k in left if k.startswith("g/") or k == "g"], left
    root = cs.open_group(path, mode="r")
    assert "g" not in root
    if change == "move":
        a = root["h/a"]
        assert a.attrs.asdict() == {"k": 1}  # (the update ended before the move)
        np.testing.assert_array_equal(a[:], 5)


def _delete_in_thread(group, name):
    import threading
    t = threading.Thread(target=group.__delitem__, args=(name,), daemon=True)
    t.start()
    t.join(20)
    return not t.is_alive()


@pytest.mark.parametrize("target", ["g/a", "g"])
def test_a_delete_through_another_synchronizer_object_of_the_lock_directory(tmp_path, target):
    """Handles of g/a opened with two ProcessSynchronizer objects of one lock directory, a
    delete with a third: each lock space is held once (one lock per region file in the
    process, not re-entrant): the delete waited for itself."""
    store = cs.DirectoryStore(str(tmp_path / "data"))
    locks = str(tmp_path / "locks")
    root = cs.open_group(store, mode="w")
    root.create_group("g").zeros("a", shape=(4,), chunks=(2,), dtype="i4")
    handles = [cs.open_array(store, path="g/a", mode="r+",
                             synchronizer=cs.ProcessSynchronizer(locks)) for _ in range(2)]
    handles[0][:] = 1
    r = cs.open_group(store, mode="a", synchronizer=cs.ProcessSynchronizer(locks))
    assert _delete_in_thread(r, target)
    assert target not in r


def test_deleting_a_big_group_with_a_synchronizer_opens_no_file_per_member(tmp_path):
    """The delete holds the lock space of every member (another process's writes of one
    must end first: they were lost by a move), but keeps none of their files open: one
    kept open per member made a group of 1,000 members undeletable at the usual limit of
    open files. (Each member's lock file is made, as a write of it through the
    synchronizer would make it.)"""
    import os
    store = cs.DirectoryStore(str(tmp_path / "data"))
    g = cs.open_group(store, mode="w").create_group("g")
    for i in range(60):
        g.zeros(f"a{i}", shape=(2,), chunks=(2,), dtype="i1")
    r = cs.open_group(store, mode="a", synchronizer=cs.ProcessSynchronizer(str(tmp_path / "l")))
    before = len(os.listdir("/proc/self/fd"))
    del r["g"]
    assert len(os.listdir("/proc/self/fd")) - before < 5
    assert "g" not in r


def _stale_synchronized_handle(tmp_path, rows):
    """A synchronized handle of a (23, 4) array whose shape another process (zarr-python
    here: no in-process count sees it) then changes to rows: its next write finds that under
    its locks and is planned again."""
    import zarr
    path = str(tmp_path / "a.zarr")
    cs.create(shape=(23, 4), chunks=(4, 4), dtype="i4", store=path, zarr_format=2,
              fill_value=0)
    h = cs.open_array(path, mode="r+",
                      synchronizer=cs.ProcessSynchronizer(str(tmp_path / "locks")))
    other = zarr.open_array(path, mode="r+")
    if rows > 23:
        other.append(np.full((rows - 23, 4), 9, "i4"))
    else:
        other.resize((rows, 4))
    return h, path


@pytest.mark.parametrize("write, rows_written", [
    (lambda h: h.__setitem__(-1, 1), [22]),
    (lambda h: h.__setitem__(Ellipsis, 1), list(range(23))),
    (lambda h: h.__setitem__(slice(None), np.ones((23, 4), "i4")), list(range(23))),
    (lambda h: h.oindex.__setitem__(([-1, 0], slice(None)), 1), [0, 22]),
    (lambda h: h.vindex.__setitem__(([-1], [-1]), 1), [22]),
    (lambda h: h.blocks.__setitem__(-1, 1), [20, 21, 22]),
    (lambda h: h.vindex.__setitem__(np.eye(23, 4, dtype=bool), 1), [0, 1, 2, 3]),
])
def test_a_stale_handles_write_selects_by_the_shape_it_knows(tmp_path, write, rows_written):
    """Another process appended 7 rows: a synchronized write through a handle that still
    knows 23 was planned again against the new shape, so h[-1] overwrote the appended row
    29 and h[...] all seven, while h[25] was refused against the old one. The selection is
    now resolved by the shape the handle knows (README: "its selection is still checked
    against the shape it knows")."""
    h, path = _stale_synchronized_handle(tmp_path, 30)
    write(h)
    got = cs.open_array(path, mode="r")[...]
    assert (got[23:] == 9).all(), got[23:]
    written = [r for r in range(23) if (got[r] != 0).any()]
    assert written == rows_written


@pytest.mark.parametrize("write", [
    lambda h: h.__setitem__(Ellipsis, 1),
    lambda h: h.__setitem__(slice(5, None), 1),
    lambda h: h.__setitem__(-1, 1),
    lambda h: h.blocks.__setitem__(2, 1),
    lambda h: h.vindex.__setitem__(np.ones((23, 4), bool), 1),
])
def test_a_stale_handles_write_past_a_shrunk_end_raises_and_writes_nothing(tmp_path, write):
    """Another process shrank the array to 10 rows: a write of rows the handle knows past
    the new end raises an IndexError and writes nothing; a slice was cut to the new end
    and the rest of the write dropped without a word."""
    h, path = _stale_synchronized_handle(tmp_path, 10)
    with pytest.raises(IndexError):
        write(h)
    assert (cs.open_array(path, mode="r")[...] == 0).all()


@pytest.mark.parametrize("write", [
    lambda h: h.__setitem__(slice(20, 30), 1),
    lambda h: h.__setitem__((slice(23, None), slice(None)), 1),
    lambda h: h.oindex.__setitem__((slice(0, 30, 2), slice(None)), 1),
])
def test_a_stale_handles_slice_past_the_end_it_knows_raises_after_an_append(tmp_path, write):
    """A slice reaching past the end the handle knows is cut to it (NumPy), so on the shape
    grown by another process it selects rows the caller never saw: it raises IndexError
    and writes nothing (h[23:] = 1 was a silent no-op, h[20:30] wrote 3 rows of 10)."""
    h, path = _stale_synchronized_handle(tmp_path, 30)
    with pytest.raises(IndexError, match="another handle"):
        write(h)
    got = cs.open_array(path, mode="r")[...]
    assert (got[:23] == 0).all() and (got[23:] == 9).all()


def test_a_stale_handles_block_write_selects_by_the_grid_it_knows(tmp_path):
    """Another process re-created the array with the same shape and other chunks: a
    synchronized h.blocks[1] = 1 through a handle that knows chunks (4, 4) wrote rows 5-9
    (the new grid's block); it writes rows 4-7, its own grid's."""
    import zarr
    path = str(tmp_path / "a.zarr")
    cs.create(shape=(23, 4), chunks=(4, 4), dtype="i4", store=path, zarr_format=2,
              fill_value=0)
    h = cs.open_array(path, mode="r+",
                      synchronizer=cs.ProcessSynchronizer(str(tmp_path / "locks")))
    zarr.create_array(path, shape=(23, 4), chunks=(5, 4), dtype="i4", fill_value=0,
                      zarr_format=2, overwrite=True)
    h.blocks[1] = 1
    got = cs.open_array(path, mode="r")[...]
    assert [r for r in range(23) if got[r].any()] == [4, 5, 6, 7]
