"""What the model-based tests (hypothesis state machines against a model) share: the soak
and shrink switches, their settings, the run of one machine in CI or soak mode, and the
NumPy form of an orthogonal selection.

Environment: CHUNKSTORE_SOAK=<seconds> runs new examples until the time is spent (split
between a test's parametrizations), with shrinking; CHUNKSTORE_SHRINK=1 shrinks in CI mode
too (off by default: shrinking replays a failing program hundreds of times, and the
unshrunk one is printed step by step); CHUNKSTORE_MODEL_DISABLE=name,name turns rules or
checks off by name, to look past a known failure while soaking;
CHUNKSTORE_MODEL_STEP_TIMEOUT=<seconds> (default 60): a step still running after it is a hang
(call_timeout, BackgroundLoop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
from collections.abc import MutableMapping

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

SOAK = float(os.environ.get("CHUNKSTORE_SOAK", "0") or 0)
SHRINK = bool(SOAK) or os.environ.get("CHUNKSTORE_SHRINK", "") not in ("", "0")
PHASES = [p for p in Phase if SHRINK or p is not Phase.shrink]
DISABLED = {r.strip() for r in os.environ.get("CHUNKSTORE_MODEL_DISABLE", "").split(",")
            if r.strip()}


def model_settings(max_examples: int, steps: int) -> settings:
    """A machine's hypothesis settings: no deadline, no health checks, shrinking as above."""
    return settings(max_examples=max_examples, stateful_step_count=steps, deadline=None,
                    phases=PHASES, report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck))


def run_machine(machine, ci: settings, soak: settings, share: int) -> None:
    """Run machine once with the CI settings, or in soak mode again and again with the soak
    settings until its share (1/share) of CHUNKSTORE_SOAK seconds is spent."""
    if not SOAK:
        run_state_machine_as_test(machine, settings=ci)
        return
    end = time.monotonic() + SOAK / share
    while time.monotonic() < end:
        run_state_machine_as_test(machine, settings=soak)


def ortho_ix(sel, shape):
    """(NumPy index, dims dropped by an int) of an orthogonal selection on shape; IndexError
    where it does not fit the shape."""
    if len(sel) != len(shape):
        raise IndexError(f"{len(sel)} indices for {len(shape)} dimensions")
    idx, drop = [], []
    for d, (s, n) in enumerate(zip(sel, shape)):
        if isinstance(s, slice):
            idx.append(np.arange(n)[s])
        elif isinstance(s, np.ndarray) and s.dtype == bool:
            if len(s) != n:
                raise IndexError(f"boolean index of length {len(s)} for dimension of {n}")
            idx.append(np.flatnonzero(s))
        elif isinstance(s, np.ndarray):
            if len(s) and (s.min() < -n or s.max() >= n):
                raise IndexError(f"index out of bounds for dimension of {n}")
            idx.append(s)
        else:
            if not -n <= s < n:
                raise IndexError(f"index {s} out of bounds for dimension of {n}")
            idx.append(np.array([s]))
            drop.append(d)
    return np.ix_(*idx), tuple(drop)


def grid(shape, chunks):
    """The chunk grid's shape (chunks a dimension, the last one partial)."""
    return tuple(-(-s // c) for s, c in zip(shape, chunks))


def assert_exact(got, expected, what=""):
    """Same shape, dtype and values; NaN equals NaN."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, (what, got.shape, expected.shape)
    assert got.dtype == expected.dtype, (what, got.dtype, expected.dtype)
    np.testing.assert_array_equal(got, expected, err_msg=what)


def random_values(rng, dtype, shape):
    """Values of dtype drawn from small pools (so chunks that are all fill happen)."""
    dt = np.dtype(dtype)
    k = dt.kind
    if k == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if k in "iu":
        lo = 0 if k == "u" else -100
        # many values equal to small numbers: chunks that become all fill happen
        return rng.choice(np.array([lo, 0, 0, 7, -3 if k == "i" else 3, 99, 2**40 if
                                    dt.itemsize == 8 else 5]), size=shape).astype(dt)
    if k == "f":
        pool = np.array([0.0, -0.0, 1.5, -2.25, np.nan, 3.0, 0.0, 0.0], dtype=dt)
        return rng.choice(pool, size=shape)
    if k == "c":
        pool = np.array([0, complex(1, -1), complex(0, 2), -1.5, 0, 0], dtype=dt)
        return rng.choice(pool, size=shape)
    if k == "S":
        return rng.choice(np.array([b"", b"ab", b"xyz", b"q", b""], dtype=dt), size=shape)
    if k == "U":
        return rng.choice(np.array(["", "q", "zz", "a", ""], dtype=dt), size=shape)
    if k == "O":
        return rng.choice(np.array(["", "ab", "xyz", "q", ""], dtype=object), size=shape)
    if k in "Mm":
        unit = np.datetime_data(dt)[0]
        pool = np.array(["NaT", 0, 1, -86400, 7, 2**40], dtype=f"m8[{unit}]")
        return rng.choice(pool, size=shape).astype(dt) if k == "m" else (
            rng.choice(pool, size=shape).view(f"M8[{unit}]").astype(dt))
    raise AssertionError(dt)


def is_fill(values, fill_arr):
    """Elementwise: does each element equal the fill value as stored (bytewise; any NaN
    matches a NaN fill)?"""
    values = np.ascontiguousarray(values)
    dt = values.dtype
    if values.size == 0:
        return np.ones(values.shape, bool)
    if dt.kind == "O":
        fill = fill_arr[()]
        return np.frompyfunc(lambda x: type(x) is type(fill) and x == fill, 1, 1)(
            values).astype(bool)
    raw_v = values.reshape(-1).view(np.uint8).reshape(values.size, dt.itemsize)
    raw_f = np.frombuffer(fill_arr.tobytes(), np.uint8)
    same = (raw_v == raw_f).all(axis=1).reshape(values.shape)
    if dt.kind == "f" and np.isnan(fill_arr).all():
        same |= np.isnan(values)
    return same


def on(name):
    """A rule's precondition: the machine is set up (self.ready) and the rule is not
    disabled (CHUNKSTORE_MODEL_DISABLE)."""
    return lambda self: self.ready and name not in DISABLED


def join(base, rel):
    """Store path rel below base ("" is the root)."""
    return f"{base}/{rel}" if base and rel else (base or rel)


def under(p, base):
    """Is p base or below it (everything is below the root "")?"""
    return not base or p == base or p.startswith(base + "/")


def draw_slice(draw, n, reverse=True):
    """A slice for a dimension of n: bounds beyond it and negative ones, steps 1-3 (and
    -1, -2 where reverse)."""
    reach = 2 if reverse else 1
    start = draw(st.one_of(st.none(), st.integers(-n - reach, n + reach)))
    stop = draw(st.one_of(st.none(), st.integers(-n - reach, n + reach)))
    steps = [1, 1, 2, 3, -1, -2] if reverse else [1, 2, 3]
    step = draw(st.one_of(st.none(), st.sampled_from(steps)))
    return slice(start, stop, step)


def draw_basic(draw, shape, ellipsis=True, reverse=True):
    """A basic selection: per dimension an int or a slice (see draw_slice); sometimes cut
    short by an Ellipsis where ellipsis."""
    sel: list = []
    for n in shape:
        if n and draw(st.integers(0, 3)) == 0:
            sel.append(draw(st.integers(-n, n - 1)))
        else:
            sel.append(draw_slice(draw, n, reverse))
    if ellipsis and draw(st.integers(0, 4)) == 0:
        k = draw(st.integers(0, len(sel)))
        sel = sel[:k] + [Ellipsis]
    return tuple(sel)


def draw_ortho(draw, shape, unique=False, reverse=True, max_len=8, slice_of=None):
    """A selection for .oindex: per dimension an int, a slice (draw_slice, or
    slice_of(draw, n)), an int array of up to max_len elements (distinct elements, at most 6,
    where unique: concurrent writes must not hit one element twice) or a bool array."""
    sel = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "array", "bool"]))
        if kind == "int" and n:
            sel.append(draw(st.integers(-n, n - 1)))
        elif kind == "array" and n:
            ints = (st.lists(st.integers(-n, n - 1), max_size=6, unique_by=lambda x: x % n)
                    if unique else st.lists(st.integers(-n, n - 1), max_size=max_len))
            sel.append(np.array(draw(ints), dtype=np.int64))
        elif kind == "bool":
            sel.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)),
                                dtype=bool))
        else:
            sel.append(draw_slice(draw, n, reverse) if slice_of is None else slice_of(draw, n))
    return tuple(sel)


def close_quietly(stores):
    """Close each store that has close(), whatever it raises (a machine's teardown must
    not hide the failure it follows)."""
    for s in stores:
        close = getattr(s, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001
                pass


STEP_TIMEOUT = float(os.environ.get("CHUNKSTORE_MODEL_STEP_TIMEOUT", "60"))


def call_timeout(fn, what):
    """fn() on a daemon thread; a call still running after STEP_TIMEOUT s fails the step
    (a hang) instead of blocking the run."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=target, daemon=True, name="model-step")
    t.start()
    t.join(STEP_TIMEOUT)
    if t.is_alive():
        raise AssertionError(f"HANG: {what} still running after {STEP_TIMEOUT} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


class BackgroundLoop:
    """A long-lived event loop running in a background thread."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="model-bg-loop")
        self.thread.start()

    def submit(self, coro):
        """coro on the loop: its concurrent.futures.Future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro, what):
        """coro's result; a hang (STEP_TIMEOUT) fails the step."""
        fut = self.submit(coro)
        try:
            return fut.result(STEP_TIMEOUT)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise AssertionError(f"HANG: {what} on the background loop after "
                                 f"{STEP_TIMEOUT} s") from None

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


class DictMapping(MutableMapping):
    """A store over a plain dict, ``self.d``: the tests' recording, counting and
    fault-injecting stores override only the operations they watch."""

    def __init__(self, d=None):
        self.d = {} if d is None else d

    def __getitem__(self, k):
        return self.d[k]

    def __setitem__(self, k, v):
        self.d[k] = v

    def __delitem__(self, k):
        del self.d[k]

    def __iter__(self):
        return iter(list(self.d))

    def __len__(self):
        return len(self.d)
