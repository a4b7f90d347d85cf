"""Creation as zarr-python 2 users spell it: no-compressor spellings, h5py's keywords,
chunks taken from the input, open_like, TempStore."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import warnings

import h5py
import numcodecs
import numpy as np
import pytest

import chunkstore as cs


@pytest.mark.parametrize("spelling", [None, False, "", "none", "None", "NONE"])
def test_no_compressor_spellings(spelling):
    s = cs.MemoryStore()
    z = cs.zeros(4, compressor=spelling, store=s)
    assert z.compressor is None
    assert json.loads(s[".zarray"])["compressor"] is None
    z[:] = 3
    assert s["0"] == np.full(4, 3, "f8").tobytes()  # stored raw


def test_no_compressor_spelling_in_v3():
    s = cs.MemoryStore()
    z = cs.zeros(4, compressor="none", store=s, zarr_format=3)
    assert [c["name"] for c in json.loads(s["zarr.json"])["codecs"]] == ["bytes"]
    z[:] = 1
    assert z[:].tolist() == [1] * 4


@pytest.mark.parametrize("compression, opts, expected", [
    ("gzip", 1, numcodecs.GZip(level=1)),
    ("gzip", None, numcodecs.GZip()),
    ("zstd", {"level": 7}, numcodecs.Zstd(level=7)),
    ("blosc", ("zstd", 3), numcodecs.Blosc(cname="zstd", clevel=3)),
    (numcodecs.Zlib(level=2), None, numcodecs.Zlib(level=2)),
    (None, None, None),
    ("none", None, None),
])
def test_h5py_compression_keywords(compression, opts, expected):
    z = cs.zeros(10, chunks=5, compression=compression, compression_opts=opts)
    assert z.compressor == expected
    z[:] = np.arange(10)
    np.testing.assert_array_equal(z[:], np.arange(10))


def test_h5py_compression_default_is_the_default_compressor():
    assert cs.zeros(3, compression="default").compressor == cs.zeros(3).compressor


def test_explicit_compressor_overrides_compression_with_a_warning():
    with pytest.warns(UserWarning, match="overridden"):
        z = cs.zeros(3, compressor=numcodecs.Zlib(), compression="gzip", compression_opts=9)
    assert z.compressor == numcodecs.Zlib()


def test_h5py_keywords_through_open_array_and_group(tmp_path):
    z = cs.open_array(str(tmp_path / "a.zarr"), mode="w", shape=4, compression="gzip",
                      compression_opts=4, fillvalue=7)
    assert z.compressor == numcodecs.GZip(4) and z[:].tolist() == [7] * 4
    g = cs.group(str(tmp_path / "g.zarr"))
    d = g.create_dataset("d", shape=3, dtype="i4", fillvalue=-1, compression="zstd")
    assert d.fill_value == -1 and d.compressor.codec_id == "zstd"


def test_fillvalue_keyword():
    z = cs.create(3, dtype="i4", fillvalue=5)
    assert z.fill_value == 5 and z[:].tolist() == [5, 5, 5]


def test_typo_keywords_are_still_refused():
    with pytest.raises(TypeError, match="compresion"):
        cs.zeros(3, compresion="gzip")


@pytest.fixture
def h5_dataset(tmp_path):
    f = h5py.File(tmp_path / "d.h5", "w")
    ds = f.create_dataset("x", data=np.arange(60, dtype="i2").reshape(6, 10), chunks=(3, 4))
    yield ds
    f.close()


def test_array_takes_chunks_of_an_h5py_dataset(h5_dataset):
    z = cs.array(h5_dataset)
    assert z.chunks == (3, 4) and z.dtype == np.dtype("i2")
    np.testing.assert_array_equal(z[:], h5_dataset[:])
    assert cs.array(h5_dataset, chunks=(2, 2)).chunks == (2, 2)  # explicit chunks win


@pytest.mark.parametrize("fn", ["zeros_like", "ones_like", "empty_like"])
def test_like_functions_take_chunks_of_an_h5py_dataset(h5_dataset, fn):
    z = getattr(cs, fn)(h5_dataset)
    assert z.shape == (6, 10) and z.chunks == (3, 4) and z.dtype == np.dtype("i2")


class _Chunklen:
    """A bcolz-carray-like input: chunk length along the first dimension."""
    shape = (10, 3)
    dtype = np.dtype("f4")
    chunklen = 4

    def __array__(self, dtype=None, copy=None):
        return np.ones(self.shape, dtype or self.dtype)


def test_array_takes_chunklen():
    z = cs.array(_Chunklen())
    assert z.chunks == (4, 3)
    assert z[:].sum() == 30


def test_dask_style_chunks_are_not_taken():
    # dask's .chunks is a tuple of tuples: not a chunk shape.
    class Dask:
        shape, dtype, chunks = (4,), np.dtype("i4"), ((2, 2),)

        def __array__(self, dtype=None, copy=None):
            return np.arange(4, dtype="i4")

    z = cs.array(Dask())
    assert z[:].tolist() == [0, 1, 2, 3]


def test_open_like(tmp_path):
    a = cs.full((20, 6), 9, chunks=(5, 3), dtype="u2", compressor=numcodecs.Zstd(2))
    b = cs.open_like(a, str(tmp_path / "b.zarr"))
    assert (b.shape, b.chunks, b.dtype, b.compressor, b.fill_value) == \
        ((20, 6), (5, 3), np.dtype("u2"), numcodecs.Zstd(2), 9)
    assert b[0, 0] == 9
    c = cs.open_like(np.zeros((3, 3), "i1"), str(tmp_path / "c.zarr"), chunks=2)
    assert (c.shape, c.chunks, c.dtype) == ((3, 3), (2, 2), np.dtype("i1"))
    # open_array's modes: an existing array is opened, not replaced.
    c[:] = 1
    assert cs.open_like(np.zeros((3, 3), "i1"), str(tmp_path / "c.zarr"))[0, 0] == 1


def test_temp_store(tmp_path):
    s = cs.TempStore(prefix="cs-test-", suffix=".zarr", dir=str(tmp_path))
    assert os.path.isdir(s.path) and os.path.basename(s.path).startswith("cs-test-")
    z = cs.zeros(5, chunks=2, store=s)
    z[:] = 2
    assert sorted(os.listdir(s.path)) == [".zarray", "0", "1", "2"]
    s2 = pickle.loads(pickle.dumps(s))
    assert s2.path == s.path and cs.open_array(s2, mode="r")[:].tolist() == [2] * 5


def test_temp_store_is_removed_at_exit():
    code = ("import chunkstore as cs; s = cs.TempStore(); cs.zeros(3, store=s)[:] = 1; "
            "print(s.path)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout.strip()
    assert out and not os.path.exists(out)


def test_no_warning_for_plain_creation():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cs.zeros(3, compressor=None)


def test_copies_between_h5py_and_chunkstore_keep_empty_arrays_and_utf8_strings(tmp_path):
    """An array with an empty dimension copies into an HDF5 file (chunks of 1 were asked
    for, larger than the data: h5py refused), and an HDF5 dataset of UTF-8 strings copies
    in as strings (h5py hands them out as bytes: they came in as bytes, a str array's round
    trip through HDF5 came back as bytes); ASCII ones, which may hold any bytes, stay bytes."""
    h5py = pytest.importorskip("h5py")
    empty = cs.create(shape=(0, 3), chunks=(4, 3), dtype="u1", store={})
    with h5py.File(tmp_path / "a.h5", "w") as f:
        cs.copy(empty, f, name="e")
        assert f["e"].shape == (0, 3)
        f.create_dataset("s", data=np.array(["x", "héllo"], dtype=object),
                         dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("b", data=np.array([b"\xff", b"y"], dtype=object),
                         dtype=h5py.string_dtype("ascii"))
    with h5py.File(tmp_path / "a.h5", "r") as f:
        g = cs.group({})
        cs.copy(f["s"], g, name="s")
        cs.copy(f["b"], g, name="b")
    assert g["s"][...].tolist() == ["x", "héllo"]
    assert g["b"][...].tolist() == [b"\xff", b"y"]
