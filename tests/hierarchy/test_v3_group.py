"""Zarr v3 hierarchies through the public API: cs.group(store, zarr_format=3) and its members.

- Creation functions of a v3 group make v3 nodes (zarr.json only, no .zarray/.zgroup
  anywhere), intermediate groups included; attributes live inside zarr.json.
- tree(), info, move, delete; zarr-python 3 opens what chunkstore builds.
- chunkstore opens the v3 group fixture (consolidated by zarr-python 3).
- consolidate_metadata + open_consolidated on v3 (one metadata read), and zarr-python 3's
  open_consolidated reads chunkstore's consolidated metadata.
- copy / copy_all / copy_store into a v3 group: members inherit the destination group's format.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from model_support import DictMapping
from chunkstore.errors import ReadOnlyError
from conftest import FIXTURES

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

FIXTURES_V3 = FIXTURES / "v3"


def _group_cases():
    path = FIXTURES_V3 / "manifest.json"
    if not path.exists():
        return []
    with open(path) as f:
        return [c for c in json.load(f)["cases"] if c.get("kind") == "group"]


GROUP_CASES = _group_cases()
needs_fixtures = pytest.mark.skipif(not GROUP_CASES, reason=f"no fixtures at {FIXTURES_V3}")


def metadata_files(root):
    """Relative paths of every metadata document under root, by name."""
    root = Path(root)
    out = {}
    for name in ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"):
        out[name] = sorted(str(p.parent.relative_to(root)).replace("\\", "/")
                           for p in root.rglob(name))
    return out


def assert_pure_v3(root):
    """Only zarr.json documents under root (no Zarr v2 metadata mixed in)."""
    files = metadata_files(root)
    for name in (".zarray", ".zgroup", ".zattrs", ".zmetadata"):
        assert files[name] == [], (name, files[name])
    return files["zarr.json"]


def doc(root, path=""):
    p = Path(root) / path / "zarr.json"
    return json.loads(p.read_text())


@pytest.fixture
def hierarchy(tmp_path):
    """A v3 hierarchy built with every creation method of a Group; returns (path, data)."""
    p = tmp_path / "h.zarr"
    root = cs.group(str(p), zarr_format=3)
    root.attrs["title"] = "root"
    data = {}
    foo = root.create_group("foo")
    foo.attrs.update({"n": 3, "nested": {"a": [1, 2]}})
    bar = foo.zeros("bar", shape=(10,), chunks=5, dtype="i4")
    bar[:5] = 3
    data["foo/bar"] = np.r_[np.full(5, 3), np.zeros(5)].astype("i4")
    c = root.create_dataset("a/b/c", shape=(5, 5), dtype="i2", chunks=(2, 2))
    c[1:4, 1:4] = 7
    e = np.zeros((5, 5), "i2")
    e[1:4, 1:4] = 7
    data["a/b/c"] = e
    sh = root.create_array("sharded", shape=(12, 10), dtype="f4", chunks=(3, 5),
                           shards=(6, 10), attributes={"units": "m"},
                           dimension_names=["y", "x"])
    sh[...] = np.arange(120, dtype="f4").reshape(12, 10)
    data["sharded"] = np.arange(120, dtype="f4").reshape(12, 10)
    data["ones"] = root.ones("ones", shape=(3,), chunks=2)[...]
    data["full"] = root.full("full", shape=(4,), fill_value=np.nan, chunks=2)[...]
    root.empty("empty", shape=(2,), dtype="i4", chunks=2)
    data["arr"] = root.array("arr", np.arange(6, dtype="i8"), chunks=4)[...]
    data["zl"] = root.zeros_like("zl", root["arr"])[...]
    data["ds_data"] = root.create_dataset("ds_data", data=np.eye(3), chunks=2)[...]
    return p, data


# ------------------------------------------------------------------------------ creating
def test_group_v3_root_document(tmp_path):
    p = tmp_path / "g.zarr"
    g = cs.group(str(p), zarr_format=3)
    assert g.zarr_format == 3
    assert doc(p) == {"attributes": {}, "zarr_format": 3, "node_type": "group"}
    assert sorted(x.name for x in p.iterdir()) == ["zarr.json"]
    # opening again (any way) sees the v3 group and keeps it v3
    assert cs.group(str(p)).zarr_format == 3
    assert cs.open_group(str(p), mode="r").zarr_format == 3
    assert isinstance(cs.open(str(p), mode="r"), cs.Group)
    assert cs.open_group(str(tmp_path / "w.zarr"), mode="w", zarr_format=3).zarr_format == 3
    assert zarr.open_group(str(p), mode="r").metadata.zarr_format == 3


def test_members_inherit_v3(hierarchy):
    p, data = hierarchy
    docs = assert_pure_v3(p)
    assert sorted(docs) == sorted([".", "foo", "foo/bar", "a", "a/b", "a/b/c", "sharded", "ones",
                                   "full", "empty", "arr", "zl", "ds_data"])
    root = cs.open_group(str(p), mode="r")
    for path in docs:
        node = root if path == "." else root[path]
        assert node.zarr_format == 3, path
    for path in ("a", "a/b", "foo"):
        assert doc(p, path)["node_type"] == "group"
    assert root["sharded"].shards == (6, 10) and root["sharded"].chunks == (3, 5)
    for path, expected in data.items():
        np.testing.assert_array_equal(root[path][...], expected)
    assert np.isnan(root["full"].fill_value)


def test_attrs_persisted_inside_zarr_json(hierarchy):
    p, _ = hierarchy
    assert doc(p)["attributes"] == {"title": "root"}
    assert doc(p, "foo")["attributes"] == {"n": 3, "nested": {"a": [1, 2]}}
    assert doc(p, "sharded")["attributes"] == {"units": "m"}
    root = cs.open_group(str(p))
    root["foo/bar"].attrs["k"] = [1, "two"]
    del root["foo"].attrs["n"]
    assert doc(p, "foo/bar")["attributes"] == {"k": [1, "two"]}
    assert doc(p, "foo")["attributes"] == {"nested": {"a": [1, 2]}}
    # the rest of the document is untouched
    assert doc(p, "foo/bar")["node_type"] == "array" and doc(p, "foo/bar")["shape"] == [10]
    again = cs.open_group(str(p), mode="r")
    assert dict(again.attrs) == {"title": "root"}
    assert dict(again["foo/bar"].attrs) == {"k": [1, "two"]}
    with pytest.raises(ReadOnlyError):
        again.attrs["x"] = 1
    zg = zarr.open_group(str(p), mode="r")
    assert dict(zg.attrs) == {"title": "root"}
    assert dict(zg["foo/bar"].attrs) == {"k": [1, "two"]}
    assert dict(zg["sharded"].attrs) == {"units": "m"}


def test_tree_and_info(hierarchy):
    p, _ = hierarchy
    root = cs.open_group(str(p), mode="r")
    assert repr(root.tree()) == "\n".join([
        "/",
        "├── a",
        "│   └── b",
        "│       └── c (5, 5) int16",
        "├── arr (6,) int64",
        "├── ds_data (3, 3) float64",
        "├── empty (2,) int32",
        "├── foo",
        "│   └── bar (10,) int32",
        "├── full (4,) float64",
        "├── ones (3,) float64",
        "├── sharded (12, 10) float32",
        "└── zl (6,) int64",
    ])
    assert repr(root["a"].tree()) == "/a\n└── b\n    └── c (5, 5) int16"
    info = repr(root.info)
    assert re.search(r"^Zarr format\s*: 3$", info, re.M), info
    assert re.search(r"^No. members\s*: 9$", info, re.M), info
    assert re.search(r"^No. arrays\s*: 7$", info, re.M), info
    assert re.search(r"^No. groups\s*: 2$", info, re.M), info
    ainfo = repr(root["sharded"].info)
    assert re.search(r"^Zarr format\s*: 3$", ainfo, re.M)
    assert re.search(r"^Shard shape\s*: \(6, 10\)$", ainfo, re.M)
    assert root.array_keys() == ["arr", "ds_data", "empty", "full", "ones", "sharded", "zl"]
    assert root.group_keys() == ["a", "foo"]
    visited = []
    root.visit(visited.append)
    assert visited == ["a", "a/b", "a/b/c", "arr", "ds_data", "empty", "foo", "foo/bar",
                       "full", "ones", "sharded", "zl"]


def test_zarr_python_opens_chunkstore_hierarchy(hierarchy):
    p, data = hierarchy
    zg = zarr.open_group(str(p), mode="r")
    assert sorted(zg.group_keys()) == ["a", "foo"]
    assert sorted(zg.array_keys()) == ["arr", "ds_data", "empty", "full", "ones", "sharded",
                                       "zl"]
    for path, expected in data.items():
        np.testing.assert_array_equal(zg[path][...], expected)
    assert zg["sharded"].shards == (6, 10) and zg["sharded"].chunks == (3, 5)
    assert zg["sharded"].metadata.dimension_names == ("y", "x")
    assert isinstance(zg["a/b"], zarr.Group)


# ------------------------------------------------------------------------------ move / delete
def test_move_within_v3_group(hierarchy):
    p, data = hierarchy
    root = cs.open_group(str(p))
    root.move("foo/bar", "foo/bar2")  # parent exists
    np.testing.assert_array_equal(root["foo/bar2"][...], data["foo/bar"])
    assert "foo/bar" not in root
    root.move("sharded", "deep/er/sharded")  # new intermediate groups
    assert "sharded" not in root
    np.testing.assert_array_equal(root["deep/er/sharded"][...], data["sharded"])
    assert root["deep/er/sharded"].shards == (6, 10)
    assert dict(root["deep/er/sharded"].attrs) == {"units": "m"}
    # the hierarchy stays pure v3: the groups created on the way are v3 groups
    assert root["deep"].zarr_format == 3 and root["deep/er"].zarr_format == 3
    assert_pure_v3(p)
    zg = zarr.open_group(str(p), mode="r")
    np.testing.assert_array_equal(zg["deep/er/sharded"][...], data["sharded"])
    with pytest.raises(ValueError):
        root.move("a", "a/inside")
    with pytest.raises(ValueError):
        root.move("nothing", "x")


def test_delete_members(hierarchy):
    p, _ = hierarchy
    root = cs.open_group(str(p))
    del root["sharded"]
    del root["a"]
    assert "sharded" not in root and "a" not in root
    assert not (p / "sharded").exists() and not (p / "a").exists()
    assert sorted(zarr.open_group(str(p), mode="r").keys()) == ["arr", "ds_data", "empty",
                                                                 "foo", "full", "ones", "zl"]
    with pytest.raises(KeyError):
        del root["sharded"]


def test_overwrite_and_existing_nodes(tmp_path):
    p = tmp_path / "o.zarr"
    root = cs.group(str(p), zarr_format=3)
    root.zeros("x", shape=(3,))
    with pytest.raises(cs.ContainsArrayError):
        root.zeros("x", shape=(3,))
    with pytest.raises(cs.ContainsArrayError):
        root.create_group("x")
    y = root.zeros("x", shape=(4,), overwrite=True)
    assert y.shape == (4,) and y.zarr_format == 3
    root.create_group("g")
    with pytest.raises(cs.ContainsGroupError):
        root.create_group("g")
    assert root.require_group("g").zarr_format == 3
    assert root.require_dataset("x", shape=(4,), dtype="f8").shape == (4,)


# ------------------------------------------------------------------------------ fixtures
@needs_fixtures
@pytest.mark.parametrize("case", GROUP_CASES, ids=[c["name"] for c in GROUP_CASES])
def test_chunkstore_opens_v3_group_fixture(case):
    p = FIXTURES_V3 / case["path"]
    expected = np.load(FIXTURES_V3 / case["expected"])
    zg = zarr.open_group(str(p), mode="r")  # the oracle for attributes
    opened = [cs.open_group(str(p), mode="r"), cs.open(str(p), mode="r")]
    if case.get("consolidated"):
        opened.append(cs.open_consolidated(str(p), mode="r"))
    for root in opened:
        assert root.zarr_format == 3
        arrays, groups = [], []
        root.visititems(lambda path, node: (arrays if isinstance(node, cs.Array)
                                            else groups).append(path))
        assert sorted(arrays) == sorted(case["arrays"])
        assert sorted(["", *groups]) == sorted(case["groups"])
        assert dict(root.attrs) == dict(zg.attrs)
        for path in case["arrays"]:
            np.testing.assert_array_equal(root[path][...], expected[path.replace("/", "__")])
            assert dict(root[path].attrs) == dict(zg[path].attrs)
            assert root[path].zarr_format == 3
        for path in case["groups"][1:]:
            assert dict(root[path].attrs) == dict(zg[path].attrs)


# ------------------------------------------------------------------------------ consolidated
class CountingStore(DictMapping):
    def __init__(self, d):
        self.d = d
        self.gets = []

    def __getitem__(self, k):
        self.gets.append(k)
        return self.d[k]


def test_consolidate_and_open_consolidated_v3(hierarchy):
    p, data = hierarchy
    cs.consolidate_metadata(str(p))
    assert_pure_v3(p)  # consolidated inside the root zarr.json, no .zmetadata
    cm = doc(p)["consolidated_metadata"]
    assert cm["kind"] == "inline"
    assert set(cm["metadata"]) == {"foo", "foo/bar", "a", "a/b", "a/b/c", "sharded", "ones",
                                   "full", "empty", "arr", "zl", "ds_data"}
    assert cm["metadata"]["sharded"]["attributes"] == {"units": "m"}
    assert doc(p)["attributes"] == {"title": "root"}
    g = cs.open_consolidated(str(p), mode="r")
    assert g.zarr_format == 3
    for path, expected in data.items():
        np.testing.assert_array_equal(g[path][...], expected)
    assert dict(g["foo"].attrs) == {"n": 3, "nested": {"a": [1, 2]}}
    # zarr-python 3 reads chunkstore's consolidated metadata
    zc = zarr.open_consolidated(str(p), mode="r")
    assert zc.metadata.consolidated_metadata is not None
    assert sorted(zc.keys()) == sorted(cs.open_group(str(p), mode="r").keys())
    for path, expected in data.items():
        np.testing.assert_array_equal(zc[path][...], expected)


def test_open_consolidated_reads_metadata_once(hierarchy):
    p, data = hierarchy
    cs.consolidate_metadata(str(p))
    files = {str(f.relative_to(p)).replace("\\", "/"): f.read_bytes()
             for f in p.rglob("*") if f.is_file()}
    store = CountingStore(files)
    g = cs.open_consolidated(store, mode="r")
    np.testing.assert_array_equal(g["a/b/c"][...], data["a/b/c"])
    np.testing.assert_array_equal(g["sharded"][...], data["sharded"])
    g.tree()
    # no member's zarr.json is read: only the root document (it holds everything)
    meta_reads = [k for k in store.gets if k.endswith("zarr.json")]
    assert meta_reads and set(meta_reads) == {"zarr.json"}, meta_reads


def test_open_consolidated_reads_root_document_once(hierarchy):
    """"opening a hierarchy costs one metadata read" (storage/consolidated_v3.py): the root
    zarr.json holds everything, so it is read once, not once to find the format and again
    for the consolidated metadata (a round trip more on remote stores)."""
    p, _ = hierarchy
    cs.consolidate_metadata(str(p))
    files = {str(f.relative_to(p)).replace("\\", "/"): f.read_bytes()
             for f in p.rglob("*") if f.is_file()}
    store = CountingStore(files)
    cs.open_consolidated(store, mode="r")
    assert [k for k in store.gets if k.endswith("zarr.json")] == ["zarr.json"]


def test_open_consolidated_writes(hierarchy):
    p, data = hierarchy
    cs.consolidate_metadata(str(p))
    g = cs.open_consolidated(str(p), mode="r+")
    g["a/b/c"][0, 0] = 42  # chunk writes pass through
    assert cs.open_group(str(p), mode="r")["a/b/c"][0, 0] == 42
    with pytest.raises(ReadOnlyError):
        g["a/b/c"].attrs["x"] = 1  # metadata is served from the consolidated document
    r = cs.open_consolidated(str(p), mode="r")
    with pytest.raises(ReadOnlyError):
        r["a/b/c"][0, 0] = 1


def test_open_consolidated_without_consolidated_metadata(tmp_path):
    p = tmp_path / "n.zarr"
    cs.group(str(p), zarr_format=3).zeros("x", shape=(2,))
    with pytest.raises(cs.ConsolidatedMetadataNotFoundError):
        cs.open_consolidated(str(p), mode="r")


def test_consolidate_subgroup_and_zarr_consolidated_read(hierarchy, tmp_path):
    p, data = hierarchy
    cs.consolidate_metadata(str(p), path="a")
    assert set(doc(p, "a")["consolidated_metadata"]["metadata"]) == {"b", "b/c"}
    assert "consolidated_metadata" not in doc(p)
    g = cs.open_consolidated(str(p), path="a", mode="r")
    np.testing.assert_array_equal(g["b/c"][...], data["a/b/c"])
    # a hierarchy zarr-python 3 consolidated, read by chunkstore's open_consolidated
    q = tmp_path / "z.zarr"
    zg = zarr.open_group(str(q), mode="w", zarr_format=3)
    zg.attrs["k"] = "v"
    za = zg.create_array("s/x", shape=(9,), dtype="i4", chunks=(2,), shards=(4,))
    za[...] = np.arange(9)
    zarr.consolidate_metadata(str(q))
    cg = cs.open_consolidated(str(q), mode="r")
    assert dict(cg.attrs) == {"k": "v"}
    np.testing.assert_array_equal(cg["s/x"][...], np.arange(9))
    assert cg["s/x"].shards == (4,)


# ------------------------------------------------------------------------------ copying
@pytest.fixture
def v2_source(tmp_path):
    p = tmp_path / "v2.zarr"
    g = cs.group(str(p))
    g.attrs["x"] = 1
    a = g.array("arr2", np.arange(20, dtype="i4").reshape(4, 5), chunks=(2, 2))
    a.attrs["u"] = "v"
    g.create_group("sub").array("s", np.linspace(0, 1, 7), chunks=3, fill_value=np.nan)
    return g


def _walk_formats(g):
    out = {}
    g.visititems(lambda path, node: out.__setitem__(path, node.zarr_format))
    return out


def test_copy_v2_group_into_v3_group(v2_source, tmp_path):
    p = tmp_path / "v3.zarr"
    dst = cs.group(str(p), zarr_format=3)
    n_copied, n_skipped, _ = cs.copy(v2_source, dst, name="from_v2")
    assert (n_copied, n_skipped) == (4, 0)  # from_v2, arr2, sub, sub/s
    copied = dst["from_v2"]
    np.testing.assert_array_equal(copied["arr2"][...], np.arange(20).reshape(4, 5))
    np.testing.assert_array_equal(copied["sub/s"][...], np.linspace(0, 1, 7))
    assert dict(copied.attrs) == {"x": 1}
    assert dict(copied["arr2"].attrs) == {"u": "v"}
    # members inherit the destination group's format
    assert _walk_formats(dst) == {"from_v2": 3, "from_v2/arr2": 3, "from_v2/sub": 3,
                                  "from_v2/sub/s": 3}
    assert_pure_v3(p)
    zg = zarr.open_group(str(p), mode="r")
    np.testing.assert_array_equal(zg["from_v2/arr2"][...], np.arange(20).reshape(4, 5))


def test_copy_v2_array_into_v3_group_with_create_kws(v2_source, tmp_path):
    p = tmp_path / "v3.zarr"
    dst = cs.group(str(p), zarr_format=3)
    cs.copy(v2_source["arr2"], dst, name="rechunked", chunks=(4, 4),
            compressor=numcodecs.Zstd(3))
    r = dst["rechunked"]
    assert r.chunks == (4, 4)
    np.testing.assert_array_equal(r[...], np.arange(20).reshape(4, 5))
    assert r.zarr_format == 3
    assert_pure_v3(p)


def test_copy_all_v2_into_v3(v2_source, tmp_path):
    p = tmp_path / "v3.zarr"
    dst = cs.group(str(p), zarr_format=3)
    cs.copy_all(v2_source, dst)
    assert dict(dst.attrs) == {"x": 1}
    assert _walk_formats(dst) == {"arr2": 3, "sub": 3, "sub/s": 3}
    assert_pure_v3(p)


def test_copy_v3_to_v3(hierarchy, tmp_path):
    p, data = hierarchy
    src = cs.open_group(str(p), mode="r")
    q = tmp_path / "dst.zarr"
    dst = cs.group(str(q), zarr_format=3)
    cs.copy(src["sharded"], dst, name="raw")
    assert dst["raw"].shards == (6, 10)
    np.testing.assert_array_equal(dst["raw"][...], data["sharded"])
    assert dict(dst["raw"].attrs) == {"units": "m"}
    cs.copy(src["a"], dst)
    np.testing.assert_array_equal(dst["a/b/c"][...], data["a/b/c"])
    assert_pure_v3(q)
    np.testing.assert_array_equal(zarr.open_group(str(q), mode="r")["raw"][...],
                                  data["sharded"])


def test_copy_v3_array_recoded_stays_v3(hierarchy, tmp_path):
    p, data = hierarchy
    src = cs.open_group(str(p), mode="r")
    dst = cs.group(str(tmp_path / "dst.zarr"), zarr_format=3)
    cs.copy(src["a/b/c"], dst, name="recoded", compressor=numcodecs.GZip(1))
    np.testing.assert_array_equal(dst["recoded"][...], data["a/b/c"])
    assert dst["recoded"].zarr_format == 3
    assert_pure_v3(tmp_path / "dst.zarr")


def test_copy_v3_without_attrs(hierarchy, tmp_path):
    p, data = hierarchy
    src = cs.open_group(str(p), mode="r")
    dst = cs.group(str(tmp_path / "dst.zarr"), zarr_format=3)
    cs.copy(src["sharded"], dst, name="bare", without_attrs=True)
    np.testing.assert_array_equal(dst["bare"][...], data["sharded"])
    assert dict(dst["bare"].attrs) == {}


def test_copy_store_v3(hierarchy):
    p, data = hierarchy
    dest = {}
    n, skipped, nbytes = cs.copy_store(str(p), dest)
    assert skipped == 0 and n == sum(1 for f in p.rglob("*") if f.is_file())
    assert nbytes == sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    g = cs.open_group(dest, mode="r")
    assert g.zarr_format == 3
    for path, expected in data.items():
        np.testing.assert_array_equal(g[path][...], expected)
    # a sub-hierarchy under a new path, excluding a member
    sub = {}
    cs.copy_store(str(p), sub, source_path="a", dest_path="moved/a")
    cs.group(sub, path="moved", zarr_format=3)
    np.testing.assert_array_equal(cs.open_group(sub, mode="r")["moved/a/b/c"][...],
                                  data["a/b/c"])
    with pytest.raises(cs.CopyError):
        cs.copy_store(str(p), dest)  # if_exists="raise"
