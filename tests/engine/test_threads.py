"""Many user threads on one array: exact reads, reads during writes, nested use (issue 18).

The calling thread works on its own read's batches and the shared pool helps only while it
has idle workers (chunkstore.engine.scheduling): these tests check that what threads read is what
NumPy reads, that a read racing a writer sees each chunk whole, and that reads from inside
pool tasks or dask's threaded scheduler neither deadlock nor use more threads than allowed.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from numcodecs import Blosc, Zlib

import chunkstore as cs
from chunkstore import config
from chunkstore.engine import scheduling
from chunkstore.engine.array import Array
from chunkstore.engine.core import ChunkEngine

TIMEOUT = 120  # seconds: a deadlock fails the test instead of hanging the suite


@pytest.fixture
def threads():
    """Set chunkstore's thread count for one test, restoring the default after."""
    def set_(n):
        cs.config.set(threads=n)
    yield set_
    cs.config.set(threads=None)


def _volume(shape=(6, 200, 300), seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2**16, size=shape, dtype=np.uint16)


def _tiles(shape, n, seed=1):
    """Random boxes (some single planes, some several, varied sizes) inside shape."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k0 = int(rng.integers(0, shape[0]))
        k1 = int(rng.integers(k0 + 1, shape[0] + 1))
        h, w = int(rng.integers(1, 130)), int(rng.integers(1, 130))
        y, x = int(rng.integers(0, shape[1] - h + 1)), int(rng.integers(0, shape[2] - w + 1))
        plane = k0 if rng.random() < 0.5 else slice(k0, k1)
        out.append((plane, slice(y, y + h), slice(x, x + w)))
    return out


def _arrays(tmp_path, vol):
    """The volume as a Blosc v2 array, a zlib v2 array (the non-Blosc decode path) and a
    sharded v3 array, all on disk."""
    a = cs.open_array(str(tmp_path / "blosc.zarr"), mode="w", shape=vol.shape,
                      chunks=(1, 64, 64), dtype=vol.dtype,
                      compressor=Blosc(cname="lz4", shuffle=Blosc.SHUFFLE))
    a[...] = vol
    b = cs.open_array(str(tmp_path / "zlib.zarr"), mode="w", shape=vol.shape,
                      chunks=(2, 50, 70), dtype=vol.dtype, compressor=Zlib(1))
    b[...] = vol
    c = cs.create_array(str(tmp_path / "sharded.zarr"), shape=vol.shape, chunks=(1, 32, 32),
                        shards=(2, 128, 128), dtype=vol.dtype,
                        compressors=Blosc(cname="lz4"), zarr_format=3)
    c[...] = vol
    return {"blosc": a, "zlib": b, "sharded": c}


@pytest.mark.parametrize("nthreads", [1, 2, 4])
def test_many_threads_on_one_handle_read_what_numpy_reads(tmp_path, threads, nthreads):
    vol = _volume()
    handles = _arrays(tmp_path, vol)
    threads(nthreads)
    sels = _tiles(vol.shape, 120)
    for name, z in handles.items():
        # mostly small tiles, and some reads large enough for the pool to help
        work = [s for s in sels] + [(slice(None), slice(0, 200), slice(0, 300)),
                                    (slice(1, 5), slice(10, 190), slice(None, None, 2))] * 4

        def read(sel, z=z):
            return sel, z[sel]
        with ThreadPoolExecutor(8) as ex:
            for sel, got in ex.map(read, work, timeout=TIMEOUT):
                want = vol[sel]
                assert got.shape == want.shape, (name, sel)
                np.testing.assert_array_equal(got, want, err_msg=f"{name} {sel}")


@pytest.mark.parametrize("kind", ["directory", "memory", "sharded"])
def test_reads_during_writes_see_each_chunk_whole(tmp_path, threads, kind):
    # A writer fills the whole array with 1, 2, 3, ...; readers on other threads must see
    # every chunk all of one value (never half old, half new), and the values only grow.
    threads(2)
    shape, chunks = (4, 96, 96), (1, 32, 32)
    if kind == "sharded":
        z = cs.create_array(str(tmp_path / "s.zarr"), shape=shape, chunks=chunks,
                            shards=(1, 64, 64), dtype="u4", zarr_format=3, fill_value=0)
    else:
        store = str(tmp_path / "a.zarr") if kind == "directory" else {}
        z = cs.open_array(store, mode="w", shape=shape, chunks=chunks, dtype="u4",
                          fill_value=0)
    rounds = 25
    done = threading.Event()
    errors = []

    def writer():
        try:
            for k in range(1, rounds + 1):
                z[...] = np.full(shape, k, dtype="u4")
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            done.set()

    def reader(seed):
        rng = np.random.default_rng(seed)
        last = {}
        while not done.is_set():
            k = int(rng.integers(0, shape[0]))
            a = z[k]
            for cy in range(0, shape[1], chunks[1]):
                for cx in range(0, shape[2], chunks[2]):
                    block = a[cy:cy + chunks[1], cx:cx + chunks[2]]
                    v = int(block.flat[0])
                    if not (block == v).all():
                        errors.append(AssertionError(f"chunk {(k, cy, cx)} mixes values "
                                                     f"{np.unique(block)}"))
                        return
                    if v < last.get((k, cy, cx), 0):
                        errors.append(AssertionError(f"chunk {(k, cy, cx)} went back in time"))
                        return
                    last[k, cy, cx] = v

    ts = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(i,))
                                              for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(TIMEOUT)
        assert not t.is_alive(), "a reader or the writer hung"
    assert not errors, errors[0]
    np.testing.assert_array_equal(z[...], np.full(shape, rounds, dtype="u4"))


class _Census:
    """Counts, across threads, how many run chunk batches at once (ChunkEngine._fast_decode is
    the GIL-free decode every batch of these Blosc arrays ends in), and which threads."""

    def __init__(self, monkeypatch):
        self.lock = threading.Lock()
        self.now = self.peak = self.pool_now = self.pool_peak = 0
        self.names = set()
        real = ChunkEngine._fast_decode
        census = self

        def counted(self_, *args, **kwargs):
            pool = threading.current_thread().name.startswith("chunkstore")
            with census.lock:
                census.now += 1
                census.pool_now += pool
                census.peak = max(census.peak, census.now)
                census.pool_peak = max(census.pool_peak, census.pool_now)
                census.names.add(threading.current_thread().name)
            try:
                threading.Event().wait(0.002)  # let batches overlap, so peaks are seen
                return real(self_, *args, **kwargs)
            finally:
                with census.lock:
                    census.now -= 1
                    census.pool_now -= pool

        monkeypatch.setattr(ChunkEngine, "_fast_decode", counted)


def _big_array(tmp_path, name="big.zarr", seed=3, store=None, one_shard=False):
    # 64 chunks of 128 KiB (Blosc: the batch kernels' path): a whole read is 8 MiB, over the
    # size where helpers join (4 MiB); one_shard: all of them inner chunks of one 8 MiB shard
    vol = _volume((8, 512, 1024), seed=seed)
    where = store if store is not None else str(tmp_path / name)
    if one_shard:
        z = cs.create_array(where, shape=vol.shape, chunks=(1, 128, 512), shards=vol.shape,
                            dtype=vol.dtype, compressors=Blosc(cname="lz4"))
    else:
        z = cs.open_array(where, mode="w", shape=vol.shape, chunks=(1, 128, 512),
                          dtype=vol.dtype, compressor=Blosc(cname="lz4"))
    z[...] = vol
    return z, vol


def test_one_caller_gets_the_pools_help(tmp_path, threads, monkeypatch):
    z, vol = _big_array(tmp_path)
    threads(2)
    census = _Census(monkeypatch)
    np.testing.assert_array_equal(z[...], vol)
    assert any(n.startswith("chunkstore") for n in census.names)  # a helper took batches
    assert census.pool_peak <= 1  # threads=2: the caller and at most one helper
    assert census.peak <= 2


def test_threads_1_uses_no_other_thread(tmp_path, threads, monkeypatch):
    z, vol = _big_array(tmp_path)
    threads(1)
    census = _Census(monkeypatch)
    np.testing.assert_array_equal(z[...], vol)
    with ThreadPoolExecutor(3, thread_name_prefix="user") as ex:
        for got in ex.map(lambda _: z[...], range(3), timeout=TIMEOUT):
            np.testing.assert_array_equal(got, vol)
    assert all(not n.startswith("chunkstore") for n in census.names), census.names


def test_reads_inside_pool_tasks_do_not_deadlock(tmp_path, threads, monkeypatch):
    # Every pool worker runs a task that itself reads a large selection (which would hand
    # batches to the pool): with callers waiting for queued helpers this deadlocks.
    z, vol = _big_array(tmp_path)
    threads(2)
    census = _Census(monkeypatch)
    pool = config.executor()

    def task(i):
        return z[i % 3:i % 3 + 2]  # 8 chunks, 1 MiB: enough for helpers to be wanted
    futures = [pool.submit(task, i) for i in range(8)]
    for i, f in enumerate(futures):
        np.testing.assert_array_equal(f.result(timeout=TIMEOUT), vol[i % 3:i % 3 + 2])
    assert census.peak <= 2  # the two pool threads, no more
    assert scheduling._busy == 0


@pytest.mark.parametrize("nthreads", [1, 2])
def test_dask_threaded_scheduler_neither_deadlocks_nor_oversubscribes(tmp_path, threads,
                                                                      monkeypatch, nthreads):
    da = pytest.importorskip("dask.array")
    import dask
    z, vol = _big_array(tmp_path)
    threads(nthreads)
    census = _Census(monkeypatch)
    d = da.from_array(z, chunks=(1, 256, 512))  # each dask task reads 2 chunks (512 KiB)
    big = da.from_array(z, chunks=(2, 256, 1024))  # each task reads 8 chunks (2 MiB)
    with dask.config.set(scheduler="threads", num_workers=4):
        assert int(d.sum(dtype="u8").compute()) == int(vol.sum(dtype="u8"))
        np.testing.assert_array_equal(big.compute(), vol)
    # Four dask workers read at once; chunkstore's pool adds at most threads-1 helpers.
    assert census.pool_peak <= nthreads - 1
    assert census.peak <= 4 + nthreads - 1
    assert scheduling._busy == 0


def test_error_in_a_helper_batch_is_raised_and_nothing_outlives_the_call(tmp_path, threads):
    z, vol = _big_array(tmp_path)
    threads(2)
    # corrupt one chunk late in the read's order
    key = "3.1.1"
    store = z.store
    store[key] = b"\x00" * 64
    with pytest.raises(Exception) as ei:
        z[...]
    assert key in str(ei.value)
    assert scheduling._busy == 0
    # the array still reads where it is intact
    np.testing.assert_array_equal(z[0], vol[0])


def test_scratch_buffers_are_bounded_and_not_shared_between_nested_uses():
    a = scheduling.take_scratch((4, 4), np.dtype("u2"))
    scheduling.give_scratch(a)
    b = scheduling.take_scratch((4, 4), np.dtype("u2"))
    assert b is a  # reused by the same thread
    c = scheduling.take_scratch((4, 4), np.dtype("u2"))
    assert c is not b  # while b is in use, a nested take gets its own
    scheduling.give_scratch(b)
    seen = []
    t = threading.Thread(target=lambda: seen.append(scheduling.take_scratch((4, 4),
                                                                             np.dtype("u2"))))
    t.start()
    t.join()
    assert seen[0] is not b  # another thread has its own
    huge = scheduling.take_scratch((scheduling.SCRATCH_KEEP_BYTES + 1,), np.dtype("u1"))
    scheduling.give_scratch(huge)
    assert scheduling.take_scratch((scheduling.SCRATCH_KEEP_BYTES + 1,), np.dtype("u1")) \
        is not huge  # too large to keep


def test_failed_batches_raise_the_first_in_order_not_in_time():
    # Two batches fail; the one later in order fails first in time. The error raised (and
    # the chunk it names) must not depend on which thread got there first.
    def work(lo, hi):
        if lo == 0:
            time.sleep(0.2)
        raise ValueError(f"batch at {lo}")

    with config.set(threads=2):
        with pytest.raises(ValueError, match="batch at 0$"):
            scheduling.run(2, work, 2**30)


@pytest.mark.parametrize("inline", [scheduling.INLINE_BYTES, scheduling.READ_INLINE_BYTES])
def test_one_batch_says_exactly_when_run_makes_one_call(threads, inline):
    # A write keeps a shard's inner chunks in one batch only when one_batch says the run is
    # split: the two must agree for the threshold a path passes to both (else two batches
    # could rewrite one shard at once).
    threads(2)
    for nbytes in (2**10, 2**17, 2**19, 2**20, 3 * 2**20):
        for n in (1, 2, 3, 4, 7, 8, 9, 33, 200):
            calls = []
            scheduling.run(n, lambda lo, hi: calls.append((lo, hi)), nbytes,
                           inline_bytes=inline)
            assert scheduling.one_batch(n, nbytes, inline) == (len(calls) == 1), (n, nbytes)


def test_reads_take_helpers_only_from_a_larger_size_than_writes(tmp_path, threads,
                                                                 monkeypatch):
    # z[:2] is 16 chunks of 128 KiB (2 MiB): a write of them takes a helper, a read does not
    z, vol = _big_array(tmp_path, seed=4)
    threads(2)
    seen = set()
    real = scheduling._claim

    def claim(want, n):
        got = real(want, n)
        seen.add(got)
        return got
    monkeypatch.setattr(scheduling, "_claim", claim)
    np.testing.assert_array_equal(z[:2], vol[:2])
    assert seen == set()            # read inline: no helper asked for
    z[:2] = vol[:2] + 1
    assert seen                      # the write asked for one
    np.testing.assert_array_equal(z[:2], vol[:2] + 1)


def _one_shard_array(tmp_path, store=None):
    return _big_array(tmp_path, "one_shard.zarr", seed=5, store=store, one_shard=True)


def test_a_read_of_one_shard_is_shared_by_the_threads(tmp_path, threads, monkeypatch):
    z, vol = _one_shard_array(tmp_path)
    threads(2)
    census = _Census(monkeypatch)
    np.testing.assert_array_equal(z[...], vol)  # one shard: its chunks split between threads
    assert any(n.startswith("chunkstore") for n in census.names)
    assert census.peak == 2
    np.testing.assert_array_equal(z[1:3, 100:200, 300:900], vol[1:3, 100:200, 300:900])


def test_a_remote_shard_is_still_read_in_one_batch(tmp_path, threads, monkeypatch):
    # On a store where each request costs a round trip, the shard's ranges stay together.
    class Remote(cs.MemoryStore):
        concurrent_io = False  # (no pipelining: only the "requests are dear" hint below)

    store = Remote()
    z, vol = _one_shard_array(tmp_path, store)
    monkeypatch.setattr(Remote, "concurrent_io", True, raising=False)
    threads(2)
    census = _Census(monkeypatch)
    np.testing.assert_array_equal(z[...], vol)
    assert census.peak == 1 and census.names == {threading.current_thread().name}


def test_threads_from_the_environment_read_once_and_again_after_a_reset(monkeypatch):
    """CHUNKSTORE_THREADS is read at the first use, kept (every read asks for the thread
    count: no environment lookup each time), read again after config.set(threads=None), and
    an explicit setting wins; a bad value raises ValueError naming the variable at each use
    until it is fixed."""
    try:
        monkeypatch.setenv("CHUNKSTORE_THREADS", "3")
        cs.config.set(threads=None)
        assert cs.config.get("threads") == 3
        monkeypatch.setenv("CHUNKSTORE_THREADS", "5")
        assert cs.config.get("threads") == 3          # kept until a reset
        cs.config.set(threads=None)
        assert cs.config.get("threads") == 5
        with cs.config.set(threads=2):
            assert cs.config.get("threads") == 2
        assert cs.config.get("threads") == 5
        monkeypatch.setenv("CHUNKSTORE_THREADS", "many")
        with pytest.raises(ValueError, match="CHUNKSTORE_THREADS"):
            cs.config.set(threads=None)
        for _ in range(2):
            with pytest.raises(ValueError, match="CHUNKSTORE_THREADS"):
                cs.config.get("threads")
        monkeypatch.delenv("CHUNKSTORE_THREADS")
        cs.config.set(threads=None)
        assert cs.config.get("threads") == (os.cpu_count() or 1)
    finally:
        monkeypatch.delenv("CHUNKSTORE_THREADS", raising=False)
        cs.config.set(threads=None)
