"""Regression tests of issue 11's bugs met by zarr-python 2 users (Group + synchronizer
deadlock: test_group_sync_creation.py): failed creations leave the store as it was,
dtype=str/bytes, object fields with fill values, unit-less datetimes, 0-d iteration, object
element assignment, array(read_only=True), SQLiteStore(":memory:")."""

from __future__ import annotations

import base64
import json
import os
import pickle
import threading

import numcodecs
import numpy as np
import pytest

import chunkstore as cs


def _snapshot(store):
    return {k: bytes(store[k]) for k in store}


def _existing_store():
    """A store holding a group and an array, to see that a failed creation touches neither."""
    s = cs.MemoryStore()
    g = cs.group(store=s)
    g.zeros("old", shape=4, chunks=2, dtype="i4")[:] = [1, 2, 3, 4]
    return s


# ------------------------------------------------------------------ 2. failed creation
INVALID = {
    "zero-size bytes": dict(dtype="S0"),
    "zero-size str": dict(dtype="U"),
    "zero-size field": dict(dtype=[("a", "i4"), ("b", "S0")]),
    "unit-less datetime": dict(dtype="M8"),
    "unit-less timedelta": dict(dtype="m8"),
    "unit-less datetime field": dict(dtype=[("t", "M8")]),
    "not a dtype": dict(dtype="no-such-dtype"),
    "fill not an int": dict(dtype="i4", fill_value="abc"),
    "fill out of range": dict(dtype="i1", fill_value=1000),
    "fill of object field": dict(dtype=[("a", "i4"), ("b", object)], fill_value=(0, "x"),
                                 object_codec=numcodecs.Pickle()),
    "compressor not a codec": dict(compressor="bogus"),
    "compressor object": dict(compressor=object()),
    "filter not a codec": dict(filters=[object()]),
    "chunks of wrong rank": dict(chunks=(2, 2, 2)),
    "chunks negative": dict(chunks=(-3, 2)),
    "order": dict(order="X"),
    "dimension separator": dict(dimension_separator="x"),
    "object without codec": dict(dtype=object),
    "str with another codec": dict(dtype=str, object_codec=numcodecs.VLenBytes()),
    "array without element dtype": dict(dtype="array"),
    "shards in v2": dict(zarr_format=2, shards=(4, 4)),
    "dimension_names in v2": dict(zarr_format=2, dimension_names=["x"]),
    "unknown compression": dict(compression="no-such-codec"),
    "bad compression_opts": dict(compression="gzip", compression_opts={"nope": 1}),
    "v3 shards not a multiple": dict(zarr_format=3, chunks=(3, 3), shards=(4, 4)),
    "v3 bytes fill too long": dict(zarr_format=3, dtype="S4", fill_value=b"toolong"),
    "v3 non-string object codec": dict(zarr_format=3, dtype=object,
                                       object_codec=numcodecs.MsgPack()),
    "v3 fill out of range": dict(zarr_format=3, dtype="u1", fill_value=-1),
    "v3 dimension names count": dict(zarr_format=3, dimension_names=["x", "y"]),
    "v3 unknown codec": dict(zarr_format=3, codecs=[{"name": "no-such-codec"}]),
    "v3 order": dict(zarr_format=3, order="X", chunks=(2, 2)),
    "fill NaN for ints": dict(dtype="i4", fill_value=float("nan")),
    "zarr_format": dict(zarr_format=4),
}


@pytest.mark.parametrize("path, overwrite", [("new", False), ("new", True),
                                             ("deep/er/new", False), ("old", True)])
@pytest.mark.parametrize("case", sorted(INVALID))
def test_failed_creation_leaves_store_as_it_was(case, path, overwrite):
    s = _existing_store()
    before = _snapshot(s)
    with pytest.raises((ValueError, TypeError)):
        cs.create((4, 4) if {"chunks", "shards"} & set(INVALID[case]) else 4,
                  store=s, path=path, overwrite=overwrite, **INVALID[case])
    assert _snapshot(s) == before
    # The path is not blocked: a valid creation works there now.
    assert cs.create(4, store=s, path=path, overwrite=overwrite, dtype="i2").shape == (4,)


def test_failed_creation_under_an_array_writes_no_groups():
    s = cs.MemoryStore()
    cs.zeros(3, store=s, path="a")  # no root group
    before = _snapshot(s)
    with pytest.raises(cs.ContainsArrayError):
        cs.zeros(3, store=s, path="a/b/c")
    assert _snapshot(s) == before


def test_array_whose_data_cannot_be_written_is_removed_again():
    s = _existing_store()
    before = _snapshot(s)
    with pytest.raises(ValueError):
        cs.array(np.array(["x", "y"]), dtype="i4", store=s, path="p/q/r")
    assert _snapshot(s) == before


@pytest.mark.parametrize("spelling", [str, "str"])
def test_dtype_str_is_an_object_array_with_vlen_utf8(spelling):
    s = cs.MemoryStore()
    z = cs.zeros(3, dtype=spelling, store=s)
    assert z.dtype == object and z.filters == [numcodecs.VLenUTF8()]
    assert z[:].tolist() == ["", "", ""]  # zarr-python 2's fill for dtype=str
    z[1] = "héllo"
    meta = json.loads(s[".zarray"])
    assert meta["dtype"] == "|O" and meta["filters"] == [{"id": "vlen-utf8"}]
    assert cs.open_array(s, mode="r")[:].tolist() == ["", "héllo", ""]


@pytest.mark.parametrize("spelling", [bytes, "bytes"])
def test_dtype_bytes_is_an_object_array_with_vlen_bytes(spelling):
    s = cs.MemoryStore()
    z = cs.zeros(3, dtype=spelling, store=s)
    assert z.dtype == object and z.filters == [numcodecs.VLenBytes()]
    z[0] = b"\x00ab"
    assert cs.open_array(s, mode="r")[:].tolist() == [b"\x00ab", b"", b""]


def test_dtype_array_shortcut_is_vlen_array():
    z = cs.empty(2, dtype="array:i4")
    assert z.filters == [numcodecs.VLenArray("i4")]
    z[0] = np.array([1, 2, 3])
    np.testing.assert_array_equal(z[0], [1, 2, 3])


def test_dtype_str_in_a_v3_array_is_a_string_array():
    s = cs.MemoryStore()
    z = cs.create(2, dtype=str, store=s, zarr_format=3, fill_value="")
    z[:] = ["a", "bc"]
    assert cs.open_array(s, mode="r")[:].tolist() == ["a", "bc"]


# ------------------------------------------------------------------ 3. object fields
def test_object_field_fill_value_is_refused_before_writing():
    s = cs.MemoryStore()
    with pytest.raises(ValueError, match="object fields"):
        cs.full(3, fill_value=(0, "x"), dtype=[("a", "i4"), ("b", object)], store=s,
                object_codec=numcodecs.Pickle())
    assert len(s) == 0


def test_object_field_default_fill_is_null():
    s = cs.MemoryStore()
    cs.zeros(3, dtype=[("a", "i4"), ("b", object)], store=s, object_codec=numcodecs.Pickle())
    assert json.loads(s[".zarray"])["fill_value"] is None


@pytest.mark.parametrize("fill", ["default", None])
def test_object_field_array_reads_and_writes_chunks_not_yet_stored(monkeypatch, fill):
    """With the null fill value (the only one a structured dtype with object fields takes),
    missing chunks read as NumPy's empty element (None in object fields, zeros elsewhere)
    and a write of part of a new chunk fills the rest so; both raised TypeError."""
    monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", True, raising=False)
    dt = [("a", object), ("b", "i4")]
    kw = {} if fill == "default" else {"fill_value": None}
    z = cs.create(5, chunks=2, dtype=dt, object_codec=numcodecs.Pickle(), store={}, **kw)
    assert z.fill_value is None
    empty = np.empty(5, dtype=dt)
    assert z[:].tolist() == empty.tolist() == [(None, 0)] * 5
    z[1] = ("x", 1)
    z[4] = ({"k": 2}, 3)
    want = empty.copy()
    want[1], want[4] = ("x", 1), ({"k": 2}, 3)
    assert z[:].tolist() == want.tolist()
    assert z[0:2].tolist() == want[0:2].tolist()
    assert cs.open_array(z.store, mode="r").oindex[[4, 2, 1]].tolist() == \
        want[[4, 2, 1]].tolist()


def test_stored_fill_bytes_of_object_field_are_never_turned_into_objects():
    # A document another writer made with object addresses in its fill value.
    s = cs.MemoryStore()
    cs.zeros(3, dtype=[("a", "i4"), ("b", object)], store=s, object_codec=numcodecs.Pickle())
    meta = json.loads(s[".zarray"])
    meta["fill_value"] = base64.b64encode(bytes(range(16))).decode()
    s[".zarray"] = json.dumps(meta).encode()
    with pytest.raises(cs.MetadataError):
        cs.open_array(s, mode="r")


# ------------------------------------------------------------------ 4. unit-less datetimes
@pytest.mark.parametrize("dtype", ["M8", "m8", "<M8", np.datetime64, np.timedelta64])
def test_unit_less_datetime_is_refused(dtype):
    s = cs.MemoryStore()
    with pytest.raises(ValueError, match="no time unit"):
        cs.zeros(3, dtype=dtype, store=s)
    assert len(s) == 0


def test_datetime_with_unit_round_trips():
    z = cs.zeros(2, dtype="M8[D]")
    z[:] = np.array(["2020-01-01", "2021-06-30"], dtype="M8[D]")
    assert z.dtype == np.dtype("M8[D]")
    assert z[1] == np.datetime64("2021-06-30")


# ------------------------------------------------------------------ 5. 0-d iteration
def test_iterating_a_0d_array_raises_like_numpy():
    z = cs.zeros((), dtype="i4")
    with pytest.raises(TypeError, match="iteration over a 0-d array"):
        iter(np.zeros((), "i4")).__next__()  # the oracle's own message
    with pytest.raises(TypeError, match="iteration over a 0-d array"):
        list(z)


@pytest.mark.parametrize("shape, chunks", [((7,), (3,)), ((5, 4), (2, 3)), ((0, 3), (2, 2))])
def test_iteration_matches_numpy(shape, chunks):
    a = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
    z = cs.array(a, chunks=chunks)
    got = list(z)
    assert len(got) == len(a)
    for g, e in zip(got, a):
        np.testing.assert_array_equal(g, e)


# ------------------------------------------------------------------ 6. object elements
@pytest.mark.parametrize("codec", [numcodecs.MsgPack(), numcodecs.JSON(), numcodecs.Pickle()])
def test_object_element_assignment_of_lists_as_numpy(codec, monkeypatch):
    monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", True, raising=False)
    z = cs.empty(4, dtype=object, object_codec=codec, chunks=2)
    a = np.empty(4, dtype=object)
    for sel, value in [(0, [2, 4, 6, "baz"]), (1, "x"), (slice(2, 4), [[1, 2], [3, 4]]),
                       (3, [5]), (slice(1, 3), np.array([[7], "y"], dtype=object))]:
        z[sel] = value
        a[sel] = value
    assert z[0] == [2, 4, 6, "baz"]
    assert z[:].tolist() == a.tolist()


def test_object_element_assignment_of_ndarrays_in_a_ragged_array():
    z = cs.empty(3, dtype=object, object_codec=numcodecs.VLenArray(int))
    z[0] = np.array([4, 7])
    z[1:] = np.array([np.array([1]), np.array([2, 3, 4])], dtype=object)
    np.testing.assert_array_equal(z[0], [4, 7])
    assert [x.tolist() for x in z[:]] == [[4, 7], [1], [2, 3, 4]]


def test_object_element_assignment_in_2d():
    z = cs.empty((2, 2), dtype=object, object_codec=numcodecs.JSON())
    a = np.empty((2, 2), dtype=object)
    for arr in (z, a):
        arr[0] = [[1], [2, 3]]
        arr[1, 1] = [9]
        arr[1, 0] = None
    assert z[:].tolist() == a.tolist()


def test_non_object_arrays_still_refuse_shape_mismatches():
    z = cs.zeros(4, dtype="i4")
    with pytest.raises(ValueError, match="broadcast"):
        z[0] = [1, 2]


# ------------------------------------------------------------------ 7. array(read_only=True)
def test_array_read_only_writes_the_data_then_is_read_only():
    s = cs.MemoryStore()
    z = cs.array(np.arange(5), read_only=True, store=s, chunks=2)
    assert z.read_only
    np.testing.assert_array_equal(z[:], np.arange(5))
    with pytest.raises(cs.ReadOnlyError):
        z[0] = 1
    np.testing.assert_array_equal(cs.open_array(s, mode="r")[:], np.arange(5))


# ------------------------------------------------------------------ 8. SQLiteStore(":memory:")
def test_sqlite_memory_store_is_private_and_makes_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a, b = cs.SQLiteStore(":memory:"), cs.SQLiteStore(":memory:")
    a["x"] = b"1"
    assert "x" not in b and a["x"] == b"1" and a != b
    z = cs.zeros((6, 6), chunks=(1, 3), store=a, path="arr", dtype="i4")  # a row per thread

    def write(i):
        z[i, :] = i

    ts = [threading.Thread(target=write, args=(i,)) for i in range(6)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    np.testing.assert_array_equal(cs.open_array(a, path="arr", mode="r")[:],
                                  np.repeat(np.arange(6), 6).reshape(6, 6))
    assert list(tmp_path.iterdir()) == []
    a.close()
    b.close()
    assert list(tmp_path.iterdir()) == []


def test_sqlite_memory_store_refuses_to_pickle():
    s = cs.SQLiteStore(":memory:")
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(s)
    s.close()


@pytest.mark.parametrize("dtype, values", [(str, ["a", "bé", ""]), (bytes, [b"a", b"b\0", b""])])
def test_dtype_str_and_bytes_arrays_read_by_zarr_python(tmp_path, dtype, values):
    import zarr  # zarr-python, the oracle
    p = str(tmp_path / "s.zarr")
    cs.zeros(3, dtype=dtype, store=p, chunks=2)[:] = values
    assert zarr.open_array(p, mode="r")[:].tolist() == values


def test_empty_member_paths_are_this_group_and_the_root_as_zarr2():
    g = cs.group()
    a = g.create_group("a")
    assert g["/"] == g and g[""] == g
    assert a["/"] == g and a[""] == a
    with pytest.raises(KeyError):       # but "/" names no member to create or delete
        g.create_group("/")
    with pytest.raises(KeyError):
        del g["/"]
    assert "a" in g


@pytest.mark.parametrize("none", [[], (), None])
def test_a_falsy_compressor_is_no_compressor_as_zarr2(none):
    z = cs.create(4, compressor=none, store={}, dtype="i2")
    assert z.compressor is None
    z[...] = [1, 2, 3, 4]
    assert z.store["0"] == np.array([1, 2, 3, 4], dtype="<i2").tobytes()


def test_zarr2_constructor_keywords_are_taken(tmp_path):
    """zarr-python 2's Array/Group/Attributes/LMDBStore/FSStore keywords (its own test suite
    builds its objects with them): taken where they change nothing here, refused where
    ignoring them would look in the wrong place."""
    from chunkstore.hierarchy.attrs import Attributes
    st = cs.MemoryStore()
    cs.zeros(4, store=st, dtype="i2")[...] = 7
    a = cs.Array(st, cache_attrs=False, partial_decompress=True, zarr_version=2,
                 meta_array=np.empty(0), chunk_store=None)
    assert list(a[...]) == [7, 7, 7, 7]
    with pytest.raises(ValueError, match="separate chunk_store"):
        cs.Array(st, chunk_store=cs.MemoryStore())
    with pytest.raises(ValueError, match="disagree"):
        cs.Array(st, zarr_format=3, zarr_version=2)
    g = cs.group(cs.MemoryStore())
    assert cs.Group(g.store, cache_attrs=False, zarr_version=2, chunk_store=None) == g
    with pytest.raises(ValueError, match="separate chunk_store"):
        cs.Group(g.store, chunk_store={})
    attrs = Attributes(st, cache=False)                  # key defaults to ".zattrs"
    attrs["x"] = 1
    assert Attributes(st).asdict() == {"x": 1} and a.attrs["x"] == 1


def test_zarr2_store_keywords_are_not_backend_options(tmp_path):
    pytest.importorskip("lmdb")
    lm = cs.storage.LMDBStore(str(tmp_path / "l.lmdb"), buffers=True)
    lm["k"] = b"v"
    assert lm["k"] == b"v"
    lm.close()
    fs = cs.storage.FSStore(str(tmp_path / "f"), check=True, create=True, key_separator="/",
                            exceptions=(KeyError,))
    z = cs.zeros((4, 4), chunks=(2, 2), store=fs, dtype="i1")
    z[...] = 1
    assert sorted(os.listdir(tmp_path / "f" / "0")) == ["0", "1"]   # "/" separator
    assert fs.storage_options == {}


def test_init_array_takes_zarr2s_chunk_store_and_transformers_keywords():
    from chunkstore.hierarchy.creation import init_array
    store: dict = {}
    init_array(store, (4,), chunks=2, chunk_store=None, storage_transformers=())
    assert sorted(store) == [".zarray"]
    for bad in (dict(chunk_store={}), dict(storage_transformers=[{"type": "x"}])):
        other: dict = {}
        with pytest.raises(ValueError, match="not supported"):
            init_array(other, (4,), **bad)
        assert other == {}


def test_chunk_store_is_the_store_as_zarr2():
    st = cs.MemoryStore()
    g = cs.group(st)
    a = g.zeros("a", shape=4)
    assert a.chunk_store is a.store and g.chunk_store is g.store


def test_a_store_written_for_zarr2_gets_the_contexts_its_getitems_requires():
    class Zarr2Store(cs.MemoryStore):
        """A custom store of zarr-python 2's era: getitems(keys, *, contexts)."""

        seen: list = []

        def getitems(self, keys, *, contexts):
            self.seen.append(dict(contexts))
            return {k: self[k] for k in keys if k in self}

    st = Zarr2Store()
    z = cs.zeros(8, chunks=2, store=st, dtype="i2")
    z[...] = np.arange(8)
    np.testing.assert_array_equal(z[...], np.arange(8))
    assert st.seen and all(v == {} for c in st.seen for v in c.values())


def test_an_object_codec_for_a_non_object_dtype_warns_as_zarr2():
    with pytest.warns(UserWarning, match="only needed for object arrays"):
        z = cs.create(10, chunks=5, dtype="i4", object_codec=numcodecs.JSON(), store={})
    assert z.filters is None                      # and it is not used


def test_save_takes_the_format_keywords_as_zarr2(tmp_path):
    cs.save_group(str(tmp_path / "g"), zarr_version=2, a=np.arange(3))
    g = cs.open_group(str(tmp_path / "g"), mode="r")
    assert g.array_keys() == ["a"] and g.metadata.zarr_format == 2   # not an array "zarr_version"
    cs.save(str(tmp_path / "a"), np.arange(2), zarr_format=3)
    assert cs.open_array(str(tmp_path / "a"), mode="r").metadata.zarr_format == 3
    with pytest.raises(ValueError, match="at least one array"):
        cs.save_group(str(tmp_path / "e"), zarr_version=2)
    with pytest.raises(ValueError, match="at least one array"):
        cs.save(str(tmp_path / "e"), zarr_version=2)


def test_copy_from_h5py_groups_and_datasets_as_zarr2(tmp_path):
    """An h5py group is copied as a group (it was written as a junk 0-d array), its
    datasets block by block with their chunks and attributes, strings with an object
    codec; the name defaults to the h5py object's own."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "s.h5", "w") as f:
        f.create_dataset("foo/bar", data=np.arange(10), chunks=(5,))
        f["foo/bar"].attrs["units"] = "m"
        f["foo"].attrs["a"] = np.int64(1)
        f.create_dataset("foo/s", data=np.array(["x", "yy"], dtype=object),
                         dtype=h5py.string_dtype())
        g = cs.group()
        assert cs.copy(f["foo/bar"], g) == (1, 0, 80)          # named "bar", as h5py's
        np.testing.assert_array_equal(g["bar"][...], np.arange(10))
        assert g["bar"].chunks == (5,) and g["bar"].attrs.asdict() == {"units": "m"}
        assert cs.copy(f["foo"], g)[0] == 3
        assert isinstance(g["foo"], cs.Group) and sorted(g["foo"].keys()) == ["bar", "s"]
        assert g["foo"].attrs.asdict() == {"a": 1}
        # (UTF-8 strings come in as str, as `chunkstore convert` reads them: h5py hands
        # them out as bytes, which zarr-python 2 keeps; README "Differences")
        assert list(g["foo/s"][...]) == ["x", "yy"]
        g2 = cs.group()
        cs.copy_all(f, g2)
        np.testing.assert_array_equal(g2["foo/bar"][...], np.arange(10))


def test_an_object_codec_given_only_as_a_filter_is_deprecated_as_zarr2():
    with pytest.warns(FutureWarning, match="first filter .* deprecated"):
        z = cs.create(10, chunks=3, dtype=object, filters=[numcodecs.MsgPack()], store={})
    z[0] = {"a": 1}
    assert z[0] == {"a": 1}
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # chunkstore's own plans do not warn
        cs.zeros_like(z)
        cs.create_array({}, shape=(3,), dtype=str, zarr_format=2)
        cs.array(np.array(["x"], dtype=object), object_codec=numcodecs.VLenUTF8(), store={})


def test_copy_into_h5py_as_zarr2(tmp_path):
    """copy/copy_all into an h5py file: groups as groups, arrays as datasets with shape,
    dtype, chunks and fill value, strings as h5py strings, attributes, if_exists as for a
    chunkstore destination; anything but a group as dest is a ValueError."""
    h5py = pytest.importorskip("h5py")
    src = cs.group()
    src.create_group("foo/bar").array("baz", np.arange(100), chunks=(16,), fill_value=7)
    src["foo"].attrs["a"] = 1
    src.array("spam", np.array(["x", "yy"], dtype=object), object_codec=numcodecs.VLenUTF8())
    with h5py.File(tmp_path / "d.h5", "w") as f:
        assert cs.copy(src["foo/bar/baz"], f) == (1, 0, 800)
        np.testing.assert_array_equal(f["baz"][...], np.arange(100))
        assert f["baz"].chunks == (16,) and f["baz"].fillvalue == 7
        cs.copy(src["spam"], f)
        assert list(f["spam"][...]) == [b"x", b"yy"]
        assert cs.copy(src["foo"], f)[0] == 3
        assert list(f["foo/bar"]) == ["baz"] and f["foo"].attrs["a"] == 1
        with pytest.raises(cs.CopyError, match="already exists"):
            cs.copy(src["spam"], f)
        assert cs.copy(src["spam"], f, if_exists="skip") == (0, 1, 0)
        cs.copy(src["foo/bar/baz"], f, name="baz", if_exists="replace",
                compression="gzip", compression_opts=9)
        assert f["baz"].compression == "gzip"
        cs.copy(src["foo/bar/baz"], f, name="contiguous", chunks=None)  # no h5py chunks:
        assert f["contiguous"].chunks is None                            # blocks by the source's
        np.testing.assert_array_equal(f["contiguous"][...], np.arange(100))
        g2 = f.create_group("all")
        cs.copy_all(src, g2)
        assert sorted(g2) == ["foo", "spam"]
        np.testing.assert_array_equal(g2["foo/bar/baz"][...], np.arange(100))
        with pytest.raises(ValueError, match="dest must be a group"):
            cs.copy(src["spam"], f["baz"])
        # skip_initialized needs a chunk count h5py has not: refused, as zarr-python 2
        # refuses it (it replaced the dataset there, losing its data)
        f.create_dataset("kept", data=np.arange(100, 200))
        with pytest.raises(ValueError, match="skip_initialized"):
            cs.copy(src["foo/bar/baz"], f, name="kept", if_exists="skip_initialized")
        np.testing.assert_array_equal(f["kept"][...], np.arange(100, 200))
        # h5py to h5py keeps the dataset's filters, as zarr-python 2 does
        f.create_dataset("gz", data=np.arange(50, dtype="i2"), chunks=(10,),
                         compression="gzip", compression_opts=1, shuffle=True)
        g3 = f.create_group("h5copy")
        cs.copy(f["gz"], g3)
        assert (g3["gz"].compression, g3["gz"].compression_opts, g3["gz"].shuffle) == \
            ("gzip", 1, True)
        np.testing.assert_array_equal(g3["gz"][...], np.arange(50))


def test_init_array_default_fill_value_is_null_as_zarr2():
    # zarr-python 2's init_array writes "fill_value": null when none is given (create's
    # default is 0); it wrote 0.0
    import json

    from chunkstore.hierarchy.creation import init_array

    store = {}
    init_array(store, shape=(4,), chunks=(2,), dtype="f8")
    assert json.loads(store[".zarray"])["fill_value"] is None
    assert json.loads(cs.create((4,), store={}, dtype="f8").store[".zarray"])[
        "fill_value"] == 0.0


def test_attribute_names_complete_in_ipython():
    z = cs.zeros(3, store={})
    z.attrs.update({"b": 1, "a": 2})
    assert z.attrs._ipython_key_completions_() == ["a", "b"]


def test_dtype_metadata_of_a_field_is_left_out():
    """h5py attaches its string encoding to a compound dataset's fields (dtype metadata):
    such a dtype made Zarr v2 arrays fail ("invalid structured dtype field '|S3'"). The
    metadata is left out (no Zarr document holds it); the values are the same."""
    field = np.dtype("S3", metadata={"h5py_encoding": "ascii"})
    dt = np.dtype([("a", "<i4"), ("s", field)])
    data = np.array([(1, b"ab"), (2, b"xyz")], dtype=dt)
    for fmt in (2, 3):
        z = cs.array(data, store={}, zarr_format=fmt)
        assert z.dtype == np.dtype([("a", "<i4"), ("s", "S3")])
        assert z.dtype.fields["s"][0].metadata is None
        assert z[:].tolist() == data.tolist()


@pytest.mark.parametrize("how", ["create", "open_array", "open_group", "group", "open",
                                 "open array"])
def test_a_separate_chunk_store_is_refused_by_every_entry_point(how):
    """zarr-python 2 keeps chunks in chunk_store= apart from the metadata; create(),
    open_array(), open_group(), group() and open() ignored it: such an array's chunks read
    as the fill value, and writes went to the metadata store. Only Array() refused it."""
    meta, chunks = cs.MemoryStore(), cs.MemoryStore()
    call = {"create": lambda: cs.create(3, store=meta, chunk_store=chunks),
            "open_array": lambda: cs.open_array(meta, mode="w", shape=3, chunk_store=chunks),
            "open_group": lambda: cs.open_group(meta, chunk_store=chunks),
            "group": lambda: cs.group(meta, chunk_store=chunks),
            "open": lambda: cs.open(meta, mode="w", chunk_store=chunks),
            "open array": lambda: cs.open(meta, mode="w", shape=3, chunk_store=chunks)}[how]
    with pytest.raises(ValueError, match="separate chunk_store is not supported"):
        call()
    assert len(meta) == 0 and len(chunks) == 0
