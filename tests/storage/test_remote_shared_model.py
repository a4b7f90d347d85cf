"""Model-based test: ONE array shared by several handles on remote-like stores and through
the asynchronous API, against a NumPy model.

A hypothesis RuleBasedStateMachine draws, once per run:

- a store kind (one per test, so CI covers each): ``obstore`` (ObjectStore over obstore's S3
  client on a moto server on loopback), ``fsspec_s3`` (FSStore over s3fs on the same
  server), ``fsspec_memory`` (FSStore on fsspec's memory filesystem), ``directory`` (a
  DirectoryStore: the control);
- a format: Zarr v2, v3, or v3 sharded with small inner chunks (2-4 per shard and axis, so
  one shard holds many);
- a dtype and fill value (NaN included for floats), a compressor or none;
- 2-3 handles on the array, each its own store object on the same bucket/prefix (or, for
  handles after the first, one rooted at the array's own prefix or directory; so caches
  of metadata and shard indexes are separate; made on a worker thread or the main one, as
  tasks of a thread pool opening the array make theirs; on S3, handles after the first may
  draw another client configuration, or the other client: ObjectStore for FSStore and back),
  each with its OWN synchronizer:
  none, a ThreadSynchronizer, or a ProcessSynchronizer on a lock directory of its own; each
  driven one way: a synchronous ``Array``, an ``AsyncArray`` awaited from a fresh event loop
  per step (``asyncio.run``), or an ``AsyncArray`` awaited on a long-lived loop in a
  background thread. Handle 0 is opened with ``cache_metadata=False``; the others draw it.
  Every handle must share the array's in-process locks with the others (one process, one
  location: README "What is safe"), checked as it is opened.

Rules (each can be switched off with ``CHUNKSTORE_MODEL_DISABLE=rule,rule``):

- ``write``: a random selection (basic, oindex, vindex, mask) written through any handle,
  synchronously or awaited;
- ``read``: a random selection read through any handle and compared with the model;
- ``gather``: 2-3 awaited reads and writes through asyncio.gather on one loop (fresh or the
  background one), each through its own handle; ``gather_shared``: 2-4 of them all through
  one handle (the same AsyncArray, so one Array's caches serve concurrent tasks). The writes
  of a gather touch any regions (overlaps included), whatever synchronizer each handle has:
  the in-process locks every handle takes first serialize them (README's table: threads
  and asyncio tasks of one process, any regions). Afterwards the array must equal the
  model with the gather's writes applied in SOME order (each overlap ends up wholly one
  writer's value; disjoint elements of one chunk or shard lose nothing), and each read must give, for every chunk (inner chunk of a sharded array), the
  chunk's values in one of the states a serial order passes through: never a torn chunk,
  another chunk's bytes, or a value nobody wrote. (Not per shard: one write may store a
  shard twice, its whole chunks first and then its partial chunks' read-modify-writes, and
  a read taking one version of the shard may see the one in between: README "some chunks
  from before a write and some from after it".)
- ``resize`` and ``append`` through any handle;
- ``delete``: another handle's store deletes one stored chunk/shard object (the model's
  region becomes the fill value): the next reads through handles that cached that shard's
  index must see the fill value (README: shard indexes are cached per handle but checked
  against the shard's version: file identity, ETag / If-Match);
- ``reopen``: a handle is replaced by a new one on a new store object (new drive mode).

A handle whose cached metadata another handle changed (README ``cache_metadata``): handles
sharing in-process locks count metadata changes there, so each operation through a handle
with or without a synchronizer follows another's resize or append (it plans again with the
array's shape). Every read, write and append through any handle is thus drawn for the
array's shape and must do what NumPy does to the model; an error is a failure. (A handle
that shared no locks with the others would keep its old shape: its full read, below, or its
selection drawn for the new shape, tells.)

Invariants after every step: every handle's full read (through its own drive mode) is the
model and its shape the array's; the stored keys (listed by the server itself: boto3, the memory filesystem, the
directory) are exactly the chunks (shards) holding a non-fill element
(write_empty_chunks=False), and nothing else lies under the array (no temporary objects).

Each step runs under a timeout (``STEP_TIMEOUT`` s, on a daemon thread or with
``future.result(timeout)`` for the background loop): a hang fails the step instead of
blocking the run.

CI cost: a few short programs per store kind (well under 40 s in all on a 2-core machine).
Soak mode runs new, longer programs until a time budget is spent, and shrinks failures:

    CHUNKSTORE_SOAK=600 .venv/bin/python -m pytest tests/storage/test_remote_shared_model.py -x -q

(CHUNKSTORE_SOAK=<seconds>, split between the store kinds. CHUNKSTORE_SHRINK=1 shrinks in
CI mode too.)

Failure this machine found (fixed; example test in tests/engine/test_stale_metadata.py):
``gather_shared`` on a sharded array through a handle with ``cache_metadata=False`` raised
``AttributeError: 'ShardedStoreView' object has no attribute 'close'``: each operation's
metadata reload replaced the handle's chunk store under the other tasks' operations, and
one of them then "closed" the view it took for its own prefetching one. A reload that finds
the same document now changes nothing, and an operation closes only the prefetching view it
made.

A model bug it found (fixed; test_gather_model_takes_the_order_the_array_took): after a
gather writing 0.0 and -0.0 to one chunk under a 0.0 fill, the model took the first serial
order whose values equal the array's by ``==`` (-0.0 == 0.0), not the one the array took,
and so expected the wrong stored keys (the -0.0 chunk is kept, README ``write_empty_chunks``).
Gathers and reads now compare values with -0.0 apart from 0.0 (same_values).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
import tempfile
import uuid
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import chunkstore as cs
from chunkstore.storage import DirectoryStore, FSStore
from model_support import (DISABLED, BackgroundLoop, assert_exact, call_timeout, draw_basic,
                           draw_ortho, grid, is_fill, model_settings, ortho_ix, random_values,
                           run_machine)


CI_SETTINGS = {
    # (examples, steps) per store kind: the S3 kinds pay a loopback round trip per request
    "obstore": (6, 12),
    "fsspec_s3": (5, 12),
    "fsspec_memory": (10, 15),
    "directory": (10, 15),
}
SOAK_SETTINGS = model_settings(15, 30)

STORES = list(CI_SETTINGS)
logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the moto server's request log
FORMATS = ["v2", "v3", "v3-sharded"]
DTYPES = {
    "<i2": [0, -3],
    "|u1": [0, 7],
    "|b1": [False, True],
    "<f8": [0.0, np.nan, 1.5],
}
MAX_DIM = 10
RULES = ["write", "read", "gather", "gather_shared", "resize", "append", "delete", "reopen"]
MODES = ["sync", "fresh_loop", "bg_loop"]
SYNCS = [None, "thread", "process"]     # each handle's own


def enabled(name):
    assert name in RULES, name
    return name not in DISABLED


# ---------------------------------------------------------------------------- helpers
def same_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: the same value as the array keeps it, NaN equal to NaN, but -0.0 not
    0.0 (README, ``write_empty_chunks``: a chunk of -0.0 is stored under a 0.0 fill, a
    chunk of 0.0 is not, so the two are different stored states)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "c":
        return same_values(a.real, b.real) & same_values(a.imag, b.imag)
    eq = a == b
    if a.dtype.kind == "f":
        eq = (eq & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))
    return eq


def assert_same(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    """assert_exact, signs of zeros included (its ``==`` takes -0.0 for 0.0)."""
    assert_exact(got, expected, what)
    assert same_values(got, expected).all(), (f"{what}: signed zeros differ", got, expected)


def settled_final(after: np.ndarray, finals: list[np.ndarray]) -> np.ndarray | None:
    """Which of finals (the model after the writes of a gather, one per serial order) the
    array read back as after is, or None. Value for value with -0.0 apart from 0.0: orders
    ending in a 0.0 and in a -0.0 write of a chunk read alike by ``==`` but store different
    chunks (the 0.0 one deleted under a 0.0 fill), so only the order the array took
    predicts the stored keys."""
    return next((f for f in finals if same_values(after, f).all()), None)


# ---------------------------------------------------------------------------- selections
def draw_coords(draw, shape):
    """Unique points (a vindex selection); None where the array is empty."""
    if not all(shape):
        return None
    k = draw(st.integers(0, 8))
    seen, pts = set(), []
    for _ in range(k):
        p = tuple(draw(st.integers(-n, n - 1)) for n in shape)
        q = tuple(x % n for x, n in zip(p, shape))
        if q not in seen:
            seen.add(q)
            pts.append(p)
    return tuple(np.array([p[d] for p in pts], dtype=np.int64) for d in range(len(shape)))


def draw_mask(draw, shape):
    size = int(np.prod(shape))
    return np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)),
                    dtype=bool).reshape(shape)


def draw_selection(draw, how, shape):
    """A selection of kind how for an array of shape; None when there is none."""
    if how == "basic":
        return draw_basic(draw, shape, ellipsis=False, reverse=False)
    if how == "oindex":
        return draw_ortho(draw, shape, unique=True, reverse=False)
    if how == "vindex":
        return draw_coords(draw, shape)
    return draw_mask(draw, shape)


def numpy_index(how, sel, shape):
    """(NumPy index, result reshaper) selecting from an array of shape what the chunkstore
    selection selects; IndexError where it does not fit."""
    if how == "oindex":
        ix, drop = ortho_ix(sel, shape)

        def reshape(a):
            return a.reshape([n for d, n in enumerate(a.shape) if d not in drop])
        return ix, reshape
    if how == "mask" and sel.shape != tuple(shape):
        raise IndexError(f"mask of shape {sel.shape} for an array of {tuple(shape)}")
    return sel, (lambda a: a)


def select(arr, how, sel):
    ix, reshape = numpy_index(how, sel, arr.shape)
    return reshape(arr[ix])


def element_ids(how, sel, shape):
    """Flat element ids (into shape) of what the selection selects, shaped as the result."""
    ids = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    return select(ids, how, sel)


def apply_write(model, how, sel, value):
    """model[selection] = value as NumPy does it (IndexError/ValueError where the selection
    does not fit model's shape or the value does not broadcast). Returns the flat ids of the
    elements written."""
    ix, reshape = numpy_index(how, sel, model.shape)
    target = model[ix].shape
    sel_shape = reshape(np.empty(target, bool)).shape
    model[ix] = np.broadcast_to(value, sel_shape).reshape(target)
    ids = np.arange(model.size, dtype=np.int64).reshape(model.shape)[ix]
    return np.unique(np.asarray(ids).reshape(-1))


def selection_shape(how, sel, shape):
    return select(np.empty(shape, bool), how, sel).shape


# ---------------------------------------------------------------------------- operations
# Each operation is (sync_fn(Array), async_fn(AsyncArray) -> coroutine).
def read_op(how, sel):
    if how == "basic":
        return (lambda a: a[sel]), (lambda a: a.getitem(sel))
    if how == "oindex":
        return (lambda a: a.oindex[sel]), (lambda a: a.oindex.getitem(sel))
    if how == "vindex":
        return (lambda a: a.vindex[sel]), (lambda a: a.get_coordinate_selection(sel))
    return (lambda a: a.vindex[sel]), (lambda a: a.get_mask_selection(sel))


def write_op(how, sel, value):
    def sync(a):
        if how == "basic":
            a[sel] = value
        elif how == "oindex":
            a.oindex[sel] = value
        else:
            a.vindex[sel] = value
    if how == "basic":
        return sync, (lambda a: a.setitem(sel, value))
    if how == "oindex":
        return sync, (lambda a: a.oindex.setitem(sel, value))
    if how == "vindex":
        return sync, (lambda a: a.vindex.setitem(sel, value))
    return sync, (lambda a: a.set_mask_selection(sel, value))


def full_read_op():
    return (lambda a: a[...]), (lambda a: a.getitem(Ellipsis))


# ---------------------------------------------------------------------------- stores
class Stores:
    """Makes store objects of one kind, all on the same data (a new object each call), and
    lists what lies under the array, as the backend itself sees it."""

    def __init__(self, kind, s3, tmpdir):
        self.kind, self.s3, self.tmpdir = kind, s3, tmpdir
        self.prefix = uuid.uuid4().hex
        self.made = []
        if kind == "fsspec_memory":
            self.url = f"memory://chunkstore-remote-model-{self.prefix}"

    def make(self, variant=0, nested=False):
        """A new store object; on S3, variant 1 configures its client otherwise (other
        credentials and region for obstore; the endpoint given at the top and other
        credentials for s3fs), variant 2 is the other client (s3fs for obstore and back):
        the same objects, one location. nested: rooted at the array itself (its prefix or
        directory, PATH below the others' root): the array is the store's root node."""
        kind = self.kind
        sub = f"/{PATH}" if nested else ""
        if variant == 2 and kind in ("obstore", "fsspec_s3"):
            kind = "fsspec_s3" if kind == "obstore" else "obstore"
        creds = ("k2", "s2", "eu-west-1") if variant == 1 else ("k", "s", "us-east-1")
        if kind == "obstore":
            from obstore.store import S3Store

            from chunkstore.storage import ObjectStore
            client = S3Store(BUCKET, prefix=self.prefix + sub, endpoint=self.s3.endpoint,
                             access_key_id=creds[0], secret_access_key=creds[1],
                             region=creds[2],
                             client_options={"allow_http": True},
                             retry_config={"max_retries": 2,
                                           "retry_timeout": timedelta(seconds=10),
                                           "backoff": {"init_backoff": timedelta(milliseconds=10),
                                                       "max_backoff": timedelta(milliseconds=50),
                                                       "base": 2}})
            store = ObjectStore(client)
        elif kind == "fsspec_s3":
            options = _requests.options(self.s3.endpoint)
            if variant == 1:
                options = {**options, "key": "k2", "secret": "s2",
                           "endpoint_url": self.s3.endpoint + "/",
                           "client_kwargs": {"region_name": "eu-west-1"}}
            store = FSStore(f"s3://{BUCKET}/{self.prefix}{sub}", storage_options=options)
        elif kind == "fsspec_memory":
            store = FSStore(self.url + sub)
        else:
            store = DirectoryStore(os.path.join(self.tmpdir, "d.zarr") + sub)
        self.made.append(store)
        return store

    def listing(self, path):
        """Every key under the array's path, relative to it (the backend's own listing)."""
        if self.kind in ("obstore", "fsspec_s3"):
            import boto3
            client = boto3.client("s3", endpoint_url=self.s3.endpoint, aws_access_key_id="k",
                                  aws_secret_access_key="s", region_name="us-east-1")
            keys = []
            pre = f"{self.prefix}/{path}/"
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET,
                                                                          Prefix=pre):
                keys += [o["Key"][len(pre):] for o in page.get("Contents", [])]
            return sorted(keys)
        if self.kind == "fsspec_memory":
            import fsspec
            fs = fsspec.filesystem("memory")
            root = fs._strip_protocol(self.url) + "/" + path
            if not fs.exists(root):
                return []
            return sorted(p[len(root) + 1:] for p in fs.find(root))
        root = os.path.join(self.tmpdir, "d.zarr", path)
        out = []
        for dirpath, _, files in os.walk(root):
            for f in files:
                out.append(os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/"))
        return sorted(out)

    def close(self):
        for s in self.made:
            close = getattr(s, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    pass
        self.made = []
        if self.kind == "fsspec_memory":
            import fsspec
            fs = fsspec.filesystem("memory")
            root = fs._strip_protocol(self.url)
            try:
                if fs.exists(root):
                    fs.rm(root, recursive=True)
            except Exception:
                pass


class Handle:
    def __init__(self, arr, mode, cache, sync=None, on_thread=False, variant=0):
        self.arr, self.mode, self.cache, self.sync = arr, mode, cache, sync
        self.on_thread, self.variant = on_thread, variant
        self.aarr = cs.AsyncArray(arr)

    @property
    def shape(self):
        return tuple(self.arr.shape)

    def __repr__(self):
        return (f"Handle({self.mode}, cache_metadata={self.cache}, synchronizer={self.sync}, "
                f"store {type(self.arr.store).__name__} variant {self.variant}"
                f"{' rooted at the array' if not self.arr.path else ''} made on "
                f"{'a worker' if self.on_thread else 'the main'} thread, "
                f"shape={self.shape})")


def in_process_locks(arr):
    """The in-process lock table an Array's writes take (first, under a synchronizer's)."""
    locks = arr._handle.options.locks
    return getattr(locks, "inner", locks)


PATH = "arr"


# ---------------------------------------------------------------------------- machine
class SharedArrayMachine(RuleBasedStateMachine):
    store_kind = "directory"
    s3 = None

    def __init__(self):
        super().__init__()
        self.ready = False
        self.stores = None
        self.bg = None
        self.tmpdir = None
        self.handles = []

    # ------------------------------------------------------------------ set-up
    @initialize(data=st.data())
    def setup(self, data):
        draw = data.draw
        fmt = draw(st.sampled_from(FORMATS), label="format")
        dname = draw(st.sampled_from(list(DTYPES)), label="dtype")
        fill = draw(st.sampled_from(DTYPES[dname]), label="fill")
        ndim = draw(st.integers(1, 2), label="ndim")
        shape = tuple(draw(st.integers(0, MAX_DIM)) for _ in range(ndim))
        if fmt == "v3-sharded":
            chunks = tuple(draw(st.integers(1, 2)) for _ in range(ndim))
            shards = tuple(c * draw(st.integers(2, 4)) for c in chunks)
        else:
            chunks = tuple(draw(st.integers(2, 4)) for _ in range(ndim))
            shards = None
        compress = draw(st.booleans(), label="compressor")
        self.seed = draw(st.integers(0, 2**32 - 1), label="seed")
        self.rng = np.random.default_rng(self.seed)

        self.tmpdir = tempfile.mkdtemp(prefix="cs-remote-model-")
        self.stores = Stores(self.store_kind, self.s3, self.tmpdir)
        self.bg = BackgroundLoop()
        self.process_syncs = []
        self.fmt, self.dtype, self.fill = fmt, np.dtype(dname), fill
        self.chunks, self.shards = chunks, shards
        # the unit a write rewrites whole, and a read takes from one version
        self.unit = shards or chunks
        self.zarr_format = 2 if fmt == "v2" else 3
        self.config_text = (f"store={self.store_kind} format={fmt} dtype={dname} fill={fill!r} "
                            f"shape={shape} chunks={chunks} shards={shards} "
                            f"compressor={compress}")
        kwargs = dict(compressor="default" if compress else None) if fmt == "v2" else \
            dict(compressor="default" if compress else None)
        call_timeout(lambda: cs.create(shape, chunks=chunks, dtype=self.dtype, fill_value=fill,
                                       store=self.stores.make(), path=PATH,
                                       zarr_format=self.zarr_format, shards=shards,
                                       write_empty_chunks=False, **kwargs), "create")
        n = draw(st.integers(2, 3), label="handles")
        self.handles = []
        for i in range(n):
            self.handles.append(self._open(data, i, draw(st.sampled_from(MODES),
                                                          label=f"mode {i}"),
                                           i > 0 and draw(st.booleans(), label=f"cache {i}")))
        self.model = np.full(shape, fill, dtype=self.dtype)
        self.fill_arr = np.full((), fill, dtype=self.dtype)
        self.ready = True

    def teardown(self):
        self.handles = []
        if self.bg is not None:
            self.bg.close()
        if self.stores is not None:
            self.stores.close()
        for sync in self.process_syncs:     # (closes its region files: no fd per run kept)
            try:
                sync.clear()
            except Exception:  # noqa: BLE001 - the run's own failure comes first
                pass
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def _open(self, data, i, mode, cache):
        """Handle i: a new store object (made on a worker thread, as a thread pool's task
        opening the array, where drawn) and its own synchronizer: none, a ThreadSynchronizer
        or a ProcessSynchronizer on a lock directory of its own. Whatever each drew, it
        must share the in-process locks of the array with every other handle (one process,
        one location: README "What is safe")."""
        sync_kind = data.draw(st.sampled_from(SYNCS), label=f"synchronizer {i}")
        on_thread = data.draw(st.booleans(), label=f"store {i} made on a worker thread")
        variant = data.draw(st.integers(0, 2), label=f"store {i} variant") if i else 0
        # a store rooted at the array's own prefix (directory): one array all the same,
        # whose handles share the in-process locks (protocol.node_location)
        nested = data.draw(st.booleans(), label=f"store {i} rooted at the array") if i else False

        def make():
            return self.stores.make(variant, nested)
        store = call_timeout(make, "store") if on_thread else make()
        sync = None
        if sync_kind == "thread":
            sync = cs.ThreadSynchronizer()
        elif sync_kind == "process":
            sync = cs.ProcessSynchronizer(os.path.join(
                self.tmpdir, f"locks-{len(self.process_syncs)}"))
            self.process_syncs.append(sync)
        arr = call_timeout(lambda: cs.open_array(store, mode="r+", path="" if nested else PATH,
                                                 cache_metadata=cache,
                                                 write_empty_chunks=False,
                                                 synchronizer=sync), "open_array")
        h = Handle(arr, mode, cache, sync_kind, on_thread, variant)
        others = [o for j, o in enumerate(self.handles) if j != i]
        if others:
            assert in_process_locks(arr) is in_process_locks(others[0].arr), (
                f"handle {i} {h!r} on {store!r} does not share the in-process locks of "
                f"{others[0]!r} on {others[0].arr.store!r} (another location?); "
                f"{self.config_text}")
        return h

    # ------------------------------------------------------------------ running
    def _run(self, h, op, what):
        sync_fn, async_fn = op
        what = f"{what} through {h!r}; {self.config_text}"
        if h.mode == "sync":
            return call_timeout(lambda: sync_fn(h.arr), what)
        if h.mode == "fresh_loop":
            async def main():
                return await async_fn(h.aarr)
            return call_timeout(lambda: asyncio.run(main()), what)
        return self.bg.run(async_fn(h.aarr), what)

    def _pick(self, data, label="handle"):
        """Any handle: each shares the in-process locks, and with them the count of metadata
        changes, so each operation through it follows the array's shape (its shape is not
        looked at first: that would refresh it before the operation is tested)."""
        i = data.draw(st.integers(0, len(self.handles) - 1), label=label)
        return i, self.handles[i]

    def _value(self, data, sel_shape):
        form = data.draw(st.sampled_from(["full", "full", "scalar"]), label="value form")
        if form == "scalar":
            return random_values(self.rng, self.dtype, ())
        return random_values(self.rng, self.dtype, sel_shape)

    # ------------------------------------------------------------------ writes
    @precondition(lambda self: self.ready and enabled("write"))
    @rule(data=st.data(), how=st.sampled_from(["basic", "oindex", "vindex", "mask"]))
    def write(self, data, how):
        # Through any handle, whatever its synchronizer and cached metadata: the selection
        # is drawn for the array's shape, which a handle that cached another one (another
        # handle resized or appended since) plans again with (README "What is safe").
        i, h = self._pick(data)
        shape = self.model.shape
        sel = draw_selection(data.draw, how, shape)
        if sel is None:
            return
        value = self._value(data, selection_shape(how, sel, shape))
        new = self.model.copy()
        apply_write(new, how, sel, value)
        self._run(h, write_op(how, sel, value), f"{how} write {sel!r} (handle {i})")
        self.model = new

    # ------------------------------------------------------------------ reads
    @precondition(lambda self: self.ready and enabled("read"))
    @rule(data=st.data(), how=st.sampled_from(["basic", "oindex", "vindex", "mask"]))
    def read(self, data, how):
        i, h = self._pick(data)
        shape = self.model.shape
        sel = draw_selection(data.draw, how, shape)
        if sel is None:
            return
        what = f"{how} read {sel!r} (handle {i}, array {shape})"
        got = self._run(h, read_op(how, sel), what)
        assert_same(got, select(self.model, how, sel), f"{what}; {self.config_text}")

    # ------------------------------------------------------------------ concurrency
    @precondition(lambda self: self.ready and enabled("gather"))
    @rule(data=st.data(), bg=st.booleans())
    def gather(self, data, bg):
        """Awaited operations at once (asyncio.gather on one loop), each through its own
        handle."""
        picks = data.draw(st.permutations(range(len(self.handles))), label="gather handles")
        self._gather(data, bg, picks[:data.draw(st.integers(2, len(picks)), label="n")])

    @precondition(lambda self: self.ready and enabled("gather_shared"))
    @rule(data=st.data(), bg=st.booleans(), n=st.integers(2, 4))
    def gather_shared(self, data, bg, n):
        """n awaited operations at once (asyncio.gather on one loop), all through ONE
        handle that knows the array's shape (README: threads of one process sharing one
        handle are served as separate handles are)."""
        i, _ = self._pick(data, label="gather handle")
        self._gather(data, bg, [i] * n)

    def _gather(self, data, bg, picks):
        shape = self.model.shape
        ops, writes, reads = [], [], []
        for k, i in enumerate(picks):
            h = self.handles[i]
            is_write = data.draw(st.booleans(), label=f"gather write {k}")
            how = data.draw(st.sampled_from(["basic", "oindex", "vindex", "mask"]),
                            label=f"gather how {k}")
            sel = draw_selection(data.draw, how, shape)
            if sel is None:
                continue
            if is_write:
                value = self._value(data, selection_shape(how, sel, shape))
                apply_write(self.model.copy(), how, sel, value)   # (it fits the shape)
                writes.append((how, sel, value))
                ops.append((h, write_op(how, sel, value)[1], ("write", i, how, sel)))
            else:
                reads.append((len(ops), how, sel))
                ops.append((h, read_op(how, sel)[1], ("read", i, how, sel)))
        if not ops:
            return

        async def main():
            return await asyncio.gather(*(fn(h.aarr) for h, fn, _ in ops),
                                        return_exceptions=True)

        what = (f"gather of {[d for _, _, d in ops]} on the "
                f"{'background' if bg else 'fresh'} loop; {self.config_text}")
        if bg:
            results = self.bg.run(main(), what)
        else:
            results = call_timeout(lambda: asyncio.run(main()), what)
        for r, (_, _, d) in zip(results, ops):
            if isinstance(r, BaseException):
                raise AssertionError(f"{d} raised {r!r} in {what}") from r

        # the states serial orders of the writes pass through, and where they end
        states, finals = [self.model], []
        for order in itertools.permutations(range(len(writes))):
            m = self.model.copy()
            for w in order:
                apply_write(m, *writes[w])
                states.append(m.copy())
            finals.append(m)
        if not writes:
            finals = [self.model]
        # each read: every unit (chunk, or shard) from one of those states
        for pos, how, sel in reads:
            got = np.asarray(results[pos])
            ids = element_ids(how, sel, shape)
            assert got.shape == ids.shape and got.dtype == self.dtype, (
                f"read {how} {sel!r}: {got.shape} {got.dtype}, expected {ids.shape} "
                f"{self.dtype}; {what}")
            if got.size == 0:
                continue
            flat_ids, flat_got = ids.reshape(-1), got.reshape(-1)
            pts = np.stack(np.unravel_index(flat_ids, shape), axis=1)
            # per chunk (inner chunk of a sharded array): a write may store a shard more
            # than once (its whole chunks, then its partial ones' read-modify-writes), and a
            # read may see a shard version between them (README: "some chunks from before a
            # write and some from after it"); what a shard version never holds is a torn chunk
            unit_of = [tuple(p) for p in (pts // np.asarray(self.chunks)).tolist()]
            matches = [same_values(flat_got, s.reshape(-1)[flat_ids]) for s in states]
            for u in set(unit_of):
                where = np.array([x == u for x in unit_of])
                assert any(m[where].all() for m in matches), (
                    f"read {how} {sel!r} in a gather gave, in chunk/shard {u}, "
                    f"{flat_got[where]!r}: no serial order of the writes passes through "
                    f"that (expected one of "
                    f"{[s.reshape(-1)[flat_ids][where].tolist() for s in states]}); {what}")
        # the array afterwards: the writes applied in some order
        after = self._run(self.handles[0], full_read_op(), "full read after gather")
        final = settled_final(after, finals)
        if final is None:
            raise AssertionError(f"after a gather of writes {writes!r} the array is\n"
                                 f"{after!r}\nnot the model with them in any order "
                                 f"(lost write?), e.g.\n{finals[0]!r}; {what}")
        self.model = final

    # ------------------------------------------------------------------ shape changes
    @precondition(lambda self: self.ready and enabled("resize"))
    @rule(data=st.data())
    def resize(self, data):
        i, h = self._pick(data)
        new = tuple(data.draw(st.integers(0, MAX_DIM), label="new dim")
                    for _ in self.model.shape)
        self._run(h, (lambda a: a.resize(*new), lambda a: a.resize(new)),
                  f"resize to {new} (handle {i})")
        old = self.model
        self.model = np.full(new, self.fill, dtype=self.dtype)
        common = tuple(slice(0, min(a, b)) for a, b in zip(old.shape, new))
        self.model[common] = old[common]

    @precondition(lambda self: self.ready and enabled("append"))
    @rule(data=st.data())
    def append(self, data):
        i, h = self._pick(data)
        shape = self.model.shape
        axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
        k = data.draw(st.integers(1, 3), label="rows")
        if shape[axis] + k > MAX_DIM + 4:
            return
        vshape = tuple(k if d == axis else n for d, n in enumerate(shape))
        value = random_values(self.rng, self.dtype, vshape)
        got = self._run(h, (lambda a: a.append(value, axis=axis),
                            lambda a: a.append(value, axis=axis)),
                        f"append {vshape} along {axis} (handle {i})")
        self.model = np.concatenate([self.model, value], axis=axis)
        assert tuple(got) == self.model.shape, (got, self.model.shape, self.config_text)

    # ------------------------------------------------------------------ deletes
    def _unit_key(self, coords):
        if self.zarr_format == 2:
            return ".".join(map(str, coords))
        return "c/" + "/".join(map(str, coords))

    def _expected_keys(self):
        shape = self.model.shape
        if not self.model.size:
            return set()
        pts = np.argwhere(~is_fill(self.model, self.fill_arr))
        units = set(map(tuple, (pts // np.asarray(self.unit)).tolist())) if len(pts) else set()
        return {self._unit_key(u) for u in units if all(x < g for x, g in
                                                       zip(u, grid(shape, self.unit)))}

    @precondition(lambda self: self.ready and enabled("delete"))
    @rule(data=st.data())
    def delete(self, data):
        """Another handle's store deletes one stored chunk/shard: its region reads as the
        fill value from then on, through every handle."""
        # What is drawn must not depend on the model's values: after a gather of
        # overlapping writes they are those of the order the writes' race took, and
        # hypothesis refuses (FlakyStrategyDefinition) draws that differ between runs.
        pick = data.draw(st.integers(0, 255), label="key index")
        i, h = self._pick(data, label="deleting handle")
        keys = sorted(self._expected_keys())
        if not keys:
            return
        key = keys[pick % len(keys)]
        store = h.arr.store

        def delete():
            del store[f"{h.arr.path}/{key}" if h.arr.path else key]
        call_timeout(delete, f"delete {key} through handle {i}")
        coords = [int(x) for x in (key.split(".") if self.zarr_format == 2
                                   else key.split("/")[1:])]
        region = tuple(slice(c * u, (c + 1) * u) for c, u in zip(coords, self.unit))
        self.model[region] = self.fill

    # ------------------------------------------------------------------ handles
    @precondition(lambda self: self.ready and enabled("reopen"))
    @rule(data=st.data(), mode=st.sampled_from(MODES), cache=st.booleans())
    def reopen(self, data, mode, cache):
        i = data.draw(st.integers(0, len(self.handles) - 1), label="reopened handle")
        self.handles[i] = self._open(data, i, mode, cache if i else False)

    # ------------------------------------------------------------------ invariants
    @invariant()
    def every_handle_reads_the_model(self):
        if not self.ready:
            return
        for i, h in enumerate(self.handles):
            what = f"full read through handle {i} {h!r} (array {self.model.shape})"
            got = self._run(h, full_read_op(), what)
            assert_same(got, self.model, f"{what}; {self.config_text}")
            # (one that did not follow another handle's resize or append would have read
            # its old shape: it shares no in-process locks with them)
            assert h.shape == self.model.shape, (what, self.config_text)

    @invariant()
    def stored_keys_are_the_non_fill_units(self):
        if not self.ready:
            return
        listed = call_timeout(lambda: self.stores.listing(PATH), "listing")
        meta = {".zarray", ".zattrs"} if self.zarr_format == 2 else {"zarr.json"}
        stored = set(listed) - meta
        expected = self._expected_keys()
        assert stored == expected, (f"stored extra {sorted(stored - expected)}, missing "
                                    f"{sorted(expected - stored)}; {self.config_text}")


# ---------------------------------------------------------------------------- the tests
_requests = None
BUCKET = "requests-test"
try:
    from . import test_fsspec_requests as _requests  # the request-counting moto server
    BUCKET = _requests.BUCKET
    s3 = _requests.s3  # a module-scoped fixture
except pytest.skip.Exception:   # (no s3fs/moto: the S3 kinds skip below)
    pass


def _machine(kind, server):
    return type(f"SharedArrayMachine_{kind}", (SharedArrayMachine,),
                {"store_kind": kind, "s3": server})


@pytest.mark.parametrize("kind", STORES)
def test_shared_array_model(kind, request):
    server = None
    if kind in ("obstore", "fsspec_s3"):
        if _requests is None:
            pytest.skip("s3fs and moto are needed for the S3 store kinds")
        if kind == "obstore":
            pytest.importorskip("obstore")
        server = request.getfixturevalue("s3")
        server.reset()
    run_machine(_machine(kind, server), model_settings(*CI_SETTINGS[kind]), SOAK_SETTINGS,
                len(STORES))


def _small_array(tmp_path, sync):
    """A v2 array of 4 float64 elements in chunks of 2, fill 0.0, on a DirectoryStore in
    tmp_path (as the machine's "directory" stores make it), and a maker of handles on it."""
    def store():
        return DirectoryStore(str(tmp_path / "d.zarr"))
    cs.create((4,), chunks=(2,), dtype="<f8", fill_value=0.0, compressor=None, store=store(),
              path=PATH, zarr_format=2, write_empty_chunks=False, synchronizer=sync)
    return lambda: cs.open_array(store(), mode="r+", path=PATH, write_empty_chunks=False,
                                 synchronizer=sync)


def test_gather_model_takes_the_order_the_array_took(tmp_path) -> None:
    """Regression (a model bug, found by soaking ``test_shared_array_model[directory]``):
    two writes of one chunk in a gather, of 0.0 (the fill value) and of -0.0, serialized by
    the synchronizer. Either order reads back alike by ``==``, but the one ending in -0.0
    leaves the chunk stored and the one ending in 0.0 deletes it (README: equality with the
    fill is bytewise). The model settled on the first order that compared equal and then
    expected the wrong stored keys ("stored extra ['0']"; "missing" the other way round).
    Both orders are run, one after the other: no race picks which one is tested."""
    sync = cs.ThreadSynchronizer()
    handle = _small_array(tmp_path, sync)
    handles = [handle(), handle()]
    values = [np.float64(-0.0), np.float64(0.0)]
    finals = []     # as the machine works them out: one per serial order of the writes
    for order in itertools.permutations(range(2)):
        m = np.zeros(4)
        for w in order:
            m[0:2] = values[w]
        finals.append(m)

    machine = SharedArrayMachine()
    machine.stores = Stores("directory", None, str(tmp_path))
    machine.fill_arr = np.zeros((), "<f8")
    machine.unit, machine.zarr_format = (2,), 2
    for order in ((1, 0), (0, 1)):      # 0.0 then -0.0 (the failing one), and back
        for w in order:
            handles[w][0:2] = values[w]
        after = handles[0][...]
        assert np.signbit(after[0]) == (order[-1] == 0)     # the array keeps the sign
        machine.model = settled_final(after, finals)
        assert machine.model is not None
        stored = set(machine.stores.listing(PATH)) - {".zarray", ".zattrs"}
        assert stored == machine._expected_keys(), (order, stored, machine.model)


def test_delete_draws_alike_whatever_the_model_holds(tmp_path) -> None:
    """Regression (soaking after the fix above: FlakyStrategyDefinition): the delete rule
    drew its key from the keys the model expects stored, whose number follows the race of
    a gather's overlapping writes, so a replay of the same choices drew with other bounds.
    Its draws are now the same whatever the model holds."""
    class Draws:
        """Records what is drawn; gives the first element, or 0."""
        def __init__(self) -> None:
            self.drawn: list[str] = []

        def draw(self, strategy, label=None):
            self.drawn.append(repr(strategy))
            elements = getattr(getattr(strategy, "wrapped_strategy", strategy), "elements",
                               None)
            return elements[0] if elements else 0

    handle = _small_array(tmp_path, None)
    arr = handle()
    arr[...] = 1.5
    machine = SharedArrayMachine()
    machine.handles = [Handle(arr, "sync", False), Handle(handle(), "sync", False)]
    machine.model = np.full(4, 1.5)
    machine.fill, machine.fill_arr = 0.0, np.zeros((), "<f8")
    machine.unit, machine.zarr_format = (2,), 2
    seen = []
    for stored in (2, 1):       # the model expects 2 stored chunks, then 1
        assert len(machine._expected_keys()) == stored
        data = Draws()
        machine.delete(data)
        seen.append(data.drawn)
    assert seen[0] == seen[1], seen
    assert_same(arr[...], machine.model, "after the deletes")
