"""The zarr-python-2-style API: creation and convenience functions, open modes, stores,
every Array attribute, selections (with out= and fields=), resize/append, save/load.

A test taking the `layout` fixture (conftest.py) runs for Zarr v2, Zarr v3 and sharded Zarr v3
alike; the others test what only Zarr v2 (cs.create's default) has."""

from __future__ import annotations

import json
import math
import time

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from conftest import chunk_files, snapshot_dir

SHAPE = (10, 12)
CHUNKS = (3, 5)   # grid 4 x 3 with ragged edges


def _data(shape=SHAPE, dtype="i4"):
    return (np.arange(math.prod(shape)).reshape(shape) + 1).astype(dtype)


def _zarray(path):
    return json.loads((path / ".zarray").read_text())


# ================================================================== creation functions

def test_create_writes_metadata_and_no_chunks(tmp_path):
    p = tmp_path / "c.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype="<i2", fill_value=-3, order="F", store=str(p),
                  compressor=numcodecs.Zstd(level=2))
    meta = _zarray(p)
    assert meta["shape"] == list(SHAPE) and meta["chunks"] == list(CHUNKS)
    assert meta["dtype"] == "<i2" and meta["fill_value"] == -3 and meta["order"] == "F"
    assert meta["compressor"] == {"id": "zstd", "level": 2, "checksum": False}
    assert meta["zarr_format"] == 2
    assert chunk_files(p) == []
    assert (z[...] == -3).all() and z[...].dtype == np.dtype("<i2")


def test_default_dtype_and_compressor():
    z = cs.create((5,))
    assert z.dtype == np.dtype("f8")
    assert z.compressor is not None  # zarr-python 2 compresses by default
    assert z.fill_value == 0


@pytest.mark.parametrize("fn, fill", [(cs.zeros, 0), (cs.ones, 1)])
def test_zeros_ones(fn, fill, layout):
    z = fn(SHAPE, chunks=CHUNKS, dtype="i8", **layout.format_kwargs(CHUNKS))
    assert z.zarr_format == layout.zarr_format and z.shards == layout.shards_for(CHUNKS)
    assert z.fill_value == fill
    np.testing.assert_array_equal(z[...], np.full(SHAPE, fill))
    assert z.nchunks_initialized == 0
    z[0, 0] = 5
    expected = np.full(SHAPE, fill)
    expected[0, 0] = 5
    np.testing.assert_array_equal(z[...], expected)


def test_full(layout):
    z = cs.full(SHAPE, 2.5, chunks=CHUNKS, dtype="f4", **layout.format_kwargs(CHUNKS))
    assert z.fill_value == np.float32(2.5)
    np.testing.assert_array_equal(z[...], np.full(SHAPE, 2.5, "f4"))
    z = cs.full((4,), np.nan, chunks=(2,), **layout.format_kwargs((2,)))
    assert np.isnan(z.fill_value) and np.isnan(z[...]).all()


@pytest.mark.parametrize("fill", [np.nan, np.inf, -np.inf, 42.0], ids=str)
def test_fill_values_and_missing_chunks(tmp_path, fill, layout):
    p = tmp_path / "f.zarr"
    z = layout((23, 17), (5, 4), dtype="f8", fill_value=fill, store=str(p))
    expected = np.full((23, 17), fill)
    np.testing.assert_array_equal(z[...], expected)
    assert z.nchunks_initialized == 0 and chunk_files(p) == []
    z[0:3, 0:3] = 1.5
    z[21:, 13:15] = 2.5
    expected[0:3, 0:3] = 1.5
    expected[21:, 13:15] = 2.5
    assert z.nchunks_initialized == 2
    assert chunk_files(p) == sorted({layout.stored_key((0, 0)), layout.stored_key((4, 3))})
    doc = layout.metadata(p)
    assert doc["fill_value"] == {np.inf: "Infinity", -np.inf: "-Infinity"}.get(
        fill, "NaN" if np.isnan(fill) else fill)
    layout.read_by_others(p, expected)
    # reopened: the fill value is the same, NaN included
    f = cs.open_array(str(p), mode="r").fill_value
    assert (np.isnan(f) and np.isnan(fill)) or f == fill


def test_empty_has_null_fill(tmp_path):
    p = tmp_path / "e.zarr"
    z = cs.empty(SHAPE, chunks=CHUNKS, dtype="i4", store=str(p))
    assert z.fill_value is None
    assert _zarray(p)["fill_value"] is None
    assert z[...].shape == SHAPE and z[...].dtype == np.dtype("i4")
    z[...] = _data()
    np.testing.assert_array_equal(z[...], _data())


@pytest.mark.parametrize("source", ["numpy", "list", "array", "fortran"])
def test_array_copies_data(source):
    data = _data(dtype="u2")
    arg = {"numpy": data, "list": data.tolist(), "fortran": np.asfortranarray(data),
           "array": cs.array(data, chunks=(4, 4))}[source]
    z = cs.array(arg, chunks=CHUNKS) if source != "array" else cs.array(arg)
    expected_dtype = np.dtype("u2") if source != "list" else np.asarray(data.tolist()).dtype
    assert z.dtype == expected_dtype
    assert z.shape == SHAPE
    np.testing.assert_array_equal(z[...], data)
    if source == "array":
        assert z.chunks == (4, 4)  # inherited from the source Array
        assert z.store is not arg.store
    else:
        assert z.chunks == CHUNKS
    if source == "numpy":
        data[0, 0] = 999   # a copy, not a view
        assert z[0, 0] == 1


def test_array_keyword_arguments():
    z = cs.array(_data(), chunks=(5, 5), dtype="f8", fill_value=-1, compressor=None)
    assert z.dtype == np.dtype("f8") and z.compressor is None and z.fill_value == -1
    np.testing.assert_array_equal(z[...], _data().astype("f8"))


def test_like_functions_from_numpy():
    a = np.asfortranarray(_data(dtype="i2"))
    for fn, fill in [(cs.zeros_like, 0), (cs.ones_like, 1)]:
        z = fn(a, chunks=CHUNKS)
        assert z.shape == a.shape and z.dtype == a.dtype
        np.testing.assert_array_equal(z[...], np.full(SHAPE, fill))
    z = cs.full_like(a, fill_value=7, chunks=CHUNKS)
    np.testing.assert_array_equal(z[...], np.full(SHAPE, 7))
    z = cs.empty_like(a, chunks=CHUNKS)
    assert z.shape == a.shape and z.dtype == a.dtype and z.fill_value is None


def test_like_functions_from_array():
    src = cs.create(SHAPE, chunks=CHUNKS, dtype="f4", fill_value=3, order="F",
                    compressor=numcodecs.Zlib(level=1),
                    filters=[numcodecs.Delta(dtype="<f4")])
    src[...] = 1
    for fn, fill in [(cs.zeros_like, 0), (cs.ones_like, 1)]:
        z = fn(src)
        assert (z.shape, z.chunks, z.dtype, z.order) == (SHAPE, CHUNKS, np.dtype("f4"), "F")
        assert z.compressor.get_config() == src.compressor.get_config()
        assert [f.get_config() for f in z.filters] == [f.get_config() for f in src.filters]
        assert z.fill_value == fill
        np.testing.assert_array_equal(z[...], np.full(SHAPE, fill))
    z = cs.full_like(src)  # fill value taken from src
    assert z.fill_value == 3
    z = cs.full_like(src, fill_value=9)
    np.testing.assert_array_equal(z[...], np.full(SHAPE, 9))
    z = cs.empty_like(src)
    assert z.fill_value is None and z.chunks == CHUNKS
    z = cs.zeros_like(src, shape=(4, 4), chunks=(2, 2))
    assert z.shape == (4, 4) and z.chunks == (2, 2)


# ================================================================== chunks argument

@pytest.mark.parametrize("shape, dtype", [((10**6,), "f8"), ((4000, 3000), "f4"),
                                          ((200, 300, 400), "i2"), ((10**7,), "u1"),
                                          ((100000, 3), "c16")])
def test_chunks_guess_about_1mib(shape, dtype):
    auto = cs.create(shape, chunks="auto", dtype=dtype)
    true = cs.create(shape, chunks=True, dtype=dtype)
    assert auto.chunks == true.chunks
    nbytes = math.prod(auto.chunks) * np.dtype(dtype).itemsize
    assert 256 * 1024 <= nbytes <= 2 * 1024 * 1024, (auto.chunks, nbytes)
    assert all(1 <= c <= s for c, s in zip(auto.chunks, shape))


def test_chunks_guess_small_array_is_one_chunk():
    z = cs.create((10, 20), chunks=True, dtype="f8")
    assert z.chunks == (10, 20)
    assert z.nchunks == 1


@pytest.mark.parametrize("chunks, expected", [
    (4, (4, 4)),
    ((4, 5), (4, 5)),
    ([4, 5], (4, 5)),
    ((None, 5), (10, 5)),
    ((4, None), (4, 12)),
    ((-1, 5), (10, 5)),
    ((4, -1), (4, 12)),
    (-1, (10, 12)),
    ((-1, -1), (10, 12)),
    ((None, None), (10, 12)),
    ((20, 30), (20, 30)),   # larger than the shape is allowed
])
def test_chunks_forms(chunks, expected):
    z = cs.create(SHAPE, chunks=chunks, dtype="i4")
    assert z.chunks == expected
    z[...] = _data()
    np.testing.assert_array_equal(z[...], _data())


@pytest.mark.parametrize("chunks", [0, (0, 5), (4, -2), (4, 5, 6), "big", (2.5, 3)])
def test_bad_chunks(chunks):
    with pytest.raises((ValueError, TypeError)):
        cs.create(SHAPE, chunks=chunks, dtype="i4")


# ================================================================== stores and paths

@pytest.mark.parametrize("kind", ["path", "dict", "memory", "directory", "nested"])
def test_store_kinds(tmp_path, kind):
    store = {"path": lambda: str(tmp_path / "s.zarr"), "dict": dict, "memory": cs.MemoryStore,
             "directory": lambda: cs.DirectoryStore(str(tmp_path / "s.zarr")),
             "nested": lambda: cs.NestedDirectoryStore(str(tmp_path / "s.zarr"))}[kind]()
    z = cs.create(SHAPE, chunks=CHUNKS, dtype="i4", store=store)
    z[...] = _data()
    if kind == "dict":
        assert z.store is store
        assert ".zarray" in store and "0.0" in store
        assert json.loads(store[".zarray"])["shape"] == list(SHAPE)
    if kind in ("path", "directory", "nested"):
        assert (tmp_path / "s.zarr" / ".zarray").exists()
        sep = "/" if kind == "nested" else "."
        assert f"3{sep}2" in chunk_files(tmp_path / "s.zarr")
    again = cs.open_array(store, mode="r")
    np.testing.assert_array_equal(again[...], _data())


def test_default_store_is_memory():
    z = cs.zeros((4,), chunks=2)
    assert isinstance(z.store, cs.MemoryStore)
    assert cs.zeros((4,), chunks=2).store is not z.store


def test_path_inside_store(tmp_path):
    store = {}
    a = cs.create((4,), chunks=(2,), dtype="i4", store=store, path="g1/g2/a")
    b = cs.create((6,), chunks=(3,), dtype="f8", store=store, path="/g1/b/")
    a[...] = [1, 2, 3, 4]
    b[...] = 9
    assert a.path == "g1/g2/a" and a.name == "/g1/g2/a"
    assert b.path == "g1/b" and b.name == "/g1/b"
    assert {"g1/g2/a/.zarray", "g1/g2/a/0", "g1/g2/a/1", "g1/b/.zarray", "g1/b/0"} <= set(store)
    for group in ("", "g1/", "g1/g2/"):
        assert json.loads(store[group + ".zgroup"]) == {"zarr_format": 2}
    assert ".zarray" not in store
    np.testing.assert_array_equal(cs.open_array(store, mode="r", path="g1/g2/a")[...],
                                  [1, 2, 3, 4])
    np.testing.assert_array_equal(cs.open_array(store, mode="r", path="g1/b")[...],
                                  np.full(6, 9.0))
    root = cs.create((2,), store={}, chunks=1)
    assert root.path == "" and root.name == "/"


def test_bad_paths():
    for path in ["a/../b", "./a", "a\\b"]:
        with pytest.raises(ValueError):
            cs.create((4,), store={}, path=path)


# ================================================================== modes and overwrite

def test_mode_r(tmp_path, layout):
    p = str(tmp_path / "m.zarr")
    cs.array(_data(), chunks=CHUNKS, store=p, **layout.format_kwargs(CHUNKS))
    z = cs.open_array(p, mode="r")
    assert z.read_only and z.zarr_format == layout.zarr_format
    np.testing.assert_array_equal(z[...], _data())
    with pytest.raises(cs.ReadOnlyError):
        z[0] = 0


def test_mode_r_plus(tmp_path, layout):
    p = str(tmp_path / "m.zarr")
    cs.array(_data(), chunks=CHUNKS, store=p, **layout.format_kwargs(CHUNKS))
    z = cs.open_array(p, mode="r+")
    assert not z.read_only
    z[0, 0] = -1
    assert cs.open_array(p, mode="r")[0, 0] == -1
    with pytest.raises(cs.ArrayNotFoundError):
        cs.open_array(p, mode="r+", path="other")


def test_mode_a(tmp_path, layout):
    p = str(tmp_path / "m.zarr")
    z = layout.open(p, mode="a", shape=SHAPE, chunks=CHUNKS, dtype="i4")
    assert z.shape == SHAPE and not z.read_only
    assert (z.zarr_format, z.shards) == (layout.zarr_format, layout.shards_for(CHUNKS))
    z[...] = _data()
    # opening again with mode "a" keeps the existing array, whatever the arguments say
    z2 = cs.open_array(p, mode="a", shape=(3,), chunks=(1,), dtype="f8")
    assert z2.shape == SHAPE and z2.dtype == np.dtype("i4") and z2.chunks == CHUNKS
    assert (z2.zarr_format, z2.shards) == (layout.zarr_format, layout.shards_for(CHUNKS))
    np.testing.assert_array_equal(z2[...], _data())


def test_mode_w_overwrites(tmp_path, layout):
    p = tmp_path / "m.zarr"
    z = layout.open(str(p), mode="w", shape=SHAPE, chunks=CHUNKS, dtype="i4")
    z[...] = _data()
    z.attrs["old"] = True
    z = layout.open(str(p), mode="w", shape=(5,), chunks=(2,), dtype="f8", fill_value=4)
    assert z.shape == (5,) and z.dtype == np.dtype("f8")
    np.testing.assert_array_equal(z[...], np.full(5, 4.0))
    assert chunk_files(p) == []           # old chunks are gone
    assert dict(z.attrs) == {}            # and so are old attributes


@pytest.mark.parametrize("mode", ["w-", "x"])
def test_mode_w_minus_x(tmp_path, mode, layout):
    p = tmp_path / "m.zarr"
    z = layout.open(str(p), mode=mode, shape=SHAPE, chunks=CHUNKS, dtype="i4")
    z[...] = _data()
    before = snapshot_dir(p)
    with pytest.raises(cs.ContainsArrayError) as info:
        layout.open(str(p), mode=mode, shape=SHAPE, chunks=CHUNKS, dtype="i4")
    assert isinstance(info.value, FileExistsError)
    assert snapshot_dir(p) == before


def test_bad_mode(tmp_path):
    with pytest.raises(ValueError):
        cs.open_array(str(tmp_path / "m.zarr"), mode="rw", shape=(2,))


def test_create_overwrite(tmp_path, layout):
    store = {}
    z = layout(SHAPE, CHUNKS, dtype="i4", store=store, path="x")
    z[...] = _data()
    sibling = layout((3,), (3,), dtype="i4", store=store, path="y")
    sibling[...] = [7, 8, 9]
    with pytest.raises(cs.ContainsArrayError):
        layout(SHAPE, CHUNKS, dtype="i4", store=store, path="x")
    np.testing.assert_array_equal(cs.open_array(store, mode="r", path="x")[...], _data())
    z = layout((4,), (2,), dtype="u1", store=store, path="x", overwrite=True)
    assert z.shape == (4,) and (z[...] == 0).all()
    assert not any(k.startswith("x/") and k != "x/" + layout.metadata_name for k in store)
    np.testing.assert_array_equal(cs.open_array(store, mode="r", path="y")[...], [7, 8, 9])


def test_open_modes_on_group_and_missing_paths(tmp_path):
    p = str(tmp_path / "g.zarr")
    cs.create((2,), store=p, path="g/a")
    with pytest.raises(cs.ContainsGroupError):
        cs.open_array(p, mode="a", path="g", shape=(3,))
    with pytest.raises(FileNotFoundError):
        cs.open(p, mode="r", path="nothing/here")
    assert isinstance(cs.open(p, mode="r", path="g/a"), cs.Array)


def test_nchunks_initialized_ignores_stray_files(tmp_path):
    p = tmp_path / "s.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype="i4", store=str(p))
    z[0, 0] = 1
    z[9, 11] = 1
    for name in ["README", ".hidden", "x.y", "1.a", "notes.0"]:
        (p / name).write_bytes(b"stray")
    assert z.nchunks_initialized == 2
    assert "2/12" in repr(z.info)


def test_create_over_group_fails():
    store = {}
    cs.create((2,), store=store, path="g/a")
    with pytest.raises(cs.ContainsGroupError):
        cs.create((2,), store=store, path="g")


# ================================================================== attributes

def test_array_properties(tmp_path, layout):
    p = tmp_path / "p.zarr"
    comp = numcodecs.GZip(level=2)
    # v3 has no Delta codec; its order "F" is a transpose codec, shown as a filter
    filt = [numcodecs.Delta(dtype="<i4")] if layout.zarr_format == 2 else None
    z = layout(SHAPE, CHUNKS, dtype="<i4", fill_value=-1, order="F", store=str(p),
               path="grp/arr", compressor=comp, filters=filt, write_empty_chunks=True)
    assert z.zarr_format == layout.zarr_format
    assert z.shape == SHAPE
    assert z.chunks == CHUNKS
    assert z.shards == layout.shards_for(CHUNKS)
    assert z.dtype == np.dtype("<i4")
    assert z.ndim == 2
    assert z.size == 120
    assert z.itemsize == 4
    assert z.order == "F"
    assert z.cdata_shape == (4, 3)
    assert z.nchunks == 12
    assert z.nbytes == 480
    assert z.fill_value == -1
    assert z.compressor.get_config() == comp.get_config()
    if filt is not None:
        assert [f.get_config() for f in z.filters] == [f.get_config() for f in filt]
    assert z.path == "grp/arr"
    assert z.name == "/grp/arr"
    assert z.read_only is False
    assert z.write_empty_chunks is True
    assert len(z) == 10
    assert z.nchunks_initialized == 0
    z[0:3, 0:5] = 1
    z[9, 11] = 2
    assert z.nchunks_initialized == 2
    files = snapshot_dir(p / "grp" / "arr")
    assert z.nbytes_stored == sum(len(v) for v in files.values())
    # nbytes_stored follows the store (zarr-python 2 counts metadata files too)
    z.attrs["x"] = 1
    files = snapshot_dir(p / "grp" / "arr")
    assert z.nbytes_stored == sum(len(v) for v in files.values())
    assert isinstance(z.store, cs.DirectoryStore)
    r = repr(z)
    assert "/grp/arr" in r and "(10, 12)" in r and "int32" in r
    again = cs.open_array(str(p), mode="r", path="grp/arr")
    assert (again.zarr_format, again.chunks, again.shards, again.cdata_shape, again.order) == \
        (layout.zarr_format, CHUNKS, layout.shards_for(CHUNKS), (4, 3), "F")


def test_chunks_and_shards_of_a_large_grid(layout):
    z = layout((100, 90), (10, 9), dtype="f4", store={})
    assert z.chunks == (10, 9) and z.shards == layout.shards_for((10, 9))
    assert z.cdata_shape == (10, 10) and z.nchunks == 100


def test_filters_none_and_compressor_none():
    z = cs.create((4,), chunks=(2,), compressor=None, filters=None)
    assert z.compressor is None
    assert not z.filters


def test_len_of_0d_raises(layout):
    z = layout((), (), dtype="f8")
    assert z.ndim == 0 and z.size == 1 and z.nchunks == 1 and z.cdata_shape == ()
    with pytest.raises(TypeError):
        len(z)


def test_array_protocol(layout):
    z = cs.array(_data(), chunks=CHUNKS, **layout.format_kwargs(CHUNKS))
    a = np.asarray(z)
    assert isinstance(a, np.ndarray)
    np.testing.assert_array_equal(a, _data())
    f = np.asarray(z, dtype="f8")
    assert f.dtype == np.dtype("f8")
    np.testing.assert_array_equal(f, _data().astype("f8"))
    np.testing.assert_array_equal(np.add(z, 1), _data() + 1)
    assert np.array(z).shape == SHAPE


def test_attrs_persisted(tmp_path, layout):
    p = tmp_path / "a.zarr"
    z = layout((4,), (2,), store=str(p))
    assert dict(z.attrs) == {}
    z.attrs["units"] = "m"
    z.attrs.update({"scale": 0.5, "tags": ["a", "b"], "nested": {"k": None}})
    doc = layout.attributes(p)
    assert doc == {"units": "m", "scale": 0.5, "tags": ["a", "b"], "nested": {"k": None}}
    if layout.zarr_format == 3:   # in the "attributes" member of zarr.json, no .zattrs
        assert not (p / ".zattrs").exists()
    del z.attrs["tags"]
    assert "tags" not in layout.attributes(p)
    again = cs.open_array(str(p), mode="r")
    assert again.attrs["units"] == "m"
    assert dict(again.attrs) == {"units": "m", "scale": 0.5, "nested": {"k": None}}
    assert "scale" in again.attrs and len(again.attrs) == 3
    with pytest.raises(cs.ReadOnlyError):
        again.attrs["x"] = 1
    # attributes written by another handle are visible
    z.attrs["late"] = 1
    assert again.attrs["late"] == 1
    z.attrs["np"] = np.int64(5)
    assert layout.attributes(p)["np"] == 5
    # zarr-python reads them; rewriting the metadata (resize) keeps them
    want = {"units": "m", "scale": 0.5, "nested": {"k": None}, "late": 1, "np": 5}
    zarr = pytest.importorskip("zarr")
    assert dict(zarr.open_array(str(p), mode="r").attrs) == want
    z.resize(8)
    assert layout.attributes(p) == want and layout.metadata(p)["shape"] == [8]


def test_attributes_at_creation(tmp_path, layout):
    p = tmp_path / "a.zarr"
    z = cs.create_array(str(p), shape=(4,), dtype="i4", chunks=(2,), attributes={"units": "m"},
                        **layout.format_kwargs((2,)))
    assert z.zarr_format == layout.zarr_format
    z.attrs["scale"] = 2.5
    assert layout.attributes(p) == {"units": "m", "scale": 2.5}


def _info_dict(z):
    out = {}
    for line in repr(z.info).splitlines():
        k, _, v = line.partition(":")
        out[k.strip()] = v.strip()
    return out


def test_info_fields(layout):
    store = cs.MemoryStore()
    filters = [numcodecs.Delta(dtype="<i4")] if layout.zarr_format == 2 else None  # no v3 Delta
    z = layout(SHAPE, CHUNKS, dtype="i4", store=store, path="arr",
               compressor=numcodecs.Zstd(level=1), filters=filters)
    z[0:3, 0:5] = 7
    z[9, 11] = 1
    info = _info_dict(z)
    for field in ["Type", "Data type", "Shape", "Chunk shape", "Order", "Read-only",
                  "Compressor", "Filters", "Store type", "No. bytes", "No. bytes stored",
                  "Storage ratio", "Chunks initialized", "Zarr format"]:
        assert field in info, (field, info)
    assert info["Zarr format"] == str(layout.zarr_format)
    if layout.sharded:
        assert info["Shard shape"] == str(layout.shards_for(CHUNKS))
    else:
        assert "Shard shape" not in info
    assert info["Data type"] == "int32"
    assert info["Shape"] == "(10, 12)"
    assert info["Chunk shape"] == "(3, 5)"
    assert info["Order"] == "C"
    assert info["Read-only"] == "False"
    assert "Zstd" in info["Compressor"]
    if filters:
        assert "Delta" in info["Filters"]
    assert "MemoryStore" in info["Store type"]
    assert info["No. bytes"].split()[0] == "480"
    stored = z.nbytes_stored
    assert info["No. bytes stored"].split()[0] == str(stored)
    assert float(info["Storage ratio"]) == pytest.approx(480 / stored, abs=0.05)
    assert info["Chunks initialized"] == "2/12"
    ro = _info_dict(cs.open_array(store, mode="r", path="arr"))
    assert ro["Read-only"] == "True"
    html = z.info._repr_html_()
    assert "Chunks initialized" in html and "2/12" in html


# ================================================================== selections

def _filled(layout=None, **kwargs):
    """SHAPE of _data() in CHUNKS (in the given layout, else cs.create's defaults: v2)."""
    kwargs.setdefault("chunks", CHUNKS)
    if layout is not None:
        kwargs = layout.format_kwargs(kwargs["chunks"], **kwargs)
    z = cs.create(SHAPE, dtype=kwargs.pop("dtype", "i4"), **kwargs)
    z[...] = _data()
    return z


NEG_STEP_SELECTIONS = [
    np.s_[::-1],
    np.s_[::-1, ::-1],
    np.s_[8:1:-2, ::-3],
    np.s_[-1:-11:-4, 11:0:-5],
    np.s_[5, ::-2],
    np.s_[::-7, 3],
    np.s_[0:5:-1],        # empty
    np.s_[..., ::-11],
]


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("sel", NEG_STEP_SELECTIONS, ids=[str(s) for s in NEG_STEP_SELECTIONS])
def test_negative_step_read(sel, order, layout):
    z = _filled(layout, order=order)
    np.testing.assert_array_equal(z[sel], _data()[sel])
    np.testing.assert_array_equal(z.get_basic_selection(sel), _data()[sel])


@pytest.mark.parametrize("sel", NEG_STEP_SELECTIONS, ids=[str(s) for s in NEG_STEP_SELECTIONS])
def test_negative_step_write(sel, layout):
    z = _filled(layout)
    expected = _data()
    shape = expected[sel].shape
    value = (np.arange(math.prod(shape)).reshape(shape) * -1 - 1).astype("i4")
    z[sel] = value
    expected[sel] = value
    np.testing.assert_array_equal(z[...], expected)
    z.oindex[sel] = 0
    expected[sel] = 0
    np.testing.assert_array_equal(z[...], expected)


def test_negative_step_orthogonal(layout):
    z = _filled(layout)
    d = _data()
    np.testing.assert_array_equal(z.oindex[[9, 0, 4], ::-2], d[[9, 0, 4]][:, ::-2])
    np.testing.assert_array_equal(z.get_orthogonal_selection((slice(None, None, -3), [1, 11])),
                                  d[::-3][:, [1, 11]])


def test_scalar_and_0d_results(layout):
    z = _filled(layout)
    v = z[3, 4]
    assert np.ndim(v) == 0 and v == _data()[3, 4]
    z0 = layout((), (), dtype="f8", fill_value=1.5)
    assert z0[()] == 1.5
    assert z0[...].shape == ()
    z0[...] = 4
    assert z0[()] == 4.0


def test_blocks(layout):
    z = _filled(layout)
    d = _data()
    np.testing.assert_array_equal(z.blocks[0, 0], d[0:3, 0:5])
    np.testing.assert_array_equal(z.blocks[3, 2], d[9:10, 10:12])
    np.testing.assert_array_equal(z.blocks[-1], d[9:])
    np.testing.assert_array_equal(z.blocks[1:3, 1:], d[3:9, 5:])
    np.testing.assert_array_equal(z.blocks[..., 1], d[:, 5:10])
    np.testing.assert_array_equal(z.get_block_selection((slice(0, 2), 2)), d[0:6, 10:12])
    z.blocks[1, 1] = -5
    d[3:6, 5:10] = -5
    np.testing.assert_array_equal(z[...], d)
    z.set_block_selection((3, slice(None)), np.arange(12).reshape(1, 12))
    d[9:10] = np.arange(12)
    np.testing.assert_array_equal(z[...], d)
    with pytest.raises(IndexError):
        z.blocks[::2]


def test_selection_writes_match_numpy(layout):
    z = _filled(layout)
    d = _data()
    rows, cols = np.array([9, 0, 4, 4]), np.array([11, 2, 7, 2])
    z.oindex[[1, 7], [0, 11, 5]] = np.array([[1, 2, 3], [4, 5, 6]])
    d[np.ix_([1, 7], [0, 11, 5])] = [[1, 2, 3], [4, 5, 6]]
    z.vindex[rows[:3], cols[:3]] = [-1, -2, -3]
    d[rows[:3], cols[:3]] = [-1, -2, -3]
    m = d % 7 == 0
    z.vindex[m] = 100
    d[m] = 100
    z.set_coordinate_selection(([2, 3], [3, 2]), [55, 66])
    d[[2, 3], [3, 2]] = [55, 66]
    z.set_mask_selection(d == 55, 77)
    d[d == 55] = 77
    z[np.array([0, 5]), 1:4] = 8
    d[np.array([0, 5]), 1:4] = 8
    np.testing.assert_array_equal(z[...], d)


# ---------------------------------------------------------------- out=

def test_out_parameter(layout):
    z = _filled(layout)
    d = _data()
    out = np.zeros((4, 6), "i4")
    ret = z.get_basic_selection((slice(2, 6), slice(3, 9)), out=out)
    assert ret is out
    np.testing.assert_array_equal(out, d[2:6, 3:9])

    out = np.zeros((2, 3), "i4")
    assert z.get_orthogonal_selection(([1, 8], [0, 5, 11]), out=out) is out
    np.testing.assert_array_equal(out, d[np.ix_([1, 8], [0, 5, 11])])

    out = np.zeros(3, "i4")
    assert z.get_coordinate_selection(([0, 9, 4], [11, 0, 6]), out=out) is out
    np.testing.assert_array_equal(out, d[[0, 9, 4], [11, 0, 6]])

    m = d % 5 == 0
    out = np.zeros(int(m.sum()), "i4")
    assert z.get_mask_selection(m, out=out) is out
    np.testing.assert_array_equal(out, d[m])

    out = np.zeros((3, 5), "i4")
    assert z.get_block_selection((1, 1), out=out) is out
    np.testing.assert_array_equal(out, d[3:6, 5:10])

    # a non-contiguous view as out is written through
    big = np.zeros((10, 24), "i4")
    view = big[:, ::2]
    z.get_basic_selection(..., out=view)
    np.testing.assert_array_equal(big[:, ::2], d)
    assert (big[:, 1::2] == 0).all()
    # Fortran-ordered out
    fo = np.zeros(SHAPE, "i4", order="F")
    z.get_basic_selection(..., out=fo)
    np.testing.assert_array_equal(fo, d)
    # negative steps with out
    out = np.zeros((10, 12), "i4")
    z.get_basic_selection((slice(None, None, -1), slice(None, None, -1)), out=out)
    np.testing.assert_array_equal(out, d[::-1, ::-1])


def test_out_parameter_errors(layout):
    z = _filled(layout)
    with pytest.raises(ValueError):
        z.get_basic_selection(..., out=np.zeros((10, 11), "i4"))
    with pytest.raises((ValueError, TypeError)):
        z.get_basic_selection(..., out=np.zeros(SHAPE, "f8"))
    ro = np.zeros(SHAPE, "i4")
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        z.get_basic_selection(..., out=ro)
    assert (ro == 0).all()


# ---------------------------------------------------------------- structured fields

# Zarr v2 only: Zarr v3 has no data type for a field holding a subarray ("y")
STRUCT = np.dtype([("x", "<i4"), ("y", "<f8", (2,)), ("s", "S3")])


def _struct_data():
    d = np.zeros(SHAPE, STRUCT)
    d["x"] = _data()
    d["y"][..., 0] = _data() / 2
    d["y"][..., 1] = -_data()
    d["s"] = np.array([b"ab", b"cde", b""])[_data() % 3]
    return d


def test_structured_fields_read():
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=STRUCT)
    d = _struct_data()
    z[...] = d
    np.testing.assert_array_equal(z[...], d)
    np.testing.assert_array_equal(z["x"], d["x"])
    np.testing.assert_array_equal(z["y"], d["y"])
    assert z["y"].shape == SHAPE + (2,)
    np.testing.assert_array_equal(z[2:5, "s"], d[2:5]["s"])
    np.testing.assert_array_equal(z["x", 3], d[3]["x"])
    xy = z[["x", "s"]]
    assert xy.dtype.names == ("x", "s")
    np.testing.assert_array_equal(xy["x"], d["x"])
    np.testing.assert_array_equal(xy["s"], d["s"])
    np.testing.assert_array_equal(z.get_basic_selection(slice(1, 4), fields="x"), d[1:4]["x"])
    np.testing.assert_array_equal(z.get_orthogonal_selection(([0, 9], [1, 2]), fields="y"),
                                  d[np.ix_([0, 9], [1, 2])]["y"])
    # a one-name list is a one-field structured array, as NumPy's d[["x"]]
    one = z.get_coordinate_selection(([0, 9], [1, 2]), fields=["x"])
    assert one.dtype.names == ("x",)
    np.testing.assert_array_equal(one["x"], d[[0, 9], [1, 2]]["x"])
    np.testing.assert_array_equal(z.oindex[[1, 2], :, "x"], d[[1, 2]]["x"])
    np.testing.assert_array_equal(z.vindex[[1, 2], [3, 4], "s"], d[[1, 2], [3, 4]]["s"])
    out = np.zeros((2, 12), "<i4")
    z.get_basic_selection(slice(0, 2), out=out, fields="x")
    np.testing.assert_array_equal(out, d[0:2]["x"])
    with pytest.raises((IndexError, KeyError, ValueError)):
        z["nope"]


def test_structured_fields_write():
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=STRUCT)
    d = _struct_data()
    z[...] = d
    z["x"] = 0
    d["x"] = 0
    z.set_basic_selection((slice(4, 6), slice(0, 2)), b"zz", fields="s")
    d["s"][4:6, 0:2] = b"zz"
    z.set_orthogonal_selection(([9], [11]), 42, fields="x")
    d["x"][9, 11] = 42
    z.vindex[[0, 1], [2, 3], "x"] = [-4, -5]
    d["x"][[0, 1], [2, 3]] = [-4, -5]
    np.testing.assert_array_equal(z[...], d)


def test_structured_subarray_field_write():
    # field "y" holds 2 floats per element; NumPy broadcasts values against (..., 2)
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=STRUCT)
    d = _struct_data()
    z[...] = d
    z[1:3, "y"] = np.array([7.0, 8.0])
    d["y"][1:3] = [7.0, 8.0]
    np.testing.assert_array_equal(z[...], d)
    value = np.arange(2 * 12 * 2, dtype="f8").reshape(2, 12, 2)
    z.set_basic_selection(slice(5, 7), value, fields="y")
    d["y"][5:7] = value
    np.testing.assert_array_equal(z[...], d)


# ---------------------------------------------------------------- caller's data untouched

def _frozen(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


def test_index_arrays_and_values_not_modified(layout):
    z = _filled(layout)
    d = _data()
    idx_neg = np.array([-1, 3, -10, 3, 0], dtype=np.int64)
    idx_i32 = np.array([11, -12, 5], dtype=np.int32)
    idx_u = np.array([9, 0, 4], dtype=np.uint16)
    mask1 = np.zeros(12, bool)
    mask1[[1, 7]] = True
    mask2 = (d % 4 == 0)
    keep = [x.copy() for x in (idx_neg, idx_i32, idx_u, mask1, mask2)]

    def unchanged():
        for a, b in zip((idx_neg, idx_i32, idx_u, mask1, mask2), keep):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)

    np.testing.assert_array_equal(z.oindex[idx_neg, idx_i32], d[np.ix_(idx_neg, idx_i32)])
    unchanged()
    np.testing.assert_array_equal(z.vindex[idx_neg[:3], idx_i32], d[idx_neg[:3], idx_i32])
    unchanged()
    np.testing.assert_array_equal(z[idx_neg], d[idx_neg])
    unchanged()
    np.testing.assert_array_equal(z.oindex[idx_u, mask1], d[idx_u][:, mask1])
    unchanged()
    np.testing.assert_array_equal(z[idx_neg, 1:5], d[idx_neg, 1:5])
    unchanged()
    np.testing.assert_array_equal(z[2:9, idx_i32], d[2:9, idx_i32])
    unchanged()
    np.testing.assert_array_equal(z.oindex[mask2[:, 0], mask1], d[np.ix_(mask2[:, 0], mask1)])
    unchanged()
    np.testing.assert_array_equal(z.vindex[mask2], d[mask2])
    unchanged()
    np.testing.assert_array_equal(z.get_coordinate_selection((idx_u, idx_i32)),
                                  d[idx_u, idx_i32])
    unchanged()

    value = np.arange(15, dtype="i4").reshape(5, 3)
    vkeep = value.copy()
    z.oindex[idx_neg, idx_i32] = value
    unchanged()
    np.testing.assert_array_equal(value, vkeep)
    z.vindex[idx_neg[:3], idx_i32] = value[0]
    unchanged()
    np.testing.assert_array_equal(value, vkeep)
    z.vindex[mask2] = 3
    unchanged()
    z.set_coordinate_selection((idx_u, idx_i32), value[:, 0][:3])
    unchanged()
    np.testing.assert_array_equal(value, vkeep)

    # read-only (non-writeable) index arrays and values are accepted
    np.testing.assert_array_equal(z.oindex[_frozen(idx_neg), :].shape, (5, 12))
    z.vindex[_frozen(idx_u), _frozen(idx_i32)] = _frozen([1, 2, 3])
    z[...] = _frozen(d)
    np.testing.assert_array_equal(z[...], d)


def test_object_values_not_modified():
    z = cs.create((6,), chunks=(4,), dtype=object, object_codec=numcodecs.VLenUTF8())
    value = np.array(["a", "bb", "", "\u2603", "x", "yy"], dtype=object)
    keep = value.copy()
    z[...] = value
    z[::-1] = value
    assert list(value) == list(keep)
    assert list(z[...]) == list(keep[::-1])


@pytest.mark.parametrize("kind", ["fortran", "big_endian", "strided", "other_dtype", "view"])
def test_written_values_not_modified(kind, layout):
    z = layout(SHAPE, CHUNKS, dtype="<i4", order="C")
    base = _data()
    value = {"fortran": np.asfortranarray(base), "big_endian": base.astype(">i4"),
             "strided": np.repeat(base, 2, axis=1)[:, ::2], "other_dtype": base.astype("f8"),
             "view": np.lib.stride_tricks.as_strided(base, SHAPE, base.strides)}[kind]
    keep = value.copy()
    keep_flags = (value.flags.c_contiguous, value.flags.f_contiguous, value.dtype)
    z[...] = value
    np.testing.assert_array_equal(value, keep)
    assert (value.flags.c_contiguous, value.flags.f_contiguous, value.dtype) == keep_flags
    np.testing.assert_array_equal(z[...], base)
    z[::-1, 2:9] = value[:, 2:9]
    np.testing.assert_array_equal(value, keep)


# ================================================================== resize and append

def test_resize_grow(tmp_path, layout):
    p = tmp_path / "r.zarr"
    z = layout(SHAPE, CHUNKS, dtype="i4", fill_value=-1, store=str(p))
    z[...] = _data()
    z.resize(14, 20)
    assert z.shape == (14, 20)
    assert layout.metadata(p)["shape"] == [14, 20]
    expected = np.full((14, 20), -1)
    expected[:10, :12] = _data()
    np.testing.assert_array_equal(z[...], expected)
    z.resize((15, 21))
    assert z.shape == (15, 21) and z.cdata_shape == (5, 5)
    assert cs.open_array(str(p), mode="r").shape == (15, 21)


def test_resize_shrink_deletes_outside_chunks(tmp_path, layout):
    p = tmp_path / "r.zarr"
    z = layout(SHAPE, CHUNKS, dtype="i4", store=str(p))
    z[...] = _data()
    grid = np.ndindex(4, 3)
    assert chunk_files(p) == sorted({layout.stored_key(c) for c in grid})
    assert z.nchunks_initialized == 12
    z.resize(4, 5)   # keeps chunk rows 0-1 and column 0 (sharded: shard (0, 0))
    assert z.shape == (4, 5)
    assert chunk_files(p) == sorted({layout.stored_key(c) for c in [(0, 0), (1, 0)]})
    assert z.nchunks_initialized == 2
    np.testing.assert_array_equal(z[...], _data()[:4, :5])


@pytest.mark.parametrize("order, sep, wec", [("C", ".", False), ("F", "/", False),
                                             ("C", ".", True)])
@pytest.mark.parametrize("fill", [0, -7, None])
def test_shrink_then_grow_shows_fill_not_old_data(tmp_path, fill, order, sep, wec, layout):
    p = tmp_path / "r.zarr"
    z = layout(SHAPE, CHUNKS, dtype="i4", fill_value=fill, store=str(p),
               order=order, dimension_separator=sep, write_empty_chunks=wec)
    z[...] = _data()
    z.resize(4, 7)          # cuts through chunks (1, 0) and (0, 1), (1, 1)
    z.resize(SHAPE)
    got = z[...]
    np.testing.assert_array_equal(got[:4, :7], _data()[:4, :7])
    regrown = np.ones(SHAPE, bool)
    regrown[:4, :7] = False
    want_fill = 0 if fill is None else fill
    assert (got[regrown] == want_fill).all(), got
    again = cs.open_array(str(p), mode="r")[...]
    np.testing.assert_array_equal(again, got)


def test_resize_shrink_one_dim_grow_other(tmp_path, layout):
    p = tmp_path / "r.zarr"
    z = layout(SHAPE, CHUNKS, dtype="f8", fill_value=np.nan, store=str(p))
    z[...] = _data()
    z.resize(5, 20)   # chunk rows 2 and 3 go
    assert chunk_files(p) == sorted({layout.stored_key(c) for c in np.ndindex(2, 3)})
    z.resize(10, 20)
    expected = np.full((10, 20), np.nan)
    expected[:5, :12] = _data()[:5]
    np.testing.assert_array_equal(z[...], expected)


def test_resize_shrink_then_grow_read_by_others(tmp_path, layout):
    p = tmp_path / "r.zarr"
    z = layout((20, 16), (5, 4), dtype="i4", fill_value=-1, store=str(p))
    data = np.arange(320, dtype="i4").reshape(20, 16)
    z[...] = data
    z.resize(13, 7)
    assert z.shape == (13, 7)
    np.testing.assert_array_equal(z[...], data[:13, :7])
    # chunks (sharded: shards) wholly outside are gone
    assert chunk_files(p) == sorted({layout.stored_key(c) for c in np.ndindex(3, 2)})
    layout.read_by_others(p, data[:13, :7])
    z.resize(20, 16)
    expected = np.full((20, 16), -1, dtype="i4")
    expected[:13, :7] = data[:13, :7]
    np.testing.assert_array_equal(z[...], expected)
    layout.read_by_others(p, expected)
    # grow without shrinking keeps everything; appended region reads as fill until written
    z.resize(25, 16)
    expected = np.concatenate([expected, np.full((5, 16), -1, "i4")])
    layout.read_by_others(p, expected)
    z.append(np.ones((3, 16), "i4"))
    expected = np.concatenate([expected, np.ones((3, 16), "i4")])
    assert z.shape == (28, 16)
    layout.read_by_others(p, expected)


def test_shape_setter(layout):
    z = _filled(layout)
    z.shape = (5, 5)
    assert z.shape == (5, 5)
    np.testing.assert_array_equal(z[...], _data()[:5, :5])


def test_resize_errors(layout):
    z = _filled(layout)
    with pytest.raises(ValueError):
        z.resize(5)
    with pytest.raises(ValueError):
        z.resize(-1, 5)
    assert z.shape == SHAPE


def test_resize_to_zero_and_back(layout):
    z = _filled(layout)
    z.resize(0, 12)
    assert z.shape == (0, 12) and z[...].shape == (0, 12)
    assert z.nchunks_initialized == 0
    z.resize(SHAPE)
    assert (z[...] == 0).all()


def test_append(layout):
    z = _filled(layout)
    d = _data()
    extra = np.full((3, 12), -2, "i4")
    assert z.append(extra) == (13, 12)
    d = np.concatenate([d, extra])
    np.testing.assert_array_equal(z[...], d)
    cols = np.arange(26, dtype="i4").reshape(13, 2)
    assert z.append(cols, axis=1) == (13, 14)
    d = np.concatenate([d, cols], axis=1)
    np.testing.assert_array_equal(z[...], d)
    assert z.append(np.zeros((13, 1), "i4"), axis=-1) == (13, 15)
    assert z.shape == (13, 15)
    with pytest.raises(ValueError):
        z.append(np.zeros((2, 3), "i4"))
    with pytest.raises(ValueError):
        z.append(np.zeros(15, "i4"))
    with pytest.raises((ValueError, IndexError)):
        z.append(np.zeros((1, 15), "i4"), axis=2)
    assert z.shape == (13, 15)


def test_append_1d_persisted(tmp_path, layout):
    p = str(tmp_path / "a.zarr")
    z = layout((0,), (4,), dtype="f8", store=p)
    for i in range(5):
        z.append(np.arange(3) + 3 * i)
    assert z.shape == (15,)
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[...], np.arange(15.0))


# ================================================================== save / load

@pytest.mark.parametrize("kind", ["path", "dict"])
def test_save_load(tmp_path, kind):
    store = str(tmp_path / "s.zarr") if kind == "path" else {}
    data = _data(dtype="f4")
    cs.save(store, data)
    back = cs.load(store)
    assert isinstance(back, np.ndarray)
    assert back.dtype == data.dtype
    np.testing.assert_array_equal(back, data)
    z = cs.open_array(store, mode="r")
    assert z.shape == SHAPE
    # saving again overwrites
    cs.save(store, np.arange(3))
    np.testing.assert_array_equal(cs.load(store), np.arange(3))


def test_save_array_with_path(tmp_path):
    p = str(tmp_path / "s.zarr")
    cs.save_array(p, _data(), path="inner/x")
    np.testing.assert_array_equal(cs.load(p, path="inner/x"), _data())
    o = cs.open(p, mode="r", path="inner/x")
    assert isinstance(o, cs.Array)
    with pytest.raises(FileNotFoundError):
        cs.load(p, path="inner/missing")


# ================================================================== huge sparse array

def test_points_of_huge_array_are_fast():
    n = 10**6
    z = cs.create((n, n), chunks=(32, 32), dtype="f8", fill_value=np.nan)
    assert z.nchunks == 31250 ** 2
    rows = np.array([0, 123_456, n - 1])
    cols = np.array([n - 1, 31, 500_000])
    t0 = time.perf_counter()
    z.vindex[rows, cols] = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(z.vindex[rows, cols], [1.0, 2.0, 3.0])
    z[rows[1], cols[1]] = 5.0
    assert z[rows[1], cols[1]] == 5.0
    np.testing.assert_array_equal(z.get_coordinate_selection((rows, cols)), [1.0, 5.0, 3.0])
    got = z.oindex[rows, cols]
    assert got.shape == (3, 3)
    assert np.isnan(got[0, 1]) and got[2, 2] == 3.0
    block = z[123_440:123_470, 20:40]
    assert block[16, 11] == 5.0 and np.isnan(block).sum() == block.size - 1
    assert z.nchunks_initialized == 3
    assert "3/976562500" in repr(z.info)
    z.vindex[rows, cols] = np.nan   # back to fill: the chunks go away
    assert z.nchunks_initialized == 0
    z.vindex[rows, cols] = [1.0, 2.0, 3.0]
    # shrinking and growing back touches only stored chunks, not the 10^9 grid
    z.resize(n // 2, n)
    assert z.nchunks_initialized == 2
    z.resize(n, n)
    got = z.vindex[rows, cols]
    assert got[0] == 1.0 and got[1] == 2.0 and np.isnan(got[2])
    assert time.perf_counter() - t0 < 5.0


# ================================================================== model-based writes

def _random_selection(rng, shape):
    kind = rng.choice(["basic", "ortho", "coord", "mask", "scalar_index"])
    if kind == "basic" or kind == "scalar_index":
        sel = []
        for n in shape:
            if kind == "scalar_index" and rng.random() < 0.5:
                sel.append(int(rng.integers(-n, n)))
                continue
            start, stop = (int(x) for x in rng.integers(-n - 2, n + 2, 2))
            step = int(rng.choice([1, 1, 1, 2, 3, -1, -2, -5]))
            sel.append(slice(start, stop, step))
        return "basic", tuple(sel)
    if kind == "ortho":
        sel = []
        for n in shape:
            if rng.random() < 0.5:
                sel.append(rng.permutation(n)[: int(rng.integers(1, n + 1))] - n * (rng.random() < 0.3))
            else:
                sel.append(rng.random(n) < 0.4)
        return "ortho", tuple(sel)
    if kind == "coord":
        k = int(rng.integers(0, 30))
        flat = rng.choice(int(np.prod(shape)), size=min(k, int(np.prod(shape))), replace=False)
        return "coord", np.unravel_index(flat, shape)
    return "mask", rng.random(shape) < 0.2


def _numpy_index(kind, sel):
    if kind == "ortho":
        return np.ix_(*[np.flatnonzero(s) if s.dtype == bool else s for s in sel])
    return sel


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("config", ["small", "many_chunks", "nan_fill_empty", "write_empty",
                                    "nested", "3d"])
def test_random_writes_match_numpy_model(tmp_path, config, order, layout):
    shape, chunks, dtype, fill, wec, sep = {
        "small": ((10, 12), (3, 5), "i4", 0, False, "."),
        "many_chunks": ((30, 41), (4, 3), "f8", 0.0, False, "."),
        "nan_fill_empty": ((11, 9), (4, 4), "f4", np.nan, False, "."),
        "write_empty": ((11, 9), (4, 4), "u2", 3, True, "."),
        "nested": ((9, 13), (2, 6), "i8", -1, False, "/"),
        "3d": ((7, 6, 5), (3, 2, 4), "i2", 5, False, "."),
    }[config]
    rng = np.random.default_rng(sum(map(ord, config + order)))
    p = tmp_path / "m.zarr"
    z = layout(shape, chunks, dtype=dtype, fill_value=fill, order=order,
               write_empty_chunks=wec, dimension_separator=sep, store=str(p))
    model = np.full(shape, fill, dtype=dtype)
    for step in range(60):
        kind, sel = _random_selection(rng, shape)
        npsel = _numpy_index(kind, sel)
        target_shape = model[npsel].shape
        r = rng.random()
        if r < 0.3:
            value = fill if rng.random() < 0.5 else rng.integers(0, 100)
        else:
            value = rng.integers(0, 100, size=target_shape).astype(dtype)
            if r < 0.4:
                value[...] = fill
        if kind == "basic":
            z[sel] = value
        elif kind == "ortho":
            z.oindex[sel] = value
        elif kind == "coord":
            z.vindex[sel] = value
        else:
            z.vindex[sel] = value
        model[npsel] = value
        if step % 10 == 9:
            np.testing.assert_array_equal(z[...], model)
        # reading back the same selection gives what NumPy gives
        if kind == "basic":
            np.testing.assert_array_equal(z[sel], model[npsel])
        elif kind == "ortho":
            np.testing.assert_array_equal(z.oindex[sel], model[npsel])
        else:
            np.testing.assert_array_equal(z.vindex[sel], model[npsel])
    np.testing.assert_array_equal(cs.open_array(str(p), mode="r")[...], model)
    layout.read_by_others(p, model)
    # which chunks are stored: all-fill chunks are not stored unless write_empty_chunks
    # (sharded: a shard is stored when one of its chunks is, and holds only those)
    nonfill = set()
    for coords in np.ndindex(z.cdata_shape):
        region = tuple(slice(c * n, (c + 1) * n) for c, n in zip(coords, chunks))
        block = model[region]
        same = (block == fill) | (np.isnan(block) & np.isnan(fill)) \
            if np.dtype(dtype).kind == "f" else block == fill
        if not same.all():
            nonfill.add(coords)
    stored = set(chunk_files(p))
    nonfill_keys = {layout.stored_key(c, sep) for c in nonfill}
    if wec:
        assert nonfill_keys <= stored
        assert z.nchunks_initialized >= len(nonfill)
    else:
        assert stored == nonfill_keys
        assert z.nchunks_initialized == len(nonfill)
    if not layout.sharded:
        assert z.nchunks_initialized == len(stored)
