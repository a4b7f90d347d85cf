"""After fork, and in multiprocessing workers, chunk I/O must not deadlock: the parent's thread
pool does not survive fork (the child makes its own), and Blosc's global thread pool, a known
fork trap, is switched off."""

import contextlib
import multiprocessing as mp

import numcodecs
import pytest
import numpy as np

import chunkstore as cs
from chunkstore import config


def _child_reads(path, i, q):
    z = cs.open_array(path, mode="r")
    cs.config.set(threads=2)
    untouched = float(z[128:, :].sum())   # rows no child writes
    z2 = cs.open_array(path, mode="r+")
    z2[64 * i:64 * i + 64, :] = 1.0       # a multi-chunk write on the child's own pool
    q.put((i, untouched, float(z2[64 * i:64 * i + 64, :].sum())))


def test_fork_after_parent_used_the_pool(tmp_path):
    path = str(tmp_path / "a.zarr")
    a = np.arange(256 * 256, dtype="f4").reshape(256, 256)
    cs.config.set(threads=2)
    try:
        z = cs.array(a, chunks=(32, 32), store=path,
                     compressor=numcodecs.Blosc(cname="lz4", clevel=5))
        assert float(z[...].sum()) == float(a.sum())   # the parent's pool is now running
        assert numcodecs.blosc.use_threads is False
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        procs = [ctx.Process(target=_child_reads, args=(path, i, q)) for i in range(2)]
        for p in procs:
            p.start()
        results = sorted(q.get(timeout=60) for _ in range(2))
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        expected_untouched = float(a[128:, :].sum())
        assert results == [(0, expected_untouched, 64 * 256.0),
                           (1, expected_untouched, 64 * 256.0)]
    finally:
        cs.config.set(threads=None)


def _pool_worker(args):
    path, lo = args
    z = cs.open_array(path, mode="r+")
    z[lo:lo + 32, :] = lo
    return float(z[lo:lo + 32, :].mean())


def test_multiprocessing_pool_workers(tmp_path):
    path = str(tmp_path / "a.zarr")
    cs.zeros((128, 128), chunks=(32, 32), dtype="f4", store=path)
    cs.open_array(path, mode="r")[...]  # use the pool in the parent first
    with mp.get_context("fork").Pool(2) as pool:
        means = pool.map(_pool_worker, [(path, lo) for lo in range(0, 128, 32)], chunksize=1)
    assert means == [0.0, 32.0, 64.0, 96.0]
    got = cs.open_array(path, mode="r")[...]
    np.testing.assert_array_equal(got[:, 0], np.repeat(np.arange(0, 128, 32), 32))


def test_pool_kept_across_single_threaded_spells():
    # Switching to one thread keeps the pool (idle); switching back reuses it, and only a
    # different size replaces it.
    cs.config.set(threads=2)
    try:
        pool = config.executor()
        assert pool is not None
        cs.config.set(threads=1)
        assert config.executor() is None
        cs.config.set(threads=2)
        assert config.executor() is pool
        cs.config.set(threads=3)
        assert config.executor() is not pool
        with pytest.raises(ValueError, match="positive integer"):
            cs.config.set(threads=0)
    finally:
        cs.config.set(threads=None)


def test_interrupted_wait_lets_no_task_outlive_the_call(tmp_path, monkeypatch):
    # A KeyboardInterrupt while the caller waits for the pool: the call must not return (and
    # release the array's locks) while tasks are still writing.
    import time

    array_mod = __import__("sys").modules["chunkstore.engine.core"]
    sched_mod = __import__("sys").modules["chunkstore.engine.scheduling"]
    # 64 chunks of 128 KiB: enough bytes to go to the pool
    z = cs.zeros((1024, 1024), chunks=(128, 128), dtype="f8", store=str(tmp_path / "a"))
    real_wait = sched_mod.futures_wait
    calls = []

    def interrupted(fs, *args, **kwargs):
        if not calls:
            calls.append(1)
            time.sleep(0.01)
            raise KeyboardInterrupt
        return real_wait(fs, *args, **kwargs)

    monkeypatch.setattr(sched_mod, "futures_wait", interrupted)
    cs.config.set(threads=2)
    running = []
    real_encode = array_mod.ChunkEngine._fast_encode

    def slow_encode(self, *args):
        running.append(1)
        time.sleep(0.005)
        real_encode(self, *args)
        running.pop()

    monkeypatch.setattr(array_mod.ChunkEngine, "_fast_encode", slow_encode)
    try:
        with pytest.raises(KeyboardInterrupt):
            z[...] = np.full((1024, 1024), 3.5)
    finally:
        cs.config.set(threads=None)
    assert running == []  # every task had finished (or never started) when the call raised


def _child_busy(q):
    from chunkstore.engine import scheduling
    q.put(scheduling._busy)


def test_child_does_not_inherit_the_parents_busy_threads():
    # A fork while the parent's threads were at work: the child has none of those threads,
    # and counting them would leave it without helpers for all its reads and writes.
    from chunkstore.engine import scheduling
    got = scheduling._claim(1, 2)   # as a parent thread in the middle of a multi-batch read
    try:
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=_child_busy, args=(q,))
        p.start()
        busy = q.get(timeout=60)
        p.join(60)
    finally:
        scheduling._release(got)
    assert busy == 0


@contextlib.contextmanager
def held_by_a_parent_thread(locks):
    """Hold locks in another thread of this process for the body (what a fork meets when a
    thread of the parent is inside them)."""
    import threading
    held, done = threading.Event(), threading.Event()

    def hold():
        with contextlib.ExitStack() as stack:
            for lock in locks:
                stack.enter_context(lock)
            held.set()
            done.wait(60)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(10)
        yield
    finally:
        done.set()
        t.join()


def _write_shard_element(path, sync_dir):
    z = cs.open_array(path, mode="r+", synchronizer=cs.ProcessSynchronizer(sync_dir))
    z[0, 1] = 42


@pytest.mark.parametrize("synchronized", [True, False])
def test_a_child_forked_while_a_parent_thread_holds_shard_locks_writes(tmp_path,
                                                                      synchronized):
    """A parent thread inside a shard's read-modify-write at the fork held its in-process
    shard lock (format/shard_io's stripes): the child inherited it held, hung at its first
    write of such a shard, holding its kernel region locks, and every other writer of
    those chunks (the parent's too) hung behind it. Here a parent thread holds every stripe
    (and a sharded view's index-cache lock) across the fork: the child writes and ends."""
    from chunkstore.format import shard_io
    path, sync_dir = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    sync = cs.ProcessSynchronizer(sync_dir) if synchronized else None
    z = cs.create(shape=(16, 16), chunks=(4, 4), shards=(16, 16), zarr_format=3, dtype="i4",
                  fill_value=-1, store=path, synchronizer=sync)
    z[5, 5] = 7
    view_lock = z._handle.engine.layout.chunk_store._cache_lock
    with held_by_a_parent_thread([*shard_io._STRIPES, view_lock]):
        ctx = mp.get_context("fork")
        if synchronized:
            p = ctx.Process(target=_write_shard_element, args=(path, sync_dir))
        else:  # (the parent's handle, used in the child)
            p = ctx.Process(target=z.__setitem__, args=((0, 1), 42))
        p.start()
        p.join(30)
        hung = p.is_alive()
        if hung:
            p.kill()
            p.join()
    assert not hung and p.exitcode == 0
    assert cs.open_array(path, mode="r")[0, 1] == 42 and z[5, 5] == 7


class _Owner:
    """Something holding locks (weakly referable, as stores and views are)."""


def _child_takes(owner, q):
    """(a forked child) Take each of owner's locks from several threads at once."""
    import threading
    got = []

    def take():
        for lock in (owner.lock, owner.rlock):
            if lock.acquire(timeout=5):
                got.append(True)
                lock.release()
            else:
                got.append(False)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    q.put(got)


def test_fork_safe_locks_held_by_a_parent_thread_are_free_in_the_child():
    """Locks made by fork_safe are made anew in a forked child (by the fork handler, while
    the child has one thread: made at first use instead, threads taking one at once each
    made their own and released the other's)."""
    import threading

    from chunkstore.forksafe import fork_safe
    owner = _Owner()
    fork_safe(owner, "lock")
    fork_safe(owner, "rlock", threading.RLock)
    with held_by_a_parent_thread([owner.lock, owner.rlock]):
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=_child_takes, args=(owner, q))
        p.start()
        assert q.get(timeout=60) == [True] * 8
        p.join(10)
        assert not owner.lock.acquire(blocking=False)  # (the parent's still held)

def _read_store(store, q):
    store["k2"] = b"w"           # (a write takes the store's lock)
    q.put(bytes(store["k"]) + bytes(store["k2"]))


def test_a_memory_store_locked_by_a_parent_thread_reads_in_a_forked_child():
    """A MemoryStore's lock held by a parent thread at the fork is made anew in the child
    (its first write there hung)."""
    store = cs.MemoryStore()
    store["k"] = b"v"
    with held_by_a_parent_thread([store._lock]):
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=_read_store, args=(store, q))
        p.start()
        assert q.get(timeout=30) == b"vw"
        p.join(10)
