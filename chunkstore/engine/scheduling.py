"""Scheduling of chunk work: batches, the shared thread pool, waiting, cancellation.

An operation's touched chunks are cut into batches, and `run` calls work(lo, hi) for each.
The calling thread always works on its own batches; the pool's workers help only while the
chunk threads busy in the process (callers plus helpers) number fewer than
`config.get("threads")`. So N user threads reading at once use all cores instead of queueing
behind a pool sized for one caller, and a caller that is itself a pool thread (dask, nested
reads) never waits for a queued task: helpers that have not started when the caller runs out
of batches are cancelled, and only running ones (which need nothing from the caller) are
waited for. threads=1 runs everything in the calling thread.

Per-thread scratch buffers (`take_scratch`/`give_scratch`) spare every read a fresh
chunk-sized allocation.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import wait as futures_wait
from typing import TYPE_CHECKING, Literal

import numpy as np

from chunkstore import config
from chunkstore.storage import protocol

if TYPE_CHECKING:
    from concurrent.futures import Future

# Chunks per batch: at most MAX_BATCH_BYTES of decoded data (bounds the bytes a batch holds at
# once), and up to MAX_BATCH small chunks. Each batch hands the GIL back and forth a few times
# (store batch read, decode kernel); with 128 rather than 32 small chunks a batch, a
# 4096-chunk read on 2 threads went from 1.64x to 1.77x its 1-thread speed.
MAX_BATCH = 128
MAX_BATCH_BYTES = 4 * 2**20
# Under this many bytes of chunks in all, handing batches to helpers costs more than it saves
# (a helper's hand-off costs two thread wake-ups). Writes do more per chunk (encode, often a
# decode first), so helpers pay off sooner: 20 window writes over 1 MiB chunks on 2 cores took
# 33 ms with helpers from 1 MiB, 41 ms from 4 MiB. Reads of 512 KiB Blosc chunks gained nothing
# from a helper at 2 MiB (0.94-1.03x, a loss at 1 MiB: 0.77x) and 1.24x at 4 MiB, 1.47x at
# 8 MiB (asv_bench/tile_threads.py's volume).
INLINE_BYTES = 2**20
READ_INLINE_BYTES = 4 * 2**20
# A thread keeps a scratch buffer of at most this size between operations.
SCRATCH_KEEP_BYTES = 8 * 2**20

_lock = threading.Lock()
_busy = 0  # threads now working on multi-batch operations: callers and their helpers
_local = threading.local()


def run(n: int, work: Callable[[int, int], object], item_nbytes: int,
        groups: Sequence[int] | None = None, serial: bool = False,
        inline_bytes: int = INLINE_BYTES) -> None:
    """Call work(lo, hi) over [0, n) in batches, in this thread and, when they are idle, on
    the pool's threads. groups: sorted start positions of groups that a batch must not split
    (its end moves to a group boundary). serial: this thread only. inline_bytes: below this
    many bytes of chunks in all, everything runs in this thread (pass the same to one_batch).
    Raises the error of the first failed batch (in order), after every batch that started
    has finished."""
    if n == 0:
        return
    by_bytes = max(1, MAX_BATCH_BYTES // max(1, item_nbytes))
    single = max(1, min(MAX_BATCH, by_bytes))
    if serial or n < 2 or n * item_nbytes < inline_bytes:
        _inline(n, work, single, groups)
        return
    threads = config.get("threads")
    if threads <= 1:
        _inline(n, work, single, groups)
        return
    helpers = _claim(min(threads - 1, n - 1), threads)
    try:
        pool = config.executor() if helpers else None
        if pool is None:  # no idle helper: as inline, with the fewest, largest batches
            _inline(n, work, single, groups)
            return
        # Enough batches to balance the threads at work (4 each), at most `single` chunks.
        batch = max(1, min(single, -(-n // ((helpers + 1) * 4))))
        bounds = _bounds(n, batch, groups)
        job = _Job(work, bounds)
        # helpers make requests for the caller: to its event loop, if it has one (aio reads)
        caller = protocol.CALLER_LOOP.get()
        helper = job.help if caller is None else functools.partial(
            protocol.with_caller_loop, caller, job.help)
        futures = [pool.submit(helper) for _ in range(min(helpers, len(bounds) - 1))]
        try:
            job.help()
        finally:
            _join(job, futures)
        if job.errors:
            # the error of the first failed batch in order, not in time: the same chunk is
            # named whichever thread got there first
            raise min(job.errors, key=lambda ie: ie[0])[1]
    finally:
        _release(helpers)


def _inline(n: int, work: Callable[[int, int], object], single: int,
            groups: Sequence[int] | None) -> None:
    """All batches in this thread: no pool, no synchronisation objects."""
    if n <= single:
        work(0, n)
        return
    for lo, hi in _bounds(n, single, groups):
        work(lo, hi)


def one_batch(n: int, item_nbytes: int, inline_bytes: int = INLINE_BYTES) -> bool:
    """Does run() (given the same inline_bytes) do n chunks of item_nbytes each in one call
    of work?"""
    single = max(1, min(MAX_BATCH, MAX_BATCH_BYTES // max(1, item_nbytes)))
    return n <= single and (n < 2 or n * item_nbytes < inline_bytes
                            or config.get("threads") <= 1)


def _bounds(n: int, batch: int, groups: Sequence[int] | None) -> list[tuple[int, int]]:
    if groups is None:
        return [(lo, min(n, lo + batch)) for lo in range(0, n, batch)]
    bounds, lo, gi = [], 0, 0
    while lo < n:
        target = lo + batch
        while gi < len(groups) and groups[gi] <= lo:
            gi += 1
        hi = n
        for g in groups[gi:]:
            if g >= target:
                hi = g
                break
        bounds.append((lo, hi))
        lo = hi
    return bounds


def _claim(want: int, threads: int) -> int:
    """Count this caller as busy and claim up to `want` helpers, as many as leave the busy
    threads at most `threads`. Returns the number claimed."""
    global _busy
    with _lock:
        _busy += 1
        got = max(0, min(want, threads - _busy))
        _busy += got
    return got


def _release(helpers: int) -> None:
    global _busy
    with _lock:
        _busy -= 1 + helpers


def _after_fork_in_child() -> None:
    # The parent's busy callers and helpers are not in the child: counted on, they would
    # leave the child without helpers for good (and a lock held at fork, locked forever).
    global _busy, _lock
    _busy = 0
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Job:
    """Batches shared by a caller and its helpers: each takes the next one until none is left
    or one has failed."""

    __slots__ = ("work", "bounds", "next", "stop", "errors")

    def __init__(self, work: Callable[[int, int], object], bounds: list[tuple[int, int]]
                 ) -> None:
        self.work, self.bounds = work, bounds
        self.next = itertools.count()  # next() on it is atomic under the GIL
        self.stop = False
        self.errors: list[tuple[int, BaseException]] = []

    def help(self) -> None:
        bounds, n = self.bounds, len(self.bounds)
        while not self.stop:
            i = next(self.next)
            if i >= n:
                return
            try:
                self.work(*bounds[i])
            except BaseException as e:  # noqa: BLE001 - handed to the caller, which raises it
                self.stop = True
                self.errors.append((i, e))
                return


def _join(job: _Job, futures: list[Future[None]]) -> None:
    """Cancel the helpers that have not started; wait for the running ones, whatever happens
    (an interrupt while waiting is raised after they finish). No batch outlives the call: one
    still writing after the call returned could overwrite a later write, once the locks are
    released."""
    pending = [f for f in futures if not f.cancel()]
    interrupted = None
    while pending:
        try:
            futures_wait(pending)
            break
        except BaseException as e:  # noqa: BLE001 - interrupted: keep waiting, raise it after
            job.stop = True
            interrupted = interrupted or e
    if interrupted is not None:
        raise interrupted


# ---------------------------------------------------------------------------- scratch buffers
def take_scratch(shape: Sequence[int], dtype: np.dtype, order: Literal["C", "F"] = "C"
                 ) -> np.ndarray:
    """An uninitialised array of this shape, dtype and order: the one this thread kept (when
    it matches and is not in use), else a new one. Hand it back with give_scratch when done."""
    key = (tuple(shape), dtype, order)
    kept = getattr(_local, "kept", None)
    if kept is not None and kept[0] == key:
        _local.kept = None  # in use: a nested take gets an array of its own
        return kept[1]
    return np.empty(shape, dtype=dtype, order=order)


def give_scratch(arr: np.ndarray) -> None:
    """Keep an array from take_scratch for this thread's next take (one a thread, and none
    over SCRATCH_KEEP_BYTES: bounded memory)."""
    if arr.nbytes <= SCRATCH_KEEP_BYTES and not arr.dtype.hasobject:
        order = "C" if arr.flags.c_contiguous else "F"
        _local.kept = ((arr.shape, arr.dtype, order), arr)
