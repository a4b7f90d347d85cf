"""Convenience functions: save/load, save_array/save_group, copy, copy_all, copy_store, tree,
with zarr-python 2's semantics."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
import chunkstore.hierarchy.convenience as conv
from chunkstore.hierarchy.convenience import CopyError

PATH_KINDS = {"directory": "data.zarr", "zip": "data.zip", "sqlite": "data.sqlite",
              "lmdb": "data.lmdb"}


def _path(tmp_path, kind):
    if kind == "lmdb":
        pytest.importorskip("lmdb")
    return str(tmp_path / PATH_KINDS[kind])


def all_paths(grp):
    out = []
    grp.visit(out.append)
    return out


@pytest.fixture
def source(tmp_path):
    """A hierarchy with attributes at every level, in a DirectoryStore."""
    g = cs.group(str(tmp_path / "src.zarr"))
    g.attrs["root"] = 1
    x = g.array("x", np.arange(100).reshape(10, 10), chunks=(3, 3))
    x.attrs["units"] = "m"
    sub = g.create_group("sub")
    sub.attrs["s"] = 2
    sub.array("y", np.linspace(0, 1, 50), chunks=7, fill_value=np.nan)
    deeper = sub.create_group("deeper")
    deeper.attrs["d"] = [1, None]
    deeper.array("z", np.arange(5, dtype="i2"))
    return cs.open_group(str(tmp_path / "src.zarr"), mode="r")


# ------------------------------------------------------------------------------ save / load
class TestSaveLoad:
    @pytest.mark.parametrize("kind", list(PATH_KINDS))
    def test_save_load_one_array(self, tmp_path, kind):
        path = _path(tmp_path, kind)
        data = np.arange(1000, dtype="f4").reshape(20, 50)
        cs.save(path, data)
        out = cs.load(path)
        assert isinstance(out, np.ndarray)
        assert out.dtype == data.dtype
        np.testing.assert_array_equal(out, data)
        z = cs.open(path, mode="r")
        assert isinstance(z, cs.Array) and z.shape == (20, 50)

    @pytest.mark.parametrize("kind", list(PATH_KINDS))
    def test_save_load_group(self, tmp_path, kind):
        path = _path(tmp_path, kind)
        a, b = np.arange(10), np.ones((3, 4), dtype="i2")
        cs.save(path, a, b, named=np.arange(4.0))
        loaded = cs.load(path)
        assert isinstance(loaded, cs.LazyLoader)
        assert sorted(loaded) == ["arr_0", "arr_1", "named"]
        assert len(loaded) == 3 and "named" in loaded and "nope" not in loaded
        np.testing.assert_array_equal(loaded["arr_0"], a)
        assert loaded["arr_1"].dtype == np.int16
        np.testing.assert_array_equal(loaded["named"], np.arange(4.0))
        assert "named" in repr(loaded)

    def test_lazy_loader_reads_on_first_access_and_caches(self):
        store = {}
        cs.save(store, a=np.zeros(4), b=np.zeros(2))
        loaded = cs.load(store)
        cs.open_group(store)["a"][:] = 7  # after load(), before access
        first = loaded["a"]
        np.testing.assert_array_equal(first, np.full(4, 7.0))
        cs.open_group(store)["a"][:] = 9
        assert loaded["a"] is first  # cached: loaded once
        with pytest.raises(KeyError):
            loaded["missing"]

    def test_save_array_and_save_group(self, tmp_path):
        p = str(tmp_path / "a.zarr")
        cs.save_array(p, np.arange(12).reshape(3, 4), chunks=(2, 2))
        z = cs.open(p, mode="r")
        assert z.chunks == (2, 2)
        np.testing.assert_array_equal(z[:], np.arange(12).reshape(3, 4))
        cs.save_array(p, np.arange(3))  # overwrites
        np.testing.assert_array_equal(cs.load(p), np.arange(3))
        q = str(tmp_path / "g.zarr")
        cs.save_group(q, np.arange(2), y=np.arange(3))
        g = cs.open_group(q, mode="r")
        assert g.array_keys() == ["arr_0", "y"]
        cs.save_group(q, only=np.arange(1))  # replaces the whole group
        assert cs.open_group(q, mode="r").array_keys() == ["only"]

    def test_save_at_path(self, tmp_path):
        p = str(tmp_path / "p.zarr")
        cs.save(p, np.arange(5), path="in/side")
        np.testing.assert_array_equal(cs.load(p, path="in/side"), np.arange(5))
        assert isinstance(cs.open(p, mode="r"), cs.Group)  # parents are groups

    def test_save_nothing_and_load_missing(self, tmp_path):
        with pytest.raises(ValueError):
            cs.save({})
        with pytest.raises(ValueError):
            cs.save_group({})
        with pytest.raises(FileNotFoundError):
            cs.load(str(tmp_path / "missing.zarr"))
        with pytest.raises(FileNotFoundError):
            cs.load({})


# ------------------------------------------------------------------------------ copy
class TestCopy:
    def test_copy_array(self, source):
        dest = cs.group({})
        n = cs.copy(source["x"], dest)
        assert n[:2] == (1, 0) and n[2] > 0
        z = dest["x"]
        np.testing.assert_array_equal(z[:], source["x"][:])
        assert z.chunks == (3, 3) and z.compressor == source["x"].compressor
        assert dict(z.attrs) == {"units": "m"}

    def test_copy_array_name_and_into_subgroup(self, source):
        dest = cs.group({})
        cs.copy(source["sub/y"], dest.create_group("a/b"), name="renamed")
        z = dest["a/b/renamed"]
        np.testing.assert_array_equal(z[:], np.linspace(0, 1, 50))
        assert np.isnan(z.fill_value)

    def test_copy_group_recursive(self, source):
        dest = cs.group({})
        n_copied, n_skipped, n_bytes = cs.copy(source["sub"], dest)
        assert (n_copied, n_skipped) == (4, 0) and n_bytes > 0
        assert all_paths(dest) == ["sub", "sub/deeper", "sub/deeper/z", "sub/y"]
        assert dict(dest["sub"].attrs) == {"s": 2}
        assert dict(dest["sub/deeper"].attrs) == {"d": [1, None]}
        np.testing.assert_array_equal(dest["sub/deeper/z"][:], np.arange(5, dtype="i2"))

    def test_copy_shallow(self, source):
        dest = cs.group({})
        cs.copy(source["sub"], dest, shallow=True)
        assert all_paths(dest) == ["sub", "sub/y"]

    def test_copy_without_attrs(self, source):
        dest = cs.group({})
        cs.copy(source["sub"], dest, without_attrs=True)
        cs.copy(source["x"], dest, without_attrs=True)
        for p in ["sub", "sub/deeper", "sub/y", "x"]:
            assert dict(dest[p].attrs) == {}, p
        np.testing.assert_array_equal(dest["x"][:], source["x"][:])

    def test_copy_log(self, source):
        dest = cs.group({})
        lines = []
        cs.copy(source["sub"], dest, log=lines.append)
        assert len(lines) == 4
        for name in ["/sub", "/sub/deeper", "/sub/deeper/z", "/sub/y"]:
            assert any(name in line for line in lines), name

    def test_copy_log_to_file_like_and_path(self, source, tmp_path):
        # zarr-python 2: log may be a callable, a file path or a file-like object.
        import io
        buf = io.StringIO()
        cs.copy(source["sub"], cs.group({}), log=buf)
        assert "/sub/deeper/z" in buf.getvalue()
        logfile = tmp_path / "copy.log"
        cs.copy(source["x"], cs.group({}), log=str(logfile))
        assert "/x" in logfile.read_text()

    def test_if_exists_raise(self, source):
        dest = cs.group({})
        cs.copy(source["x"], dest)
        with pytest.raises(CopyError, match="x") as info:
            cs.copy(source["x"], dest)
        # zarr-python 2's zarr.errors.CopyError is a RuntimeError; chunkstore's is also a
        # ValueError, as it was, and lives in chunkstore.errors as zarr 2's does
        from chunkstore import errors
        assert isinstance(info.value, (errors.CopyError, RuntimeError, ValueError))
        assert issubclass(errors.CopyError, RuntimeError) and errors.CopyError is CopyError
        with pytest.raises(ValueError, match="if_exists"):
            cs.copy(source["x"], dest, if_exists="sometimes")

    def test_if_exists_skip_array(self, source):
        dest = cs.group({})
        dest.array("x", np.zeros(3))
        assert cs.copy(source["x"], dest, if_exists="skip") == (0, 1, 0)
        np.testing.assert_array_equal(dest["x"][:], np.zeros(3))

    def test_if_exists_replace_array(self, source):
        dest = cs.group({})
        dest.array("x", np.zeros(3), chunks=1)
        cs.copy(source["x"], dest, if_exists="replace")
        np.testing.assert_array_equal(dest["x"][:], source["x"][:])
        # No chunk of the replaced array survives.
        assert not [k for k in dest.store if k.startswith("x/") and k.count(".") == 0
                    and not k.endswith((".zarray", ".zattrs"))]

    def test_if_exists_replace_group_merges(self, source):
        dest = cs.group({})
        d = dest.create_group("sub")
        d.array("y", np.zeros(2))
        d.array("extra", np.ones(2))
        cs.copy(source["sub"], dest, if_exists="replace")
        np.testing.assert_array_equal(dest["sub/y"][:], np.linspace(0, 1, 50))
        np.testing.assert_array_equal(dest["sub/extra"][:], np.ones(2))
        assert "sub/deeper/z" in dest

    def test_if_exists_skip_group_merges(self, source):
        # zarr-python 2: an existing group is merged into; only existing arrays are skipped.
        dest = cs.group({})
        dest.create_group("sub").array("y", np.zeros(2))
        n_copied, n_skipped, _ = cs.copy(source["sub"], dest, if_exists="skip")
        np.testing.assert_array_equal(dest["sub/y"][:], np.zeros(2))
        assert "sub/deeper/z" in dest
        assert n_skipped == 1 and n_copied >= 2

    def test_dry_run_writes_nothing(self, source):
        dest = cs.group({})
        before = dict(dest.store)
        cs.copy(source["sub"], dest, dry_run=True)
        cs.copy(source["x"], dest, dry_run=True)
        assert dict(dest.store) == before

    def test_dry_run_reports_what_a_real_run_does(self, source):
        dry_log, real_log = [], []
        dry = cs.copy(source["sub"], cs.group({}), dry_run=True, log=dry_log.append)
        real = cs.copy(source["sub"], cs.group({}), log=real_log.append)
        assert dry[:2] == real[:2] == (4, 0)
        assert dry_log == real_log

    def test_dry_run_skip_counts(self, source):
        dest = cs.group({})
        cs.copy(source["x"], dest)
        assert cs.copy(source["x"], dest, dry_run=True, if_exists="skip") == (0, 1, 0)
        with pytest.raises(CopyError):
            cs.copy(source["x"], dest, dry_run=True)

    def test_copy_recodes(self, source):
        dest = cs.group({})
        cs.copy(source["x"], dest, name="rc", chunks=(5, 5), compressor=numcodecs.Zstd(3))
        z = dest["rc"]
        assert z.chunks == (5, 5) and z.compressor == numcodecs.Zstd(3)
        assert z.nchunks_initialized == 4
        np.testing.assert_array_equal(z[:], source["x"][:])
        assert dict(z.attrs) == {"units": "m"}
        cs.copy(source["x"], dest, name="f4", dtype="f4", compressor=None)
        assert dest["f4"].dtype == np.float32 and dest["f4"].compressor is None
        np.testing.assert_array_equal(dest["f4"][:], source["x"][:].astype("f4"))

    def test_copy_group_recodes_every_array(self, source):
        dest = cs.group({})
        cs.copy(source["sub"], dest, chunks=2, compressor=numcodecs.GZip(1))
        for p in ["sub/y", "sub/deeper/z"]:
            assert dest[p].chunks == (2,) and dest[p].compressor == numcodecs.GZip(1)
            np.testing.assert_array_equal(dest[p][:], source[p][:])

    def test_copy_numpy_source(self):
        dest = cs.group({})
        cs.copy(np.arange(6).reshape(2, 3), dest, name="np", chunks=(1, 3))
        assert dest["np"].chunks == (1, 3)
        np.testing.assert_array_equal(dest["np"][:], np.arange(6).reshape(2, 3))

    def test_copy_errors(self, source):
        with pytest.raises(CopyError, match="dest must be a group"):  # a ValueError, as zarr 2
            cs.copy(source["x"], {})
        with pytest.raises(CopyError, match="name"):
            cs.copy(source, cs.group({}))  # the root has no name

    def test_copy_across_store_kinds(self, source, tmp_path):
        for kind in ["zip", "sqlite"]:
            path = _path(tmp_path, kind)
            with cs.open_group(path, mode="w") as dest:
                cs.copy(source["sub"], dest)
            g = cs.open_group(path, mode="r")
            assert all_paths(g) == ["sub", "sub/deeper", "sub/deeper/z", "sub/y"]
            np.testing.assert_array_equal(g["sub/y"][:], np.linspace(0, 1, 50))
            g.store.close()

    def test_copy_from_consolidated(self, source, tmp_path):
        cs.consolidate_metadata(source.store.path)
        src = cs.open_consolidated(source.store.path, mode="r")
        dest = cs.group({})
        cs.copy(src["sub"], dest)
        assert all_paths(dest) == ["sub", "sub/deeper", "sub/deeper/z", "sub/y"]
        np.testing.assert_array_equal(dest["sub/y"][:], np.linspace(0, 1, 50))

    def test_copy_all(self, source):
        dest = cs.group({})
        n_copied, n_skipped, _ = cs.copy_all(source, dest)
        assert n_skipped == 0 and n_copied == 5
        assert all_paths(dest) == all_paths(source)
        assert dict(dest.attrs) == {"root": 1}
        for p in ["x", "sub/y", "sub/deeper/z"]:
            np.testing.assert_array_equal(dest[p][:], source[p][:])
        shallow = cs.group({})
        cs.copy_all(source, shallow, shallow=True)
        assert all_paths(shallow) == ["x"]
        with pytest.raises(CopyError):
            cs.copy_all(source, dest)
        # zarr-python 2 counts: both groups merged into (copied), the three arrays skipped.
        assert cs.copy_all(source, dest, if_exists="skip") == (2, 3, 0)

    def test_consolidate_metadata(self, source, tmp_path):
        path = source.store.path
        # As zarr-python 2: returns the hierarchy opened through the consolidated document.
        opened = cs.consolidate_metadata(path)
        assert isinstance(opened, cs.Group) and opened.path == ""
        assert isinstance(opened.store, cs.ConsolidatedMetadataStore)
        assert "sub/deeper/z/.zarray" in opened.store.metadata
        assert all_paths(opened) == all_paths(source)
        assert all_paths(cs.open_consolidated(path, mode="r")) == all_paths(source)
        # A Group works too, and a sub-hierarchy gets its own document.
        sub = cs.open_group(path)["sub"]
        cs.consolidate_metadata(sub)
        assert (tmp_path / "src.zarr" / "sub" / ".zmetadata").exists()
        c = cs.open_consolidated(path, metadata_key="sub/.zmetadata", mode="r", path="sub")
        assert all_paths(c) == ["deeper", "deeper/z", "y"]

    def test_copy_array_data_blocks_are_bounded_and_aligned(self, monkeypatch):
        src = cs.array(np.arange(240, dtype="f8").reshape(12, 20), chunks=(5, 5), store={})
        dst = cs.create((12, 20), chunks=(4, 6), dtype="f8", store={})
        # Room for two destination chunks per block.
        monkeypatch.setattr(conv, "copy_block_bytes", lambda: 2 * 4 * 6 * 8)
        regions = []

        class Spy:
            shape, dtype, size = src.shape, src.dtype, src.size

            def __getitem__(self, sel):
                regions.append(sel)
                return src[sel]
        n = conv.copy_array_data(Spy(), dst)
        assert n == len(regions) > 1
        for sel in regions:
            sizes = [s.stop - s.start for s in sel]
            assert np.prod(sizes) * 8 <= 2 * 4 * 6 * 8
            assert sel[0].start % 4 == 0 and sel[1].start % 6 == 0
        np.testing.assert_array_equal(dst[:], src[:])

    def test_tree(self, source):
        text = str(cs.tree(source))
        assert text == "\n".join([
            "/",
            "├── sub",
            "│   ├── deeper",
            "│   │   └── z (5,) int16",
            "│   └── y (50,) float64",
            "└── x (10, 10) int64",
        ])
        assert str(cs.tree(source, level=1)) == "/\n├── sub\n└── x (10, 10) int64"
        assert "<ul>" in cs.tree(source)._repr_html_()


# ------------------------------------------------------------------------------ copy_store
def _open_kind(kind, tmp_path, name, mode="a"):
    if kind == "dict":
        return {}
    if kind == "directory":
        return cs.DirectoryStore(str(tmp_path / f"{name}.zarr"), mode=mode)
    if kind == "zip":
        return cs.ZipStore(str(tmp_path / f"{name}.zip"), mode=mode)
    if kind == "sqlite":
        return cs.SQLiteStore(str(tmp_path / f"{name}.sqlite"), mode=mode)
    raise AssertionError(kind)


KINDS = ["directory", "dict", "zip", "sqlite"]


class TestCopyStore:
    @pytest.mark.parametrize("dst_kind", KINDS)
    @pytest.mark.parametrize("src_kind", KINDS)
    def test_between_kinds(self, tmp_path, src_kind, dst_kind, source):
        src = _open_kind(src_kind, tmp_path, "s", mode="w" if src_kind == "zip" else "a")
        cs.copy_store(source.store, src)
        dst = _open_kind(dst_kind, tmp_path, "d", mode="w" if dst_kind == "zip" else "a")
        n_copied, n_skipped, n_bytes = cs.copy_store(src, dst)
        keys = sorted(source.store.keys())
        assert (n_copied, n_skipped) == (len(keys), 0)
        assert n_bytes == sum(len(source.store[k]) for k in keys)
        assert sorted(dst.keys()) == keys
        for k in keys:
            assert bytes(dst[k]) == bytes(source.store[k]), k
        g = cs.open_group(dst, mode="r")
        np.testing.assert_array_equal(g["sub/deeper/z"][:], np.arange(5, dtype="i2"))
        for s in (src, dst):
            if hasattr(s, "close"):
                s.close()

    def test_paths(self, source):
        dst = {}
        n, _, _ = cs.copy_store(source.store, dst, source_path="sub", dest_path="new/p")
        assert n == len([k for k in source.store.keys() if k.startswith("sub/")])
        assert all(k.startswith("new/p/") for k in dst)
        assert "new/p/deeper/z/.zarray" in dst
        np.testing.assert_array_equal(cs.open(dst, mode="r", path="new/p/y")[:],
                                      np.linspace(0, 1, 50))
        # source_path is a path, not a string prefix.
        assert cs.copy_store({"ab/x": b"1", "a/y": b"2"}, {}, source_path="a")[0] == 1

    def test_excludes_includes(self, source):
        dst = {}
        _, n_skipped, _ = cs.copy_store(source.store, dst, excludes=[r"^sub/"],
                                        includes=[r"^sub/\.z"])
        assert not [k for k in dst if k.startswith("sub/") and k not in
                    ("sub/.zgroup", "sub/.zattrs")]
        assert "sub/.zgroup" in dst and "sub/.zattrs" in dst and "x/.zarray" in dst
        assert n_skipped == len([k for k in source.store.keys() if k.startswith("sub/")]) - 2
        only_meta = {}
        cs.copy_store(source.store, only_meta, excludes=r"\d$")  # a single pattern string
        assert only_meta and all(k.rsplit("/", 1)[-1].startswith(".") for k in only_meta)

    def test_if_exists(self, source):
        dst = {}
        cs.copy_store(source.store, dst)
        with pytest.raises(CopyError):
            cs.copy_store(source.store, dst)
        dst["x/.zattrs"] = b'{"changed": 1}'
        n, skipped, _ = cs.copy_store(source.store, dst, if_exists="skip")
        assert n == 0 and skipped == len(dst)
        assert dst["x/.zattrs"] == b'{"changed": 1}'
        n, skipped, _ = cs.copy_store(source.store, dst, if_exists="replace")
        assert skipped == 0 and n == len(dst)
        assert bytes(dst["x/.zattrs"]) == bytes(source.store["x/.zattrs"])
        with pytest.raises(ValueError):
            cs.copy_store(source.store, dst, if_exists="bogus")

    def test_dry_run_and_log(self, source):
        dst, lines = {}, []
        reads = []

        class Counting(dict):  # (the source's values read, by key)
            def __getitem__(self, key):
                reads.append(key)
                return super().__getitem__(key)

        src = Counting({k: bytes(source.store[k]) for k in source.store})
        n, skipped, nbytes = cs.copy_store(src, dst, dry_run=True, log=lines.append)
        assert dst == {} and n == len(lines) == len(src) and skipped == 0
        # zarr-python 2's dry run reports no bytes; it read every chunk to count them
        assert nbytes == 0 and not [k for k in reads if not k.endswith((".zarray", ".zgroup",
                                                                         ".zattrs"))]
        assert cs.copy_store(src, dst)[2] == sum(len(v) for v in dst.values()) > 0

    @pytest.mark.parametrize("kind", ["zip", "sqlite", "directory"])
    def test_to_a_path_string(self, source, tmp_path, kind):
        path = _path(tmp_path, kind)
        cs.copy_store(source.store.path, path)
        g = cs.open_group(path, mode="r")
        assert all_paths(g) == all_paths(source)
        np.testing.assert_array_equal(g["x"][:], source["x"][:])


# ------------------------------------------------- found by tests/hierarchy/test_copy_model.py
from chunkstore.recode import RecodeError  # noqa: E402


def test_a_refused_copy_leaves_the_destination_as_it_was():
    src = cs.group(store=cs.MemoryStore())                        # Zarr v2
    src.create_dataset("a", data=np.arange(4), chunks=2)
    src.create_dataset("b", data=np.arange(4), chunks=2, compressor=numcodecs.LZMA())
    store3 = cs.MemoryStore()
    dst3 = cs.group(store=store3, zarr_format=3)
    before = dict(store3)
    for dry_run in (True, False):          # b's LZMA has no Zarr v3 codec: planned first
        with pytest.raises(RecodeError, match="LZMA"):
            cs.copy_all(src, dst3, dry_run=dry_run)
        with pytest.raises(RecodeError, match="LZMA"):
            cs.copy(src, dst3, "g", dry_run=dry_run)
    assert dict(store3) == before
    # if_exists="replace" removed the existing array before the copy was refused
    store2 = cs.MemoryStore()
    dst2 = cs.group(store=store2, zarr_format=2)
    dst2.zeros("x", shape=(3,), dtype="i4", chunks=3)[:] = [1, 2, 3]
    before = dict(store2)
    with pytest.raises(RecodeError, match="shards"):
        cs.copy(src["a"], dst2, "x", if_exists="replace", shards=(2,))
    assert dict(store2) == before
    np.testing.assert_array_equal(dst2["x"][:], [1, 2, 3])


def test_options_the_destination_format_cannot_hold_are_refused_as_cp_refuses_them():
    src = cs.group(store=cs.MemoryStore())
    src.create_group("g")                                         # no arrays in it
    dst = cs.group(store=cs.MemoryStore(), zarr_format=2)
    for kws in ({"shards": 8}, {"checksum": True}):
        with pytest.raises(RecodeError):
            cs.copy(src["g"], dst, "x", **kws)
        with pytest.raises(RecodeError):
            cs.copy_all(src, dst, **kws)
    assert "x" not in dst


def test_copied_bytes_are_the_copys_when_the_dtype_changes():
    src = cs.array(np.arange(4, dtype="i4"), chunks=2)
    dest = cs.group(store=cs.MemoryStore())
    assert cs.copy(src, dest, "x", dtype="f8") == (1, 0, 32)
    assert dest["x"].nbytes == 32


def test_a_v3_array_of_order_f_copies_to_v2_with_order_f():
    a = cs.create(shape=(2, 3), chunks=(2, 2), dtype="i4", order="F", zarr_format=3,
                  store=cs.MemoryStore())
    a[...] = np.arange(6).reshape(2, 3)
    dest = cs.group(store=cs.MemoryStore(), zarr_format=2)
    cs.copy(a, dest, "x", chunks=(1, 1))
    x = dest["x"]
    assert x.order == "F" and x.filters is None
    np.testing.assert_array_equal(x[...], np.arange(6).reshape(2, 3))
    assert cs.zeros_like(a, store=cs.MemoryStore(), zarr_format=2).order == "F"
    # any other transpose has no Zarr v2 form: refused by name, nothing written
    b = cs.create_array(cs.MemoryStore(), shape=(2, 3, 4), chunks=(2, 3, 4), dtype="i4",
                        filters=[cs.codecs.TransposeCodec(order=(1, 0, 2))])
    before = dict(dest.store)
    with pytest.raises(RecodeError, match=r"transpose codec with order \[1, 0, 2\]"):
        cs.copy(b, dest, "y")
    assert dict(dest.store) == before


def test_open_array_reports_a_1d_v2_arrays_order(tmp_path):
    p = str(tmp_path / "a.zarr")
    cs.create(shape=(4,), chunks=3, dtype="i4", order="F", store=p)
    assert cs.open_array(p, mode="r").order == "F"
    assert cs.open(p, mode="r").order == "F"


def test_a_nat_fill_value_stays_nat_when_the_datetime_unit_changes():
    src = cs.full(shape=(4,), chunks=2, dtype="M8[s]", fill_value=np.datetime64("NaT"))
    dest = cs.group(store=cs.MemoryStore())
    cs.copy(src, dest, "x", dtype="M8[ms]")
    x = dest["x"]
    assert np.isnat(x.fill_value) and x.nchunks_initialized == 0
    x.resize((6,))
    assert np.isnat(x[...]).all()


@pytest.mark.parametrize("fmt, how", [(2, "dtype"), (2, "fill"), (2, "astype"),
                                      (3, "dtype"), (3, "fill")])  # (astype: v2 only)
@pytest.mark.parametrize("options", [{}, {"chunks": 2}])
def test_a_copy_of_a_view_reads_as_the_view(fmt, how, options):
    """copy() of a view (view(dtype=), view(fill_value=), astype()) holds what the view
    reads: the raw copy (same format, no options) copied the stored keys, so the copy read
    as the stored array; a recoding copy of an astype view kept its AsType filter (a later
    write of 1.5 read back 1.0)."""
    z = cs.create(shape=(12,), chunks=(4,), dtype="i4", fill_value=0, store={},
                  zarr_format=fmt)
    z[:5] = -1
    view = {"dtype": lambda: z.view(dtype="u4"), "fill": lambda: z.view(fill_value=5),
            "astype": lambda: z.astype("f8")}[how]()
    dest = cs.group({}, zarr_format=fmt)
    cs.copy(view, dest, name="x", **options)
    x = dest["x"]
    assert x.dtype == view.dtype
    np.testing.assert_array_equal(x[...], view[...])
    if how == "astype":
        assert not x.filters
        x[0] = 1.5
        assert x[0] == 1.5
