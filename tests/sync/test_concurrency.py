"""Never wrong data under concurrency (issue 25): processes and threads writing one array at
once, and readers racing writers.

Every value a writer stores is checkable: writer ``w`` in round ``r`` has the tag
``(w + 1) * TAG_STEP + r`` (the array starts with every chunk holding tag 1), and the chunk
with grid index ``c`` written with tag ``t`` holds ``content(t, c)``: ``(t * NCHUNKS + c) * 16``
plus a pattern that is all zeros for even tags and varied for odd ones, so a chunk's
compressed size changes from round to round (a shard's layout moves when one of its inner
chunks is rewritten). A read that returns, for some chunk, anything but ``content(t, c)`` of
a tag some writer wrote into that very chunk has returned wrong data: bytes of another chunk,
a torn chunk, a stale chunk from before the array's first write. A read may raise instead
(the error is counted and shown), but never ``ChunkDecodeError``: nothing is corrupt.

After the writers finish, every chunk holds its owner's last tag (disjoint owners), or, for
overlapping writers with a synchronizer, each overlap is wholly one writer's last value.

Layouts: Zarr v2 and v3 (Blosc), sharded v3 with 2x3 inner chunks per shard (Zstd, Blosc, and
raw). Stores: DirectoryStore (processes and threads), MemoryStore (threads). What needs a
synchronizer (README, "Many writers: synchronizers" and "Sharding"): writers of disjoint whole
chunks, or for a sharded array disjoint whole shards, need none; disjoint inner chunks of one
shard (a shard is rewritten as a whole) and unaligned or overlapping regions do.

Processes are started with "spawn" (a pool of 3 shared by the module, so imports are paid
once), released together by a wall-clock start time. Each racing test races for about a
second (the file: about 40 s on 2 cores). Soak mode makes every racing test race for the
given number of seconds instead (so pick tests with -k):

    CHUNKSTORE_SOAK=600 .venv/bin/python -m pytest tests/test_concurrency.py -x -q -k race
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import threading
import time
import traceback
from concurrent.futures import ProcessPoolExecutor

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ChunkDecodeError
import faults

SOAK = float(os.environ.get("CHUNKSTORE_SOAK", "0") or 0)
RACE_SECONDS = SOAK if SOAK else 1.0      # how long each racing test races
CTX = mp.get_context("spawn")
TAG_STEP = 1_000_000
INITIAL_TAG = 1
SHAPE = (16, 24)
CHUNKS = (4, 4)
SHARDS = (8, 12)            # 2 x 3 inner chunks per shard, 2 x 2 shards
GRID = tuple(s // c for s, c in zip(SHAPE, CHUNKS))
NCHUNKS = int(np.prod(GRID))
DTYPE = "i8"

LAYOUTS = {
    "v2": dict(zarr_format=2, compressor="default"),
    "v3": dict(zarr_format=3, compressor="default"),
    "v3-sharded-zstd": dict(zarr_format=3, shards=SHARDS, compressor=numcodecs.Zstd(level=1)),
    "v3-sharded-blosc": dict(zarr_format=3, shards=SHARDS, compressor="default"),
    "v3-sharded-raw": dict(zarr_format=3, shards=SHARDS, compressor=None),
}
SHARDED = [k for k in LAYOUTS if "sharded" in k]


# ----------------------------------------------------------------------------- values
def content(tag, cidx):
    """What chunk cidx holds when written with tag."""
    base = (int(tag) * NCHUNKS + int(cidx)) * 16
    n = CHUNKS[0] * CHUNKS[1]
    if tag % 2 == 0:
        pattern = np.zeros(n, dtype=DTYPE)
    else:
        pattern = (np.arange(n, dtype=DTYPE) * (7 + tag % 5)) % 11
    return (base + pattern).reshape(CHUNKS)


def chunk_box(cidx):
    i, j = divmod(int(cidx), GRID[1])
    return (slice(i * CHUNKS[0], (i + 1) * CHUNKS[0]), slice(j * CHUNKS[1], (j + 1) * CHUNKS[1]))


def chunk_of(i, j):
    return i * GRID[1] + j


def block_chunks(block_shape, bidx):
    """Chunk indexes inside write block bidx (blocks of block_shape, in C order)."""
    per = (block_shape[0] // CHUNKS[0], block_shape[1] // CHUNKS[1])
    nb1 = SHAPE[1] // block_shape[1]
    bi, bj = divmod(bidx, nb1)
    return [chunk_of(bi * per[0] + a, bj * per[1] + b)
            for a in range(per[0]) for b in range(per[1])]


def block_box(block_shape, bidx):
    nb1 = SHAPE[1] // block_shape[1]
    bi, bj = divmod(bidx, nb1)
    return (slice(bi * block_shape[0], (bi + 1) * block_shape[0]),
            slice(bj * block_shape[1], (bj + 1) * block_shape[1]))


def nblocks(block_shape):
    return (SHAPE[0] // block_shape[0]) * (SHAPE[1] // block_shape[1])


def block_value(block_shape, bidx, tag):
    """The value of a whole block: each of its chunks holding content(tag, chunk)."""
    out = np.empty(block_shape, dtype=DTYPE)
    box = block_box(block_shape, bidx)
    for c in block_chunks(block_shape, bidx):
        cb = chunk_box(c)
        out[cb[0].start - box[0].start:cb[0].stop - box[0].start,
            cb[1].start - box[1].start:cb[1].stop - box[1].start] = content(tag, c)
    return out


def decode_tag(chunk, cidx):
    """The tag whose content chunk cidx holds, or None when it is no writer's content."""
    first = int(chunk.flat[0])
    t, rest = divmod(first // 16, NCHUNKS)
    if rest != cidx or t < 0:
        return None
    if not np.array_equal(chunk, content(t, cidx)):
        return None
    return t


def tag_writer(tag):
    """(writer id, round) of a tag, or (None, None) for the initial tag."""
    if tag == INITIAL_TAG:
        return None, None
    w, r = divmod(tag, TAG_STEP)
    return w - 1, r


def check_full(data, owners=None, allowed=None, chunks=None):
    """Problems (strings) of a read (data: array-shaped; chunks: the chunks it read, default
    all): each chunk must hold content(tag, c) for a tag written into that chunk: the initial
    tag, or a tag of a writer owning it (owners: cidx -> set of writer ids; None: any)."""
    bad = []
    for c in (range(NCHUNKS) if chunks is None else chunks):
        chunk = data[chunk_box(c)]
        t = decode_tag(chunk, c)
        if t is None:
            bad.append(f"chunk {c}: not any writer's content: {chunk.ravel()[:6].tolist()}...")
            continue
        w, r = tag_writer(t)
        if w is None:
            continue
        if not 0 <= w < 64 or (owners is not None and w not in owners[c]):
            bad.append(f"chunk {c}: tag {t} of writer {w}, which never wrote it")
        elif allowed is not None and t not in allowed:
            bad.append(f"chunk {c}: tag {t} not written")
    return bad


# ----------------------------------------------------------------------------- arrays
def make_array(store, layout, sync=None, **kw):
    """The test array, every chunk holding content(INITIAL_TAG, c)."""
    kw = {**LAYOUTS[layout], **kw}
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=DTYPE, store=store, synchronizer=sync,
                  overwrite=True, **kw)
    init = np.empty(SHAPE, dtype=DTYPE)
    for c in range(NCHUNKS):
        init[chunk_box(c)] = content(INITIAL_TAG, c)
    z[...] = init
    return z


def write_shape(layout):
    return SHARDS if "sharded" in layout else CHUNKS


def _sync(sync_path):
    return cs.ProcessSynchronizer(sync_path) if sync_path else None


def _wait_until(t):
    d = t - time.time()
    if d > 0:
        time.sleep(d)


# ----------------------------------------------------------------------------- workers
# Each returns plain data (picklable), so the same function serves a pool process and a
# thread: `store` is a path (processes) or a store object (threads).
def w_blocks(store, sync, wid, units, unit_shape, start_at, end_at, min_rounds):
    """Write the given units (blocks of unit_shape, by index) with this writer's tags, round
    after round. Returns {unit: last tag}."""
    if isinstance(sync, str):
        sync = _sync(sync)
    z = cs.open_array(store, mode="r+", synchronizer=sync)
    rng = np.random.default_rng(wid)
    _wait_until(start_at)
    last, r = {}, 0
    while r < min_rounds or time.time() < end_at:
        tag = (wid + 1) * TAG_STEP + r
        order = list(units)
        rng.shuffle(order)
        for u in order:
            z[block_box(unit_shape, u)] = block_value(unit_shape, u, tag)
            last[u] = tag
        r += 1
    return last


def w_region(store, sync, wid, region, start_at, end_at, min_rounds):
    """Write a constant tag into a region (tuple of (start, stop)) round after round.
    Returns the last tag."""
    if isinstance(sync, str):
        sync = _sync(sync)
    z = cs.open_array(store, mode="r+", synchronizer=sync)
    box = tuple(slice(a, b) for a, b in region)
    _wait_until(start_at)
    r, tag = 0, None
    while r < min_rounds or time.time() < end_at:
        tag = (wid + 1) * TAG_STEP + r
        z[box] = tag
        r += 1
    return tag


def w_points(store, sync, wid, nworkers, start_at):
    """Disjoint single elements all over the array: element e belongs to e % nworkers."""
    if isinstance(sync, str):
        sync = _sync(sync)
    z = cs.open_array(store, mode="r+", synchronizer=sync)
    ids = np.arange(wid, SHAPE[0] * SHAPE[1], nworkers)
    np.random.default_rng(wid).shuffle(ids)
    _wait_until(start_at)
    for lo in range(0, len(ids), 4):
        part = ids[lo:lo + 4]
        z.vindex[part // SHAPE[1], part % SHAPE[1]] = (wid + 1) * TAG_STEP
    return len(ids)


def r_reader(store, sync, rid, owners, start_at, end_at, fresh_every):
    """Read the whole array (and random boxes of whole chunks) until end_at, through one
    long-lived handle (default cache settings) and, every fresh_every-th read, a fresh one.
    Returns (reads, problems, errors)."""
    if isinstance(sync, str):
        sync = _sync(sync)
    long_lived = cs.open_array(store, mode="r", synchronizer=sync)
    rng = np.random.default_rng(1000 + rid)
    reads, problems, errors = 0, [], []
    _wait_until(start_at)
    while time.time() < end_at or reads < 3:
        fresh = fresh_every and reads % fresh_every == 0
        try:
            z = cs.open_array(store, mode="r", synchronizer=sync) if fresh else long_lived
            if reads % 3 == 2:   # a box of whole chunks
                i0 = int(rng.integers(0, GRID[0]))
                i1 = int(rng.integers(i0 + 1, GRID[0] + 1))
                j0 = int(rng.integers(0, GRID[1]))
                j1 = int(rng.integers(j0 + 1, GRID[1] + 1))
                box = (slice(i0 * CHUNKS[0], i1 * CHUNKS[0]),
                       slice(j0 * CHUNKS[1], j1 * CHUNKS[1]))
                part = z[box]
                data = np.full(SHAPE, -1, dtype=DTYPE)
                data[box] = part
                chunks = [chunk_of(i, j) for i in range(i0, i1) for j in range(j0, j1)]
            else:
                data = z[...]
                chunks = range(NCHUNKS)
            for p in check_full(data, owners, chunks=chunks):
                problems.append(f"read {reads} ({'fresh' if fresh else 'long-lived'} handle): "
                                f"{p}")
        except Exception as e:  # noqa: BLE001 - reported to the caller
            errors.append(f"{type(e).__module__}.{type(e).__name__}: {e}"
                          + ("\n" + traceback.format_exc(limit=6)
                             if isinstance(e, ChunkDecodeError) else ""))
        reads += 1
    return reads, problems[:20], errors[:20]


def _init_worker():
    import chunkstore  # noqa: F401 - import once per worker


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(max_workers=3, mp_context=CTX, initializer=_init_worker) as ex:
        # start all three workers now (imports paid once for the module)
        list(ex.map(time.sleep, [0.3] * 3))
        yield ex


def run_processes(pool, calls, timeout=None):
    """Run (fn, args) calls in the pool at once; their results, in order."""
    futs = [pool.submit(fn, *args) for fn, args in calls]
    timeout = timeout or (RACE_SECONDS + 60)
    return [f.result(timeout=timeout) for f in futs]


def run_threads(calls, timeout=None):
    return faults.run_threads(calls, timeout or (RACE_SECONDS + 60))


def assert_reads_ok(reader_results):
    total = 0
    for reads, problems, errors in reader_results:
        total += reads
        assert not problems, "wrong data read:\n" + "\n".join(problems)
        decode = [e for e in errors if "ChunkDecodeError" in e]
        assert not decode, "ChunkDecodeError while racing a writer:\n" + "\n".join(decode)
        # any other error is allowed by the contract (a read may raise), but all of them
        # failing would mean nothing was checked
    assert total >= len(reader_results) * 3
    for reads, problems, errors in reader_results:
        assert len(errors) < reads, ("every read raised", errors[:3])


def final_state_exact(z, expected_tags):
    """Every chunk holds content(expected_tags[c], c)."""
    data = z[...]
    bad = []
    for c in range(NCHUNKS):
        got = decode_tag(data[chunk_box(c)], c)
        if got != expected_tags[c]:
            bad.append((c, got, expected_tags[c]))
    assert not bad, f"chunks not holding their writer's last value (chunk, got, expected): {bad}"


# ============================================================================ the issue
def _issue_repro(path, lock_dir, **kw):
    sync = cs.ProcessSynchronizer(lock_dir)
    a = cs.create_array(path, shape=(8,), chunks=(2,), shards=(8,), dtype="i2",
                        synchronizer=sync, **kw)
    a[2:4] = [5, 6]; a[...]                      # handle a caches the shard's index  # noqa: E702
    b = cs.open_array(path, mode="r+", synchronizer=sync)
    b[0:2] = [1, 2]                              # an inner chunk in front: the shard grows
    assert (a[...] == [1, 2, 5, 6, 0, 0, 0, 0]).all()
    a[3] = 9
    assert (b[...] == [1, 2, 5, 9, 0, 0, 0, 0]).all()


def test_issue_25_reproduction(tmp_path):
    """The issue's reproduction, exactly (create_array's default codecs)."""
    path = str(tmp_path / "a.zarr")
    lock_dir = str(tmp_path / "locks")
    sync = cs.ProcessSynchronizer(lock_dir)
    a = cs.create_array(path, shape=(8,), chunks=(2,), shards=(8,), dtype="i2", synchronizer=sync)
    a[2:4] = [5, 6]; a[...]                      # handle a caches the shard's index  # noqa: E702
    b = cs.open_array(path, mode="r+", synchronizer=sync)
    b[0:2] = [1, 2]                              # an inner chunk in front: the shard grows
    assert (a[...] == [1, 2, 5, 6, 0, 0, 0, 0]).all()
    a[3] = 9
    assert (b[...] == [1, 2, 5, 9, 0, 0, 0, 0]).all()


@pytest.mark.parametrize("codec", ["raw", "zstd", "blosc", "gzip-crc32c"])
def test_issue_25_reproduction_codecs(tmp_path, codec):
    kw = {"raw": dict(compressors=None), "zstd": dict(compressors=numcodecs.Zstd(level=3)),
          "blosc": dict(compressors=numcodecs.Blosc(cname="lz4", shuffle=1)),
          "gzip-crc32c": dict(compressors=["gzip", "crc32c"])}[codec]
    _issue_repro(str(tmp_path / "a.zarr"), str(tmp_path / "locks"), **kw)


@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_issue_25_reproduction_2d_shards(tmp_path, codec):
    """The same with 2-d shards of 2x2 inner chunks: an inner chunk in front grows the shard
    (and a compressed one changes size) while another handle holds its index."""
    sync = cs.ProcessSynchronizer(str(tmp_path / "locks"))
    path = str(tmp_path / "a.zarr")
    comp = None if codec == "raw" else numcodecs.Zstd(level=3)
    a = cs.create_array(path, shape=(4, 6), chunks=(2, 3), shards=(4, 6), dtype="i2",
                        synchronizer=sync, compressors=comp)
    model = np.zeros((4, 6), dtype="i2")
    a[2:4, 3:6] = model[2:4, 3:6] = np.arange(6).reshape(2, 3) + 50
    np.testing.assert_array_equal(a[...], model)          # a caches the shard's index
    b = cs.open_array(path, mode="r+", synchronizer=sync)
    b[0:2, 0:3] = model[0:2, 0:3] = np.arange(6).reshape(2, 3) + 10   # in front: shard grows
    np.testing.assert_array_equal(a[...], model)
    np.testing.assert_array_equal(a[2:4, 3:6], model[2:4, 3:6])
    a[3, 4] = model[3, 4] = 9
    np.testing.assert_array_equal(b[...], model)
    b[0:2, 3:6] = model[0:2, 3:6] = np.arange(600, 606).reshape(2, 3)  # compressed: resizes
    a[2, 0] = model[2, 0] = -7
    np.testing.assert_array_equal(a[...], model)
    np.testing.assert_array_equal(b[...], model)
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[...], model)


def _issue_child_write(path, lock_dir):
    b = cs.open_array(path, mode="r+", synchronizer=cs.ProcessSynchronizer(lock_dir))
    b[0:2] = [1, 2]
    return b[...].tolist()


def test_issue_25_reproduction_across_processes(tmp_path, pool):
    """Handle a in this process, b in another: the shard grows behind a's cached index."""
    path, lock_dir = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    sync = cs.ProcessSynchronizer(lock_dir)
    a = cs.create_array(path, shape=(8,), chunks=(2,), shards=(8,), dtype="i2", synchronizer=sync)
    a[2:4] = [5, 6]
    a[...]
    assert run_processes(pool, [(_issue_child_write, (path, lock_dir))])[0] == \
        [1, 2, 5, 6, 0, 0, 0, 0]
    assert (a[...] == [1, 2, 5, 6, 0, 0, 0, 0]).all()
    a[3] = 9
    assert (cs.open_array(path, mode="r")[...] == [1, 2, 5, 9, 0, 0, 0, 0]).all()



# ------------------------------------------------------- appends racing stale writers
APPEND_START = (6, 24)   # rows 4..8 are a partial edge chunk at the start
APPEND_ROWS = 2          # per append: the edge chunk stays partial every other append
APPENDS = 12


def _appender(path, lock_dir, t0):
    """Append APPENDS blocks of APPEND_ROWS rows; row r holds 10_000 + r."""
    a = cs.open_array(path, mode="r+", synchronizer=cs.ProcessSynchronizer(lock_dir))
    _wait_until(t0)
    for k in range(APPENDS):
        start = APPEND_START[0] + k * APPEND_ROWS
        rows = np.arange(start, start + APPEND_ROWS, dtype=DTYPE)[:, None] + 10_000
        a.append(np.broadcast_to(rows, (APPEND_ROWS, APPEND_START[1])).copy())
    return a.shape


def _stale_writer(path, lock_dir, w, cols, t0, t1):
    """Write rows 0..6 of columns cols again and again through a handle opened at the
    start (cached metadata: shape (6, 24), which the appends make stale); the last tag."""
    a = cs.open_array(path, mode="r+", synchronizer=cs.ProcessSynchronizer(lock_dir))
    assert a.shape == APPEND_START
    _wait_until(t0)
    tag = 0
    while tag < 3 or time.time() < t1:
        tag += 1
        a[0:APPEND_START[0], cols[0]:cols[1]] = (w + 1) * 100 + tag
    return tag


@pytest.mark.parametrize("layout", ["v2", "v3", "v3-sharded-zstd"])
def test_processes_appends_race_writers_with_stale_shapes(tmp_path, pool, layout):
    """One process appends rows while two others write the first rows through handles whose
    cached shape the appends make stale, with a ProcessSynchronizer. A stale handle sees the
    edge chunk (rows 4..8) as partial past row 6; if it wrote it "whole" by its old shape it
    would clear rows appended meanwhile (issue 25). Every appended row must survive, and
    the written region end as each writer's last value."""
    path, locks = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    cs.create(APPEND_START, chunks=CHUNKS, dtype=DTYPE, store=path, fill_value=-1,
              **LAYOUTS[layout])
    t0 = time.time() + 0.3
    shape, last0, last1 = run_processes(pool, [
        (_appender, (path, locks, t0)),
        (_stale_writer, (path, locks, 0, (0, 12), t0, t0 + RACE_SECONDS)),
        (_stale_writer, (path, locks, 1, (12, 24), t0, t0 + RACE_SECONDS))])
    rows = APPEND_START[0] + APPENDS * APPEND_ROWS
    assert tuple(shape) == (rows, APPEND_START[1])
    got = cs.open_array(path, mode="r")[...]
    want = np.empty((rows, APPEND_START[1]), dtype=DTYPE)
    want[:APPEND_START[0], :12] = 100 + last0
    want[:APPEND_START[0], 12:] = 200 + last1
    want[APPEND_START[0]:] = np.arange(APPEND_START[0], rows, dtype=DTYPE)[:, None] + 10_000
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sync", ["none", "thread", "process"])
@pytest.mark.parametrize("layout", ["v2", "v3-sharded-zstd"])
def test_write_planned_again_is_not_starved_by_a_steady_appender(tmp_path, monkeypatch,
                                                                 layout, sync):
    """An appender (another handle) that changes the shape between a write's read of the
    metadata and its locks every time, as a steady appender on many cores can: the write,
    planned again, holds the metadata guard from its read of the metadata, so the next
    append waits for it and the write lands. (It used to plan again 8 times, each spoilt by
    an append, and give up with ArrayMetadataChangedError: seen on a 16-core machine.)
    The appends all land too, after it."""
    from chunkstore.engine import chunk_io

    path = str(tmp_path / "a.zarr")
    cs.create(APPEND_START, chunks=CHUNKS, dtype=DTYPE, store=path, fill_value=-1,
              **LAYOUTS[layout])

    def opened():
        s = {"none": None, "thread": shared_thread,
             "process": cs.ProcessSynchronizer(str(tmp_path / "locks"))}[sync]
        return cs.open_array(path, mode="r+", synchronizer=s)

    shared_thread = cs.ThreadSynchronizer()
    writer, appender = opened(), opened()
    writer_thread = threading.get_ident()
    appends: list[threading.Thread] = []
    row = np.full((1, APPEND_START[1]), 7, dtype=DTYPE)
    original = chunk_io.EngineState.locked

    def locked(self, *args, **kwargs):
        # in the writer, between its plan and its locks: an append by the other handle,
        # given half a second to land (under the guard it waits for the write instead)
        if threading.get_ident() == writer_thread and len(appends) < 12:
            t = threading.Thread(target=appender.append, args=(row,))
            appends.append(t)
            t.start()
            t.join(0.5)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(chunk_io.EngineState, "locked", locked)
    writer[0:3, 0:5] = 42
    monkeypatch.setattr(chunk_io.EngineState, "locked", original)
    for t in appends:
        t.join(10)
        assert not t.is_alive()
    assert len(appends) == 2   # the first plan spoilt by one append; the second one waited
    want = np.full((APPEND_START[0] + 2, APPEND_START[1]), -1, dtype=DTYPE)
    want[0:3, 0:5] = 42
    want[APPEND_START[0]:] = 7
    got = cs.open_array(path, mode="r")
    assert got.shape == want.shape
    np.testing.assert_array_equal(got[...], want)


# ============================================================================ processes
@pytest.mark.parametrize("layout", ["v2", "v3", "v3-sharded-zstd", "v3-sharded-raw"])
def test_processes_disjoint_whole_blocks_without_synchronizer(tmp_path, pool, layout):
    """Three processes, each owning whole chunks (whole shards when sharded) spread over the
    array, no synchronizer: each ends with exactly its last value."""
    path = str(tmp_path / "a.zarr")
    make_array(path, layout)
    ws = write_shape(layout)
    nw = 3
    units = {w: [u for u in range(nblocks(ws)) if u % nw == w] for w in range(nw)}
    t0 = time.time() + 0.3
    results = run_processes(pool, [(w_blocks, (path, None, w, units[w], ws, t0,
                                               t0 + RACE_SECONDS / 2, 5))
                                   for w in range(nw)])
    expected = {}
    for last in results:
        for u, tag in last.items():
            for c in block_chunks(ws, u):
                expected[c] = tag
    final_state_exact(cs.open_array(path, mode="r"), expected)


@pytest.mark.parametrize("layout", SHARDED)
def test_processes_inner_chunks_of_one_shard_with_synchronizer(tmp_path, pool, layout):
    """Three processes owning interleaved inner chunks of the same shards (each write is a
    shard read-modify-write), with a ProcessSynchronizer: no update is lost."""
    path, locks = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    make_array(path, layout)
    nw = 3
    units = {w: [c for c in range(NCHUNKS) if c % nw == w] for w in range(nw)}
    t0 = time.time() + 0.3
    results = run_processes(pool, [(w_blocks, (path, locks, w, units[w], CHUNKS, t0,
                                               t0 + RACE_SECONDS / 2, 3))
                                   for w in range(nw)])
    expected = {c: tag for last in results for c, tag in last.items()}
    final_state_exact(cs.open_array(path, mode="r"), expected)


@pytest.mark.parametrize("layout", ["v2", "v3-sharded-zstd"])
def test_processes_disjoint_points_with_synchronizer(tmp_path, pool, layout):
    """Three processes writing disjoint single elements all over the array (every chunk and
    shard shared by all), with a ProcessSynchronizer: nothing is lost."""
    path, locks = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    cs.create(SHAPE, chunks=CHUNKS, dtype=DTYPE, store=path, **LAYOUTS[layout])
    nw = 3
    t0 = time.time() + 0.3
    run_processes(pool, [(w_points, (path, locks, w, nw, t0)) for w in range(nw)])
    got = cs.open_array(path, mode="r")[...]
    expected = ((np.arange(SHAPE[0] * SHAPE[1]) % nw + 1) * TAG_STEP).reshape(SHAPE)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("layout", ["v2", "v3", "v3-sharded-zstd", "v3-sharded-raw"])
def test_processes_overlapping_regions_with_synchronizer(tmp_path, pool, layout):
    """Three processes writing overlapping, unaligned regions (each overlapping the next),
    round after round, with a ProcessSynchronizer: every element holds the last value of a
    writer covering it, and each overlap is wholly one writer's value."""
    path, locks = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    make_array(path, layout)
    regions = [((1, 9), (2, 15)), ((5, 14), (9, 22)), ((0, 16), (13, 19))]
    t0 = time.time() + 0.3
    lasts = run_processes(pool, [(w_region, (path, locks, w, regions[w], t0,
                                             t0 + RACE_SECONDS / 2, 3)) for w in range(3)])
    check_overlaps(cs.open_array(path, mode="r")[...], regions, lasts)


def check_overlaps(data, regions, lasts):
    """Overlapping writers serialized by the synchronizer: the final array is what the
    writers' last writes give in SOME serial order (each earlier round of a writer comes
    before its last one, so the last writes decide every element)."""
    covering = np.zeros(SHAPE + (len(regions),), dtype=bool)
    for w, ((a, b), (c, d)) in enumerate(regions):
        covering[a:b, c:d, w] = True
    for idx in np.ndindex(SHAPE):
        ws = np.flatnonzero(covering[idx])
        if len(ws):
            assert data[idx] in {lasts[w] for w in ws}, (idx, data[idx], lasts)
    inside = covering.any(axis=-1)
    for order in itertools.permutations(range(len(regions))):
        serial = np.zeros(SHAPE, dtype=DTYPE)
        for w in order:
            (a, b), (c, d) = regions[w]
            serial[a:b, c:d] = lasts[w]
        if np.array_equal(serial[inside], data[inside]):
            break
    else:
        raise AssertionError(f"the final values are no serial order of the writers' last "
                             f"writes {lasts}: {data.tolist()}")
    # outside every region: the initial content, untouched
    init = np.empty(SHAPE, dtype=DTYPE)
    for c in range(NCHUNKS):
        init[chunk_box(c)] = content(INITIAL_TAG, c)
    outside = ~covering.any(axis=-1)
    np.testing.assert_array_equal(data[outside], init[outside])


@pytest.mark.parametrize("layout", ["v2", "v3-sharded-zstd", "v3-sharded-blosc",
                                    "v3-sharded-raw"])
def test_processes_readers_race_chunk_rewrites(tmp_path, pool, layout):
    """One process rewrites single chunks (in a sharded array: inner chunks, so each write
    rewrites its shard and moves the other chunks in it) in a loop, without a synchronizer;
    two reader processes (one long-lived handle each, plus a fresh handle every other
    read) and this process read all the while. Every read returns each chunk whole, as some
    write left it, or raises; never another chunk's bytes, never ChunkDecodeError."""
    path = str(tmp_path / "a.zarr")
    make_array(path, layout)
    owners = {c: {0} for c in range(NCHUNKS)}
    t0 = time.time() + 0.5
    t1 = t0 + RACE_SECONDS
    futs = [pool.submit(w_blocks, path, None, 0, list(range(NCHUNKS)), CHUNKS, t0, t1, 3)]
    futs += [pool.submit(r_reader, path, None, r, owners, t0, t1, 2) for r in range(2)]
    mine = r_reader(path, None, 9, owners, t0, t1, 3)
    results = [f.result(timeout=RACE_SECONDS + 60) for f in futs]
    assert_reads_ok(results[1:] + [mine])
    final_state_exact(cs.open_array(path, mode="r"), results[0])


@pytest.mark.parametrize("layout", ["v3-sharded-zstd", "v3-sharded-raw"])
def test_processes_two_writers_of_one_shard_race_readers(tmp_path, pool, layout):
    """Two processes rewrite interleaved inner chunks of the same shards under a
    ProcessSynchronizer while a third and this process read: reads as above, and in the end
    each chunk holds its owner's last value."""
    path, locks = str(tmp_path / "a.zarr"), str(tmp_path / "locks")
    make_array(path, layout)
    units = {w: [c for c in range(NCHUNKS) if c % 2 == w] for w in range(2)}
    owners = {c: {c % 2} for c in range(NCHUNKS)}
    t0 = time.time() + 0.5
    t1 = t0 + RACE_SECONDS
    futs = [pool.submit(w_blocks, path, locks, w, units[w], CHUNKS, t0, t1, 3)
            for w in range(2)]
    futs.append(pool.submit(r_reader, path, None, 0, owners, t0, t1, 2))
    mine = r_reader(path, locks, 9, owners, t0, t1, 3)
    results = [f.result(timeout=RACE_SECONDS + 60) for f in futs]
    assert_reads_ok([results[2], mine])
    final_state_exact(cs.open_array(path, mode="r"), {**results[0], **results[1]})


# ============================================================================ threads
def thread_store(kind, tmp_path):
    """What the threads open the array with: one MemoryStore object shared by every handle,
    or a directory path (a DirectoryStore per handle)."""
    if kind == "memory":
        return cs.MemoryStore()
    return str(tmp_path / "a.zarr")


STORE_KINDS = ["memory", "directory"]


@pytest.mark.parametrize("kind", STORE_KINDS)
@pytest.mark.parametrize("layout", ["v2", "v3", "v3-sharded-zstd", "v3-sharded-raw"])
def test_threads_disjoint_whole_blocks_without_synchronizer(tmp_path, kind, layout):
    store = thread_store(kind, tmp_path)
    make_array(store, layout)
    ws = write_shape(layout)
    nw = 4
    units = {w: [u for u in range(nblocks(ws)) if u % nw == w] for w in range(nw)}
    t0 = time.time() + 0.05
    results = run_threads([(w_blocks, (store, None, w, units[w], ws, t0, t0 + RACE_SECONDS / 4,
                                       4)) for w in range(nw)])
    expected = {c: tag for last in results for u, tag in last.items()
                for c in block_chunks(ws, u)}
    final_state_exact(cs.open_array(store, mode="r"), expected)


@pytest.mark.parametrize("kind", STORE_KINDS)
@pytest.mark.parametrize("layout", SHARDED)
def test_threads_inner_chunks_of_one_shard_with_synchronizer(tmp_path, kind, layout):
    store = thread_store(kind, tmp_path)
    make_array(store, layout)
    sync = cs.ThreadSynchronizer()
    nw = 4
    units = {w: [c for c in range(NCHUNKS) if c % nw == w] for w in range(nw)}
    t0 = time.time() + 0.05
    results = run_threads([(w_blocks, (store, sync, w, units[w], CHUNKS, t0,
                                       t0 + RACE_SECONDS / 4, 3)) for w in range(nw)])
    expected = {c: tag for last in results for c, tag in last.items()}
    final_state_exact(cs.open_array(store, mode="r"), expected)


@pytest.mark.parametrize("kind", STORE_KINDS)
@pytest.mark.parametrize("layout", ["v2", "v3-sharded-zstd"])
def test_threads_disjoint_points_with_synchronizer(tmp_path, kind, layout):
    store = thread_store(kind, tmp_path)
    cs.create(SHAPE, chunks=CHUNKS, dtype=DTYPE, store=store, **LAYOUTS[layout])
    sync = cs.ThreadSynchronizer()
    nw = 4
    t0 = time.time() + 0.05
    run_threads([(w_points, (store, sync, w, nw, t0)) for w in range(nw)])
    got = cs.open_array(store, mode="r")[...]
    expected = ((np.arange(SHAPE[0] * SHAPE[1]) % nw + 1) * TAG_STEP).reshape(SHAPE)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("kind", STORE_KINDS)
@pytest.mark.parametrize("layout", ["v2", "v3", "v3-sharded-zstd"])
def test_threads_overlapping_regions_with_synchronizer(tmp_path, kind, layout):
    store = thread_store(kind, tmp_path)
    make_array(store, layout)
    sync = cs.ThreadSynchronizer()
    regions = [((1, 9), (2, 15)), ((5, 14), (9, 22)), ((0, 16), (13, 19))]
    t0 = time.time() + 0.05
    lasts = run_threads([(w_region, (store, sync, w, regions[w], t0, t0 + RACE_SECONDS / 4, 3))
                         for w in range(3)])
    check_overlaps(cs.open_array(store, mode="r")[...], regions, lasts)


@pytest.mark.parametrize("kind", STORE_KINDS)
@pytest.mark.parametrize("layout", ["v2", "v3", "v3-sharded-zstd", "v3-sharded-blosc",
                                    "v3-sharded-raw"])
def test_threads_readers_race_chunk_rewrites(tmp_path, kind, layout):
    """One thread rewrites single (inner) chunks in a loop while two threads read through a
    long-lived handle each (default cache settings) and fresh handles."""
    store = thread_store(kind, tmp_path)
    make_array(store, layout)
    owners = {c: {0} for c in range(NCHUNKS)}
    t0 = time.time() + 0.05
    t1 = t0 + RACE_SECONDS / 2
    results = run_threads([(w_blocks, (store, None, 0, list(range(NCHUNKS)), CHUNKS, t0, t1,
                                       3))]
                          + [(r_reader, (store, None, r, owners, t0, t1, 2)) for r in range(2)])
    assert_reads_ok(results[1:])
    final_state_exact(cs.open_array(store, mode="r"), results[0])


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_threads_one_handle_shared_by_writer_and_readers(tmp_path, kind):
    """The writer and the readers share one Array object (a sharded one): reads through it
    while it rewrites inner chunks see each chunk whole."""
    store = thread_store(kind, tmp_path)
    z = make_array(store, "v3-sharded-zstd")
    owners = {c: {0} for c in range(NCHUNKS)}
    stop = time.time() + RACE_SECONDS / 2
    last = {}
    problems, errors = [], []

    def writer():
        r = 0
        while r < 3 or time.time() < stop:
            tag = TAG_STEP + r
            for c in range(NCHUNKS):
                z[chunk_box(c)] = content(tag, c)
                last[c] = tag
            r += 1

    def reader():
        n = 0
        while n < 3 or time.time() < stop:
            try:
                problems.extend(check_full(z[...], owners))
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
            n += 1

    ts = [threading.Thread(target=writer)] + [threading.Thread(target=reader)
                                              for _ in range(2)]
    [t.start() for t in ts]
    [t.join(RACE_SECONDS + 60) for t in ts]
    assert not problems, problems[:10]
    assert not [e for e in errors if "ChunkDecodeError" in e], errors[:5]
    final_state_exact(z, last)
