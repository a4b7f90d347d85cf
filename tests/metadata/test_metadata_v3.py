"""Zarr v3 metadata (chunkstore.metadata.v3): zarr.json of arrays and groups.

Documents are compared byte for byte with what zarr-python 3 writes, parsed from the golden
fixtures (zarr-python and tensorstore), and every invalid document raises MetadataError
naming the key (and the codec or data type at fault).
"""

from __future__ import annotations

import json
import math
import shutil
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.errors import MetadataError
from chunkstore.metadata.v3 import (
    ArrayMetadataV3,
    consolidate_v3,
    decode_data_type_v3,
    decode_fill_value_v3,
    default_codecs_v3,
    encode_array_metadata_v3,
    encode_data_type_v3,
    encode_fill_value_v3,
    encode_group_metadata_v3,
    parse_array_metadata_v3,
    parse_group_metadata_v3,
    parse_node_metadata_v3,
)
from chunkstore.storage.directory import DirectoryStore
from chunkstore.storage.memory import MemoryStore
from v3_fixtures import FIXTURES_V3, array_cases_v3, load_manifest_v3

zarr = pytest.importorskip("zarr")

ARRAY_CASES = array_cases_v3()
NUMERIC = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64", "complex64", "complex128"]


def _doc(**over):
    d = {
        "shape": [10, 11], "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3, 4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {}, "zarr_format": 3, "node_type": "array", "storage_transformers": [],
    }
    d.update(over)
    return d


# ------------------------------------------------------------------------------ fixtures


@pytest.mark.skipif(not ARRAY_CASES, reason="no v3 fixtures")
@pytest.mark.parametrize("case", ARRAY_CASES, ids=[c["name"] for c in ARRAY_CASES])
def test_fixture_metadata(case):
    raw = (FIXTURES_V3 / case["path"] / "zarr.json").read_bytes()
    meta = parse_array_metadata_v3(raw, "zarr.json")
    doc = json.loads(raw)
    assert list(meta.shape) == doc["shape"]
    assert list(meta.chunks) == doc["chunk_grid"]["configuration"]["chunk_shape"]
    assert meta.data_type == doc["data_type"]
    assert meta.zarr_format == 3 and meta.node_type == "array"
    if case["writer"] == "zarr-python":
        # byte-identical re-encoding: we write zarr.json exactly as zarr-python 3 does
        assert encode_array_metadata_v3(meta) == raw
    else:
        again = parse_array_metadata_v3(encode_array_metadata_v3(meta))
        assert again == meta
    assert meta.dimension_names == (tuple(doc["dimension_names"]) if "dimension_names" in doc else None)
    assert meta.attributes == doc.get("attributes", {})


def test_fixture_details():
    def load(name):
        return parse_array_metadata_v3((FIXTURES_V3 / name / "data.zarr" / "zarr.json")
                                       .read_bytes())
    if not ARRAY_CASES:
        pytest.skip("no v3 fixtures")
    m = load("fill_nan_missing")
    assert math.isnan(m.fill_value) and m.fill_bytes() == np.array(np.nan).tobytes()
    assert load("fill_inf_missing").fill_value == np.float32(np.inf)
    assert load("fill_42_missing").fill_bytes() == np.array(42, "i4").tobytes()
    assert load("codec_big_endian").fill_bytes() == np.array(0, "=i4").tobytes()
    t = load("codec_transpose")
    assert t.order == "C" and t.codecs[0]["configuration"]["order"] == [2, 0, 1]
    s = load("sharded_2d")
    assert s.chunks == (10, 12) and s.inner_chunks == (5, 4)
    assert s.sharding["index_location"] == "end"
    assert s.inner_codecs == s.sharding["codecs"]
    assert s.compressor.codec_id == "zstd" and s.filters is None
    assert load("sharded_index_start").sharding["index_location"] == "start"
    assert load("codec_gzip").compressor.codec_id == "gzip"
    assert load("codec_blosc_lz4").compressor.cname == "lz4"
    assert load("codec_none").compressor is None
    st_ = load("dtype_string")
    assert st_.dtype == np.dtype(object) and st_.fill_value == "" and st_.fill_bytes() is None
    assert load("dimension_names").dimension_names == ("t", "y", "x")
    assert load("chunk_key_v2_dot").chunk_key((1, 2)) == "1.2"
    assert load("chunk_key_default_dot").chunk_key((1, 2)) == "c.1.2"
    assert load("shape_0d").chunk_key(()) == "c"
    ts = load("ts_zarr3_sharded")  # tensorstore omits configuration/index_location
    assert ts.chunk_key_encoding == {"name": "default", "configuration": {"separator": "/"}}
    assert ts.sharding["index_location"] == "end"


# ------------------------------------------------------------------- as zarr-python writes


@pytest.mark.parametrize("dt", NUMERIC + ["string"])
def test_defaults_match_zarr_python(tmp_path, dt):
    kw = {"dtype": str} if dt == "string" else {"dtype": dt}
    zarr.create_array(str(tmp_path), shape=(10, 11), chunks=(3, 4), **kw)
    ours = ArrayMetadataV3(shape=(10, 11), chunks=(3, 4), dtype=dt)
    assert encode_array_metadata_v3(ours) == (tmp_path / "zarr.json").read_bytes()
    assert ours.codecs == default_codecs_v3(dt)


def test_sharded_and_options_match_zarr_python(tmp_path):
    zarr.create_array(str(tmp_path), shape=(100, 50), chunks=(5, 10), shards=(20, 20),
                      dtype="float32", fill_value=np.nan, dimension_names=["y", None],
                      attributes={"units": "m", "é": [1, 2.5, None], "nan": math.nan},
                      chunk_key_encoding={"name": "v2", "separator": "/"})
    ours = ArrayMetadataV3(
        shape=(100, 50), chunks=(20, 20), dtype="float32", fill_value=np.nan,
        codecs=[{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [5, 10], "codecs": default_codecs_v3("float32")}}],
        chunk_key_encoding={"name": "v2", "configuration": {"separator": "/"}},
        dimension_names=["y", None], attributes={"units": "m", "é": [1, 2.5, None],
                                                 "nan": math.nan})
    assert encode_array_metadata_v3(ours) == (tmp_path / "zarr.json").read_bytes()
    assert ours.inner_chunks == (5, 10) and ours.chunk_key((3, 1)) == "3/1"


@pytest.mark.parametrize("fill,dt", [(np.nan, "f4"), (-np.inf, "f8"), (1.5, "f2"),
                                     (complex(np.nan, -np.inf), "c16"), (True, "bool"),
                                     (-7, "i1"), (2**64 - 1, "u8"), ("x y", "string")])
def test_fill_values_match_zarr_python(tmp_path, fill, dt):
    kw = {"dtype": str} if dt == "string" else {"dtype": dt}
    zarr.create_array(str(tmp_path), shape=(3,), chunks=(2,), fill_value=fill, **kw)
    ours = ArrayMetadataV3(shape=(3,), chunks=(2,), dtype=dt, fill_value=fill)
    assert encode_array_metadata_v3(ours) == (tmp_path / "zarr.json").read_bytes()
    back = parse_array_metadata_v3((tmp_path / "zarr.json").read_bytes())
    if dt != "string":
        assert back.fill_bytes() == np.array(fill, dtype=dt).tobytes()


def test_zarr_python_reads_our_documents(tmp_path):
    meta = ArrayMetadataV3(shape=(7, 9, 4), chunks=(4, 6, 4), dtype="uint16", fill_value=3,
                           codecs=[{"name": "transpose", "configuration": {"order": [2, 1, 0]}},
                                   {"name": "bytes", "configuration": {"endian": "big"}},
                                   {"name": "blosc", "configuration": {"cname": "zstd"}},
                                   {"name": "crc32c"}],
                           chunk_key_encoding=".", dimension_names=["a", "b", "c"],
                           attributes={"k": {"nested": [1, "two"]}})
    (tmp_path / "zarr.json").write_bytes(encode_array_metadata_v3(meta))
    z = zarr.open_array(str(tmp_path), mode="r")
    assert z.shape == (7, 9, 4) and z.dtype == np.dtype("uint16") and z.fill_value == 3
    assert z.metadata.dimension_names == ("a", "b", "c") and dict(z.attrs) == meta.attributes
    assert json.loads(json.dumps(z.metadata.to_dict()["codecs"])) == meta.codecs
    assert meta.order == "F" and meta.dimension_separator == "."
    assert (z[...] == 3).all()


def test_hex_fill_values():
    m = parse_array_metadata_v3(_doc(data_type="float32", fill_value="0x7fc00001"))
    bits = np.array(m.fill_value, dtype="f4").view("u4")
    assert int(bits) == 0x7FC00001
    assert json.loads(encode_array_metadata_v3(m))["fill_value"] == "0x7fc00001"
    m = parse_array_metadata_v3(_doc(data_type="float64", fill_value="0x3ff0000000000000"))
    assert m.fill_value == 1.0
    m = parse_array_metadata_v3(_doc(data_type="float16", fill_value="0x3c00"))
    assert m.fill_value == 1.0
    m = parse_array_metadata_v3(_doc(data_type="complex64", fill_value=["0x3f800000", "NaN"]))
    assert m.fill_value.real == 1.0 and math.isnan(m.fill_value.imag)
    with pytest.raises(MetadataError, match="hex"):
        parse_array_metadata_v3(_doc(data_type="float32", fill_value="0x7fc0"))


@settings(max_examples=200, deadline=None)
@given(bits=st.integers(0, 2**32 - 1), bits64=st.integers(0, 2**64 - 1),
       bits16=st.integers(0, 2**16 - 1))
def test_float_fill_roundtrip_is_bit_exact(bits, bits64, bits16):
    for b, dt, ut in ((bits, "f4", "u4"), (bits64, "f8", "u8"), (bits16, "f2", "u2")):
        v = np.array(b, dtype=ut).view(dt)[()]
        js = encode_fill_value_v3(v, dt)
        json.dumps(js, allow_nan=False)  # always valid strict JSON
        back = decode_fill_value_v3(json.loads(json.dumps(js)), dt)
        assert np.array(back, dtype=dt).view(ut) == b


def test_fill_value_decoding():
    assert decode_fill_value_v3(True, "bool") is np.True_
    assert decode_fill_value_v3(-128, "int8") == -128
    assert decode_fill_value_v3("Infinity", "float32") == np.inf
    assert decode_fill_value_v3([1, "-Infinity"], "complex128") == complex(1, -np.inf)
    assert decode_fill_value_v3("", "string") == ""
    assert decode_fill_value_v3(1, "bool") is np.True_  # lenient: 0/1 for booleans
    for bad, dt in [(128, "int8"), (-1, "uint8"), (2, "bool"), ("true", "bool"), (1.5, "int32"),
                    ("x", "float32"),
                    ([1], "complex64"), (None, "int32"), (0, "string"), ("0", "int32")]:
        with pytest.raises(ValueError):
            decode_fill_value_v3(bad, dt)
    with pytest.raises(MetadataError, match="fill_value") as ei:
        parse_array_metadata_v3(_doc(fill_value=2**40), "x/zarr.json")
    assert "'x/zarr.json'" in str(ei.value)


def test_fill_bytes_native_order():
    for dt in NUMERIC:
        m = ArrayMetadataV3(shape=(2,), chunks=(2,), dtype=dt, fill_value=1,
                            codecs=[{"name": "bytes", "configuration": {"endian": "big"}}])
        assert m.dtype.isnative
        assert m.fill_bytes() == np.array(1, dtype=dt).tobytes()
    assert ArrayMetadataV3(shape=(2,), chunks=(2,), dtype=">i4").dtype == np.dtype("=i4")


# ------------------------------------------------------------------------------ data types


@pytest.mark.parametrize("name", NUMERIC)
def test_data_types(name):
    assert decode_data_type_v3(name) == np.dtype(name)
    assert encode_data_type_v3(np.dtype(name)) == name
    assert encode_data_type_v3(np.dtype(name).newbyteorder(">")) == name
    assert decode_data_type_v3({"name": name}) == np.dtype(name)


def test_string_data_type():
    assert decode_data_type_v3("string") == np.dtype(object)
    assert encode_data_type_v3(object) == encode_data_type_v3(str) == "string"


@pytest.mark.parametrize("dt", ["float8", "fixed_length_utf32", "r16", "numpy.datetime64",
                                {"name": "numpy.datetime64", "configuration": {"unit": "s"}},
                                "Int32", 5])
def test_unsupported_data_type_names_type_and_key(dt):
    with pytest.raises(MetadataError) as ei:
        parse_array_metadata_v3(_doc(data_type=dt), "grp/arr/zarr.json")
    msg = str(ei.value)
    assert "'grp/arr/zarr.json'" in msg and "unsupported data type" in msg
    shown = dt["name"] if isinstance(dt, dict) else dt
    assert repr(shown) in msg


@pytest.mark.parametrize("dt", [[("a", "M8[s]")], "(2,)<i4", "S0", "V0"])
def test_unsupported_numpy_dtypes(dt):
    with pytest.raises(ValueError, match="unsupported data type"):
        ArrayMetadataV3(shape=(2,), chunks=(2,), dtype=dt)


# ------------------------------------------------------------------------------ errors


@pytest.mark.parametrize("codecs,name", [
    ([{"name": "bytes"}, {"name": "lzma", "configuration": {}}], "lzma"),
    ([{"name": "bitround", "configuration": {"keepbits": 3}}, {"name": "bytes"}], "bitround"),
    ([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [1, 2], "codecs": [{"name": "bytes"}, {"name": "snappy"}]}}], "snappy"),
])
def test_unknown_codec_names_codec_and_key(codecs, name):
    with pytest.raises(MetadataError) as ei:
        parse_array_metadata_v3(_doc(codecs=codecs), "a/b/zarr.json")
    msg = str(ei.value)
    assert "'a/b/zarr.json'" in msg and f"unknown codec {name!r}" in msg


@pytest.mark.parametrize("over,match", [
    ({"zarr_format": 2}, "zarr_format"),
    ({"node_type": "group"}, "node_type"),
    ({"chunk_grid": {"name": "rectilinear", "configuration": {}}}, "rectilinear"),
    ({"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3]}}},
     "different lengths"),
    ({"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3, 0]}}}, ">= 1"),
    ({"shape": [10, -1]}, ">= 0"),
    ({"chunk_key_encoding": {"name": "fancy"}}, "fancy"),
    ({"chunk_key_encoding": {"name": "default", "configuration": {"separator": "-"}}},
     "separator"),
    ({"storage_transformers": [{"name": "chunk-manifest"}]}, "storage_transformers"),
    ({"dimension_names": ["x"]}, "dimension_names"),
    ({"attributes": []}, "attributes"),
    ({"some_extension": {"x": 1}}, "some_extension"),
    ({"codecs": [{"name": "bytes"}, {"name": "gzip", "configuration": {"level": "high"}}]},
     "level"),
    ({"codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 3]}}]},
     "multiple"),
    ({"codecs": [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [1, 2], "index_codecs": [{"name": "bytes"}, {"name": "zstd"}]}}]},
     "fixed size"),
])
def test_invalid_documents_name_the_key(over, match):
    with pytest.raises(MetadataError, match=match) as ei:
        parse_array_metadata_v3(_doc(**over), "p/zarr.json")
    assert "'p/zarr.json'" in str(ei.value)


def test_missing_fields_and_bad_json():
    d = _doc()
    del d["codecs"]
    with pytest.raises(MetadataError, match="codecs"):
        parse_array_metadata_v3(d, "k")
    for raw in (b"{not json", b"[1, 2]", b"\xff\xfe"):
        with pytest.raises(MetadataError, match="'k'"):
            parse_array_metadata_v3(raw, "k")


def test_extension_with_must_understand_false_is_ignored():
    m = parse_array_metadata_v3(_doc(my_ext={"must_understand": False, "x": 1}))
    assert m.shape == (10, 11)


def test_lenient_forms_normalised():
    m = parse_array_metadata_v3(_doc(
        codecs=["bytes", {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 1,
                                                             "shuffle": "shuffle"}}],
        chunk_key_encoding={"name": "v2"}))
    assert m.codecs[0] == {"name": "bytes", "configuration": {"endian": "little"}}
    assert m.codecs[1]["configuration"] == {"typesize": 4, "cname": "lz4", "clevel": 1,
                                            "shuffle": "shuffle", "blocksize": 0}
    assert m.chunk_key_encoding == {"name": "v2", "configuration": {"separator": "."}}
    assert m.chunk_key((0, 3)) == "0.3" and ArrayMetadataV3(
        shape=(), chunks=(), dtype="i1", chunk_key_encoding={"name": "v2"}).chunk_key(()) == "0"


def test_constructor_forms():
    m = ArrayMetadataV3(shape=[4, 4], chunks=[2, 2], dtype="float64", fill_value="NaN")
    assert math.isnan(m.fill_value) and m.chunk_key((1, 0)) == "c/1/0"
    assert ArrayMetadataV3(shape=[4], chunks=[2], dtype="complex64",
                           fill_value=[1, "Infinity"]).fill_value == complex(1, np.inf)
    assert ArrayMetadataV3(shape=[4], chunks=[2], dtype=str).fill_value == ""
    assert ArrayMetadataV3(shape=[4], chunks=[2], dtype="int8", fill_value=3.0).fill_value == 3
    with pytest.raises(ValueError):
        ArrayMetadataV3(shape=[4], chunks=[2], dtype="int8", fill_value=300)
    with pytest.raises(ValueError):
        ArrayMetadataV3(shape=[4], chunks=[2], dtype="string", fill_value=0)
    a = ArrayMetadataV3(shape=[4], chunks=[2], dtype="float32", fill_value=np.nan)
    b = ArrayMetadataV3(shape=[4], chunks=[2], dtype="float32", fill_value=float("nan"))
    assert a == b  # compares documents: NaN == NaN


def test_order_and_inner_with_transposes():
    def meta(codecs, shape=(8, 6, 4), chunks=(4, 6, 4)):
        return ArrayMetadataV3(shape=shape, chunks=chunks, dtype="i2", codecs=codecs)
    T = lambda o: {"name": "transpose", "configuration": {"order": o}}  # noqa: E731
    assert meta([T([0, 1, 2]), {"name": "bytes"}]).order == "C"
    assert meta([T([2, 1, 0]), {"name": "bytes"}]).order == "F"
    assert meta([T([1, 0, 2]), T([0, 2, 1]), {"name": "bytes"}]).order == "C"  # general
    # composes to [2, 1, 0]
    assert meta([T([1, 0, 2]), T([2, 0, 1]), {"name": "bytes"}]).order == "F"
    assert meta([{"name": "bytes"}]).inner_chunks is None
    # transpose before sharding: inner chunk_shape is in transposed axes
    m = meta([T([2, 0, 1]), {"name": "sharding_indexed", "configuration": {
        "chunk_shape": [2, 2, 3], "codecs": [{"name": "bytes"}]}}])
    assert m.inner_chunks == (2, 3, 2)
    assert m.inner_codecs[0] == T([2, 0, 1]) and m.order == "C"
    inner = m.inner_metadata()
    assert inner.chunks == (2, 3, 2) and inner.inner_chunks is None
    with pytest.raises(ValueError, match="multiple"):
        meta([{"name": "sharding_indexed", "configuration": {"chunk_shape": [3, 2, 2]}}])


# ------------------------------------------------------------------------------ groups


def test_group_documents_match_zarr_python(tmp_path):
    zarr.open_group(str(tmp_path / "g"), mode="w", attributes={"a": 1, "b": "é"})
    assert encode_group_metadata_v3({"a": 1, "b": "é"}) == (tmp_path / "g" / "zarr.json"
                                                             ).read_bytes()
    zarr.open_group(str(tmp_path / "h"), mode="w")
    assert encode_group_metadata_v3() == (tmp_path / "h" / "zarr.json").read_bytes()
    g = parse_group_metadata_v3((tmp_path / "g" / "zarr.json").read_bytes())
    assert g == {"zarr_format": 3, "node_type": "group", "attributes": {"a": 1, "b": "é"},
                 "consolidated_metadata": None}


def test_group_errors_and_node_dispatch():
    with pytest.raises(MetadataError, match="'a/zarr.json'.*node_type"):
        parse_group_metadata_v3(json.dumps(_doc()), "a/zarr.json")
    with pytest.raises(MetadataError, match="zarr_format"):
        parse_group_metadata_v3({"zarr_format": 2, "node_type": "group"}, "g")
    with pytest.raises(MetadataError, match="'x'"):
        parse_group_metadata_v3(b"nope", "x")
    assert isinstance(parse_node_metadata_v3(_doc()), ArrayMetadataV3)
    assert parse_node_metadata_v3({"zarr_format": 3, "node_type": "group"})["attributes"] == {}
    with pytest.raises(MetadataError, match="node_type"):
        parse_node_metadata_v3({"zarr_format": 3, "node_type": "thing"})


def _consolidated_case():
    for c in load_manifest_v3():
        if c.get("kind") == "group" and c.get("consolidated"):
            return c
    pytest.skip("no consolidated v3 group fixture")


def test_consolidated_fixture_parses():
    case = _consolidated_case()
    root = FIXTURES_V3 / case["path"]
    g = parse_group_metadata_v3((root / "zarr.json").read_bytes())
    cm = g["consolidated_metadata"]
    assert set(cm) == set(case["arrays"]) | {p for p in case["groups"] if p}
    for path in case["arrays"]:
        assert isinstance(cm[path], ArrayMetadataV3)
        on_disk = parse_array_metadata_v3((root / path / "zarr.json").read_bytes())
        assert cm[path] == on_disk
    assert g["attributes"] == {"title": "root"}


def test_consolidate_v3_reproduces_zarr_python_bytes(tmp_path):
    """Strip the fixture's consolidated metadata, consolidate again: byte-identical."""
    case = _consolidated_case()
    src = FIXTURES_V3 / case["path"]
    dst = tmp_path / "h.zarr"
    shutil.copytree(src, dst)
    original = (dst / "zarr.json").read_bytes()
    doc = json.loads(original)
    del doc["consolidated_metadata"]
    (dst / "zarr.json").write_bytes(encode_group_metadata_v3(doc["attributes"]))
    g = consolidate_v3(DirectoryStore(str(dst)))
    assert (dst / "zarr.json").read_bytes() == original
    assert set(g["consolidated_metadata"]) == {"a", "g1", "g1/g2", "g1/g2/b"}


def test_consolidate_v3_read_by_zarr_python(tmp_path):
    root = zarr.open_group(str(tmp_path), mode="w", attributes={"r": 1})
    root.create_array("x", shape=(4,), chunks=(2,), dtype="i2")
    sub = root.create_group("sub", attributes={"s": True})
    sub.create_array("y", shape=(3, 3), chunks=(2, 2), dtype="f8", fill_value=np.nan)
    sub.create_group("empty")
    consolidate_v3(DirectoryStore(str(tmp_path)))
    mine = (tmp_path / "zarr.json").read_bytes()
    zarr.consolidate_metadata(str(tmp_path))
    assert (tmp_path / "zarr.json").read_bytes() == mine  # same bytes as zarr-python writes
    g = zarr.open_consolidated(str(tmp_path), mode="r")
    assert g["sub/y"].shape == (3, 3) and dict(g["sub"].attrs) == {"s": True}


def test_consolidate_v3_subgroup_and_store_kinds():
    store = MemoryStore()
    store["zarr.json"] = encode_group_metadata_v3()
    store["g/zarr.json"] = encode_group_metadata_v3({"k": "v"})
    meta = ArrayMetadataV3(shape=(2,), chunks=(2,), dtype="u1")
    store["g/a/zarr.json"] = encode_array_metadata_v3(meta)
    store["g/a/c/0"] = b"\x00\x01"
    store["g/notanode/c/0"] = b"junk"  # a directory without zarr.json is skipped
    g = consolidate_v3(store, "g")
    assert set(g["consolidated_metadata"]) == {"a"}
    back = parse_group_metadata_v3(store["g/zarr.json"], "g/zarr.json")
    assert back["consolidated_metadata"]["a"] == meta and back["attributes"] == {"k": "v"}
    assert parse_group_metadata_v3(store["zarr.json"])["consolidated_metadata"] is None
    with pytest.raises(MetadataError, match="'g/a/zarr.json'"):
        consolidate_v3(store, "g/a")
    with pytest.raises(MetadataError, match="no group metadata"):
        consolidate_v3(store, "missing")


def test_consolidated_member_errors_name_member():
    doc = {"zarr_format": 3, "node_type": "group", "consolidated_metadata": {
        "kind": "inline", "must_understand": False,
        "metadata": {"bad": _doc(data_type="float8")}}}
    with pytest.raises(MetadataError, match="'root/zarr.json'.*'bad'.*float8"):
        parse_group_metadata_v3(doc, "root/zarr.json")


@pytest.mark.skipif(sys.byteorder != "little", reason="bytes compared on little-endian")
def test_encoding_is_ascii_indent2_no_newline():
    raw = encode_array_metadata_v3(ArrayMetadataV3(shape=(1,), chunks=(1,), dtype="u1",
                                                   attributes={"ü": "∞"}))
    assert raw.startswith(b'{\n  "shape": [\n    1\n  ],') and not raw.endswith(b"\n")
    assert b"\\u00fc" in raw and raw.isascii()
