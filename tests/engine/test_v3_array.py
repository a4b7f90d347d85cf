"""Zarr v3 arrays through the public API (cs.open_array, cs.create_array, cs.create ...).

- Every array case of the v3 golden fixtures (zarr-python 3.1 and tensorstore, including the
  tensorstore-written Zarr v2 one) reads exactly as its expectation, also through slices,
  oindex and vindex; `.info`, `chunks`/`shards` and `nchunks_initialized` agree with what is
  on disk (counted independently: chunk files, and shard indexes parsed here with NumPy).
- What chunkstore writes in v3 (sharded or not) reads identically in zarr-python 3 and in
  tensorstore, and the reverse, across data types, order "F", compressors, crc32c, dimension
  names, missing chunks, whole shard writes and write_empty_chunks.
- Behaviour that is the same in every layout (fill values and missing chunks, properties,
  attributes, selections, random writes against a NumPy model, resize and append, each read
  back by zarr-python and tensorstore) is tested once for v2, v3 and sharded v3 in
  test_api.py, through the `layout` fixture of conftest.py.
- Errors: unknown codec / data type -> MetadataError naming them and the key; a corrupt shard
  index -> an error naming the shard key; a crc32c mismatch -> ChunkDecodeError naming the key.
- Threads writing disjoint inner chunks of the same shards lose nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from pathlib import Path

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from model_support import DictMapping
from chunkstore.errors import ChunkDecodeError, MetadataError
from conftest import FIXTURES

zarr = pytest.importorskip("zarr")
ts = pytest.importorskip("tensorstore")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

FIXTURES_V3 = FIXTURES / "v3"


def _manifest():
    path = FIXTURES_V3 / "manifest.json"
    if not path.exists():
        return []
    with open(path) as f:
        return json.load(f)["cases"]


ARRAY_CASES = [c for c in _manifest() if c.get("kind") != "group"]
CASE_IDS = [c["name"] for c in ARRAY_CASES]
needs_fixtures = pytest.mark.skipif(not ARRAY_CASES, reason=f"no fixtures at {FIXTURES_V3}")

NUMERIC = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64", "complex64", "complex128"]
COMPRESSORS = {
    "blosc": numcodecs.Blosc("zstd", 3, numcodecs.Blosc.BITSHUFFLE),
    "zstd": numcodecs.Zstd(level=3),
    "gzip": numcodecs.GZip(level=5),
    "none": None,
}


# ------------------------------------------------------------------------------ helpers
def case_dir(case):
    return FIXTURES_V3 / case["path"]


def load_expected(case):
    return np.load(FIXTURES_V3 / case["expected"], allow_pickle=True)


def assert_matches(actual, expected):
    """actual (what chunkstore returns) equals expected: shape, dtype, values, NaN == NaN.

    Fixed-width unicode expectations ('string' data type) are compared as str: chunkstore
    returns object arrays of str (and a str for a single element)."""
    expected = np.asarray(expected)
    if isinstance(actual, str):
        assert expected.ndim == 0 and expected.dtype.kind == "U", expected
        assert actual == expected[()]
        return
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if expected.dtype.kind == "U":
        assert actual.dtype == object, actual.dtype
        assert all(type(x) is str for x in actual.flat), actual
        np.testing.assert_array_equal(actual.astype(str), expected)
        return
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_array_equal(actual, expected)  # NaN-aware


def array_meta(case):
    """The stored metadata document (zarr.json, or .zarray for the v2 case)."""
    d = case_dir(case) / case["array"]
    if (d / "zarr.json").exists():
        return json.loads((d / "zarr.json").read_text())
    return json.loads((d / ".zarray").read_text())


def sharding_conf(meta):
    codecs = meta.get("codecs") or []
    for c in codecs:
        if c["name"] == "sharding_indexed":
            return c["configuration"]
    return None


def ts_read(path):
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}).result()
    return t.read().result()


def zarr_read(path):
    return zarr.open_array(str(path), mode="r")[...]


def sample(dtype, shape, seed=0):
    """Deterministic data of dtype (object/str: variable-length unicode strings)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt == bool:
        return rng.random(shape) > 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 1000).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    words = ["", "a", "héllo", "wörld €", "x" * 17, "日本語"]
    return np.array([words[i % len(words)] + str(i) for i in range(n)],
                    dtype=object).reshape(shape)


def assert_same_data(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    if a.dtype.kind not in "biufc" or b.dtype.kind not in "biufc":
        # strings: object arrays of str here, StringDType in zarr-python 3
        assert [str(x) for x in a.ravel().tolist()] == [str(x) for x in b.ravel().tolist()]
    else:
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        np.testing.assert_array_equal(a, b)


def assert_all_read(path, expected, tensorstore=True):
    """chunkstore, zarr-python 3 and (for non-string types) tensorstore read expected."""
    assert_same_data(cs.open_array(str(path), mode="r")[...], expected)
    assert_same_data(zarr_read(path), expected)
    if tensorstore:
        assert_same_data(ts_read(path), expected)


def chunk_files(path):
    """Files under an array directory other than its metadata."""
    root = Path(path)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.name not in ("zarr.json", ".zarray", ".zattrs"))


def count_inner_chunks(path, meta):
    """Inner chunks present in the shards of a sharded array at path (parsing each shard's
    index with NumPy), counting only those inside the array's inner chunk grid."""
    conf = sharding_conf(meta)
    shape = meta["shape"]
    shard = meta["chunk_grid"]["configuration"]["chunk_shape"]
    inner = conf["chunk_shape"]
    per = [s // c for s, c in zip(shard, inner)]
    n = int(np.prod(per))
    names = [c["name"] for c in conf.get("index_codecs", [{"name": "bytes"}, {"name": "crc32c"}])]
    assert set(names) <= {"bytes", "crc32c"}, names
    nbytes = 16 * n + 4 * names.count("crc32c")
    enc = meta["chunk_key_encoding"]
    sep = enc.get("configuration", {}).get("separator", "/" if enc["name"] == "default" else ".")
    grid = [-(-s // c) for s, c in zip(shape, inner)]
    total = 0
    for rel in chunk_files(path):
        parts = rel.replace(os.sep, "/")
        if enc["name"] == "default":
            parts = parts[2:]
        coords = [int(p) for p in parts.split(sep)]
        raw = (Path(path) / rel).read_bytes()
        index = raw[-nbytes:] if conf.get("index_location", "end") == "end" else raw[:nbytes]
        idx = np.frombuffer(index[:16 * n], dtype="<u8").reshape(per + [2])
        for within in zip(*np.nonzero(idx[..., 0] != 2**64 - 1)):
            g = [s * p + w for s, p, w in zip(coords, per, within)]
            total += all(x < gg for x, gg in zip(g, grid))
    return total


class CountingStore(DictMapping):
    """A dict store counting reads and writes per key (no get_partial: whole values)."""

    def __init__(self):
        self.d = {}
        self.gets, self.sets = [], []

    def __getitem__(self, k):
        self.gets.append(k)
        return self.d[k]

    def __setitem__(self, k, v):
        self.sets.append(k)
        self.d[k] = bytes(v)

    def __contains__(self, k):
        return k in self.d


# ------------------------------------------------------------------------------ fixtures
@needs_fixtures
@pytest.mark.parametrize("case", ARRAY_CASES, ids=CASE_IDS)
def test_fixture_reads_exactly(case):
    z = cs.open_array(str(case_dir(case)), mode="r", path=case["array"])
    meta = array_meta(case)
    assert z.zarr_format == meta.get("zarr_format", 2)
    assert z.shape == tuple(meta["shape"])
    assert_matches(z[...], load_expected(case))
    # also through cs.open (array or group, whichever is there)
    assert_matches(cs.open(str(case_dir(case)), mode="r", path=case["array"])[...],
                   load_expected(case))


def _selections(shape, rng):
    """(kind, selection, numpy equivalent as a function of the expected array)."""
    nd = len(shape)
    out = []
    if nd == 0:
        return [("basic", (), lambda e: e[()]), ("basic", Ellipsis, lambda e: e[...])]
    sl = []
    for n in shape:
        a, b = sorted(int(x) for x in rng.integers(0, n + 1, 2))
        sl.append(slice(a, b, int(rng.integers(1, 4))))
    out.append(("basic", tuple(sl), lambda e, s=tuple(sl): e[s]))
    rev = tuple(slice(None, None, -int(rng.integers(1, 3))) for _ in shape)
    out.append(("basic", rev, lambda e, s=rev: e[s]))
    pt = tuple(int(rng.integers(-n, n)) for n in shape)
    out.append(("basic", pt, lambda e, s=pt: e[s]))
    mixed = (int(rng.integers(0, shape[0])),) + tuple(slice(1, None, 2) for _ in shape[1:])
    out.append(("basic", mixed, lambda e, s=mixed: e[s]))
    idx = [rng.integers(-n, n, size=int(rng.integers(1, 6))) for n in shape]
    if nd > 1:
        idx[-1] = rng.random(shape[-1]) > 0.5  # a boolean array for the last dimension
    out.append(("oindex", tuple(idx), lambda e, s=tuple(idx): e[np.ix_(*[
        np.flatnonzero(x) if x.dtype == bool else x for x in s])]))
    npts = 7
    coords = tuple(rng.integers(0, n, size=npts) for n in shape)
    out.append(("vindex", coords, lambda e, s=coords: e[s]))
    mask = rng.random(shape) > 0.6
    out.append(("vindex", mask, lambda e, m=mask: e[m]))
    return out


@needs_fixtures
@pytest.mark.parametrize("case", ARRAY_CASES, ids=CASE_IDS)
def test_fixture_selections_match_numpy(case):
    z = cs.open_array(str(case_dir(case)), mode="r", path=case["array"])
    expected = load_expected(case)
    rng = np.random.default_rng(sum(map(ord, case["name"])))
    for kind, sel, ref in _selections(z.shape, rng):
        got = {"basic": lambda s: z[s], "oindex": lambda s: z.oindex[s],
               "vindex": lambda s: z.vindex[s]}[kind](sel)
        assert_matches(got, ref(expected))


@needs_fixtures
@pytest.mark.parametrize("case", ARRAY_CASES, ids=CASE_IDS)
def test_fixture_info_chunks_shards(case):
    z = cs.open_array(str(case_dir(case)), mode="r", path=case["array"])
    meta = array_meta(case)
    info = repr(z.info)
    fmt = meta.get("zarr_format", 2)
    assert re.search(rf"^Zarr format\s*: {fmt}$", info, re.M), info
    conf = sharding_conf(meta) if fmt == 3 else None
    if fmt == 2:
        grid = tuple(meta["chunks"])
    else:
        grid = tuple(meta["chunk_grid"]["configuration"]["chunk_shape"])
    if conf is None:
        assert z.chunks == grid and z.shards is None
        assert "Shard shape" not in info
    else:
        assert z.shards == grid
        assert z.chunks == tuple(conf["chunk_shape"])
        assert re.search(rf"^Shard shape\s*: {re.escape(str(grid))}$", info, re.M), info
        assert re.search(rf"^Chunk shape\s*: {re.escape(str(z.chunks))}$", info, re.M), info
    assert z.nchunks == int(np.prod([-(-s // c) for s, c in zip(z.shape, z.chunks)]))


@needs_fixtures
@pytest.mark.parametrize("case", ARRAY_CASES, ids=CASE_IDS)
def test_fixture_nchunks_initialized(case):
    path = case_dir(case) / case["array"]
    z = cs.open_array(str(case_dir(case)), mode="r", path=case["array"])
    meta = array_meta(case)
    if meta.get("zarr_format", 2) == 3 and sharding_conf(meta) is not None:
        expected = count_inner_chunks(path, meta)
    else:
        expected = len(chunk_files(path))
    assert z.nchunks_initialized == expected
    if case.get("missing_chunks"):
        assert 0 < z.nchunks_initialized < z.nchunks
        assert re.search(rf"Chunks initialized\s*: {expected}/{z.nchunks}", repr(z.info))


@needs_fixtures
def test_fixture_missing_chunks_error_mode():
    """missing_chunks="error" raises for a never-written (inner) chunk and names it."""
    for name in ("sharded_missing", "fill_nan_missing"):
        case = next(c for c in ARRAY_CASES if c["name"] == name)
        z = cs.open_array(str(case_dir(case)), mode="r", missing_chunks="error")
        with pytest.raises(cs.ChunkNotFoundError):
            z[...]


# ------------------------------------------------------------------------------ writing: interop
@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_dtypes_written_by_chunkstore_read_everywhere(tmp_path, sharded):
    comps = list(COMPRESSORS.values())
    for i, dt in enumerate(NUMERIC + ["str"]):
        data = sample(dt if dt != "str" else object, (13, 11), seed=i)
        p = tmp_path / f"{dt}.zarr"
        z = cs.create_array(str(p), shape=data.shape, dtype=dt, chunks=(3, 4),
                            shards=(6, 8) if sharded else None,
                            compressors=comps[i % len(comps)])
        assert z.zarr_format == 3
        z[...] = data
        assert z.chunks == (3, 4) and z.shards == ((6, 8) if sharded else None)
        # tensorstore has no "string" data type
        assert_all_read(p, data, tensorstore=dt != "str")
        if dt == "str":
            got = cs.open_array(str(p), mode="r")[...]
            assert got.dtype == object and all(type(x) is str for x in got.flat)


@pytest.mark.parametrize("name", list(COMPRESSORS))
@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_compressors_and_crc32c(tmp_path, name, sharded):
    data = sample("float32", (17, 9), seed=3)
    comp = COMPRESSORS[name]
    shards = (8, 6) if sharded else None
    # crc32c through create_array's compressors list ...
    p = tmp_path / "a.zarr"
    comps = ([comp] if comp is not None else []) + [numcodecs.CRC32C()]
    z = cs.create_array(str(p), shape=data.shape, dtype=data.dtype, chunks=(4, 3),
                        shards=shards, compressors=comps)
    z[...] = data
    # ... and through create's filters
    q = tmp_path / "b.zarr"
    y = cs.create(shape=data.shape, chunks=(4, 3), dtype=data.dtype, compressor=comp,
                  filters=[numcodecs.CRC32C()], store=str(q), zarr_format=3, shards=shards)
    y[...] = data
    for path in (p, q):
        meta = json.loads((path / "zarr.json").read_text())
        chain = sharding_conf(meta)["codecs"] if sharded else meta["codecs"]
        names = [c["name"] for c in chain]
        assert names[-1] == "crc32c", names
        assert names[0] == "bytes"
        if comp is not None:
            assert names[1] == comp.codec_id, names
        assert len(names) == (3 if comp is not None else 2), names
        assert_all_read(path, data)


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_order_f(tmp_path, sharded):
    data = sample("int32", (9, 10, 7), seed=5)
    p = tmp_path / "f.zarr"
    z = cs.create_array(str(p), shape=data.shape, dtype=data.dtype, chunks=(4, 5, 3),
                        shards=(8, 10, 6) if sharded else None, order="F")
    assert z.order == "F"
    z[...] = data
    z[1:8, ::3, 2] = -7
    data[1:8, ::3, 2] = -7
    assert_all_read(p, data)
    # zarr-python 3 writes through the transpose codec chunkstore put there; read it back
    za = zarr.open_array(str(p), mode="r+")
    za[0, 0, :] = 99
    data[0, 0, :] = 99
    assert_same_data(cs.open_array(str(p), mode="r")[...], data)


def test_dimension_names_both_ways(tmp_path):
    p = tmp_path / "dn.zarr"
    z = cs.create_array(str(p), shape=(4, 6), dtype="i2", chunks=(2, 3), shards=(4, 6),
                        dimension_names=["y", "x"])
    z[...] = 1
    assert json.loads((p / "zarr.json").read_text())["dimension_names"] == ["y", "x"]
    assert zarr.open_array(str(p), mode="r").metadata.dimension_names == ("y", "x")
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(p)}}).result()
    assert t.domain.labels == ("y", "x")
    assert cs.open_array(str(p), mode="r").metadata.dimension_names == ("y", "x")
    q = tmp_path / "zdn.zarr"
    zarr.create_array(str(q), shape=(3, 4, 5), dtype="f8", chunks=(3, 2, 5),
                      dimension_names=["t", None, "x"])
    assert cs.open_array(str(q), mode="r").metadata.dimension_names == ("t", None, "x")
    with pytest.raises(ValueError):
        cs.create_array(str(tmp_path / "bad.zarr"), shape=(3, 4), dtype="i4",
                        dimension_names=["only-one"])


def test_reads_missing_chunks_written_by_others(tmp_path):
    p = tmp_path / "z.zarr"
    za = zarr.create_array(str(p), shape=(30, 20), dtype="i4", chunks=(5, 4), shards=(10, 8),
                           fill_value=42)
    za[3:7, 2:5] = 1
    expected = np.full((30, 20), 42, dtype="i4")
    expected[3:7, 2:5] = 1
    z = cs.open_array(str(p), mode="r")
    assert_same_data(z[...], expected)
    assert z.nchunks_initialized == 4  # inner chunks (0,0), (0,1), (1,0), (1,1)
    q = tmp_path / "t.zarr"
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(q)},
                 "metadata": {"shape": [30, 20], "data_type": "float32",
                              "chunk_grid": {"name": "regular",
                                             "configuration": {"chunk_shape": [10, 8]}},
                              "fill_value": "NaN"},
                 "create": True}).result()
    t[12:14, 9:11].write(np.ones((2, 2), "f4")).result()
    expected = np.full((30, 20), np.nan, dtype="f4")
    expected[12:14, 9:11] = 1
    y = cs.open_array(str(q), mode="r")
    assert_same_data(y[...], expected)
    assert y.nchunks_initialized == 1


@pytest.mark.parametrize("dt", ["uint8", "int16", "float32", "float64", "complex64", "bool"])
def test_zarr_python_writes_sharded_chunkstore_reads_and_modifies(tmp_path, dt):
    data = sample(dt, (40, 37), seed=11)
    p = tmp_path / "z.zarr"
    za = zarr.create_array(str(p), shape=data.shape, dtype=dt, chunks=(5, 4), shards=(10, 12),
                           compressors=zarr.codecs.BloscCodec(cname="lz4", clevel=5),
                           fill_value=0)
    za[3:33, 2:35] = data[3:33, 2:35]
    expected = np.zeros(data.shape, dtype=dt)
    expected[3:33, 2:35] = data[3:33, 2:35]
    z = cs.open_array(str(p), mode="r+")
    assert z.chunks == (5, 4) and z.shards == (10, 12)
    assert_same_data(z[...], expected)
    # partial writes over parts of several shards, into shards zarr-python wrote
    v = sample(dt, (15, 20), seed=12)
    z[8:23, 10:30] = v
    expected[8:23, 10:30] = v
    assert_all_read(p, expected)


def test_zarr_python_writes_other_layouts_chunkstore_reads(tmp_path):
    data = sample("int64", (20, 19, 6), seed=2)
    layouts = {
        "zstd_crc": dict(chunks=(5, 5, 3), shards=(10, 10, 6),
                         compressors=[zarr.codecs.ZstdCodec(level=1), zarr.codecs.Crc32cCodec()]),
        "gzip_plain": dict(chunks=(4, 7, 6), compressors=zarr.codecs.GzipCodec(level=1)),
        "none": dict(chunks=(5, 5, 3), shards=(10, 10, 3), compressors=None),
    }
    for name, kw in layouts.items():
        p = tmp_path / f"{name}.zarr"
        za = zarr.create_array(str(p), shape=data.shape, dtype=data.dtype, **kw)
        za[...] = data
        z = cs.open_array(str(p), mode="r")
        assert_same_data(z[...], data)
        assert_same_data(z.oindex[[0, 19, 7], ::-1, [5, 0]], data[np.ix_([0, 19, 7],
                                                                          range(18, -1, -1),
                                                                          [5, 0])])


def _ts_spec(path, dtype, shape, shard, inner, inner_codecs, fill=0, create=True):
    return {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)},
            "metadata": {"shape": list(shape), "data_type": dtype,
                         "chunk_grid": {"name": "regular",
                                        "configuration": {"chunk_shape": list(shard)}},
                         "codecs": [{"name": "sharding_indexed", "configuration": {
                             "chunk_shape": list(inner), "codecs": inner_codecs,
                             "index_codecs": [{"name": "bytes",
                                               "configuration": {"endian": "little"}},
                                              {"name": "crc32c"}]}}],
                         "fill_value": fill},
            "create": create, "delete_existing": create}


@pytest.mark.parametrize("dt", ["uint16", "int32", "float64", "complex128"])
def test_tensorstore_writes_sharded_chunkstore_reads_and_modifies(tmp_path, dt):
    p = tmp_path / "t.zarr"
    inner_codecs = [{"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3,
                                                        "shuffle": "shuffle",
                                                        "typesize": np.dtype(dt).itemsize}}]
    fill = [9, 0] if dt.startswith("complex") else 9
    t = ts.open(_ts_spec(p, dt, (40, 37), (10, 12), (5, 4), inner_codecs, fill=fill)).result()
    data = sample(dt, (40, 37), seed=4)
    t[5:33, 3:30].write(data[5:33, 3:30]).result()
    expected = np.full(data.shape, 9, dtype=dt)
    expected[5:33, 3:30] = data[5:33, 3:30]
    z = cs.open_array(str(p), mode="r+")
    assert z.chunks == (5, 4) and z.shards == (10, 12)
    assert_same_data(z[...], expected)
    z[20:40, 0:37:2] = 1
    expected[20:40, 0:37:2] = 1
    assert_all_read(p, expected)


def test_whole_shard_writes(tmp_path):
    store = CountingStore()
    z = cs.create_array(store, shape=(20, 24), dtype="i4", chunks=(5, 4), shards=(10, 12))
    store.gets.clear()
    store.sets.clear()
    data = sample("int32", (10, 12), seed=1)
    z[10:20, 12:24] = data  # exactly shard (1, 1)
    assert store.sets == ["c/1/1"]
    assert "c/1/1" not in store.gets  # assembled and stored whole, never read
    expected = np.zeros((20, 24), dtype="i4")
    expected[10:, 12:] = data
    assert_same_data(z[...], expected)
    # whole shards of an array on disk, read by the others; and edge shards
    p = tmp_path / "w.zarr"
    y = cs.create_array(str(p), shape=(25, 30), dtype="u2", chunks=(5, 6), shards=(10, 12))
    full = sample("uint16", (25, 30), seed=9)
    y[...] = full
    assert sorted(chunk_files(p)) == sorted(f"c/{i}/{j}" for i in range(3) for j in range(3))
    assert_all_read(p, full)


def test_write_empty_chunks_false_leaves_no_shard(tmp_path):
    p = tmp_path / "e.zarr"
    z = cs.create(shape=(20, 16), chunks=(5, 4), dtype="i4", fill_value=3, store=str(p),
                  zarr_format=3, shards=(10, 8), write_empty_chunks=False)
    z[...] = 3
    assert chunk_files(p) == []
    z[0, 0] = 1
    assert chunk_files(p) == ["c/0/0"]
    z[0, 0] = 3  # the only non-fill inner chunk becomes fill again: the shard goes
    assert chunk_files(p) == []
    z[:10, :8] = 5
    z[10:, 8:] = 6
    assert chunk_files(p) == ["c/0/0", "c/1/1"]
    z[:10, :8] = 3
    assert chunk_files(p) == ["c/1/1"]
    z[10:15, 8:12] = 3  # one inner chunk of the shard back to fill: the shard stays
    assert chunk_files(p) == ["c/1/1"]
    assert z.nchunks_initialized == 3
    expected = np.full((20, 16), 3, "i4")
    expected[10:, 8:] = 6
    expected[10:15, 8:12] = 3
    assert_all_read(p, expected)
    # write_empty_chunks=True stores fill chunks
    q = tmp_path / "t.zarr"
    y = cs.create(shape=(20, 16), chunks=(5, 4), dtype="i4", fill_value=3, store=str(q),
                  zarr_format=3, shards=(10, 8), write_empty_chunks=True)
    y[...] = 3
    assert len(chunk_files(q)) == 4
    assert y.nchunks_initialized == 16
    assert_all_read(q, np.full((20, 16), 3, "i4"))


def test_shards_through_create_array_and_their_errors(tmp_path):
    # chunks, shards, cdata_shape and nchunks in each layout: test_api.test_array_properties
    z = cs.create_array(str(tmp_path / "a.zarr"), shape=(100, 90), dtype="f4", chunks=(10, 9),
                        shards=(50, 45))
    assert z.chunks == (10, 9) and z.shards == (50, 45)
    assert z.cdata_shape == (10, 10) and z.nchunks == 100
    y = cs.create_array(str(tmp_path / "b.zarr"), shape=(100, 90), dtype="f4", chunks=(10, 9))
    assert y.chunks == (10, 9) and y.shards is None
    assert cs.open_array(str(tmp_path / "a.zarr"), mode="r").shards == (50, 45)
    with pytest.raises(ValueError, match="multiple"):
        cs.create_array(str(tmp_path / "c.zarr"), shape=(10,), dtype="i4", chunks=(3,),
                        shards=(4,))
    with pytest.raises(ValueError):
        cs.create(shape=(10,), chunks=(2,), store=str(tmp_path / "d.zarr"), zarr_format=2,
                  shards=(4,))


def test_create_array_defaults_to_v3_and_v2_on_request(tmp_path):
    z = cs.create_array(str(tmp_path / "a.zarr"), shape=(4,), dtype="i4")
    assert z.zarr_format == 3 and (tmp_path / "a.zarr" / "zarr.json").exists()
    y = cs.create_array(str(tmp_path / "b.zarr"), shape=(4,), dtype="i4", zarr_format=2)
    assert y.zarr_format == 2 and (tmp_path / "b.zarr" / ".zarray").exists()
    x = cs.open_array(str(tmp_path / "c.zarr"), mode="w", shape=(4,), chunks=2, dtype="i4",
                      zarr_format=3, shards=(4,))
    assert x.zarr_format == 3 and x.shards == (4,)


# ------------------------------------------------------------------------------ errors
def _make(tmp_path, name="arr", sharded=False, crc=False, index_location="end"):
    root = tmp_path / "s.zarr"
    comps = [numcodecs.Zstd(1)] + ([numcodecs.CRC32C()] if crc else [])
    z = cs.create_array(str(root), name=name, shape=(20, 20), dtype="i4", chunks=(5, 5),
                        shards=(10, 10) if sharded else None, compressors=comps)
    z[...] = np.arange(400, dtype="i4").reshape(20, 20)
    if index_location == "start":
        doc = json.loads((root / name / "zarr.json").read_text())
        doc["codecs"][0]["configuration"]["index_location"] = "start"
        (root / name / "zarr.json").write_text(json.dumps(doc))
        shutil.rmtree(root / name / "c")
        z = cs.open_array(str(root), mode="r+", path=name)
        z[...] = np.arange(400, dtype="i4").reshape(20, 20)
    return root, root / name


def _flip(path, pos):
    raw = bytearray(path.read_bytes())
    raw[pos] ^= 0xFF
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("where", ["top", "inner"])
def test_unknown_codec_names_codec_and_key(tmp_path, where):
    root, arr = _make(tmp_path, sharded=where == "inner")
    doc = json.loads((arr / "zarr.json").read_text())
    chain = doc["codecs"] if where == "top" else doc["codecs"][0]["configuration"]["codecs"]
    chain.append({"name": "frobnicate", "configuration": {}})
    (arr / "zarr.json").write_text(json.dumps(doc))
    for opener in (lambda: cs.open_array(str(root), mode="r", path="arr"),
                   lambda: cs.open(str(root), mode="r", path="arr")):
        with pytest.raises(MetadataError) as e:
            opener()
        assert "frobnicate" in str(e.value) and "arr/zarr.json" in str(e.value)


@pytest.mark.parametrize("data_type", ["float7_e3m3", "r16", "datetime64",
                                       {"name": "raw_bytes",
                                        "configuration": {"length_bytes": 4}},
                                       {"name": "numpy.datetime64",
                                        "configuration": {"unit": "s"}}],
                         ids=str)
def test_unsupported_data_type_names_type_and_key(tmp_path, data_type):
    root, arr = _make(tmp_path)
    doc = json.loads((arr / "zarr.json").read_text())
    doc["data_type"] = data_type
    (arr / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(MetadataError) as e:
        cs.open_array(str(root), mode="r", path="arr")
    name = data_type if isinstance(data_type, str) else data_type["name"]
    assert name in str(e.value) and "arr/zarr.json" in str(e.value)


@pytest.mark.parametrize("location", ["end", "start"])
@pytest.mark.parametrize("store_kind", ["directory", "dict"])
def test_corrupt_shard_index_names_the_shard(tmp_path, location, store_kind):
    root, arr = _make(tmp_path, sharded=True, index_location=location)
    shard = arr / "c" / "1" / "0"
    size = shard.stat().st_size
    _flip(shard, size - 10 if location == "end" else 10)  # inside the index (checksummed)
    if store_kind == "dict":
        store = {str(p.relative_to(root)).replace(os.sep, "/"): p.read_bytes()
                 for p in root.rglob("*") if p.is_file()}
    else:
        store = str(root)
    z = cs.open_array(store, mode="r", path="arr")
    with pytest.raises(ChunkDecodeError) as e:
        z[...]
    assert "arr/c/1/0" in str(e.value)
    with pytest.raises(ChunkDecodeError, match="arr/c/1/0"):
        z[12, 3]
    # the other shards still read, and correctly
    expected = np.arange(400, dtype="i4").reshape(20, 20)
    assert_same_data(z[0:10, :], expected[0:10, :])
    assert_same_data(z[10:, 10:], expected[10:, 10:])


def test_truncated_shard_names_the_shard(tmp_path):
    root, arr = _make(tmp_path, sharded=True)
    shard = arr / "c" / "0" / "1"
    shard.write_bytes(shard.read_bytes()[:7])
    z = cs.open_array(str(root), mode="r", path="arr")
    with pytest.raises(ChunkDecodeError, match="arr/c/0/1"):
        z[0:10, 10:20]


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_crc32c_mismatch_is_chunk_decode_error_naming_the_key(tmp_path, sharded):
    root, arr = _make(tmp_path, sharded=sharded, crc=True)
    key = "arr/c/1/0" if sharded else "arr/c/1/2"
    target = root / key
    _flip(target, 3)  # the first inner chunk's data (sharded: offset 0, index at the end)
    z = cs.open_array(str(root), mode="r", path="arr")
    expected = np.arange(400, dtype="i4").reshape(20, 20)
    with pytest.raises(ChunkDecodeError) as e:
        z[...]
    assert key in str(e.value) and "crc32c" in str(e.value)
    if sharded:
        assert "arr/c/1/0|0.0" in str(e.value)  # the inner chunk within the shard
        bad = (slice(10, 15), slice(0, 5))
        good = [(slice(15, 20), slice(0, 10)), (slice(10, 15), slice(5, 10))]
    else:
        bad = (slice(5, 10), slice(10, 15))
        good = [(slice(0, 5), slice(None)), (slice(5, 10), slice(15, 20))]
    with pytest.raises(ChunkDecodeError):
        z[bad]
    with pytest.raises(ChunkDecodeError):
        z.vindex[[bad[0].start], [bad[1].start]]
    for sel in good:
        assert_same_data(z[sel], expected[sel])
    # zarr-python also refuses the chunk (the corruption is real)
    with pytest.raises(Exception):
        zarr.open_array(str(arr), mode="r")[bad]


def test_corrupt_inner_chunk_without_checksum(tmp_path):
    root, arr = _make(tmp_path, sharded=True)
    _flip(arr / "c" / "0" / "0", 2)  # zstd frame header of inner chunk 0
    z = cs.open_array(str(root), mode="r", path="arr")
    with pytest.raises(ChunkDecodeError, match=r"arr/c/0/0"):
        z[0:5, 0:5]


# ------------------------------------------------------------------------------ concurrency
@pytest.mark.parametrize("shared", [True, False], ids=["one-array", "array-per-thread"])
def test_threads_write_disjoint_inner_chunks_of_shared_shards(tmp_path, shared):
    p = tmp_path / "c.zarr"
    sync = cs.ThreadSynchronizer()
    shape, inner = (40, 48), (5, 6)
    z = cs.create_array(str(p), shape=shape, dtype="i4", chunks=inner, shards=(20, 24),
                        synchronizer=sync, fill_value=-1)
    grid = [(i, j) for i in range(shape[0] // inner[0]) for j in range(shape[1] // inner[1])]
    nthreads, rounds = 8, 3
    errors = []
    barrier = threading.Barrier(nthreads)

    def writer(t):
        try:
            a = z if shared else cs.open_array(str(p), mode="r+", synchronizer=sync)
            mine = grid[t::nthreads]  # every shard holds inner chunks of every thread
            barrier.wait()
            for r in range(rounds):
                for i, j in mine:
                    a[i * 5:(i + 1) * 5, j * 6:(j + 1) * 6] = t * 100 + r
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(nthreads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    expected = np.empty(shape, "i4")
    for n, (i, j) in enumerate(grid):
        expected[i * 5:(i + 1) * 5, j * 6:(j + 1) * 6] = (n % nthreads) * 100 + rounds - 1
    assert_same_data(cs.open_array(str(p), mode="r")[...], expected)
    assert_same_data(zarr_read(p), expected)
    assert cs.open_array(str(p), mode="r").nchunks_initialized == len(grid)
