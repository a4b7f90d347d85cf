"""Running a synchronous engine call from a coroutine without blocking the event loop.

The calls run on worker threads of this module (the engine releases the GIL while it reads
and decodes, so tasks' calls run in parallel). Results go back to each event loop in
batches: a worker finishing a call while the loop has not yet taken the previous results
adds to them instead of waking the loop again, so many small reads in flight cost one
wake-up of the loop, not one each (asyncio's run_in_executor wakes it once a call: about
20-70 us a call on the development VM, as much as a small tile read itself).

Two sets of workers: an array's reads and writes of a store whose requests are round trips
(``concurrent_io``: S3, GCS, HTTP...) go to up to WORKERS threads, most of them waiting on
the network at any time; those of a local store (files, memory: the work is the CPU's) go
to as many threads as the engine's ``threads`` (the cores by default), and a task beyond
them waits its turn in the queue instead of taking a core's time slices and the GIL from the
reads already running (random 256x256 tiles read by 4 tasks on 2 cores: 0.242 s with 2
workers, 0.265 s with 3, 0.291 s with 6; asv_bench/tile_asyncio.py). Everything else (opening,
metadata) goes to the first set.

A job goes to the worker that went idle last (see _Workers): on the lent 16-core machine a
lone task's tile reads went from 0.53-0.61 to 0.79-0.89 of the threaded reads' speed when
jobs stopped going to the worker idle the longest.

Hand-offs between the loop and the workers go through pipes (a parked worker waits on its
own; each loop watches one of its inbox's), and a thread wakes another only after letting
go of every lock the woken one takes first: the kernel then runs the woken thread on the
waker's core when the waker is about to wait, and nobody wakes only to block again. A
call that does nothing, awaited in a loop on the development VM: 25.7 us a round trip with
locks and call_soon_threadsafe, 15.5 us so; context switches per round trip 5.4 before
(the woken thread met the GIL or a lock still held), 2.0 now (perf stat).
"""

from __future__ import annotations

import asyncio
import contextvars
import collections
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from chunkstore import config
from chunkstore.storage import protocol
from chunkstore.storage.protocol import CALLER_LOOP

T = TypeVar("T")

#: worker threads (as asyncio's default executor: the cores plus 4 for I/O waits, at most 32)
WORKERS = min(32, (os.cpu_count() or 1) + 4)


class _Inbox:
    """One event loop's finished calls, handed to it in batches (see the module docstring).

    The loop is woken through a pipe of the inbox's own that it watches (add_reader), not
    through call_soon_threadsafe's socket: a pipe's wake-up is a "synchronous" one to the
    kernel, which runs the loop on the waking worker's core when that worker is about to
    wait (see the module docstring). Loops without add_reader (Windows' proactor) are woken
    by call_soon_threadsafe.

    The loop is held weakly: an inbox (kept per loop in a WeakKeyDictionary) must not keep
    its loop alive, or every loop that ever awaited a read would live forever."""

    __slots__ = ("loop_ref", "lock", "items", "scheduled", "wake_r", "wake_w", "__weakref__")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop_ref = weakref.ref(loop)
        self.lock = threading.Lock()
        self.items: list[tuple[_Job, bool, Any]] = []
        self.scheduled = False
        self.wake_r, self.wake_w = _nonblocking_pipe()
        try:
            loop.add_reader(self.wake_r, self.drain)
        except NotImplementedError:
            _close(self.wake_r, self.wake_w)
            self.wake_r = self.wake_w = -1
        else:
            weakref.finalize(loop, _close, self.wake_r, self.wake_w)

    def put(self, job: _Job, ok: bool, value: Any) -> None:
        """Add a finished call (from a worker); wake the loop unless a wake-up is pending."""
        with self.lock:
            self.items.append((job, ok, value))
            if self.scheduled:
                return
            self.scheduled = True
        if self.wake_w >= 0:
            try:
                os.write(self.wake_w, b"\0")
            except (BlockingIOError, OSError):  # full (a wake-up is pending), or closed
                pass                            # with its loop: nobody awaits the result
            return
        loop = self.loop_ref()
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the loop was closed meanwhile: nobody awaits the result
            pass

    def drain(self) -> None:
        """Set the results of the finished calls (on the loop)."""
        if self.wake_r >= 0:
            try:
                os.read(self.wake_r, 4096)
            except BlockingIOError:
                pass
        with self.lock:
            items, self.items, self.scheduled = self.items, [], False
        for job, ok, value in items:
            job.delivered = True
            fut = job.fut
            if fut.cancelled():
                if job.waiter is not None and not job.waiter.done():
                    job.waiter.set_result(None)  # a cancelled caller waits for the end
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)


def _nonblocking_pipe() -> tuple[int, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    return r, w


def _close(*fds: int) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class _Job:
    """One call handed to a worker, and where it stands. Cancelling the awaiting coroutine
    drops a job no worker has started (it never runs); one already running is not stopped
    midway (it holds chunk locks and writes whole chunks), and a cancelled caller of a write
    waits for its end before the CancelledError goes on: a write whose caller was cancelled
    never lands after writes awaited later (see _submit)."""

    __slots__ = ("box", "fut", "ctx", "fn", "args", "kwargs", "lock", "state", "delivered",
                 "waiter")

    QUEUED, RUNNING, DROPPED = 0, 1, 2

    def __init__(self, box: _Inbox, fut: asyncio.Future, ctx: contextvars.Context,
                 fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        self.box, self.fut, self.ctx, self.fn, self.args, self.kwargs = (box, fut, ctx, fn,
                                                                         args, kwargs)
        self.lock = threading.Lock()
        self.state = _Job.QUEUED
        self.delivered = False  # (on the loop) its result reached the inbox's drain
        self.waiter: asyncio.Future | None = None  # (on the loop) a cancelled caller's

    def start(self) -> bool:
        """(a worker) Whether to run the job: it was not dropped; from now on it cannot be."""
        with self.lock:
            if self.state != _Job.QUEUED:
                return False
            self.state = _Job.RUNNING
            return True

    def drop(self) -> bool:
        """(the loop, its caller cancelled) Whether the job will never run."""
        with self.lock:
            if self.state == _Job.QUEUED:
                self.state = _Job.DROPPED
            return self.state == _Job.DROPPED


class _Parked:
    """An idle worker thread, waiting on a pipe of its own for a job handed to it (a pipe,
    not a lock: its wake-up runs the worker on the waker's core when the waker is about to
    wait, see _Inbox)."""

    __slots__ = ("wake_r", "wake_w", "job")

    def __init__(self) -> None:
        self.wake_r, self.wake_w = os.pipe()
        self.job: _Job | None = None

    def wake(self) -> None:
        os.write(self.wake_w, b"\0")

    def wait(self) -> None:
        os.read(self.wake_r, 1)

    def close(self) -> None:
        _close(self.wake_r, self.wake_w)


class _Workers:
    """Worker threads (started on demand, again after a fork) running at most size() jobs at
    once (config may lower it after threads started); jobs beyond wait in order.

    A job goes to the thread that went idle last (a stack of parked threads, each waiting
    on its own pipe), not to whichever a shared queue wakes: the one or two threads a lone
    task keeps busy stay warm on their cores, where a queue hands each job to the thread idle
    the longest, whose core has had time to fall asleep."""

    def __init__(self, size: Callable[[], int]) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.jobs: collections.deque[_Job] = collections.deque()  # waiting for a turn
        self.parked: list[_Parked] = []                             # the last idle at the end
        self.running = 0

    def submit(self, job: _Job) -> None:
        with self.lock:
            if self.running >= self.size():
                self.jobs.append(job)  # a worker takes it when one of the running is done
                return
            parked = self._hand(job) if self.parked else None
            if parked is None:
                self.running += 1
        if parked is not None:
            parked.wake()
            return
        # (the first job in a list that the thread empties: a Thread keeps its args as long
        # as it runs, and a job holds its future, whose loop would then live forever)
        threading.Thread(target=self._work, args=([job],), name="chunkstore-aio",
                         daemon=True).start()

    def _hand(self, job: _Job) -> _Parked:
        """Give job, and a turn, to the thread parked last (self.lock held); the caller wakes
        it once it has let go of the lock (the woken thread's first step takes it)."""
        self.running += 1
        parked = self.parked.pop()
        parked.job = job
        return parked

    def _work(self, first: list[_Job]) -> None:
        me = _Parked()
        job: _Job | None = first.pop()
        while job is not None:
            box = job.box
            done: tuple | None = None
            if job.start():  # (else dropped: its caller was cancelled before it started)
                try:
                    done = (job, True, job.ctx.run(job.fn, *job.args, **job.kwargs))
                except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
                    done = (job, False, e)
            job = None
            with self.lock:
                size = self.size()
                woken = [self._hand(self.jobs.popleft())  # size() was raised: more turns
                         for _ in range(min(len(self.jobs), len(self.parked),
                                            max(0, size - self.running)))]
                if self.jobs and self.running <= size:
                    job = self.jobs.popleft()  # this thread's turn goes on with it
                else:
                    job = None
                    self.running -= 1
                    self.parked.append(me)  # a job handed from now on waits in the pipe
            for parked in woken:
                parked.wake()
            # The result goes to the loop last: the loop, woken, wants the GIL, which this
            # thread holds from there to its wait for as little as can be.
            if done is not None:
                box.put(*done)
            del box, done
            if job is None:
                me.wait()  # until submit hands this thread a job (and its turn)
                job, me.job = me.job, None


class _Lanes:
    """The two sets of workers (see the module docstring) and each event loop's inbox."""

    def __init__(self) -> None:
        self.remote = _Workers(lambda: WORKERS)
        self.local = _Workers(lambda: max(1, config.get("threads")))
        self.inboxes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def inbox(self, loop: asyncio.AbstractEventLoop) -> _Inbox:
        box = self.inboxes.get(loop)
        if box is None:
            box = self.inboxes.setdefault(loop, _Inbox(loop))
        return box

    def for_store(self, store: Any) -> _Workers:
        return self.remote if protocol.concurrent_io(store) else self.local


_lanes = _Lanes()


def _after_fork() -> None:
    global _lanes
    old, _lanes = _lanes, _Lanes()  # the parent's threads do not exist in the child
    for workers in (old.remote, old.local):
        for parked in workers.parked:
            parked.close()


os.register_at_fork(after_in_child=_after_fork)


async def off_loop(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """fn(*args, **kwargs) on a worker thread (with the caller's context variables); the
    event loop runs other tasks meanwhile. Cancelled, it never starts fn if it has not
    started yet, and else waits for fn to end before raising CancelledError (fn may change
    something: a cancelled call is then never in flight behind the caller's back)."""
    lanes = _lanes
    return await _submit(lanes, lanes.remote, contextvars.copy_context(), fn, args, kwargs,
                         True)


async def array_off_loop(store: Any, read: bool, fn: Callable[..., T], /, *args: Any,
                         **kwargs: Any) -> T:
    """off_loop for an array's read (read=True) or write of store, on the workers for
    store's kind (see the module docstring). A read's chunk requests to a store whose
    requests are coroutines (ObjectStore) run on this event loop, natively (see
    chunkstore.storage.protocol.CALLER_LOOP); decoding stays on the worker threads.

    Cancelled, a call not started yet never runs; a write that started is waited for (as
    off_loop's), a read is left to end on its own.

    Reads only: a read holds no lock while it waits for a request, so a loop that some
    other code blocks for a while delays it, nothing more. A write waits for requests under
    its chunk locks, and a loop blocked on one of those locks (a synchronous write of the
    same chunks from a coroutine) would then never run the requests: writes send theirs to
    the store's own I/O loop."""
    ctx = contextvars.copy_context()
    if read:
        ctx.run(CALLER_LOOP.set, asyncio.get_running_loop())
    lanes = _lanes
    return await _submit(lanes, lanes.for_store(store), ctx, fn, args, kwargs, not read)


async def _submit(lanes: _Lanes, workers: _Workers, ctx: contextvars.Context,
                  fn: Callable[..., T], args: tuple, kwargs: dict, wait_started: bool) -> T:
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    job = _Job(lanes.inbox(loop), fut, ctx, fn, args, kwargs)
    workers.submit(job)
    try:
        return await fut
    except asyncio.CancelledError:
        # Dropped if no worker started it. A started write is waited for: returning now
        # would let it land after writes the caller awaits next (and over them).
        if wait_started and not job.drop() and not job.delivered:
            waiter = job.waiter = loop.create_future()
            while not waiter.done():
                try:
                    await asyncio.shield(waiter)
                except asyncio.CancelledError:
                    continue  # cancelled again: still waiting for the end
        raise
