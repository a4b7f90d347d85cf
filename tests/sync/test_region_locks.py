"""The region-locking protocol (chunkstore.sync.locking) under the synchronizers: disjoint writes
run in parallel however many chunks they touch, overlapping ones and resizes exclude each
other, no deadlock under random overlapping regions, a killed holder's locks go away, old
lock directories are refused, and fork leaves the child usable."""

import fcntl
import itertools
import multiprocessing as mp
import os
import pickle
import signal
import threading
import time

import fasteners
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.sync.locking import (BITS, E_BASE, F_BASE, FULL, GUARD, P_BASE, RegionLock,
                                     box_ranges, chunk_ranges, open_region_file)

CTX = mp.get_context("spawn")


def _box(rows, cols):
    return np.array(list(itertools.product(rows, cols)), dtype=np.int64).reshape(-1, 2)


def _covers(ranges, off):
    return any(s <= off <= e for s, e in ranges)


def _offset(c, ndim, base=F_BASE):
    b = BITS // ndim
    return base + sum((int(x) & ((1 << b) - 1)) << (b * (ndim - 1 - d))
                            for d, x in enumerate(c))


# ----------------------------------------------------------------------------- ranges
@pytest.mark.parametrize("seed", range(20))
def test_ranges_lock_exactly_the_touched_chunks_of_the_grid(seed):
    rng = np.random.default_rng(seed)
    ndim = int(rng.integers(1, 4))
    grid = tuple(int(g) for g in rng.integers(1, 7, ndim))
    every = np.array(list(itertools.product(*[range(g) for g in grid])), dtype=np.int64)
    touched = every[rng.random(len(every)) < rng.random()]
    if rng.random() < 0.5:  # a box, as slices give
        lo = [int(rng.integers(0, g)) for g in grid]
        hi = [int(rng.integers(l, g)) + 1 for l, g in zip(lo, grid)]
        touched = np.array(list(itertools.product(*[range(a, b) for a, b in zip(lo, hi)])),
                           dtype=np.int64)
    ranges = chunk_ranges(touched, grid)
    assert ranges == sorted(ranges)
    assert all(e >= s for s, e in ranges)
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))   # disjoint
    tset = set(map(tuple, touched.tolist()))
    for c in every:  # every in-grid chunk: locked if and only if touched
        assert _covers(ranges, _offset(c, ndim)) == (tuple(c.tolist()) in tset), c
    # Merged down to a few ranges: still covers everything touched.
    few = chunk_ranges(touched, grid, max_ranges=2)
    assert len(few) <= 2
    assert all(_covers(few, _offset(c, ndim)) for c in touched)


@pytest.mark.parametrize("seed", range(30))
def test_few_chunk_ranges_lock_exactly_the_touched_chunks_in_runs(seed):
    # Writes of up to FEW_CHUNKS chunks (most writes) go through chunkstore._core.lockspace:
    # the same contract, with repeats, stale grids and coordinates that wrap.
    from chunkstore.sync.locking import FEW_CHUNKS
    rng = np.random.default_rng(100 + seed)
    ndim = int(rng.integers(1, 5))
    grid = tuple(int(g) for g in rng.integers(1, 6, ndim))
    every = np.array(list(itertools.product(*[range(g) for g in grid])), dtype=np.int64)
    n = int(rng.integers(1, FEW_CHUNKS + 1))
    touched = every[rng.integers(0, len(every), n)]          # repeats happen
    stale = tuple(int(rng.integers(1, g + 1)) for g in grid)  # a shape seen smaller:
    r = chunk_ranges(touched, stale)                          # locks more, never less
    assert all(_covers(r, _offset(c, ndim)) for c in touched)
    ranges = chunk_ranges(touched, grid)
    assert ranges == sorted(ranges) and all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))
    tset = set(map(tuple, touched.tolist()))
    for c in every:
        assert _covers(ranges, _offset(c, ndim)) == (tuple(c.tolist()) in tset), c
    # one range per run of chunks consecutive in the C-order grid
    lin = sorted({int(np.ravel_multi_index(c, grid)) for c in tset})
    runs = 1 + sum(1 for a, b in zip(lin, lin[1:]) if b != a + 1)
    assert len(ranges) == runs
    # the synchronizers' ranges: both spaces, worked out once
    sync = cs.ThreadSynchronizer()
    one = touched[:1]
    assert sync.chunk_ranges(one, grid) == chunk_ranges(one, grid) + chunk_ranges(
        one, grid, base=P_BASE)
    # wrapped coordinates (past their bits, or negative): each still covered
    wrapped = touched.copy()
    wrapped[0, 0] = -1 - int(rng.integers(0, 3))
    wrapped[-1, -1] += 1 << (BITS // ndim)
    r = chunk_ranges(wrapped, grid)
    assert all(_covers(r, _offset(c, ndim)) for c in wrapped)
    assert r == sorted(r) and all(a[1] < b[0] for a, b in zip(r, r[1:]))


def test_slab_is_one_range_and_shared_edge_rows_overlap():
    grid = (64, 64)
    top = chunk_ranges(_box(range(0, 32), range(64)), grid)
    bottom = chunk_ranges(_box(range(32, 64), range(64)), grid)
    edge = chunk_ranges(_box(range(31, 64), range(64)), grid)
    assert len(top) == len(bottom) == 1
    assert top[0][1] < bottom[0][0]              # aligned halves: disjoint
    assert edge[0][0] <= top[0][1]               # a shared chunk row: they conflict


def test_stale_grid_and_wrapped_coordinates_still_cover():
    touched = _box(range(3), range(5))
    for grid in [(1, 1), (3, 5), (100, 100)]:   # a stale view of the shape locks more, or
        r = chunk_ranges(touched, grid)           # the same, never less
        assert all(_covers(r, _offset(c, 2)) for c in touched)
    big = np.array([[2 ** 40, 1], [0, 1]], dtype=np.int64)     # past 31 bits: wraps
    r = chunk_ranges(big, (2 ** 41, 2))
    assert all(_covers(r, _offset(c, 2)) for c in big)
    assert chunk_ranges(np.zeros((1, 0), np.int64), ()) == [(F_BASE, F_BASE)]


def test_box_ranges_cover_exactly_the_box():
    rng = np.random.default_rng(5)
    for _ in range(30):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(x) for x in rng.integers(1, 7, ndim))
        lo = [int(rng.integers(0, s)) for s in shape]
        hi = [int(rng.integers(a, s)) for a, s in zip(lo, shape)]
        for cap in (256, 2, 1):
            r = box_ranges(lo, hi, shape, cap)
            assert len(r) <= max(cap, 1) and r == sorted(r)
            for e in itertools.product(*[range(s) for s in shape]):
                inside = all(a <= x <= b for a, x, b in zip(lo, e, hi))
                got = _covers(r, _offset(e, ndim, E_BASE))
                if cap == 256:
                    assert got == inside, (shape, lo, hi, e)   # exact when not capped
                elif inside:
                    assert got
    # Slabs of rows: one range each; neighbours sharing a chunk still do not overlap.
    top = box_ranges((0, 0), (2079, 4095), (4096, 4096))
    bottom = box_ranges((2080, 0), (4095, 4095), (4096, 4096))
    assert len(top) == len(bottom) == 1 and top[0][1] < bottom[0][0]
    assert box_ranges((), (), ()) == [(E_BASE, E_BASE)]
    assert all(e < F_BASE < P_BASE for _, e in top + bottom)   # elements below chunks


def _write_ranges(sync, lo, hi, shape, chunks):
    """What a write of the box lo..hi (inclusive) holds for all of it: its chunks."""
    coords = np.array(list(itertools.product(*[range(a // c, b // c + 1) for a, b, c in
                                               zip(lo, hi, chunks)])), dtype=np.int64)
    grid = [-(-s // c) for s, c in zip(shape, chunks)]
    return sync.chunk_ranges(coords, grid)


# ----------------------------------------------------------------------------- threads
def _syncs(tmp_path):
    return [cs.ThreadSynchronizer(max_chunk_locks=4),
            cs.ProcessSynchronizer(str(tmp_path / "locks"), max_chunk_locks=4)]


def _in_thread(fn):
    done = threading.Event()
    err = []

    def run():
        try:
            fn()
        except BaseException as e:  # pragma: no cover - reported by the caller
            err.append(e)
        finally:
            done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return done, err


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_disjoint_large_writes_run_while_another_holds_its_region(tmp_path, kind):
    sync = _syncs(tmp_path)[kind == "process"]
    z = cs.zeros((512, 512), chunks=(8, 8), dtype="i4", store=str(tmp_path / "a.zarr"),
                 synchronizer=sync)
    grid = (64, 64)
    # Hold what a split write of rows 0..251 holds (2016 whole chunks, far over
    # max_chunk_locks=4; chunk row 31 partly): its box, whole chunks, reserved partials.
    held, _ = sync.split_locks("", (0, 0), (251, 511), (512, 512), _box(range(31), range(64)),
                               _box([31], range(64)), grid)
    with held:
        done, err = _in_thread(lambda: z.__setitem__((slice(256, 512), slice(None)), 5))
        assert done.wait(30), "a disjoint write waited for another region"
        assert not err
        # Overlapping, and touching chunks the holder covers whole: waits. (An overlapping
        # write touching only the holder's partial chunks may run now; the holder's
        # read-modify-write of those then comes wholly before or after it.)
        blocked, err2 = _in_thread(lambda: z.__setitem__((slice(240, 260), slice(None)), 7))
        resized, err3 = _in_thread(lambda: z.resize(512, 520))
        assert not blocked.wait(0.5), "an overlapping write ran while the region was held"
        assert not resized.is_set(), "resize ran while a write held its region"
    assert blocked.wait(30) and resized.wait(30)
    assert not err2 and not err3
    got = cs.open_array(str(tmp_path / "a.zarr"), mode="r")
    assert got.shape == (512, 520)
    np.testing.assert_array_equal(got[260:512, :512], 5)
    np.testing.assert_array_equal(got[240:260, :512], 7)


def test_resize_holds_off_writes(tmp_path):
    for sync in _syncs(tmp_path):
        lock_z = cs.zeros((16, 16), chunks=(4, 4), store={}, synchronizer=sync)
        with sync.exclusive(""):
            done, err = _in_thread(lambda: lock_z.__setitem__((0, 0), 1))
            assert not done.wait(0.3)
        assert done.wait(30) and not err


def test_region_lock_threads_random_overlaps_no_deadlock_and_mutual_exclusion():
    lock = RegionLock()
    owner = {}  # byte -> thread holding it
    errors = []
    stop = time.monotonic() + 1.5

    def work(seed):
        rng = np.random.default_rng(seed)
        me = threading.get_ident()
        while time.monotonic() < stop:
            cells = rng.choice(200, size=int(rng.integers(1, 12)), replace=False)
            rows = np.stack([cells // 20, cells % 20], axis=1)
            ranges = FULL if rng.random() < 0.05 else chunk_ranges(rows, (10, 20),
                                                                    int(rng.integers(1, 5)))
            lock.acquire(ranges)
            try:
                keys = [(s, e) for s, e in ranges]
                for k in keys:
                    if owner.setdefault(k, me) != me:
                        errors.append(k)
                time.sleep(0.0005)
                for k in keys:
                    owner.pop(k, None)
            finally:
                lock.release(ranges)

    ts = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(6)]
    [t.start() for t in ts]
    [t.join(60) for t in ts]
    assert not any(t.is_alive() for t in ts), "threads deadlocked"
    assert not errors
    assert lock.held() == []


# ----------------------------------------------------------------------------- processes
def _hold_worker(sync_path, coords, grid, full, ready, release):
    sync = cs.ProcessSynchronizer(sync_path)
    cm = sync.exclusive("") if full else sync.hold("", _write_ranges(sync, *coords))
    with cm:
        ready.set()
        if release is None:
            time.sleep(120)   # until killed
        else:
            release.wait(60)


def test_other_process_region_blocks_only_overlapping_writes(tmp_path):
    locks = str(tmp_path / "locks")
    sync = cs.ProcessSynchronizer(locks)
    z = cs.zeros((256, 256), chunks=(8, 8), dtype="i4", store=str(tmp_path / "a.zarr"),
                 synchronizer=sync)
    ready, release = CTX.Event(), CTX.Event()
    p = CTX.Process(target=_hold_worker, args=(
        locks, ((0, 0), (127, 255), (256, 256), (8, 8)), None, False, ready, release))
    p.start()
    try:
        assert ready.wait(60)
        z[128:, :] = 3                       # 512 chunks, none of the held ones: no wait
        done, err = _in_thread(lambda: z.__setitem__((slice(120, 136), slice(None)), 4))
        assert not done.wait(0.5)            # row 15 of chunks is held by the other process
        release.set()
        assert done.wait(30) and not err
    finally:
        release.set()
        p.join(30)
    assert p.exitcode == 0
    np.testing.assert_array_equal(z[136:, :], 3)
    np.testing.assert_array_equal(z[120:136, :], 4)


def test_kill_9_of_a_lock_holder_releases_its_locks(tmp_path):
    locks = str(tmp_path / "locks")
    z = cs.zeros((64, 64), chunks=(8, 8), dtype="i4", store=str(tmp_path / "a.zarr"),
                 synchronizer=cs.ProcessSynchronizer(locks))
    ready = CTX.Event()
    p = CTX.Process(target=_hold_worker, args=(locks, None, None, True, ready, None))
    p.start()
    try:
        assert ready.wait(60)
        done, err = _in_thread(lambda: z.__setitem__((slice(None), slice(None)), 9))
        assert not done.wait(0.5)            # the whole array is held by the child
        os.kill(p.pid, signal.SIGKILL)
        assert done.wait(30), "the killed process's locks were not released"
        assert not err
    finally:
        if p.is_alive():
            p.kill()
        p.join(30)
    assert p.exitcode == -signal.SIGKILL
    np.testing.assert_array_equal(z[...], 9)


def _random_regions_worker(store, locks, wid, seconds, barrier, out):
    cs.config.set(threads=1)
    sync = cs.ProcessSynchronizer(locks, max_chunk_locks=3)
    z = cs.open_array(store, mode="r+", synchronizer=sync)
    n = z.shape[0]
    stop = [None]

    def loop(tid):
        rng = np.random.default_rng(100 * wid + tid)
        count = 0
        while time.monotonic() < stop[0]:
            r = rng.random()
            if r < 0.05:
                with sync.exclusive(""):
                    count += 1
                continue
            if r < 0.25:
                ids = rng.choice(n * n, size=int(rng.integers(1, 20)), replace=False)
                z.vindex[ids // n, ids % n] = wid + 1
            else:
                a, b = sorted(rng.integers(0, n + 1, 2))
                c, d = sorted(rng.integers(0, n + 1, 2))
                z[a:b + 1, c:d + 1] = wid + 1
            count += 1
        return count

    barrier.wait()
    stop[0] = time.monotonic() + seconds
    counts = [0, 0]
    ts = [threading.Thread(target=lambda i=i: counts.__setitem__(i, loop(i))) for i in range(2)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    out.put((wid, sum(counts)))


def test_four_processes_random_overlapping_regions_never_deadlock(tmp_path):
    store, locks = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    cs.zeros((48, 48), chunks=(4, 4), dtype="i2", store=store)
    nw, seconds = 4, 2.0
    barrier, out = CTX.Barrier(nw), CTX.Queue()
    procs = [CTX.Process(target=_random_regions_worker,
                         args=(store, locks, w, seconds, barrier, out)) for w in range(nw)]
    [p.start() for p in procs]
    try:
        results = dict(out.get(timeout=120) for _ in range(nw))
    finally:
        for p in procs:
            p.join(60)
            if p.is_alive():  # pragma: no cover - a deadlock: fail, do not hang
                p.kill()
    assert [p.exitcode for p in procs] == [0] * nw
    assert sorted(results) == list(range(nw)) and all(c > 0 for c in results.values())
    got = cs.open_array(store, mode="r")[...]
    assert set(np.unique(got).tolist()) <= set(range(nw + 1))


def _slab_worker(store, locks, bounds, rounds, barrier):
    cs.config.set(threads=1)
    z = cs.open_array(store, mode="r+", synchronizer=cs.ProcessSynchronizer(locks))
    lo, hi = bounds
    base = np.arange(lo, hi, dtype="i4")[:, None] * 1000 + np.arange(z.shape[1], dtype="i4")
    for r in range(rounds):
        barrier.wait()
        z[lo:hi, :] = base + r * 10_000_000


def test_unaligned_slabs_of_four_processes_lose_nothing(tmp_path):
    # Slab edges fall inside chunks, so neighbours read-modify-write shared chunks at once.
    store, locks = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    n, rounds = 200, 5
    cs.zeros((n, 60), chunks=(16, 16), dtype="i4", store=store)
    edges = [0, 37, 90, 141, n]
    barrier = CTX.Barrier(4)
    procs = [CTX.Process(target=_slab_worker,
                         args=(store, locks, (edges[i], edges[i + 1]), rounds, barrier))
             for i in range(4)]
    [p.start() for p in procs]
    [p.join(120) for p in procs]
    assert [p.exitcode for p in procs] == [0] * 4
    expected = (np.arange(n, dtype="i4")[:, None] * 1000 + np.arange(60, dtype="i4")
                + (rounds - 1) * 10_000_000)
    np.testing.assert_array_equal(cs.open_array(store, mode="r")[...], expected)


def _split_box_writer(store, locks, rounds, barrier):
    z = cs.open_array(store, mode="r+", synchronizer=cs.ProcessSynchronizer(locks))
    for r in range(rounds):
        barrier.wait()
        z[17:79, :] = 1000 + r      # partial chunk rows 0 and 2 around 16 whole chunks
        barrier.wait()
        barrier.wait()


def _two_rows_writer(store, locks, rounds, barrier, out):
    z = cs.open_array(store, mode="r+", synchronizer=cs.ProcessSynchronizer(locks))
    rng = np.random.default_rng(2)
    torn = []
    for r in range(rounds):
        barrier.wait()
        time.sleep(float(rng.uniform(0, 0.02)))
        z.oindex[[24, 69], :] = 5000 + r   # no whole chunk of the box: only its edge rows
        barrier.wait()
        values = np.unique(z.oindex[[24, 69], :]).tolist()
        if len(values) != 1:
            torn.append((r, values))
        barrier.wait()
    out.put(torn)


def test_a_split_write_is_serialized_with_a_write_of_its_first_and_last_rows(tmp_path):
    """A large write covering chunks in part in its first and last chunk rows, and another
    process writing two rows of it, one in each of those chunk rows (touching none of its
    whole chunks): the overlap is wholly one write's value. The split write took its first
    row's chunks before its whole chunks and released them, then its last row's: the other
    write landed in between (half the rounds: row 24 its value, row 69 the first's)."""
    store, locks = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    cs.zeros((96, 1024), chunks=(32, 64), dtype="i8", store=store)
    rounds = 20
    barrier, out = CTX.Barrier(2), CTX.Queue()
    procs = [CTX.Process(target=_split_box_writer, args=(store, locks, rounds, barrier)),
             CTX.Process(target=_two_rows_writer, args=(store, locks, rounds, barrier, out))]
    [p.start() for p in procs]
    try:
        torn = out.get(timeout=120)
    finally:
        for p in procs:
            p.join(60)
            if p.is_alive():  # pragma: no cover - a deadlock: fail, do not hang
                p.kill()
    assert [p.exitcode for p in procs] == [0, 0]
    assert not torn, f"overlap not wholly one write's value (round, values): {torn[:5]}"


# ----------------------------------------------------------------------------- files
def test_one_region_file_per_array_and_old_lock_directories_refused(tmp_path):
    locks = tmp_path / "locks"
    store = str(tmp_path / "g.zarr")
    root = cs.group(store)
    root.zeros("a/b", shape=(100, 100), chunks=(5, 5), dtype="i4")
    z = cs.open_array(store, path="a/b", mode="r+",
                      synchronizer=cs.ProcessSynchronizer(str(locks)))
    z[...] = 1
    z[3:50, 7:9] = 2
    # One region file for all chunk locks and the old-protocol fence (opening for r+ reads
    # the metadata without a lock): nothing per chunk.
    assert sorted(os.listdir(locks)) == ["a%2Fb%2F.array-rw.lock", "a%2Fb.regions"]
    # An older chunkstore's writer now fails to open its array lock instead of writing
    # without excluding the new writers.
    old = fasteners.InterProcessReaderWriterLock(str(locks / "a%2Fb%2F.array-rw.lock"))
    with pytest.raises(OSError):
        old.acquire_read_lock()

    # A directory last used by the per-chunk protocol is refused with a clear error ...
    old_dir = tmp_path / "old"
    old_dir.mkdir()
    (old_dir / ".array-rw.lock").write_bytes(b"")
    (old_dir / "0.0.lock").write_bytes(b"")
    # (at the creation, its first use of the directory: nothing is written)
    with pytest.raises(ValueError, match=r"older chunkstore.*clear\(\)"):
        cs.zeros((10,), chunks=(5,), store=str(tmp_path / "y.zarr"),
                 synchronizer=cs.ProcessSynchronizer(str(old_dir)))
    assert not os.path.exists(tmp_path / "y.zarr" / ".zarray")
    # ... until cleared.
    cs.ProcessSynchronizer(str(old_dir)).clear()
    y = cs.zeros((10,), chunks=(5,), store=str(tmp_path / "y.zarr"),
                 synchronizer=cs.ProcessSynchronizer(str(old_dir)))
    y[:] = 1
    np.testing.assert_array_equal(y[...], 1)


def test_unpickled_instances_share_one_descriptor(tmp_path):
    locks = str(tmp_path / "locks")
    a = cs.ProcessSynchronizer(locks)
    b = pickle.loads(pickle.dumps(a))
    assert a._region_lock("x") is b._region_lock("x")
    assert b.max_chunk_locks == a.max_chunk_locks


def _fork_child(z, q):
    z[0:8, :] = 2   # the parent held this region at fork time
    q.put("ok")


def test_fork_while_a_thread_holds_a_region(tmp_path):
    locks = str(tmp_path / "locks")
    sync = cs.ProcessSynchronizer(locks)
    z = cs.zeros((16, 16), chunks=(8, 8), dtype="i4", store=str(tmp_path / "a.zarr"),
                 synchronizer=sync)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    held, go = threading.Event(), threading.Event()

    def holder():
        with sync.hold("", _write_ranges(sync, (0, 0), (7, 15), (16, 16), (8, 8))):
            held.set()
            go.wait(30)

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(30)
    p = ctx.Process(target=_fork_child, args=(z, q))
    p.start()
    try:
        time.sleep(0.3)
        assert q.empty()      # the parent's lock excludes the child ...
        go.set()
        assert q.get(timeout=30) == "ok"   # ... and its release lets the child on
    finally:
        go.set()
        t.join(30)
        p.join(30)
    assert p.exitcode == 0
    np.testing.assert_array_equal(z[0:8, :], 2)


def _wait_for(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.001)


def test_a_waiting_whole_space_request_is_served_before_new_writes():
    """Fairness: while a request of the whole space (resize, append, metadata change) waits,
    a new request waits for it to be served, even for ranges that are free, so a stream of
    short writes cannot keep an append waiting (one waited 1.6-7.8 s behind 8 writing
    threads)."""
    lock = RegionLock()
    a, b = [(F_BASE + 1, F_BASE + 1)], [(F_BASE + 5, F_BASE + 5)]
    order = []
    lock.acquire(a)                         # a write in progress
    whole = threading.Event()

    def resize():
        lock.acquire(FULL)
        order.append("whole")
        whole.wait(10)
        lock.release(FULL)

    def write():
        lock.acquire(b)                     # free, but the whole request came first
        order.append("write")
        lock.release(b)

    r_done, r_err = _in_thread(resize)
    _wait_for(lambda: lock._whole_waiting == 1)
    w_done, w_err = _in_thread(write)
    assert not w_done.wait(0.3) and order == []
    lock.release(a)
    _wait_for(lambda: order == ["whole"])
    assert not w_done.wait(0.1)             # still behind the whole space, now held
    whole.set()
    assert r_done.wait(10) and w_done.wait(10) and not r_err and not w_err
    assert order == ["whole", "write"]
    assert lock.held() == []


def test_the_metadata_guards_holder_is_not_held_back_by_a_waiting_whole_request():
    """A write planned again holds the metadata guard, then takes its chunks: a request of
    the whole space waiting meanwhile (for the guard) must not hold those back, or each
    would wait for the other."""
    lock = RegionLock()
    lock.acquire(GUARD)
    r_done, r_err = _in_thread(lambda: (lock.acquire(FULL), lock.release(FULL)))
    _wait_for(lambda: lock._whole_waiting == 1)
    chunk = [(F_BASE + 3, F_BASE + 3), (P_BASE + 3, P_BASE + 3)]
    lock.acquire(chunk)                     # this thread, the guard's holder: goes on
    assert not r_done.wait(0.1)
    lock.release(chunk)
    lock.release(GUARD)
    assert r_done.wait(10) and not r_err
    assert lock.held() == [] and lock._guard_holder is None


def test_appends_are_not_starved_by_a_stream_of_writes(tmp_path):
    """An append through one handle while 6 threads write small overlapping regions through
    others in a loop: each append is served (every write holds its chunks a short while),
    and nothing is lost: the appended rows are all there and every written element holds a
    writer's value."""
    path = str(tmp_path / "a.zarr")
    a = cs.create((32, 32), chunks=(8, 8), dtype="i4", store=path, fill_value=-1)
    stop = threading.Event()
    errors = []

    def writer(i):
        h = cs.open_array(path, mode="r+")
        rng = np.random.default_rng(i)
        try:
            while not stop.is_set():
                y, x = (int(v) for v in rng.integers(0, 24, 2))
                h[y:y + 8, x:x + 8] = i
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    try:
        for _ in range(10):
            done, err = _in_thread(lambda: a.append(np.full((1, 32), 99, dtype="i4")))
            assert done.wait(60) and not err
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors
    got = cs.open_array(path, mode="r")[...]
    assert got.shape == (42, 32)
    assert (got[32:] == 99).all()
    assert np.isin(got[:32], [-1, 0, 1, 2, 3, 4, 5]).all()


@pytest.mark.parametrize("fmt", [2, 3])
def test_writes_are_not_starved_by_a_thread_changing_the_metadata_back_to_back(fmt):
    """A thread appending in a loop (a resize's or a fill value change's lock is the same:
    the whole lock space) took the whole space again at once after each change (it held
    the GIL when the waiting write was woken): a write through another handle waited as
    long as the loop ran. The writes woken by a change's release get their turn first
    now."""
    store: dict = {}
    cs.create((16, 12), chunks=(2, 3), dtype="f8", fill_value=0.0, store=store,
              zarr_format=fmt)
    stop = threading.Event()

    def changer():
        h = cs.open_array(store, mode="r+")
        while not stop.is_set():
            h.append(np.zeros((1, 12)))

    h = cs.open_array(store, mode="r+")

    def writes():
        for _ in range(20):
            h.vindex[[0, 5], [1, 2]] = 5.0

    thread = threading.Thread(target=changer)
    thread.start()
    try:
        done, err = _in_thread(writes)
        assert done.wait(30) and not err
    finally:
        stop.set()
        thread.join(60)
    assert (cs.open_array(store, mode="r").vindex[[0, 5], [1, 2]] == 5.0).all()


def _kernel_holder(path, byte, held, release):
    fd = open_region_file(path)
    fcntl.lockf(fd, fcntl.LOCK_EX, 1, byte, os.SEEK_SET)
    held.set()
    release.wait(60)
    os.close(fd)


def _kernel_probe(path, byte, out):
    fd = open_region_file(path)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, byte, os.SEEK_SET)
        out.put("free")
    except OSError:
        out.put("taken")
    os.close(fd)


def _probe(path, byte):
    q = CTX.Queue()
    p = CTX.Process(target=_kernel_probe, args=(path, byte, q))
    p.start()
    try:
        return q.get(timeout=60)
    finally:
        p.join(30)


def test_a_whole_request_holds_the_free_pieces_of_the_kernel_space_while_it_waits(tmp_path):
    """Between processes: a request of the whole space that finds part of it held by
    another process takes the rest in ascending pieces and holds them while it waits, so
    other processes' writes of chunks in those pieces wait for it (before, it held nothing
    until the whole space was free at one moment, which a stream of writes rarely leaves:
    one append in 20 waited 1.3 s behind 4 writing processes). Once it has the space, the
    holder's release lets it go on, and its own release frees everything."""
    path = str(tmp_path / "a.regions")
    high = F_BASE + (1000 << 30)   # the F byte of chunk (1000, 0) of a 2-d grid
    low = F_BASE + 5               # chunk (0, 5)
    held, release = CTX.Event(), CTX.Event()
    holder = CTX.Process(target=_kernel_holder, args=(path, high, held, release))
    holder.start()
    try:
        assert held.wait(60)
        lock = RegionLock(open_region_file(path), path)
        done, err = _in_thread(lambda: lock.acquire(FULL))
        assert not done.wait(0.5)              # waits for the chunk held
        assert _probe(path, low) == "taken"    # what lies below it is held meanwhile
        assert _probe(path, P_BASE + 5) == "free"   # (the P space: only once F is held)
    finally:
        release.set()
        holder.join(60)
    assert done.wait(60) and not err
    assert _probe(path, high) == "taken"
    lock.release(FULL)
    assert _probe(path, low) == "free" and _probe(path, high) == "free"
