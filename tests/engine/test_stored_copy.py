"""Array-to-array copies that move stored chunks as they are (chunkstore.engine.streaming):
where source and destination store chunks alike, ``dst[box] = src`` copies the source's chunk
bytes instead of decoding and encoding them, and otherwise takes the ordinary path. Either
way the result is what NumPy gives; a chunk that does not decode raises naming its key; what
a destination keeps (no all-fill chunks, fill value past its end) is as if written anew."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore.engine import streaming


def _v2(shape, chunks, level=1, fill=0, dtype="<i4", **kw):
    return cs.create(shape, chunks=chunks, dtype=dtype, store=cs.MemoryStore(),
                     fill_value=fill, compressor=numcodecs.Zstd(level=level), **kw)


def _v3(shape, chunks, shards=None, level=5, fill=0, dtype="<i4", **kw):
    return cs.create_array(cs.MemoryStore(), shape=shape, chunks=chunks, shards=shards,
                           dtype=dtype, fill_value=fill, zarr_format=3,
                           compressors=[cs.codecs.ZstdCodec(level=level)], **kw)


def _inner_bytes(a, coords):
    """The stored bytes of a's (inner) chunk at coords."""
    key = a._engine._chunk_keys(np.array([coords]))[0]
    return bytes(a._engine.chunk_store[key])


def _stored(a, coords):
    key = a._engine._chunk_keys(np.array([coords]))[0]
    return key in a._engine.chunk_store


def test_v2_zstd_into_sharded_v3_moves_the_bytes():
    data = np.arange(30 * 22, dtype="<i4").reshape(30, 22)
    src = _v2((30, 22), (8, 8), level=1)
    src[...] = data
    dst = _v3((30, 22), (8, 8), shards=(16, 16), level=9)
    dst[...] = src
    np.testing.assert_array_equal(dst[...], data)
    # the level-1 frames are stored (a re-encode would have written level 9)
    for coords in [(0, 0), (1, 2), (3, 2)]:
        assert _inner_bytes(dst, coords) == _inner_bytes(src, coords)
    zarr = pytest.importorskip("zarr")
    stored = {k: zarr.core.buffer.cpu.Buffer.from_bytes(bytes(v)) for k, v in dst.store.items()}
    np.testing.assert_array_equal(
        zarr.open_array(zarr.storage.MemoryStore(stored), mode="r")[...], data)


def test_from_array_and_copy_move_the_bytes(tmp_path):
    data = np.random.default_rng(1).integers(0, 1000, (40, 33)).astype("<i4")
    src = cs.create_array(str(tmp_path / "src.zarr"), shape=data.shape, chunks=(16, 16),
                          dtype="<i4", zarr_format=2, compressors=numcodecs.Zstd(level=2))
    src[...] = data
    dst = cs.from_array(str(tmp_path / "dst.zarr"), data=src, chunks=(16, 16),
                        shards=(32, 32), compressors=[cs.codecs.ZstdCodec(level=0)],
                        zarr_format=3)
    np.testing.assert_array_equal(dst[...], data)
    assert _inner_bytes(dst, (2, 2)) == _inner_bytes(src, (2, 2))


@pytest.mark.parametrize("case", ["other family", "other dtype", "other chunks",
                                  "off the grid", "filters"])
def test_unlike_storage_takes_the_ordinary_path(case):
    data = np.arange(24 * 24, dtype="<i4").reshape(24, 24)
    src = _v2((24, 24), (8, 8), level=1)
    src[...] = data
    box = (slice(None),)
    if case == "other family":
        dst = cs.create_array(cs.MemoryStore(), shape=(24, 24), chunks=(8, 8), dtype="<i4",
                              compressors=[cs.codecs.BloscCodec()], zarr_format=3)
    elif case == "other dtype":
        dst = _v2((24, 24), (8, 8), dtype=">i4")
    elif case == "other chunks":
        dst = _v2((24, 24), (8, 12))
    elif case == "off the grid":
        dst = _v2((28, 24), (8, 8), level=1)
        box = (slice(4, 28),)
    else:
        dst = cs.create((24, 24), chunks=(8, 8), dtype="<i4", store=cs.MemoryStore(),
                        compressor=numcodecs.Zstd(level=1), filters=[numcodecs.Delta("<i4")])
    assert not streaming._stored_alike(dst, [(s.start or 0, s.stop or n) for s, n in
                                             zip(box + (slice(None),), dst.shape)], src)
    dst[box] = src
    expected = np.zeros(dst.shape, dtype=dst.dtype)
    expected[box] = data
    np.testing.assert_array_equal(dst[...], expected)


def test_missing_source_chunks_clear_the_destination():
    src = _v2((16, 16), (8, 8), fill=7)
    src[0:8, 0:8] = 1                      # the other three chunks are missing: fill 7
    dst = _v3((16, 16), (8, 8), fill=7)
    dst[...] = 3                           # every chunk stored
    dst[...] = src
    expected = np.full((16, 16), 7, dtype="<i4")
    expected[0:8, 0:8] = 1
    np.testing.assert_array_equal(dst[...], expected)
    assert dst.nchunks_initialized == 1


def test_all_fill_chunks_are_not_stored_unless_asked():
    src = _v2((16, 8), (8, 8), write_empty_chunks=True)
    src[...] = 0                           # two chunks stored, both all fill
    src[8:16] = 5
    assert src.nchunks_initialized == 2
    dst = _v3((16, 8), (8, 8))
    dst[...] = src
    np.testing.assert_array_equal(dst[...], src[...])
    assert not _stored(dst, (0, 0)) and _stored(dst, (1, 0))
    keep = _v3((16, 8), (8, 8), config={"write_empty_chunks": True})
    keep[...] = src
    assert _stored(keep, (0, 0)) and _inner_bytes(keep, (0, 0)) == _inner_bytes(src, (0, 0))


def test_padding_past_the_end_is_the_destinations_fill():
    # a source edge chunk holding old values past the array's end (as zarr-python leaves
    # them after shrinking an array): copied as stored they would show once dst grows
    store = cs.MemoryStore()
    src = cs.create((10,), chunks=(4,), dtype="<i4", store=store, fill_value=0,
                    compressor=numcodecs.Zstd(level=1))
    src[...] = np.arange(10, dtype="<i4") + 1
    store["2"] = numcodecs.Zstd(level=1).encode(np.array([9, 10, 99, 99], dtype="<i4"))
    dst = _v2((10,), (4,), level=1)
    dst[...] = src
    np.testing.assert_array_equal(dst[...], np.arange(10) + 1)
    dst.resize(12)
    np.testing.assert_array_equal(dst[...], np.r_[np.arange(10) + 1, 0, 0])
    # a clean edge chunk (fill past the end) is copied as stored
    clean = _v2((10,), (4,), level=1)
    clean[...] = np.arange(10, dtype="<i4") + 1
    dst2 = _v2((10,), (4,), level=9)
    dst2[...] = clean
    assert _inner_bytes(dst2, (2,)) == _inner_bytes(clean, (2,))


def test_a_corrupt_source_chunk_is_named_and_nothing_of_its_block_is_written():
    src = _v2((16, 16), (8, 8))
    src[...] = 1
    src.store["1.0"] = b"not a zstd frame at all"
    dst = _v3((16, 16), (8, 8))
    dst[...] = 4
    before = dict(dst.store)
    with pytest.raises(cs.ChunkDecodeError, match="1.0"):
        dst[...] = src
    assert dict(dst.store) == before


def test_synchronized_destination():
    data = np.arange(64 * 64, dtype="<i4").reshape(64, 64)
    src = _v2((64, 64), (16, 16))
    src[...] = data
    dst = cs.create_array(cs.MemoryStore(), shape=(64, 64), chunks=(16, 16), dtype="<i4",
                          compressors=[cs.codecs.ZstdCodec(level=3)], zarr_format=3,
                          synchronizer=cs.ThreadSynchronizer())
    dst[...] = src
    np.testing.assert_array_equal(dst[...], data)
    assert _inner_bytes(dst, (3, 3)) == _inner_bytes(src, (3, 3))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_copies_match_numpy(data):
    """Any combination of layouts, offsets, sparsity, fill values and empty-chunk policies:
    the destination holds what NumPy's assignment gives, and keeps no all-fill chunk unless
    asked to."""
    d = data.draw
    ndim = d(st.integers(1, 3))
    chunks = tuple(d(st.integers(1, 5)) for _ in range(ndim))
    shape = tuple(d(st.integers(1, 12)) for _ in range(ndim))
    offset = tuple(d(st.integers(0, 2)) * c if d(st.booleans()) else d(st.integers(0, 3))
                   for c in chunks)
    extra = tuple(d(st.integers(0, 4)) for _ in range(ndim))
    dshape = tuple(o + n + e for o, n, e in zip(offset, shape, extra))
    sfill, dfill = d(st.integers(0, 2)), d(st.integers(0, 2))
    values = np.asarray(d(st.lists(st.integers(0, 9), min_size=int(np.prod(shape)),
                                   max_size=int(np.prod(shape)))), dtype="<i4").reshape(shape)
    src = _v2(shape, chunks, fill=sfill, write_empty_chunks=d(st.booleans()))
    src[...] = values
    for coords in d(st.lists(st.tuples(*[st.integers(0, -(-n // c) - 1)
                                         for n, c in zip(shape, chunks)]), max_size=3)):
        key = ".".join(map(str, coords))   # drop some chunks: they read as sfill
        src.store.pop(key, None)
        values[tuple(slice(i * c, (i + 1) * c) for i, c in zip(coords, chunks))] = sfill
    empty = d(st.booleans())
    sharded = d(st.booleans())
    shards = tuple(c * d(st.integers(1, 2)) for c in chunks) if sharded else None
    dst = _v3(dshape, chunks, shards=shards, fill=dfill,
              config={"write_empty_chunks": empty})
    old = np.asarray(d(st.lists(st.integers(0, 2), min_size=int(np.prod(dshape)),
                                max_size=int(np.prod(dshape)))), dtype="<i4").reshape(dshape)
    dst[...] = old
    box = tuple(slice(o, o + n) for o, n in zip(offset, shape))
    dst[box] = src
    expected = old.copy()
    expected[box] = values
    np.testing.assert_array_equal(dst[...], expected)
    if not empty:
        for coords in np.ndindex(*[-(-n // c) for n, c in zip(dshape, chunks)]):
            if _stored(dst, coords):
                block = expected[tuple(slice(i * c, (i + 1) * c)
                                       for i, c in zip(coords, chunks))]
                assert not (block == dfill).all() or block.size == 0, coords


def test_sharded_source_into_v2_moves_the_inner_chunks():
    data = np.arange(20 * 20, dtype="<i4").reshape(20, 20)
    src = _v3((20, 20), (5, 5), shards=(10, 10), level=1)
    src[...] = data
    dst = _v2((20, 20), (5, 5), level=5)
    dst[...] = src
    np.testing.assert_array_equal(dst[...], data)
    assert _inner_bytes(dst, (1, 3)) == _inner_bytes(src, (1, 3))
