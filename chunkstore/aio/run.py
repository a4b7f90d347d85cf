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
waker's core when the waker is about to wait, and nobody wakes only to block again.

Spinning. A wake-up is still costly where an idle core is halted: on the development VM (a
Firecracker guest) a call that does nothing, awaited in a loop, took 62-66 us a round trip
through the pipes, most of it waiting for the woken thread's core to run again (the system
calls themselves take about 1 us). So a side that expects the other soon spins for it
instead, without the GIL and politely (chunkstore.aio._handoff): a local worker gone idle
spins WORKER_SPIN_NS for its next job, when a core is left for the loop besides the workers
running; the loop, when it has nothing ready, one local call out (a lone task's: with more,
results come often enough, and spinning took time from the workers and tasks) and a core to
spare, spins for the result up to twice what its local calls have taken of late (the loop's
selector watched all along: any event or timer ends the spin at once; calls slower than
LOOP_SPIN_NS, or a busy machine making them so, end the spinning). Each flag is stored once
its thread has let go of the GIL, so the thread that sees it takes a free GIL; a job handed
to a spinning worker is only announced until the loop lets go of the GIL (_Inbox.spin), and
the worker goes on by itself if that does not come soon. Where the cores are wanted,
spinning is a loss (4 processes of lone-task reads on a busy 2-core machine took 2.6-3.6x as
long): spinners that had the CPU for under half of their spins, or a loop spin for a lone
call that lasted over twice the call's CPU time plus CONTENDED_SLACK_NS, stop the process
spinning for BACKOFF_NS (_handoff.contended; the spinners' finding takes three spins in a
row: one alone is an interrupt, or the hypervisor taking the core a while). The same round
trip now: 14 us. A lone task's random 256x256 tiles (asv_bench/tile_asyncio.py, 2 cores,
alternating A/B, min of 3): 0.425-0.464 s -> 0.305 s (tile256), 0.384-0.385 s -> 0.232-0.248
s (sharded), 0.59-0.63 -> 0.82-0.89 of the threaded reads' speed; 4 and 16 tasks unchanged
(within 0.02 s).

A lone call's spin runs in the step of the task that submitted it, where the loop has
nothing else ready (_Inbox.spin_now; the selector is watched all the same): no loop
iteration runs the spin, and none resumes the task, which returns the result without
suspending. A no-op call awaited in a loop: 14.4-14.7 -> 11.2-11.5 us a round trip
(alternating, 3 runs each). Then 8.3 us: the thread count (config) no longer looked up in
the environment at each job, and the CPU time taken of one lone call in CPU_SAMPLE.
"""

from __future__ import annotations

import asyncio
import contextvars
import collections
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from chunkstore import config
from chunkstore.aio import _handoff
from chunkstore.storage import protocol
from chunkstore.storage.protocol import CALLER_LOOP

T = TypeVar("T")

#: worker threads (as asyncio's default executor: the cores plus 4 for I/O waits, at most 32)
WORKERS = min(32, (os.cpu_count() or 1) + 4)
# the cores this process may run on (a container's or taskset's, not the machine's)
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
    os.cpu_count() or 1)
#: A loop with nothing else to do spins for a local call's result (see "Spinning" in the module
#: docstring) for up to twice the time its local calls have taken of late, when that is at
#: most LOOP_SPIN_NS; a local worker gone idle spins WORKER_SPIN_NS for its next job.
LOOP_SPIN_NS = 1_000_000
WORKER_SPIN_NS = 100_000
#: A spin of the loop for a lone local call that lasted over twice the call's CPU time plus
#: CONTENDED_SLACK_NS stops the process spinning for BACKOFF_NS: its threads wait for a core
#: (or for I/O). (A spin that ran out stopped it too at first: an odd slow read then cost
#: 0.1 s without spinning, a lone task's tiles 0.305 -> 0.405 s on a quiet machine.)
CONTENDED_SLACK_NS = 200_000
BACKOFF_NS = 20_000_000
#: The CPU time of one lone call in CPU_SAMPLE (per worker) is taken for that judgement.
CPU_SAMPLE = 4
_handoff.set_backoff(BACKOFF_NS)  # (the spinners' own finding: see _handoff)


class _Inbox:
    """One event loop's finished calls, handed to it in batches (see the module docstring).

    The loop is woken through a pipe of the inbox's own that it watches (add_reader), not
    through call_soon_threadsafe's socket: a pipe's wake-up is a "synchronous" one to the
    kernel, which runs the loop on the waking worker's core when that worker is about to
    wait (see the module docstring). Loops without add_reader (Windows' proactor) are woken
    by call_soon_threadsafe. A loop spinning for a lone call's result (spin) is not woken:
    the worker stores its done flag instead.

    The loop is held weakly: an inbox (kept per loop in a WeakKeyDictionary) must not keep
    its loop alive, or every loop that ever awaited a read would live forever."""

    __slots__ = ("loop_ref", "lock", "items", "scheduled", "wake_r", "wake_w", "spinning",
                 "done", "gos", "armed", "local_out", "event_fd", "latency", "spun",
                 "__weakref__")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop_ref = weakref.ref(loop)
        self.lock = threading.Lock()
        self.items: list[tuple[_Job, bool, Any]] = []
        self.scheduled = False
        self.spinning = False        # (under lock) the loop spins for self.done
        self.done = _handoff.Flag()  # stored by the worker that finishes a call meanwhile
        # (on the loop) workers handed a job (PENDING), told to go once the loop lets go of
        # the GIL (or going on by themselves soon after: see _handoff)
        self.gos: list[_handoff.Flag] = []
        self.armed = False           # (on the loop) self.spin is scheduled
        self.local_out = 0           # (on the loop) local-lane calls not delivered yet
        self.event_fd = _selector_fd(loop)
        self.latency = 0.0           # (on the loop) of its local calls of late, in ns
        self.spun = 0                # (on the loop) how long its last spin waited (ns)
        self.wake_r, self.wake_w = _nonblocking_pipe()
        try:
            loop.add_reader(self.wake_r, self.drain)
        except NotImplementedError:
            _close(self.wake_r, self.wake_w)
            self.wake_r = self.wake_w = -1
            self.event_fd = -1
        # The pipe is closed with the inbox, not with the loop: a worker still running a
        # call of the loop's writes to it (no descriptor number reused meanwhile by another
        # file gets the byte).
        weakref.finalize(self, _close, self.wake_r, self.wake_w)

    def put(self, job: _Job, ok: bool, value: Any) -> _handoff.Flag | None:
        """Add a finished call (from a worker); wake the loop unless a wake-up is pending.
        Returns the flag to store instead when the loop spins for it (the worker stores it
        once it has let go of the GIL)."""
        loop = self.loop_ref()
        if loop is None or loop.is_closed():
            # nobody can await it: not kept (it holds its future, which holds the loop: an
            # abandoned read finishing after asyncio.run would keep every such loop alive)
            return None
        with self.lock:
            self.items.append((job, ok, value))
            if self.scheduled:
                return None
            self.scheduled = True
            if self.spinning:
                return self.done
        if self.wake_w >= 0:
            try:
                os.write(self.wake_w, b"\0")
            except (BlockingIOError, OSError):  # full (a wake-up is pending), or closed
                pass                            # with its loop: nobody awaits the result
            return None
        try:
            loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the loop was closed meanwhile: nobody awaits the result
            pass
        return None

    def arm(self, loop: asyncio.AbstractEventLoop) -> None:
        """(on the loop, a call submitted) Have self.spin run once the loop has run what is
        ready now."""
        if not self.armed:
            self.armed = True
            loop.call_soon(self.spin)

    def spin(self, limit: int | None = None) -> None:
        """(on the loop) Tell the workers handed a job to start, letting go of the GIL first;
        then, when the loop has nothing else to do and a local call is out, spin for its
        result a while (the loop still answers any event: see _handoff.loop_wait)."""
        self.armed = False
        gos = self.gos[:]
        self.gos.clear()
        if limit is None:  # (spin_now gives the one it worked out)
            limit = self._spin_limit()
        if limit <= 0:
            if gos:
                _handoff.tell(gos)
            return
        outcome, ended = 0, False
        t0 = time.perf_counter_ns()
        try:
            with self.lock:
                ready = bool(self.items)  # (a result is in already: no spin)
                if not ready:
                    self.done.set(0)
                    self.spinning = True
            if ready:
                if gos:
                    _handoff.tell(gos)
            else:
                outcome = _handoff.loop_wait(self.done, gos, limit, self.event_fd)
            ended = True
        finally:
            # Whatever happened (a Python signal handler's exception can be raised at any
            # line here, and as the spin returns: its signal came during the spin), results
            # from now on wake the loop, and those that came are delivered: an inbox left
            # "spinning" would never wake the loop again.
            with self.lock:
                self.spinning = False
                got = bool(self.items)
            if got and not ended:
                loop = self.loop_ref()
                if loop is not None and not loop.is_closed():
                    loop.call_soon(self.drain)
        if got:
            self.spun = time.perf_counter_ns() - t0 if outcome == 1 else 0
            self.drain(piped=False)

    def spin_now(self) -> bool:
        """(on the loop, in the step of the task that submitted a lone local call) Spin for
        its result now, as spin would in the loop's next iteration, where the loop has
        nothing else ready (then True: the result was delivered if it came meanwhile; if
        not, it wakes the loop as usual). False, nothing done: the caller arms the spin."""
        limit = self._spin_limit()
        if limit <= 0:
            return False
        try:
            self.spin(limit)
        except Exception as e:  # noqa: BLE001 - (a signal handler's, raised in the spin)
            # where a spin run as a callback sends it: the loop's exception handler (the
            # call goes on, and its result comes as any other's)
            loop = self.loop_ref()
            if loop is not None:
                loop.call_exception_handler({"message": "exception while spinning for a "
                                             "call's result", "exception": e})
        return True

    def _spin_limit(self) -> int:
        """How long the loop may spin now (ns): 0 unless it has nothing ready, one local call
        is out (a lone task's: with more, results come often enough, and a spinning loop
        took time from the workers and the tasks: 4 tasks' tile reads 5-15% slower), a core
        is free for it and local calls have been short of late (on a busy machine they are
        not: the spins then stop)."""
        if (self.local_out != 1 or self.event_fd < 0 or _lanes.local.running >= _CORES
                or self.latency > LOOP_SPIN_NS or _handoff.contended()):
            return 0
        loop = self.loop_ref()
        ready = getattr(loop, "_ready", None)
        if ready is None or ready:
            return 0
        limit = self._limit_now()
        timers = getattr(loop, "_scheduled", None)
        if timers:
            due = timers[0].when() - loop.time()  # type: ignore[union-attr]
            limit = min(limit, int(due * 1e9))
        return limit

    def _limit_now(self) -> int:
        """The spin's limit by the calls' latency (ns): twice theirs of late, and 20 us."""
        return int(min(LOOP_SPIN_NS, 2 * self.latency + 20_000))

    def drain(self, piped: bool = True) -> None:
        """Set the results of the finished calls (on the loop). piped: called for a byte on
        the inbox's pipe (its reader), which is read first; spin calls it without (a
        byte that came anyway makes the reader call it again, for nothing)."""
        if piped and self.wake_r >= 0:
            try:
                os.read(self.wake_r, 4096)
            except BlockingIOError:
                pass
        with self.lock:
            items, self.items, self.scheduled = self.items, [], False
        now = time.perf_counter_ns() if items else 0
        spun, self.spun = self.spun, 0
        for job, ok, value in items:
            job.delivered = True
            if job.local:
                self.local_out -= 1
                self.latency += (now - job.since - self.latency) * 0.25
                if job.lone and job.cpu >= 0 and spun > 2 * job.cpu + CONTENDED_SLACK_NS:
                    # the loop spun for a lone call far longer than the call's CPU time: its
                    # threads waited for a core (or for I/O): spinning only takes more
                    _handoff.set_contended(BACKOFF_NS)
            fut = job.fut
            if fut.cancelled():
                if job.waiter is not None and not job.waiter.done():
                    job.waiter.set_result(None)  # a cancelled caller waits for the end
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)


def _selector_fd(loop: asyncio.AbstractEventLoop) -> int:
    """The file descriptor that is readable when the loop has an event (its epoll or
    kqueue), or -1 (the loop then never spins: uvloop, Windows, a select() selector)."""
    selector = getattr(loop, "_selector", None)
    try:
        return int(selector.fileno())  # type: ignore[union-attr]
    except (AttributeError, TypeError, ValueError, OSError, NotImplementedError):
        return -1


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
                 "waiter", "local", "since", "cpu", "lone")

    QUEUED, RUNNING, DROPPED = 0, 1, 2

    def __init__(self, box: _Inbox, fut: asyncio.Future, ctx: contextvars.Context,
                 fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        self.box, self.fut, self.ctx, self.fn, self.args, self.kwargs = (box, fut, ctx, fn,
                                                                         args, kwargs)
        self.lock = threading.Lock()
        self.state = _Job.QUEUED
        self.delivered = False  # (on the loop) its result reached the inbox's drain
        self.waiter: asyncio.Future | None = None  # (on the loop) a cancelled caller's
        self.local = False  # (on the loop) counted in its inbox's local_out
        self.since = 0      # (on the loop, local calls) when it was submitted (ns)
        self.cpu = -1       # (its worker) the CPU time it took (ns; -1: not measured)
        self.lone = False   # (on the loop) the only local call out when submitted

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
    """An idle worker thread, spinning on its state for a while (see "Spinning" in the
    module docstring), then waiting on a pipe of its own for a job handed to it (a pipe, not
    a lock: its wake-up runs the worker on the waker's core when the waker is about to wait,
    see _Inbox)."""

    __slots__ = ("wake_r", "wake_w", "job", "state")

    def __init__(self) -> None:
        self.wake_r, self.wake_w = os.pipe()
        self.job: _Job | None = None
        self.state = _handoff.Flag(_handoff.BUSY)

    def wake(self) -> None:
        _handoff.go(self.state, self.wake_w)

    def wait(self, post: _handoff.Flag | None, spin_ns: int) -> None:
        _handoff.park(self.state, post, spin_ns, self.wake_r)

    def close(self) -> None:
        _close(self.wake_r, self.wake_w)


class _Workers:
    """Worker threads (started on demand, again after a fork) running at most size() jobs at
    once (config may lower it after threads started); jobs beyond wait in order.

    A job goes to the thread that went idle last (a stack of parked threads, each waiting
    on its own pipe), not to whichever a shared queue wakes: the one or two threads a lone
    task keeps busy stay warm on their cores, where a queue hands each job to the thread idle
    the longest, whose core has had time to fall asleep."""

    def __init__(self, size: Callable[[], int], spin_ns: int = 0) -> None:
        self.size = size
        self.spin_ns = spin_ns  # how long a thread gone idle spins (with a core to spare)
        self.lock = threading.Lock()
        self.jobs: collections.deque[_Job] = collections.deque()  # waiting for a turn
        self.parked: list[_Parked] = []                             # the last idle at the end
        self.running = 0

    def submit(self, job: _Job, gos: list[_handoff.Flag] | None = None) -> None:
        """Run job on a worker. A parked worker handed it is told so at once; given gos (on
        an event loop), one that spins is only told that it is coming, and its state added
        to gos: the loop says go once it lets go of the GIL (_Inbox.spin), which spares the
        worker waking to wait for the GIL."""
        with self.lock:
            if self.running >= self.size():
                self.jobs.append(job)  # a worker takes it when one of the running is done
                return
            parked = self._hand(job) if self.parked else None
            if parked is None:
                self.running += 1
        if parked is not None:
            if gos is None:
                parked.wake()
            elif _handoff.hand(parked.state, parked.wake_w):
                gos.append(parked.state)
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
        lone = 0  # lone calls run by this thread: the CPU time of every CPU_SAMPLE-th is taken
        while job is not None:
            box = job.box
            done: tuple | None = None
            if job.start():  # (else dropped: its caller was cancelled before it started)
                # (the CPU time only of some lone calls, the only kind judged: see drain; the
                # thread's CPU clock is a system call, 0.44 us twice a call)
                timed = job.lone and not (lone := lone + 1) % CPU_SAMPLE
                cpu = time.thread_time_ns() if timed else 0
                try:
                    done = (job, True, job.ctx.run(job.fn, *job.args, **job.kwargs))
                except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
                    done = (job, False, e)
                if timed:
                    job.cpu = time.thread_time_ns() - cpu
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
                    # spinning while parked, if a core is left for the loop besides those
                    # running jobs (a job handed from then on waits in the state or the pipe)
                    me.state.set(_handoff.SPINNING if self.spin_ns and
                                 self.running + 1 < _CORES else _handoff.BLOCKED)
                    self.parked.append(me)
            for parked in woken:
                parked.wake()
            # The result goes to the loop last: the loop, woken, wants the GIL, which this
            # thread holds from there to its wait for as little as can be.
            post = box.put(*done) if done is not None else None
            del box, done
            if job is None:
                # until submit hands this thread a job (and its turn); a loop spinning for
                # the result sees it once this thread has let go of the GIL
                me.wait(post, self.spin_ns)
                job, me.job = me.job, None
            elif post is not None:
                post.set(1)


class _Lanes:
    """The two sets of workers (see the module docstring) and each event loop's inbox."""

    def __init__(self) -> None:
        self.remote = _Workers(lambda: WORKERS)
        self.local = _Workers(lambda: max(1, config.get("threads")), WORKER_SPIN_NS)
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


#: what an array's call does (array_off_loop): read, read into a buffer of the caller's, write
READ, READ_INTO, WRITE = "read", "read into", "write"


async def array_off_loop(store: Any, op: str, fn: Callable[..., T], /, *args: Any,
                         **kwargs: Any) -> T:
    """off_loop for an array's call of kind op (READ, READ_INTO, WRITE) on store, on the
    workers for store's kind (see the module docstring). A read's chunk requests to a store
    whose requests are coroutines (ObjectStore) run on this event loop, natively (see
    chunkstore.storage.protocol.CALLER_LOOP); decoding stays on the worker threads.

    Cancelled, a call not started yet never runs; a write that started is waited for (as
    off_loop's), and so is a read into the caller's buffer (``out=``: left to end on its
    own, it would go on filling the buffer after the CancelledError reached the caller, over
    whatever the caller put there since); a READ is left to end on its own.

    Reads only: a read holds no lock while it waits for a request, so a loop that some
    other code blocks for a while delays it, nothing more. A write waits for requests under
    its chunk locks, and a loop blocked on one of those locks (a synchronous write of the
    same chunks from a coroutine) would then never run the requests: writes send theirs to
    the store's own I/O loop."""
    if op not in (READ, READ_INTO, WRITE):
        raise ValueError(f"array_off_loop: op must be READ, READ_INTO or WRITE, not {op!r}")
    ctx = contextvars.copy_context()
    # (asyncio.get_running_loop costs a system call, getpid: asked once a call)
    loop = asyncio.get_running_loop()
    if op != WRITE:
        ctx.run(CALLER_LOOP.set, loop)
    lanes = _lanes
    return await _submit(lanes, lanes.for_store(store), ctx, fn, args, kwargs, op != READ,
                         loop)


async def _submit(lanes: _Lanes, workers: _Workers, ctx: contextvars.Context,
                  fn: Callable[..., T], args: tuple, kwargs: dict, wait_started: bool,
                  loop: asyncio.AbstractEventLoop | None = None) -> T:
    if loop is None:
        loop = asyncio.get_running_loop()
    fut = loop.create_future()
    box = lanes.inbox(loop)
    job = _Job(box, fut, ctx, fn, args, kwargs)
    if workers is lanes.local:
        job.local = True
        job.since = time.perf_counter_ns()
        box.local_out += 1
    # (a spinning worker's go deferred to the loop's spin: only a lone local call is spun for)
    lone = job.lone = box.local_out == 1 and job.local
    workers.submit(job, box.gos if lone else None)
    if lone:
        if box.armed or not box.spin_now():
            box.arm(loop)
        elif fut.done():
            return fut.result()
    try:
        return await fut
    except asyncio.CancelledError:
        # Dropped if no worker started it. A started write is waited for: returning now
        # would let it land after writes the caller awaits next (and over them).
        dropped = job.drop()
        if dropped and job.local and not job.delivered:
            job.local = False  # (never delivered: it never runs)
            box.local_out -= 1
        if wait_started and not dropped and not job.delivered:
            waiter = job.waiter = loop.create_future()
            while not waiter.done():
                try:
                    await asyncio.shield(waiter)
                except asyncio.CancelledError:
                    continue  # cancelled again: still waiting for the end
        raise
