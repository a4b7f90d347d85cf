"""Tests for chunkstore.codecs.v2.ChunkCodecV2 (Zarr v2 chunk encoding/decoding)."""

from __future__ import annotations

import itertools
import json
import os

import numcodecs
import numpy as np
import pytest

import chunkstore as cs

from chunkstore.codecs.v2 import ChunkCodecV2
from chunkstore.errors import ChunkDecodeError
from chunkstore.metadata.v2 import ArrayMetadataV2, parse_array_metadata

FIXTURES = os.path.join(os.environ.get("CHUNKSTORE_FIXTURES", "/work/shared/fixtures"), "v2")


def _load_cases():
    path = os.path.join(FIXTURES, "manifest.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [c for c in json.load(f)["cases"] if c.get("kind") != "group"]


ARRAY_CASES = _load_cases()


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _open_case(case):
    root = os.path.join(FIXTURES, case["path"], case["array"])
    meta = parse_array_metadata(_read(os.path.join(root, ".zarray")), f"{case['name']}/.zarray")
    expected = np.load(os.path.join(FIXTURES, case["expected"]), allow_pickle=True)
    return root, meta, expected


def _chunks(meta):
    """(coords, key, region slices, in-chunk slices) for every chunk of the grid."""
    for coords in itertools.product(*(range(n) for n in meta.chunk_grid_shape)):
        region = tuple(
            slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(coords, meta.chunks, meta.shape)
        )
        inner = tuple(slice(0, r.stop - r.start) for r in region)
        yield coords, meta.chunk_key(coords), region, inner


def _assert_same(actual, expected):
    assert actual.shape == expected.shape
    if actual.dtype.hasobject or expected.dtype.hasobject:
        assert actual.tolist() == expected.tolist()
    elif actual.dtype.fields is not None:
        assert actual.tobytes() == expected.astype(actual.dtype).tobytes()
    else:
        assert actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected)  # NaN == NaN here


pytestmark = pytest.mark.skipif(not ARRAY_CASES, reason="v2 fixtures not available")


# ------------------------------------------------------------------------------------------
# golden fixtures
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ARRAY_CASES, ids=[c["name"] for c in ARRAY_CASES])
def test_decode_fixture_chunks(case):
    root, meta, expected = _open_case(case)
    codec = ChunkCodecV2.from_metadata(meta)
    assert expected.shape == meta.shape
    found = missing = 0
    for coords, key, region, inner in _chunks(meta):
        path = os.path.join(root, key)
        if not os.path.exists(path):
            assert case["missing_chunks"], f"chunk {key} missing"
            missing += 1
            # never written: the expectation is the fill value
            if meta.fill_value is not None and not meta.dtype.hasobject:
                want = np.full(expected[region].shape, meta.fill_value, dtype=meta.dtype)
                _assert_same(expected[region], want)
            continue
        found += 1
        data = _read(path)

        # plain decode: writable, dtype as stored, full (padded) chunk shape
        chunk = codec.decode(data, key=key, store=root)
        assert chunk.shape == meta.chunks
        assert chunk.dtype == meta.dtype
        assert chunk.flags.writeable
        _assert_same(chunk[inner], expected[region])

        # decode into a caller buffer of the chunk shape in the array's order
        out = np.empty(meta.chunks, dtype=meta.dtype, order=meta.order)
        res = codec.decode(data, out=out, key=key)
        assert res is out
        _assert_same(out[inner], expected[region])

        # decode into a flat slice of a bigger buffer (raw memory semantics)
        big = np.zeros(codec.nitems * 3, dtype=meta.dtype)
        target = big[codec.nitems : 2 * codec.nitems]
        res = codec.decode(memoryview(data), out=target)
        assert res.shape == meta.chunks and np.shares_memory(res, big)
        _assert_same(res[inner], expected[region])
        if not meta.dtype.hasobject:
            untouched = np.concatenate([big[: codec.nitems], big[2 * codec.nitems :]])
            assert not untouched.view(np.uint8).any()

        # a read-only view is allowed when asked for
        ro = codec.decode(bytearray(data), writable=False)
        _assert_same(ro[inner], expected[region])
    if case["missing_chunks"]:
        assert missing > 0
    if 0 not in meta.shape:
        assert found > 0


@pytest.mark.parametrize(
    "case",
    [c for c in ARRAY_CASES if c["compressor"] is None or c["compressor"]["id"] != "gzip"],
    ids=[c["name"] for c in ARRAY_CASES if c["compressor"] is None or c["compressor"]["id"] != "gzip"],
)
def test_reencode_fixture_chunks_byte_identical(case):
    # zarr-python 2 pads edge chunks with whatever was there (the fill value); decode gives us
    # the padded chunk, and encoding it again reproduces the stored bytes exactly for every
    # deterministic codec (gzip embeds a timestamp, so it is excluded).
    root, meta, _ = _open_case(case)
    codec = ChunkCodecV2.from_metadata(meta)
    for _, key, _, _ in _chunks(meta):
        path = os.path.join(root, key)
        if os.path.exists(path):
            data = _read(path)
            assert codec.encode(codec.decode(data)) == data, key


def test_big_endian_fixture_values():
    case = next(c for c in ARRAY_CASES if c["name"] == "dtype_be_i4")
    root, meta, expected = _open_case(case)
    codec = ChunkCodecV2.from_metadata(meta)
    chunk = codec.decode(_read(os.path.join(root, "0.0")))
    assert chunk.dtype == np.dtype(">i4")
    assert chunk[0, 0] == expected[0, 0]
    assert chunk.astype("<i4")[0, 1] == expected[0, 1]


# ------------------------------------------------------------------------------------------
# round trips
# ------------------------------------------------------------------------------------------

CHUNK_SHAPE = (4, 5, 3)


def _sample(dtype, shape=CHUNK_SHAPE, seed=0):
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype.hasobject:
        return np.array([f"s{i}é" * (i % 4) for i in range(n)], dtype=object).reshape(shape)
    raw = rng.integers(0, 256, size=n * dtype.itemsize, dtype=np.uint8).tobytes()
    arr = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    if dtype.kind == "b":
        arr = rng.integers(0, 2, size=shape).astype(dtype)
    elif dtype.kind == "U":
        arr = np.array([chr(0x41 + i % 26) * (i % 3) + "ü" for i in range(n)], dtype=dtype).reshape(shape)
    elif dtype.kind == "f":
        arr = rng.normal(size=shape).astype(dtype)
        arr.flat[0] = np.nan
        arr.flat[1] = -np.inf
    return arr


DTYPES = [
    "|b1", "|i1", "|u1", "<i2", ">i2", "<i4", ">i4", "<i8", ">u8", "<f2", "<f4", ">f4", "<f8",
    ">f8", "<c8", ">c16", "|S5", "<U3", ">U3", "|V6", "<M8[ns]", ">M8[D]", "<m8[s]",
    [("x", "<i4"), ("y", ">f8", (2,)), ("s", "S3")],
]

COMPRESSORS = {
    "none": None,
    "blosc": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
    "blosc_zstd_bit": numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE),
    "zstd": numcodecs.Zstd(level=1),
    "zstd_checksum": numcodecs.Zstd(level=1, checksum=True),
    "lz4": numcodecs.LZ4(),
    "zlib": numcodecs.Zlib(level=1),
    "gzip": numcodecs.GZip(level=1),
    "bz2": numcodecs.BZ2(level=1),
    "lzma": numcodecs.LZMA(),
}


def _check_round_trip(codec, arr):
    enc = codec.encode(arr)
    assert isinstance(enc, bytes)
    for data in (enc, bytearray(enc), memoryview(enc), np.frombuffer(enc, dtype=np.uint8)):
        dec = codec.decode(data)
        assert dec.shape == codec.chunk_shape and dec.dtype == codec.dtype
        assert dec.flags.writeable
        _assert_same(dec, arr)
    # into an array of the chunk shape, both layouts
    for layout in ("C", "F"):
        out = np.empty(codec.chunk_shape, dtype=codec.dtype, order=layout)
        assert codec.decode(enc, out=out) is out
        _assert_same(out, arr)
    # into raw memory
    flat = np.empty(codec.nitems, dtype=codec.dtype)
    res = codec.decode(enc, out=flat)
    assert res.base is flat or np.shares_memory(res, flat) or codec.dtype.hasobject
    _assert_same(res, arr)
    return enc


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("comp", list(COMPRESSORS))
@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d) for d in DTYPES])
def test_round_trip_no_filters(dtype, comp, order):
    codec = ChunkCodecV2(dtype, CHUNK_SHAPE, order, COMPRESSORS[comp], None)
    arr = _sample(dtype)
    enc = _check_round_trip(codec, arr)
    if comp == "none":
        # uncompressed: exactly the raw bytes in the requested order
        assert enc == arr.tobytes(order=order)
    # the input may be in either memory layout
    _assert_same(codec.decode(codec.encode(np.asfortranarray(arr))), arr)
    _assert_same(codec.decode(codec.encode(arr[::-1].copy()[::-1])), arr)


@pytest.mark.parametrize("order", ["C", "F"])
def test_layout_matches_order(order):
    arr = np.arange(12, dtype="<i2").reshape(3, 4)
    codec = ChunkCodecV2("<i2", (3, 4), order, None, None)
    assert codec.encode(arr) == arr.tobytes(order=order)
    assert codec.encode(np.asfortranarray(arr)) == arr.tobytes(order=order)


FILTERS = {
    "delta": ("<i4", [numcodecs.Delta(dtype="<i4")]),
    "delta_astype": ("<i8", [numcodecs.Delta(dtype="<i8", astype="<i4")]),
    "fixedscaleoffset": ("<f8", [numcodecs.FixedScaleOffset(offset=0, scale=1, dtype="<f8", astype="<i4")]),
    "quantize": ("<f4", [numcodecs.Quantize(digits=3, dtype="<f4")]),
    "astype": ("<f8", [numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")]),
    "packbits": ("|b1", [numcodecs.PackBits()]),
    "shuffle": (">i8", [numcodecs.Shuffle(elementsize=8)]),
    "two_filters": ("<i4", [numcodecs.Delta(dtype="<i4"), numcodecs.Shuffle(elementsize=4)]),
    "categorize": ("<U3", [numcodecs.Categorize(labels=["", "a", "bc"], dtype="<U3", astype="|u1")]),
    "vlen_utf8": ("|O", [numcodecs.VLenUTF8()]),
    "vlen_bytes": ("|O", [numcodecs.VLenBytes()]),
    "json": ("|O", [numcodecs.JSON()]),
    "pickle": ("|O", [numcodecs.Pickle()]),
    "vlen_array": ("|O", [numcodecs.VLenArray("<i4")]),
}


def _filter_sample(name, dtype, shape):
    n = int(np.prod(shape))
    rng = np.random.default_rng(1)
    if name in ("fixedscaleoffset", "astype", "quantize"):
        return np.round(rng.normal(size=shape) * 100).astype(dtype)  # exactly representable
    if name == "delta_astype":
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    if name == "categorize":
        return np.array([["", "a", "bc"][i % 3] for i in range(n)], dtype=dtype).reshape(shape)
    if name == "vlen_bytes":
        return np.array([b"x\x00y" * (i % 3) for i in range(n)], dtype=object).reshape(shape)
    if name == "vlen_array":
        arr = np.empty(n, dtype=object)
        for i in range(n):
            arr[i] = np.arange(i % 4, dtype="<i4")
        return arr.reshape(shape)
    return _sample(dtype, shape)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("comp", ["none", "blosc", "zstd", "zlib"])
@pytest.mark.parametrize("name", list(FILTERS))
def test_round_trip_with_filters(name, comp, order, monkeypatch):
    if name == "pickle":  # numcodecs >= 0.16 refuses to unpickle unless told to
        import numcodecs.pickles

        monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", True, raising=False)
    dtype, filters = FILTERS[name]
    codec = ChunkCodecV2(dtype, CHUNK_SHAPE, order, COMPRESSORS[comp], filters)
    arr = _filter_sample(name, dtype, CHUNK_SHAPE)
    if name == "vlen_array":
        enc = codec.encode(arr)
        dec = codec.decode(enc)
        assert dec.shape == CHUNK_SHAPE and dec.dtype == object
        for a, b in zip(dec.ravel(), arr.ravel()):
            np.testing.assert_array_equal(a, b)
        return
    _check_round_trip(codec, arr)


def test_object_order_f_element_layout():
    # With order F, an object codec sees the elements in Fortran order (as zarr-python 2 does).
    arr = np.array([["a", "b"], ["c", "d"]], dtype=object)
    codec = ChunkCodecV2(object, (2, 2), "F", None, [numcodecs.VLenUTF8()])
    assert numcodecs.VLenUTF8().decode(codec.encode(arr)).tolist() == ["a", "c", "b", "d"]
    _assert_same(codec.decode(codec.encode(arr)), arr)


def test_object_dtype_requires_object_codec():
    with pytest.raises(ValueError, match="object codec"):
        ChunkCodecV2(object, (2,), "C", numcodecs.Blosc(), None)


def test_zero_d_chunk():
    codec = ChunkCodecV2("<f8", (), "C", None, None)
    enc = codec.encode(np.array(1.5))
    assert enc == np.array(1.5).tobytes()
    dec = codec.decode(enc)
    assert dec.shape == () and dec[()] == 1.5
    out = np.empty((), dtype="<f8")
    assert codec.decode(enc, out=out) is out and out[()] == 1.5


def test_from_metadata():
    meta = ArrayMetadataV2(
        shape=(10, 10), chunks=(3, 4), dtype=">i4", order="F",
        compressor=numcodecs.Zstd(), filters=[numcodecs.Delta(dtype=">i4")],
    )
    codec = ChunkCodecV2.from_metadata(meta)
    assert codec.chunk_shape == (3, 4) and codec.dtype == np.dtype(">i4")
    assert codec.order == "F" and codec.nitems == 12 and codec.nbytes == 48
    arr = np.arange(12, dtype=">i4").reshape(3, 4)
    _assert_same(codec.decode(codec.encode(arr)), arr)


def test_encode_casts_native_to_stored_byte_order():
    codec = ChunkCodecV2(">i4", (3,), "C", None, None)
    assert codec.encode(np.array([1, 2, 3], dtype="<i4")) == np.array([1, 2, 3], ">i4").tobytes()
    with pytest.raises(ValueError):
        codec.encode(np.zeros((4,), dtype=">i4"))


# ------------------------------------------------------------------------------------------
# zero-copy behaviour
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("comp", ["blosc", "zstd", "lz4"])
def test_direct_decode_into_out(comp, monkeypatch):
    codec = ChunkCodecV2("<f8", (8, 16), "C", COMPRESSORS[comp], None)
    arr = _sample("<f8", (8, 16))
    enc = codec.encode(arr)
    big = np.zeros((32, 16), dtype="<f8")
    out = big[8:16]  # contiguous view into a bigger output
    calls = []
    original = type(COMPRESSORS[comp]).decode

    def spy(self, buf, out=None):
        calls.append(out)
        return original(self, buf, out=out)

    monkeypatch.setattr(type(COMPRESSORS[comp]), "decode", spy)
    res = codec.decode(enc, out=out)
    assert res is out
    np.testing.assert_array_equal(big[8:16], arr)
    assert not big[:8].any() and not big[16:].any()
    assert len(calls) == 1 and calls[0] is not None and np.shares_memory(calls[0], big)

    # without out: decoded straight into a fresh, writable array
    calls.clear()
    dec = codec.decode(enc)
    assert dec.flags.writeable and dec.flags.c_contiguous
    assert len(calls) == 1 and calls[0] is not None and np.shares_memory(calls[0], dec)


def test_uncompressed_views():
    codec = ChunkCodecV2("<i4", (2, 3), "C", None, None)
    data = np.arange(6, dtype="<i4").tobytes()
    ro = codec.decode(data, writable=False)
    assert not ro.flags.writeable  # a view of the immutable bytes, no copy
    rw = codec.decode(data)
    assert rw.flags.writeable
    buf = bytearray(data)
    view = codec.decode(buf, writable=False)
    assert view.flags.writeable and np.shares_memory(view, np.frombuffer(buf, np.uint8))


def test_out_validation():
    codec = ChunkCodecV2("<i4", (2, 3), "C", None, None)
    data = bytes(24)
    with pytest.raises(ValueError):
        codec.decode(data, out=np.empty((2, 3), dtype=">i4"))
    with pytest.raises(ValueError):
        codec.decode(data, out=np.empty((2, 4), dtype="<i4"))
    ro = np.empty((2, 3), dtype="<i4")
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        codec.decode(data, out=ro)
    with pytest.raises(ValueError):
        codec.decode(data, out=np.empty((2, 6), dtype="<i4")[:, ::2])
    with pytest.raises(TypeError):
        codec.decode(data, out=bytearray(24))


# ------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("comp", list(COMPRESSORS))
def test_wrong_decoded_size_is_an_error(comp):
    small = ChunkCodecV2("<f8", (3, 3), "C", COMPRESSORS[comp], None)
    big = ChunkCodecV2("<f8", (3, 4), "C", COMPRESSORS[comp], None)
    short = small.encode(np.ones((3, 3)))
    long = ChunkCodecV2("<f8", (3, 5), "C", COMPRESSORS[comp], None).encode(np.ones((3, 5)))
    for data in (short, long):
        with pytest.raises(ChunkDecodeError, match="expected 96"):
            big.decode(data, key="a/0.0")
        sentinel = np.full((3, 4), 7.0)
        with pytest.raises(ChunkDecodeError):
            big.decode(data, out=sentinel, key="a/0.0")


def test_wrong_size_after_filters_is_an_error():
    enc = ChunkCodecV2("<i4", (5,), "C", numcodecs.Zlib(), [numcodecs.Delta("<i4")]).encode(
        np.arange(5, dtype="<i4")
    )
    codec = ChunkCodecV2("<i4", (6,), "C", numcodecs.Zlib(), [numcodecs.Delta("<i4")])
    with pytest.raises(ChunkDecodeError, match="expected 24"):
        codec.decode(enc, key="k")
    obj = ChunkCodecV2(object, (3,), "C", None, [numcodecs.VLenUTF8()])
    enc = ChunkCodecV2(object, (2,), "C", None, [numcodecs.VLenUTF8()]).encode(
        np.array(["a", "b"], dtype=object)
    )
    with pytest.raises(ChunkDecodeError, match="expected 3"):
        obj.decode(enc, key="k")


def _corruptions(enc):
    return {
        "empty": b"",
        "truncated": enc[: len(enc) // 2],
        "header_only": enc[:3],
        "garbage": bytes(range(256)) * 2,
    }


@pytest.mark.parametrize("comp", [c for c in COMPRESSORS if c != "none"])
def test_corrupt_bytes_raise_chunk_decode_error(comp):
    codec = ChunkCodecV2("<f8", (8, 8), "C", COMPRESSORS[comp], None)
    enc = codec.encode(_sample("<f8", (8, 8)))
    for what, bad in _corruptions(enc).items():
        for out in (None, np.empty((8, 8))):
            with pytest.raises(ChunkDecodeError) as info:
                codec.decode(bad, out=out, key="foo/0.1", store="DirectoryStore('/x/y')")
            msg = str(info.value)
            assert msg.startswith("failed to decode chunk 'foo/0.1' in DirectoryStore('/x/y'): "), (what, msg)
            assert info.value.__cause__ is not None
            assert isinstance(info.value, ValueError)


def test_corrupt_uncompressed_and_filters():
    codec = ChunkCodecV2("<f8", (4,), "C", None, None)
    with pytest.raises(ChunkDecodeError, match=r"^failed to decode chunk 'z/3': .*expected 32"):
        codec.decode(b"\x00" * 31, key="z/3")
    vlen = ChunkCodecV2(object, (4,), "C", numcodecs.Zlib(), [numcodecs.VLenUTF8()])
    with pytest.raises(ChunkDecodeError, match="'v/0'"):
        vlen.decode(numcodecs.Zlib().encode(b"\xff" * 40), key="v/0")
    scaled = ChunkCodecV2("<f8", (4,), "C", None, [numcodecs.FixedScaleOffset(0, 1, "<f8", "<i4")])
    with pytest.raises(ChunkDecodeError):
        scaled.decode(b"\x00" * 5, key="s/0")


def test_error_message_variants():
    codec = ChunkCodecV2("<f8", (4,), "C", numcodecs.Zlib(), None)

    class FakeStore:
        def __repr__(self):
            return "FakeStore('/data')"

    with pytest.raises(ChunkDecodeError, match=r"^failed to decode chunk: "):
        codec.decode(b"nope")
    with pytest.raises(ChunkDecodeError, match=r"^failed to decode chunk 'a/0' in FakeStore\('/data'\): "):
        codec.decode(b"nope", key="a/0", store=FakeStore())


def test_fixture_chunk_corruption_names_key():
    case = next(c for c in ARRAY_CASES if c["name"] == "compressor_blosc_lz4_shuffle")
    root, meta, _ = _open_case(case)
    codec = ChunkCodecV2.from_metadata(meta)
    data = bytearray(_read(os.path.join(root, "1.2")))
    data[12:16] = (len(data) + 100).to_bytes(4, "little")  # claim more compressed bytes
    with pytest.raises(ChunkDecodeError, match="'arr/1.2'"):
        codec.decode(bytes(data), key="arr/1.2")
    data = bytearray(_read(os.path.join(root, "1.2")))
    data[4:8] = (7).to_bytes(4, "little")  # claim a wrong decoded size
    with pytest.raises(ChunkDecodeError, match="expected 280"):
        codec.decode(bytes(data), key="arr/1.2")


class _ShapedCodec(numcodecs.abc.Codec):
    """A filter that uses its input's shape, as N5's chunk wrapper and ZFPY do: it records
    the shape, and decodes to an array of that shape (C-ordered)."""

    codec_id = "test-shaped"

    def encode(self, buf):
        a = np.asarray(buf)
        head = np.array([a.ndim, *a.shape], dtype="<i8").tobytes()
        return head + np.ascontiguousarray(a).tobytes()

    def decode(self, buf, out=None):
        b = bytes(buf)
        ndim = int(np.frombuffer(b[:8], "<i8")[0])
        shape = tuple(np.frombuffer(b[8:8 + 8 * ndim], "<i8"))
        return np.frombuffer(b[8 + 8 * ndim:], dtype="<i4").reshape(shape)


@pytest.mark.parametrize("order", ["C", "F"])
def test_filters_get_the_chunk_in_its_shape_as_zarr_python_2_gives_it(order):
    # chunks were flattened before the filters: a codec recording the shape (N5's chunk
    # wrapper) wrote (6,) for a (2, 3) chunk, which neither library could read back
    numcodecs.register_codec(_ShapedCodec)
    store = {}
    z = cs.zeros((4, 6), chunks=(2, 3), dtype="<i4", store=store, order=order,
                 filters=[_ShapedCodec()], compressor=None)
    data = np.arange(24, dtype="<i4").reshape(4, 6)
    z[:] = data
    assert np.frombuffer(store["0.0"][:24], "<i8").tolist() == [2, 2, 3]
    np.testing.assert_array_equal(cs.open_array(store, mode="r")[:], data)


@pytest.mark.parametrize("comp", [None, numcodecs.Zstd(1), numcodecs.Blosc("lz4", 5)])
def test_a_filter_that_returns_a_c_ordered_chunk_in_an_f_ordered_array(comp):
    # BitRound copies its input in C order: in an F-ordered array the compressor stored
    # that memory as the F-ordered chunk, and the values read back scrambled
    data = np.arange(24, dtype="f4").reshape(4, 6) / 7
    z = cs.zeros((4, 6), chunks=(2, 3), dtype="f4", store={}, order="F",
                 filters=[numcodecs.BitRound(keepbits=20)], compressor=comp)
    z[:] = data
    np.testing.assert_allclose(z[:], data, rtol=1e-5)
    np.testing.assert_allclose(cs.open_array(z.store, mode="r")[:], data, rtol=1e-5)


@pytest.mark.parametrize("level", [1, 5, 9])
def test_gzip_chunks_carry_no_time_stamp(level, monkeypatch, tmp_path):
    """A chunk gzipped through filters (numcodecs' GZip, which stamps the current second)
    encodes to the same bytes at any time, and to what the GIL-free path writes for the same
    chunk without filters: a copy and ``chunkstore cp`` made a second apart were unequal."""
    import gzip as gzip_module

    data = np.arange(64, dtype="<i4")
    codec = ChunkCodecV2("<i4", (64,), "C", numcodecs.GZip(level=level),
                         [numcodecs.Delta(dtype="<i4")])
    monkeypatch.setattr(gzip_module.time, "time", lambda: 1_700_000_000.0)
    first = codec.encode(data)
    monkeypatch.setattr(gzip_module.time, "time", lambda: 1_700_000_007.0)
    assert codec.encode(data) == first
    assert first[4:8] == b"\0\0\0\0"
    np.testing.assert_array_equal(codec.decode(first), data)
    # the same stream as the batch path's for the Delta-encoded bytes
    z = cs.open_array(str(tmp_path / "a"), mode="w", shape=(64,), chunks=(64,), dtype="<i4",
                      compressor=numcodecs.GZip(level=level), zarr_format=2)
    z[:] = numcodecs.Delta(dtype="<i4").encode(data)
    assert bytes(z.store["0"]) == first


@pytest.mark.parametrize("compressor", [None, numcodecs.Zlib(), numcodecs.Zstd(),
                                        numcodecs.Blosc(), numcodecs.GZip(1), numcodecs.LZ4()])
def test_structured_chunks_with_a_datetime_field_are_compressed(compressor):
    """A structured dtype with a datetime64 field: its chunks export no buffer ("cannot
    include dtype 'M' in a buffer"), so LZ4 always failed, and Zstd, Blosc and GZip for a
    record broadcast into a chunk. They are compressed as raw records of the item size,
    the bytes zarr-python 2 compresses for other structured dtypes."""
    import chunkstore as cs
    dt = np.dtype([("d", "<M8[s]"), ("u", "<i2")])
    rec = np.array((np.datetime64("2001-01-01", "s"), 3), dtype=dt)
    z = cs.create(shape=(3,), chunks=(2,), dtype=dt, fill_value=None, compressor=compressor,
                  store={})
    z[...] = rec
    assert z[:].tolist() == np.full(3, rec).tolist()
    z[1] = np.array((np.datetime64("NaT", "s"), -1), dtype=dt)
    want = np.full(3, rec)
    want[1] = np.array((np.datetime64("NaT", "s"), -1), dtype=dt)
    assert cs.open_array(z.store, mode="r")[:].tolist() == want.tolist()


def test_structured_chunks_compress_to_the_bytes_of_the_records():
    """Raw records of the item size give the bytes the structured array itself gives
    (Blosc shuffles by that type size), so arrays zarr-python 2 wrote are written alike."""
    from chunkstore.codecs.v2 import ChunkCodecV2
    from chunkstore.metadata.v2 import ArrayMetadataV2
    dt = np.dtype([("a", "<i8"), ("u", "<i2")])
    chunk = np.zeros(4, dt)
    chunk["a"], chunk["u"] = np.arange(4) * 1000, 7
    blosc = numcodecs.Blosc(shuffle=numcodecs.Blosc.SHUFFLE)
    meta = ArrayMetadataV2(shape=(4,), chunks=(4,), dtype=dt, compressor=blosc, fill_value=None)
    assert ChunkCodecV2.from_metadata(meta).encode(chunk) == blosc.encode(chunk)


# ------------------------------------------------ a filter taking objects after the object codec
CATEGORIZE = numcodecs.Categorize(["a", "b", "c"], dtype=object)


def test_object_filter_after_the_object_codec_is_refused_at_creation():
    """zarr-python 2 stores every chunk of object_codec=VLenUTF8(), filters=[Categorize]
    as zeros (Categorize gets VLenUTF8's bytes): the values are lost. Refused, naming both
    and the remedy; Categorize as the object codec works."""
    store = cs.MemoryStore()
    with pytest.raises(ValueError, match=r"Categorize.*after the object codec VLenUTF8\(\)"
                                         r".*object_codec="):
        cs.create(shape=4, chunks=2, dtype=object, store=store, path="x",
                  object_codec=numcodecs.VLenUTF8(), filters=[CATEGORIZE])
    assert list(store) == []
    z = cs.create(shape=4, chunks=2, dtype=object, object_codec=CATEGORIZE)
    z[:] = np.array(["a", "b", "a", "c"], dtype=object)
    assert list(z[:]) == ["a", "b", "a", "c"]


def test_an_array_stored_with_that_chain_refuses_writes():
    """Such an array written by zarr-python 2: a write raises (nothing stored), a read of
    its zeroed chunks raises too, never values."""
    store = cs.MemoryStore()
    meta = {"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "|O",
            "compressor": None, "fill_value": None, "order": "C",
            "filters": [numcodecs.VLenUTF8().get_config(), CATEGORIZE.get_config()]}
    store[".zarray"] = json.dumps(meta).encode()
    z = cs.open_array(store, mode="r+")
    with pytest.raises(ValueError, match="takes objects, but comes after the object codec"):
        z[:] = np.array(["a", "b", "a", "c"], dtype=object)
    assert list(store) == [".zarray"]
    store["0"] = ChunkCodecV2(object, (2,), "C", None, [numcodecs.VLenUTF8()]).encode(
        np.array(["a", "b"], dtype=object))  # (what a reader of the zeros would meet)
    with pytest.raises(ChunkDecodeError):
        z[:2]


@pytest.mark.parametrize("given", [numcodecs.Zstd(level=1), {"id": "zstd", "level": 1},
                                   {"id": "zstd", "level": 1, "checksum": False}])
def test_create_array_v2_zstd_written_without_checksum_false(given):
    """create_array(zarr_format=2) with numcodecs' Zstd (or its JSON) writes the compressor
    as zarr-python 3 does, without "checksum": false (tensorstore refuses the member); a
    checksum asked for is kept; create(compressor=), zarr-python 2's API, writes what
    zarr-python 2 writes (numcodecs' get_config, the member included)."""
    store: dict = {}
    cs.create_array(store, name="a", shape=(4,), chunks=(2,), dtype="i4", zarr_format=2,
                    compressors=given)
    assert json.loads(store["a/.zarray"])["compressor"] == {"id": "zstd", "level": 1}
    cs.create_array(store, name="b", shape=(4,), chunks=(2,), dtype="i4", zarr_format=2,
                    compressors=numcodecs.Zstd(level=1, checksum=True))
    assert json.loads(store["b/.zarray"])["compressor"] == {"id": "zstd", "level": 1,
                                                            "checksum": True}
    z = cs.create(shape=(4,), chunks=(2,), dtype="i4", store=store, path="c",
                  compressor=numcodecs.Zstd(level=1))
    assert json.loads(store["c/.zarray"])["compressor"] == {"id": "zstd", "level": 1,
                                                            "checksum": False}
    z[:] = [1, 2, 3, 4]
    assert cs.open_array(store, path="a", mode="r+")[:].tolist() == [0, 0, 0, 0]
