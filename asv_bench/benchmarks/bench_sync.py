"""Per-write cost of locking: the same writes with no synchronizer, a ThreadSynchronizer and
a ProcessSynchronizer (lock files on local disk)."""

import shutil
import tempfile

import numpy as np

import chunkstore as cs


class WriteWithLocks:
    params = (["none", "thread", "process"], ["one_chunk", "partial_16_chunks"])
    param_names = ["synchronizer", "write"]

    def setup(self, kind, write):
        self.dir = tempfile.mkdtemp()
        sync = {"none": None, "thread": cs.ThreadSynchronizer(),
                "process": cs.ProcessSynchronizer(self.dir + "/locks")}[kind]
        self.z = cs.zeros((1024, 1024), chunks=(64, 64), dtype="f4",
                          store=self.dir + "/a.zarr", synchronizer=sync)
        self.z[...] = 1.0
        self.one = np.ones((64, 64), dtype="f4")
        self.partial = np.ones((200, 200), dtype="f4")

    def teardown(self, kind, write):
        shutil.rmtree(self.dir, ignore_errors=True)

    def time_write(self, kind, write):
        # 20 writes, so the lock cost per write is time / 20.
        for i in range(20):
            if write == "one_chunk":
                self.z[64 * (i % 16):64 * (i % 16 + 1), 0:64] = self.one
            else:
                o = 10 + 3 * i
                self.z[o:o + 200, o:o + 200] = self.partial


# ----------------------------------------------------------------------------- many writers
# The HPC pattern: P writer processes, released together, each writing its own slab of one
# 4096x4096 float32 array in 64x64 chunks, one thread each. Slabs are chunk-aligned, or
# unaligned (each inner edge half a chunk off, so neighbours share a row of chunks).
N, CHUNK = 4096, 64


def slab_bounds(nproc, aligned, n=N, chunk=CHUNK):
    edges = [n * i // nproc for i in range(nproc + 1)]
    if not aligned:
        edges = [e if i in (0, nproc) else e + chunk // 2 for i, e in enumerate(edges)]
    return list(zip(edges[:-1], edges[1:]))


def expected_rows(lo, hi, version, n=N):
    """Row block lo:hi of the array after a round of the given version (0 or 1): every
    element distinct, so a misplaced or lost update shows."""
    v = (np.arange(lo, hi, dtype=np.float32)[:, None] * n
         + np.arange(n, dtype=np.float32)[None, :])
    return v if version == 0 else -v - 1


def _runqueue_wait():
    """Seconds this thread has been runnable but waiting for a CPU (Linux schedstat; 0
    elsewhere). Subtracted from a writer's time it estimates the time on idle cores."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) * 1e-9
    except (OSError, IndexError, ValueError):
        return 0.0


def _slab_writer(conn, store, locks, bounds, barrier):
    import time
    cs.config.set(threads=1)
    sync = cs.ProcessSynchronizer(locks) if locks else None
    z = cs.open_array(store, mode="r+", synchronizer=sync)
    lo, hi = bounds
    data = [expected_rows(lo, hi, 0), expected_rows(lo, hi, 1)]
    while True:
        r = conn.recv()
        if r is None:
            return
        q0, t0 = _runqueue_wait(), time.monotonic()
        barrier.wait()
        z[lo:hi, :] = data[r % 2]
        conn.send((t0, time.monotonic(), _runqueue_wait() - q0))


class SlabJob:
    """P writer processes kept alive between rounds; run() times one round from the first
    writer's start to the last writer's end (CLOCK_MONOTONIC is system-wide)."""

    def __init__(self, root, nproc, aligned, synchronized, separator="."):
        import multiprocessing as mp
        import os
        import sys
        # Spawned writers unpickle _slab_writer as benchmarks.bench_sync: the folder holding
        # the benchmarks package must be on the sys.path they are given (asv imports the
        # benchmarks without leaving it there).
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if here not in sys.path:
            sys.path.insert(0, here)
        ctx = mp.get_context("spawn")
        self.dir = tempfile.mkdtemp(prefix="chunkstore-slabs-", dir=root)
        self.store = os.path.join(self.dir, "a.zarr")
        locks = os.path.join(self.dir, "locks") if synchronized else None
        # separator "/": chunk files in one directory per chunk row (nested keys)
        cs.zeros((N, N), chunks=(CHUNK, CHUNK), dtype="f4", store=self.store,
                 dimension_separator=separator)
        barrier = self.barrier = ctx.Barrier(nproc)  # kept: children unpickle it late
        self.conns, self.procs = [], []
        for b in slab_bounds(nproc, aligned):
            here, there = ctx.Pipe()
            p = ctx.Process(target=_slab_writer, args=(there, self.store, locks, b, barrier),
                            daemon=True)
            p.start()
            self.conns.append(here)
            self.procs.append(p)
        self.round = -1

    def run(self):
        """Seconds from the barrier's release (the last writer's arrival) to the last
        writer's end. Also sets self.unloaded: the same less each writer's time spent
        waiting for a CPU, the estimate for idle cores on a loaded machine."""
        self.round += 1
        for c in self.conns:
            c.send(self.round)
        times = [c.recv() for c in self.conns]
        release = max(t[0] for t in times)
        self.unloaded = max(t[1] - release - t[2] for t in times)
        return max(t[1] for t in times) - release

    def verify(self):
        got = cs.open_array(self.store, mode="r")[...]
        want = expected_rows(0, N, self.round % 2)
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)
            raise AssertionError(f"{len(bad)} wrong elements after round {self.round}, "
                                 f"first at {tuple(bad[0])}")

    def close(self):
        for c in self.conns:
            c.send(None)
        for p in self.procs:
            p.join(30)
        shutil.rmtree(self.dir, ignore_errors=True)


def fs_root(fs):
    """tmpfs (/dev/shm) so the filesystem is not the limit, or the default temp dir (disk)."""
    return "/dev/shm" if fs == "tmpfs" else None


class ParallelSlabWriters:
    """One round of P processes writing their slabs; verified at teardown."""
    params = ([1, 2, 4], ["aligned", "unaligned"], ["none", "process"], ["tmpfs", "disk"])
    param_names = ["writers", "slabs", "synchronizer", "fs"]
    timeout = 300

    def setup(self, nproc, slabs, sync, fs):
        import os
        if fs == "tmpfs" and not os.path.isdir("/dev/shm"):
            raise NotImplementedError("no /dev/shm")
        if nproc == 1 and slabs == "unaligned":
            raise NotImplementedError("one writer has no inner edge")
        if slabs == "unaligned" and sync == "none":
            raise NotImplementedError("unaligned slabs without locks lose updates")
        self.job = SlabJob(fs_root(fs), nproc, slabs == "aligned", sync == "process")
        self.job.run()  # warm up: chunks exist, files are cached

    def teardown(self, nproc, slabs, sync, fs):
        if not hasattr(self, "job"):
            return  # a skipped combination (setup raised NotImplementedError): nothing made
        try:
            self.job.verify()
        finally:
            self.job.close()

    def time_round(self, nproc, slabs, sync, fs):
        self.job.run()

    def track_unloaded_round(self, nproc, slabs, sync, fs):
        """A round's time less the writers' waits for a CPU (see SlabJob.run)."""
        self.job.run()
        return self.job.unloaded

    track_unloaded_round.unit = "seconds"
