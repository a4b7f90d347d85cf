"""The hand-offs between an event loop and the workers (chunkstore.aio.run, aio._handoff):
a loop spinning for a result still answers every event and timer on time; a job handed to a
worker always runs (even when its loop stops before saying go); no job is lost or run twice
under any mix of tasks, durations, limits and cancellations; spins stop when calls are slow;
a read abandoned at the end of asyncio.run keeps neither its loop nor its descriptors."""

import asyncio
import gc
import os
import random
import threading
import time

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.aio import _handoff
from chunkstore.aio import run as aio_run
from chunkstore.aio.run import READ, WRITE, array_off_loop
from timeouts import call_within

needs_two_cores = pytest.mark.skipif((os.cpu_count() or 1) < 2,
                                     reason="a loop spins only with a core to spare")


def _within(fn, timeout=60):
    """fn() in a thread, failing (not hanging the suite) when it has not ended in time."""
    return call_within(fn, timeout)


@pytest.fixture(autouse=True)
def _spinning_allowed(monkeypatch):
    """The process may spin whatever the machine's load and the calls' waits (slow or
    sleeping calls, or a busy machine, stop it for BACKOFF_NS: see
    test_lone_calls_that_wait_stop_the_spinning, which turns that back on)."""
    backoff = aio_run.BACKOFF_NS
    monkeypatch.setattr(aio_run, "BACKOFF_NS", 0)
    _handoff.set_backoff(0)
    _handoff.set_contended(0)
    yield
    _handoff.set_backoff(backoff)
    _handoff.set_contended(0)


def _warm(local):
    """A local worker parked (spinning or asleep) for the next job."""
    async def main():
        return await array_off_loop(local, WRITE, lambda: 1)
    assert asyncio.run(main()) == 1


# ------------------------------------------------------------------ the primitive itself
def test_hand_park_and_tell_move_a_workers_state_as_documented():
    r, w = os.pipe()
    try:
        state = _handoff.Flag(_handoff.SPINNING)
        assert _handoff.hand(state, w)                 # spinning: told it is coming
        assert state.get() == _handoff.PENDING
        _handoff.tell([state])
        assert state.get() == _handoff.HANDED
        _handoff.park(state, None, 10**9, r)           # returns at once: it was handed
        assert state.get() == _handoff.BUSY

        state.set(_handoff.BLOCKED)                    # asleep: a byte on its pipe
        assert not _handoff.hand(state, w)
        assert os.read(r, 16) == b"\0"

        # PENDING and never told (its loop stopped): the worker goes on by itself, soon
        state.set(_handoff.PENDING)
        t0 = time.perf_counter()
        _within(lambda: _handoff.park(state, None, 10**9, r), timeout=10)
        assert time.perf_counter() - t0 < 0.5
        assert state.get() == _handoff.BUSY

        # spinning with no job: asleep after its spin, and woken by a byte
        state.set(_handoff.SPINNING)
        post = _handoff.Flag()
        threading.Timer(0.05, lambda: _handoff.go(state, w)).start()
        _handoff.park(state, post, 1000, r)
        assert post.get() == 1                         # stored before it waited
        assert state.get() == _handoff.BUSY
    finally:
        os.close(r)
        os.close(w)


# ------------------------------------------------------------------ the loop's spins
def _long_spins(monkeypatch):
    """A warm local store whose lone calls the loop spins for as long as they take (4 s:
    only an event or a timer can end a spin early); the loop's calls "take 2 s" once
    _as_if_slow is called on it. Returns it and the spins' record."""
    monkeypatch.setattr(aio_run, "LOOP_SPIN_NS", 10 * 10**9)
    spins = _Spins()
    monkeypatch.setattr(aio_run, "_handoff", spins)
    local = {}
    _warm(local)
    return local, spins


def _as_if_slow(loop):
    aio_run._lanes.inbox(loop).latency = 2e9


@needs_two_cores
def test_a_spinning_loop_answers_another_threads_callback_at_once(monkeypatch):
    local, spins = _long_spins(monkeypatch)

    async def main():
        loop = asyncio.get_running_loop()
        _as_if_slow(loop)
        t0 = time.monotonic()
        seen = loop.create_future()
        threading.Timer(0.1, loop.call_soon_threadsafe,
                        (lambda: seen.done() or seen.set_result(time.monotonic() - t0),)).start()
        call = asyncio.ensure_future(array_off_loop(local, READ, time.sleep, 1.5))
        at = await seen
        await call
        return at

    assert _within(lambda: asyncio.run(main())) < 0.8
    assert max(spins.limits) > 10**9   # (the loop did spin, for up to 4 s)


@needs_two_cores
def test_a_spinning_loop_runs_its_timers_on_time(monkeypatch):
    local, spins = _long_spins(monkeypatch)

    async def main():
        _as_if_slow(asyncio.get_running_loop())
        t0 = time.monotonic()

        async def timer():
            await asyncio.sleep(0.1)
            return time.monotonic() - t0
        t = asyncio.ensure_future(timer())
        await asyncio.sleep(0)   # the timer is scheduled before the call is submitted
        await array_off_loop(local, READ, time.sleep, 1.5)
        return await t

    assert _within(lambda: asyncio.run(main())) < 0.8
    assert spins.limits and max(spins.limits) <= 0.1e9   # (spun, until the timer was due)


class _Spins:
    """chunkstore.aio._handoff, noting the time limit of each of the loop's spins."""

    def __init__(self):
        self.limits = []
        self.hands = []

    def __getattr__(self, name):
        return getattr(_handoff, name)

    def loop_wait(self, done, gos, limit, fd):
        self.limits.append(limit)
        return _handoff.loop_wait(done, gos, limit, fd)

    def hand(self, state, fd):
        announced = _handoff.hand(state, fd)
        self.hands.append(announced)
        return announced


@needs_two_cores
def test_spins_stop_when_local_calls_are_slow_and_come_back_when_they_are_fast(monkeypatch):
    spins = _Spins()
    monkeypatch.setattr(aio_run, "_handoff", spins)
    local = {}
    _warm(local)

    async def main():
        box = aio_run._lanes.inbox(asyncio.get_running_loop())
        for _ in range(6):
            await array_off_loop(local, READ, time.sleep, 0.004)
        slow = box.latency
        spins.limits.clear()
        for _ in range(10):
            await array_off_loop(local, READ, time.sleep, 0.004)
        slow_spins = list(spins.limits)
        for _ in range(40):
            await array_off_loop(local, READ, lambda: None)
        return slow, slow_spins, box.latency

    slow, slow_spins, fast = asyncio.run(main())
    assert slow > aio_run.LOOP_SPIN_NS   # 4 ms a call
    assert slow_spins == []              # then no spin
    assert fast < slow / 2               # the estimate follows the calls back down
    assert spins.limits                  # and the spins come back


# ------------------------------------------------------------------ no job lost or kept
@needs_two_cores
def test_a_job_handed_by_a_loop_that_stops_before_saying_go_still_runs(monkeypatch):
    """The loop tells a spinning worker its job is coming, and says go once it lets go of
    the GIL: a loop stopped in between never says it. The worker goes on by itself, so the
    job runs and its turn is given back (with one worker, the next call would else wait
    forever)."""
    # (the worker still spins when the next loop hands it the job: asyncio.run's teardown
    # takes longer than a worker's usual spin)
    monkeypatch.setattr(aio_run._lanes.local, "spin_ns", 10**9)
    spins = _Spins()
    monkeypatch.setattr(aio_run, "_handoff", spins)
    local = {}
    ran = threading.Event()
    with cs.config.set(threads=1):
        _warm(local)
        spins.hands.clear()
        loop = asyncio.new_event_loop()
        try:
            task = loop.create_task(array_off_loop(local, WRITE, ran.set))
            loop.call_soon(loop.stop)
            loop.run_forever()   # one round: the job handed, the go never said
            assert spins.hands == [True]   # announced (PENDING), not told
            assert ran.wait(10)
            _within(lambda: _warm(local), timeout=20)
            loop.run_until_complete(task)
        finally:
            loop.close()


@pytest.mark.parametrize("seed", range(4))
def test_no_job_is_lost_or_run_twice_under_mixed_durations_limits_and_cancels(seed):
    """Tasks on a loop (and a second loop in another thread) submit calls of random
    durations around the spin limits, some cancelled, while the worker limit changes: every
    call that was not dropped ran exactly once and returned its own value."""
    rng = random.Random(seed)
    local = {}
    lock = threading.Lock()
    ran = []

    def job(i, dt):
        if dt:
            time.sleep(dt)
        with lock:
            ran.append(i)
        return i * 7

    def plan(base):
        return [(base + k, rng.choice([0, 0, 2e-5, 1e-4, 4e-4, 2e-3]), rng.random() < 0.15)
                for k in range(150)]

    async def tasks(items):
        futs = []
        for i, dt, cancel in items:
            f = asyncio.ensure_future(array_off_loop(local, rng.choice([READ, WRITE]), job,
                                                     i, dt))
            futs.append((i, f, cancel))
            if rng.random() < 0.3:
                await asyncio.sleep(0)
        for i, f, cancel in futs:
            if cancel:
                f.cancel()
        got = {}
        for i, f, _ in futs:
            try:
                got[i] = await f
            except asyncio.CancelledError:
                pass
        return got

    async def churn(items):
        t = asyncio.ensure_future(tasks(items))
        for threads in (1, 3, 2):
            await asyncio.sleep(0.01)
            cs.config.set(threads=threads)
        return await t

    a, b = plan(0), plan(1000)
    with cs.config.set(threads=2):
        other = {}
        th = threading.Thread(target=lambda: other.update(asyncio.run(tasks(b))))
        th.start()
        got = _within(lambda: asyncio.run(churn(a)))
        th.join(60)
        assert not th.is_alive()
    got.update(other)
    for _ in range(200):  # reads left to end on their own after a cancel
        with lock:
            if set(got) <= set(ran):
                break
        time.sleep(0.01)
    with lock:
        done = list(ran)
    assert len(done) == len(set(done))                  # none ran twice
    assert all(got[i] == i * 7 for i in got)            # each its own result
    assert set(got) <= set(done)                        # every result came from a run
    uncancelled = {i for i, _, c in a + b if not c}
    assert uncancelled <= set(got)                      # nothing awaited was lost


def test_reads_abandoned_at_the_end_of_asyncio_run_keep_no_loop_or_descriptor():
    """A read left running when asyncio.run ends (its task cancelled, the read left to end
    on its own) finishes later: its result must not be kept for a loop that is closed (it
    holds the loop, and the loop its inbox and the inbox's pipe)."""
    import weakref
    local = {}

    async def main():
        asyncio.ensure_future(array_off_loop(local, READ, time.sleep, 0.05))  # not awaited
        await asyncio.sleep(0.005)                                            # started
        return weakref.ref(asyncio.get_running_loop())

    def fds():
        return len(os.listdir("/proc/self/fd"))

    asyncio.run(main())
    time.sleep(0.2)
    gc.collect()
    before = fds()
    refs = [asyncio.run(main()) for _ in range(10)]
    for _ in range(100):
        time.sleep(0.02)
        gc.collect()
        if all(r() is None for r in refs):
            break
    assert [r() for r in refs] == [None] * 10
    assert fds() <= before + 2


class _RaisingOnce(_Spins):
    """A signal handler's exception raised as the loop's spin returns (a signal that came
    during the spin runs its Python handler only then)."""

    def __init__(self):
        super().__init__()
        self.raised = False

    def loop_wait(self, done, gos, limit, fd):
        seen = super().loop_wait(done, gos, limit, fd)
        if not self.raised:
            self.raised = True
            raise RuntimeError("from a signal handler")
        return seen


@needs_two_cores
def test_an_exception_raised_as_a_spin_returns_loses_no_result(monkeypatch):
    """The exception goes to the loop's exception handler (it came from a callback), but
    the inbox must not stay "spinning": a result would then never wake the loop again."""
    local = {}
    _warm(local)
    spins = _RaisingOnce()
    monkeypatch.setattr(aio_run, "_handoff", spins)

    async def main():
        loop = asyncio.get_running_loop()
        errors = []
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        got = [await asyncio.wait_for(array_off_loop(local, READ, lambda i=i: i), 5)
               for i in range(20)]
        return got, errors

    got, errors = _within(lambda: asyncio.run(main()))
    assert spins.raised and len(errors) == 1
    assert got == list(range(20))


@needs_two_cores
def test_lone_calls_that_wait_stop_the_spinning(monkeypatch):
    """A lone call that took far longer than its CPU time (its threads waited for a core,
    or for I/O) stops the process spinning for BACKOFF_NS: spinning where the cores are
    wanted only took more from the threads with work (4 processes' lone-task reads on a busy
    2-core machine: 2.6-3.6x as long)."""
    monkeypatch.setattr(aio_run, "BACKOFF_NS", 10**9)
    monkeypatch.setattr(aio_run, "LOOP_SPIN_NS", 50_000_000)
    _handoff.set_backoff(10**9)
    spins = _Spins()
    monkeypatch.setattr(aio_run, "_handoff", spins)
    local = {}
    _warm(local)

    async def main():
        for _ in range(20):
            await array_off_loop(local, READ, lambda: None)
        box = aio_run._lanes.inbox(asyncio.get_running_loop())
        # (the CPU time of one lone call in CPU_SAMPLE per worker is taken: within that many)
        for _ in range(aio_run.CPU_SAMPLE):
            box.latency = 20_000_000   # the loop spins up to 40 ms for the next call
            await array_off_loop(local, READ, time.sleep, 0.003)  # 3 ms waited, no CPU
            if _handoff.contended():
                break
        assert _handoff.contended()
        spins.limits.clear()
        for _ in range(20):
            await array_off_loop(local, READ, lambda: None)
        return list(spins.limits)

    assert asyncio.run(main()) == []              # no spin while contended
