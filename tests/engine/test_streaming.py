"""Array-to-array assignment (chunkstore.engine.streaming): ``out[box] = z`` with z an Array copies
block by block, with the result NumPy gives and in bounded memory (measured with
tracemalloc, which sees NumPy's buffers)."""

from __future__ import annotations

import tracemalloc

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.engine import streaming


def _src(shape=(40, 30, 20), chunks=(7, 8, 9), dtype="<i4", **kw):
    z = cs.create(shape, chunks=chunks, dtype=dtype, store=cs.MemoryStore(), fill_value=0,
                  compressor=numcodecs.Zstd(level=1), **kw)
    data = np.arange(np.prod(shape), dtype=dtype).reshape(shape)
    z[...] = data
    return z, data


@pytest.mark.parametrize("budget", [1, 500, 10**9])
@pytest.mark.parametrize("out_shape,sel", [
    ((40, 30, 20), Ellipsis), ((40, 30, 20), (slice(None),)),
    ((45, 30, 25), (slice(3, 43), slice(None), slice(5, 25))),
    ((45, 30, 25), (slice(0, 40), Ellipsis, slice(0, 20))),
    ((45, 31, 25), (slice(-40, None), slice(1, 40), slice(-20, None)))])
def test_assign_matches_numpy(monkeypatch, out_shape, sel, budget, layout):
    monkeypatch.setattr(streaming, "BLOCK_BYTES_PER_THREAD", budget)
    z, data = _src()
    out = layout(out_shape, (6, 5, 10), dtype="<i8", store=cs.MemoryStore(), fill_value=-1)
    expected = np.full(out.shape, -1, dtype="<i8")
    expected[sel] = data
    out[sel] = z
    np.testing.assert_array_equal(out[...], expected)


def test_other_selections_and_shapes_take_the_ordinary_path():
    z, data = _src(shape=(10, 6), chunks=(3, 4))
    out = cs.zeros((10, 6), chunks=(5, 5), dtype="<i4")
    out[::-1] = z                      # not a step-1 box: read whole, then written
    np.testing.assert_array_equal(out[...], data[::-1])
    out2 = cs.zeros((3, 10, 6), chunks=(1, 5, 5), dtype="<i4")
    out2[...] = z                      # broadcast
    np.testing.assert_array_equal(out2[...], np.broadcast_to(data, (3, 10, 6)))
    with pytest.raises(ValueError, match="broadcast"):
        out[0:5] = z
    out.set_basic_selection(Ellipsis, z)
    np.testing.assert_array_equal(out[...], data)


def test_sharded_destination_and_read_only():
    z, data = _src(shape=(32, 24), chunks=(5, 7))
    out = cs.create_array(cs.MemoryStore(), shape=(32, 24), chunks=(4, 4), shards=(8, 12),
                          dtype="<i4", fill_value=0)
    out[...] = z
    np.testing.assert_array_equal(out[...], data)
    ro = cs.Array(out.store, read_only=True)
    with pytest.raises(cs.ReadOnlyError):
        ro[...] = z


def test_round_trip_memory_is_bounded(monkeypatch):
    """out[:] = z holds about one block, not the whole 8 MiB source."""
    cs.config.set(threads=1)
    try:
        monkeypatch.setattr(streaming, "BLOCK_BYTES_PER_THREAD", 2**18)
        shape, chunks = (128, 128, 64), (32, 32, 32)
        z = cs.create(shape, chunks=chunks, dtype="<u8", store=cs.MemoryStore(),
                      compressor=numcodecs.Zstd(level=1), fill_value=0)
        z[...] = np.arange(np.prod(shape), dtype="<u8").reshape(shape)
        out = cs.create(shape, chunks=chunks, dtype="<u8", store=cs.MemoryStore(),
                        compressor=numcodecs.Zstd(level=1), fill_value=0)
        whole = np.prod(shape) * 8
        chunk = np.prod(chunks) * 8
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        out[...] = z
        peak = tracemalloc.get_traced_memory()[1] - base
        stored = sum(len(v) for v in out.store.values())
        tracemalloc.stop()
        # the stored (compressed) output itself is kept by the store; beyond it, at most
        # two chunk batches (here a batch is one 256 KiB chunk) plus small overheads
        assert peak - stored <= 2 * max(chunk, streaming.BLOCK_BYTES_PER_THREAD) + 2**18, (
            peak, stored, whole)
        assert peak < whole / 4
        np.testing.assert_array_equal(out[60:70, 100:110, 3:60], z[60:70, 100:110, 3:60])
    finally:
        cs.config.set(threads=None)


def test_view_of_the_destination_as_source_reads_it_first(monkeypatch):
    # z[10:] = z.view(shape=(90,)): the source reads the chunks the write stores. Block by
    # block, later blocks would read values an earlier block already overwrote.
    monkeypatch.setattr(streaming, "BLOCK_BYTES_PER_THREAD", 1)
    z = cs.create((100,), chunks=(10,), dtype="i4", store=cs.MemoryStore(), fill_value=-1)
    z[...] = np.arange(100, dtype="i4")
    z[10:] = z.view(shape=(90,))
    expected = np.arange(100, dtype="i4")
    expected[10:] = np.arange(90, dtype="i4")
    np.testing.assert_array_equal(z[...], expected)


@pytest.mark.parametrize("how", ["same handle", "reopened", "parent store and path", "cache"])
def test_a_view_of_the_same_chunks_through_another_store_object_is_read_whole(
        monkeypatch, tmp_path, how):
    """z[k:] = a view of z's own chunks opened through another store object (a parent's
    store and a path, an LRUStoreCache): streamed block by block, later blocks read values
    already overwritten ([0 1 2 3 0 1 2 3 0 1 2 3 8 9 ...])."""
    monkeypatch.setattr(streaming, "BLOCK_BYTES_PER_THREAD", 16)
    n, k = 40, 4
    z = cs.open_array(str(tmp_path / "a"), mode="w", shape=(n,), chunks=(4,), dtype="i4",
                      compressor=None)
    z[...] = np.arange(n)
    src = {"same handle": lambda: z,
           "reopened": lambda: cs.open_array(str(tmp_path / "a"), mode="r"),
           "parent store and path": lambda: cs.open_array(cs.DirectoryStore(str(tmp_path)),
                                                          path="a", mode="r"),
           "cache": lambda: cs.open_array(cs.LRUStoreCache(cs.DirectoryStore(
               str(tmp_path / "a")), max_size=2**20), mode="r")}[how]()
    z[k:] = src.view(shape=(n - k,))
    np.testing.assert_array_equal(z[...], np.r_[np.arange(k), np.arange(n - k)])


def test_a_copy_whose_values_may_not_convert_stores_nothing_when_one_does_not(monkeypatch):
    """z[...] = src (strings into ints) streamed block by block converted each block as it
    went: the last one's 'x' raised after the blocks before it were stored (the README: a
    write whose value cannot be converted fails before any chunk is touched)."""
    monkeypatch.setattr(streaming, "BLOCK_BYTES_PER_THREAD", 64)
    vals = np.full(400, "7", dtype="U1")
    vals[-1] = "x"
    src = cs.array(vals, chunks=16, store={})
    z = cs.full(400, 5, chunks=16, dtype="i4", store={})
    with pytest.raises(ValueError):
        z[...] = src
    np.testing.assert_array_equal(z[...], np.full(400, 5))
