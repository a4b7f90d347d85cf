"""Error behaviour: every failure raises a specific exception that names what is at fault,
corrupt data is never returned, and a failed write leaves the store as it was."""

from __future__ import annotations

import re

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from conftest import snapshot_dir

SHAPE = (10, 12)
CHUNKS = (3, 5)   # grid 4 x 3, ragged edges


def _data():
    return np.arange(np.prod(SHAPE), dtype="i4").reshape(SHAPE) + 1


def _make(tmp_path, name="a.zarr", layout=None, **kwargs):
    """SHAPE of _data() at tmp_path/name, in the given layout (else cs.create's: v2)."""
    kwargs.setdefault("chunks", CHUNKS)
    kwargs.setdefault("dtype", "i4")
    if layout is not None:
        kwargs = layout.format_kwargs(kwargs["chunks"], **kwargs)
    p = tmp_path / name
    z = cs.create(SHAPE, store=str(p), **kwargs)
    if np.dtype(kwargs["dtype"]).hasobject:
        z[...] = _data().astype(str).astype(object)
    else:
        z[...] = _data()
    return z, p


# ------------------------------------------------------------------------ missing arrays

@pytest.mark.parametrize("mode", ["r", "r+"])
def test_missing_array_in_existing_store(tmp_path, mode):
    _make(tmp_path)
    with pytest.raises(cs.ArrayNotFoundError, match="nested/arr") as info:
        cs.open_array(str(tmp_path / "a.zarr"), mode=mode, path="nested/arr")
    assert isinstance(info.value, FileNotFoundError)


@pytest.mark.parametrize("mode", ["r", "r+"])
def test_missing_array_empty_directory(tmp_path, mode):
    (tmp_path / "empty.zarr").mkdir()
    with pytest.raises(cs.ArrayNotFoundError) as info:
        cs.open_array(str(tmp_path / "empty.zarr"), mode=mode)
    assert isinstance(info.value, FileNotFoundError)
    assert "empty.zarr" in str(info.value)


def test_missing_array_nonexistent_directory(tmp_path):
    target = tmp_path / "does_not_exist.zarr"
    with pytest.raises(cs.ArrayNotFoundError) as info:
        cs.open_array(str(target), mode="r")
    assert isinstance(info.value, FileNotFoundError)
    assert "does_not_exist.zarr" in str(info.value)
    assert not target.exists()  # a read-only open never creates anything


@pytest.mark.parametrize("store_kind", ["dict", "memory"])
def test_missing_array_in_mapping_store(store_kind):
    store = {} if store_kind == "dict" else cs.MemoryStore()
    cs.create((4,), chunks=(2,), store=store, path="present")
    with pytest.raises(cs.ArrayNotFoundError, match="absent"):
        cs.open_array(store, mode="r", path="absent")


def test_group_path_is_not_an_array(tmp_path):
    cs.create((4,), chunks=(2,), store=str(tmp_path / "g.zarr"), path="grp/arr")
    with pytest.raises(cs.ArrayNotFoundError, match="grp"):
        cs.open_array(str(tmp_path / "g.zarr"), mode="r", path="grp")


# ------------------------------------------------------------------------ read-only

def _write_attempts(z):
    return {
        "setitem": lambda: z.__setitem__((slice(0, 2), 0), 5),
        "setitem_all": lambda: z.__setitem__(Ellipsis, 0),
        "set_basic": lambda: z.set_basic_selection(0, 5),
        "set_orthogonal": lambda: z.set_orthogonal_selection(([0, 1], [2]), 5),
        "set_coordinate": lambda: z.set_coordinate_selection(([0, 1], [2, 3]), 5),
        "set_mask": lambda: z.set_mask_selection(np.ones(SHAPE, bool), 5),
        "set_block": lambda: z.set_block_selection((0, 0), 5),
        "oindex": lambda: z.oindex.__setitem__(([0], [0]), 5),
        "vindex": lambda: z.vindex.__setitem__(([0], [0]), 5),
        "blocks": lambda: z.blocks.__setitem__((1, 1), 5),
        "resize": lambda: z.resize(20, 20),
        "shrink": lambda: z.resize(2, 2),
        "append": lambda: z.append(np.ones((1, 12), "i4")),
        "attrs": lambda: z.attrs.__setitem__("k", 1),
        "attrs_update": lambda: z.attrs.update(k=1),
    }


@pytest.mark.parametrize("how", list(_write_attempts(None)))
def test_write_to_read_only_array(tmp_path, how):
    _, p = _make(tmp_path)
    before = snapshot_dir(p)
    z = cs.open_array(str(p), mode="r")
    assert z.read_only
    with pytest.raises(cs.ReadOnlyError) as info:
        _write_attempts(z)[how]()
    assert isinstance(info.value, PermissionError)
    assert snapshot_dir(p) == before
    np.testing.assert_array_equal(z[...], _data())


def test_read_only_flag_on_created_array(tmp_path):
    d = {}
    z = cs.create(SHAPE, chunks=CHUNKS, dtype="i4", store=d, read_only=True)
    before = dict(d)
    with pytest.raises(PermissionError):
        z[0, 0] = 1
    assert d == before
    z.read_only = False
    z[0, 0] = 1
    assert z[0, 0] == 1
    z.read_only = True
    with pytest.raises(cs.ReadOnlyError):
        z[0, 0] = 2
    assert z[0, 0] == 1


def test_read_only_store(tmp_path):
    _, p = _make(tmp_path)
    z = cs.Array(cs.DirectoryStore(str(p), mode="r"))
    before = snapshot_dir(p)
    with pytest.raises(PermissionError):
        z[0, 0] = 99
    assert snapshot_dir(p) == before


# ------------------------------------------------------------------------ corrupt chunks

CORRUPT_COMPRESSORS = {
    "blosc": "default",
    "zstd": numcodecs.Zstd(level=1),
    "gzip": numcodecs.GZip(level=1),
    "zlib": numcodecs.Zlib(level=1),
    "lz4": numcodecs.LZ4(),
    "bz2": numcodecs.BZ2(level=1),
    "none": None,
}


def _corrupt(path, how):
    raw = path.read_bytes()
    if how == "garbage":
        path.write_bytes(b"\x8f not a chunk \x00\xff" * 3)
    elif how == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:  # pragma: no cover
        raise AssertionError(how)


def _check_corrupt(z, key, store_desc):
    """Every read touching chunk (1, 1) fails naming it; reads avoiding it succeed."""
    data = _data()
    touching = [
        lambda: z[...],
        lambda: z[4, 6],
        lambda: z[3:6, 5:10],
        lambda: z.oindex[[0, 4], [7]],
        lambda: z.vindex[[4], [5]],
        lambda: z.get_mask_selection(data == data[5, 9]),
        lambda: z.blocks[1, 1],
        lambda: np.asarray(z),
    ]
    for read in touching:
        with pytest.raises(cs.ChunkDecodeError) as info:
            read()
        msg = str(info.value)
        assert repr(key) in msg or key in msg, msg
        assert store_desc in msg, msg
        assert isinstance(info.value, ValueError)
    # everything outside chunk (1, 1) still reads correctly
    np.testing.assert_array_equal(z[:3], data[:3])
    np.testing.assert_array_equal(z[6:], data[6:])
    np.testing.assert_array_equal(z[:, :5], data[:, :5])
    np.testing.assert_array_equal(z[:, 10:], data[:, 10:])
    np.testing.assert_array_equal(z.oindex[[0, 9], [0, 11]], data[np.ix_([0, 9], [0, 11])])
    np.testing.assert_array_equal(z.vindex[[2, 6], [7, 4]], data[[2, 6], [7, 4]])


@pytest.mark.parametrize("how", ["garbage", "truncated", "empty"])
@pytest.mark.parametrize("comp", list(CORRUPT_COMPRESSORS))
def test_corrupt_chunk_file(tmp_path, comp, how):
    z, p = _make(tmp_path, compressor=CORRUPT_COMPRESSORS[comp])
    _corrupt(p / "1.1", how)
    z = cs.open_array(str(p), mode="r")
    _check_corrupt(z, "1.1", str(p))


@pytest.mark.parametrize("how", ["garbage", "truncated"])
def test_corrupt_chunk_nested_layout(tmp_path, how):
    z, p = _make(tmp_path, dimension_separator="/")
    _corrupt(p / "1" / "1", how)
    _check_corrupt(cs.open_array(str(p), mode="r"), "1/1", str(p))


@pytest.mark.parametrize("how", ["garbage", "truncated"])
def test_corrupt_chunk_with_filters(tmp_path, how):
    z, p = _make(tmp_path, dtype="i4", compressor=numcodecs.Zstd(level=1),
                 filters=[numcodecs.Delta(dtype="<i4")])
    _corrupt(p / "1.1", how)
    _check_corrupt(cs.open_array(str(p), mode="r"), "1.1", str(p))


def test_corrupt_chunk_object_array(tmp_path):
    z, p = _make(tmp_path, dtype=object, object_codec=numcodecs.VLenUTF8())
    _corrupt(p / "1.1", "truncated")
    z = cs.open_array(str(p), mode="r")
    with pytest.raises(cs.ChunkDecodeError, match=re.escape("1.1")):
        z[...]
    np.testing.assert_array_equal(z[:3], _data()[:3].astype(str).astype(object))


def test_corrupt_chunk_memory_store():
    store = cs.MemoryStore()
    z = cs.create(SHAPE, chunks=CHUNKS, dtype="i4", store=store, path="x/arr")
    z[...] = _data()
    store["x/arr/1.1"] = b"garbage bytes"
    _check_corrupt(z, "x/arr/1.1", "MemoryStore")


CHECKED_CODECS = {
    "gzip_crc": numcodecs.GZip(level=1),
    "zstd_checksum": numcodecs.Zstd(level=1, checksum=True),
    "bz2_crc": numcodecs.BZ2(level=1),
    "lzma_check": numcodecs.LZMA(),
}


@pytest.mark.parametrize("comp", list(CHECKED_CODECS))
def test_bit_flip_detected_by_checksummed_codecs(tmp_path, comp):
    z, p = _make(tmp_path, compressor=CHECKED_CODECS[comp])
    chunk = p / "1.1"
    raw = bytearray(chunk.read_bytes())
    pos = len(raw) - 9 if comp == "bz2_crc" else len(raw) // 2
    raw[pos] ^= 0x10
    chunk.write_bytes(bytes(raw))
    _check_corrupt(cs.open_array(str(p), mode="r"), "1.1", str(p))


def test_partial_write_into_corrupt_chunk_fails(tmp_path):
    z, p = _make(tmp_path)
    _corrupt(p / "1.1", "garbage")
    before = snapshot_dir(p)
    with pytest.raises(cs.ChunkDecodeError, match=re.escape("1.1")):
        z[4, 6] = 0   # read-modify-write of the corrupt chunk
    assert snapshot_dir(p) == before
    # a write covering the whole chunk replaces it
    z[3:6, 5:10] = 7
    np.testing.assert_array_equal(z[3:6, 5:10], np.full((3, 5), 7))


# ------------------------------------------------------------------------ metadata

BAD_ZARRAY = {
    "not_json": b"{this is not json",
    "binary": b"\xff\xfe\x00\x01",
    "empty": b"",
    "json_list": b"[1, 2, 3]",
    "missing_keys": b'{"zarr_format": 2}',
    "wrong_format": b'{"zarr_format": 3, "shape": [4], "chunks": [2], "dtype": "<i4", '
                    b'"compressor": null, "fill_value": 0, "filters": null, "order": "C"}',
    "bad_dtype": b'{"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<x9", '
                 b'"compressor": null, "fill_value": 0, "filters": null, "order": "C"}',
    "bad_order": b'{"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i4", '
                 b'"compressor": null, "fill_value": 0, "filters": null, "order": "Q"}',
    "negative_shape": b'{"zarr_format": 2, "shape": [-4], "chunks": [2], "dtype": "<i4", '
                      b'"compressor": null, "fill_value": 0, "filters": null, "order": "C"}',
    "chunks_rank": b'{"zarr_format": 2, "shape": [4, 4], "chunks": [2], "dtype": "<i4", '
                   b'"compressor": null, "fill_value": 0, "filters": null, "order": "C"}',
    "unknown_codec": b'{"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i4", '
                     b'"compressor": {"id": "no-such-codec"}, "fill_value": 0, '
                     b'"filters": null, "order": "C"}',
}


@pytest.mark.parametrize("mode", ["r", "r+", "a"])
@pytest.mark.parametrize("bad", list(BAD_ZARRAY))
def test_unparseable_zarray(tmp_path, bad, mode):
    p = tmp_path / "m.zarr"
    cs.create((4,), chunks=(2,), store=str(p), path="sub/arr")
    (p / "sub" / "arr" / ".zarray").write_bytes(BAD_ZARRAY[bad])
    before = snapshot_dir(p)
    with pytest.raises(cs.MetadataError) as info:
        cs.open_array(str(p), mode=mode, path="sub/arr")
    assert "sub/arr/.zarray" in str(info.value)
    assert snapshot_dir(p) == before  # mode "a" must not "repair" it by overwriting


def test_unparseable_zarray_in_memory_store():
    store = {".zarray": b"nope"}
    with pytest.raises(cs.MetadataError, match=re.escape(".zarray")):
        cs.open_array(store, mode="r")


# ------------------------------------------------------------------------ failed writes

def _bad_writes():
    strings = np.array([["1"] * 12] * 10, dtype=object)
    strings[9, 11] = "abc"          # converts fine until the last element
    return {
        "str_scalar_into_int": (np.s_[...], "abc"),
        "str_array_into_int": (np.s_[...], strings),
        "str_list_across_chunks": (np.s_[0, :], ["1", "2", "3", "4", "5", "6", "7", "8", "9",
                                                 "10", "11", "abc"]),
        "nan_into_int": (np.s_[:, 3], [1.0] * 9 + [np.nan]),
        "no_broadcast": (np.s_[0:4, 0:7], np.ones((7, 4))),
        "too_many_values": (np.s_[0, :], np.ones(13)),
        "too_few_values": (np.s_[:, :], np.ones((10, 11))),
        "ragged": (np.s_[0:2, 0:2], [[1, 2], [3]]),
        "object_into_int": (np.s_[...], object()),
    }


@pytest.mark.parametrize("case", list(_bad_writes()))
def test_failed_write_leaves_store_unchanged(tmp_path, case, layout):
    z, p = _make(tmp_path, layout=layout)
    before = snapshot_dir(p)
    sel, value = _bad_writes()[case]
    with pytest.raises((ValueError, TypeError)):
        z[sel] = value
    assert snapshot_dir(p) == before
    np.testing.assert_array_equal(z[...], _data())


def test_failed_fancy_writes_leave_store_unchanged(tmp_path, layout):
    z, p = _make(tmp_path, layout=layout)
    before = snapshot_dir(p)
    with pytest.raises(IndexError):
        z.vindex[[0, 5, 10], [0, 6, 1]] = 0          # last point out of bounds
    with pytest.raises(IndexError):
        z.oindex[[0, 4, 9], [1, 12]] = 0
    with pytest.raises(ValueError):
        z.vindex[[0, 5, 9], [0, 6, 1]] = [1, 2]      # 2 values for 3 points
    with pytest.raises((ValueError, TypeError)):
        z.oindex[[0, 4, 9], [1, 11]] = [["x", "y"]] * 3
    with pytest.raises((ValueError, TypeError)):
        z.set_mask_selection(np.ones(SHAPE, bool), "abc")
    with pytest.raises((ValueError, TypeError)):
        z.blocks[0:2, :] = "abc"
    assert snapshot_dir(p) == before


def test_failed_object_write_leaves_store_unchanged(tmp_path):
    z, p = _make(tmp_path, dtype=object, object_codec=numcodecs.VLenUTF8())
    before = snapshot_dir(p)
    value = np.full(SHAPE, "s", dtype=object)
    value[9, 11] = 12345             # VLenUTF8 cannot encode an int
    with pytest.raises((ValueError, TypeError)):
        z[...] = value
    assert snapshot_dir(p) == before


def test_failed_structured_write_leaves_store_unchanged(tmp_path):
    dt = np.dtype([("x", "<i4"), ("y", "<f8")])
    p = tmp_path / "s.zarr"
    z = cs.create(SHAPE, chunks=CHUNKS, dtype=dt, store=str(p))
    z["x"] = _data()
    before = snapshot_dir(p)
    with pytest.raises((ValueError, TypeError)):
        z["x"] = "abc"
    with pytest.raises(ValueError):
        z.set_basic_selection(slice(0, 4), np.ones(5), fields="y")
    with pytest.raises((IndexError, KeyError, ValueError)):
        z["nope"] = 1
    assert snapshot_dir(p) == before


# ------------------------------------------------------------------------ bounds and shapes

def _oob_reads(z):
    return [
        # (callable, dimension, length)
        (lambda: z[10, 0], 0, 10),
        (lambda: z[-11, 0], 0, 10),
        (lambda: z[0, 12], 1, 12),
        (lambda: z[0, -13], 1, 12),
        (lambda: z.get_basic_selection((3, 100)), 1, 12),
        (lambda: z.oindex[[0, 10], :], 0, 10),
        (lambda: z.oindex[:, [3, -13]], 1, 12),
        (lambda: z.get_orthogonal_selection((1, [12])), 1, 12),
        (lambda: z.vindex[[0, 1], [2, 12]], 1, 12),
        (lambda: z.vindex[[10, 1], [2, 3]], 0, 10),
        (lambda: z.get_coordinate_selection(([0, -11], [0, 0])), 0, 10),
        (lambda: z[np.array([0, 10])], 0, 10),
        (lambda: z[1, np.array([0, 12])], 1, 12),
    ]


def _check_index_error(exc, dim, length):
    msg = str(exc)
    assert isinstance(exc, IndexError)
    assert re.search(rf"dim\w*\W+{dim}\b", msg), msg
    assert re.search(rf"\b{length}\b", msg), msg


def test_out_of_bounds_reads(tmp_path, layout):
    z, _ = _make(tmp_path, layout=layout)
    for read, dim, length in _oob_reads(z):
        with pytest.raises(IndexError) as info:
            read()
        _check_index_error(info.value, dim, length)


def test_out_of_bounds_writes(tmp_path, layout):
    z, p = _make(tmp_path, layout=layout)
    before = snapshot_dir(p)
    writes = [
        (lambda: z.__setitem__((10, 0), 1), 0, 10),
        (lambda: z.__setitem__((0, -13), 1), 1, 12),
        (lambda: z.oindex.__setitem__(([0, 10], slice(None)), 1), 0, 10),
        (lambda: z.vindex.__setitem__(([0, 1], [2, 12]), 1), 1, 12),
    ]
    for write, dim, length in writes:
        with pytest.raises(IndexError) as info:
            write()
        _check_index_error(info.value, dim, length)
    assert snapshot_dir(p) == before


def test_out_of_bounds_blocks(tmp_path, layout):
    z, _ = _make(tmp_path, layout=layout)   # 4 x 3 blocks
    with pytest.raises(IndexError) as info:
        z.blocks[4, 0]
    assert re.search(r"dim\w*\W+0\b", str(info.value)) and "4" in str(info.value)
    with pytest.raises(IndexError) as info:
        z.blocks[0, -4]
    assert re.search(r"dim\w*\W+1\b", str(info.value)) and "3" in str(info.value)


def test_bad_masks_and_too_many_indices(tmp_path, layout):
    z, _ = _make(tmp_path, layout=layout)
    with pytest.raises(IndexError):
        z.vindex[np.ones((10, 11), bool)]
    with pytest.raises(IndexError):
        z.get_mask_selection(np.ones((10,), bool))
    with pytest.raises(IndexError):
        z.oindex[np.ones(11, bool), :]
    with pytest.raises(IndexError):
        z[0, 0, 0]
    with pytest.raises(IndexError):
        z.oindex[[0.5], :]


def test_out_of_range_slices_clamp_like_numpy(tmp_path, layout):
    z, _ = _make(tmp_path, layout=layout)
    data = _data()
    for sel in [np.s_[20:30], np.s_[-30:3], np.s_[5:100, -100:2], np.s_[8:2], np.s_[::-1, 50:]]:
        np.testing.assert_array_equal(z[sel], data[sel])


@pytest.mark.parametrize("sel, value_shape, sel_shape", [
    (np.s_[0:2, 0:3], (3, 2), (2, 3)),
    (np.s_[0, :], (11,), (12,)),
    (np.s_[:, :], (10, 1, 12), (10, 12)),
    (np.s_[1:9, 2:11], (8, 8), (8, 9)),
])
def test_non_broadcastable_value(tmp_path, sel, value_shape, sel_shape, layout):
    z, p = _make(tmp_path, layout=layout)
    before = snapshot_dir(p)
    with pytest.raises(ValueError) as info:
        z[sel] = np.ones(value_shape, "i4")
    msg = str(info.value).replace(",)", ")")
    for shape in (value_shape, sel_shape):
        assert str(shape).replace(",)", ")") in msg, msg
    assert snapshot_dir(p) == before


def test_non_broadcastable_value_fancy(tmp_path, layout):
    z, _ = _make(tmp_path, layout=layout)
    with pytest.raises(ValueError) as info:
        z.oindex[[0, 1, 2], [3, 4]] = np.ones((2, 3))
    assert "(2, 3)" in str(info.value) and "(3, 2)" in str(info.value)
    with pytest.raises(ValueError) as info:
        z.vindex[[0, 1, 2], [3, 4, 5]] = np.ones(4)
    assert "(4" in str(info.value) and "(3" in str(info.value)


# ------------------------------------------------------------------------ missing chunks

@pytest.mark.parametrize("sep", [".", "/"])
def test_missing_chunks_error(tmp_path, sep, layout):
    p = tmp_path / "m.zarr"
    z = layout(SHAPE, CHUNKS, dtype="i4", store=str(p), dimension_separator=sep)
    z[:3, :] = _data()[:3]          # chunk row 0 only
    z[9, 11] = 5                    # and chunk (3, 2)
    strict = cs.open_array(str(p), mode="r", missing_chunks="error")
    np.testing.assert_array_equal(strict[:3], _data()[:3])
    assert strict[9, 11] == 5
    # the missing chunk's key (sharded: its shard's key and its place in the shard, which is
    # there, holding chunk (0, 2))
    key = layout.stored_key((1, 2), sep) + ("|1.0" if layout.sharded else "")
    for read in [lambda: strict[4, 11], lambda: strict[3:6, 10:],
                 lambda: strict.oindex[[0, 4], [11]], lambda: strict.vindex[[4], [10]],
                 lambda: strict.blocks[1, 2]]:
        with pytest.raises(cs.ChunkNotFoundError) as info:
            read()
        assert key in str(info.value)
    with pytest.raises(cs.ChunkNotFoundError):
        strict[...]
    # the default still reads absent chunks as the fill value
    lax = cs.open_array(str(p), mode="r")
    assert (lax[3:9] == 0).all()


def test_missing_chunks_error_with_path_in_store():
    store = cs.MemoryStore()
    z = cs.create((6,), chunks=(2,), dtype="f8", store=store, path="deep/arr",
                  missing_chunks="error")
    z[0:2] = 1.0
    np.testing.assert_array_equal(z[0:2], [1.0, 1.0])
    with pytest.raises(cs.ChunkNotFoundError, match=re.escape("deep/arr/2")):
        z[5]


def test_missing_chunks_invalid_option(tmp_path):
    _make(tmp_path)
    with pytest.raises(ValueError):
        cs.open_array(str(tmp_path / "a.zarr"), mode="r", missing_chunks="ignore")


@pytest.mark.parametrize("name, builtin", [
    ("ContainsArrayError", FileExistsError), ("ContainsGroupError", FileExistsError),
    ("ArrayNotFoundError", FileNotFoundError), ("GroupNotFoundError", FileNotFoundError),
    ("PathNotFoundError", FileNotFoundError)])
def test_zarr2_error_types_are_also_value_errors(name, builtin):
    # zarr-python 2 raised these as ValueError; `except ValueError` code must keep working.
    cls = getattr(cs, name)
    assert issubclass(cls, ValueError) and issubclass(cls, builtin)


def test_zarr2_style_except_value_error_catches_real_failures(tmp_path):
    store = str(tmp_path / "a.zarr")
    cs.zeros(3, store=store)
    with pytest.raises(ValueError):
        cs.zeros(3, store=store)  # ContainsArrayError
    with pytest.raises(ValueError):
        cs.open_group(store, mode="r")  # GroupNotFoundError
    with pytest.raises(ValueError):
        cs.open_array(str(tmp_path / "none.zarr"), mode="r")  # ArrayNotFoundError
    with pytest.raises(ValueError):
        cs.open(str(tmp_path / "none.zarr"), mode="r")  # PathNotFoundError
    with pytest.raises(FileExistsError):
        cs.open_group(store, mode="w-")  # ContainsGroupError, still a FileExistsError


class _FailingFilter:
    """A numcodecs filter whose encode refuses chunks holding 13.0 (decode: raw f8)."""

    codec_id = "chunkstore_test_failing_filter"

    def encode(self, buf):
        a = np.asarray(buf).view("f8")
        if (a == 13.0).any():
            raise ValueError("refused by the filter")
        return a.tobytes()

    def decode(self, buf, out=None):
        return np.frombuffer(buf, "f8").copy()

    def get_config(self):
        return {"id": self.codec_id}


@pytest.mark.parametrize("how", ["whole", "partial", "scalar", "vindex"])
def test_a_codec_encode_error_names_the_array_and_chunk(how):
    """A codec whose encode raises: the error keeps its type and says which array and
    chunk key (it came as the codec's bare message, as a decode's does not); what was
    stored before reads as it was, or as written."""
    import numcodecs
    from numcodecs.abc import Codec
    cls = type("FailingFilter", (_FailingFilter, Codec), {})
    numcodecs.register_codec(cls)
    store: dict = {}
    z = cs.create((16,), chunks=(4,), dtype="f8", store=store, path="grp/arr",
                  filters=[cls()], compressor=None)
    z[:] = 1.0
    v = np.arange(16.0)
    v[9] = 13.0
    write = {"whole": lambda: z.__setitem__(slice(None), v),
             "partial": lambda: z.__setitem__(slice(9, 10), 13.0),
             "scalar": lambda: z.__setitem__(slice(None), 13.0),
             "vindex": lambda: z.vindex.__setitem__([np.array([1, 9])], [2.0, 13.0])}[how]
    with pytest.raises(ValueError) as info:
        write()
    msg = str(info.value)
    assert "refused by the filter" in msg and "'/grp/arr'" in msg
    assert re.search(r"chunk 'grp/arr/[0-3]'", msg), msg
    got = z[:]
    for c in range(4):  # each chunk old or new
        block = got[4 * c:4 * c + 4]
        assert (block == 1.0).all() or (block == v[4 * c:4 * c + 4]).all() or how != "whole"
    assert (got[8:12] == 1.0).all()  # the refused chunk kept its old values
