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
"""

from __future__ import annotations

import asyncio
import contextvars
import collections
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar, cast

from chunkstore import config
from chunkstore.storage import protocol
from chunkstore.storage.protocol import CALLER_LOOP

T = TypeVar("T")

#: worker threads (as asyncio's default executor: the cores plus 4 for I/O waits, at most 32)
WORKERS = min(32, (os.cpu_count() or 1) + 4)


class _Inbox:
    """One event loop's finished calls, handed to it in batches (see the module docstring)."""

    __slots__ = ("loop", "lock", "items", "scheduled", "__weakref__")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.lock = threading.Lock()
        self.items: list[tuple[asyncio.Future, bool, Any]] = []
        self.scheduled = False

    def put(self, fut: asyncio.Future, ok: bool, value: Any) -> None:
        """Add a finished call (from a worker); wake the loop unless a wake-up is pending."""
        with self.lock:
            self.items.append((fut, ok, value))
            if self.scheduled:
                return
            self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the loop was closed meanwhile: nobody awaits the result
            pass

    def drain(self) -> None:
        """Set the results of the finished calls (on the loop)."""
        with self.lock:
            items, self.items, self.scheduled = self.items, [], False
        for fut, ok, value in items:
            if fut.cancelled():
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)


class _Parked:
    """An idle worker thread, waiting on its own lock for a job handed to it."""

    __slots__ = ("wake", "job")

    def __init__(self) -> None:
        self.wake = threading.Lock()
        self.wake.acquire()
        self.job: tuple | None = None


class _Workers:
    """Worker threads (started on demand, again after a fork) running at most size() jobs at
    once (config may lower it after threads started); jobs beyond wait in order.

    A job goes to the thread that went idle last (a stack of parked threads, each waiting
    on its own lock), not to whichever a shared queue wakes: the one or two threads a lone
    task keeps busy stay warm on their cores, where a queue hands each job to the thread idle
    the longest, whose core has had time to fall asleep."""

    def __init__(self, size: Callable[[], int]) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.jobs: collections.deque[tuple] = collections.deque()  # waiting for a turn
        self.parked: list[_Parked] = []                             # the last idle at the end
        self.running = 0

    def submit(self, job: tuple) -> None:
        with self.lock:
            if self.running >= self.size():
                self.jobs.append(job)  # a worker takes it when one of the running is done
                return
            if self.parked:
                self._hand(job)
                return
            self.running += 1
        threading.Thread(target=self._work, args=(job,), name="chunkstore-aio",
                         daemon=True).start()

    def _hand(self, job: tuple) -> None:
        """Give job, and a turn, to the thread parked last (self.lock held)."""
        self.running += 1
        parked = self.parked.pop()
        parked.job = job
        parked.wake.release()

    def _work(self, job: tuple) -> None:
        me = _Parked()
        while True:
            box, fut, ctx, fn, args, kwargs = job
            try:
                box.put(fut, True, ctx.run(fn, *args, **kwargs))
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
                box.put(fut, False, e)
            del box, fut, ctx, fn, args, kwargs, job
            with self.lock:
                size = self.size()
                while self.jobs and self.parked and self.running < size:
                    self._hand(self.jobs.popleft())  # size() was raised: more turns
                if self.jobs and self.running <= size:
                    job = self.jobs.popleft()  # this thread's turn goes on with it
                    continue
                self.running -= 1
                self.parked.append(me)
            me.wake.acquire()  # until submit hands this thread a job (and its turn)
            job, me.job = cast(tuple, me.job), None


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
    _lanes = _Lanes()  # the parent's threads do not exist in the child


os.register_at_fork(after_in_child=_after_fork)


async def off_loop(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """fn(*args, **kwargs) on a worker thread (with the caller's context variables); the
    event loop runs other tasks meanwhile."""
    lanes = _lanes
    return await _submit(lanes, lanes.remote, contextvars.copy_context(), fn, args, kwargs)


async def array_off_loop(store: Any, read: bool, fn: Callable[..., T], /, *args: Any,
                         **kwargs: Any) -> T:
    """off_loop for an array's read (read=True) or write of store, on the workers for
    store's kind (see the module docstring). A read's chunk requests to a store whose
    requests are coroutines (ObjectStore) run on this event loop, natively (see
    chunkstore.storage.protocol.CALLER_LOOP); decoding stays on the worker threads.

    Reads only: a read holds no lock while it waits for a request, so a loop that some
    other code blocks for a while delays it, nothing more. A write waits for requests under
    its chunk locks, and a loop blocked on one of those locks (a synchronous write of the
    same chunks from a coroutine) would then never run the requests: writes send theirs to
    the store's own I/O loop."""
    ctx = contextvars.copy_context()
    if read:
        ctx.run(CALLER_LOOP.set, asyncio.get_running_loop())
    lanes = _lanes
    return await _submit(lanes, lanes.for_store(store), ctx, fn, args, kwargs)


async def _submit(lanes: _Lanes, workers: _Workers, ctx: contextvars.Context,
                  fn: Callable[..., T], args: tuple, kwargs: dict) -> T:
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    workers.submit((lanes.inbox(loop), fut, ctx, fn, args, kwargs))
    return await fut
