"""Tests for chunkstore.metadata.v2 (Zarr v2 .zarray/.zgroup/.zattrs handling)."""

from __future__ import annotations

import ast
import base64
import json
import math
import os
import re

import numcodecs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.errors import MetadataError
from chunkstore.metadata.v2 import (
    ArrayMetadataV2,
    decode_dtype,
    decode_fill_value,
    default_compressor,
    encode_array_metadata,
    encode_attrs,
    encode_dtype,
    encode_fill_value,
    encode_group_metadata,
    normalize_chunks,
    parse_array_metadata,
    parse_attrs,
    parse_group_metadata,
)

FIXTURES = os.path.join(os.environ.get("CHUNKSTORE_FIXTURES", "/work/shared/fixtures"), "v2")


def _json_like_zarr(obj) -> bytes:
    return json.dumps(
        obj, indent=4, sort_keys=True, ensure_ascii=True, separators=(",", ": ")
    ).encode("ascii")


def _load_manifest():
    path = os.path.join(FIXTURES, "manifest.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)["cases"]


MANIFEST = _load_manifest()


def _is_directory_group(case) -> bool:
    """Group fixtures stored as plain directories (the others are zip/sqlite/lmdb files)."""
    return case.get("kind") == "group" and case.get("store") in ("zarr", "directory")

ARRAY_CASES = [c for c in MANIFEST if c.get("kind") != "group"]

# Every .zarray of a directory store among the fixtures: the array cases plus the arrays inside
# the directory-backed group hierarchies.
ZARRAY_PATHS = [os.path.join(FIXTURES, c["path"], c["array"], ".zarray") for c in ARRAY_CASES]
for _c in MANIFEST:
    if _is_directory_group(_c):
        for _a in _c["arrays"]:
            ZARRAY_PATHS.append(os.path.join(FIXTURES, _c["path"], _a, ".zarray"))

pytestmark = pytest.mark.skipif(not MANIFEST, reason="v2 fixtures not available")


def _manifest_fill(text: str):
    """The manifest's fill_value is a Python repr ("np.int32(42)", "nan", "'0'", "None")."""
    if text == "None":
        return None
    if text in ("nan", "inf", "-inf"):
        return float(text)
    if text in ("np.False_", "np.True_"):
        return text == "np.True_"
    m = re.fullmatch(r"np\.(\w+)\((.*)\)", text)
    if m:
        return getattr(np, m.group(1))(*ast.literal_eval("(" + m.group(2) + ",)"))
    return ast.literal_eval(text)


def _manifest_dtype(text: str) -> np.dtype:
    if text.startswith("["):
        return np.dtype(ast.literal_eval(text))
    return np.dtype(text)


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# ------------------------------------------------------------------------------------------
# fixtures
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ARRAY_CASES, ids=[c["name"] for c in ARRAY_CASES])
def test_fixture_fields_match_manifest(case):
    key = f"{case['name']}/.zarray"
    meta = parse_array_metadata(_read(os.path.join(FIXTURES, case["path"], case["array"], ".zarray")), key)
    assert meta.zarr_format == 2
    assert meta.shape == tuple(case["shape"])
    assert meta.chunks == tuple(case["chunks"])
    assert meta.dtype == _manifest_dtype(case["dtype"])
    assert meta.order == case["order"]
    if case["compressor"] is None:
        assert meta.compressor is None
    else:
        assert meta.compressor.get_config() == case["compressor"]
    if case["filters"] is None:
        assert meta.filters is None
    else:
        assert [f.get_config() for f in meta.filters] == case["filters"]
    expected_sep = "/" if case["name"] == "nested_separator" else "."
    assert meta.dimension_separator == expected_sep

    want = _manifest_fill(case["fill_value"])
    if want is None:
        assert meta.fill_value is None
    elif meta.dtype.hasobject:
        assert meta.fill_value == want
        assert meta.fill_bytes() is None
    else:
        assert meta.fill_bytes() == np.array(want, dtype=meta.dtype).tobytes()
        assert type(meta.fill_value) is meta.dtype.type
    # The Cython core relies on this being exactly one item.
    if not meta.dtype.hasobject:
        assert len(meta.fill_bytes()) == meta.dtype.itemsize


@pytest.mark.parametrize("path", ZARRAY_PATHS, ids=[p[len(FIXTURES) + 1 :] for p in ZARRAY_PATHS])
def test_fixture_round_trip(path):
    raw = _read(path)
    meta = parse_array_metadata(raw, path)
    encoded = encode_array_metadata(meta)
    doc = json.loads(raw)
    had_sep = "dimension_separator" in doc
    doc.setdefault("dimension_separator", ".")
    assert json.loads(encoded) == doc
    if had_sep:
        assert encoded == raw
    else:
        # zarr-python 2.18 omits the default separator; otherwise identical bytes.
        without = json.loads(encoded)
        del without["dimension_separator"]
        assert _json_like_zarr(without) == raw
    # parse(encode(meta)) == meta, and from str and dict inputs too
    assert parse_array_metadata(encoded, path) == meta
    assert parse_array_metadata(raw.decode(), path) == meta
    assert parse_array_metadata(json.loads(raw), path) == meta


def test_fixture_nan_fill_compares_equal():
    path = os.path.join(FIXTURES, "fill_nan_missing/data.zarr/.zarray")
    a = parse_array_metadata(_read(path), "a")
    b = parse_array_metadata(_read(path), "b")
    assert np.isnan(a.fill_value) and a.fill_value.dtype == np.float64
    assert a == b


def test_fixture_object_fill_is_zero():
    # zarr-python 2 writes fill_value 0 for object arrays created with the default fill.
    meta = parse_array_metadata(
        _read(os.path.join(FIXTURES, "object_vlen_utf8/data.zarr/.zarray")), "o"
    )
    assert meta.dtype == object
    assert meta.fill_value == 0
    assert meta.fill_bytes() is None
    assert [f.codec_id for f in meta.filters] == ["vlen-utf8"]


# ------------------------------------------------------------------------------------------
# dtypes
# ------------------------------------------------------------------------------------------

SIMPLE_DTYPES = [
    "|b1", "|i1", "|u1", "<i2", ">i2", "<i4", ">i4", "<i8", ">i8", "<u2", ">u2", "<u4", "<u8",
    ">u8", "<f2", ">f2", "<f4", ">f4", "<f8", ">f8", "<c8", ">c8", "<c16", ">c16", "|S1",
    "|S5", "<U1", "<U4", ">U4", "|V7", "<M8[ns]", ">M8[ns]", "<M8[D]", "<M8[s]", "<M8[10s]",
    "<m8[s]", "<m8[ms]", ">m8[us]", "|O",
]

STRUCTURED_DTYPES = [
    [("x", "<i4"), ("y", "<f8", (2,)), ("s", "S3")],
    [("a", ">u2"), ("b", [("c", "<f4"), ("d", "|b1", (2, 3))]), ("e", "<M8[ms]")],
    [("outer", [("inner", [("v", "<i8")], (2,))])],
    [("u", "<U3"), ("c", "<c8", (1,))],
]


@pytest.mark.parametrize("spec", SIMPLE_DTYPES)
def test_simple_dtype_round_trip(spec):
    dtype = np.dtype(spec)
    enc = encode_dtype(dtype)
    assert enc == dtype.str
    assert isinstance(enc, str)
    back = decode_dtype(json.loads(json.dumps(enc)))
    assert back == dtype and back.str == dtype.str


def test_simple_dtype_strings():
    assert encode_dtype(np.float64) == "<f8"
    assert encode_dtype(bool) == "|b1"
    assert encode_dtype("S5") == "|S5"
    assert encode_dtype(np.dtype("<U4")) == "<U4"
    assert encode_dtype("M8[ns]") == "<M8[ns]"
    assert encode_dtype("m8[s]") == "<m8[s]"
    assert encode_dtype(object) == "|O"


@pytest.mark.parametrize("spec", STRUCTURED_DTYPES, ids=range(len(STRUCTURED_DTYPES)))
def test_structured_dtype_round_trip(spec):
    dtype = np.dtype(spec)
    enc = encode_dtype(dtype)
    assert isinstance(enc, list) and all(isinstance(f, list) for f in enc)
    back = decode_dtype(json.loads(json.dumps(enc)))
    assert back == dtype
    assert back.itemsize == dtype.itemsize


def test_structured_dtype_json_form():
    dtype = np.dtype([("x", "<i4"), ("y", "<f8", (2,)), ("s", "S3")])
    assert encode_dtype(dtype) == [["x", "<i4"], ["y", "<f8", [2]], ["s", "|S3"]]
    nested = np.dtype([("a", [("b", ">u2")], (3,))])
    assert encode_dtype(nested) == [["a", [["b", ">u2"]], [3]]]


_base_dtypes = st.sampled_from(
    ["|b1", "|i1", "<i2", ">i4", "<u8", "<f2", ">f8", "<c16", "|S4", "<U2", "<M8[us]", "<m8[D]"]
)


def _structured(children):
    names = st.lists(
        st.text("abcdefgh", min_size=1, max_size=4), min_size=1, max_size=4, unique=True
    )
    shapes = st.one_of(st.just(()), st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple))

    @st.composite
    def build(draw):
        fields = []
        for name in draw(names):
            sub = draw(children)
            shape = draw(shapes)
            fields.append((name, sub, shape) if shape else (name, sub))
        return np.dtype(fields)

    return build()


_dtypes = st.recursive(_base_dtypes.map(np.dtype), _structured, max_leaves=8)


@given(_dtypes)
@settings(max_examples=200, deadline=None)
def test_dtype_round_trip_property(dtype):
    enc = encode_dtype(dtype)
    back = decode_dtype(json.loads(json.dumps(enc)))
    assert back == dtype


def test_decode_dtype_rejects_garbage():
    for bad in ("<q9", 12, None, [], [["x"]], [[1, "<i4"]], [["x", "<i4", "a"]], {"a": 1}):
        with pytest.raises((ValueError, TypeError)):
            decode_dtype(bad)


# ------------------------------------------------------------------------------------------
# fill values
# ------------------------------------------------------------------------------------------


def _same_fill(a, b, dtype):
    if a is None or b is None:
        return a is None and b is None
    if np.dtype(dtype).hasobject:
        return a == b
    return np.array(a, dtype=dtype).tobytes() == np.array(b, dtype=dtype).tobytes()


@pytest.mark.parametrize(
    "dtype, value, expected_json",
    [
        ("<f8", np.nan, "NaN"),
        ("<f8", np.inf, "Infinity"),
        ("<f8", -np.inf, "-Infinity"),
        ("<f4", np.float32("nan"), "NaN"),
        (">f2", -np.inf, "-Infinity"),
        ("<f8", 0.0, 0.0),
        ("<f8", 1.5, 1.5),
        ("<f8", -0.0, -0.0),
        ("<c16", complex(1, 2), [1.0, 2.0]),
        ("<c8", complex(np.nan, -np.inf), ["NaN", "-Infinity"]),
        ("<c16", complex(np.inf, 0), ["Infinity", 0.0]),
        ("<i4", 42, 42),
        (">i8", -(2**63), -(2**63)),
        ("<u8", 2**64 - 1, 2**64 - 1),
        ("|b1", True, True),
        ("|b1", False, False),
        ("|S5", b"zz", "eno="),
        ("|S5", b"0", "MA=="),
        ("|S3", b"abc", base64.b64encode(b"abc").decode()),
        ("<U4", "é0", "é0"),
        ("<U4", "", ""),
        ("<M8[ns]", np.datetime64("NaT"), -(2**63)),
        ("<M8[ns]", np.datetime64(0, "ns"), 0),
        ("<M8[D]", np.datetime64("2000-01-02"), 10958),
        (">M8[s]", np.datetime64(5, "s"), 5),
        ("<m8[s]", np.timedelta64("NaT"), -(2**63)),
        ("<m8[s]", np.timedelta64(-7, "s"), -7),
        ("|V3", b"\x00\x01\x02", "AAEC"),
        ("|O", "", ""),
        ("|O", 0, 0),
        ("<i4", None, None),
        ("|O", None, None),
    ],
)
def test_fill_value_known_encodings(dtype, value, expected_json):
    dtype = np.dtype(dtype)
    enc = encode_fill_value(value, dtype)
    if isinstance(expected_json, float) and expected_json == 0:
        assert math.copysign(1, enc) == math.copysign(1, expected_json)
    assert enc == expected_json
    assert type(enc) is type(expected_json)
    # survives strict JSON (no NaN tokens)
    text = json.dumps(enc, allow_nan=False)
    dec = decode_fill_value(json.loads(text), dtype)
    assert _same_fill(dec, value, dtype)
    if value is not None and not dtype.hasobject:
        assert type(dec) is dtype.type


def test_fill_value_nan_bits_and_nat():
    v = decode_fill_value("NaN", np.dtype("<f8"))
    assert isinstance(v, np.float64) and np.isnan(v)
    assert np.isnat(decode_fill_value(-(2**63), np.dtype("<M8[ns]")))
    assert np.isnat(decode_fill_value(-(2**63), np.dtype("<m8[s]")))
    c = decode_fill_value(["NaN", "Infinity"], np.dtype("<c16"))
    assert np.isnan(c.real) and c.imag == np.inf


def test_structured_fill_value():
    dtype = np.dtype([("x", "<i4"), ("y", ">f8", (2,)), ("s", "S3")])
    value = np.array((7, [1.5, np.nan], b"ab"), dtype=dtype)[()]
    enc = encode_fill_value(value, dtype)
    assert base64.b64decode(enc) == np.array(value, dtype=dtype).tobytes()
    assert len(base64.b64decode(enc)) == dtype.itemsize
    dec = decode_fill_value(enc, dtype)
    assert isinstance(dec, np.void) and dec.dtype == dtype
    assert np.array(dec, dtype=dtype).tobytes() == np.array(value, dtype=dtype).tobytes()
    # field values as a list are accepted too
    dec2 = decode_fill_value([7, [1.5, 2.0], "ab"], dtype)
    assert dec2["x"] == 7 and dec2["s"] == b"ab"
    meta = ArrayMetadataV2(shape=(3,), chunks=(2,), dtype=dtype, fill_value=value)
    assert meta.fill_bytes() == np.array(value, dtype=dtype).tobytes()
    assert parse_array_metadata(encode_array_metadata(meta), "k") == meta


@pytest.mark.parametrize(
    "dtype, bad",
    [
        ("<i4", "x"),
        ("<i4", 1.5),
        ("<i4", True),
        ("|i1", 128),
        ("<u2", -1),
        ("|b1", "yes"),
        ("|b1", 2),
        ("<f8", "nope"),
        ("<f8", [1, 2]),
        ("<c16", [1, 2, 3]),
        ("|S2", base64.b64encode(b"abc").decode()),
        ("|S2", "!!not base64!!"),
        ("|S2", 5),
        ("<U2", "abc"),
        ("<U2", 3),
        ("|V4", "AAEC"),  # 3 bytes for a 4-byte void
        ("<M8[s]", True),
        ("<M8[s]", 2**64),
    ],
)
def test_fill_value_invalid(dtype, bad):
    with pytest.raises((ValueError, TypeError, OverflowError)):
        decode_fill_value(bad, np.dtype(dtype))


@st.composite
def _dtype_and_value(draw):
    kind = draw(st.sampled_from(["f", "c", "i", "u", "b", "S", "U", "M", "m", "V"]))
    if kind == "f":
        dt = np.dtype(draw(st.sampled_from(["<f2", ">f4", "<f8"])))
        v = draw(st.floats(width=8 * dt.itemsize, allow_nan=True, allow_infinity=True))
        return dt, np.array(v, dtype=dt)[()]
    if kind == "c":
        dt = np.dtype(draw(st.sampled_from(["<c8", ">c16"])))
        w = 4 * dt.itemsize
        return dt, np.array(complex(draw(st.floats(width=w)), draw(st.floats(width=w))), dtype=dt)[()]
    if kind in "iu":
        dt = np.dtype(draw(st.sampled_from([f"|{kind}1", f"<{kind}2", f">{kind}4", f"<{kind}8"])))
        info = np.iinfo(dt)
        return dt, draw(st.integers(int(info.min), int(info.max)))
    if kind == "b":
        return np.dtype("|b1"), draw(st.booleans())
    if kind == "S":
        return np.dtype("|S6"), draw(st.binary(max_size=6))
    if kind == "U":
        return np.dtype("<U3"), draw(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=3))
    if kind in "Mm":
        dt = np.dtype(draw(st.sampled_from([kind + "8[ns]", "<" + kind + "8[D]", ">" + kind + "8[s]"])))
        return dt, draw(st.integers(-(2**63), 2**63 - 1))
    dt = np.dtype([("a", "<i2"), ("b", ">f4", (2,)), ("c", "S2")])
    raw = draw(st.binary(min_size=dt.itemsize, max_size=dt.itemsize))
    return dt, raw


@given(_dtype_and_value())
@settings(max_examples=400, deadline=None)
def test_fill_value_round_trip_property(dv):
    dtype, value = dv
    meta = ArrayMetadataV2(shape=(4,), chunks=(2,), dtype=dtype, fill_value=value)
    doc = json.loads(encode_array_metadata(meta))
    json.dumps(doc, allow_nan=False)  # fill values never need NaN tokens
    back = parse_array_metadata(json.dumps(doc), "p/.zarray")
    if dtype.kind in "fc" and np.isnan(value):
        # "NaN" in JSON cannot carry a NaN's sign or payload bits; any NaN reads back as NaN.
        assert np.array_equal(back.fill_value, meta.fill_value, equal_nan=True)
    else:
        assert back.fill_bytes() == meta.fill_bytes()
    assert len(back.fill_bytes()) == dtype.itemsize
    assert back == meta


# ------------------------------------------------------------------------------------------
# ArrayMetadataV2 construction and fill_bytes
# ------------------------------------------------------------------------------------------


def test_construct_and_encode_default_layout():
    meta = ArrayMetadataV2(
        shape=(10, 20), chunks=(5, 7), dtype="<i4", compressor=default_compressor(),
        fill_value=3, order="C", filters=None, dimension_separator=".",
    )
    text = encode_array_metadata(meta)
    assert text == _json_like_zarr(json.loads(text))
    doc = json.loads(text)
    assert list(doc) == sorted(doc)
    assert doc == {
        "chunks": [5, 7],
        "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
        "dimension_separator": ".",
        "dtype": "<i4",
        "fill_value": 3,
        "filters": None,
        "order": "C",
        "shape": [10, 20],
        "zarr_format": 2,
    }
    assert text.startswith(b'{\n    "chunks": [\n        5,\n        7\n    ],')


def test_default_compressor():
    c = default_compressor()
    assert isinstance(c, numcodecs.Blosc)
    assert c.get_config() == {
        "id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": numcodecs.Blosc.SHUFFLE,
        "blocksize": 0,
    }


def test_constructor_accepts_codec_configs_and_python_fill():
    meta = ArrayMetadataV2(
        shape=[4], chunks=[2], dtype=np.float32, compressor={"id": "zlib", "level": 1},
        filters=[{"id": "delta", "dtype": "<f4"}], fill_value="NaN",
    )
    assert isinstance(meta.compressor, numcodecs.Zlib)
    assert isinstance(meta.filters[0], numcodecs.Delta)
    assert isinstance(meta.fill_value, np.float32) and np.isnan(meta.fill_value)
    assert meta.shape == (4,) and meta.chunks == (2,)


@pytest.mark.parametrize(
    "dtype, fill, expected",
    [
        (">i4", 1, b"\x00\x00\x00\x01"),
        ("<i4", 1, b"\x01\x00\x00\x00"),
        (">u2", None, b"\x00\x00"),
        ("<f8", None, bytes(8)),
        ("|S5", b"zz", b"zz\x00\x00\x00"),
        ("<U2", "a", b"a\x00\x00\x00\x00\x00\x00\x00"),
        (">f4", -np.inf, b"\xff\x80\x00\x00"),
        ("|b1", True, b"\x01"),
        ("<M8[ns]", np.datetime64("NaT"), (-(2**63)).to_bytes(8, "little", signed=True)),
        (">c8", complex(1, 0), b"\x3f\x80\x00\x00\x00\x00\x00\x00"),
    ],
)
def test_fill_bytes(dtype, fill, expected):
    meta = ArrayMetadataV2(shape=(3,), chunks=(3,), dtype=dtype, fill_value=fill)
    assert meta.fill_bytes() == expected
    assert len(meta.fill_bytes()) == np.dtype(dtype).itemsize


def test_fill_bytes_object_is_none():
    meta = ArrayMetadataV2(
        shape=(3,), chunks=(3,), dtype=object, fill_value="", filters=[numcodecs.VLenUTF8()]
    )
    assert meta.fill_bytes() is None
    assert json.loads(encode_array_metadata(meta))["fill_value"] == ""


def test_chunk_key_and_grid():
    meta = ArrayMetadataV2(shape=(23, 17), chunks=(7, 5), dtype="<i4")
    assert meta.chunk_grid_shape == (4, 4)
    assert meta.chunk_key((1, 3)) == "1.3"
    nested = ArrayMetadataV2(shape=(23, 17), chunks=(7, 5), dtype="<i4", dimension_separator="/")
    assert nested.chunk_key((1, 3)) == "1/3"
    zero_d = ArrayMetadataV2(shape=(), chunks=(), dtype="<f8")
    assert zero_d.chunk_key(()) == "0"
    assert zero_d.chunk_grid_shape == ()
    with pytest.raises(ValueError):
        meta.chunk_key((1,))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(shape=(3,), chunks=(3, 1), dtype="<i4"),
        dict(shape=(3,), chunks=(0,), dtype="<i4"),
        dict(shape=(-1,), chunks=(1,), dtype="<i4"),
        dict(shape=(3,), chunks=(1,), dtype="<i4", order="K"),
        dict(shape=(3,), chunks=(1,), dtype="<i4", dimension_separator="-"),
        dict(shape=(3,), chunks=(1,), dtype="<i4", fill_value=2**40),
        dict(shape=(3,), chunks=(1,), dtype="<i4", zarr_format=3),
        dict(shape=(3,), chunks=(1,), dtype="<i4", compressor={"id": "no-such-codec"}),
    ],
)
def test_constructor_validates(kwargs):
    with pytest.raises(ValueError):
        ArrayMetadataV2(**kwargs)


# ------------------------------------------------------------------------------------------
# invalid documents
# ------------------------------------------------------------------------------------------

_GOOD = {
    "chunks": [7, 5],
    "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
    "dtype": "<f8",
    "fill_value": 0.0,
    "filters": None,
    "order": "C",
    "shape": [23, 17],
    "zarr_format": 2,
}


def _with(**changes):
    doc = dict(_GOOD)
    for k, v in changes.items():
        if v is _DELETE:
            del doc[k]
        else:
            doc[k] = v
    return doc


_DELETE = object()

BAD_DOCS = {
    "not_json": b"{not json",
    "truncated": json.dumps(_GOOD)[:-5].encode(),
    "not_utf8": b'{"zarr_format": "\xff"}',
    "json_list": b"[1, 2]",
    "json_null": b"null",
    "empty": b"",
    **{f"missing_{k}": _with(**{k: _DELETE}) for k in _GOOD},
    "zarr_format_3": _with(zarr_format=3),
    "zarr_format_str": _with(zarr_format="2"),
    "zarr_format_true": _with(zarr_format=True),
    "unknown_codec": _with(compressor={"id": "definitely-not-a-codec"}),
    "codec_without_id": _with(compressor={"level": 1}),
    "codec_bad_args": _with(compressor={"id": "zlib", "nonsense": 1}),
    "codec_not_object": _with(compressor="blosc"),
    "unknown_filter": _with(filters=[{"id": "definitely-not-a-codec"}]),
    "filters_not_list": _with(filters={"id": "delta", "dtype": "<f8"}),
    "shape_chunks_length": _with(chunks=[7]),
    "shape_chunks_length2": _with(shape=[23, 17, 2]),
    "shape_not_list": _with(shape=23),
    "chunks_not_list": _with(chunks="7,5"),
    "shape_negative": _with(shape=[-1, 17]),
    "shape_float": _with(shape=[23.0, 17]),
    "shape_bool": _with(shape=[True, 17]),
    "chunks_zero": _with(chunks=[0, 5]),
    "chunks_float": _with(chunks=[7.5, 5]),
    "bad_order": _with(order="X"),
    "order_null": _with(order=None),
    "bad_dtype": _with(dtype="<q9"),
    "dtype_number": _with(dtype=8),
    "bad_structured_dtype": _with(dtype=[["x"]]),
    "bad_fill_for_float": _with(fill_value="banana"),
    "bad_fill_for_int": _with(dtype="<i4", fill_value="NaN"),
    "fill_out_of_range": _with(dtype="|u1", fill_value=256),
    "bad_separator": _with(dimension_separator="-"),
}


@pytest.mark.parametrize("name", list(BAD_DOCS))
def test_bad_array_metadata(name):
    raw = BAD_DOCS[name]
    if isinstance(raw, dict):
        raw = json.dumps(raw).encode()
    key = "foo/bar/.zarray"
    with pytest.raises(MetadataError) as info:
        parse_array_metadata(raw, key)
    msg = str(info.value)
    assert msg.startswith("invalid array metadata at 'foo/bar/.zarray': "), msg
    assert isinstance(info.value, ValueError)


def test_bad_metadata_messages_are_specific():
    with pytest.raises(MetadataError, match="missing required field.*fill_value"):
        parse_array_metadata(_with(fill_value=_DELETE), "k")
    with pytest.raises(MetadataError, match="zarr_format must be 2"):
        parse_array_metadata(_with(zarr_format=3), "k")
    with pytest.raises(MetadataError, match="definitely-not-a-codec"):
        parse_array_metadata(_with(compressor={"id": "definitely-not-a-codec"}), "k")
    with pytest.raises(MetadataError, match="different lengths"):
        parse_array_metadata(_with(chunks=[7]), "k")
    with pytest.raises(MetadataError, match="not valid JSON"):
        parse_array_metadata(b"{", "k")


def test_dimension_separator_optional_and_null():
    assert parse_array_metadata(_GOOD, "k").dimension_separator == "."
    assert parse_array_metadata(_with(dimension_separator=None), "k").dimension_separator == "."
    assert parse_array_metadata(_with(dimension_separator="/"), "k").dimension_separator == "/"


def test_nan_token_fill_value_accepted():
    # Some old writers emitted a bare NaN token instead of the "NaN" string.
    raw = json.dumps(_with(fill_value=float("nan"))).encode()
    assert b"NaN" in raw
    meta = parse_array_metadata(raw, "k")
    assert np.isnan(meta.fill_value)
    assert json.loads(encode_array_metadata(meta))["fill_value"] == "NaN"


def test_extra_keys_ignored_and_filters_empty_list():
    meta = parse_array_metadata(_with(extra={"x": 1}, filters=[]), "k")
    assert meta.filters == []


# ------------------------------------------------------------------------------------------
# groups and attributes
# ------------------------------------------------------------------------------------------


def test_group_metadata():
    raw = encode_group_metadata()
    assert raw == b'{\n    "zarr_format": 2\n}'
    assert parse_group_metadata(raw, ".zgroup") == {"zarr_format": 2}
    for c in MANIFEST:
        if _is_directory_group(c):
            for g in c["groups"]:
                p = os.path.join(FIXTURES, c["path"], g, ".zgroup")
                fixture = _read(p)
                assert parse_group_metadata(fixture, p) == {"zarr_format": 2}
                assert fixture == raw


@pytest.mark.parametrize(
    "raw", [b"", b"{", b"[]", b"{}", b'{"zarr_format": 3}', b'{"zarr_format": "2"}']
)
def test_bad_group_metadata(raw):
    with pytest.raises(MetadataError, match=r"^invalid group metadata at 'g/\.zgroup': "):
        parse_group_metadata(raw, "g/.zgroup")


def test_attrs_round_trip_and_layout():
    attrs = {"title": "root \u2603", "n": 3, "nested": {"k": [1, 2.5, None]}, "b": True}
    raw = encode_attrs(attrs)
    raw.decode("ascii")  # ensure_ascii
    assert b"\\u2603" in raw
    assert raw == _json_like_zarr(attrs)
    assert parse_attrs(raw, ".zattrs") == attrs


def test_attrs_fixtures():
    for c in MANIFEST:
        if not _is_directory_group(c):
            continue
        for path, expected in c["attrs"].items():
            p = os.path.join(FIXTURES, c["path"], path, ".zattrs")
            raw = _read(p)
            assert parse_attrs(raw, p) == expected
            assert encode_attrs(parse_attrs(raw, p)) == raw


def test_attrs_nan_and_numpy_values():
    attrs = {"nan": float("nan"), "inf": float("inf"), "ninf": -np.inf,
             "np": np.int64(3), "f": np.float32(0.5), "arr": np.arange(3), "flag": np.bool_(True)}
    raw = encode_attrs(attrs)
    assert b"NaN" in raw and b"Infinity" in raw and b"-Infinity" in raw
    back = json.loads(raw)
    assert math.isnan(back["nan"]) and back["inf"] == math.inf and back["ninf"] == -math.inf
    assert back["np"] == 3 and back["f"] == 0.5 and back["arr"] == [0, 1, 2] and back["flag"] is True
    assert math.isnan(parse_attrs(raw, "k")["nan"])


@pytest.mark.parametrize("raw", [b"{", b"[1]", b"3", b"\xff\xfe"])
def test_bad_attrs(raw):
    with pytest.raises(MetadataError, match=r"^invalid attributes at 'a/\.zattrs': "):
        parse_attrs(raw, "a/.zattrs")


def test_encode_attrs_rejects_non_mapping_and_bad_values():
    with pytest.raises(TypeError):
        encode_attrs([1, 2])
    with pytest.raises(TypeError):
        encode_attrs({"x": object()})


# ------------------------------------------------------------------------------------------
# normalize_chunks
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "chunks, shape, expected",
    [
        (10, (100, 50), (10, 10)),
        ((10, 5), (100, 50), (10, 5)),
        ([10, 5], (100, 50), (10, 5)),
        ((10, None), (100, 50), (10, 50)),
        ((10, -1), (100, 50), (10, 50)),
        ((None, 5), (100, 50), (100, 5)),
        ((10,), (100, 50, 20), (10, 50, 20)),
        ((), (100, 50), (100, 50)),
        (-1, (100, 50), (100, 50)),
        (False, (100, 50), (100, 50)),
        (False, (0, 5), (1, 5)),
        ((None, 3), (0, 5), (1, 3)),
        (200, (100,), (200,)),  # larger than the shape is allowed when explicit
        (np.int64(4), (10,), (4,)),
        ((np.int32(4), 2), (10, 10), (4, 2)),
        (5, (), ()),
        (True, (), ()),
        ((), (), ()),
        (False, (), ()),
    ],
)
def test_normalize_chunks_explicit(chunks, shape, expected):
    assert normalize_chunks(chunks, shape, 8) == expected


@pytest.mark.parametrize(
    "chunks, match",
    [
        (0, "dimension 0"),
        ((10, 0), "dimension 1"),
        ((10, -2), "dimension 1"),
        ((10.5, 5), "dimension 0"),
        ((10, "5"), "dimension 1"),
        ((10, True), "dimension 1"),
        ((1, 2, 3), "3 dimensions"),
        ("big", "auto"),
        (2.0, "chunks"),
        ({"a": 1}, "chunks"),
    ],
)
def test_normalize_chunks_invalid(chunks, match):
    with pytest.raises(ValueError, match=match):
        normalize_chunks(chunks, (100, 50), 8)


@pytest.mark.parametrize("auto", [True, "auto", None])
@pytest.mark.parametrize(
    "shape, itemsize",
    [
        ((10_000, 10_000), 8),
        ((100_000_000,), 1),
        ((1000, 1000, 1000), 4),
        ((5, 1_000_000), 8),
        ((50, 60, 70, 80), 2),
        ((2**40,), 8),
        ((3, 4), 8),
        ((0, 100), 8),
        ((0, 0), 4),
        ((1_000_000, 3), 16),
        ((4096, 4096), 1),
    ],
)
def test_normalize_chunks_guess(auto, shape, itemsize):
    """zarr-python's guess (h5py's rule, the same in zarr-python 2 and 3), so that
    `import chunkstore as zarr` lays arrays out as zarr does."""
    chunks = normalize_chunks(auto, shape, itemsize)
    assert len(chunks) == len(shape)
    assert all(isinstance(c, int) and c >= 1 for c in chunks)
    assert all(c <= max(s, 1) for c, s in zip(chunks, shape))
    nbytes = math.prod(chunks) * itemsize
    total = math.prod(max(s, 1) for s in shape) * itemsize
    if total <= 128 * 1024:
        assert chunks == tuple(max(s, 1) for s in shape)
    else:
        assert 64 * 1024 <= nbytes <= 64 * 1024 * 1024, (chunks, nbytes)
    zarr_grids = pytest.importorskip("zarr.core.chunk_grids")
    assert chunks == zarr_grids._guess_chunks(shape, itemsize)


def test_normalize_chunks_guess_is_balanced():
    chunks = normalize_chunks(True, (10_000, 10_000), 8)
    assert max(chunks) / min(chunks) <= 2
    chunks = normalize_chunks(True, (1000, 1000, 1000), 4)
    assert max(chunks) / min(chunks) <= 2


def test_normalize_chunks_huge_items():
    # A single item bigger than the target: one item per chunk, never zero.
    assert normalize_chunks(True, (10, 10), 8 * 1024 * 1024) == (1, 1)


@pytest.mark.parametrize("compressor, words", [
    ({"id": "blosc", "cname": "lz4", "clevel": 99, "shuffle": 1, "blocksize": 0}, "clevel"),
    ({"id": "blosc", "cname": "nosuch", "clevel": 5, "shuffle": 1, "blocksize": 0}, "cname"),
    ({"id": "gzip", "level": 99}, "level"), ({"id": "zlib", "level": 99}, "level"),
    ({"id": "bz2", "level": 0}, "level"), ({"id": "zstd", "level": "x"}, "level"),
])
def test_codec_parameters_numcodecs_refuses_only_when_it_encodes_are_refused_at_open(
        compressor, words):
    # they opened, and the first write failed with numcodecs' bare error (no array, key or
    # parameter named; c-blosc printing to stderr)
    doc = {"chunks": [2], "compressor": compressor, "dtype": "<i4", "fill_value": 0,
           "filters": None, "order": "C", "shape": [4], "zarr_format": 2}
    with pytest.raises(MetadataError, match=f"a/.zarray.*{words}"):
        parse_array_metadata(json.dumps(doc), "a/.zarray")
    # what numcodecs encodes with still opens (zarr-python 2 writes such documents)
    for ok in ({"id": "blosc", "cname": "zstd", "clevel": 5, "shuffle": -1, "blocksize": 0},
               {"id": "gzip", "level": -1}, {"id": "zstd", "level": 30},
               {"id": "lz4", "acceleration": 0},
               {"id": "lzma", "format": 1, "check": -1, "preset": 9 | 0x80000000,
                "filters": None}):
        parse_array_metadata(json.dumps(dict(doc, compressor=ok)), "a/.zarray")


def test_a_time_dtype_without_a_unit_is_refused_at_open():
    doc = {"chunks": [2], "compressor": None, "dtype": "<M8", "fill_value": 0,
           "filters": None, "order": "C", "shape": [4], "zarr_format": 2}
    with pytest.raises(MetadataError, match="no time unit"):
        parse_array_metadata(json.dumps(doc), ".zarray")
    doc["dtype"], doc["fill_value"] = [["t", "<m8"], ["x", "<i4"]], None
    with pytest.raises(MetadataError, match="no time unit"):
        parse_array_metadata(json.dumps(doc), ".zarray")


_PADDED = [np.dtype([("a", "u1"), ("b", "<i4")], align=True),
           np.dtype([("a", "u1"), ("b", "<f8")], align=True),
           np.dtype({"names": ["a", "b"], "formats": ["u1", "<i4"], "offsets": [0, 4],
                     "itemsize": 12})]


@pytest.mark.parametrize("dtype", _PADDED, ids=["u1-i4", "u1-f8", "itemsize"])
@pytest.mark.parametrize("fill", [0, (1, 2), "void"])
def test_a_structured_fill_values_padding_is_zero_not_heap_bytes(dtype, fill):
    """NumPy builds a structured value of another layout field by field into uninitialised
    memory: the padding bytes of a v2 fill value held heap bytes (a pointer, once), written
    into .zarray and into the chunks padded with the fill, and read back as the padding's
    field (zarr-python 2's spelling of the dtype). zarr-python 2 writes zeros."""
    import chunkstore as cs
    if fill == "void":
        fill = np.zeros((), np.dtype([("a", "u1"), ("b", "<i4")]))[()]  # packed: another layout
    for _ in range(5):
        junk = [np.full(4, 0xABABABABABABABAB, dtype="u8") for _ in range(300)]
        del junk  # (the heap dirty where NumPy allocates next)
        store = {}
        z = cs.create((4,), chunks=(3,), dtype=dtype, fill_value=fill, store=store,
                      compressor=None, write_empty_chunks=True)
        raw = base64.b64decode(json.loads(store[".zarray"])["fill_value"])
        want = np.zeros((), dtype)
        want[()] = (0, 0) if isinstance(fill, (int, np.void)) else fill
        assert raw == want.tobytes()
        z[0] = z[0]  # a partial chunk: the rest of it padded with the fill
        assert store["0"] == want.tobytes() * 3
        r = cs.open_array(store, mode="r")
        assert r[3].tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype, fill, what", [
    ("m8[s]", np.datetime64("2020"), "is a date"),
    ("M8[s]", np.timedelta64(5, "s"), "is a duration"),
    # a number array took a date's or duration's count: 1970-01-01T00:00:01 as 1.0
    ("f8", np.datetime64("1970-01-01T00:00:01"), "is a date; float64 holds numbers"),
    ("i4", np.timedelta64(5, "s"), "is a duration; int32 holds numbers"),
    ("u1", np.datetime64("1970-01-02"), "is a date"),
    ("c8", np.timedelta64(1, "D"), "is a duration"),
    ("?", np.timedelta64(1, "s"), "is a duration")])
def test_a_v2_time_fill_of_the_other_kind_is_refused(dtype, fill, what):
    """A date as a duration array's fill value (or the reverse) was taken by its count: 2020
    (50 years from 1970) as 50 s. Refused at creation and by the setter, as in Zarr v3 and
    zarr-python 3."""
    import chunkstore as cs
    store = {}
    with pytest.raises(ValueError, match=what):
        cs.create((2,), dtype=dtype, fill_value=fill, store=store, zarr_format=2)
    assert not store
    z = cs.create((2,), dtype=dtype, fill_value=1, store=store, zarr_format=2)
    before = dict(store)
    with pytest.raises(ValueError, match=what):
        z.fill_value = fill
    assert store == before and z.fill_value == np.array(1, dtype)[()]
