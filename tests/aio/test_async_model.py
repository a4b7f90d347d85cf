"""Model-based test of the asynchronous API where its features meet: many asyncio tasks on
one ``AsyncArray`` (and on other handles of the same array, synchronous ones from threads
among them, and on several event loops at once), cancellation at random moments, and
``AsyncGroup`` operations next to a synchronous ``Group``; against a NumPy model.

A hypothesis RuleBasedStateMachine draws once per run a store (``MemoryStore``, or a
``DirectoryStore`` whose other handles open the directory as another ``DirectoryStore``, as
``LocalStore``, as ``FSStore("file://...")`` or through a symbolic link: all one location,
README "What is safe"), a
format (Zarr v2, v3, v3 sharded with 2 inner chunks a shard and axis), a small 2-d int32
array (chunks of 1-4), a fill value, and a synchronizer for each of B, C and T (none, a
ThreadSynchronizer or a ProcessSynchronizer, each its own). Handles on the array: ``A``, an
``AsyncArray`` over the synchronous ``S`` (one Array object: the tasks' calls and the threads'
share its caches); ``B``, an ``AsyncArray`` over another handle (another store object on the
same directory, or the same memory store); ``T``, another synchronous handle. Event loops:
a fresh one per step (``asyncio.run``) and a long-lived one in a background thread.

Rules:

- ``gather_writes``: 2-6 writers, each writing its own elements (DISJOINT, but sharing
  chunks and shards), each by a drawn kind (setitem, basic, orthogonal, coordinate, mask,
  vindex, block) and driven by a task on the fresh loop, a task on the background loop or a
  thread (synchronous write through S or T), all at once; 0-2 readers at the same time
  (whole-array reads, some into ``out=``). Afterwards the array must equal the model with
  EVERY write applied (README "What is safe": without a synchronizer, writes of one process
  through handles sharing in-process locks lose nothing, any regions). Each concurrent read
  must give, for every element, its old or its new value, and for every writer and every
  (inner) chunk, that writer's elements in the chunk all old or all new (a chunk is read
  whole, one version: never half of a write).
- ``cancel_writes``: 1-5 disjoint writes as tasks on one loop, each cancelled at a drawn
  moment (before it starts, after some loop turns, or by ``asyncio.wait_for`` timing out).
  README / chunkstore.aio.run: a call cancelled before a worker starts it never runs; a
  started write is never stopped midway and the CancelledError reaches the caller once it
  has ended. So once every task is done, each write is WHOLLY applied or WHOLLY absent (a
  task that returned normally: applied), and nothing changes afterwards (checked again after
  a pause: nothing lands later). The model takes what was observed.
- ``cancel_reads_out``: reads into caller ``out=`` buffers, cancelled at a drawn moment; a
  read that returned filled its buffer with the model's values; a cancelled one ended
  before the CancelledError (README): the buffer, overwritten by the caller afterwards,
  keeps the caller's values after a pause.
- ``cancel_resize`` / ``cancel_append``: one resize or append, cancelled at a drawn moment,
  next to disjoint writes inside the rows every shape keeps (append: the old shape) by other
  tasks; afterwards the shape (read through T) is the old or the new one, and the data the
  model's under that shape with the writes applied.
- ``faulty_write``: a write whose store fails (OSError) on one of its chunk (shard) writes:
  the error reaches the task; each (inner) chunk of the write is all old or all new (the
  model takes what was observed), and nothing is left locked (the next steps' writes of the
  same chunks go through, under the step timeout).
- ``group_ops``: 1-4 AsyncGroup operations at once (create_array, require_group,
  delitem, members) on distinct names, some cancelled; each is applied wholly or not at all
  (a cancelled one may be either; a returned one is applied), as a synchronous Group opened
  apart sees it.

Invariant after every step: every handle reads the model (values and shape, through an
operation: a handle's cached shape is refreshed at an operation's start).

CI cost: a few seconds. Soak: CHUNKSTORE_SOAK=<seconds> (see tests/model_support.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import chunkstore as cs
from chunkstore import AsyncArray
from chunkstore.errors import ChunkstoreError
from chunkstore.storage import DirectoryStore, LocalStore
from model_support import (STEP_TIMEOUT, BackgroundLoop, DISABLED, assert_exact,
                           call_timeout, model_settings, run_machine)

FORMATS = ["v2", "v3", "v3-sharded"]
KINDS = ["setitem", "basic", "ortho", "coord", "mask", "vindex", "block"]
DRIVERS = ["fresh", "bg", "thread_S", "thread_T"]
CANCELS = ["never", "before_start", "turns", "wait_for"]
SYNCS = ["none", "thread", "process"]


class FaultyMemoryStore(cs.MemoryStore):
    """A MemoryStore whose chunk writes fail when armed: the k-th chunk key stored from
    then on raises OSError (once)."""

    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()
        self.fail_at = None  # countdown of chunk keys to the failing one

    def _check(self, keys):
        with self.lock:
            if self.fail_at is None:
                return
            for k in keys:
                if k.rsplit("/", 1)[-1] in (".zarray", ".zattrs", ".zgroup", "zarr.json"):
                    continue
                if self.fail_at == 0:
                    self.fail_at = None
                    raise OSError(f"injected failure storing {k}")
                self.fail_at -= 1

    def __setitem__(self, key, value):
        self._check([key])
        super().__setitem__(key, value)

    def setitems(self, values):
        values = dict(values)
        self._check(list(values))
        super().setitems(values)


def run_fresh(coro, what="step"):
    """asyncio.run(coro) on a daemon thread, failing on a hang."""
    return call_timeout(lambda: asyncio.run(coro), what)


class Write:
    """One write of a region (bool mask of the array) with one value, by a kind."""

    def __init__(self, kind, region, value, sel_rows=None, block=None):
        self.kind, self.region, self.value = kind, region, value
        self.sel_rows = sel_rows  # basic: a row slice whose rows are the region's
        self.block = block        # block: (block row, block col slice, row slice, col slice)

    def args(self):
        """(method name, selection, value) for an Array / AsyncArray."""
        region, v = self.region, self.value
        rows = np.flatnonzero(region.any(axis=1))
        cols = np.flatnonzero(region.any(axis=0))
        k = self.kind
        if k == "block":
            bi, bcols = self.block[0], self.block[1]
            n = region[self.block[2], self.block[3]].shape
            return "block", (bi, bcols), np.full(n, v, dtype="i4")
        if k == "basic":
            rs = self.sel_rows
            c0, c1 = cols.min(), cols.max() + 1
            n = (len(rows), c1 - c0)
            return "basic", (rs, slice(c0, c1)), np.full(n, v, dtype="i4")
        if k == "setitem":
            return "setitem", (rows, slice(cols.min(), cols.max() + 1)) if self.sel_rows is None \
                else (self.sel_rows, slice(cols.min(), cols.max() + 1)), v
        if k == "ortho":
            return "ortho", (rows, cols), np.full((len(rows), len(cols)), v, dtype="i4")
        if k in ("coord", "vindex"):
            pts = np.nonzero(region)
            return k, pts, np.full(len(pts[0]), v, dtype="i4")
        return "mask", region, v


async def awrite(h, w):
    how, sel, val = w.args()
    if how == "setitem":
        if w.sel_rows is None and isinstance(sel[0], np.ndarray):
            # int array + slice: orthogonal (one array index) in NumPy too
            return await h.setitem(sel, val)
        return await h.setitem(sel, val)
    return await {"block": h.set_block_selection, "basic": h.set_basic_selection,
                  "ortho": h.set_orthogonal_selection, "coord": h.set_coordinate_selection,
                  "vindex": h.vindex.setitem, "mask": h.set_mask_selection}[how](sel, val)


def swrite(h, w):
    how, sel, val = w.args()
    if how == "setitem":
        h[sel] = val
    elif how == "vindex":
        h.vindex[sel] = val
    else:
        {"block": h.set_block_selection, "basic": h.set_basic_selection,
         "ortho": h.set_orthogonal_selection, "coord": h.set_coordinate_selection,
         "mask": h.set_mask_selection}[how](sel, val)


def pick(rng, options):
    return options[int(rng.integers(0, len(options)))]


class AsyncModel(RuleBasedStateMachine):

    @initialize(kind=st.sampled_from(["memory", "directory", "local_store", "symlink",
                                      "fsspec"]),
                fmt=st.sampled_from(FORMATS),
                rows=st.integers(1, 10), cols=st.integers(1, 10), c0=st.integers(1, 4),
                c1=st.integers(1, 4), fill=st.sampled_from([0, -1]),
                syncs=st.lists(st.sampled_from(SYNCS), min_size=3, max_size=3))
    def setup(self, kind, fmt, rows, cols, c0, c1, fill, syncs):
        self.tmp = tempfile.mkdtemp(prefix="amodel-")
        self.kind, self.fmt, self.fill = kind, fmt, fill
        self.chunks = (c0, c1)
        self.unit = self.chunks  # the unit read whole (an inner chunk when sharded)
        kw = dict(zarr_format=2 if fmt == "v2" else 3)
        if fmt == "v3-sharded":
            kw["shards"] = (2 * c0, 2 * c1)
        if kind == "memory":
            self.store = FaultyMemoryStore()
            self.store2 = self.store
        else:
            self.store = DirectoryStore(self.tmp)
            if kind == "local_store":  # (zarr-python 3's name for the same store)
                self.store2 = LocalStore(self.tmp)
            elif kind == "fsspec":     # fsspec's file:// (the directory, as a DirectoryStore)
                self.store2 = cs.storage.FSStore("file://" + self.tmp)
            elif kind == "symlink":    # the same directory through a symbolic link
                os.symlink(self.tmp, self.tmp + ".link")
                self.store2 = DirectoryStore(self.tmp + ".link")
            else:
                self.store2 = DirectoryStore(self.tmp)
        self.root = cs.open_group(self.store, mode="w", zarr_format=kw["zarr_format"])
        self.S = cs.create((rows, cols), chunks=self.chunks, dtype="i4", fill_value=fill,
                           store=self.store, path="a", **kw)
        self.A = AsyncArray(self.S)
        # B, C and T each with a drawn synchronizer, or none (README "What is safe": handles
        # of one process exclude each other whatever synchronizer each has)
        sync = [self.synchronizer(k, i) for i, k in enumerate(syncs)]
        self.B = AsyncArray(cs.open_array(self.store2, path="a", mode="r+",
                                          synchronizer=sync[0]))
        self.C = AsyncArray(cs.open_array(self.store2, path="a", mode="r+",
                                          cache_metadata=False, synchronizer=sync[1]))
        self.T = cs.open_array(self.store2, path="a", mode="r+", synchronizer=sync[2])
        self.model = np.full((rows, cols), fill, dtype="i4")
        self.counter = 1
        self.bg = BackgroundLoop()
        self.groups = {}  # name -> "array" | "group" (members of the root besides "a")
        self.zf = kw["zarr_format"]

    def teardown(self):
        bg = getattr(self, "bg", None)
        if bg is not None:
            bg.close()
        if getattr(self, "tmp", None):
            shutil.rmtree(self.tmp, ignore_errors=True)
            if os.path.islink(self.tmp + ".link"):
                os.unlink(self.tmp + ".link")
            for i in range(3):
                shutil.rmtree(self.tmp + f".locks{i}", ignore_errors=True)

    # ------------------------------------------------------------------ helpers
    def synchronizer(self, kind, i):
        """A new synchronizer of kind (SYNCS) for the i-th handle opened with one."""
        if kind == "thread":
            return cs.ThreadSynchronizer()
        if kind == "process":
            return cs.ProcessSynchronizer(self.tmp + f".locks{i}")
        return None

    def value(self, rng=None):
        """A value nobody wrote yet; or (a quarter of the writes) the fill value, which
        empties chunks (write_empty_chunks=False deletes them)."""
        if rng is not None and rng.random() < 0.25:
            return self.fill
        self.counter += 1
        return self.counter

    def draw_writes(self, rng, n, kinds=KINDS):
        """n writes of disjoint regions (each non-empty, or None where nothing is left),
        drawn from rng (not from hypothesis: what a cancellation did changes the model, and
        hypothesis wants the same draws when it replays a program)."""
        shape = self.model.shape
        scheme = pick(rng, ["rows", "blocks"])
        writes = []
        nbr = -(-shape[0] // self.chunks[0])
        nbc = -(-shape[1] // self.chunks[1])
        for w in range(n):
            kind = pick(rng, kinds)
            region = np.zeros(shape, bool)
            if scheme == "blocks":
                mine = [bi for bi in range(nbr) if bi % n == w]
                if not mine:
                    writes.append(None)
                    continue
                bi = pick(rng, mine)
                b0 = int(rng.integers(0, nbc))
                b1 = int(rng.integers(b0 + 1, nbc + 1))
                rs = slice(bi * self.chunks[0], min(shape[0], (bi + 1) * self.chunks[0]))
                cs_ = slice(b0 * self.chunks[1], min(shape[1], b1 * self.chunks[1]))
                region[rs, cs_] = True
                writes.append(Write(kind, region, self.value(rng), sel_rows=rs,
                                    block=(bi, slice(b0, b1), rs, cs_)))
                continue
            if kind == "block":
                kind = "ortho"
            rs = slice(w, shape[0], n)
            rows = np.arange(shape[0])[rs]
            if len(rows) == 0:
                writes.append(None)
                continue
            c0 = int(rng.integers(0, shape[1]))
            c1 = int(rng.integers(c0 + 1, shape[1] + 1))
            if kind in ("coord", "vindex", "mask"):
                chosen = rng.random((len(rows), c1 - c0)) < 0.6
                chosen[0, 0] = True
                region[rows[:, None], np.arange(c0, c1)[None, :]] = chosen
            else:
                region[rs, c0:c1] = True
            writes.append(Write(kind, region, self.value(rng), sel_rows=rs))
        return writes

    def apply(self, w):
        self.model[w.region] = w.value

    def check_read(self, got, old, writes, what):
        """got: a read that ran next to writes from old: every element old or new; each
        writer's elements in each unit (inner chunk) all old or all new."""
        assert got.shape == old.shape, (what, got.shape, old.shape)
        new = old.copy()
        for w in writes:
            new[w.region] = w.value
        ok = (got == old) | (got == new)
        assert ok.all(), (what, "value nobody wrote", np.argwhere(~ok)[:5], got, old, new)
        self.check_units(got, old, writes, what)

    def check_units(self, got, old, writes, what):
        r, c = self.unit
        for w in writes:
            for i in range(0, got.shape[0], r):
                for j in range(0, got.shape[1], c):
                    reg = w.region[i:i + r, j:j + c]
                    if not reg.any():
                        continue
                    g = got[i:i + r, j:j + c][reg]
                    o = old[i:i + r, j:j + c][reg]
                    isnew = g == w.value
                    if w.value != self.fill and not (isnew.all() or (~isnew).all()):
                        raise AssertionError((what, "half of a write in one chunk", w.kind,
                                              (i, j), g, o, w.value))

    def whole(self, what):
        """Read the array through T (a fresh operation)."""
        return np.asarray(self.T[...])

    # ------------------------------------------------------------------ rules
    @precondition(lambda self: "gather_writes" not in DISABLED)
    @rule(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 6), readers=st.integers(0, 2))
    def gather_writes(self, seed, n, readers):
        rng = np.random.default_rng(seed)
        writes = [w for w in self.draw_writes(rng, n) if w is not None]
        drivers = [pick(rng, DRIVERS) for _ in writes]
        handles = [pick(rng, ["A", "B", "C"]) for _ in writes]
        rkinds = [pick(rng, ["get", "out", "bg_out", "ortho"])
                  for _ in range(readers)]
        old = self.model.copy()
        start = threading.Barrier(1 + sum(d.startswith("thread") for d in drivers))
        errors, reads = [], []

        def thread_write(h, w):
            try:
                start.wait(10)
                swrite(h, w)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=thread_write, args=(self.S if d == "thread_S"
                                                               else self.T, w), daemon=True)
                   for d, w in zip(drivers, writes) if d.startswith("thread")]
        bg_writes = [awrite(getattr(self, h), w) for d, h, w in zip(drivers, handles, writes)
                     if d == "bg"]
        fresh_writes = [(h, w) for d, h, w in zip(drivers, handles, writes) if d == "fresh"]

        async def read(kind):
            if kind == "get":
                return await self.A.getitem(Ellipsis)
            if kind == "ortho":
                return await self.B.get_orthogonal_selection((slice(None), slice(None)))
            out = np.full(old.shape, -99, dtype="i4")
            await self.A.get_basic_selection(Ellipsis, out=out)
            return out

        async def bg_all():
            return await asyncio.gather(*bg_writes, *(read(k) for k in rkinds if k == "bg_out"))

        async def fresh():
            for t in threads:
                t.start()
            fut = self.bg.submit(bg_all())
            start.wait(10)
            got = await asyncio.gather(
                *(awrite(getattr(self, h), w) for h, w in fresh_writes),
                *(read(k) for k in rkinds if k != "bg_out"))
            return got, fut

        got, fut = run_fresh(fresh(), "gather_writes")
        bgot = fut.result(STEP_TIMEOUT)
        for t in threads:
            t.join(STEP_TIMEOUT)
            assert not t.is_alive(), "HANG: a writer thread"
        if errors:
            raise errors[0]
        for w in writes:
            self.apply(w)
        for r in [g for g in got if isinstance(g, np.ndarray)] + \
                 [g for g in bgot if isinstance(g, np.ndarray)]:
            self.check_read(np.asarray(r), old, writes, "concurrent read")
        assert_exact(self.whole("after gather"), self.model, "gather_writes lost an update")

    async def _cancel_at(self, coro, how, data_moment):
        """Run coro as a task, cancelled per how; returns "done" or the exception."""
        if how == "wait_for":
            try:
                await asyncio.wait_for(coro, data_moment / 4000)
                return "done"
            except (asyncio.TimeoutError, asyncio.CancelledError) as e:
                return e
        task = asyncio.ensure_future(coro)
        if how == "turns":
            for _ in range(data_moment):
                await asyncio.sleep(0)
        if how != "never":
            task.cancel()
        try:
            await task
            return "done"
        except asyncio.CancelledError as e:
            return e

    @precondition(lambda self: "cancel_writes" not in DISABLED)
    @rule(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 5), on_bg=st.booleans())
    def cancel_writes(self, seed, n, on_bg):
        rng = np.random.default_rng(seed)
        writes = [w for w in self.draw_writes(rng, n) if w is not None]
        hows = [pick(rng, CANCELS) for _ in writes]
        moments = [int(rng.integers(0, 13)) for _ in writes]
        handles = [pick(rng, ["A", "B", "C"]) for _ in writes]
        old = self.model.copy()

        async def main():
            return await asyncio.gather(*(
                self._cancel_at(awrite(getattr(self, h), w), how, m)
                for h, w, how, m in zip(handles, writes, hows, moments)))

        if on_bg:
            outcomes = self.bg.submit(main()).result(STEP_TIMEOUT)
        else:
            outcomes = run_fresh(main(), "cancel_writes")
        got = self.whole("after cancel")
        for w, how, out in zip(writes, hows, outcomes):
            reg = got[w.region]
            applied = (reg == w.value).all()
            if out == "done":
                assert applied, ("a write that returned is not applied", w.kind, how)
            else:
                assert applied or (reg == old[w.region]).all(), (
                    "a cancelled write is half applied", w.kind, how, got, old, w.value)
            if applied:
                self.apply(w)
        self.check_units(got, old, writes, "after cancel")
        assert_exact(got, self.model, "after cancel")
        # nothing lands later
        import time
        time.sleep(0.02)
        assert_exact(self.whole("later"), self.model, "a cancelled write landed later")

    @precondition(lambda self: "cancel_reads_out" not in DISABLED)
    @rule(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 4))
    def cancel_reads_out(self, seed, n):
        rng = np.random.default_rng(seed)
        hows = [pick(rng, CANCELS) for _ in range(n)]
        moments = [int(rng.integers(0, 13)) for _ in range(n)]
        kinds = [pick(rng, ["basic", "ortho", "coord", "mask", "block"]) for _ in range(n)]
        shape = self.model.shape
        outs = [np.full(shape if k not in ("coord", "mask") else (self.model.size,), -77,
                        dtype="i4") for k in kinds]
        pts = np.nonzero(np.ones(shape, bool))

        def call(k, out):
            h = getattr(self, pick(rng, ["A", "B", "C"]))
            return {"basic": lambda: h.get_basic_selection(Ellipsis, out=out),
                    "ortho": lambda: h.get_orthogonal_selection((slice(None), slice(None)),
                                                                out=out),
                    "coord": lambda: h.get_coordinate_selection(pts, out=out),
                    "mask": lambda: h.get_mask_selection(np.ones(shape, bool), out=out),
                    "block": lambda: h.get_block_selection((slice(None), slice(None)),
                                                           out=out)}[k]()

        calls = [call(k, o) for k, o in zip(kinds, outs)]

        async def main():
            res = await asyncio.gather(*(self._cancel_at(c, how, m)
                                         for c, how, m in zip(calls, hows, moments)))
            for r, o in zip(res, outs):
                if r != "done":
                    o[...] = -55
            await asyncio.sleep(0.02)
            return res

        res = run_fresh(main(), "cancel_reads_out")
        for r, o, k in zip(res, outs, kinds):
            if r == "done":
                assert_exact(o.reshape(shape), self.model, f"read into out ({k})")
            else:
                assert (o == -55).all(), ("a cancelled read into out= wrote it later", k, o)

    @precondition(lambda self: "cancel_resize" not in DISABLED)
    @rule(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 10), cols=st.integers(1, 10),
          append=st.booleans(), nw=st.integers(0, 3))
    def cancel_resize(self, seed, rows, cols, append, nw):
        rng = np.random.default_rng(seed)
        how = pick(rng, CANCELS)
        moment = int(rng.integers(0, 13))
        old = self.model.copy()
        if append:
            add = np.full((rows, old.shape[1]), self.value(), dtype="i4")
            new_shape = (old.shape[0] + rows, old.shape[1])
        else:
            new_shape = (rows, cols)
        keep = (min(old.shape[0], new_shape[0]), min(old.shape[1], new_shape[1]))
        writes = []
        if nw:
            saved = self.model
            self.model = self.model[:keep[0], :keep[1]].copy()
            # (no mask or block selection: their meaning depends on the shape)
            writes = [w for w in self.draw_writes(
                rng, nw, kinds=["setitem", "basic", "ortho", "coord", "vindex"])
                if w is not None and w.kind != "block"]
            self.model = saved
        h = getattr(self, pick(rng, ["A", "B", "C"]))

        async def main():
            op = h.append(add) if append else h.resize(new_shape)
            ws = [awrite((self.A, self.B, self.C)[i % 3], w) for i, w in enumerate(writes)]
            res = await asyncio.gather(self._cancel_at(op, how, moment), *ws)
            return res[0]

        res = run_fresh(main(), "cancel_resize")
        got = self.whole("after resize")
        for w in writes:  # the writes, inside what both shapes keep, land in either case
            r = np.zeros(old.shape, bool)
            r[:keep[0], :keep[1]] = w.region
            old[r] = w.value
        if append:
            new = np.concatenate([old, add])
        else:
            new = np.full(new_shape, self.fill, dtype="i4")
            new[:keep[0], :keep[1]] = old[:keep[0], :keep[1]]
        if res == "done":
            assert got.shape == new.shape, ("a resize that returned is not applied", got.shape)
        if got.shape == new.shape and (got.shape != old.shape or (got == new).all()):
            assert_exact(got, new, "after resize/append (applied)")
            self.model = new
        else:
            assert_exact(got, old, "after a cancelled resize/append (not applied)")
            self.model = old

    @precondition(lambda self: "faulty_write" not in DISABLED and self.kind == "memory")
    @rule(seed=st.integers(0, 2**32 - 1), k=st.integers(0, 3))
    def faulty_write(self, seed, k):
        rng = np.random.default_rng(seed)
        ws = [w for w in self.draw_writes(rng, 1) if w is not None]
        if not ws:
            return
        w = ws[0]
        old = self.model.copy()
        h = getattr(self, pick(rng, ["A", "B", "C"]))

        async def main():
            try:
                await awrite(h, w)
                return None
            except OSError as e:
                return e

        self.store.fail_at = k
        try:
            err = run_fresh(main(), "faulty_write")
        finally:
            self.store.fail_at = None
        got = self.whole("after a failed write")
        self.check_read(got, old, [w], "after a failed write")
        if err is None:
            assert_exact(got[w.region], np.full(w.region.sum(), w.value, "i4"), "returned")
        self.model = got.copy()

    @precondition(lambda self: "group_ops" not in DISABLED)
    @rule(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 4))
    def group_ops(self, seed, n):
        rng = np.random.default_rng(seed)
        names = list(rng.permutation(["x", "y", "z", "w"])[:n])
        ops = [pick(rng, ["create_array", "require_group", "delitem",
                                          "members"]) for _ in names]
        hows = [pick(rng, CANCELS) for _ in names]
        moments = [int(rng.integers(0, 13)) for _ in names]
        from chunkstore.api.asynchronous import open_group

        async def op(g, name, what):
            if what == "create_array":
                a = await g.create_array(name, shape=(3,), chunks=(2,), dtype="i4",
                                         fill_value=0, overwrite=True)
                await a.setitem(slice(None), 7)
            elif what == "require_group":
                try:
                    await g.require_group(name)
                except ChunkstoreError:  # an array there
                    pass
            elif what == "delitem":
                try:
                    await g.delitem(name)
                except KeyError:
                    pass
            else:
                try:
                    found = [m[0] async for m in g.members()]
                except ChunkstoreError:
                    # (a member deleted by a concurrent task between the listing and its
                    # opening: GroupNotFoundError/ArrayNotFoundError, not data)
                    assert "delitem" in ops or "create_array" in ops
                    return
                assert "a" in found, found

        gstore = self.store2 if rng.random() < 0.5 else self.store

        async def main():
            g = await open_group(gstore, mode="r+")
            return await asyncio.gather(*(self._cancel_at(op(g, nm, o), how, m)
                                          for nm, o, how, m in zip(names, ops, hows,
                                                                   moments)))

        res = run_fresh(main(), "group_ops")
        sync = cs.open_group(self.store2, mode="r")
        for name, o, r in zip(names, ops, res):
            before = self.groups.get(name)
            kind = ("array" if name in sync.array_keys() else
                    "group" if name in sync.group_keys() else None)
            if o == "create_array":
                after = "array"
                if kind == "array":
                    vals = sync[name][...]
                    # (cancelled between its create and its setitem: fill)
                    assert (vals == 7).all() or (r != "done" and (vals == 0).all()), vals
            elif o == "require_group":
                after = before if before == "group" else "group"
                if before == "array":
                    after = before  # require_group over an array raises
            elif o == "delitem":
                after = None
            else:
                after = before
            if r == "done" and not (o == "require_group" and before == "array"):
                assert kind == after, (name, o, kind, after)
            else:
                assert kind in (before, after), (name, o, r, kind, before, after)
            if kind is None:
                self.groups.pop(name, None)
            else:
                self.groups[name] = kind
        assert "a" in sync.array_keys()

    @precondition(lambda self: "hierarchy_race" not in DISABLED)
    @rule(seed=st.integers(0, 2**32 - 1), op=st.sampled_from(["delete", "recreate", "move"]),
          k=st.integers(1, 5), turns=st.integers(0, 8))
    def hierarchy_race(self, seed, op, k, turns):
        rng = np.random.default_rng(seed)
        from chunkstore.api.asynchronous import open_array, open_group
        kw = {"shards": (4, 4)} if self.fmt == "v3-sharded" else {}
        cancel = [rng.random() < 0.3 for _ in range(k)]

        async def main():
            g = await open_group(self.store, mode="r+")
            h = await g.create_array("h", shape=(10, 8), chunks=(2, 2), dtype="i4",
                                     fill_value=0, overwrite=True, **kw)
            h2 = await g.getitem("h")
            h3 = await open_array(self.store2, path="h", mode="r+")
            hs = [h, h2, h3]
            ws = [asyncio.ensure_future(hs[i % 3].setitem((slice(i, 10, k), slice(None)),
                                                          i + 1)) for i in range(k)]
            for _ in range(turns):
                await asyncio.sleep(0)
            for t, c in zip(ws, cancel):
                if c:
                    t.cancel()
            if op == "delete":
                await g.delitem("h")
            elif op == "recreate":
                await g.create_array("h", shape=(10, 8), chunks=(5, 4), dtype="i4",
                                     fill_value=0, overwrite=True)
            else:
                await g.move("h", "hm")
            return await asyncio.gather(*ws, return_exceptions=True)

        res = run_fresh(main(), "hierarchy_race")
        for r in res:
            assert r is None or isinstance(r, (ChunkstoreError, asyncio.CancelledError)), r
        grp = cs.open_group(self.store2, mode="r")
        stray = [key for key in self.store2.keys() if key.startswith("h/")]
        if op == "delete":
            assert "h" not in grp and not stray, stray
        elif op == "recreate":
            v = grp["h"][...]
            for i in range(k):
                mine = v[i::k]
                assert (mine == 0).all() or (mine == i + 1).all(), (
                    "a write in flight across a re-creation half applied", i, v)
            cs.open_group(self.store, mode="r+").__delitem__("h")
        else:
            assert "h" not in grp and not stray, stray
            v = grp["hm"][...]
            for i, r in enumerate(res):
                mine = v[i::k]
                if r is None:
                    assert (mine == i + 1).all(), ("a write that returned is lost", i, v)
                else:
                    assert (mine == 0).all() or (mine == i + 1).all(), (i, v)
            cs.open_group(self.store, mode="r+").__delitem__("hm")

    # ------------------------------------------------------------------ invariant
    def expected_keys(self):
        """The chunk (shard) keys of the array that hold a non-fill element."""
        unit = self.chunks if self.fmt != "v3-sharded" else (2 * self.chunks[0],
                                                             2 * self.chunks[1])
        keys = set()
        m = self.model
        for i in range(0, m.shape[0], unit[0]):
            for j in range(0, m.shape[1], unit[1]):
                if (m[i:i + unit[0], j:j + unit[1]] != self.fill).any():
                    ci, cj = i // unit[0], j // unit[1]
                    keys.add(f"a/{ci}.{cj}" if self.fmt == "v2" else f"a/c/{ci}/{cj}")
        return keys

    @invariant()
    def stored_chunks_are_the_non_fill_ones(self):
        if not hasattr(self, "model"):
            return
        stored = {k for k in self.store.keys() if k.startswith("a/") and
                  k.rsplit("/", 1)[-1] not in (".zarray", ".zattrs", "zarr.json")}
        assert stored == self.expected_keys(), ("stored chunks", sorted(stored),
                                                sorted(self.expected_keys()))

    @invariant()
    def handles_read_the_model(self):
        if not hasattr(self, "model"):
            return
        assert_exact(self.S[...], self.model, "S")
        assert_exact(self.T[...], self.model, "T")

        async def reads():
            return await asyncio.gather(self.A.getitem(Ellipsis), self.B.getitem(Ellipsis),
                                        self.C.get_orthogonal_selection(
                                            (slice(None), slice(None))))

        for i, g in enumerate(run_fresh(reads(), "invariant")):
            assert_exact(g, self.model, f"async handle {i}")


AsyncModel.TestCase.settings = model_settings(8, 12)


def test_async_model():
    run_machine(AsyncModel, model_settings(8, 12), model_settings(20, 30), 1)
