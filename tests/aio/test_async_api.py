"""zarr-python 3's asynchronous API on chunkstore (issue 28): AsyncArray, AsyncGroup and
chunkstore.api.asynchronous, checked against NumPy and the synchronous API; the event loop
keeps running while the engine reads; concurrent tasks writing one array through a
synchronizer (disjoint elements, shared chunks) lose nothing (a model-based test)."""

import asyncio
import os
import pickle
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkstore as cs
import chunkstore.api.asynchronous as za
import chunkstore.api.synchronous as zs
from chunkstore import AsyncArray, AsyncGroup
from chunkstore.errors import ContainsGroupError, GroupNotFoundError
from faults import gated_store, is_chunk


def run(coro):
    return asyncio.run(coro)


def test_the_documented_paths_have_zarr_python_3s_names():
    import zarr.api.asynchronous as zarr_async
    import zarr.api.synchronous as zarr_sync
    assert set(zarr_async.__all__) <= set(za.__all__) | {"AsyncArray", "AsyncGroup"}
    missing = set(zarr_sync.__all__) - set(zs.__all__)
    assert missing <= {"AsyncArray", "AsyncGroup"}, missing


def test_async_array_reads_and_writes_as_numpy(tmp_path):
    want = np.arange(240, dtype="i4").reshape(12, 20)

    async def main():
        a = await za.create_array(str(tmp_path / "a.zarr"), shape=want.shape, chunks=(5, 6),
                                  dtype="i4")
        assert isinstance(a, AsyncArray) and a.zarr_format == 3 and a.shape == (12, 20)
        await a.setitem(slice(None), want)
        np.testing.assert_array_equal(await a.getitem(slice(None)), want)
        np.testing.assert_array_equal(await a.getitem((slice(2, 9), slice(3, 17, 2))),
                                      want[2:9, 3:17:2])
        np.testing.assert_array_equal(await a.oindex.getitem(([1, 7, 3], [0, 19])),
                                      want[np.ix_([1, 7, 3], [0, 19])])
        np.testing.assert_array_equal(await a.vindex.getitem(([1, 7, 3], [0, 19, 5])),
                                      want[[1, 7, 3], [0, 19, 5]])
        np.testing.assert_array_equal(await a.get_orthogonal_selection(([2], slice(None))),
                                      want[[2]])
        np.testing.assert_array_equal(await a.get_coordinate_selection(([0, 11], [0, 19])),
                                      want[[0, 11], [0, 19]])
        mask = want % 7 == 0
        np.testing.assert_array_equal(await a.get_mask_selection(mask), want[mask])
        np.testing.assert_array_equal(await a.get_block_selection((1, 2)), want[5:10, 12:18])
        await a.set_orthogonal_selection(([0, 2], [1, 3]), -1)
        await a.oindex.setitem(([4], [4]), -2)
        await a.vindex.setitem(([11], [19]), -3)
        await a.set_block_selection((0, 0), np.zeros((5, 6), "i4"))
        got = want.copy()
        got[np.ix_([0, 2], [1, 3])] = -1
        got[4, 4], got[11, 19] = -2, -3
        got[0:5, 0:6] = 0
        np.testing.assert_array_equal(await a.getitem(...), got)
        assert await a.append(np.ones((3, 20), "i4")) == (15, 20)
        await a.resize((6, 4))
        assert a.shape == (6, 4) and a.sync.shape == (6, 4)
        np.testing.assert_array_equal(await a.getitem(...), got[:6, :4])
        # chunk (0, 0) holds only the fill value (written as zeros): not stored
        assert await a.nchunks_initialized() == 1 and await a.nbytes_stored() > 0
        await a.update_attributes({"u": "m"})
        assert dict(a.attrs) == {"u": "m"}
        assert "Shape" in str(a.info) and "Chunks initialized" in str(await a.info_complete())
        again = await AsyncArray.open(str(tmp_path / "a.zarr"))
        assert again == a and hash(again) == hash(a)
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            a.nope  # noqa: B018

    run(main())


def test_async_group_members_and_creation(tmp_path):
    async def main():
        g = await AsyncGroup.from_store(str(tmp_path / "g.zarr"), attributes={"t": 1})
        assert g.zarr_format == 3 and dict(g.attrs) == {"t": 1}
        with pytest.raises(ContainsGroupError):
            await AsyncGroup.from_store(str(tmp_path / "g.zarr"))
        a = await g.create_array("a", shape=(4,), dtype="f8")
        await a.setitem(slice(None), np.arange(4.0))
        sub = await g.create_group("sub", attributes={"s": 2})
        await sub.zeros("z", shape=(3,), chunks=(2,))
        await g.require_group("other")
        await g.setitem("direct", np.arange(3))
        assert [k async for k in g.keys()] == ["a", "direct", "other", "sub"]
        assert [k async for k in g.array_keys()] == ["a", "direct"]
        assert [k async for k in g.group_keys()] == ["other", "sub"]
        assert [n async for n, _ in g.members(max_depth=None)] == \
            ["a", "direct", "other", "sub", "sub/z"]
        assert await g.nmembers() == 4 and await g.nmembers(max_depth=None) == 5
        assert {n for n, v in [(n, v) async for n, v in g.arrays()]} == {"a", "direct"}
        assert len([v async for v in g.group_values()]) == 2
        assert len([v async for v in g.array_values()]) == 2
        z = await g.getitem("sub/z")
        assert isinstance(z, AsyncArray) and z.shape == (3,)
        assert await g.get("missing") is None
        with pytest.raises(KeyError):
            await g.getitem("missing")
        assert await g.contains("sub/z") and not await g.contains("nope")
        await g.move("direct", "moved")
        await g.delitem("other")
        assert [k async for k in g.keys()] == ["a", "moved", "sub"]
        req = await g.require_array("a", shape=(4,), dtype="f8")
        np.testing.assert_array_equal(await req.getitem(...), np.arange(4.0))
        like = await g.zeros_like("zl", a)
        assert like.shape == (4,) and like.dtype == a.dtype
        await g.update_attributes({"t": 3})
        opened = await AsyncGroup.open(str(tmp_path / "g.zarr"))
        assert dict(opened.attrs) == {"t": 3} and opened == g
        assert "sub" in str(await g.tree())

    run(main())


def test_asynchronous_functions_match_the_synchronous_ones(tmp_path):
    path = str(tmp_path / "f.zarr")

    async def main():
        g = await za.group(path, attributes={"a": 1})
        assert g.zarr_format == 3 and dict(g.attrs) == {"a": 1}
        z = await za.zeros((6,), chunks=(3,), store=path, path="z")
        assert z.zarr_format == 3 and (await z.getitem(...) == 0).all()
        o = await za.ones((2, 2), store={}, zarr_format=2)
        assert o.zarr_format == 2 and (await o.getitem(...) == 1).all()
        f = await za.full((3,), fill_value=7, store={})
        assert (await f.getitem(...) == 7).all()
        e = await za.empty_like(f)
        assert e.shape == (3,)
        arr = await za.array(np.arange(5), store={})
        np.testing.assert_array_equal(await arr.getitem(...), np.arange(5))
        fa = await za.from_array({}, data=arr)
        np.testing.assert_array_equal(await fa.getitem(...), np.arange(5))
        c = await za.create((4,), chunk_shape=(2,), store={}, config={"write_empty_chunks": True})
        assert c.chunks == (2,) and c.sync.write_empty_chunks
        node = await za.open(path, path="z", mode="r")
        assert isinstance(node, AsyncArray)
        await za.consolidate_metadata(path)
        cons = await za.open_consolidated(path)
        assert isinstance(cons, AsyncGroup) and "Consolidated" in type(cons.sync.store).__name__
        used = await za.open_group(path, mode="r")  # None: consolidated metadata where present
        assert "Consolidated" in type(used.sync.store).__name__
        plain = await za.open_group(path, mode="r", use_consolidated=False)
        assert "Consolidated" not in type(plain.sync.store).__name__
        with pytest.raises(GroupNotFoundError):
            await za.open_group(str(tmp_path / "none.zarr"), mode="r")
        v2 = await za.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2)
        assert v2.zarr_format == 2
        kept = await za.open_group(str(tmp_path / "v2.zarr"), mode="a")  # existing: kept
        assert kept.zarr_format == 2
        await za.save_array(str(tmp_path / "s.zarr"), np.arange(3))
        np.testing.assert_array_equal(await za.load(str(tmp_path / "s.zarr")), np.arange(3))

    run(main())


def test_the_event_loop_keeps_running_while_the_engine_reads(tmp_path):
    a = cs.create_array(str(tmp_path / "big.zarr"), shape=(2000, 2000), chunks=(250, 250),
                        dtype="f8")
    a[...] = np.random.default_rng(0).random((2000, 2000))

    async def main():
        aa = AsyncArray(cs.open_array(str(tmp_path / "big.zarr"), mode="r"))
        ticks = 0
        stop = False

        async def tick():
            nonlocal ticks
            while not stop:
                ticks += 1
                await asyncio.sleep(0)

        t = asyncio.get_running_loop().create_task(tick())
        await asyncio.sleep(0)
        before = ticks
        got = await asyncio.gather(*(aa.getitem(...) for _ in range(3)))
        stop = True
        await t
        return ticks - before, got

    ran, got = run(main())
    assert ran > 3
    for g in got:
        np.testing.assert_array_equal(g, a[...])



class _ThreadsSeen(cs.MemoryStore):
    """A MemoryStore that notes the thread of every request."""

    def __init__(self):
        super().__init__()
        self.threads = []

    def __getitem__(self, key):
        self.threads.append(threading.get_ident())
        return super().__getitem__(key)

    def __contains__(self, key):
        self.threads.append(threading.get_ident())
        return super().__contains__(key)

    def __iter__(self):
        self.threads.append(threading.get_ident())
        return super().__iter__()


@pytest.mark.parametrize("cache_metadata", [True, False])
def test_async_array_properties_and_info_make_no_request_on_the_loop(cache_metadata):
    # zarr-python 3's AsyncArray answers them from the metadata it holds. The shape of an
    # Array opened with cache_metadata=False read the metadata again, and info listed the
    # store for the stored sizes: requests on the event loop's thread (on S3, round trips).
    store = _ThreadsSeen()
    cs.create_array(store, shape=(10, 6), chunks=(4, 4), dtype="i2", fill_value=0)[...] = 1
    a = AsyncArray(cs.open_array(store, mode="r+", cache_metadata=cache_metadata))

    async def main():
        loop_thread = threading.get_ident()
        store.threads.clear()
        got = (a.shape, a.size, a.nbytes, a.cdata_shape, a.nchunks, a.dtype, a.chunks,
               a.fill_value, a.order, a.ndim, repr(a), str(a.info))
        on_loop = [t for t in store.threads if t == loop_thread]
        complete = str(await a.info_complete())
        await a.resize((12, 6))
        return got, on_loop, complete, a.shape

    got, on_loop, complete, resized = run(main())
    assert on_loop == []
    assert got[:5] == ((10, 6), 60, 120, (3, 2), 6)
    rows = dict(tuple(p.strip() for p in line.split(":", 1)) for line in got[-1].splitlines())
    assert rows["Shape"] == "(10, 6)" and "No. bytes stored" not in rows
    rows = dict(tuple(p.strip() for p in line.split(":", 1)) for line in complete.splitlines())
    assert "No. bytes stored" in rows and rows["Chunks initialized"] == "6/6"
    assert resized == (12, 6)   # an operation through the handle updates what it holds


def test_async_group_info_makes_no_request_on_the_loop():
    store = _ThreadsSeen()
    g = cs.group(store, zarr_format=3)
    g.create_group("sub")
    g.zeros("x", shape=3)
    ag = AsyncGroup(cs.open_group(store, mode="r"))

    async def main():
        loop_thread = threading.get_ident()
        store.threads.clear()
        info = str(ag.info)
        on_loop = [t for t in store.threads if t == loop_thread]
        return info, on_loop, str(await ag.info_complete())

    info, on_loop, complete = run(main())
    assert on_loop == []
    assert "Zarr format" in info and "No. members" not in info
    assert "No. members" in complete and "x" in complete

@pytest.mark.parametrize("zarr_format", [2, 3])
def test_members_attributes_and_metadata_make_no_request_on_the_loop(zarr_format):
    """Group.members (a property, which lists the store and opens every member) was
    evaluated on the loop before the listing went to a worker, and AsyncArray/AsyncGroup
    attrs and metadata read the attributes document on the loop at each use (a slow store:
    the loop stalled for the whole listing). They now answer from the attributes held, read
    on a worker when the view was made, as zarr-python 3's; update_attributes refreshes
    them."""
    store = _ThreadsSeen()

    async def main():
        loop_thread = threading.get_ident()
        root = await za.open_group(store, mode="w", zarr_format=zarr_format)
        for i in range(3):
            await root.create_array(f"a{i}", shape=(4,), dtype="i4", attributes={"i": i})
        await root.create_group("g", attributes={"kind": "group"})
        store.threads.clear()
        members = [(n, dict(m.attrs)) async for n, m in root.members()]
        n = await root.nmembers()
        arrays = [(n, a.attrs["i"], a.metadata.attributes) async for n, a in root.arrays()]
        groups = [(n, g.metadata.attributes) async for n, g in root.groups()]
        a1 = await root.getitem("a1")
        got = (a1.attrs, a1.metadata.attributes, root.attrs, root.metadata.attributes)
        on_loop = [t for t in store.threads if t == loop_thread]
        await a1.update_attributes({"j": 5})
        cs.open_array(store, path="a1").attrs["other"] = 1  # another handle's change
        return members, n, arrays, groups, got, on_loop, a1.attrs, \
            (await root.getitem("a1")).attrs

    members, n, arrays, groups, got, on_loop, updated, anew = run(main())
    assert on_loop == []
    assert n == 4 and sorted(members) == [("a0", {"i": 0}), ("a1", {"i": 1}), ("a2", {"i": 2}),
                                           ("g", {"kind": "group"})]
    assert sorted(arrays) == [(f"a{i}", i, {"i": i}) for i in range(3)]
    assert groups == [("g", {"kind": "group"})]
    assert got == ({"i": 1}, {"i": 1}, {}, {})
    assert updated == {"i": 1, "j": 5}                 # refreshed by update_attributes
    assert anew == {"i": 1, "j": 5, "other": 1}         # a view made anew reads the change


def test_open_array_without_a_mode_opens_only_as_zarr_python_3s():
    """zarr-python 3's asynchronous open_array creates nothing unless its mode says so:
    chunkstore's passed zarr-python 2's default mode "a" on (a mistyped path with shape=
    made a new empty array; without shape, a TypeError instead of ArrayNotFoundError)."""
    from chunkstore.errors import ArrayNotFoundError

    async def main():
        store = cs.MemoryStore()
        for kwargs in ({}, {"shape": (3,), "dtype": "i4"}):
            with pytest.raises(ArrayNotFoundError) as e:
                await za.open_array(store, path="typo", **kwargs)
            assert isinstance(e.value, FileNotFoundError)
        assert list(store.keys()) == []
        made = await za.open_array(store, path="x", mode="a", shape=(3,), dtype="i4")
        assert (await za.open_array(store, path="x")).shape == made.shape == (3,)

    run(main())


def test_views_of_one_node_differ_once_their_attributes_do():
    """As zarr-python 3's: a view whose update_attributes changed what it holds is not equal
    to another view of the node that holds the old attributes (they compared equal)."""
    async def main():
        store = cs.MemoryStore()
        a = await za.create_array(store, name="x", shape=(2,), dtype="i4",
                                  attributes={"k": 1})
        b = await za.open_array(store, path="x")
        same = a == b
        await a.update_attributes({"k": 2})
        return same, a == b, a == await za.open_array(store, path="x"), hash(a) == hash(b)

    assert run(main()) == (True, False, True, True)


def test_errors_reach_the_awaiting_task(tmp_path):
    async def main():
        with pytest.raises(cs.errors.ArrayNotFoundError):
            await za.open_array(str(tmp_path / "none.zarr"), mode="r")
        a = await za.zeros((4,), store={}, chunks=(2,))
        with pytest.raises(IndexError):
            await a.getitem(10)
        with pytest.raises(TypeError, match="Array"):
            AsyncArray(np.zeros(3))

    run(main())


def test_sync_bugs_of_issue_28(tmp_path):
    g = cs.open_group(str(tmp_path / "o.zarr"), mode="w", attributes={"x": 1})
    assert dict(g.attrs) == {"x": 1}
    with pytest.raises(TypeError, match="use_consolidatd"):
        cs.open_group(str(tmp_path / "o.zarr"), mode="a", use_consolidatd=True)
    assert pickle.loads(pickle.dumps(g)) == g and hash(pickle.loads(pickle.dumps(g))) == hash(g)
    d = np.arange(6)
    np.testing.assert_array_equal(cs.array(d, shape=d.shape)[...], d)
    np.testing.assert_array_equal(g.array("a", data=d, shape=d.shape)[...], d)
    b = g.create("b", shape=(3,), dtype="i4", config={"write_empty_chunks": True})
    assert b.write_empty_chunks
    cs.consolidate_metadata(str(tmp_path / "o.zarr"), zarr_format=2)
    with pytest.raises(Exception, match="format"):
        cs.consolidate_metadata(str(tmp_path / "o.zarr"), zarr_format=3)
    c = cs.create(shape=(4,), chunk_shape=(2,), store={}, zarr_format=3,
                  chunk_key_encoding={"name": "v2", "configuration": {"separator": "."}})
    assert c.chunks == (2,) and c.metadata.chunk_key_encoding["name"] == "v2"
    with pytest.raises(ValueError, match="disagree"):
        cs.create(shape=(4,), chunks=(3,), chunk_shape=(2,), store={})
    with pytest.raises(ValueError, match="unknown key"):
        cs.create(shape=(4,), store={}, config={"orde": "C"})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.tuples(st.integers(0, 29), st.integers(1, 8),
                                   st.integers(-100, 100)), min_size=1, max_size=6),
                min_size=1, max_size=5), st.sampled_from([None, (8,)]))
def test_concurrent_tasks_writing_one_array_lose_nothing(tmp_path_factory, batches, shards):
    """Batches of writes run as concurrent tasks (asyncio.gather) through one AsyncArray with
    a ThreadSynchronizer: within a batch the writes cover disjoint elements but share chunks
    (chunks of 4; sharded: two chunks a shard, so tasks also share shards); after each batch
    the array reads as the NumPy model."""
    path = str(tmp_path_factory.mktemp("m") / "m.zarr")
    cs.create_array(path, shape=(30,), chunks=(4,), shards=shards, dtype="i8", fill_value=0)
    model = np.zeros(30, dtype="i8")

    async def main():
        a = AsyncArray(cs.open_array(path, mode="r+", synchronizer=cs.ThreadSynchronizer()))
        for batch in batches:
            taken = np.zeros(30, bool)
            writes = []
            for start, n, v in batch:
                stop = min(30, start + n)
                if taken[start:stop].any():
                    continue  # disjoint elements within a batch: the outcome is defined
                taken[start:stop] = True
                writes.append((slice(start, stop), v))
                model[start:stop] = v
            await asyncio.gather(*(a.setitem(s, v) for s, v in writes))
            np.testing.assert_array_equal(await a.getitem(...), model)

    run(main())


def test_async_array_config_is_the_arrays():
    """AsyncArray.config (zarr-python 3): the array's order and write_empty_chunks."""
    z = cs.create_array(cs.MemoryStore(), shape=(4, 4), chunks=(2, 2), dtype="i4",
                        config={"write_empty_chunks": True})
    a = AsyncArray(z)
    assert a.config == z.config
    assert a.config.write_empty_chunks is True and a.config.order == "C"


def test_async_array_with_config():
    z = cs.create_array(cs.MemoryStore(), shape=(4, 4), chunks=(2, 2), dtype="i4")
    a = AsyncArray(z).with_config({"write_empty_chunks": True})
    assert isinstance(a, AsyncArray) and a.config.write_empty_chunks is True
    assert AsyncArray(z).config.write_empty_chunks is False
    run(a.setitem(slice(None), 0))           # all fill, stored: write_empty_chunks
    assert z.nchunks_initialized == 4


class _CountingStore(dict):
    """A dict store whose chunk reads take a while and count how many run at once."""

    def __init__(self, concurrent_io):
        super().__init__()
        self.concurrent_io = concurrent_io
        self.lock = threading.Lock()
        self.now = self.most = 0

    def __getitem__(self, key):
        if "/c" not in "/" + key and not key.startswith("c"):
            return super().__getitem__(key)
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.05)
        with self.lock:
            self.now -= 1
        return super().__getitem__(key)


@pytest.mark.parametrize("remote", [False, True])
def test_reads_run_on_the_workers_for_their_stores_kind(remote):
    """A local store's reads (CPU work) run on as many workers as the engine's threads, the
    rest wait their turn; a store whose requests are round trips gets up to WORKERS at once.
    The values are right either way."""
    from chunkstore.aio import run as aio_run

    store = _CountingStore(concurrent_io=remote)
    data = np.arange(64, dtype="i4")
    cs.create_array(store, shape=(64,), chunks=(8,), dtype="i4", zarr_format=3)[...] = data
    a = cs.AsyncArray(cs.open_array(store, mode="r"))

    async def main():
        return await asyncio.gather(*(a.getitem(slice(8 * i, 8 * i + 8)) for i in range(8)))

    with cs.config.set(threads=2):
        store.most = 0
        got = asyncio.run(main())
    np.testing.assert_array_equal(np.concatenate(got), data)
    if remote:
        assert store.most > 2 and store.most <= aio_run.WORKERS
    else:
        assert store.most == 2


def test_a_lone_task_keeps_one_worker_and_no_job_is_lost():
    """The workers hand a job to the thread idle last (a lone task's reads stay on one or
    two warm threads, not round-robin over all of them), and jobs beyond the limit wait their turn:
    none is lost or run twice while the limit is lowered and raised under load."""
    from chunkstore.aio.run import WRITE, array_off_loop

    local = {}  # a dict: a local store (its reads are CPU work)
    with cs.config.set(threads=3):
        barrier = threading.Barrier(3, timeout=20)

        async def warm_then_alone():
            await asyncio.gather(*(array_off_loop(local, WRITE, barrier.wait)
                                   for _ in range(3)))          # three threads started
            return [await array_off_loop(local, WRITE, threading.get_ident)
                    for _ in range(30)]
        # one job in flight at a time: it goes to the thread parked last, or (when the one
        # that ran the previous job has not parked yet) to the one before it; never round
        # the three as a shared queue hands them out
        assert len(set(asyncio.run(warm_then_alone()))) <= 2

    lock = threading.Lock()
    state = {"now": 0, "most": 0, "ran": []}

    def job(i):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.002)
        with lock:
            state["now"] -= 1
            state["ran"].append(i)
        return i

    async def churn():
        tasks = [asyncio.ensure_future(array_off_loop(local, WRITE, job, i))
                 for i in range(200)]
        for threads in (1, 4, 2, 3):
            await asyncio.sleep(0.02)
            cs.config.set(threads=threads)
        return await asyncio.gather(*tasks)

    with cs.config.set(threads=4):
        got = asyncio.run(churn())
    assert got == list(range(200))
    assert sorted(state["ran"]) == list(range(200))       # each exactly once
    assert state["most"] <= 4


def _read_one(path):
    a = cs.AsyncArray(cs.open_array(path, mode="r"))

    async def main():
        return await a.getitem(slice(None))
    return main


def test_an_event_loop_is_not_kept_alive_by_the_reads_it_awaited(tmp_path):
    """Each loop's results are handed over through an inbox kept per loop; the inbox must
    not keep its loop (and the loop's selector) alive once the loop is gone: a service that
    calls asyncio.run per request would otherwise grow without end."""
    import gc
    import weakref
    path = str(tmp_path / "a.zarr")
    cs.create_array(path, shape=(10,), chunks=(5,), dtype="i4", zarr_format=3)[...] = 7
    refs = []
    for _ in range(5):
        loop = asyncio.new_event_loop()
        np.testing.assert_array_equal(loop.run_until_complete(_read_one(path)()), 7)
        loop.close()
        refs.append(weakref.ref(loop))
        del loop
    for _ in range(100):  # (a worker lets go of its last result just after handing it over)
        gc.collect()
        if all(r() is None for r in refs):
            break
        time.sleep(0.01)
    assert [r() for r in refs] == [None] * 5


def test_loops_come_and_go_without_leaking_descriptors(tmp_path):
    import gc
    path = str(tmp_path / "a.zarr")
    cs.create_array(path, shape=(10,), chunks=(5,), dtype="i4", zarr_format=3)[...] = 3
    asyncio.run(_read_one(path)())            # the workers (and their pipes) exist now
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        np.testing.assert_array_equal(asyncio.run(_read_one(path)()), 3)
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before


def test_a_loop_without_add_reader_is_woken_another_way(tmp_path):
    """Loops that cannot watch a pipe (Windows' proactor) get their results through
    call_soon_threadsafe."""
    class NoReaders(asyncio.SelectorEventLoop):
        def add_reader(self, *args, **kwargs):
            raise NotImplementedError

    path = str(tmp_path / "a.zarr")
    want = np.arange(100, dtype="i4")
    cs.create_array(path, shape=(100,), chunks=(7,), dtype="i4", zarr_format=3)[...] = want
    a = cs.AsyncArray(cs.open_array(path, mode="r"))

    async def main():
        return await asyncio.gather(*(a.getitem(slice(i, i + 10)) for i in range(0, 100, 10)))

    loop = NoReaders()
    try:
        got = loop.run_until_complete(main())
    finally:
        loop.close()
    np.testing.assert_array_equal(np.concatenate(got), want)


async def _until(event, timeout=20.0):
    """Wait (on the loop) until a threading.Event is set; fail after timeout."""
    for _ in range(int(timeout / 0.002)):
        if event.is_set():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("the gated write never reached the store")


# writes of chunks under "slow/" wait for the gate (a write held in flight on a worker)
_GatedStore = gated_store(cs.MemoryStore, lambda k: k.startswith("slow/") and is_chunk(k),
                          once=False)


def test_a_cancelled_write_never_lands_after_the_writes_awaited_next():
    """Cancelling (or timing out) an awaited write: one no worker started never runs, one
    already running ends before the CancelledError reaches the caller, so a write awaited
    next always lands after it (a cancelled write used to run on regardless and could land
    later, over the next write: 12 of 20 rounds lost all of it)."""
    import threading
    store = _GatedStore()
    slow = cs.create_array(store, name="slow", shape=(4,), chunks=(4,), dtype="i4",
                           fill_value=0)
    fast = cs.create_array(store, name="fast", shape=(8, 4), chunks=(1, 4), dtype="i4",
                           fill_value=0)
    aslow, afast = cs.AsyncArray(slow), cs.AsyncArray(fast)

    async def main():
        # a write started on a worker, held there; its caller is cancelled
        a = asyncio.create_task(aslow.setitem(slice(None), 1))
        await _until(store.entered)
        a.cancel()
        await asyncio.sleep(0.05)
        assert not a.done()  # waits for the write it started
        store.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await a
        np.testing.assert_array_equal(slow[...], 1)  # landed before the cancel went on
        await aslow.setitem(slice(None), 2)          # so the next write wins
        # writes queued behind busy workers, cancelled before any starts: never run
        store.gate.clear()
        store.entered.clear()
        holders = [asyncio.create_task(aslow.setitem(slice(None), 3))
                   for _ in range(cs.config.get("threads"))]
        await _until(store.entered)
        await asyncio.sleep(0.05)  # (every worker holding a gated write)
        queued = [asyncio.create_task(afast.setitem(i, 5)) for i in range(8)]
        await asyncio.sleep(0.01)
        for t in queued:
            t.cancel()
        await asyncio.gather(*queued, return_exceptions=True)
        store.gate.set()
        await asyncio.gather(*holders)
        return [t.cancelled() for t in queued]

    cancelled = asyncio.run(main())
    assert all(cancelled)
    np.testing.assert_array_equal(fast[...], 0)   # none of the cancelled writes ran
    np.testing.assert_array_equal(slow[...], 3)
    assert threading.active_count() < 100


def test_a_timed_out_append_runs_before_the_next_one_or_never(monkeypatch):
    """asyncio.wait_for(append(...)) timing out: an append still queued never runs (it used
    to run later regardless: a caller that retried got the row twice, or in another order);
    one already running ends before the TimeoutError, so the next append goes after it."""
    import threading

    from chunkstore.aio import run as aio_run
    monkeypatch.setattr(aio_run, "WORKERS", 1)  # one worker for appends: easy to keep busy
    store = _GatedStore()
    z = cs.create_array(store, name="z", shape=(0, 2), chunks=(1, 2), dtype="i4")
    held = cs.create_array(store, name="slow", shape=(0, 2), chunks=(1, 2), dtype="i4")
    az, aheld = cs.AsyncArray(z), cs.AsyncArray(held)
    busy = threading.Event()

    async def main():
        blocker = asyncio.ensure_future(aio_run.off_loop(busy.wait, 30))
        await asyncio.sleep(0.05)
        with pytest.raises(asyncio.TimeoutError):  # queued behind the blocker: dropped
            await asyncio.wait_for(az.append(np.full((1, 2), 1)), 0.05)
        busy.set()
        await blocker
        await az.append(np.full((1, 2), 2))
        # running (its chunk write held in the store) when it times out: ends first
        t = asyncio.ensure_future(asyncio.wait_for(aheld.append(np.full((1, 2), 3)), 0.05))
        await _until(store.entered)
        await asyncio.sleep(0.1)
        assert not t.done()
        store.gate.set()
        with pytest.raises(asyncio.TimeoutError):
            await t
        await aheld.append(np.full((1, 2), 4))

    asyncio.run(main())
    np.testing.assert_array_equal(z[...], [[2, 2]])
    np.testing.assert_array_equal(held[...], [[3, 3], [4, 4]])


class _GatedReads(cs.MemoryStore):
    """Reads of chunk keys wait for a gate (a read held in flight on a worker)."""

    def __init__(self):
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def _hold(self, keys):
        if any(not k.endswith((".zarray", ".zattrs", ".zgroup", "zarr.json")) for k in keys):
            self.entered.set()
            self.gate.wait(30)

    def __getitem__(self, key):
        self._hold([key])
        return super().__getitem__(key)

    def getitems(self, keys, **kwargs):
        keys = list(keys)
        self._hold(keys)
        return super().getitems(keys, **kwargs)


@pytest.mark.parametrize("how", ["basic", "orthogonal", "coordinate", "block"])
def test_a_cancelled_read_into_out_never_writes_it_after_the_cancel(how):
    """A read into the caller's out= buffer whose caller is cancelled (wait_for timing out)
    is waited for, as a write is: it used to run on and fill the buffer after the
    TimeoutError, over what the caller wrote there meanwhile."""
    store = _GatedReads()
    z = cs.create((20,), chunks=(5,), dtype="i4", store=store, zarr_format=2)
    z.store.gate.set()
    z[:] = np.arange(20)
    store.gate.clear()
    a = AsyncArray(z)
    out = np.zeros(20, dtype="i4")
    call = {"basic": lambda: a.get_basic_selection(slice(None), out=out),
            "orthogonal": lambda: a.get_orthogonal_selection((slice(None),), out=out),
            "coordinate": lambda: a.get_coordinate_selection(np.arange(20), out=out),
            "block": lambda: a.get_block_selection(slice(None), out=out)}[how]

    async def main():
        t = asyncio.ensure_future(asyncio.wait_for(call(), 0.05))
        await _until(store.entered)
        await asyncio.sleep(0.1)  # timed out meanwhile: waits for the read it started
        try:
            assert not t.done()
        finally:
            store.gate.set()
        with pytest.raises(asyncio.TimeoutError):
            await t
        out[:] = -1
        await asyncio.sleep(0.2)  # (where the read to go on, it would be done by now)

    asyncio.run(main())
    np.testing.assert_array_equal(out, -1)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_concurrent_group_attribute_updates_lose_no_key(tmp_path, zarr_format):
    """Tasks (and threads) updating a group's attributes at once, without a synchronizer,
    through one handle or several: every key is kept (a group's update took no lock, so
    concurrent read-modify-writes of its document lost most keys)."""
    from concurrent.futures import ThreadPoolExecutor
    path = str(tmp_path / "g.zarr")

    async def main():
        g = await za.open_group(path, mode="w", zarr_format=zarr_format)
        other = await za.open_group(path, mode="r+")
        await asyncio.gather(*((g if i % 2 else other).update_attributes({f"k{i}": i})
                               for i in range(40)))
        return g

    g = asyncio.run(main()).sync
    with ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda i: g.attrs.update({f"t{i}": i}), range(40)))
    attrs = dict(cs.open_group(path, mode="r").attrs)
    assert attrs == {**{f"k{i}": i for i in range(40)}, **{f"t{i}": i for i in range(40)}}


def test_resize_refuses_to_keep_the_chunks_outside():
    """zarr-python 3's delete_outside_chunks=False keeps the chunks a shrink leaves outside
    (growing back shows them); chunkstore deletes them: refused, where it used to be
    ignored (the data the caller asked to keep was deleted)."""
    z = cs.create((10,), chunks=(2,), dtype="i4", store=cs.MemoryStore(), zarr_format=3)
    z[:] = np.arange(10)
    a = AsyncArray(z)
    with pytest.raises(NotImplementedError, match="delete_outside_chunks"):
        run(a.resize((4,), delete_outside_chunks=False))
    assert z.shape == (10,)
    np.testing.assert_array_equal(z[:], np.arange(10))
    run(a.resize((4,)))
    assert z.shape == (4,)


def test_an_async_arrays_shape_follows_another_handles_append(tmp_path):
    """AsyncArray.shape (size, nchunks) answered from the metadata it was opened with while
    its dtype followed another handle's changes: after an append through another handle,
    `await a.resize((a.shape[0] + 3,))` shrank the array, dropping the appended rows."""
    path = str(tmp_path / "a.zarr")
    z = cs.create_array(path, shape=(20,), chunks=(4,), dtype="i4", fill_value=-1)
    z[:] = np.arange(20)

    async def main():
        a = await za.open_array(store=path, mode="r+")
        cs.open_array(path, mode="r+").append(np.arange(5, dtype="i4") + 50)
        assert (a.shape, a.size, a.nchunks) == ((25,), 25, 7)
        await a.resize((a.shape[0] + 3,))
        cs.create_array(path, shape=(30,), chunks=(8,), dtype="f8", fill_value=-2,
                        overwrite=True)
        assert (a.shape, a.dtype, a.metadata.shape) == ((30,), np.float64, (30,))
    asyncio.run(main())


def test_an_async_resize_after_another_handles_append_keeps_the_rows(tmp_path):
    path = str(tmp_path / "a.zarr")
    cs.create_array(path, shape=(20,), chunks=(4,), dtype="i4", fill_value=-1)[:] = 1

    async def main():
        a = await za.open_array(store=path, mode="r+")
        cs.open_array(path, mode="r+").append(np.full(5, 50, "i4"))
        await a.resize((a.shape[0] + 3,))
    asyncio.run(main())
    assert cs.open_array(path, mode="r")[:].tolist() == [1] * 20 + [50] * 5 + [-1] * 3


def test_concurrent_from_array_overwrites_end_as_one_or_the_other():
    """Two from_array(overwrite=True) of one path at once: the second's creation replaced
    the first's array between the first's creation and its data write, which then went
    into the second's array: both returned, the array a mix of both. The creation lock is
    held across creation and write: the array is one call's data whole."""
    shapes = [(37, 8), (28, 8)]

    async def race(seed):
        rng = np.random.default_rng(seed)
        st = cs.MemoryStore()

        async def w(k):
            await asyncio.sleep(float(rng.random()) * 0.002)
            await za.from_array(st, data=np.full(shapes[k], k + 1, "i4"), chunks=(2, 4),
                                overwrite=True)
        results = await asyncio.gather(w(0), w(1), return_exceptions=True)
        errors = [r for r in results if isinstance(r, Exception)]
        got = cs.open_array(st, mode="r")[...]
        return errors, got

    for seed in range(400):
        errors, got = asyncio.run(race(seed))
        assert not errors, errors
        assert any(got.shape == s and (got == k + 1).all() for k, s in enumerate(shapes)), \
            (seed, got.shape, np.unique(got))


_CREATING = {
    "array(data)": lambda s: za.array(np.arange(3), store=s),
    "open_array(mode='w')": lambda s: za.open_array(store=s, mode="w", shape=(3,), dtype="i4"),
    "open_array(mode='a')": lambda s: za.open_array(store=s, mode="a", shape=(3,), dtype="i4"),
    "open(mode='w', shape=)": lambda s: za.open(store=s, mode="w", shape=(3,), dtype="i4"),
    "open(mode='a'): a group": lambda s: za.open(store=s, mode="a"),
    "open(): a group": lambda s: za.open(store=s),
    "zeros_like(ndarray)": lambda s: za.zeros_like(np.zeros(3), store=s),
    "full_like(ndarray)": lambda s: za.full_like(np.zeros(3), fill_value=1, store=s),
    "empty_like(ndarray)": lambda s: za.empty_like(np.zeros((2, 3), "i2"), store=s),
}


@pytest.mark.parametrize("case", list(_CREATING))
def test_the_asynchronous_api_creates_zarr_v3(case):
    """open, open_array, array and the *_like functions of an array-like created Zarr v2
    (the synchronous functions' zarr-python 2 default), where zarr-python 3 and the README
    say v3; mode "w" replaced a v3 array with a v2 one; empty_like of an ndarray raised
    AttributeError. An existing node keeps its format."""
    s = cs.MemoryStore()
    node = asyncio.run(_CREATING[case](s))
    assert node.metadata.zarr_format == 3 and "zarr.json" in s and ".zarray" not in s


def test_the_asynchronous_api_opens_an_existing_v2_node_as_it_is():
    s = cs.MemoryStore()
    cs.zeros(3, store=s, zarr_format=2)
    assert asyncio.run(za.open_array(store=s, mode="a", shape=(3,))).metadata.zarr_format == 2
    assert asyncio.run(za.open(store=s)).metadata.zarr_format == 2
    assert asyncio.run(za.zeros_like(cs.open_array(s), store=cs.MemoryStore())
                       ).metadata.zarr_format == 2
    assert asyncio.run(za.open_array(store=s, mode="w", shape=(3,))).metadata.zarr_format == 3


def test_async_group_require_dataset_checks_the_dtype_as_zarr_python_3():
    """AsyncGroup.require_dataset took zarr-python 2's direction (asked int16 over a stored
    int32: the int32 array); zarr-python 3's raises TypeError: the stored dtype must cast
    safely to the asked one, as require_array checks it."""
    async def main():
        g = await za.group(store=cs.MemoryStore())
        await g.create_array("ds", shape=(3,), dtype="i4")
        with pytest.raises(TypeError, match="int32"):
            await g.require_dataset("ds", shape=(3,), dtype="i2")
        return await g.require_dataset("ds", shape=(3,), dtype="i8")

    assert asyncio.run(main()).dtype == np.dtype("i4")
