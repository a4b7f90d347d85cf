"""The GIL-free batch paths for raw, zstd, gzip and zlib chunks (chunkstore._core.zcodecs,
chunkstore.codecs.fastpath).

- Every chunk a write stores is byte for byte what numcodecs writes for it, per dtype, level,
  shape and chunk order, Zarr v2 and v3 (gzip with the clock fixed: its header holds the
  time of writing).
- Reads (whole, partial, strided, coordinate) and read-modify-writes give what NumPy gives,
  also of data zarr-python 3 wrote, plain and inside shards.
- Frames the kernel does not take (several zstd frames, a frame with no content size, gzip
  with a file name, gzip level 0) still read and write through numcodecs.
- Corrupt or truncated chunks raise ChunkDecodeError naming the key, in v3 and in shards.
"""

from __future__ import annotations

import gzip
import io
import re
import time

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore._core import zcodecs
from chunkstore.codecs import fastpath
from chunkstore.codecs.fastpath import BloscPath, ZPath

zarr = pytest.importorskip("zarr")

SHAPE = (23, 17)
CHUNKS = (5, 6)

V2_CODECS = {
    "raw": None,
    "zstd0": numcodecs.Zstd(level=0),
    "zstd3c": numcodecs.Zstd(level=3, checksum=True),
    "zstd-5": numcodecs.Zstd(level=-5),
    "zstd19": numcodecs.Zstd(level=19),
    "gzip1": numcodecs.GZip(level=1),
    "gzip6": numcodecs.GZip(level=6),
    "gzip9": numcodecs.GZip(level=9),
    "zlib1": numcodecs.Zlib(level=1),
    "zlib5": numcodecs.Zlib(level=5),
    "zlib9": numcodecs.Zlib(level=9),
}
KIND = {"raw": zcodecs.RAW, "zstd": zcodecs.ZSTD, "gzip": zcodecs.GZIP, "zlib": zcodecs.ZLIB}


@pytest.fixture
def fixed_clock(monkeypatch):
    """gzip headers hold time.time() in numcodecs' GZip: a fixed clock for its output."""
    monkeypatch.setattr(time, "time", lambda: 1_700_000_123.75)


def _no_time(encode):
    """encode, with a gzip header's time set to 0 (chunkstore writes gzip chunks so: equal
    chunks are equal bytes whenever they are written); other bytes as encode's."""
    def enc(b):
        out = encode(b)
        if out[:2] == b"\x1f\x8b":
            out = out[:4] + b"\0\0\0\0" + out[8:]
        return out
    return enc


def _data(shape, dtype):
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    rng = np.random.default_rng(7)
    if dt.kind == "b":
        a = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        a = (np.arange(n) * 7 % 113 + rng.integers(0, 3, n)).astype(dt)
    elif dt.kind == "c":
        a = (np.arange(n) / 3 + 1j * rng.random(n)).astype(dt)
    else:
        a = (np.arange(n) / 7 + rng.random(n) // 0.5).astype(dt)
    return a.reshape(shape)


def _expected_chunks(data, chunks, order, fill):
    """{grid coords: chunk bytes in order}, each chunk padded with fill past the array's
    end, as any Zarr writer stores it."""
    out = {}
    for idx in np.ndindex(*(-(-s // c) for s, c in zip(data.shape, chunks))):
        block = np.full(chunks, fill, dtype=data.dtype)
        sl = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, data.shape))
        block[tuple(slice(0, s.stop - s.start) for s in sl)] = data[sl]
        out[idx] = block.tobytes(order=order)
    return out


def _check_stored(store, key_of, data, chunks, order, fill, encode):
    expected = _expected_chunks(data, chunks, order, fill)
    for idx, raw in expected.items():
        key = key_of(idx)
        assert store[key] == encode(raw), key


@pytest.mark.parametrize("dtype", ["u1", "<i2", ">i4", "<f4", "<f8", "<c8", "bool"])
@pytest.mark.parametrize("name", list(V2_CODECS))
def test_v2_writes_numcodecs_bytes(fixed_clock, name, dtype):
    comp = V2_CODECS[name]
    store = cs.MemoryStore()
    data = _data(SHAPE, dtype)
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=dtype, store=store, compressor=comp,
                  fill_value=0)
    fast = z._engine.codec.fast
    assert isinstance(fast, ZPath) and fast.kind == KIND[name.rstrip("0123456789c-")]
    z[...] = data
    encode = (lambda b: b) if comp is None else _no_time(comp.encode)
    _check_stored(store, lambda i: ".".join(map(str, i)), data, CHUNKS, "C", 0, encode)
    np.testing.assert_array_equal(z[...], data)


@pytest.mark.parametrize("name", ["raw", "zstd3c", "gzip6", "zlib5"])
@pytest.mark.parametrize("shape,chunks", [((9, 10, 11), (4, 5, 3)), ((50,), (7,)),
                                          ((4, 3), (4, 3))])
def test_v2_f_order_and_shapes(fixed_clock, name, shape, chunks):
    comp = V2_CODECS[name]
    store = cs.MemoryStore()
    data = _data(shape, "<u2")
    z = cs.create(shape, chunks=chunks, dtype="<u2", store=store, compressor=comp,
                  fill_value=3, order="F")
    z[...] = data
    encode = (lambda b: b) if comp is None else _no_time(comp.encode)
    _check_stored(store, lambda i: ".".join(map(str, i)), data, chunks, "F", 3, encode)
    np.testing.assert_array_equal(z[...], data)
    # a strided read and a coordinate read take the scratch path
    np.testing.assert_array_equal(z[::2], data[::2])
    pts = tuple(np.arange(min(shape)) % s for s in shape)
    np.testing.assert_array_equal(z.vindex[pts], data[pts])


V3_CODECS = {
    "raw": [],
    "zstd0": [numcodecs.Zstd(level=0)],
    "zstd7c": [numcodecs.Zstd(level=7, checksum=True)],
    "gzip1": [numcodecs.GZip(level=1)],
    "gzip5": [numcodecs.GZip(level=5)],
}


@pytest.mark.parametrize("dtype", ["u1", "int16", "float32", "complex128"])
@pytest.mark.parametrize("name", list(V3_CODECS))
def test_v3_writes_numcodecs_bytes(fixed_clock, name, dtype, tmp_path):
    comps = V3_CODECS[name]
    store = cs.DirectoryStore(str(tmp_path / "a.zarr"))
    data = _data(SHAPE, dtype)
    z = cs.create_array(store, shape=SHAPE, chunks=CHUNKS, dtype=dtype, compressors=comps,
                        fill_value=1)
    assert isinstance(z._engine.codec.fast, ZPath)
    z[...] = data
    encode = (lambda b: b) if not comps else _no_time(comps[0].encode)
    _check_stored(store, lambda i: "c/" + "/".join(map(str, i)), data, CHUNKS, "C", 1,
                  encode)
    # zarr-python reads it
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a.zarr"), mode="r")[...],
                                  data)


ZARR_COMPS = {"raw": None, "zstd": lambda: [zarr.codecs.ZstdCodec(level=0)],
              "gzip": lambda: [zarr.codecs.GzipCodec(level=5)]}


@pytest.mark.parametrize("name", list(ZARR_COMPS))
def test_v3_reads_what_zarr_python_writes_and_rmw(name, tmp_path):
    comps = ZARR_COMPS[name] and ZARR_COMPS[name]()
    data = _data((30, 20), "<i4")
    path = str(tmp_path / "a.zarr")
    zarr.create_array(path, shape=data.shape, chunks=(8, 6), dtype=data.dtype,
                      compressors=comps, fill_value=0)[...] = data
    z = cs.open_array(path, mode="r+")
    assert isinstance(z._engine.codec.fast, ZPath)
    np.testing.assert_array_equal(z[...], data)
    np.testing.assert_array_equal(z[3:25:3, 1:19], data[3:25:3, 1:19])
    np.testing.assert_array_equal(z.oindex[[0, 9, 29], [5, 6, 19]],
                                  data[np.ix_([0, 9, 29], [5, 6, 19])])
    # read-modify-write of partly covered chunks
    z[5:13, 4:11] = -1
    data[5:13, 4:11] = -1
    np.testing.assert_array_equal(z[...], data)
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], data)


@pytest.mark.parametrize("name", list(ZARR_COMPS))
def test_sharded_round_trip_with_zarr_python(name, tmp_path):
    inner = ZARR_COMPS[name] and ZARR_COMPS[name]()
    data = _data((32, 24), "<u2")
    path = str(tmp_path / "s.zarr")
    zarr.create_array(path, shape=data.shape, chunks=(4, 6), shards=(16, 12),
                      dtype=data.dtype, compressors=inner, fill_value=0)[...] = data
    z = cs.open_array(path, mode="r+")
    assert isinstance(z._engine.codec.fast, ZPath)
    np.testing.assert_array_equal(z[...], data)
    np.testing.assert_array_equal(z[3:29, 5:7], data[3:29, 5:7])
    z[2:30, 1:23] = data[2:30, 1:23][::-1]
    data[2:30, 1:23] = data[2:30, 1:23][::-1].copy()
    z[0:16, 0:12] = 9   # a whole shard
    data[0:16, 0:12] = 9
    np.testing.assert_array_equal(z[...], data)
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], data)


def test_fill_chunks_are_dropped_and_kept_on_request():
    store = cs.MemoryStore()
    z = cs.create((10, 10), chunks=(5, 5), dtype="f8", store=store,
                  compressor=numcodecs.Zstd(level=1), fill_value=np.nan)
    z[...] = np.nan
    z[0:5, 0:5] = 1.0
    assert sorted(k for k in store if not k.startswith(".")) == ["0.0"]
    z[0:5, 0:5] = np.nan
    assert [k for k in store if not k.startswith(".")] == []
    z2 = cs.create((10, 10), chunks=(5, 5), dtype="f8", store=cs.MemoryStore(),
                   compressor=numcodecs.Zstd(level=1), fill_value=0, write_empty_chunks=True)
    z2[...] = 0
    assert len([k for k in z2.store if not k.startswith(".")]) == 4


# ------------------------------------------------------------------ frames for numcodecs


def _one_chunk(comp, dtype="<i4"):
    store = cs.MemoryStore()
    z = cs.create((6, 4), chunks=(6, 4), dtype=dtype, store=store, compressor=comp,
                  fill_value=0)
    return z, store, np.arange(24, dtype=dtype).reshape(6, 4)


def test_frames_the_kernel_does_not_take_still_read():
    data = np.arange(24, dtype="<i4").reshape(6, 4)
    raw = data.tobytes()
    half = len(raw) // 2
    # gzip with a file name in its header, two members, and zero padding: numcodecs' GZip
    # (Python's GzipFile) reads them all
    z, store, _ = _one_chunk(numcodecs.GZip(level=1))
    buf = io.BytesIO()
    with gzip.GzipFile(filename="chunk", fileobj=buf, mode="wb") as f:
        f.write(raw)
    for stored in (buf.getvalue(), gzip.compress(raw[:half]) + gzip.compress(raw[half:]),
                   gzip.compress(raw) + b"\0" * 8):
        store["0.0"] = stored
        np.testing.assert_array_equal(z[...], data)
        np.testing.assert_array_equal(z.vindex[[1, 5], [2, 3]], data[[1, 5], [2, 3]])
    z[0, 0] = 5   # read-modify-write through the same fallback
    data[0, 0] = 5
    np.testing.assert_array_equal(z[...], data)
    assert store["0.0"][:3] == b"\x1f\x8b\x08"


def test_deflate_level_0_goes_through_numcodecs(fixed_clock):
    for comp in (numcodecs.GZip(level=0), numcodecs.Zlib(level=0)):
        z, store, data = _one_chunk(comp)
        assert z._engine.codec.fast is None
        z[...] = data
        # numcodecs' stream, but with no time in a gzip header (as every gzip chunk)
        assert store["0.0"] == _no_time(comp.encode)(data.tobytes())


def test_blosc_keeps_its_own_path():
    z, _, _ = _one_chunk(numcodecs.Blosc())
    assert isinstance(z._engine.codec.fast, BloscPath)
    z, _, _ = _one_chunk(numcodecs.LZ4())
    assert z._engine.codec.fast is None


# ------------------------------------------------------------------ kernel functions


@pytest.mark.parametrize("kind,level", [(zcodecs.ZSTD, 3), (zcodecs.GZIP, 1),
                                        (zcodecs.ZLIB, 6), (zcodecs.RAW, 0)])
def test_kernel_refuses_truncated_and_resized_frames(kind, level):
    raw = np.arange(5000, dtype="<u2").tobytes()
    spec = (kind, level, False, 0)
    enc = zcodecs.encode_bytes(spec, raw)
    assert zcodecs.decode_bytes(spec, enc, len(raw)) == raw
    assert zcodecs.decode_bytes(spec, enc[:-1], len(raw)) is None        # truncated
    assert zcodecs.decode_bytes(spec, enc + b"\0", len(raw)) is None     # trailing bytes
    assert zcodecs.decode_bytes(spec, enc, len(raw) - 2) is None         # other size
    assert zcodecs.decode_bytes(spec, enc, len(raw) + 2) is None
    assert zcodecs.decode_bytes(spec, b"", len(raw)) is None


def test_libraries_found():
    assert fastpath.zstd_ready() and fastpath.zlib_ready()


def test_zstd_library_is_the_newest_at_hand():
    """The kernels take the newest libzstd among numcodecs' and the zstandard package's; its
    frames decode through numcodecs, and numcodecs' through it."""
    from numcodecs import zstd as nz

    assert fastpath.zstd_ready()
    libs = fastpath._zstd_libraries(nz.__file__)
    versions = [lib.ZSTD_versionNumber() for lib in libs]
    assert versions and versions == sorted(versions, reverse=True)
    assert versions[0] >= nz.VERSION_NUMBER
    raw = np.random.default_rng(0).integers(0, 50, 40000).astype("<u2").tobytes()
    for level, checksum in ((0, False), (3, True), (19, False), (-5, False)):
        spec = (zcodecs.ZSTD, level, checksum, 0)
        comp = numcodecs.Zstd(level=level, checksum=checksum)
        assert bytes(comp.decode(zcodecs.encode_bytes(spec, raw))) == raw
        assert zcodecs.decode_bytes(spec, comp.encode(raw), len(raw)) == raw


def test_zstd_decoder_is_numcodecs_build_encoder_the_newest():
    """The first table tried takes its decoding functions from numcodecs' build and its
    encoding functions from the newest library; every table decodes numcodecs' frames and
    its frames decode through numcodecs."""
    from numcodecs import zstd as nz

    libs = fastpath._zstd_libraries(nz.__file__)
    tables = fastpath._zstd_pairings(libs, nz.__file__)
    ours = fastpath._addresses(next(lib for lib in libs if lib._name == nz.__file__),
                               zcodecs._ZSTD_NAMES)
    newest = fastpath._addresses(libs[0], zcodecs._ZSTD_NAMES)
    first = tables[0]
    for name in zcodecs._ZSTD_NAMES:
        want = ours if name in fastpath._ZSTD_DECODER else newest
        assert first[name] == want[name], name
    raw = np.random.default_rng(1).normal(size=20000).astype("<f4").tobytes()
    spec = (zcodecs.ZSTD, 0, False, 0)
    comp = numcodecs.Zstd(level=0)
    try:
        for table in tables:
            zcodecs.set_zstd(table)
            assert bytes(comp.decode(zcodecs.encode_bytes(spec, raw))) == raw
            assert zcodecs.decode_bytes(spec, comp.encode(raw), len(raw)) == raw
    finally:
        zcodecs.set_zstd(tables[0])


def test_replacing_the_zstd_library_frees_the_pooled_contexts():
    """Idle contexts hold zstd objects of the library that made them: replacing the library
    frees them with that library first (another library's free would crash the process)."""
    from numcodecs import zstd as nz

    assert fastpath.zstd_ready()
    libs = fastpath._zstd_libraries(nz.__file__)
    raw = np.arange(30000, dtype="<u2").tobytes()
    spec = (zcodecs.ZSTD, 1, False, 0)
    try:
        for lib in libs + libs[:1] + libs:
            zcodecs.set_zstd(fastpath._addresses(lib, zcodecs._ZSTD_NAMES))
            enc = zcodecs.encode_bytes(spec, raw)     # contexts made, then pooled
            assert zcodecs.decode_bytes(spec, enc, len(raw)) == raw
        zcodecs.clear_zstd()
        zcodecs.clear_zstd()
    finally:
        zcodecs.set_zstd(fastpath._zstd_pairings(libs, nz.__file__)[0])
    assert zcodecs.decode_bytes(spec, zcodecs.encode_bytes(spec, raw), len(raw)) == raw


# ------------------------------------------------------------------ corrupt chunks


def _flip(b):
    b = bytearray(b)
    b[len(b) // 2] ^= 0x5A
    return bytes(b)


CORRUPTIONS = {"truncated": lambda b: b[: len(b) // 2], "garbage": lambda b: b"\x8f junk" * 5,
               "empty": lambda b: b"", "longer": lambda b: b + b"\x01junk"}


@pytest.mark.parametrize("how", list(CORRUPTIONS))
@pytest.mark.parametrize("comps", [[], [numcodecs.Zstd(level=1, checksum=True)],
                                   [numcodecs.GZip(level=1)]], ids=["raw", "zstd", "gzip"])
def test_v3_corrupt_chunk_names_the_key(comps, how):
    store = cs.MemoryStore()
    z = cs.create_array(store, name="g/a", shape=(10, 12), chunks=(5, 6), dtype="<i4",
                        compressors=comps, fill_value=0)
    data = _data((10, 12), "<i4")
    z[...] = data
    store["g/a/c/1/1"] = CORRUPTIONS[how](store["g/a/c/1/1"])
    for read in (lambda: z[...], lambda: z[7, 8], lambda: z.vindex[[6], [7]]):
        with pytest.raises(cs.ChunkDecodeError, match=re.escape("g/a/c/1/1")):
            read()
    with pytest.raises(cs.ChunkDecodeError, match=re.escape("g/a/c/1/1")):
        z[7, 8] = 0          # read-modify-write of the corrupt chunk
    np.testing.assert_array_equal(z[:5], data[:5])


@pytest.mark.parametrize("comps", [[numcodecs.Zstd(level=1, checksum=True)],
                                   [numcodecs.GZip(level=1)]], ids=["zstd", "gzip"])
def test_checksummed_bit_flip_detected(comps):
    store = cs.MemoryStore()
    z = cs.create_array(store, shape=(10, 12), chunks=(5, 6), dtype="<i4", compressors=comps,
                        fill_value=0)
    z[...] = _data((10, 12), "<i4")
    store["c/0/1"] = _flip(store["c/0/1"])
    with pytest.raises(cs.ChunkDecodeError, match=re.escape("c/0/1")):
        z[...]


@pytest.mark.parametrize("inner", [[], [numcodecs.Zstd(level=0)]], ids=["raw", "zstd"])
def test_sharded_corrupt_inner_chunk_names_the_shard(inner, tmp_path):
    path = tmp_path / "s.zarr"
    z = cs.create_array(str(path), shape=(16, 16), chunks=(4, 4), shards=(8, 8),
                        dtype="<u2", compressors=inner, fill_value=0)
    data = _data((16, 16), "<u2")
    z[...] = data
    shard = path / "c" / "1" / "0"
    raw = bytearray(shard.read_bytes())
    # the index is at the end: corrupt the first inner chunk's bytes
    raw[0:8] = b"\xff" * 8 if inner else raw[0:8]
    if not inner:   # raw inner chunks: make one the wrong size through the index
        idx = np.frombuffer(bytes(raw[-(16 * 16 + 4):-4]), "<u8").copy().reshape(-1, 2)
        idx[0, 1] -= 2
        raw[-(16 * 16 + 4):-4] = idx.tobytes()
        import google_crc32c
        raw[-4:] = google_crc32c.value(bytes(raw[-(16 * 16 + 4):-4])).to_bytes(4, "little")
    shard.write_bytes(bytes(raw))
    z = cs.open_array(str(path), mode="r")
    with pytest.raises(cs.ChunkDecodeError, match=re.escape("c/1/0")):
        z[...]
    np.testing.assert_array_equal(z[:8], data[:8])


# ------------------------------------------------------------------ raw chunks read in place


class _CountingDir(cs.DirectoryStore):
    """Counts the keys read through read_into and through getitems."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.into, self.items = [], []

    def read_into(self, keys, buffers):
        st = super().read_into(keys, buffers)
        self.into += [k for k, s in zip(keys, st) if s == 0]
        return st

    def getitems(self, keys):
        self.items += list(keys)
        return super().getitems(keys)


@pytest.mark.parametrize("order", ["C", "F"])
def test_raw_chunks_read_straight_into_the_output(tmp_path, order):
    store = _CountingDir(str(tmp_path / "r.zarr"))
    data = _data((20, 18), "<f8")
    z = cs.create((20, 18), chunks=(5, 6), dtype="<f8", store=store, compressor=None,
                  order=order, fill_value=np.nan)
    z[...] = data
    store.into, store.items = [], []
    np.testing.assert_array_equal(z[...], data)
    # every chunk is taken whole: each is read in place (preadv into the strided region)
    assert sorted(store.into) == [f"{i}.{j}" for i in range(4) for j in range(3)]
    assert store.items == []
    np.testing.assert_array_equal(z[2:17, 3:11], data[2:17, 3:11])
    out = np.empty((20, 18), order=order)
    z.get_basic_selection(Ellipsis, out=out)
    np.testing.assert_array_equal(out, data)
    # a missing chunk reads as fill, a chunk of the wrong size raises naming its key
    del store["1.1"]
    os = __import__("os")
    with open(os.path.join(store.path, "2.2"), "wb") as f:
        f.write(b"\0" * 7)
    expected = data.copy()
    expected[5:10, 6:12] = np.nan
    with pytest.raises(cs.ChunkDecodeError, match=re.escape("2.2")):
        z[...]
    np.testing.assert_array_equal(z[0:10], expected[0:10])
    # a file one byte longer is not taken in place either
    with open(os.path.join(store.path, "2.2"), "wb") as f:
        f.write(np.zeros(30, "<f8").tobytes() + b"\0")
    with pytest.raises(cs.ChunkDecodeError, match=re.escape("2.2")):
        z[10:15, 12:18]


@pytest.mark.parametrize("order", ["C", "F"])
def test_raw_in_place_reads_of_many_runs_and_edges(tmp_path, order):
    # 8 x 80 runs a chunk: more than one preadv call of iovecs; the edge chunks reach past
    # the array's end and take the ordinary path
    store = _CountingDir(str(tmp_path / "r.zarr"))
    data = _data((19, 160, 13), "<u2")
    z = cs.create(data.shape, chunks=(8, 80, 5), dtype="<u2", store=store, compressor=None,
                  order=order, fill_value=0)
    z[...] = data
    store.into, store.items = [], []
    np.testing.assert_array_equal(z[...], data)
    assert len(store.into) == 2 * 2 * 2 and len(store.items) == 3 * 2 * 3 - 8
    np.testing.assert_array_equal(z[8:16, :, 5:10], data[8:16, :, 5:10])


def test_pooled_contexts_follow_each_codec(fixed_clock):
    """Library contexts are reused between calls: switching codec, level and checksum
    between calls still writes numcodecs' bytes, and decodes of each kind still work."""
    import zlib

    assert fastpath.zstd_ready() and fastpath.zlib_ready()
    raw = np.arange(30000, dtype="<u2").tobytes()
    comps = [numcodecs.Zstd(level=1), numcodecs.Zstd(level=19, checksum=True),
             numcodecs.GZip(level=9), numcodecs.Zlib(level=1), numcodecs.GZip(level=1),
             numcodecs.Zlib(level=9), numcodecs.Zstd(level=-2)]
    specs = {numcodecs.Zstd: zcodecs.ZSTD, numcodecs.GZip: zcodecs.GZIP,
             numcodecs.Zlib: zcodecs.ZLIB}
    for _ in range(3):
        for comp in comps:
            spec = (specs[type(comp)], comp.level, getattr(comp, "checksum", False),
                    int(time.time()))
            enc = zcodecs.encode_bytes(spec, raw)
            if isinstance(comp, numcodecs.Zstd):
                # (the kernels' libzstd may be newer than numcodecs': other valid frames)
                assert bytes(comp.decode(enc)) == raw, comp
            else:
                assert enc == comp.encode(raw), comp
            assert zcodecs.decode_bytes(spec, enc, len(raw)) == raw
    assert zlib.decompress(zcodecs.encode_bytes((zcodecs.ZLIB, 6, False, 0), raw)) == raw


@pytest.mark.parametrize("fmt", [2, 3])
def test_gzip_chunks_are_the_same_bytes_whenever_written(monkeypatch, fmt):
    """No time stamp in gzip chunks (kernel and Python path): two writes of equal data a
    second apart store equal bytes (copies compare byte for byte, digests are stable)."""
    data = _data((30, 20), "<i4")
    stored = []
    for clock in (1_700_000_000.0, 1_700_000_001.0):
        monkeypatch.setattr(time, "time", lambda c=clock: c)
        store = cs.MemoryStore()
        if fmt == 2:
            z = cs.create(data.shape, chunks=(8, 6), dtype=data.dtype, store=store,
                          compressor=numcodecs.GZip(level=5))
        else:
            z = cs.create_array(store, shape=data.shape, chunks=(8, 6), dtype=data.dtype,
                                compressors=[cs.codecs.GzipCodec(level=5)])
        z[...] = data
        z[0:3, 0:2] = -1  # and a read-modify-write
        stored.append({k: v for k, v in store.items() if not k.endswith((".json", "y"))})
    assert stored[0] == stored[1] and len(stored[0]) > 10
    assert all(v[4:8] == b"\0\0\0\0" for v in stored[0].values())
