"""Hostile input and faults (issue 16): never wrong data, never a crash, nothing lost."""

from __future__ import annotations

import errno

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ChunkstoreError
from chunkstore.storage.memory import MemoryStore
from faults import FaultyStore, is_chunk


def _array(shape=(10, 12), chunks=(3, 4), store=None, **kw):
    z = cs.zeros(shape, chunks=chunks, dtype="i4", store=store if store is not None
                 else MemoryStore(), **kw)
    z[:] = np.arange(np.prod(shape)).reshape(shape)
    return z


# ---------------------------------------------------------------- 2. float indices
@pytest.mark.parametrize("sel", [1.5, 1.0, np.float64(2), (1.5, slice(0, 2)),
                                 (slice(None), 2.0), np.array(1.5), [1.0, 2.0],
                                 (Ellipsis, np.float32(1))])
def test_float_index_refused_like_numpy(sel):
    z = _array()
    with pytest.raises(IndexError):
        np.zeros((10, 12))[sel]  # the oracle
    with pytest.raises(IndexError, match="dimension"):
        z[sel]
    before = z[:]
    with pytest.raises(IndexError):
        z[sel] = 7
    np.testing.assert_array_equal(z[:], before)


def test_float_index_refused_in_oindex_and_vindex():
    z = _array()
    with pytest.raises(IndexError):
        z.oindex[1.5]
    with pytest.raises(IndexError):
        z.vindex[[1.5], [0]]
    with pytest.raises(IndexError):
        z.blocks[1.0]


def test_empty_list_index_still_works():
    z = _array()
    assert z[[]].shape == np.zeros((10, 12))[[]].shape


# ---------------------------------------------------------------- 3. non-integer resize
@pytest.mark.parametrize("bad", [5.5, np.float64(3.0), "5", 5.0, None])
def test_resize_non_integer_refused_before_anything_changes(bad):
    z = _array()
    before = z[:]
    keys = sorted(z.store)
    with pytest.raises(TypeError, match="integers"):
        z.resize(bad, 12)
    assert z.shape == (10, 12)
    assert sorted(z.store) == keys
    np.testing.assert_array_equal(z[:], before)


def test_resize_numpy_integers_accepted():
    z = _array()
    z.resize(np.int64(4), np.int32(12))
    assert z.shape == (4, 12)


# ---------------------------------------------------------------- 11. failed append rolls back
@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("fault", ["disk_full", "eio"])
def test_failed_append_rolls_back_to_old_shape(zarr_format, fault):
    store = FaultyStore(MemoryStore())
    z = _array(store=store, zarr_format=zarr_format, compressor=None)
    before = z[:]
    before_chunks = {k: store.inner[k] for k in store.inner if is_chunk(k)}
    # the append touches 4 row-chunks x 3 column-chunks: let a few land, then fail
    if fault == "disk_full":
        store.capacity = store.used() + 5 * 3 * 4 * 4
        err = errno.ENOSPC
    else:
        store.fail_write(is_chunk, errno.EIO, after=4, times=1)
        err = errno.EIO
    with pytest.raises(OSError) as info:
        z.append(np.ones((9, 12), dtype="i4"))
    assert info.value.errno == err
    store.capacity = None
    assert z.shape == (10, 12)
    z2 = cs.open_array(store.inner, mode="r")
    assert z2.shape == (10, 12)
    np.testing.assert_array_equal(z2[:], before)
    assert {k: store.inner[k] for k in store.inner if is_chunk(k)} == before_chunks
    # growing again shows the fill value, not the half-written append
    z.resize(19, 12)
    np.testing.assert_array_equal(z[10:], 0)
    np.testing.assert_array_equal(z[:10], before)
    # and a retried append lands whole
    z.resize(10, 12)
    z.append(np.full((9, 12), 5, dtype="i4"))
    np.testing.assert_array_equal(z[10:], 5)


# ---------------------------------------------------------------- 1. truncated Blosc frames
def _blosc_cases():
    import numcodecs
    yield "delta", dict(dtype="i4", filters=[numcodecs.Delta("i4")],
                        compressor=numcodecs.Blosc(cname="lz4", shuffle=0)), np.arange(40) * 3
    yield "vlen-utf8", dict(dtype=object, object_codec=numcodecs.VLenUTF8(),
                            compressor=numcodecs.Blosc()), \
        np.array([f"string number {i}" for i in range(40)], dtype=object)
    yield "vlen-bytes", dict(dtype=object, object_codec=numcodecs.VLenBytes(),
                             compressor=numcodecs.Blosc(cname="blosclz")), \
        np.array([b"bytes %d" % i for i in range(40)], dtype=object)
    yield "plain", dict(dtype="i4", compressor=numcodecs.Blosc(cname="lz4", shuffle=0)), \
        np.arange(40)
    yield "v3-string", dict(dtype=str, zarr_format=3,
                            compressors=[numcodecs.Blosc(cname="lz4", shuffle=0)]), \
        np.array([f"s{i}" for i in range(40)])
    yield "v3-int", dict(dtype="i4", zarr_format=3,
                         compressors=[numcodecs.Blosc(cname="blosclz", shuffle=0)]), \
        np.arange(40)


@pytest.mark.parametrize("cut", [1, 2, 4, 8, -1, -4])
@pytest.mark.parametrize("case", list(_blosc_cases()), ids=lambda c: c[0])
def test_truncated_or_padded_blosc_frame_raises_naming_the_key(tmp_path, case, cut):
    name, kw, values = case
    path = str(tmp_path / "a.zarr")
    if kw.get("zarr_format") == 3:
        z = cs.create_array(path, shape=values.shape, chunks=(40,), **{
            k: v for k, v in kw.items() if k != "zarr_format"})
    else:
        z = cs.open(path, mode="w", shape=values.shape, chunks=(40,), **kw)
    z[:] = values
    key = "c/0" if kw.get("zarr_format") == 3 else "0"
    f = tmp_path / "a.zarr" / key
    raw = f.read_bytes()
    f.write_bytes(raw[:-cut] if cut > 0 else raw + b"\0" * -cut)
    z = cs.open(path, mode="r")
    with pytest.raises(cs.errors.ChunkDecodeError, match=repr(key)):
        z[:]
    for i in (0, 39):
        with pytest.raises(cs.errors.ChunkDecodeError):
            z[i]
    from chunkstore.cli import main
    assert main(["verify", path]) != 0
