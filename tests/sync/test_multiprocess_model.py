"""Model-based test: several processes (and threads in them) writing one array at once,
checked step by step against a NumPy model.

A seeded random-program generator (hypothesis does not drive processes well) draws, per
program, a format (Zarr v2, v3, sharded v3 with several inner chunks per shard and the index
at the start or the end), a compressor (none, Blosc, Zstd), an order (C, F), a store
(DirectoryStore, NestedDirectoryStore, SQLiteStore, LMDBStore), a
dtype and fill value (NaN included), write_empty_chunks, a synchronizer (none,
ThreadSynchronizer, ProcessSynchronizer), 1 or 2 threads per worker, a shape (1-3 dims) and
chunks. Each of W (3) long-lived worker processes keeps its own handles on the array (some
with cache_metadata=True, some False), kept across steps, so handles opened before a resize
stay in use (stale metadata).

Each step draws one value array V (a function of the step: values that change every step,
and fill values, sometimes everywhere so that writes delete chunks). Every write of the
step writes V at the elements it selects, so writers may overlap (identical values) and
the model is deterministic: it is the old model with V at the union of the selections. A
lost read-modify-write update (one writer writing back another's chunk from before its
write) leaves an element at its old value, which always differs from V there. Selections:
basic (ints, slices with steps, negative bounds), oindex with int and bool arrays, vindex
points, masks, block selections, scalars (when V is constant). What the README promises
decides the regions (README "What is safe: several handles, threads and processes"):

- with a ProcessSynchronizer: any regions, overlapping and sharing chunks and shards;
- otherwise (none, or a ThreadSynchronizer, which is per process): each process writes
  its own box of whole chunks (whole shards when sharded); its threads share it freely.

Some steps resize or append through one worker's handle (with a ProcessSynchronizer
sometimes two workers at once: the same resize, or appends of the same data, which must
land one after the other); the other workers then write only inside both shapes, with
explicit selections (no masks, bool arrays, open bounds or partial edge blocks: the same on
either shape). With a ProcessSynchronizer, cached handles made stale by another process's
change keep writing (planned again under the locks); a write or append that such a handle
refuses because the selection or data does not fit its old shape is repeated through a
handle without cached metadata (identical values: harmless). Without one the shape change
runs alone, and cached handles are opened again after it (README: nothing else is
promised). Reads race the writes (and, with a ProcessSynchronizer, the shape changes):
each element read must be its old or its new value (or, outside both shapes during a
change, the fill value), never anything else (a torn chunk, a fill value for a chunk that
exists). Some checks wait until the shard files are settled (2 s), so that handles cache
shard indexes that the next step's rewrites make stale.

After each step: a fresh handle, the parent's long-lived handles (one cached, one not) and
every worker handle read the whole array: a handle's (possibly old) shape shows the model
where it overlaps the array and the fill value beyond. The stored chunks are exactly those
holding a non-fill element (write_empty_chunks=False), or those written and still inside
the shape (True).

CI cost: 7 programs of 6 steps (about 5 s on 2 cores). CHUNKSTORE_SOAK=<seconds> runs new
programs (new seeds) until the time is spent; CHUNKSTORE_MP_SEED=<n> replays one program.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import tempfile
import threading
import time
import traceback

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from model_support import grid, is_fill

SOAK = float(os.environ.get("CHUNKSTORE_SOAK", "0") or 0)
SEED = os.environ.get("CHUNKSTORE_MP_SEED", "")
CTX = mp.get_context("spawn")
W = 3
CI_PROGRAMS = 6
STEPS = 12 if SOAK else 6
OPS = (2, 12) if SOAK else (0, 4)          # writes per worker and step
SETTLE_S = 2.1       # > chunkstore.storage.directory.SETTLE_NS: shard indexes get cached

FORMATS = ["v2", "v3", "v3-sharded-end", "v3-sharded-start"]
STORES = ["directory", "nested", "sqlite", "lmdb"]
DTYPES = {"<i4": [0, -7], "<f8": [0.0, float("nan"), 1.5], "<u2": [0, 3]}
SYNCS = ["process", "process", "none", "thread"]


# ============================================================================ worker side
_STATE: dict = {}


def _open_store(kind, path):
    if kind == "directory":
        return cs.DirectoryStore(path)
    if kind == "nested":
        return cs.NestedDirectoryStore(path)
    if kind == "sqlite":
        return cs.SQLiteStore(path)
    if kind == "lmdb":
        return cs.LMDBStore(path)
    raise AssertionError(kind)


def _sync_of(kind, lock_dir):
    if kind == "process":
        return cs.ProcessSynchronizer(lock_dir)
    if kind == "thread":
        return cs.ThreadSynchronizer()
    return None


def w_setup(cfg):
    """Close what a previous program left; open this program's store."""
    w_teardown()
    _STATE["cfg"] = cfg
    _STATE["store"] = _open_store(cfg["store"], cfg["path"])
    _STATE["sync"] = _sync_of(cfg["sync"], cfg["locks"])
    _STATE["handles"] = {}
    return True


def w_teardown():
    st = _STATE.pop("store", None)
    _STATE.clear()
    if st is not None and hasattr(st, "close"):
        st.close()
    return True


def w_open(hid, cache):
    _STATE["handles"][hid] = (cs.open_array(_STATE["store"], mode="r+", cache_metadata=cache,
                                            synchronizer=_STATE["sync"],
                                            write_empty_chunks=_STATE["cfg"]["wec"]), cache)
    return True


def w_reopen_cached():
    for hid, (_, cache) in list(_STATE["handles"].items()):
        if cache:
            w_open(hid, cache)
    return True


def _apply(z, op):
    kind = op[0]
    if kind == "basic":
        z[op[1]] = op[2]
    elif kind == "oindex":
        z.oindex[op[1]] = op[2]
    elif kind == "vindex":
        z.vindex[op[1]] = op[2]
    elif kind == "mask":
        z.vindex[op[1]] = op[2]
    elif kind == "block":
        z.blocks[op[1]] = op[2]
    elif kind == "resize":
        z.resize(*op[1])
    elif kind == "append":
        z.append(op[1], axis=op[2])
    else:
        raise AssertionError(kind)


def _same(a, b):
    return (a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else a == b


def _check_read(z, old, new):
    """A read racing the step's writes (and shape change): each element its old or its new
    value; during a shape change, an element outside both shapes may also read as the fill
    value (append stores the new shape before the appended data)."""
    data = z[...]
    if data.shape not in (old.shape, new.shape):
        return None             # a stale handle: checked after the step
    fill = _STATE["cfg"]["fill"]
    fo, fn = _frame(old, data.shape, fill, old.dtype), _frame(new, data.shape, fill, old.dtype)
    ok = _same(data, fo) | _same(data, fn)
    if old.shape != new.shape:
        outside = np.ones(data.shape, bool)
        outside[tuple(slice(0, min(a, b)) for a, b in zip(old.shape, new.shape))] = False
        ok |= outside & _same(data, np.full(data.shape, fill, old.dtype))
    if not ok.all():
        bad = [tuple(int(x) for x in b) for b in np.argwhere(~ok)[:5]]
        return [f"element {b}: read {data[b]!r} (shape {data.shape}), old {fo[b]!r}, "
                f"new {fn[b]!r}" for b in bad]
    return None


def w_step(barrier, threads, reads, old, new):
    """Run each thread's ops (lists of (hid, op)), and reads racing them; returns
    (problems, errors)."""
    problems, errors = [], []

    def run(ops):
        try:
            for hid, op in ops:
                z = _STATE["handles"][hid][0]
                try:
                    _apply(z, op)
                except (IndexError, ValueError):
                    # a handle with cached metadata normalizes the selection by its own
                    # (stale) shape first and may refuse one drawn for the array's shape
                    # (as zarr-python does); the same write through a handle that reads
                    # the metadata (identical values: repeating a part is harmless)
                    # (an append through it, of data shaped by the array's shape, may be
                    # refused likewise, README "What is safe"; refused, it changes nothing)
                    if hid == "h0" or op[0] == "resize":
                        raise
                    _apply(_STATE["handles"]["h0"][0], op)
        except Exception as e:  # noqa: BLE001 - reported
            errors.append(f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}")

    def read(hids):
        try:
            for hid in hids:
                p = _check_read(_STATE["handles"][hid][0], old, new)
                if p:
                    problems.append(f"racing read via {hid}: {p}")
        except Exception as e:  # noqa: BLE001 - reported
            errors.append(f"read: {type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}")

    ts = [threading.Thread(target=run, args=(ops,)) for ops in threads]
    if reads:
        ts.append(threading.Thread(target=read, args=(reads,)))
    barrier.wait(timeout=60)
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return problems, errors


def w_read_all():
    return {hid: (tuple(z.shape), z[...]) for hid, (z, _) in _STATE["handles"].items()}


def _worker_main(conn, barrier):
    import chunkstore  # noqa: F401 - imports paid once
    while True:
        msg = conn.recv()
        if msg is None:
            return
        name, args = msg
        try:
            if name == "w_step":
                res = w_step(barrier, *args)
            else:
                res = globals()[name](*args)
            conn.send(("ok", res))
        except BaseException as e:  # noqa: BLE001 - reported
            conn.send(("err", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


class Workers:
    def __init__(self, n):
        self.barrier = CTX.Barrier(n)
        self.conns, self.procs = [], []
        for _ in range(n):
            a, b = CTX.Pipe()
            p = CTX.Process(target=_worker_main, args=(b, self.barrier), daemon=True)
            p.start()
            self.conns.append(a)
            self.procs.append(p)

    def call(self, calls, timeout=120):
        """calls: {worker: (name, args)}; results by worker."""
        for w, c in calls.items():
            self.conns[w].send(c)
        out = {}
        for w in calls:
            if not self.conns[w].poll(timeout):
                raise TimeoutError(f"worker {w} did not answer {calls[w][0]}")
            status, res = self.conns[w].recv()
            if status != "ok":
                raise AssertionError(f"worker {w} {calls[w][0]}: {res}")
            out[w] = res
        return out

    def all(self, name, *args):
        return self.call({w: (name, args) for w in range(len(self.conns))})

    def close(self):
        for c in self.conns:
            try:
                c.send(None)
            except OSError:
                pass
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.kill()


@pytest.fixture(scope="module")
def workers():
    ws = Workers(W)
    try:
        ws.all("w_teardown")
        yield ws
    finally:
        ws.close()


# ============================================================================ generator
def _chunk_range(c, chunks):
    return tuple(slice(i * n, (i + 1) * n) for i, n in zip(c, chunks))


class Program:
    def __init__(self, seed, tmpdir, **force):
        rng = self.rng = np.random.default_rng(seed)
        self.seed = seed
        pick = lambda xs: xs[int(rng.integers(len(xs)))]  # noqa: E731
        self.fmt = pick(FORMATS)
        self.store_kind = pick(STORES)
        self.dtype = pick(list(DTYPES))
        self.fill = pick(DTYPES[self.dtype])
        self.wec = bool(rng.integers(2))
        self.sync_kind = pick(SYNCS)
        self.nthreads = int(rng.integers(1, 3))
        # raw chunks (a shard's size then stays the same when rewritten), Blosc, Zstd
        self.compressor = pick(["none", "default", "zstd"])
        self.order = pick(["C", "C", "F"])
        ndim = pick([1, 2, 2, 2, 3])
        self.chunks = tuple(int(rng.integers(1, 4)) for _ in range(ndim))
        self.shards = None
        if "sharded" in self.fmt:
            self.shards = tuple(c * int(rng.integers(1, 3)) for c in self.chunks)
            if self.shards == self.chunks:
                self.shards = tuple(c * 2 for c in self.chunks)
        unit = self.shards or self.chunks
        # sometimes many chunks (synchronized writes covering 16 or more whole chunks and
        # some in part lock their partial chunks apart: chunkstore.sync.locking)
        most = 4 if rng.integers(3) else 12 // len(unit) + 3
        self.shape = tuple(int(rng.integers(1, most)) * u + int(rng.integers(0, u + 1))
                           for u in unit)
        self.unit = unit
        self.path = os.path.join(tmpdir, {"sqlite": "a.sqlite", "lmdb": "a.lmdb"}.get(
            self.store_kind, "a.zarr"))
        self.locks = os.path.join(tmpdir, "locks")
        self.text = (f"seed={seed} format={self.fmt} store={self.store_kind} "
                     f"dtype={self.dtype} fill={self.fill!r} wec={self.wec} "
                     f"sync={self.sync_kind} threads={self.nthreads} compressor={self.compressor} "
                     f"order={self.order} shape={self.shape} "
                     f"chunks={self.chunks} shards={self.shards}")
        self.step_no = 0
        self.least = None  # (set by the run: each dimension's least length so far)
        for k, v in force.items():       # (a test that needs one configuration)
            setattr(self, k, v)
        if force:
            self.text += f" forced {force}"

    # ------------------------------------------------------------------ values
    def values(self, shape):
        """This step's value array V: new values (never equal to an old one) and fills."""
        dt = np.dtype(self.dtype)
        size = int(np.prod(shape))
        base = (np.arange(size) % 97 + 1 + (self.step_no * 101) % 30000).astype(dt)
        mode = int(self.rng.integers(6))
        if mode == 0:
            fill = np.ones(size, bool)                   # everything fill: deletes
        elif mode == 1:
            fill = np.zeros(size, bool)
        else:
            fill = self.rng.random(size) < 0.3
        v = np.where(fill, np.array(self.fill, dtype=dt), base).astype(dt)
        return v.reshape(shape), mode == 0

    # ------------------------------------------------------------------ selections
    def _slice(self, lo, hi, explicit):
        rng = self.rng
        a = int(rng.integers(lo, hi + 1))
        b = int(rng.integers(a, hi + 1))
        step = int(rng.choice([1, 1, 2, 3]))
        if not explicit and rng.integers(3) == 0 and lo == 0 and a == 0:
            return slice(None, b, step)
        return slice(a, b, step)

    def selection(self, box, full_shape, explicit):
        """(kind, selection, numpy index) inside box ((lo, hi) per dim). explicit: no masks,
        no bool arrays, no negative or open bounds (the same on any shape)."""
        rng = self.rng
        kinds = ["basic", "oindex", "vindex", "block", "int"]
        if not explicit:
            kinds += ["mask", "bool"]
        kind = kinds[int(rng.integers(len(kinds)))]
        if kind == "block":
            # a range of blocks per dim, each block wholly inside the box (the last block
            # of a dim ends at the array's end)
            sel, idx = [], []
            for (lo, hi), c, n, least in zip(box, self.chunks, full_shape,
                                             self.least or full_shape):
                # (whole blocks only, in every shape the array has had: a partial last
                # block grows with the array, and a stale handle's write selects by the
                # shape it knows, README)
                inside = [b for b in range(-(-n // c))
                          if b * c >= lo and (b + 1) * c <= min(hi, least)]
                if not inside:
                    break
                x = int(rng.integers(len(inside)))
                y = int(rng.integers(x, len(inside)))
                sel.append(slice(inside[x], inside[y] + 1))
                idx.append(slice(inside[x] * c, min((inside[y] + 1) * c, n)))
            else:
                return "block", tuple(sel), tuple(idx)
            kind = "basic"
        if kind in ("basic", "int"):
            sel = []
            for lo, hi in box:
                if kind == "int" and hi > lo and rng.integers(2):
                    i = int(rng.integers(lo, hi))
                    sel.append(i)
                else:
                    sel.append(self._slice(lo, hi, explicit))
            sel = tuple(sel)
            return "basic", sel, sel
        if kind in ("oindex", "bool"):
            sel, idx = [], []
            for (lo, hi), n in zip(box, full_shape):
                if hi > lo and rng.integers(2):
                    k = int(rng.integers(0, min(5, hi - lo) + 1))
                    arr = np.sort(rng.choice(np.arange(lo, hi), size=k, replace=False))
                    if kind == "bool" and not explicit:
                        m = np.zeros(n, bool)
                        m[arr] = True
                        sel.append(m)
                        idx.append(arr)
                    else:
                        sel.append(arr.astype(np.int64))
                        idx.append(arr.astype(np.int64))
                else:
                    s = self._slice(lo, hi, True)
                    sel.append(s)
                    idx.append(np.arange(n)[s])
            return "oindex", tuple(sel), np.ix_(*idx)
        if kind == "vindex":
            k = int(rng.integers(0, 7))
            coords = tuple(rng.integers(lo, hi, size=k) if hi > lo else np.zeros(0, np.int64)
                           for lo, hi in box)
            if any(hi <= lo for lo, hi in box):
                coords = tuple(np.zeros(0, np.int64) for _ in box)
            return "vindex", coords, coords
        # mask
        m = np.zeros(full_shape, bool)
        inner = tuple(slice(lo, hi) for lo, hi in box)
        m[inner] = self.rng.random(m[inner].shape) < 0.4
        return "mask", m, m

    # ------------------------------------------------------------------ regions
    def boxes(self, shape, resizing):
        """One box per worker ((lo, hi) per dim)."""
        rng = self.rng
        if self.sync_kind == "process":
            out = []
            for _ in range(W):
                if rng.integers(3) == 0:
                    out.append(tuple((0, n) for n in shape))
                else:
                    b = []
                    for n in shape:
                        a = int(rng.integers(0, n + 1))
                        b.append((a, int(rng.integers(a, n + 1))))
                    out.append(tuple(b))
            return out
        # disjoint boxes of whole units along one axis
        ax = int(rng.integers(len(shape)))
        u = self.unit[ax]
        nunits = -(-shape[ax] // u)
        cuts = sorted(int(x) for x in rng.integers(0, nunits + 1, size=W - 1))
        edges = [0] + [min(c * u, shape[ax]) for c in cuts] + [shape[ax]]
        order = rng.permutation(W)
        out = []
        for w in range(W):
            k = int(order[w])
            out.append(tuple((edges[k], edges[k + 1]) if d == ax else (0, n)
                             for d, n in enumerate(shape)))
        return out


def _touched_chunks(shape, chunks, kind, idx):
    """Chunk coordinates holding an element of the selection."""
    probe = np.zeros(shape, bool)
    probe[idx] = True
    pts = np.argwhere(probe)
    return {tuple(int(x) for x in p // np.array(chunks)) for p in pts}


def _frame(model, shape, fill, dtype):
    """The model seen through a handle of shape: its data where they overlap, fill beyond."""
    out = np.full(shape, fill, dtype=dtype)
    common = tuple(slice(0, min(a, b)) for a, b in zip(shape, model.shape))
    out[common] = model[common]
    return out


def _assert_same(got, want, what):
    assert got.shape == want.shape, (what, got.shape, want.shape)
    ok = _same(got, want)
    if not ok.all():
        bad = [tuple(int(x) for x in b) for b in np.argwhere(~ok)[:6]]
        raise AssertionError(f"{what}: {len(np.argwhere(~ok))} wrong elements, e.g. "
                             + "; ".join(f"{b}: got {got[b]!r} want {want[b]!r}"
                                         for b in bad))


def run_program(workers, seed, settle=(), **force):
    """Run program seed; before the checks of the steps in settle (and, soaking, of a
    random tenth of the steps of sharded arrays) wait until the shard files count as settled
    (chunkstore.storage.directory.SETTLE_NS), so that the checks' reads cache their
    indexes and the next step's rewrites must be noticed."""
    tmpdir = tempfile.mkdtemp(prefix="cs-mpmodel-")
    p = Program(seed, tmpdir, **force)
    parent_store = None
    try:
        shards = None if p.shards is None else {
            "shape": p.shards, "index_location": "start" if p.fmt.endswith("start") else "end"}
        parent_store = _open_store(p.store_kind, p.path)
        sync = _sync_of(p.sync_kind, p.locks)
        cs.create(p.shape, chunks=p.chunks, dtype=p.dtype, fill_value=p.fill,
                  store=parent_store, zarr_format=2 if p.fmt == "v2" else 3, shards=shards,
                  write_empty_chunks=p.wec, synchronizer=sync, order=p.order,
                  compressor={"none": None, "default": "default",
                              "zstd": numcodecs.Zstd(level=1)}[p.compressor])
        cfg = {"store": p.store_kind, "path": p.path, "sync": p.sync_kind, "locks": p.locks,
               "wec": p.wec, "fill": p.fill}
        workers.all("w_setup", cfg)
        # handles: h0 never caches metadata (it resizes), h1 caches
        workers.all("w_open", "h0", False)
        workers.all("w_open", "h1", True)
        parent = {"p0": cs.open_array(parent_store, mode="r", cache_metadata=False,
                                      synchronizer=sync),
                  "p1": cs.open_array(parent_store, mode="r", cache_metadata=True,
                                      synchronizer=sync)}
        model = np.full(p.shape, p.fill, dtype=p.dtype)
        touched: set = set()
        log = []
        for step in range(STEPS):
            p.step_no = step + 1
            old = model.copy()
            shape = model.shape
            # (each dimension's least length so far: what every handle's shape holds)
            p.least = tuple(map(min, p.least, shape)) if p.least else shape
            resizing = p.rng.integers(4) == 0
            resizer = int(p.rng.integers(W))
            # with a ProcessSynchronizer, sometimes two workers make the same change at
            # once: the same resize (the shape once), or appends of the same data (twice)
            twice = int(p.sync_kind == "process" and p.rng.integers(2))
            new_shape = shape
            pre = None
            if resizing:
                # which handle: h0 (current metadata) or h1 (cached: maybe stale)
                rh = "h0" if p.sync_kind != "process" or p.rng.integers(2) else "h1"
                if p.rng.integers(2):
                    new_shape = tuple(max(0, n + int(p.rng.integers(-3, 4))) for n in shape)
                    pre = (rh, ("resize", new_shape))
                else:
                    ax = int(p.rng.integers(len(shape)))
                    k = int(p.rng.integers(1, 4))
                    new_shape = tuple(n + k * (1 + twice) if d == ax else n
                                      for d, n in enumerate(shape))
                    data, _ = p.values(tuple(k if d == ax else n for d, n in enumerate(shape)))
                    pre = (rh, ("append", data, ax))
            inner = tuple(min(a, b) for a, b in zip(shape, new_shape))
            V, constant = p.values(inner)
            # V is defined on inner; pad to shape for indexing
            Vfull = np.full(shape, p.fill, dtype=p.dtype)
            Vfull[tuple(slice(0, n) for n in inner)] = V
            boxes = p.boxes(inner, resizing)
            plans = {}
            new = old.copy()
            writes_others = not (resizing and p.sync_kind != "process")
            for w in range(W):
                threads = [[] for _ in range(p.nthreads)]
                if resizing and (w == resizer or (twice and w == (resizer + 1) % W)):
                    threads[0].append(pre)
                if writes_others:
                    nops = int(p.rng.integers(*OPS))
                    for _ in range(nops):
                        kind, sel, idx = p.selection(boxes[w], shape, resizing)
                        val = Vfull[idx]
                        if constant and p.rng.integers(2):
                            val = np.array(p.fill, dtype=p.dtype)[()]
                        hid = "h0" if p.rng.integers(2) else "h1"
                        op = (kind, sel, val)
                        threads[int(p.rng.integers(p.nthreads))].append((hid, op))
                        new[idx] = Vfull[idx]
                        if p.wec:
                            touched |= _touched_chunks(shape, p.chunks, kind, idx)
                # reads race the writes (and, with a ProcessSynchronizer, the shape change)
                reads = (["h0", "h1"] if (not resizing or p.sync_kind == "process")
                         and p.rng.integers(2) else [])
                plans[w] = (threads, reads)
            # the shape change, applied to the model after the writes (they commute)
            if pre is not None:
                if pre[1][0] == "resize":
                    m = np.full(new_shape, p.fill, dtype=p.dtype)
                    common = tuple(slice(0, min(a, b)) for a, b in zip(shape, new_shape))
                    m[common] = new[common]
                    if p.wec:
                        g = grid(new_shape, p.chunks)
                        touched = {c for c in touched if all(x < n for x, n in zip(c, g))}
                else:
                    data, ax = pre[1][1], pre[1][2]
                    m = np.concatenate([new, data] + [data] * twice, axis=ax)
                    if p.wec:
                        sl = tuple(slice(shape[d], None) if d == ax else slice(None)
                                   for d in range(len(shape)))
                        probe = np.zeros(new_shape, bool)
                        probe[sl] = True
                        touched |= {tuple(int(x) for x in q // np.array(p.chunks))
                                    for q in np.argwhere(probe)}
                new = m
            log.append(f"step {step + 1}: shape {shape} -> {new.shape}; plans "
                       + repr({w: [[(h, o[0], o[1] if o[0] != 'append' else o[2])
                                    for h, o in t] for t in plans[w][0]] for w in plans}))
            res = workers.call({w: ("w_step", (plans[w][0], plans[w][1], old, new))
                                for w in range(W)})
            model = new
            ctx = f"{p.text}\n" + "\n".join(log)
            for w, (problems, errors) in res.items():
                assert not errors, f"worker {w} errors: {errors}\n{ctx}"
                assert not problems, f"worker {w} racing reads: {problems}\n{ctx}"
            if resizing and p.sync_kind != "process":
                workers.all("w_reopen_cached")
                parent["p1"] = cs.open_array(parent_store, mode="r", cache_metadata=True,
                                             synchronizer=sync)
            if (step + 1 in settle or (SOAK and p.shards and p.rng.integers(10) == 0)):
                time.sleep(SETTLE_S)
                ctx += f"\n(settled before the check of step {step + 1})"
            check(p, workers, parent, parent_store, model, touched, ctx)
    finally:
        try:
            workers.all("w_teardown")
        finally:
            if parent_store is not None and hasattr(parent_store, "close"):
                parent_store.close()
            shutil.rmtree(tmpdir, ignore_errors=True)


def check(p, workers, parent, parent_store, model, touched, ctx):
    """After a step: every handle's read against the model, and the stored chunks."""
    # (a new store object, except for the database stores: one per process)
    fresh_store = (parent_store if p.store_kind in ("sqlite", "lmdb")
                   else _open_store(p.store_kind, p.path))
    fresh = cs.open_array(fresh_store, mode="r")
    _assert_same(fresh[...], model, f"fresh handle\n{ctx}")
    for name, z in parent.items():
        _assert_same(z[...], _frame(model, z.shape, p.fill, p.dtype),
                     f"parent handle {name} (shape {z.shape})\n{ctx}")
    for w, reads in workers.all("w_read_all").items():
        for hid, (shape, data) in reads.items():
            _assert_same(data, _frame(model, shape, p.fill, p.dtype),
                         f"worker {w} handle {hid} (shape {shape})\n{ctx}")
    # stored chunks
    g = grid(model.shape, p.chunks)
    nonfill = set()
    if model.size:
        pts = np.argwhere(~is_fill(model, np.full((), p.fill, dtype=p.dtype)))
        nonfill = {tuple(int(x) for x in q // np.array(p.chunks)) for q in pts}
    stored = set(map(tuple, fresh.layout.stored_chunks()))
    if p.wec:
        expected = {c for c in touched if all(x < n for x, n in zip(c, g))}
        assert nonfill <= expected, (nonfill - expected, ctx)
    else:
        expected = nonfill
    assert stored == expected, (f"stored extra {sorted(stored - expected)}, missing "
                                f"{sorted(expected - stored)}\n{ctx}")


def _seeds():
    if SEED:
        return [int(SEED)]
    return list(range(CI_PROGRAMS))


@pytest.mark.parametrize("seed", _seeds())
def test_multiprocess_model(workers, seed):
    run_program(workers, seed)


def test_multiprocess_model_cached_shard_indexes(workers):
    """Sharded programs whose checks read settled shard files (their indexes cached by
    every handle) before steps that rewrite the shards."""
    run_program(workers, 7, settle=(2,), fmt="v3-sharded-start", store_kind="directory",
                sync_kind="process", shards=(4, 4), chunks=(2, 2), shape=(9, 8),
                unit=(4, 4))


def test_multiprocess_model_soak(workers):
    """With CHUNKSTORE_SOAK=<seconds>, new programs (seeds from CHUNKSTORE_MP_SOAK_START,
    default 1000) until the time is spent; in CI, one such program."""
    end = time.monotonic() + SOAK
    seed = int(os.environ.get("CHUNKSTORE_MP_SOAK_START", "1000"))
    start = seed
    while seed == start or time.monotonic() < end:
        run_program(workers, seed)
        seed += 1
    print(f"soak: {seed - start} programs (seeds {start}..{seed - 1}) passed")
