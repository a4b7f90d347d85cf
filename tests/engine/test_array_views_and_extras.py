"""zarr-python 2 Array APIs its users rely on (issue 11): islice, digest, views, astype,
info_items, the fill_value setter, F-order reads, sub-array dtypes, b"" structured fills."""

import hashlib
import json
import pickle

import numcodecs
import numpy as np
import pytest

import chunkstore as cs


class CountingStore(dict):
    def __init__(self, *a):
        super().__init__(*a)
        self.reads = []

    def __getitem__(self, k):
        self.reads.append(k)
        return super().__getitem__(k)


@pytest.fixture
def z():
    a = cs.zeros(100, chunks=10, dtype="i4", store=CountingStore())
    a[:90] = np.arange(90, dtype="i4") - 50
    return a


def _expected(n=100):
    d = np.zeros(n, dtype="i4")
    d[:90] = np.arange(90) - 50
    return d


class TestIslice:
    @pytest.mark.parametrize("start,end", [(None, None), (0, 100), (5, 37), (10, 20),
                                           (95, 200), (50, 50), (60, 40)])
    def test_matches_numpy(self, z, start, end):
        got = list(z.islice(start, end))
        want = list(_expected()[start:end])
        assert got == want and all(isinstance(v, np.int32) for v in got)

    def test_2d_rows_and_one_read_per_chunk(self):
        d = np.arange(60).reshape(12, 5)
        a = cs.array(d, chunks=(4, 5), store=CountingStore())
        a.store.reads.clear()
        rows = list(a.islice(1, 11))
        np.testing.assert_array_equal(np.array(rows), d[1:11])
        assert sorted(a.store.reads) == ["0.0", "1.0", "2.0"]

    @pytest.mark.parametrize("bad", [-1, 1.5, "3"])
    def test_bad_bounds(self, z, bad):
        with pytest.raises(ValueError, match="nonnegative integer"):
            list(z.islice(bad))
        with pytest.raises(ValueError, match="nonnegative integer"):
            list(z.islice(0, bad))

    def test_0d(self):
        with pytest.raises(TypeError, match="0-d"):
            list(cs.zeros(()).islice())


class TestDigest:
    def _by_hand(self, a, name="sha1"):
        h = hashlib.new(name)
        for i in range(a.nchunks):
            h.update(dict(a.store).get(str(i), b""))
        h.update(a.store[".zarray"])
        h.update(dict(a.store).get(".zattrs", b""))
        return h

    def test_definition(self, z):
        assert z.digest() == self._by_hand(z).digest()
        assert z.hexdigest() == self._by_hand(z).hexdigest()
        assert z.hexdigest("md5") == self._by_hand(z, "md5").hexdigest()
        assert len(z.hexdigest()) == 40 and isinstance(z.hexdigest(), str)

    def test_changes_with_content_and_attrs(self, z):
        before = z.hexdigest()
        z.attrs["foo"] = "bar"
        with_attrs = z.hexdigest()
        assert with_attrs != before and with_attrs == self._by_hand(z).hexdigest()
        z[95] = 1
        assert z.hexdigest() not in (before, with_attrs)

    def test_same_content_same_digest(self, z, tmp_path):
        other = cs.open_array(str(tmp_path / "o.zarr"), mode="w", shape=100, chunks=10,
                              dtype="i4")
        other[:90] = np.arange(90, dtype="i4") - 50
        assert other.hexdigest() == z.hexdigest()
        nested = cs.zeros((4, 4), chunks=(2, 2), dimension_separator="/", store={})
        nested[0, 0] = 1
        h = hashlib.sha1()
        for k in ["0/0", "0/1", "1/0", "1/1"]:
            h.update(nested.store.get(k, b""))
        h.update(nested.store[".zarray"])
        assert nested.hexdigest() == h.hexdigest()

    def test_zarr2_expected_digests(self):
        # zarr-python 2.18's own test_hexdigest: arrays it created (its .zarray documents,
        # byte for byte: no dimension_separator, fill_value null, Zlib level 1), and its
        # expected digests.
        def zarr2(shape, chunks, dtype):
            meta = dict(zarr_format=2, shape=list(shape), chunks=list(chunks), dtype=dtype,
                        compressor={"id": "zlib", "level": 1}, fill_value=None, order="C",
                        filters=None)
            doc = json.dumps(meta, indent=4, sort_keys=True, ensure_ascii=True,
                             separators=(",", ": ")).encode("ascii")
            return cs.open_array({".zarray": doc})
        found = [zarr2((1050,), (100,), "<i4").hexdigest(),
                 zarr2((1050,), (100,), "<f4").hexdigest(),
                 zarr2((20, 35), (10, 10), "<i4").hexdigest()]
        z = zarr2((1050,), (100,), "<i4")
        z[200:400] = np.arange(200, 400, dtype="i4")
        found.append(z.hexdigest())
        z = zarr2((1050,), (100,), "<i4")
        z.attrs["foo"] = "bar"
        found.append(z.hexdigest())
        assert found == ["063b02ff8d9d3bab6da932ad5828b506ef0a6578",
                         "f97b84dc9ffac807415f750100108764e837bb82",
                         "c7190ad2bea1e9d2e73eaa2d3ca9187be1ead261",
                         "14470724dca6c1837edddedc490571b6a7f270bc",
                         "2a1046dd99b914459b3e86be9dde05027a07d209"]

    def test_v3(self):
        a = cs.create_array({}, shape=(10,), chunks=(5,), shards=(10,), dtype="u1")
        a[:] = 1
        h = hashlib.sha1(a.store["c/0"] + a.store["zarr.json"])
        assert a.hexdigest() == h.hexdigest()


class TestViews:
    def test_astype(self, z):
        a = z.astype("f8")
        assert a.dtype == np.float64 and a.read_only and not z.read_only
        np.testing.assert_array_equal(a[:], _expected().astype("f8"))
        assert a[:].dtype == np.float64
        assert isinstance(a.filters[0], numcodecs.AsType)
        with pytest.raises(cs.ReadOnlyError):
            a[0] = 1
        assert z.dtype == np.int32 and z.filters is None  # the base is untouched
        assert json.loads(z.store[".zarray"])["dtype"] == "<i4"

    def test_astype_v3_refused(self):
        a = cs.create_array({}, shape=(4,), chunks=(2,), dtype="i4")
        with pytest.raises(TypeError, match="Zarr v2"):
            a.astype("f8")

    def test_v3_views(self):
        a = cs.create_array({}, shape=(8,), chunks=(2,), shards=(4,), dtype="i4")
        a[:] = np.arange(8) - 4
        np.testing.assert_array_equal(a.view(dtype="u4")[:],
                                      (np.arange(8, dtype="i4") - 4).view("u4"))
        np.testing.assert_array_equal(a.view(shape=12, fill_value=5)[:],
                                      np.r_[np.arange(8) - 4, [5] * 4])
        with pytest.raises(TypeError, match="sharded"):
            a.view(chunks=4)

    def test_dtype_view_reinterprets_bytes(self, z):
        v = z.view(dtype="u4")
        np.testing.assert_array_equal(v[:], _expected().view("u4"))
        b = z.view(dtype="u1", shape=400, chunks=40)
        np.testing.assert_array_equal(b[:], _expected().view("u1"))

    def test_fill_value_and_filters(self, z):
        np.testing.assert_array_equal(z.view(fill_value=-1)[85:],
                                      np.r_[_expected()[85:90], [-1] * 10])
        np.testing.assert_array_equal(z.view(shape=120)[:], np.r_[_expected(), [0] * 20])
        d = z.view(filters=[numcodecs.Delta("i4")])
        np.testing.assert_array_equal(d[:10], np.cumsum(_expected()[:10]))
        f = cs.full(10, np.nan, chunks=5)
        with pytest.raises(ValueError, match="pass fill_value"):
            f.view(dtype="i8")
        np.testing.assert_array_equal(f.view(dtype="i8", fill_value=3)[:], [3] * 10)

    def test_writes_go_through_unless_read_only(self, z):
        v = z.view()
        v[95:] = 7
        np.testing.assert_array_equal(z[95:], [7] * 5)
        r = z.view(read_only=True)
        with pytest.raises(cs.ReadOnlyError):
            r[0] = 1
        assert z.view(read_only=True).view()._read_only  # a view of a view inherits

    @pytest.mark.parametrize("wec", [True, False])
    @pytest.mark.parametrize("sharded", [False, True])
    def test_write_through_a_shorter_view_keeps_elements_past_its_end(self, wec, sharded):
        # chunk 1 holds elements 4..7; a view of shape 6 ends inside it: a write covering
        # the view's part of that chunk must not replace the chunk whole (6 and 7 were lost)
        kw = {"shards": (8,)} if sharded else {}
        z = cs.create_array({}, shape=(10,), chunks=(4,), dtype="i4", config={"write_empty_chunks": wec},
                            zarr_format=3 if sharded else 2, **kw)
        z[:] = np.arange(1, 11)
        v = z.view(shape=(6,))
        v[4:6] = 0
        np.testing.assert_array_equal(z[:], [1, 2, 3, 4, 0, 0, 7, 8, 9, 10])
        v[:] = np.arange(-6, 0)  # an array over the whole view
        np.testing.assert_array_equal(z[:], [-6, -5, -4, -3, -2, -1, 7, 8, 9, 10])
        # 2-d: the view ends inside chunks on both axes
        m = cs.zeros((6, 6), chunks=(4, 4), dtype="f8", store={}, write_empty_chunks=wec)
        m[:] = 5
        mv = m.view(shape=(5, 3))
        mv[...] = 1
        want = np.full((6, 6), 5.0)
        want[:5, :3] = 1
        np.testing.assert_array_equal(m[:], want)

    def test_metadata_changes_refused(self, z):
        v = z.view(shape=50)
        before = dict(z.store)
        for change in (lambda: v.resize(20), lambda: v.append(np.zeros(3, "i4")),
                       lambda: setattr(v, "fill_value", 3)):
            with pytest.raises(PermissionError, match="views"):
                change()
        assert dict(z.store) == before and z.shape == (100,)

    def test_pickle(self, z):
        v = z.view(dtype="u4", fill_value=9, shape=110)
        p = pickle.loads(pickle.dumps(v))
        assert isinstance(p, cs.Array) and p.shape == (110,) and p.dtype == np.uint32
        np.testing.assert_array_equal(p[:], v[:])


class TestMetadataExtras:
    def test_info_items(self, z):
        items = z.info_items()
        assert items == z.info.items
        assert dict(items)["Data type"] == "int32" and dict(items)["Shape"] == "(100,)"

    def test_fill_value_setter_persists(self, z):
        z.fill_value = -7
        assert z.fill_value == -7
        np.testing.assert_array_equal(z[90:], [-7] * 10)   # missing chunk: new fill
        np.testing.assert_array_equal(z[:90], _expected()[:90])
        reopened = cs.open_array(z.store, mode="r")
        assert reopened.fill_value == -7 and json.loads(z.store[".zarray"])["fill_value"] == -7
        before = z.store[".zarray"]
        with pytest.raises(ValueError, match="fill_value"):
            z.fill_value = "not a number"
        assert z.store[".zarray"] == before and z.fill_value == -7
        with pytest.raises(cs.ReadOnlyError):
            reopened.fill_value = 1

    def test_fill_value_setter_v3(self):
        a = cs.create_array({}, shape=(4,), chunks=(2,), dtype="f4", fill_value=0)
        a.fill_value = 1.5
        assert cs.open_array(a.store).fill_value == 1.5
        np.testing.assert_array_equal(a[:], [1.5] * 4)

    @pytest.mark.parametrize("kw", [dict(zarr_format=2), dict(zarr_format=3),
                                    dict(zarr_format=3, shards=(8, 4)),
                                    dict(zarr_format=3, config={"write_empty_chunks": True})])
    def test_growing_after_a_new_fill_value_shows_the_new_one(self, kw):
        # Edge chunks hold the fill value past the array's end; a new fill value must reach
        # there too, or growing the array showed the old one (found by
        # tests/engine/test_model_array.py once it set fill values)
        a = cs.create_array(cs.MemoryStore(), shape=(5, 3), chunks=(4, 2), dtype="i4",
                            fill_value=0, **kw)
        a[...] = 1
        a[4, 2] = 9      # the corner chunk: all the new fill value once its padding is
        a.fill_value = 9
        a.resize(8, 4)
        want = np.full((8, 4), 9, dtype="i4")
        want[:5, :3] = 1
        want[4, 2] = 9
        np.testing.assert_array_equal(a[...], want)
        np.testing.assert_array_equal(cs.open_array(a.store, mode="r")[...], want)
        # the corner chunk, all the new fill value once its padding was reset, stays
        # stored: a[4, 2] was written as data (it was dropped, and read as the next fill
        # value set)
        a.fill_value = 3
        assert a[4, 2] == 9

    @pytest.mark.parametrize("compressor", [None, "default"])
    def test_order_f_reads_back_f_ordered(self, compressor):
        d = np.arange(40 * 30 * 3, dtype="i4").reshape(40, 30, 3)
        kw = {} if compressor else {"compressor": None}
        a = cs.array(d, chunks=(7, 8, 2), order="F", **kw)
        for sel in [Ellipsis, np.s_[3:20], np.s_[:, 5:9, 1:]]:
            got = a[sel]
            np.testing.assert_array_equal(got, d[sel])
            assert got.flags.f_contiguous  # as zarr-python 2's F-ordered output
        assert cs.array(d, chunks=(7, 8, 2))[:].flags.c_contiguous


class TestDtypes:
    def test_subarray_dtype_extends_shape(self):
        dt = np.dtype(("<f4", (2, 2)))
        a = cs.zeros(3, dtype=dt, chunks=2)
        assert a.shape == np.zeros(3, dtype=dt).shape == (3, 2, 2)
        assert a.dtype == np.float32 and a.chunks == (2, 2, 2)
        assert json.loads(a.store[".zarray"])["dtype"] == "<f4"
        a[:] = np.arange(12).reshape(3, 2, 2)
        np.testing.assert_array_equal(cs.open_array(a.store)[:], np.arange(12).reshape(3, 2, 2))

    def test_subarray_field(self, tmp_path):
        dt = np.dtype([("a", "<f4", (2, 2)), ("b", "<i4")])
        a = cs.create(3, dtype=dt, chunks=2, store=str(tmp_path / "s.zarr"), fill_value=b"")
        a[1] = (np.ones((2, 2)), 5)
        a["a"] = np.arange(12).reshape(3, 2, 2)
        want = np.zeros(3, dtype=dt)
        want[1] = (np.ones((2, 2)), 5)
        want["a"] = np.arange(12).reshape(3, 2, 2)
        np.testing.assert_array_equal(cs.open_array(str(tmp_path / "s.zarr"), mode="r")[:], want)

    def test_empty_bytes_fill_for_structured(self):
        dt = np.dtype([("x", "<f8"), ("y", "S3")])
        a = cs.create(4, dtype=dt, chunks=2, fill_value=b"")
        assert a.fill_value == np.zeros((), dt)[()]
        np.testing.assert_array_equal(a[:], np.zeros(4, dt))
        assert cs.open_array(a.store).fill_value == np.zeros((), dt)[()]
        with pytest.raises(ValueError, match="bytes"):
            cs.create(4, dtype=dt, fill_value=b"x" * 12, store={})


@pytest.mark.parametrize("zarr_format, shards", [(2, None), (3, None), (3, (6,))])
def test_a_view_with_its_own_fill_value_stores_the_chunks_it_fills_with_it(zarr_format, shards):
    """Written through view(fill_value=5), a chunk all 5 was deleted as "empty": the array
    (fill -1) and every other handle then read -1 where 5 had been written."""
    kw = {} if shards is None else {"shards": shards}
    z = cs.create_array({}, shape=(8,), chunks=(3,), dtype="i4", fill_value=-1,
                        zarr_format=zarr_format, **kw)
    z[:] = np.arange(8)
    v = z.view(fill_value=5)
    v[0:3] = 5
    np.testing.assert_array_equal(z[:], [5, 5, 5, 3, 4, 5, 6, 7])
    np.testing.assert_array_equal(v[:], [5, 5, 5, 3, 4, 5, 6, 7])
    z[0:3] = -1                     # the array's own fill: its chunk deleted, as always
    np.testing.assert_array_equal(v[0:3], [5, 5, 5])   # the view reads a missing chunk so
    assert z.nchunks_initialized == 2


def _strings(fmt, shards, dtype="str"):
    import numcodecs
    fill = "F" if dtype == "str" else b"F"
    if fmt == 2:
        codec = numcodecs.VLenUTF8() if dtype == "str" else numcodecs.VLenBytes()
        return cs.create((9,), chunks=(2,), dtype=object, object_codec=codec, fill_value=fill,
                         store=cs.MemoryStore(), zarr_format=2)
    return cs.create_array(cs.MemoryStore(), shape=(9,), chunks=(2,), shards=shards,
                           dtype=dtype, fill_value=fill)


@pytest.mark.parametrize("fmt, shards, dtype", [(2, None, "str"), (2, None, "bytes"),
                                                (3, None, "str"), (3, (4,), "str"),
                                                (3, (4,), "bytes")])
def test_an_object_views_own_fill_is_stored_and_its_padding_is_the_arrays(fmt, shards, dtype):
    """Object arrays (strings, bytes): a view's own fill value written through it was
    dropped as "empty" (object fills have no bytes to tell them apart: the check saw one
    fill), so the array read its own fill there, and over stored data the write deleted
    them; the padding of a new edge chunk past the array's end was the view's fill, which
    growing the array showed."""
    z = _strings(fmt, shards, dtype)
    enc = (lambda t: t) if dtype == "str" else (lambda t: t.encode())
    z[0:4] = [enc(c) for c in "abcd"]
    v = z.view(fill_value=enc("V"))
    v[0:4] = [enc("V")] * 4          # over stored data: all the view's fill value
    v[8] = enc("x")                  # a new edge chunk, half past the array's end
    assert z[:].tolist() == [enc(c) for c in "VVVVFFFFx"]
    assert cs.open_array(z.store, mode="r")[:].tolist() == z[:].tolist()
    z.resize(10)
    assert z[8:].tolist() == [enc("x"), enc("F")]


@pytest.mark.parametrize("fmt,kw", [(2, {}), (3, {}), (3, {"shards": (4, 8)}),
                                    (2, {"order": "F"})])
@pytest.mark.parametrize("how", ["slice", "oindex", "vindex"])
def test_a_fill_views_write_pads_new_edge_chunks_with_the_arrays_fill(fmt, kw, how):
    """A view with a fill value of its own writing a new edge chunk: the part past the
    array's end holds the array's fill value, which growing the array shows (it held the
    view's, never written: 5s appeared after a resize)."""
    z = cs.create((6, 10), chunks=(4, 4), dtype="i4", fill_value=0, zarr_format=fmt,
                  store=cs.MemoryStore(), **kw)
    v = z.view(fill_value=5)
    if how == "slice":
        v[4:6, 8:10] = 1
    elif how == "oindex":
        v.oindex[[4, 5], [8, 9]] = 1
    else:
        v.vindex[[4, 5, 4, 5], [8, 8, 9, 9]] = 1
    model = np.zeros((8, 12), dtype="i4")
    model[4:6, 8:10] = 1
    z.resize((8, 12))
    np.testing.assert_array_equal(z[:], model)


def test_a_converting_views_edge_chunk_padding_is_the_arrays_fill_as_the_view_reads_it():
    """A view whose filters convert values (an AsType from the stored i2 to f4) pads with
    the array's fill value as it reads it (7.0, stored as 7): its own fill bytes read as
    the view's type gave 0 after the array grew, and before the fix the view's fill (1).
    (i2: f4 holds every value; a narrowing view refuses writes.)"""
    z = cs.create(store=cs.MemoryStore(), shape=(10,), chunks=(4,), dtype="i2", fill_value=7,
                  zarr_format=2)
    v = z.view(dtype="f4", filters=[numcodecs.AsType(encode_dtype="i2", decode_dtype="f4")],
               fill_value=1.5)
    v[8:10] = 1.0
    z.resize((12,))
    assert z[8:12].tolist() == [1, 1, 7, 7]


_VIEW_FORMATS = {"v2": dict(zarr_format=2), "v3": dict(zarr_format=3),
                 "sharded": dict(zarr_format=3, shards=(8,))}


# (view(chunks=) of a sharded array is refused when made)
@pytest.mark.parametrize("fmt,view", [(f, v) for f in _VIEW_FORMATS
                                      for v in ("dtype", "chunks", "dtype+shape")
                                      if not (f == "sharded" and v == "chunks")])
def test_a_view_of_chunks_of_other_bytes_refuses_writes(fmt, view):
    """A view whose chunks hold another number of bytes than the stored ones (another item
    size, other chunks, with the array's filters): a write covering a chunk whole replaced
    the stored chunk, unread, by one the array cannot decode (its elements lost, every later
    read a ChunkDecodeError). Refused, naming the array; reads still fail on such chunks."""
    store = cs.MemoryStore()
    z = cs.create_array(store, shape=(16,), chunks=(4,), dtype="i4", fill_value=0,
                        name="a", **_VIEW_FORMATS[fmt])
    z[:] = np.arange(16)
    v = {"dtype": lambda: z.view(dtype="i2"), "chunks": lambda: z.view(chunks=(2,)),
         "dtype+shape": lambda: z.view(dtype="i8", shape=(4,))}[view]()
    for write in (lambda: v.__setitem__(slice(0, 4), 3), lambda: v.__setitem__(0, 3),
                  lambda: v.oindex.__setitem__([1, 2], 3)):
        with pytest.raises(ValueError, match="cannot write through this view of array '/a'"):
            write()
    np.testing.assert_array_equal(z[:], np.arange(16))


def test_a_view_of_other_item_size_with_matching_chunks_writes():
    """Chunks of the same bytes (i4 chunks of 4 viewed as i2 chunks of 8): zarr-python 2's
    reinterpreting view, written and read back."""
    z = cs.create_array(cs.MemoryStore(), shape=(16,), chunks=(4,), dtype="<i4",
                        fill_value=0, zarr_format=2)
    v = z.view(dtype="<i2", chunks=(8,), shape=(32,))
    v[0:8] = [1, 0, 2, 0, 3, 0, 4, 0]
    np.testing.assert_array_equal(z[0:4], [1, 2, 3, 4])


def test_a_view_with_filters_of_its_own_stores_chunks_of_its_fill_value():
    """view(filters=) with the array's dtype and fill value: a chunk the view writes as all
    its fill value is other stored values through its filters (fill 0 through an offset of
    5: -5), and was deleted (the array then read 0)."""
    from numcodecs import FixedScaleOffset
    z = cs.create(16, chunks=4, dtype="i4", fill_value=0, store=cs.MemoryStore(),
                  zarr_format=2, write_empty_chunks=False)
    z[:] = 2
    v = z.view(filters=[FixedScaleOffset(offset=5, scale=1, dtype="i4")])
    v[0:4] = 0
    np.testing.assert_array_equal(z[0:4], -5)
    np.testing.assert_array_equal(v[0:4], 0)


@pytest.mark.parametrize("fmt", list(_VIEW_FORMATS))
def test_a_fill_view_past_the_arrays_end_pads_past_it_with_the_arrays_fill(fmt):
    """A view with a fill value of its own and a shape past the array's end, writing an
    element inside the array into a new edge chunk: the chunk holds the view's fill where the
    write left it inside the array, and the array's own past the array's end (it held the
    view's there, which a grow of the array then showed)."""
    z = cs.create_array(cs.MemoryStore(), shape=(6,), chunks=(4,), dtype="i4",
                        fill_value=0, **_VIEW_FORMATS[fmt])
    v = z.view(shape=(10,), fill_value=5)
    v[4] = 1
    z.resize((8,))
    np.testing.assert_array_equal(z[:], [0, 0, 0, 0, 1, 5, 0, 0])


@pytest.mark.parametrize("call", ["shape", "chunks", "dtype", "astype", "object"])
def test_bad_view_arguments_name_the_array(call):
    z = cs.create((6, 6), chunks=(3, 3), dtype="i4", store=cs.MemoryStore(), path="sub/arr")
    make = {"shape": lambda: z.view(shape=(6,)), "chunks": lambda: z.view(chunks=(0, 3)),
            "dtype": lambda: z.view(dtype="nope"), "astype": lambda: z.astype("nope"),
            "object": lambda: z.view(dtype=object)}[call]
    with pytest.raises((TypeError, ValueError), match="view of array '/sub/arr'") as info:
        v = make()
        v[0, 0]  # (checked where the view's metadata is applied)
    assert not isinstance(info.value, cs.errors.MetadataError)  # (the view's fault)


def test_astype_to_and_from_dtypes_whose_str_loses_them():
    """astype's AsType filter was made of the dtypes' .str: a structured dtype's is
    '|V12', bfloat16's '<V2', and the cast became a copy of raw bytes: (1, 0.5) read as
    (16777216, 2.8e-319), -1 as 4294967295, bfloat16 values as 0; a write through a
    writable astype view stored such bytes. NumPy's astype is the oracle."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype([("a", "<i4"), ("b", "<f8")])
    data = np.zeros(4, dt)
    data["a"], data["b"] = [1, 2, 3, 4], [.5, 1.5, 2.5, 3.5]
    z = cs.array(data, chunks=(2,), store=cs.MemoryStore(), zarr_format=2)
    big = np.dtype([("a", ">i4"), ("b", ">f8")])
    got = z.astype(big)
    np.testing.assert_array_equal(got[:], data.astype(big))
    assert got[:].dtype == big
    np.testing.assert_array_equal(got.oindex[[3, 0]], data.astype(big)[[3, 0]])
    np.testing.assert_array_equal(got.get_basic_selection(slice(1, 3), fields="b"),
                                  data["b"][1:3])
    w = got.view(read_only=False)
    w[1] = np.array((9, 7.0), dtype=big)
    assert z[1].tolist() == (9, 7.0)
    ints = cs.array(np.int32([-1, 2, -3, 4]), chunks=(2,), store=cs.MemoryStore(),
                    zarr_format=2)
    one = np.dtype([("x", "<i8")])
    np.testing.assert_array_equal(ints.astype(one)[:], np.int32([-1, 2, -3, 4]).astype(one))
    floats = cs.array(np.float32([.5, 1.5, 2.5, -3.5]), chunks=(2,), store=cs.MemoryStore(),
                      zarr_format=2)
    bf = floats.astype(ml_dtypes.bfloat16)
    assert bf[:].dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(bf[:].astype("f4"), [.5, 1.5, 2.5, -3.5])


def _in_another_process(code):
    import subprocess
    import sys
    subprocess.run([sys.executable, "-c", "import numpy as np, chunkstore as cs; " + code],
                   check=True)


def test_a_view_of_an_uncached_handle_reads_the_metadata_as_its_handle_does(tmp_path):
    """A view (or astype view) of a cache_metadata=False handle cached its metadata: after
    another process's append, a write through the view wrote its old edge chunk whole over
    the appended value, and after another process re-created the array with another dtype
    it decoded the new chunks as the old dtype. A view now keeps its handle's
    cache_metadata."""
    p = str(tmp_path / "a.zarr")
    cs.array(np.arange(1, 5, dtype="i4"), store=p, chunks=(4,), zarr_format=2)
    base = cs.open_array(p, mode="r+", cache_metadata=False)
    v, t = base.view(), base.astype("f8")
    _in_another_process(f"cs.open_array({p!r}, mode='r+').append(np.array([99], 'i4'))")
    v[3] = 7
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[:], [1, 2, 3, 7, 99])
    np.testing.assert_array_equal(t[:], [1, 2, 3, 7, 99])
    _in_another_process(f"cs.array(np.float32([0.5, 1.5]), store={p!r}, chunks=(2,), "
                        f"zarr_format=2, overwrite=True)")
    np.testing.assert_array_equal(v[:], np.float32([0.5, 1.5]))
    assert v[:].dtype == np.dtype("f4")
    np.testing.assert_array_equal(t[:], [0.5, 1.5])


@pytest.mark.parametrize("stored, view", [("f8", "f4"), ("i8", "i2"), ("f8", "i4"),
                                          ("u2", "i2")])
def test_a_narrowing_astype_view_refuses_writes(stored, view):
    """Writing one element through a writable f4 astype view of an f8 array rounded every
    other element of its chunk (the chunk rewritten from the view's reads): 0.2 became
    0.20000000298023224. zarr-python 2 does so. Such a view's writes are refused, naming
    the array and both dtypes; nothing is written. A widening one writes."""
    data = np.array([1, 2, 3, 4], dtype=stored) * (np.array(0.1) if stored == "f8" else 1)
    z = cs.array(data.astype(stored), chunks=4, store=cs.MemoryStore(), zarr_format=2)
    before = z[:].copy()
    v = z.astype(view).view(read_only=False)
    with pytest.raises(ValueError, match=f"reads the stored .* values as .*array '/'|"
                                         f"array '/'.*{np.dtype(stored)}"):
        v[0] = 5
    np.testing.assert_array_equal(z[:], before)
    wide = cs.array(np.array([1, 2, 3, 4], "i4"), chunks=4, store=cs.MemoryStore(),
                    zarr_format=2)
    w = wide.astype("f8").view(read_only=False)
    w[0] = 7.0
    assert wide[:].tolist() == [7, 2, 3, 4]
