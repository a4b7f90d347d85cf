"""The one recode planner (chunkstore.hierarchy.recode): copy, copy_all and `chunkstore cp` make the same
copies (compared key by key, bytes equal), and create_kwargs_like plans them."""

import os

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.cli import main
from chunkstore.hierarchy.recode import RecodeError, copy_plan, create_kwargs_like
from chunkstore.storage.normalize import normalize_store


def stored(path):
    s = normalize_store(str(path), mode="r")
    return {k: bytes(s[k]) for k in s.keys()}


def cp(src, dst, *opts):
    assert main(["cp", str(src), str(dst), "--no-progress", *map(str, opts)]) == 0


def assert_same_stores(a, b):
    ka, kb = stored(a), stored(b)
    assert sorted(ka) == sorted(kb)
    for k in ka:
        assert ka[k] == kb[k], k
    return ka


DATA = np.arange(40 * 30, dtype="f8").reshape(40, 30)


def v2_source(store):
    g = cs.group(str(store) if isinstance(store, os.PathLike) else store)
    a = g.create_dataset("a", data=DATA, chunks=(10, 10), compressor=numcodecs.Zstd(level=3),
                         fill_value=-1.5)
    a.attrs.put({"_ARRAY_DIMENSIONS": ["y", "x"], "units": "m"})
    return a


def v3_source(store):
    # (a path, or a store object itself: str() of a MemoryStore would make a directory)
    a = cs.create_array(str(store) if isinstance(store, os.PathLike) else store, name="a", shape=DATA.shape, chunks=(5, 10), shards=(10, 30),
                        dtype="f8", fill_value=-1.5, dimension_names=["y", "x"],
                        compressors=[numcodecs.Zstd(level=3), numcodecs.CRC32C()])
    a[...] = DATA
    a.attrs.put({"units": "m"})
    return a


def library_copy(src_array, dst_path, zarr_format, **kw):
    g = cs.group(str(dst_path), zarr_format=zarr_format)
    cs.copy(src_array, g, name="x", **kw)


CASES = [
    # (source, destination format, library keywords, CLI options)
    ("v2", 3, dict(checksum=True, shards=(20, 30)),
     ["--zarr-format", "3", "--checksum", "--shards", "20,30"]),
    ("v2", 3, {}, ["--zarr-format", "3"]),
    ("v3", 2, {}, ["--zarr-format", "2"]),
    ("v3", 3, dict(chunks=(10, 10)), ["--chunks", "10,10"]),
    ("v3", 3, dict(compressor=numcodecs.GZip(level=4)), ["--compressor", "gzip:4"]),
    ("v3", 3, dict(shards="none", dtype=np.dtype("f4")), ["--shards", "none", "--dtype", "f4"]),
    ("v2", 2, dict(chunks=(20, 15), compressor=numcodecs.Zstd(level=1)),
     ["--chunks", "20,15", "--compressor", "zstd:1"]),
    ("v2", 2, dict(dtype=np.dtype("i4")), ["--dtype", "i4", "--casting", "unsafe"]),
]


@pytest.mark.parametrize("source,fmt,kw,opts", CASES,
                         ids=[f"{s}-to-v{f}-{'-'.join(o).replace('--', '')}"
                              for s, f, _, o in CASES])
def test_copy_and_cp_make_identical_stores(tmp_path, source, fmt, kw, opts):
    src = tmp_path / "src.zarr"
    a = (v2_source if source == "v2" else v3_source)(src)
    library_copy(a, tmp_path / "lib.zarr", fmt, **kw)
    cp(src, tmp_path / "cli.zarr", "--src-path", "a", "--dst-path", "x", *opts)
    keys = assert_same_stores(tmp_path / "lib.zarr", tmp_path / "cli.zarr")
    assert len([k for k in keys if "x/" in k]) > 2  # metadata and chunks were written
    x = cs.open_array(str(tmp_path / "lib.zarr"), mode="r", path="x")
    assert x.metadata.zarr_format == fmt
    np.testing.assert_array_equal(x[...], DATA.astype(x.dtype))
    # The attributes and the dimension names travel, each format in its own place.
    assert x.attrs["units"] == "m"
    if fmt == 3:
        assert x.metadata.dimension_names == ("y", "x")
        assert "_ARRAY_DIMENSIONS" not in x.attrs
    else:
        assert x.attrs["_ARRAY_DIMENSIONS"] == ["y", "x"]


def test_v2_to_v3_keeps_what_the_cli_keeps(tmp_path):
    # copy gains what `chunkstore cp` did alone: crc32c and shards as asked, dimension names.
    a = v2_source(tmp_path / "src.zarr")
    library_copy(a, tmp_path / "lib.zarr", 3, checksum=True, shards=(20, 30))
    x = cs.open_array(str(tmp_path / "lib.zarr"), mode="r", path="x")
    assert x.shards == (20, 30) and x.chunks == (10, 10)
    inner = x.metadata.inner_codecs
    assert [c["name"] for c in inner] == ["bytes", "zstd", "crc32c"]
    assert x.fill_value == -1.5


def test_v3_to_v3_keeps_the_codec_chain(tmp_path):
    a = v3_source(tmp_path / "src.zarr")
    library_copy(a, tmp_path / "lib.zarr", 3, chunks=(10, 10))
    x = cs.open_array(str(tmp_path / "lib.zarr"), mode="r", path="x")
    assert x.metadata.inner_codecs == a.metadata.inner_codecs
    assert x.shards == (10, 30) and x.metadata.dimension_names == ("y", "x")


def group_tree(path):
    root = cs.group(str(path))
    root.attrs.put({"title": "t"})
    sub = root.create_group("sub")
    sub.attrs.put({"k": 1})
    sub.create_dataset("b", data=np.arange(25, dtype="i2"), chunks=(10,))
    root.create_dataset("a", data=DATA, chunks=(10, 10))
    root.create_group("empty")
    return root


@pytest.mark.parametrize("fmt,kw,opts", [
    (3, dict(checksum=True), ["--zarr-format", "3", "--checksum"]),
    (2, dict(compressor=numcodecs.GZip(level=2)), ["--compressor", "gzip:2"]),
])
def test_copy_all_and_cp_of_a_group_make_identical_stores(tmp_path, fmt, kw, opts):
    root = group_tree(tmp_path / "src.zarr")
    dest = cs.group(str(tmp_path / "lib.zarr"), zarr_format=fmt)
    cs.copy_all(root, dest, **kw)
    cp(tmp_path / "src.zarr", tmp_path / "cli.zarr", *opts)
    keys = assert_same_stores(tmp_path / "lib.zarr", tmp_path / "cli.zarr")
    assert any(k.startswith("sub/b/") for k in keys) and any("empty" in k for k in keys)
    g = cs.open_group(str(tmp_path / "lib.zarr"), mode="r")
    assert g.attrs["title"] == "t" and g["sub"].attrs["k"] == 1
    np.testing.assert_array_equal(g["sub/b"][...], np.arange(25, dtype="i2"))


# ------------------------------------------------------------------------------ the planner
def test_plan_of_a_sharded_v3_array():
    s = cs.MemoryStore()
    a = v3_source(s)
    kw = create_kwargs_like(a)
    assert kw["zarr_format"] == 3 and kw["shards"] == (10, 30) and kw["chunks"] == (5, 10)
    assert kw["codecs"] == a.metadata.inner_codecs
    assert list(kw["dimension_names"]) == ["y", "x"] and kw["fill_value"] == -1.5
    assert kw["dimension_separator"] == a.metadata.chunk_key_encoding
    b = cs.create(store=s, path="b", **kw)
    assert b.metadata.codecs == a.metadata.codecs


def test_plan_new_compressor_keeps_the_checksum_unless_told():
    a = v3_source(cs.MemoryStore())
    kw = create_kwargs_like(a, compressor=numcodecs.GZip(level=1))
    assert "codecs" not in kw and [f.codec_id for f in kw["filters"]] == ["crc32c"]
    kw = create_kwargs_like(a, compressor=numcodecs.GZip(level=1), keep_checksum=False)
    assert "codecs" not in kw and not kw.get("filters")
    # a change equal to the source's value is no change: the chain stays as it is
    kw = create_kwargs_like(a, compressor=a.compressor, dtype=a.dtype)
    assert kw["codecs"] == a.metadata.inner_codecs


def test_plan_v2_to_v3_moves_dimension_names_out_of_the_attributes():
    a = v2_source(cs.MemoryStore())
    kw, attrs = copy_plan(a, 3, checksum=True)
    assert kw["dimension_names"] == ["y", "x"] and attrs == {"units": "m"}
    assert [f.codec_id for f in kw["filters"]] == ["crc32c"] and kw["shards"] is None
    kw, attrs = copy_plan(a, 3, dimension_names=None)  # told: nothing moves
    assert "dimension_names" not in kw and attrs["_ARRAY_DIMENSIONS"] == ["y", "x"]


def test_plan_v3_to_v2():
    s = cs.MemoryStore()
    a = v3_source(s)
    notes = []
    kw, attrs = copy_plan(a, 2, note=notes.append)
    assert kw["zarr_format"] == 2 and kw.get("shards") is None and "codecs" not in kw
    assert attrs == {"units": "m", "_ARRAY_DIMENSIONS": ["y", "x"]}
    assert any("crc32c" in n and "/a" in n for n in notes)
    strings = cs.create_array(s, name="s", shape=(3,), dtype=str, chunks=(2,))
    kw = create_kwargs_like(strings, 2)
    assert kw["object_codec"].codec_id == "vlen-utf8"


def test_plan_dtype_change_casts_the_fill_value_and_drops_dtype_filters():
    s = cs.MemoryStore()
    a = cs.create((10,), chunks=(5,), dtype="f8", fill_value=1.5, store=s, path="a",
                 filters=[numcodecs.Delta(dtype="f8")])
    notes = []
    kw = create_kwargs_like(a, dtype="i4", note=notes.append)
    assert kw["dtype"] == np.dtype("i4") and kw["fill_value"] == 0 and kw["filters"] is None
    assert notes and "filters" in notes[0]
    kw = create_kwargs_like(a, dtype="f4")
    assert kw["fill_value"] == 1.5


def test_plan_errors_name_the_option_and_the_array():
    s = cs.MemoryStore()
    a = v2_source(s)
    with pytest.raises(RecodeError, match=r"shards needs Zarr v3 .*'/a'"):
        create_kwargs_like(a, shards=(20, 20))
    with pytest.raises(RecodeError, match=r"checksum=True needs Zarr v3"):
        create_kwargs_like(a, checksum=True)
    with pytest.raises(RecodeError, match=r"chunks has 3 values but array '/a' has 2"):
        create_kwargs_like(a, 3, chunks=(1, 2, 3))
    with pytest.raises(RecodeError, match=r"must be a multiple of the chunks"):
        create_kwargs_like(a, 3, shards=(15, 15))
    b = v3_source(cs.MemoryStore())
    with pytest.raises(RecodeError, match=r"not a multiple of the new chunks"):
        create_kwargs_like(b, chunks=(4, 4))
    with pytest.raises(ValueError):  # RecodeError is a ValueError, as zarr-python raises
        create_kwargs_like(b, chunks=(4, 4))


def test_partly_named_dimensions_dropped_for_v2_with_a_note():
    # Zarr v2 has only xarray's _ARRAY_DIMENSIONS, all strings: ['x', None] cannot go there
    a = cs.create_array({}, shape=(2, 3), dtype="i4", dimension_names=["x", None])
    notes = []
    _, attrs = copy_plan(a, 2, note=notes.append)
    assert "_ARRAY_DIMENSIONS" not in attrs
    assert any("dimension names ['x', None]" in n for n in notes)
    b = cs.create_array({}, shape=(2, 3), dtype="i4", dimension_names=["x", "y"])
    assert copy_plan(b, 2)[1]["_ARRAY_DIMENSIONS"] == ["x", "y"]


def test_a_recoding_copy_casts_a_float_fill_value_to_the_nearest():
    """copy(dtype="f4") of an f8 array with fill 0.1 gave the copy fill 0 (no exact float32
    equivalent): the source's missing chunks were stored in the copy, and a grown copy read
    0 where the source read 0.1. The fill value is cast as the data is."""
    src = cs.create((4,), chunks=(2,), dtype="f8", fill_value=0.1, store=cs.MemoryStore())
    src[0] = 1.0
    g = cs.group(cs.MemoryStore())
    cs.copy(src, g, name="c", dtype="f4")
    c = g["c"]
    assert c.fill_value == np.float32(0.1)
    assert sorted(k for k in g.store.keys() if k.startswith("c/")) == ["c/.zarray", "c/0"]
    src.resize(6)
    c.resize(6)
    np.testing.assert_array_equal(c[...], src[...].astype("f4"))


@pytest.mark.parametrize("filt", ["delta", "fso", "quantize", "astype", "bitround", "packbits"])
def test_a_v3_array_with_numcodecs_filters_copies_into_v2(tmp_path, filt):
    """copy() of a v3 array whose chain has numcodecs filters (zarr-python 3's
    numcodecs.<id> wrappers) into a v2 group crashed on the wrappers (AttributeError);
    they are the v2 document's numcodecs filters."""
    import numcodecs
    f, dt = {"delta": (numcodecs.Delta(dtype="<i4"), "<i4"),
             "fso": (numcodecs.FixedScaleOffset(offset=0, scale=1, dtype="<i4"), "<i4"),
             "quantize": (numcodecs.Quantize(digits=3, dtype="<f8"), "<f8"),
             "astype": (numcodecs.AsType(encode_dtype="<i2", decode_dtype="<i4"), "<i4"),
             "bitround": (numcodecs.BitRound(keepbits=10), "<f8"),
             "packbits": (numcodecs.PackBits(), "?")}[filt]
    src = cs.create(shape=(8,), chunks=(4,), dtype=dt, filters=[f],
                    store=str(tmp_path / "s"), zarr_format=3)
    src[:] = np.arange(8) % 2 if dt == "?" else np.arange(8)
    g = cs.open_group(str(tmp_path / "d"), mode="w", zarr_format=2)
    cs.copy(src, g, name="x")
    assert [type(x).__name__ for x in g["x"].filters] == [type(f).__name__]
    np.testing.assert_array_equal(g["x"][:], src[:])


def _zstd_copy_of_a(tmp_path, src, how):
    """Array "a" of the v2 group src (at tmp_path/src) after a recoding copy of the group
    to tmp_path/dst with Zstd: by copy_all ("copy") or the command line's cp ("cp")."""
    if how == "copy":
        dst = cs.open_group(str(tmp_path / "dst"), mode="w", zarr_format=2)
        cs.copy_all(src, dst, compressor=numcodecs.Zstd(level=3))
    else:
        assert main(["cp", str(tmp_path / "src"), str(tmp_path / "dst"),
                     "--compressor", "zstd"]) == 0
    return cs.open_group(str(tmp_path / "dst"), mode="r")["a"]


@pytest.mark.parametrize("how", ["copy", "cp"])
def test_a_sparse_array_of_fill_none_stays_sparse_in_a_recoding_copy(tmp_path, how):
    """A v2 array of fill value None (whose every written chunk is stored) with one chunk
    stored: the recoding copy stored the unstored chunks sharing a copy block with it (952
    of 2,000 with copy(), all with the command line's cp)."""
    src = cs.open_group(str(tmp_path / "src"), mode="w", zarr_format=2)
    a = src.create_dataset("a", shape=(200_000,), chunks=(100,), dtype="f8", fill_value=None)
    a[150:160] = 1.5
    b = _zstd_copy_of_a(tmp_path, src, how)
    assert b.nchunks_initialized == 1
    np.testing.assert_array_equal(b[150:160], 1.5)


@pytest.mark.parametrize("how", ["copy", "cp"])
def test_a_recoding_copy_of_strings_with_zarr_python_2s_fill_0_reads_as_its_source(
        tmp_path, how):
    """zarr-python 2 stores fill value 0 for a string (vlen-utf8) array it creates, and
    reads 0 where no chunk is stored; so does chunkstore. Its recoding copy was created with
    create()'s convention for a 0 given for strings (""), and read "" there."""
    import json
    src = cs.open_group(str(tmp_path / "src"), mode="w", zarr_format=2)
    a = src.create_dataset("a", shape=(6,), chunks=(2,), dtype=object,
                           object_codec=numcodecs.VLenUTF8(), fill_value=None)
    doc = json.loads(src.store["a/.zarray"])
    doc["fill_value"] = 0  # as zarr-python 2's zarr.create(dtype=str) writes it
    src.store["a/.zarray"] = json.dumps(doc).encode()
    a = src["a"]
    a[:2] = ["x", "y"]
    want = a[:]
    assert list(want) == ["x", "y", 0, 0, 0, 0]
    b = _zstd_copy_of_a(tmp_path, src, how)
    assert b.compressor == numcodecs.Zstd(level=3) and b.fill_value == 0
    assert list(b[:]) == list(want)


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_copy_create_refuses_names_the_source_and_the_target(dry_run):
    """A copy into Zarr v3 of a dtype v3 cannot hold was refused naming path '' (the dry
    run's scratch plan) or only the destination, never the array being copied."""
    src = cs.create(shape=(4,), chunks=(2,), dtype=[("t", "M8[s]"), ("v", "i4")],
                    store={}, path="data/src")
    g = cs.group(store={}, zarr_format=3)
    with pytest.raises(ValueError, match=r"cannot copy array '/data/src' to '/x': .*path 'x'"
                                         r".*datetime64\[s\]"):
        cs.copy(src, g, name="x", dry_run=dry_run)
    assert "x" not in g


@pytest.mark.parametrize("how", ["copy_store", "copy", "cp"])
def test_a_raw_copy_whose_source_is_re_created_meanwhile_is_refused(tmp_path, monkeypatch,
                                                                     how):
    """Another writer re-created the source (f8 -> i8, same shape and chunks) after the raw
    copy had read its documents: the new chunks were written under the old .zarray, and the
    copy read values neither version held (4.9e-324...). Its documents are read again before
    they are written: CopyError, and nothing of the copy is left."""
    import chunkstore.hierarchy.convenience as conv
    from chunkstore.errors import CopyError
    from chunkstore.metadata.formats import document_rank
    src_path, dst_path = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    cs.open_group(src_path, mode="w").array("a", np.arange(1000.0), chunks=(100,),
                                             compressor=None)
    real, done = conv.getitems, []

    def getitems(store, keys):
        keys = list(keys)
        if not done and any(document_rank(k) == 2 for k in keys) and "src" in repr(store):
            done.append(1)  # the other writer, between the documents' and the chunks' reads
            cs.open_group(src_path, mode="a").create(
                "a", shape=(1000,), chunks=(100,), dtype="i8", compressor=None,
                overwrite=True)[:] = np.arange(1000)
        return real(store, keys)

    monkeypatch.setattr(conv, "getitems", getitems)
    dst = cs.open_group(dst_path, mode="w")
    if how == "cp":
        assert main(["cp", src_path, str(tmp_path / "cp.zarr")]) == 1
        assert not (tmp_path / "cp.zarr").exists()
    else:
        with pytest.raises(CopyError, match="source changed while it was copied"):
            if how == "copy":
                cs.copy(cs.open_group(src_path, mode="r")["a"], dst, name="b")
            else:
                cs.copy_store(normalize_store(src_path), dst.store, source_path="a",
                              dest_path="b")
        assert list(dst.store.keys()) == [".zgroup"]
    assert done


@pytest.mark.parametrize("how", ["copy", "cp"])
def test_a_dtype_numpy_cannot_cast_to_is_refused_naming_the_array(tmp_path, capsys, how):
    """A record of two fields to float32 (--casting unsafe): NumPy's "Cannot compare
    structured or void to non-void arrays" surfaced from the copy's fill comparison, naming
    neither the array nor the store."""
    src = cs.open_group(str(tmp_path / "s.zarr"), mode="w")
    src.array("rec", np.array([(1, 2.5)], dtype=[("x", "i4"), ("y", "f8")]))
    if how == "copy":
        with pytest.raises(RecodeError, match=r"cannot cast array '/rec' from .* to float32"):
            cs.copy(src["rec"], cs.group(), name="r", dtype="f4")
    else:
        assert main(["cp", str(tmp_path / "s.zarr"), str(tmp_path / "d.zarr"), "--src-path",
                     "rec", "--dtype", "f4", "--casting", "unsafe"]) == 1
        assert "cannot cast array '/rec'" in capsys.readouterr().err
        assert not (tmp_path / "d.zarr").exists()


@pytest.mark.parametrize("shards, inner", [((100, 100), (100, 100)), ((1000, 1000), (250, 500))])
def test_auto_chunks_of_a_sharded_copy_are_guessed_within_the_kept_shards(tmp_path, shards,
                                                                          inner):
    """cp --chunks auto (copy(chunks=True)) of a sharded array guessed the chunks for the
    whole array: larger than small shards, the copy was refused ("the shards are not a
    multiple of the new chunks"). Guessed within a shard now, aiming at 1 MiB as
    create_array's inner chunks."""
    src = str(tmp_path / "s.zarr")
    a = cs.create_array(src, shape=(4000, 4000), chunks=(10, 10), shards=shards, dtype="f4")
    a[:8, :8] = 1
    assert main(["cp", src, str(tmp_path / "d.zarr"), "--chunks", "auto"]) == 0
    b = cs.open_array(str(tmp_path / "d.zarr"), mode="r")
    assert b.shards == shards and b.chunks == inner
    np.testing.assert_array_equal(b[:16, :16], a[:16, :16])
    kw, _ = copy_plan(a, chunks=True)
    assert tuple(kw["chunks"]) == inner and tuple(kw["shards"]) == shards
