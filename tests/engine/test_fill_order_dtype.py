"""Regression tests for issue 25: all-fill chunks of object/string arrays are dropped (4),
``Array.metadata`` shows the current attributes (5), a 1-d array keeps the order it was
created with (8), and ``array()`` keeps the data's dtype when dtype is None (9)."""

import pickle

import numcodecs
import numpy as np
import pytest

import chunkstore as cs


def chunk_keys(store):
    """The chunk keys of an array at the root of a dict store (no metadata documents)."""
    return sorted(k for k in store if k not in (".zarray", ".zattrs", "zarr.json"))


# --------------------------------------------------------------------- 4: object fill chunks

@pytest.mark.parametrize("zarr_format,fill", [(2, ""), (2, "x"), (3, ""), (3, "x")])
def test_string_all_fill_chunk_is_not_stored(zarr_format, fill):
    store = {}
    z = cs.create_array(store, shape=(6,), chunks=(2,), dtype=str, fill_value=fill,
                        zarr_format=zarr_format)
    z[:] = [fill, fill, "a", fill, "b", "c"]
    assert chunk_keys(store) == (["1", "2"] if zarr_format == 2 else ["c/1", "c/2"])
    assert z[:].tolist() == [fill, fill, "a", fill, "b", "c"]
    z[2:4] = fill  # a stored chunk overwritten with the fill value is deleted
    assert len(chunk_keys(store)) == 1
    assert z[:].tolist() == [fill] * 4 + ["b", "c"]


def test_vlen_utf8_v2_create_all_fill_chunks_dropped():
    store = {}
    z = cs.create(shape=(4,), chunks=(2,), dtype=object, object_codec=numcodecs.VLenUTF8(),
                  fill_value="", store=store)
    z[:] = ["", "", "x", ""]
    assert chunk_keys(store) == ["1"]
    z.set_coordinate_selection([2], [""])
    assert chunk_keys(store) == []
    assert z[:].tolist() == [""] * 4


def test_vlen_utf8_v2_fill_none_keeps_chunks():
    # fill_value null (zarr-python 2): no fill value, so no chunk is ever all fill; missing
    # chunks read as None, which a stored chunk of "" or None does not.
    store = {}
    z = cs.create(shape=(4,), chunks=(2,), dtype=object, object_codec=numcodecs.VLenUTF8(),
                  fill_value=None, store=store)
    assert z.fill_value is None
    z[:] = ["", "", None, None]
    assert chunk_keys(store) == ["0", "1"]


@pytest.mark.parametrize("dtype, zero", [("f8", 0.0), ("i2", 0), ("M8[s]", "NaT"),
                                         ("S3", b"")])
def test_v2_null_fill_stores_every_chunk(dtype, zero):
    """fill_value null (Zarr v2): no fill value, so a chunk of zeros (NaT, b"") is data, not
    empty. Left out (write_empty_chunks=False deleted it as chunkstore's read fill),
    zarr-python 2 read uninitialised memory there: garbage where zeros were written."""
    store = {}
    z = cs.create(shape=(6,), chunks=(2,), dtype=dtype, fill_value=None, store=store)
    assert z.fill_value is None
    z[:] = np.array([zero] * 6, dtype=dtype)
    assert chunk_keys(store) == ["0", "1", "2"]
    z[0:2] = np.array([zero] * 2, dtype=dtype)   # rewritten as all "fill": still stored
    z.resize((3,))
    assert chunk_keys(store) == ["0", "1"]
    np.testing.assert_array_equal(z[:], np.array([zero] * 3, dtype=dtype))


def test_vlen_bytes_all_fill_chunk_dropped():
    store = {}
    z = cs.create(shape=(4,), chunks=(2,), dtype=bytes, fill_value=b"", store=store)
    z[:] = [b"", b"", b"x", b""]
    assert chunk_keys(store) == ["1"]


def test_string_sharded_and_trimmed_all_fill_chunks_dropped():
    store = {}
    z = cs.create_array(store, shape=(8,), chunks=(2,), shards=(4,), dtype=str,
                        zarr_format=3)
    z[:] = ["a"] * 8
    z[0:4] = ""
    assert chunk_keys(store) == ["c/1"]
    store = {}
    z = cs.create_array(store, shape=(4,), chunks=(4,), dtype=str, zarr_format=3)
    z[:] = ["", "", "a", "b"]
    z.resize((2,))  # the cut chunk is all fill: deleted
    assert chunk_keys(store) == []


def test_string_write_empty_chunks_true_keeps_them():
    store = {}
    z = cs.create_array(store, shape=(4,), chunks=(2,), dtype=str, zarr_format=3,
                        config={"write_empty_chunks": True})
    z[:] = ""
    assert chunk_keys(store) == ["c/0", "c/1"]


def test_object_all_fill_compares_values_of_the_same_type():
    from chunkstore.engine.write import object_all_fill
    chunk = np.empty(3, dtype=object)
    chunk[:] = ["", np.str_(""), ""]
    assert object_all_fill(chunk, "")
    chunk[1] = None
    assert not object_all_fill(chunk, "")
    chunk[:] = [0, 0, False]
    assert not object_all_fill(chunk, 0)
    chunk[:] = [0, 0, 0]
    assert object_all_fill(chunk, 0) and not object_all_fill(chunk, None)
    chunk[0] = np.zeros(2)  # an element with elementwise ==
    assert not object_all_fill(chunk, 0)


def test_string_all_fill_like_zarr_python():
    zarr = pytest.importorskip("zarr")
    for fmt in (2, 3):
        ours, theirs = {}, zarr.storage.MemoryStore()
        data = ["", "", "a", "b"]
        cs.create_array(ours, shape=(4,), chunks=(2,), dtype=str, fill_value="",
                        zarr_format=fmt)[:] = data
        zarr.create_array(theirs, shape=(4,), chunks=(2,), dtype=str, fill_value="",
                          zarr_format=fmt)[:] = np.array(data, dtype=object)
        assert chunk_keys(ours) == chunk_keys(theirs._store_dict)


# --------------------------------------------------------------------- 5: metadata attributes

@pytest.mark.parametrize("zarr_format", [2, 3])
def test_metadata_shows_current_attributes(zarr_format):
    store = {}
    z = cs.create_array(store, shape=(3,), dtype="i4", zarr_format=zarr_format,
                        attributes={"q": 1})
    assert z.metadata.attributes == {"q": 1}
    z.attrs["a"] = 1
    z.update_attributes({"b": 2})
    want = {"q": 1, "a": 1, "b": 2}
    assert z.metadata.attributes == want
    assert z.metadata.to_dict()["attributes"] == want
    # another handle's update shows too (attrs are read from the store)
    cs.open_array(store, mode="r+").attrs["c"] = 3
    assert z.metadata.to_dict()["attributes"] == {**want, "c": 3}
    # v2 attributes stay in .zattrs, not in .zarray
    if zarr_format == 2:
        assert b"attributes" not in store[".zarray"]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_group_metadata_shows_current_attributes(zarr_format):
    g = cs.create_group({}, zarr_format=zarr_format)
    g.attrs["a"] = 1
    g.update_attributes({"b": 2})
    assert g.metadata.to_dict()["attributes"] == {"a": 1, "b": 2}


def test_metadata_attributes_like_zarr_python():
    zarr = pytest.importorskip("zarr")
    for fmt in (2, 3):
        ours = cs.create_array({}, shape=(3,), dtype="i4", zarr_format=fmt)
        theirs = zarr.create_array(zarr.storage.MemoryStore(), shape=(3,), dtype="i4",
                                   zarr_format=fmt)
        for a in (ours, theirs):
            a.attrs["x"] = [1, 2]
            a.update_attributes({"y": "z"})
        assert ours.metadata.to_dict()["attributes"] == theirs.metadata.to_dict()["attributes"]


def test_create_hierarchy_from_v2_metadata_keeps_attributes():
    src = cs.create_array({}, shape=(3,), dtype="i4", zarr_format=2, attributes={"u": "m"})
    out = dict(cs.create_hierarchy(store={}, nodes={"a": src.metadata}))
    assert out["a"].attrs.asdict() == {"u": "m"}


# --------------------------------------------------------------------- 8: 1-d order F

@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("shape", [(4,), ()], ids=["1d", "0d"])
def test_create_array_order_f_low_dims(zarr_format, shape):
    z = cs.create_array({}, shape=shape, dtype="i4", zarr_format=zarr_format, order="F")
    assert z.order == "F" and z.config.order == "F"
    z2 = cs.create_array({}, shape=shape, dtype="i4", zarr_format=zarr_format,
                         config={"order": "F"})
    assert z2.order == "F"
    assert pickle.loads(pickle.dumps(z)).order == "F"
    assert cs.zeros_like(z, store={}).order == "F"
    z[...] = 5
    assert np.all(z[...] == 5)


def test_order_c_is_kept_and_v3_reopen_is_c():
    z = cs.create_array({}, shape=(4,), dtype="i4", zarr_format=3, order="C")
    assert z.order == "C"
    z = cs.create_array({}, shape=(4,), dtype="i4", zarr_format=3, order="F")
    # v3 metadata records no order for 1-d: a new handle has the default (zarr-python 3)
    assert cs.open_array(z.store, mode="r").order == "C"
    assert cs.open_array(z.store, mode="r", order="F").order == "F"
    two = cs.create_array({}, shape=(4, 4), dtype="i4", zarr_format=3, order="F")
    assert two.order == "F" and cs.open_array(two.store, mode="r").order == "F"


def test_config_order_like_zarr_python_1d():
    zarr = pytest.importorskip("zarr")
    for fmt in (2, 3):
        theirs = zarr.create_array(zarr.storage.MemoryStore(), shape=(4,), dtype="i4",
                                   zarr_format=fmt, config={"order": "F"})
        ours = cs.create_array({}, shape=(4,), dtype="i4", zarr_format=fmt,
                               config={"order": "F"})
        if fmt == 3:
            assert ours.order == theirs.order == "F"
        else:
            assert ours.order == "F"


# --------------------------------------------------------------------- 9: dtype=None

BIG = 2 ** 53 + 1


@pytest.mark.parametrize("data,dtype", [
    (np.array([BIG, 3]), np.dtype("i8")),
    ([BIG, 3], np.dtype("i8")),
    (np.array([2 ** 64 - 1, 1], dtype="u8"), np.dtype("u8")),
    (np.array([1, 2], dtype="i2"), np.dtype("i2")),
    ([True, False], np.dtype(bool)),
], ids=["int64", "list", "uint64", "int16", "bool"])
def test_array_dtype_none_keeps_the_data_dtype(data, dtype):
    for kw in ({}, {"dtype": None}):
        z = cs.array(data, **kw)
        assert z.dtype == dtype
        assert z[:].tolist() == np.asarray(data).tolist()


def test_array_dtype_none_from_an_array_and_in_a_group():
    src = cs.array(np.array([BIG, 3]))
    z = cs.array(src, dtype=None)
    assert z.dtype == np.dtype("i8") and z[0] == BIG
    g = cs.group()
    a = g.array("x", [BIG, 3], dtype=None)
    assert a.dtype == np.dtype("i8") and a[0] == BIG


def test_like_creators_dtype_none_keep_dtype():
    u = np.array([2 ** 64 - 1], dtype="u8")
    a = cs.array(np.array([BIG], dtype="i8"))
    for src, dt in ((u, np.dtype("u8")), (a, np.dtype("i8"))):
        for like, kw in ((cs.zeros_like, {}), (cs.ones_like, {}), (cs.empty_like, {}),
                         (cs.full_like, {"fill_value": 7})):
            assert like(src, store={}, **kw).dtype == dt
            assert like(src, store={}, dtype=None, **kw).dtype == dt
        assert cs.open_like(src, {}, mode="w", dtype=None).dtype == dt


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_create_array_data_keeps_dtype(zarr_format):
    z = cs.create_array({}, data=np.array([BIG, 3]), zarr_format=zarr_format)
    assert z.dtype == np.dtype("i8") and z[0] == BIG
    z = cs.create_array({}, data=[BIG, 3], dtype=None, zarr_format=zarr_format)
    assert z.dtype == np.dtype("i8") and z[0] == BIG


@pytest.mark.parametrize("dtype", ["M8[ns]", "m8[s]"])
def test_a_v2_time_array_with_a_null_fill_reads_missing_elements_as_nat(tmp_path, dtype):
    """fill_value null in a .zarray: missing elements of a datetime/timedelta array read as
    NaT, as zarr-python 3 reads them (they read as zero: the epoch, a real date)."""
    zarr = pytest.importorskip("zarr")
    path = str(tmp_path / "t.zarr")
    a = cs.create_array(path, shape=(4,), chunks=(2,), dtype=dtype, fill_value=None,
                        zarr_format=2)
    a[0] = np.array(5, dtype=dtype)
    want = np.array([5, "NaT", "NaT", "NaT"], dtype=dtype)
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[:], want)
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[:], want)
    # a chunk of NaT is kept: with no fill value, zarr-python 2 reads a missing chunk as
    # uninitialised memory (test_v2_null_fill_stores_every_chunk)
    a[0:2] = np.array(["NaT", "NaT"], dtype=dtype)
    assert a.nchunks_initialized == 1


@pytest.mark.parametrize("kind", ["v2", "v3", "sharded"])
def test_edge_chunks_keep_their_data_through_fill_value_changes(tmp_path, kind):
    """A new fill value resets the padding of stored edge chunks; one whose values inside
    the shape equalled the new fill value was then all fill value and dropped (with
    write_empty_chunks=False, the default), and the next fill value change made those
    written elements read as it. A fill value change keeps the chunks it rewrites."""
    def make():
        d = str(tmp_path / f"{kind}-{len(list(tmp_path.iterdir()))}")
        if kind == "v2":
            return cs.create(shape=(5,), chunks=(3,), dtype="i4", fill_value=0, store=d)
        kw = {"shards": (6,)} if kind == "sharded" else {}
        return cs.create_array(d, shape=(5,), chunks=(3,), dtype="i4", fill_value=0, **kw)

    z = make()
    z[:] = 7
    z.fill_value = 7
    assert z[:].tolist() == [7] * 5
    z.fill_value = 1
    assert z[:].tolist() == [7] * 5
    # (a shrink's rewrite of a boundary chunk is a write: all fill value, it is dropped,
    # as any chunk written so; README, "write_empty_chunks")
    z = make()
    z[:] = [7, 7, 5, 4, 4]
    z.fill_value = 7
    z.resize(2)
    assert z[:].tolist() == [7, 7]
    z.resize(4)
    assert z[:].tolist() == [7, 7, 7, 7]
