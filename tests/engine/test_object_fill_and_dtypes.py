"""Object arrays' fill values and data types where features combine (found by a hunt; each
test failed on the code before): a fill value of the other kind (str for bytes, bytes for
str) was stored as base64 and read back as other bytes or as that text; a view with its own
filters read a vlen-bytes fill as base64 text; a variable-length bytes array's own dtype
made string arrays (or was refused) when given back to create_array / create; a failed
create_array(data=) left an empty array; NumPy str/bytes scalars were refused."""

import json
import warnings

import numpy as np
import pytest

import chunkstore as cs


@pytest.mark.parametrize("fill, stored", [("abcd", "YWJjZA=="), ("x", "eA=="),
                                          (b"\x00f", "AGY=")])
def test_a_v2_bytes_arrays_fill_is_bytes_in_base64(fill, stored):
    store = {}
    z = cs.create((4,), chunks=(2,), dtype=bytes, fill_value=fill, store=store)
    want = fill.encode() if isinstance(fill, str) else fill
    assert json.loads(store[".zarray"])["fill_value"] == stored
    assert z.fill_value == want and z[:].tolist() == [want] * 4
    assert cs.open_array(store, mode="r")[:].tolist() == [want] * 4
    zarr = pytest.importorskip("zarr")
    from zarr.core.dtype import VariableLengthBytes
    mem = zarr.storage.MemoryStore()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = zarr.create_array(mem, shape=(4,), chunks=(2,), dtype=VariableLengthBytes(),
                                zarr_format=2, fill_value=want)
    assert ref.metadata.to_dict()["fill_value"] == stored
    # a view with filters in front of the object codec (astype) reads the same fill
    z[:2] = [b"a", b"b"]
    assert z.astype(object)[:].tolist() == [b"a", b"b", want, want]
    assert z.astype(object).fill_value == want


def test_a_v2_string_arrays_fill_cannot_be_bytes():
    with pytest.raises(ValueError, match="holds strings"):
        cs.create((2,), dtype=str, fill_value=b"abc", store={})
    z = cs.create((2,), dtype=str, fill_value="s", store={})
    with pytest.raises(ValueError, match="holds strings"):
        z.fill_value = b"abc"
    assert z[:].tolist() == ["s", "s"]


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_bytes_arrays_own_dtype_makes_bytes_arrays(fmt):
    src = cs.create_array({}, shape=(3,), chunks=(2,), dtype="bytes", zarr_format=3)
    src[:] = np.array([b"a", b"\xff", b""], dtype=object)
    assert src.dtype.metadata == {"vlen": bytes}
    made = [cs.create_array({}, shape=(3,), dtype=src.dtype, zarr_format=fmt),
            cs.create_array({}, data=src[:], zarr_format=fmt),
            cs.zeros((3,), dtype=src.dtype, store={}, zarr_format=fmt),
            cs.array(src[:], store={}, zarr_format=fmt),
            cs.group({}, zarr_format=fmt).create_array("x", shape=(3,), dtype=src.dtype)]
    for z in made:
        z[:] = src[:]
        assert z[:].tolist() == [b"a", b"\xff", b""]
        if fmt == 3:
            assert z.metadata.to_dict()["data_type"] == "variable_length_bytes"
        else:
            assert z.filters[0].codec_id == "vlen-bytes"


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_create_array_whose_data_is_refused_leaves_nothing(fmt):
    store = {}
    with pytest.raises(TypeError):
        cs.create_array(store, data=np.array(["a", 5], dtype=object), zarr_format=fmt)
    assert store == {}
    g = cs.group({}, zarr_format=fmt)
    before = dict(g.store)
    with pytest.raises(TypeError):
        g.create_array("x", data=np.array(["a", 5], dtype=object))
    assert dict(g.store) == before


@pytest.mark.parametrize("fmt", [2, 3])
def test_numpy_str_and_bytes_scalars_are_stored(fmt):
    s = cs.create_array({}, shape=(2,), dtype=str, zarr_format=fmt)
    s[0] = np.array(["ab"])[0]
    b = cs.create_array({}, shape=(2,), dtype="bytes", zarr_format=fmt)
    b[1] = np.bytes_(b"xy")
    assert s[:].tolist() == ["ab", ""] and b[:].tolist() == [b"", b"xy"]


@pytest.mark.parametrize("codec, fill", [("VLenUTF8", 5), ("VLenUTF8", 2.5),
                                         ("VLenBytes", 5), ("JSON", b"ab")])
def test_a_v2_object_arrays_fill_of_another_kind_is_refused(codec, fill):
    """A number as the fill value of a string or bytes array read back as that number among
    the strings (zarr-python 3 reads its text), and bytes for a JSON array as their base64
    text: refused when the array is made, naming the path; 0 (zarr-python 2's default)
    is still the empty string or bytes."""
    import numcodecs
    store = {}
    with pytest.raises(ValueError, match="cannot create array at path 'x'.*fill_value"):
        cs.create((2,), dtype=object, object_codec=getattr(numcodecs, codec)(),
                  fill_value=fill, store=store, path="x")
    assert not store
    z = cs.create((2,), dtype=object, object_codec=getattr(numcodecs, codec)(), fill_value=0,
                  store=store)
    assert z[:].tolist() == {"VLenUTF8": ["", ""], "VLenBytes": [b"", b""],
                             "JSON": [0, 0]}[codec]


@pytest.mark.parametrize("codec, fill", [("VLenUTF8", 5), ("VLenUTF8", b"ab"),
                                         ("VLenBytes", 2.5), ("JSON", b"ab")])
def test_a_v2_object_arrays_fill_value_setter_refuses_another_kind(codec, fill):
    """The fill_value setter takes the creation's rule: a number set on a string or bytes
    array read back as that number among the strings (bytes on a JSON array, as their base64
    text once reopened). Refused, naming the array; the stored fill value and data stay."""
    import numcodecs
    store = {}
    z = cs.create((4,), chunks=(2,), dtype=object, object_codec=getattr(numcodecs, codec)(),
                  store=store, path="x")
    z[:2] = {"VLenUTF8": ["a", "b"], "VLenBytes": [b"a", b"b"], "JSON": ["a", "b"]}[codec]
    before = dict(store)
    with pytest.raises(ValueError, match=r"invalid fill_value .* for array '/x'"):
        z.fill_value = fill
    assert store == before
    assert cs.open_array(store, path="x")[:].tolist() == z[:].tolist()
    good = {"VLenUTF8": "z", "VLenBytes": b"z", "JSON": "z"}[codec]
    z.fill_value = good
    assert cs.open_array(store, path="x")[2:].tolist() == [good, good]


_AB = np.dtype([("a", "<u2"), ("b", "<u2")])


@pytest.mark.parametrize("compressor", [None, "zstd", "blosc", "lz4", "delta"])
@pytest.mark.parametrize("out_dtype", [
    np.dtype({"names": ["a", "b"], "formats": ["<u2", "<u2"], "offsets": [2, 0],
              "itemsize": 4}),
    np.dtype([("a", "<u2"), ("b", "<u2")], align=True),
    np.dtype({"names": ["a", "b"], "formats": ["<u2", "<u2"], "offsets": [0, 4],
              "itemsize": 8})])
@pytest.mark.parametrize("how", ["whole", "strided", "points"])
def test_out_of_the_same_fields_at_other_offsets_gets_each_field(compressor, out_dtype, how):
    """out= of a structured dtype with the array's fields at other offsets (or NumPy's
    aligned layout, or padding): the kernels copied whole records into it, so the fields
    came swapped (a at b's place), or failed inside a kernel. Filled field by field, as
    NumPy's out[...] = data."""
    import numcodecs
    comp = {None: None, "zstd": numcodecs.Zstd(), "blosc": numcodecs.Blosc(),
            "lz4": numcodecs.LZ4(), "delta": numcodecs.Zlib()}[compressor]
    filters = [numcodecs.Delta(dtype="<u4")] if compressor == "delta" else None
    z = cs.create(shape=(8,), chunks=(4,), dtype=_AB, compressor=comp, store={},
                  zarr_format=2, filters=filters)
    data = np.zeros(8, _AB)
    data["a"], data["b"] = np.arange(1, 9), 100 * np.arange(1, 9)
    z[:] = data
    if how == "whole":
        out = np.zeros(8, out_dtype)
        z.get_basic_selection(slice(None), out=out)
        want = data
    elif how == "strided":
        out = np.zeros(3, out_dtype)
        z.get_basic_selection(slice(1, 7, 2), out=out)
        want = data[1:7:2]
    else:
        out = np.zeros(3, out_dtype)
        z.get_coordinate_selection(np.array([0, 5, 7]), out=out)
        want = data[[0, 5, 7]]
    np.testing.assert_array_equal(out["a"], want["a"])
    np.testing.assert_array_equal(out["b"], want["b"])


@pytest.mark.parametrize("codec", ["JSON", "MsgPack"])
@pytest.mark.parametrize("fill", [0, 0.0, False, None])
def test_a_v2_object_arrays_fill_0_is_stored_and_read_as_zarr_python_2_does(codec, fill):
    """fill_value 0 (create()'s default too), 0.0 or False on an object array of JSON or
    MsgPack elements was stored as null, and unwritten elements read None; zarr-python
    2.18 stores the value given and reads it there."""
    import numcodecs
    store = {}
    kw = {} if fill is None else {"fill_value": fill}
    z = cs.create((4,), chunks=(2,), dtype=object, object_codec=getattr(numcodecs, codec)(),
                  store=store, **kw)
    want = 0 if fill is None else fill
    assert json.loads(store[".zarray"])["fill_value"] == want
    z[0] = 7
    got = cs.open_array(store, mode="r")[:].tolist()
    assert got == [7, want, want, want]
    assert [type(v) for v in got[1:]] == [type(want)] * 3


@pytest.mark.parametrize("codec", ["JSON", "MsgPack", "Pickle"])
def test_an_object_fill_value_that_is_a_list_reads_as_the_list(codec, monkeypatch):
    """Assigned into the chunk, a list fill value was broadcast: [1, "x"] read as 1, "x",
    1, "x", and a write of one element kept the list's other item beside it."""
    import numcodecs
    monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", True)
    z = cs.create(shape=4, chunks=2, dtype=object, object_codec=getattr(numcodecs, codec)(),
                  fill_value=[1, "x"], store={})
    assert list(z[:]) == [[1, "x"]] * 4
    z[0] = "new"
    assert list(z[:]) == ["new", [1, "x"], [1, "x"], [1, "x"]]
    z[:] = np.array(["a", "b", "c", "d"], dtype=object)
    z.resize(3)  # (the part of the edge chunk past the end reset to the fill value)
    z.resize(4)
    assert list(z[:]) == ["a", "b", "c", [1, "x"]]
    assert z[3] == [1, "x"] and z[1:2].tolist() == ["b"]
    z.resize(6)
    got = z[:]
    got[4].append(9)  # (each element read is the caller's own: the fill stays)
    assert z.fill_value == [1, "x"] and z[5] == [1, "x"] and got[5] == [1, "x"]


@pytest.mark.parametrize("codec", ["JSON", "MsgPack", "Pickle"])
def test_object_elements_equal_to_the_fill_value_but_not_it_are_stored(codec, monkeypatch):
    """-0.0 against a 0.0 fill, [0.0] or [False] against [0], {"a": True} against
    {"a": 1}: equal by ==, the chunk was left out and they read back as the fill value."""
    import numcodecs
    monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", True)
    for fill, value in ((0.0, -0.0), ([0], [0.0]), ([0], [False]), ({"a": 1}, {"a": True})):
        z = cs.create(shape=2, chunks=2, dtype=object, fill_value=fill, store={},
                      object_codec=getattr(numcodecs, codec)(), write_empty_chunks=False)
        values = np.empty(2, dtype=object)
        values[0], values[1] = value, value
        z[:] = values
        got = z[0]
        assert got == value and repr(got) == repr(value), (fill, value, got)


def test_a_structured_dtype_with_object_fields_needs_the_pickle_codec():
    """With JSON or MsgPack, every chunk written could not be read back (numcodecs cannot
    make records of the lists they store); with a vlen codec not even an empty array."""
    import numcodecs
    dt = np.dtype([("a", "O"), ("b", "<i4")])
    for codec in (numcodecs.JSON(), numcodecs.MsgPack(), numcodecs.VLenUTF8()):
        with pytest.raises(ValueError, match="Pickle"):
            cs.create(shape=4, chunks=2, dtype=dt, object_codec=codec, fill_value=None,
                      store={})


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_string_fill_value_utf8_cannot_encode_is_refused(fmt):
    """A lone surrogate was taken as the fill value; every later write of part of a chunk
    then failed (the chunk is padded with it)."""
    with pytest.raises(ValueError, match="UTF-8"):
        cs.create(shape=4, chunks=2, dtype=str, fill_value="\ud800", store={},
                  zarr_format=fmt)


@pytest.mark.parametrize("fmt", [2, 3])
def test_numpy_str_and_bytes_elements_are_stored(fmt):
    """An object array of NumPy's str_ elements (as list() of a U array gives them) was
    refused by numcodecs 0.16's vlen-utf8 ("Expected str, got numpy.str_"); zarr-python 2
    with numcodecs 0.15 stored it. The elements are stored as str (and bytes_ as bytes)."""
    values = np.empty(3, dtype=object)
    values[:] = list(np.array(["ab", "c", ""]))
    assert type(values[0]) is np.str_
    z = cs.create(shape=3, chunks=2, dtype=str, store={}, zarr_format=fmt)
    z[:] = values
    assert z[:].tolist() == ["ab", "c", ""] and type(z[0]) is str
    if fmt == 3:
        b = np.empty(2, dtype=object)
        b[:] = list(np.array([b"x", b"yz"]))
        y = cs.create_array({}, shape=(2,), chunks=(2,), dtype="bytes", zarr_format=3)
        y[:] = b
        assert y[:].tolist() == [b"x", b"yz"]
    bad = np.empty(2, dtype=object)
    bad[:] = [1, "a"]
    with pytest.raises(TypeError, match="Expected str"):
        z[:2] = bad
