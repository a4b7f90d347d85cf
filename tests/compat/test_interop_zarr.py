"""Interoperability with zarr-python 3 (the reference implementation) on Zarr format 2.

Direction "cs->zarr": chunkstore writes a store, zarr-python reads it.
Direction "zarr->cs": zarr-python writes with zarr_format=2, chunkstore reads it.
In both directions the read must equal the data written and, for lossy filters or undefined
(null-fill) regions, what the other implementation reads from the same store.
"""

from __future__ import annotations

import json
from pathlib import Path

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from conftest import FIXTURES_V2, array_cases_v2, assert_same, chunk_files, manifest_value

zarr = pytest.importorskip("zarr")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning",
                                        "ignore::FutureWarning",
                                        "ignore::DeprecationWarning")

SHAPE = (13, 11)
CHUNKS = (4, 3)

# zarr-python 3.1 writes nested structured dtypes but cannot open them again, so the
# cs->zarr direction checks NESTED's stored chunk bytes with numcodecs instead.
FLAT_STRUCT = np.dtype([("a", "<i4"), ("b", "<f8"), ("s", "S3"), ("e", "?")])
NESTED = np.dtype([("a", "<i4"), ("b", [("c", "<f8"), ("d", "S2")]), ("e", "?")])
ZARR_CANNOT_OPEN = {"structured_nested"}

DTYPES = {
    "bool": np.dtype("bool"),
    "int8": np.dtype("int8"),
    "int16": np.dtype("int16"),
    "int32": np.dtype("int32"),
    "int64": np.dtype("int64"),
    "uint8": np.dtype("uint8"),
    "uint16": np.dtype("uint16"),
    "uint32": np.dtype("uint32"),
    "uint64": np.dtype("uint64"),
    "float16": np.dtype("float16"),
    "float32": np.dtype("float32"),
    "float64": np.dtype("float64"),
    "complex64": np.dtype("complex64"),
    "complex128": np.dtype("complex128"),
    "be_i4": np.dtype(">i4"),
    "be_f8": np.dtype(">f8"),
    "S5": np.dtype("S5"),
    "U4": np.dtype("<U4"),
    "M8ns": np.dtype("datetime64[ns]"),
    "M8D": np.dtype("datetime64[D]"),
    "m8s": np.dtype("timedelta64[s]"),
    "structured": FLAT_STRUCT,
    "structured_nested": NESTED,
}


def make_data(dtype, shape, seed=0):
    """Random values covering the dtype's awkward corners (extremes, NaN, NaT, non-ASCII)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype.names is not None:
        out = np.zeros(shape, dtype)
        for name in dtype.names:
            out[name] = make_data(dtype[name], shape, seed + 1)
        return out
    k = dtype.kind
    if k == "b":
        flat = rng.random(n) < 0.5
    elif k in "iu":
        info = np.iinfo(dtype)
        flat = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dtype.newbyteorder("="))
        flat[:2] = [info.min, info.max][:n]
    elif k == "f":
        flat = (rng.standard_normal(n) * 1000).astype(dtype.newbyteorder("="))
        flat[:4] = [np.nan, np.inf, -np.inf, -0.0][:n]
    elif k == "c":
        flat = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
        flat[0] = complex(np.nan, 1)
    elif k == "S":
        words = [b"", b"a", b"xyz", b"hello", b"a\x00b", b"Z9"]
        flat = np.array([words[i] for i in rng.integers(0, len(words), n)], dtype=dtype)
    elif k == "U":
        words = ["", "a", "\u00e9\u2603", "abcd", "\u65e5\u672c\u8a9ex", "Z"]
        flat = np.array([words[i] for i in rng.integers(0, len(words), n)], dtype=dtype)
    elif k in "mM":
        flat = rng.integers(-10**9, 10**9, size=n).astype(dtype)
        flat[0] = np.array("NaT", dtype=dtype)
    else:  # pragma: no cover
        raise AssertionError(dtype)
    return np.asarray(flat, dtype=dtype).reshape(shape)


def zarr_read(path, selection=Ellipsis):
    """What zarr-python 3 reads; variable-length strings come back as StringDType."""
    z = zarr.open_array(str(path), mode="r")
    a = z[selection]
    a = np.asarray(a) if isinstance(a, np.ndarray) else np.array(a, dtype=z.dtype)
    if a.dtype.kind == "T":
        a = a.astype(object)
    return a


def cs_read(path, selection=Ellipsis, **kwargs):
    return np.asarray(cs.open_array(str(path), mode="r", **kwargs)[selection])


def zarr_write(path, data, *, chunks=CHUNKS, dtype=None, fill_value="default", **kwargs):
    kw = dict(kwargs)
    if fill_value != "default":
        kw["fill_value"] = fill_value
    z = zarr.create_array(str(path), shape=data.shape, chunks=chunks,
                          dtype=data.dtype if dtype is None else dtype, zarr_format=2, **kw)
    z[...] = data
    return z


def load_zarray(path):
    return json.loads((Path(path) / ".zarray").read_text())


# ------------------------------------------------------------------------------ dtypes x order

@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("name", list(DTYPES))
def test_cs_to_zarr_dtypes(tmp_path, name, order):
    dtype = DTYPES[name]
    data = make_data(dtype, SHAPE, seed=len(name))
    p = tmp_path / "a.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=dtype, order=order, store=str(p))
    z[...] = data
    meta = load_zarray(p)
    assert meta["order"] == order
    assert meta["zarr_format"] == 2
    assert _json_dtype(meta["dtype"]) == dtype
    # an interior chunk holds the block's raw bytes in the array's order, compressed
    comp = numcodecs.get_codec(meta["compressor"])
    block = data[4:8, 3:6]
    assert comp.decode((p / "1.1").read_bytes()) == block.tobytes(order=order)
    if name in ZARR_CANNOT_OPEN:
        return
    got = zarr_read(p)
    assert_same(got, data)
    # a partial read through zarr-python crosses chunk edges the same way
    assert_same(zarr_read(p, (slice(3, 10), slice(2, 9))), data[3:10, 2:9])


def _json_dtype(obj):
    return np.dtype(obj if isinstance(obj, str) else _tuplify(obj))


def _tuplify(fields):
    out = []
    for f in fields:
        name, fmt = f[0], f[1]
        fmt = [tuple(x) for x in _tuplify(fmt)] if isinstance(fmt, list) else fmt
        out.append((name, fmt) + ((tuple(f[2]),) if len(f) > 2 else ()))
    return out


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("name", list(DTYPES))
def test_zarr_to_cs_dtypes(tmp_path, name, order):
    dtype = DTYPES[name]
    data = make_data(dtype, SHAPE, seed=len(name) + 7)
    p = tmp_path / "a.zarr"
    zarr_write(p, data, order=order)
    z = cs.open_array(str(p), mode="r")
    assert z.dtype == dtype
    assert z.shape == SHAPE
    assert z.chunks == CHUNKS
    assert z.order == order
    assert_same(z[...], data)
    assert_same(z[3:10, 2:9], data[3:10, 2:9])
    assert_same(z.oindex[[12, 0, 5], [10, 1]], data[np.ix_([12, 0, 5], [10, 1])])


# ------------------------------------------------------------------------------ object dtypes

OBJ_STR = np.array(["", "a", "\u00e9\u2603", "a longer string " * 5, "x\x00y", "Z"], dtype=object)
OBJ_BYTES = np.array([b"", b"a", b"\x00\xff\x10", b"long " * 20, b"z", b"\x80"], dtype=object)


def _obj_data(values, shape, seed):
    rng = np.random.default_rng(seed)
    out = np.empty(shape, dtype=object)
    flat = out.reshape(-1)
    for i, j in enumerate(rng.integers(0, len(values), flat.size)):
        flat[i] = values[j]
    return out


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("kind", ["utf8", "bytes"])
def test_cs_to_zarr_object(tmp_path, kind, order):
    codec = numcodecs.VLenUTF8() if kind == "utf8" else numcodecs.VLenBytes()
    data = _obj_data(OBJ_STR if kind == "utf8" else OBJ_BYTES, SHAPE, 3)
    p = tmp_path / "o.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=object, object_codec=codec, order=order,
                  store=str(p))
    z[...] = data
    assert load_zarray(p)["filters"][0]["id"] == codec.codec_id
    assert_same(zarr_read(p), data)
    # partially written: absent chunks read the same (fill) in both implementations
    p2 = tmp_path / "o2.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=object, object_codec=codec, order=order,
                  store=str(p2))
    z[:4, :3] = data[:4, :3]
    assert chunk_files(p2) == ["0.0"]
    assert_same(zarr_read(p2), cs_read(p2))
    assert_same(cs_read(p2)[:4, :3], data[:4, :3])


@pytest.mark.parametrize("order", ["C", "F"])
def test_cs_to_zarr_vlen_bytes_null_fill(tmp_path, order):
    # the data path of vlen-bytes, independent of how the default fill value is chosen
    data = _obj_data(OBJ_BYTES, SHAPE, 5)
    p = tmp_path / "o.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=object, object_codec=numcodecs.VLenBytes(),
                  order=order, fill_value=None, store=str(p))
    z[...] = data
    assert load_zarray(p)["fill_value"] is None
    assert_same(zarr_read(p), data)
    assert_same(cs_read(p), data)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("kind", ["utf8", "bytes"])
def test_zarr_to_cs_object(tmp_path, kind, order):
    data = _obj_data(OBJ_STR if kind == "utf8" else OBJ_BYTES, SHAPE, 4)
    dtype = zarr.dtype.VariableLengthUTF8() if kind == "utf8" else \
        zarr.dtype.VariableLengthBytes()
    p = tmp_path / "o.zarr"
    z = zarr.create_array(str(p), shape=SHAPE, chunks=CHUNKS, dtype=dtype, zarr_format=2,
                          order=order)
    z[...] = data
    assert_same(cs_read(p), data)
    p2 = tmp_path / "o2.zarr"
    z = zarr.create_array(str(p2), shape=SHAPE, chunks=CHUNKS, dtype=dtype, zarr_format=2,
                          order=order)
    z[4:8, 3:6] = data[4:8, 3:6]
    got = cs_read(p2)
    assert_same(got, zarr_read(p2))
    assert_same(got[4:8, 3:6], data[4:8, 3:6])


def test_vlen_array_chunks_decode_with_numcodecs(tmp_path):
    # zarr-python 3 cannot read vlen-array (v2) arrays, so check against numcodecs directly.
    codec = numcodecs.VLenArray("<i4")
    data = np.empty((5,), dtype=object)
    for i, n in enumerate([3, 0, 5, 1, 2]):
        data[i] = np.arange(n, dtype="<i4") * (i + 1)
    p = tmp_path / "va.zarr"
    z = cs.create((5,), chunks=(2,), dtype=object, object_codec=codec, store=str(p),
                  compressor=numcodecs.Zstd(level=1))
    z[...] = data
    meta = load_zarray(p)
    assert meta["filters"] == [codec.get_config()]
    comp = numcodecs.get_codec(meta["compressor"])
    for c in range(3):
        raw = (p / str(c)).read_bytes()
        items = codec.decode(comp.decode(raw))
        want = data[2 * c: 2 * c + 2]
        assert len(items) == 2
        for a, e in zip(items[: len(want)], want):
            np.testing.assert_array_equal(a, e)
    back = cs_read(p)
    for a, e in zip(back, data):
        assert a.dtype == np.dtype("<i4")
        np.testing.assert_array_equal(a, e)


# ------------------------------------------------------------------------------ separators

@pytest.mark.parametrize("sep", [".", "/"])
def test_cs_to_zarr_dimension_separator(tmp_path, sep):
    data = make_data(np.dtype("i4"), SHAPE, 11)
    p = tmp_path / "s.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype="i4", store=str(p), dimension_separator=sep)
    z[...] = data
    assert load_zarray(p).get("dimension_separator", ".") == sep
    files = chunk_files(p)
    assert len(files) == 4 * 4
    assert f"3{sep}3" in files and f"0{sep}2" in files
    if sep == "/":
        assert (p / "3").is_dir()
    assert_same(zarr_read(p), data)


@pytest.mark.parametrize("sep", [".", "/"])
def test_zarr_to_cs_dimension_separator(tmp_path, sep):
    data = make_data(np.dtype("i4"), SHAPE, 12)
    p = tmp_path / "s.zarr"
    zarr_write(p, data, chunk_key_encoding={"name": "v2", "separator": sep})
    assert f"3{sep}3" in chunk_files(p)
    z = cs.open_array(str(p), mode="r")
    assert z.dimension_separator == sep
    assert z.nchunks_initialized == 16
    assert_same(z[...], data)
    assert_same(z[-1, ::-1], data[-1, ::-1])


def test_cs_nested_directory_store_reads_in_zarr(tmp_path):
    data = make_data(np.dtype("f4"), SHAPE, 13)
    p = tmp_path / "n.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype="f4", store=cs.NestedDirectoryStore(str(p)))
    z[...] = data
    assert load_zarray(p)["dimension_separator"] == "/"
    assert "3/3" in chunk_files(p)
    assert_same(zarr_read(p), data)


# ------------------------------------------------------------------------------ fill values

FILLS = {"nan": (np.nan, "f8"), "42": (42, "i4"), "null": (None, "i4"),
         "neg_inf": (-np.inf, "f4"), "complex": (1 + 2j, "c16"), "bytes": (b"zz", "S3"),
         "str": ("ab", "<U3"), "true": (True, "bool")}


def _sparse_data(dtype, fill, seed):
    """Random data whose written cells differ from the fill (so their chunks are stored)."""
    data = make_data(np.dtype(dtype), SHAPE, seed)
    if fill is not None and data[12, 10] == fill:
        data[12, 10] = data[~(data == fill)].flat[0]
    return data


def _sparse_write(z, data):
    z[0:4, 0:3] = data[0:4, 0:3]
    z[12, 10] = data[12, 10]


@pytest.mark.parametrize("name", list(FILLS))
def test_cs_to_zarr_missing_chunks(tmp_path, name):
    fill, dtype = FILLS[name]
    data = _sparse_data(dtype, fill, 21)
    p = tmp_path / "f.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=dtype, fill_value=fill, store=str(p))
    _sparse_write(z, data)
    assert chunk_files(p) == ["0.0", "3.3"]
    meta = load_zarray(p)
    if fill is None:
        assert meta["fill_value"] is None
    elif name == "nan":
        assert meta["fill_value"] == "NaN"
    elif name == "neg_inf":
        assert meta["fill_value"] == "-Infinity"
    got = zarr_read(p)
    assert_same(got[0:4, 0:3], data[0:4, 0:3])
    assert_same(got[12, 10], data[12, 10])
    if fill is None:
        # no fill value: both implementations must still agree on what they return
        assert_same(cs_read(p), got)
    else:
        want = np.full(SHAPE, fill, dtype=dtype)
        _sparse_write(want, data)
        assert_same(got, want)


@pytest.mark.parametrize("name", list(FILLS))
def test_zarr_to_cs_missing_chunks(tmp_path, name):
    fill, dtype = FILLS[name]
    data = _sparse_data(dtype, fill, 22)
    p = tmp_path / "f.zarr"
    z = zarr.create_array(str(p), shape=SHAPE, chunks=CHUNKS, dtype=dtype, fill_value=fill,
                          zarr_format=2)
    _sparse_write(z, data)
    assert chunk_files(p) == ["0.0", "3.3"]
    zc = cs.open_array(str(p), mode="r")
    assert zc.nchunks_initialized == 2
    got = zc[...]
    assert_same(got, zarr_read(p))
    assert_same(got[0:4, 0:3], data[0:4, 0:3])
    if fill is not None:
        want = np.full(SHAPE, fill, dtype=dtype)
        _sparse_write(want, data)
        assert_same(got, want)
        assert np.array(zc.fill_value, dtype=dtype).tobytes() == \
            np.array(fill, dtype=dtype).tobytes()
    else:
        assert zc.fill_value is None


# ------------------------------------------------------------------------------ empty chunks

@pytest.mark.parametrize("fill", [0, np.nan, 7.5])
def test_cs_write_empty_chunks_false_stores_no_fill_chunks(tmp_path, fill):
    data = make_data(np.dtype("f8"), SHAPE, 31)
    data[np.isnan(data)] = 1.0
    data[4:8, :] = fill          # chunk row 1 is entirely fill
    data[:, 9:] = fill           # so is chunk column 3
    p = tmp_path / "e.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype="f8", fill_value=fill, store=str(p),
                  write_empty_chunks=False)
    assert z.write_empty_chunks is False
    z[...] = data
    files = chunk_files(p)
    assert len(files) == 3 * 3
    assert all(not f.startswith("1.") and not f.endswith(".3") for f in files)
    assert_same(zarr_read(p), data)
    # overwriting a stored chunk with fill deletes it
    z[0:4, 0:3] = fill
    assert "0.0" not in chunk_files(p)
    data[0:4, 0:3] = fill
    assert_same(zarr_read(p), data)
    assert_same(z[...], data)


def test_cs_write_empty_chunks_true_stores_every_chunk(tmp_path):
    p = tmp_path / "e.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype="i2", fill_value=5, store=str(p),
                  write_empty_chunks=True)
    assert z.write_empty_chunks is True
    z[...] = 5
    assert len(chunk_files(p)) == 16
    assert z.nchunks_initialized == 16
    assert_same(zarr_read(p), np.full(SHAPE, 5, "i2"))


def test_zarr_write_empty_chunks_false_reads_in_cs(tmp_path):
    data = make_data(np.dtype("i4"), SHAPE, 32)
    data[4:8, :] = -1
    p = tmp_path / "e.zarr"
    zarr_write(p, data, fill_value=-1, config={"write_empty_chunks": False})
    assert len(chunk_files(p)) == 12
    assert_same(cs_read(p), data)


# ------------------------------------------------------------------------------ odd shapes

@pytest.mark.parametrize("dtype", ["f8", "i2", "<U4"])
def test_0d_both_directions(tmp_path, dtype):
    value = make_data(np.dtype(dtype), (3,), 41)[1]
    p = tmp_path / "cs.zarr"
    z = cs.create((), dtype=dtype, store=str(p), fill_value=None if dtype == "<U4" else 3)
    assert z.shape == () and z.chunks == ()
    z[...] = value
    assert chunk_files(p) == ["0"]
    assert_same(zarr_read(p), np.array(value, dtype=dtype))
    q = tmp_path / "zarr.zarr"
    zz = zarr.create_array(str(q), shape=(), dtype=dtype, zarr_format=2)
    zz[...] = value
    got = cs.open_array(str(q), mode="r")
    assert got.shape == ()
    assert_same(np.asarray(got[...]), np.array(value, dtype=dtype))
    assert got[()] == value


def test_0d_missing_chunk_reads_fill(tmp_path):
    p = tmp_path / "cs.zarr"
    cs.create((), dtype="i4", fill_value=9, store=str(p))
    assert chunk_files(p) == []
    assert_same(zarr_read(p), np.array(9, "i4"))
    q = tmp_path / "zarr.zarr"
    zarr.create_array(str(q), shape=(), dtype="i4", fill_value=9, zarr_format=2)
    assert_same(np.asarray(cs_read(q)), np.array(9, "i4"))


@pytest.mark.parametrize("shape, chunks", [((0,), (4,)), ((0, 5), (3, 5)), ((4, 0, 3), (2, 2, 2))])
def test_zero_length_both_directions(tmp_path, shape, chunks):
    p = tmp_path / "cs.zarr"
    z = cs.create(shape, chunks=chunks, dtype="f4", store=str(p))
    assert z.size == 0 and z.nchunks == 0
    z[...] = np.zeros(shape, "f4")
    assert chunk_files(p) == []
    assert_same(zarr_read(p), np.zeros(shape, "f4"))
    q = tmp_path / "zarr.zarr"
    zarr.create_array(str(q), shape=shape, chunks=chunks, dtype="f4", zarr_format=2)
    got = cs.open_array(str(q), mode="r")
    assert got.shape == shape and got.chunks == chunks
    assert_same(got[...], np.zeros(shape, "f4"))


# ------------------------------------------------------------------------------ codecs

COMPRESSORS = {
    "none": None,
    "zstd": numcodecs.Zstd(level=3),
    "gzip": numcodecs.GZip(level=5),
    "lz4": numcodecs.LZ4(acceleration=1),
    "zlib": numcodecs.Zlib(level=1),
    "bz2": numcodecs.BZ2(level=1),
    "lzma": numcodecs.LZMA(),
    "blosc_zstd_bitshuffle": numcodecs.Blosc(cname="zstd", clevel=3,
                                             shuffle=numcodecs.Blosc.BITSHUFFLE),
    "blosc_blosclz_noshuffle": numcodecs.Blosc(cname="blosclz", clevel=9,
                                               shuffle=numcodecs.Blosc.NOSHUFFLE),
}


@pytest.mark.parametrize("name", list(COMPRESSORS))
def test_cs_to_zarr_compressors(tmp_path, name):
    comp = COMPRESSORS[name]
    data = make_data(np.dtype("f8"), SHAPE, 51)
    p = tmp_path / "c.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype="f8", compressor=comp, store=str(p))
    z[...] = data
    assert load_zarray(p)["compressor"] == (None if comp is None else comp.get_config())
    if comp is None:  # an uncompressed chunk is the raw C-order bytes
        assert (p / "0.0").read_bytes() == np.ascontiguousarray(data[0:4, 0:3]).tobytes()
    else:
        assert comp.decode((p / "0.1").read_bytes()) == \
            np.ascontiguousarray(data[0:4, 3:6]).tobytes()
    assert_same(zarr_read(p), data)


@pytest.mark.parametrize("name", list(COMPRESSORS))
def test_zarr_to_cs_compressors(tmp_path, name):
    comp = COMPRESSORS[name]
    data = make_data(np.dtype("f8"), SHAPE, 52)
    p = tmp_path / "c.zarr"
    zarr_write(p, data, compressors=comp)
    z = cs.open_array(str(p), mode="r")
    assert (None if z.compressor is None else z.compressor.get_config()) == \
        (None if comp is None else comp.get_config())
    assert_same(z[...], data)


def _filter_cases():
    f8 = make_data(np.dtype("f8"), SHAPE, 61)
    f8 = np.where(np.isfinite(f8), f8, 1.25) / 10
    i8 = np.cumsum(make_data(np.dtype("i2"), SHAPE, 62).astype("i8"), axis=1)
    b = make_data(np.dtype("bool"), SHAPE, 63)
    u1 = np.random.default_rng(64).integers(0, 3, SHAPE).astype("u1")
    return {
        "delta": ([numcodecs.Delta(dtype="<i8")], i8, True),
        "fixedscaleoffset": ([numcodecs.FixedScaleOffset(offset=1, scale=100, dtype="<f8",
                                                         astype="<i4")], f8, False),
        "quantize": ([numcodecs.Quantize(digits=3, dtype="<f8")], f8, False),
        "astype": ([numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")], f8, False),
        "packbits": ([numcodecs.PackBits()], b, True),
        "delta_then_shuffle": ([numcodecs.Delta(dtype="<u1"), numcodecs.Shuffle(elementsize=1)],
                               u1, True),
    }


FILTERS = _filter_cases()


@pytest.mark.parametrize("name", list(FILTERS))
def test_cs_to_zarr_filters(tmp_path, name):
    filters, data, lossless = FILTERS[name]
    p = tmp_path / "f.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=data.dtype, filters=filters, store=str(p),
                  compressor=numcodecs.Zstd(level=1))
    z[...] = data
    assert load_zarray(p)["filters"] == [f.get_config() for f in filters]
    got = zarr_read(p)
    assert_same(got, cs_read(p))
    if lossless:
        assert_same(got, data)
    else:
        np.testing.assert_allclose(got, data, atol=1e-2)


@pytest.mark.parametrize("name", list(FILTERS))
def test_zarr_to_cs_filters(tmp_path, name):
    filters, data, lossless = FILTERS[name]
    p = tmp_path / "f.zarr"
    zarr_write(p, data, filters=filters, compressors=numcodecs.Zstd(level=1))
    z = cs.open_array(str(p), mode="r")
    assert [f.get_config() for f in z.filters] == [f.get_config() for f in filters]
    got = z[...]
    assert_same(got, zarr_read(p))
    if lossless:
        assert_same(got, data)
    else:
        np.testing.assert_allclose(got, data, atol=1e-2)


# ------------------------------------------------------------------------------ JSON layout

def _zarr2_json(raw):
    """How zarr-python 2 serialises a document: sorted keys, indent 4, ASCII."""
    return json.dumps(json.loads(raw), indent=4, sort_keys=True, ensure_ascii=True,
                      separators=(",", ": ")).encode("ascii")


def test_zarray_and_zattrs_layout(tmp_path):
    p = tmp_path / "j.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=FLAT_STRUCT, store=str(p), path="grp/arr",
                  compressor=numcodecs.Zstd(level=1), fill_value=None)
    z.attrs["title"] = "caf\u00e9 \u2603"
    z.attrs.update({"b": [1, 2.5, None], "a": {"z": 1, "y": True}})
    for key in ("grp/arr/.zarray", "grp/arr/.zattrs", "grp/.zgroup", ".zgroup"):
        raw = (p / key).read_bytes()
        assert raw == _zarr2_json(raw), key
    meta = load_zarray(p / "grp" / "arr")
    assert meta["zarr_format"] == 2
    assert set(meta) >= {"chunks", "compressor", "dtype", "fill_value", "filters", "order",
                         "shape", "zarr_format"}
    assert meta["shape"] == list(SHAPE) and meta["chunks"] == list(CHUNKS)
    assert meta["dtype"] == [["a", "<i4"], ["b", "<f8"], ["s", "|S3"], ["e", "|b1"]]
    assert json.loads((p / "grp/.zgroup").read_text()) == {"zarr_format": 2}
    # zarr-python reads the attributes and the hierarchy
    z3 = zarr.open_array(str(p), path="grp/arr", mode="r")
    assert dict(z3.attrs) == {"title": "caf\u00e9 \u2603", "b": [1, 2.5, None],
                              "a": {"z": 1, "y": True}}


def _fixture_metadata_cases():
    return [c for c in array_cases_v2() if c["dtype"] != "object"]


FIXTURE_META = _fixture_metadata_cases()


@pytest.mark.parametrize("case", FIXTURE_META, ids=[c["name"] for c in FIXTURE_META])
def test_zarray_matches_zarr_python_2(tmp_path, case):
    """Creating an array with the parameters of a golden store writes the same .zarray
    document zarr-python 2.18 wrote (a default "." dimension_separator may be added)."""
    src = FIXTURES_V2 / case["path"] / case["array"]
    ref_raw = (src / ".zarray").read_bytes()
    ref = json.loads(ref_raw)
    dtype = _json_dtype(ref["dtype"])
    z = cs.create(tuple(ref["shape"]), chunks=tuple(ref["chunks"]) or None, dtype=dtype,
                  compressor=None if ref["compressor"] is None
                  else numcodecs.get_codec(ref["compressor"]),
                  filters=[numcodecs.get_codec(f) for f in ref["filters"] or []] or None,
                  fill_value=manifest_value(case["fill_value"]), order=ref["order"],
                  dimension_separator=ref.get("dimension_separator"),
                  store=str(tmp_path / "a.zarr"))
    raw = (tmp_path / "a.zarr" / ".zarray").read_bytes()
    assert raw == _zarr2_json(raw)
    mine = json.loads(raw)
    if mine.get("dimension_separator") == "." and "dimension_separator" not in ref:
        del mine["dimension_separator"]
    assert mine == ref
    assert z.shape == tuple(ref["shape"])


# ------------------------------------------------------------------------------ mixed writers

@pytest.mark.parametrize("order", ["C", "F"])
def test_cs_updates_zarr_array_and_zarr_updates_cs_array(tmp_path, order):
    data = make_data(np.dtype("<i4"), SHAPE, 71) // 4   # no overflow in the Delta filter
    model = data.copy()
    p = tmp_path / "m.zarr"
    zarr_write(p, data, order=order, filters=[numcodecs.Delta(dtype="<i4")],
               compressors=numcodecs.Zstd(level=1), fill_value=-1)
    z = cs.open_array(str(p), mode="r+")
    z[2:13:3, ::-2] = 100              # touches edge chunks, partial chunks
    model[2:13:3, ::-2] = 100
    z.vindex[[12, 0], [10, 0]] = [5, 6]
    model[[12, 0], [10, 0]] = [5, 6]
    z.resize(15, 11)
    model = np.concatenate([model, np.full((2, 11), -1, "<i4")])
    assert_same(zarr_read(p), model)
    # and zarr-python writing into the array chunkstore modified
    z3 = zarr.open_array(str(p), mode="r+")
    z3[14, :] = 2
    model[14, :] = 2
    assert_same(cs_read(p), model)


def test_vlen_bytes_fill_value_from_zarr(tmp_path):
    """zarr-python stores a vlen-bytes fill value as base64 (b"xy" -> "eHk=")."""
    p = tmp_path / "b.zarr"
    z = zarr.create_array(str(p), shape=(4,), chunks=(2,), fill_value=b"xy",
                          dtype=zarr.dtype.VariableLengthBytes(), zarr_format=2)
    z[:2] = np.array([b"a", b"b"], dtype=object)
    assert_same(cs_read(p), np.array([b"a", b"b", b"xy", b"xy"], dtype=object))
    assert_same(cs_read(p), zarr_read(p))


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("fill", [np.nan, 0.0])
def test_random_cs_writes_read_by_zarr(tmp_path, order, fill):
    """Many partial writes (edge chunks, negative steps, points) through chunkstore, then
    zarr-python reads exactly the NumPy model."""
    rng = np.random.default_rng(81 if order == "C" else 82)
    shape, chunks = (17, 10), (5, 4)
    p = tmp_path / "r.zarr"
    z = cs.create(shape, chunks=chunks, dtype="f4", fill_value=fill, order=order,
                  store=str(p), compressor=numcodecs.LZ4())
    model = np.full(shape, fill, dtype="f4")
    for _ in range(40):
        if rng.random() < 0.6:
            sel = tuple(slice(int(rng.integers(0, n)), int(rng.integers(0, n + 1)),
                              int(rng.choice([1, 2, -1, -3]))) for n in shape)
            value = rng.standard_normal(model[sel].shape).astype("f4")
            if rng.random() < 0.3:
                value[...] = fill
            z[sel] = value
            model[sel] = value
        else:
            pts = tuple(rng.integers(0, n, 5) for n in shape)
            value = rng.standard_normal(5).astype("f4")
            z.vindex[pts] = value
            model[pts] = value
    assert_same(zarr_read(p), model)
    assert_same(z[...], model)
