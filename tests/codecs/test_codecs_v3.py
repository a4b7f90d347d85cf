"""Zarr v3 codec chain (chunkstore.codecs.v3.ChunkCodecV3).

- Every golden v3 array (zarr-python 3.1 and tensorstore) decodes exactly as its expectation,
  through the pieces alone: parse zarr.json, read each stored chunk (through a
  ShardedStoreView for sharded arrays), decode, assemble with NumPy.
- Round trips with zarr-python 3 in both directions, for every data type and codec chain.
- tensorstore reads what the pieces write.
- decode(out=...) follows ChunkCodecV2's contract; every failure is a ChunkDecodeError naming
  the chunk key and the store (a crc32c mismatch says "checksum mismatch").

The helpers ``write_v3``/``read_v3`` here are reused by test_sharding.py.
"""

from __future__ import annotations

import itertools
import json
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore.format.sharded_view import ShardedStoreView
from chunkstore.codecs.v3 import ChunkCodecV3, normalize_codecs
from chunkstore.errors import ChunkDecodeError
from chunkstore.metadata.v3 import (ArrayMetadataV3, encode_array_metadata_v3,
                                    parse_array_metadata_v3)
from chunkstore.storage.directory import DirectoryStore
from conftest import FIXTURES

zarr = pytest.importorskip("zarr")

from v3_fixtures import (FIXTURES_V3, _region, array_cases_v3, assert_array_same, grid_coords,  # noqa: E402,E501
                         load_manifest_v3, read_v3, write_v3)


# ------------------------------------------------------------------------------ fixtures

ARRAY_CASES = array_cases_v3()


@pytest.mark.skipif(not ARRAY_CASES, reason=f"no fixtures at {FIXTURES_V3}")
@pytest.mark.parametrize("case", ARRAY_CASES, ids=[c["name"] for c in ARRAY_CASES])
def test_fixture_decodes_exactly(case):
    root = FIXTURES_V3 / case["path"]
    prefix = case["array"]
    key = (prefix.strip("/") + "/" if prefix else "") + "zarr.json"
    store = DirectoryStore(str(root), mode="r")
    meta = parse_array_metadata_v3(store[key], key)
    expected = np.load(FIXTURES_V3 / case["expected"], allow_pickle=True)
    actual = read_v3(store, meta, prefix)
    assert_array_same(actual, expected)
    if meta.dtype.kind != "O":
        assert actual.dtype == expected.dtype


SHARDED_CASES = [c for c in ARRAY_CASES if "sharding_indexed" in json.dumps(c.get("metadata"))]


@pytest.mark.skipif(not SHARDED_CASES, reason=f"no fixtures at {FIXTURES_V3}")
@pytest.mark.parametrize("case", SHARDED_CASES, ids=[c["name"] for c in SHARDED_CASES])
def test_fixture_sharded_decodes_as_whole_shards(case):
    """The sharding codec inside a ChunkCodecV3 chain decodes whole shards (the path nested
    sharding takes)."""
    root = FIXTURES_V3 / case["path"]
    store = DirectoryStore(str(root), mode="r")
    meta = parse_array_metadata_v3(store["zarr.json"], "zarr.json")
    codec = ChunkCodecV3(meta)
    assert codec.chunk_shape == meta.chunks
    out = np.empty(meta.shape, dtype=meta.dtype)
    for c in grid_coords(meta.chunk_grid_shape):
        reg = _region(c, meta.chunks, meta.shape)
        k = meta.chunk_key(c)
        if k in store:
            shard = codec.decode(store[k], key=k, store=store)
            out[reg] = shard[tuple(slice(0, r.stop - r.start) for r in reg)]
        else:
            out[reg] = meta.fill_value
    assert_array_same(out, np.load(FIXTURES_V3 / case["expected"]))


@pytest.mark.skipif(not ARRAY_CASES, reason=f"no fixtures at {FIXTURES_V3}")
def test_fixture_missing_chunks_really_missing():
    """The *_missing fixtures do lack chunks, so the fill path above is exercised."""
    for case in ARRAY_CASES:
        if case.get("missing_chunks") and "sharding" not in json.dumps(case["metadata"]):
            store = DirectoryStore(str(FIXTURES_V3 / case["path"]), mode="r")
            meta = parse_array_metadata_v3(store["zarr.json"])
            present = [c for c in grid_coords(meta.chunk_grid_shape)
                       if meta.chunk_key(c) in store]
            assert 0 < len(present) < len(grid_coords(meta.chunk_grid_shape)), case["name"]


# ------------------------------------------------------------------------------ round trips

NUMERIC = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64", "complex64", "complex128"]

BYTES_LE = {"name": "bytes", "configuration": {"endian": "little"}}
BYTES_BE = {"name": "bytes", "configuration": {"endian": "big"}}
ZSTD = {"name": "zstd", "configuration": {"level": 1, "checksum": False}}
CHAINS = {
    "bytes": [BYTES_LE],
    "big": [BYTES_BE],
    "blosc_lz4_shuffle": [BYTES_LE, {"name": "blosc", "configuration": {
        "cname": "lz4", "clevel": 5, "shuffle": "shuffle"}}],
    "blosc_zstd_bitshuffle": [BYTES_LE, {"name": "blosc", "configuration": {
        "cname": "zstd", "clevel": 3, "shuffle": "bitshuffle", "blocksize": 0}}],
    "blosc_noshuffle_big": [BYTES_BE, {"name": "blosc", "configuration": {
        "cname": "blosclz", "clevel": 1, "shuffle": "noshuffle", "typesize": 1}}],
    "gzip": [BYTES_LE, {"name": "gzip", "configuration": {"level": 6}}],
    "zstd": [BYTES_LE, ZSTD],
    "zstd_checksum": [BYTES_LE, {"name": "zstd", "configuration": {"level": 3,
                                                                   "checksum": True}}],
    "zstd_crc32c": [BYTES_LE, ZSTD, {"name": "crc32c"}],
    "crc32c_big": [BYTES_BE, {"name": "crc32c"}],
    "transpose_general": [{"name": "transpose", "configuration": {"order": [2, 0, 1]}},
                          BYTES_LE, ZSTD],
    "transpose_reversed_big": [{"name": "transpose", "configuration": {"order": [2, 1, 0]}},
                               BYTES_BE, {"name": "gzip", "configuration": {"level": 1}}],
    "transpose_twice": [{"name": "transpose", "configuration": {"order": [1, 0, 2]}},
                        {"name": "transpose", "configuration": {"order": [0, 2, 1]}},
                        BYTES_LE, {"name": "crc32c"}],
}
STRING_CHAINS = {
    "vlen": [{"name": "vlen-utf8", "configuration": {}}],
    "vlen_zstd": [{"name": "vlen-utf8", "configuration": {}}, ZSTD],
    "vlen_gzip_crc32c": [{"name": "vlen-utf8"}, {"name": "gzip", "configuration": {"level": 1}},
                         {"name": "crc32c"}],
    "transpose_vlen_blosc": [{"name": "transpose", "configuration": {"order": [1, 2, 0]}},
                             {"name": "vlen-utf8"}, {"name": "blosc", "configuration": {
                                 "cname": "zstd", "clevel": 5, "shuffle": "noshuffle",
                                 "typesize": 1}}],
}

SHAPE, CHUNKS = (5, 7, 6), (2, 3, 4)


def sample(dtype, shape=SHAPE, seed=0):
    """Values exercising the type: extremes, NaN/inf/-0.0 for floats, unicode for strings;
    one chunk-aligned block left at the fill value so a chunk is missing."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype == "string":
        words = ["", "a", "héllo", "日本語", "x" * 50, "emoji 🎉", "tab\tnew\nline"]
        flat = np.array([words[i % len(words)] + str(i) for i in range(n)], dtype=object)
        arr = flat.reshape(shape)
        arr[:2, :3, :4] = ""
        return arr
    d = np.dtype(dtype)
    if d.kind == "b":
        arr = rng.integers(0, 2, n).astype(bool)
    elif d.kind in "iu":
        info = np.iinfo(d)
        arr = rng.integers(info.min, info.max, n, dtype=d, endpoint=True)
        arr[:2] = (info.min, info.max)
    elif d.kind == "f":
        arr = (rng.standard_normal(n) * 100).astype(d)
        arr[:4] = (np.nan, np.inf, -np.inf, -0.0)
    else:
        arr = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(d)
        arr[:3] = (complex(np.nan, 1), complex(1, np.inf), complex(-0.0, -np.inf))
    arr = arr.reshape(shape)
    arr[:2, :3, :4] = np.zeros((), dtype=d)  # one whole chunk == fill: not stored
    return arr


def _meta(dtype, codecs, shape=SHAPE, chunks=CHUNKS, fill=None):
    return ArrayMetadataV3(shape=shape, chunks=chunks, dtype=dtype, fill_value=fill,
                           codecs=codecs)


ROUND_TRIPS = [(dt, name) for dt in NUMERIC for name in CHAINS] + [
    ("string", name) for name in STRING_CHAINS]


def _codecs_for(dt, name):
    return (STRING_CHAINS if dt == "string" else CHAINS)[name]


@pytest.mark.parametrize("dt,chain", ROUND_TRIPS, ids=[f"{d}-{c}" for d, c in ROUND_TRIPS])
def test_pieces_write_zarr_python_reads(tmp_path, dt, chain):
    meta = _meta(dt, _codecs_for(dt, chain))
    data = sample(dt)
    write_v3(DirectoryStore(str(tmp_path)), meta, data)
    z = zarr.open_array(str(tmp_path), mode="r")
    assert_array_same(z[...], data)
    # and our own reader agrees
    assert_array_same(read_v3(DirectoryStore(str(tmp_path), mode="r"), meta), data)


@pytest.mark.parametrize("dt,chain", ROUND_TRIPS, ids=[f"{d}-{c}" for d, c in ROUND_TRIPS])
def test_zarr_python_writes_pieces_read(tmp_path, dt, chain):
    meta = _meta(dt, _codecs_for(dt, chain))
    data = sample(dt, seed=1)
    (tmp_path / "zarr.json").write_bytes(encode_array_metadata_v3(meta))
    z = zarr.open_array(str(tmp_path), mode="r+")
    z[...] = data
    store = DirectoryStore(str(tmp_path), mode="r")
    # zarr-python's zarr.json (re-written? no: it only writes chunks) still parses the same
    assert parse_array_metadata_v3(store["zarr.json"]) == meta
    assert_array_same(read_v3(store, meta), data)
    # the all-fill chunk was not stored, so the missing-chunk path ran
    assert meta.chunk_key((0, 0, 0)) not in store


@pytest.mark.parametrize("dt", ["int32", "float64", "uint8", "string"])
def test_zarr_python_created_array_pieces_read(tmp_path, dt):
    """zarr-python's own create_array defaults (its zarr.json and chunks)."""
    data = sample(dt, seed=2)
    kw = {"dtype": str} if dt == "string" else {"dtype": dt}
    z = zarr.create_array(str(tmp_path), shape=SHAPE, chunks=CHUNKS, fill_value=None if
                          dt != "string" else "", **kw)
    z[...] = data
    store = DirectoryStore(str(tmp_path), mode="r")
    meta = parse_array_metadata_v3(store["zarr.json"])
    assert_array_same(read_v3(store, meta), data)


@pytest.mark.parametrize("dt,chain", [("float32", "transpose_general"), ("int16", "big"),
                                      ("complex64", "zstd_crc32c"),
                                      ("uint16", "blosc_lz4_shuffle"),
                                      ("float64", "transpose_reversed_big")])
def test_tensorstore_reads_pieces(tmp_path, dt, chain):
    ts = pytest.importorskip("tensorstore")
    meta = _meta(dt, _codecs_for(dt, chain), fill=3)
    data = sample(dt, seed=3)
    write_v3(DirectoryStore(str(tmp_path)), meta, data)
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path)}}).result()
    assert_array_same(t.read().result(), data)


def test_nonzero_fill_missing_chunk_roundtrip(tmp_path):
    meta = _meta("float32", CHAINS["zstd"], fill=np.nan)
    data = np.full(SHAPE, np.nan, dtype="f4")
    data[4, 6, 5] = 1.5
    write_v3(DirectoryStore(str(tmp_path)), meta, data)
    assert len([f for f in os.listdir(tmp_path / "c" / "2" / "2")]) == 1  # one chunk stored
    assert_array_same(zarr.open_array(str(tmp_path), mode="r")[...], data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    ndim=st.integers(0, 4),
    dt=st.sampled_from(["u1", "i2", "f4", "f8", "c8", "?", "u8"]),
    endian=st.sampled_from(["little", "big"]),
    bb=st.lists(st.sampled_from(["gzip", "zstd", "crc32c", "blosc"]), max_size=3),
)
def test_encode_decode_identity(data, ndim, dt, endian, bb):
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim)))
    perm = data.draw(st.permutations(range(ndim))) if ndim else []
    codecs = []
    if data.draw(st.booleans()):
        codecs.append({"name": "transpose", "configuration": {"order": list(perm)}})
    codecs.append({"name": "bytes", "configuration": {"endian": endian}})
    for name in bb:
        codecs.append({"name": name})
    codec = ChunkCodecV3(dt, shape, codecs)
    rng = np.random.default_rng(len(shape))
    arr = rng.integers(0, 200, size=shape).astype(dt)
    enc = codec.encode(arr)
    assert isinstance(enc, bytes)
    assert_array_same(codec.decode(enc), arr)
    # into a C buffer, an F buffer and raw memory
    for order in "CF":
        out = np.empty(shape, dtype=codec.dtype, order=order)
        res = codec.decode(enc, out=out)
        assert res is out
        assert_array_same(out, arr)
    raw = np.empty(codec.nitems, dtype=codec.dtype)
    view = codec.decode(enc, out=raw)
    assert_array_same(view, arr)
    assert np.shares_memory(view, raw) or codec.nitems == 0


# ------------------------------------------------------------------------------ the interface


def test_interface_attributes():
    c = ChunkCodecV3("int32", (4, 5), [BYTES_LE, ZSTD])
    assert c.dtype == np.dtype("int32") and c.chunk_shape == (4, 5)
    assert c.nitems == 20 and c.nbytes == 80 and c.order == "C" and c.filters == ()
    assert c.compressor.codec_id == "zstd"
    assert ChunkCodecV3("int32", (4, 5), [BYTES_BE]).filters == ()
    t = ChunkCodecV3("int32", (4, 5), [{"name": "transpose", "configuration": {"order": [1, 0]}},
                                       BYTES_LE])
    assert t.order == "F" and t.filters == ()
    t3 = ChunkCodecV3("int32", (2, 3, 4), CHAINS["transpose_general"])
    assert t3.order == "C" and t3.filters  # decode cannot go straight into out
    s = ChunkCodecV3("string", (3,), STRING_CHAINS["vlen_zstd"])
    assert s.dtype == np.dtype(object) and s.filters
    # a non-native dtype is normalised: decoded arrays are native-endian
    assert ChunkCodecV3(">i4", (2,), [BYTES_BE]).dtype == np.dtype("=i4")


def test_constructor_forms_agree():
    meta = _meta("uint16", CHAINS["blosc_lz4_shuffle"])
    a, b, c = ChunkCodecV3(meta), ChunkCodecV3.from_metadata(meta), ChunkCodecV3(
        meta.dtype, meta.chunks, meta.codecs, meta.fill_value)
    x = sample("uint16")[:2, :3, :4] + 7
    assert a.encode(x) == b.encode(x) == c.encode(x)
    assert a.codecs == meta.codecs == normalize_codecs(CHAINS["blosc_lz4_shuffle"], "uint16",
                                                      CHUNKS)


def test_blosc_typesize_defaults_to_itemsize_and_is_used():
    c = ChunkCodecV3("float64", (10,), [BYTES_LE, {"name": "blosc", "configuration": {
        "cname": "lz4", "clevel": 5, "shuffle": "shuffle"}}])
    assert c.codecs[1]["configuration"]["typesize"] == 8
    enc = c.encode(np.arange(10.0))
    assert enc[3] == 8  # blosc header: typesize


def test_big_endian_bytes_on_disk():
    c = ChunkCodecV3("int32", (3,), [BYTES_BE])
    be = bytes.fromhex("00000001 00000002 00000102")
    assert c.encode(np.array([1, 2, 258], dtype="i4")) == be
    out = c.decode(bytes.fromhex("00000001 00000002 00000102"))
    assert out.dtype == np.dtype("=i4") and out.tolist() == [1, 2, 258]


def test_transpose_layout_on_disk():
    x = np.arange(6, dtype="u1").reshape(2, 3)
    c = ChunkCodecV3("uint8", (2, 3), [{"name": "transpose", "configuration": {"order": [1, 0]}},
                                       {"name": "bytes"}])
    assert c.encode(x) == x.T.tobytes()  # Fortran order of x
    assert c.encode(x) == x.tobytes(order="F")


def test_encode_casts_and_checks_shape():
    c = ChunkCodecV3("float32", (2, 2), [BYTES_LE])
    assert c.decode(c.encode(np.ones((2, 2), dtype="f8"))).dtype == np.dtype("f4")
    assert c.decode(c.encode(np.ones((2, 2), dtype=">f4"))).tolist() == [[1, 1], [1, 1]]
    with pytest.raises(ValueError, match="shape"):
        c.encode(np.ones((2, 3), dtype="f4"))
    with pytest.raises(TypeError):
        c.encode(np.array([["a", "b"], ["c", "d"]]))


def test_decode_out_direct_and_value_semantics():
    x = np.arange(24, dtype="i4").reshape(4, 6)
    for codecs in ([BYTES_LE, ZSTD], [BYTES_BE, ZSTD], [BYTES_LE, {"name": "blosc"}],
                   [BYTES_LE, {"name": "gzip"}], [BYTES_LE], [BYTES_BE, {"name": "crc32c"}]):
        c = ChunkCodecV3("int32", (4, 6), codecs)
        enc = c.encode(x)
        out = np.full((4, 6), -1, dtype="i4")
        assert c.decode(enc, out=out) is out
        assert (out == x).all()
        f = np.full((4, 6), -1, dtype="i4", order="F")  # value semantics, any layout
        assert c.decode(enc, out=f) is f and (f == x).all()
        raw = np.zeros(24, dtype="i4")
        v = c.decode(enc, out=raw)
        assert v.shape == (4, 6) and (v == x).all() and np.shares_memory(v, raw)
        assert (raw == x.ravel()).all()  # C layout


def test_decode_out_fortran_order_for_reversed_transpose():
    x = np.arange(24, dtype="f8").reshape(4, 6)
    c = ChunkCodecV3("float64", (4, 6), [{"name": "transpose", "configuration": {"order": [1, 0]}},
                                         BYTES_LE, ZSTD])
    assert c.order == "F" and not c.filters
    enc = c.encode(x)
    raw = np.zeros(24)
    v = c.decode(enc, out=raw)
    assert (v == x).all() and (raw == x.ravel(order="F")).all()  # raw memory in F layout
    dec = c.decode(enc)
    assert dec.flags.f_contiguous and (dec == x).all()


def test_decode_general_transpose_returns_c_ordered():
    x = np.arange(60, dtype="u2").reshape(3, 4, 5)
    c = ChunkCodecV3("uint16", (3, 4, 5), [{"name": "transpose", "configuration": {
        "order": [1, 2, 0]}}, BYTES_LE])
    enc = c.encode(x)
    assert enc == np.ascontiguousarray(x.transpose(1, 2, 0)).tobytes()
    dec = c.decode(enc)
    assert dec.flags.c_contiguous and dec.flags.writeable and (dec == x).all()
    raw = np.zeros(60, dtype="u2")
    v = c.decode(enc, out=raw)
    assert (v == x).all() and (raw == x.ravel()).all()


def test_writable_flag():
    c = ChunkCodecV3("int16", (5,), [BYTES_LE])
    data = np.arange(5, dtype="<i2").tobytes()
    ro = c.decode(data, writable=False)
    assert (ro == np.arange(5)).all()
    rw = c.decode(data)
    assert rw.flags.writeable
    rw[0] = 9  # does not touch data
    assert data == np.arange(5, dtype="<i2").tobytes()
    big = ChunkCodecV3("int16", (5,), [BYTES_BE])
    be = np.arange(5, dtype=">i2").tobytes()
    assert big.decode(be, writable=False).tolist() == list(range(5))
    assert be == np.arange(5, dtype=">i2").tobytes()  # never swapped in place


def test_decode_out_errors_are_caller_errors():
    c = ChunkCodecV3("int32", (4,), [BYTES_LE])
    enc = c.encode(np.arange(4, dtype="i4"))
    with pytest.raises(ValueError, match="dtype"):
        c.decode(enc, out=np.empty(4, dtype="i8"))
    with pytest.raises(ValueError, match="elements"):
        c.decode(enc, out=np.empty(5, dtype="i4"))
    ro = np.empty(4, dtype="i4")
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        c.decode(enc, out=ro)


def test_zero_dim_chunk():
    c = ChunkCodecV3("float64", (), [BYTES_LE, ZSTD])
    enc = c.encode(np.array(2.5))
    assert c.decode(enc).shape == () and c.decode(enc)[()] == 2.5
    t = ChunkCodecV3("float64", (), [{"name": "transpose", "configuration": {"order": []}},
                                     BYTES_BE])
    assert t.decode(t.encode(np.array(-1.0)))[()] == -1.0


def test_string_chunks():
    x = np.array([["a", "é"], ["", "日本"]], dtype=object)
    c = ChunkCodecV3("string", (2, 2), STRING_CHAINS["vlen_gzip_crc32c"])
    dec = c.decode(c.encode(x))
    assert dec.dtype == object and dec.tolist() == x.tolist()
    out = np.empty((2, 2), dtype=object)
    assert c.decode(c.encode(x), out=out) is out and out.tolist() == x.tolist()
    # numpy unicode input is accepted
    assert c.decode(c.encode(np.array([["a", "b"], ["c", "d"]]))).tolist() == [["a", "b"],
                                                                              ["c", "d"]]


# ------------------------------------------------------------------------------ errors


def test_crc32c_mismatch_names_chunk_and_store(tmp_path):
    meta = _meta("int64", CHAINS["zstd_crc32c"])
    data = sample("int64")
    store = DirectoryStore(str(tmp_path))
    write_v3(store, meta, data)
    key = meta.chunk_key((1, 1, 1))
    raw = bytearray(store[key])
    raw[len(raw) // 2] ^= 0x40
    store[key] = bytes(raw)
    with pytest.raises(ChunkDecodeError, match="checksum mismatch") as ei:
        ChunkCodecV3(meta).decode(store[key], key=key, store=store)
    assert repr(key) in str(ei.value) and repr(store) in str(ei.value)
    # zarr-python agrees the chunk is corrupt
    with pytest.raises(Exception):
        zarr.open_array(str(tmp_path), mode="r")[...]


def test_crc32c_of_truncated_data():
    c = ChunkCodecV3("uint8", (4,), [{"name": "bytes"}, {"name": "crc32c"}])
    with pytest.raises(ChunkDecodeError, match="checksum mismatch"):
        c.decode(b"\x01\x02", key="c/0")
    enc = c.encode(np.arange(4, dtype="u1"))
    with pytest.raises(ChunkDecodeError, match="checksum mismatch"):
        c.decode(enc[:-1] + bytes([enc[-1] ^ 1]), key="c/0")


@pytest.mark.parametrize("chain", ["bytes", "zstd", "gzip", "blosc_lz4_shuffle", "big",
                                   "transpose_general"])
def test_garbage_and_wrong_size_raise_chunk_decode_error(chain):
    c = ChunkCodecV3("int32", (2, 3, 4), CHAINS[chain])
    enc = c.encode(np.ones((2, 3, 4), dtype="i4"))
    other = ChunkCodecV3("int32", (2, 3, 5), CHAINS[chain]).encode(np.ones((2, 3, 5), "i4"))
    for bad in (b"", b"garbage!" * 3, enc[:-3], other):
        out = np.empty((2, 3, 4), dtype="i4")
        with pytest.raises(ChunkDecodeError) as ei:
            c.decode(bad, key="arr/c/0/0/0", store="MyStore('x')")
        assert "'arr/c/0/0/0'" in str(ei.value) and "MyStore('x')" in str(ei.value)
        with pytest.raises(ChunkDecodeError):
            c.decode(bad, out=out, key="k")


def test_garbage_string_chunk():
    c = ChunkCodecV3("string", (3,), STRING_CHAINS["vlen"])
    # a huge item count is refused from the header (no 2**31-item allocation)
    with pytest.raises(ChunkDecodeError, match="'s/c/0'.*2147483647 items"):
        c.decode(b"\xff\xff\xff\x7f", key="s/c/0")
    good = c.encode(np.array(["a", "bb", "ccc"], dtype=object))
    for bad in (b"", good[:3], good[:10], good[:-1], b"\x03\x00\x00\x00" + b"\xff" * 20):
        with pytest.raises(ChunkDecodeError, match="'s/c/0'"):
            c.decode(bad, key="s/c/0")


@pytest.mark.parametrize("codecs,match", [
    ([{"name": "lz5"}], "unknown codec 'lz5'"),
    ([BYTES_LE, {"name": "nope", "configuration": {}}], "unknown codec 'nope'"),
    ([ZSTD, BYTES_LE], "must come after"),
    ([BYTES_LE, {"name": "transpose", "configuration": {"order": [0]}}], "must come before"),
    ([BYTES_LE, BYTES_LE], "second array -> bytes"),
    ([ZSTD], "must come after"),
    ([], "no array -> bytes codec"),
    ([{"name": "transpose", "configuration": {"order": [0, 0]}}, BYTES_LE], "permutation"),
    ([{"name": "bytes", "configuration": {"endian": "middle"}}], "endian"),
    ([BYTES_LE, {"name": "blosc", "configuration": {"cname": "lzma"}}], "cname"),
    ([BYTES_LE, {"name": "blosc", "configuration": {"shuffle": "byte"}}], "shuffle"),
    ([BYTES_LE, {"name": "gzip", "configuration": {"level": 12}}], "level"),
    ([BYTES_LE, {"name": "zstd", "configuration": {"level": 1, "bogus": 1}}], "bogus"),
    ([{"name": "vlen-utf8"}], "string data type"),
])
def test_invalid_chains(codecs, match):
    with pytest.raises(ValueError, match=match):
        ChunkCodecV3("int32", (4,), codecs)


def test_bytes_codec_rejects_string():
    with pytest.raises(ValueError, match="vlen-utf8"):
        ChunkCodecV3("string", (4,), [BYTES_LE])


@pytest.mark.skipif(sys.byteorder != "little", reason="checks the little-endian fast path")
def test_little_endian_bytes_are_a_plain_copy():
    x = np.arange(10, dtype="<f8")
    assert ChunkCodecV3("float64", (10,), [BYTES_LE]).encode(x) == x.tobytes()


@pytest.mark.parametrize("shards", [None, (1, 6, 1)])
def test_transpose_of_unit_dimensions_without_compressor_takes_writes(tmp_path, shards):
    # A transpose that moves only dimensions of length 1 leaves the stored bytes' view
    # C-contiguous; with no compressor that view is of the read-only stored bytes, and the
    # point and orthogonal writes that decode the chunk to update it were refused ("chunk
    # buffer is read-only"; found by tests/compat/test_interop_model.py).
    kw = {} if shards is None else {"shards": shards}
    a = cs.create_array(str(tmp_path / "a"), shape=(1, 5, 1), chunks=(1, 3, 1), dtype="|b1",
                        fill_value=False, filters=[cs.codecs.TransposeCodec(order=(1, 0, 2))],
                        compressors=None, **kw)
    want = np.zeros((1, 5, 1), bool)
    for k in range(3):
        a.vindex[np.array([0, 0]), np.array([1, k + 2]), np.array([0, 0])] = [True, False]
        want[0, [1, k + 2], 0] = [True, False]
        a[0, k:k + 2, 0] = True
        want[0, k:k + 2, 0] = True
        np.testing.assert_array_equal(a[...], want)
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "a"), mode="r")[...], want)


def test_numcodecs_gzip_in_a_chain_carries_no_time_stamp(tmp_path, monkeypatch):
    """zarr-python 3's ``numcodecs.gzip`` in a v3 chain writes mtime 0 (numcodecs' GZip
    stamps the current second: equal chunks written at different times differed), and
    the stream reads back here and in zarr-python."""
    import gzip as gzip_module

    monkeypatch.setattr(gzip_module.time, "time", lambda: 1_700_000_000.0)
    z = cs.create_array(str(tmp_path / "a"), shape=(6, 3), chunks=(2, 3), dtype="<i4",
                        zarr_format=3, compressors=[{"name": "numcodecs.crc32c"}, {
                            "name": "numcodecs.gzip", "configuration": {"level": 1}}])
    z[:] = np.arange(18).reshape(6, 3)
    first = bytes(z.store["c/0/0"])
    monkeypatch.setattr(gzip_module.time, "time", lambda: 1_700_000_009.0)
    z[:2] = np.arange(6).reshape(2, 3)
    assert bytes(z.store["c/0/0"]) == first
    assert first[:2] == b"\x1f\x8b" and first[4:8] == b"\0\0\0\0"
    zarr = pytest.importorskip("zarr")
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[...],
                                  np.arange(18).reshape(6, 3))
