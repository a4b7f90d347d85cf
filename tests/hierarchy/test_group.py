"""The hierarchy API: Group and group/open_group/open_consolidated, against zarr-python 2's
semantics, the golden group fixtures written by zarr-python 2.18 (every store kind), and
zarr-python 3 reading hierarchies chunkstore writes."""

from __future__ import annotations

import os
import pickle
import shutil
import threading
import warnings

import numpy as np
import pytest

import chunkstore as cs
from model_support import DictMapping
from chunkstore.errors import (ArrayNotFoundError, ContainsArrayError, ContainsGroupError,
                               GroupNotFoundError, ReadOnlyError)
from chunkstore.hierarchy import nodes
from conftest import FIXTURES_V2, assert_same, group_cases_v2
from faults import ReadCounting, run_threads

GROUP_CASES = group_cases_v2()

STORE_KINDS = ["dict", "memory", "directory", "nested", "zip", "sqlite", "lmdb"]


def make_store(kind, tmp_path):
    if kind == "dict":
        return {}
    if kind == "memory":
        return cs.MemoryStore()
    if kind == "directory":
        return cs.DirectoryStore(str(tmp_path / "data.zarr"))
    if kind == "nested":
        return cs.NestedDirectoryStore(str(tmp_path / "nested.zarr"))
    if kind == "zip":
        return cs.ZipStore(str(tmp_path / "data.zip"), mode="w")
    if kind == "sqlite":
        return cs.SQLiteStore(str(tmp_path / "data.sqlite"))
    if kind == "lmdb":
        pytest.importorskip("lmdb")
        return cs.LMDBStore(str(tmp_path / "data.lmdb"))
    raise AssertionError(kind)


@pytest.fixture(params=[2, 3], ids=["v2", "v3"])
def zarr_format(request):
    """Group tests that take it (through root and tree_group) run for Zarr v2 and v3."""
    return request.param


@pytest.fixture
def root(zarr_format):
    return cs.group({}, zarr_format=zarr_format)


def all_paths(grp):
    out = []
    grp.visit(out.append)
    return out


# ------------------------------------------------------------------------------ creation / modes
class TestOpenModes:
    def test_group_creates_then_reopens(self, tmp_path):
        p = str(tmp_path / "g.zarr")
        g = cs.group(p)
        g.attrs["k"] = 1
        g.create_group("sub")
        again = cs.group(p)  # no overwrite: the existing group, untouched
        assert again.keys() == ["sub"]
        assert again.attrs["k"] == 1
        wiped = cs.group(p, overwrite=True)
        assert wiped.keys() == []
        assert dict(wiped.attrs) == {}

    def test_group_at_path_creates_parents(self):
        store = {}
        g = cs.group(store, path="x/y")
        assert g.path == "x/y" and g.name == "/x/y" and g.basename == "y"
        assert cs.open_group(store, mode="r")["x"]["y"] == g

    def test_mode_r_missing_raises(self, tmp_path):
        with pytest.raises(FileNotFoundError):
            cs.open_group(str(tmp_path / "nope.zarr"), mode="r")
        with pytest.raises(FileNotFoundError):
            cs.open_group(str(tmp_path / "nope.zarr"), mode="r+")
        assert not (tmp_path / "nope.zarr").exists()

    def test_mode_r_on_empty_mapping_raises_group_not_found(self):
        with pytest.raises(GroupNotFoundError, match="no group"):
            cs.open_group({}, mode="r")

    def test_mode_r_is_read_only_everywhere(self, tmp_path):
        p = str(tmp_path / "g.zarr")
        g = cs.open_group(p, mode="w")
        g.create_group("sub").zeros("z", shape=3)
        r = cs.open_group(p, mode="r")
        assert r.read_only and r["sub"].read_only and r["sub/z"].read_only
        with pytest.raises(ReadOnlyError):
            r.create_group("x")
        with pytest.raises(ReadOnlyError):
            r.zeros("y", shape=2)
        with pytest.raises(ReadOnlyError):
            del r["sub"]
        with pytest.raises(ReadOnlyError):
            r.attrs["a"] = 1
        with pytest.raises(ReadOnlyError):
            r.move("sub", "other")
        with pytest.raises(ReadOnlyError):
            r["sub/z"][0] = 1
        assert cs.open_group(p, mode="r").keys() == ["sub"]

    def test_mode_r_plus_writes(self, tmp_path):
        p = str(tmp_path / "g.zarr")
        cs.open_group(p, mode="w")
        g = cs.open_group(p, mode="r+")
        g.create_group("new")
        assert "new" in cs.open_group(p, mode="r")

    def test_mode_a_creates_or_keeps(self, tmp_path):
        p = str(tmp_path / "g.zarr")
        g = cs.open_group(p, mode="a")
        g.create_group("kept")
        assert cs.open_group(p, mode="a").keys() == ["kept"]

    def test_mode_w_replaces(self, tmp_path):
        p = str(tmp_path / "g.zarr")
        cs.open_group(p, mode="w").create_group("gone")
        assert cs.open_group(p, mode="w").keys() == []
        assert cs.open_group(p, mode="r").keys() == []

    @pytest.mark.parametrize("mode", ["w-", "x"])
    def test_mode_exclusive(self, tmp_path, mode):
        p = str(tmp_path / "g.zarr")
        cs.open_group(p, mode=mode)
        with pytest.raises(ContainsGroupError):
            cs.open_group(p, mode=mode)

    def test_bad_mode(self):
        with pytest.raises(ValueError, match="mode"):
            cs.open_group({}, mode="rw")

    def test_open_group_on_an_array(self, tmp_path):
        p = str(tmp_path / "a.zarr")
        cs.save_array(p, np.arange(3))
        with pytest.raises(GroupNotFoundError, match="array"):
            cs.open_group(p, mode="r")
        with pytest.raises(ContainsArrayError):
            cs.open_group(p, mode="a")
        with pytest.raises(ContainsArrayError):
            cs.group(p)

    def test_open_returns_array_or_group(self, tmp_path):
        p = str(tmp_path / "g.zarr")
        g = cs.group(p)
        g.array("a", np.arange(4))
        g.create_group("sub")
        assert isinstance(cs.open(p, mode="r"), cs.Group)
        a = cs.open(p, mode="r", path="a")
        assert isinstance(a, cs.Array) and a.read_only
        np.testing.assert_array_equal(a[:], np.arange(4))
        assert isinstance(cs.open(p, mode="r", path="sub"), cs.Group)
        with pytest.raises(FileNotFoundError):
            cs.open(p, mode="r", path="missing")

    def test_context_manager_closes_zip(self, tmp_path):
        p = str(tmp_path / "g.zip")
        with cs.open_group(p, mode="w") as g:
            g.array("a", np.arange(10), chunks=3)
            g.attrs["k"] = "v"
        r = cs.open_group(p, mode="r")
        np.testing.assert_array_equal(r["a"][:], np.arange(10))
        assert r.attrs["k"] == "v"

    def test_pickle_roundtrip(self, tmp_path):
        g = cs.group(str(tmp_path / "g.zarr"))
        g.array("a", np.arange(5))
        h = pickle.loads(pickle.dumps(g))
        assert h.keys() == ["a"]
        np.testing.assert_array_equal(h["a"][:], np.arange(5))


# ------------------------------------------------------------------------------ creating members
class TestCreate:
    def test_create_group_and_nested(self, root):
        a = root.create_group("a")
        assert isinstance(a, cs.Group) and a.path == "a" and a.name == "/a"
        c = root.create_group("x/y/z")
        assert c.name == "/x/y/z"
        assert root.group_keys() == ["a", "x"]
        assert root["x"].group_keys() == ["y"]
        with pytest.raises(ContainsGroupError):
            root.create_group("a")
        assert root.create_group("a", overwrite=True).keys() == []

    def test_create_groups_require_groups(self, root):
        a, b = root.create_groups("a", "b")
        assert (a.name, b.name) == ("/a", "/b")
        a.create_group("inner")
        a2, c = root.require_groups("a", "c")
        assert a2 == a and a2.keys() == ["inner"] and c.name == "/c"

    def test_require_group(self, root):
        g = root.require_group("g")
        g.attrs["x"] = 1
        again = root.require_group("g")
        assert again == g and again.attrs["x"] == 1
        assert root.require_group("a/b/c").name == "/a/b/c"
        root.zeros("arr", shape=2)
        with pytest.raises(ContainsArrayError):
            root.require_group("arr")

    def test_create_dataset_intermediate_groups(self, root):
        z = root.create_dataset("a/b/c", shape=(10, 4), chunks=(5, 2), dtype="i2")
        assert isinstance(z, cs.Array)
        assert (z.name, z.shape, z.chunks, z.dtype) == ("/a/b/c", (10, 4), (5, 2), np.int16)
        assert isinstance(root["a"], cs.Group) and isinstance(root["a/b"], cs.Group)
        assert root["a/b"].array_keys() == ["c"]
        assert all_paths(root) == ["a", "a/b", "a/b/c"]

    def test_create_dataset_with_data(self, root):
        data = np.arange(30, dtype="u2").reshape(5, 6)
        z = root.create_dataset("d", data=data, chunks=(2, 4))
        assert z.dtype == np.uint16 and z.chunks == (2, 4)
        np.testing.assert_array_equal(root["d"][:], data)

    def test_create_dataset_existing(self, root):
        root.create_dataset("d", shape=3)
        with pytest.raises(ContainsArrayError):
            root.create_dataset("d", shape=3)
        assert root.create_dataset("d", shape=4, overwrite=True).shape == (4,)
        root.create_group("g")
        with pytest.raises(ContainsGroupError):
            root.create_dataset("g", shape=3)
        with pytest.raises(ContainsArrayError):
            root.create_dataset("d/under", shape=3)

    def test_require_dataset(self, root):
        z = root.require_dataset("r", shape=(4, 4), dtype="i4", chunks=2)
        z[:] = 7
        same = root.require_dataset("r", shape=(4, 4), dtype="i4")
        assert same == z and same[0, 0] == 7
        assert root.require_dataset("r", shape=(4, 4), dtype="i2").dtype == np.int32
        with pytest.raises(TypeError, match="dtype"):
            root.require_dataset("r", shape=(4, 4), dtype="i2", exact=True)
        with pytest.raises(TypeError, match="dtype"):
            root.require_dataset("r", shape=(4, 4), dtype="f8")
        with pytest.raises(TypeError, match="shape"):
            root.require_dataset("r", shape=(5, 4), dtype="i4")
        new = root.require_dataset("n/e/w", shape=3, dtype="f4")
        assert new.name == "/n/e/w" and new.shape == (3,)

    def test_create_array_zarr3_style(self, root):
        z = root.create_array("ca", shape=(6, 4), dtype="i8", chunks=(3, 2),
                              attributes={"u": "m"}, dimension_names=["y", "x"])
        assert (z.shape, z.dtype, z.chunks) == ((6, 4), np.int64, (3, 2))
        assert z.zarr_format == root.zarr_format and z.attrs["u"] == "m"
        if root.zarr_format == 2:   # xarray's convention: the names in an attribute
            assert z.attrs["_ARRAY_DIMENSIONS"] == ["y", "x"]
        else:                       # v3: in the metadata
            assert z.metadata.dimension_names == ("y", "x") and dict(z.attrs) == {"u": "m"}
        data = np.arange(6, dtype="i2").reshape(2, 3)
        d = root.create_array("sub/cad", data=data)
        assert d.name == "/sub/cad"
        assert_same(d[...], data)  # dtype taken from data
        with pytest.raises(ValueError, match="dtype was not specified"):  # as zarr-python 3
            root.create_array("dflt", shape=3)
        assert "dflt" not in root

    def test_zeros_ones_full_empty(self, root):
        np.testing.assert_array_equal(root.zeros("z", shape=4, chunks=2)[:], np.zeros(4))
        np.testing.assert_array_equal(root.ones("o", shape=(2, 2), dtype="i4")[:],
                                      np.ones((2, 2), "i4"))
        f = root.full("f", fill_value=3.5, shape=5)
        assert f.fill_value == 3.5
        np.testing.assert_array_equal(f[:], np.full(5, 3.5))
        e = root.empty("e", shape=5, dtype="i4")
        # v3 has no null fill value: an empty array's is the data type's zero
        assert e.fill_value == (None if root.zarr_format == 2 else 0) and e.shape == (5,)
        assert root.array_keys() == ["e", "f", "o", "z"]

    def test_array_and_setitem(self, root):
        data = np.linspace(0, 1, 12).reshape(3, 4)
        z = root.array("sub/a", data, chunks=(2, 2))
        assert z.chunks == (2, 2)
        np.testing.assert_array_equal(root["sub/a"][:], data)
        root["sub/b"] = np.arange(3)
        np.testing.assert_array_equal(root["sub"]["b"][:], np.arange(3))
        root["sub/b"] = np.arange(5)  # __setitem__ replaces
        np.testing.assert_array_equal(root["sub/b"][:], np.arange(5))

    def test_like(self, root):
        src = root.array("src", np.arange(12, dtype="i2").reshape(3, 4), chunks=(2, 3))
        zl = root.zeros_like("zl", src)
        assert (zl.shape, zl.dtype, zl.chunks) == ((3, 4), np.int16, (2, 3))
        assert not zl[:].any()
        ol = root.ones_like("ol", src)
        assert (ol[:] == 1).all() and ol.dtype == np.int16
        fl = root.full_like("fl", src, fill_value=9)
        assert (fl[:] == 9).all()
        el = root.empty_like("el", src)
        assert el.shape == (3, 4) and el.dtype == np.int16
        npl = root.ones_like("npl", np.zeros((2, 5), "f4"))
        assert npl.shape == (2, 5) and npl.dtype == np.float32 and (npl[:] == 1).all()


# ------------------------------------------------------------------------------ reading members
@pytest.fixture
def tree_group(zarr_format):
    g = cs.group({}, zarr_format=zarr_format)
    g.attrs["title"] = "root"
    g.array("a", np.arange(10), chunks=5)
    b = g.create_group("b")
    b.array("c", np.ones((2, 2)), chunks=1)
    b.create_group("d").array("e", np.arange(3, dtype="i1"))
    g.create_group("f")
    return g


class TestAccess:
    def test_getitem_paths(self, tree_group):
        g = tree_group
        assert isinstance(g["a"], cs.Array) and g["a"].name == "/a"
        assert isinstance(g["b"], cs.Group)
        assert g["b/d/e"].name == "/b/d/e"
        assert g["b"]["d"]["e"] == g["b/d/e"]
        assert g["/b/d/"].path == "b/d"  # leading/trailing slashes are ignored
        np.testing.assert_array_equal(g["b/d/e"][:], np.arange(3))
        assert g.a == g["a"]  # attribute access, as zarr-python allows

    def test_missing_member_keyerror_names_path(self, tree_group):
        with pytest.raises(KeyError, match="b/zz"):
            tree_group["b/zz"]
        with pytest.raises(KeyError, match="nope"):
            tree_group["nope"]
        with pytest.raises(KeyError):
            tree_group["b"]["missing"]
        with pytest.raises(AttributeError):
            tree_group.nope

    @pytest.mark.parametrize("bad", ["..", ".", "a/../b", "./a", "b/./d", "a\\b"])
    def test_bad_paths_raise_valueerror(self, tree_group, bad):
        g = tree_group
        with pytest.raises(ValueError):
            g[bad]
        with pytest.raises(ValueError):
            g.create_group(bad)
        with pytest.raises(ValueError):
            g.create_dataset(bad, shape=3)
        with pytest.raises(ValueError):
            g.require_group(bad)
        with pytest.raises(ValueError):
            del g[bad]
        assert bad not in g
        with pytest.raises(ValueError):
            cs.group({}, path=bad)
        assert sorted(g.keys()) == ["a", "b", "f"]

    def test_contains(self, tree_group):
        g = tree_group
        for p in ["a", "b", "b/c", "b/d", "b/d/e", "f", "/b/c"]:
            assert p in g, p
        for p in ["x", "b/x", "a/0", "", ".zgroup", "b/c/0.0", 3, None]:
            assert p not in g, p

    def test_iteration_and_lengths(self, tree_group):
        g = tree_group
        assert list(g) == ["a", "b", "f"]
        assert len(g) == 3 and len(g["b"]) == 2 and len(g["f"]) == 0
        assert g.keys() == ["a", "b", "f"]
        assert [v.name for v in g.values()] == ["/a", "/b", "/f"]
        assert [(k, v.name) for k, v in g.items()] == [("a", "/a"), ("b", "/b"), ("f", "/f")]
        assert set(g.members) == {"a", "b", "f"} and g.members["a"] == g["a"]

    def test_arrays_groups_keys(self, tree_group):
        g = tree_group
        assert g.array_keys() == ["a"]
        assert g.group_keys() == ["b", "f"]
        assert [(k, v.name) for k, v in g.arrays()] == [("a", "/a")]
        assert [(k, v.name) for k, v in g.groups()] == [("b", "/b"), ("f", "/f")]
        assert g["b"].array_keys() == ["c"] and g["b"].group_keys() == ["d"]
        # As zarr-python 2: each array by its own name, subgroups walked in sorted order.
        assert g.array_keys(recurse=True) == ["a", "c", "e"]
        assert [(k, v.name) for k, v in g.arrays(recurse=True)] == [
            ("a", "/a"), ("c", "/b/c"), ("e", "/b/d/e")]

    def test_visit(self, tree_group):
        g = tree_group
        expected = ["a", "b", "b/c", "b/d", "b/d/e", "f"]
        assert all_paths(g) == expected
        seen = []
        assert g.visitkeys(seen.append) is None and seen == expected
        names = []
        g.visitvalues(lambda v: names.append(v.name))
        assert names == ["/" + p for p in expected]
        pairs = []
        g.visititems(lambda p, v: pairs.append((p, type(v).__name__)))
        assert pairs == [("a", "Array"), ("b", "Group"), ("b/c", "Array"), ("b/d", "Group"),
                         ("b/d/e", "Array"), ("f", "Group")]
        # Relative to the group visited.
        assert all_paths(g["b"]) == ["c", "d", "d/e"]

    def test_visit_stops_at_first_result(self, tree_group):
        g = tree_group
        seen = []

        def find(p):
            seen.append(p)
            return p if p.endswith("d") else None
        assert g.visit(find) == "b/d"
        assert seen == ["a", "b", "b/c", "b/d"]
        assert g.visitvalues(lambda v: v.shape if isinstance(v, cs.Array) and v.ndim == 2
                             else None) == (2, 2)
        assert g.visititems(lambda p, v: p if isinstance(v, cs.Group) and not len(v)
                            else None) == "f"

    def test_delitem(self, tree_group):
        g = tree_group
        del g["b/d"]
        assert "b/d" not in g and "b/d/e" not in g and g["b"].keys() == ["c"]
        del g["a"]
        assert g.keys() == ["b", "f"]
        assert not [k for k in g.store if k.startswith("a/") or k.startswith("b/d")]
        with pytest.raises(KeyError, match="a"):
            del g["a"]

    def test_attrs(self, tree_group):
        g = tree_group
        assert dict(g.attrs) == {"title": "root"}
        g["b"].attrs.update({"n": [1, 2.5, None], "s": "☃"})
        g["b/c"].attrs["units"] = "m"
        again = cs.open_group(g.store, mode="r")
        assert again["b"].attrs.asdict() == {"n": [1, 2.5, None], "s": "☃"}
        assert again["b/c"].attrs["units"] == "m"
        assert dict(again["f"].attrs) == {}
        del g["b"].attrs["n"]
        assert dict(cs.open_group(g.store, mode="r")["b"].attrs) == {"s": "☃"}

    def test_info(self, tree_group):
        text = repr(tree_group.info)
        rows = dict(line.split(" : ", 1) for line in text.splitlines())
        rows = {k.strip(): v.strip() for k, v in rows.items()}
        assert rows["Name"] == "/"
        assert rows["No. members"] == "3"
        assert rows["No. arrays"] == "1" and rows["No. groups"] == "2"
        assert rows["Arrays"] == "a" and rows["Groups"] == "b, f"
        html = tree_group["b"].info._repr_html_()
        assert "<table" in html and "/b" in html

    def test_equality(self, tree_group):
        g = tree_group
        assert g["b"] == g["b"] and hash(g["b"]) == hash(g["b"])
        assert g["b"] != g["f"]
        # handles on the same path of equal stores are equal (a pickled copy too), as in
        # zarr-python 3, where two fresh in-memory groups compare equal
        assert cs.group({}) == cs.group({})
        other = cs.group({})
        other.attrs["x"] = 1
        assert cs.group({}) != other


class TestTree:
    def test_text(self, tree_group):
        expected = "\n".join([
            "/",
            "├── a (10,) int64",
            "├── b",
            "│   ├── c (2, 2) float64",
            "│   └── d",
            "│       └── e (3,) int8",
            "└── f",
        ])
        assert repr(tree_group.tree()) == expected
        assert str(tree_group.tree()) == expected
        assert str(cs.tree(tree_group)) == expected

    def test_subgroup_and_level(self, tree_group):
        assert repr(tree_group["b"].tree()) == "\n".join([
            "/b",
            "├── c (2, 2) float64",
            "└── d",
            "    └── e (3,) int8",
        ])
        assert repr(tree_group.tree(level=1)) == "\n".join(
            ["/", "├── a (10,) int64", "├── b", "└── f"])
        assert repr(cs.group({}).tree()) == "/"

    def test_html(self, tree_group):
        tree_group.create_group("<x&y>")
        html = tree_group.tree()._repr_html_()
        assert html.count("<li>") == 7
        for name in ("a", "b", "c", "d", "e", "f"):
            assert f">{name}" in html or f"<li>{name} " in html
        assert "&lt;x&amp;y&gt;" in html and "<x&y>" not in html
        assert "(10,) int64" in html


class TestMove:
    @pytest.mark.parametrize("kind", STORE_KINDS)
    def test_move_array_and_group(self, tmp_path, kind):
        store = make_store(kind, tmp_path)
        g = cs.group(store)
        data = np.arange(20).reshape(4, 5)
        a = g.create_dataset("x/y", data=data, chunks=(2, 2))
        a.attrs["u"] = 1
        g.move("x/y", "p/q/r")
        assert "x/y" not in g and isinstance(g["p/q"], cs.Group)
        np.testing.assert_array_equal(g["p/q/r"][:], data)
        assert g["p/q/r"].attrs["u"] == 1
        g.move("p", "pp")
        assert "p" not in g
        np.testing.assert_array_equal(g["pp/q/r"][:], data)
        assert sorted(g.keys()) == ["pp", "x"]
        # Relative to a subgroup.
        g["pp"].move("q", "moved")
        assert g["pp"].keys() == ["moved"]
        np.testing.assert_array_equal(g["pp/moved/r"][:], data)
        store.close() if hasattr(store, "close") else None

    @pytest.mark.parametrize("kind", ["dict", "directory", "sqlite"])
    def test_move_into_own_subtree_is_refused(self, tmp_path, kind):
        # Moving a node below itself must fail and keep the data, not delete it.
        g = cs.group(make_store(kind, tmp_path))
        g.create_group("a").array("x", np.arange(4), chunks=2)
        with pytest.raises(ValueError):
            g.move("a", "a/b")
        with pytest.raises((ValueError, FileExistsError)):
            g.move("a", "a")
        assert all_paths(g) == ["a", "a/x"]
        np.testing.assert_array_equal(g["a/x"][:], np.arange(4))

    @pytest.mark.parametrize("overwrite", [False, True])
    @pytest.mark.parametrize("kind", ["dict", "directory"])
    def test_a_creation_at_the_destination_during_a_move_waits_for_it(
            self, tmp_path, monkeypatch, kind, overwrite):
        # A creation at dest, run in the window between the move's check that dest is free
        # and its copy, used to succeed as well: the moved chunks mixed with the new
        # document (read as its fill value, or undecodable), or were deleted with it. Now
        # the creation waits for the move (both hold dest's creation lock), then is
        # refused or replaces what was moved: one serial order or the other.
        from chunkstore.hierarchy import creation
        root = cs.open_group(make_store(kind, tmp_path), mode="w", zarr_format=3)
        root.create_array("a", shape=(8,), chunks=(2,), dtype="i4", fill_value=0)[...] = \
            np.arange(1, 9)
        checked, created = threading.Event(), threading.Event()
        write_parents = creation._write_parent_groups

        def pausing(*args, **kwargs):  # (called by the move after its checks of dest)
            if threading.current_thread().name == "mover":
                checked.set()
                created.wait(1.0)  # (the creator's chance: with the fix it waits for us)
            return write_parents(*args, **kwargs)

        monkeypatch.setattr(creation, "_write_parent_groups", pausing)
        errors = {}

        def create():
            checked.wait(5)
            try:
                root.create_array("b", shape=(3,), chunks=(3,), dtype="i4", fill_value=9,
                                  overwrite=overwrite)
            except Exception as e:  # noqa: BLE001 - looked at below
                errors["create"] = e
            created.set()

        creator = threading.Thread(target=create)
        mover = threading.Thread(target=lambda: root.move("a", "b"), name="mover")
        creator.start()
        mover.start()
        mover.join(10)
        creator.join(10)
        if overwrite:  # the move first, then the creation replaced what it moved
            assert "a" not in root
            np.testing.assert_array_equal(root["b"][...], [9, 9, 9])
        else:          # the move first; the creation finds b there
            assert isinstance(errors.get("create"), ContainsArrayError)
            assert "a" not in root
            np.testing.assert_array_equal(root["b"][...], np.arange(1, 9))

    @pytest.mark.parametrize("moves", [(("c", "b/x"), ("c", "b")),
                                       (("c", "b"), ("c", "b/x")),
                                       (("c", "b/x/y"), ("d", "b/x"))])
    def test_moves_whose_locks_cross_do_not_wait_for_each_other(self, monkeypatch, moves):
        """A move took the creation locks of its paths in path order, then those of the
        groups it writes above dest: move('c', 'b/x') held b/x and c and waited for b, which
        move('c', 'b') held while it waited for c. Each lock is now held a while (a pause
        after taking it) to force the interleaving; both moves end, one of them refused."""
        import contextlib
        import time
        from chunkstore.hierarchy import creation
        real = creation.creation_lock

        @contextlib.contextmanager
        def slow(sync, key, store=None):
            with real(sync, key, store):
                time.sleep(0.1)
                yield

        monkeypatch.setattr(creation, "creation_lock", slow)
        g = cs.group(store=cs.MemoryStore(), zarr_format=2)
        for name in ("c", "d"):
            g.create_array(name, shape=(2,), chunks=(2,), dtype="i4")[...] = 1
        done = {}

        def move(k):
            try:
                g.move(*moves[k])
                done[k] = "moved"
            except Exception as e:  # noqa: BLE001 - looked at below
                done[k] = type(e).__name__

        threads = [threading.Thread(target=move, args=(k,), daemon=True) for k in (0, 1)]
        threads[0].start()
        time.sleep(0.05)
        threads[1].start()
        for t in threads:
            t.join(20)
        assert not any(t.is_alive() for t in threads), f"the moves wait for each other: {done}"
        assert "moved" in done.values()

    def test_move_errors(self, tree_group):
        g = tree_group
        with pytest.raises(ValueError, match="nope"):   # zarr-python 2's ValueError
            g.move("nope", "x")
        with pytest.raises(cs.errors.PathNotFoundError):
            g.move("nope", "x")
        with pytest.raises(FileExistsError):
            g.move("a", "f")
        with pytest.raises(ValueError):
            g.move("a", "../x")
        assert all_paths(g) == ["a", "b", "b/c", "b/d", "b/d/e", "f"]


# ------------------------------------------------------------------------------ every store kind
@pytest.mark.parametrize("kind", STORE_KINDS)
def test_hierarchy_roundtrip_every_store(tmp_path, kind):
    store = make_store(kind, tmp_path)
    g = cs.group(store)
    g.attrs["root"] = True
    g.array("a", np.arange(12).reshape(3, 4), chunks=(2, 2))
    sub = g.create_group("s/t")
    sub.attrs["n"] = [1, 2]
    sub.array("b", np.linspace(0, 1, 7), chunks=3)
    assert all_paths(g) == ["a", "s", "s/t", "s/t/b"]
    if hasattr(store, "close"):
        store.close()
    if kind in ("dict", "memory"):
        reopened = cs.open_group(store, mode="r")
    else:
        path = {"directory": "data.zarr", "nested": "nested.zarr", "zip": "data.zip",
                "sqlite": "data.sqlite", "lmdb": "data.lmdb"}[kind]
        reopened = cs.open_group(str(tmp_path / path), mode="r")
    assert all_paths(reopened) == ["a", "s", "s/t", "s/t/b"]
    assert reopened.attrs["root"] is True and reopened["s/t"].attrs["n"] == [1, 2]
    np.testing.assert_array_equal(reopened["a"][:], np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(reopened["s/t/b"][:], np.linspace(0, 1, 7))


# ------------------------------------------------------------------------------ golden fixtures
def _fixture_ids(cases):
    return [c["name"] for c in cases]


def _check_fixture(g, case):
    expected = np.load(FIXTURES_V2 / case["expected"])
    arrays, groups = [], [""]
    g.visititems(lambda p, v: (arrays if isinstance(v, cs.Array) else groups).append(p))
    assert sorted(arrays) == sorted(case["arrays"])
    assert sorted(groups) == sorted(case["groups"])
    for path, attrs in case["attrs"].items():
        node = g[path] if path else g
        assert node.attrs.asdict() == attrs, path
    for path in case["arrays"]:
        assert_same(g[path][...], expected[path.replace("/", "__")])
    assert g.read_only
    return arrays


@pytest.mark.skipif(not GROUP_CASES, reason=f"no fixtures at {FIXTURES_V2}")
@pytest.mark.parametrize("case", GROUP_CASES, ids=_fixture_ids(GROUP_CASES))
def test_fixture_hierarchy(case):
    g = cs.open_group(str(FIXTURES_V2 / case["path"]), mode="r")
    _check_fixture(g, case)
    text = repr(g.tree())
    assert text.startswith("/\n") and "── a (10, 10) int32" in text
    assert all(("── " + p.rsplit("/", 1)[-1]) in text for p in case["groups"] if p)
    assert isinstance(cs.open(str(FIXTURES_V2 / case["path"]), mode="r"), cs.Group)
    if hasattr(g.store, "close"):
        g.store.close()


CONSOLIDATED = [c for c in GROUP_CASES if c["consolidated"]]


@pytest.mark.skipif(not CONSOLIDATED, reason="no consolidated group fixture")
@pytest.mark.parametrize("case", CONSOLIDATED, ids=_fixture_ids(CONSOLIDATED))
def test_fixture_open_consolidated(case, tmp_path):
    g = cs.open_consolidated(str(FIXTURES_V2 / case["path"]), mode="r")
    _check_fixture(g, case)
    # The metadata really comes from .zmetadata: delete the per-node documents of a copy.
    copy = tmp_path / "copy.zarr"
    shutil.copytree(FIXTURES_V2 / case["path"], copy)
    for p in list(copy.rglob(".zattrs")) + list(copy.rglob(".zgroup")) + \
            list(copy.rglob(".zarray")):
        p.unlink()
    with pytest.raises(FileNotFoundError):
        cs.open_group(str(copy), mode="r")
    _check_fixture(cs.open_consolidated(str(copy), mode="r"), case)


def test_open_consolidated_r_plus_writes_chunks_not_metadata(tmp_path):
    p = str(tmp_path / "c.zarr")
    g = cs.group(p)
    g.create_group("sub").array("y", np.arange(5), chunks=2)
    cs.consolidate_metadata(p)
    c = cs.open_consolidated(p, mode="r+")
    assert not c.read_only and "sub/y" in c
    c["sub/y"][0] = 9  # chunks pass through to the store
    np.testing.assert_array_equal(cs.open(p, mode="r", path="sub/y")[:], [9, 1, 2, 3, 4])
    with pytest.raises(ReadOnlyError):
        c.create_group("new")  # metadata changes are refused
    with pytest.raises(ReadOnlyError):
        c.attrs["k"] = 1
    r = cs.open_consolidated(p, mode="r")
    with pytest.raises(ReadOnlyError):
        r["sub/y"][0] = 1
    assert r["sub/y"][0] == 9
    # modes that would create or replace are refused (zarr-python 2's ValueError), and the
    # hierarchy is as it was; they opened it "r+" before
    before = sorted(os.listdir(p))
    for mode in ("a", "w", "w-", "x", "q"):
        with pytest.raises(ValueError, match=f"expected either 'r' or 'r\\+'; found '{mode}'"):
            cs.open_consolidated(p, mode=mode)
    assert sorted(os.listdir(p)) == before and cs.open(p, mode="r", path="sub/y")[0] == 9


@pytest.mark.skipif(not GROUP_CASES, reason=f"no fixtures at {FIXTURES_V2}")
def test_fixture_copy_is_writable(tmp_path):
    case = next(c for c in GROUP_CASES if c["store"] == "zarr" and not c["consolidated"])
    copy = tmp_path / "copy.zarr"
    shutil.copytree(FIXTURES_V2 / case["path"], copy)
    g = cs.open_group(str(copy), mode="r+")
    g["empty"].array("new", np.arange(3))
    g["a"][0, 0] = -1
    r = cs.open_group(str(copy), mode="r")
    assert r["a"][0, 0] == -1 and r["empty"].array_keys() == ["new"]
    assert r.attrs.asdict() == case["attrs"][""]


# ------------------------------------------------------------------------------ zarr-python 3
def _zarr():
    zarr = pytest.importorskip("zarr")
    return zarr


def _write_hierarchy(store):
    g = cs.group(store)
    g.attrs.update({"title": "root ☃", "n": 3})
    a = g.array("a", np.arange(100, dtype="i4").reshape(10, 10), chunks=(3, 4))
    a.attrs["units"] = "m"
    g.create_group("g1/g2").attrs["nested"] = {"k": [1, 2.5, None]}
    g["g1/g2"].array("b", np.linspace(0, 1, 50), chunks=7, fill_value=np.nan)
    g.create_group("empty")
    return g


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("layout", ["directory", "nested", "zip", "consolidated"])
def test_zarr3_reads_chunkstore_hierarchy(tmp_path, layout):
    zarr = _zarr()
    if layout == "zip":
        path = str(tmp_path / "h.zip")
        with cs.ZipStore(path, mode="w") as store:
            _write_hierarchy(store)
        zstore = zarr.storage.ZipStore(path, mode="r")
    else:
        path = str(tmp_path / "h.zarr")
        store = cs.NestedDirectoryStore(path) if layout == "nested" else cs.DirectoryStore(path)
        _write_hierarchy(store)
        if layout == "consolidated":
            cs.consolidate_metadata(path)
        zstore = path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if layout == "consolidated":
            zg = zarr.open_consolidated(zstore, zarr_format=2)
        else:
            zg = zarr.open_group(zstore, mode="r", zarr_format=2)
        found = {}
        for p, v in zg.members(max_depth=None):
            found[p] = "array" if isinstance(v, zarr.Array) else "group"
        assert found == {"a": "array", "empty": "group", "g1": "group", "g1/g2": "group",
                         "g1/g2/b": "array"}
        assert dict(zg.attrs) == {"title": "root ☃", "n": 3}
        assert dict(zg["a"].attrs) == {"units": "m"}
        assert dict(zg["g1/g2"].attrs) == {"nested": {"k": [1, 2.5, None]}}
        np.testing.assert_array_equal(zg["a"][...], np.arange(100, dtype="i4").reshape(10, 10))
        np.testing.assert_array_equal(zg["g1/g2/b"][...], np.linspace(0, 1, 50))
        assert zg["a"].chunks == (3, 4) and zg["g1/g2/b"].chunks == (7,)
    if layout == "zip":
        zstore.close()


def test_listing_a_consolidated_hierarchy_looks_at_each_member_once(monkeypatch):
    """arrays(), items(), groups() and group_keys() decide each member's kind from one look
    (they looked two or three times: a cost per member of big hierarchies, issue 30)."""
    from chunkstore.hierarchy import group as group_module
    g = cs.group(cs.MemoryStore(), zarr_format=3)
    for i in range(5):
        g.create_array(f"a{i}", shape=(2,), dtype="i1")
    g.create_group("sub").create_array("x", shape=(2,), dtype="i1")
    calls = []
    real = group_module.Group._member
    monkeypatch.setattr(group_module.Group, "_member",
                        lambda self, path: calls.append(path) or real(self, path))
    assert [k for k, _ in g.arrays()] == [f"a{i}" for i in range(5)]
    assert len(calls) == len(set(calls)) and {f"a{i}" for i in range(5)} | {"sub"} <= set(calls)
    calls.clear()
    assert [k for k, _ in g.items()] == [f"a{i}" for i in range(5)] + ["sub"]
    assert len(calls) == len(set(calls))            # (the listing's "zarr.json" looked at too)
    assert g.group_keys() == ["sub"] and [k for k, _ in g.groups()] == ["sub"]
    assert [k for k, _ in g.arrays(recurse=True)] == [f"a{i}" for i in range(5)] + ["x"]


# ---------------------------------------------------------------- found by the hierarchy model
# (tests/hierarchy/test_hierarchy_model.py)

def test_open_with_use_consolidated_opens_the_group_or_the_array_in_every_mode(tmp_path):
    # zarr-python 3's open passes use_consolidated to the group; an array ignores it
    path = str(tmp_path / "h.zarr")
    g = cs.open_group(path, mode="w", zarr_format=2)
    g.create_group("a")
    g.zeros("z", shape=(3,))
    cs.consolidate_metadata(path)
    for mode in ("r", "r+", "a"):
        got = cs.open(path, mode=mode, use_consolidated=True)
        assert isinstance(got, cs.Group) and sorted(got) == ["a", "z"]
        z = cs.open(path, mode=mode, path="z", use_consolidated=True)
        assert isinstance(z, cs.Array) and z.shape == (3,)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("how", ["create_group", "require_group", "open_group_w"])
def test_a_group_refused_below_an_array_deletes_nothing(zarr_format, how):
    # v3 chunk keys lie below the array's path ("x/c/0"): a group "x/c" created with
    # overwrite=True used to delete them before the parent check refused it
    store = cs.MemoryStore()
    g = cs.group(store, zarr_format=zarr_format)
    g.array("x", np.arange(1, 7, dtype="i4"), chunks=(3,))
    before = dict(store)
    inner = "x/c" if zarr_format == 3 else "x/0"
    with pytest.raises(ContainsArrayError):
        if how == "create_group":
            g.create_group(inner, overwrite=True)
        elif how == "require_group":
            g.require_group(inner, overwrite=True)
        else:
            cs.open_group(store, mode="w", path=inner)
    assert dict(store) == before
    np.testing.assert_array_equal(g["x"][:], np.arange(1, 7))


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("how", ["del", "move"])
def test_attributes_of_a_node_removed_by_another_handle_are_not_written(zarr_format, how):
    # v2 wrote an orphan .zattrs that the next node made at the path inherited; v3 raised a
    # bare KeyError (zarr-python 3 rewrites the document: the node comes back)
    store = cs.MemoryStore()
    g = cs.group(store, zarr_format=zarr_format)
    h = g.create_group("a")
    z = g.zeros("z", shape=(2,))
    if how == "del":
        del g["a"], g["z"]
    else:
        g.move("a", "b")
        g.move("z", "y")
    before = dict(store)
    with pytest.raises(GroupNotFoundError, match="path 'a'.*removed or moved"):
        h.attrs["k"] = 1
    with pytest.raises(GroupNotFoundError):
        h.attrs.update(k=1)
    with pytest.raises(ArrayNotFoundError, match="path 'z'"):
        z.attrs.put({"k": 1})
    assert dict(store) == before
    assert g.create_group("a").attrs.asdict() == {}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_group_handle_does_not_write_the_attributes_of_an_array_made_at_its_path(
        zarr_format):
    store = cs.MemoryStore()
    g = cs.group(store, zarr_format=zarr_format)
    h = g.create_group("a")
    del g["a"]
    g.zeros("a", shape=(1,))
    with pytest.raises(GroupNotFoundError):
        h.attrs["k"] = 1
    assert g["a"].attrs.asdict() == {}


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("what", ["array", "group"])
def test_creation_probes_each_level_above_once(zarr_format, what):
    # each missing level costs one probe of its documents (3 reads: zarr.json, .zarray,
    # .zgroup) to find it missing (and refuse an array above), and one more under its
    # creation lock before its group is written (a node made there meanwhile is not
    # written over): not one to refuse an array above, one to find it missing and more
    def reads(depth):
        store = ReadCounting()
        cs.group(store, zarr_format=zarr_format)
        name = "/".join("abcdefgh"[:depth])
        store.reads = 0
        if what == "array":
            cs.create_array(store, name=name, shape=(4,), dtype="i4", zarr_format=zarr_format)
        else:
            cs.open_group(store, mode="w", path=name, zarr_format=zarr_format)
        assert nodes.node_kind(store, name)[0] == what
        return store.reads
    assert reads(5) - reads(1) <= 2 * 3 * 4


def test_new_nodes_take_the_format_of_the_group_above_them(tmp_path):
    """zarr-python 2's names create Zarr v2 unless told, except below an existing group:
    there a node takes that group's format (one hierarchy, one format: a v2 node under a
    v3 root is invisible to zarr-python 3's traversal and its consolidated metadata). An
    explicit zarr_format, or the configured default_zarr_format, still wins."""
    import zarr
    for root_fmt in (2, 3):
        path = str(tmp_path / f"r{root_fmt}.zarr")
        cs.open_group(path, mode="w", zarr_format=root_fmt)
        made = {"open_group": cs.open_group(path, path="g1", mode="a"),
                "deep": cs.open_group(path, path="g1/x/y", mode="a"),
                "group": cs.group(path, path="g2"),
                "open_array": cs.open_array(path, path="a1", mode="a", shape=(3,), dtype="i4"),
                "create": cs.create(store=path, path="g1/a2", shape=(3,), dtype="i4"),
                "zeros": cs.zeros((2,), store=path, path="g2/a3")}
        assert {k: n.zarr_format for k, n in made.items()} == dict.fromkeys(made, root_fmt)
        assert cs.open_group(path, path="e", mode="a", zarr_format=5 - root_fmt) \
            .zarr_format == 5 - root_fmt
        with cs.config.set({"default_zarr_format": 5 - root_fmt}):
            assert cs.open_group(path, path="c", mode="a").zarr_format == 5 - root_fmt
        # shards= (like dimension_names=, codecs=) asks for Zarr v3 whatever the group above
        assert cs.create(store=path, path="s", shape=(8,), chunks=(2,), shards=(4,),
                         dtype="i4").zarr_format == 3
        assert cs.open_array(path, path="s2", mode="w", shape=(8,), chunks=(2,),
                             shards=(4,), dtype="i4").zarr_format == 3
        if root_fmt == 3:  # zarr-python 3 finds every member from the root
            tree = zarr.open_group(path, mode="r")
            assert {"a1", "g1", "g1/a2", "g1/x", "g1/x/y", "g2", "g2/a3"} <= \
                {k for k, _ in tree.members(max_depth=None)}
    fresh = str(tmp_path / "fresh.zarr")
    assert cs.open_group(fresh, path="x/y", mode="a").zarr_format == 2
    assert cs.open_group(fresh, mode="r").zarr_format == 2


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("kind", ["memory", "directory"])
def test_handles_opened_before_a_delete_move_or_replace_never_write_the_old_layout(
        tmp_path, fmt, kind):
    """A handle opened before another handle of the process deleted, moved or re-created
    its array (with another dtype and chunks): its next write fails where no array is left
    (it used to store orphan chunks, which the next array at that path then showed), or is
    planned by the new array's metadata (it used to store the old layout's bytes, read as
    the new dtype: 1.5e-313 for 7). Writes through the old handle during the change finish
    before it."""
    def store():
        return cs.MemoryStore() if kind == "memory" else cs.DirectoryStore(str(tmp_path / "s"))
    st = store()
    g = cs.open_group(st, mode="w", zarr_format=fmt)
    g2 = cs.open_group(st if kind == "memory" else store(), mode="r+")
    old = g.zeros("a", shape=(40,), chunks=(20,), dtype="i4", compressor=None)
    del g2["a"]
    with pytest.raises(cs.errors.ArrayNotFoundError):
        old[0:20] = 7
    new = g2.zeros("a", shape=(40,), chunks=(10,), dtype="f8", compressor=None)
    np.testing.assert_array_equal(new[...], 0)            # no orphan chunk shows
    old = g["a"]
    g2.zeros("a", shape=(40,), chunks=(20,), dtype="i4", compressor=None, overwrite=True)
    stale = old  # (f8, chunks of 10: the array is i4 with chunks of 20 now)
    stale[0:10] = 7.0
    want = np.zeros(40, "i4")
    want[0:10] = 7
    np.testing.assert_array_equal(g2["a"][...], want)
    assert g2["a"].dtype == np.dtype("i4")
    moved = g["a"]
    g2.move("a", "b")
    with pytest.raises(cs.errors.ArrayNotFoundError):
        moved[0:5] = 1
    np.testing.assert_array_equal(g2["b"][...], want)
    assert "a" not in g2


@pytest.mark.parametrize("sync", [None, "thread"])
@pytest.mark.parametrize("fmt", [2, 3])
def test_a_parent_group_written_on_the_way_never_overwrites_an_array_made_meanwhile(
        monkeypatch, fmt, sync):
    """create_group("t/x") found no node at t and wrote the group t on the way, with no
    lock and no second look: an array created at t meanwhile had its document overwritten
    by a group's (v3; v2 kept both documents) above its chunks. The parent group is now
    written under t's creation lock (one lock per path, whatever the kind), looked at again
    there: the array stands and the group's creation is refused."""
    import threading

    from chunkstore.hierarchy import creation

    store = cs.MemoryStore()
    root = cs.group(store, zarr_format=fmt,
                    synchronizer=cs.ThreadSynchronizer() if sync else None)
    real, checked, made = creation._check_parents, threading.Event(), threading.Event()

    def slow_check(st, path):
        missing = real(st, path)
        if path.endswith("/x"):
            checked.set()
            assert made.wait(10)   # the array at t is created in this window
        return missing

    monkeypatch.setattr(creation, "_check_parents", slow_check)
    errors = []

    def make_group():
        try:
            root.create_group("t/x")
        except Exception as e:  # noqa: BLE001 - checked below
            errors.append(e)

    t = threading.Thread(target=make_group)
    t.start()
    assert checked.wait(10)
    a = root.create_array("t", shape=(4,), chunks=(2,), dtype="i4")
    a[:] = [1, 2, 3, 4]
    made.set()
    t.join()
    assert len(errors) == 1 and isinstance(errors[0], cs.errors.ContainsArrayError)
    again = cs.open_group(store, mode="r")
    assert isinstance(again["t"], cs.Array) and again["t"][:].tolist() == [1, 2, 3, 4]
    assert "t/x" not in again


@pytest.mark.parametrize("fmt", [2, 3])
def test_threads_requiring_one_group_all_get_it(monkeypatch, fmt):
    """Without a synchronizer, creation holds this process's locks of the node: threads
    (or asyncio tasks) requiring one group at once all get it (they all passed the check
    and all but one raised ContainsGroupError)."""
    import time

    from chunkstore.hierarchy import creation

    real = creation._check_parents

    def slow_check(*args, **kwargs):
        time.sleep(0.05)   # the window between the look for a group there and the write
        return real(*args, **kwargs)

    monkeypatch.setattr(creation, "_check_parents", slow_check)
    root = cs.group(cs.MemoryStore(), zarr_format=fmt)
    got = run_threads([(lambda: root.require_group("g/sub").path, ())] * 6)
    assert got == ["g/sub"] * 6


@pytest.mark.parametrize("fmt", [2, 3])
def test_listing_members_skips_one_removed_meanwhile(monkeypatch, fmt):
    """A member removed between the listing and its opening is left out of members(),
    items(), values(), arrays(), groups() and visits (as zarr-python 3 leaves it out):
    they raised ArrayNotFoundError."""
    root = cs.group(cs.MemoryStore(), zarr_format=fmt)
    root.create_array("a", shape=(2,), dtype="i4")
    root.create_array("gone", shape=(2,), dtype="i4")
    root.create_group("h")
    real = type(root)._member_kinds

    def listed_then_removed(self):
        listed = real(self)
        if any(k[0] == "gone" for k in listed) and "gone" in root:
            del root["gone"]
        return listed

    monkeypatch.setattr(type(root), "_member_kinds", listed_then_removed)
    assert [k for k, _ in root.items()] == ["a", "h"]
    root.create_array("gone", shape=(2,), dtype="i4")
    assert [k for k, _ in root.arrays()] == ["a"]
    root.create_array("gone", shape=(2,), dtype="i4")
    assert list(root.members) == ["a", "h"]
    root.create_array("gone", shape=(2,), dtype="i4")
    seen = []
    root.visitkeys(seen.append)
    assert seen == ["a", "h"]


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("how", ["synchronizer", "consolidated"])
def test_a_write_to_an_array_another_library_replaced_by_a_group_names_it(tmp_path, fmt, how):
    """A write through a handle whose array zarr-python replaced by a group meanwhile (so
    that no in-process count tells the handle): the write's check of the stored document
    parsed a v3 group's zarr.json as array metadata and raised AttributeError ('dict' object
    has no attribute 'to_dict'). Now ArrayNotFoundError, as for v2, and nothing written."""
    import zarr
    d = str(tmp_path / "s.zarr")
    g = cs.open_group(d, mode="w", zarr_format=fmt)
    g.create_array("x", shape=(10,), chunks=(5,), dtype="f8")[...] = np.arange(10.0)
    if how == "synchronizer":
        a = cs.open_array(d, path="x", synchronizer=cs.ProcessSynchronizer(
            str(tmp_path / "locks")))
    else:
        cs.consolidate_metadata(d)
        a = cs.open_consolidated(d, mode="r+")["x"]
    a[...]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zg = zarr.open_group(d, mode="a", use_consolidated=False)
        del zg["x"]
        zg.create_group("x")
    with pytest.raises(ArrayNotFoundError, match="'x'"):
        a[0:5] = -1
    store = cs.DirectoryStore(d)
    assert nodes.node_kind(store, "x")[0] == "group"
    assert not {"x/0", "x/c/0"} & set(store.keys())  # no chunk written into the group


class _DeletesAfterRead(DictMapping):
    """A dict store that deletes node `gone` right after the n-th read of key `at` (what
    another handle's delete does between a listing and the read of a member)."""

    def __init__(self):
        self.d, self.trigger = {}, None

    def __getitem__(self, k):
        v = self.d[k]
        if self.trigger is not None and k == self.trigger[0]:
            self.trigger[1] -= 1
            if self.trigger[1] == 0:
                for x in [x for x in self.d if x.startswith(self.trigger[2] + "/")]:
                    del self.d[x]
                self.trigger = None
        return v


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("gone", ["a", "g"])
def test_tree_leaves_out_a_member_deleted_while_it_is_drawn(fmt, gone):
    # tree() raised MetadataError ("invalid array metadata") for an array deleted after the
    # listing, and a bare KeyError for such a group; items() and the others leave it out
    doc = {2: {"a": "a/.zarray", "g": "g/.zgroup"}, 3: {"a": "a/zarr.json",
                                                        "g": "g/zarr.json"}}[fmt][gone]
    st = _DeletesAfterRead()
    root = cs.open_group(st, mode="w", zarr_format=fmt)
    root.create_dataset("a", shape=(4,), dtype="i4")
    root.create_group("g").create_dataset("z", shape=(2,), dtype="i4")
    reads = {"a": 2, "g": 3}[gone]  # (the read that classifies it, then the one that opens it)
    st.trigger = [doc, reads, gone]
    text = repr(root.tree())
    assert st.trigger is None  # (the member was deleted during the drawing)
    names = [line.split("── ")[1].split()[0] for line in text.splitlines()[1:]]
    assert names == (["g", "z"] if gone == "a" else ["a"])


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_move_through_a_consolidated_snapshot_onto_a_node_made_since_is_read_only(fmt):
    # the snapshot did not show the array made since, so its chunks seemed keys of no
    # node: StrayChunksError, "left by a delete that failed?" (found by the hierarchy model).
    # A node this process made since the snapshot is now seen through it: the destination
    # is taken.
    s = cs.MemoryStore()
    root = cs.open_group(s, mode="w", zarr_format=fmt)
    root.create_group("a")
    snap = cs.consolidate_metadata(s)
    root["0"] = np.arange(5)
    before = dict(s.items())
    with pytest.raises(ContainsArrayError, match="something is there"):
        snap.move("a", "0")
    assert dict(s.items()) == before


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_group_move_and_a_member_delete_in_two_threads_take_turns(tmp_path, fmt):
    """Group.move("g", "h") and del g2["g/old"] in two threads each held only their own
    node's locks: both returned with the deleted member moved along to h/old (no order of
    the two gives that), or the move failed with a bare KeyError of a key deleted under
    it. A delete or move now holds the groups above its node too, and the delete looks for
    its node again under them: one runs first, the other sees what it did."""
    import threading
    path = str(tmp_path / "g.zarr")
    seen = set()
    for _ in range(40):
        r = cs.open_group(path, mode="w", zarr_format=fmt)
        r.create_dataset("g/a", shape=(20,), chunks=(4,), dtype="i4")[:] = 1
        r.create_dataset("g/old", shape=(40,), chunks=(2,), dtype="i4")[:] = 1
        g1, g2 = cs.open_group(path, mode="r+"), cs.open_group(path, mode="r+")
        res = {}

        def move():
            try:
                g1.move("g", "h")
                res["move"] = "ok"
            except Exception as e:  # noqa: BLE001 - recorded, asserted below
                res["move"] = repr(e)

        def delete():
            try:
                del g2["g/old"]
                res["delete"] = "ok"
            except KeyError:
                res["delete"] = "KeyError"

        ts = [threading.Thread(target=move), threading.Thread(target=delete)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        after = cs.open_group(path, mode="r")
        state = tuple(n for n in ("g/a", "g/old", "h/a", "h/old") if n in after)
        outcome = (res["move"], res["delete"], state)
        # delete first: h holds a alone; move first: the delete finds nothing at g/old
        assert outcome in {("ok", "ok", ("h/a",)), ("ok", "KeyError", ("h/a", "h/old"))}, \
            outcome
        seen.add(outcome)
        np.testing.assert_array_equal(after["h/a"][...], np.ones(20, "i4"))


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("name", [".zgroup", ".zarray", ".zattrs", ".zmetadata", "zarr.json",
                                  "sub/.zgroup"])
def test_a_member_named_as_a_metadata_document_is_refused(tmp_path, fmt, name):
    """g[".zgroup"] = data replaced the group's own document by an array (the group gone,
    its attributes with it); create_array raised a bare NotADirectoryError. Refused, naming
    the name, with the group kept (zarr-python refuses such names too)."""
    p = str(tmp_path / "d.zarr")
    g = cs.open_group(p, mode="w", zarr_format=fmt)
    g.attrs["title"] = "keep me"
    g.create_array("v", shape=(4,), dtype="i4")[:] = 7
    before = sorted(os.listdir(p))
    for make in (lambda: g.__setitem__(name, np.arange(3)),
                 lambda: g.create_array(name, shape=(3,), dtype="i4"),
                 lambda: g.create_group(name),
                 lambda: g.move("v", name)):
        with pytest.raises(ValueError, match="name of a metadata document"):
            make()
    assert sorted(os.listdir(p)) == before
    r = cs.open_group(p, mode="r")
    assert dict(r.attrs) == {"title": "keep me"} and list(r.keys()) == ["v"]
    np.testing.assert_array_equal(r["v"][:], 7)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("change", ["set", "update", "put"])
def test_an_attribute_json_cannot_hold_is_named_and_nothing_is_written(fmt, change):
    """json's own message names only the value's type ("object of type complex is not JSON
    serializable"): which attribute, of which node, was left to guess."""
    store: dict = {}
    g = cs.group(store=store, zarr_format=fmt)
    a = g.zeros("a/b", shape=3)
    a.attrs["ok"] = 1
    before = dict(store)
    with pytest.raises(TypeError, match=r"cannot store attribute 'bad' in 'a/b/(\.zattrs|zarr"
                                        r"\.json)' of .*object of type complex"):
        if change == "set":
            a.attrs["bad"] = 1j
        elif change == "update":
            a.attrs.update({"fine": 2, "bad": 1j})
        else:
            a.attrs.put({"fine": 2, "bad": 1j})
    assert store == before and a.attrs.asdict() == {"ok": 1}
