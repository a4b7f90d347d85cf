"""numcodecs filters (array -> array: Delta, FixedScaleOffset, Quantize, BitRound, PackBits,
AsType) in Zarr v3 chains, as zarr-python 3's numcodecs.zarr3 wrappers write them: what
zarr-python writes reads here identically, what is written here zarr-python reads
identically with the same stored bytes; inside a sharding codec too. (These arrays could not
be opened at all: "unknown codec 'numcodecs.delta'".)"""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs import numcodecs as cnc

zarr = pytest.importorskip("zarr")
nz = pytest.importorskip("numcodecs.zarr3")

SHAPE, CHUNKS = (5, 7), (2, 3)

# (dtype, zarr-python's filter, the same filter as chunkstore's codec object, values)
CASES = {
    "delta": ("i4", lambda: nz.Delta(dtype="i4"), lambda: cnc.Delta(dtype="i4"),
              lambda: np.arange(35, dtype="i4").reshape(SHAPE) * 3 - 40),
    "delta_astype": ("i4", lambda: nz.Delta(dtype="i4", astype="i2"),
                     lambda: cnc.Delta(dtype="i4", astype="i2"),
                     lambda: (np.arange(35, dtype="i4").reshape(SHAPE) % 7) * 100),
    "fixedscaleoffset": ("f8", lambda: nz.FixedScaleOffset(offset=1, scale=10, dtype="f8",
                                                             astype="i4"),
                         lambda: cnc.FixedScaleOffset(offset=1, scale=10, dtype="f8",
                                                      astype="i4"),
                         lambda: np.arange(35.0).reshape(SHAPE) / 10),
    "quantize": ("f8", lambda: nz.Quantize(digits=2, dtype="f8"),
                 lambda: cnc.Quantize(digits=2, dtype="f8"),
                 lambda: np.linspace(0, 1, 35).reshape(SHAPE)),
    "bitround": ("f4", lambda: nz.BitRound(keepbits=5), lambda: cnc.BitRound(keepbits=5),
                 lambda: np.linspace(-3, 3, 35, dtype="f4").reshape(SHAPE)),
    "packbits": ("bool", lambda: nz.PackBits(), lambda: cnc.PackBits(),
                 lambda: (np.arange(35).reshape(SHAPE) % 3 == 0)),
    "astype": ("i2", lambda: nz.AsType(encode_dtype="i1", decode_dtype="i2"),
               lambda: cnc.AsType(encode_dtype="i1", decode_dtype="i2"),
               lambda: (np.arange(35, dtype="i2").reshape(SHAPE) % 100) - 50),
}


def _zarr_array(path, dtype, filters, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (zarr-python's "not in the v3 spec" warnings)
        return zarr.create_array(store=str(path), shape=SHAPE, chunks=CHUNKS, dtype=dtype,
                                 filters=filters, zarr_format=3, fill_value=0, **kw)


def _zarr_read(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.open_array(str(path), mode="r")[...]


def _chunks(path):
    return {os.path.relpath(os.path.join(d, f), path): open(os.path.join(d, f), "rb").read()
            for d, _, fs in os.walk(path) for f in fs if f != "zarr.json"}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("sharded", [False, True])
def test_zarr_python_writes_chunkstore_reads(tmp_path, case, sharded):
    dtype, zf, _, values = CASES[case]
    want = values()
    z = _zarr_array(tmp_path / "z", dtype, [zf()],
                    **({"shards": (4, 6)} if sharded else {}))
    z[:, :4] = want[:, :4]             # the last column of chunks left missing: fill
    expected = _zarr_read(tmp_path / "z")
    got = cs.open_array(str(tmp_path / "z"), mode="r")
    np.testing.assert_array_equal(got[...], expected)
    np.testing.assert_array_equal(got.oindex[[0, 4], [1, 3, 6]],
                                  expected[np.ix_([0, 4], [1, 3, 6])])


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("sharded", [False, True])
def test_chunkstore_writes_zarr_python_reads_the_same_bytes(tmp_path, case, sharded):
    dtype, zf, cf, values = CASES[case]
    want = values()
    extra = {"shards": (4, 6)} if sharded else {}
    ours = cs.create_array(str(tmp_path / "c"), shape=SHAPE, chunks=CHUNKS, dtype=dtype,
                           filters=[cf()], zarr_format=3, fill_value=0, **extra)
    ours[...] = want
    ours[1:3, 2:5] = want[1:3, 2:5][::-1]  # a partial write: read, filtered, re-encoded
    model = want.copy()
    model[1:3, 2:5] = want[1:3, 2:5][::-1]
    theirs = _zarr_array(tmp_path / "z", dtype, [zf()], **extra)
    theirs[...] = model
    expected = _zarr_read(tmp_path / "z")   # (lossy filters: what they store reads back)
    np.testing.assert_array_equal(_zarr_read(tmp_path / "c"), expected)
    np.testing.assert_array_equal(ours[...], expected)
    if not sharded:  # (zarr-python lays a shard's inner chunks out in Morton order)
        assert _chunks(tmp_path / "c") == _chunks(tmp_path / "z")
    codecs = json.loads((tmp_path / "c" / "zarr.json").read_text())["codecs"]
    assert f'"numcodecs.{case.split("_")[0]}"' in json.dumps(codecs)  # (inner ones too)


def test_transpose_then_filter_as_zarr_python_writes_it(tmp_path):
    from zarr.codecs import TransposeCodec
    want = np.arange(35, dtype="i4").reshape(SHAPE) ** 2
    z = _zarr_array(tmp_path / "z", "i4", [TransposeCodec(order=(1, 0)), nz.Delta(dtype="i4")])
    z[...] = want
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "z"), mode="r")[...],
                                  _zarr_read(tmp_path / "z"))


def test_a_filter_before_the_sharding_codec_is_refused_by_name(tmp_path):
    """A filter of the whole shard (Delta's running difference) is not the inner chunks'
    chain, which reads go through: refused, never read wrong."""
    codecs = [{"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}},
              {"name": "sharding_indexed", "configuration": {
                  "chunk_shape": [2, 3],
                  "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                  "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                  "index_location": "end"}}]
    with pytest.raises(ValueError, match="'numcodecs.delta' before 'sharding_indexed'"):
        cs.create_array(str(tmp_path / "c"), shape=SHAPE, chunks=(4, 6), dtype="i4",
                        codecs=codecs, zarr_format=3)


def test_packbits_needs_bool():
    with pytest.raises(ValueError, match="numcodecs.packbits.*bool"):
        cs.create_array(cs.MemoryStore(), shape=(4,), chunks=(2,), dtype="i4",
                        filters=[cnc.PackBits()], zarr_format=3)


@pytest.mark.parametrize("zf,cf", [
    (lambda: nz.Delta(dtype="i4", astype=">i2"), lambda: cnc.Delta(dtype="i4", astype=">i2")),
    (lambda: nz.AsType(encode_dtype=">i2", decode_dtype="i4"),
     lambda: cnc.AsType(encode_dtype=">i2", decode_dtype="i4")),
])
def test_a_big_endian_filter_output_keeps_its_values(tmp_path, zf, cf):
    """A filter whose output data type is big-endian: the bytes codec stores the values in
    its own byte order (zarr-python's bytes), and they decode back (they were reinterpreted,
    byte-swapped values stored and read). (zarr-python 3 itself does not read these back.)"""
    want = (np.arange(35, dtype="i4").reshape(SHAPE) % 11) * 37
    ours = cs.create_array(str(tmp_path / "c"), shape=SHAPE, chunks=CHUNKS, dtype="i4",
                           filters=[cf()], zarr_format=3, fill_value=0)
    ours[...] = want
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "c"), mode="r")[...], want)
    theirs = _zarr_array(tmp_path / "z", "i4", [zf()])
    theirs[...] = want
    assert _chunks(tmp_path / "c") == _chunks(tmp_path / "z")


def test_create_places_numcodecs_filters_before_the_serializer_in_v3():
    """create(zarr_format=3, filters=[numcodecs.Delta(...)]) (zarr-python 2's spelling):
    the filter goes in front of the bytes codec, a CRC32C after the compressor (the filter
    was refused: 'has no Zarr v3 codec')."""
    import numcodecs
    z = cs.create(shape=6, chunks=3, dtype="i4", zarr_format=3,
                  filters=[numcodecs.Delta(dtype="i4"), numcodecs.CRC32C()])
    z[:] = np.arange(6) * 3
    names = [c["name"] for c in json.loads(z.store["zarr.json"])["codecs"]]
    assert names[0] == "numcodecs.delta" and names[1] == "bytes" and names[-1] == "crc32c"
    assert list(z[:]) == [0, 3, 6, 9, 12, 15]


# ------------------------------------------------ session 25: dtypes, Shuffle, placements

def test_shuffle_without_elementsize_takes_the_arrays_item_size(tmp_path):
    """numcodecs.shuffle with no elementsize, in a new array: zarr-python 3 fills in the
    array's item size (and writes it); written {} and shuffled by numcodecs' own default, 4,
    f8 chunks read as other values in zarr-python."""
    p = str(tmp_path / "s.zarr")
    want = 1e6 + 1.5 * np.arange(8)
    z = cs.create_array(p, shape=(8,), chunks=(8,), dtype="f8",
                        compressors=[{"name": "numcodecs.shuffle"}])
    z[:] = want
    doc = json.load(open(os.path.join(p, "zarr.json")))
    shuffle = [c for c in doc["codecs"] if c["name"] == "numcodecs.shuffle"]
    assert shuffle == [{"name": "numcodecs.shuffle", "configuration": {"elementsize": 8}}]
    np.testing.assert_array_equal(zarr.open_array(p, mode="r")[:], want)
    # A document without it (as chunkstore wrote them before, shuffling by numcodecs'
    # default 4) reads by 4: those arrays keep their values.
    q = str(tmp_path / "old.zarr")
    cs.create_array(q, shape=(8,), chunks=(8,), dtype="f8", compressors=[
        {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}}])[:] = want
    doc = json.load(open(os.path.join(q, "zarr.json")))
    for c in doc["codecs"]:
        if c["name"] == "numcodecs.shuffle":
            c["configuration"] = {}
    json.dump(doc, open(os.path.join(q, "zarr.json"), "w"))
    np.testing.assert_array_equal(cs.open_array(q, mode="r")[:], want)


def _filter_of(filt, dtype):
    import numcodecs
    return {"delta": numcodecs.Delta(dtype=dtype),
            "fso": numcodecs.FixedScaleOffset(offset=0, scale=4, dtype=dtype, astype=">i4"),
            "quantize": numcodecs.Quantize(digits=6, dtype=dtype),
            "astype": numcodecs.AsType(encode_dtype=">f4", decode_dtype=dtype)}[filt]


@pytest.mark.parametrize("filt", ["delta", "fso", "quantize", "astype"])
@pytest.mark.parametrize("array_dtype", ["<f8", ">f8"])
def test_a_v3_filter_declaring_the_other_byte_order_keeps_the_values(filt, array_dtype):
    """Zarr v3: a filter whose dtype is the array's in the other byte order (the usual
    zarr-python 2 setup for big-endian data, carried to v3; zarr-python 3 fills in '>f8'
    for a big-endian array): the chain's native chunks were handed to it as bytes, which it
    read swapped (FixedScaleOffset stored zeros, Delta garbage; zarr-python 3 does the
    same). The filter gets the values in the byte order it declares: whole and partial
    writes read back."""
    other = ">f8" if np.dtype(array_dtype).byteorder in "<=" else "<f8"
    z = cs.create(shape=(8,), chunks=(4,), dtype=array_dtype, filters=[_filter_of(filt, other)],
                  fill_value=0, store={}, zarr_format=3)
    want = np.array([1.5, -2.5, 3.25, 100.0, 0.75, 8.0, -1.25, 2.0])
    z[:] = want
    z[5] = 9.5  # (a read-modify-write of the chunk)
    want[5] = 9.5
    np.testing.assert_array_equal(z[:], want)


@pytest.mark.parametrize("filt", ["delta", "fso", "quantize", "astype"])
@pytest.mark.parametrize("array_dtype", ["<f8", ">f8"])
def test_a_v2_filter_reading_another_byte_order_is_refused(filt, array_dtype):
    """Zarr v2 hands a filter the chunk in the array's byte order, and the filter views its
    bytes as its own dtype (zarr-python 2 does: FixedScaleOffset('>f8') over '<f8' data
    stored zeros). Refused at creation, naming the filter; its own byte order works."""
    other = ">f8" if np.dtype(array_dtype).byteorder in "<=" else "<f8"
    with pytest.raises(ValueError, match="reads the chunks as"):
        cs.create(shape=(8,), chunks=(4,), dtype=array_dtype,
                  filters=[_filter_of(filt, other)], store={}, zarr_format=2)
    z = cs.create(shape=(8,), chunks=(4,), dtype=array_dtype,
                  filters=[_filter_of(filt, array_dtype)], store={}, zarr_format=2)
    want = np.array([1.5, -2.5, 3.25, 100.0, 0.75, 8.0, -1.25, 2.0])
    z[:] = want
    np.testing.assert_array_equal(z[:], want)


@pytest.mark.parametrize("filt", ["delta", "fso", "quantize", "astype"])
def test_a_filter_of_another_data_type_is_refused(filt):
    """A filter declaring another kind or size than the chunks it gets (Delta('<f4') on
    int32) read their bytes as other values: refused, naming the codec."""
    import numcodecs
    f = {"delta": numcodecs.Delta(dtype="<f4"),
         "fso": numcodecs.FixedScaleOffset(offset=0, scale=1, dtype="<f4"),
         "quantize": numcodecs.Quantize(digits=2, dtype="<f8"),
         "astype": numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f4")}[filt]
    with pytest.raises(ValueError, match="is not the data type of the chunks it gets"):
        cs.create(shape=(6,), chunks=(3,), dtype="i4", filters=[f], store={}, zarr_format=3)


def test_quantize_with_another_output_type_reads_back():
    """Quantize(dtype="f8", astype="f4"): its output is f4; taken for f8, every chunk it
    wrote failed to decode (6 elements for 3)."""
    import numcodecs
    q = numcodecs.Quantize(digits=3, dtype="f8", astype="f4")
    z = cs.create(shape=(6,), chunks=(3,), dtype="f8", filters=[q], store={}, zarr_format=3)
    data = np.linspace(0, 1, 6)
    z[:] = data
    z[1] = 0.5
    want = q.decode(q.encode(data))
    want[1] = q.decode(q.encode(np.array([0.5])))[0]
    np.testing.assert_array_equal(z[:], want)


@pytest.mark.parametrize("codecs,match", [
    ([{"name": "numcodecs.zlib", "configuration": {}}, {"name": "bytes"}],
     "is a bytes -> bytes codec and must come after"),
    ([{"name": "bytes"}, {"name": "numcodecs.frobnicate", "configuration": {}}],
     "unknown codec 'numcodecs.frobnicate'"),
])
def test_misplaced_or_unknown_numcodecs_codecs_are_named_as_such(codecs, match):
    """("numcodecs.zlib" before bytes said "unknown codec 'numcodecs.zlib'; did you mean
    'numcodecs.zlib'", an unknown one after bytes "is not a bytes -> bytes codec")"""
    store = {"zarr.json": json.dumps({
        "zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": codecs}).encode()}
    with pytest.raises(ValueError, match=match):
        cs.open_array(store, mode="r")


@pytest.mark.parametrize("name", ["LZ4", "Zlib", "LZMA", "BZ2"])
def test_create_v3_with_a_numcodecs_compressor_of_no_native_codec(tmp_path, name):
    """create(zarr_format=3, compressor=numcodecs.LZ4()) was refused ("has no Zarr v3
    codec") where create_array(compressors=[LZ4()]) wrote numcodecs.lz4; zarr-python reads
    it."""
    import numcodecs
    p = str(tmp_path / "c.zarr")
    z = cs.create(shape=(8,), chunks=(4,), dtype="i4", compressor=getattr(numcodecs, name)(),
                  store=p, zarr_format=3)
    z[:] = np.arange(8)
    codecs = json.load(open(os.path.join(p, "zarr.json")))["codecs"]
    assert codecs[-1]["name"] == f"numcodecs.{name.lower()}"
    np.testing.assert_array_equal(zarr.open_array(p, mode="r")[:], np.arange(8))


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("dtype", ["<u8", "<M8[ns]", "<m8[s]"])
def test_an_integer_filter_of_another_integer_kind_reads_the_bits(tmp_path, fmt, dtype):
    """Delta('<i8') over uint64 or datetime64 (zarr-python 2's usual setup for times): the
    filter reads the chunk's bits as its own integers, both ways, losslessly (values past
    2**63 too), as numcodecs and zarr-python do; refused for a while here."""
    import numcodecs
    p = str(tmp_path / "a.zarr")
    z = cs.create(shape=(6,), chunks=(3,), dtype=dtype, filters=[numcodecs.Delta(dtype="<i8")],
                  store=p, zarr_format=fmt, fill_value=0)
    bits = np.array([1, 5, 2**63 + 7, 3, 2**64 - 1, 0], dtype="<u8")
    data = bits.view(dtype)
    z[:] = data
    z[1] = data[1]  # (a read-modify-write)
    np.testing.assert_array_equal(z[:].view("<u8"), bits)
    if fmt == 3 and dtype == "<u8":
        np.testing.assert_array_equal(zarr.open_array(p, mode="r")[:], bits)


def test_a_v3_filter_document_of_the_other_byte_order_without_astype(tmp_path):
    """zarr-python 3's wrappers and documents leave astype out: the output is the filter's
    dtype (in its byte order), which was taken for the chain's native one (the values read
    back in the other byte order)."""
    p = str(tmp_path / "a.zarr")
    z = cs.create_array(p, shape=(8,), chunks=(4,), dtype="i4", compressors=None,
                        filters=[{"name": "numcodecs.delta", "configuration": {"dtype": ">i4"}}])
    z[:] = np.arange(1, 9)
    z[2] = 30
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[:], [1, 2, 30, 4, 5, 6, 7, 8])


def test_zarr2_style_filters_of_v3_take_checksums_not_compressors():
    """create(zarr_format=3, filters=[...]): a checksum among them goes after the
    compressor; a compressor there (Zlib) is refused (moved after the compressor, it
    compressed twice)."""
    import numcodecs
    z = cs.create(shape=(4,), chunks=(2,), dtype="i4", filters=[numcodecs.CRC32()], store={},
                  zarr_format=3)
    assert [c["name"] for c in json.loads(z.store["zarr.json"])["codecs"]][-1] == \
        "numcodecs.crc32"
    with pytest.raises(ValueError, match="has no place in a Zarr v3 chain"):
        cs.create(shape=(4,), chunks=(2,), dtype="i4", filters=[numcodecs.Zlib()], store={},
                  zarr_format=3)


def test_order_f_with_filters_keeps_its_transpose(tmp_path):
    """create_array(order="F", filters=...) in Zarr v3 left out the transpose codec that
    order="F" writes without filters: the order was dropped without a word. It goes first,
    and zarr-python reads the array to the same values."""
    import zarr
    p = str(tmp_path / "f.zarr")
    data = np.arange(24, dtype="i4").reshape(4, 6) * 3
    a = cs.create_array(p, shape=(4, 6), chunks=(2, 3), dtype="i4", order="F",
                        filters=[cnc.Delta(dtype="<i4")])
    a[:] = data
    with open(os.path.join(p, "zarr.json")) as f:
        names = [c["name"] for c in json.load(f)["codecs"]]
    assert names[:2] == ["transpose", "numcodecs.delta"]
    assert cs.open_array(p, mode="r").order == "F"
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[:], data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(zarr.open_array(p, mode="r")[:], data)
