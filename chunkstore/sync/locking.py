"""Region locks: the locking protocol behind the synchronizers' array writes.

Every array has one lock space of byte offsets, in three parts, each addressed with a fixed
stride per dimension (BITS // ndim bits each; a coordinate past that wraps, so two things
may share a byte: a harmless extra conflict). The stride does not depend on the array's
shape, so writers whose views of the shape differ still agree on every byte.

- Chunk spaces F [F_BASE, P_BASE) and P [P_BASE, ...): one byte per chunk in each. A
  write holds, for all of it, both bytes of every chunk it touches (its chunks, coalesced:
  a slab is a handful of ranges).
- A write covering many chunks whole and some in part (Array._split_locks) holds instead,
  for all of it, its box of elements in the element space [E_BASE, F_BASE) (one byte per
  element; one range per C-order run of the box, so a slab of rows is one range; a box
  needing more than `max_ranges` is covered by coarser ranges) and the F bytes of its whole
  chunks, and takes the P bytes of all its partial chunks at once, after writing the whole
  ones, for their read-modify-writes. Neighbouring slabs sharing a row of chunks thus only
  take turns on that row. Why this is enough: two such writes that overlap are serialized
  whole by the element space; any other write holds both bytes of its chunks throughout, so
  it excludes the split write's whole chunks, and its read-modify-writes of the split
  write's partial chunks come wholly before or after theirs (one window: with two, the
  first chunk row before the whole chunks and the last after, a write of points or index
  arrays in both rows and no whole chunk landed between them, half the overlap each
  write's value). Disjoint elements of one chunk are never lost: every read-modify-write
  of a chunk holds its P byte.
- resize, append and metadata updates lock everything (FULL) exclusively, so they exclude
  every write and every write excludes them.
- Byte 0, below the three parts, is the metadata guard (GUARD): only FULL covers it besides.
  A write that found the metadata changed under its locks holds it from its next read of
  the metadata to its end (EngineState.metadata_guard), so no metadata change comes between
  them; writes that do not hold it never wait for it. Taken before everything else, it
  keeps the order below.
- In this process's table a request of the whole space (FULL) that waits is served before
  requests that come after it (the guard's holder alone goes on: it takes its write's
  chunks while holding the guard, which the whole request waits for). So a stream of short
  writes does not keep an append waiting. The kernel serves requests in no order, so
  between processes a whole request that finds the space busy takes it in ascending pieces
  (RegionLock._kernel_whole), holding each once it is free: writes needing a held piece
  wait, and the rest frees up.
- Ranges are taken in ascending order (elements, then F, then P), each waiting
  until it is free. A holder waits only for ranges above everything it holds, so the start
  of the range waited for rises along any chain of waiters: no cycle, no deadlock.

Threads of one process coordinate in an in-process table (RegionLock). Processes
additionally take the same ranges as POSIX byte-range locks (fcntl F_SETLKW) on one lock
file per array. Those locks belong to the process (not the thread) and closing any
descriptor of the file drops them all; so a process opens each lock file once and keeps it
open, and a thread only asks the kernel for ranges after the in-process table gave them to
it (all of them, so no thread holds kernel locks while it waits in-process), which makes
the kernel ranges of a process's threads disjoint. The kernel's deadlock detector sees
processes, not threads, and may report a cycle that the threads will resolve (EDEADLK):
then the request is retried after a short sleep. Locks of a process that dies (even by
kill -9) are released by the kernel.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from bisect import bisect_left, bisect_right

import numpy as np

from chunkstore._core.lockspace import few_chunk_ranges

__all__ = ["RegionLock", "box_ranges", "chunk_ranges", "FULL", "GUARD", "open_region_file"]

BITS = 61                       # bits of each lock space
FEW_CHUNKS = 8                  # writes of up to this many chunks: chunkstore._core.lockspace
E_BASE = 1                      # element space
F_BASE = E_BASE + (1 << BITS)   # chunk space, for writes of whole chunks and whole writes
P_BASE = F_BASE + (1 << BITS)   # chunk space, for read-modify-writes of partial chunks
FULL = ((0, P_BASE + (1 << BITS)),)   # inclusive (start, end): everything, below 2**63
#: how long at most a request of the whole space waits for the waiters the last release
#: of it woke to take their turn (each takes its ranges, or waits again, under the mutex)
_YIELD_S = 0.05
GUARD = ((0, 0),)                     # the metadata guard (see above): FULL's first byte


def _is_guard(ranges):
    """Whether ranges are the metadata guard (the only ranges that end at byte 0)."""
    return bool(ranges) and ranges[0][1] == 0


def _offsets(coords, base):
    ndim = coords.shape[1]
    b = BITS // ndim
    mask = (1 << b) - 1
    shifts = np.array([b * (ndim - 1 - d) for d in range(ndim)], dtype=np.int64)
    return ((coords & mask) << shifts).sum(axis=1) + base


def _merge_closest(starts, ends, max_ranges):
    """At most max_ranges ranges: keep the widest gaps, merge across the others."""
    if len(starts) <= max_ranges:
        return starts, ends
    gaps = starts[1:] - ends[:-1]
    k = max_ranges - 1
    keep = np.sort(np.argpartition(gaps, len(gaps) - k)[len(gaps) - k:]) if k else \
        np.empty(0, np.int64)
    return (starts[np.concatenate(([0], keep + 1))],
            ends[np.concatenate((keep, [len(ends) - 1]))])


def chunk_ranges(coords, grid, max_ranges=256, base=F_BASE):
    """Sorted, disjoint inclusive (start, end) ranges of the chunk space covering the chunks
    at coords ((n, ndim) int64 grid coordinates). grid: the chunk grid's shape as the caller
    knows it, only used to coalesce (a stale grid locks more, never less)."""
    coords = np.asarray(coords, dtype=np.int64)
    n, ndim = coords.shape if coords.ndim == 2 else (len(coords), 0)
    if n == 0:
        return []
    if ndim == 0:
        return [(base, base)]
    b = BITS // ndim
    if n <= min(FEW_CHUNKS, max_ranges):   # few chunks (small writes): numpy's per-call cost
        # would be most of it; the same ranges, worked out in C
        few = few_chunk_ranges(np.ascontiguousarray(coords), tuple(grid), BITS)
        return [(base + s, base + e) for s, e in few] if base else few
    off = _offsets(coords, base)
    if bool((coords >> b).any()) or bool((coords < 0).any()):
        off = np.unique(off)    # wrapped coordinates: runs of the offsets alone
        breaks = np.flatnonzero(np.diff(off) != 1)
    else:
        # Order and runs in the C-order grid (clipped to the stride, so it fits int64):
        # between two chunks consecutive there, every offset belongs to no chunk.
        g = np.minimum(np.maximum(np.asarray(grid, dtype=np.int64), coords.max(axis=0) + 1),
                       1 << b)
        strides = np.ones(ndim, dtype=np.int64)
        for d in range(ndim - 2, -1, -1):
            strides[d] = strides[d + 1] * g[d + 1]
        lin = coords @ strides
        order = np.argsort(lin, kind="stable")
        lin, off = lin[order], off[order]
        keep = np.ones(len(lin), dtype=bool)
        keep[1:] = lin[1:] != lin[:-1]
        lin, off = lin[keep], off[keep]
        breaks = np.flatnonzero(np.diff(lin) != 1)
    starts = off[np.concatenate(([0], breaks + 1))]
    ends = off[np.concatenate((breaks, [len(off) - 1]))]
    starts, ends = _merge_closest(starts, ends, max_ranges)
    return list(zip(starts.tolist(), ends.tolist()))


def box_ranges(lo, hi, shape, max_ranges=256):
    """Sorted, disjoint inclusive ranges of the element space covering the box of elements
    lo[d] <= i[d] <= hi[d] of an array of the given shape (shape only coalesces)."""
    ndim = len(shape)
    if ndim == 0:
        return [(E_BASE, E_BASE)]
    b = BITS // ndim
    top = (1 << b) - 1
    ext = [min(int(s), 1 << b) for s in shape]
    ls, hs = [], []
    for lo_d, hi_d, e in zip(lo, hi, ext):
        lo_d, hi_d = int(lo_d), int(hi_d)
        if hi_d > top:   # wraps around the stride: take every residue (locks more)
            lo_d, hi_d = 0, top
        ls.append(lo_d)
        hs.append(max(hi_d, lo_d))
    full = [lo_d == 0 and hi_d >= e - 1 for lo_d, hi_d, e in zip(ls, hs, ext)]
    k = ndim - 1
    while k > 0 and full[k]:
        k -= 1
    # Dims after k are whole: one run per index of dims < k. Fewer dims enumerated when
    # that is too many runs: each range then spans its sub-box's row-major extent.
    count, kk = 1, 0
    while kk < k and count * (hs[kk] - ls[kk] + 1) <= max_ranges:
        count *= hs[kk] - ls[kk] + 1
        kk += 1
    tail_lo = [ls[d] if d >= kk else 0 for d in range(ndim)]
    tail_hi = [hs[d] if d >= kk else 0 for d in range(ndim)]
    heads = np.array(list(np.ndindex(*[hs[d] - ls[d] + 1 for d in range(kk)])),
                     dtype=np.int64).reshape(count, kk) + np.array(ls[:kk], dtype=np.int64)
    first = np.concatenate([heads, np.tile(np.array(tail_lo[kk:], np.int64),
                                           (len(heads), 1))], axis=1)
    last = np.concatenate([heads, np.tile(np.array(tail_hi[kk:], np.int64),
                                          (len(heads), 1))], axis=1)
    starts, ends = _offsets(first, E_BASE), _offsets(last, E_BASE)
    return list(zip(starts.tolist(), ends.tolist()))


class LockingUnsupportedError(OSError):
    """Byte-range ``fcntl`` locks are not available on the filesystem of a lock file."""
    pass


def _kernel_lock(fd, start, end, path):
    length = end - start + 1
    delay = 0.001
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX, length, start, os.SEEK_SET)
            return
        except OSError as e:
            if e.errno == errno.EDEADLK:
                # The kernel's cycle check counts a process's threads as one owner; the
                # protocol has no real cycle, so the holders finish and this succeeds.
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
                continue
            _raise_unsupported(e, path)
            raise


def _raise_unsupported(e, path):
    """LockingUnsupportedError, from e, when e says the lock file's filesystem has no
    byte-range locks."""
    if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
        raise LockingUnsupportedError(
            e.errno, f"byte-range fcntl locks are not available on the filesystem of "
                     f"lock file {path!r} ({e.strerror}); put the synchronizer's "
                     f"directory where POSIX locks work (NFS with lockd or v4, "
                     f"Lustre mounted with -o flock, GPFS)") from e


def _kernel_try(fd, start, end, path):
    """Take start..end from the kernel if it is free now (True), else nothing (False)."""
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, end - start + 1, start, os.SEEK_SET)
        return True
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES, errno.EDEADLK):
            return False
        _raise_unsupported(e, path)
        raise


# The whole space taken from the kernel in pieces when it is not free at once, in ascending
# order (see _kernel_whole): the guard and the element space; the F space in pieces of
# doubling width (a chunk's offset has its first coordinate in the top bits, so the first
# rows of chunks get pieces of their own, later ones share wider pieces); the P space.
_WHOLE_PIECES = ([(0, F_BASE - 1), (F_BASE, F_BASE)]
                 + [(F_BASE + (1 << m), F_BASE + (1 << (m + 1)) - 1) for m in range(BITS)]
                 + [(P_BASE, FULL[0][1])])


def _kernel_unlock(fd, start, end):
    fcntl.lockf(fd, fcntl.LOCK_UN, end - start + 1, start, os.SEEK_SET)


class RegionLock:
    """Exclusive locks on byte ranges of one array's lock space, for the threads of this
    process, and (with fd) for other processes through fcntl locks on that file."""

    def __init__(self, fd: int | None = None, path: str | None = None) -> None:
        # (the mutex taken directly where nobody waits: a plain lock's with-statement and
        # no notify cost a fraction of the Condition's, on every write of every handle)
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._waiting = 0
        self._starts: list = []   # ranges held in this process: sorted, disjoint
        self._ends: list = []
        # Fairness to requests of the whole space (FULL: resize, append, metadata changes):
        # while one waits, a new request waits for it to be served first (a stream of
        # writes, each short, used to keep an append waiting for seconds). The one thread
        # that takes more while holding ranges here, the holder of the metadata guard (then
        # its write's chunks), is not held back, so no cycle: the whole request waits only
        # for holders, and holders never for it.
        self._whole_waiting = 0
        self._guard_holder: int | None = None
        self._whole_holder: int | None = None  # (the thread holding the whole space)
        # Fairness the other way: the waiters the release of the whole space woke (writes
        # held off by a resize, append or fill value change) get a moment to take their
        # ranges before the next request of the whole space (a thread changing the
        # metadata back to back took it again at once, holding the GIL, and a write waited
        # for as long as the loop ran).
        self._woken_by_whole = 0
        self._fd = fd
        self._path = path

    def idle(self) -> bool:
        """Whether no thread of this process holds or waits for any of its ranges."""
        with self._mutex:
            return not self._starts and not self._waiting and not self._whole_waiting

    def guard_busy(self) -> bool:
        """Whether another thread of this process holds or waits for the metadata guard (a
        change of the array's metadata in flight: the whole space is held guard first);
        nothing taken. Never where the calling thread holds it (a read's last run, which
        holds it, found the array deleted meanwhile and waited for its own guard)."""
        me = threading.get_ident()
        with self._mutex:
            if me in (self._guard_holder, self._whole_holder):
                return False
            return bool(self._whole_waiting) or not self._free(GUARD[0][0], GUARD[0][1])

    def changing_elsewhere(self) -> bool:
        """Whether another thread of this process holds the whole space: a resize, append,
        fill value change or re-creation in flight (not the guard alone, which attribute
        updates, creations and writes planned again hold: nothing of the shape changes
        under those); nothing taken. (The calling thread's own hold is not counted: waiting
        for it would never end.)"""
        if not self._starts:  # (nothing held, the usual case: no mutex taken; a change
            return False      # begun before this look holds its ranges until counted)
        with self._mutex:
            holder = self._whole_holder
        return holder is not None and holder != threading.get_ident()

    def _free(self, s, e):
        i = bisect_right(self._starts, e) - 1
        return i < 0 or self._ends[i] < s

    def _mark(self, s, e):
        i = bisect_left(self._starts, s)
        self._starts.insert(i, s)
        self._ends.insert(i, e)

    def _unmark(self, ranges):
        with self._mutex:
            if len(ranges) == len(self._starts):   # (only these held: the usual case)
                self._starts.clear()
                self._ends.clear()
            else:
                for s, _ in ranges:
                    i = bisect_left(self._starts, s)
                    del self._starts[i], self._ends[i]
            if _is_guard(ranges):
                self._guard_holder = None
            elif ranges and ranges[0] == FULL[0]:
                self._whole_holder = None
            if self._waiting:
                if ranges and ranges[0] == FULL[0]:
                    self._woken_by_whole = self._waiting
                self._cond.notify_all()

    def _wait(self):
        self._waiting += 1
        try:
            self._cond.wait()
        finally:
            self._waiting -= 1
            if self._woken_by_whole:  # (its turn had: see __init__)
                self._woken_by_whole -= 1
                if not self._woken_by_whole:
                    self._cond.notify_all()

    def acquire(self, ranges, kernel_ranges=None):
        """Take ranges (sorted, disjoint, inclusive) exclusively; blocks until all are held.
        kernel_ranges: the subset of ranges to take from the kernel now (default: all); the
        rest are only reserved in this process, for kernel_acquire later. A thread thus
        never waits in the in-process table while it holds kernel locks: with that, the
        in-process and the kernel waits together cannot form a cycle."""
        marked = []
        whole = bool(ranges) and ranges[0] == FULL[0]
        try:
            with self._mutex:
                if whole and self._woken_by_whole:  # (see __init__: a bounded wait)
                    deadline = time.monotonic() + _YIELD_S
                    while self._woken_by_whole:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._cond.wait(left)
                    self._woken_by_whole = 0
                if self._whole_waiting and not whole and (
                        self._guard_holder != threading.get_ident()):
                    while self._whole_waiting:   # served first (see __init__)
                        self._wait()
                if not self._starts:   # nothing held (the usual case): take them all
                    marked = sorted(ranges)
                    self._starts.extend([s for s, _ in marked])
                    self._ends.extend([e for _, e in marked])
                elif all(self._free(s, e) for s, e in ranges):
                    for s, e in ranges:
                        self._mark(s, e)
                        marked.append((s, e))
                else:
                    self._whole_waiting += whole
                    try:
                        for s, e in ranges:   # ascending: in-process waits cannot cycle
                            while not self._free(s, e):
                                self._wait()
                            self._mark(s, e)
                            marked.append((s, e))
                    finally:
                        self._whole_waiting -= whole
                        if whole and not self._whole_waiting and self._waiting:
                            self._cond.notify_all()  # (those held back: see __init__)
                if _is_guard(ranges):
                    self._guard_holder = threading.get_ident()
                elif whole:
                    self._whole_holder = threading.get_ident()
        except BaseException:
            if marked:
                self._unmark(marked)
            raise
        try:
            if whole and kernel_ranges is None:
                self._kernel_whole()
            else:
                self.kernel_acquire(ranges if kernel_ranges is None else kernel_ranges)
        except BaseException:
            self._unmark(marked)
            raise

    def _kernel_whole(self):
        """Take the whole space from the kernel: at once where it is free; else piece by
        piece in ascending order (_WHOLE_PIECES), each held once it is free. The kernel
        serves no one in order, and a stream of writes from other processes rarely leaves
        the whole space free at one moment (an append waited 1.3 s behind 4 writing
        processes); held pieces stop the writes that need them, so the rest frees up. The
        order keeps the protocol's: a holder of a piece waits only for pieces above it."""
        if self._fd is None:
            return
        if _kernel_try(self._fd, *FULL[0], self._path):
            return
        self.kernel_acquire(_WHOLE_PIECES)

    def kernel_acquire(self, ranges):
        """Take ranges this thread reserved in acquire() from the kernel, in order."""
        if self._fd is None:
            return
        got = []
        try:
            for s, e in ranges:
                _kernel_lock(self._fd, s, e, self._path)
                got.append((s, e))
        except BaseException:
            self._release_kernel(got)
            raise

    def kernel_release(self, ranges):
        """Release *ranges* (inclusive byte ranges) held from the kernel; the in-process
        reservation stays.
        """
        if self._fd is not None:
            self._release_kernel(ranges)

    def _release_kernel(self, ranges):
        for s, e in ranges:
            try:
                _kernel_unlock(self._fd, s, e)
            except OSError:
                pass  # nothing better to do; the lock goes with the process at the latest

    def release(self, ranges, kernel_ranges=None):
        """Release *ranges* taken with :meth:`acquire`: the kernel locks (*kernel_ranges*,
        default all of *ranges*) and the in-process reservation.
        """
        if self._fd is not None:
            self._release_kernel(ranges if kernel_ranges is None else kernel_ranges)
        self._unmark(ranges)

    def held(self):
        """Ranges held by threads of this process (for tests and diagnostics)."""
        with self._mutex:
            return list(zip(self._starts, self._ends))


def open_region_file(path):
    """A descriptor of the lock file at path, created if absent, kept open by the caller."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)


def selection_box(plan, chunks, coords=None):
    """(lo, hi): inclusive per-dimension element bounds of what a write plan touches (an
    orthogonal plan: its selection's bounding box; a points plan: its chunks' box)."""
    coords = plan.chunk_coords() if coords is None else coords
    cmin, cmax = coords.min(axis=0), coords.max(axis=0)
    chunks = np.asarray(chunks, dtype=np.int64)
    lo, hi = cmin * chunks, (cmax + 1) * chunks - 1
    if not hasattr(plan, "full_mask"):
        return lo.tolist(), hi.tolist()
    # The touched chunks form a product over dimensions: the chunk at all-minimum
    # coordinates holds the lowest selected index of every dimension, and likewise above.
    i_lo = int(np.flatnonzero((coords == cmin).all(axis=1))[0])
    i_hi = int(np.flatnonzero((coords == cmax).all(axis=1))[0])
    lo, hi = lo.tolist(), hi.tolist()
    for i, out, pick in ((i_lo, lo, min), (i_hi, hi, max)):
        for d, s in enumerate(plan.selections(i)[0]):
            if isinstance(s, slice):
                r = range(*s.indices(int(chunks[d])))
                v = pick(r[0], r[-1])
            else:
                v = int(pick(np.ravel(s)))
            out[d] = int(coords[i, d]) * int(chunks[d]) + v
    return lo, hi
