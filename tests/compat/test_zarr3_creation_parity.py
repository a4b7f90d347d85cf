"""zarr-python 3 parity of array creation: data types, fill values, chunk key encodings, the
*_like functions, and the errors (classes and the words code matches on) of invalid
creation arguments."""

from __future__ import annotations

import asyncio
import re

import json

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.api import asynchronous as aio
from chunkstore.dtype import (FixedLengthUTF32, NullTerminatedBytes, VariableLengthBytes,
                              VariableLengthUTF8)
from chunkstore.errors import ContainsArrayError, MetadataValidationError


def run(coro):
    return asyncio.run(coro)


# ------------------------------------------------------------------------------ fill values
@pytest.mark.parametrize("value", ["a", b"a"])
@pytest.mark.parametrize("fmt", [2, 3])
def test_scalar_string_array_takes_the_types_zero_fill(value, fmt):
    """zarr.array("a", zarr_format=3) was refused (fill_value 0 does not fit <U1); the
    default fill of a string or bytes array is its zero value in both formats."""
    z = cs.array(value, zarr_format=fmt, store={})
    assert z[...] == value and z.shape == ()
    assert z.fill_value == type(value)()


def test_v3_fixed_bytes_array_reads_unwritten_as_empty_bytes():
    z = cs.create(3, dtype="S4", zarr_format=3, store={})
    assert z[:].tolist() == [b"", b"", b""]
    z[1] = b"ab"
    assert z[:].tolist() == [b"", b"ab", b""]


# ------------------------------------------------------------------------------ data types
@pytest.mark.parametrize("dtype", [VariableLengthUTF8(), "T", np.dtypes.StringDType()])
@pytest.mark.parametrize("fmt", [2, 3])
def test_variable_length_strings_in_every_spelling(dtype, fmt):
    """NumPy's StringDType (what VariableLengthUTF8().to_native_dtype() gives) is
    variable-length UTF-8, as dtype=str; in Zarr v2 it was refused for its fill value."""
    for z in (cs.create_array({}, shape=(3,), dtype=dtype, zarr_format=fmt),
              cs.create(3, dtype=dtype, zarr_format=fmt, store={})):
        assert z.dtype == object and z.fill_value == ""
        z[:2] = ["x", "héllo"]
        assert z[:].tolist() == ["x", "héllo", ""]


@pytest.mark.parametrize("dtype, value", [(NullTerminatedBytes(1), b"Y"),
                                          (FixedLengthUTF32(1), "Y"),
                                          (VariableLengthUTF8(), "Y"),
                                          (VariableLengthBytes(), b"Y")])
def test_create_takes_zarr3_data_type_objects(dtype, value):
    """create(dtype=<zarr-python 3 data type>) was a TypeError (not a NumPy dtype)."""
    z = cs.create(shape=(3,), zarr_format=2, dtype=dtype, store={})
    expected = np.full((3,), value, dtype=dtype.to_native_dtype())
    z[:] = expected
    np.testing.assert_equal(z[:], expected)


def test_variable_length_bytes_are_vlen_bytes_in_both_formats():
    """VariableLengthBytes made a string (vlen-utf8) array; in v2 it is a vlen-bytes object
    array with the b"" fill value, in Zarr v3 the variable_length_bytes data type with the
    vlen-bytes codec (as zarr-python 3 writes it; it was refused here)."""
    z = cs.create_array({}, shape=(3,), dtype=VariableLengthBytes(), zarr_format=2)
    assert z.filters == [numcodecs.VLenBytes()] and z.fill_value == b""
    z[:2] = [b"ab", b"c"]
    assert z[:].tolist() == [b"ab", b"c", b""]
    store: dict = {}
    z = cs.create_array(store, shape=(3,), dtype=VariableLengthBytes(), zarr_format=3)
    z[:2] = [b"ab", b"c"]
    assert z[:].tolist() == [b"ab", b"c", b""]
    doc = json.loads(store["zarr.json"])
    assert doc["data_type"] == "variable_length_bytes" and doc["fill_value"] == ""
    assert doc["codecs"][0] == {"name": "vlen-bytes", "configuration": {}}


def test_create_array_needs_shape_and_dtype_without_data():
    with pytest.raises(ValueError, match="shape was not specified"):
        cs.create_array({}, data=None, shape=None, dtype="u1")
    with pytest.raises(ValueError, match="dtype was not specified"):
        cs.create_array({}, shape=(10, 10))
    assert cs.create_array({}, data=np.arange(3)).dtype == np.arange(3).dtype


@pytest.mark.parametrize("shape, chunks", [((400.5, 100), None), ((400, 100), (16, 16.5))])
def test_non_integer_shape_or_chunks_is_a_type_error(shape, chunks):
    """shape=(400.5, 100) made a (400, 100) array; both are TypeErrors, as zarr-python 3
    raises (and still ValueErrors, as chunkstore raised for chunks)."""
    kw = {} if chunks is None else {"chunks": chunks}
    for error in (TypeError, ValueError):
        with pytest.raises(error):
            cs.create(shape=shape, store={}, **kw)
    assert cs.create(shape=(4.0, 2), store={}).shape == (4, 2)  # integral: as zarr 2


@pytest.mark.parametrize("shape", [(5,), ()])
def test_chunks_none_is_refused_naming_the_chunks(shape):
    """create_array(chunks=None) is refused (as zarr-python 3) by an error that names the
    chunks, not the shape that was given; so are non-integer chunks and shards."""
    with pytest.raises(TypeError, match="chunks must be an integer") as e:
        cs.create_array(cs.storage.MemoryStore(), shape=shape, chunks=None, dtype="i4")
    assert "shape" not in str(e.value)
    with pytest.raises(TypeError, match="the chunks is integers"):
        cs.create_array({}, shape=(8,), chunks=(2.5,), dtype="i4")
    with pytest.raises(TypeError, match="the shards is integers"):
        cs.create_array({}, shape=(8,), chunks=(2,), shards=(4.5,), dtype="i4")


@pytest.mark.parametrize("bad", ["3.0", 3.0, 4, True])
def test_invalid_zarr_format_is_a_metadata_validation_error(bad):
    match = re.escape(f"Invalid value for 'zarr_format'. Expected 2, 3, or None. Got '{bad}'.")
    with pytest.raises(MetadataValidationError, match=match):
        run(aio.open_array(shape=(1,), zarr_format=bad))
    with pytest.raises(ValueError, match="zarr_format must be 2 or 3"):
        cs.create(3, store={}, zarr_format=bad)


# ----------------------------------------------------------------------- chunk key encoding
def test_create_takes_a_chunk_key_encoding_pair():
    """zarr-python 3's create takes chunk_key_encoding=("default", "."); it was refused."""
    z = cs.create((4, 4), chunks=(2, 2), zarr_format=3, store={},
                  chunk_key_encoding=("default", "."))
    assert z.metadata.chunk_key_encoding == {"name": "default",
                                             "configuration": {"separator": "."}}
    z[...] = 1
    assert "c.1.1" in z.store


@pytest.mark.parametrize("fmt", [2, 3])
def test_unknown_chunk_key_encoding_in_zarr3_words(fmt):
    """An unknown name was ignored for Zarr v2 (only the separator was used)."""
    msg = ('Unknown chunk key encoding: "Chunk key encoding \'invalid\' not found in '
           'registered chunk key encodings: [')
    with pytest.raises(ValueError, match=re.escape(msg)):
        cs.create_array({}, shape=(4,), dtype="u1", zarr_format=fmt,
                        chunk_key_encoding={"name": "invalid", "separator": "."})


def test_v2_chunk_key_encoding_must_be_named_v2():
    with pytest.raises(ValueError, match="For Zarr format 2 arrays, the `name` field of the "
                                         "chunk key encoding must be 'v2'"):
        cs.create_array({}, shape=(4,), dtype="u1", zarr_format=2,
                        chunk_key_encoding={"name": "default", "separator": "/"})
    z = cs.create_array({}, shape=(4,), dtype="u1", zarr_format=2,
                        chunk_key_encoding={"name": "v2", "separator": "/"})
    assert z.metadata.dimension_separator == "/"


@pytest.mark.parametrize("src_format, sep", [(2, "/"), (3, ".")])
def test_from_array_keeps_the_chunk_key_encoding_in_the_same_format(src_format, sep):
    """from_array wrote the default chunk keys; zarr-python 3 keeps the source's."""
    if src_format == 2:
        src = cs.create((6, 6), chunks=(3, 3), store={}, zarr_format=2,
                        dimension_separator=sep)
    else:
        src = cs.create((6, 6), chunks=(3, 3), store={}, zarr_format=3,
                        chunk_key_encoding=("default", sep))
    src[:] = np.arange(36).reshape(6, 6)
    out = cs.from_array({}, data=src)
    assert out.metadata == src.metadata
    np.testing.assert_array_equal(out[:], src[:])
    other = cs.from_array({}, data=src, zarr_format=5 - src_format)  # default keys there
    np.testing.assert_array_equal(other[:], src[:])


# ------------------------------------------------------------------------------- *_like
@pytest.mark.parametrize("fmt", [2, 3])
def test_async_open_like_takes_the_fill_value_and_a_path_in_the_store(fmt):
    """zarr-python 3's open_like(a, path): path inside store= (a memory store if none), with
    a's fill value; chunkstore's coroutine opened a local directory named path and kept the
    fill value 0."""
    ref = cs.create_array({}, shape=(11, 12), dtype="u1", chunks=(11, 12), zarr_format=fmt,
                          fill_value=100)
    new = run(aio.open_like(ref, path="foo", zarr_format=fmt, mode="w"))
    assert new.shape == (11, 12) and new.fill_value == 100
    assert np.all(cs.Array(new)[:] == 100)
    store = cs.MemoryStore()
    run(aio.open_like(ref, path="bar", store=store, mode="w", fill_value=4))
    assert cs.open_array(store, path="bar", mode="r")[0, 0] == 4


def test_sync_open_like_with_store_takes_path_inside_it():
    ref = cs.zeros((4,), chunks=2, store={}, dtype="i2")
    store = cs.MemoryStore()
    z = cs.open_like(ref, "x/y", store=store, mode="w")
    assert z.path == "x/y" and z.store is store and z.dtype == np.dtype("i2")


# -------------------------------------------------------------------- refused arguments
@pytest.mark.parametrize("kwargs, message", [
    ({"serializer": "bytes"}, "Zarr format 2 arrays do not support `serializer`."),
    ({"shards": (5,)}, "Zarr format 2 arrays can only be created with `shard_shape` set to "
                       "`None`. Got `shard_shape=(5,)` instead."),
])
def test_create_array_v2_refusals_in_zarr3_words(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cs.create_array({}, dtype="u1", shape=(10,), chunks=(1,), zarr_format=2, **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"dimension_names": ["x"]}, "dimension_names cannot be used for arrays with zarr_format 2."),
    ({"chunk_key_encoding": {"name": "default", "separator": "/"}},
     "chunk_key_encoding cannot be used for arrays with zarr_format 2. Use "
     "dimension_separator instead."),
    ({"codecs": [{"name": "bytes"}]}, "codecs cannot be used for arrays with zarr_format 2. "
                                      "Use filters and compressor instead."),
    ({"shards": (4,)}, "Zarr format 2 arrays can only be created with `shard_shape` set to "
                       "`None`."),
])
def test_create_v2_refusals_in_zarr3_words(kwargs, message):
    store: dict = {}
    with pytest.raises(ValueError, match=re.escape(message)):
        cs.create(shape=(8,), chunks=(4,), dtype="u1", zarr_format=2, store=store, **kwargs)
    assert store == {}


def test_chunks_and_chunk_shape_disagreeing_in_zarr3_words():
    with pytest.raises(ValueError, match="Only one of chunk_shape or chunks can be provided."):
        cs.create(shape=(10,), chunks=(2,), chunk_shape=(1,), store={}, zarr_format=3)


def test_shards_not_a_multiple_of_chunks_in_zarr3_words():
    message = ("The array's `chunk_shape` (got (16, 16)) needs to be divisible by the shard's "
               "inner `chunk_shape` (got (9,)).")
    with pytest.raises(ValueError, match=re.escape(message)):
        cs.create_array({}, shape=(16, 16), shards=(16, 16), chunks=(9,), dtype="u1")
    with pytest.raises(ValueError, match="needs to be divisible"):
        cs.create(shape=(16,), chunks=(3,), shards=(16,), store={})


def test_a_node_under_an_array_is_refused_in_zarr3_words():
    store = cs.MemoryStore()
    cs.zeros((2,), store=store, path="arr_1")
    message = r"A parent of .* is an array - only groups may have child nodes."
    with pytest.raises(ContainsArrayError, match=message):
        cs.zeros((2,), store=store, path="arr_1/g/arr_2")
    with pytest.raises(ContainsArrayError, match="an array exists at 'arr_1'"):
        cs.zeros((2,), store=store, path="arr_1/g/arr_2")


def test_create_array_refuses_shape_or_dtype_next_to_data():
    """As zarr-python 3: data gives the shape and the dtype; either given as well is a
    ValueError naming it, and nothing is created."""
    data = np.arange(10)
    for kwargs, name in ((dict(shape=data.shape), "shape"), (dict(shape=(10,), dtype="f4"),
                                                             "shape"), (dict(dtype="i8"), "dtype")):
        store = {}
        with pytest.raises(ValueError, match=f"data parameter was used, but the {name} "):
            cs.create_array(store, data=data, **kwargs)
        assert store == {}
    z = cs.create_array({}, data=data)
    assert z.shape == (10,) and z.dtype == data.dtype
    np.testing.assert_array_equal(z[...], data)


def test_open_array_takes_zarr3_chunk_shape_and_chunk_key_encoding(tmp_path):
    """open_array(mode="w") takes zarr-python 3's chunk_shape= and chunk_key_encoding= as
    create() does (it raised TypeError for them), and zarr-python 3 reads the result."""
    import os

    import zarr
    path = str(tmp_path / "a")
    a = cs.open_array(path, mode="w", zarr_format=3, shape=(4, 4), chunk_shape=(2, 2),
                      dtype="i4", chunk_key_encoding={"name": "v2", "separator": "."})
    a[...] = np.arange(16).reshape(4, 4)
    assert a.chunks == (2, 2)
    assert sorted(os.listdir(path)) == ["0.0", "0.1", "1.0", "1.1", "zarr.json"]
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...],
                                  np.arange(16).reshape(4, 4))
    with pytest.raises(ValueError, match="chunk_key_encoding or dimension_separator"):
        cs.open_array(str(tmp_path / "b"), mode="w", shape=(4,), dtype="i4",
                      chunk_key_encoding="/", dimension_separator=".")
