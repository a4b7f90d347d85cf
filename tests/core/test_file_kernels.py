"""Decode kernels that read chunk files themselves (chunkstore._core.batch.Files).

On a plain directory store (and shards in one) a read's batch is read and decoded in one
GIL-free call: no bytes object per chunk, one GIL hand-off a batch. These tests check that
the path is taken, that it reads what NumPy reads, and that every chunk it cannot take
(absent, a directory, too large, corrupt, a range past the end of a shard) goes through the
store and the codec, which fill it or raise the same error naming the key as before.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numcodecs import GZip, Zstd

import chunkstore as cs
from chunkstore._core.batch import Files
from chunkstore.errors import ChunkNotFoundError
from chunkstore.storage.directory import DirectoryStore


def _vol(shape=(3, 90, 110), seed=0):
    return np.random.default_rng(seed).integers(0, 1000, size=shape, dtype=np.int32)


SELECTIONS = [
    (1, slice(10, 70), slice(5, 100)),
    (slice(None), slice(0, 40), slice(0, 40)),
    (slice(None), slice(None), slice(None)),
    (2, 33, slice(None)),
]


def _make(tmp_path, kind, vol):
    path = str(tmp_path / f"{kind}.zarr")
    if kind == "blosc":
        z = cs.open_array(path, mode="w", shape=vol.shape, chunks=(1, 32, 32), dtype=vol.dtype)
    elif kind == "zstd":
        z = cs.open_array(path, mode="w", shape=vol.shape, chunks=(1, 32, 32), dtype=vol.dtype,
                          compressor=Zstd(3))
    elif kind == "gzip":
        z = cs.open_array(path, mode="w", shape=vol.shape, chunks=(2, 30, 40), dtype=vol.dtype,
                          compressor=GZip(1))
    elif kind == "v3zstd":
        z = cs.create_array(path, shape=vol.shape, chunks=(1, 32, 32), dtype=vol.dtype,
                            zarr_format=3)
    else:
        z = cs.create_array(path, shape=vol.shape, chunks=(1, 16, 16), shards=(1, 64, 64),
                            dtype=vol.dtype, zarr_format=3)
    z[...] = vol
    return cs.open_array(path, mode="r"), path


KINDS = ["blosc", "zstd", "gzip", "v3zstd", "sharded"]


class _Counter:
    """Counts the chunk reads that went through the store's getitems (the fallback)."""

    def __init__(self, monkeypatch):
        self.keys = []
        orig = DirectoryStore.getitems

        def getitems(store, keys):
            keys = list(keys)
            self.keys.extend(keys)
            return orig(store, keys)
        # patched on the class: file_paths still sees DirectoryStore.getitems as its own
        monkeypatch.setattr(DirectoryStore, "getitems", getitems)

    def chunk_reads(self):
        return [k for k in self.keys if not k.split("/")[-1].startswith((".z", "zarr"))]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("threads", [1, 2])
def test_reads_equal_numpy_and_take_no_store_reads(tmp_path, kind, threads, monkeypatch):
    vol = _vol()
    z, _ = _make(tmp_path, kind, vol)
    counter = _Counter(monkeypatch)
    with cs.config.set(threads=threads):
        for sel in SELECTIONS:
            np.testing.assert_array_equal(z[sel], vol[sel])
        np.testing.assert_array_equal(z.vindex[[0, 2, 1], [5, 80, 44], [3, 100, 7]],
                                      vol[[0, 2, 1], [5, 80, 44], [3, 100, 7]])
    assert z._engine._files(z._engine.codec.fast) is not None
    assert counter.chunk_reads() == []


def _chunk_file(path, kind, key):
    return os.path.join(path, *key.split("/"))


@pytest.mark.parametrize("kind", ["blosc", "zstd", "v3zstd"])
def test_missing_chunks_mid_batch_read_the_fill_value(tmp_path, kind):
    vol = _vol()
    z, path = _make(tmp_path, kind, vol)
    keys = [z.layout.chunk_key((1, i, j)) for i, j in [(0, 1), (1, 1), (2, 0)]]
    for k in keys:
        os.remove(_chunk_file(path, kind, k))
    want = vol.copy()
    want[1, 0:32, 32:64] = 0
    want[1, 32:64, 32:64] = 0
    want[1, 64:96, 0:32] = 0
    for sel in SELECTIONS:
        np.testing.assert_array_equal(z[sel], want[sel])
    strict = cs.open_array(path, mode="r", missing_chunks="error")
    with pytest.raises(ChunkNotFoundError, match=keys[0].replace(".", r"\.")):
        strict[1]


def test_a_directory_where_a_chunk_should_be_reads_as_missing(tmp_path):
    vol = _vol()
    z, path = _make(tmp_path, "blosc", vol)
    f = _chunk_file(path, "blosc", "0.1.1")
    os.remove(f)
    os.mkdir(f)
    want = vol.copy()
    want[0, 32:64, 32:64] = 0
    np.testing.assert_array_equal(z[0], want[0])


@pytest.mark.parametrize("kind", ["blosc", "zstd", "gzip"])
def test_a_corrupt_chunk_raises_naming_its_key(tmp_path, kind):
    vol = _vol()
    z, path = _make(tmp_path, kind, vol)
    key = "1.1.1"
    with open(_chunk_file(path, kind, key), "r+b") as f:
        f.seek(0)
        f.write(b"\xff" * 24)
    with pytest.raises(Exception, match=r"1\.1\.1"):
        z[...]
    # the chunks before and after it in the batch were fine, and still read
    np.testing.assert_array_equal(z[0], vol[0])


def test_a_file_larger_than_any_encoding_is_left_to_the_codec(tmp_path):
    vol = _vol()
    z, path = _make(tmp_path, "blosc", vol)
    with open(_chunk_file(path, "blosc", "2.0.0"), "ab") as f:
        f.write(b"\0" * (2 * z._engine.codec.nbytes + 2**16 + 1))
    with pytest.raises(Exception, match=r"2\.0\.0"):
        z[2]
    np.testing.assert_array_equal(z[1], vol[1])


def test_sharded_missing_inner_chunks_and_shards_read_the_fill(tmp_path):
    vol = _vol()
    path = str(tmp_path / "s.zarr")
    z = cs.create_array(path, shape=vol.shape, chunks=(1, 16, 16), shards=(1, 64, 64),
                        dtype=vol.dtype, zarr_format=3, fill_value=7)
    z[0] = vol[0]
    z[1, :20, :20] = vol[1, :20, :20]   # one shard with some inner chunks only
    r = cs.open_array(path, mode="r")
    want = np.full(vol.shape, 7, dtype=vol.dtype)
    want[0] = vol[0]
    want[1, :20, :20] = vol[1, :20, :20]
    for sel in SELECTIONS:
        np.testing.assert_array_equal(r[sel], want[sel])


def test_a_truncated_shard_raises_naming_the_shard(tmp_path):
    vol = _vol()
    z, path = _make(tmp_path, "sharded", vol)
    shard = _chunk_file(path, "sharded", "c/1/0/0")
    size = os.path.getsize(shard)
    with open(shard, "r+b") as f:   # cut the chunks' bytes, keep the index at the end
        data = f.read()
        f.seek(0)
        f.truncate()
        f.write(data[:size // 3] + data[-(16 * 16 + 4):])
    fresh = cs.open_array(path, mode="r")
    with pytest.raises(Exception, match="c/1/0/0"):
        fresh[1, :64, :64]


def test_a_store_subclass_reading_keys_its_own_way_is_not_bypassed(tmp_path):
    vol = _vol()
    _, path = _make(tmp_path, "blosc", vol)
    seen = []

    class Logging(DirectoryStore):
        def getitems(self, keys):
            keys = list(keys)
            seen.extend(keys)
            return super().getitems(keys)

    z = cs.open_array(Logging(path), mode="r")
    assert z._engine._files(z._engine.codec.fast) is None
    np.testing.assert_array_equal(z[1], vol[1])
    assert "1.0.0" in seen


def test_files_arguments_are_checked():
    with pytest.raises(TypeError):
        Files(["a/str/path"], 10)
    with pytest.raises(TypeError):
        Files([b"a\0b"], 10)
    with pytest.raises(ValueError, match="shape"):
        Files([b"a", b"b"], 10, np.zeros((3, 2), dtype=np.int64))
    f = Files([b"a", b"b", b"c"], 10, np.arange(6).reshape(3, 2))
    assert len(f) == 3 and len(f[1:]) == 2
    with pytest.raises(TypeError):
        f[0]


@pytest.mark.parametrize("order", ["C", "F"])
def test_f_order_nested_and_normalized_stores_read_through_files(tmp_path, order, monkeypatch):
    vol = _vol()
    nested = cs.NestedDirectoryStore(str(tmp_path / "nested.zarr"))
    z1 = cs.open_array(nested, mode="w", shape=vol.shape, chunks=(1, 32, 32), dtype=vol.dtype,
                       order=order)
    z1[...] = vol
    lower = DirectoryStore(str(tmp_path / "lower.zarr"), normalize_keys=True)
    z2 = cs.open_array(lower, mode="w", shape=vol.shape, chunks=(2, 32, 32), dtype=vol.dtype,
                       order=order)
    z2[...] = vol
    counter = _Counter(monkeypatch)
    for z in (z1, z2):
        for sel in SELECTIONS:
            got = z[sel]
            np.testing.assert_array_equal(got, vol[sel])
        out = np.empty((60, 95), dtype=vol.dtype)
        z.get_basic_selection((1, slice(10, 70), slice(5, 100)), out=out)
        np.testing.assert_array_equal(out, vol[1, 10:70, 5:100])
    assert counter.chunk_reads() == []


def test_a_chunk_rewritten_between_reads_is_read_anew(tmp_path):
    # no cache of file contents: the next read sees the replaced chunk
    vol = _vol()
    r, path = _make(tmp_path, "blosc", vol)
    np.testing.assert_array_equal(r[0], vol[0])
    cs.open_array(path, mode="r+")[0, :32, :32] = -1
    want = vol[0].copy()
    want[:32, :32] = -1
    np.testing.assert_array_equal(r[0], want)


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("points", [False, True])
def test_a_shard_rewritten_under_a_cached_index_reads_the_new_data(tmp_path, points,
                                                                   compressed):
    # Stale ranges that still lie inside the rewritten shard must not be read as chunks
    # (uncompressed ones decode from any bytes of the right length; compressed ones fail to
    # decode). A range past its end makes the store re-read the index, as before the file
    # kernels; the whole batch is then read with the new one.
    path = str(tmp_path / "s.zarr")
    vol = np.arange(64 * 64, dtype=np.int32).reshape(64, 64) + 1
    z = cs.create_array(path, shape=(64, 64), chunks=(16, 16), shards=(64, 64),
                        dtype=np.int32, zarr_format=3, fill_value=0,
                        compressors="auto" if compressed else None)
    z[...] = vol
    r = cs.open_array(path, mode="r")
    np.testing.assert_array_equal(r[...], vol)          # caches the shard's index
    vol2 = vol * 10
    vol2[:16] = 0                                       # a row of empty inner chunks: the
    cs.open_array(path, mode="r+")[...] = vol2          # others move to lower offsets
    if points:
        ii, jj = np.nonzero(np.ones((64, 64), dtype=bool))
        np.testing.assert_array_equal(r.vindex[ii, jj], vol2[ii, jj])
    else:
        np.testing.assert_array_equal(r[...], vol2)


def test_a_store_subclass_with_its_own_reads_is_not_bypassed(tmp_path):
    # Its own range reads cannot promise that a shard's index and chunks come from one
    # version of the shard, so shards are read whole, through its own reads.
    vol = _vol()
    _, path = _make(tmp_path, "sharded", vol)
    seen = []

    class Logging(DirectoryStore):
        def get_partial(self, key, ranges):
            ranges = list(ranges)
            seen.append((key, ranges))
            return super().get_partial(key, ranges)

        def __getitem__(self, key):
            seen.append((key, None))
            return super().__getitem__(key)

        def getitems(self, keys):
            return {k: self[k] for k in keys if k in self}

    store = Logging(path)
    assert store.open_version is None
    z = cs.open_array(store, mode="r")
    assert z._engine._files(z._engine.codec.fast) is None
    np.testing.assert_array_equal(z[1, :64, :64], vol[1, :64, :64])
    assert any(rg is None and "/c/" in "/" + k for k, rg in seen)   # whole shards


@pytest.mark.parametrize("kind", ["blosc", "sharded"])
@pytest.mark.parametrize("how", ["getitem", "store"])
def test_a_fifo_where_a_chunk_should_be_raises_instead_of_blocking(tmp_path, kind, how):
    import threading
    vol = _vol()
    z, path = _make(tmp_path, kind, vol)
    key = "1.1.1" if kind == "blosc" else "c/1/0/0"
    f = _chunk_file(path, kind, key)
    os.remove(f)
    os.mkfifo(f)
    result = {}

    def read():
        try:
            if how == "getitem":
                z[1]
            else:
                DirectoryStore(path)[key]
        except BaseException as e:  # noqa: BLE001 - reported below
            result["error"] = e
    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "the read blocked on the FIFO"
    assert isinstance(result.get("error"), OSError)
    assert os.path.basename(f) in str(result["error"])


_STRACE = shutil.which("strace")


@pytest.mark.skipif(_STRACE is None, reason="needs strace to count open(2) calls")
def test_a_batch_opens_each_shard_file_once(tmp_path):
    # A shard's inner chunks come in a row in a batch: the kernel reads them all through one
    # descriptor (an open(2) per chunk was most of a small sharded read's system time). The
    # second read below has every index cached, so its only opens are the kernel's.
    path = str(tmp_path / "s.zarr")
    vol = np.arange(4 * 64 * 64, dtype=np.int32).reshape(4, 64, 64)
    z = cs.create_array(path, shape=vol.shape, chunks=(1, 16, 16), shards=(1, 64, 64),
                        dtype=np.int32, zarr_format=3)
    z[...] = vol
    script = textwrap.dedent(f"""
        import os, numpy as np, chunkstore as cs
        from chunkstore.storage import directory
        directory.SETTLE_NS = 0  # (the files were just written: kept indexes all the same)
        cs.config.set(threads=1)
        r = cs.open_array({path!r}, mode="r")
        want = np.arange(4 * 64 * 64, dtype=np.int32).reshape(4, 64, 64)
        assert (r[...] == want).all()                   # caches the four indexes
        try:
            os.open("/nonexistent-MARK", os.O_RDONLY)
        except OSError:
            pass
        assert (r[:, 8:40, 8:40] == want[:, 8:40, 8:40]).all()  # 9 inner chunks a shard
    """)
    log = tmp_path / "trace"
    subprocess.run([_STRACE, "-f", "-e", "trace=open,openat", "-o", str(log),
                    sys.executable, "-c", script], check=True)
    after = log.read_text().split("/nonexistent-MARK", 1)[1]
    opened = re.findall(r'open(?:at)?\([^"]*"([^"]+/c/[^"]+)"', after)
    assert sorted(opened) == sorted(f"{path}/c/{k}/0/0" for k in range(4))


def test_a_batch_alternating_between_shard_files_reads_each_chunk_from_its_own(tmp_path):
    # vindex points alternate between two shards: the kept descriptor is let go and the
    # other file opened at every change, never a range read from the wrong shard.
    path = str(tmp_path / "s.zarr")
    vol = np.arange(2 * 32 * 32, dtype=np.int32).reshape(2, 32, 32) + 1
    z = cs.create_array(path, shape=vol.shape, chunks=(1, 8, 8), shards=(1, 32, 32),
                        dtype=np.int32, zarr_format=3)
    z[...] = vol
    r = cs.open_array(path, mode="r")
    r[...]                                                      # caches the indexes
    k = np.tile([0, 1], 16)
    y = np.repeat(np.arange(0, 32, 2), 2)
    x = (y * 7) % 32
    np.testing.assert_array_equal(r.vindex[k, y, x], vol[k, y, x])
